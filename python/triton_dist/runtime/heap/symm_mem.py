"""The GPU heap: one PyTorch symmetric-memory allocation per rank (CUDA IPC backend), mapped into every peer.

Works with torch 2.11 and 2.13: it uses only ``_symmetric_memory.empty``, ``rendezvous`` (registering the group
first where a release still needs that) and the handle's ``rank``, ``world_size``, ``buffer_ptrs``, ``buffer_size``
and ``get_buffer``, which both versions have. The
allocation asks for 4 KiB more than the heap, and the heap starts at the first page boundary inside it: the backend
may place its own signal pad in front of the data, and the bytes in front are the same on every rank, so the same
offset is page aligned in every peer mapping too (``HeapMapping.problems`` checks it).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any

import torch
import torch.distributed as dist

from triton_dist.abi import HEAP_BASE_ALIGNMENT
from triton_dist.runtime.heap.mapping import HeapMapping

_BACKEND = "CUDA"
_MULTICAST_OFF = "TORCH_SYMM_MEM_DISABLE_MULTICAST"


def use_backend(symm_mem: Any, device: torch.device, backend: str = _BACKEND) -> None:
    """Make ``backend`` (``"CUDA"``: IPC, or ``"NVSHMEM"``) torch symmetric memory's backend for ``device``.

    Raises RuntimeError when another backend is in use and torch refuses to switch (it allows no switch after an
    allocation), saying how to pick the backend before anything is allocated.
    """
    get_backend = getattr(symm_mem, "get_backend", None)
    set_backend = getattr(symm_mem, "set_backend", None)
    current = get_backend(device) if get_backend is not None else None
    if current == backend or (current is None and backend == _BACKEND) or set_backend is None:
        return
    try:
        set_backend(backend)
    except RuntimeError as error:
        raise RuntimeError(
            f"torch symmetric memory already uses the {current} backend in this process; triton_dist needs the "
            f"{backend}{' (IPC)' if backend == _BACKEND else ''} backend: set TORCH_SYMMMEM={backend} or call "
            f"triton_dist.init() before other symmetric-memory allocations"
        ) from error


def _allocate(symm_mem: Any, nbytes: int, device: torch.device) -> torch.Tensor:
    """``nbytes`` of symmetric memory; the NVSHMEM backend allocates over the default group, which older torch
    releases needed registered first (as ``_rendezvous`` does for the heap's group)."""
    try:
        return symm_mem.empty(nbytes, dtype=torch.uint8, device=device)
    except RuntimeError as error:
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if "group info" not in str(error) or enable is None or not dist.is_initialized():
            raise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        enable(dist.group.WORLD.group_name)  # type: ignore[union-attr]
    return symm_mem.empty(nbytes, dtype=torch.uint8, device=device)


def _rendezvous(symm_mem: Any, allocation: torch.Tensor, group_name: str) -> Any:
    try:
        return symm_mem.rendezvous(allocation, group_name)
    except RuntimeError as error:
        # Older torch releases needed the group registered first; it fails the same way on every rank, before
        # any exchange, so retrying after registering keeps the ranks in step.
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if "group info" not in str(error) or enable is None:
            raise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        enable(group_name)
    return symm_mem.rendezvous(allocation, group_name)


def map_symmetric_memory_heap(
    heap_size: int,
    group: dist.ProcessGroup,
    device: torch.device,
    backend: str = _BACKEND,
    remote_peers: bool = False,
) -> HeapMapping:
    """Allocate this rank's heap with torch symmetric memory and map every peer's heap (a collective).

    ``backend`` is torch's backend name (``"CUDA"`` or ``"NVSHMEM"``). A peer torch gives no pointer for (one that
    load/store cannot reach: another node) is an error unless ``remote_peers``; then its entry in the mapping's
    ``peers`` is None.
    """
    from torch.distributed import _symmetric_memory as symm_mem

    # triton_dist never uses multicast objects, and creating them hangs on some NVSwitch systems.
    os.environ.setdefault(_MULTICAST_OFF, "1")
    use_backend(symm_mem, device, backend)
    with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():
        allocation = _allocate(symm_mem, heap_size + HEAP_BASE_ALIGNMENT, device)
        handle = _rendezvous(symm_mem, allocation, group.group_name)
    rank, world_size = handle.rank, handle.world_size
    buffer_ptrs = [int(ptr) for ptr in handle.buffer_ptrs]
    start = (-allocation.data_ptr()) % HEAP_BASE_ALIGNMENT
    offset_in_buffer = allocation.data_ptr() + start - buffer_ptrs[rank]
    if offset_in_buffer < 0 or offset_in_buffer + heap_size > handle.buffer_size:
        raise RuntimeError(
            f"torch symmetric memory returned a tensor at {allocation.data_ptr():#x} outside its buffer "
            f"[{buffer_ptrs[rank]:#x}, +{handle.buffer_size}); this torch version's layout is not supported"
        )
    peers: list[torch.Tensor | None] = []
    for peer in range(world_size):
        if peer == rank:
            peers.append(allocation[start : start + heap_size])
            continue
        if not buffer_ptrs[peer] and remote_peers:
            peers.append(None)
            continue
        if not buffer_ptrs[peer]:
            raise RuntimeError(
                f"rank {rank} cannot map rank {peer}'s heap: triton_dist needs every rank of the group on one node "
                f"with peer access (NVLink / xGMI)"
            )
        peers.append(handle.get_buffer(peer, (heap_size,), torch.uint8, offset_in_buffer))
    return HeapMapping(
        rank=rank,
        world_size=world_size,
        heap_size=heap_size,
        device=device,
        peers=tuple(peers),
        keepalive=(allocation, handle),
    )
