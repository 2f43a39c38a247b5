"""The persistent GEMM's device code: building blocks other kernels call, and the standalone kernels.

- ``grouped_tile(tile, num_m, num_n, GROUP_M) -> (pid_m, pid_n)``: the ``tile``-th output tile in grouped
  ("swizzled") order: ``GROUP_M`` tile rows are walked column by column, so the tiles running at once share
  A rows and B columns in L2.
- ``tma_mainloop(a_desc, b_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K) -> fp32 [BLOCK_M, BLOCK_N]``:
  the K loop of one tile through TMA tensor descriptors (A blocks ``[BLOCK_M, BLOCK_K]``, B ``[BLOCK_K, BLOCK_N]``);
  rows and columns past the tensor's end read as zero, so tiles need not divide the shape.
- ``tma_store(c_desc, acc, off_m, off_n, SPLIT_N)``: store one tile through a descriptor with blocks
  ``[BLOCK_M, BLOCK_N // SPLIT_N]`` (``SPLIT_N`` = 2 stores the tile in two halves: less shared memory, and the
  first half's store overlaps the second half's conversion). Out-of-range rows and columns are not written.
- ``ptr_mainloop(...)`` and ``ptr_store(...)``: the same with masked pointer loads and stores, for targets without
  TMA (AMD gfx942, pre-Hopper NVIDIA).

The kernels are persistent: ``min(num_sms, tiles)`` programs each walk tiles ``pid, pid + num_programs, ...``.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def grouped_tile(tile, num_m, num_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of the ``tile``-th tile when GROUP_M tile rows are walked column by column."""
    tiles_per_group = GROUP_M * num_n
    group = tile // tiles_per_group
    first_m = group * GROUP_M
    rows = tl.minimum(num_m - first_m, GROUP_M)
    in_group = tile % tiles_per_group
    pid_m = first_m + in_group % rows
    pid_n = in_group // rows
    return pid_m, pid_n


@triton.jit
def tma_mainloop(a_desc, b_desc, off_m, off_n, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """fp32 accumulator of A[off_m:+BLOCK_M, :] @ B[:, off_n:+BLOCK_N] through TMA descriptors."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def tma_store(c_desc, acc, off_m, off_n, SPLIT_N: tl.constexpr):
    """Store the tile ``acc`` at (off_m, off_n) of C through ``c_desc`` (blocks [BLOCK_M, BLOCK_N // SPLIT_N])."""
    if SPLIT_N == 2:
        BLOCK_M: tl.constexpr = acc.shape[0]
        BLOCK_N: tl.constexpr = acc.shape[1]
        halves = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2))
        halves = tl.permute(halves, (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([off_m, off_n], left.to(c_desc.dtype))
        c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(c_desc.dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def ptr_mainloop(
    a_ptr,
    b_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    off_m,
    off_n,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """fp32 accumulator of one tile with masked pointer loads (targets without TMA)."""
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + ks
        a = tl.load(
            a_ptr + rows[:, None] * stride_am + kk[None, :] * stride_ak,
            mask=(rows[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + kk[:, None] * stride_bk + cols[None, :] * stride_bn,
            mask=(kk[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def ptr_store(c_ptr, acc, M, N, stride_cm, stride_cn, off_m, off_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Masked store of the tile ``acc`` at (off_m, off_n) of C."""
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _matmul_tma_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_N: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(
        tl.program_id(0), num_m * num_n, tl.num_programs(0), flatten=True, warp_specialize=WARP_SPECIALIZE
    ):
        pid_m, pid_n = grouped_tile(tile, num_m, num_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tma_mainloop(a_desc, b_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        tma_store(c_desc, acc, off_m, off_n, SPLIT_N)


@triton.jit
def _matmul_ptr_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), num_m * num_n, tl.num_programs(0)):
        pid_m, pid_n = grouped_tile(tile, num_m, num_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = ptr_mainloop(
            a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, off_m, off_n, BLOCK_M, BLOCK_N, BLOCK_K
        )
        ptr_store(c_ptr, acc, M, N, stride_cm, stride_cn, off_m, off_n, BLOCK_M, BLOCK_N)
