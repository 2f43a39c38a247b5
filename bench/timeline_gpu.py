"""The GPU timeline of one device-timed call of ag_gemm and gemm_rs, beside the unfused path: where a small row's
microseconds go.

    torchrun --nproc-per-node=2 bench/timeline_gpu.py [--calls 9] [--rows ag:1024,6144,4096 rs:1024,4096,14336]

Each call runs as the benchmarks time it (``testing.timing``): a GPU spin that keeps the host ahead, the device
barrier across ranks, then the call. torch.profiler (CUDA activities only) records the calls; per row, rank 0
prints the call whose span (barrier end to last GPU activity end) is the median, one line per kernel, memcpy or
memset: its stream, start and end in µs after the barrier ended, and its name. The gaps between lines are what the
sweep's cost model calls the paths' fixed costs (the begin barrier, the copy engine's start, the flag copies, the
wait kernels).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_on_rank0_and_finish  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import ag_gemm, gemm_rs  # noqa: E402
from triton_dist.runtime.world.host_lead import lead_host  # noqa: E402
from triton_dist.testing import setup_distributed  # noqa: E402

DEFAULT_ROWS = ("ag:1024,6144,4096", "ag:1024,10240,5120", "ag:2048,10240,8192", "rs:1024,6144,6144",
                "rs:2048,8192,8192")  # fmt: skip
"""Sweep rows (op:M,N,K) whose speedup sat farthest below their overlap bound on 2 x H100 (2026-11-27)."""

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
BARRIER_KERNEL = "_barrier_kernel"


def gpu_events(trace_path: str) -> list[dict]:
    """The GPU activities of a chrome trace, sorted by start: name, stream, ts and dur in µs."""
    with open(trace_path) as f:
        trace = json.load(f)
    events = [
        {"name": e.get("name", "?"), "stream": e.get("args", {}).get("stream", "?"), "ts": float(e["ts"]),
         "dur": float(e.get("dur", 0.0))}
        for e in trace.get("traceEvents", [])
        if e.get("cat") in GPU_CATEGORIES and "ts" in e
    ]  # fmt: skip
    return sorted(events, key=lambda e: e["ts"])


def calls_after_barriers(events: list[dict]) -> list[list[dict]]:
    """Split the timeline at the device-barrier kernels: per call, the activities between a barrier and the next
    spin (``torch.cuda._sleep``'s kernel) or barrier, with times made relative to the barrier's end."""
    calls: list[list[dict]] = []
    current: list[dict] | None = None
    origin = 0.0
    for e in events:
        if BARRIER_KERNEL in e["name"]:
            if current is not None:
                calls.append(current)
            current, origin = [], e["ts"] + e["dur"]
        elif "spin" in e["name"].lower() or "sleep" in e["name"].lower():
            if current is not None:
                calls.append(current)
            current = None
        elif current is not None:
            current.append({**e, "start": e["ts"] - origin, "end": e["ts"] + e["dur"] - origin})
    if current:
        calls.append(current)
    return [c for c in calls if c]


def timeline(fn: Callable[[], object], calls: int) -> tuple[list[dict], list[float]]:
    """The median call's activities and every call's span (µs), ``fn`` timed as the benchmarks time it."""
    for _ in range(3):
        fn()
    rt.synchronize()
    dist.barrier()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            lead_host()
            rt.barrier_on_device()
            fn()
        rt.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        split = calls_after_barriers(gpu_events(path))
    finally:
        os.unlink(path)
    spans = [max(e["end"] for e in c) for c in split]
    if not spans:
        return [], []
    median = statistics.median_low(spans)
    return split[spans.index(median)], spans


def check_against(ours: Callable[[], torch.Tensor], unfused: Callable[[], None], want: torch.Tensor, label: str) -> str:
    """``ours()`` against the unfused path's output ``want`` on fresh data, eager and in a CUDA graph replayed
    three times (a wrong order of the streams shows as stale rows); returns a RESULT line."""
    unfused()
    rt.synchronize()
    errors = [(ours().float() - want.float()).abs().max().item()]
    graph = torch.cuda.CUDAGraph()
    rt.synchronize()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        captured = ours()
    for _ in range(3):
        captured.fill_(float("nan"))
        graph.replay()
        rt.synchronize()
        errors.append((captured.float() - want.float()).abs().max().item())
    scale = want.float().abs().max().item()
    ok = all(e <= 2e-2 * scale for e in errors)
    return f"RESULT {'ok' if ok else 'FAIL'} {label}: max error eager / 3 graph replays {errors} (scale {scale:.2f})"


def describe(label: str, events: list[dict], spans: list[float]) -> str:
    if not events:
        return f"\n== {label}: no GPU activity recorded\n"
    streams = {s: i for i, s in enumerate(dict.fromkeys(e["stream"] for e in events))}
    lines = [f"\n== {label}: median span {statistics.median(spans):.1f} µs over {len(spans)} calls "
             f"(min {min(spans):.1f}, max {max(spans):.1f}); µs after the device barrier ended"]  # fmt: skip
    lines.append(f"{'stream':>6s} {'start':>8s} {'end':>8s} {'dur':>7s}  name")
    for e in events:
        lines.append(f"{streams[e['stream']]:>6d} {e['start']:8.1f} {e['end']:8.1f} {e['dur']:7.1f}  {e['name'][:90]}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=9, help="profiled calls per row (the median one is printed)")
    parser.add_argument("--rows", nargs="*", default=list(DEFAULT_ROWS), help="op:M,N,K with op ag or rs")
    args = parser.parse_args()
    ag_op = importlib.import_module("triton_dist.ops.ag_gemm.op")
    rs_op = importlib.import_module("triton_dist.ops.gemm_rs.op")
    setup_distributed("8G")
    world = rt.current_world()
    w, device, dtype = world.world_size, world.device, torch.bfloat16
    reports: list[str] = []
    for row in args.rows:
        op, dims = row.split(":")
        m, n, k = (int(x) for x in dims.split(","))
        if op == "ag":
            a = torch.randn(m // w, k, device=device, dtype=dtype)
            b = torch.randn(k, n // w, device=device, dtype=dtype)
            gathered = torch.empty((m, k), dtype=dtype, device=device)
            c = torch.empty((m, n // w), dtype=dtype, device=device)

            def unfused(a: torch.Tensor = a, b: torch.Tensor = b, g: torch.Tensor = gathered,
                        c: torch.Tensor = c) -> None:  # fmt: skip
                dist.all_gather_into_tensor(g, a)
                torch.matmul(g, b, out=c)

            ours, path = functools.partial(ag_gemm, a, b), ag_op.path_of(a, b)
            if path == "cublas":  # the begin kernel's placement (CublasPlan.begin_on_side), checked then timed
                plan = ag_op.plan_for(a, b)
                for on_side in (False, True):
                    plan.begin_on_side = on_side
                    reports.append(check_against(ours, unfused, c, f"{op} {dims} begin_on_side={on_side}"))
                    events, spans = timeline(ours, args.calls)
                    reports.append(describe(f"{op} {dims} ours (cublas, begin_on_side={on_side})", events, spans))
                plan.begin_on_side = False
        elif op == "rs":
            a = torch.randn(m, k // w, device=device, dtype=dtype)
            b = torch.randn(k // w, n, device=device, dtype=dtype)
            partial = torch.empty((m, n), dtype=dtype, device=device)
            out = torch.empty((m // w, n), dtype=dtype, device=device)

            def unfused(a: torch.Tensor = a, b: torch.Tensor = b, p: torch.Tensor = partial,
                        o: torch.Tensor = out) -> None:  # fmt: skip
                torch.matmul(a, b, out=p)
                dist.reduce_scatter_tensor(o, p)

            ours, path = functools.partial(gemm_rs, a, b), rs_op.path_of(a, b)
        else:
            raise SystemExit(f"--rows: {row!r}: op must be ag or rs")
        runs = [(f"{op} {dims} unfused", unfused)]
        if not (op == "ag" and path == "cublas"):  # that path's default is timed above, as begin_on_side=False
            runs.insert(0, (f"{op} {dims} ours ({path})", ours))
        for label, fn in runs:
            events, spans = timeline(fn, args.calls)
            reports.append(describe(label, events, spans))

    def write() -> None:
        print(f"GPU timelines on rank 0 ({torch.cuda.get_device_name(0)}, {w} ranks)")
        print("\n".join(reports), flush=True)

    return write_on_rank0_and_finish(write)


if __name__ == "__main__":
    sys.exit(main())
