"""bench/heap_backends.py's driver on the CPU: the variants (a backend and its workers' environment), the options
the workers need, the rotation of the variants over trials, and the comparison (medians, overheads against the
baseline, spreads, the 3% bar) on synthetic worker results. The workers themselves need GPUs (scripts/gpu_check.sh's
bench_heap_backends step)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from bench_scripts import load_bench

heap = load_bench("heap_backends.py")
replay = load_bench("_replay_probe.py")


def test_variants_parse_backend_and_environment() -> None:
    plain = heap.parse_variant("nvshmem")
    assert (plain.backend, plain.env, plain.label) == ("nvshmem", (), "nvshmem")
    tuned = heap.parse_variant("nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1,NVSHMEM_CUMEM_GRANULARITY=2097152")
    assert tuned.env == (("NVSHMEM_DISABLE_LOCAL_ONLY_PROXY", "1"), ("NVSHMEM_CUMEM_GRANULARITY", "2097152"))
    assert heap.parse_variant(tuned.label) == tuned
    for text, words in (
        ("rocshmem", "backend must be one of"),
        ("nvshmem:NVSHMEM_X", "is not NAME=VALUE"),
        ("nvshmem:1X=2", "is not NAME=VALUE"),
        ("cuda_ipc:TRITON_DIST_BACKEND=nvshmem", "sets TRITON_DIST_BACKEND"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=words):
            heap.parse_variant(text)


def test_arguments_default_to_both_heaps_and_refuse_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    args = heap.parse_args([])
    assert [variant.label for variant in args.variants] == ["cuda_ipc", "nvshmem"]
    assert (args.only, args.ar_sizes, args.probe) == (list(heap.DEFAULT_GROUPS), list(heap.AR_SIZES_KIB), False)
    assert "replay" in heap.GROUPS and "replay" not in args.only  # a diagnosis, not a metric of issue 29's bar
    assert heap.parse_args(["--only", "replay"]).only == ["replay"]
    probe = heap.parse_args(
        ["--only", "all_reduce", "--ar-sizes", "64", "--probe", "--variants", "cuda_ipc", "nvshmem"]
    )
    assert (probe.only, probe.ar_sizes, probe.probe) == (["all_reduce"], [64], True)
    for argv, words in (
        (["--variants", "nvshmem", "nvshmem"], "names a variant twice"),
        (["--replays", "5"], "must be >= 20"),
        (["--graph-calls", "0"], "must be >= 1"),
        (["--ar-sizes", "0"], "must be positive"),
        (["--only", "gemm"], "invalid choice"),
    ):
        with pytest.raises(SystemExit):
            heap.parse_args(argv)
        assert words in capsys.readouterr().err


def test_drive_rotates_variants_and_compares_against_the_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Synthetic workers: the baseline at 4.0 / 9.0 µs, the plain NVSHMEM heap 5% over at 64 KiB, the variant without
    # the proxy thread on par; every worker's values move a little per trial, so spreads are not zero.
    base = {"all_reduce_64KiB_us": 4.0, "all_reduce_1024KiB_us": 9.0}
    scale = {"cuda_ipc": 1.0, "nvshmem": 1.05, "nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1": 1.0}
    calls: list[tuple[str, int, tuple[str, ...]]] = []

    def fake_measure(args: Any, variant: Any, scratch: Path, index: int) -> dict[str, Any]:
        calls.append((variant.label, index, tuple(variant.env)))
        jitter = 1.0 + 0.01 * index
        metrics = {
            name: value * jitter * (scale[variant.label] if "64KiB" in name else 1.0) for name, value in base.items()
        }
        return {"metrics": metrics, "facts": {"heap bases mod 2 MiB, by rank": f"{variant.label} {index}"}}

    monkeypatch.setattr(heap, "measure", fake_measure)
    out = tmp_path / "heap.md"
    args = heap.parse_args(
        ["--trials", "3", "--variants", "cuda_ipc", "nvshmem", "nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1"]
        + ["--out", str(out), "--enforce-bar"]
    )
    assert heap.drive(args) == 1  # the plain NVSHMEM heap is over the bar at 64 KiB
    labels = [label for label, _, _ in calls]
    assert labels[:3] == ["cuda_ipc", "nvshmem", "nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1"]
    assert labels[3:6] == ["nvshmem", "nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1", "cuda_ipc"]  # rotated
    assert labels[6:] == ["nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1", "cuda_ipc", "nvshmem"]
    assert ("nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1", 0, (("NVSHMEM_DISABLE_LOCAL_ONLY_PROXY", "1"),)) in calls
    printed = capsys.readouterr().out
    assert "over it: all_reduce_64KiB_us (nvshmem)" in printed
    assert "all_reduce_64KiB_us cuda_ipc_us=4.040 nvshmem_us=4.242 overhead=+5.0% (OVER" in printed
    assert "all_reduce_1024KiB_us cuda_ipc_us=9.090 nvshmem_us=9.090 overhead=+0.0% (within" in printed
    written = out.read_text()
    assert "| all_reduce_64KiB_us | 4.040 | 2.0% | 4.242 | +5.0% | 2.0% | 4.040 | +0.0% | 2.0% |" in written
    assert "- heap bases mod 2 MiB, by rank: nvshmem 0" in written  # the facts of each variant's first trial
    args.enforce_bar = False
    assert heap.drive(args) == 0


def test_rows_leave_out_what_a_variant_did_not_measure() -> None:
    samples = {"cuda_ipc": heap.Samples(), "nvshmem": heap.Samples()}
    samples["cuda_ipc"].add({"metrics": {"ping_pong_us": 2.0, "ll_64KiB_phase0x0_us": 4.0}})
    samples["cuda_ipc"].add({"metrics": {"ping_pong_us": 2.2, "ll_64KiB_phase0x0_us": 4.0}})
    samples["nvshmem"].add({"metrics": {"ping_pong_us": 2.1}})
    rows = heap.compare(samples, ["cuda_ipc", "nvshmem"])
    assert [(row.metric, round(row.base_us, 3), len(row.others)) for row in rows] == [
        ("ping_pong_us", 2.1, 1),
        ("ll_64KiB_phase0x0_us", 4.0, 0),
    ]
    assert rows[0].others[0][0] == "nvshmem" and abs(rows[0].others[0][2]) < 1e-12
    assert abs(rows[0].base_spread - 0.2 / 2.1) < 1e-12
    assert heap.over_bar(rows) == []
    assert "| ll_64KiB_phase0x0_us | 4.000 | 0.0% | - | - | - |" in heap.render(rows, ["cuda_ipc", "nvshmem"])


def test_a_failing_variant_is_reported_and_the_others_still_compared(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tried: list[str] = []

    def fake_measure(args: Any, variant: Any, scratch: Path, index: int) -> dict[str, Any]:
        tried.append(variant.label)
        if variant.env:
            raise SystemExit(f"FAIL the {variant.label} worker (trial {index}) exited 1")
        return {"metrics": {"ping_pong_us": 2.0 if variant.backend == "cuda_ipc" else 2.02}}

    monkeypatch.setattr(heap, "measure", fake_measure)
    args = heap.parse_args(["--trials", "2", "--variants", "cuda_ipc", "nvshmem:NVSHMEM_DISABLE_CUDA_VMM=1", "nvshmem"])
    assert heap.drive(args) == 1
    assert tried.count("nvshmem:NVSHMEM_DISABLE_CUDA_VMM=1") == 1  # not tried again after it failed
    printed = capsys.readouterr().out
    assert "ping_pong_us cuda_ipc_us=2.000 nvshmem_us=2.020 overhead=+1.0% (within" in printed
    assert "FAILED nvshmem:NVSHMEM_DISABLE_CUDA_VMM=1: FAIL the nvshmem:NVSHMEM_DISABLE_CUDA_VMM=1 worker" in printed

    def failing_baseline(args: Any, variant: Any, scratch: Path, index: int) -> dict[str, Any]:
        raise SystemExit(f"FAIL the {variant.label} worker (trial {index}) exited 1")

    monkeypatch.setattr(heap, "measure", failing_baseline)
    with pytest.raises(SystemExit, match="FAIL the cuda_ipc worker"):
        heap.drive(args)


def test_the_base_alignment_variable_takes_powers_of_two_from_a_page() -> None:
    assert heap.base_alignment({}) is None
    assert heap.base_alignment({heap.BASE_ALIGN_ENV: "2097152"}) == 2 << 20
    assert heap.base_alignment({heap.BASE_ALIGN_ENV: "0x200000"}) == 2 << 20
    for text in ("2048", "3145728", "2M", "-4096"):
        with pytest.raises(SystemExit, match="must be a power of two >= 4096"):
            heap.base_alignment({heap.BASE_ALIGN_ENV: text})


def test_the_context_flag_variable_takes_zero_or_one() -> None:
    assert replay.sync_memops_request({}) is None
    assert replay.sync_memops_request({replay.SYNC_MEMOPS_ENV: ""}) is None
    assert replay.sync_memops_request({replay.SYNC_MEMOPS_ENV: "0"}) is False
    assert replay.sync_memops_request({replay.SYNC_MEMOPS_ENV: "1"}) is True
    for text in ("2", "yes", "0x80"):
        with pytest.raises(SystemExit, match="must be 0 .* or 1"):
            replay.sync_memops_request({replay.SYNC_MEMOPS_ENV: text})


def test_context_flags_are_named() -> None:
    assert replay.describe_context_flags(0) == "0x0 (SCHED_AUTO)"
    assert replay.describe_context_flags(0x80) == "0x80 (SYNC_MEMOPS)"  # what NVSHMEM's init adds
    assert replay.describe_context_flags(0x84 | 0x200) == "0x284 (SCHED_BLOCKING_SYNC SYNC_MEMOPS 0x200)"


def test_split_parts_take_each_part_median_over_replays() -> None:
    # Two replays of three calls: marks are µs from the event before the replay (first node, then each call's end).
    splits = [
        replay.Split(marks=(2.0, 7.0, 11.0, 15.0), end=16.0),  # gap 2, first 5, later 4 4, tail 1
        replay.Split(marks=(4.0, 8.0, 11.0, 15.0), end=19.0),  # gap 4, first 4, later 3 4, tail 4
    ]
    parts = replay.split_parts(splits)
    assert parts == {"gap": 3.0, "first": 4.5, "later": 3.75, "tail": 2.5, "total": 17.5}
    assert list(parts) == list(replay.SPLIT_PARTS)
    with pytest.raises(ValueError, match="at least one replay"):
        replay.split_parts([])
    with pytest.raises(ValueError, match="at least two calls"):
        replay.split_parts([replay.Split(marks=(1.0, 2.0), end=3.0)])


def test_graph_description_counts_node_kinds_and_kernel_launches() -> None:
    ll = replay.GraphNode("KERNEL", "_one_shot_ll_kernel", (128, 1, 1), 128, 0)
    urgent = replay.GraphNode("KERNEL", "_one_shot_ll_kernel", (128, 1, 1), 128, 0, "priority=-1")
    text = replay.describe_graph([ll, ll, replay.GraphNode("MEMSET"), urgent], 3)
    assert text == (
        "4 nodes, 3 edges: 3 KERNEL, 1 MEMSET; 2 x _one_shot_ll_kernel grid 128x1x1 x 128 threads, 0 B shared"
        "; 1 x _one_shot_ll_kernel grid 128x1x1 x 128 threads, 0 B shared, priority=-1"
    )


def test_all_reduce_timers_are_options_of_the_all_reduce_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert heap.parse_args([]).ar_timers == []  # the bar's metric alone unless asked
    assert set(heap.MIRROR_TIMERS) <= set(heap.AR_TIMERS) and "late" in heap.AR_TIMERS
    args = heap.parse_args(["--only", "all_reduce", "replay", "--ar-timers", "probe", "graphed", "late"])
    assert args.ar_timers == ["probe", "graphed", "late"]  # in the order given
    for argv, words in (
        (["--only", "all_reduce", "--ar-timers", "probe", "probe"], "names a timer twice"),
        (["--only", "replay", "--ar-timers", "probe"], "add all_reduce to --only"),
        (["--ar-timers", "stopwatch"], "invalid choice"),
    ):
        with pytest.raises(SystemExit):
            heap.parse_args(argv)
        assert words in capsys.readouterr().err


def test_timers_run_after_the_bar_metric_or_before_it_and_late_last() -> None:
    timers = ["graphed", "late", "probe", "no_sync"]
    assert heap.timer_schedule(timers, first=False) == ((), ("graphed", "probe", "no_sync"), ("late",))
    assert heap.timer_schedule(timers, first=True) == (("graphed", "probe", "no_sync"), (), ("late",))
    assert heap.timer_schedule([], first=True) == ((), (), ())
    with pytest.raises(ValueError, match=r"unknown all-reduce timers \['stopwatch'\]"):
        heap.timer_schedule(["probe", "stopwatch"], first=False)
    assert heap.timers_first({}) is False
    assert heap.timers_first({heap.AR_TIMERS_FIRST_ENV: "0"}) is False
    assert heap.timers_first({heap.AR_TIMERS_FIRST_ENV: "1"}) is True
    for text in ("yes", "2", "first"):
        with pytest.raises(SystemExit, match="must be 0 .* or 1"):
            heap.timers_first({heap.AR_TIMERS_FIRST_ENV: text})


def test_replays_are_described_per_rank() -> None:
    assert heap.describe_replays([[4.5, 4.3, 4.4, 4.9], [4.2]]) == "4.300/4.450/4.900, 4.200/4.200/4.200"
    with pytest.raises(ValueError, match="at least one replay per rank"):
        heap.describe_replays([[4.0], []])


def test_a_worker_gets_the_timers_and_its_variant_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def fake_run(command: list[str], env: dict[str, str], **kwargs: Any) -> Any:
        seen["command"], seen["env"] = command, env
        out = Path(command[command.index("--json") + 1])
        out.write_text('{"backend": "cuda_ipc", "metrics": {"all_reduce_64KiB_by_probe_us": 4.5}, "facts": {}}')
        return argparse.Namespace(returncode=0, stdout="RESULT x\nnoise\n", stderr="")

    monkeypatch.setattr(heap.subprocess, "run", fake_run)
    args = heap.parse_args(["--only", "all_reduce", "--ar-sizes", "64", "--ar-timers", "mirror", "probe"])
    variant = heap.parse_variant(f"cuda_ipc:{heap.AR_TIMERS_FIRST_ENV}=1")
    result = heap.measure(args, variant, tmp_path, 0)
    assert result["metrics"] == {"all_reduce_64KiB_by_probe_us": 4.5}
    command = seen["command"]
    assert command[command.index("--ar-timers") :][:3] == ["--ar-timers", "mirror", "probe"]
    assert command[command.index("--backend") + 1] == "cuda_ipc"
    assert seen["env"][heap.AR_TIMERS_FIRST_ENV] == "1"
    assert "RESULT x" in capsys.readouterr().out
    args = heap.parse_args(["--only", "all_reduce"])
    heap.measure(args, heap.parse_variant("nvshmem"), tmp_path, 1)
    assert "--ar-timers" not in seen["command"] and heap.AR_TIMERS_FIRST_ENV not in seen["env"]
