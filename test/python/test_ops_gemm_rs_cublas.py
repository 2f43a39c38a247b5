"""gemm_rs's cuBLAS path on the CPU: the planned call's sequence of dispatcher ops and launches per producer
(issue 24: host µs per call), and the path itself on four emulated ranks, several calls in a row.

A "direct" call: the output's allocation, A split into its row shards, the begin kernel, per peer the wait for its
ack, ``aten.mm.out`` into that peer's receive slot and its flag kernel, ``aten.mm.out`` of the own rows, the wait
for the peers' flags, the reduction. With ``merged_sync`` the begin kernel also waits for the acks and the
reduction for the flags: 2 + W - 1 launches, W GEMMs.

A "ce" call: the same allocation and split, the begin kernel, per peer ``aten.mm.out`` into the send buffer, the
fork, and on the side stream the ack wait, the copy into the peer's slot and the flag; ``aten.mm.out`` of the own
rows, the wait kernel, the reduction, the join.

A "pull" call (``CUBLAS_PULL``): the output's allocation, the begin kernel (acks), ONE ``aten.mm.out`` of all M rows
into the symmetric partial, the kernel that flags, waits and pulls: on two emulated ranks with one rank's reads of
its peer's partial slowed down (so the fast rank's next GEMM would overwrite what the slow one still reads, but for
the acks), and on four.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from dispatch_recording import DispatchRecording
from dl_compile import assembly, compile_kernel, context_is_defined_and_used, need_library
from emulated_ranks import run_ranks

op = importlib.import_module("triton_dist.ops.gemm_rs.op")
kernels = importlib.import_module("triton_dist.ops.gemm_rs.kernels")

MAIN, SIDE = 7, 9


class _Launch:
    """A stand-in launch plan: records its name, stream and leading arguments into ``log``."""

    def __init__(self, name: str, log: list[Any]) -> None:
        self.name, self.log = name, log

    def launch_on(self, stream: int, *leading: object) -> None:
        self.log.append((self.name, stream, *leading))


class _StreamOps:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def copy(self, destination: int, source: int, nbytes: int, stream: int) -> None:
        self.log.append(("copy", stream, destination, source, nbytes))

    def order(self, name: str, first: int, then: int) -> None:
        self.log.append(("order", name, first, then))


def _plan(producer: str, log: list[Any], world_size: int, rank: int, shard: int, n: int, merged: bool = False) -> Any:
    """A ``CublasPlan`` of CPU tensors with recording launches: peer p's receive buffer is ``slots[p]``."""
    dtype = torch.bfloat16
    slots = {p: torch.full((world_size - 1, shard, n), float("nan"), dtype=dtype) for p in range(world_size)}
    workspace = op.CublasWorkspace(
        recv=slots[rank],
        flags=torch.zeros(world_size, dtype=torch.int32),
        ack=torch.zeros(world_size, dtype=torch.int32),
        epoch=torch.zeros(1, dtype=torch.int32),
        send=torch.full((world_size - 1, shard, n), float("nan"), dtype=dtype),
        own=torch.full((shard, n), float("nan"), dtype=dtype),
        peer_recv={p: slots[p] for p in range(world_size) if p != rank},
    )
    sends = []
    for s in range(1, world_size):
        peer = (rank + s) % world_size
        slot = slots[peer][(rank - peer - 1) % world_size]
        destination = slot if producer == "direct" else workspace.send[s - 1]
        wait_ack = None if merged else _Launch(f"wait_ack {peer}", log)
        copy = (slot.data_ptr(), workspace.send[s - 1].data_ptr(), slot.numel() * slot.element_size())
        sends.append(op._Send(peer, destination, _Launch(f"flag {peer}", log), wait_ack, copy, slot))
    return op.CublasPlan(
        workspace=workspace,
        me=rank,
        world_size=world_size,
        shard=shard,
        n=n,
        producer=producer,
        begin=_Launch("begin", log),
        sends=tuple(sends),
        wait=None if merged else _Launch("wait", log),
        reduce=_Launch("reduce", log),
        side=SimpleNamespace(cuda_stream=SIDE),
        stream_ops=_StreamOps(log),
    )


def _names(ops: list[Any]) -> list[str]:
    return [call if isinstance(call, str) else call[0] for call in ops]


@pytest.mark.parametrize("merged", [False, True])
@pytest.mark.parametrize("world_size,rank", [(2, 0), (3, 2)])
def test_a_direct_call_is_begin_gemms_and_flags_then_one_reduction(monkeypatch, world_size, rank, merged) -> None:
    """Per call: allocation, one split, the begin kernel, per peer (rank + 1, rank + 2, ...) its ack wait (not with
    merged_sync), its GEMM into the peer's slot then its flag, the own GEMM, the wait kernel (not with merged_sync),
    the reduction with the output's address; every launch on the current stream; nothing on a side stream, no copy.
    Each GEMM wrote its rows' product into its slot."""
    monkeypatch.setattr(op, "current_raw_stream", lambda index: MAIN)
    shard, k, n = 3, 8, 5
    recording = DispatchRecording()
    plan = _plan("direct", recording.ops, world_size, rank, shard, n, merged)
    gen = torch.Generator().manual_seed(11)
    for _ in range(2):  # the plan is reused: the same sequence again
        recording.ops.clear()
        a = torch.randn(world_size * shard, k, generator=gen).to(torch.bfloat16)
        b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
        for send in plan.sends:
            send.destination.fill_(float("nan"))
        plan.workspace.own.fill_(float("nan"))
        with recording:
            out = plan.run(a, b)
        peers = [(rank + s) % world_size for s in range(1, world_size)]
        per_peer = ("aten.mm.out", "flag {}") if merged else ("wait_ack {}", "aten.mm.out", "flag {}")
        assert _names(recording.ops) == (
            ["aten.empty.memory_format", "aten.split.Tensor", "begin"]
            + [name.format(peer) for peer in peers for name in per_peer]
            + ["aten.mm.out"]
            + ([] if merged else ["wait"])
            + ["reduce"]
        ), recording.ops
        launches = [call for call in recording.ops if isinstance(call, tuple)]
        assert all(call[1] == MAIN for call in launches), "every launch on the current stream"
        assert launches[-1] == ("reduce", MAIN, out.data_ptr()), "the reduction writes the returned output"
        assert out.shape == (shard, n) and out.dtype == a.dtype
        for send in plan.sends:
            rows = a[send.peer * shard : (send.peer + 1) * shard]
            assert send.destination is send.slot, "direct: the GEMM writes into the peer's receive slot"
            torch.testing.assert_close(send.slot, rows @ b)
        torch.testing.assert_close(plan.workspace.own, a[rank * shard : (rank + 1) * shard] @ b)


def test_a_ce_call_keeps_its_side_stream_and_separate_wait(monkeypatch) -> None:
    """Per call: allocation, split, begin, per peer its GEMM into the send buffer, the fork, the ack wait, the copy
    into the peer's slot and the flag on the side stream; the own GEMM, the wait kernel, the reduction, the join."""
    monkeypatch.setattr(op, "current_raw_stream", lambda index: MAIN)
    world_size, rank, shard, k, n = 3, 1, 2, 4, 6
    recording = DispatchRecording()
    plan = _plan("ce", recording.ops, world_size, rank, shard, n)
    a = torch.randn(world_size * shard, k).to(torch.bfloat16)
    b = torch.randn(k, n).to(torch.bfloat16)
    with recording:
        out = plan.run(a, b)
    peers = [(rank + s) % world_size for s in range(1, world_size)]
    per_peer = [
        name
        for peer in peers
        for name in ("aten.mm.out", "order", f"wait_ack {peer}", "copy", f"flag {peer}")
    ]  # fmt: skip
    assert _names(recording.ops) == (
        ["aten.empty.memory_format", "aten.split.Tensor", "begin"]
        + per_peer
        + ["aten.mm.out", "wait", "reduce", "order"]
    ), recording.ops
    side = [call for call in recording.ops if isinstance(call, tuple) and call[0].startswith(("wait_ack", "flag"))]
    assert all(call[1] == SIDE for call in side), "acks, copies and flags on the side stream"
    copies = [call[2:] for call in recording.ops if isinstance(call, tuple) and call[0] == "copy"]
    assert copies == [send.copy for send in plan.sends]
    assert recording.ops[-2] == ("reduce", MAIN, out.data_ptr())
    for s, send in enumerate(plan.sends):
        assert send.destination.data_ptr() == plan.workspace.send[s].data_ptr(), "ce: into the send buffer"
        torch.testing.assert_close(send.destination, a[send.peer * shard : (send.peer + 1) * shard] @ b)


def test_a_pull_call_is_begin_one_gemm_then_the_pulling_reduction(monkeypatch) -> None:
    """Per call: allocation, the begin kernel, ONE ``aten.mm.out`` of all M rows into the partial, the reduction with
    the output's address; all on the current stream; no split of A, no copy, no side stream."""
    monkeypatch.setattr(op, "current_raw_stream", lambda index: MAIN)
    m, k, n = 6, 8, 5
    log: list[Any] = []
    recording = DispatchRecording()
    workspace = op.PullWorkspace(
        partial=torch.full((m, n), float("nan"), dtype=torch.bfloat16),
        flags=torch.zeros(3, dtype=torch.int32),
        ack=torch.zeros(3, dtype=torch.int32),
        epoch=torch.zeros(1, dtype=torch.int32),
    )
    plan = op.CublasPullPlan(workspace, m // 3, n, _Launch("begin", log), _Launch("reduce", log), emulated=False)
    recording.ops = log
    gen = torch.Generator().manual_seed(12)
    for _ in range(2):  # the plan is reused: the same sequence again
        log.clear()
        workspace.partial.fill_(float("nan"))
        a = torch.randn(m, k, generator=gen).to(torch.bfloat16)
        b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
        with recording:
            out = plan.run(a, b)
        assert _names(log) == ["aten.empty.memory_format", "begin", "aten.mm.out", "reduce"], log
        assert log[1] == ("begin", MAIN) and log[-1] == ("reduce", MAIN, out.data_ptr())
        assert out.shape == (m // 3, n) and out.dtype == a.dtype
        torch.testing.assert_close(workspace.partial, a @ b)


@pytest.mark.parametrize("target_name", ["sm_90", "gfx942"])
def test_the_pull_reduction_compiles_with_its_flags_waits_and_peer_loads(target_name: str) -> None:
    """The "pull" producer's kernel for two and three ranks: its flags sent with a system-scope release, the peers'
    flags awaited with acquire, then 16-byte loads of the own shard and of every peer's (W loads per block)."""
    need_library(target_name)
    for world in (2, 3):
        asm = assembly(
            compile_kernel(
                kernels._cublas_pull_reduce_kernel,
                {"out_ptr": "*bf16", "partial_ptr": "*bf16", "flags_ptr": "*i32", "epoch_ptr": "*i32", "numel": "i32"},
                target_name,
                constexprs={"WORLD": world, "BLOCK": op.PULL_REDUCE_BLOCK},
                aligned=("out_ptr", "partial_ptr", "numel"),
                num_warps=8,
            ),
            target_name,
        )
        assert context_is_defined_and_used(asm, target_name)
        if target_name == "sm_90":
            assert "ld.acquire.sys" in asm or "ld.global.acquire.sys" in asm, "waits with system-scope acquire"
            assert "release.sys" in asm, "flags sent with a system-scope release"
            loads = len(re.findall(r"ld\.global(?:\.nc)?\.v4", asm))
            assert loads >= world, f"16-byte loads of the own and {world - 1} peers' shards, got {loads}"


# ----------------------------------------------------------------------------------------------------------------
# Two emulated ranks, the pull producer with uneven timing; four ranks, three calls per producer (the slots reused,
# the acks and flags of three epochs)


PULL_SLOW_S = 0.3
"""How long the slow rank of the pull test sleeps before each read of its peer's partial (``dl.symm_at``)."""


def _pull_uneven_worker() -> list[str]:
    """Four pull calls on two ranks, the rank ``call % 2`` slowed down in its reads of the peer's partial: its peer
    finishes first and starts the next call, whose GEMM would overwrite the partial still being read but for the
    begin kernel's wait for the acks. Fresh inputs, a NaN-poisoned ``out``, a shard of three reduction blocks (three
    programs); the problems found (empty: every call matched torch, and the epochs, flags and acks are as expected)."""
    import triton_dist
    from triton_dist.language import _primitive
    from triton_dist.ops.gemm_rs import CUBLAS_PULL
    from triton_dist.ops.gemm_rs.op import PULL_REDUCE_BLOCK, CublasPullPlan, gemm_rs_with, plan_for

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    slow = [False]
    backend = _primitive.interpreter_backend()
    assert backend is not None

    def slowed(name: str, fn: Any, args: tuple[Any, ...], kwargs: Any) -> Any:
        if slow[0] and name == "dl.symm_at":
            time.sleep(PULL_SLOW_S)
        return backend(name, fn, args, kwargs)

    _primitive.register_interpreter_backend(slowed)
    gen = torch.Generator().manual_seed(99)  # every rank draws every rank's inputs alike
    m, n, k = 2, PULL_REDUCE_BLOCK + 8, 4  # a shard of 2 * n elements: three blocks
    problems: list[str] = []
    calls = 4
    for call in range(calls):
        slow[0] = call % size == rank
        a_s = [torch.randn(m * size, k, generator=gen).to(torch.bfloat16) for _ in range(size)]
        b_s = [torch.randn(k, n, generator=gen).to(torch.bfloat16) for _ in range(size)]
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
        got = gemm_rs_with(a_s[rank], b_s[rank], CUBLAS_PULL, out=out)
        want = sum(a.float() @ b.float() for a, b in zip(a_s, b_s, strict=True))[rank * m : (rank + 1) * m]
        if got is not out:
            problems.append(f"call {call}: out not returned")
        if torch.isnan(out.float()).any() or not torch.allclose(out.float(), want, atol=0.1, rtol=2e-2):
            problems.append(f"call {call}: max abs error {(out.float() - want).abs().max().item():.3g}")
    _primitive.register_interpreter_backend(backend)
    plan = plan_for(a_s[rank], b_s[rank], CUBLAS_PULL)
    assert isinstance(plan, CublasPullPlan)
    ws, peer = plan.workspace, 1 - rank
    state = (int(ws.epoch.item()), int(ws.flags[peer].item()), int(ws.ack[peer].item()), plan.reduce.grid)
    if state != (calls, calls, calls - 1, (3, 1, 1)):
        problems.append(f"(epoch, peer's flag, peer's ack, grid) {state}, want {(calls, calls, calls - 1, (3, 1, 1))}")
    return problems


def test_pull_matches_torch_on_two_ranks_with_one_rank_slowed_each_call() -> None:
    for rank, problems in enumerate(run_ranks(_pull_uneven_worker, 2, heap_size="8M").results):
        assert not problems, f"rank {rank}: {problems}"


def _four_rank_worker() -> dict[str, list[str]]:
    """This rank's problems per producer (empty: every call matched torch); the plan's reduction grid too."""
    import triton_dist
    from triton_dist.ops.gemm_rs.op import EMULATED_CONFIG, CublasPlan, CublasPullPlan, gemm_rs_with, plan_for

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    gen = torch.Generator().manual_seed(4321)  # every rank draws every rank's inputs alike
    record: dict[str, list[str]] = {}
    for producer in ("direct", "direct merged", "ce", "pull"):
        merged = producer == "direct merged"
        config = dataclasses.replace(EMULATED_CONFIG, gemm="cublas", producer=producer.split()[0], merged_sync=merged)
        problems: list[str] = []
        m, n, k = 3, 5, 4
        for call in range(3):
            a_s = [torch.randn(m * size, k, generator=gen).to(torch.bfloat16) for _ in range(size)]
            b_s = [torch.randn(k, n, generator=gen).to(torch.bfloat16) for _ in range(size)]
            out = gemm_rs_with(a_s[rank], b_s[rank], config)
            want = sum(a.float() @ b.float() for a, b in zip(a_s, b_s, strict=True))[rank * m : (rank + 1) * m]
            if torch.isnan(out.float()).any() or not torch.allclose(out.float(), want, atol=0.1, rtol=2e-2):
                problems.append(f"call {call}: max abs error {(out.float() - want).abs().max().item():.3g}")
        plan = plan_for(a_s[rank], b_s[rank], config)
        assert isinstance(plan, CublasPlan | CublasPullPlan)
        # One workspace per shape for the push producers, calls in this order; the pull producer's own.
        epochs = {"direct": 3, "direct merged": 6, "ce": 9, "pull": 3}[producer]
        if int(plan.workspace.epoch.item()) != epochs:
            problems.append(f"epoch {int(plan.workspace.epoch.item())} after {epochs} calls on this workspace")
        if merged and (plan.wait is not None or plan.reduce.grid != (1, 1, 1)):
            problems.append(f"merged: wait {plan.wait}, reduction grid {plan.reduce.grid} (one block: 1 program)")
        record[producer] = problems
    return record


def test_every_producer_matches_torch_on_four_ranks_three_calls_in_a_row() -> None:
    for rank, record in enumerate(run_ranks(_four_rank_worker, 4, heap_size="8M").results):
        assert set(record) == {"direct", "direct merged", "ce", "pull"}
        assert not any(record.values()), f"rank {rank}: {record}"
