"""Symmetric tensor constructors and checks, on the heap of the initialized world (``triton_dist.init()``).

Allocate symmetric tensors on every rank in the same order with the same shapes and dtypes: a tensor is
symmetric because it sits at the same heap offset on every rank. ``verify_symmetric`` checks that (a collective).
"""

from __future__ import annotations

import torch

from triton_dist.runtime.heap.symmetric_heap import Shape
from triton_dist.runtime.world.lifecycle import current_world, is_initialized
from triton_dist.runtime.world.rank_agreement import gather_from_ranks, raise_if_any_rank_failed


def empty(*shape: Shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An uninitialized symmetric tensor, like ``torch.empty(shape, dtype=dtype)`` (on the heap's device)."""
    return current_world().heap.empty(shape, dtype)


def zeros(*shape: Shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A symmetric tensor of zeros (filled on the current stream)."""
    return empty(*shape, dtype=dtype).zero_()


def ones(*shape: Shape, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A symmetric tensor of ones (filled on the current stream)."""
    return empty(*shape, dtype=dtype).fill_(1)


def full(shape: Shape, fill_value: bool | int | float, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A symmetric tensor filled with ``fill_value``; the dtype defaults to the value's, as in ``torch.full``."""
    if dtype is None:
        dtype = torch.full((), fill_value).dtype
    return empty(shape, dtype=dtype).fill_(fill_value)


def empty_like(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An uninitialized contiguous symmetric tensor with ``tensor``'s shape (and dtype unless given)."""
    return empty(tensor.shape, dtype=dtype if dtype is not None else tensor.dtype)


def zeros_like(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A symmetric tensor of zeros with ``tensor``'s shape (and dtype unless given)."""
    return empty_like(tensor, dtype).zero_()


def rand(*shape: Shape, dtype: torch.dtype | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """A symmetric tensor of uniform samples in [0, 1), like ``torch.rand``."""
    return empty(*shape, dtype=dtype).uniform_(generator=generator)


def randn(*shape: Shape, dtype: torch.dtype | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """A symmetric tensor of standard normal samples, like ``torch.randn``."""
    return empty(*shape, dtype=dtype).normal_(generator=generator)


def is_symmetric(tensor: torch.Tensor) -> bool:
    """Whether every element of ``tensor`` lies in this rank's symmetric heap (False before ``init()``)."""
    return is_initialized() and current_world().heap.offset_of(tensor) is not None


def require_symmetric(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """Return ``tensor`` if it is on the symmetric heap; otherwise raise a ValueError naming ``name``.

    Use it in host code before launching a kernel that passes ``name`` to ``dl.symm_at`` / ``dl.notify`` /
    ``dl.wait``: an ordinary torch tensor there makes the kernel touch unrelated peer memory.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor on the symmetric heap, got {type(tensor).__name__}")
    heap = current_world().heap
    if heap.offset_of(tensor) is None:
        raise ValueError(
            f"{name} must be a symmetric tensor (allocate it with triton_dist.empty/zeros/...), but it is a "
            f"{tensor.dtype} tensor of shape {list(tensor.shape)} at {tensor.data_ptr():#x} on {tensor.device}, "
            f"outside this rank's symmetric heap [{heap.bases[heap.rank]:#x}, +{heap.heap_size}) on {heap.device}"
        )
    return tensor


def peer_tensor(tensor: torch.Tensor, rank: int) -> torch.Tensor:
    """Host-side view of symmetric ``tensor`` as it lives on ``rank`` (same shape, strides, dtype).

    Reads and writes go straight to the peer's memory (over NVLink on GPUs). Order them against kernels with
    ``triton_dist.barrier()``. The view is valid until ``finalize()``.
    """
    require_symmetric(tensor, "tensor")
    return current_world().heap.peer_tensor(tensor, rank)


def heap_stats() -> dict[str, int]:
    """This rank's heap occupancy in bytes: ``heap_size``, ``used``, ``free``, ``largest_free_block``, ``blocks``."""
    return current_world().heap.stats()


def verify_symmetric(*tensors: torch.Tensor) -> None:
    """Check that each tensor has the same heap offset, shape, strides and dtype on every rank (a collective).

    Raises the same RuntimeError on every rank if not: a sign that ranks allocated in different orders.
    """
    world = current_world()
    layout = []
    for index, tensor in enumerate(tensors):
        require_symmetric(tensor, f"tensors[{index}]")
        offset = world.heap.offset_of(tensor)
        layout.append((offset, tuple(tensor.shape), tuple(tensor.stride()), str(tensor.dtype)))
    everyone = gather_from_ranks(layout, world.group)
    problems = []
    for index, mine in enumerate(layout):
        for peer, theirs in enumerate(everyone):
            if len(theirs) != len(layout) or theirs[index] != mine:
                other = theirs[index] if index < len(theirs) else "nothing"
                problems.append(
                    f"tensors[{index}] is (offset, shape, stride, dtype)={mine} here but {other} on rank {peer}"
                )
                break
    raise_if_any_rank_failed(world.group, problems, "verify_symmetric")
