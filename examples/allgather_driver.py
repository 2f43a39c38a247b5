"""Host side shared by ``allgather_push.py`` and ``allgather_pull.py``: correctness rounds and the benchmark
against NCCL's ``all_gather_into_tensor`` at several output sizes, in the same run.

Under ``TRITON_INTERPRET=1`` (the CPU emulation, docs/getting-started.md "Develop and test without GPUs") the same
kernels run on a CPU heap over gloo: small sizes, two programs per peer, the correctness rounds against gloo's
``all_gather_into_tensor`` and no timing (times there mean nothing)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import triton

from triton_dist import runtime as rt
from triton_dist.testing import (
    Checks,
    bench,
    poison_,
    rank0_print,
    rank_print,
    setup_distributed,
    teardown,
    write_chart,
    write_markdown,
)

EMULATED = triton.knobs.runtime.interpret
"""``TRITON_INTERPRET=1``: run on the CPU emulation (checks only)."""

Launch = Callable[[int], None]
"""``launch(epoch)`` runs one all-gather; epochs increase by one per call and are equal across ranks."""


@dataclass
class Variant:
    """One all-gather implementation: ``make_launch(args, shard, out, ctas_per_peer)`` returns its launcher."""

    name: str
    make_launch: Callable[[argparse.Namespace, torch.Tensor, torch.Tensor, int], Launch]
    shard_on_heap: bool
    out_on_heap: bool


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    sizes = [1] if EMULATED else [1, 8, 64, 128]
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=sizes, help="output sizes (MiB)")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per size (median reported)")
    parser.add_argument("--check-rounds", type=int, default=3, help="correctness rounds per size (fresh data)")
    parser.add_argument("--ctas-per-peer", type=int, default=0, help="0: fill the GPU (see the kernel's docstring)")
    parser.add_argument("--block", type=int, default=4096, help="elements per program per loop step")
    parser.add_argument("--num-warps", type=int, default=8)
    parser.add_argument(
        "--results", default=None, help="write PATH.md (table) and PATH.png (bandwidth chart) on rank 0, e.g. "
        "bench/results/allgather_push"
    )  # fmt: skip
    return parser.parse_args()


def run(variant: Variant, description: str) -> int:
    """Check and benchmark one all-gather variant at every requested size; returns the process exit code."""
    args = parse_args(description)
    if EMULATED:
        world = setup_distributed(heap_size=f"{2 * max(args.sizes_mib) + 1}M", device="cpu")
        sm_count = 2 * world.world_size  # every program is a thread: a few suffice
    else:
        world = setup_distributed(heap_size=f"{2 * max(args.sizes_mib) + 64}M")
        sm_count = torch.cuda.get_device_properties(world.device).multi_processor_count
    checks = Checks()
    ctas_per_peer = args.ctas_per_peer or (2 if EMULATED else max(16, min(64, sm_count // world.world_size)))
    if ctas_per_peer * world.world_size > sm_count:
        rank0_print(f"warning: {ctas_per_peer * world.world_size} programs > {sm_count} SMs; all must be co-resident")
    rank0_print(f"{variant.name}: {ctas_per_peer} programs per peer, BLOCK={args.block}, num_warps={args.num_warps}")
    state = {"epoch": 0, "generator": torch.Generator(device=world.device)}
    summary = []
    for size_mib in args.sizes_mib:
        summary.append(_one_size(variant, args, ctas_per_peer, size_mib, checks, state))
    if EMULATED:
        code = checks.exit_code()
        teardown()
        return code
    rank0_print(
        f"{variant.name} summary (max over ranks of the median of {args.iters} runs; algbw = output bytes / time):"
    )
    rank0_print("   MiB   ours_us   nccl_us  ours_GB/s  nccl_GB/s  ours/nccl")
    for size_mib, ours_us, nccl_us, ours_gbs, nccl_gbs in summary:
        rank0_print(
            f"{size_mib:6d} {ours_us:9.1f} {nccl_us:9.1f} {ours_gbs:10.1f} {nccl_gbs:10.1f} {ours_gbs / nccl_gbs:10.1%}"
        )
    if args.results and world.rank == 0:
        _write_results(args.results, variant.name, world.world_size, args.iters, summary)
    code = checks.exit_code()
    teardown()
    return code


def _write_results(prefix: str, name: str, world_size: int, iters: int, summary: list[tuple]) -> None:
    device = torch.cuda.get_device_name()
    notes = [
        f"command: `torchrun --nproc-per-node={world_size} examples/{name}.py --results {prefix}`",
        f"machine: {world_size} x {device}, torch {torch.__version__}",
        f"method: CUDA events, median of {iters} runs after warm-up, every run started by a device barrier, max over "
        "ranks; algorithm bandwidth = output bytes / time",
    ]
    rows = [
        (mib, ours, nccl, ours_gbs, nccl_gbs, f"{ours_gbs / nccl_gbs:.1%}")
        for mib, ours, nccl, ours_gbs, nccl_gbs in summary
    ]
    headers = ["output MiB", f"{name} µs", "NCCL µs", f"{name} GB/s", "NCCL GB/s", f"{name} / NCCL"]
    write_markdown(f"{prefix}.md", f"{name} vs NCCL all_gather_into_tensor, {world_size} ranks", headers, rows, notes)
    write_chart(
        f"{prefix}.png",
        [row[0] for row in summary],
        {name: [row[3] for row in summary], "NCCL": [row[4] for row in summary]},
        title=f"{name} vs NCCL, {world_size} x {device}",
        xlabel="output MiB",
        ylabel="algorithm bandwidth GB/s",
        logx=True,
    )
    rank0_print(f"wrote {prefix}.md and {prefix}.png")


def _one_size(
    variant: Variant, args: argparse.Namespace, ctas_per_peer: int, size_mib: int, checks: Checks, state: dict
) -> tuple[int, float, float, float, float]:
    """Correctness rounds, then timing against NCCL, at one output size; returns the summary row."""
    name = variant.name
    world = rt.current_world()
    out_bytes = size_mib << 20
    shard_elems = out_bytes // 2 // world.world_size
    shard = (rt.empty if variant.shard_on_heap else _torch_empty)((shard_elems,), dtype=torch.bfloat16)
    out = (rt.empty if variant.out_on_heap else _torch_empty)((shard_elems * world.world_size,), dtype=torch.bfloat16)
    reference = torch.empty_like(out)
    launch = variant.make_launch(args, shard, out, ctas_per_peer)

    def next_epoch() -> int:
        state["epoch"] += 1
        return state["epoch"]

    good = True
    for round_index in range(args.check_rounds):
        state["generator"].manual_seed(1000 * size_mib + 10 * round_index + world.rank)
        shard.copy_(torch.randn(shard.shape, generator=state["generator"], device=world.device))
        poison_(out)  # NaN: an element the kernel fails to write compares unequal
        dist.all_gather_into_tensor(reference, shard)
        # Every rank's poison is in place before any rank's kernel writes to it (on CPUs the host barrier: kernels
        # there finish before the launch returns).
        if EMULATED:
            rt.barrier()
        else:
            rt.barrier_on_device()
        launch(next_epoch())
        rt.barrier()
        if not torch.equal(out, reference):
            wrong = (out.view(torch.int16) != reference.view(torch.int16)).nonzero().flatten()
            first = int(wrong[0])
            rank_print(
                f"{size_mib} MiB round {round_index}: {wrong.numel()} wrong elements, first at {first} (from rank "
                f"{first // shard_elems}): got {out[first].item()}, expected {reference[first].item()}"
            )
            good = False
    against = "gloo" if EMULATED else "NCCL"
    checks.check(f"{name} {size_mib} MiB matches {against} ({args.check_rounds} rounds, poisoned output)", good)
    if EMULATED:
        return size_mib, 0.0, 0.0, 0.0, 0.0

    ours_us = bench(lambda: launch(next_epoch()), rep=args.iters) * 1000.0
    nccl_us = bench(lambda: dist.all_gather_into_tensor(reference, shard), rep=args.iters) * 1000.0
    ours_gbs, nccl_gbs = out_bytes / ours_us / 1e3, out_bytes / nccl_us / 1e3
    bus = (world.world_size - 1) / world.world_size
    rank0_print(
        f"RESULT {name} ranks={world.world_size} size_mib={size_mib} us={ours_us:.1f} nccl_us={nccl_us:.1f} "
        f"algbw_gbs={ours_gbs:.1f} nccl_algbw_gbs={nccl_gbs:.1f} busbw_gbs={ours_gbs * bus:.1f} "
        f"nccl_busbw_gbs={nccl_gbs * bus:.1f} vs_nccl={ours_gbs / nccl_gbs:.1%}"
    )
    return size_mib, ours_us, nccl_us, ours_gbs, nccl_gbs


def _torch_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=rt.current_world().device)
