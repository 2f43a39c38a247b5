"""The ``flash_decode`` kernel and its ``@triton.jit`` helpers (the package docstring says what they do and why the
kernel cannot deadlock).

The helpers make no ``dl`` calls: test_ops_decode_flash_decode_emulation.py runs them in Triton's interpreter
against SDPA; only the ``dl`` calls stay in the kernel body.
"""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.common.call_epoch import arrive
from triton_dist.ops.common.flags import notify_every_rank
from triton_dist.ops.flash_decode.config import RECORD_PAD

_RECORD_PAD = tl.constexpr(RECORD_PAD)


@triton.jit
def _role(ticket, groups, SPLITS: tl.constexpr, COMBINERS: tl.constexpr):
    """(group, index, producer) of a ticket: tickets ``[0, groups * SPLITS)`` are the producers, ``index`` their
    split; the last ``groups * COMBINERS`` tickets are the combiners (so they start after every producer), ``index``
    the slice of the columns each combines."""
    producers = groups * SPLITS
    producer = ticket < producers
    if producer:
        group = ticket // SPLITS
        index = ticket % SPLITS
    else:
        group = (ticket - producers) // COMBINERS
        index = (ticket - producers) % COMBINERS
    return group, index, producer


@triton.jit
def _slot(group, rank, ranks, split, SPLITS: tl.constexpr):
    """Record and flag index of (group, rank, split): a group's ``ranks x SPLITS`` slots are consecutive."""
    return (group * ranks + rank) * SPLITS + split


@triton.jit
def _epoch_buffers(rec_ptr, flags_ptr, epoch, rec_parity_stride, flag_parity_stride):
    """The record buffer and flags of this epoch's parity."""
    parity = epoch % 2
    return rec_ptr + parity * rec_parity_stride, flags_ptr + parity * flag_parity_stride


@triton.jit
def _split_attention(
    q_ptr,
    k_ptr,
    v_ptr,
    len_ptr,
    seq,
    head,
    split,
    local_len,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    sm_scale,
    SPLITS: tl.constexpr,
    GROUP: tl.constexpr,
    ROWS: tl.constexpr,
    D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Flash attention of query heads ``head * GROUP ..`` of sequence ``seq`` over split ``split`` of this rank's
    valid tokens of KV head ``head``: (output normalized by its own softmax sum [ROWS, D], log-sum-exp [ROWS]);
    a split without tokens gives (0, -inf). ``seq`` and ``head`` are int64; ``WIDE``: token offsets in 64 bits
    (``needs_wide_offsets``)."""
    rows = tl.arange(0, ROWS)
    dims = tl.arange(0, D)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < GROUP
    q = tl.load(
        q_ptr + seq * stride_qb + (head * GROUP + rows)[:, None] * stride_qh + dims[None, :],
        mask=row_ok[:, None],
        other=0.0,
    )
    # A length outside [0, local_len] is clamped: the kernel never reads outside this rank's cache.
    length = tl.minimum(tl.maximum(tl.load(len_ptr + seq), 0), local_len)
    # Splits are whole key blocks, so only a split's last block is partial.
    per_split = tl.cdiv(tl.cdiv(length, SPLITS), BLOCK_N) * BLOCK_N
    start = split * per_split
    end = tl.minimum(length, start + per_split)
    m = tl.full([ROWS], float("-inf"), dtype=tl.float32)
    denom = tl.zeros([ROWS], dtype=tl.float32)
    acc = tl.zeros([ROWS, D], dtype=tl.float32)
    k_base = k_ptr + seq * stride_kb + head * stride_kh
    v_base = v_ptr + seq * stride_vb + head * stride_vh
    for n0 in range(start, end, BLOCK_N):
        if WIDE:  # token * stride may pass 2^31 (a strided cache, [B, S, H, D] viewed as [B, H, S, D], at 512k)
            tokens = cols.to(tl.int64) + n0
        else:  # 32-bit offsets (48 fewer registers on sm_90 than 64-bit ones), exact while they fit
            tokens = n0 + cols
        valid = tokens < end
        k = tl.load(k_base + tokens[:, None] * stride_ks + dims[None, :], mask=valid[:, None], other=0.0)
        v = tl.load(v_base + tokens[:, None] * stride_vs + dims[None, :], mask=valid[:, None], other=0.0)
        scores = tl.dot(q, tl.trans(k)) * sm_scale
        scores = tl.where(valid[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, 1))  # finite: every block has a valid first token
        alpha = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        denom = denom * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    has_tokens = denom > 0
    partial = acc / tl.where(has_tokens, denom, 1.0)[:, None]
    lse = tl.where(has_tokens, m + tl.log(tl.where(has_tokens, denom, 1.0)), float("-inf"))
    return partial, lse


@triton.jit
def _store_record(record_ptr, partial, lse, GROUP: tl.constexpr, ROWS: tl.constexpr, D: tl.constexpr):
    """A record: the group's [GROUP, D] fp32 output rows, then its GROUP log-sum-exps (``GROUP * D + 16`` floats)."""
    rows = tl.arange(0, ROWS)
    dims = tl.arange(0, D)
    row_ok = rows < GROUP
    tl.store(record_ptr + rows[:, None] * D + dims[None, :], partial, mask=row_ok[:, None])
    tl.store(record_ptr + GROUP * D + rows, lse, mask=row_ok)


@triton.jit
def _combine_records(
    base,
    count,
    first_col,
    GROUP: tl.constexpr,
    RG: tl.constexpr,
    D: tl.constexpr,
    SLICE: tl.constexpr,
    CHUNK: tl.constexpr,
):
    """Columns ``[first_col, first_col + SLICE)`` of the softmax-weighted mean of ``count`` consecutive records from
    ``base``: [RG, SLICE] fp32 (``RG``: the group padded to a power of two), rows without tokens in any record are
    0. ``CHUNK`` records per step, loaded together (their loads overlap; the steps are what is sequential). A
    running maximum keeps every exponent <= 0; records with lse = -inf get weight 0 (no -inf - -inf). The order is
    fixed, so every rank gets the same bits.

    The tiles are [row, record, dim] with the record axis second (with records first, each step paid eight
    barriers). What costs is the number of dependent steps: ``combine_chunk`` makes it one for up to 32 records of
    an 8-head group."""
    RECORD: tl.constexpr = GROUP * D + _RECORD_PAD
    chunk = tl.arange(0, CHUNK)
    rows = tl.arange(0, RG)
    dims = first_col + tl.arange(0, SLICE)
    row_ok = rows < GROUP
    # The tensors keep the [row, record, dim] tile's layout where Triton lets them (size-1 axes where a value is per
    # row or per record). With a 32-column slice Triton spreads the warps over rows and records and loads the
    # log-sum-exps in a layout of their own: a step converts the weights once (two small layout conversions).
    best = tl.full([RG, 1], float("-inf"), dtype=tl.float32)
    weight = tl.zeros([RG, 1], dtype=tl.float32)
    total = tl.zeros([RG, 1, SLICE], dtype=tl.float32)
    for first in range(0, count, CHUNK):
        index = first + chunk
        ok = row_ok[:, None] & (index < count)[None, :]  # [RG, CHUNK]
        records = base + index[None, :] * RECORD  # [1, CHUNK]
        lse = tl.load(records + GROUP * D + rows[:, None], mask=ok, other=float("-inf"))
        outs = tl.load(
            records[:, :, None] + rows[:, None, None] * D + dims[None, None, :], mask=ok[:, :, None], other=0.0
        )
        best_new = tl.maximum(best, tl.max(lse, 1, keep_dims=True))
        empty = best_new == float("-inf")  # no tokens so far for this head: nothing to rescale
        scale_old = tl.where(empty, 0.0, tl.exp(best - best_new))  # [RG, 1]
        w = tl.where(empty, 0.0, tl.exp(lse - best_new))  # [RG, CHUNK]
        weight = weight * scale_old + tl.sum(w, 1, keep_dims=True)
        total = total * scale_old[:, :, None] + tl.sum(w[:, :, None] * outs, 1, keep_dims=True)
        best = best_new
    return tl.sum(total / tl.where(weight > 0, weight, 1.0)[:, :, None], 1)  # [RG, SLICE] (a sum over one record)


@triton.jit
def _store_output(
    out_ptr,
    seq,
    head,
    stride_ob,
    stride_oh,
    result,
    first_col,
    GROUP: tl.constexpr,
    RG: tl.constexpr,
    SLICE: tl.constexpr,
):
    """Columns ``[first_col, first_col + SLICE)`` of the group's output rows."""
    rows = tl.arange(0, RG)
    dims = first_col + tl.arange(0, SLICE)
    out_ptrs = out_ptr + seq * stride_ob + (head * GROUP + rows)[:, None] * stride_oh + dims[None, :]
    tl.store(out_ptrs, result.to(out_ptr.dtype.element_ty), mask=(rows < GROUP)[:, None])


@triton.jit
def _flash_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    len_ptr,
    out_ptr,
    rec_ptr,
    flags_ptr,
    state_ptr,
    groups,
    kv_heads,
    local_len,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kh,
    stride_ks,
    stride_vb,
    stride_vh,
    stride_vs,
    stride_ob,
    stride_oh,
    sm_scale,
    rec_parity_stride,
    flag_parity_stride,
    SPLITS: tl.constexpr,
    GROUP: tl.constexpr,
    ROWS: tl.constexpr,
    D: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WIDE: tl.constexpr,
    RG: tl.constexpr,
    CHUNK: tl.constexpr,
    WORLD: tl.constexpr,
    COMBINERS: tl.constexpr,
):
    me = dl.rank()
    ranks = dl.num_ranks()
    ticket, epoch = arrive(state_ptr, groups * (SPLITS + COMBINERS))
    group, index, producer = _role(ticket, groups, SPLITS, COMBINERS)
    seq = (group // kv_heads).to(tl.int64)  # 64-bit offsets: a long cache exceeds 2^31 elements
    head = (group % kv_heads).to(tl.int64)
    RECORD: tl.constexpr = GROUP * D + _RECORD_PAD
    records, flags = _epoch_buffers(rec_ptr, flags_ptr, epoch, rec_parity_stride, flag_parity_stride)
    if producer:
        partial, lse = _split_attention(
            q_ptr, k_ptr, v_ptr, len_ptr, seq, head, index, local_len,
            stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs, sm_scale,
            SPLITS, GROUP, ROWS, D, BLOCK_N, WIDE,
        )  # fmt: skip
        # Push the record into slot (group, me, split) of every rank, then flag it there (release after a barrier).
        slot = _slot(group, me, ranks, index, SPLITS)
        for peer in range(0, ranks):
            _store_record(dl.symm_at(records + slot * RECORD, peer), partial, lse, GROUP, ROWS, D)
        notify_every_rank(flags + slot, epoch, ranks, WORLD)
    else:  # combine slice `index` of the group's W x SPLITS records, in (rank, split) order on every rank
        SLICE: tl.constexpr = D // COMBINERS
        first = _slot(group, 0, ranks, 0, SPLITS)
        token = dl.wait(flags + first, ranks * SPLITS, "sys", "acquire", waitValue=epoch)
        base = dl.consume_token(records + first * RECORD, token)
        result = _combine_records(base, ranks * SPLITS, index * SLICE, GROUP, RG, D, SLICE, CHUNK)
        _store_output(out_ptr, seq, head, stride_ob, stride_oh, result, index * SLICE, GROUP, RG, SLICE)
