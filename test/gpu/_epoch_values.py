"""The values the litmus checks write and expect (``check_litmus.py``, ``check_memory_model.py``,
``check_copy_engine.py``): one ``@triton.jit`` helper, so producer and consumer compute them alike in every check."""

import triton
import triton.language as tl


@triton.jit
def epoch_values(seed, epoch, offsets):
    """A different pseudo-random int32 for every (seed, epoch, element): data left from an earlier epoch, another
    rank's seed or another element does not pass for this one (a 32-bit integer hash of the three)."""
    x = offsets.to(tl.uint32) * 0x9E3779B1
    x = x ^ (epoch.to(tl.uint32) * 0x85EBCA77) ^ seed.to(tl.uint32)
    x = x ^ (x >> 15)
    x = x * 0x2C1B3C6D
    x = x ^ (x >> 12)
    x = x * 0x297A2D39
    x = x ^ (x >> 15)
    return x.to(tl.int32, bitcast=True)
