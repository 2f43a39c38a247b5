"""Host time of the overlap ops' eager fast path up to the first launch, warm and from a cold CPU.

    PYTHONPATH=python python3 bench/host_cold.py [--samples 200] [--markdown]

issue 24's bar times each op from an idle GPU: a host barrier, then the call. On 2 x H200 the matmul + NCCL fallback
row of ``gemm_rs`` lost there (0.92x) while its GPU launches matched the baseline's: the op's Python before its first
launch (``plain_eager``, the plan lookup, ``out``'s check) took 3.2 µs back to back but 18-31 µs when the CPU came
back from a wait (docs/results/2026-11-27-session27.md). This times that Python on the CPU, both ways:

- warm: each call right after the previous one;
- cold: each call 1 ms after a ``time.sleep(0.001)`` (caches, branch predictors and the core's clock go cold, as
  during a host barrier's wait).

Each row is the median (and 90th percentile) over ``--samples`` single calls timed with ``perf_counter_ns``
(the timer pair alone is the first row). The ops run on one gloo rank of the CPU emulation (``TRITON_INTERPRET=1``,
``init(device="cpu")``); each signature's first call builds its plan (and runs the interpreter once), then the
op module's ``_eager_call`` (everything from the first allocation and launch on) is replaced by one that returns at
once, so the whole-call rows time exactly the checks and the lookup before the first launch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402 (after TRITON_INTERPRET)
import torch.distributed as dist  # noqa: E402

import triton_dist  # noqa: E402
import triton_dist.ops  # noqa: E402
from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops.ag_gemm import op as ag  # noqa: E402
from triton_dist.ops.common.dispatch import operand_signature  # noqa: E402
from triton_dist.ops.common.eager import plain_eager  # noqa: E402
from triton_dist.ops.gemm_rs import op as rs  # noqa: E402

MODES = ("warm", "sleep", "evict")
EVICT_BYTES = 64 << 20
"""What ``evict`` writes before each call: twice the L3 cache of the CPU measured here (32 MiB), so the call's code
and data come from memory (a harsher cold than the sleep's, and steadier on a machine other processes load)."""

_launched: list[int] = []
"""The clock at the fallback plans' first launch (their stand-ins for the GEMM and the all-gather append it)."""


def _timed(call: Callable[[], object], samples: int, mode: str, scratch: torch.Tensor) -> tuple[float, float]:
    """The median and 90th percentile, in µs, of ``samples`` single calls of ``call``, each right after an untimed
    call (``warm``), after a 1 ms sleep (``sleep``) or after writing ``scratch`` (``evict``, a quarter of the
    samples: each write takes milliseconds). A call that reaches a first-launch stand-in is timed to it."""
    clock, sleep = time.perf_counter_ns, time.sleep
    times = []
    for _ in range(samples // 4 if mode == "evict" else samples):
        if mode == "sleep":
            sleep(0.001)
        elif mode == "evict":
            scratch.add_(1)
        else:
            call()
        _launched.clear()
        start = clock()
        call()
        end = clock()
        times.append((_launched[0] if _launched else end) - start)
    times.sort()
    return statistics.median(times) / 1000.0, times[int(0.9 * (len(times) - 1))] / 1000.0


def _fallback_plans(b: torch.Tensor) -> dict[str, Callable[[], object]]:
    """Calls of each op's matmul + NCCL fallback plan (issue 24's row that loses from idle), timed to the first
    launch: the plans are built as the builders build them, with a group's collective replaced by a stand-in, and
    stored under their calls' signatures; gemm_rs's first launch is its ``torch.mm``, ag_gemm's its all-gather."""
    world = rt.current_world()
    clock = time.perf_counter_ns
    a_rs, a_ag = torch.randn(16, 16).to(b.dtype), torch.randn(6, 16).to(b.dtype)
    rs_plan = rs.UnfusedPlan(torch.empty(16, 8, dtype=b.dtype), lambda out, partial, options: None, None, 16, 8)
    ag_plan = ag.UnfusedPlan(lambda gathered, a, options: _launched.append(clock()), None, 6, 8, 16)
    for op, a, plan in ((rs, a_rs, rs_plan), (ag, a_ag, ag_plan)):
        signature = operand_signature(a, b, None, False)
        op._plans.get(signature)  # binds the cache to the world
        op._plans._plans[signature] = plan
    assert rt.current_world() is world
    mm = torch.mm

    def gemm_rs() -> object:
        torch.mm = lambda *args, **kwargs: _launched.append(clock())  # type: ignore[assignment]
        try:
            return triton_dist.ops.gemm_rs(a_rs, b)
        finally:
            torch.mm = mm

    return {
        "gemm_rs fallback (matmul + NCCL), to its torch.mm": gemm_rs,
        "ag_gemm fallback (NCCL + matmul), to its all-gather": lambda: triton_dist.ops.ag_gemm(a_ag, b),
    }


def calls() -> dict[str, Callable[[], object]]:
    """The rows: the pieces of the fast path, then each op's whole eager call up to the first launch."""
    bf16 = torch.bfloat16
    a_rs, b = torch.randn(8, 16).to(bf16), torch.randn(16, 8).to(bf16)
    a_ag = torch.randn(4, 16).to(bf16)
    out_rs, out_ag = torch.empty(8, 8, dtype=bf16), torch.empty(4, 8, dtype=bf16)
    triton_dist.ops.gemm_rs(a_rs, b)  # builds the plans (the interpreter runs once)
    triton_dist.ops.ag_gemm(a_ag, b)
    fallbacks = _fallback_plans(b)
    for op in (rs, ag):  # the fused plans' calls end before their first launch; the fallbacks' run to it
        op._eager_call = lambda plan, a, b, out, op=op, call=op._eager_call: (
            call(plan, a, b, out) if isinstance(plan, op.UnfusedPlan) else out
        )
    rs_plan = rs.plan_for(a_rs, b)
    signature = operand_signature(a_rs, b, None, False)
    rows: dict[str, Callable[[], object]] = {
        "perf_counter_ns pair alone": lambda: None,
        "plain_eager(a, b)": lambda: plain_eager(a_rs, b),
        "operand_signature(a, b, None, False)": lambda: operand_signature(a_rs, b, None, False),
        "operand_signature + PlanCache.get": lambda: rs._plans.get(operand_signature(a_rs, b, None, False)),
        "PlanCache.get(signature)": lambda: rs._plans.get(signature),
        "gemm_rs check_out_for(plan, a, b, out)": lambda: rs.check_out_for(rs_plan, a_rs, b, out_rs),
    }
    if hasattr(rs._plans, "eager_plan"):  # the one-frame fast path (absent before it; the rows stay comparable)
        rows["PlanCache.eager_plan(a, b, None)"] = lambda: rs._plans.eager_plan(a_rs, b, None)
        rows["PlanCache.eager_plan(a, b, out)"] = lambda: rs._plans.eager_plan(a_rs, b, out_rs)
    return rows | {
        "gemm_rs(a, b), to the first launch": lambda: triton_dist.ops.gemm_rs(a_rs, b),
        "gemm_rs(a, b, out=), to the first launch": lambda: triton_dist.ops.gemm_rs(a_rs, b, out=out_rs),
        "ag_gemm(a, b), to the first launch": lambda: triton_dist.ops.ag_gemm(a_ag, b),
        "ag_gemm(a, b, out=), to the first launch": lambda: triton_dist.ops.ag_gemm(a_ag, b, out=out_ag),
        **fallbacks,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200, help="single calls timed per row and mode")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the rows (the median of rounds' medians)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as directory:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(directory, 'store')}", rank=0, world_size=1)
        try:
            rt.init(heap_size="16M", device="cpu")
            rows = calls()
            scratch = torch.zeros(EVICT_BYTES // 4, dtype=torch.int32)
            results = {name: {mode: [] for mode in MODES} for name in rows}
            for _ in range(args.rounds):  # rounds interleave the rows, so a burst of load hits them alike
                for name, call in rows.items():
                    for mode in MODES:
                        results[name][mode].append(_timed(call, args.samples, mode, scratch))
            print(
                "| host part (bf16, one CPU rank) | warm: median / p90, µs | after a 1 ms sleep | after writing "
                f"{EVICT_BYTES >> 20} MiB |"
            )
            print("|---|---|---|---|")
            for name, modes in results.items():
                cells = []
                for mode in MODES:
                    median = statistics.median(m for m, _ in modes[mode])
                    p90 = statistics.median(p for _, p in modes[mode])
                    cells.append(f"{median:.1f} / {p90:.1f}")
                print(f"| {name} | {' | '.join(cells)} |")
            rt.finalize()
        finally:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
