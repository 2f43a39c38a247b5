"""The policy of ops.common.eager_graphs on the CPU: when an eager call is captured, replayed, or run eagerly.

CUDA graphs need a GPU; here a recording fake stands in for the capture and the replay, so what is checked is which
calls capture, which replay, and that a replay applies the host-state change of the call it stands for.
test/gpu/check_ag_gemm.py and check_gemm_rs.py check real replays against torch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from triton_dist.ops.common import eager_graphs
from triton_dist.ops.common.eager_graphs import CAPTURE_AFTER, MAX_CAPTURES, MAX_GRAPHS, EagerGraphs

GPU = torch.device("cuda", 0)


class FakeGraph:
    """Records the launches its capture saw; a replay performs them again."""

    def __init__(self, launches: list[str], log: list[str]) -> None:
        self.launches = launches
        self.log = log

    def replay(self) -> None:
        self.log.extend(self.launches)


class Recorder:
    """A plan whose eager call logs one launch per call, named by its operands and its phase."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.capturing: list[str] | None = None
        self.calls = 0  # host state: the phase is calls % 2, as the double-buffered cuBLAS path

    def capture(self, device: torch.device, run: Callable[[], Any]) -> FakeGraph:
        assert eager_graphs.capturing_eager_call()
        self.capturing = []
        run()
        launches, self.capturing = self.capturing, None
        return FakeGraph(launches, self.log)

    def run(self, name: str) -> None:
        phase = self.calls & 1
        self.calls += 1
        (self.capturing if self.capturing is not None else self.log).append(f"{name}@{phase}")

    def replayed(self, phase: object) -> None:
        self.calls += 1


@pytest.fixture(autouse=True)
def on_gpu_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eager_graphs, "_current_device", lambda: 0)
    monkeypatch.setattr(eager_graphs, "_stream_capturing", lambda: False)
    eager_graphs.set_enabled(True)


def test_replays_do_what_eager_calls_do() -> None:
    """Any sequence of calls over a few address sets logs exactly the launches eager calls would, in order, and
    the host state (the phase) advances once per call; keys seen CAPTURE_AFTER times are replayed after."""
    rng = random.Random(7)
    plan, eager = Recorder(), Recorder()
    graphs = EagerGraphs(plan.capture)
    for _ in range(200):
        addresses = rng.choice([(1, 2, 3), (4, 5, 6), (1, 5, 3)])
        name = "-".join(map(str, addresses))
        graphs.launch(addresses, GPU, lambda n=name: plan.run(n), plan.calls & 1, plan.replayed)
        eager.run(name)
    assert plan.log == eager.log
    assert plan.calls == eager.calls == 200
    assert graphs.captures == 6  # 3 address sets x 2 phases
    assert graphs.replays > 150


def test_capture_after_repeats_only() -> None:
    plan = Recorder()
    graphs = EagerGraphs(plan.capture)
    for i in range(CAPTURE_AFTER - 1):
        graphs.launch((i, 0, 0), GPU, lambda: plan.run("x"))  # every key new: never captured
    graphs.launch((100, 0, 0), GPU, lambda: plan.run("x"))
    assert graphs.captures == 0 and len(graphs) == 0
    for _ in range(CAPTURE_AFTER):
        graphs.launch((7, 0, 0), GPU, lambda: plan.run("x"))
    assert graphs.captures == 1 and len(graphs) == 1


def test_bounds_on_graphs_and_captures() -> None:
    """Addresses that keep changing: at most MAX_GRAPHS kept, no capture past MAX_CAPTURES, every call still runs."""
    plan = Recorder()
    graphs = EagerGraphs(plan.capture)
    calls = 0
    for key in range(MAX_CAPTURES + 10):
        for _ in range(CAPTURE_AFTER):
            graphs.launch((key,), GPU, lambda: plan.run("x"))
            calls += 1
    assert graphs.captures == MAX_CAPTURES
    assert len(graphs) == MAX_GRAPHS
    assert len(plan.log) == calls


@pytest.mark.parametrize(
    "case", ["phase None", "disabled", "cpu", "other device", "user capture"], ids=lambda case: case.replace(" ", "_")
)
def test_eager_when_not_replayable(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = Recorder()
    graphs = EagerGraphs(plan.capture)
    device, phase = GPU, 0
    if case == "phase None":
        phase = None
    elif case == "disabled":
        eager_graphs.set_enabled(False)
    elif case == "cpu":
        device = torch.device("cpu")
    elif case == "other device":
        device = torch.device("cuda", 1)
    else:
        monkeypatch.setattr(eager_graphs, "_stream_capturing", lambda: True)
    for _ in range(3 * CAPTURE_AFTER):
        graphs.launch((1, 2, 3), device, lambda: plan.run("x"), phase)
    eager_graphs.set_enabled(True)
    assert graphs.captures == 0 and graphs.replays == 0
    assert len(plan.log) == 3 * CAPTURE_AFTER


def test_failed_capture_raises_naming_the_switch() -> None:
    def broken(device: torch.device, run: Callable[[], Any]) -> FakeGraph:
        raise ValueError("operation not permitted when stream is capturing")

    graphs = EagerGraphs(broken)
    for _ in range(CAPTURE_AFTER - 1):
        graphs.launch((1,), GPU, lambda: None)
    with pytest.raises(RuntimeError, match="TRITON_DIST_EAGER_GRAPHS=0"):
        graphs.launch((1,), GPU, lambda: None)
    assert not eager_graphs.capturing_eager_call()


def test_eager_replay_calls_follows_its_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """testing.eager_replay_calls (the GPU checks' driver): each call gets its key's operands refilled with that
    call's fresh values and its output poisoned, call 7 runs with the replays off, the snapshots come back in order."""
    from triton_dist.testing import EAGER_GRAPH_KEYS, eager_replay_calls

    slept: list[int] = []
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: slept.append(cycles))
    operands = [(torch.zeros(2), torch.zeros(2)) for _ in range(2)]
    outs = [torch.zeros(2) for _ in range(2)]
    seen: list[tuple[int, float, bool, bool]] = []

    def call(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        key = next(i for i, (x, _) in enumerate(operands) if x is a)
        seen.append((key, float(a[0]), bool(out.isnan().all()), eager_graphs.enabled()))
        out.copy_(a + b)

    results = eager_replay_calls(
        operands, outs, lambda i: (torch.full((2,), float(i)), torch.ones(2)), call, torch.Tensor.clone
    )
    assert [key for key, *_ in seen] == list(EAGER_GRAPH_KEYS)
    assert [value for _, value, *_ in seen] == [float(i) for i in range(len(EAGER_GRAPH_KEYS))]
    assert all(poisoned for _, _, poisoned, _ in seen)
    assert [on for *_, on in seen] == [i != 7 for i in range(len(EAGER_GRAPH_KEYS))]
    assert eager_graphs.enabled()
    assert [float(out[0]) for out, _, _ in results] == [i + 1.0 for i in range(len(EAGER_GRAPH_KEYS))]
    assert len(slept) == len(EAGER_GRAPH_KEYS)  # one rank: its GPU sleeps before every call


def test_stream_idle_reads_the_drivers_answer() -> None:
    """StreamOps.idle (the fallbacks' choice between an eager call and a replay): done -> idle, not ready -> busy,
    any other answer -> a RuntimeError naming cuStreamQuery."""
    from types import SimpleNamespace

    from triton_dist.ops.common.stream_ops import StreamOps

    ops = StreamOps(torch.device("cuda", 0))
    answers = {11: 0, 12: 600, 13: 700}  # stream -> CUresult: success, not ready, an illegal address
    driver = SimpleNamespace(cuGetErrorString=lambda error: (0, b"an illegal memory access"))
    ops._driver, ops._success, ops._not_ready = driver, 0, 600
    ops._query = lambda stream: (answers[stream],)
    assert ops.idle(11) is True
    assert ops.idle(12) is False
    with pytest.raises(RuntimeError, match="cuStreamQuery"):
        ops.idle(13)


def test_idle_for_replay_never_queries_a_capturing_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallbacks' choice: a stream query during a user's capture would invalidate the capture, so a capturing
    stream answers False without one; a CPU device answers False; otherwise the stream's own answer."""
    from triton_dist.ops.common import launch, stream_ops

    queried: list[int] = []

    class _Ops:
        def idle(self, stream: int) -> bool:
            queried.append(stream)
            return stream == 5

    monkeypatch.setattr(stream_ops, "stream_ops", lambda device: _Ops())
    monkeypatch.setattr(launch, "current_raw_stream", lambda index: 5 if index == 0 else 6)
    assert eager_graphs.idle_for_replay(GPU) is True
    assert eager_graphs.idle_for_replay(torch.device("cuda", 1)) is False
    assert eager_graphs.idle_for_replay(torch.device("cpu")) is False
    assert queried == [5, 6]
    monkeypatch.setattr(eager_graphs, "_stream_capturing", lambda: True)
    assert eager_graphs.idle_for_replay(GPU) is False
    assert queried == [5, 6], "no query while capturing"


def test_a_users_capture_records_eager_launches_even_where_a_graph_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key with a graph already captured, then called inside a user's capture: the call runs its eager launches
    (which the user's graph records), not a replay of the op's graph, and the count of replays does not move."""
    plan = Recorder()
    graphs = EagerGraphs(plan.capture)
    for _ in range(CAPTURE_AFTER + 1):
        graphs.launch((1, 2, 3), GPU, lambda: plan.run("x"))
    replays, logged = graphs.replays, len(plan.log)
    monkeypatch.setattr(eager_graphs, "_stream_capturing", lambda: True)
    graphs.launch((1, 2, 3), GPU, lambda: plan.run("x"))
    assert graphs.replays == replays
    assert len(plan.log) == logged + 1


class _BlasModel:
    """torch's cuBLAS workspace cache as the eager graphs meet it: one workspace per stream, allocated by a stream's
    first GEMM (inside a capture: in the capturing graph's private pool) and baked into a captured GEMM; a graph's
    destruction frees its pool and, as recent torch's ``CUDAGraph.reset`` does, drops its capture stream's cached
    workspace. A workspace's memory is gone once the cache no longer holds it and its pool's graph is destroyed."""

    def __init__(self) -> None:
        self.cache: dict[str, int] = {}
        self.owner: dict[int, _FakeCudaGraph | None] = {}
        """Per workspace, the graph in whose pool it was allocated (None: an eager GEMM's, never freed here)."""
        self.capturing: _FakeCudaGraph | None = None
        self.current = "user stream"

    def mm(self) -> None:
        workspace = self.cache.get(self.current)
        if workspace is None:
            workspace = self.cache[self.current] = len(self.owner)
            self.owner[workspace] = self.capturing
        if self.capturing is not None:
            self.capturing.baked.add(workspace)

    def freed(self, workspace: int) -> bool:
        graph = self.owner[workspace]
        return workspace not in self.cache.values() and graph is not None and graph.destroyed


class _FakeCudaGraph:
    def __init__(self, blas: _BlasModel) -> None:
        self.blas = blas
        self.baked: set[int] = set()
        self.destroyed = False
        self.stream = ""

    def capture_begin(self, capture_error_mode: str) -> None:
        self.stream, self.blas.capturing = self.blas.current, self

    def capture_end(self) -> None:
        self.blas.capturing = None

    def replay(self) -> None:
        pass

    def destroy(self) -> None:
        self.destroyed = True
        self.blas.cache.pop(self.stream, None)


class _FakeStream:
    def __init__(self, blas: _BlasModel, name: str) -> None:
        self.blas, self.name = blas, name

    def wait_stream(self, other: object) -> None:
        pass


def test_each_graph_keeps_its_own_blas_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    """capture_cuda_graph's captures all run on one capture stream, whose cached cuBLAS workspace a captured GEMM
    bakes in: each graph must own the one its capture allocated, so that no two live graphs share one (concurrent
    replays would race on it) and destroying one graph (LRU, a plan cleared) frees nothing another replays into."""
    import contextlib

    blas = _BlasModel()
    capture_stream = _FakeStream(blas, "capture stream")

    @contextlib.contextmanager
    def on_stream(stream: _FakeStream) -> Iterator[None]:
        before, blas.current = blas.current, stream.name
        try:
            yield
        finally:
            blas.current = before

    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: _FakeCudaGraph(blas))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: _FakeStream(blas, blas.current))
    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(eager_graphs, "_capture_stream", lambda device: capture_stream)
    monkeypatch.setattr(torch._C, "_cuda_clearCublasWorkspaces", blas.cache.clear, raising=False)
    graphs = EagerGraphs()  # the real capture_cuda_graph
    live: list[_FakeCudaGraph] = []
    for key in range(MAX_GRAPHS + 3):  # more keys than a plan keeps: the oldest graphs are dropped
        for _ in range(CAPTURE_AFTER):
            graphs.launch((key,), GPU, blas.mm)
        live = [graph for graph in graphs._graphs.values() if isinstance(graph, _FakeCudaGraph)]
        for graph in {id(g): g for g in blas.owner.values() if g is not None}.values():
            if graph not in live and not graph.destroyed:
                graph.destroy()  # what dropping torch's CUDAGraph does
        baked = [workspace for graph in live for workspace in graph.baked]
        assert len(baked) == len(set(baked)), f"live graphs share a cuBLAS workspace: {baked}"
        stale = [workspace for workspace in baked if blas.freed(workspace)]
        assert not stale, f"a live graph replays into freed cuBLAS workspaces {stale}"
    assert graphs.captures == MAX_GRAPHS + 3 and len(live) == MAX_GRAPHS


class _LaunchRecorder:
    """Stands in for a plan's EagerGraphs: records each call's phase and runs the call eagerly."""

    def __init__(self) -> None:
        self.phases: list[object] = []
        self.replays = 0

    def launch(
        self,
        addresses: tuple[int, ...],
        device: torch.device,
        run: Callable[[], Any],
        phase: object = 0,
        replayed: object = None,
    ) -> None:
        self.phases.append(phase)
        run()


@pytest.mark.parametrize("replay_collectives", [False, True], ids=["default", "REPLAY_COLLECTIVES"])
@pytest.mark.parametrize("op", ["ag_gemm", "gemm_rs"])
def test_nccl_fallbacks_never_replay_by_default(
    op: str, replay_collectives: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The NCCL fallback plans' eager calls never reach a graph (NCCL needs every rank to capture and replay a
    collective alike, and the choice is each rank's own), even from an idle stream; with REPLAY_COLLECTIVES on they
    would (phase 0). Either way the call's result is the eager one."""
    from triton_dist.ops.ag_gemm import op as ag_op
    from triton_dist.ops.gemm_rs import op as rs_op

    monkeypatch.setattr(eager_graphs, "idle_for_replay", lambda device: True)
    monkeypatch.setattr(eager_graphs, "REPLAY_COLLECTIVES", replay_collectives)
    torch.manual_seed(3)
    recorder = _LaunchRecorder()
    if op == "ag_gemm":
        a, b = torch.randn(2, 4), torch.randn(4, 3)

        def all_gather(gathered: torch.Tensor, shard: torch.Tensor, options: object) -> None:
            gathered.copy_(torch.cat([shard, 2 * shard]))  # the peer's shard: twice ours

        ag_plan = ag_op.UnfusedPlan(all_gather, None, 4, 3, 4)
        ag_plan.graphs = recorder  # type: ignore[assignment]
        out = torch.full((4, 3), float("nan"))
        ag_op._eager_call(ag_plan, a, b, out)
        expected = torch.cat([a, 2 * a]) @ b
    else:
        a, b = torch.randn(4, 2), torch.randn(2, 3)

        def reduce_scatter(shard: torch.Tensor, partial: torch.Tensor, options: object) -> None:
            shard.copy_(partial[:2] + 2 * partial[:2])  # the peer's partial of our rows: twice ours

        rs_plan = rs_op.UnfusedPlan(torch.empty(4, 3), reduce_scatter, None, 2, 3)
        rs_plan.graphs = recorder  # type: ignore[assignment]
        out = torch.full((2, 3), float("nan"))
        rs_op._eager_call(rs_plan, a, b, out)
        expected = 3 * (a @ b)[:2]
    torch.testing.assert_close(out, expected)
    replayable = [phase for phase in recorder.phases if phase is not None]
    assert replayable == ([0] if replay_collectives else []), recorder.phases
