"""``dl.symm_at``: the address of a symmetric object on another rank, with alignment (and vectorization) kept."""

from __future__ import annotations

from typing import Any

import triton.language as tl
from triton.language.semantic import TritonSemantic

from triton_dist.language import _abi, _validate
from triton_dist.language._primitive import primitive

OFFSET_DIVISIBILITY = 16
"""What the element offset between two ranks' copies is known to be a multiple of. The runtime page-aligns every
heap base (4096 bytes, checked at ``init()``), so the byte distance is a multiple of 4096 and the element distance a
multiple of 4096 / sizeof(T) >= 512 for Triton's types; 16 is all the axis analysis needs to keep 16-byte vectors."""


def _element_bytes(ptr: tl.tensor) -> int:
    element = ptr.dtype.element_ty
    if element.is_ptr():
        return 8
    return max(1, element.primitive_bitwidth // 8)


def translate(ptr: tl.tensor, rank: tl.tensor, semantic: TritonSemantic) -> tl.tensor:
    """``ptr + delta / sizeof(T)`` with ``delta = __triton_dist_symm_at(0, rank)``, marked a multiple of 16."""
    zero = semantic.scalar_constant(0, tl.int64)
    offset = _abi.call(_abi.SYMM_AT, [zero, rank], tl.int64, pure=True, semantic=semantic)
    size = _element_bytes(ptr)
    if size > 1:
        # The distance is an exact multiple of the element size: a shift divides it.
        offset = semantic.ashr(offset, semantic.scalar_constant(size.bit_length() - 1, tl.int64))
    offset = semantic.multiple_of(offset, [OFFSET_DIVISIBILITY])
    return semantic.add(ptr, offset, sanitize_overflow=False)


@primitive
def symm_at(ptr: tl.tensor, rank: Any, _semantic: TritonSemantic | None = None) -> tl.tensor:
    """The address of ``ptr``'s element on rank ``rank``: same symmetric object, same offset, ``rank``'s copy.

    ``ptr`` is a scalar pointer or a tensor of pointers into the symmetric heap (a tensor from
    ``triton_dist.empty``/``zeros``/...); the result has ``ptr``'s type and shape. ``rank`` is a scalar integer
    (``rank == dl.rank()`` gives ``ptr`` back). Loads and stores through the result are ordinary (weak) memory
    accesses to the peer's memory over NVLink / xGMI; order them against the peer with :func:`notify` /
    :func:`wait`.

    Cost: one load of two heap bases from the context (pure, hoisted out of loops) and one add. The result keeps
    ``ptr``'s alignment and contiguity, so ``tl.load``/``tl.store`` through it still use 16-byte vector accesses
    whenever they would on ``ptr``. A pointer outside the symmetric heap gives a meaningless address.
    """
    ptr = _validate.pointer(ptr, "symm_at", "ptr")
    rank = _validate.rank_operand(rank, "symm_at", _semantic)
    return translate(ptr, rank, _semantic)
