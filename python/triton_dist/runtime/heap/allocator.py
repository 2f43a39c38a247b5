"""Offsets into the symmetric heap: a first-fit free list with coalescing.

The allocator knows nothing about devices or tensors; it hands out byte offsets in ``[0, capacity)``. Every rank
runs the same allocator over a heap of the same size, so the same sequence of ``allocate``/``free`` calls yields the
same offsets on every rank: that is what makes a tensor *symmetric* (same offset in every rank's heap).
"""

from __future__ import annotations

import bisect

from triton_dist.abi import HEAP_BASE_ALIGNMENT

MIN_ALIGNMENT = 256
"""Every block starts on a multiple of this many bytes (and its size is rounded up to it)."""

LARGE_ALIGNMENT = HEAP_BASE_ALIGNMENT
"""Blocks of at least ``LARGE_BLOCK_BYTES`` start on a page boundary (the heap base is page aligned)."""

LARGE_BLOCK_BYTES = 64 * 1024


class HeapExhaustedError(MemoryError):
    """The symmetric heap has no free block large enough for a request."""


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def block_alignment(nbytes: int) -> int:
    """The start alignment the allocator uses for a request of ``nbytes`` bytes."""
    return LARGE_ALIGNMENT if nbytes >= LARGE_BLOCK_BYTES else MIN_ALIGNMENT


class BlockAllocator:
    """First-fit allocation of aligned byte ranges in ``[0, capacity)``.

    Free ranges are kept sorted by offset and merged with their neighbours on ``free``, so the heap does not
    fragment under the usual allocate/free-in-reverse patterns.
    """

    def __init__(self, capacity: int) -> None:
        if capacity <= 0 or capacity % LARGE_ALIGNMENT:
            raise ValueError(f"heap capacity must be a positive multiple of {LARGE_ALIGNMENT} bytes, got {capacity}")
        self.capacity = capacity
        self._free_offsets: list[int] = [0]
        self._free_sizes: list[int] = [capacity]
        self._used: dict[int, int] = {}

    @property
    def used_bytes(self) -> int:
        """Bytes held by live blocks (sizes as rounded by the allocator)."""
        return sum(self._used.values())

    @property
    def free_bytes(self) -> int:
        """Bytes not held by any block (possibly split over several free ranges)."""
        return self.capacity - self.used_bytes

    @property
    def largest_free_block(self) -> int:
        """The size of the largest free range (an upper bound on what one request can get)."""
        return max(self._free_sizes, default=0)

    @property
    def num_blocks(self) -> int:
        """How many blocks are live."""
        return len(self._used)

    def block_size(self, offset: int) -> int:
        """The (rounded) size of the live block starting at ``offset``."""
        try:
            return self._used[offset]
        except KeyError:
            raise ValueError(f"no live block starts at heap offset {offset}") from None

    def allocate(self, nbytes: int) -> int:
        """Reserve ``nbytes`` bytes (at least ``MIN_ALIGNMENT``) and return the block's offset.

        Raises ``HeapExhaustedError`` naming the request, the free bytes and the largest free range.
        """
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        size = _round_up(max(nbytes, 1), MIN_ALIGNMENT)
        alignment = block_alignment(nbytes)
        for index, (start, length) in enumerate(zip(self._free_offsets, self._free_sizes, strict=True)):
            aligned = _round_up(start, alignment)
            if aligned + size > start + length:
                continue
            del self._free_offsets[index]
            del self._free_sizes[index]
            self._insert_free(start, aligned - start)
            self._insert_free(aligned + size, start + length - aligned - size)
            self._used[aligned] = size
            return aligned
        raise HeapExhaustedError(
            f"symmetric heap exhausted: requested {nbytes} bytes ({size} after rounding, {alignment}-byte aligned), "
            f"but only {self.free_bytes} of {self.capacity} bytes are free and the largest free range is "
            f"{self.largest_free_block} bytes; free some symmetric tensors or pass a larger heap_size to "
            f"triton_dist.init() (or set TRITON_DIST_HEAP_SIZE)"
        )

    def free(self, offset: int) -> None:
        """Return the block at ``offset`` to the free list, merging it with free neighbours."""
        size = self._used.pop(offset, None)
        if size is None:
            raise ValueError(f"heap offset {offset} is not the start of a live block (double free?)")
        self._insert_free(offset, size)

    def _insert_free(self, offset: int, size: int) -> None:
        if size == 0:
            return
        index = bisect.bisect_left(self._free_offsets, offset)
        # Merge with the following range, then with the preceding one.
        if index < len(self._free_offsets) and offset + size == self._free_offsets[index]:
            size += self._free_sizes[index]
            del self._free_offsets[index]
            del self._free_sizes[index]
        if index > 0 and self._free_offsets[index - 1] + self._free_sizes[index - 1] == offset:
            self._free_sizes[index - 1] += size
            return
        self._free_offsets.insert(index, offset)
        self._free_sizes.insert(index, size)
