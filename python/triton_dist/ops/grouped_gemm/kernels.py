"""The grouped GEMM kernel: one launch computes ``y[rows of expert e] = x[rows of expert e] @ w[e]`` for every
local expert, with the rows grouped per expert as ``moe_dispatch`` leaves them (counts and offsets on the device).

The grid is an upper bound on the (row tile, column tile) pairs, fixed on the host without reading the counts (no
host synchronization, CUDA-graph capturable): ``min(ceil(TOTAL / BLOCK_M) + L, L * ceil(CAP / BLOCK_M))`` row tiles
times ``ceil(N / BLOCK_N)`` column tiles. Each program finds its expert from the counts (expert ``e`` owns row tiles
``[sum_{e' < e} ceil(c_e' / BLOCK_M), ...)``) and returns at once if its tile is past the last expert's. Program
``pid`` takes row tile ``pid // n_tiles`` and column tile ``pid % n_tiles``, so neighbours share the rows of ``x``.

fp8 (``FP8``): ``x`` and ``w`` are float8_e4m3fn; each ``BLOCK_K`` step (at most 128 and dividing it, so one step lies
in one scale group) multiplies on the tensor cores in fp32 and adds the product times ``x_scale[row, k / 128] *
w_scale[e, k / 128, n / 128]`` (``BLOCK_N`` divides 128: a column tile lies in one weight block).

``GATHER`` (``grouped_gemm(..., gather_rows=...)``): row ``r`` of the grouped problem loads row ``gather[r]`` of ``x``
(and of its fp8 scales; ``XR`` rows, an index outside them reads zeros): the pointer loads gather rows, which a
TMA descriptor could not; ``y`` keeps one row per ``r``.

``WIDEN`` (CPU tensors, Triton's interpreter only): bf16 / fp16 operands are widened to fp32 before ``tl.dot``.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _grouped_gemm_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    counts_ptr,
    offsets_ptr,
    gather_ptr,
    xs_ptr,
    ws_ptr,
    N,
    K,
    L,
    CAP,
    TOTAL,
    XR,
    stride_xm,
    stride_we,
    stride_wk,
    stride_wn,
    stride_ym,
    stride_xs,
    stride_wse,
    stride_wsk,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    LP: tl.constexpr,
    FP8: tl.constexpr,
    WIDEN: tl.constexpr,
    GATHER: tl.constexpr,
):
    pid = tl.program_id(0)
    n_tiles = tl.cdiv(N, BLOCK_N)
    m_tile = pid // n_tiles
    n_tile = pid % n_tiles
    experts = tl.arange(0, LP)
    counts = tl.load(counts_ptr + experts, mask=experts < L, other=0)
    counts = tl.minimum(tl.maximum(counts, 0), CAP)  # never past an expert's rows, whatever the counts say
    tiles = (counts + BLOCK_M - 1) // BLOCK_M
    ends = tl.cumsum(tiles, axis=0)
    expert = tl.sum((ends <= m_tile).to(tl.int32), axis=0)  # the expert whose tiles hold m_tile (L: none)
    if expert < L:
        first_tile = tl.sum(tl.where(experts == expert, ends - tiles, 0), axis=0)
        count = tl.sum(tl.where(experts == expert, counts, 0), axis=0)
        offset = tl.load(offsets_ptr + expert)
        offs_m = (m_tile - first_tile) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = (offs_m < count) & (offset + offs_m < TOTAL)
        rows = (offset + offs_m).to(tl.int64)
        if GATHER:  # row r of the problem reads row gather[r] of x (and of its scales)
            a_rows = tl.load(gather_ptr + rows, mask=row_ok, other=0).to(tl.int64)
            a_ok = row_ok & (a_rows >= 0) & (a_rows < XR)  # an index outside x reads a zero row, never past x
        else:
            a_rows = rows
            a_ok = row_ok
        offs_n = n_tile * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = offs_n < N
        w_base = w_ptr + expert.to(tl.int64) * stride_we
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            k_ok = offs_k < K
            a = tl.load(
                x_ptr + a_rows[:, None] * stride_xm + offs_k[None, :], mask=a_ok[:, None] & k_ok[None, :], other=0.0
            )
            b = tl.load(
                w_base + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn,
                mask=k_ok[:, None] & col_ok[None, :],
                other=0.0,
            )
            if FP8:
                group = k0 // 128
                a_scale = tl.load(xs_ptr + a_rows * stride_xs + group, mask=a_ok, other=0.0)
                w_scale = tl.load(ws_ptr + expert * stride_wse + group * stride_wsk + (n_tile * BLOCK_N) // 128)
                acc += tl.dot(a, b) * (a_scale[:, None] * w_scale)
            elif WIDEN:  # Triton 3.6's interpreter multiplies bf16 bit patterns as integers: fp32 operands (exact)
                acc += tl.dot(a.to(tl.float32), b.to(tl.float32))
            else:
                acc = tl.dot(a, b, acc)
        out = acc.to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + rows[:, None] * stride_ym + offs_n[None, :], out, mask=row_ok[:, None] & col_ok[None, :])
