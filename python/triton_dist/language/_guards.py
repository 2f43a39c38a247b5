"""The device-side checks a primitive emits (``triton_dist.compiler.checks`` decides which, docs/language.md
"Guards").

Each check is Triton's ``tt.assert`` built directly (``tl.device_assert`` is a no-op unless the kernel is compiled
with ``debug``): on failure the GPU prints the message with the file and line of the kernel's call of the primitive,
and the launch fails. The conditions read the context through pure library calls, so Triton merges them with the
primitive's own reads and hoists them out of loops.
"""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.semantic import TritonSemantic

from triton_dist import abi
from triton_dist.compiler.checks import Checks, check_level
from triton_dist.language import _abi


def kernel_name(generator: Any) -> str:
    """The name of the kernel being compiled (Triton's code generator, passed to builtins as ``_generator``)."""
    if generator is None:
        return "<unknown kernel>"
    try:
        return generator.module.get_entry_func_name()
    except Exception:  # noqa: BLE001 (no public function yet: name the function being generated)
        return getattr(getattr(generator, "jit_fn", None), "__name__", "<unknown kernel>")


def _check(condition: tl.tensor, message: str, builder: TritonSemantic) -> None:
    builder.builder.create_assert(condition.handle, message)


def require_context(primitive: str, builder: TritonSemantic, generator: Any) -> None:
    """Stop the kernel unless the runtime filled its context (``num_ranks() > 0``)."""
    if check_level() < Checks.CONTEXT:
        return
    world = _abi.call(abi.NUM_RANKS, [], tl.int32, pure=True, builder=builder)
    filled = builder.greater_than(world, builder.scalar_constant(0, tl.int32))
    _check(
        filled,
        f"triton_dist: dl.{primitive} in kernel {kernel_name(generator)}: the device context is not initialized "
        "(num_ranks() == 0): call triton_dist.init() before launching the kernel",
        builder,
    )


def require_in_heap(
    ptr: tl.tensor, primitive: str, name: str, builder: TritonSemantic, generator: Any, mask: tl.tensor | None = None
) -> None:
    """Stop the kernel unless ``ptr`` (each element of it where ``mask`` holds, for a tensor) points into this
    rank's symmetric heap.

    Scalars are checked from ``Checks.DEFAULT`` on, tensors of pointers only at ``Checks.DEBUG``: a tensor's
    masked-off lanes may legitimately point past the end of the heap, and a primitive without a ``mask`` argument
    cannot tell them apart, so only the debug level forbids them.
    """
    level = check_level()
    if level < Checks.DEFAULT or (ptr.type.is_block() and level < Checks.DEBUG):
        return
    address = builder.cast(ptr, tl.int64)
    offset = _abi.call(abi.HEAP_OFFSET, [address], tl.int64, pure=True, builder=builder)
    size = _abi.call(abi.HEAP_SIZE, [], tl.int64, pure=True, builder=builder)
    inside = builder.less_than(builder.bitcast(offset, tl.uint64), builder.bitcast(size, tl.uint64))
    if mask is not None and ptr.type.is_block():
        inside = builder.or_(inside, builder.not_(mask))
    _check(
        inside,
        f"triton_dist: dl.{primitive} in kernel {kernel_name(generator)}: {name} does not point into this rank's "
        "symmetric heap (allocate it with triton_dist.empty/zeros/...)",
        builder,
    )
