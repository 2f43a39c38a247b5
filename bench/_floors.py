"""The synchronization floor the decode benchmarks compare against: one flag round between every pair of ranks.

Any one-launch collective whose ranks exchange data and wait for each other (an all-reduce, gemm_ar's exchange)
pays at least this per call: every rank sets its flag on every rank, then waits until every rank's flag here holds
the call's epoch. ``flag_round_us`` times that kernel alone under CUDA-graph replay, as the ops are timed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.testing.timing import graphed_us


@triton.jit
def _flag_round_kernel(flags_ptr, epoch_ptr):
    """The synchronization of a one-launch all-reduce alone: advance the device epoch (so graph replays wait anew),
    set this rank's flag on every rank, wait until every rank's flag here holds the epoch."""
    epoch = tl.load(epoch_ptr) + 1
    tl.store(epoch_ptr, epoch)
    me = dl.rank()
    for peer in range(0, dl.num_ranks()):
        dl.notify(flags_ptr + me, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    dl.wait(flags_ptr, dl.num_ranks(), "sys", "acquire", waitValue=epoch, cmp="ge")


def flag_round_us(world_size: int) -> float:
    """Graphed µs per flag round (median of replays, max over ranks); a collective."""
    flags = rt.zeros(world_size, dtype=torch.int32)
    epoch = torch.zeros(1, dtype=torch.int32, device="cuda")
    rt.barrier()
    us = graphed_us(lambda: _flag_round_kernel[(1,)](flags, epoch, num_warps=1))
    rt.barrier()
    return us
