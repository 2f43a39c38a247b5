"""The interpreter's builder while a distributed kernel runs: per-thread grid index, the device library, checked
memory accesses.

Triton's interpreter builds every operation through one module-level ``InterpreterBuilder``
(``triton.runtime.interpreter.interpreter_builder``); the language functions it patches during a launch are bound
to it. For the length of an emulated launch, ``executor.py`` makes that object an :class:`EmulationBuilder` (its
class is swapped, and swapped back afterwards), which adds, through the builder's own methods:

- ``grid_idx`` per thread, so ``tl.program_id`` answers for the program running on the calling thread;
- ``create_extern_elementwise`` of the ``triton_dist`` library: ``device_library.call``;
- ``create_assert`` of a primitive's guard (a message starting with ``triton_dist:``): an ``EmulationError``
  naming the rank and program, where the GPU would stop the kernel;
- loads, stores and atomics that refuse an address :mod:`.heap_check` marked as outside the heap;
- ``tl.dot`` on bfloat16 that multiplies the values (``interpreter_fixes``);
- in the stale-read mode (``visibility``), stores recorded, loads of stores that do not happen before them
  answered with the value from before the launch, release / acquire atomics (the tensor ``dl.notify``'s, or a
  kernel's own) recorded as such.

:class:`EmulationSemantic` is the ``_semantic`` the primitives get: Triton's ``TritonSemantic`` over that builder,
with ``multiple_of`` / ``max_contiguous`` keeping the hint on the interpreter's handle (Triton's versions build an
MLIR attribute, which needs an MLIR context the interpreter does not have).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from triton._C.libtriton import interpreter as _native
from triton.language.semantic import TritonSemantic
from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

from triton_dist.abi import LIB_NAME
from triton_dist.runtime.emulation import device_library, heap_check, interpreter_fixes, visibility
from triton_dist.runtime.emulation.state import EmulationError, current_program

_grid = threading.local()


def _lanes(ptrs: TensorHandle, mask: TensorHandle) -> tuple[np.ndarray, np.ndarray]:
    """A memory operation's addresses (uint64) and the lanes its mask keeps, flattened."""
    addresses = np.atleast_1d(np.asarray(ptrs.data)).astype(np.uint64, copy=False).reshape(-1)
    kept = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(ptrs.data)).reshape(-1)
    return addresses, kept


class EmulationBuilder(InterpreterBuilder):
    """``InterpreterBuilder`` with the emulation's additions (see the module's docstring)."""

    @property  # type: ignore[override]
    def grid_idx(self) -> Any:
        """The grid index of the program running on this thread."""
        return getattr(_grid, "index", None)

    @grid_idx.setter
    def grid_idx(self, index: Any) -> None:
        _grid.index = index

    def create_extern_elementwise(
        self,
        libName: str,  # noqa: N803
        libPath: str,  # noqa: N803
        symbol: str,
        argList: list,  # noqa: N803
        retType: Any,  # noqa: N803
        isPure: bool,  # noqa: N803
    ) -> Any:
        if libName == LIB_NAME:
            return device_library.call(symbol, argList, retType)
        return super().create_extern_elementwise(libName, libPath, symbol, argList, retType, isPure)

    def create_assert(self, condition: Any, message: str) -> None:
        if isinstance(message, str) and message.startswith("triton_dist:") and not condition:
            program = current_program()
            where = f" ({program.where()})" if program is not None else ""
            raise EmulationError(f"{message}{where}")
        super().create_assert(condition, message)

    def create_masked_load(
        self,
        ptrs: TensorHandle,
        mask: TensorHandle,
        other: Any,
        cache_modifier: Any,
        eviction_policy: Any,
        is_volatile: Any,
    ) -> TensorHandle:
        heap_check.check_access(ptrs.data, mask.data, "load")
        loaded = super().create_masked_load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)
        program = current_program()
        if program is not None and program.launch.visibility is not None:
            addresses, kept = _lanes(ptrs, mask)
            stale, values = program.launch.visibility.stale(program, addresses, kept)
            if stale.any():
                data = np.array(loaded.data, copy=True)
                data[stale.reshape(data.shape)] = visibility.from_bits(values[stale], data.dtype)
                loaded = TensorHandle(data, loaded.dtype)
        return loaded

    def create_masked_store(
        self, ptrs: TensorHandle, value: TensorHandle, mask: TensorHandle, cache_modifier: Any, eviction_policy: Any
    ) -> Any:
        heap_check.check_access(ptrs.data, mask.data, "store")
        program = current_program()
        if program is not None and program.launch.visibility is not None:
            addresses, kept = _lanes(ptrs, mask)
            dtype = np.asarray(value.data).dtype
            old = _native.load(ptrs.data, mask.data, np.zeros(np.shape(ptrs.data), dtype=dtype), dtype)
            program.launch.visibility.store(program, addresses, kept, visibility.as_bits(old).reshape(-1))
        return super().create_masked_store(ptrs, value, mask, cache_modifier, eviction_policy)

    def create_atomic_rmw(
        self,
        rmwOp: Any,  # noqa: N803
        ptr: TensorHandle,
        val: TensorHandle,
        mask: TensorHandle,
        sem: Any,
        scope: Any,
    ) -> TensorHandle:
        heap_check.check_access(ptr.data, mask.data, "atomic")
        program = current_program()
        state = program.launch.visibility if program is not None else None
        ordering = getattr(sem, "name", str(sem)).upper()
        if state is not None and "RELEASE" in ordering:  # a tensor dl.notify, or a user's release atomic
            addresses, kept = _lanes(ptr, mask)
            state.release(program, addresses[kept])
        result = super().create_atomic_rmw(rmwOp, ptr, val, mask, sem, scope)
        if state is not None and "ACQUIRE" in ordering:
            addresses, kept = _lanes(ptr, mask)
            state.acquire(program, addresses[kept])
        return result

    def create_dot(
        self, a: TensorHandle, b: TensorHandle, d: TensorHandle, input_precision: Any, max_num_imprecise_acc: Any
    ) -> Any:
        a, b = interpreter_fixes.dot_operands(a, b)
        return super().create_dot(a, b, d, input_precision, max_num_imprecise_acc)

    def create_atomic_cas(self, ptr: TensorHandle, cmp: TensorHandle, val: TensorHandle, sem: Any, scope: Any) -> Any:
        heap_check.check_access(ptr.data, None, "atomic")
        return super().create_atomic_cas(ptr, cmp, val, sem, scope)


class EmulationSemantic(TritonSemantic):
    """The ``_semantic`` the emulation passes the primitives (see the module's docstring)."""

    def multiple_of(self, x: Any, values: list[int]) -> Any:
        if max(1, len(x.shape)) != len(values):
            raise ValueError("Shape of input to multiple_of does not match the length of values")
        x.handle.set_attr("tt.divisibility", values)
        return x

    def max_contiguous(self, x: Any, values: list[int]) -> Any:
        if len(x.shape) != len(values):
            raise ValueError("Shape of input to max_contiguous does not match the length of values")
        x.handle.set_attr("tt.contiguity", values)
        return x
