"""Why the GPU idles inside ours' eager prefill step (issue 28): host synchronizations, host path, GPU gaps.

One decoder-layer stack against the torch TP baseline, one run of well under a minute:

    torchrun --nproc-per-node=2 bench/prefill_host_sync.py [--model Llama-3-8B] [--tokens 4096] [--layers 2]

The stack, weights and inputs are bench/decoder.py's (``build_layers``, ``prefill_steps``); ours is the
sequence-parallel prefill (``ag_gemm`` / ``gemm_rs``), torch the Megatron-style baseline. After a warm-up (plans,
compilation), for each of the two:

1. Synchronizations: two steps under ``torch.cuda.set_sync_debug_mode("warn")``; every warning torch raises at a
   synchronizing call (``.item()``, ``.tolist()``, ``.cpu()``, ``nonzero``, boolean-mask indexing, a blocking copy)
   is caught with its Python stack, and each distinct stack is printed once with its count per step. torch does not
   see everything (NCCL, raw driver calls, Triton launches): step 2 catches the rest.
2. The host path: each step is enqueued while the GPU sleeps (``torch.cuda._sleep``, about 10 ms, as
   ``testing.timing.host_us`` does), timed with ``time.perf_counter``: the host's own µs per step, and per piece of
   the layer (``ag_gemm``, ``gemm_rs``, RMSNorm, the RoPE tables, QK norm + RoPE, SDPA; "rest" is the remainder:
   checks, residual adds, SiLU, views). A step whose enqueueing outlasted the sleep waited for the GPU: the host
   synchronized (the piece that took the sleep's length is where), or its path is longer than the sleep.
3. Also counted over the timed steps: Python garbage collections (and their ms), allocations that went past torch's
   caching allocator (device segments allocated or freed, allocation retries), and plans built by ``ag_gemm`` /
   ``gemm_rs`` (each a collective with the peers; none are due once warm).
4. Device time per step (CUDA events, median and range over the steps, per rank) three ways: after a 1 ms GPU spin
   and a device barrier (bench/decoder.py's timing), after a 20 ms spin (the whole step enqueued before the GPU
   starts it: no launch gap is possible, only a host synchronization can still idle the GPU), and from an idle GPU
   (the host path included). "from idle" - "20 ms lead" is what the host path costs an eager caller.
5. Profiled steps (``torch.profiler``, CUDA activity, bench/decoder_anatomy.py's harness), each run alone: its span,
   busy time, idle = span - busy, and its three longest GPU gaps with the activities on either side; after the 1 ms
   lead (as the anatomy run) and again after a 20 ms spin (the step enqueued in full before it starts). Idle that
   the long lead removes was the host falling behind the GPU (under the profiler's overhead, too); idle that stays
   is the GPU waiting for itself or a peer (a stream or event wait, a host synchronization). Steps that differ from
   each other point at a one-off (the profiler's start, a garbage collection); gaps beside one op point at it.

Prints a report on rank 0 (every rank's numbers where they differ). ``--help`` lists the options.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import torch
import torch.distributed as dist
from torch.nn import functional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decoder import build_layers, prefill_steps  # noqa: E402
from decoder_anatomy import HARNESS, profile_kernels, short_name, union_length  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.layers import CONFIGS, TensorParallelAttention  # noqa: E402
from triton_dist.layers import decoder as decoder_layers  # noqa: E402 (where the layer looks rms_norm up)
from triton_dist.layers import linear as linear_layers  # noqa: E402 (where the linears look ag_gemm / gemm_rs up)
from triton_dist.testing import main_guard, rank0_print, setup_distributed, teardown  # noqa: E402
from triton_dist.testing.timing import bench_samples, idle_ms_samples  # noqa: E402

ag_gemm_op = importlib.import_module("triton_dist.ops.ag_gemm.op")  # the modules (ops' names are the functions)
gemm_rs_op = importlib.import_module("triton_dist.ops.gemm_rs.op")

SLEEP_CYCLES = 20_000_000
"""GPU clock cycles of the sleep under which the host path is timed and of the long lead (about 10 ms at Hopper
clocks): far longer than enqueueing a step takes."""
FRAMES = 10
"""The innermost Python frames shown per synchronizing call's stack."""


# --------------------------------------------------------------------------------------------- synchronizations


@dataclass
class SyncReport:
    """The synchronizing calls torch warned about: stack (innermost last) -> count, and the messages seen."""

    stacks: dict[tuple[str, ...], int] = field(default_factory=dict)
    messages: set[str] = field(default_factory=set)


@contextlib.contextmanager
def sync_warnings(report: SyncReport) -> Iterator[None]:
    """Within: torch warns at every synchronizing CUDA call; each warning's Python stack is counted in ``report``."""

    def record(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        text = str(message)
        if "synchroniz" not in text.lower():
            return
        frames = traceback.extract_stack()[:-1]  # without this hook
        inside = [f for f in frames if "/warnings.py" not in f.filename]
        stack = tuple(f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in inside[-FRAMES:])
        report.stacks[stack] = report.stacks.get(stack, 0) + 1
        report.messages.add(text.splitlines()[0][:200])

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode("default")


# --------------------------------------------------------------------------------------------- the host path


class HostClock:
    """Host µs per named piece of a step, accumulated while ``pieces()`` is active."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, timed under ``name`` (a plain function: it binds as a method too)."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.totals[name] = self.totals.get(name, 0.0) + (time.perf_counter() - start) * 1e6
                self.calls[name] = self.calls.get(name, 0) + 1

        return timed

    @contextlib.contextmanager
    def pieces(self) -> Iterator[None]:
        """Within: the layers' ``ag_gemm``, ``gemm_rs``, RMSNorm, RoPE tables, QK norm + RoPE and SDPA are timed
        (ours' and the baseline's alike where they share the function)."""
        attention = TensorParallelAttention
        with (
            mock.patch.object(linear_layers, "ag_gemm", self.wrap("ag_gemm", linear_layers.ag_gemm)),
            mock.patch.object(linear_layers, "gemm_rs", self.wrap("gemm_rs", linear_layers.gemm_rs)),
            mock.patch.object(decoder_layers, "rms_norm", self.wrap("rms_norm", decoder_layers.rms_norm)),
            mock.patch.object(attention, "rope_tables", self.wrap("rope tables", attention.rope_tables)),
            mock.patch.object(attention, "rotate_qkv", self.wrap("QK norm + RoPE", attention.rotate_qkv)),
            mock.patch.object(
                functional,
                "scaled_dot_product_attention",
                self.wrap("SDPA", functional.scaled_dot_product_attention),
            ),
        ):
            yield


@dataclass
class HostResult:
    """The host path of ``steps`` steps enqueued under a GPU sleep."""

    step_us: list[float]
    waited: int
    """Steps whose enqueueing outlasted the sleep (the host waited for the GPU)."""
    pieces: dict[str, float]
    """Host µs per step of each piece."""
    calls: dict[str, float]
    """Calls per step of each piece."""


def host_path(step: Callable[[], object], steps: int) -> HostResult:
    """Time enqueueing ``steps`` steps, each alone under a ``SLEEP_CYCLES`` GPU sleep (every rank together)."""
    clock = HostClock()
    samples, waited = [], 0
    with clock.pieces():
        for _ in range(steps):
            rt.barrier()
            torch.cuda._sleep(SLEEP_CYCLES)
            slept = torch.cuda.Event()
            slept.record()
            start = time.perf_counter()
            step()
            samples.append((time.perf_counter() - start) * 1e6)
            waited += bool(slept.query())
    rt.synchronize()
    pieces = {name: total / steps for name, total in clock.totals.items()}
    calls = {name: count / steps for name, count in clock.calls.items()}
    return HostResult(samples, waited, pieces, calls)


# --------------------------------------------------------------------------------------------- bookkeeping


@dataclass
class Counters:
    """What happened during the timed steps besides the steps' own work."""

    gc_runs: dict[int, int] = field(default_factory=dict)
    gc_ms: float = 0.0
    segments_allocated: int = 0
    segments_freed: int = 0
    alloc_retries: int = 0
    plans_built: int = 0


@contextlib.contextmanager
def counted(counters: Counters) -> Iterator[None]:
    """Within: count garbage collections, device segments and plans built (into ``counters``)."""
    began: dict[str, float] = {}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began["t"] = time.perf_counter()
            return
        generation = info.get("generation", -1)
        counters.gc_runs[generation] = counters.gc_runs.get(generation, 0) + 1
        counters.gc_ms += (time.perf_counter() - began.get("t", time.perf_counter())) * 1e3

    def stats() -> tuple[int, int, int, int]:
        memory = torch.cuda.memory_stats()
        plans = len(ag_gemm_op._plans) + len(gemm_rs_op._plans)
        return (
            memory.get("segment.all.allocated", 0),
            memory.get("segment.all.freed", 0),
            memory.get("num_alloc_retries", 0),
            plans,
        )

    before = stats()
    gc.callbacks.append(on_gc)
    try:
        yield
    finally:
        gc.callbacks.remove(on_gc)
        after = stats()
        counters.segments_allocated += after[0] - before[0]
        counters.segments_freed += after[1] - before[1]
        counters.alloc_retries += after[2] - before[2]
        counters.plans_built += after[3] - before[3]


# --------------------------------------------------------------------------------------------- device time


def device_times(step: Callable[[], object], steps: int) -> dict[str, list[float]]:
    """µs per step (this rank's samples): after the usual 1 ms lead, after a ``SLEEP_CYCLES`` lead, from idle."""

    def long_lead() -> None:
        torch.cuda._sleep(SLEEP_CYCLES)
        rt.barrier_on_device()

    return {
        "1 ms lead": [ms * 1e3 for ms in bench_samples(step, warmup=1, rep=steps)],
        "20 ms lead": [ms * 1e3 for ms in bench_samples(step, warmup=1, rep=steps, start_together=long_lead)],
        "from idle": [ms * 1e3 for ms in idle_ms_samples(step, rep=steps, warmup=1)],
    }


@dataclass
class ProfiledRun:
    """One profiled step: its span, busy time and the longest gaps (µs, before -> after)."""

    span: float
    busy: float
    gaps: list[tuple[float, str, str]]


def profiled_runs(step: Callable[[], object], runs: int, gaps: int = 3) -> list[ProfiledRun]:
    """Each of ``runs`` profiled steps alone (bench/decoder_anatomy.py's harness: a spin, a device barrier)."""
    kernels = sorted(profile_kernels(step, runs), key=lambda k: (k.start, k.end))
    found: list[tuple[float, list[Any]]] = []
    harness_end: float | None = None
    for kernel in kernels:
        if HARNESS.search(kernel.name):
            harness_end = kernel.end if harness_end is None else max(harness_end, kernel.end)
            continue
        if harness_end is not None:
            found.append((harness_end, []))
            harness_end = None
        if found:
            found[-1][1].append(kernel)
    result = []
    for start, work in found:
        holes, reach, last = [], start, "(step start)"
        for kernel in work:  # sorted by start
            if kernel.start > reach:
                holes.append((kernel.start - reach, last, short_name(kernel.name, 60)))
            if kernel.end > reach:
                reach, last = kernel.end, short_name(kernel.name, 60)
        span = max(k.end for k in work) - start
        busy = union_length([(max(k.start, start), k.end) for k in work])
        result.append(ProfiledRun(span, busy, sorted(holes, reverse=True)[:gaps]))
    return result


# --------------------------------------------------------------------------------------------- the report


def spread(values: Sequence[float]) -> str:
    """``median (min-max)``."""
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def variant_report(name: str, step: Callable[[], object], args: argparse.Namespace) -> dict[str, Any]:
    """Everything measured for one variant on this rank (a collective: every rank calls it alike)."""
    for _ in range(3):  # plans, compilation, cuBLAS heuristics
        step()
    rt.synchronize()
    syncs = SyncReport()
    with sync_warnings(syncs):
        for _ in range(2):
            step()
    rt.synchronize()
    counters = Counters()
    with counted(counters):
        host = host_path(step, args.steps)
        device = device_times(step, args.steps)
    runs = {
        "1 ms lead": profiled_runs(step, args.runs),
        "20 ms lead": profiled_runs(lambda: (torch.cuda._sleep(SLEEP_CYCLES), step()), args.runs),
    }
    return {"name": name, "syncs": syncs, "counters": counters, "host": host, "device": device, "runs": runs}


def print_report(everyone: list[dict[str, Any]], layers: int) -> None:
    """The report of one variant, from every rank's measurements (rank 0 prints)."""
    name = everyone[0]["name"]
    lines = [f"== {name} (µs per step of {layers} layers; per layer: / {layers})"]
    for rank, mine in enumerate(everyone):
        syncs: SyncReport = mine["syncs"]
        total = sum(syncs.stacks.values())
        lines.append(f"-- rank {rank}: {total / 2:.0f} synchronizing calls per step that torch saw")
        for stack, count in sorted(syncs.stacks.items(), key=lambda item: -item[1]):
            lines.append(f"   {count / 2:.0f} per step at:")
            lines += [f"     {frame}" for frame in stack]
        for message in sorted(syncs.messages):
            lines.append(f"   message: {message}")
        host: HostResult = mine["host"]
        lines.append(
            f"   host path: {spread(host.step_us)} µs per step; {host.waited} of {len(host.step_us)} steps waited "
            "for the GPU (a synchronization, or a host path longer than the sleep)"
        )
        pieces = sorted(host.pieces.items(), key=lambda item: -item[1])
        rest = statistics.median(host.step_us) - sum(host.pieces.values())
        shown = [f"{piece} {us:.1f} ({host.calls[piece]:.0f} calls)" for piece, us in pieces]
        lines.append(f"   host µs per step by piece: {', '.join(shown)}, rest {rest:.1f}")
        counters: Counters = mine["counters"]
        collections = ", ".join(f"gen{g} x{n}" for g, n in sorted(counters.gc_runs.items())) or "none"
        lines.append(
            f"   during the timed steps: garbage collections {collections} ({counters.gc_ms:.1f} ms); device "
            f"segments +{counters.segments_allocated} -{counters.segments_freed}, allocation retries "
            f"{counters.alloc_retries}; plans built {counters.plans_built}"
        )
        device: dict[str, list[float]] = mine["device"]
        lines.append("   device µs per step: " + "; ".join(f"{k} {spread(v)}" for k, v in device.items()))
        lead, idle = statistics.median(device["20 ms lead"]), statistics.median(device["from idle"])
        lines.append(
            f"   from idle - 20 ms lead: {idle - lead:.1f} µs per step (the host path's cost to an eager caller)"
        )
        for lead, runs in mine["runs"].items():
            for index, run in enumerate(runs):
                gaps = "; ".join(f"{us:.1f} after {before} -> {after}" for us, before, after in run.gaps)
                lines.append(
                    f"   profiled step {index} ({lead}): span {run.span:.1f}, busy {run.busy:.1f}, idle "
                    f"{run.span - run.busy:.1f}; longest gaps: {gaps or 'none'}"
                )
    rank0_print("\n".join(lines))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; raises SystemExit for an unknown model or a count below its minimum."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="Llama-3-8B", help="one of: " + ", ".join(CONFIGS))
    parser.add_argument("--tokens", type=int, default=4096, help="prefill tokens (one sequence; a multiple of W)")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers per stack (bench/decoder.py: 2)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement (>= 20)")
    parser.add_argument("--runs", type=int, default=5, help="profiled steps")
    parser.add_argument("--variants", default="ours,torch", help="comma-separated: ours, torch")
    args = parser.parse_args(argv)
    if args.model not in CONFIGS:
        parser.error(f"unknown model {args.model!r}; known: {list(CONFIGS)}")
    if args.steps < 20 or args.layers < 1 or args.runs < 1 or args.tokens < 1:
        parser.error("--steps must be >= 20, --layers, --runs and --tokens >= 1")
    args.variants = [v for v in args.variants.split(",") if v]
    if bad := [v for v in args.variants if v not in ("ours", "torch")]:
        parser.error(f"unknown variants {bad}; known: ours, torch")
    return args


def main(args: argparse.Namespace) -> int:
    world = setup_distributed(heap_size="8G")
    began = time.time()
    config = CONFIGS[args.model]
    gen = torch.Generator(device="cuda").manual_seed(28)
    layers = build_layers(config, args.layers, gen)
    ours, base, _ = prefill_steps(config, layers, args.tokens, gen)
    steps = {"ours": ours, "torch": base}
    rank0_print(
        f"INFO {args.model}, prefill {args.tokens} tokens, {args.layers} layers, {world.world_size} ranks, "
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
    )
    for name in args.variants:
        mine = variant_report(name, steps[name], args)
        everyone: list[dict[str, Any] | None] = [None] * world.world_size
        dist.all_gather_object(everyone, mine)
        print_report([r for r in everyone if r is not None], args.layers)
    rank0_print(f"INFO done in {time.time() - began:.0f} s")
    rt.barrier()
    del world
    teardown()
    return 0


if __name__ == "__main__":
    ARGS = parse_args()  # before main_guard: --help and a bad option exit quietly
    main_guard(lambda: main(ARGS))
