"""``flash_decode(q, k, v, lengths)``: decode attention over a KV cache split across ranks along the sequence,
in one kernel launch: split-KV flash-decode on each rank, the partial results combined inside the kernel.

```python
# q: [B, Hq, 128] (the same on every rank); k, v: [B, Hkv, S_local, 128] (this rank's part of the cache);
# lengths: [B] int32 on the GPU (valid tokens per sequence in this rank's part; may differ per rank and be 0)
out = triton_dist.ops.flash_decode(q, k, v, lengths)      # [B, Hq, 128], attention over every rank's tokens
```

Each producer program takes one (sequence, KV head, split) of this rank's cache, runs flash attention for the
``Hq / Hkv`` query heads of that KV head (grouped-query attention: one pass over K and V serves the whole group) and
produces a partial result: the normalized output and its log-sum-exp per query head. It pushes that record into
every rank's record buffer (stores through ``dl.symm_at``) and sets its flag on every rank (``dl.notify``, a release
after a program barrier). On every rank, ``COMBINERS`` combiner programs per (sequence, KV head), one per quarter of
the head dim, wait for the ``W x splits`` records of their group (``dl.wait``, acquire) and combine their columns
(``out = sum_i e^{lse_i - M} out_i / sum_i e^{lse_i - M}``, ``M`` the maximum, records without tokens weigh 0) in
rank-and-split order, so every rank computes bit-identical outputs and no host-side collective runs.

No deadlock although programs wait for each other: a program's role comes from an arrival ticket (an atomic counter)
rather than its program id. Producers take the first tickets and never wait; combiners take the last ones and wait
only for producers: on their own GPU those hold earlier tickets, so they are already running or done, and on the
others producers run to completion without waiting for anything.

Epochs: one device-side epoch per call, read by every program with its arrival ticket (one atomic add) and advanced,
with the arrivals reset, by the last program to arrive, so CUDA-graph replays advance it like eager calls. Records and
flags are double-buffered by epoch parity: a rank rewrites parity ``p`` at epoch ``e + 2`` only after its kernel of
``e + 1`` finished, which needed every rank's epoch ``e + 1`` records, which each rank produced after its kernel of
``e`` (and its reads of parity ``p``) had ended. Flags hold epochs; a word is only ever set to the current epoch, so
``eq`` cannot match a stale word even when the record layout changes between calls.

The KV cache may live anywhere on this rank's GPU (only the partial records travel); the record buffers are on the
symmetric heap, sized on the first call of each shape to what it needs (at most ``MAX_RECORD_BYTES`` per parity).
The kernel's code is split into ``@triton.jit`` helpers (arrival and role, one split's attention, the record
layout, the combine) that the CPU tests run in Triton's interpreter against SDPA; only the
``dl`` calls stay in the kernel body. Registered as ``torch.ops.triton_dist.flash_decode``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.ops.all_reduce import _notify_every_rank, notify_world, plain_eager
from triton_dist.ops.common.call_epoch import arrive
from triton_dist.ops.common.launch import LaunchPlan, first_launch
from triton_dist.runtime.world.rank_agreement import check_ranks_call_alike

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
HEAD_DIM = 128
MAX_GROUP = 16
"""Query heads per KV head (a tl.dot needs >= 16 rows: the group is padded to 16)."""
ROWS = 16
"""The query rows of one program's tile: the group, padded to what a tl.dot needs."""
RECORD_PAD = 16
"""Floats after a record's [group, 128] output for its per-head log-sum-exp (16 keeps records 64-byte aligned)."""
_RECORD_PAD = tl.constexpr(RECORD_PAD)
MAX_RECORD_BYTES = 64 << 20
"""Per parity, per rank: the most record memory one call may use (batch 64 x 8 KV heads x 16-head groups on 8
ranks needs 33.8 MB with one split per group)."""
MAX_FLAGS = 1 << 16
"""Per parity: the most flags (programs x ranks) one call may use."""
MIN_RECORD_BYTES = 1 << 20
MIN_FLAGS = 1 << 10
MAX_SPLITS = 128
COMBINERS = 4
"""The most combining programs per (sequence, KV head) on each rank (``choose_combiners``), each for ``HEAD_DIM /
COMBINERS`` = 32 of the output's columns (a 128-byte segment of every record row). One combiner per group took 7.25
us to combine 32 records at batch 1, 2 ranks, 64k tokens per rank (2 x H100, in-kernel %globaltimer stamps: eight
dependent steps of four records); four combiners over a quarter of the columns each load every record at once."""
COMBINE_TILE_FLOATS = 8192
"""The most floats a combiner loads per step: an [RG, CHUNK, 32] fp32 tile, 64 registers per thread at 4 warps."""
BLOCK_NS = (16, 32, 64, 128)
INT32_MAX = 2**31 - 1
MAX_LOCAL_LEN = 1 << 30
"""Keeps the kernel's 32-bit token indices (a split's end, a block's last token) below 2^31."""


@dataclass(frozen=True)
class FlashDecodeConfig:
    """``splits`` per (sequence, KV head) on each rank (0: chosen from the shape), key block, warps, stages.

    These defaults (block_n 64) compile without register spills for sm_90 and gfx942 and fit both's shared memory
    (sm_90: 71,680 of 232,448 bytes; gfx942: 65,536 of 65,536); :func:`default_config` picks per target. Other
    combinations may spill (block_n 32 with 8 warps on sm_90) or exceed gfx942's 64 KiB (block_n 128 with 3 or 4
    stages: Triton then refuses the launch)."""

    splits: int = 0
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 3
    combiners: int = 0
    """Combiner programs per (sequence, KV head), each for ``128 / combiners`` of the head dim: 1, 2, 4 or 8 (0: a
    call takes ``choose_combiners``'s count for its batch and GPU)."""

    def __post_init__(self) -> None:
        if not 0 <= self.splits <= MAX_SPLITS:
            raise ValueError(f"flash_decode: splits must be in [0, {MAX_SPLITS}], got {self.splits}")
        if self.block_n not in BLOCK_NS:
            raise ValueError(f"flash_decode: block_n must be one of {list(BLOCK_NS)}, got {self.block_n}")
        if self.num_warps not in (4, 8):  # fewer warps spill registers at block_n >= 64 on sm_90
            raise ValueError(f"flash_decode: num_warps must be 4 or 8, got {self.num_warps}")
        if not 1 <= self.num_stages <= 4:
            raise ValueError(f"flash_decode: num_stages must be in [1, 4], got {self.num_stages}")
        if self.combiners not in (0, 1, 2, 4, 8):
            raise ValueError(f"flash_decode: combiners must be 0 (the default), 1, 2, 4 or 8, got {self.combiners}")

    @property
    def combiner_count(self) -> int:
        """The combiner count ``launch_args`` launches: ``combiners``, or ``COMBINERS`` where it is 0 (a call has
        decided it before, with ``choose_combiners``)."""
        return self.combiners or COMBINERS


def default_config(backend: str) -> FlashDecodeConfig:
    """The config a call without one uses on a Triton backend (``"cuda"`` / ``"hip"``).

    NVIDIA: 128-token key blocks, measured on one H200 (world size 1, bench/flash_decode.py, graphed): 8-13% faster
    than 64-token blocks at batch 1 (32k-256k tokens), within 1% at batch 8 (bench/results/flash_decode_1gpu.md).
    AMD keeps 64 (128 at 3 stages exceeds its 64 KiB of LDS)."""
    return FlashDecodeConfig(block_n=128) if backend == "cuda" else FlashDecodeConfig()


# ---------------------------------------------------------------------------------------------------------------
# Kernel helpers (no dl calls: test_ops_decode_flash_decode_emulation.py runs them in Triton's interpreter)


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
    barriers: about 2.9 us per step on one H200, bench/results/flash_decode_anatomy.md). What costs is the number of
    dependent steps (about 0.9 us each on 2 x H100): ``combine_chunk`` makes it one for up to 32 records of an
    8-head group."""
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
        _notify_every_rank(flags + slot, epoch, ranks, WORLD)
    else:  # combine slice `index` of the group's W x SPLITS records, in (rank, split) order on every rank
        SLICE: tl.constexpr = D // COMBINERS
        first = _slot(group, 0, ranks, 0, SPLITS)
        token = dl.wait(flags + first, ranks * SPLITS, "sys", "acquire", waitValue=epoch)
        base = dl.consume_token(records + first * RECORD, token)
        result = _combine_records(base, ranks * SPLITS, index * SLICE, GROUP, RG, D, SLICE, CHUNK)
        _store_output(out_ptr, seq, head, stride_ob, stride_oh, result, index * SLICE, GROUP, RG, SLICE)


# ---------------------------------------------------------------------------------------------------------------
# Host side


@dataclass(frozen=True)
class _Workspace:
    records: torch.Tensor
    """fp32 [2, floats per parity], symmetric."""
    flags: torch.Tensor
    """int32 [2, flags per parity], symmetric, zeroed."""
    state: torch.Tensor
    """int64 [1]: the call state of ``ops/common/call_epoch.py`` (epoch and arrivals); this rank only."""

    def fits(self, floats: int, flags: int) -> bool:
        return floats <= self.records.shape[1] and flags <= self.flags.shape[1]


@dataclass
class _WorldState:
    """What the first calls of each shape decided in one world: the shapes the ranks agreed on and the workspace
    each uses. Workspaces are never freed (CUDA graphs may hold their addresses); each has its own epoch, so calls
    on different workspaces never share a flag."""

    world: rt.World
    agreed: dict[tuple, _Workspace] = field(default_factory=dict)
    workspaces: list[_Workspace] = field(default_factory=list)


_state: _WorldState | None = None


def record_floats(group: int) -> int:
    """Floats of one record (a group's output rows and log-sum-exps)."""
    return group * HEAD_DIM + RECORD_PAD


def combine_rows(group: int) -> int:
    """The combine's rows (``RG``): the group padded to a power of two (no tl.dot there: no 16-row minimum)."""
    return triton.next_power_of_2(group)


def combine_chunk(group: int, records: int, combiners: int = COMBINERS) -> int:
    """Records a combiner loads per step (``CHUNK``) of the ``records`` (W x splits) it combines: all of them, up
    to an [RG, CHUNK, 128 / combiners] fp32 tile of ``COMBINE_TILE_FLOATS`` (with 4 combiners, the 32 records of an
    8-head group at 2 ranks x 16 splits in one step)."""
    most = max(1, COMBINE_TILE_FLOATS // (combine_rows(group) * (HEAD_DIM // combiners)))
    return min(most, triton.next_power_of_2(max(1, records)))


def workspace_need(batch: int, kv_heads: int, group: int, splits: int, world_size: int) -> tuple[int, int]:
    """(record floats, flags) per parity of one call: a record and a flag per (sequence, KV head, rank, split)."""
    slots = batch * kv_heads * world_size * splits
    return slots * record_floats(group), slots


def fits_workspace(batch: int, kv_heads: int, group: int, splits: int, world_size: int) -> bool:
    floats, flags = workspace_need(batch, kv_heads, group, splits, world_size)
    return floats * 4 <= MAX_RECORD_BYTES and flags <= MAX_FLAGS


def choose_splits(
    batch: int, kv_heads: int, group: int, local_len: int, world_size: int, sms: int, block_n: int
) -> int:
    """Splits per (sequence, KV head), at least two key blocks per split, within the workspace limits (1 when even
    one split does not fit: the call then raises, naming the workspace).

    Whole waves of producers: one per SM when there are few (sequence, KV head) groups (at most a quarter of the
    SMs: every combiner then has many splits to combine, so fewer, longer producers win), else two per SM. Measured
    on one H200 (world size 1, GQA 64/8, bench/results/flash_decode_1gpu.md, forced split counts, graphed): batch 1
    was fastest at 16 splits (128 programs) at 32k and 128k tokens (the earlier rule's 33 took 1.6x / 1.1x as long),
    batch 8 at 4 splits (256 programs) at 32k, 128k and 256k (the earlier 5: 1.08-1.10x)."""
    groups = batch * kv_heads
    if groups == 0:
        return 1
    per_sm = 1 if 4 * groups <= sms else 2
    splits = max(1, min(MAX_SPLITS, per_sm * sms // groups))
    splits = min(splits, max(1, local_len // (2 * block_n)))
    by_records = MAX_RECORD_BYTES // (groups * world_size * record_floats(group) * 4)
    by_flags = MAX_FLAGS // (groups * world_size)
    return max(1, min(splits, by_records, by_flags))


def choose_combiners(groups: int, sms: int) -> int:
    """Combiner programs per (sequence, KV head): ``COMBINERS`` while the groups' combiners fit one wave of the
    ``sms`` SMs, else the largest power of two that does (at least 1). A combiner takes an SM slot like a producer
    (with the default key block the kernel's shared memory leaves room for one program per SM on sm_90), so with
    many groups more combiners would cost more than the shorter combine saves. Measured on 2 x H100 (GQA 64/8,
    bench/results/flash_decode_2xH100.md and docs/results/2026-11-26-2xH100-session16.md): at batch 1 (8 groups) 2,
    4 and 8 combiners took 99.0 / 98.7 / 98.8 µs at 128k tokens, 1 took 105.1; at batch 8 (64 groups) 2 were
    0.3-2.2 µs faster than 4 (32k-256k); batches of 17 and more (over 132 groups on 132 SMs) get 1, not measured."""
    fit = max(1, sms // max(1, groups))
    return min(COMBINERS, 1 << (fit.bit_length() - 1))


def needs_wide_offsets(k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether a token's element offset within a (sequence, KV head) can pass int32 (the kernel's ``WIDE``)."""
    local_len = k.shape[2]
    return any((local_len - 1) * t.stride(2) + HEAD_DIM > INT32_MAX for t in (k, v))


def check_scale(scale: float | None) -> float:
    """The softmax scale a call uses: ``scale`` (a finite real number) or 1/sqrt(128)."""
    if scale is None:
        return 1.0 / math.sqrt(HEAD_DIM)
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise TypeError(f"flash_decode: scale must be a float or None, got {type(scale).__name__}")
    if not math.isfinite(scale):
        raise ValueError(f"flash_decode: scale must be finite, got {scale}")
    return float(scale)


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor) -> None:
    """Raise a TypeError/ValueError naming the problem (shapes, dtypes, layouts, devices; fake tensors pass
    through). The values of ``lengths`` are not checked (that would need a host synchronization): the kernel
    clamps them to ``[0, local_len]``."""
    for name, t in (("q", q), ("k", k), ("v", v), ("lengths", lengths)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"flash_decode: {name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 3:
        raise ValueError(f"flash_decode: q must be [batch, q_heads, head_dim], got shape {list(q.shape)}")
    if k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"flash_decode: k and v must be [batch, kv_heads, local_len, head_dim], got {list(k.shape)} and "
            f"{list(v.shape)}"
        )
    if k.shape != v.shape:
        raise ValueError(f"flash_decode: k and v must have the same shape, got {list(k.shape)} and {list(v.shape)}")
    if q.dtype not in SUPPORTED_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(
            f"flash_decode: q, k, v must all be bfloat16 or all float16, got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    batch, q_heads, head_dim = q.shape
    if head_dim != HEAD_DIM or k.shape[3] != HEAD_DIM:
        raise ValueError(f"flash_decode: only head_dim {HEAD_DIM} is supported, got q {head_dim}, k/v {k.shape[3]}")
    if k.shape[0] != batch:
        raise ValueError(f"flash_decode: q has batch {batch} but k/v have {k.shape[0]}")
    kv_heads = k.shape[1]
    if kv_heads == 0 or q_heads == 0 or q_heads % kv_heads:
        raise ValueError(f"flash_decode: q_heads ({q_heads}) must be a positive multiple of kv_heads ({kv_heads})")
    if q_heads // kv_heads > MAX_GROUP:
        raise ValueError(f"flash_decode: at most {MAX_GROUP} query heads per KV head, got {q_heads // kv_heads}")
    if k.shape[2] > MAX_LOCAL_LEN:
        raise ValueError(f"flash_decode: local_len must be at most 2^30, got {k.shape[2]}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise ValueError(f"flash_decode: {name} must have a contiguous last dim, got strides {t.stride()}")
    if lengths.dtype != torch.int32 or lengths.shape != (batch,):
        raise ValueError(
            f"flash_decode: lengths must be an int32 tensor of shape [{batch}], got {lengths.dtype} "
            f"{list(lengths.shape)}"
        )
    if batch > 1 and lengths.stride(0) != 1:
        raise ValueError(f"flash_decode: lengths must be contiguous, got stride {lengths.stride(0)}")
    devices = {t.device for t in (q, k, v, lengths)}
    if len(devices) > 1:
        raise ValueError(f"flash_decode: q, k, v and lengths must be on one device, got {sorted(map(str, devices))}")


def check_out(q: torch.Tensor, out: torch.Tensor) -> None:
    """Raise a ValueError unless ``out`` can take the result for ``q``: q's shape, dtype and device, last dim
    contiguous."""
    if out.shape != q.shape or out.dtype != q.dtype or out.stride(-1) != 1 or out.device != q.device:
        raise ValueError(f"flash_decode: out must be like q {list(q.shape)} {q.dtype}, got {list(out.shape)}")


def _world_state(world: rt.World) -> _WorldState:
    global _state
    if _state is None or _state.world is not world:
        _state = _WorldState(world)  # a new world: nothing agreed, no workspace (the old heap is gone)
    return _state


def _new_workspace(floats: int, flags: int) -> _Workspace:
    floats = min(max(triton.next_power_of_2(floats), MIN_RECORD_BYTES // 4), MAX_RECORD_BYTES // 4)
    flags = min(max(triton.next_power_of_2(flags), MIN_FLAGS), MAX_FLAGS)
    workspace = _Workspace(
        rt.empty(2, floats, dtype=torch.float32),
        rt.zeros(2, flags, dtype=torch.int32),
        rt.zeros(1, dtype=torch.int64),
    )
    rt.barrier()  # zeroed flags everywhere before any rank's kernel sets one
    return workspace


def _agree(q: torch.Tensor, k: torch.Tensor, config: FlashDecodeConfig, splits: int, sm_scale: float) -> _Workspace:
    """The workspace of this call's shape. On the first call of a shape (a collective): check that every rank
    calls with the same shapes, dtype, config, splits and scale, raise on every rank naming the first that differs,
    then pick or allocate (collectively: every rank makes the same decisions in the same order) the workspace."""
    world = rt.current_world()
    if q.device != world.device:
        raise ValueError(f"flash_decode: q is on {q.device}, but this rank's symmetric heap is on {world.device}")
    state = _world_state(world)
    signature = (tuple(q.shape), tuple(k.shape), q.dtype, config, splits, sm_scale)
    found = state.agreed.get(signature)
    if found is not None:
        return found
    check_ranks_call_alike(
        world.group,
        world.rank,
        (list(q.shape), list(k.shape), str(q.dtype), asdict(config), splits, sm_scale),
        op="flash_decode",
        fields="(q shape, k/v shape, dtype, config, splits, scale)",
        disagreement="ranks disagree on the shapes",
        capture_message="flash_decode: first call with these shapes during CUDA-graph capture; the ranks' agreement "
        "is checked (a collective) on the first call of each shape: call it once before capturing",
    )
    batch, q_heads, _ = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    floats, flags = workspace_need(batch, kv_heads, group, splits, world.world_size)
    if not fits_workspace(batch, kv_heads, group, splits, world.world_size):  # after the agreement: on every rank
        raise ValueError(
            f"flash_decode: batch {batch} x {kv_heads} KV heads x {splits} splits on {world.world_size} ranks needs "
            f"{floats * 4} bytes of records and {flags} flags per call, more than the workspace's "
            f"{MAX_RECORD_BYTES} bytes and {MAX_FLAGS} flags: use fewer splits or a smaller batch per call"
        )
    workspace = next((ws for ws in state.workspaces if ws.fits(floats, flags)), None)
    if workspace is None:
        workspace = _new_workspace(floats, flags)
        state.workspaces.append(workspace)
    state.agreed[signature] = workspace
    return workspace


_plans: dict[tuple, LaunchPlan] = {}
_sms: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    index = device.index
    if index not in _sms:
        _sms[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _sms[index]


def _splits_for(q: torch.Tensor, k: torch.Tensor, config: FlashDecodeConfig, world_size: int) -> int:
    if config.splits:
        return config.splits
    batch, q_heads, _ = q.shape
    kv_heads = k.shape[1]
    sms = _sm_count(q.device)
    return choose_splits(batch, kv_heads, q_heads // kv_heads, k.shape[2], world_size, sms, config.block_n)


def _with_combiners(q: torch.Tensor, k: torch.Tensor, config: FlashDecodeConfig) -> FlashDecodeConfig:
    """``config`` with its combiner count decided (``choose_combiners`` unless the config forces one)."""
    if config.combiners:
        return config
    return replace(config, combiners=choose_combiners(q.shape[0] * k.shape[1], _sm_count(q.device)))


@dataclass(frozen=True)
class _Prepared:
    config: FlashDecodeConfig
    splits: int
    sm_scale: float
    workspace: _Workspace


_DEFAULT_CONFIG = default_config("hip" if torch.version.hip else "cuda")
"""What a call without a config uses on this build's backend."""


def _prepare(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    scale: float | None,
    config: FlashDecodeConfig | None,
) -> _Prepared:
    """Everything before the launch: the local checks, the split count, the ranks' agreement and the workspace."""
    check_inputs(q, k, v, lengths)
    return _prepare_checked(q, k, check_scale(scale), config)


def _prepare_checked(q: torch.Tensor, k: torch.Tensor, sm_scale: float, config: FlashDecodeConfig | None) -> _Prepared:
    """``_prepare`` after the local checks: q on the heap's device, the split count, the agreement, the workspace."""
    world = rt.current_world()
    if q.device != world.device:
        raise ValueError(f"flash_decode: q is on {q.device}, but this rank's symmetric heap is on {world.device}")
    config = _with_combiners(q, k, config or _DEFAULT_CONFIG)  # the count joins the ranks' agreement
    splits = _splits_for(q, k, config, world.world_size)
    return _Prepared(config, splits, sm_scale, _agree(q, k, config, splits, sm_scale))


def _run(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    out: torch.Tensor,
    scale: float | None,
    config: FlashDecodeConfig | None = None,
) -> None:
    check_inputs(q, k, v, lengths)
    sm_scale = check_scale(scale)
    check_out(q, out)
    _run_checked(q, k, v, lengths, out, sm_scale, config)


def _run_checked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    out: torch.Tensor,
    sm_scale: float,
    config: FlashDecodeConfig | None,
) -> None:
    """``_run`` after ``check_inputs``, ``check_scale`` (which gave ``sm_scale``) and ``check_out`` passed.

    A call whose key has a plan of the current world launches it at once: the key holds everything the steps
    between the checks and the launch read (the shapes the split count and the agreement use, the strides and
    16-byte alignments Triton specializes on, dtype, device, the config argument and the scale), and those steps
    gave this plan for it. Otherwise the call takes them (``_prepare_checked``: the agreement on a new shape) and
    launches through Triton, keeping the plan."""
    world = rt.current_world()
    key = (
        q.shape,
        k.shape,
        q.stride(),
        k.stride(),
        v.stride(),
        out.stride(),
        q.data_ptr() % 16 == 0,
        k.data_ptr() % 16 == 0,
        v.data_ptr() % 16 == 0,
        lengths.data_ptr() % 16 == 0,
        out.data_ptr() % 16 == 0,
        q.dtype,
        q.device,
        config,
        sm_scale,
    )
    plan = _plans.get(key)
    if plan is not None and plan.world is world:
        plan.launch(q.device, q, k, v, lengths, out)
        return
    prepared = _prepare_checked(q, k, sm_scale, config)
    if q.shape[0] == 0:
        return
    grid, named, options = launch_args(q, k, v, lengths, out, prepared, world.world_size)
    with torch.cuda.device(q.device):
        _plans[key] = first_launch(_flash_decode_kernel, grid, named, 5, **options)


def launch_args(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    out: torch.Tensor,
    prepared: _Prepared,
    world_size: int,
) -> tuple[tuple[int, int, int], dict, dict]:
    """(grid, every kernel argument by name, launch options) of a checked call: one program per (sequence, KV
    head, split)."""
    check_out(q, out)
    config, ws = prepared.config, prepared.workspace
    batch, q_heads, _ = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    named = {
        "q_ptr": q,
        "k_ptr": k,
        "v_ptr": v,
        "len_ptr": lengths,
        "out_ptr": out,
        "rec_ptr": ws.records,
        "flags_ptr": ws.flags,
        "state_ptr": ws.state,
        "groups": batch * kv_heads,
        "kv_heads": kv_heads,
        "local_len": k.shape[2],
        "stride_qb": q.stride(0),
        "stride_qh": q.stride(1),
        "stride_kb": k.stride(0),
        "stride_kh": k.stride(1),
        "stride_ks": k.stride(2),
        "stride_vb": v.stride(0),
        "stride_vh": v.stride(1),
        "stride_vs": v.stride(2),
        "stride_ob": out.stride(0),
        "stride_oh": out.stride(1),
        "sm_scale": prepared.sm_scale,
        "rec_parity_stride": ws.records.shape[1],
        "flag_parity_stride": ws.flags.shape[1],
        "SPLITS": prepared.splits,
        "GROUP": group,
        "ROWS": ROWS,
        "D": HEAD_DIM,
        "BLOCK_N": config.block_n,
        "WIDE": needs_wide_offsets(k, v),
        "RG": combine_rows(group),
        "CHUNK": combine_chunk(group, world_size * prepared.splits, config.combiner_count),
        "WORLD": notify_world(world_size),
        "COMBINERS": config.combiner_count,
    }
    grid = (batch * kv_heads * (prepared.splits + config.combiner_count), 1, 1)
    return grid, named, {"num_warps": config.num_warps, "num_stages": config.num_stages}


@torch.library.custom_op("triton_dist::flash_decode", mutates_args=())
def _flash_decode_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    return _checked_call(q, k, v, lengths, scale)


@_flash_decode_op.register_fake
def _flash_decode_fake(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    check_inputs(q, k, v, lengths)
    check_scale(scale)
    return torch.empty_like(q, memory_format=torch.contiguous_format)


def flash_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, *, scale: float | None = None
) -> torch.Tensor:
    """Attention of one query token per sequence over a KV cache split across the ranks along the sequence.

    ``q``: [batch, q_heads, 128], the same on every rank; ``k``, ``v``: [batch, kv_heads, local_len, 128], this
    rank's part of the cache, anywhere in this GPU's memory, any strides with a contiguous last dim (``q_heads`` a
    positive multiple of ``kv_heads``, at most 16 per KV head; query head ``h`` reads KV head ``h // (q_heads /
    kv_heads)``, as ``scaled_dot_product_attention(..., enable_gqa=True)``); ``lengths``: contiguous int32 [batch]
    on the same GPU, how many of this rank's first ``local_len`` positions hold tokens for each sequence (0
    allowed; values outside ``[0, local_len]`` are clamped, not checked: that would need a host synchronization).
    bf16 or fp16; ``scale`` defaults to 1/sqrt(128). Returns [batch, q_heads, 128] on every rank, bit-identical
    across ranks: softmax(q K^T scale) V over the union of every rank's valid tokens (order does not matter for
    one query). A sequence with no tokens anywhere gives zeros.

    Every rank calls it with the same shapes, dtype and scale, in the same order. The first call of each shape
    checks that collectively (a difference raises on every rank, naming it); later calls skip the check, so a rank
    that repeats a shape the others have moved on from is not caught (the others wait for its records). One
    launch, no host synchronization; calls must not run concurrently on two streams. CUDA-graph capture works
    after one eager call of the shape.
    """
    if isinstance(q, torch.Tensor) and not plain_eager(q):
        return torch.ops.triton_dist.flash_decode(q, k, v, lengths, scale)
    return _checked_call(q, k, v, lengths, scale)


def _checked_call(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float | None
) -> torch.Tensor:
    """The op's implementation: the checks, a new output, the launch."""
    check_inputs(q, k, v, lengths)
    sm_scale = check_scale(scale)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    _run_checked(q, k, v, lengths, out, sm_scale, None)  # out is new, like q by construction: no check_out
    return out
