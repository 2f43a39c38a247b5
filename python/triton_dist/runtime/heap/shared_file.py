"""A CPU heap for host-side testing: each rank's heap is a shared-memory file that every rank maps.

It behaves like the GPU heap where the runtime can observe it (one allocation per rank, peers mapped at different
addresses in each process, page-aligned bases), so the heap, the tensor constructors and ``peer_tensor`` can be
exercised on machines without GPUs. Triton kernels cannot run on it.
"""

from __future__ import annotations

import os
import tempfile
import uuid

import torch
import torch.distributed as dist

from triton_dist.runtime.heap.mapping import HeapMapping


def _shared_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def map_shared_file_heap(heap_size: int, group: dist.ProcessGroup) -> HeapMapping:
    """Create this rank's heap file, map every rank's file, then unlink them (a collective)."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    session = [uuid.uuid4().hex if rank == 0 else None]
    dist.broadcast_object_list(session, src=dist.get_global_rank(group, 0), group=group)
    path = os.path.join(_shared_dir(), f"triton_dist-{session[0]}-{rank}")
    local = torch.from_file(path, shared=True, size=heap_size, dtype=torch.uint8)
    local.zero_()
    paths: list[str | None] = [None] * world_size
    dist.all_gather_object(paths, path, group=group)
    peers = tuple(
        local if peer == rank else torch.from_file(paths[peer], shared=True, size=heap_size, dtype=torch.uint8)
        for peer in range(world_size)
    )
    dist.barrier(group=group)  # every rank has mapped every file: the names can go
    os.unlink(path)
    return HeapMapping(rank=rank, world_size=world_size, heap_size=heap_size, device=torch.device("cpu"), peers=peers)
