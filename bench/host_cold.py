"""Host time of the overlap ops' eager calls up to their first launch, warm and from a cold CPU.

    PYTHONPATH=python python3 bench/host_cold.py [--samples 400]

issue 24's bar times each op from an idle GPU: a host barrier, then the call. On 2 x H200 the matmul + NCCL fallback
row of ``gemm_rs`` lost there (0.92x) while its GPU launches matched the baseline's: the op's Python before its first
launch (``plain_eager``, the plan lookup, ``out``'s check) took 3.2 µs back to back but 18-31 µs when the CPU came
back from a wait (docs/results/2026-11-27-session27.md). This times that Python on the CPU, three ways:

- warm: each call right after an untimed call of the same row;
- sleep: each call after a ``time.sleep(0.001)`` (what a host barrier's wait leaves: on a machine other processes
  load, the core ran someone else's code meanwhile; how cold that leaves it swings with the load, 2-5x between runs
  here);
- evict: each call after writing 64 MiB, twice the L3 cache of the CPU measured here, so the call's code and data
  come from memory (harsher than a sleep, and steadier on a loaded machine).

The rows are interleaved sample by sample (each sample times every row once, in order, each after its own
preparation), so a burst of load hits them alike; each cell is the median (and 90th percentile) of ``--samples``
single calls timed with ``perf_counter_ns`` (``evict``: a quarter as many). The timer pair alone is the first row.

The ops run on one gloo rank of the CPU emulation (``TRITON_INTERPRET=1``, ``init(device="cpu")``); each signature's
first call builds its plan (the interpreter runs once), then the op module's ``_eager_call`` returns where a fused
plan's first launch would come, so those rows time exactly the checks and the lookup. The fallback plans (matmul +
NCCL, built as their builders build them with a stand-in for the group's collective) run to their first launch (the
GEMM's ``torch.mm``, the all-gather), whose stand-ins read the clock. The ``before`` rows are the entries of 2822d24,
before ``PlanCache.eager_plan``, rebuilt from their pieces (``plain_eager`` with ``torch.compiler.is_compiling()``,
``operand_signature`` and ``PlanCache.get``, ``check_out_for``, the previous ``_eager_call`` order up to the first
launch); ``check_out`` now calls ``numel()`` once more per input than then.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

if __name__ == "__main__":  # run as a script only: an import (test_gpu_scripts_import) must not leak it
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402 (after TRITON_INTERPRET)
import torch.distributed as dist  # noqa: E402
from torch._C import _len_torch_dispatch_stack  # noqa: E402

import triton_dist  # noqa: E402
import triton_dist.ops  # noqa: E402
from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops.ag_gemm import op as ag  # noqa: E402
from triton_dist.ops.common.dispatch import operand_signature  # noqa: E402
from triton_dist.ops.common.eager import plain_eager  # noqa: E402
from triton_dist.ops.common.eager_graphs import replays_collective  # noqa: E402
from triton_dist.ops.gemm_rs import op as rs  # noqa: E402

MODES = ("warm", "sleep", "evict")
EVICT_BYTES = 64 << 20
"""What ``evict`` writes before each call: twice the L3 cache of the CPU measured here (32 MiB)."""

_launched: list[int] = []
"""The clock at a fallback plan's first launch (the stand-ins of its GEMM and all-gather append it)."""


# ----------------------------------------------------------------------- the entries before eager_plan (2822d24)


def _plain_eager_before(*tensors: Any) -> bool:
    for tensor in tensors:
        if type(tensor) is not torch.Tensor and isinstance(tensor, torch.Tensor):
            return False
    return not torch.compiler.is_compiling() and _len_torch_dispatch_stack() == 0


def _gemm_rs_before(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> object:
    """``gemm_rs``'s fast path as it was, to the first launch (a fused plan: to its ``_eager_call``, as now)."""
    if _plain_eager_before(a, b) and (out is None or type(out) is torch.Tensor or not isinstance(out, torch.Tensor)):
        plan = None if rs._check_always else rs._plans.get(operand_signature(a, b, None, False))
        if plan is not None:
            if out is not None:
                rs.check_out_for(plan, a, b, out)
            if not isinstance(plan, rs.UnfusedPlan):
                return out
            if isinstance(plan, rs.EmptyPlan):  # the previous _eager_call, in its order
                return plan.run(a, b, out)
            if out is None:
                out = torch.empty((plan.shard, plan.n), dtype=a.dtype, device=a.device)
            if out.numel() == 0 or a.numel() == 0:
                return plan.run(a, b, out)
            if not replays_collective(a.device):
                return plan.run(a, b, out)
    raise AssertionError("the bench's calls are planned and not replayed")


def _ag_gemm_before(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> object:
    """``ag_gemm``'s fast path as it was, to the first launch (a fused plan: to its ``_eager_call``, as now)."""
    if _plain_eager_before(a, b) and (out is None or type(out) is torch.Tensor or not isinstance(out, torch.Tensor)):
        plan = ag._plans.get(operand_signature(a, b, None, False))
        if plan is not None:
            if out is not None:
                ag.check_out_for(plan, a, b, out)
            if not isinstance(plan, ag.UnfusedPlan):
                return out
            if out is None:  # the previous _eager_call, in its order
                out = torch.empty((plan.rows, plan.n), dtype=a.dtype, device=a.device)
            c = out
            phase = None if c.numel() == 0 or a.numel() == 0 or not replays_collective(a.device) else 0
            addresses = (a.data_ptr(), b.data_ptr(), c.data_ptr())
            plan.graphs.launch(addresses, a.device, lambda: plan.run(a, b, out=c), phase)
            return c
    raise AssertionError("the bench's calls are planned")


# --------------------------------------------------------------------------------------------------- the rows


def _fallback_calls(b: torch.Tensor) -> dict[str, Callable[[], object]]:
    """Each op's matmul + NCCL fallback (issue 24's row that loses from idle), before and now, to the first launch:
    the plans as the builders build them, a group's collective replaced by a stand-in, stored under their calls'
    signatures; gemm_rs's first launch is its ``torch.mm`` (a stand-in while the row runs), ag_gemm's the
    all-gather."""
    clock = time.perf_counter_ns
    a_rs, a_ag = torch.randn(16, 16).to(b.dtype), torch.randn(6, 16).to(b.dtype)
    rs_plan = rs.UnfusedPlan(torch.empty(16, 8, dtype=b.dtype), lambda out, partial, options: None, None, 16, 8)
    ag_plan = ag.UnfusedPlan(lambda gathered, a, options: _launched.append(clock()), None, 6, 8, 16)
    for op, a, plan in ((rs, a_rs, rs_plan), (ag, a_ag, ag_plan)):
        signature = operand_signature(a, b, None, False)
        op._plans.get(signature)  # binds the cache to the world
        op._plans._plans[signature] = plan
    mm = torch.mm

    def with_mm_stand_in(call: Callable[[], object]) -> Callable[[], object]:
        def row() -> object:
            torch.mm = lambda *args, **kwargs: _launched.append(clock())  # type: ignore[assignment]
            try:
                return call()
            finally:
                torch.mm = mm

        return row

    return {
        "gemm_rs fallback, to its torch.mm: before": with_mm_stand_in(lambda: _gemm_rs_before(a_rs, b)),
        "gemm_rs fallback, to its torch.mm: now": with_mm_stand_in(lambda: triton_dist.ops.gemm_rs(a_rs, b)),
        "ag_gemm fallback, to its all-gather: before": lambda: _ag_gemm_before(a_ag, b),
        "ag_gemm fallback, to its all-gather: now": lambda: triton_dist.ops.ag_gemm(a_ag, b),
    }


def calls() -> dict[str, Callable[[], object]]:
    """The rows: pieces of the fast path, then each op's eager call to the first launch, before and now."""
    bf16 = torch.bfloat16
    a_rs, b = torch.randn(8, 16).to(bf16), torch.randn(16, 8).to(bf16)
    a_ag = torch.randn(4, 16).to(bf16)
    out_rs, out_ag = torch.empty(8, 8, dtype=bf16), torch.empty(4, 8, dtype=bf16)
    triton_dist.ops.gemm_rs(a_rs, b)  # builds the plans (the interpreter runs once)
    triton_dist.ops.ag_gemm(a_ag, b)
    fallbacks = _fallback_calls(b)
    for op in (rs, ag):  # the fused plans' calls end before their first launch; the fallbacks' run to it
        op._eager_call = lambda plan, a, b, out, op=op, call=op._eager_call: (
            call(plan, a, b, out) if isinstance(plan, op.UnfusedPlan) else out
        )
    rs_plan = rs.plan_for(a_rs, b)
    return {
        "perf_counter_ns pair alone": lambda: None,
        "plain_eager(a, b)": lambda: plain_eager(a_rs, b),
        "operand_signature + PlanCache.get": lambda: rs._plans.get(operand_signature(a_rs, b, None, False)),
        "gemm_rs check_out_for(plan, a, b, out)": lambda: rs.check_out_for(rs_plan, a_rs, b, out_rs),
        "PlanCache.eager_plan(a, b, None)": lambda: rs._plans.eager_plan(a_rs, b, None),
        "PlanCache.eager_plan(a, b, out)": lambda: rs._plans.eager_plan(a_rs, b, out_rs),
        "gemm_rs(a, b): before": lambda: _gemm_rs_before(a_rs, b),
        "gemm_rs(a, b): now": lambda: triton_dist.ops.gemm_rs(a_rs, b),
        "gemm_rs(a, b, out=): before": lambda: _gemm_rs_before(a_rs, b, out_rs),
        "gemm_rs(a, b, out=): now": lambda: triton_dist.ops.gemm_rs(a_rs, b, out=out_rs),
        "ag_gemm(a, b): before": lambda: _ag_gemm_before(a_ag, b),
        "ag_gemm(a, b): now": lambda: triton_dist.ops.ag_gemm(a_ag, b),
        "ag_gemm(a, b, out=): before": lambda: _ag_gemm_before(a_ag, b, out_ag),
        "ag_gemm(a, b, out=): now": lambda: triton_dist.ops.ag_gemm(a_ag, b, out=out_ag),
        **fallbacks,
    }


def timed(rows: dict[str, Callable[[], object]], samples: int, mode: str) -> dict[str, list[int]]:
    """ns per call of each row, ``samples`` times, the rows interleaved: each call right after an untimed call of
    its row (``warm``), after a 1 ms sleep (``sleep``) or after writing ``EVICT_BYTES`` (``evict``). A call that
    reaches a first-launch stand-in is timed to it."""
    clock, sleep = time.perf_counter_ns, time.sleep
    scratch = torch.zeros(EVICT_BYTES // 4, dtype=torch.int32) if mode == "evict" else None
    times: dict[str, list[int]] = {name: [] for name in rows}
    for _ in range(samples):
        for name, call in rows.items():
            if scratch is not None:
                scratch.add_(1)
            elif mode == "sleep":
                sleep(0.001)
            else:
                call()
            _launched.clear()
            start = clock()
            call()
            end = clock()
            times[name].append((_launched[0] if _launched else end) - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=400, help="single calls timed per row and mode")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as directory:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(directory, 'store')}", rank=0, world_size=1)
        try:
            rt.init(heap_size="16M", device="cpu")
            rows = calls()
            results = {
                mode: timed(rows, args.samples // 4 if mode == "evict" else args.samples, mode) for mode in MODES
            }
            print(
                "| host part (bf16, one CPU rank), µs: median / p90 | warm | after a 1 ms sleep | after writing "
                f"{EVICT_BYTES >> 20} MiB |"
            )
            print("|---|---|---|---|")
            for name in rows:
                cells = []
                for mode in MODES:
                    ns = sorted(results[mode][name])
                    cells.append(f"{statistics.median(ns) / 1000:.1f} / {ns[int(0.9 * (len(ns) - 1))] / 1000:.1f}")
                print(f"| {name} | {' | '.join(cells)} |")
            rt.finalize()
        finally:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
