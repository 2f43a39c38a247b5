"""Host µs per eager call of ag_gemm and gemm_rs on GPUs, beside the unfused path, and where it goes (cProfile).

    torchrun --nproc-per-node=2 bench/host_path_gpu.py [--calls 30]

The rows are sweep rows whose from-idle timing fell below 0.95x on 2 x H200 (bench/results/sweep_2xH200.md), M <=
4096: there the GPU cannot finish before the host has enqueued the last GEMM, so host time is latency. Per row:
the path ours runs, the host µs per call of ours (allocating its output), of ours with ``out=`` (an output allocated
once, as bench/sweep.py's ours and baseline) and of the unfused path as a user writes it (output allocated per
call), all while the GPU is busy (``triton_dist.testing.timing.host_us``, the sweep's measure), then cProfile of
``--calls`` calls of ours enqueued behind a sleep kernel on rank 0, top lines by own time: what is left of the host
path (the torch calls, Triton's launcher, the driver calls through cuda-bindings, our Python). bench/host_path_cpu.py
times the Python part alone without a GPU.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib
import io
import pstats
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_on_rank0_and_finish  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import ag_gemm, gemm_rs  # noqa: E402
from triton_dist.testing import setup_distributed  # noqa: E402
from triton_dist.testing.timing import host_us  # noqa: E402

AG_ROWS = {"Llama-3-8B qkv": (1024, 6144, 4096), "Qwen2.5-7B gate_up": (1024, 37888, 3584),
           "Llama-3-70B qkv": (2048, 10240, 8192)}  # fmt: skip
"""AllGather + GEMM rows, M,N,K (A_r [M/W, K], B_r [K, N/W])."""
RS_ROWS = {"Llama-3-8B o": (1024, 4096, 4096), "Llama-3-8B down": (1024, 4096, 14336),
           "Llama-3-70B o": (2048, 8192, 8192)}  # fmt: skip
"""GEMM + reduce-scatter rows, M,N,K (A_r [M, K/W], B_r [K/W, N])."""


def profile_lines(fn: Callable[[], object], calls: int, top: int) -> str:
    """cProfile of ``calls`` calls of ``fn`` enqueued behind a sleep kernel (every rank runs them: the ops wait for
    their peers on the GPU), the ``top`` lines by own time, per call."""
    rt.synchronize()
    dist.barrier()
    torch.cuda._sleep(100_000_000)  # ~50 ms: the calls are enqueued, none waits for the GPU
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        fn()
    profile.disable()
    rt.synchronize()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="calls profiled per row (behind one sleep kernel)")
    parser.add_argument("--top", type=int, default=18, help="cProfile lines per row")
    args = parser.parse_args()
    ag_op = importlib.import_module("triton_dist.ops.ag_gemm.op")  # (triton_dist.ops.ag_gemm is the function)
    rs_op = importlib.import_module("triton_dist.ops.gemm_rs.op")
    setup_distributed("8G")
    world = rt.current_world()
    w, device, dtype = world.world_size, world.device, torch.bfloat16
    rows: list[tuple[str, Callable[[], object], Callable[[], object], Callable[[], object], Callable[[], str]]] = []
    for name, (m, n, k) in AG_ROWS.items():
        a = torch.randn(m // w, k, device=device, dtype=dtype)
        b = torch.randn(k, n // w, device=device, dtype=dtype)

        def unfused_ag(a: torch.Tensor = a, b: torch.Tensor = b) -> torch.Tensor:
            gathered = torch.empty((w * a.shape[0], a.shape[1]), dtype=a.dtype, device=a.device)
            dist.all_gather_into_tensor(gathered, a)
            return torch.matmul(gathered, b)

        into = functools.partial(ag_gemm, a, b, out=torch.empty(m, n // w, device=device, dtype=dtype))
        rows.append((f"ag_gemm {name} {m},{n},{k}", functools.partial(ag_gemm, a, b), into, unfused_ag,
                     functools.partial(ag_op.path_of, a, b)))  # fmt: skip
    for name, (m, n, k) in RS_ROWS.items():
        a = torch.randn(m, k // w, device=device, dtype=dtype)
        b = torch.randn(k // w, n, device=device, dtype=dtype)

        def unfused_rs(a: torch.Tensor = a, b: torch.Tensor = b) -> torch.Tensor:
            partial = torch.matmul(a, b)
            out = partial.new_empty((a.shape[0] // w, b.shape[1]))
            dist.reduce_scatter_tensor(out, partial)
            return out

        into = functools.partial(gemm_rs, a, b, out=torch.empty(m // w, n, device=device, dtype=dtype))
        rows.append((f"gemm_rs {name} {m},{n},{k}", functools.partial(gemm_rs, a, b), into, unfused_rs,
                     functools.partial(rs_op.path_of, a, b)))  # fmt: skip
    summary = []
    for label, ours, ours_out, unfused, path in rows:
        ours()  # the first call plans (a collective on every rank)
        ours_us, out_us, unfused_us = host_us(ours), host_us(ours_out), host_us(unfused)
        summary.append(
            f"{label:48s} {path():12s} {ours_us:7.1f} {out_us:7.1f} {unfused_us:9.1f} {ours_us / unfused_us:6.2f}"
        )
        lines = profile_lines(ours, args.calls, args.top)
        if world.rank == 0:
            print(f"\n== {label} ({path()}): cProfile of {args.calls} calls, GPU busy\n{lines}", flush=True)

    def write() -> None:
        print(f"\nhost µs per call, GPU busy (max over {w} ranks, {torch.cuda.get_device_name(0)}):")
        print(f"{'row':48s} {'path':12s} {'ours':>7s} {'out=':>7s} {'unfused':>9s} {'ratio':>6s}")
        print("\n".join(summary), flush=True)

    return write_on_rank0_and_finish(write)


if __name__ == "__main__":
    sys.exit(main())
