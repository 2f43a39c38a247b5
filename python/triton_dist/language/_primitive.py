"""The decorator that makes a function a triton_dist primitive."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from triton import knobs
from triton.language.core import TRITON_BUILTIN

from triton_dist.compiler.cache_key import DEVICE_LIBRARY_KEY
from triton_dist.compiler.helper_errors import PRIMITIVE_ERROR

F = TypeVar("F", bound=Callable)


PRIMITIVE_ATTRIBUTE = "__triton_dist_primitive__"
"""Set on every primitive (to its name, ``"dl.notify"``): how the interpreter backend recognizes a kernel that calls
primitives before it runs it."""


class InterpreterNotSupportedError(NotImplementedError):
    """A kernel that calls a triton_dist primitive ran under ``TRITON_INTERPRET=1`` while no interpreter backend is
    registered (``triton_dist.runtime`` registers the CPU emulation when it is imported)."""


class InterpreterBackend(Protocol):
    """What runs a primitive called from a kernel in Triton's interpreter (no ``_semantic``): the runtime's CPU
    emulation (``triton_dist.runtime.emulation``) registers one. It gets the primitive's name (``"dl.wait"``), the
    primitive's implementation (which takes ``_semantic``) and the call's arguments, already checked against the
    public signature, and returns what the primitive returns."""

    def __call__(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any: ...


_interpreter_backend: InterpreterBackend | None = None


def register_interpreter_backend(backend: InterpreterBackend | None) -> InterpreterBackend | None:
    """Make ``backend`` run the primitives that kernels call under ``TRITON_INTERPRET=1`` (None: none); returns the
    backend it replaces. The language layer never imports the runtime: the runtime registers itself here."""
    global _interpreter_backend
    previous, _interpreter_backend = _interpreter_backend, backend
    return previous


def interpreter_backend() -> InterpreterBackend | None:
    """The registered interpreter backend, if any."""
    return _interpreter_backend


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

    Called without ``_semantic`` inside a kernel run by Triton's interpreter (``TRITON_INTERPRET=1``), it hands the
    call to the registered :class:`InterpreterBackend` (the runtime's CPU emulation), or says that none is
    registered; called without ``_semantic`` outside a kernel, it says so. Arguments that do not fit the signature
    are a ``TypeError`` naming the primitive and its signature; the exception a primitive raises is tagged
    (``PRIMITIVE_ERROR``) so that its message reaches ``str()`` of the ``CompilationError`` of a kernel that called
    it through helpers."""

    name = f"dl.{fn.__name__}"
    signature = public_signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        backend = None
        if kwargs.get("_semantic") is None:
            if not knobs.runtime.interpret:
                raise ValueError(f"{name} can only be called inside a @triton.jit kernel")
            backend = _interpreter_backend
            if backend is None:
                raise InterpreterNotSupportedError(
                    f"{name}: distributed kernels are not supported by Triton's interpreter (TRITON_INTERPRET=1) "
                    "without the CPU emulation of triton_dist.runtime: call triton_dist.init(device='cpu') (which "
                    "imports it) before launching, or run on GPUs without TRITON_INTERPRET"
                )
        try:
            # Checked against the public signature: an extra positional argument would otherwise bind to
            # `_semantic` and fail with Python's "got multiple values for argument '_semantic'".
            signature.bind(*args, **{key: value for key, value in kwargs.items() if not key.startswith("_")})
        except TypeError as error:
            raise TypeError(f"{name}: {error}; call it as {name}{signature}") from None
        try:
            if backend is not None:
                return backend(name, fn, args, kwargs)
            return fn(*args, **kwargs)
        except Exception as error:
            setattr(error, PRIMITIVE_ERROR, name)
            raise

    setattr(wrapper, TRITON_BUILTIN, True)
    setattr(wrapper, PRIMITIVE_ATTRIBUTE, name)
    wrapper.__triton_aggregate__ = True  # type: ignore[attr-defined]  # read by Triton's DependenciesFinder
    wrapper.hash_attrs = (DEVICE_LIBRARY_KEY,)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
