"""Which backend maps a rank's heap: the one place that picks among the heap backends (a collective)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from triton_dist.runtime.heap.cuda_ipc import map_cuda_ipc_heap
from triton_dist.runtime.heap.mapping import HeapMapping, ranks_share_a_gpu
from triton_dist.runtime.heap.nvshmem import map_nvshmem_heap
from triton_dist.runtime.heap.shared_file import map_shared_file_heap
from triton_dist.runtime.heap.symm_mem import map_symmetric_memory_heap


def map_heap(heap_size: int, group: dist.ProcessGroup, device: torch.device, backend: str = "cuda_ipc") -> HeapMapping:
    """Allocate this rank's ``heap_size``-byte heap on ``device`` and map every peer's (a collective).

    GPU heaps come from torch symmetric memory (``symm_mem.py``), or, when two ranks share a GPU (which symmetric
    memory refuses), from CUDA IPC handles (``cuda_ipc.py``); a CPU heap from shared-memory files
    (``shared_file.py``, for testing host code without GPUs). ``backend="nvshmem"`` puts a GPU heap on torch
    symmetric memory's NVSHMEM backend instead (``nvshmem.py``; it raises for a CPU device).
    """
    if backend == "nvshmem":
        return map_nvshmem_heap(heap_size, group, device)
    if device.type == "cpu":
        return map_shared_file_heap(heap_size, group)
    if ranks_share_a_gpu(group, device):
        return map_cuda_ipc_heap(heap_size, group, device)
    return map_symmetric_memory_heap(heap_size, group, device)
