"""bench/timeline_gpu.py's reading of a chrome trace, on the CPU: the GPU activities are kept (kernels, memcpys,
memsets; host events dropped) in start order, and the timeline is split into calls at the device-barrier kernels,
each call's times made relative to its barrier's end and ending at the next spin (the host-lead kernel)."""

from __future__ import annotations

import json
from pathlib import Path

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
