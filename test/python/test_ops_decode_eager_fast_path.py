"""The eager host path of all_reduce, flash_decode and gemm_ar without GPUs: a repeated call goes straight to its
launch plan, and every check that depends on the call still runs.

A call's first time with a signature (sizes, layout, alignment, device, config, world) checks its inputs, picks a
config, has the ranks agree (a collective) and launches through Triton; later calls with that signature check their
inputs (once, not once per layer) and relaunch the plan. The counts below are of those steps, on one gloo rank with
the heap on the CPU and a kernel launcher that records its arguments instead of launching, so they cannot flake.
bench/host_path_cpu.py times the same path.
"""

from __future__ import annotations

import contextlib
import importlib

import pytest
import torch
from test_runtime_world import run_ranks

import triton_dist.ops
from triton_dist import runtime as rt
from triton_dist.compiler.watchdog import set_wait_timeout
from triton_dist.ops.common import gpu
from triton_dist.ops.common import launch as launch_plan

ar = importlib.import_module("triton_dist.ops.all_reduce.op")
fd = importlib.import_module("triton_dist.ops.flash_decode.op")
gar = importlib.import_module("triton_dist.ops.gemm_ar.op")


class RecordingLauncher:
    """A compiled kernel whose launcher records the arguments of each launch (the tensors last: leading + plan's)."""

    function = "function"
    packed_metadata = "packed"

    def __init__(self) -> None:
        self.launches: list[tuple] = []

    def launch_metadata(self, *args: object) -> None:
        return None

    def run(self, *args: object) -> None:
        self.launches.append(args)


class Counts:
    """How often each named function of a module was called since the last ``take()``."""

    def __init__(self, module: object, *names: str) -> None:
        self.calls = dict.fromkeys(names, 0)
        for name in names:
            real = getattr(module, name)

            def counted(*args, _name=name, _real=real, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
                self.calls[_name] += 1
                return _real(*args, **kwargs)

            setattr(module, name, counted)

    def take(self) -> dict[str, int]:
        taken, self.calls = self.calls, dict.fromkeys(self.calls, 0)
        return taken


def _without_gpu() -> list[RecordingLauncher]:
    """Replace what needs a GPU on the eager paths (device and stream queries, compiling and launching); returns the
    list each first launch appends its recording launcher to."""
    launchers: list[RecordingLauncher] = []

    class Uncompiled:
        def __init__(self, kernel: object) -> None:
            self.arg_names = kernel.arg_names

        def __getitem__(self, grid: tuple[int, int, int]):  # noqa: ANN204
            def first(**arguments: object) -> RecordingLauncher:
                launchers.append(RecordingLauncher())
                launchers[-1].run(grid, arguments)  # the first launch, as Triton would do it
                return launchers[-1]

            return first

    def first_launch(kernel, grid, named, leading, **options):  # noqa: ANN001, ANN003, ANN202
        return launch_plan.first_launch(Uncompiled(kernel), grid, named, leading, **options)

    torch.cuda.current_device = lambda: None  # a CPU tensor's device.index: its device counts as current
    torch.cuda.is_current_stream_capturing = lambda: False
    torch.cuda.get_device_name = lambda device=None: "NVIDIA H200"
    torch.cuda.device = lambda device: contextlib.nullcontext()
    launch_plan.current_raw_stream = lambda device_index: 7
    for module in (ar, fd, gar):
        module.first_launch = first_launch
        module.gpu_world = lambda op, error: rt.current_world()  # the CPU heap stands in for a GPU world
        module.peer_world = lambda op, error: rt.current_world()
    gpu._sms[None] = 132
    return launchers


def _launched(launchers: list[RecordingLauncher]) -> list[tuple]:
    """The launches since the last look, every launcher's, and forget them."""
    found = [args for launcher in launchers for args in launcher.launches]
    for launcher in launchers:
        launcher.launches.clear()
    return found


def _raises(error: type[Exception], text: str, call) -> None:  # noqa: ANN001
    with pytest.raises(error, match=text):
        call()


def _all_reduce(launchers: list[RecordingLauncher]) -> None:
    counts = Counts(ar, "check_inputs", "select_config", "_first_call")
    builds = Counts(ar._plans, "build")
    x = torch.randn(4096, dtype=torch.bfloat16)
    triton_dist.ops.all_reduce(x)
    assert counts.take() == {"check_inputs": 1, "select_config": 1, "_first_call": 1}
    assert builds.take() == {"build": 1}, "a new signature: the checks, the config choice, the agreement"
    assert len(launchers) == 1 and len(_launched(launchers)) == 1, "and the first launch, through Triton"

    y = torch.randn(4096, dtype=torch.bfloat16)
    out = triton_dist.ops.all_reduce(y)
    assert counts.take() == {"check_inputs": 1, "select_config": 0, "_first_call": 0}
    assert builds.take() == {"build": 0}, "the same signature: the input checks once, nothing else before the launch"
    (launch,) = _launched(launchers)
    assert len(launchers) == 1, "the plan of the first call"
    assert launch[:9] == (1, 1, 1, 7, "function", "packed", None, None, None), "the heuristic's 1 program, stream 7"
    assert launch[9] is y and launch[10] is out, "this call's tensors, x and out first"

    triton_dist.ops.all_reduce(y, out=out)
    assert counts.take()["check_inputs"] == 1 and counts.calls["select_config"] == 0
    assert len(_launched(launchers)) == 1 and len(launchers) == 1, "out= of the same signature: the same plan"

    # Bad input of an agreed size raises what it always did, before any launch.
    same_size = torch.zeros(64, 64, dtype=torch.bfloat16).t()
    _raises(ValueError, "must be contiguous", lambda: triton_dist.ops.all_reduce(same_size))
    _raises(ValueError, "out must be", lambda: triton_dist.ops.all_reduce(y, out=torch.empty(4096)))
    _raises(ValueError, "out must be", lambda: triton_dist.ops.all_reduce(y, out=torch.empty(4095, dtype=y.dtype)))
    _raises(ValueError, "op must be", lambda: triton_dist.ops.all_reduce(y, "max"))
    _raises(ValueError, "triton_dist device is cpu", lambda: triton_dist.ops.all_reduce(y.to("meta")))
    assert _launched(launchers) == []

    # What the steps before the launch depend on is part of the signature: each change takes them again.
    for changed in (
        torch.randn(8192, dtype=torch.bfloat16),  # the size: another config
        torch.randn(4097, dtype=torch.bfloat16)[1:],  # 4096 elements, 2 bytes past a 16-byte boundary
        torch.randn(4096, dtype=torch.float16),  # the dtype
    ):
        triton_dist.ops.all_reduce(changed)
        assert counts.take()["select_config"] == 1, changed
    set_wait_timeout(30.0)  # the watchdog changes which configs may be chosen
    try:
        triton_dist.ops.all_reduce(y)
        assert counts.take()["select_config"] == 1, "the watchdog's state is part of the signature"
    finally:
        set_wait_timeout(None)
    forced = ar.AllReduceConfig("one_shot", 4, 4)
    ar._run(y, out, "sum", forced)
    ar._run(y, out, "sum", forced)
    assert counts.take()["_first_call"] == 1, "a forced config: its own signature, agreed once"
    _launched(launchers)

    triton_dist.ops.all_reduce(torch.empty(0, dtype=torch.bfloat16))
    triton_dist.ops.all_reduce(torch.empty(0, dtype=torch.bfloat16))
    assert counts.take()["_first_call"] == 1 and _launched(launchers) == [], "empty: agreed once, no launch"


def _flash_decode(launchers: list[RecordingLauncher]) -> None:
    counts = Counts(fd, "check_inputs", "check_out", "_new_plan")
    builds = Counts(fd._plans, "build")
    q = torch.randn(1, 8, 128, dtype=torch.bfloat16)
    k = torch.randn(1, 2, 256, 128, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lengths = torch.full((1,), 256, dtype=torch.int32)
    first_plans = len(launchers)
    triton_dist.ops.flash_decode(q, k, v, lengths)
    assert counts.take() == {"check_inputs": 1, "check_out": 1, "_new_plan": 1}  # launch_args checks out
    assert builds.take() == {"build": 1}
    assert len(launchers) == first_plans + 1 and len(_launched(launchers)) == 1

    out = triton_dist.ops.flash_decode(q, k, v, lengths)
    assert counts.take() == {"check_inputs": 1, "check_out": 0, "_new_plan": 0}  # out is new, like q
    assert builds.take() == {"build": 0}, "the same signature: the input checks once, nothing else before the launch"
    (launch,) = _launched(launchers)
    assert len(launchers) == first_plans + 1
    assert all(got is want for got, want in zip(launch[9:14], (q, k, v, lengths, out), strict=True))

    fd._run(q, k, v, lengths, torch.empty_like(q), None)
    assert counts.take()["check_out"] == 1 and counts.calls["_new_plan"] == 0, "an explicit out is checked"
    _raises(ValueError, "out must be like q", lambda: fd._run(q, k, v, lengths, torch.empty(1, 8, 128), None))
    _raises(ValueError, "lengths must be an int32", lambda: triton_dist.ops.flash_decode(q, k, v, lengths.long()))
    _raises(TypeError, "scale must be a float", lambda: triton_dist.ops.flash_decode(q, k, v, lengths, scale=True))
    _raises(ValueError, "scale must be finite", lambda: triton_dist.ops.flash_decode(q, k, v, lengths, scale=1e999))
    assert len(_launched(launchers)) == 1, "only the good explicit-out call launched"

    triton_dist.ops.flash_decode(q, k, v, lengths, scale=0.5)  # the scale is part of the signature
    triton_dist.ops.flash_decode(q, k[:, :, :128], v[:, :, :128], lengths)  # so are the cache's length, strides
    assert counts.take()["_new_plan"] == 2 and len(_launched(launchers)) == 2


def _gemm_ar(launchers: list[RecordingLauncher]) -> None:
    counts = Counts(gar, "check_inputs", "default_config", "_first_call")
    builds = Counts(gar._plans, "build")
    a = torch.randn(4, 256, dtype=torch.bfloat16)
    b = torch.randn(256, 128, dtype=torch.bfloat16)
    first_plans = len(launchers)
    triton_dist.ops.gemm_ar(a, b)
    assert counts.take() == {"check_inputs": 1, "default_config": 1, "_first_call": 1}
    assert builds.take() == {"build": 1}
    assert len(launchers) == first_plans + 1 and len(_launched(launchers)) == 1

    out = triton_dist.ops.gemm_ar(a, b)
    assert counts.take() == {"check_inputs": 1, "default_config": 0, "_first_call": 0}
    assert builds.take() == {"build": 0}, "the same signature: the input checks once, nothing else before the launch"
    (launch,) = _launched(launchers)
    assert len(launchers) == first_plans + 1 and launch[9] is a and launch[10] is b and launch[11] is out

    _raises(ValueError, "out must be a row-major", lambda: gar._run(a, b, torch.empty(4, 128)))
    _raises(ValueError, "must equal", lambda: triton_dist.ops.gemm_ar(a, b[:128]))
    _raises(TypeError, "same dtype", lambda: triton_dist.ops.gemm_ar(a, b.half()))
    assert _launched(launchers) == []
    triton_dist.ops.gemm_ar(a[:, :128], b[:128])  # another K: another signature
    assert counts.take()["_first_call"] == 1


def _eager_paths(rank: int, world_size: int) -> None:
    del rank, world_size  # one rank
    launchers = _without_gpu()
    rt.init(heap_size="128M", device="cpu")
    _all_reduce(launchers)
    _flash_decode(launchers)
    _gemm_ar(launchers)

    # A new world: no plan of the old one is used (its workspaces are gone).
    plans = len(launchers)
    x = torch.randn(4096, dtype=torch.bfloat16)
    triton_dist.ops.all_reduce(x)
    assert len(launchers) == plans, "an earlier signature of this world"
    rt.finalize()
    rt.init(heap_size="128M", device="cpu")
    triton_dist.ops.all_reduce(x)
    assert len(launchers) == plans + 1, "the same signature in a new world launches through Triton again"
    rt.finalize()


def test_repeated_calls_skip_to_the_launch_and_still_check_their_inputs():
    run_ranks(_eager_paths, 1)
