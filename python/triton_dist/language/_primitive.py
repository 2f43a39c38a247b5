"""The decorator that makes a function a triton_dist primitive."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from triton import knobs
from triton.language.core import TRITON_BUILTIN

from triton_dist.compiler.cache_key import DEVICE_LIBRARY_KEY

F = TypeVar("F", bound=Callable)


class InterpreterNotSupportedError(NotImplementedError):
    """A kernel that calls a triton_dist primitive ran under ``TRITON_INTERPRET=1``."""


def primitive(fn: F) -> F:
    """A Triton builtin (called from ``@triton.jit`` code with ``_semantic``) whose users' cache keys cover the
    device library: ``__triton_aggregate__`` + ``hash_attrs`` make Triton's ``DependenciesFinder`` fold
    ``DEVICE_LIBRARY_KEY.cache_key`` into every kernel that refers to it (see ``compiler/cache_key.py``).

    Called without ``_semantic``, it says why: outside a kernel, or inside one run by Triton's interpreter, which
    cannot execute distributed kernels yet."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_semantic") is None:
            name = f"dl.{fn.__name__}"
            if knobs.runtime.interpret:
                raise InterpreterNotSupportedError(
                    f"{name}: distributed kernels are not supported by Triton's interpreter (TRITON_INTERPRET=1) "
                    "yet; run them on GPUs without TRITON_INTERPRET"
                )
            raise ValueError(f"{name} can only be called inside a @triton.jit kernel")
        return fn(*args, **kwargs)

    setattr(wrapper, TRITON_BUILTIN, True)
    wrapper.__triton_aggregate__ = True
    wrapper.hash_attrs = (DEVICE_LIBRARY_KEY,)
    return wrapper  # type: ignore[return-value]
