"""The interpreter backend the runtime registers with ``triton_dist.language``: runs a primitive that a kernel calls
under ``TRITON_INTERPRET=1``.

The primitive's own implementation runs, with :class:`builder.EmulationSemantic` as its ``_semantic``: it checks its
arguments exactly as when compiling (the same ``TypeError`` / ``ValueError`` naming the primitive and argument), and
the device-library calls it emits run in ``device_library``. Before it runs, the backend checks what only the
emulation can see, the pointer values: a pointer of ``dl.symm_at``, ``dl.notify`` or ``dl.wait`` outside this rank's
heap is an ``EmulationError`` naming the primitive, the rank and the offset (``heap_check``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np
import triton.language as tl
from triton.language.core import _unwrap_if_constexpr
from triton.runtime.interpreter import TensorHandle, interpreter_builder

from triton_dist.runtime.emulation import device_library, heap_check
from triton_dist.runtime.emulation.builder import EmulationSemantic
from triton_dist.runtime.emulation.state import EmulationError, Program, current_program

SEMANTIC = EmulationSemantic(interpreter_builder)
"""The ``_semantic`` of every emulated primitive (over Triton's interpreter builder)."""


@functools.cache
def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(fn)


def _pointer_data(value: Any) -> np.ndarray | None:
    value = _unwrap_if_constexpr(value)
    if isinstance(value, tl.tensor) and value.dtype.is_ptr() and isinstance(value.handle, TensorHandle):
        return np.atleast_1d(np.asarray(value.handle.data)).astype(np.uint64, copy=False)
    return None


def _mask_data(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    value = _unwrap_if_constexpr(value)
    if isinstance(value, tl.tensor) and isinstance(value.handle, TensorHandle):
        data = np.asarray(value.handle.data, dtype=bool)
        return np.broadcast_to(data, shape) if data.size > 1 or shape == () else np.full(shape, bool(data.ravel()[0]))
    if isinstance(value, bool):
        return np.full(shape, value)
    return np.ones(shape, dtype=bool)


def _check_pointers(program: Program, name: str, arguments: Mapping[str, Any]) -> None:
    """Refuse a scalar pointer (or a kept lane of a notify's tensor) outside this rank's heap."""
    field = {"dl.symm_at": "ptr", "dl.notify": "ptr", "dl.wait": "barrierPtrs"}.get(name)
    addresses = _pointer_data(arguments.get(field)) if field else None
    if addresses is None:
        return
    bad = heap_check.outside(program, addresses)
    if name == "dl.notify":
        rank = _unwrap_if_constexpr(arguments.get("rank"))
        if isinstance(rank, tl.tensor) and rank.type.is_block() and isinstance(rank.handle, TensorHandle):
            ranks = np.atleast_1d(np.asarray(rank.handle.data)).astype(np.int64)
            kept = _mask_data(arguments.get("mask"), ranks.shape).ravel()
            device_library.check_ranks(program, ranks.ravel()[kept], "a rank of the tensor of ranks:")
        if addresses.size > 1:
            bad &= _mask_data(arguments.get("mask"), addresses.shape).ravel()
    elif name == "dl.symm_at" and addresses.size > 1:
        return  # lanes outside are poisoned in the result (heap_check), refused only when accessed
    if bad.any():
        raise EmulationError(heap_check.describe_outside(program, name, field or "ptr", int(addresses[bad][0])))


def _poison_symm_at(program: Program, arguments: Mapping[str, Any], result: Any) -> Any:
    """``dl.symm_at``'s result with the lanes whose ``ptr`` was outside the heap poisoned (``heap_check``)."""
    addresses = _pointer_data(arguments.get("ptr"))
    if addresses is None or addresses.size <= 1 or not isinstance(result, tl.tensor):
        return result
    bad = heap_check.outside(program, addresses)
    if not bad.any():
        return result
    data = np.asarray(result.handle.data).astype(np.uint64, copy=True).reshape(-1)
    targets = np.asarray(_target_ranks(arguments.get("rank"), addresses.shape), dtype=np.int64).reshape(-1)
    offsets = program.launch.heap_offsets(addresses)
    data[bad] = heap_check.poison(program, offsets[bad], targets[bad])
    result.handle = TensorHandle(data.reshape(np.shape(result.handle.data)), result.handle.dtype)
    return result


def _target_ranks(rank: Any, shape: tuple[int, ...]) -> np.ndarray:
    rank = _unwrap_if_constexpr(rank)
    if isinstance(rank, tl.tensor):
        return np.broadcast_to(np.asarray(rank.handle.data), shape)
    return np.full(shape, int(rank) if isinstance(rank, int) else 0)


def run_primitive(name: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """Run primitive ``name`` (its implementation ``fn``) for the program of this thread (``InterpreterBackend``)."""
    program = current_program()
    if program is None:
        raise EmulationError(
            f"{name} was called in Triton's interpreter outside an emulated launch: the kernel was not recognized as "
            "one that calls triton_dist primitives (refer to them as dl.<primitive>, with `import "
            "triton_dist.language as dl`), or it was launched before triton_dist.init(device='cpu')"
        )
    signature = _signature(fn)
    arguments = signature.bind(*args, **kwargs).arguments
    outer, program.primitive = program.primitive, name
    try:
        _check_pointers(program, name, arguments)
        extra: dict[str, Any] = {"_semantic": SEMANTIC}
        if "_generator" in signature.parameters:
            extra["_generator"] = SimpleNamespace(jit_fn=SimpleNamespace(__name__=program.launch.kernel))
        result = fn(*args, **kwargs, **extra)
        if name == "dl.symm_at":
            result = _poison_symm_at(program, arguments, result)
        return result
    finally:
        program.primitive = outer
