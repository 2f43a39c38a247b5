"""All-gather by pulling: every rank loads each peer's shard from the peer's memory once the peer says it is ready.

    torchrun --nproc-per-node=4 examples/allgather_pull.py [--sizes-mib 1 8 64 128]

Program (c, p) first (if c == 0) tells rank p that this rank's shard is ready, waits for rank p's "ready", then
loads chunk c of rank p's shard through ``dl.symm_at`` into slot p of the local output. Before exiting it tells
rank p that chunk c has been read and waits for rank p to say the same about this rank's chunk c, so the shard may
be overwritten as soon as the kernel ends. The output is an ordinary tensor; only the shard is symmetric.
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
def allgather_pull(
    shard_ptr, out_ptr, ready_ptr, done_ptr, shard_elems, epoch, CTAS_PER_PEER: tl.constexpr, BLOCK: tl.constexpr
):
    me = dl.rank()
    chunk = tl.program_id(0)
    peer = tl.program_id(1)
    if chunk == 0:
        dl.notify(ready_ptr + me, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    token = dl.wait(ready_ptr + peer, 1, "sys", "acquire", waitValue=epoch)
    shard_ptr = dl.consume_token(shard_ptr, token)  # the loads below stay after the wait
    num_blocks = tl.cdiv(shard_elems, BLOCK)
    blocks_per_chunk = tl.cdiv(num_blocks, CTAS_PER_PEER)
    first_block = chunk * blocks_per_chunk
    last_block = tl.minimum(first_block + blocks_per_chunk, num_blocks)
    peer_slot = out_ptr + peer * shard_elems
    for block in range(first_block, last_block):
        offsets = block * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < shard_elems
        values = tl.load(dl.symm_at(shard_ptr + offsets, peer), mask=mask)
        tl.store(peer_slot + offsets, values, mask=mask)
    dl.notify(done_ptr + me * CTAS_PER_PEER + chunk, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    dl.wait(done_ptr + peer * CTAS_PER_PEER + chunk, 1, "sys", "acquire", waitValue=epoch)


def make_launch(args: argparse.Namespace, shard: torch.Tensor, out: torch.Tensor, ctas_per_peer: int) -> Launch:
    world = rt.current_world()
    rt.require_symmetric(shard, "shard")
    ready = rt.zeros(world.world_size, dtype=torch.int32)
    done = rt.zeros(world.world_size * ctas_per_peer, dtype=torch.int32)
    rt.barrier()
    grid = (ctas_per_peer, world.world_size)

    def launch(epoch: int) -> None:
        allgather_pull[grid](
            shard,
            out,
            ready,
            done,
            shard.numel(),
            epoch,
            CTAS_PER_PEER=ctas_per_peer,
            BLOCK=args.block,
            num_warps=args.num_warps,
        )

    return launch


if __name__ == "__main__":
    main_guard(lambda: run(Variant("allgather_pull", make_launch, shard_on_heap=True, out_on_heap=False), __doc__))
