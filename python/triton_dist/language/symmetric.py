"""``dl.symm_at``: the address of a symmetric object on another rank, with alignment (and vectorization) kept."""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.semantic import TritonSemantic

from triton_dist import abi
from triton_dist.language import _abi, _guards, _validate
from triton_dist.language._primitive import primitive

OFFSET_DIVISIBILITY = 16
"""What the element offset between two ranks' copies is known to be a multiple of. The runtime page-aligns every
heap base (``abi.HEAP_BASE_ALIGNMENT``, checked at ``init()``), so the byte distance is a multiple of 4096 and the
element distance a multiple of 4096 / sizeof(T) >= 512 for Triton's types; 16 is all the axis analysis needs to keep
16-byte vectors."""
assert abi.HEAP_BASE_ALIGNMENT % (OFFSET_DIVISIBILITY * 8) == 0


def _element_bytes(ptr: tl.tensor) -> int:
    element = ptr.dtype.element_ty
    if element.is_ptr():
        return 8
    return max(1, element.primitive_bitwidth // 8)


def translate(ptr: tl.tensor, rank: tl.tensor, builder: TritonSemantic) -> tl.tensor:
    """``ptr + delta / sizeof(T)`` with ``delta = __triton_dist_symm_at(0, rank)``, marked a multiple of 16.

    ``rank`` may be a 1-D tensor of ranks; the result is then the tensor of ``ptr``'s address on each of them.
    """
    zero = builder.scalar_constant(0, tl.int64)
    offset = _abi.call(abi.SYMM_AT, [zero, rank], tl.int64, pure=True, builder=builder)
    size = _element_bytes(ptr)
    if size > 1:
        # The distance is an exact multiple of the element size: a shift divides it.
        offset = builder.ashr(offset, builder.scalar_constant(size.bit_length() - 1, tl.int64))
    offset = builder.multiple_of(offset, [OFFSET_DIVISIBILITY] * max(1, len(offset.shape)))
    return builder.add(ptr, offset, sanitize_overflow=False)


@primitive
def symm_at(ptr: tl.tensor, rank: Any, _semantic: TritonSemantic | None = None, _generator: Any = None) -> tl.tensor:
    """The address of ``ptr``'s element on rank ``rank``: same symmetric object, same offset, ``rank``'s copy.

    ``ptr`` is a scalar pointer or a tensor of pointers into the symmetric heap (a tensor from
    ``triton_dist.empty``/``zeros``/...); the result has ``ptr``'s type and shape. ``rank`` is a scalar integer
    (``rank == dl.rank()`` gives ``ptr`` back). Loads, stores and atomics through the result are ordinary memory
    accesses to the peer's memory over NVLink / xGMI; order them against the peer with :func:`notify` /
    :func:`wait`. Build block pointers and tensor descriptors over the result (``tl.make_block_ptr(dl.symm_at(base,
    peer), ...)``), not the other way round.

    Cost: one load of two heap bases from the context (pure, hoisted out of loops) and one add. The result keeps
    ``ptr``'s alignment and contiguity, so ``tl.load``/``tl.store`` through it still use 16-byte vector accesses
    whenever they would on ``ptr``.

    Checks (docs/language.md, "Guards"): the kernel stops with a message if the context is not initialized, or if
    a scalar ``ptr`` is not in the symmetric heap (every element of a tensor too, with ``TRITON_DIST_DEBUG=1``).
    """
    builder = _semantic
    ptr = _validate.pointer(ptr, "symm_at", "ptr")
    rank = _validate.rank_operand(rank, "symm_at", builder)
    _guards.require_context("symm_at", builder, _generator)
    _guards.require_in_heap(ptr, "symm_at", "ptr", builder, _generator)
    return translate(ptr, rank, builder)
