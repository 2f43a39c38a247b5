"""What a symmetric heap looks like from one process: its own heap, and every rank's heap as mapped here."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from triton_dist.abi import HEAP_BASE_ALIGNMENT


@dataclass(frozen=True)
class HeapMapping:
    """One rank's view of the symmetric heap.

    ``peers[r]`` is a uint8 tensor over rank ``r``'s heap *as mapped in this process* (``peers[rank]`` is this
    rank's own heap); every view has exactly ``heap_size`` bytes. ``peers[r]`` is None for a rank that load/store
    cannot reach (on another node: only the NVSHMEM heap has such peers; NVSHMEM's puts reach them). ``keepalive``
    holds whatever keeps the mappings valid (allocation, rendezvous handle). ``backend`` names the heap's backend
    (``world.settings.BACKENDS``).
    """

    rank: int
    world_size: int
    heap_size: int
    device: torch.device
    peers: tuple[torch.Tensor | None, ...]
    keepalive: object = None
    backend: str = "cuda_ipc"

    @property
    def local(self) -> torch.Tensor:
        """This rank's own heap."""
        view = self.peers[self.rank]
        if view is None:
            raise RuntimeError(f"rank {self.rank}'s heap mapping has no view of its own heap")
        return view

    @property
    def bases(self) -> list[int]:
        """``bases[r]``: the address of rank ``r``'s heap in this process (what the device context holds); 0 for a
        rank that load/store cannot reach (``peers[r]`` is None)."""
        return [view.data_ptr() if view is not None else 0 for view in self.peers]

    @property
    def reachable(self) -> list[bool]:
        """``reachable[r]``: whether this process can load from and store to rank ``r``'s heap."""
        return [view is not None for view in self.peers]

    def problems(self) -> list[str]:
        """Everything wrong with this mapping (empty if it is usable): sizes, dtypes and base alignment."""
        found = []
        if len(self.peers) != self.world_size:
            found.append(f"{len(self.peers)} heap views for {self.world_size} ranks")
        if 0 <= self.rank < len(self.peers) and self.peers[self.rank] is None:
            found.append(f"rank {self.rank} has no view of its own heap")
        for peer, view in enumerate(self.peers):
            if view is None:
                continue
            if view.dtype != torch.uint8 or view.dim() != 1 or view.numel() != self.heap_size:
                found.append(f"rank {peer}'s heap view is {view.dtype}{list(view.shape)}, not uint8[{self.heap_size}]")
            if view.data_ptr() % HEAP_BASE_ALIGNMENT:
                found.append(
                    f"rank {peer}'s heap is mapped at {view.data_ptr():#x}, not {HEAP_BASE_ALIGNMENT}-byte aligned"
                )
        return found


def ranks_share_a_gpu(group: dist.ProcessGroup, device: torch.device) -> bool:
    """Whether two ranks of ``group`` put their heaps on one physical GPU (a collective: same answer everywhere).

    Raises RuntimeError on every rank when ranks share GPUs but use more than one: the CUDA IPC heap that sharing
    needs is only known to work with every rank on one GPU (3 and 4 ranks spread over two GPUs faulted with an
    illegal address on a kernel's first access of a heap on the other GPU, with peer access enabled or not)."""
    gpus: list[str | None] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gpus, str(torch.cuda.get_device_properties(device).uuid), group=group)
    shared = len(set(gpus)) < len(gpus)
    if shared and len(set(gpus)) > 1:
        raise RuntimeError(
            f"triton_dist: {len(gpus)} ranks share {len(set(gpus))} GPUs; ranks that share GPUs must all share one "
            "(their heaps are mapped through CUDA IPC, which reaches no other GPU here): make one GPU visible, "
            "e.g. CUDA_VISIBLE_DEVICES=0, or run one rank per GPU"
        )
    return shared
