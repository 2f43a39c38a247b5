"""Device code of the skinny GEMM ``C[M, N] = A[M, K] @ B[K, N]`` for M <= 64 (the decode step's GEMMs).

At decode M is the batch (1-64) and the GEMM is bound by reading B once from HBM; the kernels are laid out for that:

- one program per (column tile, K split): grid ``(cdiv(N, BLOCK_N), splits)``; every program holds all M rows
  (``BLOCK_M`` >= M: one tile row), so B is read exactly once and A (small, L2-resident) once per column tile;
- a program streams its B blocks ``[BLOCK_K, BLOCK_N]`` through a ``num_stages``-deep software pipeline (TMA
  descriptors on sm_90 and newer, masked pointer loads elsewhere), one ``tl.dot`` per block into an fp32 accumulator;
- with ``SPLIT_K`` > 1 the K range is split over programs so that narrow N still fills every SM. Each split writes
  its fp32 partial tile to its own slice of a workspace ``[SPLIT_K, M, N]``, then counts its arrival on the tile's
  counter (``atom.add.acq_rel.gpu`` after a CTA barrier: every thread's partial stores before it). The program that
  arrives last sums the ``SPLIT_K`` slices in split order 0, 1, ... (the same order whichever program is last: the
  result is deterministic, bit for bit from run to run), writes C in its dtype and resets the counter to 0 for the
  next call (so the counters need zeroing once, when the workspace is made). One launch, no atomics on data, no
  memset per call.

``WIDEN`` (CPU tensors under Triton's interpreter only): the blocks are widened to fp32 before ``tl.dot``.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _skinny_finish(
    acc,
    c_ptr,
    partial_ptr,
    counter_ptr,
    M,
    N,
    stride_cm,
    off_n,
    tile,
    split,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SPLIT_K: tl.constexpr,
    REDUCE_CHUNK: tl.constexpr,
):
    """Store the fp32 tile ``acc`` (rows 0.., columns off_n..) into C, directly (``SPLIT_K`` 1) or through the
    split-K workspace: this split's slice, the arrival count, and the last arriver's ordered sum (module docstring)."""
    rows = tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    if SPLIT_K == 1:
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(partial_ptr + split * M * N + rows[:, None] * N + cols[None, :], acc, mask=mask)
        tl.debug_barrier()  # every thread's partial stores before the one thread's release below
        arrived = tl.atomic_add(counter_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:  # the last split of this tile: every slice is written
            # The M valid rows of the tile, flattened, REDUCE_CHUNK elements at a time: each chunk's SPLIT_K loads
            # are in flight together, and the registers they take stay bounded whatever the tile and SPLIT_K.
            for start in range(0, M * BLOCK_N, REDUCE_CHUNK):
                flat = start + tl.arange(0, REDUCE_CHUNK)
                row = flat // BLOCK_N
                col = off_n + flat % BLOCK_N
                inside = (row < M) & (col < N)
                offsets = row * N + col
                total = tl.zeros((REDUCE_CHUNK,), dtype=tl.float32)
                for s in tl.static_range(SPLIT_K):  # fixed order: the sum's rounding does not depend on arrival
                    total += tl.load(partial_ptr + s * M * N + offsets, mask=inside, other=0.0, cache_modifier=".cg")
                tl.store(c_ptr + row * stride_cm + col, total.to(c_ptr.dtype.element_ty), mask=inside)
            tl.atomic_xchg(counter_ptr + tile, 0, sem="relaxed", scope="gpu")  # ready for the next call


@triton.jit
def _block_product(a, b, acc, WIDEN: tl.constexpr):
    """``acc + a @ b``; ``WIDEN`` (CPU tensors, Triton's interpreter only) with fp32 operands: Triton 3.6's
    interpreter multiplies bf16 bit patterns as integers (fp32 is exact for bf16 and fp16 values)."""
    if WIDEN:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


@triton.jit
def _skinny_tma_kernel(
    a_desc,
    b_desc,
    c_ptr,
    partial_ptr,
    counter_ptr,
    M,
    N,
    K,
    stride_cm,
    blocks_per_split,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    REDUCE_CHUNK: tl.constexpr,
    WIDEN: tl.constexpr,
):
    """One (column tile, K split) of C = A @ B through TMA descriptors (A blocks [BLOCK_M, BLOCK_K], B blocks
    [BLOCK_K, BLOCK_N]); rows past M and columns past N or K read as zero."""
    tile = tl.program_id(0)
    split = tl.program_id(1)
    off_n = tile * BLOCK_N
    first = split * blocks_per_split
    last = tl.minimum(first + blocks_per_split, tl.cdiv(K, BLOCK_K))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(first, last):
        a = a_desc.load([0, kb * BLOCK_K])
        b = b_desc.load([kb * BLOCK_K, off_n])
        acc = _block_product(a, b, acc, WIDEN)
    _skinny_finish(
        acc,
        c_ptr,
        partial_ptr,
        counter_ptr,
        M,
        N,
        stride_cm,
        off_n,
        tile,
        split,
        BLOCK_M,
        BLOCK_N,
        SPLIT_K,
        REDUCE_CHUNK,
    )


@triton.jit
def _skinny_ptr_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    partial_ptr,
    counter_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bk,
    stride_cm,
    blocks_per_split,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    REDUCE_CHUNK: tl.constexpr,
    WIDEN: tl.constexpr,
):
    """``_skinny_tma_kernel`` with masked pointer loads (targets without TMA, rows not 16-byte aligned); A and B
    row-major (unit column stride)."""
    tile = tl.program_id(0)
    split = tl.program_id(1)
    off_n = tile * BLOCK_N
    first = split * blocks_per_split
    last = tl.minimum(first + blocks_per_split, tl.cdiv(K, BLOCK_K))
    rows = tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(first, last):
        kk = kb * BLOCK_K + ks
        a = tl.load(
            a_ptr + rows[:, None] * stride_am + kk[None, :], mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0
        )
        b = tl.load(
            b_ptr + kk[:, None] * stride_bk + cols[None, :], mask=(kk[:, None] < K) & (cols[None, :] < N), other=0.0
        )
        acc = _block_product(a, b, acc, WIDEN)
    _skinny_finish(
        acc,
        c_ptr,
        partial_ptr,
        counter_ptr,
        M,
        N,
        stride_cm,
        off_n,
        tile,
        split,
        BLOCK_M,
        BLOCK_N,
        SPLIT_K,
        REDUCE_CHUNK,
    )
