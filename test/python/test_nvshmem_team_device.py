"""torch's NVSHMEM team manager and ``triton_dist.init(backend="nvshmem")``, on the CPU; and the NVSHMEM transport
probe's runs, which must never outlive their time limit.

torch keeps one NVSHMEM team manager per process, bound to the first device a rendezvous names; a later rendezvous on
another device fails with "Detected use of TeamManager on multiple devices". ``symm_mem.empty(..., device="cuda")``
(no index) followed by ``rendezvous`` binds it to an index-less device, so the heap's rendezvous on ``cuda:N`` then
fails: test/gpu/probe_nvshmem_transports.py's first worker did exactly that. ``init`` must say so on every rank, even
when only one rank was refused (the others would otherwise wait for it in the next collective).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest
import torch
from test_runtime_symm_mem_mapping import FakeSymmetricMemory
from test_runtime_world import run_ranks
from torch.distributed import _symmetric_memory as symm_mem

import triton_dist.runtime as rt
from triton_dist.runtime.heap import nvshmem

ROOT = Path(__file__).resolve().parents[2]
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


# --- the probe's runs ----------------------------------------------------------------------------------------------


def _probe_module() -> object:
    path = ROOT / "test" / "gpu" / "probe_nvshmem_transports.py"
    spec = importlib.util.spec_from_file_location("_probe_nvshmem_transports_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def test_probe_runs_are_killed_with_every_rank_at_their_limit(tmp_path: Path) -> None:
    probe = _probe_module()
    # Each rank prints its rank and pid, then sleeps far past the limit; one also starts a child of its own.
    script = (
        "import os, subprocess, sys, time\n"
        "rank = int(os.environ['RANK'])\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']) if rank == 1 else None\n"
        "print('PROBE rank', rank, os.environ['LOCAL_RANK'], os.environ['WORLD_SIZE'], os.getpid(),\n"
        "      child.pid if child else 0, flush=True)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    code, outputs = probe.run_ranks([sys.executable, "-c", script], 2, timeout=3.0, env=dict(os.environ))  # type: ignore[attr-defined]
    took = time.monotonic() - start
    assert code is None, "a run past its limit reports a timeout"
    assert took < 10, f"the run took {took:.1f} s for a 3 s limit"
    pids = []
    for rank, output in enumerate(outputs):
        fields = next(line.split() for line in output.splitlines() if line.startswith("PROBE rank"))
        assert fields[2:5] == [str(rank), str(rank), "2"], output
        pids += [int(fields[5]), int(fields[6])]
    time.sleep(0.2)
    assert not [pid for pid in pids if pid and _alive(pid)], "every rank and its children are gone"

    # A rank that fails ends the run after the grace period, not at the limit.
    failing = "import os, sys, time\nif os.environ['RANK'] == '0': sys.exit(3)\ntime.sleep(60)\n"
    start = time.monotonic()
    code, _ = probe.run_ranks([sys.executable, "-c", failing], 2, timeout=30.0, env=dict(os.environ), grace=1.0)  # type: ignore[attr-defined]
    assert code == 3 and time.monotonic() - start < 10
