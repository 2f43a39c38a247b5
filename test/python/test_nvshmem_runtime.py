"""The runtime half of the NVSHMEM backend, on the CPU: ``init(backend=...)`` validation and agreement, the NVSHMEM
heap's checks and mapping (against a stand-in for torch's symmetric memory), the hook that initializes NVSHMEM in
loaded modules, and the world's nodes x local ranks.

The GPU half (every check on the NVSHMEM heap, the heap-cost benchmark) is ``scripts/gpu_check.sh``'s
``*_nvshmem`` steps and ``bench/heap_backends.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from test_runtime_symm_mem_mapping import FakeSymmetricMemory, Group
from test_runtime_world import run_ranks

import triton_dist.runtime as rt
from triton_dist.runtime.context.payload import pack_context, unpack_context
from triton_dist.runtime.heap import nvshmem
from triton_dist.runtime.heap.symm_mem import map_symmetric_memory_heap
from triton_dist.runtime.heap.symmetric_heap import SymmetricHeap
from triton_dist.runtime.world.settings import BACKEND_ENV, resolve_backend
from triton_dist.runtime.world.topology import (
    NodeLayout,
    launcher_problems,
    launcher_view,
    layout_from_node_keys,
    node_key,
)

CUDA = torch.device("cuda", 0)


# --- backend names -------------------------------------------------------------------------------------------------


def test_backend_comes_from_argument_then_environment_then_default(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert resolve_backend(None) == "cuda_ipc"
    monkeypatch.setenv(BACKEND_ENV, " NVSHMEM ")
    assert resolve_backend(None) == "nvshmem"
    assert resolve_backend("cuda_ipc") == "cuda_ipc", "the argument wins over the environment"
    monkeypatch.setenv(BACKEND_ENV, "")
    assert resolve_backend(None) == "cuda_ipc", "an empty variable is unset"


def test_unknown_backends_are_named_with_the_choices(monkeypatch):
    with pytest.raises(ValueError, match=r"backend='rocshmem' is not a heap backend: use one of cuda_ipc, nvshmem"):
        resolve_backend("rocshmem")
    monkeypatch.setenv(BACKEND_ENV, "nvshmem3")
    with pytest.raises(ValueError, match=r"\$TRITON_DIST_BACKEND='nvshmem3' is not a heap backend"):
        resolve_backend(None)
    with pytest.raises(TypeError, match="backend must be a string"):
        resolve_backend(1)  # type: ignore[arg-type]


# --- is NVSHMEM usable here ----------------------------------------------------------------------------------------


def _symm_mem(available=True, has_backend=True):
    fake = SimpleNamespace(is_nvshmem_available=lambda: available, set_backend=lambda name: None)
    if not has_backend:
        del fake.set_backend
    return fake


def test_nvshmem_is_usable_on_a_gpu_of_the_whole_world():
    assert nvshmem.nvshmem_problems(CUDA, 4, 4, _symm_mem()) == []


def test_nvshmem_refuses_a_world_of_one_rank():
    """torch's NVSHMEM rendezvous raises an assertion for one rank (seen on 2 x H200): init says so instead."""
    (one,) = nvshmem.nvshmem_problems(CUDA, 1, 1, _symm_mem())
    assert "at least 2 ranks" in one and "cuda_ipc" in one


def test_nvshmem_problems_name_each_cause():
    (unavailable,) = nvshmem.nvshmem_problems(CUDA, 2, 2, _symm_mem(available=False))
    assert "is_nvshmem_available() is False" in unavailable and "nvidia-nvshmem-cu12" in unavailable
    (old_torch,) = nvshmem.nvshmem_problems(CUDA, 2, 2, _symm_mem(has_backend=False))
    assert "has no NVSHMEM backend" in old_torch
    cpu, subgroup = nvshmem.nvshmem_problems(torch.device("cpu"), 2, 4, _symm_mem())
    assert "NVIDIA GPUs, not cpu" in cpu
    assert "whole world" in subgroup and "a group of 2 of 4 ranks" in subgroup


def test_this_torch_reports_what_it_lacks():
    """The CPU machine's torch has no NVSHMEM: the problem says so instead of failing later in an allocation."""
    if nvshmem.nvshmem_problems(CUDA, 2, 2) == []:
        pytest.skip("this torch has NVSHMEM (checked on GPUs by gpu_check.sh's *_nvshmem steps)")
    (problem,) = nvshmem.nvshmem_problems(CUDA, 2, 2)
    assert "NVSHMEM" in problem and "backend='cuda_ipc'" in problem


def test_nvshmem_reserves_room_for_the_heap():
    environ: dict[str, str] = {}
    nvshmem.reserve_symmetric_size(256 << 20, environ)
    assert environ == {}, "NVSHMEM's default 1 GiB holds a 256 MiB heap"
    nvshmem.reserve_symmetric_size(1 << 30, environ)
    assert int(environ["NVSHMEM_SYMMETRIC_SIZE"]) >= (1 << 30) + nvshmem.SYMMETRIC_SIZE_SLACK
    environ = {"NVSHMEM_SYMMETRIC_SIZE": "2G"}
    nvshmem.reserve_symmetric_size(4 << 30, environ)
    assert environ == {"NVSHMEM_SYMMETRIC_SIZE": "2G"}, "a user's choice is left alone"
    (problem,) = nvshmem.symmetric_size_problems(4 << 30, environ)
    assert "$NVSHMEM_SYMMETRIC_SIZE=2G" in problem and "smaller than the heap needs" in problem
    assert nvshmem.symmetric_size_problems(1 << 30, environ) == []
    assert nvshmem.symmetric_size_problems(1 << 40, {"NVSHMEM_SYMMETRIC_SIZE": "3.5G"}) == [], "left to NVSHMEM"


# --- the heap on torch's NVSHMEM backend ---------------------------------------------------------------------------


def test_nvshmem_heap_maps_local_peers_and_leaves_remote_ones_unmapped(monkeypatch):
    """Rank 1 of 3; rank 2 is on another node (torch gives no pointer for it)."""
    fake = FakeSymmetricMemory(monkeypatch, rank=1, world_size=3, backend=None, peer_unmapped=2)
    heap_size = 64 * 1024
    mapping = map_symmetric_memory_heap(heap_size, Group(), torch.device("cpu"), backend="NVSHMEM", remote_peers=True)
    assert fake.calls[0] == ("set_backend", "NVSHMEM"), "the backend is chosen before the allocation"
    assert mapping.problems() == [] and mapping.reachable == [True, True, False]
    assert mapping.bases[2] == 0 and mapping.bases[0] == fake.blocks[0].data_ptr() + 4096

    heap = SymmetricHeap(mapping)
    x = heap.empty((8,), torch.int32)
    x.fill_(-1)  # poison
    values = torch.randint(-1000, 1000, (8,), dtype=torch.int32)
    heap.peer_tensor(x, 0).copy_(values)
    offset = heap.offset_of(x)
    assert offset is not None
    assert torch.equal(fake.blocks[0][4096 + offset : 4096 + offset + 32].view(torch.int32), values)
    with pytest.raises(ValueError, match=r"rank 2's heap is not mapped in this process \(another node"):
        heap.peer_tensor(x, 2)

    # The device context carries 0 for the unreachable peer, and never for this rank.
    payload = pack_context(mapping.rank, mapping.world_size, heap_size, mapping.bases)
    assert unpack_context(payload)[3] == mapping.bases
    with pytest.raises(ValueError, match="rank 1"):
        pack_context(1, 3, heap_size, [mapping.bases[0], 0, 0])


def test_the_ipc_heap_still_refuses_an_unmapped_peer(monkeypatch):
    FakeSymmetricMemory(monkeypatch, rank=0, world_size=2, backend="NVSHMEM", peer_unmapped=1)
    with pytest.raises(RuntimeError, match=r"cannot map rank 1's heap.*one node"):
        map_symmetric_memory_heap(4096, Group(), torch.device("cpu"))


def test_a_backend_torch_cannot_switch_to_says_how_to_fix_it(monkeypatch):
    FakeSymmetricMemory(monkeypatch, backend="CUDA", refuse_switch=True)
    with pytest.raises(RuntimeError, match=r"already uses the CUDA backend.*needs the NVSHMEM backend.*TORCH_SYMMMEM"):
        map_symmetric_memory_heap(4096, Group(), torch.device("cpu"), backend="NVSHMEM", remote_peers=True)


# --- NVSHMEM's device state in loaded modules ----------------------------------------------------------------------


def _metadata(tmp_path: Path, ptx: str) -> dict[str, str]:
    (tmp_path / "k.ptx").write_text(ptx)
    (tmp_path / "k.json").write_text("{}")
    return {"k.ptx": str(tmp_path / "k.ptx"), "k.json": str(tmp_path / "k.json")}


def test_modules_with_nvshmem_are_initialized_on_the_nvshmem_heap_only(tmp_path):
    initialized: list[int] = []
    hook = nvshmem.NvshmemModuleHook(cumodule_init=initialized.append)
    with_state = _metadata(tmp_path, ".extern .const .align 8 .b8 nvshmemi_device_state_d[512];")
    (tmp_path / "plain").mkdir()
    plain = _metadata(tmp_path / "plain", ".global .align 8 .b8 __triton_dist_context[2064];")

    with pytest.raises(RuntimeError, match=r"kernel 'push' calls NVSHMEM primitives.*backend='nvshmem'"):
        hook(0x1000, 0x2000, "push", with_state, "h")
    hook(0x1001, 0x2001, "plain", plain, "h")
    assert initialized == []

    hook.enabled = True
    hook(0x1000, 0x2000, "push", with_state, "h")
    hook(0x1000, 0x2000, "push", with_state, "h")
    hook(0x1001, 0x2001, "plain", plain, "h")
    assert initialized == [0x1000], "each NVSHMEM module once, nothing else"


# --- nodes x local ranks -------------------------------------------------------------------------------------------


def test_torchrun_layouts_give_node_and_local_rank():
    keys = [f"torchrun-node-{rank // 4}" for rank in range(8)]
    layout = layout_from_node_keys(keys)
    assert layout.num_nodes == 2 and layout.ranks_per_node == 4
    assert [(layout.node_of(r), layout.local_rank_of(r), layout.local_world_size_of(r)) for r in range(8)] == [
        (r // 4, r % 4, 4) for r in range(8)
    ]
    assert launcher_problems(layout, [(r % 4, 4) for r in range(8)]) == []


def test_irregular_layouts_have_no_ranks_per_node():
    interleaved = layout_from_node_keys(["b", "a", "b", "a"])
    assert interleaved.nodes == ((0, 2), (1, 3)), "nodes are numbered by their first rank"
    assert interleaved.local_rank_of(2) == 1 and interleaved.ranks_per_node is None
    uneven = layout_from_node_keys(["a", "a", "a", "b"])
    assert uneven.local_world_size_of(3) == 1 and uneven.ranks_per_node is None
    assert NodeLayout.single_node(3).ranks_per_node == 3
    with pytest.raises(ValueError, match="every rank 0..n-1 once"):
        NodeLayout(((0, 2),))


def test_launcher_variables_that_contradict_the_nodes_are_named():
    layout = layout_from_node_keys(["n0", "n0", "n1", "n1"])
    (problem,) = launcher_problems(layout, [(0, 2), (1, 2), (0, 2), (0, 2)])
    assert problem.startswith("rank 3 has LOCAL_RANK=0 LOCAL_WORLD_SIZE=2, but it is local rank 1 of 2 on node 1")
    assert launcher_problems(layout, [None] * 4) == [], "ranks without torchrun's variables are not checked"


def test_node_keys_and_launcher_views_come_from_torchrun():
    assert node_key({"GROUP_RANK": "3"}) == "torchrun-node-3"
    assert node_key({}).startswith("host-")
    assert launcher_view({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "8"}) == (1, 8)
    assert launcher_view({"LOCAL_RANK": "1"}) is None
    assert launcher_view({"LOCAL_RANK": "x", "LOCAL_WORLD_SIZE": "2"}) is None


# --- init across two gloo CPU ranks ---------------------------------------------------------------------------------


def _raises_on_every_rank(pattern: str, **kwargs) -> None:
    with pytest.raises(RuntimeError, match=pattern):
        rt.init(heap_size="64K", device="cpu", **kwargs)
    assert not rt.is_initialized()


def _init_checks(rank: int, world_size: int) -> None:
    for name in ("GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", BACKEND_ENV):
        os.environ.pop(name, None)
    # Ranks asking for different backends: both raise the same error (neither is left waiting for the other).
    _raises_on_every_rank(
        r"ranks disagree: backend differs between ranks \(rank 0: 'cuda_ipc', rank 1: 'nvshmem'\)",
        backend=["cuda_ipc", "nvshmem"][rank],
    )
    # The same, with one rank's choice from the environment.
    os.environ[BACKEND_ENV] = "nvshmem" if rank == 1 else "cuda_ipc"
    _raises_on_every_rank(r"backend differs between ranks")
    # Agreeing on NVSHMEM for a CPU heap: every rank says why it cannot.
    os.environ[BACKEND_ENV] = "nvshmem"
    _raises_on_every_rank(r"backend='nvshmem'\) failed on 2 rank\(s\): rank 0: the NVSHMEM heap lives on NVIDIA GPUs")
    del os.environ[BACKEND_ENV]

    # One node (same host, no torchrun): node 0, local rank = rank.
    world = rt.init(heap_size="64K", device="cpu")
    assert (world.backend, world.node, world.num_nodes) == ("cuda_ipc", 0, 1)
    assert (world.local_rank, world.local_world_size, world.ranks_per_node) == (rank, world_size, world_size)
    rt.finalize()

    # torchrun's variables that contradict the nodes.
    os.environ.update(LOCAL_RANK="0", LOCAL_WORLD_SIZE=str(world_size))
    _raises_on_every_rank(r"nodes disagree with torchrun's: rank 1 has LOCAL_RANK=0 LOCAL_WORLD_SIZE=2")
    # Two nodes (torchrun's node rank differs): the CUDA-IPC heap cannot span them.
    os.environ.update(GROUP_RANK=str(rank), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    _raises_on_every_rank(r"spans 2 nodes \(ranks by node: \[\[0\], \[1\]\]\).*backend='nvshmem'")
    for name in ("GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        del os.environ[name]
    dist.barrier()


def test_init_checks_backend_and_nodes_across_two_ranks():
    run_ranks(_init_checks, 2)
