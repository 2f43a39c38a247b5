"""Tensors on the symmetric heap: allocation, membership, and views of the same tensor on other ranks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeAlias

import torch

from triton_dist.runtime.heap.allocator import BlockAllocator
from triton_dist.runtime.heap.block_tensor import BlockTensorFactory
from triton_dist.runtime.heap.mapping import HeapMapping

Shape: TypeAlias = int | Sequence[int] | torch.Size


def _as_shape(shape: Shape | tuple[Shape, ...]) -> tuple[int, ...]:
    """Accept ``(2, 3)``, ``[2, 3]``, ``torch.Size``, ``5``, and the ``*size`` form ``((2, 3),)``."""
    if isinstance(shape, int):
        return (shape,)
    shape = tuple(shape)
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    if not all(isinstance(dim, int) and dim >= 0 for dim in shape):
        raise ValueError(f"a shape is a sequence of non-negative ints, got {shape!r}")
    return shape


def _byte_extent(tensor: torch.Tensor) -> tuple[int, int]:
    """``[first, last)`` byte addresses covered by the tensor's elements."""
    start = tensor.data_ptr()
    if tensor.numel() == 0:
        return start, start
    span = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    return start, start + (span + 1) * tensor.element_size()


class SymmetricHeap:
    """One rank's symmetric heap: a block allocator over its memory plus the peer mappings.

    Tensors allocated in the same order with the same sizes on every rank land at the same offset in every rank's
    heap, which is what ``dl.symm_at`` relies on. A block returns to the heap when the last tensor viewing it dies.
    """

    def __init__(self, mapping: HeapMapping) -> None:
        problems = mapping.problems()
        if problems:
            raise ValueError("unusable heap mapping: " + "; ".join(problems))
        self.mapping = mapping
        self.allocator = BlockAllocator(mapping.heap_size)
        self._blocks = BlockTensorFactory(mapping.device, keepalive=mapping)
        self._base = mapping.local.data_ptr()
        self._peer_bytes = mapping.peers

    @property
    def rank(self) -> int:
        return self.mapping.rank

    @property
    def world_size(self) -> int:
        return self.mapping.world_size

    @property
    def device(self) -> torch.device:
        return self.mapping.device

    @property
    def heap_size(self) -> int:
        return self.mapping.heap_size

    @property
    def bases(self) -> list[int]:
        """Every rank's heap base as mapped in this process (the device context's table)."""
        return self.mapping.bases

    def stats(self) -> dict[str, int]:
        """Heap occupancy in bytes: ``heap_size``, ``used``, ``free``, ``largest_free_block``, and ``blocks``."""
        self.reclaim()
        return {
            "heap_size": self.heap_size,
            "used": self.allocator.used_bytes,
            "free": self.allocator.free_bytes,
            "largest_free_block": self.allocator.largest_free_block,
            "blocks": self.allocator.num_blocks,
        }

    def reclaim(self) -> None:
        """Return the blocks of tensors that died since the last call to the free list."""
        for offset in self._blocks.take_released():
            self.allocator.free(offset)

    def empty(self, shape: Shape, dtype: torch.dtype | None = None) -> torch.Tensor:
        """An uninitialized contiguous tensor on the heap, like ``torch.empty``."""
        dims = _as_shape(shape)
        dtype = dtype if dtype is not None else torch.get_default_dtype()
        nbytes = math.prod(dims) * torch.empty((), dtype=dtype).element_size()
        self.reclaim()
        offset = self.allocator.allocate(nbytes)
        try:
            raw = self._blocks.wrap(self._base + offset, nbytes, token=offset)
        except BaseException:
            self.allocator.free(offset)
            raise
        return raw.view(dtype).view(dims)

    def offset_of(self, tensor: torch.Tensor) -> int | None:
        """The byte offset of ``tensor``'s first element in this rank's heap, or None if it is not on the heap."""
        if tensor.device.type != self.device.type or (
            self.device.type == "cuda" and tensor.device.index != self.device.index
        ):
            return None
        start, end = _byte_extent(tensor)
        if not (self._base <= start and end <= self._base + self.heap_size and start < self._base + self.heap_size):
            return None
        return start - self._base

    def peer_tensor(self, tensor: torch.Tensor, peer: int) -> torch.Tensor:
        """The same elements (shape, strides, dtype) in ``peer``'s heap, readable and writable from this process.

        The view aliases the peer's memory: it is valid until ``finalize()``, and ordering accesses through it
        against the peer's kernels is up to the caller (e.g. ``triton_dist.barrier()``). Raises ValueError for a
        ``peer`` out of range, a tensor off the heap, and a peer this process cannot map (on another node).
        """
        if not 0 <= peer < self.world_size:
            raise ValueError(f"peer must be a rank in [0, {self.world_size}), got {peer}")
        offset = self.offset_of(tensor)
        if offset is None:
            raise ValueError("peer_tensor() needs a tensor on the symmetric heap")
        itemsize = tensor.element_size()
        if offset % itemsize:
            raise ValueError(f"tensor at heap offset {offset} is not aligned to its {itemsize}-byte elements")
        peer_bytes = self._peer_bytes[peer]
        if peer_bytes is None:
            raise ValueError(
                f"rank {peer}'s heap is not mapped in this process (another node: load/store cannot reach it); "
                "kernels reach it through dl.put_signal / dl.get on the NVSHMEM heap"
            )
        elements = peer_bytes.view(tensor.dtype)
        return elements.as_strided(tensor.shape, tensor.stride(), elements.storage_offset() + offset // itemsize)
