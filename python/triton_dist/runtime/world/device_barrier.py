"""A barrier across ranks that runs on the GPU, ordered on a stream like any kernel.

Each rank sets its own slot in every peer's flag array to the current epoch (release), then waits until all slots
of its own array hold that epoch (acquire). The host counts epochs, identically on every rank, so the flags never
need resetting and a fast rank cannot run into the next barrier's flags while a slow one still reads this one's.
"""

from __future__ import annotations

import torch
import triton

import triton_dist.language as dl
from triton_dist.runtime.world.lifecycle import current_world


@triton.jit(do_not_specialize=["epoch"])
def _barrier_kernel(flags_ptr, epoch):
    me = dl.rank()
    for peer in range(0, dl.num_ranks()):
        dl.notify(flags_ptr + me, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    dl.wait(flags_ptr, dl.num_ranks(), "sys", "acquire", waitValue=epoch)


def barrier_on_device(stream: torch.cuda.Stream | None = None) -> None:
    """Enqueue a cross-rank barrier on ``stream`` (default: the current stream); the host does not wait.

    Work queued on ``stream`` after it starts only when every rank's stream has reached its barrier, and sees
    the memory writes that each rank's stream made before its barrier. Every rank must call it equally often.
    Raises RuntimeError on a CPU heap and on a world that spans nodes.
    """
    world = current_world()
    if world.device.type != "cuda":
        raise RuntimeError("barrier_on_device() needs a GPU heap; this world's heap is on the CPU")
    if world.num_nodes > 1:
        raise RuntimeError(
            f"barrier_on_device() stores to every rank's flags by load/store, which reaches one node; this world "
            f"spans {world.num_nodes} nodes: use triton_dist.barrier()"
        )
    world.barrier_epoch += 1
    if world.barrier_epoch >= 2**31:
        raise OverflowError("barrier_on_device() ran 2**31 times; its int32 epochs are exhausted")
    with torch.cuda.device(world.device), torch.cuda.stream(stream):  # stream=None: the current stream
        _barrier_kernel[(1,)](world.barrier_flags, world.barrier_epoch, num_warps=1)
