"""The GPU heap when ranks share a GPU: a plain CUDA allocation per rank, mapped into peers with CUDA IPC handles.

torch symmetric memory refuses groups in which two ranks allocate on one device, yet running more ranks than GPUs
is how multi-rank kernels get checked on a one-GPU machine (``$TRITON_DIST_SHARED_GPUS``, see
``triton_dist.testing.setup_distributed``). CUDA IPC handles may be opened by another process on the same device,
and torch already carries them between processes (``torch.multiprocessing``'s tensor sharing), so each rank sends
its heap's handle through the process group and rebuilds every peer's. The heap starts at the first page boundary
inside the allocation; each rank sends that offset with its handle, so every mapping of a heap starts at the same
byte.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.multiprocessing.reductions import reduce_tensor

from triton_dist.abi import HEAP_BASE_ALIGNMENT
from triton_dist.runtime.heap.mapping import HeapMapping


def map_cuda_ipc_heap(heap_size: int, group: dist.ProcessGroup, device: torch.device) -> HeapMapping:
    """Allocate this rank's heap on ``device`` and map every peer's through CUDA IPC handles (a collective)."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    allocation = torch.empty(heap_size + HEAP_BASE_ALIGNMENT, dtype=torch.uint8, device=device)
    start = (-allocation.data_ptr()) % HEAP_BASE_ALIGNMENT
    rebuild, args = reduce_tensor(allocation)
    shared: list[Any] = [None] * world_size
    dist.all_gather_object(shared, (rebuild, args, start), group=group)
    peers = []
    imported = []
    for peer, (peer_rebuild, peer_args, peer_start) in enumerate(shared):
        whole = allocation if peer == rank else peer_rebuild(*peer_args)
        imported.append(whole)
        peers.append(whole[peer_start : peer_start + heap_size])
    return HeapMapping(
        rank=rank,
        world_size=world_size,
        heap_size=heap_size,
        device=device,
        peers=tuple(peers),
        keepalive=tuple(imported),
    )
