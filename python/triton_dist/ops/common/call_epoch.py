"""One device-side epoch per launch, for kernels whose programs share one call-wide state: ``flash_decode`` and
``gemm_ar``'s split-K kernel (the all-reduce and the unsplit ``gemm_ar`` keep an epoch per program slot instead:
``ops/common/slot_workspace.py``).

The state is one int64 on this rank's GPU: the last call's epoch in its high 32 bits, the arrivals of the current
call in its low 32 bits (zero between calls). Each program's first act is one atomic add of 1: the old value gives
its arrival ticket (0, 1, ... in the order programs start) and the call's epoch (the last one + 1). The program
that draws the last ticket adds ``2^32 - programs``: the epoch moves on and the arrivals go back to 0. No program
of the call touches the state after that (all have arrived), and the next call's programs start after this
kernel ends (stream order), so no program ever reads another call's epoch, in eager calls or CUDA-graph replays
alike. Nothing counts programs out at the end of a call: that second atomic would lengthen the last program of
every call, on the call's critical path.
"""

from __future__ import annotations

import triton
import triton.language as tl

ARRIVAL_BITS = 32
"""The low bits of the state that count arrivals."""


@triton.jit
def arrive(state_ptr, programs):
    """(arrival ticket, epoch) of this program in a launch of ``programs`` programs, from the int64 state at
    ``state_ptr`` (see the module docstring); the last program to arrive hands the state to the next call."""
    state = tl.atomic_add(state_ptr, 1, sem="relaxed", scope="gpu")
    ticket = (state & 0xFFFFFFFF).to(tl.int32)
    epoch = (state >> 32).to(tl.int32) + 1
    if ticket == programs - 1:
        handover = tl.full([], 1 << 32, tl.int64) - programs  # epoch + 1, arrivals back to 0
        tl.atomic_add(state_ptr, handover, sem="relaxed", scope="gpu")
    return ticket, epoch
