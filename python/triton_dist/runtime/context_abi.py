"""The per-module context global of docs/abi.md: its name, its layout, and how its bytes are built.

```
@__triton_dist_context = { i32 rank, i32 num_ranks, [256 x i64] heap_bases }   ; 2056 bytes
```
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

CONTEXT_SYMBOL = "__triton_dist_context"
MAX_RANKS = 256
HEAP_BASE_ALIGNMENT = 4096
"""The frontend assumes every heap base is page aligned, so translated pointers keep their alignment."""

_LAYOUT = struct.Struct(f"<ii{MAX_RANKS}q")
CONTEXT_BYTES = _LAYOUT.size
assert CONTEXT_BYTES == 2056, "docs/abi.md fixes the context at 2056 bytes"


def pack_context(rank: int, num_ranks: int, heap_bases: Sequence[int]) -> bytes:
    """The context bytes for ``rank`` of ``num_ranks`` whose heaps are mapped at ``heap_bases`` in this process."""
    if not 1 <= num_ranks <= MAX_RANKS:
        raise ValueError(f"num_ranks must be in [1, {MAX_RANKS}], got {num_ranks}")
    if not 0 <= rank < num_ranks:
        raise ValueError(f"rank {rank} is out of range for {num_ranks} ranks")
    if len(heap_bases) != num_ranks:
        raise ValueError(f"expected {num_ranks} heap bases, got {len(heap_bases)}")
    for peer, base in enumerate(heap_bases):
        if base <= 0 or base % HEAP_BASE_ALIGNMENT:
            raise ValueError(f"heap base of rank {peer} ({base:#x}) is not {HEAP_BASE_ALIGNMENT}-byte aligned")
    padded = list(heap_bases) + [0] * (MAX_RANKS - num_ranks)
    return _LAYOUT.pack(rank, num_ranks, *padded)


def unpack_context(payload: bytes) -> tuple[int, int, list[int]]:
    """``(rank, num_ranks, heap_bases)`` from context bytes (the inverse of ``pack_context``)."""
    if len(payload) != CONTEXT_BYTES:
        raise ValueError(f"a context is {CONTEXT_BYTES} bytes, got {len(payload)}")
    rank, num_ranks, *bases = _LAYOUT.unpack(payload)
    return rank, num_ranks, bases[:num_ranks]
