"""The overlap ops on real model layers: ``ag_gemm`` and ``gemm_rs`` beside NCCL + cuBLAS, three timings each.

    torchrun --nproc-per-node=2 bench/sweep.py [--ops ag,rs] [--models Llama-3-8B,...] [--reps 20] [--quick]

Every row is one projection of a real model at one M (tokens), tensor-parallel over the ranks:

- column-parallel (``ag_gemm``): the sequence-parallel input all-gathered, times the QKV or gate/up weight shard:
  A_r [M/W, hidden], B_r [hidden, N/W];
- row-parallel (``gemm_rs``): the O or down projection of this rank's K shard, reduce-scattered over the tokens:
  A_r [M, K/W], B_r [K/W, hidden].

Per row, in one run, ours (the op with ``out=``, into an output allocated once per row) and the baseline
(``all_gather_into_tensor`` + ``torch.matmul``, or ``torch.matmul`` + ``reduce_scatter_tensor``, into outputs
allocated once per row likewise) each get:

- device time: median of ``--reps`` calls, a device barrier before each (max over ranks), timed twice (first and
  second pass, interleaved with the baseline), so the spread between the two is this run's noise;
- from idle: median of ``--reps`` calls, each after a host synchronize and barrier (the host path included), ours'
  and the baseline's calls taken in turns (one block of each drifted by 12% on H200, as much as the floor judges);
- host µs per call: CPU time to enqueue one call while the GPU is busy; for ours also without ``out=`` (the op
  allocating its output, what a caller that passes no ``out`` pays: ``ours_alloc_host_us``).

During each device-time pass a thread reads every rank's GPU through NVML every 10 ms (``bench/_clocks.py``): the
SM clock (mean, min), power, temperature and NVML's clock-limit reasons, kept per pass (``ours_clocks``,
``ours_clocks_2``, ``base_clocks``, ``base_clocks_2``: the slowest rank's clocks, the highest power), so a second
pass slower than the first can be told apart from a GPU that ran at a lower clock. Without ``pynvml`` the clocks
come from nvidia-smi (fewer readings); without either the rows have none and the md says why.

The baseline's two parts are timed alone too, with the same care (device barrier, median of ``--reps``, the same
preallocated tensors): the collective (``all_gather_into_tensor`` / ``reduce_scatter_tensor``) and the GEMM
(``torch.matmul`` into its output). A row's overlap bound is baseline / max(collective, GEMM): the speedup a perfect
overlap of those two parts would give. Issue 24's bar per op (``bar_verdict``): the geo-mean speedup at least the goal
(1.30x AG+GEMM, 1.08x GEMM+RS), or, where the geo-mean bound is lower than the goal, within 5% (AG) / 3% (RS) of
it; and no row below 0.98x (device barrier) or 0.95x (from idle) (``floor_line``).

The path ours ran (``fused``, ``cublas``, ag_gemm's ``cublas/<c>`` with c chunks per peer shard, gemm_rs's
``cublas-pull``, or the ``nccl``/``matmul+nccl`` fallback) is named per row; where it was the fallback, the fused
kernel's default configuration is timed too (``fused ms``), and on every row (both ops) the cuBLAS path is timed and
checked (``cublas_ms``, ``cublas_error``; AG: with one chunk per shard), so the selection can be judged. On every AG
row the cuBLAS path with two chunks per peer shard too (``cublas2_ms``, ``cublas2_error``: what the cost model's
chunk count is judged by). On every RS row the cuBLAS path's "pull" producer too (``CUBLAS_PULL``, which the
selection takes only on a calibration that measured it; issue 24's candidate for the fallback rows): ``pull_ms``,
``pull_error``, and from idle ``pull_idle_ms`` beside the baseline's ``pull_idle_base_ms``, sampled in turns.
Writes bench/results/sweep_<gpu>.md, .json and .png (speedup per row, both timings).
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import math
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _clocks import SLOWDOWNS, ClockSampler, PassClocks, combine, compare_line, open_clocks, reason_names  # noqa: E402
from _common import RESULTS, describe_machine, log0, markdown_table, write_json  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import ag_gemm as ag_ops  # noqa: E402
from triton_dist.ops import gemm_rs as rs_ops  # noqa: E402
from triton_dist.ops.tuning import OverlapConfig, geomean  # noqa: E402
from triton_dist.testing import setup_distributed  # noqa: E402
from triton_dist.testing.distributed import max_over_ranks  # noqa: E402
from triton_dist.testing.timing import bench_samples, host_us, idle_ms_interleaved  # noqa: E402

ag_mod = sys.modules["triton_dist.ops.ag_gemm"]
rs_mod = sys.modules["triton_dist.ops.gemm_rs"]


@dataclass(frozen=True)
class Model:
    """The dimensions of one decoder layer (public configs)."""

    name: str
    hidden: int
    q_dim: int  # heads x head_dim
    kv_dim: int  # KV heads x head_dim
    intermediate: int  # per expert for MoE models

    def column_parallel(self) -> list[tuple[str, int, int]]:
        """(layer, N, K) of the all-gathered projections, global N."""
        return [("qkv", self.q_dim + 2 * self.kv_dim, self.hidden), ("gate_up", 2 * self.intermediate, self.hidden)]

    def row_parallel(self) -> list[tuple[str, int, int]]:
        """(layer, N, K) of the reduce-scattered projections, global K."""
        return [("o_proj", self.hidden, self.q_dim), ("down", self.hidden, self.intermediate)]


MODELS = [
    Model("Llama-3-8B", 4096, 4096, 1024, 14336),
    Model("Llama-3-70B", 8192, 8192, 1024, 28672),
    Model("Llama-3-405B", 16384, 16384, 1024, 53248),
    Model("Qwen2.5-7B", 3584, 3584, 512, 18944),
    Model("Qwen2.5-72B", 8192, 8192, 1024, 29568),
    Model("Qwen3-32B", 5120, 8192, 1024, 25600),
    Model("Mistral-Large-2", 12288, 12288, 1024, 28672),
    Model("Mixtral-8x22B", 6144, 6144, 1024, 16384),
]
TOKENS = (1024, 2048, 4096, 8192, 16384)
MAX_TFLOP_PER_ROW = 30.0  # skip rows whose GEMM alone would take tens of ms per call (device minutes are few)
BARS = {"ag": (1.30, 0.05), "rs": (1.08, 0.03)}
"""Issue 24's bar per op: (geo-mean speedup goal, how far below the geo-mean overlap bound counts when it is lower)."""
DEVICE_FLOOR = 0.98
"""No row's speedup (device barrier, first pass) below this."""
IDLE_FLOOR = 0.95
"""No row's speedup from idle below this."""


def overlap_bound(base_ms: float, comm_ms: float, gemm_ms: float) -> float:
    """The speedup over the baseline that a perfect overlap of its two parts would give: base / max(comm, gemm).

    Raises ValueError when a time is not a positive finite number (a timing that failed or was not taken).
    """
    for name, value in (("baseline", base_ms), ("collective", comm_ms), ("GEMM", gemm_ms)):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"overlap_bound: the {name} time is {value} ms; it must be a positive finite number")
    return base_ms / max(comm_ms, gemm_ms)


@dataclass(frozen=True)
class Verdict:
    """One op's bar over the sweep: the geo-mean speedup against its target."""

    op: str
    speedup: float  # geo-mean speedup, device barrier, first pass
    bound: float  # geo-mean overlap bound
    goal: float  # the bar's speedup goal
    tolerance: float  # how far below the bound counts, where the bound is lower than the goal
    target: float  # what the geo-mean must reach: the goal, or (1 - tolerance) x the bound where that is lower
    met: bool

    def line(self) -> str:
        """``bar: geo-mean X vs <target and why>: met`` (or ``NOT met``)."""
        if self.bound >= self.goal:
            against = f"{self.goal:.2f} (bound geo-mean {self.bound:.3f} >= {self.goal:.2f})"
        else:
            against = (
                f"{1 - self.tolerance:.2f} x bound geo-mean {self.bound:.3f} = {self.target:.3f} "
                f"(bound below {self.goal:.2f})"
            )
        return f"bar: geo-mean {self.speedup:.3f} vs {against}: {'met' if self.met else 'NOT met'}"


def bar_verdict(op: str, speedups: list[float], bounds: list[float]) -> Verdict:
    """Issue 24's bar for ``op`` (``"ag"`` or ``"rs"``) over the sweep's rows: the geo-mean of ``speedups`` must
    reach the goal of ``BARS``, or, where the geo-mean of ``bounds`` (each row's ``overlap_bound``) is lower than the
    goal, (1 - tolerance) x that geo-mean.

    Raises ValueError for an unknown op, no rows, lists of different lengths, or a value that is not positive.
    """
    if op not in BARS:
        raise ValueError(f"bar_verdict: unknown op {op!r}; expected one of {sorted(BARS)}")
    if not speedups or len(speedups) != len(bounds):
        raise ValueError(f"bar_verdict({op}): {len(speedups)} speedups and {len(bounds)} bounds; need as many, > 0")
    for name, values in (("speedup", speedups), ("bound", bounds)):
        bad = [v for v in values if not (math.isfinite(v) and v > 0)]
        if bad:
            raise ValueError(f"bar_verdict({op}): a {name} of {bad[0]}; every one must be positive and finite")
    goal, tolerance = BARS[op]
    speedup, bound = geomean(speedups), geomean(bounds)
    target = goal if bound >= goal else (1 - tolerance) * bound
    return Verdict(op, speedup, bound, goal, tolerance, target, speedup >= target)


def row_label(row: Mapping[str, object]) -> str:
    """``<model> <layer> M=<m>``: a row's name in the floor lines and the chart."""
    return f"{row['model']} {row['layer']} M={row['m']}"


def floor_line(rows: Sequence[Mapping[str, object]], key: str, floor: float, timing: str) -> str:
    """``floor (<timing>) >= F: met (worst W)``, or ``NOT met`` with every row below ``floor`` (its ``key``).

    Raises ValueError when there are no rows.
    """
    if not rows:
        raise ValueError(f"floor_line({key}): no rows")
    values = [float(r[key]) for r in rows]  # type: ignore[arg-type]
    below = [f"{row_label(r)} {v:.2f}" for r, v in zip(rows, values, strict=True) if not v >= floor]
    head = f"floor ({timing}) >= {floor:.2f}:"
    if not below:
        return f"{head} met (worst {min(values):.2f})"
    return f"{head} NOT met, {len(below)} of {len(rows)} rows below: " + ", ".join(below)


def derive(row: dict[str, object]) -> None:
    """Add a measured row's ratios: ``speedup`` and ``speedup_2`` (device barrier, two passes), ``idle_speedup``,
    ``bound`` (``overlap_bound`` of the first-pass baseline) and ``of_bound`` (speedup / bound)."""

    def ms(key: str) -> float:
        return float(row[key])  # type: ignore[arg-type]

    row["speedup"] = ms("base_ms") / ms("ours_ms")
    row["speedup_2"] = ms("base_ms_2") / ms("ours_ms_2")
    row["idle_speedup"] = ms("base_idle_ms") / ms("ours_idle_ms")
    row["bound"] = overlap_bound(ms("base_ms"), ms("comm_ms"), ms("gemm_ms"))
    row["of_bound"] = ms("speedup") / ms("bound")


def summary_lines(op: str, rows: Sequence[Mapping[str, object]]) -> list[str]:
    """The bar line and the two floor lines of one op's rows."""
    verdict = bar_verdict(op, [float(r["speedup"]) for r in rows], [float(r["bound"]) for r in rows])  # type: ignore[arg-type]
    return [
        verdict.line(),
        floor_line(rows, "speedup", DEVICE_FLOOR, "device barrier"),
        floor_line(rows, "idle_speedup", IDLE_FLOOR, "from idle"),
    ]


def _spread(row: Mapping[str, object]) -> float:
    first, second = float(row["ours_ms"]), float(row["ours_ms_2"])  # type: ignore[arg-type]
    return abs(first - second) / min(first, second)


def clock_cells(row: Mapping[str, object]) -> tuple[str, str]:
    """A row's two clock cells for ours' two passes: ``SM MHz 1st / 2nd (min 1st / 2nd)`` and ``W 1st / 2nd``
    (with the slowdown reasons NVML gave, per pass); ``-`` where a pass has no clocks."""
    first, second = PassClocks.from_json(row.get("ours_clocks")), PassClocks.from_json(row.get("ours_clocks_2"))
    if first is None or second is None:
        return "-", "-"
    mhz = f"{first.mhz_mean:.0f} / {second.mhz_mean:.0f} ({first.mhz_min:.0f} / {second.mhz_min:.0f})"
    watts = f"{first.watts_mean:.0f} / {second.watts_mean:.0f}"
    slow = [
        f"{label}: {'+'.join(reason_names(p.reasons & SLOWDOWNS))}"
        for label, p in (("1st", first), ("2nd", second))
        if p.reasons & SLOWDOWNS
    ]
    return mhz, watts + (f" ({'; '.join(slow)})" if slow else "")


def spread_note(rows: Sequence[Mapping[str, object]]) -> str:
    """``X% (<row>: ours <clocks>; baseline <clocks>)``: the largest spread between the two timings of ours, the row
    it is on, and whether the GPU's clocks differed between the two passes of ours and of the baseline there
    (``_clocks.compare_line``). Raises ValueError when there are no rows."""
    if not rows:
        raise ValueError("spread_note: no rows")
    worst = max(rows, key=_spread)
    ours = compare_line(
        PassClocks.from_json(worst.get("ours_clocks")), PassClocks.from_json(worst.get("ours_clocks_2"))
    )
    base = compare_line(
        PassClocks.from_json(worst.get("base_clocks")), PassClocks.from_json(worst.get("base_clocks_2"))
    )
    return f"{_spread(worst) * 100:.1f}% ({row_label(worst)}: ours {ours}; baseline {base})"


def rows_to_run(models: list[Model], ops: list[str]) -> list[tuple[str, Model, str, int, int, int]]:
    """(op, model, layer, M, N, K): each layer at two token counts, rotating through TOKENS so every M is covered.

    The rotation runs over both ops' layers whichever ``ops`` are asked for, so a run of one op times the same rows
    as that op's half of a run of both (an A/B of one op's variants compares like with like)."""
    rows = []
    index = 0
    for model in models:
        for op in ("ag", "rs"):
            layers = model.column_parallel() if op == "ag" else model.row_parallel()
            for layer, n, k in layers:
                for m in (TOKENS[index % len(TOKENS)], TOKENS[(index + 2) % len(TOKENS)]):
                    if op in ops and 2.0 * m * n * k / 1e12 <= MAX_TFLOP_PER_ROW:
                        rows.append((op, model, layer, m, n, k))
                index += 1
    return rows


def _median_ms(fn, reps: int) -> float:  # noqa: ANN001
    return max_over_ranks(statistics.median(bench_samples(fn, warmup=3, rep=reps)))


def _timed_pass(fn, reps: int, sampler: ClockSampler | None) -> tuple[float, PassClocks | None]:  # noqa: ANN001
    """``_median_ms`` of ``fn`` with this rank's GPU clocks while it ran (None without a sampler or NVML)."""
    if sampler is None:
        return _median_ms(fn, reps), None
    median, clocks = sampler.measure(lambda: statistics.median(bench_samples(fn, warmup=3, rep=reps)))
    return max_over_ranks(median), clocks


def gather_clocks(local: list[PassClocks | None]) -> list[PassClocks | None]:
    """Each pass's clocks combined over the ranks (``combine``): one all-gather of every rank's passes (a
    collective: every rank calls it, with or without clocks); ``local`` itself without a process group."""
    if not dist.is_initialized():
        return [combine([p]) for p in local]
    width = len(PassClocks.FIELDS)
    values = [v for p in local for v in (p.values() if p is not None else [math.nan] * width)]
    mine = torch.tensor(values, dtype=torch.float64, device="cuda")
    every = torch.empty(dist.get_world_size() * len(values), dtype=torch.float64, device="cuda")
    dist.all_gather_into_tensor(every, mine)
    ranks = every.view(dist.get_world_size(), len(local), width).tolist()
    return [combine([PassClocks.from_values(rank[i]) for rank in ranks]) for i in range(len(local))]


def _idle_ms_pair(ours, baseline, reps: int) -> tuple[float, float]:  # noqa: ANN001
    """From-idle medians (max over ranks) of ours and the baseline, sampled in turns (``idle_ms_interleaved``)."""
    ours_samples, base_samples = idle_ms_interleaved([ours, baseline], rep=reps)
    return max_over_ranks(statistics.median(ours_samples)), max_over_ranks(statistics.median(base_samples))


def run_row(
    op: str, m: int, n: int, k: int, dtype: torch.dtype, reps: int, sampler: ClockSampler | None = None
) -> dict[str, object]:
    """One row's timings and checks (module docstring); ``sampler`` reads the GPU's clocks during the four
    device-time passes of ours and the baseline."""
    world = rt.current_world()
    w, group = world.world_size, world.group
    torch.manual_seed(1234 + world.rank)
    if op == "ag":
        a = torch.randn(m // w, k, dtype=dtype, device="cuda") / k**0.25
        b = torch.randn(k, n // w, dtype=dtype, device="cuda") / k**0.25
        gathered = torch.empty(m, k, dtype=dtype, device="cuda")
        c = torch.empty(m, n // w, dtype=dtype, device="cuda")
        ours_c = torch.empty(m, n // w, dtype=dtype, device="cuda")  # ours' output, allocated once like c

        def baseline() -> torch.Tensor:
            dist.all_gather_into_tensor(gathered, a, group=group)
            return torch.matmul(gathered, b, out=c)

        def comm() -> None:  # the baseline's two parts alone (the overlap bound)
            dist.all_gather_into_tensor(gathered, a, group=group)

        def gemm() -> None:
            torch.matmul(gathered, b, out=c)

        def ours() -> torch.Tensor:
            return ag_ops(a, b, out=ours_c)

        def ours_alloc() -> torch.Tensor:  # the op allocating its output (a caller without out=)
            return ag_ops(a, b)

        def unfused() -> torch.Tensor:  # as a user writes it: outputs allocated per call
            gathered_here = torch.empty(m, k, dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(gathered_here, a, group=group)
            return gathered_here @ b

        def fused() -> torch.Tensor:
            return ag_mod.ag_gemm_impl(a, b, config=OverlapConfig(), out=ours_c)[0]

        def cublas() -> torch.Tensor:
            return ag_mod.ag_gemm_impl(a, b, config=OverlapConfig(backend="cublas"), out=ours_c)[0]

        def cublas_chunked() -> torch.Tensor:
            return ag_mod.ag_gemm_impl(a, b, config=OverlapConfig(backend="cublas", cublas_chunks=2), out=ours_c)[0]

        pull = None

        path = ag_mod.path_of(a, b)
    else:
        a = torch.randn(m, k // w, dtype=dtype, device="cuda") / k**0.25
        b = torch.randn(k // w, n, dtype=dtype, device="cuda") / k**0.25
        partial = torch.empty(m, n, dtype=dtype, device="cuda")
        out = torch.empty(m // w, n, dtype=dtype, device="cuda")
        ours_out = torch.empty(m // w, n, dtype=dtype, device="cuda")  # ours' output, allocated once like out

        def baseline() -> torch.Tensor:
            torch.matmul(a, b, out=partial)
            dist.reduce_scatter_tensor(out, partial, group=group)
            return out

        def comm() -> None:  # the baseline's two parts alone (the overlap bound)
            dist.reduce_scatter_tensor(out, partial, group=group)

        def gemm() -> None:
            torch.matmul(a, b, out=partial)

        def ours() -> torch.Tensor:
            return rs_ops(a, b, out=ours_out)

        def ours_alloc() -> torch.Tensor:  # the op allocating its output (a caller without out=)
            return rs_ops(a, b)

        def unfused() -> torch.Tensor:  # as a user writes it: outputs allocated per call
            out_here = torch.empty(m // w, n, dtype=dtype, device="cuda")
            dist.reduce_scatter_tensor(out_here, a @ b, group=group)
            return out_here

        def fused() -> torch.Tensor:
            return rs_mod.gemm_rs_with(a, b, rs_mod.GemmRSConfig(partial_dtype="input"), out=ours_out)

        def cublas() -> torch.Tensor:
            return rs_mod.gemm_rs_with(a, b, rs_mod.CUBLAS_DIRECT, out=ours_out)

        def pull() -> torch.Tensor:  # the cuBLAS path's pull producer: an option the selection does not take
            return rs_mod.gemm_rs_with(a, b, rs_mod.CUBLAS_PULL, out=ours_out)

        cublas_chunked = None

        path = rs_mod.path_of(a, b)
    expected = baseline().float()
    got = ours().float()
    allocated = ours_alloc().float()
    torch.cuda.synchronize()
    error = ((got - expected).norm() / expected.norm().clamp_min(1e-6)).item()
    row: dict[str, object] = {"path": path, "rel_error": max_over_ranks(error)}
    if not torch.equal(allocated, got):  # out= must not change the result (the row says so if it did)
        row["out_mismatch"] = f"max abs difference {(allocated - got).abs().max().item():.3g} without out="
    clocks: list[PassClocks | None] = []
    for key, fn in (("ours_ms", ours), ("base_ms", baseline), ("ours_ms_2", ours), ("base_ms_2", baseline)):
        row[key], pass_clocks = _timed_pass(fn, reps, sampler)
        clocks.append(pass_clocks)
    for key, pass_clocks in zip(
        ("ours_clocks", "base_clocks", "ours_clocks_2", "base_clocks_2"), gather_clocks(clocks), strict=True
    ):
        row[key] = pass_clocks.to_json() if pass_clocks is not None else None
    graphs = getattr((ag_mod if op == "ag" else rs_mod).plan_for(a, b), "graphs", None)
    row["graph_replays"] = graphs.replays if graphs is not None else 0  # ours' calls served by its own graphs
    row["comm_ms"] = _median_ms(comm, reps)
    row["gemm_ms"] = _median_ms(gemm, reps)
    replays_before = graphs.replays if graphs is not None else 0
    row["ours_idle_ms"], row["base_idle_ms"] = _idle_ms_pair(ours, baseline, reps)
    # Of the from-idle calls (3 warm-ups, then reps), how many replayed: the fallbacks replay only from an idle stream.
    row["idle_replays"] = (graphs.replays - replays_before) if graphs is not None else 0
    row["idle_calls"] = 3 + reps
    row["ours_host_us"] = host_us(ours)
    row["ours_alloc_host_us"] = host_us(ours_alloc)
    row["base_host_us"] = host_us(baseline)
    row["unfused_host_us"] = host_us(unfused)
    fused_path = path == "fused"
    row["fused_ms"] = row["ours_ms"] if fused_path else float("nan")
    if not fused_path and m // w >= 128:
        try:
            row["fused_ms"] = _median_ms(fused, reps)
        except Exception as error:  # a configuration the shape cannot take: say so in the row
            row["fused_error"] = f"{type(error).__name__}: {error}"[:200]
    if m // w > 0:  # the cuBLAS path too, timed and checked on every row (the cost model's third choice)
        _cublas_path(row, path, cublas, expected, reps)
    if cublas_chunked is not None and m // w > 0:  # and with two chunks per peer shard (AG)
        _cublas_path(row, path, cublas_chunked, expected, reps, chunks=2)
    if pull is not None and m // w > 0:
        _pull_path(row, pull, baseline, expected, reps)
    (ag_mod if op == "ag" else rs_mod).clear_workspaces()
    return row


def _cublas_path(
    row: dict[str, object],
    path: str,
    cublas: Callable[[], torch.Tensor],
    expected: torch.Tensor,
    reps: int,
    chunks: int = 1,
) -> None:
    """Time and check the op's cuBLAS path on this row (either op; AG with ``chunks`` chunks per peer shard):
    ``cublas_ms`` (``cublas2_ms`` with two chunks, ...; ours where the selection ran it), ``cublas_error``
    (relative Frobenius error against the baseline's ``expected``), or ``cublas_failure`` saying why it could not
    run."""
    prefix = "cublas" if chunks == 1 else f"cublas{chunks}"
    ran = "cublas" if chunks == 1 else f"cublas/{chunks}"  # ag_gemm.path_of's name of that path
    row[f"{prefix}_ms"] = row["ours_ms"] if path == ran else float("nan")
    if path == ran:
        return
    try:
        got = cublas().float()
        torch.cuda.synchronize()
        row[f"{prefix}_error"] = max_over_ranks(((got - expected).norm() / expected.norm().clamp_min(1e-6)).item())
        row[f"{prefix}_ms"] = _median_ms(cublas, reps)
    except Exception as error:  # say so in the row
        row[f"{prefix}_failure"] = f"{type(error).__name__}: {error}"[:200]


def _chunked_note(row: dict[str, object]) -> str:
    """The RESULT line's words on the AG cuBLAS path with two chunks per peer shard; empty where the row has none
    (RS)."""
    if "cublas2_ms" not in row:
        return ""
    failure = row.get("cublas2_failure")
    if failure:
        return f"cublas/2 failed ({failure}); "
    return (
        f"cublas/2 {float(row['cublas2_ms']):.3f} "  # type: ignore[arg-type]
        f"(err {float(row.get('cublas2_error', float('nan'))):.1e}); "  # type: ignore[arg-type]
    )


def _pull_path(
    row: dict[str, object],
    pull: Callable[[], torch.Tensor],
    baseline: Callable[[], torch.Tensor],
    expected: torch.Tensor,
    reps: int,
) -> None:
    """Time and check gemm_rs's cuBLAS pull producer (``CUBLAS_PULL``: one GEMM of all rows, the peers' shard rows
    pulled; issue 24) on this RS row: ``pull_ms`` (device barrier, as ``cublas_ms``), ``pull_error`` (relative
    Frobenius error against the baseline's ``expected``), from idle ``pull_idle_ms`` beside the baseline's
    ``pull_idle_base_ms`` (sampled in the same turns), or ``pull_failure`` saying why it could not run."""
    row["pull_ms"] = float("nan")
    try:
        got = pull().float()
        torch.cuda.synchronize()
        row["pull_error"] = max_over_ranks(((got - expected).norm() / expected.norm().clamp_min(1e-6)).item())
        row["pull_ms"] = _median_ms(pull, reps)
        row["pull_idle_ms"], row["pull_idle_base_ms"] = _idle_ms_pair(pull, baseline, reps)
    except Exception as error:  # say so in the row
        row["pull_failure"] = f"{type(error).__name__}: {error}"[:200]


def _pull_note(row: dict[str, object]) -> str:
    """The RESULT line's words on the pull producer (``_pull_path``'s fields); empty where the row has none (AG)."""
    if "pull_ms" not in row:
        return ""
    keys = ("pull_ms", "pull_idle_ms", "pull_idle_base_ms")
    ms = {key: float(row.get(key, float("nan"))) for key in keys}  # type: ignore[arg-type]
    failure = f", {row['pull_failure']}" if "pull_failure" in row else ""
    error = float(row.get("pull_error", float("nan")))  # type: ignore[arg-type]
    return (
        f"pull {ms['pull_ms']:.3f} idle {ms['pull_idle_ms']:.3f}/{ms['pull_idle_base_ms']:.3f} (err {error:.1e}"
        f"{failure}); "
    )


def write(
    results: list[dict[str, object]],
    started: float,
    out_dir: Path,
    tag: str,
    *,
    gpu: str,
    world_size: int,
    clock_note: str = "",
) -> None:
    """Write sweep_<tag or GPU>.md (per op: the bar and floor lines and the table), .json (the rows) and .png (the
    speedups, the bound as a marker) under ``out_dir``; rows need ``derive``'s ratios. ``clock_note``: where rank 0's
    GPU clocks came from other than NVML, or why there are none."""
    slug = tag or gpu.replace("NVIDIA ", "").split()[0]
    lines = [f"# The overlap ops on model layers ({world_size} x {gpu})", ""]
    lines += describe_machine(started)
    lines += [
        "",
        "Speedup = baseline / ours (device barrier timing, first pass; second pass beside it); from idle: ours / the",
        "baseline; ours writes into an output allocated once per row (out=), as the baseline does; host µs per call",
        "(GPU busy): ours / ours allocating its output (no out=) / the unfused path as a user writes it (outputs",
        "allocated per call) / the preallocated baseline. Path: what ours ran; (graph): its repeated eager calls",
        "were replayed from the op's own CUDA graphs (ops.common.eager_graphs); [r/c replayed] after the from-idle",
        "times: how many of ours' c from-idle calls (warm-ups included) replayed. fused ms: the fused",
        "kernel's default configuration where the selection ran the fallback (so the choice can be judged), then the",
        "cuBLAS path's (AG: shards gathered by the copy engine, one cuBLAS GEMM per shard as it lands; RS: peers'",
        'partials written by cuBLAS into their memory); RS also the pull ms of its "pull" producer (CUBLAS_PULL, an',
        "option: one GEMM of all rows, the peers' shard rows pulled; its from-idle time is in the JSON and the RESULT",
        "lines); AG also the cuBLAS path's ms with two chunks per peer shard (cublas/2: a copy, flag, wait and GEMM",
        "per chunk). Error: relative Frobenius error against the baseline's result.",
        "",
        "Overlap bound = baseline / max(comm, GEMM): comm and GEMM are the baseline's collective",
        "(all_gather_into_tensor / reduce_scatter_tensor) and its torch.matmul, each timed alone like the baseline",
        "(device barrier, median, preallocated outputs). It is the speedup a perfect overlap of the two would give;",
        "ours can pass it where its GEMM is faster than cuBLAS's. Bar (issue 24): geo-mean speedup >= 1.30 (AG) /",
        "1.08 (RS), or >= 0.95 / 0.97 x the geo-mean bound where that bound is below the goal; floors: no row below",
        f"{DEVICE_FLOOR:.2f}x (device barrier) or {IDLE_FLOOR:.2f}x (from idle).",
        "",
        "GPU clocks (NVML, read every 10 ms during each device-barrier pass on every rank; the slowest rank's SM",
        "clock, the highest power): SM MHz of ours' 1st / 2nd pass, mean (lowest sample), and W (NVML's running",
        "average), with the clock-limit reasons (sw-power, hw-slowdown, sw-/hw-thermal, power-brake) seen in a pass.",
        "The largest spread names its row and whether the clocks differed between the passes (mean > 1% apart,",
        "lowest > 3%, or other slowdown reasons), for ours and the baseline.",
        "",
    ]
    if clock_note:
        lines += [f"GPU clocks on rank 0: {clock_note}", ""]
    for op, title in (("ag", "AllGather + GEMM (column-parallel)"), ("rs", "GEMM + ReduceScatter (row-parallel)")):
        rows = [r for r in results if r["op"] == op]
        if not rows:
            continue
        table = []
        for r in rows:
            table.append(
                [
                    r["model"], r["layer"], f"{r['m']},{r['n']},{r['k']}",
                    f"{r['path']}{' (graph)' if r.get('graph_replays') else ''}",
                    f"{r['base_ms']:.3f}", f"{r['comm_ms']:.3f} / {r['gemm_ms']:.3f}",
                    f"{r['ours_ms']:.3f} / {r['ours_ms_2']:.3f}",
                    f"**{r['speedup']:.2f}** / {r['speedup_2']:.2f}", f"{r['bound']:.2f} ({r['of_bound']:.2f})",
                    f"{r['fused_ms']:.3f} / {r.get('cublas_ms', float('nan')):.3f}"
                    + (f" / {float(r.get('pull_ms', float('nan'))):.3f}" if op == "rs" else "")  # type: ignore[arg-type]
                    + (f" / {float(r.get('cublas2_ms', float('nan'))):.3f}" if op == "ag" else ""),  # type: ignore[arg-type]
                    f"{r['ours_idle_ms']:.3f} / {r['base_idle_ms']:.3f} ({r['idle_speedup']:.2f})"
                    + (f" [{r['idle_replays']}/{r['idle_calls']} replayed]" if "idle_calls" in r else ""),
                    f"{r['ours_host_us']:.0f} / {float(r.get('ours_alloc_host_us', float('nan'))):.0f} / "  # type: ignore[arg-type]
                    f"{r['unfused_host_us']:.0f} / {r['base_host_us']:.0f}",
                    f"{r['rel_error']:.1e}", *clock_cells(r),
                ]
            )  # fmt: skip
        headers = [
            "model", "layer", "M,N,K", "path", "baseline ms", "comm / GEMM ms", "ours ms (1st / 2nd)",
            "speedup (1st / 2nd)", "bound (speedup / bound)",
            "fused ms / cuBLAS path ms" + (" / pull ms" if op == "rs" else " / cublas/2 ms"),
            "from idle ms ours / base (x)",
            "host µs ours / ours alloc / unfused / base", "error", "ours SM MHz 1st / 2nd (min)", "ours W 1st / 2nd",
        ]  # fmt: skip
        speedups = [float(r["speedup"]) for r in rows]  # type: ignore[arg-type]
        second = [float(r["speedup_2"]) for r in rows]  # type: ignore[arg-type]
        idle = [float(r["idle_speedup"]) for r in rows]  # type: ignore[arg-type]
        host = [float(r["ours_host_us"]) / float(r["unfused_host_us"]) for r in rows]  # type: ignore[arg-type]
        host_pre = [float(r["ours_host_us"]) / float(r["base_host_us"]) for r in rows]  # type: ignore[arg-type]
        lines += [
            f"## {title}",
            "",
            f"Geo-mean speedup {geomean(speedups):.3f} (second pass {geomean(second):.3f}), worst "
            f"{min(speedups):.2f}; from idle {geomean(idle):.3f} (worst {min(idle):.2f}); host µs ours / unfused "
            f"{geomean(host):.2f} geo-mean (worst {max(host):.2f}; over the preallocated baseline "
            f"{geomean(host_pre):.2f}); largest spread between the two timings of ours "
            f"{spread_note(rows)}. Paths: "
            + ", ".join(f"{p} {sum(r['path'] == p for r in rows)}" for p in sorted({str(r["path"]) for r in rows})),
            "",
        ]
        lines += [f"- {line}" for line in summary_lines(op, rows)]
        lines += ["", markdown_table(headers, table), ""]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"sweep_{slug}.md").write_text("\n".join(lines) + "\n")
    write_json(out_dir / f"sweep_{slug}.json", results, started)
    _chart(results, out_dir / f"sweep_{slug}.png", gpu)


def _chart(results: list[dict[str, object]], path: Path, gpu: str) -> None:
    """Speedup per row (device barrier and from idle bars, the overlap bound a marker, the bar's target a dashed
    line), one panel per op; an INFO line instead where matplotlib is missing (the table is the result)."""
    try:
        import matplotlib
    except ImportError as error:
        print(f"INFO no PNG: {error}")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [op for op in ("ag", "rs") if any(r["op"] == op for r in results)]
    fig, axes = plt.subplots(len(ops), 1, figsize=(14, 4.5 * len(ops)), squeeze=False)
    for axis, op in zip(axes[:, 0], ops, strict=True):
        rows = [r for r in results if r["op"] == op]
        x = range(len(rows))
        axis.bar([i - 0.2 for i in x], [r["speedup"] for r in rows], 0.4, label="device barrier (1st)")
        axis.bar([i + 0.2 for i in x], [r["idle_speedup"] for r in rows], 0.4, label="from idle")
        axis.plot(list(x), [r["bound"] for r in rows], linestyle="none", marker="_", markersize=14,
                  markeredgewidth=2.5, color="black", label="overlap bound")  # fmt: skip
        verdict = bar_verdict(op, [float(r["speedup"]) for r in rows], [float(r["bound"]) for r in rows])  # type: ignore[arg-type]
        axis.axhline(verdict.target, color="tab:red", linestyle="--", linewidth=1,
                     label=f"bar target {verdict.target:.2f} (geo-mean {verdict.speedup:.2f})")  # fmt: skip
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xticks(list(x))
        axis.set_xticklabels([row_label(r) for r in rows], rotation=70, fontsize=7)
        axis.set_ylabel("speedup over NCCL + cuBLAS")
        axis.set_title(("ag_gemm" if op == "ag" else "gemm_rs") + f" on {gpu}")
        top = max(max(float(r[key]) for r in rows) for key in ("speedup", "idle_speedup", "bound"))  # type: ignore[arg-type]
        axis.set_ylim(0, max(top, verdict.target) * 1.2)  # room for the legend above the bars and markers
        axis.legend(fontsize=8, loc="upper center", ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", default="ag,rs")
    parser.add_argument("--models", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--quick", action="store_true", help="one model per op family (a smoke run)")
    parser.add_argument("--out-dir", default=str(RESULTS))
    parser.add_argument("--tag", default="", help="results file suffix (default: the GPU's name)")
    parser.add_argument(
        "--ag-begin-on-side",
        action="store_true",
        help="ag_gemm's cuBLAS path with its begin kernel on a side stream (ops.ag_gemm.op.CUBLAS_BEGIN_ON_SIDE; "
        "the begin kernel runs only without double buffers: with --no-ag-double-buffer)",
    )
    parser.add_argument(
        "--ag-double-buffer",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ag_gemm's cuBLAS path on double receive buffers, no begin barrier (ops.ag_gemm.op.CUBLAS_DOUBLE_BUFFER; "
        "the default)",
    )
    parser.add_argument(
        "--ag-flags",
        default="auto",
        choices=["auto", *importlib.import_module("triton_dist.ops.ag_gemm.op").FLAG_SCHEMES],
        help="how the cuBLAS path's double-buffered calls flag (ops.ag_gemm.op.DOUBLE_BUFFER_FLAGS)",
    )
    parser.add_argument(
        "--ag-wait-beside",
        action="store_true",
        help="ag_gemm's cuBLAS path with its double-buffered calls' waits on a waiter stream beside the own GEMM "
        "(ops.ag_gemm.op.CUBLAS_WAIT_BESIDE; an option until timed)",
    )
    args = parser.parse_args()
    started = time.time()
    importlib.import_module("triton_dist.ops.ag_gemm.op").DOUBLE_BUFFER_FLAGS = args.ag_flags
    if args.ag_begin_on_side:
        importlib.import_module("triton_dist.ops.ag_gemm.op").CUBLAS_BEGIN_ON_SIDE = True
    importlib.import_module("triton_dist.ops.ag_gemm.op").CUBLAS_DOUBLE_BUFFER = args.ag_double_buffer
    importlib.import_module("triton_dist.ops.ag_gemm.op").CUBLAS_WAIT_BESIDE = args.ag_wait_beside
    setup_distributed("24G")
    dtype = getattr(torch, args.dtype)
    world = rt.current_world()
    gpu = torch.cuda.get_device_name(0)
    device = torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    reader, clock_note = open_clocks(device, str(uuid) if uuid is not None else None)
    sampler = ClockSampler(reader, note=clock_note)
    if clock_note:
        print(f"INFO rank {world.rank}: {clock_note}", flush=True)
    wanted = set(filter(None, args.models.split(",")))
    models = [m for m in MODELS if not wanted or m.name in wanted]
    if args.quick:
        models = models[:1]
    results = []
    for op, model, layer, m, n, k in rows_to_run(models, args.ops.split(",")):
        begun = time.time()
        faulthandler.dump_traceback_later(120)  # a row stuck for 2 minutes prints where every rank is
        row = run_row(op, m, n, k, dtype, args.reps, sampler)
        faulthandler.cancel_dump_traceback_later()
        row.update(op=op, model=model.name, layer=layer, m=m, n=n, k=k)
        derive(row)
        results.append(row)
        log0(
            f"RESULT {op} {model.name} {layer} {m},{n},{k} [{row['path']}]: base {row['base_ms']:.3f} ours "
            f"{row['ours_ms']:.3f}/{row['ours_ms_2']:.3f} ms ({row['speedup']:.2f}x/{row['speedup_2']:.2f}x) fused "
            f"{row['fused_ms']:.3f} cublas {float(row.get('cublas_ms', float('nan'))):.3f} "  # type: ignore[arg-type]
            f"(err {float(row.get('cublas_error', float('nan'))):.1e}); {_pull_note(row)}"  # type: ignore[arg-type]
            f"{_chunked_note(row)}"
            f"comm {row['comm_ms']:.3f} gemm {row['gemm_ms']:.3f} bound {row['bound']:.2f}x; "
            f"idle {row['ours_idle_ms']:.3f}/{row['base_idle_ms']:.3f}; host "
            f"{row['ours_host_us']:.0f}/{row['ours_alloc_host_us']:.0f}/{row['unfused_host_us']:.0f}/"
            f"{row['base_host_us']:.0f} us; "
            f"err {row['rel_error']:.1e}; clocks ours {' '.join(clock_cells(row))} "
            f"({time.time() - begun:.1f} s)"
            + (f"; OUT MISMATCH: {row['out_mismatch']}" if "out_mismatch" in row else "")
        )
        if world.rank == 0:
            write(
                results, started, Path(args.out_dir), args.tag, gpu=gpu, world_size=world.world_size,
                clock_note=sampler.note,
            )  # fmt: skip
    if world.rank == 0:
        for op in dict.fromkeys(str(r["op"]) for r in results):
            for line in summary_lines(op, [r for r in results if r["op"] == op]):
                log0(f"SUMMARY {op}: {line}")
    rt.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
