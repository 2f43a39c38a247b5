"""The Triton kernel behind ``copy_chunks_with_flags(..., flag_writer="kernel")`` (imported on first use)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["offset", "value"])
def write_flag_kernel(flags_ptr, offset, value):
    """``flags_ptr[offset] = value`` with a system-scope release: the stream's earlier writes are visible first."""
    tl.atomic_xchg(flags_ptr + offset, value, sem="release", scope="sys")
