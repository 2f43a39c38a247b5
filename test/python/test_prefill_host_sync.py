"""bench/prefill_host_sync.py's CPU parts: the capture of torch's synchronization warnings with their stacks, the
per-piece host clock, the split of a profile into runs with their longest GPU gaps, and the command line."""

from __future__ import annotations

import warnings
from unittest import mock

import pytest
from bench_scripts import load_bench

probe = load_bench("prefill_host_sync.py")


def _synchronizing_call() -> None:
    warnings.warn("called a synchronizing CUDA operation", UserWarning, stacklevel=1)


def test_sync_warnings_counts_each_stack_and_ignores_other_warnings() -> None:
    report = probe.SyncReport()
    with mock.patch.object(probe.torch.cuda, "set_sync_debug_mode") as mode, probe.sync_warnings(report):
        for _ in range(3):
            _synchronizing_call()
        _synchronizing_call()  # another line: another stack
        warnings.warn("an unrelated warning", UserWarning, stacklevel=1)
    assert [call.args[0] for call in mode.call_args_list] == ["warn", "default"]
    assert sorted(report.stacks.values()) == [1, 3]
    for stack in report.stacks:
        assert "in _synchronizing_call" in stack[-1], stack  # innermost frame last, the warnings module left out
        assert any("test_sync_warnings_counts_each_stack" in frame for frame in stack)
    assert report.messages == {"called a synchronizing CUDA operation"}
    with warnings.catch_warnings(record=True) as caught:  # the hook is gone afterwards
        warnings.simplefilter("always")
        _synchronizing_call()
    assert len(caught) == 1


def test_host_clock_times_each_piece_and_keeps_results_and_errors() -> None:
    clock = probe.HostClock()
    add = clock.wrap("add", lambda a, b: a + b)
    assert add(2, 3) == 5 and add(a=1, b=1) == 2

    def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        clock.wrap("fail", fail)()
    assert clock.calls == {"add": 2, "fail": 1}
    assert set(clock.totals) == {"add", "fail"} and all(us >= 0 for us in clock.totals.values())


def test_profiled_runs_split_at_the_harness_and_find_the_gaps() -> None:
    from decoder_anatomy import Kernel  # the script's own import of it (bench/ is on the path)

    kernels = [
        Kernel("spin_kernel", 0, 100),
        Kernel("_barrier_kernel", 100, 110),
        Kernel("gemm_a", 110, 200),
        Kernel("Memcpy PtoP", 150, 260),  # concurrent with gemm_a, reaches further
        Kernel("gemm_b", 300, 400),  # 40 idle after the copy
        Kernel("gemm_c", 410, 420),  # 10 idle
        Kernel("spin_kernel", 500, 600),
        Kernel("_barrier_kernel", 600, 605),
        Kernel("norm", 705, 710),  # 100 idle at the start of the second run
    ]
    with mock.patch.object(probe, "profile_kernels", return_value=list(reversed(kernels))):
        runs = probe.profiled_runs(lambda: None, runs=2, gaps=2)
    assert len(runs) == 2
    first, second = runs
    assert (first.span, first.busy) == (310, 260)
    assert first.gaps == [(40, "Memcpy PtoP", "gemm_b"), (10, "gemm_b", "gemm_c")]
    assert (second.span, second.busy) == (105, 5)
    assert second.gaps == [(100, "(step start)", "norm")]


def test_spread_and_command_line() -> None:
    assert probe.spread([3.0, 1.0, 2.0]) == "2.0 (1.0-3.0)"
    assert probe.spread([]) == "-"
    args = probe.parse_args([])
    assert (args.model, args.tokens, args.layers, args.variants) == ("Llama-3-8B", 4096, 2, ["ours", "torch"])
    assert probe.parse_args(["--variants", "ours"]).variants == ["ours"]
    for bad in (["--model", "GPT-5"], ["--steps", "5"], ["--variants", "ours,jax"]):
        with pytest.raises(SystemExit):
            probe.parse_args(bad)


def test_the_report_shows_every_rank_stack_piece_and_profiled_step(capsys: pytest.CaptureFixture[str]) -> None:
    syncs = probe.SyncReport({("a.py:1 in f: x.item()",): 4}, {"called a synchronizing CUDA operation"})
    host = probe.HostResult([100.0, 120.0, 110.0], 1, {"ag_gemm": 40.0, "SDPA": 10.0}, {"ag_gemm": 4.0, "SDPA": 2.0})
    counters = probe.Counters(gc_runs={0: 3}, gc_ms=0.5, segments_allocated=2, plans_built=1)
    device = {"1 ms lead": [900.0, 1000.0], "20 ms lead": [800.0], "from idle": [1100.0]}
    run = probe.ProfiledRun(1000.0, 700.0, [(200.0, "Memcpy PtoP", "gemm_b")])
    mine = {"name": "ours", "syncs": syncs, "counters": counters, "host": host, "device": device}
    mine["runs"] = {"1 ms lead": [run], "20 ms lead": []}
    probe.print_report([mine, {**mine, "syncs": probe.SyncReport()}], layers=2)
    out = capsys.readouterr().out
    for text in (
        "== ours (µs per step of 2 layers",
        "rank 0: 2 synchronizing calls per step",
        "2 per step at:\n     a.py:1 in f: x.item()",
        "rank 1: 0 synchronizing calls per step",
        "host path: 110.0 (100.0-120.0) µs per step; 1 of 3 steps waited",
        "ag_gemm 40.0 (4 calls), SDPA 10.0 (2 calls), rest 60.0",
        "garbage collections gen0 x3 (0.5 ms); device segments +2 -0, allocation retries 0; plans built 1",
        "1 ms lead 950.0 (900.0-1000.0); 20 ms lead 800.0 (800.0-800.0); from idle 1100.0",
        "from idle - 20 ms lead: 300.0 µs per step",
        "profiled step 0 (1 ms lead): span 1000.0, busy 700.0, idle 300.0; longest gaps: 200.0 after Memcpy PtoP",
    ):
        assert text in out, (text, out)
