"""Eager calls replayed from CUDA graphs that the op captures itself.

An eager call of an overlap op enqueues a handful of launches (kernels, copy-engine copies, cuBLAS GEMMs, a
collective). Each costs the host 5-30 µs on the GPU machines measured here, so on small problems the GPU waits for
the host, and an op that launches more than the unfused baseline's two calls loses from an idle GPU although its
device time wins (docs/results/2026-11-27-session24.md).

So an op's eager call goes through :meth:`EagerGraphs.launch`: once a plan has been called ``CAPTURE_AFTER`` times
with the same operand and output addresses (and the same host phase, see below), that call is captured into a CUDA
graph, and every later call with those addresses replays it: one ``cudaGraphLaunch``. A replay enqueues exactly
the work the eager call would have (the same kernels, copies and collective, on the current stream, with the
side streams' work as graph branches), reading and writing the same addresses, and each graph keeps what its
capture allocated (the cuBLAS workspace of its GEMMs included) in its own memory pool. The plan's signature (shapes,
strides, dtypes, device, alignment) and the key (addresses) make those this call's tensors.

A plan whose calls change host state between calls (the cuBLAS path's double buffers alternate) passes that state
as the call's ``phase``: the phase is part of the key (one graph per buffer), and its ``replayed(phase)`` applies
the host state's change a replay skipped. A call that cannot be replayed (flags whose values the host writes)
passes None and runs eagerly, as do calls off the GPU (the CPU emulation) and calls of the NCCL fallback plans
(``REPLAY_COLLECTIVES``: NCCL needs every rank to capture and replay a collective alike, and the choice here is
each rank's own). Calls made while a stream is capturing (a user's own CUDA graph) run eagerly too, so they are
captured into the user's graph as before.

Addresses that keep changing (a caller whose operands are new tensors every time) would capture without ever
replaying, so a plan stops capturing after ``MAX_CAPTURES`` graphs and keeps at most ``MAX_GRAPHS`` (the least
recently used goes). ``TRITON_DIST_EAGER_GRAPHS=0`` turns the replays off (read at import and by
:func:`set_enabled`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Protocol

import torch

ENV = "TRITON_DIST_EAGER_GRAPHS"
CAPTURE_AFTER = 2
"""Calls with the same key before the call is captured: a key seen once (a temporary) costs no capture."""
MAX_GRAPHS = 8
"""Graphs kept per plan, the least recently replayed dropped first."""
MAX_CAPTURES = 32
"""Captures per plan before it stops capturing (its callers' addresses keep changing)."""
MAX_SEEN = 64
"""Keys counted per plan while they wait for their capture; the count starts over past it."""

_enabled = os.environ.get(ENV, "1") != "0"
_local = threading.local()


def enabled() -> bool:
    """Whether eager calls may be replayed from graphs (``TRITON_DIST_EAGER_GRAPHS``, :func:`set_enabled`)."""
    return _enabled


def set_enabled(on: bool) -> None:
    """Turn the replays on or off for calls from now on (graphs already captured are kept, and used again once on)."""
    global _enabled
    _enabled = bool(on)


def capturing_eager_call() -> bool:
    """Whether the current thread is capturing an eager call for :class:`EagerGraphs` (a plan then takes its eager
    path, as the call it replaces would, rather than the path it takes inside a user's CUDA graph)."""
    return getattr(_local, "capturing", False)


class Graph(Protocol):
    """The part of ``torch.cuda.CUDAGraph`` used here."""

    def replay(self) -> None: ...


def capture_cuda_graph(device: torch.device, run: Callable[[], Any]) -> Graph:
    """``run()`` captured into a new CUDA graph on a capture stream of ``device`` (after the current stream's
    work, in thread-local capture mode so other threads' CUDA calls stay legal). The graph has its own memory
    pool: what the call allocates inside stays the graph's, the cuBLAS workspace of its GEMMs included (see
    :func:`_forget_blas_workspaces`)."""
    graph = torch.cuda.CUDAGraph()
    stream = _capture_stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    try:
        with torch.cuda.stream(stream):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                run()
            finally:
                graph.capture_end()
    finally:
        _forget_blas_workspaces()
    torch.cuda.current_stream(device).wait_stream(stream)
    return graph


def _forget_blas_workspaces() -> None:
    """Drop torch's cached cuBLAS / cuBLASLt workspaces (``torch._C._cuda_clearCublasWorkspaces``), after each
    capture.

    torch caches one workspace per (handle, stream) and a GEMM captured into a graph bakes its address in. Every
    capture here runs on the same capture stream, so without this the first capture's workspace (allocated in that
    graph's private pool) would be reused by every later graph: their replays on different streams would share
    it, and once the first graph is destroyed (a plan's least recently used graph dropped, ``clear_workspaces()``)
    torch frees the stream's cached workspace (``CUDAGraph.reset`` clears the capture stream's entry in recent
    torch) while the other graphs still write into it. Dropped after each capture, the workspace stays in the
    captured graph's pool, used by that graph alone and freed with it; the next capture allocates its own. Eager
    GEMMs on other streams allocate theirs again on their next call (a cached block)."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()


REPLAY_COLLECTIVES = False
"""Whether calls whose launches include an NCCL collective (the ops' NCCL fallback plans) may be captured and
replayed (:func:`replays_collective`). Off: NCCL requires a collective to be captured (and its graph launched) by
every rank alike, each rank launching the graph of the same collective capture ("Using NCCL with CUDA Graphs"), and
here each rank decides alone (its own addresses, its own stream's idleness), so one rank may replay a graph of the
all-gather while its peer launches it eagerly. The protocols then differ: a captured ring all-gather registers its
output for direct peer writes (``NCCL_GRAPH_REGISTER``, on by default), and a tuner may pick another algorithm for a
captured call. On only where every rank is known to make the same choice on every call."""


def replays_collective(device: torch.device) -> bool:
    """Whether an eager call of an NCCL fallback plan on ``device`` may go through its graphs: only with
    ``REPLAY_COLLECTIVES`` (off; see there), then from an idle stream (:func:`idle_for_replay`)."""
    return REPLAY_COLLECTIVES and idle_for_replay(device)


def idle_for_replay(device: torch.device) -> bool:
    """Whether an eager call on the GPU ``device`` finds its current stream idle, so that a replay (one launch) beats
    eager launches. The fallback plans ask it (with ``REPLAY_COLLECTIVES`` on): on a busy stream the host's launches
    are hidden and eager ones start when the baseline's would. False while the stream is capturing (a user's graph:
    the call is captured eagerly, and a stream query would invalidate the capture) and on CPU devices; else one
    ``cuStreamQuery``."""
    if device.type != "cuda" or _stream_capturing():
        return False
    from triton_dist.ops.common.launch import current_raw_stream
    from triton_dist.ops.common.stream_ops import stream_ops

    return stream_ops(device).idle(current_raw_stream(device.index))


def _current_device() -> int:
    return torch.cuda.current_device()


def _stream_capturing() -> bool:
    return torch.cuda.is_current_stream_capturing()


_capture_streams: dict[int, torch.cuda.Stream] = {}


def _capture_stream(device: torch.device) -> torch.cuda.Stream:
    index = device.index if device.index is not None else torch.cuda.current_device()
    stream = _capture_streams.get(index)
    if stream is None:
        stream = _capture_streams[index] = torch.cuda.Stream(device=index)
    return stream


class EagerGraphs:
    """One plan's graphs of its eager calls, by (operand addresses, output address, phase)."""

    __slots__ = ("_capture", "_graphs", "_seen", "captures", "replays")

    def __init__(self, capture: Callable[[torch.device, Callable[[], Any]], Graph] = capture_cuda_graph) -> None:
        self._capture = capture
        self._graphs: OrderedDict[Hashable, Graph] = OrderedDict()
        self._seen: dict[Hashable, int] = {}
        self.captures = 0
        """Graphs captured so far (diagnostics, and the ``MAX_CAPTURES`` bound)."""
        self.replays = 0
        """Calls served by a replay so far (diagnostics: tests and benchmarks say which path ran)."""

    def __len__(self) -> int:
        return len(self._graphs)

    def launch(
        self,
        addresses: tuple[int, ...],
        device: torch.device,
        run: Callable[[], Any],
        phase: Hashable | None = 0,
        replayed: Callable[[Hashable], None] | None = None,
    ) -> None:
        """Enqueue one eager call of the plan: replay its graph for ``addresses`` (the operands' and the output's
        ``data_ptr()``) and ``phase``, if there is one, else ``run()`` it (the plan's eager launches), capturing it
        first once this key has been seen ``CAPTURE_AFTER`` times.

        ``phase``: the host state the call's launches depend on (which of two buffers it fills, say), or None when
        this call must run eagerly. ``replayed(phase)``: the host-state change of a call whose launches a replay
        enqueued instead (a captured call made that change itself). Calls on a device other than the current one,
        off the GPU, or while the current stream is capturing run eagerly.

        Raises RuntimeError if a capture fails (the plan's host state may have moved on without its launches, so
        this rank could no longer keep in step with its peers); ``TRITON_DIST_EAGER_GRAPHS=0`` avoids captures.
        """
        if phase is None or not _enabled or device.type != "cuda" or device.index != _current_device():
            run()
            return
        if _stream_capturing():  # a user's capture: its graph records the eager launches, never a replay of ours
            run()
            return
        key = (addresses, phase)
        graph = self._graphs.get(key)
        if graph is not None:
            graph.replay()
            if replayed is not None:
                replayed(phase)
            self._graphs.move_to_end(key)
            self.replays += 1
            return
        seen = self._seen.get(key, 0) + 1
        if seen < CAPTURE_AFTER or self.captures >= MAX_CAPTURES:
            if seen < CAPTURE_AFTER:
                if len(self._seen) >= MAX_SEEN:
                    self._seen.clear()
                self._seen[key] = seen
            run()
            return
        self._seen.pop(key, None)
        _local.capturing = True
        try:
            graph = self._capture(device, run)
        except Exception as error:
            raise RuntimeError(
                f"triton_dist: capturing an eager call into a CUDA graph failed ({error}); set "
                f"{ENV}=0 to run eager calls without graphs"
            ) from error
        finally:
            _local.capturing = False
        self.captures += 1
        self._graphs[key] = graph
        if len(self._graphs) > MAX_GRAPHS:
            self._graphs.popitem(last=False)
        graph.replay()  # the capture enqueued nothing; the host state moved on with it, as for an eager call
        self.replays += 1

    def clear(self) -> None:
        """Drop every graph and count (the plan's buffers are about to go)."""
        self._graphs.clear()
        self._seen.clear()
