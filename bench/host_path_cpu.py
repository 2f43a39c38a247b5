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

The overlap ops (``ag_gemm`` and ``gemm_rs``, issue 24) are timed on their GPU paths: plans for two ranks are built
by hand the way their builders build them (launch plans with the launcher that does nothing, every copy's address,
the side stream, ``StreamOps`` on a driver whose calls return success at once) and stored in the op's plan cache
under the call's signature, so a call runs the whole eager path from the public function to the last launch. Their
operands are tiny (``torch.mm`` on the CPU stands in for cuBLAS's host path); ``--only overlap`` times only them.
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
from types import SimpleNamespace
from typing import Any

import torch
import torch.distributed as dist
from triton.tools.tensor_descriptor import TensorDescriptor

import triton_dist.ops
from triton_dist import runtime as rt
from triton_dist.ops.common import gpu
from triton_dist.ops.common import launch as launch_plan
from triton_dist.ops.common import stream_ops as stream_ops_module
from triton_dist.ops.common.dispatch import operand_signature

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
    for module in list(sys.modules.values()):  # every op module's import of gpu_world (all_reduce.nodes too)
        if getattr(module, "__name__", "").startswith("triton_dist.ops.") and hasattr(module, "gpu_world"):
            module.gpu_world = lambda name, error: rt.current_world()  # the heap on the CPU stands in for a GPU's
    gpu._sms[None] = 132  # an H200's SMs: the split count


class _DriverThatDoesNothing:
    """The cuda-bindings driver calls ``StreamOps`` makes, each returning success at once (a result tuple, as the
    real ones)."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_NOT_READY = 600

    class CUevent_flags:  # noqa: N801 (cuda-bindings' name)
        CU_EVENT_DISABLE_TIMING = 2

    @staticmethod
    def cuMemcpyDtoDAsync(destination: int, source: int, nbytes: int, stream: int) -> tuple[int]:  # noqa: N802
        return (0,)

    @staticmethod
    def cuEventRecord(event: Any, stream: int) -> tuple[int]:  # noqa: N802
        return (0,)

    @staticmethod
    def cuStreamWaitEvent(stream: int, event: Any, flags: int) -> tuple[int]:  # noqa: N802
        return (0,)

    @staticmethod
    def cuEventCreate(flags: int) -> tuple[int, object]:  # noqa: N802
        return (0, object())

    @staticmethod
    def cuStreamQuery(stream: int) -> tuple[int]:  # noqa: N802
        return (0,)

    @staticmethod
    def cuStreamWriteValue32(stream: int, address: int, value: int, flags: int) -> tuple[int]:  # noqa: N802
        return (0,)

    @staticmethod
    def cuStreamWaitValue32(stream: int, address: int, value: int, flags: int) -> tuple[int]:  # noqa: N802
        return (0,)


OVERLAP_WORLD = 2
"""The world size the overlap ops' plans are built for (bench/sweep.py's), in this one process."""


def _launch(arguments: int) -> launch_plan.LaunchPlan:
    """A launch plan of a kernel with ``arguments`` fixed arguments, on the launcher that does nothing."""
    return launch_plan.LaunchPlan(rt.current_world(), _LauncherThatDoesNothing(), (1, 1, 1), (0,) * arguments)


def _store(op: Any, a: torch.Tensor, b: torch.Tensor, plan: Any, *options: Any) -> None:
    """Put ``plan`` in ``op``'s plan cache under the signature of a call with ``a``, ``b`` and ``options``."""
    signature = operand_signature(a, b, *options)
    op._plans.get(signature)  # binds the cache to the current world
    op._plans._plans[signature] = plan


def overlap_calls() -> dict[str, Callable[[], object]]:
    """One eager call of each GPU path of ``ag_gemm`` and ``gemm_rs`` on two ranks' plans (fp32, tiny operands:
    the CPU computes a tiny fp32 product in about the time torch's dispatch takes),
    and ``torch.mm`` alone for scale."""
    ag = importlib.import_module("triton_dist.ops.ag_gemm.op")
    rs = importlib.import_module("triton_dist.ops.gemm_rs.op")
    from triton_dist.ops.tuning import OverlapConfig

    w, k, n, dtype = OVERLAP_WORLD, 16, 16, torch.float32
    ag.current_raw_stream = rs.current_raw_stream = launch_plan.current_raw_stream  # stub_the_gpu's
    stream_ops_module._driver = lambda: _DriverThatDoesNothing
    ops = stream_ops_module.StreamOps(torch.device("cpu"))
    side = SimpleNamespace(cuda_stream=0)
    b = torch.randn(k, n, dtype=dtype)
    calls: dict[str, Callable[[], object]] = {}

    def ag_workspace(m_local: int) -> Any:
        recv, flags = torch.empty(w * m_local, k, dtype=dtype), torch.zeros(1024, dtype=torch.int32)
        peer_recv, peer_flags = {1: torch.empty_like(recv)}, {1: torch.zeros_like(flags)}
        return ag.Workspace(recv, flags, torch.zeros(1, dtype=torch.int32), torch.zeros(w, dtype=torch.int32),
                            peer_recv, peer_flags)  # fmt: skip

    for chunks, use_tma in ((4, False), (4, True)):
        m_local = 16 if use_tma else 8  # a shape per plan: the signatures differ
        a = torch.randn(m_local, k, dtype=dtype)
        ws = ag_workspace(m_local)
        copies, _ = ag._producer_copies(ws.peer_recv, ws.peer_flags, a, 0, w, m_local // chunks, False)
        block = [64, 64]
        plan = ag.FusedPlan(
            config=OverlapConfig(), workspace=ws, rows=w * m_local, n=n, begin=_launch(2), gemm=_launch(16),
            use_tma=use_tma, a_block=block, b_block=block, c_block=block,
            recv_desc=TensorDescriptor.from_tensor(ws.recv, block) if use_tma else None, push=None, copies=copies,
            side=side, stream_ops=ops, no_comm=False, flag_count=w * chunks, first_copies=w - 1,
        )  # fmt: skip
        _store(ag, a, b, plan, None, False)
        name = f"ag_gemm fused{' TMA' if use_tma else ''}, {chunks} chunks"
        calls[name] = lambda a=a: triton_dist.ops.ag_gemm(a, b)

    m_local = 4
    a_cublas = torch.randn(m_local, k, dtype=dtype)
    ws = ag_workspace(m_local)
    copies, _ = ag._producer_copies(ws.peer_recv, ws.peer_flags, a_cublas, 0, w, m_local, False)
    waits = tuple((s, _launch(3), ws.recv[s * m_local : (s + 1) * m_local]) for s in range(1, w))
    cublas = ag.CublasPlan(
        workspace=ws, rank=0, m_local=m_local, rows=w * m_local, n=n, begin=_launch(2), waits=waits,
        copies=copies, side=side, stream_ops=ops,
    )  # fmt: skip
    _store(ag, a_cublas, b, cublas, None, False)
    calls["ag_gemm cuBLAS path, begin barrier (captured calls)"] = lambda: triton_dist.ops.ag_gemm(a_cublas, b)
    c_cublas = torch.empty(w * m_local, n, dtype=dtype)
    calls["ag_gemm cuBLAS path, begin barrier, out="] = lambda: triton_dist.ops.ag_gemm(a_cublas, b, out=c_cublas)
    # The eager calls' default: double buffers, one row count per flag scheme (the signatures differ); the parity
    # scheme once more with its waits on a waiter stream (CUBLAS_WAIT_BESIDE: one more fork, an order per chunk).
    doubles = ((5, "kernels", False), (6, "memops", False), (7, "memop_write", False), (9, "memop_parity", False),
               (10, "memop_parity", True))  # fmt: skip
    for m_double, scheme, beside in doubles:
        a_double = torch.randn(m_double, k, dtype=dtype)
        ws_double = ag_workspace(m_double)
        recv = torch.empty(2, w * m_double, k, dtype=dtype)
        flags = torch.zeros(2, w * ag.MAX_CUBLAS_CHUNKS, dtype=torch.int32)
        row = (0, 1) if scheme == "memop_parity" else (0, 0)  # the flags of buffer p: row p, else row 0
        epochs = torch.ones(1, dtype=torch.int32), torch.ones(1, dtype=torch.int32)
        peers = {1: torch.empty_like(recv)}, {1: torch.zeros_like(flags)}
        double = ag.DoubleBuffer(recv, flags, *epochs, *peers, flags_by=scheme)
        per_buffer = [
            ag._producer_copies(
                {1: double.peer_recv[1][parity]}, {1: double.peer_flags[1][row[parity]]}, a_double, 0, w, m_double,
                False,
            )[0]
            for parity in (0, 1)
        ]  # fmt: skip
        rows = [slice(s * m_double, (s + 1) * m_double) for s in range(w)]
        wait = None if scheme == "memops" else _launch({"kernels": 3, "memop_write": 2, "memop_parity": 1}[scheme])
        double_waits = tuple((s, s, wait, (recv[0][rows[s]], recv[1][rows[s]])) for s in range(1, w))
        plan = ag.CublasPlan(
            workspace=ws_double, rank=0, m_local=m_double, rows=w * m_double, n=n, begin=_launch(2), waits=(),
            copies=(), side=side, stream_ops=ops, wait_beside=beside, waiter=side, double=double,
            double_waits=double_waits, double_copies=(per_buffer[0], per_buffer[1]), advance=_launch(1),
        )  # fmt: skip
        _store(ag, a_double, b, plan, None, False)
        label = f"ag_gemm cuBLAS path, double buffers, {scheme} flags{', waits beside' if beside else ''}"
        calls[label] = lambda a=a_double: triton_dist.ops.ag_gemm(a, b)

    for producer in ("direct", "ce"):
        shard = 8 if producer == "direct" else 12
        a_rs = torch.randn(w * shard, k, dtype=dtype)
        rs_ws = rs.CublasWorkspace(
            recv=torch.empty(w - 1, shard, n, dtype=dtype), flags=torch.zeros(w, dtype=torch.int32),
            ack=torch.zeros(w, dtype=torch.int32), epoch=torch.zeros(1, dtype=torch.int32),
            send=torch.empty(w - 1, shard, n, dtype=dtype), own=torch.empty(shard, n, dtype=dtype),
            peer_recv={1: torch.empty(w - 1, shard, n, dtype=dtype)},
        )  # fmt: skip
        merged = producer == "direct"
        slot = rs_ws.peer_recv[1][0]
        copy = (slot.data_ptr(), rs_ws.send[0].data_ptr(), slot.numel() * slot.element_size())
        destination = slot if merged else rs_ws.send[0]
        sends = (rs._Send(1, destination, _launch(4), None if merged else _launch(4), copy, slot),)
        rs_plan = rs.CublasPlan(
            rs_ws, 0, w, shard, n, producer, _launch(2), sends, None if merged else _launch(2), _launch(5),
            side, ops,
        )  # fmt: skip
        _store(rs, a_rs, b, rs_plan, None, False)
        calls[f"gemm_rs cuBLAS path, {producer}"] = lambda a=a_rs: triton_dist.ops.gemm_rs(a, b)
    rs_out = torch.empty(shard, n, dtype=dtype)
    calls["gemm_rs cuBLAS path, ce, out="] = lambda: triton_dist.ops.gemm_rs(a_rs, b, out=rs_out)

    out = torch.empty(m_local, n, dtype=dtype)
    calls["torch.mm(4 x 16 @ 16 x 16, out=) alone"] = lambda: torch.mm(a_cublas, b, out=out)
    return calls


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


def _repeat(call: Callable[[], object], calls: int) -> None:
    """``calls`` calls, each result dropped before the next call (as a loop of eager calls drops its outputs)."""
    for _ in range(calls):
        call()


def us_per_call(call: Callable[[], object], calls: int, repeats: int, clock: Callable[[], int]) -> float:
    for _ in range(3):
        call()
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(calls):
            call()
        best = min(best, (clock() - start) / calls / 1000.0)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per timed repeat")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per op (the minimum is reported)")
    parser.add_argument("--profile", default="", help="an op name prefix, e.g. all_reduce: print cProfile's lines")
    parser.add_argument("--only", choices=("all", "decode", "overlap"), default="all", help="which ops to time")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: this thread's CPU time (steadier than wall time on a machine other processes share)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as directory:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(directory, 'store')}", rank=0, world_size=1)
        try:
            rt.init(heap_size="256M", device="cpu")
            stub_the_gpu()
            calls = decode_calls() if args.only in ("all", "decode") else {}
            if args.only in ("all", "overlap"):
                calls.update(overlap_calls())
            clock = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
            print(
                f"µs per eager call ({args.clock} time), host only (launch stubbed), min of {args.repeats} x "
                f"{args.calls} calls:"
            )
            width = max(map(len, calls), default=0)
            for name, call in calls.items():
                print(f"  {name:{width}s} {us_per_call(call, args.calls, args.repeats, clock):7.2f}")
            for name, call in calls.items():
                if args.profile and name.startswith(args.profile):
                    profile = cProfile.Profile()
                    profile.runcall(_repeat, call, args.calls)
                    print(f"\ncProfile, {args.calls} calls of {name}:")
                    pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(20)
            rt.finalize()
        finally:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
