"""What ``all_gather`` accepts and how it cuts a call: dtypes, the error family, programs, block and buffer sizes."""

from __future__ import annotations

import torch

from triton_dist.ops.common.errors import OpInputError

SUPPORTED_DTYPES = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
)
"""The element types the kernel copies (it never looks at the values)."""

MAX_PROGRAMS = 16
"""The most programs one call launches: the flags and signals have this many per-program rows."""
EMULATED_PROGRAMS = 2
"""The most programs under the CPU emulation (each is a thread of the interpreter)."""
CHUNK_BYTES = 64 * 1024
"""The least bytes of a shard one program moves (fewer programs for small shards: one put per program and node)."""
EMULATED_CHUNK_BYTES = 256
"""``CHUNK_BYTES`` under the CPU emulation (so that small shards take several programs)."""
BLOCK_BYTES = 4096
"""Bytes one program copies per loop step (the kernel's ``BLOCK`` elements)."""
EMULATED_BLOCK = 64
"""``BLOCK`` under the CPU emulation (small blocks run quickly in the interpreter)."""
MIN_HALF_BYTES = 4096
"""The smallest buffer half: sizes are rounded up to a power of two, so calls of nearby sizes share a buffer."""


class AllGatherError(OpInputError):
    """Bad input to ``all_gather`` (not a tensor, device, dtype, layout, ranks that disagree) or a world it cannot
    run on (a node layout that is not torchrun's, a world across nodes without the NVSHMEM heap). Raised on the host
    before anything is launched."""


def programs_for(shard_bytes: int, emulated: bool) -> int:
    """How many programs gather a shard of ``shard_bytes`` bytes: one per ``CHUNK_BYTES``, at least 1, at most
    ``MAX_PROGRAMS`` (``EMULATED_CHUNK_BYTES`` and ``EMULATED_PROGRAMS`` under the emulation)."""
    most, least = (EMULATED_PROGRAMS, EMULATED_CHUNK_BYTES) if emulated else (MAX_PROGRAMS, CHUNK_BYTES)
    return max(1, min(most, -(-shard_bytes // least)))


def half_bytes_for(shard_bytes: int, world_size: int) -> int:
    """The bytes of one parity's half of the gather buffer for ``world_size`` shards of ``shard_bytes``: the next
    power of two, at least ``MIN_HALF_BYTES``."""
    needed = max(MIN_HALF_BYTES, shard_bytes * world_size)
    return 1 << (needed - 1).bit_length()
