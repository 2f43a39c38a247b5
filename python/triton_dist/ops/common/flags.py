"""Device helpers for the flag rounds of the decode ops (``all_reduce``, ``gemm_ar``, ``flash_decode``).

A *flag round* is how one program tells every rank that its data is in place and waits until every rank has said
the same: each flag is an int32 that only ever takes epoch values (``ops/common/slot_workspace.py``,
``ops/common/call_epoch.py``), so nothing is reset between calls.
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl


def notify_world(world_size: int) -> int:
    """The kernels' ``WORLD`` constexpr: the world size if it is a power of two (one ``dl.notify`` to a tensor of
    every rank), else 0 (a loop of notifies)."""
    return world_size if world_size & (world_size - 1) == 0 else 0


@triton.jit
def notify_every_rank(flag_ptr, epoch, ranks, WORLD: tl.constexpr):
    """Set ``flag_ptr`` to ``epoch`` on every rank (release). ``WORLD`` = ``notify_world(ranks)``: a power of two
    gives one ``dl.notify`` to a tensor of ranks (one barrier, the ranks' writes in parallel); 0, one per rank."""
    if WORLD > 0:
        dl.notify(flag_ptr, tl.arange(0, WORLD), signal=epoch, sig_op="set", comm_scope="intra_node")
    else:
        for peer in range(0, ranks):
            dl.notify(flag_ptr, peer, signal=epoch, sig_op="set", comm_scope="intra_node")


@triton.jit
def flag_round(flags, me, epoch, ranks, data, WORLD: tl.constexpr):
    """One flag round over ``flags`` (one int32 per rank): set ``flags[me]`` to ``epoch`` on every rank (release:
    this program's earlier accesses come first), wait until every rank's flag here holds ``epoch`` (acquire), and
    return ``data`` ordered after the wait (``dl.consume_token``), for the loads that read what the peers wrote."""
    notify_every_rank(flags + me, epoch, ranks, WORLD)
    token = dl.wait(flags, ranks, "sys", "acquire", waitValue=epoch)
    return dl.consume_token(data, token)
