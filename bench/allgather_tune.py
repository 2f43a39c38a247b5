"""Sweep the push and pull all-gather kernels' launch parameters at one size, against NCCL in the same run.

    torchrun --nproc-per-node=4 bench/allgather_tune.py [--size-mib 128] [--iters 20]

Every configuration is checked once (fresh random data, poisoned output) before it is timed; the table lists
algorithm bandwidth (output bytes / time, max over ranks of the median) as a fraction of NCCL's.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import allgather_pull  # noqa: E402
import allgather_push  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.testing import (  # noqa: E402
    Checks,
    bench,
    finish,
    main_guard,
    poison_,
    rank0_print,
    setup_distributed,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=128)
    parser.add_argument("--iters", type=int, default=20, help="timed runs per configuration (at least 20)")
    parser.add_argument("--ctas-per-peer", type=int, nargs="+", default=[16, 24, 32, 48, 64])
    parser.add_argument("--blocks", type=int, nargs="+", default=[2048, 4096, 8192])
    parser.add_argument("--num-warps", type=int, nargs="+", default=[4, 8, 16])
    args = parser.parse_args()
    world = setup_distributed(heap_size=f"{3 * args.size_mib + 64}M")
    checks = Checks()
    sm_count = torch.cuda.get_device_properties(world.device).multi_processor_count
    shard_elems = (args.size_mib << 20) // 2 // world.world_size
    shard = rt.empty(shard_elems, dtype=torch.bfloat16)
    out = rt.empty(shard_elems * world.world_size, dtype=torch.bfloat16)
    reference = torch.empty_like(out)
    shard.copy_(torch.randn(shard_elems, device="cuda"))
    dist.all_gather_into_tensor(reference, shard)
    nccl_us = bench(lambda: dist.all_gather_into_tensor(reference, shard), rep=args.iters) * 1000.0
    out_bytes = out.numel() * 2
    rank0_print(f"NCCL: {nccl_us:.1f} us, {out_bytes / nccl_us / 1e3:.1f} GB/s at {args.size_mib} MiB")
    epoch = [0]
    rows = []
    for module, ctas, block, warps in itertools.product(
        (allgather_push, allgather_pull), args.ctas_per_peer, args.blocks, args.num_warps
    ):
        if ctas * world.world_size > sm_count:
            continue
        options = argparse.Namespace(block=block, num_warps=warps)
        launch = module.make_launch(options, shard, out, ctas)

        def once(launch=launch) -> None:
            epoch[0] += 1
            launch(epoch[0])

        poison_(out)
        rt.barrier_on_device()
        once()
        rt.barrier()
        name = f"{module.__name__} ctas/peer={ctas} BLOCK={block} warps={warps}"
        if not checks.check(f"{name} correct", torch.equal(out, reference)):
            continue
        us = bench(once, rep=args.iters) * 1000.0
        rows.append((out_bytes / us / 1e3, us, name))
        rank0_print(f"{name}: {us:.1f} us, {out_bytes / us / 1e3:.1f} GB/s ({nccl_us / us:.1%} of NCCL)")
    rank0_print(f"best configurations at {args.size_mib} MiB on {world.world_size} ranks (NCCL {nccl_us:.1f} us):")
    for gbs, us, name in sorted(rows, reverse=True)[:10]:
        rank0_print(f"RESULT tune {name}: {us:.1f} us {gbs:.1f} GB/s vs_nccl={nccl_us / us:.1%}")
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
