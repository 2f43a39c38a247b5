"""The GPU timeline of one device-timed call of ag_gemm and gemm_rs, beside the unfused path: where a small row's
microseconds go.

    torchrun --nproc-per-node=2 bench/timeline_gpu.py [--calls 9] [--rows ag:1024,6144,4096 rs:1024,4096,14336]
        [--flags auto|memop_parity|memops|memop_write|kernels] [--wait-beside off|on|both]

Each call runs as the benchmarks time it (``testing.timing``): a GPU spin that keeps the host ahead, the device
barrier across ranks, then the call. torch.profiler (CUDA activities only) records the calls; per row, rank 0
prints the call whose span (barrier end to last GPU activity end) is the median, one line per kernel, memcpy or
memset: its stream, start and end in µs after the barrier ended, and its name. The gaps between lines are what the
sweep's cost model calls the paths' fixed costs (the begin barrier, the copy engine's start, the flag copies, the
wait kernels). ``--flags`` picks how the AG cuBLAS path's double-buffered calls flag
(``ops.ag_gemm.op.DOUBLE_BUFFER_FLAGS``; the row's label names the scheme that ran). ``--wait-beside`` where their
waits run (``CublasPlan.wait_beside``, ``ops.ag_gemm.op.CUBLAS_WAIT_BESIDE``): ``both`` times each such row twice,
the waits on the current stream, then beside the own GEMM on the waiter stream (label ", waits beside"), each run
checked against the unfused path first.

    torchrun --nproc-per-node=2 bench/timeline_gpu.py --from-idle [--calls 9] [--rows ...]

``--from-idle`` profiles each call as ``testing.timing.idle_ms_samples`` times it (the sweep's "from idle" column):
synchronize, ``dist.barrier()``, an event, the call, an event. torch.profiler records CPU activities too (the CUDA
runtime and driver API calls, the aten ops). Per row and path, rank 0 prints every rank's median call by span
(the start of the call's first host op to the end of its last GPU activity): the host ops, API calls and GPU activities
merged in time order, µs after the call's start, and a split: host enqueue (first to last API call), last API call
to the GPU's end, the begin barrier kernel, and when this rank left ``dist.barrier`` after the other ranks
(``time.time_ns``, one clock for all ranks of one host). The profiler's own cost per API call (a few µs) is
inside the host times.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_on_rank0_and_finish  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import ag_gemm, gemm_rs  # noqa: E402
from triton_dist.runtime.world.host_lead import lead_host  # noqa: E402
from triton_dist.testing import setup_distributed  # noqa: E402

DEFAULT_ROWS = ("ag:1024,6144,4096", "ag:1024,10240,5120", "ag:2048,10240,8192", "rs:1024,6144,6144",
                "rs:2048,8192,8192")  # fmt: skip
"""Sweep rows (op:M,N,K) whose speedup sat farthest below their overlap bound on 2 x H100 (2026-11-27)."""

FROM_IDLE_ROWS = ("ag:1024,6144,4096", "ag:1024,10240,5120", "rs:1024,6144,6144")
"""``--from-idle``'s rows: the AG cuBLAS path's farthest from idle on 2 x H100 (issue 24) and an RS row beside."""

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
API_CATEGORIES = ("cuda_runtime", "cuda_driver")
OP_CATEGORY = "cpu_op"
BARRIER_KERNEL = "_barrier_kernel"
BEGIN_KERNEL = "begin"
"""The ops' begin kernels (``_begin_kernel``, ``_cublas_begin_kernel``, ``_cublas_begin_wait_kernel``) hold it."""
WAIT_BESIDE = {"off": (False,), "on": (True,), "both": (False, True)}
"""``--wait-beside``'s choices: the ``CublasPlan.wait_beside`` settings each double-buffered AG cuBLAS row is timed
with."""
CALL_MARK = "timeline_gpu.idle_call"
"""The ``record_function`` range around each from-idle call (its events, the call, the end event)."""


def traced(prof: profile, parse: Callable[[str], list[dict]]) -> list[dict]:
    """``parse`` of the profiler's chrome trace, written to a temporary file that is removed after."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        return parse(path)
    finally:
        os.unlink(path)


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


def host_and_gpu_events(trace_path: str) -> list[dict]:
    """The complete events of a chrome trace that ``idle_calls`` reads, sorted by start: the ``CALL_MARK`` ranges,
    the host ops (``cpu_op``), the CUDA runtime and driver API calls and the GPU activities, each with its name,
    category, thread (``tid``), stream (GPU activities), correlation id (API calls and GPU activities), ts and dur
    in µs."""
    with open(trace_path) as f:
        trace = json.load(f)
    wanted = (*GPU_CATEGORIES, *API_CATEGORIES, OP_CATEGORY, "user_annotation")
    events = []
    for e in trace.get("traceEvents", []):
        if e.get("ph", "X") != "X" or e.get("cat") not in wanted or "ts" not in e:
            continue
        if e["cat"] == "user_annotation" and e.get("name") != CALL_MARK:
            continue
        args = e.get("args", {})
        events.append(
            {"name": e.get("name", "?"), "cat": e["cat"], "tid": e.get("tid"), "stream": args.get("stream", "?"),
             "correlation": args.get("correlation"), "ts": float(e["ts"]), "dur": float(e.get("dur", 0.0))}
        )  # fmt: skip
    return sorted(events, key=lambda e: e["ts"])


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


@dataclass
class IdleCall:
    """One from-idle call: ``events`` (kind "op", "api" or "gpu"; start, end and dur in µs after the call's first
    host op; a GPU activity's stream and ``launched``, the start of the API call that enqueued it) and its split in
    µs."""

    events: list[dict]
    span: float
    """The call's first host op to the end of its last GPU activity (or host op, without GPU activity)."""
    enqueue: float
    """The first API call's start to the last API call's end."""
    in_api: float
    """Time inside API calls (their union) within ``enqueue``."""
    tail: float
    """The last API call's end to the last GPU activity's end."""
    first_gpu: float
    """The first GPU activity's start (NaN without GPU activity)."""
    begin: float
    """The begin kernels' duration (NaN when the call launched none)."""


def idle_calls(events: list[dict]) -> list[IdleCall]:
    """Per ``CALL_MARK`` range of ``events`` (``host_and_gpu_events``), in order: the host ops and API calls of its
    thread inside the range, and the GPU activities that those API calls launched (same correlation id; a
    barrier's or watchdog's work on the GPU or on another thread is left out), merged in time order with times
    relative to the call's first host op, and the call's split (``IdleCall``)."""
    marks = [e for e in events if e["cat"] == "user_annotation"]
    calls = []
    for mark in marks:
        lo, hi = mark["ts"], mark["ts"] + mark["dur"]
        host = [e for e in events if e["cat"] in (OP_CATEGORY, *API_CATEGORIES) and e["tid"] == mark["tid"]
                and lo <= e["ts"] <= hi]  # fmt: skip
        apis = [e for e in host if e["cat"] in API_CATEGORIES]
        launched = {e["correlation"] for e in apis if e["correlation"] is not None}
        gpu = [e for e in events if e["cat"] in GPU_CATEGORIES and e["correlation"] in launched]
        origin = min((e["ts"] for e in host), default=lo)
        launches = {e["correlation"]: e["ts"] - origin for e in apis}
        merged = [
            {"kind": "gpu" if e["cat"] in GPU_CATEGORIES else "api" if e["cat"] in API_CATEGORIES else "op",
             "name": e["name"], "stream": e["stream"] if e["cat"] in GPU_CATEGORIES else None,
             "start": e["ts"] - origin, "end": e["ts"] + e["dur"] - origin, "dur": e["dur"],
             "launched": launches[e["correlation"]] if e["cat"] in GPU_CATEGORIES else None}
            for e in sorted(host + gpu, key=lambda e: e["ts"])
        ]  # fmt: skip
        gpu_ends = [e["end"] for e in merged if e["kind"] == "gpu"]
        api = [e for e in merged if e["kind"] == "api"]
        last_api = max((e["end"] for e in api), default=0.0)
        begins = [e["dur"] for e in merged if e["kind"] == "gpu" and BEGIN_KERNEL in e["name"].lower()]
        calls.append(
            IdleCall(
                events=merged,
                span=max(gpu_ends + [e["end"] for e in merged] + [0.0]),
                enqueue=last_api - min((e["start"] for e in api), default=0.0),
                in_api=_union_us([(e["start"], e["end"]) for e in api]),
                tail=max(gpu_ends) - last_api if gpu_ends else float("nan"),
                first_gpu=min((e["start"] for e in merged if e["kind"] == "gpu"), default=float("nan")),
                begin=sum(begins) if begins else float("nan"),
            )
        )
    return calls


def barrier_offsets_us(exits_ns: Sequence[Sequence[int]], rank: int) -> list[float]:
    """Per call, µs that ``rank`` left ``dist.barrier`` after the earliest other rank (negative: before it), from
    every rank's ``time.time_ns()`` after the barrier (``exits_ns[r][i]``: rank r, call i; one clock on one host).

    Raises ValueError when the ranks timed different numbers of calls or there is no other rank."""
    if len(exits_ns) < 2:
        raise ValueError(f"barrier offsets need 2+ ranks, got {len(exits_ns)}")
    if len({len(x) for x in exits_ns}) != 1:
        raise ValueError(f"the ranks timed different numbers of calls: {[len(x) for x in exits_ns]}")
    others = [r for r in range(len(exits_ns)) if r != rank]
    return [(exits_ns[rank][i] - min(exits_ns[r][i] for r in others)) / 1e3 for i in range(len(exits_ns[rank]))]


def _median_of(calls: list[IdleCall], field: str) -> float:
    values = [getattr(c, field) for c in calls if not math.isnan(getattr(c, field))]
    return statistics.median(values) if values else float("nan")


def describe_idle(label: str, rank: int, calls: list[IdleCall], offsets: list[float], elapsed: list[float]) -> str:
    """The median call (by span) of ``calls`` as text: a header, the split and the merged events. ``offsets`` and
    ``elapsed`` (the events' µs, as ``idle_ms_samples`` measures) are per call, in the order of ``calls``."""
    if not calls:
        return f"\n== {label} [rank {rank}]: no from-idle call recorded"
    if not len(calls) == len(offsets) == len(elapsed):
        raise ValueError(f"{label}: {len(calls)} calls but {len(offsets)} offsets and {len(elapsed)} event times")
    spans = [c.span for c in calls]
    index = spans.index(statistics.median_low(spans))
    call = calls[index]
    streams = {s: i for i, s in enumerate(dict.fromkeys(e["stream"] for e in call.events if e["kind"] == "gpu"))}
    lines = [
        f"\n== {label} [rank {rank}]: median span {statistics.median(spans):.1f} µs over {len(calls)} calls (min "
        f"{min(spans):.1f}, max {max(spans):.1f}); events (idle_ms_samples) median {statistics.median(elapsed):.1f} "
        f"µs; left dist.barrier median {statistics.median(offsets):+.1f} µs after the other ranks",
        f"call {index} (µs after its first host op): span {call.span:.1f}, enqueue (first to last API call) "
        f"{call.enqueue:.1f} (in API calls {call.in_api:.1f}), last API call to GPU end {call.tail:.1f}, first GPU "
        f"start {call.first_gpu:.1f}, begin kernel {call.begin:.1f}, left dist.barrier {offsets[index]:+.1f} after "
        f"the other ranks, events {elapsed[index]:.1f}",
        f"medians over the calls: enqueue {_median_of(calls, 'enqueue'):.1f}, last API call to GPU end "
        f"{_median_of(calls, 'tail'):.1f}, first GPU start {_median_of(calls, 'first_gpu'):.1f}, begin kernel "
        f"{_median_of(calls, 'begin'):.1f}",
        f"{'kind':>4s} {'stream':>6s} {'start':>8s} {'end':>8s} {'dur':>7s}  name",
    ]
    for e in call.events:
        stream = f"{streams[e['stream']]:>6d}" if e["kind"] == "gpu" else f"{'-':>6s}"
        launched = f"  (its API call at {e['launched']:.1f})" if e["kind"] == "gpu" else ""
        line = f"{e['kind']:>4s} {stream} {e['start']:8.1f} {e['end']:8.1f} {e['dur']:7.1f}  {e['name'][:90]}"
        lines.append(line + launched)
    return "\n".join(lines)


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
    split = calls_after_barriers(traced(prof, gpu_events))
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


@dataclass
class Row:
    """One ``op:M,N,K`` row's operands: ``ours`` (ag_gemm or gemm_rs) and ``unfused`` (NCCL and cuBLAS) calls."""

    op: str
    dims: str
    path: str
    ours: Callable[[], torch.Tensor]
    unfused: Callable[[], None]
    want: torch.Tensor
    """The unfused path's output (after ``unfused()``)."""
    plan: Any
    """The AG cuBLAS path's plan (its ``begin_on_side`` is set per run unless its eager calls use double buffers,
    then its ``wait_beside``), else None."""
    wait_beside: tuple[bool, ...] = (False,)
    """The ``CublasPlan.wait_beside`` settings a double-buffered cuBLAS plan is timed with, in order."""

    def runs(self) -> list[tuple[str, Callable[[], object], dict[str, bool] | None]]:
        """(label, call, the cuBLAS plan's attributes to set before it or None) of each path the row times, in
        order: ``begin_on_side`` False and True on the begin barrier's path; each of ``wait_beside`` on double
        buffers (whose calls run no begin kernel)."""
        prefix = f"{self.op} {self.dims}"
        ours: list[tuple[str, Callable[[], object], dict[str, bool] | None]]
        double = getattr(self.plan, "double", None)
        if double is not None:  # no begin kernel: begin_on_side changes nothing, where the waits run may
            ours = []
            for beside in self.wait_beside:
                label = f"{prefix} ours (cublas, double buffers, {double.flags_by} flags{', waits beside' * beside})"
                ours.append((label, self.ours, {"begin_on_side": False, "wait_beside": beside}))
        elif self.plan is not None:  # the begin kernel's placement (CublasPlan.begin_on_side), both timed
            ours = [
                (f"{prefix} ours (cublas, begin_on_side={s})", self.ours, {"begin_on_side": s}) for s in (False, True)
            ]
        else:
            ours = [(f"{prefix} ours ({self.path})", self.ours, None)]
        return [*ours, (f"{prefix} unfused", self.unfused, None)]


def build_row(
    row: str, w: int, device: torch.device, dtype: torch.dtype, wait_beside: tuple[bool, ...] = (False,)
) -> Row:
    """The operands of ``row`` (``op:M,N,K``, op ag or rs, N and K global) on ``w`` ranks, an AG cuBLAS plan on
    double buffers timed with each of ``wait_beside``; SystemExit when the row is malformed."""
    ag_op = importlib.import_module("triton_dist.ops.ag_gemm.op")
    rs_op = importlib.import_module("triton_dist.ops.gemm_rs.op")
    try:
        op, dims = row.split(":")
        m, n, k = (int(x) for x in dims.split(","))
    except ValueError:
        raise SystemExit(f"--rows: {row!r}: expected op:M,N,K (e.g. ag:1024,6144,4096)") from None
    if op == "ag":
        a = torch.randn(m // w, k, device=device, dtype=dtype)
        b = torch.randn(k, n // w, device=device, dtype=dtype)
        gathered = torch.empty((m, k), dtype=dtype, device=device)
        c = torch.empty((m, n // w), dtype=dtype, device=device)

        def unfused_ag(a: torch.Tensor = a, b: torch.Tensor = b, g: torch.Tensor = gathered,
                       c: torch.Tensor = c) -> None:  # fmt: skip
            dist.all_gather_into_tensor(g, a)
            torch.matmul(g, b, out=c)

        path = ag_op.path_of(a, b)
        plan = ag_op.plan_for(a, b) if path.startswith("cublas") else None
        return Row(op, dims, path, functools.partial(ag_gemm, a, b), unfused_ag, c, plan, wait_beside)
    if op == "rs":
        a = torch.randn(m, k // w, device=device, dtype=dtype)
        b = torch.randn(k // w, n, device=device, dtype=dtype)
        partial = torch.empty((m, n), dtype=dtype, device=device)
        out = torch.empty((m // w, n), dtype=dtype, device=device)

        def unfused_rs(a: torch.Tensor = a, b: torch.Tensor = b, p: torch.Tensor = partial,
                       o: torch.Tensor = out) -> None:  # fmt: skip
            torch.matmul(a, b, out=p)
            dist.reduce_scatter_tensor(o, p)

        return Row(op, dims, rs_op.path_of(a, b), functools.partial(gemm_rs, a, b), unfused_rs, out, None)
    raise SystemExit(f"--rows: {row!r}: op must be ag or rs")


def profile_from_idle(fn: Callable[[], object], calls: int) -> tuple[list[IdleCall], list[int], list[float]]:
    """``calls`` calls of ``fn`` as ``idle_ms_samples`` times them, profiled (CPU and CUDA activities): per call,
    its ``IdleCall``, ``time.time_ns()`` on leaving ``dist.barrier`` and the events' µs. A collective."""
    for _ in range(3):
        fn()
    exits: list[int] = []
    elapsed: list[float] = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            rt.synchronize()
            dist.barrier()
            exits.append(time.time_ns())
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with record_function(CALL_MARK):
                start.record()
                fn()
                end.record()
            end.synchronize()
            elapsed.append(start.elapsed_time(end) * 1000.0)
    split = idle_calls(traced(prof, host_and_gpu_events))
    if len(split) != calls:
        raise RuntimeError(f"the trace holds {len(split)} {CALL_MARK} ranges for {calls} profiled calls")
    return split, exits, elapsed


def require_gpu_ranks(script: str) -> None:
    """SystemExit naming what is missing unless this process is one of 2+ torchrun ranks and sees a GPU."""
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    if "LOCAL_RANK" not in os.environ or ranks < 2:
        raise SystemExit(
            f"{script} needs 2+ ranks, one GPU each (WORLD_SIZE={os.environ.get('WORLD_SIZE', 'unset')}): "
            f"run it as torchrun --nproc-per-node=2 {script} [--from-idle]"
        )
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise SystemExit(f"{script} profiles GPU work: no GPU is visible on rank {os.environ['LOCAL_RANK']}")


def main(argv: list[str] | None = None) -> int:
    """Profile the rows (``--from-idle``: as ``idle_ms_samples`` times them) and print the timelines on rank 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=9, help="profiled calls per row (the median one is printed)")
    parser.add_argument("--rows", nargs="*", default=None, help="op:M,N,K with op ag or rs (default: per mode)")
    parser.add_argument("--from-idle", action="store_true", help="profile calls as idle_ms_samples times them")
    parser.add_argument(
        "--flags",
        default="auto",
        choices=["auto", *importlib.import_module("triton_dist.ops.ag_gemm.op").FLAG_SCHEMES],
        help="how the AG cuBLAS path's double-buffered calls flag (ops.ag_gemm.op.DOUBLE_BUFFER_FLAGS)",
    )
    parser.add_argument(
        "--wait-beside",
        default="off",
        choices=list(WAIT_BESIDE),
        help="where the AG cuBLAS path's double-buffered calls wait (CublasPlan.wait_beside): on the current stream "
        "(off), beside the own GEMM on a waiter stream (on), or each row timed both ways (both)",
    )
    args = parser.parse_args(argv)
    rows = args.rows if args.rows is not None else list(FROM_IDLE_ROWS if args.from_idle else DEFAULT_ROWS)
    require_gpu_ranks("bench/timeline_gpu.py")
    importlib.import_module("triton_dist.ops.ag_gemm.op").DOUBLE_BUFFER_FLAGS = args.flags  # before any plan
    setup_distributed("8G")
    world = rt.current_world()
    w, device, dtype = world.world_size, world.device, torch.bfloat16
    reports: list[str] = []
    for text in rows:
        row = build_row(text, w, device, dtype, WAIT_BESIDE[args.wait_beside])
        for label, fn, settings in row.runs():
            for name, value in (settings or {}).items():  # the op's own graphs are keyed by wait_beside too
                setattr(row.plan, name, value)
            if args.from_idle:
                split, exits, elapsed = profile_from_idle(fn, args.calls)
                everyone: list[list[int] | None] = [None] * w
                dist.all_gather_object(everyone, exits)
                offsets = barrier_offsets_us([x for x in everyone if x is not None], world.rank)
                reports.append(describe_idle(label, world.rank, split, offsets, elapsed))
                continue
            if settings is not None:
                named = ", ".join(f"{name}={value}" for name, value in settings.items())
                reports.append(check_against(row.ours, row.unfused, row.want, f"{row.op} {row.dims} {named}"))
            events, spans = timeline(fn, args.calls)
            reports.append(describe(label, events, spans))
    if args.from_idle:  # every rank's lines, rank 0 prints them per path
        gathered: list[list[str] | None] = [None] * w
        dist.all_gather_object(gathered, reports)
        reports = [text for per_path in zip(*(g or [] for g in gathered), strict=True) for text in per_path]

    def write() -> None:
        where = "from idle (as idle_ms_samples times a call), every rank" if args.from_idle else "on rank 0"
        print(f"GPU timelines {where} ({torch.cuda.get_device_name(0)}, {w} ranks)")
        print("\n".join(reports), flush=True)

    return write_on_rank0_and_finish(write)


if __name__ == "__main__":
    sys.exit(main())
