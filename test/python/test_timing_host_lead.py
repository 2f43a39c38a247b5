"""Each device-timed run starts with the host lead, then the ranks' barrier, then the start event (no GPU needed).

The order matters: the spin keeps the GPU behind the host while it enqueues the call (else the span holds host
time), and it comes before the barrier so the ranks still start together whatever their clocks.
"""

from __future__ import annotations

import pytest
import torch

from triton_dist.runtime.world import host_lead
from triton_dist.testing import timing


class _Event:
    log: list[str]

    def __init__(self, enable_timing: bool = False) -> None:
        self.recorded = False

    def record(self) -> None:
        _Event.log.append("event")

    def elapsed_time(self, other: _Event) -> float:
        return 1.0


def test_every_timed_run_leads_the_host_before_the_barrier(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    _Event.log = log
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    monkeypatch.setattr(timing, "lead_host", lambda: log.append("lead"))
    monkeypatch.setattr(timing.rt, "synchronize", lambda: None)
    monkeypatch.setattr(timing.dist, "is_initialized", lambda: False)
    samples = timing.bench_samples(
        lambda: log.append("call"), warmup=1, rep=timing.MIN_TIMED_RUNS, start_together=lambda: log.append("barrier")
    )
    assert samples == [1.0] * timing.MIN_TIMED_RUNS
    timed = log[log.index("call") + 1 :]  # after the warm-up call
    assert timed == ["lead", "barrier", "event", "call", "event"] * timing.MIN_TIMED_RUNS


def test_the_lead_is_nothing_off_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: pytest.fail("slept on a CPU device"))
    host_lead.lead_host(torch.device("cpu"))


def test_idle_samples_of_several_functions_take_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """``idle_ms_interleaved`` samples every function once per round and rotates which goes first, so a drift of the
    host's speed over the run reaches each function alike (blocks of samples per function moved by 12% on H200)."""
    calls: list[str] = []
    monkeypatch.setattr(timing, "_idle_sample", lambda fn: (fn(), float(len(calls)))[1])
    fns = [lambda name=name: calls.append(name) for name in "abc"]
    samples = timing.idle_ms_interleaved(fns, rep=4, warmup=1)
    assert calls[:3] == ["a", "b", "c"]  # the warm-ups, one each
    assert calls[3:] == [*"abc", *"bca", *"cab", *"abc"]  # four rounds, the first function rotating
    assert [len(s) for s in samples] == [4, 4, 4]
    assert samples[0] == [4.0, 9.0, 11.0, 13.0]  # a's samples: the call count when each of its turns ended
