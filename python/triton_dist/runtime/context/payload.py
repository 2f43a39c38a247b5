"""The bytes of the per-module context global (layout and facts: :mod:`triton_dist.abi`, docs/abi.md)."""

from __future__ import annotations

from collections.abc import Sequence

from triton_dist.abi import CONTEXT_BYTES, CONTEXT_LAYOUT, HEAP_BASE_ALIGNMENT, MAX_RANKS


def pack_context(rank: int, num_ranks: int, heap_size: int, heap_bases: Sequence[int]) -> bytes:
    """The context bytes for ``rank`` of ``num_ranks`` whose ``heap_size``-byte heaps are mapped at ``heap_bases``
    in this process; a peer's base may be 0 (not mapped: a rank on another node of an NVSHMEM heap).

    Raises ValueError naming the value: ``num_ranks`` outside ``[1, MAX_RANKS]``, ``rank`` out of range, a
    ``heap_size`` that is not a positive multiple of ``HEAP_BASE_ALIGNMENT``, a wrong number of bases, a base that is
    not page aligned, or this rank's own base 0."""
    if not 1 <= num_ranks <= MAX_RANKS:
        raise ValueError(f"num_ranks must be in [1, {MAX_RANKS}], got {num_ranks}")
    if not 0 <= rank < num_ranks:
        raise ValueError(f"rank {rank} is out of range for {num_ranks} ranks")
    if heap_size <= 0 or heap_size % HEAP_BASE_ALIGNMENT:
        raise ValueError(f"heap_size must be a positive multiple of {HEAP_BASE_ALIGNMENT} bytes, got {heap_size}")
    if len(heap_bases) != num_ranks:
        raise ValueError(f"expected {num_ranks} heap bases, got {len(heap_bases)}")
    for peer, base in enumerate(heap_bases):
        if base == 0 and peer != rank:
            continue  # a rank load/store cannot reach (another node, NVSHMEM heap): dl.symm_at must not target it
        if base <= 0 or base % HEAP_BASE_ALIGNMENT:
            raise ValueError(f"heap base of rank {peer} ({base:#x}) is not {HEAP_BASE_ALIGNMENT}-byte aligned")
    padded = list(heap_bases) + [0] * (MAX_RANKS - num_ranks)
    return CONTEXT_LAYOUT.pack(rank, num_ranks, heap_size, *padded)


def unpack_context(payload: bytes) -> tuple[int, int, int, list[int]]:
    """``(rank, num_ranks, heap_size, heap_bases)`` from context bytes (the inverse of ``pack_context``)."""
    if len(payload) != CONTEXT_BYTES:
        raise ValueError(f"a context is {CONTEXT_BYTES} bytes, got {len(payload)}")
    rank, num_ranks, heap_size, *bases = CONTEXT_LAYOUT.unpack(payload)
    return rank, num_ranks, heap_size, bases[:num_ranks]
