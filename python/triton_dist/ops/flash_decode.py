"""``flash_decode(q, k, v, lengths)``: decode attention over a KV cache split across ranks along the sequence,
in one kernel launch: split-KV flash-decode on each rank, the partial results combined inside the kernel.

```python
# q: [B, Hq, 128] (the same on every rank); k, v: [B, Hkv, S_local, 128] (this rank's part of the cache);
# lengths: [B] int32 on the GPU (valid tokens per sequence in this rank's part; may differ per rank and be 0)
out = triton_dist.ops.flash_decode(q, k, v, lengths)      # [B, Hq, 128], attention over every rank's tokens
```

Each program takes one (sequence, KV head, split) of this rank's cache, runs flash attention for the ``Hq / Hkv``
query heads of that KV head (grouped-query attention: one pass over K and V serves the whole group) and produces a
partial result: the normalized output and its log-sum-exp per query head. It pushes that record into every rank's
record buffer (16-byte stores through ``dl.symm_at``) and sets its flag on every rank (``dl.notify``). On every rank
the program of split 0 of each (sequence, KV head) then waits for the ``W x splits`` records of its group
(``dl.wait``) and combines them (``out = sum_i e^{lse_i - M} out_i / sum_i e^{lse_i - M}``) in rank-and-split order,
so every rank computes bit-identical outputs and no host-side collective runs.

No deadlock although programs wait for each other: a program's role comes from an arrival ticket (an atomic counter)
rather than its program id; producers (splits 1..) take the first tickets and the combining programs the last, so
a waiting program only ever waits for programs that are already running or done, on its GPU and on the others.

Epochs: one device-side epoch per call (read by every program, advanced by the last program to finish, with the
ticket counters reset), so CUDA-graph replays advance it like eager calls. Records and flags are double-buffered by
epoch parity: a rank rewrites parity ``p`` at epoch ``e + 2`` only after its kernel of ``e + 1`` finished, which
needed every rank's epoch ``e + 1`` records, which each rank produced after its kernel of ``e`` (and its reads of
parity ``p``) had ended. Flags hold epochs; a word is only ever set to the current epoch, so ``eq`` cannot match a
stale word even when the record layout changes between calls.

The KV cache may live anywhere (only the partial records travel); the record buffer is on the symmetric heap.
Registered as ``torch.ops.triton_dist.flash_decode``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.ops.all_reduce import _notify_every_rank, notify_world, plain_eager
from triton_dist.ops.launch_plan import LaunchPlan, first_launch
from triton_dist.runtime.world.rank_agreement import check_ranks_call_alike

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
HEAD_DIM = 128
MAX_GROUP = 16
"""Query heads per KV head (a tl.dot needs >= 16 rows: the group is padded to 16)."""
RECORD_PAD = 16
"""Floats after a record's [group, 128] output for its per-head log-sum-exp (16 keeps records 64-byte aligned)."""
RECORD_CAPACITY_BYTES = 32 << 20
"""Per parity, per rank: the records of one call (programs x ranks x record) must fit."""
FLAG_CAPACITY = 1 << 16
"""Flags per parity: programs x ranks must fit."""
MAX_SPLITS = 128


@dataclass(frozen=True)
class FlashDecodeConfig:
    """``splits`` per (sequence, KV head) on each rank (0: chosen from the shape), key block, warps, stages."""

    splits: int = 0
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self) -> None:
        if not 0 <= self.splits <= MAX_SPLITS:
            raise ValueError(f"flash_decode: splits must be in [0, {MAX_SPLITS}], got {self.splits}")
        if self.block_n < 16 or self.block_n & (self.block_n - 1):
            raise ValueError(f"flash_decode: block_n must be a power of two >= 16, got {self.block_n}")


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
    WORLD: tl.constexpr,
):
    me = dl.rank()
    ranks = dl.num_ranks()
    # The role comes from the arrival order, so combiners (the last tickets) never block a producer (see above).
    ticket = tl.atomic_add(state_ptr + 1, 1, sem="relaxed", scope="gpu")
    epoch = tl.load(state_ptr) + 1
    if SPLITS > 1:
        producers = groups * (SPLITS - 1)
        if ticket < producers:
            group = ticket // (SPLITS - 1)
            split = 1 + ticket % (SPLITS - 1)
        else:
            group = ticket - producers
            split = ticket * 0
    else:
        group = ticket
        split = ticket * 0
    seq = (group // kv_heads).to(tl.int64)  # 64-bit offsets: a long cache exceeds 2^31 elements
    head = (group % kv_heads).to(tl.int64)

    rows = tl.arange(0, ROWS)
    dims = tl.arange(0, D)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < GROUP
    q = tl.load(
        q_ptr + seq * stride_qb + (head * GROUP + rows)[:, None] * stride_qh + dims[None, :],
        mask=row_ok[:, None],
        other=0.0,
    )
    length = tl.load(len_ptr + seq)
    per_split = tl.cdiv(tl.cdiv(length, SPLITS), BLOCK_N) * BLOCK_N
    start = split * per_split
    end = tl.minimum(length, start + per_split)
    m = tl.full([ROWS], float("-inf"), dtype=tl.float32)
    denom = tl.zeros([ROWS], dtype=tl.float32)
    acc = tl.zeros([ROWS, D], dtype=tl.float32)
    k_base = k_ptr + seq * stride_kb + head * stride_kh
    v_base = v_ptr + seq * stride_vb + head * stride_vh
    for n0 in range(start, end, BLOCK_N):
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

    # Push the record (output [GROUP, D], lse [GROUP]) into slot (group, me, split) of every rank, then flag it.
    RECORD: tl.constexpr = GROUP * D + 16
    parity = epoch % 2
    records = rec_ptr + parity * rec_parity_stride
    flags = flags_ptr + parity * flag_parity_stride
    slot = (group * ranks + me) * SPLITS + split
    mine = records + slot * RECORD
    for peer in range(0, ranks):
        remote = dl.symm_at(mine, peer)
        tl.store(remote + rows[:, None] * D + dims[None, :], partial, mask=row_ok[:, None])
        tl.store(remote + GROUP * D + rows, lse, mask=row_ok)
    _notify_every_rank(flags + slot, epoch, ranks, WORLD)

    if split == 0:  # combine the group's W x SPLITS records, in (rank, split) order on every rank
        first = group * ranks * SPLITS
        token = dl.wait(flags + first, ranks * SPLITS, "sys", "acquire", waitValue=epoch)
        base = dl.consume_token(records + first * RECORD, token)
        best = tl.full([ROWS], float("-inf"), dtype=tl.float32)
        weight = tl.zeros([ROWS], dtype=tl.float32)
        total = tl.zeros([ROWS, D], dtype=tl.float32)
        for i in range(0, ranks * SPLITS):
            record = base + i * RECORD
            lse_i = tl.load(record + GROUP * D + rows, mask=row_ok, other=float("-inf"))
            out_i = tl.load(record + rows[:, None] * D + dims[None, :], mask=row_ok[:, None], other=0.0)
            best_new = tl.maximum(best, lse_i)
            empty = best_new == float("-inf")  # no tokens so far for this head: nothing to rescale
            scale_old = tl.where(empty, 0.0, tl.exp(best - best_new))
            w_i = tl.where(empty, 0.0, tl.exp(lse_i - best_new))
            weight = weight * scale_old + w_i
            total = total * scale_old[:, None] + w_i[:, None] * out_i
            best = best_new
        result = total / tl.where(weight > 0, weight, 1.0)[:, None]
        out_ptrs = out_ptr + seq * stride_ob + (head * GROUP + rows)[:, None] * stride_oh + dims[None, :]
        tl.store(out_ptrs, result.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])

    # The last program to finish advances the epoch and resets the tickets for the next call.
    done = tl.atomic_add(state_ptr + 2, 1, sem="acq_rel", scope="gpu")
    if done == groups * SPLITS - 1:
        tl.store(state_ptr, epoch)
        tl.store(state_ptr + 1, 0)
        tl.store(state_ptr + 2, 0)


@dataclass(frozen=True)
class _Workspace:
    world: rt.World
    records: torch.Tensor
    """fp32 [2, RECORD_CAPACITY_BYTES / 4], symmetric."""
    flags: torch.Tensor
    """int32 [2, FLAG_CAPACITY], symmetric."""
    state: torch.Tensor
    """int32 [3]: epoch, arrival tickets, finished programs (this rank only)."""


_workspace: _Workspace | None = None


def _get_workspace() -> _Workspace:
    global _workspace
    world = rt.current_world()
    if _workspace is not None and _workspace.world is world:
        return _workspace
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            "flash_decode: its workspace does not exist yet and cannot be created during CUDA-graph capture; call "
            "it once outside the graph first (a warm-up)"
        )
    _workspace = _Workspace(
        world,
        rt.empty(2, RECORD_CAPACITY_BYTES // 4, dtype=torch.float32),
        rt.zeros(2, FLAG_CAPACITY, dtype=torch.int32),
        rt.zeros(3, dtype=torch.int32),
    )
    rt.barrier()  # zeroed flags everywhere before any rank's kernel sets one
    return _workspace


def record_floats(group: int) -> int:
    return group * HEAD_DIM + RECORD_PAD


def choose_splits(
    batch: int, kv_heads: int, group: int, local_len: int, world_size: int, sms: int, block_n: int
) -> int:
    """Splits per (sequence, KV head): about two programs per SM, at least two key blocks per split, within the
    record and flag capacities."""
    groups = batch * kv_heads
    splits = max(1, min(MAX_SPLITS, triton.cdiv(2 * sms, groups)))
    splits = min(splits, max(1, local_len // (2 * block_n)))
    by_records = RECORD_CAPACITY_BYTES // (groups * world_size * record_floats(group) * 4)
    by_flags = FLAG_CAPACITY // (groups * world_size)
    return max(1, min(splits, by_records, by_flags))


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor) -> None:
    """Raise a TypeError/ValueError naming the problem (shapes and dtypes; fake tensors pass through)."""
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
    if kv_heads == 0 or q_heads % kv_heads:
        raise ValueError(f"flash_decode: q_heads ({q_heads}) must be a multiple of kv_heads ({kv_heads})")
    if q_heads // kv_heads > MAX_GROUP:
        raise ValueError(f"flash_decode: at most {MAX_GROUP} query heads per KV head, got {q_heads // kv_heads}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise ValueError(f"flash_decode: {name} must have a contiguous last dim, got strides {t.stride()}")
    if lengths.dtype != torch.int32 or lengths.shape != (batch,):
        raise ValueError(
            f"flash_decode: lengths must be an int32 tensor of shape [{batch}], got {lengths.dtype} "
            f"{list(lengths.shape)}"
        )
    devices = {t.device for t in (q, k, v, lengths)}
    if len(devices) > 1:
        raise ValueError(f"flash_decode: q, k, v and lengths must be on one device, got {sorted(map(str, devices))}")


_agreed: set[tuple] = set()


def _check_agreement(q: torch.Tensor, k: torch.Tensor, config: FlashDecodeConfig, splits: int) -> None:
    world = rt.current_world()
    if q.device != world.device:
        raise ValueError(f"flash_decode: q is on {q.device}, but this rank's symmetric heap is on {world.device}")
    signature = (tuple(q.shape), tuple(k.shape), q.dtype, config, splits)
    if signature in _agreed:
        return
    check_ranks_call_alike(
        world.group,
        world.rank,
        (list(q.shape), list(k.shape), str(q.dtype), asdict(config), splits),
        op="flash_decode",
        fields="(q shape, k/v shape, dtype, config, splits)",
        disagreement="ranks disagree on the shapes",
        capture_message="flash_decode: first call with these shapes during CUDA-graph capture; the ranks' agreement "
        "is checked (a collective) on the first call of each shape: call it once before capturing",
    )
    _agreed.add(signature)


_plans: dict[tuple, LaunchPlan] = {}
_sms: dict[int, int] = {}


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
    config = config or FlashDecodeConfig()
    world = rt.current_world()
    if q.device != world.device:
        raise ValueError(f"flash_decode: q is on {q.device}, but this rank's symmetric heap is on {world.device}")
    batch, q_heads, _ = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    index = q.device.index
    if index not in _sms:
        _sms[index] = torch.cuda.get_device_properties(index).multi_processor_count
    splits = config.splits or choose_splits(
        batch, kv_heads, group, k.shape[2], world.world_size, _sms[index], config.block_n
    )
    _check_agreement(q, k, config, splits)
    groups = batch * kv_heads
    if groups * world.world_size * splits > FLAG_CAPACITY or (
        groups * world.world_size * splits * record_floats(group) * 4 > RECORD_CAPACITY_BYTES
    ):
        raise ValueError(f"flash_decode: batch {batch} x {kv_heads} KV heads x {splits} splits exceeds the workspace")
    if batch == 0:
        return
    sm_scale = scale if scale is not None else 1.0 / math.sqrt(HEAD_DIM)
    tensors = (q, k, v, lengths, out)
    key = (
        tuple(t.shape for t in tensors),
        tuple(t.stride() for t in tensors),
        tuple(t.data_ptr() % 16 == 0 for t in tensors),
        q.dtype,
        q.device,
        config,
        splits,
        sm_scale,
    )
    plan = _plans.get(key)
    if plan is not None and plan.world is world:
        plan.launch(q.device, *tensors)
        return
    ws = _get_workspace()
    named = {
        "q_ptr": q,
        "k_ptr": k,
        "v_ptr": v,
        "len_ptr": lengths,
        "out_ptr": out,
        "rec_ptr": ws.records,
        "flags_ptr": ws.flags,
        "state_ptr": ws.state,
        "groups": groups,
        "kv_heads": kv_heads,
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
        "sm_scale": sm_scale,
        "rec_parity_stride": ws.records.shape[1],
        "flag_parity_stride": ws.flags.shape[1],
        "SPLITS": splits,
        "GROUP": group,
        "ROWS": max(16, triton.next_power_of_2(group)),
        "D": HEAD_DIM,
        "BLOCK_N": config.block_n,
        "WORLD": notify_world(world.world_size),
    }
    grid = (groups * splits, 1, 1)
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    with torch.cuda.device(q.device):
        _plans[key] = first_launch(_flash_decode_kernel, grid, named, len(tensors), **options)


@torch.library.custom_op("triton_dist::flash_decode", mutates_args=())
def _flash_decode_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    _run(q, k, v, lengths, out, scale)
    return out


@_flash_decode_op.register_fake
def _flash_decode_fake(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    check_inputs(q, k, v, lengths)
    return torch.empty_like(q, memory_format=torch.contiguous_format)


def flash_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, *, scale: float | None = None
) -> torch.Tensor:
    """Attention of one query token per sequence over a KV cache split across the ranks along the sequence.

    ``q``: [batch, q_heads, 128], the same on every rank; ``k``, ``v``: [batch, kv_heads, local_len, 128], this
    rank's part of the cache (``q_heads`` a multiple of ``kv_heads``, at most 16 per KV head); ``lengths``: int32
    [batch], how many of this rank's ``local_len`` positions hold tokens for each sequence (0 allowed). bf16 or
    fp16; ``scale`` defaults to 1/sqrt(128). Returns [batch, q_heads, 128] on every rank, bit-identical across
    ranks: softmax(q K^T scale) V over the union of every rank's valid tokens (order does not matter for one
    query). A sequence with no tokens anywhere gives zeros. Every rank passes the same shapes (checked
    collectively on the first call of each shape). One launch, no host synchronization; CUDA-graph capture works
    after one eager call of the shape.
    """
    if not plain_eager(q):
        return torch.ops.triton_dist.flash_decode(q, k, v, lengths, scale)
    check_inputs(q, k, v, lengths)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    _run(q, k, v, lengths, out, scale)
    return out
