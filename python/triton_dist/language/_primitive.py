"""The decorator that makes a function a triton_dist primitive."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from triton import knobs
from triton.language.core import TRITON_BUILTIN

from triton_dist.compiler.cache_key import DEVICE_LIBRARY_KEY
from triton_dist.compiler.helper_errors import PRIMITIVE_ERROR

F = TypeVar("F", bound=Callable)


class InterpreterNotSupportedError(NotImplementedError):
    """A kernel that calls a triton_dist primitive ran under ``TRITON_INTERPRET=1``."""


def public_signature(fn: Callable) -> inspect.Signature:
    """``fn``'s signature as a kernel writes the call: without the ``_semantic`` / ``_generator`` the code generator
    passes, and without annotations (``(ptr, rank, signal=1, ...)``)."""
    parameters = [
        parameter.replace(annotation=inspect.Parameter.empty)
        for parameter in inspect.signature(fn).parameters.values()
        if not parameter.name.startswith("_")
    ]
    return inspect.Signature(parameters)


def primitive(fn: F) -> F:
    """A Triton builtin (called from ``@triton.jit`` code with ``_semantic``) whose users' cache keys cover the
    device library: ``__triton_aggregate__`` + ``hash_attrs`` make Triton's ``DependenciesFinder`` fold
    ``DEVICE_LIBRARY_KEY.cache_key`` into every kernel that refers to it (see ``compiler/cache_key.py``).

    Called without ``_semantic``, it says why: outside a kernel, or inside one run by Triton's interpreter, which
    cannot execute distributed kernels yet. Arguments that do not fit the signature are a ``TypeError`` naming the
    primitive and its signature; the exception a primitive raises is tagged (``PRIMITIVE_ERROR``) so that its message
    reaches ``str()`` of the ``CompilationError`` of a kernel that called it through helpers."""

    name = f"dl.{fn.__name__}"
    signature = public_signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_semantic") is None:
            if knobs.runtime.interpret:
                raise InterpreterNotSupportedError(
                    f"{name}: distributed kernels are not supported by Triton's interpreter (TRITON_INTERPRET=1) "
                    "yet; run them on GPUs without TRITON_INTERPRET"
                )
            raise ValueError(f"{name} can only be called inside a @triton.jit kernel")
        try:
            # Checked against the public signature: an extra positional argument would otherwise bind to
            # `_semantic` and fail with Python's "got multiple values for argument '_semantic'".
            signature.bind(*args, **{key: value for key, value in kwargs.items() if not key.startswith("_")})
        except TypeError as error:
            raise TypeError(f"{name}: {error}; call it as {name}{signature}") from None
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            setattr(error, PRIMITIVE_ERROR, name)
            raise

    setattr(wrapper, TRITON_BUILTIN, True)
    wrapper.__triton_aggregate__ = True  # type: ignore[attr-defined]  # read by Triton's DependenciesFinder
    wrapper.hash_attrs = (DEVICE_LIBRARY_KEY,)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
