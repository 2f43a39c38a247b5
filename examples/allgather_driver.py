"""Host side shared by ``allgather_push.py`` and ``allgather_pull.py``: correctness rounds and the benchmark
against NCCL's ``all_gather_into_tensor`` at several output sizes, in the same run."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from common import Checks, log, log0, max_over_ranks, setup, teardown, time_us

from triton_dist import runtime as rt

POISON = 0x7FC1  # a bf16 NaN bit pattern: any element the kernel fails to write compares unequal

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
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[1, 8, 64, 128], help="output sizes (MiB)")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per size (median reported)")
    parser.add_argument("--check-rounds", type=int, default=3, help="correctness rounds per size (fresh data)")
    parser.add_argument("--ctas-per-peer", type=int, default=0, help="0: fill the GPU (see the kernel's docstring)")
    parser.add_argument("--block", type=int, default=4096, help="elements per program per loop step")
    parser.add_argument("--num-warps", type=int, default=8)
    return parser.parse_args()


def run(variant: Variant, description: str) -> int:
    """Check and benchmark one all-gather variant at every requested size; returns the process exit code."""
    args = parse_args(description)
    world = setup(heap_size=f"{2 * max(args.sizes_mib) + 64}M")
    checks = Checks()
    sm_count = torch.cuda.get_device_properties(world.device).multi_processor_count
    ctas_per_peer = args.ctas_per_peer or max(16, min(64, sm_count // world.world_size))
    if ctas_per_peer * world.world_size > sm_count:
        log0(f"warning: {ctas_per_peer * world.world_size} programs > {sm_count} SMs; all must be co-resident")
    log0(f"{variant.name}: {ctas_per_peer} programs per peer, BLOCK={args.block}, num_warps={args.num_warps}")
    state = {"epoch": 0, "generator": torch.Generator(device=world.device)}
    summary = []
    for size_mib in args.sizes_mib:
        summary.append(_one_size(variant, args, ctas_per_peer, size_mib, checks, state))
    log0(f"{variant.name} summary (max over ranks of the median of {args.iters} runs; algbw = output bytes / time):")
    log0("   MiB   ours_us   nccl_us  ours_GB/s  nccl_GB/s  ours/nccl")
    for size_mib, ours_us, nccl_us, ours_gbs, nccl_gbs in summary:
        log0(
            f"{size_mib:6d} {ours_us:9.1f} {nccl_us:9.1f} {ours_gbs:10.1f} {nccl_gbs:10.1f} {ours_gbs / nccl_gbs:10.1%}"
        )
    code = checks.exit_code()
    teardown()
    return code


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
        out.view(torch.int16).fill_(POISON)
        dist.all_gather_into_tensor(reference, shard)
        rt.barrier_on_device()  # every rank's poison is in place before any rank's kernel writes to it
        launch(next_epoch())
        rt.barrier()
        if not torch.equal(out, reference):
            wrong = (out.view(torch.int16) != reference.view(torch.int16)).nonzero().flatten()
            first = int(wrong[0])
            log(
                f"{size_mib} MiB round {round_index}: {wrong.numel()} wrong elements, first at {first} (from rank "
                f"{first // shard_elems}): got {out[first].item()}, expected {reference[first].item()}"
            )
            good = False
    checks.check(f"{name} {size_mib} MiB matches NCCL ({args.check_rounds} rounds, poisoned output)", good)

    ours_us = max_over_ranks(time_us(lambda: launch(next_epoch()), iters=args.iters))
    nccl_us = max_over_ranks(time_us(lambda: dist.all_gather_into_tensor(reference, shard), iters=args.iters))
    ours_gbs, nccl_gbs = out_bytes / ours_us / 1e3, out_bytes / nccl_us / 1e3
    bus = (world.world_size - 1) / world.world_size
    log0(
        f"RESULT {name} ranks={world.world_size} size_mib={size_mib} us={ours_us:.1f} nccl_us={nccl_us:.1f} "
        f"algbw_gbs={ours_gbs:.1f} nccl_algbw_gbs={nccl_gbs:.1f} busbw_gbs={ours_gbs * bus:.1f} "
        f"nccl_busbw_gbs={nccl_gbs * bus:.1f} vs_nccl={ours_gbs / nccl_gbs:.1%}"
    )
    return size_mib, ours_us, nccl_us, ours_gbs, nccl_gbs


def _torch_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="cuda")
