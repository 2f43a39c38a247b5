"""The heap's block allocator: alignment, reuse, coalescing, and the exhaustion error."""

import random

import pytest

from triton_dist.runtime.heap.allocator import (
    LARGE_ALIGNMENT,
    LARGE_BLOCK_BYTES,
    MIN_ALIGNMENT,
    BlockAllocator,
    HeapExhaustedError,
)


def test_blocks_are_aligned_and_disjoint():
    allocator = BlockAllocator(1 << 24)
    rng = random.Random(0)
    blocks = []
    for _ in range(200):
        nbytes = rng.choice([0, 1, 3, 255, 256, 1000, 5000, LARGE_BLOCK_BYTES - 1, LARGE_BLOCK_BYTES, 100_000])
        offset = allocator.allocate(nbytes)
        expected_alignment = LARGE_ALIGNMENT if nbytes >= LARGE_BLOCK_BYTES else MIN_ALIGNMENT
        assert offset % expected_alignment == 0
        blocks.append((offset, allocator.block_size(offset), nbytes))
    blocks.sort()
    for (start, size, nbytes), (next_start, _, _) in zip(blocks, blocks[1:], strict=False):
        assert size >= max(nbytes, 1)
        assert start + size <= next_start, "blocks overlap"
    assert blocks[-1][0] + blocks[-1][1] <= allocator.capacity


def test_same_call_sequence_gives_same_offsets():
    # This is what makes tensors symmetric: every rank replays the same allocations and frees.
    def replay(seed):
        allocator, rng, live, offsets = BlockAllocator(1 << 26), random.Random(seed), [], []
        for _ in range(300):
            if live and rng.random() < 0.4:
                allocator.free(live.pop(rng.randrange(len(live))))
            else:
                live.append(allocator.allocate(rng.randrange(1, 200_000)))
                offsets.append(live[-1])
        return offsets

    assert replay(7) == replay(7)


def test_free_coalesces_back_to_one_range():
    allocator = BlockAllocator(1 << 20)
    offsets = [allocator.allocate(10_000) for _ in range(20)]
    random.Random(3).shuffle(offsets)
    for offset in offsets:
        allocator.free(offset)
    assert allocator.free_bytes == allocator.capacity
    assert allocator.largest_free_block == allocator.capacity
    assert allocator.num_blocks == 0
    # The whole heap is usable as one block again.
    assert allocator.allocate(allocator.capacity) == 0


def test_freed_block_is_reused_first_fit():
    allocator = BlockAllocator(1 << 20)
    first = allocator.allocate(4096)
    allocator.allocate(4096)
    allocator.free(first)
    assert allocator.allocate(1000) == first


def test_exhaustion_names_request_free_bytes_and_knob():
    allocator = BlockAllocator(256 * 1024)
    allocator.allocate(200 * 1024)
    with pytest.raises(HeapExhaustedError) as raised:
        allocator.allocate(100 * 1024)
    message = str(raised.value)
    assert "requested 102400 bytes" in message
    assert f"{allocator.free_bytes} of {256 * 1024} bytes are free" in message
    assert "heap_size" in message and "TRITON_DIST_HEAP_SIZE" in message
    assert isinstance(raised.value, MemoryError)


def test_fragmentation_is_reported_by_largest_free_range():
    allocator = BlockAllocator(64 * 1024)
    offsets = [allocator.allocate(16 * 1024 - 256) for _ in range(4)]
    allocator.free(offsets[0])
    allocator.free(offsets[2])
    with pytest.raises(HeapExhaustedError, match="largest free range is 16128 bytes"):
        allocator.allocate(20 * 1024)


def test_bad_frees_and_sizes_are_rejected():
    allocator = BlockAllocator(1 << 20)
    offset = allocator.allocate(100)
    allocator.free(offset)
    with pytest.raises(ValueError, match="double free"):
        allocator.free(offset)
    with pytest.raises(ValueError, match="negative"):
        allocator.allocate(-1)
    with pytest.raises(ValueError, match="multiple of 4096"):
        BlockAllocator(1000)
