"""The layers' fused elementwise kernels (one launch each, no host synchronization: CUDA-graph capturable once each
shape ran eagerly, which compiles them).

- ``_rope_scatter_kernel`` (``rope_scatter``): the sequence-split decode's work between its all-gather of the new
  tokens' q, k, v and ``flash_decode``, which torch runs as 6 launches (RoPE's roll, product and multiply-add, the
  copy of every head's q into one contiguous tensor, the two cache writes) and 8 with QK norm (its RMSNorm and
  weight product): each program takes one head's row of one token, norms it (QK norm) and rotates it (q and k) and
  stores it where it goes: q into ``q_out``, k and v into the token's slot of the KV cache.
- ``_rope_tiles_kernel`` (``rope_scatter(..., tiled=True)``): the same work with one 4-warp program per token, its
  heads as [heads, D/2] tiles (an option of the decode, ``TensorParallelAttention.decode_rope_tiles``).
- ``_rope_rows_kernel`` (``rope_rows``): prefill's QK norm and RoPE of every token's q and k heads (an option of
  ``TensorParallelAttention``, ``prefill_fused_rope``), which torch runs as a copy and a roll of q and k, a product
  into fp32 and a multiply-add (two more launches with QK norm): each program takes a tile of tokens of one head,
  reads it once and writes it rotated once.
- ``_silu_mul_kernel`` (``silu_mul``): the gated MLP's ``silu(gate) * up``, in decode (a few rows) and in prefill
  (thousands of rows), in one launch that reads gate and up once and writes the product once, instead of torch's
  two passes over the strided halves of the gate/up GEMM's output (SiLU into a new tensor, then the product).

- ``_l2_prefetch_kernel`` (``l2_prefetch``): not a fusion: reads the first bytes of a weight into L2 on a side
  stream while a communication kernel leaves HBM idle (the decoder layer's ``decode_prefetch_bytes`` option).

Each fusion computes what the torch ops it replaces compute, rounding where they round (to the activations' dtype after
the norm, after the norm weight, after RoPE; after SiLU), in fp32 in between; the RMSNorm and the rotary
multiply-add may differ from torch's in the last bit (another order of the fp32 operations).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def _rope_scatter_kernel(
    src_ptr,
    cos_ptr,
    sin_ptr,
    qw_ptr,
    kw_ptr,
    slots_ptr,
    q_ptr,
    k_ptr,
    v_ptr,
    batch,
    eps,
    stride_sr,
    stride_sb,
    stride_cb,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    HQ: tl.constexpr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    BLOCK_D: tl.constexpr,
    QK_NORM: tl.constexpr,
):
    """Program ``((r * batch + b) * (HQ + 2 * HKV) + h)``: head ``h`` of block ``r``'s columns of token ``b``."""
    pid = tl.program_id(0)
    h = pid % (HQ + 2 * HKV)
    rb = pid // (HQ + 2 * HKV)
    b = (rb % batch).to(tl.int64)
    r = rb // batch
    offs = tl.arange(0, BLOCK_D)  # the head dim, padded to a power of two
    keep = offs < D
    row = src_ptr + r.to(tl.int64) * stride_sr + b * stride_sb + h * D
    x = tl.load(row + offs, mask=keep, other=0.0)
    if h < HQ + HKV:
        turned = (offs + D // 2) % D
        xt = tl.load(row + turned, mask=keep, other=0.0)
        if QK_NORM:
            if h < HQ:
                w = tl.load(qw_ptr + offs, mask=keep, other=0.0).to(tl.float32)
                wt = tl.load(qw_ptr + turned, mask=keep, other=0.0).to(tl.float32)
            else:
                w = tl.load(kw_ptr + offs, mask=keep, other=0.0).to(tl.float32)
                wt = tl.load(kw_ptr + turned, mask=keep, other=0.0).to(tl.float32)
            xf = x.to(tl.float32)
            inv = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / D + eps)
            x = ((xf * inv).to(x.dtype).to(tl.float32) * w).to(x.dtype)
            xt = ((xt.to(tl.float32) * inv).to(x.dtype).to(tl.float32) * wt).to(x.dtype)
        c = tl.load(cos_ptr + b * stride_cb + offs, mask=keep, other=0.0)
        s = tl.load(sin_ptr + b * stride_cb + offs, mask=keep, other=0.0)
        out = (x.to(tl.float32) * c + xt.to(tl.float32) * s).to(x.dtype)
        if h < HQ:
            tl.store(q_ptr + b * stride_qb + (r * HQ + h).to(tl.int64) * stride_qh + offs, out, mask=keep)
        else:
            slot = tl.load(slots_ptr + b).to(tl.int64)
            head = (r * HKV + h - HQ).to(tl.int64)
            tl.store(k_ptr + b * stride_kb + head * stride_kh + slot * stride_ks + offs, out, mask=keep)
    else:
        slot = tl.load(slots_ptr + b).to(tl.int64)
        head = (r * HKV + h - HQ - HKV).to(tl.int64)
        tl.store(v_ptr + b * stride_vb + head * stride_vh + slot * stride_vs + offs, x, mask=keep)


@triton.jit
def _norm_rotate_store(
    x1, x2, r, b, heads, cols, half, keep, cos_ptr, sin_ptr, qw_ptr, kw_ptr, slots_ptr, q_ptr, k_ptr, v_ptr, eps,
    stride_cb, stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
    HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, QK_NORM: tl.constexpr,
):  # fmt: skip
    """Token ``b``'s row of block ``r`` as two [heads, cols] tiles, ``x1`` / ``x2`` (each head's halves, which rotate
    together; ``half``: the columns inside D / 2, ``keep``: the tile's live elements): q and k RMS-normed (QK_NORM)
    and rotated, v as it is, each stored where ``_rope_scatter_kernel`` stores it (the tiled and gathering kernels'
    shared tail)."""
    is_q = heads < HQ
    rotated = (heads < HQ + HKV)[:, None]
    n1, n2 = x1, x2
    if QK_NORM:
        xf1, xf2 = x1.to(tl.float32), x2.to(tl.float32)
        inv = 1.0 / tl.sqrt((tl.sum(xf1 * xf1, axis=1) + tl.sum(xf2 * xf2, axis=1)) / D + eps)
        qw1, kw1 = tl.load(qw_ptr + cols, mask=half, other=0.0), tl.load(kw_ptr + cols, mask=half, other=0.0)
        qw2 = tl.load(qw_ptr + D // 2 + cols, mask=half, other=0.0)
        kw2 = tl.load(kw_ptr + D // 2 + cols, mask=half, other=0.0)
        w1 = tl.where(is_q[:, None], qw1[None, :], kw1[None, :])
        w2 = tl.where(is_q[:, None], qw2[None, :], kw2[None, :])
        n1 = ((xf1 * inv[:, None]).to(x1.dtype).to(tl.float32) * w1.to(tl.float32)).to(x1.dtype)
        n2 = ((xf2 * inv[:, None]).to(x1.dtype).to(tl.float32) * w2.to(tl.float32)).to(x1.dtype)
    # The tables' second halves (rope_rows' reasoning): the cosine of both halves, the sine with its sign.
    c = tl.load(cos_ptr + b * stride_cb + D // 2 + cols, mask=half, other=0.0)[None, :]
    s = tl.load(sin_ptr + b * stride_cb + D // 2 + cols, mask=half, other=0.0)[None, :]
    y1 = (n1.to(tl.float32) * c - n2.to(tl.float32) * s).to(x1.dtype)
    y2 = (n2.to(tl.float32) * c + n1.to(tl.float32) * s).to(x1.dtype)
    out1 = tl.where(rotated, y1, x1)
    out2 = tl.where(rotated, y2, x2)
    slot = tl.load(slots_ptr + b).to(tl.int64)
    q_row = q_ptr + b * stride_qb + (r * HQ + heads).to(tl.int64) * stride_qh
    k_row = k_ptr + b * stride_kb + (r * HKV + heads - HQ).to(tl.int64) * stride_kh + slot * stride_ks
    v_row = v_ptr + b * stride_vb + (r * HKV + heads - HQ - HKV).to(tl.int64) * stride_vh + slot * stride_vs
    dest = tl.where(is_q, q_row, tl.where(heads < HQ + HKV, k_row, v_row))[:, None] + cols[None, :]
    tl.store(dest, out1, mask=keep)
    tl.store(dest + D // 2, out2, mask=keep)


@triton.jit
def _rope_tiles_kernel(
    src_ptr,
    cos_ptr,
    sin_ptr,
    qw_ptr,
    kw_ptr,
    slots_ptr,
    q_ptr,
    k_ptr,
    v_ptr,
    batch,
    eps,
    stride_sr,
    stride_sb,
    stride_cb,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    HQ: tl.constexpr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    QK_NORM: tl.constexpr,
):
    """Program ``r * batch + b``: token ``b``'s row of block ``r`` (its HQ q, HKV k and HKV v heads) as two
    [BLOCK_H, BLOCK_HALF] tiles (each head's halves, D/2 each, which rotate together), as ``_gather_rope_kernel``
    takes a row but from this GPU's memory: q and k normed (QK_NORM) and rotated, v as it is, each stored where
    ``_rope_scatter_kernel`` stores it."""
    pid = tl.program_id(0)
    r = pid // batch
    b = (pid % batch).to(tl.int64)
    heads = tl.arange(0, BLOCK_H)
    cols = tl.arange(0, BLOCK_HALF)  # D/2, padded to a power of two
    half = cols < D // 2
    keep = (heads < HQ + 2 * HKV)[:, None] & half[None, :]
    first = src_ptr + r.to(tl.int64) * stride_sr + b * stride_sb + heads[:, None] * D + cols[None, :]
    x1 = tl.load(first, mask=keep, other=0.0)
    x2 = tl.load(first + D // 2, mask=keep, other=0.0)
    _norm_rotate_store(
        x1, x2, r, b, heads, cols, half, keep, cos_ptr, sin_ptr, qw_ptr, kw_ptr, slots_ptr, q_ptr, k_ptr, v_ptr, eps,
        stride_cb, stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
        HQ, HKV, D, QK_NORM,
    )  # fmt: skip


def rope_scatter(
    src: torch.Tensor,
    cos: torch.Tensor,
    signed_sin: torch.Tensor,
    slots: torch.Tensor,
    q_out: torch.Tensor,
    k_store: torch.Tensor,
    v_store: torch.Tensor,
    heads: tuple[int, int],
    qk_norm: tuple[torch.Tensor, torch.Tensor, float] | None = None,
    tiled: bool = False,
) -> None:
    """Rotate and place the new tokens' q, k, v in one launch.

    ``src`` [R, B, (Hq + 2 * Hkv) * D] (``heads`` = (Hq, Hkv): per block of columns, Hq q heads, then Hkv k heads,
    then Hkv v heads; rows of any stride, each row contiguous): R blocks of columns, such as every rank's after the
    sequence-split decode's gather. ``cos`` / ``signed_sin`` fp32 [B, D] (``rope_tables``); ``slots`` integer [B],
    each token's position in the stores. Writes ``q_out`` [B, R * Hq, D] (block r's heads at ``[r * Hq, (r + 1) *
    Hq)``) with q rotated, and ``k_store`` / ``v_store`` [B, R * Hkv, S, D] at ``[b, :, slots[b]]`` with k rotated
    and v as it is. ``qk_norm`` ``(q_weight [D], k_weight [D], eps)``: q and k are RMS-normed per head and scaled by
    their weight first. Every tensor on one device, D even, with a contiguous last dim everywhere (the caller's
    layouts; not checked here). Enqueued on the current stream.

    ``tiled`` (``TensorParallelAttention.decode_rope_tiles``): one 4-warp program per token of each block, which
    takes the token's heads as two [heads, D/2] tiles (``_rope_tiles_kernel``: R x B programs, 64 at the head-split
    decode's batch 64) instead of one 1-warp program per head and token (R x B x (Hq + 2 * Hkv): 1536 for
    Llama-3-8B's rank at W = 2); the same results up to the last bit (the fp32 operations in another order)."""
    blocks, batch = int(src.shape[0]), int(src.shape[1])
    hq, hkv = heads
    d = int(q_out.shape[-1])
    qw, kw, eps = qk_norm if qk_norm is not None else (cos, cos, 0.0)  # unread without QK norm
    if tiled:
        if blocks * batch:
            _rope_tiles_kernel[(blocks * batch,)](
                src, cos, signed_sin, qw, kw, slots, q_out, k_store, v_store,
                batch, float(eps),
                src.stride(0), src.stride(1), cos.stride(0),
                q_out.stride(0), q_out.stride(1),
                k_store.stride(0), k_store.stride(1), k_store.stride(2),
                v_store.stride(0), v_store.stride(1), v_store.stride(2),
                HQ=hq, HKV=hkv, D=d, BLOCK_H=triton.next_power_of_2(hq + 2 * hkv),
                BLOCK_HALF=triton.next_power_of_2(d // 2), QK_NORM=qk_norm is not None, num_warps=4,
            )  # fmt: skip
        return
    grid = (blocks * batch * (hq + 2 * hkv),)
    _rope_scatter_kernel[grid](
        src, cos, signed_sin, qw, kw, slots, q_out, k_store, v_store,
        batch, float(eps),
        src.stride(0), src.stride(1), cos.stride(0),
        q_out.stride(0), q_out.stride(1),
        k_store.stride(0), k_store.stride(1), k_store.stride(2),
        v_store.stride(0), v_store.stride(1), v_store.stride(2),
        HQ=hq, HKV=hkv, D=d, BLOCK_D=triton.next_power_of_2(d), QK_NORM=qk_norm is not None, num_warps=1,
    )  # fmt: skip


@triton.jit
def _rope_rows_kernel(
    src_ptr,
    cos_ptr,
    sin_ptr,
    qw_ptr,
    kw_ptr,
    out_ptr,
    rows,
    seq,
    eps,
    stride_s,
    stride_c,
    stride_o,
    HQ: tl.constexpr,
    D: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_H: tl.constexpr,
    QK_NORM: tl.constexpr,
):
    """Program ``(t, h)``: head ``h`` (q heads first, then k heads) of tokens ``[t * BLOCK_T, (t + 1) * BLOCK_T)``,
    token ``m`` at position ``m % seq``; each row's two halves (dims ``i`` and ``i + D/2``, which rotate together)
    as two [BLOCK_T, BLOCK_H] tiles."""
    h = tl.program_id(1)
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_H)
    keep = (tokens < rows)[:, None] & (cols < D // 2)[None, :]
    m = tokens.to(tl.int64)[:, None]
    first = src_ptr + m * stride_s + h * D + cols[None, :]
    x1 = tl.load(first, mask=keep, other=0.0)
    x2 = tl.load(first + D // 2, mask=keep, other=0.0)
    if QK_NORM:
        xf1, xf2 = x1.to(tl.float32), x2.to(tl.float32)
        inv = 1.0 / tl.sqrt((tl.sum(xf1 * xf1, axis=1) + tl.sum(xf2 * xf2, axis=1)) / D + eps)
        half = cols < D // 2
        if h < HQ:
            w1 = tl.load(qw_ptr + cols, mask=half, other=0.0).to(tl.float32)[None, :]
            w2 = tl.load(qw_ptr + D // 2 + cols, mask=half, other=0.0).to(tl.float32)[None, :]
        else:
            w1 = tl.load(kw_ptr + cols, mask=half, other=0.0).to(tl.float32)[None, :]
            w2 = tl.load(kw_ptr + D // 2 + cols, mask=half, other=0.0).to(tl.float32)[None, :]
        x1 = ((xf1 * inv[:, None]).to(x1.dtype).to(tl.float32) * w1).to(x1.dtype)
        x2 = ((xf2 * inv[:, None]).to(x2.dtype).to(tl.float32) * w2).to(x2.dtype)
    # The tables' second halves only: the angles of dims i and i + D/2 are -a and a (rope_signed_frequencies), so
    # their cosines are equal and their signed sines opposite.
    table = (tokens % seq).to(tl.int64)[:, None] * stride_c + D // 2 + cols[None, :]
    c = tl.load(cos_ptr + table, mask=keep, other=0.0)
    s = tl.load(sin_ptr + table, mask=keep, other=0.0)
    y1 = x1.to(tl.float32) * c - x2.to(tl.float32) * s
    y2 = x2.to(tl.float32) * c + x1.to(tl.float32) * s
    dest = out_ptr + m * stride_o + h * D + cols[None, :]
    tl.store(dest, y1.to(x1.dtype), mask=keep)
    tl.store(dest + D // 2, y2.to(x1.dtype), mask=keep)


ROPE_ROWS_BLOCK_T = 32
"""Tokens per ``_rope_rows_kernel`` program (4 warps: 16 elements of a head dim of 128 per thread)."""


def rope_rows(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    signed_sin: torch.Tensor,
    seq: int,
    heads: tuple[int, int],
    qk_norm: tuple[torch.Tensor, torch.Tensor, float] | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Prefill's QK norm and RoPE of q and k in one launch on the current stream: ``qkv`` [M, (Hq + 2 * Hkv) * D]
    (``heads`` = (Hq, Hkv); per token Hq q heads, then Hkv k heads, then Hkv v heads; rows of any stride, each row
    contiguous), token m at position ``m % seq`` (sequences of ``seq`` tokens one after another); ``cos`` /
    ``signed_sin`` fp32 [>= seq, D] (``rope_tables`` of the positions 0, 1, ..., rows contiguous; only their second
    halves are read: ``rope_tables`` makes the first halves' cosines equal and signed sines opposite to them).
    Returns ``out`` [M, Hq +
    Hkv, D] (qkv's dtype and device, rows of any stride, each row contiguous; by default a new contiguous tensor):
    q's heads, then k's, RMS-normed per head and scaled by their weight first with ``qk_norm`` ``(q_weight [D],
    k_weight [D], eps)``, then rotated: what ``TensorParallelAttention.rotate_qkv`` computes, rounding where it
    rounds (the rotation's fp32 multiply-add may differ in the last bit). v is not read.

    Raises ValueError for tensors that do not fit these shapes (an odd D, a qkv of another width, too few table
    rows, an ``out`` of another shape or dtype).
    """
    hq, hkv = heads
    rows = int(qkv.shape[0]) if qkv.dim() == 2 else -1
    d = int(cos.shape[-1]) if cos.dim() == 2 else 0
    if (
        rows < 0
        or d < 2
        or d % 2
        or qkv.shape[1] != (hq + 2 * hkv) * d
        or (rows and qkv.stride(1) != 1)
        or seq < 1
        or tuple(signed_sin.shape) != tuple(cos.shape)
        or cos.shape[0] < min(seq, rows)
        or cos.dtype != torch.float32
        or signed_sin.dtype != torch.float32
        or cos.stride(1) != 1
        or tuple(signed_sin.stride()) != tuple(cos.stride())
    ):
        raise ValueError(
            f"rope_rows: qkv must be [M, (Hq + 2 * Hkv) * D] = [M, {(hq + 2 * hkv) * d}] with contiguous rows and "
            f"cos / signed_sin fp32 [>= {min(seq, rows)}, D] alike with contiguous rows (D even), got qkv "
            f"{list(qkv.shape)} (strides {list(qkv.stride())}), cos {cos.dtype} {list(cos.shape)}, signed_sin "
            f"{signed_sin.dtype} {list(signed_sin.shape)}, seq {seq}"
        )
    if out is None:
        out = torch.empty((rows, hq + hkv, d), dtype=qkv.dtype, device=qkv.device)
    elif (
        tuple(out.shape) != (rows, hq + hkv, d)
        or out.dtype != qkv.dtype
        or out.device != qkv.device
        or (rows and (out.stride(2) != 1 or out.stride(1) != d))
    ):
        raise ValueError(
            f"rope_rows: out must be a {qkv.dtype} [{rows}, {hq + hkv}, {d}] tensor on {qkv.device} with contiguous "
            f"rows, got {out.dtype} {list(out.shape)} (strides {list(out.stride())}) on {out.device}"
        )
    qw, kw, eps = qk_norm if qk_norm is not None else (cos, cos, 0.0)  # unread without QK norm
    if rows:
        grid = (triton.cdiv(rows, ROPE_ROWS_BLOCK_T), hq + hkv)
        _rope_rows_kernel[grid](
            qkv, cos, signed_sin, qw, kw, out,
            rows, seq, float(eps),
            qkv.stride(0), cos.stride(0), out.stride(0),
            HQ=hq, D=d, BLOCK_T=ROPE_ROWS_BLOCK_T, BLOCK_H=triton.next_power_of_2(d // 2),
            QK_NORM=qk_norm is not None, num_warps=4,
        )  # fmt: skip
    return out


@triton.jit
def _silu_mul_kernel(src_ptr, out_ptr, cols, stride_s, stride_o, BLOCK: tl.constexpr):
    """Program ``(row, block)``: ``silu(src[row, j]) * src[row, cols + j]`` for its block of ``j``. With ``cols`` and
    the row strides multiples of 8 (Triton specializes multiples of 16 elements), each thread loads its 8 bf16 of
    gate and of up as one 16-byte access each."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < cols
    gate = tl.load(src_ptr + row * stride_s + offs, mask=keep, other=0.0)
    up = tl.load(src_ptr + row * stride_s + cols + offs, mask=keep, other=0.0)
    g = gate.to(tl.float32)
    silu = (g / (1.0 + tl.exp(-g))).to(gate.dtype)
    tl.store(out_ptr + row * stride_o + offs, (silu.to(tl.float32) * up.to(tl.float32)).to(gate.dtype), mask=keep)


SILU_BLOCK = 1024
"""Elements of one row per ``_silu_mul_kernel`` program (4 warps: 8 per thread)."""


def silu_mul(gate_up: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(gate) * up`` of ``gate_up`` [M, 2 * I] (gate's columns, then up's: the gated MLP's one gate/up GEMM
    output; rows of any stride, each row contiguous), in one launch on the current stream that reads each input
    element once and writes each output element once (SiLU in fp32 rounded to the dtype, then the product in fp32
    rounded to the dtype, as torch's two ops). A grid of (M, I / ``SILU_BLOCK``) programs: the decode step's few
    rows and prefill's thousands alike. Returns ``out`` (an [M, I] tensor of gate_up's dtype on its device, rows of
    any stride, each row contiguous), by default a new contiguous one.

    Raises ValueError for a ``gate_up`` that is not 2-D with an even number of columns and contiguous rows, or an
    ``out`` that does not fit it.
    """
    if gate_up.dim() != 2 or gate_up.shape[1] % 2 or (gate_up.shape[1] > 1 and gate_up.stride(1) != 1):
        raise ValueError(
            f"silu_mul: gate_up must be [M, 2 * I] with contiguous rows, got shape {list(gate_up.shape)} and strides "
            f"{list(gate_up.stride())}"
        )
    rows, cols = int(gate_up.shape[0]), int(gate_up.shape[1]) // 2
    if out is None:
        out = torch.empty((rows, cols), dtype=gate_up.dtype, device=gate_up.device)
    elif (
        tuple(out.shape) != (rows, cols)
        or out.dtype != gate_up.dtype
        or out.device != gate_up.device
        or (cols > 1 and out.stride(1) != 1)
    ):
        raise ValueError(
            f"silu_mul: out must be a {gate_up.dtype} [{rows}, {cols}] tensor on {gate_up.device} with contiguous "
            f"rows, got {out.dtype} {list(out.shape)} (strides {list(out.stride())}) on {out.device}"
        )
    if rows and cols:
        grid = (rows, triton.cdiv(cols, SILU_BLOCK))
        _silu_mul_kernel[grid](gate_up, out, cols, gate_up.stride(0), out.stride(0), BLOCK=SILU_BLOCK, num_warps=4)
    return out


@triton.jit
def _arrive(state_ptr, programs):
    """(arrival ticket, epoch) of this program in a launch of ``programs``, from the int64 ``state``: the last call's
    epoch in its high 32 bits, this call's arrivals in its low 32 (zero between calls). One atomic add of 1 gives
    both; the program with the last ticket adds ``2^32 - programs`` (the epoch moves on, the arrivals go back to 0),
    after every program of the call read the state, and the next call starts after this kernel ends (stream order):
    eager calls and CUDA-graph replays alike see one epoch per call."""
    state = tl.atomic_add(state_ptr, 1, sem="relaxed", scope="gpu")
    ticket = (state & 0xFFFFFFFF).to(tl.int32)
    if ticket == programs - 1:
        tl.atomic_add(state_ptr, tl.full([], 1 << 32, tl.int64) - programs, sem="relaxed", scope="gpu")
    return ticket, (state >> 32).to(tl.int32) + 1


@triton.jit
def _gather_rope_kernel(
    sym_ptr,
    flags_ptr,
    state_ptr,
    cos_ptr,
    sin_ptr,
    qw_ptr,
    kw_ptr,
    slots_ptr,
    q_ptr,
    k_ptr,
    v_ptr,
    batch,
    eps,
    stride_sr,
    stride_sb,
    stride_cb,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    HQ: tl.constexpr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    BLOCK_H: tl.constexpr,
    QK_NORM: tl.constexpr,
):
    """Program ``r * batch + b``: token ``b``'s row of rank ``r``'s block (its HQ q, HKV k and HKV v heads), read
    from rank ``r``'s copy of the symmetric buffer (over NVLink for a peer, after its flag) as two [BLOCK_H, D/2]
    tiles (each head's halves, which rotate together); q and k normed (QK_NORM) and rotated, v as it is; stored
    where they go, as ``_rope_scatter_kernel`` does. The first program to arrive tells every rank this rank's block
    is in place (the QKV GEMM before this kernel wrote it)."""
    ticket, epoch = _arrive(state_ptr, tl.num_programs(0))
    me = dl.rank()
    if ticket == 0:  # flags[me] = epoch on every rank (release: after the GEMM that wrote this rank's block)
        for peer in range(0, dl.num_ranks()):
            dl.notify(flags_ptr + me, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    pid = tl.program_id(0)
    r = pid // batch
    b = (pid % batch).to(tl.int64)
    heads = tl.arange(0, BLOCK_H)
    cols = tl.arange(0, D // 2)
    keep = (heads < HQ + 2 * HKV)[:, None] & (cols < D // 2)[None, :]
    first = sym_ptr + r.to(tl.int64) * stride_sr + b * stride_sb + heads[:, None] * D + cols[None, :]
    if r != me:
        token = dl.wait(flags_ptr + r, 1, "sys", "acquire", waitValue=epoch)
        first = dl.consume_token(first, token)  # the loads below stay after the wait
    src = dl.symm_at(first, r)
    x1 = tl.load(src, mask=keep, other=0.0)
    x2 = tl.load(src + D // 2, mask=keep, other=0.0)
    _norm_rotate_store(
        x1, x2, r, b, heads, cols, cols < D // 2, keep, cos_ptr, sin_ptr, qw_ptr, kw_ptr, slots_ptr, q_ptr, k_ptr,
        v_ptr, eps,
        stride_cb, stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
        HQ, HKV, D, QK_NORM,
    )  # fmt: skip


def gather_rope(
    sym: torch.Tensor,
    flags: torch.Tensor,
    state: torch.Tensor,
    cos: torch.Tensor,
    signed_sin: torch.Tensor,
    slots: torch.Tensor,
    q_out: torch.Tensor,
    k_store: torch.Tensor,
    v_store: torch.Tensor,
    heads: tuple[int, int],
    qk_norm: tuple[torch.Tensor, torch.Tensor, float] | None = None,
) -> None:
    """``rope_scatter`` of every rank's block, gathered inside the kernel: one launch in place of the sequence-split
    decode's all-reduce of a zero-padded buffer and ``rope_scatter`` (``TensorParallelAttention(decode_gather=
    "fused")``). Every rank calls it together (a collective).

    ``sym`` [W, B, (Hq + 2 * Hkv) * D] on the symmetric heap, rows contiguous: this rank's block ``sym[rank]``
    holds its new q, k, v (written before the call, e.g. by the QKV GEMM); every rank's copy is read only at its own
    block. ``flags`` int32 [W] on the heap, zeroed (and a barrier) before the first call; ``state`` int64 [1] on
    this GPU, zeroed (``_arrive``): both this call site's own, every rank calling it the same number
    of times. The rest as ``rope_scatter`` with R = W. Program ``r * B + b`` reads token ``b``'s row of rank
    ``r``'s block from rank ``r``'s memory, after rank ``r``'s flag holds this call's epoch (its first program to
    arrive sets it on every rank); the block a peer reads is rewritten only by this rank's next call's GEMM, after
    something that waits for the peer's later work (the decode step's flash_decode, whose combine waits for every
    rank's records): the caller's ordering, not checked. Enqueued on the current stream; no host synchronization.
    """
    world, batch = int(sym.shape[0]), int(sym.shape[1])
    hq, hkv = heads
    d = int(q_out.shape[-1])
    qw, kw, eps = qk_norm if qk_norm is not None else (q_out, q_out, 0.0)  # unread without QK norm
    if batch:
        _gather_rope_kernel[(world * batch,)](
            sym, flags, state, cos, signed_sin, qw, kw, slots, q_out, k_store, v_store,
            batch, float(eps),
            sym.stride(0), sym.stride(1), cos.stride(0),
            q_out.stride(0), q_out.stride(1),
            k_store.stride(0), k_store.stride(1), k_store.stride(2),
            v_store.stride(0), v_store.stride(1), v_store.stride(2),
            HQ=hq, HKV=hkv, D=d, BLOCK_H=triton.next_power_of_2(hq + 2 * hkv), QK_NORM=qk_norm is not None,
            num_warps=4,
        )  # fmt: skip


@triton.jit
def _l2_prefetch_kernel(src_ptr, sink_ptr, n, iters, BLOCK: tl.constexpr):
    """Program ``p`` of ``P`` reads blocks ``p, p + P, p + 2P, ...`` of ``BLOCK`` elements of ``src``'s first ``n``
    (all programs together sweep it from its start, as a GEMM's first K steps read a weight's first rows), bypassing
    L1 (``.cg``: the lines stay in L2), and stores the fp32 sum of what it read into ``sink[p]`` (a use of every
    load, so none is dropped)."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(iters):
        offs = (i * programs + pid).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        total += tl.load(src_ptr + offs, mask=offs < n, other=0.0, cache_modifier=".cg").to(tl.float32)
    tl.store(sink_ptr + pid, tl.sum(total, axis=0))


L2_PREFETCH_BLOCK = 16384
"""Elements per ``_l2_prefetch_kernel`` program and iteration (8 warps: 64 per thread, 32 KB of bf16 in flight per
program)."""


def l2_prefetch(src: torch.Tensor, nbytes: int, sink: torch.Tensor) -> torch.Tensor:
    """Read the first ``nbytes`` of ``src`` (a contiguous tensor; all of it when smaller) into the GPU's L2 cache,
    one launch on the current stream, one program per element of ``sink`` (fp32 [P], P >= 1: on a GPU its SM count,
    one program each). Meant to run on a side stream beside a communication kernel, which leaves HBM idle, so that
    the GEMM after it finds the first part of its weight in L2 (``TensorParallelDecoderLayer.decode_prefetch_bytes``).
    Returns ``sink``, each program's fp32 sum of the elements it read (program p reads the blocks p, p + P, ... of
    ``L2_PREFETCH_BLOCK`` elements): a result that uses every load, and what a test checks.

    Raises ValueError for a non-contiguous ``src`` or a ``sink`` that is not a non-empty fp32 vector on its device.
    """
    if not src.is_contiguous():
        raise ValueError(f"l2_prefetch: src must be contiguous, got strides {list(src.stride())}")
    if sink.dim() != 1 or not sink.numel() or sink.dtype != torch.float32 or sink.device != src.device:
        raise ValueError(
            f"l2_prefetch: sink must be a non-empty fp32 vector on {src.device}, got {sink.dtype} {list(sink.shape)} "
            f"on {sink.device}"
        )
    n = min(src.numel(), max(0, nbytes) // src.element_size())
    programs = int(sink.numel())
    iters = triton.cdiv(n, programs * L2_PREFETCH_BLOCK)
    _l2_prefetch_kernel[(programs,)](src, sink, n, iters, BLOCK=L2_PREFETCH_BLOCK, num_warps=8)
    return sink


def fused_kernels(x: torch.Tensor) -> bool:
    """Whether the layers run these Triton kernels on ``x``'s device: on GPUs, and on the CPU under Triton's
    interpreter (``TRITON_INTERPRET=1``, the emulation); elsewhere (the CPU without it) the torch ops they fuse."""
    return x.device.type != "cpu" or os.environ.get("TRITON_INTERPRET") == "1"
