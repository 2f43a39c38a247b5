"""GEMM + reduce-scatter on the seed shapes: ours beside torch.matmul + NCCL, PyTorch's fused op, and the bound.

    torchrun --nproc-per-node=2 bench/gemm_rs.py [--shapes "M,N,K;..."] [--dtype bfloat16] [--reps 30] [--tune]

Per shape (global M, N, K; rank r holds A_r [M, K/W] and B_r [K/W, N]), all in one run, each the median of
``--reps`` calls after warm-up (device barrier before each call, max over ranks; bench/_common.py):

- ours: ``triton_dist.ops.gemm_rs`` (the torch custom op, configuration from the tuned table or the cost model);
- matmul + NCCL: ``torch.matmul`` then ``dist.reduce_scatter_tensor`` (bf16 partials, as PyTorch's fused op);
- torch fused: ``torch.ops.symm_mem.fused_matmul_reduce_scatter``;
- matmul alone (cuBLAS) and NCCL reduce-scatter alone; overlap bound = max of the two; ours / bound;
- diagnostics of the fused Triton kernel (the tuner's fastest, or the default): its time, its time with every push
  kept local and no flags (``gemm_rs.launch_without_communication``), and our GEMM alone (``ops.matmul``).

``--tune`` first times every candidate of ``gemm_rs.CANDIDATES`` (GEMM tiles x fused or two-kernel reduction x
fp32 or input-dtype partials x when to flag) per shape, checks each against an fp32 reference, stores the fastest
correct one (the ``--finalists`` fastest of the sweep timed again in alternation) in the tuning table (``--table``,
default the user cache of ``ops.tuning``; ``--write-package-table``: also the package's committed table) and writes
``bench/results/gemm_rs_tune.md``; the main table then uses it. Writes bench/results/gemm_rs.md and gemm_rs.png.

``--fallback`` (issue 24) instead compares the matmul + NCCL fallback with the hand-written baseline on the shapes
where the sweep found it slower (default ``FALLBACK_SHAPES``): the baseline (``torch.matmul`` into a kept buffer +
``dist.reduce_scatter_tensor`` into a kept output), the fallback forced (``gemm_rs_with(a, b, FALLBACK)``), the op
as selected, and the fallback as it was before (a new output and ``dist.reduce_scatter_tensor`` per call), each
timed in two interleaved passes with a device barrier before every call, under CUDA-graph replay (GPU time alone)
and for host µs per call; torch's profiler counts the GPU kernels and CUDA runtime calls of one call of each.
Writes bench/results/gemm_rs_fallback.md.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    add_shape_arguments,
    bar_chart,
    describe_machine,
    enable_torch_symm_mem,
    log0,
    markdown_table,
    parse_shapes,
    time_ms,
)

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import tuning  # noqa: E402
from triton_dist.ops.gemm_rs.op import plan_config  # noqa: E402
from triton_dist.ops.matmul import matmul  # noqa: E402
from triton_dist.ops.tuning import geomean  # noqa: E402
from triton_dist.testing import setup_distributed  # noqa: E402
from triton_dist.testing.distributed import max_over_ranks  # noqa: E402
from triton_dist.testing.timing import bench_samples, graphed_us, host_us, idle_ms_samples  # noqa: E402

grs = importlib.import_module("triton_dist.ops.gemm_rs")  # the module (ops.gemm_rs is the function)


def torch_fused(group_name: str):  # noqa: ANN201
    if not enable_torch_symm_mem(group_name):
        return None

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", scatter_dim=0, group_name=group_name)

    return run


def normwise_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max over ranks of ||out - ref|| / ||ref||."""
    value = torch.tensor([float((out.float() - ref).norm() / ref.norm())], dtype=torch.float64, device="cuda")
    if not torch.isfinite(value).all():
        value.fill_(float("inf"))
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def tune_shape(
    a: torch.Tensor, b: torch.Tensor, ref: torch.Tensor, args: argparse.Namespace, rows: list[list[object]]
) -> tuple[grs.GemmRSConfig, float, grs.GemmRSConfig | None]:
    """Time every candidate on this problem.

    Returns the fastest candidate whose error is within the dtype's bound, its time, and the fastest fused Triton
    candidate (for the diagnostics), if any.
    """
    m, k_local = a.shape
    n = b.shape[1]
    limit = 8e-3 if a.dtype == torch.bfloat16 else 1.5e-3
    timed: list[tuple[float, grs.GemmRSConfig]] = []
    for config in grs.CANDIDATES:
        if args.candidates == "triton" and config.gemm == "cublas":
            continue
        try:
            out = grs.gemm_rs_with(a, b, config)
            err = normwise_error(out, ref)
            ms = time_ms(lambda config=config: grs.gemm_rs_with(a, b, config), args.warmup, args.reps)
        except Exception as error:  # noqa: BLE001 (a candidate that does not compile or fit is skipped)
            log0(f"  {config.short()}: failed: {type(error).__name__}: {str(error)[:300]}")
            rows.append([f"{m},{n},{k_local * rt.current_world().world_size}", config.short(), "failed", "", ""])
            grs.clear_workspaces()
            continue
        ok = err <= limit
        log0(f"  {config.short()}: {ms:.3f} ms, normwise err {err:.2e}{'' if ok else ' (REJECTED)'}")
        rows.append([f"{m},{n},{k_local * rt.current_world().world_size}", config.short(), f"{ms:.3f}", f"{err:.1e}",
                     "ok" if ok else "rejected"])  # fmt: skip
        if ok:
            timed.append((ms, config))
        grs.clear_workspaces()
    fused = [entry for entry in timed if not entry[1].fallback and entry[1].gemm == "triton" and entry[1].fused]
    triton_config = min(fused, key=lambda entry: entry[0])[1] if fused else None
    if not timed:
        return grs.FALLBACK, float("nan"), triton_config
    best_ms, best = rematch(a, b, sorted(timed, key=lambda entry: entry[0])[: args.finalists], args)
    return best, best_ms, triton_config


def rematch(
    a: torch.Tensor, b: torch.Tensor, finalists: list[tuple[float, grs.GemmRSConfig]], args: argparse.Namespace
) -> tuple[float, grs.GemmRSConfig]:
    """The fastest of the sweep's ``finalists``, timed again in alternation (``--rematch-rounds`` rounds, the median
    of each one's rounds): one pass per candidate leaves the choice to run-to-run noise where the leaders are within
    a few percent (a cuBLAS path timed 0.559 ms in the sweep and 0.644 ms in the next process on the same shape)."""
    if len(finalists) < 2 or args.rematch_rounds < 1:
        return finalists[0]
    rounds: dict[int, list[float]] = {i: [] for i in range(len(finalists))}
    for _ in range(args.rematch_rounds):
        for i, (_, config) in enumerate(finalists):
            rounds[i].append(time_ms(lambda config=config: grs.gemm_rs_with(a, b, config), args.warmup, args.reps))
            grs.clear_workspaces()
    medians = [(statistics.median(times), finalists[i][1]) for i, times in rounds.items()]
    for ms, config in medians:
        log0(f"  rematch {config.short()}: {ms:.3f} ms (median of {args.rematch_rounds} alternating rounds)")
    return min(medians, key=lambda entry: entry[0])


def bench_shape(
    m: int,
    n: int,
    k: int,
    dtype: torch.dtype,
    args: argparse.Namespace,
    fused_op: Any,
    table_path: Path,
    tune_rows: list[list[object]],
) -> tuple[list[object], dict[str, float]]:
    """One row of the table (and, with --tune, the sweep of this shape); returns the row and the speedups."""
    world = rt.current_world()
    w = world.world_size
    k_local = k // w
    generator = torch.Generator(device="cuda").manual_seed(1234 + world.rank)
    a = torch.randn(m, k_local, generator=generator, device="cuda").to(dtype)
    b = (torch.randn(k_local, n, generator=generator, device="cuda") / k**0.5).to(dtype)
    partial32 = a.float() @ b.float()
    ref = partial32.new_empty(m // w, n)
    dist.reduce_scatter_tensor(ref, partial32)
    del partial32
    log0(f"shape {m},{n},{k} ({args.dtype}, per rank [{m}, {k_local}] x [{k_local}, {n}])")
    diagnosed = grs.GemmRSConfig(partial_dtype="input")
    if args.tune:
        best, best_ms, best_triton = tune_shape(a, b, ref, args, tune_rows)
        diagnosed = best_triton or diagnosed
        entry_key = grs.tuning_key(m, n, k_local, dtype, w, a.device)
        if world.rank == 0:
            tuning.store(table_path, entry_key, best, {"ms": best_ms})  # type: ignore[arg-type]
            if args.write_package_table:
                tuning.store(tuning.PACKAGE_TABLE, entry_key, best, {"ms": best_ms})  # type: ignore[arg-type]
        dist.barrier()
        log0(f"  tuned: {best.short()} ({best_ms:.3f} ms) -> {table_path}")
    config = plan_config(a, b, None)  # what the op runs here: the tuned entry, else the calibrated cost model
    err_ours = normwise_error(grs.gemm_rs(a, b), ref)
    err_base = normwise_error(grs.matmul_reduce_scatter(a, b), ref)
    t_ours = time_ms(lambda: grs.gemm_rs(a, b), args.warmup, args.reps)
    t_base = time_ms(lambda: grs.matmul_reduce_scatter(a, b), args.warmup, args.reps)
    idle_ours = max_over_ranks(statistics.median(idle_ms_samples(lambda: grs.gemm_rs(a, b), rep=args.reps)))
    idle_base = max_over_ranks(
        statistics.median(idle_ms_samples(lambda: grs.matmul_reduce_scatter(a, b), rep=args.reps))
    )
    host_ours = host_us(lambda: grs.gemm_rs(a, b))
    host_base = host_us(lambda: grs.matmul_reduce_scatter(a, b))
    t_mm = time_ms(lambda: a @ b, args.warmup, args.reps)
    partial = a @ b
    rs_out = torch.empty(m // w, n, dtype=dtype, device="cuda")
    t_rs = time_ms(lambda: dist.reduce_scatter_tensor(rs_out, partial), args.warmup, args.reps)
    t_fused = float("nan")
    if fused_op is not None:
        try:
            fused_op(a, b)
            t_fused = time_ms(lambda: fused_op(a, b), args.warmup, args.reps)
        except Exception as error:  # noqa: BLE001
            log0(f"  torch fused failed: {error}")
    # Where the fused Triton kernel's time goes: the same kernel without NVLink pushes or flags, and our GEMM alone
    # (ops.matmul, same tile configuration, TMA-store epilogue, no partial sums).
    t_triton = time_ms(lambda: grs.gemm_rs_with(a, b, diagnosed), args.warmup, args.reps)
    t_no_comm = time_ms(lambda: grs.launch_without_communication(a, b, diagnosed), args.warmup, args.reps)
    t_our_gemm = time_ms(lambda: matmul(a, b, config=diagnosed.matmul), args.warmup, args.reps)
    grs.clear_workspaces()
    bound = max(t_mm, t_rs)
    row = [f"{m},{n},{k}", f"{t_ours:.3f}", config.short(), f"{t_base:.3f}", f"{t_fused:.3f}", f"{t_mm:.3f}",
           f"{t_rs:.3f}", f"{bound:.3f}", f"{t_ours / bound:.3f}", f"{t_base / t_ours:.3f}",
           f"{t_fused / t_ours:.3f}", f"{err_ours:.1e}", f"{err_base:.1e}", diagnosed.short(), f"{t_triton:.3f}",
           f"{t_no_comm:.3f}", f"{t_our_gemm:.3f}", f"{idle_ours:.3f} / {idle_base:.3f}",
           f"{host_ours:.0f} / {host_base:.0f}"]  # fmt: skip
    log0("  " + " | ".join(str(x) for x in row))
    return row, {"ours": t_base / t_ours, "torch fused": t_base / t_fused, "overlap bound": t_base / bound}


FALLBACK_SHAPES = "1024,4096,4096;1024,5120,8192;2048,3584,3584;2048,6144,6144;1024,6144,16384;4096,8192,8192"
"""The sweep's rows where the fallback was slower than the baseline (2 x H100, 9e144fd), and one where it was not."""


def _per_call_profile(fn: Callable[[], object], calls: int = 5) -> tuple[str, str]:
    """torch.profiler over ``calls`` calls: the GPU kernels / copies / fills and the host's CUDA runtime, driver and
    NCCL calls (launches, allocations, event records and waits), per call."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    device: collections.Counter[str] = collections.Counter()
    runtime: collections.Counter[str] = collections.Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            device[event.name[:48]] += 1
        elif event.name.startswith(("cuda", "cuLaunch", "cuMem", "nccl")):  # CUDA runtime / driver / NCCL calls
            runtime[event.name] += 1

    def text(counter: collections.Counter[str]) -> str:
        return ", ".join(f"{name} x{count / calls:g}" for name, count in sorted(counter.items())) or "none"

    return text(device), text(runtime)


def fallback_row(m: int, n: int, k: int, dtype: torch.dtype, reps: int) -> tuple[list[object], list[object]]:
    """``--fallback``, one shape: the baseline beside the fallback (forced, selected, as before), see the docstring;
    returns the row and the per-call profile row."""
    world = rt.current_world()
    w, group = world.world_size, world.group
    torch.manual_seed(1234 + world.rank)
    a = torch.randn(m, k // w, dtype=dtype, device="cuda") / k**0.25
    b = torch.randn(k // w, n, dtype=dtype, device="cuda") / k**0.25
    partial = torch.empty(m, n, dtype=dtype, device="cuda")
    out = torch.empty(m // w, n, dtype=dtype, device="cuda")
    kept = torch.empty(m, n, dtype=dtype, device="cuda")

    def baseline() -> torch.Tensor:
        torch.matmul(a, b, out=partial)
        dist.reduce_scatter_tensor(out, partial, group=group)
        return out

    def before() -> torch.Tensor:  # the fallback up to 9e144fd: a new output, the c10d Python wrapper
        torch.matmul(a, b, out=kept)
        here = torch.empty((m // w, n), dtype=a.dtype, device=a.device)
        dist.reduce_scatter_tensor(here, kept, group=group)
        return here

    impls: dict[str, Callable[[], torch.Tensor]] = {
        "base": baseline,
        "fallback": lambda: grs.gemm_rs_with(a, b, grs.FALLBACK),
        "op": lambda: grs.gemm_rs(a, b),
        "before": before,
    }
    expected = baseline().clone()
    error = max(float((fn().float() - expected.float()).abs().max()) for fn in impls.values())
    passes: dict[str, list[float]] = {name: [] for name in impls}
    for _ in range(2):
        for name, fn in impls.items():
            passes[name].append(max_over_ranks(statistics.median(bench_samples(fn, warmup=3, rep=reps))))
    host = {name: host_us(fn) for name, fn in impls.items()}
    profiles = {name: _per_call_profile(fn) for name, fn in impls.items()}
    graphed = {}
    for name, fn in impls.items():  # last: a capture that fails leaves only the later captures in doubt
        try:
            graphed[name] = f"{graphed_us(fn):.1f}"
        except Exception as failure:  # noqa: BLE001 (reported, not fatal)
            graphed[name] = type(failure).__name__
            log0(f"  {name} graphed: {type(failure).__name__}: {failure}")
    path = grs.path_of(a, b)
    base_ms = min(passes["base"])
    row: list[object] = [f"{m},{n},{k}", path]
    row += [f"{passes[name][0]:.3f} / {passes[name][1]:.3f} ({base_ms / min(passes[name]):.2f}x)" for name in impls]
    row += [" / ".join(graphed[name] for name in impls), " / ".join(f"{host[name]:.0f}" for name in impls)]
    row += [f"{error:.1e}"]
    log0(f"RESULT fallback {m},{n},{k} [{path}]: " + " | ".join(str(x) for x in row[2:]))
    for name in impls:
        log0(f"  {name}: GPU per call: {profiles[name][0]}; runtime per call: {profiles[name][1]}")
    detail: list[object] = ["", "per call"]
    detail += [f"GPU: {profiles[name][0]}<br>host: {profiles[name][1]}" for name in impls]
    grs.clear_workspaces()
    return row, [*detail, "", "", ""]


def fallback_rows(args: argparse.Namespace, dtype: torch.dtype) -> list[list[object]]:
    """``--fallback``: every shape's row and per-call profile row."""
    rows: list[list[object]] = []
    for m, n, k in parse_shapes(args.shapes or FALLBACK_SHAPES):
        rows.extend(fallback_row(m, n, k, dtype, args.reps))
    return rows


def write_fallback(args: argparse.Namespace, rows: list[list[object]]) -> None:
    """bench/results/gemm_rs_fallback.md (rank 0)."""
    headers = ["M,N,K", "op path", "base ms (1st / 2nd)", "fallback ms (x)", "op ms (x)", "before ms (x)",
               "graphed µs base / fallback / op / before", "host µs base / fallback / op / before",
               "max abs diff to base"]  # fmt: skip
    lines = [f"# gemm_rs: the matmul + NCCL fallback beside the baseline ({args.dtype}, "
             f"{rt.current_world().world_size} ranks)", "", *describe_machine(), "",
             f"ms: median of {args.reps} calls, device barrier before each, max over ranks, two interleaved passes; "
             "(x) = best base / best of the column. graphed: one CUDA graph of 10 calls (GPU time alone). host: "
             "µs to enqueue one call while the GPU is busy. Per call: torch.profiler over 5 calls.", "",
             markdown_table(headers, rows), ""]  # fmt: skip
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{args.name}_fallback.md").write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shape_arguments(parser, reps=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--heap-size", default="3G")
    parser.add_argument("--tune", action="store_true", help="time every candidate configuration first")
    parser.add_argument(
        "--candidates", default="all", choices=["all", "triton"], help="'triton': leave the cuBLAS path out of --tune"
    )
    parser.add_argument("--finalists", type=int, default=3, help="--tune: how many leaders are timed again")
    parser.add_argument("--rematch-rounds", type=int, default=3, help="--tune: alternating rounds of the finalists")
    parser.add_argument(
        "--write-package-table", action="store_true", help="--tune: also store into the package's committed table"
    )
    parser.add_argument("--table", default=None, help="tuning table to store into (default: the user cache)")
    parser.add_argument("--out-dir", default=str(RESULTS))
    parser.add_argument("--name", default="gemm_rs", help="file name stem of the results")
    parser.add_argument("--fallback", action="store_true", help="only the fallback beside the baseline (issue 24)")
    args = parser.parse_args()
    setup_distributed(args.heap_size)
    world = rt.current_world()
    w = world.world_size
    dtype = getattr(torch, args.dtype)
    if args.fallback:
        fallback = fallback_rows(args, dtype)
        if world.rank == 0:
            write_fallback(args, fallback)
        dist.barrier()
        rt.finalize()
        dist.destroy_process_group()
        return 0
    out_dir = Path(args.out_dir)
    table_path = Path(args.table) if args.table else tuning.cache_path()
    fused_op = torch_fused(dist.group.WORLD.group_name)
    headers = ["M,N,K", "ours ms", "config", "mm+NCCL ms", "torch fused ms", "mm alone ms", "NCCL RS alone ms",
               "bound ms", "ours/bound", "speedup vs mm+NCCL", "vs torch fused", "err ours", "err mm+NCCL",
               "Triton fused config", "its ms", "its ms without comm", "our GEMM alone ms",
               "from idle ms ours / mm+NCCL", "host µs ours / mm+NCCL"]  # fmt: skip
    rows: list[list[object]] = []
    tune_rows: list[list[object]] = []
    speedups: dict[str, list[float]] = {"ours": [], "torch fused": [], "overlap bound": []}
    labels = []
    for m, n, k in parse_shapes(args.shapes):
        row, ratios = bench_shape(m, n, k, dtype, args, fused_op, table_path, tune_rows)
        rows.append(row)
        labels.append(f"{m},{n},{k}")
        for name, value in ratios.items():
            speedups[name].append(value)
        grs.clear_workspaces()
    geo = {name: geomean(values) for name, values in speedups.items()}
    summary = (
        f"Geo-mean speedup over torch.matmul + NCCL reduce_scatter: ours {geo['ours']:.3f}x, torch fused "
        f"{geo['torch fused']:.3f}x, overlap bound {geo['overlap bound']:.3f}x."
    )
    log0(summary)
    if world.rank == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"# GEMM + reduce-scatter ({args.dtype}, {w} ranks)", "", *describe_machine(), "",
                 f"Times in ms: median of {args.reps} calls after {args.warmup} warm-up calls, device barrier before "
                 "each call, max over ranks. err: normwise relative error against an fp32 reference (fp32 products "
                 "reduced in fp32).", "", markdown_table(headers, rows), "", summary, ""]  # fmt: skip
        (out_dir / f"{args.name}.md").write_text("\n".join(lines))
        bar_chart(out_dir / f"{args.name}.png", f"GEMM+RS speedup over torch.matmul + NCCL ({w} ranks, {args.dtype})",
                  labels, speedups, "speedup (x)", line=1.0)  # fmt: skip
        if args.tune:
            tune_lines = [f"# GEMM + reduce-scatter tuning ({args.dtype}, {w} ranks)", "", *describe_machine(), "",
                          markdown_table(["M,N,K", "config", "ms", "err", "verdict"], tune_rows), ""]  # fmt: skip
            (out_dir / f"{args.name}_tune.md").write_text("\n".join(tune_lines))
        (out_dir / f"{args.name}.json").write_text(json.dumps({"headers": headers, "rows": rows, "geo": geo}, indent=1))
    dist.barrier()
    rt.finalize()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
