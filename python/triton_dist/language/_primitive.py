"""The decorator that makes a function a triton_dist primitive."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from triton.language.core import builtin

from triton_dist.compiler.cache_key import DEVICE_LIBRARY_KEY

F = TypeVar("F", bound=Callable)


def primitive(fn: F) -> F:
    """A Triton builtin (called from ``@triton.jit`` code with ``_semantic``) whose users' cache keys cover the
    device library: ``__triton_aggregate__`` + ``hash_attrs`` make Triton's ``DependenciesFinder`` fold
    ``DEVICE_LIBRARY_KEY.cache_key`` into every kernel that refers to it (see ``compiler/cache_key.py``)."""
    wrapped = builtin(fn)
    wrapped.__triton_aggregate__ = True
    wrapped.hash_attrs = (DEVICE_LIBRARY_KEY,)
    return wrapped
