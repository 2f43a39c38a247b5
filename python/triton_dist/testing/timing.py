"""Timing GPU work across ranks: CUDA events, warm-up, median of >= 20 runs, every rank started together.

``bench`` is the repository's one way to time a kernel or an op (docs: the standards in README): each timed run is
preceded by a device-side barrier across ranks (``triton_dist.runtime.barrier_on_device``) so that no rank's time
includes waiting for a late peer, the median of the runs is taken on each rank, and the result is the maximum over
ranks (a collective operation finishes when its slowest rank does).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.testing.distributed import max_over_ranks

MIN_TIMED_RUNS = 20
"""The fewest timed runs a reported median may come from."""


def _start_together() -> None:
    if rt.is_initialized() and rt.current_world().device.type == "cuda":
        rt.barrier_on_device()
    elif dist.is_initialized():
        dist.barrier()


def bench_samples(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    rep: int = MIN_TIMED_RUNS,
    sync_ranks: bool = True,
    cuda_graph: bool = False,
) -> list[float]:
    """Milliseconds of each of ``rep`` timed calls of ``fn`` on this rank (after ``warmup`` untimed calls).

    ``fn`` enqueues GPU work on the current stream. With ``cuda_graph`` the calls are one CUDA graph captured from
    ``fn`` (after the warm-up) and replayed: the time then excludes the host's launch overhead. With
    ``sync_ranks`` (and a process group) every run starts after a barrier across ranks, outside the timed span.
    """
    if rep < MIN_TIMED_RUNS:
        raise ValueError(f"rep={rep}: a reported median needs at least {MIN_TIMED_RUNS} timed runs")
    if warmup < 1:
        raise ValueError(f"warmup={warmup}: at least one untimed call (compilation, caches) must come first")
    if not torch.cuda.is_available():
        raise RuntimeError("bench() times GPU work with CUDA events; no GPU is visible")
    for _ in range(warmup):
        if sync_ranks:
            _start_together()
        fn()
    launch = fn
    if cuda_graph:
        rt.synchronize()  # a wait stopped by the watchdog raises WaitTimeoutError
        graph = torch.cuda.CUDAGraph()
        # thread_local: NCCL's watchdog thread may query events while this thread captures.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            fn()
        graph.replay()  # the first replay uploads the graph
        launch = graph.replay
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    for start, end in zip(starts, ends, strict=True):
        if sync_ranks:
            _start_together()
        start.record()
        launch()
        end.record()
    rt.synchronize()
    if sync_ranks and dist.is_initialized():
        _start_together()
        rt.synchronize()
    return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]


def bench(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    rep: int = MIN_TIMED_RUNS,
    sync_ranks: bool = True,
    cuda_graph: bool = False,
) -> float:
    """The median milliseconds of ``fn`` over ``rep`` timed runs, maximum over ranks (a collective).

    See ``bench_samples`` for the arguments. Every rank must call it with the same arguments.
    """
    median = statistics.median(bench_samples(fn, warmup=warmup, rep=rep, sync_ranks=sync_ranks, cuda_graph=cuda_graph))
    return max_over_ranks(median)
