"""All-gather by pushing: every rank stores its shard straight into every peer's output, then flags it.

    torchrun --nproc-per-node=4 examples/allgather_push.py [--sizes-mib 1 8 64 128]

Program (c, p) copies chunk c of this rank's shard into slot ``rank`` of rank p's output (16-byte vector stores
through ``dl.symm_at``), then sets flag (rank, c) on rank p to the epoch. It then waits for the mirror image: flag
(p, c) on this rank, set by rank p's program (c, rank) once its chunk has landed here. When the kernel ends, the
whole output is here. The epoch grows by one per call, so flags never need resetting.
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl
from allgather_driver import Launch, Variant, run

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.testing import main_guard


@triton.jit(do_not_specialize=["epoch"])
def allgather_push(shard_ptr, out_ptr, flags_ptr, shard_elems, epoch, CTAS_PER_PEER: tl.constexpr, BLOCK: tl.constexpr):
    me = dl.rank()
    chunk = tl.program_id(0)
    peer = tl.program_id(1)
    num_blocks = tl.cdiv(shard_elems, BLOCK)
    blocks_per_chunk = tl.cdiv(num_blocks, CTAS_PER_PEER)
    first_block = chunk * blocks_per_chunk
    last_block = tl.minimum(first_block + blocks_per_chunk, num_blocks)
    my_slot = out_ptr + me * shard_elems
    for block in range(first_block, last_block):
        offsets = block * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < shard_elems
        values = tl.load(shard_ptr + offsets, mask=mask)
        tl.store(dl.symm_at(my_slot + offsets, peer), values, mask=mask)
    dl.notify(flags_ptr + me * CTAS_PER_PEER + chunk, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    dl.wait(flags_ptr + peer * CTAS_PER_PEER + chunk, 1, "sys", "acquire", waitValue=epoch)


def make_launch(args: argparse.Namespace, shard: torch.Tensor, out: torch.Tensor, ctas_per_peer: int) -> Launch:
    world = rt.current_world()
    rt.require_symmetric(out, "out")
    flags = rt.zeros(world.world_size * ctas_per_peer, dtype=torch.int32)
    rt.barrier()  # the zeroed flags are in place everywhere before any rank sets one
    grid = (ctas_per_peer, world.world_size)

    def launch(epoch: int) -> None:
        allgather_push[grid](
            shard,
            out,
            flags,
            shard.numel(),
            epoch,
            CTAS_PER_PEER=ctas_per_peer,
            BLOCK=args.block,
            num_warps=args.num_warps,
        )

    return launch


if __name__ == "__main__":
    main_guard(lambda: run(Variant("allgather_push", make_launch, shard_on_heap=False, out_on_heap=True), __doc__))
