"""torch's NVSHMEM team manager and ``triton_dist.init(backend="nvshmem")``, on the CPU.

torch keeps one NVSHMEM team manager per process, bound to the first device a rendezvous names; a later rendezvous on
another device fails with "Detected use of TeamManager on multiple devices". ``symm_mem.empty(..., device="cuda")``
(no index) followed by ``rendezvous`` binds it to an index-less device, so the heap's rendezvous on ``cuda:N`` then
fails: test/gpu/probe_nvshmem_transports.py's first worker did exactly that. ``init`` must say so on every rank, even
when only one rank was refused (the others would otherwise wait for it in the next collective).
"""

from __future__ import annotations

import pytest
import torch
from test_runtime_symm_mem_mapping import FakeSymmetricMemory
from test_runtime_world import run_ranks
from torch.distributed import _symmetric_memory as symm_mem

import triton_dist.runtime as rt
from triton_dist.runtime.heap import nvshmem

TORCH_REFUSAL = "Detected use of TeamManager on multiple devices. This is not supported."


def _refused_on_one_rank(rank: int, world_size: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        # The CPU stand-in for a GPU rank with NVSHMEM: the checks that need a GPU pass, torch's API is the fake.
        patch.setattr(nvshmem, "nvshmem_problems", lambda *args, **kwargs: [])
        patch.setattr(nvshmem, "ranks_share_a_gpu", lambda group, device: False)
        fake = FakeSymmetricMemory(patch, rank=rank, world_size=world_size, backend="NVSHMEM")
        accept = fake.rendezvous

        def refuse_on_rank_1(tensor: torch.Tensor, group: str) -> object:
            if rank == 1:
                raise RuntimeError(TORCH_REFUSAL)
            return accept(tensor, group)

        patch.setattr(symm_mem, "rendezvous", refuse_on_rank_1)
        with pytest.raises(RuntimeError) as caught:
            rt.init(heap_size="64K", device="cpu", backend="nvshmem")
        message = str(caught.value)
        assert "backend='nvshmem') failed on 1 rank(s): rank 1: torch symmetric memory's NVSHMEM backend" in message
        assert "another device than the heap's cpu" in message and "device='cuda') without an index" in message
        assert "torch.device('cuda', torch.cuda.current_device())" in message and TORCH_REFUSAL[:40] in message
        assert not rt.is_initialized()

        # With the rendezvous accepted, the same init works: the refusal left nothing behind.
        patch.setattr(symm_mem, "rendezvous", accept)
        world = rt.init(heap_size="64K", device="cpu", backend="nvshmem")
        assert (world.backend, world.rank, world.world_size) == ("nvshmem", rank, world_size)
        rt.finalize()


def test_a_team_manager_bound_to_another_device_fails_init_on_every_rank() -> None:
    run_ranks(_refused_on_one_rank, 2)


def test_other_rendezvous_errors_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvshmem, "nvshmem_problems", lambda *args, **kwargs: [])
    monkeypatch.setattr(nvshmem, "ranks_share_a_gpu", lambda group, device: False)
    monkeypatch.setattr(nvshmem, "raise_if_any_rank_failed", lambda group, problems, what: None)
    monkeypatch.setattr(nvshmem.dist, "get_world_size", lambda group=None: 2)
    FakeSymmetricMemory(monkeypatch, backend="NVSHMEM")

    def broken(tensor: torch.Tensor, group: str) -> object:
        raise RuntimeError("nvshmem_malloc failed")

    monkeypatch.setattr(symm_mem, "rendezvous", broken)

    class Group:
        group_name = "0"

    with pytest.raises(RuntimeError, match="^nvshmem_malloc failed$"):
        nvshmem.map_nvshmem_heap(4096, Group(), torch.device("cpu"))  # type: ignore[arg-type]
