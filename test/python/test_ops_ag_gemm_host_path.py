"""ag_gemm's per-call host path (the fused path's, then the cuBLAS path's), on the CPU with recording stand-ins for
the launcher and the driver: a call is a fixed, short list of enqueues (issue 24: 376 µs of host time per call came
from the dispatcher, JIT launches and per-chunk Tensor.copy_). What a fused call enqueues, in order:

- the epoch/barrier kernel on the current stream; the side stream forked after it (one event record + one wait);
- the first chunk for every peer, each followed by its 4-byte flag copy, then the GEMM's launch, then the other
  chunks (so neither the copy engine nor the GEMM waits for the host to enqueue everything);
- the side stream joined back (one event record + one wait).

A cuBLAS-path call: the same begin, fork, copies (one per shard) and join around ``torch.mm`` of the own rows,
then per peer one wait kernel and ``torch.mm`` of its rows.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch

op = importlib.import_module("triton_dist.ops.ag_gemm.op")
tuning = importlib.import_module("triton_dist.ops.tuning")


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []


class _Launch:
    def __init__(self, name: str, log: _Recorder) -> None:
        self.name, self.log = name, log

    def launch_on(self, stream: int, *leading: object) -> None:
        self.log.calls.append((self.name, stream, len(leading)))


class _StreamOps:
    def __init__(self, log: _Recorder) -> None:
        self.log = log

    def copy(self, destination: int, source: int, nbytes: int, stream: int) -> None:
        self.log.calls.append(("copy", stream, destination, source, nbytes))

    def order(self, name: str, first: int, then: int) -> None:
        self.log.calls.append(("order", name, first, then))


def _workspace(recv: torch.Tensor, world_size: int, flags: torch.Tensor | None = None) -> op.Workspace:
    """A CPU stand-in of the shared workspace around ``recv`` (no peers)."""
    flags = torch.zeros(8, dtype=torch.int32) if flags is None else flags
    epoch, barrier = torch.zeros(1, dtype=torch.int32), torch.zeros(world_size, dtype=torch.int32)
    return op.Workspace(recv=recv, flags=flags, epoch=epoch, barrier=barrier, peer_recv={}, peer_flags={})


def _plan(log: _Recorder, world_size: int, chunks: int, m_local: int, k: int) -> op.FusedPlan:
    flags = torch.zeros(64, dtype=torch.int32)
    workspace = _workspace(torch.empty(world_size * m_local, k, dtype=torch.bfloat16), world_size, flags)
    rows = m_local // chunks
    copies = tuple(
        op._Copy(destination=1000 * (1 + peer) + chunk, source_offset=chunk * rows * k * 2, nbytes=rows * k * 2,
                 flag=2000 * (1 + peer) + chunk)
        for chunk in range(chunks)
        for peer in range(world_size - 1)
    )  # fmt: skip
    return op.FusedPlan(
        config=tuning.OverlapConfig(),
        workspace=workspace,
        rows=world_size * m_local,
        n=32,
        begin=_Launch("begin", log),
        gemm=_Launch("gemm", log),
        use_tma=False,
        a_block=[0, 0],
        b_block=[0, 0],
        c_block=[0, 0],
        recv_desc=None,
        push=None,
        copies=copies,
        side=SimpleNamespace(cuda_stream=9),
        stream_ops=_StreamOps(log),
        no_comm=False,
        flag_count=world_size * chunks,
        first_copies=world_size - 1,
    )


def _host_double_buffer(world_size: int, m_local: int, k: int, scheme: str) -> op.DoubleBuffer:
    """A ``DoubleBuffer`` on the host for ``scheme``: NaN receive buffers, per-parity flags at 0, no peers' views."""
    return op.DoubleBuffer(
        recv=torch.full((2, world_size * m_local, k), float("nan"), dtype=torch.bfloat16),
        flags=torch.zeros(2, world_size * op.MAX_CUBLAS_CHUNKS, dtype=torch.int32),
        send_epoch=torch.ones(1, dtype=torch.int32),
        recv_epoch=torch.ones(1, dtype=torch.int32),
        peer_recv={},
        peer_flags={},
        flags_by=scheme,
    )


def test_a_call_enqueues_a_short_fixed_sequence(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "current_device", lambda: None)  # a CPU tensor's device.index
    monkeypatch.setattr(op, "current_raw_stream", lambda index: 7)
    log = _Recorder()
    world_size, chunks, m_local, k = 3, 2, 64, 16
    plan = _plan(log, world_size, chunks, m_local, k)
    a = torch.randn(m_local, k).to(torch.bfloat16)
    b = torch.randn(k, 32).to(torch.bfloat16)
    c = plan.run(a, b)
    assert c.shape == (world_size * m_local, 32)
    kinds = [call[0] for call in log.calls]
    peers = world_size - 1
    assert kinds == ["begin", "order"] + ["copy"] * (2 * peers) + ["gemm"] + ["copy"] * (2 * peers) + ["order"]
    assert log.calls[0][1] == 7 and log.calls[1] == ("order", "ag_gemm.fork", 7, 9), "fork after the barrier kernel"
    assert log.calls[-1] == ("order", "ag_gemm.join", 9, 7)
    copies = [call for call in log.calls if call[0] == "copy"]
    assert all(call[1] == 9 for call in copies), "every copy on the side stream"
    data, flag_copies = copies[0::2], copies[1::2]
    assert [call[4] for call in flag_copies] == [4] * (chunks * peers), "a 4-byte epoch copy after every chunk"
    assert all(call[3] == plan.workspace.epoch.data_ptr() for call in flag_copies)
    assert [call[3] - a.data_ptr() for call in data] == [copy.source_offset for copy in plan.copies]
    driver_calls = 1 + 2 + 2 * chunks * peers + 1 + 2  # launches, event record/wait pairs, copies
    assert len(log.calls) + 2 == driver_calls, "the two orders are two driver calls each"


@pytest.mark.parametrize("begin_on_side", [False, True])
def test_a_cublas_path_call_is_its_gemms_between_the_waits(monkeypatch, begin_on_side: bool) -> None:
    """The cuBLAS path's planned call, torch's dispatcher ops and the plan's driver calls in one sequence: the output's
    allocation and its split into shards; the begin kernel, the fork, every peer's shard copy then its flag copy on
    the side stream; ``aten.mm.out`` of the own rows; per peer in arrival order its wait kernel then its
    ``aten.mm.out``; the join. No other op (no copy, cat or fill), and each GEMM wrote its own rows of C.

    With ``begin_on_side``: the fork first, then the begin kernel on the (high-priority) side stream, the own GEMM,
    the current stream ordered after the begin kernel alone (before any copy is enqueued on the side stream, so
    the wait kernels read the advanced epoch without waiting for the copies), then the copies."""
    from dispatch_recording import DispatchRecording

    monkeypatch.setattr(torch.cuda, "current_device", lambda: None)  # a CPU tensor's device.index
    monkeypatch.setattr(op, "current_raw_stream", lambda index: 7)
    world_size, rank, m_local, k, n = 3, 1, 4, 16, 8
    recording = DispatchRecording()
    log = SimpleNamespace(calls=recording.ops)  # the stand-ins log into the dispatcher's record
    gen = torch.Generator().manual_seed(7)
    shards = [torch.randn(m_local, k, generator=gen).to(torch.bfloat16) for _ in range(world_size)]
    recv = torch.cat(shards)
    recv[rank * m_local : (rank + 1) * m_local] = float("nan")  # the own slot is never read
    workspace = _workspace(recv, world_size)
    arrival = [(rank + s) % world_size for s in range(1, world_size)]
    copies = tuple(
        op._Copy(destination=1000 * peer, source_offset=0, nbytes=m_local * k * 2, flag=2000 * peer)
        for peer in ((rank - s) % world_size for s in range(1, world_size))
    )
    plan = op.CublasPlan(
        workspace=workspace,
        rank=rank,
        m_local=m_local,
        rows=world_size * m_local,
        n=n,
        begin=_Launch("begin", log),
        waits=tuple(
            (peer, _Launch(f"wait {peer}", log), recv[peer * m_local : (peer + 1) * m_local]) for peer in arrival
        ),
        copies=copies,
        side=SimpleNamespace(cuda_stream=9),
        stream_ops=_StreamOps(log),
        begin_on_side=begin_on_side,
        priority_side=SimpleNamespace(cuda_stream=11),
    )
    side = 11 if begin_on_side else 9
    b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
    with recording:
        c = plan.run(shards[rank], b)
    names = [call if isinstance(call, str) else call[0] for call in recording.ops]
    peers = world_size - 1
    waits_and_gemms = [name for peer in arrival for name in (f"wait {peer}", "aten.mm.out")]
    orders = [call[1:] for call in recording.ops if call[0] == "order"]
    if begin_on_side:
        assert names == (
            ["aten.empty.memory_format", "aten.split.Tensor", "order", "begin", "aten.mm.out", "order"]
            + ["copy", "copy"] * peers
            + waits_and_gemms
            + ["order"]
        ), names
        assert orders == [
            ("ag_gemm.cublas.fork", 7, 11),
            ("ag_gemm.cublas.begun", 11, 7),
            ("ag_gemm.cublas.join", 11, 7),
        ]
    else:
        assert names == (
            ["aten.empty.memory_format", "aten.split.Tensor", "begin", "order"]
            + ["copy", "copy"] * peers
            + ["aten.mm.out"]
            + waits_and_gemms
            + ["order"]
        ), names
        assert orders == [("ag_gemm.cublas.fork", 7, 9), ("ag_gemm.cublas.join", 9, 7)]
    copied = [call for call in recording.ops if call[0] == "copy"]
    assert all(call[1] == side for call in copied), "every copy on the side stream"
    assert [call[2] for call in copied] == [x for copy in copies for x in (copy.destination, copy.flag)]
    assert [call[4] for call in copied[1::2]] == [4] * peers, "a 4-byte epoch copy after every shard"
    launches = [call for call in recording.ops if isinstance(call, tuple) and call[0] not in ("copy", "order")]
    assert [call[1] for call in launches] == [side if begin_on_side else 7] + [7] * peers, "begin, then the waits"
    want = (torch.cat(shards).float() @ b.float()).to(torch.bfloat16)
    assert torch.allclose(c.float(), want.float(), atol=1e-2, rtol=1e-2), "each shard's GEMM into its own rows"


class _ArgumentsLaunch(_Launch):
    """A recording launch that keeps the call's arguments."""

    def launch_on(self, stream: int, *leading: object) -> None:
        self.log.calls.append((self.name, stream, *leading))


class _DriverStreamOps(_StreamOps):
    """The stand-in with the driver's stream memory operations."""

    uses_driver = True

    def write_value(self, address: int, value: int, stream: int) -> None:
        self.log.calls.append(("write_value", stream, address, value))

    def wait_value(self, address: int, value: int, stream: int) -> None:
        self.log.calls.append(("wait_value", stream, address, value))


@pytest.mark.parametrize("wait_beside", [False, True])
@pytest.mark.parametrize("scheme", op.FLAG_SCHEMES)
def test_an_eager_cublas_call_on_double_buffers_has_no_barrier(monkeypatch, scheme: str, wait_beside: bool) -> None:
    """The cuBLAS path's eager call on double buffers: no begin kernel; the fork, then per peer its shard copy into
    the buffer of this call's parity and its flag; the own GEMM; per peer the wait on its flag and the GEMM of its
    rows of that same buffer; the join. Two calls use the two buffers. ``"memops"``: the flags are stream memory
    operations carrying the call count (1, then 2) and no kernel runs; ``"memop_write"``: the same writes, and wait
    kernels given the count; ``"memop_parity"``: stream memory writes of 1 into the flags of the call's parity (row 0,
    then row 1) and wait kernels given the flag's index in that row; ``"kernels"``: the send epoch's copy, the
    advance kernel on the side stream and the wait kernels.

    With ``wait_beside``: the waiter stream forked from the current stream right after the side stream, every wait
    on the waiter, the first one enqueued before the own GEMM, each later one right before the current stream's
    order after the waiter (one per chunk, each right before its chunk's GEMM and after that chunk's wait was
    enqueued), nothing on the waiter after the last such order (so the call's end includes every wait), and the
    graph phase 2 above the buffer's (its own graphs)."""
    from dispatch_recording import DispatchRecording

    monkeypatch.setattr(torch.cuda, "current_device", lambda: None)
    monkeypatch.setattr(op, "current_raw_stream", lambda index: 7)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)  # eager (a CPU build lacks it)
    world_size, rank, m_local, k, n = 3, 2, 4, 16, 8
    recording = DispatchRecording()
    log = SimpleNamespace(calls=recording.ops)
    gen = torch.Generator().manual_seed(11)
    arrival = [(rank + s) % world_size for s in range(1, world_size)]
    senders = [(rank - s) % world_size for s in range(1, world_size)]
    double = _host_double_buffer(world_size, m_local, k, scheme)
    per_parity = double.flags.shape[1]
    rows = {peer: slice(peer * m_local, (peer + 1) * m_local) for peer in range(world_size)}
    by_parity = scheme == "memop_parity"  # the flags of buffer p in row p (at 100 p here), else all in row 0

    def flag_of(peer: int, parity: int) -> int:
        return 2000 * peer + (100 * parity if by_parity else 0)

    copies = tuple(
        tuple(op._Copy(destination=10_000 * parity + 1000 * peer, source_offset=0, nbytes=m_local * k * 2,
                       flag=flag_of(peer, parity)) for peer in senders)
        for parity in (0, 1)
    )  # fmt: skip
    workspace = _workspace(torch.empty(world_size * m_local, k, dtype=torch.bfloat16), world_size)
    plan = op.CublasPlan(
        workspace=workspace,
        rank=rank,
        m_local=m_local,
        rows=world_size * m_local,
        n=n,
        begin=_Launch("begin", log),
        waits=(),
        copies=(),
        side=SimpleNamespace(cuda_stream=9),
        stream_ops=_StreamOps(log) if scheme == "kernels" else _DriverStreamOps(log),
        wait_beside=wait_beside,
        waiter=SimpleNamespace(cuda_stream=13),
        double=double,
        double_waits=tuple(
            (
                peer,  # its part of C: one chunk per shard
                peer,  # its flag: one chunk per shard
                None if scheme == "memops" else _ArgumentsLaunch(f"wait {peer}", log),
                (double.recv[0][rows[peer]], double.recv[1][rows[peer]]),
            )
            for peer in arrival
        ),
        double_copies=copies,
        advance=_Launch("advance", log),
    )
    b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
    flags = double.flags.data_ptr()
    for call in range(2):
        shards = [torch.randn(m_local, k, generator=gen).to(torch.bfloat16) for _ in range(world_size)]
        for peer in arrival:  # what the peers' copies would have landed in this call's buffer
            double.recv[call][rows[peer]] = shards[peer]
        recording.ops.clear()
        with recording:
            c = plan.run(shards[rank], b)
        names = [entry if isinstance(entry, str) else entry[0] for entry in recording.ops]
        waits_on = 13 if wait_beside else 7
        wait_names = {peer: "wait_value" if scheme == "memops" else f"wait {peer}" for peer in arrival}
        if scheme == "kernels":
            producer = ["copy", "copy"] * len(senders) + ["advance"]
        else:
            producer = ["copy", "write_value"] * len(senders)
        if wait_beside:
            forks = ["order", "order"]
            chunks = [wait_names[arrival[0]], "aten.mm.out"]
            for index, peer in enumerate(arrival):
                chunks += ([wait_names[peer]] if index else []) + ["order", "aten.mm.out"]
        else:
            forks = ["order"]
            chunks = ["aten.mm.out"] + [x for peer in arrival for x in (wait_names[peer], "aten.mm.out")]
        assert names == ["aten.empty.memory_format", "aten.split.Tensor", *forks, *producer, *chunks, "order"], names
        orders = [entry[1:] for entry in recording.ops if entry[0] == "order"]
        if wait_beside:
            assert orders == [
                ("ag_gemm.cublas.fork", 7, 9),
                ("ag_gemm.cublas.waiter", 7, 13),
                *[("ag_gemm.cublas.waited", 13, 7)] * len(arrival),
                ("ag_gemm.cublas.join", 9, 7),
            ]
            at = {i: entry for i, entry in enumerate(recording.ops) if not isinstance(entry, str)}
            on_waiter = [i for i, entry in at.items() if entry[0] != "order" and entry[1] == 13]
            waited = [i for i, entry in at.items() if entry[:2] == ("order", "ag_gemm.cublas.waited")]
            peer_gemms = [i for i, name in enumerate(names) if name == "aten.mm.out"][1:]
            assert len(on_waiter) == len(waited) == len(peer_gemms) == len(arrival)
            assert on_waiter[0] < names.index("aten.mm.out"), "the first wait enqueued before the own GEMM"
            assert all(w < o < g for w, o, g in zip(on_waiter, waited, peer_gemms, strict=True)), (
                "each chunk's GEMM after the order that follows its wait"
            )
            assert max(on_waiter) < waited[-1], "nothing on the waiter after the last join"
        else:
            assert orders == [("ag_gemm.cublas.fork", 7, 9), ("ag_gemm.cublas.join", 9, 7)]
        if scheme != "kernels":
            writes = [entry for entry in recording.ops if entry[0] == "write_value"]
            value = 1 if by_parity else call + 1  # a constant (replayable), else the call count
            assert writes == [("write_value", 9, flag_of(peer, call), value) for peer in senders]
            waited_for = [entry for entry in recording.ops if entry[0] in wait_names.values()]
            if scheme == "memops":
                assert waited_for == [("wait_value", waits_on, flags + 4 * peer, call + 1) for peer in arrival]
            elif by_parity:  # the kernel, given the flag's index in this call's row
                assert waited_for == [(f"wait {peer}", waits_on, call * per_parity + peer) for peer in arrival]
            else:  # the kernel, the count its one leading argument
                assert waited_for == [(f"wait {peer}", waits_on, call + 1) for peer in arrival]
        else:
            assert [entry for entry in recording.ops if entry[0].startswith("wait")] == [
                (f"wait {peer}", waits_on) for peer in arrival
            ], "no argument: the kernels read the receive epoch"
            flag_copies = [entry for entry in recording.ops if entry[0] == "copy"][1::2]
            assert [entry[3] for entry in flag_copies] == [double.send_epoch.data_ptr()] * len(senders)
        copied = [entry for entry in recording.ops if entry[0] == "copy" and entry[4] > 4]
        assert [entry[2] for entry in copied] == [10_000 * call + 1000 * peer for peer in senders], "this call's buffer"
        assert "begin" not in names, "no begin kernel, no barrier"
        replayable = scheme in ("memop_parity", "kernels")  # the next call's phase: its buffer, or None (eager)
        assert plan.graph_phase() == ((call + 1) % 2 + 2 * wait_beside if replayable else None)
        want = (torch.cat(shards).float() @ b.float()).to(torch.bfloat16)
        assert torch.allclose(c.float(), want.float(), atol=1e-2, rtol=1e-2), "each GEMM read this call's buffer"
    assert double.calls == 2
    plan.replayed(1 + 2 * wait_beside)  # a replay of a call on buffer 1: the gathered A is read from buffer 1
    assert double.calls == 3
    gathered = plan.gathered(shards[rank], rank)
    assert all(torch.equal(gathered[rows[peer]], double.recv[1][rows[peer]]) for peer in arrival)


def test_the_flag_scheme_is_the_replayable_memop_one_wherever_it_can_run(monkeypatch) -> None:
    """``"auto"``: ``"memop_parity"`` wherever it can run (a GPU whose stream operations reach the driver, the
    watchdog on or off, since its wait is a watched kernel; the CPU emulation), else ``"kernels"``; a scheme asked for
    where it can run, ``"kernels"`` where it cannot (no driver; ``"memops"`` and ``"memop_write"`` under the
    emulation); anything else named in a ValueError."""
    gpu = torch.device("cuda", 0)
    for uses_driver, want in ((True, op.FLAG_SCHEMES), (False, ("kernels",))):
        ops = SimpleNamespace(uses_driver=uses_driver)
        monkeypatch.setattr(op, "stream_ops", lambda device, ops=ops: ops)
        assert op.available_flag_schemes(gpu) == want
    assert op.available_flag_schemes(torch.device("cpu")) == op.EMULATED_FLAG_SCHEMES == ("memop_parity", "kernels")
    for available in (op.FLAG_SCHEMES, op.EMULATED_FLAG_SCHEMES):
        assert op.flag_scheme("auto", available) == "memop_parity"
        assert all(op.flag_scheme(choice, available) == choice for choice in available)
    assert all(op.flag_scheme(choice, ("kernels",)) == "kernels" for choice in ("auto", *op.FLAG_SCHEMES))
    assert [op.flag_scheme(choice, op.EMULATED_FLAG_SCHEMES) for choice in ("memops", "memop_write")] == ["kernels"] * 2
    assert set(op.REPLAYABLE_FLAG_SCHEMES) == {"memop_parity", "kernels"} <= set(op.FLAG_SCHEMES)
    with pytest.raises(ValueError, match="DOUBLE_BUFFER_FLAGS.*'fast'"):
        op.flag_scheme("fast", op.FLAG_SCHEMES)


def test_double_buffers_fall_back_to_the_barrier_when_the_heap_is_full(monkeypatch) -> None:
    """No room on the symmetric heap for the double buffers: a warning that names the size and the remedy, and None
    (the plan's eager calls keep the begin barrier) instead of an error; over ``DOUBLE_BUFFER_MAX_BYTES``: None,
    no allocation tried."""
    from triton_dist import runtime as rt

    def full(key: tuple, create: object, *, what: str) -> None:
        raise rt.HeapExhaustedError("heap full (test)")

    monkeypatch.setattr(op.resources, "workspace", full)
    world = SimpleNamespace(world_size=2)
    a = torch.empty(64, 128, dtype=torch.bfloat16)
    with pytest.warns(RuntimeWarning, match=r"no room for the cuBLAS path's double receive buffers.*heap_size"):
        assert op.double_buffer(world, a) is None
    monkeypatch.setattr(op, "DOUBLE_BUFFER_MAX_BYTES", 2 * 2 * 64 * 128 * 2 - 1)
    assert op.double_buffer(world, a) is None  # over the cap: no allocation, so no warning


class _EmulatedBegin(op.EmulatedLaunch):
    """A begin kernel's stand-in that marks the plan as the CPU emulation's (``_CallConstants.emulated``)."""

    def __init__(self) -> None:  # no kernel: the double-buffered emulated call launches no begin kernel
        pass


@pytest.mark.parametrize("wait_beside", [False, True])
def test_the_emulation_runs_the_waits_beside_the_own_gemm_in_host_order(wait_beside: bool) -> None:
    """Under the CPU emulation (every stream's work in host order) a double-buffered ``"memop_parity"`` call: each
    host copy into a peer's rows, then the 1 into its flag; then with ``wait_beside`` every chunk's wait kernel
    before the own GEMM (the waiter stream's work, in arrival order) and the peer GEMMs after it, else the own GEMM
    and per chunk its wait then its GEMM. Each wait is given its flag's index in the call's row; C matches torch."""
    from dispatch_recording import DispatchRecording

    world_size, rank, m_local, k, n = 3, 0, 4, 16, 8
    recording = DispatchRecording()
    log = SimpleNamespace(calls=recording.ops)
    gen = torch.Generator().manual_seed(5)
    arrival = [(rank + s) % world_size for s in range(1, world_size)]
    senders = [(rank - s) % world_size for s in range(1, world_size)]
    double = _host_double_buffer(world_size, m_local, k, "memop_parity")
    peer_rows = {peer: torch.zeros(m_local, k, dtype=torch.bfloat16) for peer in senders}  # the peers' slots
    peer_flags = {peer: torch.zeros(2, 1, dtype=torch.int32) for peer in senders}
    rows = {peer: slice(peer * m_local, (peer + 1) * m_local) for peer in range(world_size)}
    plan = op.CublasPlan(
        workspace=_workspace(torch.empty(world_size * m_local, k, dtype=torch.bfloat16), world_size),
        rank=rank,
        m_local=m_local,
        rows=world_size * m_local,
        n=n,
        begin=_EmulatedBegin(),
        waits=(),
        copies=(),
        side=None,
        stream_ops=None,
        wait_beside=wait_beside,
        double=double,
        double_waits=tuple(
            (
                peer,
                peer,
                _ArgumentsLaunch(f"wait {peer}", log),
                (double.recv[0][rows[peer]], double.recv[1][rows[peer]]),
            )
            for peer in arrival
        ),
        double_host_copies=tuple(
            tuple(op._HostCopy(peer_rows[peer], 0, m_local, peer_flags[peer][parity]) for peer in senders)
            for parity in (0, 1)
        ),
    )
    shards = [torch.randn(m_local, k, generator=gen).to(torch.bfloat16) for _ in range(world_size)]
    for peer in arrival:  # what the peers' copies would have landed in this call's buffer (0)
        double.recv[0][rows[peer]] = shards[peer]
    b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
    with recording:
        c = plan.run(shards[rank], b)
    steps = [entry if isinstance(entry, str) else entry[0] for entry in recording.ops]
    steps = [step for step in steps if step.startswith("wait") or step == "aten.mm.out"]
    waits = [f"wait {peer}" for peer in arrival]
    if wait_beside:
        assert steps == [*waits, "aten.mm.out", *["aten.mm.out"] * len(arrival)], steps
    else:
        assert steps == ["aten.mm.out", *[x for wait in waits for x in (wait, "aten.mm.out")]], steps
    launched = [entry for entry in recording.ops if not isinstance(entry, str) and entry[0].startswith("wait")]
    assert launched == [(f"wait {peer}", 0, peer) for peer in arrival], "parity 0's row: the flag's own index"
    assert all(torch.equal(peer_rows[peer], shards[rank]) for peer in senders), "the shard copied to every peer"
    assert all(peer_flags[peer].flatten().tolist() == [1, 0] for peer in senders), "then the 1 in parity 0's flag"
    want = (torch.cat(shards).float() @ b.float()).to(torch.bfloat16)
    assert torch.allclose(c.float(), want.float(), atol=1e-2, rtol=1e-2)
    assert double.calls == 1
