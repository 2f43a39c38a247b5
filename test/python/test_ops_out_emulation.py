"""``out=`` of ``ag_gemm`` and ``gemm_rs``: the result written into the caller's tensor, bit for bit the result of
the same call without ``out``, and every bad ``out`` refused before anything is launched.

On two emulated CPU ranks (``TRITON_INTERPRET=1``, ``triton_dist.init(device="cpu")``, gloo), every path the
emulation can force: ag_gemm's fused kernel (copy-engine producer and push kernel), its cuBLAS path (begin barrier
and double buffers) and NCCL + cuBLAS; gemm_rs's fused kernel, its two-kernel variant, its cuBLAS path (both
producers), its matmul + reduce-scatter fallback and an empty K. Each case draws fresh random operands, runs the call
without ``out``, then with an ``out`` poisoned with NaN (through the planned fast path of the public op, or the
config-forcing entry point), and compares. The dispatcher's path (a dispatch mode active) copies the registered op's
result into ``out``. The bad ``out`` cases (shape, dtype, layout, alignment, overlap, type) raise the op's
``OpInputError`` naming ``out``, and the plan's epoch shows nothing ran.

On the CPU without ranks, with recording stand-ins for the launches: the GPU branches of ag_gemm's plans write into
``out`` and allocate nothing (the fused TMA call's C descriptor is ``out``'s).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from dispatch_recording import DispatchRecording
from emulated_ranks import run_ranks
from triton.tools.tensor_descriptor import TensorDescriptor

from triton_dist.ops.common.errors import OpInputError
from triton_dist.ops.common.outputs import check_out

HEAP = "64M"
Call = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


def _poisoned(shape: tuple[int, int], dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype)


def _compare(got: torch.Tensor, out: torch.Tensor, want: torch.Tensor, reference: torch.Tensor) -> list[str]:
    """What is wrong with a call's result ``got`` given ``out``: not ``out`` itself, not bit for bit ``want`` (the
    same call without ``out``), or ``want`` itself far from torch's ``reference`` (a comparison of two wrong results
    proves nothing)."""
    problems = []
    if got is not out:
        problems.append("the call returned another tensor than out")
    if not torch.equal(out, want):
        nan = int(torch.isnan(out.float()).sum())
        problems.append(f"out differs from the result without out ({nan} NaN left from the poison)")
    if not torch.allclose(want.float(), reference.float(), atol=0.1, rtol=2e-2):
        problems.append("the result without out is far from torch's")
    return problems


def _ag_cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    import triton_dist
    from triton_dist.ops.ag_gemm import op
    from triton_dist.ops.tuning import OverlapConfig

    def run(call: Call, m: int, n: int, k: int, out_first: bool = False) -> list[str]:
        """``call`` without then with ``out`` (``out_first``: with, then without: the first call of a signature
        builds its plan with ``out`` given)."""
        problems = []
        for _ in range(2):  # the second round: every call on a built plan
            a_s = [torch.randn(m, k, generator=gen).to(torch.bfloat16) for _ in range(size)]
            b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
            out = _poisoned((size * m, n))
            if out_first:
                got = call(a_s[rank], b, out)
                want = call(a_s[rank], b, None)
            else:
                want = call(a_s[rank], b, None)
                got = call(a_s[rank], b, out)
            problems += _compare(got, out, want, torch.cat(a_s).float() @ b.float())
        return problems

    def public(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        return triton_dist.ops.ag_gemm(a, b) if out is None else triton_dist.ops.ag_gemm(a, b, out=out)

    def forced(config: OverlapConfig) -> Call:
        return lambda a, b, out: op.ag_gemm_impl(a, b, config=config, out=out)[0]

    def gathered(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        c, all_a = triton_dist.ops.ag_gemm(a, b, return_gathered=True, out=out)
        return c if torch.equal(all_a[rank * a.shape[0] : (rank + 1) * a.shape[0]], a) else torch.zeros_like(c)

    def dispatched(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        """Under a dispatch mode: the registered op, then (with out) one copy into out."""
        with DispatchRecording() as recording:
            got = triton_dist.ops.ag_gemm(a, b, out=out)
        copied = "aten.copy_.default" in recording.ops
        return got if copied == (out is not None) else torch.zeros_like(got)

    def cublas(double: bool) -> list[str]:
        default, op.CUBLAS_DOUBLE_BUFFER = op.CUBLAS_DOUBLE_BUFFER, double
        try:
            return run(forced(OverlapConfig(backend="cublas")), 3 + double, 8, 16)
        finally:
            op.CUBLAS_DOUBLE_BUFFER = default

    return {
        "ag_gemm/fused_copy_engine": lambda: run(public, 5, 8, 16),
        "ag_gemm/fused_first_call_with_out": lambda: run(public, 6, 8, 16, out_first=True),
        "ag_gemm/fused_push_kernel": lambda: run(
            forced(dataclasses.replace(op.EMULATED_CONFIG, producer="sm", push_ctas=2)), 7, 8, 16
        ),
        "ag_gemm/return_gathered": lambda: run(gathered, 5, 8, 16),
        "ag_gemm/cublas_barrier": lambda: cublas(False),
        "ag_gemm/cublas_double_buffers": lambda: cublas(True),
        "ag_gemm/nccl": lambda: run(forced(OverlapConfig(backend="nccl")), 5, 8, 16),
        "ag_gemm/dispatcher": lambda: run(dispatched, 5, 8, 16),
    }


def _rs_cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    import triton_dist
    from triton_dist.ops.gemm_rs import FALLBACK, op

    def run(call: Call, m: int, n: int, k: int, out_first: bool = False) -> list[str]:
        problems = []
        for _ in range(2):
            a_s = [torch.randn(m * size, k, generator=gen).to(torch.bfloat16) for _ in range(size)]
            b_s = [torch.randn(k, n, generator=gen).to(torch.bfloat16) for _ in range(size)]
            out = _poisoned((m, n))
            if out_first:
                got = call(a_s[rank], b_s[rank], out)
                want = call(a_s[rank], b_s[rank], None)
            else:
                want = call(a_s[rank], b_s[rank], None)
                got = call(a_s[rank], b_s[rank], out)
            reference = sum(a.float() @ b.float() for a, b in zip(a_s, b_s, strict=True))
            problems += _compare(got, out, want, reference[rank * m : (rank + 1) * m])
        return problems

    def public(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        return triton_dist.ops.gemm_rs(a, b) if out is None else triton_dist.ops.gemm_rs(a, b, out=out)

    def forced(config: Any) -> Call:
        return lambda a, b, out: op.gemm_rs_with(a, b, config, out=out)

    def dispatched(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        with DispatchRecording() as recording:
            got = triton_dist.ops.gemm_rs(a, b, out=out)
        copied = "aten.copy_.default" in recording.ops
        return got if copied == (out is not None) else torch.zeros_like(got)

    emulated = op.EMULATED_CONFIG
    return {
        "gemm_rs/fused": lambda: run(public, 4, 8, 16),
        "gemm_rs/fused_first_call_with_out": lambda: run(public, 5, 8, 16, out_first=True),
        "gemm_rs/two_kernels": lambda: run(forced(dataclasses.replace(emulated, fused=False)), 4, 8, 16),
        "gemm_rs/cublas_copy_engine": lambda: run(forced(dataclasses.replace(emulated, gemm="cublas")), 3, 8, 16),
        "gemm_rs/cublas_direct": lambda: run(
            forced(dataclasses.replace(emulated, gemm="cublas", producer="direct")), 3, 8, 16
        ),
        "gemm_rs/fallback": lambda: run(forced(FALLBACK), 3, 8, 16),
        "gemm_rs/empty_k": lambda: run(public, 3, 8, 0),
        "gemm_rs/dispatcher": lambda: run(dispatched, 4, 8, 16),
    }


def _refusals(rank: int, size: int) -> dict[str, list[str]]:
    """Every bad ``out`` of both ops on a built plan (the fused kernel's, whose epoch would move with a launch),
    then one on a signature's first call: each an ``OpInputError`` naming ``out`` and the problem."""
    import triton_dist
    from triton_dist.ops.ag_gemm import op as ag
    from triton_dist.ops.gemm_rs import op as rs

    bf16 = torch.bfloat16
    m, n, k = 4, 8, 16
    storage = torch.zeros(m * k + size * m * n + 8, dtype=bf16)
    a = storage[: m * k].view(m, k)
    b = torch.zeros(k, n, dtype=bf16)
    rs_a = torch.zeros(size * m, k, dtype=bf16)
    record: dict[str, list[str]] = {}
    for name, call, rows, epoch in (
        ("ag_gemm", lambda out: triton_dist.ops.ag_gemm(a, b, out=out), size * m, lambda: ag.plan_for(a, b)),
        ("gemm_rs", lambda out: triton_dist.ops.gemm_rs(rs_a, b, out=out), m, lambda: rs.plan_for(rs_a, b)),
    ):
        call(None)  # builds the plan
        before = epoch().workspace.epoch.clone()
        bad = {
            "shape": (torch.zeros(rows + 1, n, dtype=bf16), r"out has shape \[\d+, 8\] \(the result's is"),
            "dtype": (torch.zeros(rows, n, dtype=torch.float16), "out has dtype torch.float16"),
            "layout": (torch.zeros(n, rows, dtype=bf16).t(), "out has strides .*must be contiguous"),
            "alignment": (torch.zeros(rows * n + 1, dtype=bf16)[1:].view(rows, n), "out starts 2 bytes past"),
            "type": ([[0.0] * n] * rows, "out must be a torch.Tensor, got list"),
        }
        if name == "ag_gemm":  # out over a's own memory
            bad["overlap"] = (storage[m * k - 8 :][: rows * n].view(rows, n), "out overlaps the input a")
        for problem, (out, message) in bad.items():
            try:
                call(out)
                record[f"{name}/refuses_{problem}"] = ["no error"]
            except OpInputError as error:
                found = re.search(message, str(error)) and str(error).startswith(f"{name}: out")
                record[f"{name}/refuses_{problem}"] = [] if found else [f"the error says {error}"]
        if not torch.equal(epoch().workspace.epoch, before):
            record[f"{name}/refusals_launched"] = ["the plan's epoch moved: a refused call launched"]
    try:  # a signature's first call (the plan is built, then out refused)
        triton_dist.ops.gemm_rs(torch.zeros(size * 2, k, dtype=bf16), b, out=torch.zeros(3, n, dtype=bf16))
        record["gemm_rs/refuses_on_the_first_call"] = ["no error"]
    except OpInputError as error:
        record["gemm_rs/refuses_on_the_first_call"] = [] if "out has shape [3, 8]" in str(error) else [str(error)]
    return record


def _worker() -> dict[str, list[str]]:
    import triton_dist
    import triton_dist.ops  # noqa: F401 (triton_dist.ops.<op> below)

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    gen = torch.Generator().manual_seed(2024)  # every rank draws every rank's inputs alike
    record: dict[str, list[str]] = {}
    for build in (_ag_cases, _rs_cases):
        for name, case in build(rank, size, gen).items():
            try:
                record[name] = case()
            except Exception as error:  # noqa: BLE001 (recorded for the test)
                record[name] = [f"{type(error).__name__}: {error}"]
    record.update(_refusals(rank, size))
    return record


@pytest.fixture(scope="module")
def records() -> list[dict[str, list[str]]]:
    return run_ranks(_worker, 2, heap_size=HEAP).results


@pytest.mark.parametrize("op", ["ag_gemm", "gemm_rs"])
def test_out_holds_the_result_and_bad_outs_are_refused(records: list[dict[str, list[str]]], op: str) -> None:
    for rank, record in enumerate(records):
        cases = {name: problems for name, problems in record.items() if name.startswith(f"{op}/")}
        assert len(cases) >= 13, f"rank {rank} ran only {sorted(cases)}"
        failed = {name: problems for name, problems in cases.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


def test_check_out_names_each_problem() -> None:
    """The shared check on plain CPU tensors: a good ``out`` passes; each problem is named in the op's error."""
    a = torch.zeros(4, 8)
    good = torch.empty(6, 5)
    check_out("op", good, (6, 5), torch.float32, a.device, (("a", a),), OpInputError)
    check_out("op", a[1:3], (2, 8), torch.float32, a.device, (("a", a),), OpInputError, addresses=False)  # a copy: fine
    with pytest.raises(OpInputError, match=r"op: out has strides \[1, 8\] \(it must be contiguous\)"):
        check_out("op", a.t(), (8, 4), torch.float32, a.device, (), OpInputError, addresses=False)
    with pytest.raises(OpInputError, match=r"op: out has shape \[6, 5\] \(the result's is \[5, 6\]\), dtype"):
        check_out("op", good, (5, 6), torch.float16, a.device, (), OpInputError)
    with pytest.raises(OpInputError, match="op: out overlaps the input a"):
        check_out("op", a[3:].view(2, 4), (2, 4), torch.float32, a.device, (("b", good), ("a", a[:, 6:])), OpInputError)
    beside = torch.zeros(16)
    check_out("op", beside[8:], (8,), torch.float32, a.device, (("a", beside[:8]),), OpInputError)  # adjacent: fine
    empty = torch.empty(0, 5)
    check_out("op", empty, (0, 5), torch.float32, a.device, (("a", a),), OpInputError)


# ---------------------------------------------------------------- the GPU branches, with recording stand-ins


class _Launch:
    def __init__(self, name: str, log: list[Any]) -> None:
        self.name, self.log = name, log

    def launch_on(self, stream: int, *leading: Any) -> None:
        self.log.append((self.name, *leading))


class _StreamOps:
    def copy(self, destination: int, source: int, nbytes: int, stream: int) -> None:
        pass

    def order(self, name: str, first: int, then: int) -> None:
        pass


def _ag_workspace(w: int, m_local: int, k: int, recv: torch.Tensor | None = None) -> Any:
    ag = importlib.import_module("triton_dist.ops.ag_gemm.op")
    return ag.Workspace(
        recv=torch.empty(w * m_local, k, dtype=torch.bfloat16) if recv is None else recv,
        flags=torch.zeros(8, dtype=torch.int32),
        epoch=torch.zeros(1, dtype=torch.int32),
        barrier=torch.zeros(w, dtype=torch.int32),
        peer_recv={},
        peer_flags={},
    )


def test_a_fused_tma_call_writes_c_through_a_descriptor_of_out(monkeypatch) -> None:
    """The fused TMA plan's GPU call with ``out``: no allocation, the GEMM's C descriptor is ``out``'s (per out
    address, from the plan's descriptor cache), and the call returns ``out``; without ``out`` a new C."""
    ag = importlib.import_module("triton_dist.ops.ag_gemm.op")
    tuning = importlib.import_module("triton_dist.ops.tuning")
    monkeypatch.setattr(ag, "current_raw_stream", lambda index: 7)
    log: list[Any] = []
    w, m_local, k, n = 2, 16, 32, 64
    workspace = _ag_workspace(w, m_local, k)
    a_block, b_block, c_block = [16, 32], [32, 64], [16, 32]
    plan = ag.FusedPlan(
        config=tuning.OverlapConfig(), workspace=workspace, rows=w * m_local, n=n, begin=_Launch("begin", []),
        gemm=_Launch("gemm", log), use_tma=True, a_block=a_block, b_block=b_block, c_block=c_block,
        recv_desc=TensorDescriptor.from_tensor(workspace.recv, a_block), push=None, copies=(),
        side=SimpleNamespace(cuda_stream=9), stream_ops=_StreamOps(), no_comm=False, flag_count=w, first_copies=w - 1,
    )  # fmt: skip
    a, b = torch.randn(m_local, k).to(torch.bfloat16), torch.randn(k, n).to(torch.bfloat16)
    outs = [torch.empty(w * m_local, n, dtype=torch.bfloat16) for _ in range(2)]
    for out in (*outs, outs[0]):
        with DispatchRecording() as recording:
            got = plan.run(a, b, out)
        assert got is out and recording.ops == [], f"with out, no dispatcher op at all: {recording.ops}"
        c_desc = log[-1][-1]
        assert c_desc.base.data_ptr() == out.data_ptr() and list(c_desc.shape) == [w * m_local, n]
        assert c_desc.block_shape == c_block
    assert log[0][-1] is log[2][-1], "the same out: the cached descriptor"
    with DispatchRecording() as recording:
        fresh = plan.run(a, b)
    assert recording.ops == ["aten.empty.memory_format"] and fresh.data_ptr() not in {o.data_ptr() for o in outs}


@pytest.mark.parametrize("double", [False, True])
def test_a_cublas_path_call_writes_each_shard_into_out(monkeypatch, double: bool) -> None:
    """The cuBLAS path's GPU call with ``out`` (begin barrier, or double buffers' ``"kernels"`` scheme): no
    allocation, every shard's GEMM writes its rows of ``out``, which the call returns, equal to torch's product."""
    ag = importlib.import_module("triton_dist.ops.ag_gemm.op")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: None)  # a CPU tensor's device.index
    monkeypatch.setattr(ag, "current_raw_stream", lambda index: 7)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    w, rank, m_local, k, n = 2, 0, 4, 16, 8
    gen = torch.Generator().manual_seed(5)
    shards = [torch.randn(m_local, k, generator=gen).to(torch.bfloat16) for _ in range(w)]
    recv = torch.cat(shards)
    log: list[Any] = []
    parts: dict[str, Any] = {}
    if double:
        buffers = torch.stack([recv, recv])
        parts = {
            "double": ag.DoubleBuffer(
                recv=buffers, flags=torch.zeros(w, dtype=torch.int32), send_epoch=torch.ones(1, dtype=torch.int32),
                recv_epoch=torch.ones(1, dtype=torch.int32), peer_recv={}, peer_flags={}, flags_by="kernels",
            ),
            "double_waits": ((1, 1, _Launch("wait", log), (buffers[0][m_local:], buffers[1][m_local:])),),
            "advance": _Launch("advance", log),
        }  # fmt: skip
    plan = ag.CublasPlan(
        workspace=_ag_workspace(w, m_local, k, recv), rank=rank, m_local=m_local, rows=w * m_local, n=n,
        begin=_Launch("begin", log), waits=((1, _Launch("wait", log), recv[m_local:]),), copies=(),
        side=SimpleNamespace(cuda_stream=9), stream_ops=_StreamOps(), **parts,
    )  # fmt: skip
    b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
    out = _poisoned((w * m_local, n))
    with DispatchRecording() as recording:
        got = plan.run(shards[rank], b, out)
    assert got is out
    assert "aten.empty.memory_format" not in recording.ops, recording.ops
    assert recording.ops.count("aten.mm.out") == w
    torch.testing.assert_close(out.float(), recv.float() @ b.float(), atol=2e-2, rtol=2e-2)
