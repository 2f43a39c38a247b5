"""Host time of one eager call of the decode ops, measured on the CPU with the kernel launch stubbed out.

    PYTHONPATH=python python3 bench/host_path_cpu.py [--calls 20000] [--profile all_reduce]

An eager decode op's time is mostly the host's: on 2 x H200 ``all_reduce`` took 32-37 µs eager against 6-9 µs
graphed at <= 1 MiB (bench/results/all_reduce.md). This times the Python part of that path without a GPU: one gloo
rank, the symmetric heap on the CPU, every compiled kernel replaced by one whose launcher does nothing, and CUDA's
device, stream and capture queries replaced by constants. It leaves out what only a GPU has: Triton's C launcher
(argument packing, ``cuLaunchKernel``), the stream query, and torch's CUDA caching allocator (``empty_like`` here
allocates host memory); the eager timings of the GPU benchmarks include them.

Per op: the minimum over ``--repeats`` of the mean time of ``--calls`` back-to-back calls, after warm-up calls (the
first call of a shape runs the ranks' agreement and the first launch). ``--profile OP`` adds cProfile's top lines
for OP (its overhead inflates every line; use it for where the time goes, not how much there is).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

import triton_dist.ops
from triton_dist import runtime as rt
from triton_dist.ops.common import gpu
from triton_dist.ops.common import launch as launch_plan

OPS_WITH_PLANS = ("all_reduce", "flash_decode", "gemm_ar")
"""The ops that launch through a ``LaunchPlan`` (their ``op`` modules' ``first_launch`` is stubbed)."""


class _LauncherThatDoesNothing:
    """Stands in for a compiled kernel: the attributes ``LaunchPlan.launch`` reads, and a launcher that returns."""

    function = 0
    packed_metadata = 0

    def launch_metadata(self, *args: Any) -> None:
        return None

    def run(self, *args: Any) -> None:
        return None


class _Uncompiled:
    """A ``@triton.jit`` kernel whose ``kernel[grid](...)`` returns ``_LauncherThatDoesNothing`` (no compilation)."""

    def __init__(self, kernel: Any) -> None:
        self.arg_names = kernel.arg_names

    def __getitem__(self, grid: tuple[int, int, int]) -> Callable[..., _LauncherThatDoesNothing]:
        return lambda **arguments: _LauncherThatDoesNothing()


def _first_launch_without_gpu(kernel: Any, grid: tuple[int, int, int], named: Any, leading: int, **options: Any):
    """``launch_plan.first_launch`` itself (the argument order, the plan), on a kernel that launches nothing."""
    return launch_plan.first_launch(_Uncompiled(kernel), grid, named, leading, **options)


def stub_the_gpu() -> None:
    """Replace, for this process, what needs a GPU on the ops' eager paths by constants and no-ops."""
    torch.cuda.current_device = lambda: None  # a CPU tensor's device.index: the ops see the right device current
    torch.cuda.is_current_stream_capturing = lambda: False
    torch.cuda.get_device_name = lambda device=None: "NVIDIA H200"  # all_reduce: the committed table's GPU
    torch.cuda.device = lambda device: contextlib.nullcontext()
    launch_plan.current_raw_stream = lambda device_index: 0
    for name in OPS_WITH_PLANS:
        op = importlib.import_module(f"triton_dist.ops.{name}.op")
        op.first_launch = _first_launch_without_gpu
        op.gpu_world = lambda name, error: rt.current_world()  # the heap on the CPU stands in for a GPU's
    gpu._sms[None] = 132  # an H200's SMs: the split count


def decode_calls() -> dict[str, Callable[[], object]]:
    """One eager call per op at a decode size (bf16), and ``torch.empty_like`` alone for scale."""
    x_small = torch.randn(4096, dtype=torch.bfloat16)  # 8 KiB
    x_large = torch.randn(1 << 19, dtype=torch.bfloat16)  # 1 MiB
    out = torch.empty_like(x_small)
    q = torch.randn(1, 64, 128, dtype=torch.bfloat16)  # batch 1, GQA 64 / 8
    k = torch.randn(1, 8, 1024, 128, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lengths = torch.full((1,), 1024, dtype=torch.int32)
    a = torch.randn(1, 4096, dtype=torch.bfloat16)
    b = torch.randn(4096, 1024, dtype=torch.bfloat16)
    return {
        "all_reduce 8 KiB": lambda: triton_dist.ops.all_reduce(x_small),
        "all_reduce 1 MiB": lambda: triton_dist.ops.all_reduce(x_large),
        "all_reduce 8 KiB, out=": lambda: triton_dist.ops.all_reduce(x_small, out=out),
        "flash_decode batch 1, 64/8 heads": lambda: triton_dist.ops.flash_decode(q, k, v, lengths),
        "gemm_ar 1 x 4096 @ 4096 x 1024": lambda: triton_dist.ops.gemm_ar(a, b),
        "torch.empty_like(8 KiB) alone": lambda: torch.empty_like(x_small),
    }


def us_per_call(call: Callable[[], object], calls: int, repeats: int) -> float:
    for _ in range(3):
        call()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter_ns() - start) / calls / 1000.0)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per timed repeat")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per op (the minimum is reported)")
    parser.add_argument("--profile", default="", help="an op name prefix, e.g. all_reduce: print cProfile's lines")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as directory:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(directory, 'store')}", rank=0, world_size=1)
        try:
            rt.init(heap_size="256M", device="cpu")
            stub_the_gpu()
            calls = decode_calls()
            print(f"µs per eager call, host only (launch stubbed), min of {args.repeats} x {args.calls} calls:")
            for name, call in calls.items():
                print(f"  {name:36s} {us_per_call(call, args.calls, args.repeats):7.2f}")
            for name, call in calls.items():
                if args.profile and name.startswith(args.profile):
                    profile = cProfile.Profile()
                    profile.runcall(lambda call=call: [call() for _ in range(args.calls)])
                    print(f"\ncProfile, {args.calls} calls of {name}:")
                    pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(20)
            rt.finalize()
        finally:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
