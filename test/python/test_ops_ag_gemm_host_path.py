"""ag_gemm's per-call host path, on the CPU with recording stand-ins for the launcher and the driver: a call is a
fixed, short list of enqueues (issue 24: 376 µs of host time per call came from the dispatcher, JIT launches and
per-chunk Tensor.copy_). What a call enqueues, in order:

- the epoch/barrier kernel on the current stream; the side stream forked after it (one event record + one wait);
- the first chunk for every peer, each followed by its 4-byte flag copy, then the GEMM's launch, then the other
  chunks (so neither the copy engine nor the GEMM waits for the host to enqueue everything);
- the side stream joined back (one event record + one wait).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

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


def _plan(log: _Recorder, world_size: int, chunks: int, m_local: int, k: int) -> op.FusedPlan:
    flags = torch.zeros(64, dtype=torch.int32)
    workspace = op.Workspace(
        recv=torch.empty(world_size * m_local, k, dtype=torch.bfloat16),
        flags=flags,
        epoch=torch.zeros(1, dtype=torch.int32),
        barrier=torch.zeros(world_size, dtype=torch.int32),
        peer_recv={},
        peer_flags={},
    )
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
