"""The bytes of the per-module context global (layout and facts: :mod:`triton_dist.abi`, docs/abi.md)."""

from __future__ import annotations

from collections.abc import Sequence

from triton_dist.abi import CONTEXT_BYTES, CONTEXT_LAYOUT, HEAP_BASE_ALIGNMENT, MAX_RANKS


def pack_context(
    rank: int,
    num_ranks: int,
    heap_size: int,
    heap_bases: Sequence[int],
    local_rank: int | None = None,
    local_num_ranks: int | None = None,
) -> bytes:
    """The context bytes for ``rank`` of ``num_ranks`` whose ``heap_size``-byte heaps are mapped at ``heap_bases``
    in this process; a peer's base may be 0 (not mapped: a rank on another node of an NVSHMEM heap).
    ``local_rank`` of ``local_num_ranks`` is this rank's place among the ranks of its node (``dl.rank("local")``);
    both default to one node holding the whole world (``rank`` of ``num_ranks``).

    Raises ValueError naming the value: ``num_ranks`` outside ``[1, MAX_RANKS]``, ``rank`` out of range,
    ``local_num_ranks`` outside ``[1, num_ranks]``, ``local_rank`` out of range, a ``heap_size`` that is not a
    positive multiple of ``HEAP_BASE_ALIGNMENT``, a wrong number of bases, a base that is not page aligned, or this
    rank's own base 0."""
    if not 1 <= num_ranks <= MAX_RANKS:
        raise ValueError(f"num_ranks must be in [1, {MAX_RANKS}], got {num_ranks}")
    if not 0 <= rank < num_ranks:
        raise ValueError(f"rank {rank} is out of range for {num_ranks} ranks")
    local_rank = rank if local_rank is None else local_rank
    local_num_ranks = num_ranks if local_num_ranks is None else local_num_ranks
    if not 1 <= local_num_ranks <= num_ranks:
        raise ValueError(f"local_num_ranks must be in [1, num_ranks={num_ranks}], got {local_num_ranks}")
    if not 0 <= local_rank < local_num_ranks:
        raise ValueError(f"local_rank {local_rank} is out of range for {local_num_ranks} ranks on the node")
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
    return CONTEXT_LAYOUT.pack(rank, num_ranks, heap_size, *padded, local_rank, local_num_ranks)


def unpack_context(payload: bytes) -> tuple[int, int, int, list[int]]:
    """``(rank, num_ranks, heap_size, heap_bases)`` from context bytes (the inverse of ``pack_context``)."""
    if len(payload) != CONTEXT_BYTES:
        raise ValueError(f"a context is {CONTEXT_BYTES} bytes, got {len(payload)}")
    rank, num_ranks, heap_size, *bases = CONTEXT_LAYOUT.unpack(payload)[: 3 + MAX_RANKS]
    return rank, num_ranks, heap_size, bases[:num_ranks]


def unpack_local(payload: bytes) -> tuple[int, int]:
    """``(local_rank, local_num_ranks)`` from context bytes: the fields after the heap bases."""
    if len(payload) != CONTEXT_BYTES:
        raise ValueError(f"a context is {CONTEXT_BYTES} bytes, got {len(payload)}")
    local_rank, local_num_ranks = CONTEXT_LAYOUT.unpack(payload)[3 + MAX_RANKS :]
    return local_rank, local_num_ranks
