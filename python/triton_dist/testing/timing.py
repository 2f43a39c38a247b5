"""Timing GPU work across ranks: CUDA events, warm-up, median of >= 20 runs, every rank started together.

``bench`` is the repository's one way to time a kernel or an op (docs: the standards in README): each timed run is
preceded by a device-side barrier across ranks (``triton_dist.runtime.barrier_on_device``) so that no rank's time
includes waiting for a late peer, the median of the runs is taken on each rank, and the result is the maximum over
ranks (a collective operation finishes when its slowest rank does).

Device time must not include the host's time to enqueue the call. A device barrier alone does not ensure that: once
the GPU has drained the queue (a small op, a slow host path), the start event fires while the call is still being
enqueued, and the measured span then holds part of the host path, differently from run to run. So each timed run
also starts with a GPU spin before the barrier, during which the host enqueues the call
(``triton_dist.runtime.world.host_lead``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.runtime.world.host_lead import HOST_LEAD_CYCLES, lead_host
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
    prepare: Callable[[], object] | None = None,
    start_together: Callable[[], object] | None = None,
) -> list[float]:
    """Milliseconds of each of ``rep`` timed calls of ``fn`` on this rank (after ``warmup`` untimed calls).

    ``fn`` enqueues GPU work on the current stream. With ``cuda_graph`` the calls are one CUDA graph captured from
    ``fn`` (after the warm-up) and replayed: the time then excludes the host's launch overhead. With
    ``sync_ranks`` (and a process group) every run starts after a barrier across ranks, outside the timed span:
    ``start_together`` (default: triton_dist's device barrier, else ``dist.barrier``). ``prepare`` runs before
    each call, untimed (e.g. the dispatch a timed combine consumes); it cannot be combined with ``cuda_graph``.
    Each timed run of an eager ``fn`` is preceded by a GPU spin (``lead_host``, before the barrier) that keeps
    the GPU behind the host, so the span holds the GPU's work and not the host's enqueueing (``host_us`` times the
    host alone).
    """
    if rep < MIN_TIMED_RUNS:
        raise ValueError(f"rep={rep}: a reported median needs at least {MIN_TIMED_RUNS} timed runs")
    if warmup < 1:
        raise ValueError(f"warmup={warmup}: at least one untimed call (compilation, caches) must come first")
    if not torch.cuda.is_available():
        raise RuntimeError("bench() times GPU work with CUDA events; no GPU is visible")
    if cuda_graph and prepare is not None:
        raise ValueError("prepare runs between the calls, so they cannot be replayed as one CUDA graph")
    together = start_together if start_together is not None else _start_together

    def before(lead: bool = False) -> None:
        if prepare is not None:
            prepare()
        if lead:
            # Before the barrier, so the ranks still start together whatever their clocks.
            lead_host()
        if sync_ranks:
            together()

    for _ in range(warmup):
        before()
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
        before(lead=not cuda_graph)
        start.record()
        launch()
        end.record()
    rt.synchronize()
    if sync_ranks and dist.is_initialized():
        together()
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


def time_ms(
    fn: Callable[[], object],
    warmup: int = 5,
    reps: int = 30,
    distributed: bool = True,
    *,
    prepare: Callable[[], object] | None = None,
    start_together: Callable[[], object] | None = None,
) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` calls (``bench_samples``: each after a device barrier when
    ``distributed``, and after ``prepare``), the maximum over ranks when ``distributed``."""
    median = statistics.median(
        bench_samples(
            fn, warmup=warmup, rep=reps, sync_ranks=distributed, prepare=prepare, start_together=start_together
        )
    )
    return max_over_ranks(median) if distributed else median


def eager_us(fn: Callable[[], object], iters: int, warmup: int = 5) -> float:
    """Median µs of one call of ``fn`` from an idle GPU: each timed call follows ``torch.cuda.synchronize()`` and
    ``dist.barrier()``, so the host's launch cost is inside the events. Max over ranks (a collective)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return max_over_ranks(statistics.median(times))


def graphed_us(
    fn: Callable[[], object], calls: int = 10, replays: int = 20, warmup: int = 3, *, lead: bool = False
) -> float:
    """Median µs per call of ``fn`` under CUDA-graph replay (``calls`` calls per graph, ``replays`` timed replays
    after ``warmup``), max over ranks (a collective): the device time without the host's launch cost.

    Without ``lead`` a replay whose start event the GPU reaches before the host has submitted the graph counts part
    of the graph's launch: with few calls per graph on a slow host that is a fixed cost per replay (on the NVSHMEM
    heap's context 2.3 µs more than on CUDA IPC's, docs/results/2026-11-27-session25.md). ``lead`` first enqueues a
    GPU spin long enough for the host to submit every timed replay (``runtime.world.host_lead``), so each span holds
    only the replay's GPU work."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # NCCL's watchdog may query events meanwhile
        for _ in range(calls):
            fn()
    for _ in range(warmup):
        graph.replay()
    rt.barrier()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    if lead:
        torch.cuda._sleep(HOST_LEAD_CYCLES * max(1, -(-replays // 10)))  # about 1 ms per 10 replays to submit
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    rt.barrier()
    median = statistics.median(start.elapsed_time(end) * 1000.0 / calls for start, end in events)
    return max_over_ranks(median)


def host_us(fn: Callable[[], object], *, calls: int = MIN_TIMED_RUNS, warmup: int = 3) -> float:
    """Median host µs to enqueue one call of ``fn`` while the GPU is busy, maximum over ranks (a collective).

    What an eager model pays per call on the CPU: the GPU is first given a long sleep kernel, so no call waits for
    the GPU and only the host's own work (dispatch, checks, launches, driver calls) is timed. ``fn`` must not
    synchronize with the host.
    """
    import time

    if calls < MIN_TIMED_RUNS:
        raise ValueError(f"calls={calls}: a reported median needs at least {MIN_TIMED_RUNS} timed calls")
    for _ in range(warmup):
        _start_together()
        fn()
    rt.synchronize()
    _start_together()
    torch.cuda._sleep(100_000_000)  # ~50 ms at Hopper clocks: longer than enqueueing the calls takes
    slept = torch.cuda.Event()
    slept.record()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    if slept.query():
        raise RuntimeError("host_us: the GPU went idle before the calls were enqueued; the host times are not valid")
    rt.synchronize()
    if dist.is_initialized():
        _start_together()
        rt.synchronize()
    return max_over_ranks(statistics.median(samples))


def _idle_sample(fn: Callable[[], object]) -> float:
    """Milliseconds from an idle GPU to the end of one call of ``fn`` (``idle_ms_samples`` says how)."""
    rt.synchronize()
    if dist.is_initialized():
        dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def idle_ms_samples(
    fn: Callable[[], object],
    *,
    rep: int = MIN_TIMED_RUNS,
    warmup: int = 3,
    prepare: Callable[[], object] | None = None,
) -> list[float]:
    """Milliseconds from an idle GPU to the end of one call of ``fn``, per call: the host synchronizes and passes a
    barrier with the other ranks, then an event is recorded and ``fn`` enqueued (its host path included).
    ``prepare`` runs before each call (warm-ups too), untimed: before the synchronization."""
    for _ in range(warmup):
        if prepare is not None:
            prepare()
        fn()
    samples = []
    for _ in range(rep):
        if prepare is not None:
            prepare()
        samples.append(_idle_sample(fn))
    return samples


def idle_ms_interleaved(
    fns: Sequence[Callable[[], object]], *, rep: int = MIN_TIMED_RUNS, warmup: int = 3
) -> list[list[float]]:
    """``idle_ms_samples`` of several functions taken in turns, one sample of each per round, the round's first
    function rotating: per function its ``rep`` samples, in the order of ``fns``.

    What to compare from idle should be sampled this way. Timed in blocks (every sample of one, then every sample of
    the next), the same call's from-idle median moved by 12% between blocks a few seconds apart on 2 x H200 (the
    host's speed after idle drifts: docs/results/2026-11-27-session24.md), more than the difference being measured.
    """
    for fn in fns:
        for _ in range(warmup):
            fn()
    samples: list[list[float]] = [[] for _ in fns]
    for round_ in range(rep):
        for turn in range(len(fns)):
            which = (round_ + turn) % len(fns)
            samples[which].append(_idle_sample(fns[which]))
    return samples
