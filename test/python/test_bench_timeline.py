"""bench/timeline_gpu.py's reading of a chrome trace, on the CPU: the GPU activities are kept (kernels, memcpys,
memsets; host events dropped) in start order, and the timeline is split into calls at the device-barrier kernels,
each call's times made relative to its barrier's end and ending at the next spin (the host-lead kernel)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from bench_scripts import load_bench


def _event(name: str, cat: str, ts: float, dur: float, stream: int = 7) -> dict:
    return {"name": name, "cat": cat, "ts": ts, "dur": dur, "args": {"stream": stream}}


def test_the_timeline_splits_into_calls_at_the_barriers(tmp_path: Path) -> None:
    timeline = load_bench("timeline_gpu.py")
    trace = {
        "traceEvents": [
            _event("cudaLaunchKernel", "cuda_runtime", 0.0, 5.0),  # host side: dropped
            _event("at::spin_kernel", "kernel", 100.0, 1000.0),
            _event("_barrier_kernel", "kernel", 1100.0, 4.0),
            _event("Memcpy PtoP (Device -> Device)", "gpu_memcpy", 1112.0, 14.0, stream=9),
            _event("_begin_kernel", "kernel", 1105.0, 4.0),
            _event("nvjet_gemm", "kernel", 1110.0, 20.0),
            _event("at::spin_kernel", "kernel", 2000.0, 1000.0),
            _event("_barrier_kernel", "kernel", 3000.0, 2.0),
            _event("nvjet_gemm", "kernel", 3003.0, 30.0),
        ]
    }
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    events = timeline.gpu_events(str(path))
    assert [e["name"] for e in events][:3] == ["at::spin_kernel", "_barrier_kernel", "_begin_kernel"]
    assert all(e["name"] != "cudaLaunchKernel" for e in events)
    calls = timeline.calls_after_barriers(events)
    assert [[e["name"] for e in call] for call in calls] == [
        ["_begin_kernel", "nvjet_gemm", "Memcpy PtoP (Device -> Device)"],
        ["nvjet_gemm"],
    ]
    first, second = calls
    assert (first[0]["start"], first[0]["end"]) == (1.0, 5.0), "relative to the barrier's end (1104)"
    assert (first[2]["start"], first[2]["end"], first[2]["stream"]) == (8.0, 22.0, 9)
    assert (second[0]["start"], second[0]["end"]) == (1.0, 31.0)
    text = timeline.describe("ag 1,2,3 ours", first, [26.0, 31.0])
    assert "median span 28.5" in text and "_begin_kernel" in text


def _host(name: str, cat: str, ts: float, dur: float, correlation: int | None = None, tid: int = 1) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "tid": tid, "args": {"correlation": correlation}}


def _gpu(name: str, cat: str, ts: float, dur: float, correlation: int, stream: int = 7) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "tid": stream,
            "args": {"correlation": correlation, "stream": stream}}  # fmt: skip


def test_a_from_idle_call_merges_its_host_and_gpu_events_and_splits(tmp_path: Path) -> None:
    """``--from-idle``: per marked call, the host ops and API calls of its thread inside the mark and the GPU
    activities they launched (by correlation id), relative to the first host op; the barrier before the call, a
    watchdog thread's API call and an unrelated annotation are left out."""
    timeline = load_bench("timeline_gpu.py")
    mark = timeline.CALL_MARK
    trace = {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "ts": 0.0, "args": {"name": "python3"}},
            _host("c10d::barrier", "cpu_op", 10.0, 40.0),  # before the call: not its own
            _host("cudaLaunchKernel", "cuda_runtime", 12.0, 3.0, correlation=1),
            _gpu("ncclDevKernel_AllReduce", "kernel", 20.0, 10.0, correlation=1),
            _host(mark, "user_annotation", 100.0, 50.0),
            _host("other annotation", "user_annotation", 100.5, 1.0),
            _host("cudaEventRecord", "cuda_runtime", 101.0, 2.0, correlation=10),
            _host("cuLaunchKernelEx", "cuda_driver", 104.0, 4.0, correlation=12),
            _host("aten::mm", "cpu_op", 110.0, 20.0),
            _host("cudaLaunchKernel", "cuda_runtime", 115.0, 5.0, correlation=11),
            _host("cudaEventQuery", "cuda_runtime", 120.0, 1.0, correlation=15, tid=2),  # the watchdog's thread
            _host("cuMemcpyDtoDAsync", "cuda_driver", 122.0, 3.0, correlation=13),
            _gpu("_begin_kernel", "kernel", 130.0, 20.0, correlation=12),
            _host("cudaEventRecord", "cuda_runtime", 140.0, 2.0, correlation=14),
            _gpu("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 150.0, 20.0, correlation=13, stream=9),
            _gpu("nvjet_gemm", "kernel", 160.0, 60.0, correlation=11),
            _host(mark, "user_annotation", 1000.0, 10.0),
            _host("cudaLaunchKernel", "cuda_runtime", 1001.0, 1.0, correlation=20),
            _gpu("nvjet_gemm", "kernel", 1005.0, 5.0, correlation=20),
            _host(mark, "user_annotation", 2000.0, 10.0),
            _host("cudaLaunchKernel", "cuda_runtime", 2002.0, 1.0, correlation=30),
            _gpu("nvjet_gemm", "kernel", 2100.0, 102.0, correlation=30),
        ]
    }
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    calls = timeline.idle_calls(timeline.host_and_gpu_events(str(path)))
    assert len(calls) == 3
    first = calls[0]
    assert [(e["kind"], e["name"], e["start"]) for e in first.events] == [
        ("api", "cudaEventRecord", 0.0),
        ("api", "cuLaunchKernelEx", 3.0),
        ("op", "aten::mm", 9.0),
        ("api", "cudaLaunchKernel", 14.0),
        ("api", "cuMemcpyDtoDAsync", 21.0),
        ("gpu", "_begin_kernel", 29.0),
        ("api", "cudaEventRecord", 39.0),
        ("gpu", "Memcpy DtoD (Device -> Device)", 49.0),
        ("gpu", "nvjet_gemm", 59.0),
    ]
    gemm = first.events[-1]
    assert (gemm["end"], gemm["stream"], gemm["launched"]) == (119.0, 7, 14.0)
    assert first.events[-2]["stream"] == 9
    assert (first.span, first.enqueue, first.in_api, first.tail) == (119.0, 41.0, 16.0, 78.0)
    assert (first.first_gpu, first.begin) == (29.0, 20.0)
    assert (calls[1].span, calls[1].enqueue, calls[1].tail, calls[1].first_gpu) == (9.0, 1.0, 8.0, 4.0)
    assert math.isnan(calls[1].begin), "no begin kernel in that call"
    assert calls[2].span == 200.0

    offsets = timeline.barrier_offsets_us([[1_000, 5_000, 9_000], [3_000, 4_000, 9_500]], 0)
    assert offsets == [-2.0, 1.0, -0.5]
    assert timeline.barrier_offsets_us([[1_000, 5_000, 9_000], [3_000, 4_000, 9_500]], 1) == [2.0, -1.0, 0.5]
    with pytest.raises(ValueError, match="different numbers of calls"):
        timeline.barrier_offsets_us([[1], [1, 2]], 0)
    with pytest.raises(ValueError, match="2\\+ ranks"):
        timeline.barrier_offsets_us([[1]], 0)

    text = timeline.describe_idle("ag 1024,6144,4096 ours", 0, calls, offsets, [120.0, 8.0, 190.0])
    assert "[rank 0]: median span 119.0 µs over 3 calls (min 9.0, max 200.0)" in text
    assert (
        "call 0 (µs after its first host op): span 119.0, enqueue (first to last API call) 41.0 (in API calls 16.0)"
        in text
    )
    assert "last API call to GPU end 78.0, first GPU start 29.0, begin kernel 20.0" in text
    assert "left dist.barrier -2.0 after the other ranks, events 120.0" in text
    assert "left dist.barrier median -0.5" in text
    assert (
        "medians over the calls: enqueue 1.0, last API call to GPU end 78.0, first GPU start 29.0, begin kernel 20.0"
        in text
    )
    assert "nvjet_gemm  (its API call at 14.0)" in text
    assert "cudaEventQuery" not in text and "ncclDevKernel" not in text and "c10d::barrier" not in text
    with pytest.raises(ValueError, match="3 calls but 2 offsets"):
        timeline.describe_idle("x", 0, calls, offsets[:2], [1.0, 2.0, 3.0])


def test_the_script_refuses_to_run_without_two_gpu_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside torchrun (or with one rank) and without a GPU, the script stops before starting a world, saying why;
    a malformed row is named."""
    timeline = load_bench("timeline_gpu.py")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(SystemExit, match="needs 2\\+ ranks.*torchrun --nproc-per-node=2"):
        timeline.main(["--from-idle"])
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.raises(SystemExit, match="WORLD_SIZE=1"):
        timeline.main([])
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(timeline.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="no GPU is visible on rank 0"):
        timeline.main(["--from-idle"])
    with pytest.raises(SystemExit, match="expected op:M,N,K"):
        timeline.build_row("ag:1024,6144", 2, timeline.torch.device("cpu"), timeline.torch.bfloat16)
    with pytest.raises(SystemExit, match="op must be ag or rs"):
        timeline.build_row("mm:1024,6144,4096", 2, timeline.torch.device("cpu"), timeline.torch.bfloat16)


def test_a_row_times_its_cublas_plan_as_its_eager_calls_run_then_the_unfused_path() -> None:
    timeline = load_bench("timeline_gpu.py")
    want = timeline.torch.empty(1)
    plain = timeline.Row("rs", "1,2,3", "fused", lambda: want, lambda: None, want, None)
    assert [(label, settings) for label, _, settings in plain.runs()] == [
        ("rs 1,2,3 ours (fused)", None),
        ("rs 1,2,3 unfused", None),
    ]
    cublas = timeline.Row("ag", "1,2,3", "cublas", lambda: want, lambda: None, want, object())
    assert [(label, settings) for label, _, settings in cublas.runs()] == [
        ("ag 1,2,3 ours (cublas, begin_on_side=False)", {"begin_on_side": False}),
        ("ag 1,2,3 ours (cublas, begin_on_side=True)", {"begin_on_side": True}),
        ("ag 1,2,3 unfused", None),
    ]
    # Eager calls on double buffers run no begin kernel: one run of ours per wait_beside setting asked for (the
    # waits on the current stream alone by default), named with its flag scheme.
    plan = SimpleNamespace(double=SimpleNamespace(flags_by="kernels"))
    double = timeline.Row("ag", "1,2,3", "cublas", lambda: want, lambda: None, want, plan)
    assert [(label, settings) for label, _, settings in double.runs()] == [
        ("ag 1,2,3 ours (cublas, double buffers, kernels flags)", {"begin_on_side": False, "wait_beside": False}),
        ("ag 1,2,3 unfused", None),
    ]
    both = timeline.Row("ag", "1,2,3", "cublas", lambda: want, lambda: None, want, plan, timeline.WAIT_BESIDE["both"])
    assert [(label, settings) for label, _, settings in both.runs()] == [
        ("ag 1,2,3 ours (cublas, double buffers, kernels flags)", {"begin_on_side": False, "wait_beside": False}),
        (
            "ag 1,2,3 ours (cublas, double buffers, kernels flags, waits beside)",
            {"begin_on_side": False, "wait_beside": True},
        ),
        ("ag 1,2,3 unfused", None),
    ]
    assert timeline.WAIT_BESIDE == {"off": (False,), "on": (True,), "both": (False, True)}
