"""Issue 29's replay probe: where the NVSHMEM heap's extra ~2 µs per CUDA-graph replay of the 64 KiB all-reduce goes.

``bench/heap_backends.py --only replay`` runs it in each variant's worker. The 64 KiB all_reduce (the LL one-shot)
costs about 2 µs more per replay of a 10-call graph on the NVSHMEM heap than on the CUDA-IPC heap, timed with the
GPU behind the host, while the kernel's cubin is the same and a 100-call graph is on par
(docs/results/2026-11-27-session25.md). What differs per replay is then either the graph launch in the NVSHMEM
heap's CUDA context, or something the op's first call of a replay (or the graph's completion) pays on that heap.

What NVSHMEM's init changes in the process's CUDA context (NVSHMEM's ``init.cu``, ``mem_heap.cpp``): it sets
``CU_CTX_SYNC_MEMOPS`` on the context, creates non-blocking streams of the greatest priority, loads its device
module, maps its heap in ``cuMemCreate`` chunks of ``NVSHMEM_CUMEM_GRANULARITY`` (512 MiB by default) marked
GPUDirect-RDMA capable, and starts a proxy thread. The op's path itself is the same on both heaps (the same plan,
the same ``cuLaunchKernel``, workspaces at the same heap offsets).

The probe times, per replay (µs from an event before the replay to one after it, the GPU kept behind the host by a
spin as ``graphed_us(lead=True)`` does; median over replays; the metric is the maximum over ranks, the facts give
each rank's median), these cases:

- ``events``: two events and nothing between them (what the timer itself costs);
- ``noop<C>``: a graph of C empty kernels (``torch.cuda._sleep(0)``): the graph launch without the op;
- ``touch_<where>10``: a graph of 10 one-word stores (``fill_``) into torch's memory, this rank's heap, or the
  peer's heap (through its mapping): a cost of touching the heap's memory after a graph launch;
- ``op<C>``: the 64 KiB all_reduce, C calls per graph (1, 10, 100);
- ``ll_<launcher>_<workspace>10`` (``heap_backends`` passes them): the op's LL kernel launched by Triton's
  launcher or by a plan of this worker's own (``DriverLaunch``, as the op), on the op's own workspace or on a fresh
  one: the session-25 probe's LL graphs (Triton's launcher, a fresh workspace) paid nothing on NVSHMEM where the
  op did, so these tell the launch path from the workspace's memory;

under conditions that tell context-level causes apart: ``default`` (torch's current stream, the context as the
heap left it), ``fresh`` (a stream created now with ``cuStreamCreate``, non-blocking), ``flipped`` (the context's
``CU_CTX_SYNC_MEMOPS`` bit flipped: set on the CUDA-IPC heap, cleared on NVSHMEM's), ``flipped_fresh`` (flipped,
on a stream created after the flip) and ``restored`` (the bit as the heap left it again: the A/B/A check).

``split_<case>_<part>`` times inside the graph, with external timing events between the calls (``op10`` and
``noop10``, 40 distinct graphs replayed back to back): ``gap`` (the event before the replay to the graph's first
node), ``first`` (the first call), ``later`` (the median later call), ``tail`` (the last call's end to the event
after the replay) and ``total``.

How to read it:

- ``noop10_default`` over by about the op's extra: the context's graph launch costs more; then ``flipped``
  (SYNC_MEMOPS) or ``fresh`` (the stream) on par names the cause, neither: other context state from NVSHMEM's init;
- ``noop`` on par, a ``touch_*`` row over: touching the NVSHMEM heap's pages after a graph launch (its mapping;
  the variant ``nvshmem:NVSHMEM_CUMEM_GRANULARITY=2097152`` then tells the 512 MiB chunks apart);
- only ``op*`` over: the op's memory or protocol per replay; the split says where (``gap``: before the first
  kernel starts; ``first``: the first call of each replay; ``tail``: the graph's completion); the ``ll_*`` rows
  over with the op's own workspace only: its placement (the facts give both workspaces' heap offsets and 2 MiB
  phases; the op's sits at the heap's start, right after NVSHMEM's own allocations on that heap), over with
  ``driver`` only: the launch path;
- the op graph's nodes (a fact) differ between the heaps: the capture holds more than the kernels on one heap.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SYNC_MEMOPS = 0x80
"""``CU_CTX_SYNC_MEMOPS``: the context flag NVSHMEM's init sets (``cuCtxSetFlags(flags | CU_CTX_SYNC_MEMOPS)``)."""
SYNC_MEMOPS_ENV = "HEAP_BACKENDS_CTX_SYNC_MEMOPS"
"""A worker environment variable, ``0`` or ``1``: clear or set ``CU_CTX_SYNC_MEMOPS`` on the context right after
``init()``, before any metric (e.g. the variant ``nvshmem:HEAP_BACKENDS_CTX_SYNC_MEMOPS=0``): the candidate fix of a
context-flag cause, tried on every metric of the run without changing the runtime."""
CONDITIONS = ("default", "fresh", "flipped", "flipped_fresh", "restored")
"""The probe's conditions, in the order they run (module docstring)."""
CORE_CASES = ("events", "noop10", "op10")
"""Timed under every condition."""
DEFAULT_ONLY_CASES = ("noop1", "touch_torch10", "touch_heap10", "touch_peer10", "op1", "op100")
"""Timed under the ``default`` condition only."""
SPLIT_CASES = ("noop10", "op10")
"""Timed inside the graph (``split_<case>_<part>_us``) under ``default`` and ``flipped``."""
SPLIT_PARTS = ("gap", "first", "later", "tail", "total")
SPLIT_GRAPHS = 40
"""Distinct graphs per split timing, replayed back to back (an event inside a graph is read after the run: one
replay per graph)."""
_CONTEXT_FLAG_NAMES = {0x1: "SCHED_SPIN", 0x2: "SCHED_YIELD", 0x4: "SCHED_BLOCKING_SYNC", 0x8: "MAP_HOST",
                       0x10: "LMEM_RESIZE_TO_MAX", 0x20: "COREDUMP_ENABLE", 0x40: "USER_COREDUMP_ENABLE",
                       SYNC_MEMOPS: "SYNC_MEMOPS"}  # fmt: skip


def sync_memops_request(environ: Mapping[str, str]) -> bool | None:
    """What ``$HEAP_BACKENDS_CTX_SYNC_MEMOPS`` asks for: True (set the flag), False (clear it) or None (unset).
    Raises SystemExit naming the value unless it is ``0`` or ``1``."""
    text = environ.get(SYNC_MEMOPS_ENV)
    if text is None or text == "":
        return None
    if text not in ("0", "1"):
        raise SystemExit(f"${SYNC_MEMOPS_ENV} must be 0 (clear CU_CTX_SYNC_MEMOPS) or 1 (set it), got {text!r}")
    return text == "1"


def describe_context_flags(flags: int) -> str:
    """``cuCtxGetFlags``'s value in hex with the names of its bits, e.g. ``0x80 (SYNC_MEMOPS)``."""
    names = [name for bit, name in _CONTEXT_FLAG_NAMES.items() if flags & bit]
    unknown = flags & ~sum(_CONTEXT_FLAG_NAMES)
    if unknown:
        names.append(f"{unknown:#x}")
    return f"{flags:#x} ({' '.join(names) if names else 'SCHED_AUTO'})"


@dataclass(frozen=True)
class Split:
    """One replay of a graph with timing events between its calls, as elapsed µs from the event before the replay:
    ``marks[0]`` the graph's first node (an event before the first call), ``marks[i]`` the end of call i,
    ``end`` the event after the replay."""

    marks: tuple[float, ...]
    end: float


def split_parts(splits: Sequence[Split]) -> dict[str, float]:
    """The median over replays of each part of :data:`SPLIT_PARTS` (µs): ``gap`` (to the first node), ``first``
    (the first call), ``later`` (the median of the later calls of a replay), ``tail`` (the last call's end to the end
    event), ``total``. Raises ValueError for no replays or a replay with fewer than two calls."""
    if not splits:
        raise ValueError("split_parts needs at least one replay")
    parts: dict[str, list[float]] = {part: [] for part in SPLIT_PARTS}
    for split in splits:
        marks = split.marks
        if len(marks) < 3:
            raise ValueError(f"a split replay needs at least two calls (three marks), got {len(marks)} marks")
        parts["gap"].append(marks[0])
        parts["first"].append(marks[1] - marks[0])
        parts["later"].append(statistics.median(b - a for a, b in zip(marks[1:-1], marks[2:], strict=True)))
        parts["tail"].append(split.end - marks[-1])
        parts["total"].append(split.end)
    return {part: statistics.median(values) for part, values in parts.items()}


@dataclass(frozen=True)
class GraphNode:
    """What the driver says of one node of a captured graph (``kind``: the node type's name without its prefix)."""

    kind: str
    kernel: str = ""
    grid: tuple[int, int, int] = (0, 0, 0)
    block: int = 0
    shared: int = 0
    extra: str = ""
    """Kernel node attributes that are not at their defaults, e.g. ``priority=-1``."""


def describe_graph(nodes: Sequence[GraphNode], edges: int) -> str:
    """One line for a graph's nodes: how many of each kind, each distinct kernel launch with its count, the edges."""
    kinds: dict[str, int] = {}
    launches: dict[str, int] = {}
    for node in nodes:
        kinds[node.kind] = kinds.get(node.kind, 0) + 1
        if node.kind == "KERNEL":
            grid = "x".join(map(str, node.grid))
            launch = f"{node.kernel or '?'} grid {grid} x {node.block} threads, {node.shared} B shared"
            launch += f", {node.extra}" if node.extra else ""
            launches[launch] = launches.get(launch, 0) + 1
    text = f"{len(nodes)} nodes, {edges} edges: " + ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    return text + "".join(f"; {count} x {launch}" for launch, count in launches.items())


# ------------------------------------------------------------------------------------------------------------------
# On the GPU (a heap_backends worker)
# ------------------------------------------------------------------------------------------------------------------


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


def _check(result: Any, what: str) -> Any:
    """The values after a cuda-bindings call's status; raises RuntimeError naming ``what`` on a failure."""
    driver = _driver()
    status, *values = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {status}")
    return values[0] if len(values) == 1 else tuple(values)


def context_flags() -> int:
    """The current CUDA context's flags (``cuCtxGetFlags``)."""
    return int(_check(_driver().cuCtxGetFlags(), "cuCtxGetFlags"))


def set_sync_memops(on: bool) -> int:
    """Set or clear ``CU_CTX_SYNC_MEMOPS`` on the current context; returns the flags read back after the change.
    Raises RuntimeError when the driver refuses."""
    flags = context_flags()
    wanted = flags | SYNC_MEMOPS if on else flags & ~SYNC_MEMOPS
    _check(_driver().cuCtxSetFlags(wanted), f"cuCtxSetFlags({wanted:#x})")
    return context_flags()


def fresh_stream(device: Any) -> Any:
    """A CUDA stream created now (``cuStreamCreate``, non-blocking), as a torch stream; never destroyed (a few per
    worker)."""
    import torch

    driver = _driver()
    stream = _check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value), "cuStreamCreate")
    return torch.cuda.ExternalStream(int(stream), device=device)


def _lead(replays: int) -> Any:
    """Enqueue the host lead for ``replays`` timed replays; returns an event recorded after it (still pending when
    the host has enqueued everything, if the lead held)."""
    import torch

    from triton_dist.runtime.world.host_lead import HOST_LEAD_CYCLES

    torch.cuda._sleep(HOST_LEAD_CYCLES * max(1, -(-replays // 10)))
    led = torch.cuda.Event()
    led.record()
    return led


def _warm(fn: Callable[[], object], times: int = 3) -> None:
    """Run ``fn`` on a side stream (as before a capture), ordered with the current stream both ways."""
    import torch

    current = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(current)
    with torch.cuda.stream(side):
        for _ in range(times):
            fn()
    current.wait_stream(side)


def _capture(body: Callable[[], object], keep_graph: bool = False) -> Any:
    """A CUDA graph of what ``body`` enqueues, captured on a side stream: ``torch.cuda.graph`` without its device
    synchronization, garbage collection and cache emptying, which would cost more than the probe's timings for
    the split's many graphs."""
    import torch

    graph = torch.cuda.CUDAGraph(keep_graph=True) if keep_graph else torch.cuda.CUDAGraph()
    current = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(current)
    with torch.cuda.stream(side):
        graph.capture_begin(capture_error_mode="thread_local")  # NCCL's watchdog may query events meanwhile
        try:
            body()
        finally:
            graph.capture_end()
    current.wait_stream(side)
    return graph


def _repeat(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    def body() -> None:
        for _ in range(calls):
            fn()

    return body


def replay_us(fn: Callable[[], object] | None, calls: int, replays: int) -> tuple[list[float], bool]:
    """µs per replay of a graph of ``calls`` calls of ``fn`` on the current stream (``fn`` None: two events and
    nothing between them), each between two events, after a lead that keeps the GPU behind the host; and whether
    the lead held (the GPU had not reached the first timed event when the host had enqueued the last)."""
    import torch

    from triton_dist import runtime as rt

    launch: Callable[[], object] | None = None
    if fn is not None:
        _warm(fn)
        graph = _capture(_repeat(fn, calls))
        for _ in range(3):
            graph.replay()
        launch = graph.replay
    rt.barrier()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    led = _lead(replays)
    for start, end in events:
        start.record()
        if launch is not None:
            launch()
        end.record()
    held = not led.query()
    rt.barrier()
    return [start.elapsed_time(end) * 1000.0 for start, end in events], held


def split_us(fn: Callable[[], object], calls: int, graphs: int = SPLIT_GRAPHS) -> tuple[list[Split], bool]:
    """``graphs`` graphs of ``calls`` calls of ``fn`` with an external timing event before the first call and after
    each, replayed back to back once each after a warm-up replay (the lead as in :func:`replay_us`): each replay's
    marks. Raises what torch raises where events cannot be captured as nodes (``Event(external=True)``)."""
    import torch

    from triton_dist import runtime as rt

    _warm(fn)
    built = []
    for _ in range(graphs):
        marks = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(calls + 1)]

        def body(marks: list[Any] = marks) -> None:
            marks[0].record()
            for mark in marks[1:]:
                fn()
                mark.record()

        built.append((_capture(body), marks))
    for graph, _ in built:  # the first replay of a graph uploads it
        graph.replay()
    rt.barrier()
    outer = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in built]
    led = _lead(graphs)
    for (graph, _), (start, end) in zip(built, outer, strict=True):
        start.record()
        graph.replay()
        end.record()
    held = not led.query()
    rt.barrier()
    splits = [
        Split(tuple(start.elapsed_time(mark) * 1000.0 for mark in marks), start.elapsed_time(end) * 1000.0)
        for (_, marks), (start, end) in zip(built, outer, strict=True)
    ]
    return splits, held


def graph_nodes(fn: Callable[[], object], calls: int) -> str:
    """The nodes of a graph of ``calls`` calls of ``fn`` as captured (``describe_graph``), through the driver;
    ``n/a (why)`` where this torch or cuda-bindings cannot say."""
    try:
        driver = _driver()
        _warm(fn)
        graph = _capture(_repeat(fn, calls), keep_graph=True)
        raw = driver.CUgraph(graph.raw_cuda_graph())
        count = _check(driver.cuGraphGetNodes(raw, 0), "cuGraphGetNodes")[-1]
        handles = _check(driver.cuGraphGetNodes(raw, count), "cuGraphGetNodes")[0]
        edges = _check(driver.cuGraphGetEdges(raw, 0), "cuGraphGetEdges")[-1]  # (from, to[, data], count)
        nodes = [_graph_node(driver, handle) for handle in handles]
        del graph
        return describe_graph(nodes, int(edges))
    except Exception as error:  # a fact, not a failure
        return f"n/a ({type(error).__name__}: {error})"


def _graph_node(driver: Any, handle: Any) -> GraphNode:
    kind = _check(driver.cuGraphNodeGetType(handle), "cuGraphNodeGetType")
    name = kind.name.removeprefix("CU_GRAPH_NODE_TYPE_")
    if name != "KERNEL":
        return GraphNode(name)
    params = _check(driver.cuGraphKernelNodeGetParams(handle), "cuGraphKernelNodeGetParams")
    try:
        kernel = _check(driver.cuFuncGetName(params.func), "cuFuncGetName")
        kernel = kernel.decode() if isinstance(kernel, bytes) else str(kernel)
    except Exception:
        kernel = "?"
    extra = []
    for label, attribute, field in (
        ("priority", "PRIORITY", "priority"),
        ("mem_sync_domain", "MEM_SYNC_DOMAIN", "memSyncDomain"),
        ("cooperative", "COOPERATIVE", "cooperative"),
    ):
        try:  # cuda-bindings 12 names them CU_KERNEL_NODE_ATTRIBUTE_*, 13 CU_LAUNCH_ATTRIBUTE_*
            ids = getattr(driver, "CUkernelNodeAttrID", None) or driver.CUlaunchAttributeID
            key = getattr(ids, f"CU_KERNEL_NODE_ATTRIBUTE_{attribute}", None)
            key = getattr(ids, f"CU_LAUNCH_ATTRIBUTE_{attribute}") if key is None else key
            value = _check(driver.cuGraphKernelNodeGetAttribute(handle, key), label)
            number = int(getattr(value, field))
        except Exception:
            continue
        if number:
            extra.append(f"{label}={number}")
    return GraphNode(
        "KERNEL",
        kernel,
        (int(params.gridDimX), int(params.gridDimY), int(params.gridDimZ)),
        int(params.blockDimX) * int(params.blockDimY) * int(params.blockDimZ),
        int(params.sharedMemBytes),
        " ".join(extra),
    )


def context_facts() -> dict[str, str]:
    """What the driver says of the current context that NVSHMEM's init may change: its flags, the stack limit, the
    stream priority range."""
    import torch

    found: dict[str, str] = {}
    try:
        found["context flags"] = describe_context_flags(context_flags())
    except Exception as error:
        found["context flags"] = f"n/a ({type(error).__name__}: {error})"
    try:
        driver = _driver()
        limit = _check(driver.cuCtxGetLimit(driver.CUlimit.CU_LIMIT_STACK_SIZE), "cuCtxGetLimit")
        found["context stack size limit"] = f"{int(limit)} bytes"
    except Exception as error:
        found["context stack size limit"] = f"n/a ({type(error).__name__}: {error})"
    least, greatest = torch.cuda.Stream.priority_range()
    found["stream priorities (least, greatest); torch's current stream"] = (
        f"{least}, {greatest}; {torch.cuda.current_stream().priority}"
    )
    return found


def measure_replay(
    world: Any,
    op: Callable[[], object],
    replays: int,
    metrics: dict[str, float],
    facts: dict[str, str],
    controls: Mapping[str, tuple[Callable[[], object], int]] | None = None,
) -> None:
    """The probe (module docstring) on this worker's heap: ``replay_<case>_<condition>_us`` and
    ``split_<case>_<part>_us`` into ``metrics`` (max over ranks), each rank's medians and what the driver says of
    the context and the op's graph into ``facts``. ``op`` is one call of the checked 64 KiB all_reduce;
    ``controls`` more cases by name (a call and the calls per graph), timed under ``default`` only. Every rank must
    call it (the op and the maxima are collectives)."""
    import torch
    import torch.distributed as dist

    from triton_dist import runtime as rt
    from triton_dist.testing.distributed import max_over_ranks

    facts.update(context_facts())
    facts["op graph of 10 calls"] = graph_nodes(op, 10)
    word = torch.zeros(64, dtype=torch.int32, device=world.device)
    heap_word = rt.zeros(64, dtype=torch.int32)
    peer_word = rt.peer_tensor(heap_word, (world.rank + 1) % world.world_size)
    rt.barrier()
    cases: dict[str, tuple[Callable[[], object] | None, int]] = {
        "events": (None, 1),
        "noop1": (lambda: torch.cuda._sleep(0), 1),
        "noop10": (lambda: torch.cuda._sleep(0), 10),
        "touch_torch10": (lambda: word[:1].fill_(1), 10),
        "touch_heap10": (lambda: heap_word[:1].fill_(1), 10),
        "touch_peer10": (lambda: peer_word[:1].fill_(1), 10),
        "op1": (op, 1),
        "op10": (op, 10),
        "op100": (op, 100),
    }
    extra = dict(controls or {})
    cases.update(extra)
    lead_failed: list[str] = []
    per_rank: dict[str, str] = {}

    def record(name: str, median: float) -> None:
        metrics[name] = max_over_ranks(median)
        every: list[float] = [0.0] * world.world_size
        dist.all_gather_object(every, median, group=world.group)
        per_rank[name] = " ".join(f"{value:.2f}" for value in every)

    try:
        initial = context_flags()
    except Exception as error:
        initial = None
        facts["SYNC_MEMOPS flip"] = f"not run ({type(error).__name__}: {error})"
    for condition in CONDITIONS:
        flipped = condition.startswith("flipped")
        if initial is None and (flipped or condition == "restored"):
            continue
        if initial is not None:
            try:
                after = set_sync_memops(bool(initial & SYNC_MEMOPS) != flipped)
            except RuntimeError as error:
                facts["SYNC_MEMOPS flip"] = f"refused ({error}); flipped conditions not run"
                initial = None
                continue
            facts[f"context flags under {condition}"] = describe_context_flags(after)
        try:
            stream = fresh_stream(world.device) if condition.endswith("fresh") else torch.cuda.current_stream()
        except Exception as error:  # the same on every rank: cuda-bindings or the driver refused
            facts[f"condition {condition}"] = f"not run ({type(error).__name__}: {error})"
            continue
        with torch.cuda.stream(stream):
            names = CORE_CASES + (DEFAULT_ONLY_CASES + tuple(extra) if condition == "default" else ())
            for case in names:
                fn, calls = cases[case]
                samples, held = replay_us(fn, calls, replays)
                if not held:
                    lead_failed.append(f"{case}/{condition}")
                record(f"replay_{case}_{condition}_us", statistics.median(samples))
            if condition in ("default", "flipped"):
                for case in SPLIT_CASES:
                    fn, calls = cases[case]
                    assert fn is not None
                    try:
                        splits, held = split_us(fn, calls)
                    except Exception as error:  # this torch cannot capture timing events as nodes: a fact
                        facts[f"split {case} {condition}"] = f"n/a ({type(error).__name__}: {error})"
                        continue
                    if not held:
                        lead_failed.append(f"split {case}/{condition}")
                    for part, value in split_parts(splits).items():
                        record(f"split_{case}_{part}_{condition}_us", value)
    if initial is not None:
        set_sync_memops(bool(initial & SYNC_MEMOPS))
    facts["replay probe: lead did not hold for"] = " ".join(lead_failed) or "none (every timing had the GPU behind)"
    for name, values in per_rank.items():
        facts[f"{name} by rank"] = values
    rt.barrier()


def apply_sync_memops_request(facts: dict[str, str], environ: Mapping[str, str] | None = None) -> None:
    """Set or clear ``CU_CTX_SYNC_MEMOPS`` as ``$HEAP_BACKENDS_CTX_SYNC_MEMOPS`` asks (nothing when unset), noting
    the flags before and after in ``facts``. Raises SystemExit for a bad value, RuntimeError when the driver
    refuses."""
    wanted = sync_memops_request(os.environ if environ is None else environ)
    if wanted is None:
        return
    facts["context flags at init"] = describe_context_flags(context_flags())
    facts[f"context flags after {SYNC_MEMOPS_ENV}={int(wanted)}"] = describe_context_flags(set_sync_memops(wanted))
