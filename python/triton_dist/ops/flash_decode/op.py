"""The host side of ``flash_decode``: input checks, one plan per call signature, the custom op and the public function.

A call's first time with a signature (shapes, strides, 16-byte alignments, dtype, device, config argument, scale)
decides the combiner and split counts (``config.py``), checks with every rank that they call alike (a collective,
``ops.common.dispatch.PlanCache``), picks or allocates the record workspace (``ops.common.resources``) and
launches through Triton, keeping the :class:`~triton_dist.ops.common.launch.LaunchPlan`. Later calls check their
inputs, look the plan up (one dict lookup) and relaunch it.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace

import torch
import triton

from triton_dist import runtime as rt
from triton_dist.ops.common import resources
from triton_dist.ops.common.dispatch import PlanCache
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.errors import emulated_world, gpu_world, on_device, peer_world
from triton_dist.ops.common.flags import notify_world
from triton_dist.ops.common.gpu import sm_count
from triton_dist.ops.common.launch import EmulatedLaunch, LaunchPlan, first_launch
from triton_dist.ops.flash_decode.config import (
    CONFIG_ENV,
    HEAD_DIM,
    MAX_FLAGS,
    MAX_GROUP,
    MAX_LOCAL_LEN,
    MAX_RECORD_BYTES,
    MIN_FLAGS,
    MIN_RECORD_BYTES,
    ROWS,
    SUPPORTED_DTYPES,
    FlashDecodeConfig,
    FlashDecodeError,
    choose_combiners,
    choose_splits,
    combine_chunk,
    combine_rows,
    config_from_text,
    default_config,
    fits_workspace,
    needs_wide_offsets,
    workspace_need,
)
from triton_dist.ops.flash_decode.kernels import _flash_decode_kernel

OP = "flash_decode"


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


@dataclass(frozen=True)
class _Prepared:
    """What the first call of a signature decided: the config (combiners decided), splits, scale, workspace."""

    config: FlashDecodeConfig
    splits: int
    sm_scale: float
    workspace: _Workspace


@dataclass
class _Plan:
    """A signature's plan: what its first call decided, and the launch plan once it has launched (None before, and
    for an empty batch)."""

    prepared: _Prepared
    launcher: LaunchPlan | EmulatedLaunch | None = None


_plans: PlanCache[_Plan] = PlanCache(OP, FlashDecodeError)
"""The plan of each call signature (see the module docstring), per world."""

_BACKEND = "hip" if torch.version.hip else "cuda"
"""This build's Triton backend (``default_config`` picks per backend)."""

EMULATED_CONFIG = FlashDecodeConfig(block_n=16, num_stages=1)
"""What a call without a config uses under the CPU emulation (``ops.common.errors.emulated``): key blocks of 16,
which Triton's interpreter runs quickly (split and combiner counts from the emulation's 2 "SMs")."""


def gpu_default_config(groups: int = 0, sms: int = 0) -> FlashDecodeConfig:
    """The config a call without one uses on a GPU for ``groups`` (batch x KV heads) on ``sms`` SMs:
    ``$TRITON_DIST_FLASH_DECODE_CONFIG`` as ``config_from_text`` reads it when set and not empty, else this
    backend's default (``default_config``). Raises FlashDecodeError, naming the variable, when its text is not a
    config."""
    text = os.environ.get(CONFIG_ENV, "")
    if not text.strip():
        return default_config(_BACKEND, groups, sms)
    try:
        return config_from_text(text)
    except FlashDecodeError as error:
        raise FlashDecodeError(f"${CONFIG_ENV}: {error}") from None


def check_scale(scale: float | None) -> float:
    """The softmax scale a call uses: ``scale`` (a finite real number) or 1/sqrt(128)."""
    if scale is None:
        return 1.0 / math.sqrt(HEAD_DIM)
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise FlashDecodeError(f"flash_decode: scale must be a float or None, got {type(scale).__name__}")
    if not math.isfinite(scale):
        raise FlashDecodeError(f"flash_decode: scale must be finite, got {scale}")
    return float(scale)


def check_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    device: torch.device | None = None,
) -> None:
    """Raise FlashDecodeError naming the first problem (devices first: ``device``, when given, is this rank's
    triton_dist device; then shapes, dtypes, layouts; fake tensors pass while tracing, with no device). The
    values of ``lengths`` are not checked (that would need a host synchronization): the kernel clamps them to
    ``[0, local_len]``."""
    for name, t in (("q", q), ("k", k), ("v", v), ("lengths", lengths)):
        if not isinstance(t, torch.Tensor):
            raise FlashDecodeError(f"flash_decode: {name} must be a torch.Tensor, got {type(t).__name__}")
    if device is not None and q.device != device:
        raise FlashDecodeError(f"flash_decode: q is on {q.device}, but this rank's triton_dist device is {device}")
    devices = {t.device for t in (q, k, v, lengths)}
    if len(devices) > 1:
        raise FlashDecodeError(
            f"flash_decode: q, k, v and lengths must be on one device, got {sorted(map(str, devices))}"
        )
    if q.dim() != 3:
        raise FlashDecodeError(f"flash_decode: q must be [batch, q_heads, head_dim], got shape {list(q.shape)}")
    if k.dim() != 4 or v.dim() != 4:
        raise FlashDecodeError(
            f"flash_decode: k and v must be [batch, kv_heads, local_len, head_dim], got {list(k.shape)} and "
            f"{list(v.shape)}"
        )
    if k.shape != v.shape:
        raise FlashDecodeError(
            f"flash_decode: k and v must have the same shape, got {list(k.shape)} and {list(v.shape)}"
        )
    if q.dtype not in SUPPORTED_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise FlashDecodeError(
            f"flash_decode: q, k, v must all be bfloat16 or all float16, got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    batch, q_heads, head_dim = q.shape
    if head_dim != HEAD_DIM or k.shape[3] != HEAD_DIM:
        raise FlashDecodeError(
            f"flash_decode: only head_dim {HEAD_DIM} is supported, got q {head_dim}, k/v {k.shape[3]}"
        )
    if k.shape[0] != batch:
        raise FlashDecodeError(f"flash_decode: q has batch {batch} but k/v have {k.shape[0]}")
    kv_heads = k.shape[1]
    if kv_heads == 0 or q_heads == 0 or q_heads % kv_heads:
        raise FlashDecodeError(
            f"flash_decode: q_heads ({q_heads}) must be a positive multiple of kv_heads ({kv_heads})"
        )
    if q_heads // kv_heads > MAX_GROUP:
        raise FlashDecodeError(f"flash_decode: at most {MAX_GROUP} query heads per KV head, got {q_heads // kv_heads}")
    if k.shape[2] > MAX_LOCAL_LEN:
        raise FlashDecodeError(f"flash_decode: local_len must be at most 2^30, got {k.shape[2]}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise FlashDecodeError(f"flash_decode: {name} must have a contiguous last dim, got strides {t.stride()}")
    if lengths.dtype != torch.int32 or lengths.shape != (batch,):
        raise FlashDecodeError(
            f"flash_decode: lengths must be an int32 tensor of shape [{batch}], got {lengths.dtype} "
            f"{list(lengths.shape)}"
        )
    if batch > 1 and lengths.stride(0) != 1:
        raise FlashDecodeError(f"flash_decode: lengths must be contiguous, got stride {lengths.stride(0)}")


def check_out(q: torch.Tensor, out: torch.Tensor) -> None:
    """Raise FlashDecodeError unless ``out`` can take the result for ``q``: q's shape, dtype and device, last dim
    contiguous."""
    if out.shape != q.shape or out.dtype != q.dtype or out.stride(-1) != 1 or out.device != q.device:
        raise FlashDecodeError(f"flash_decode: out must be like q {list(q.shape)} {q.dtype}, got {list(out.shape)}")


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor) -> None:
    """``check_inputs`` on the eager path: the checks that need no world first; where one fails, all of them again
    in order, the device first. Good tensors on another device have no plan, and the first call checks the device
    (``_new_plan``)."""
    try:
        check_inputs(q, k, v, lengths)
    except FlashDecodeError:
        if isinstance(q, torch.Tensor) and rt.is_initialized():
            check_inputs(q, k, v, lengths, (emulated_world() or gpu_world(OP, FlashDecodeError)).device)
        raise


def _workspace(floats: int, flags: int) -> _Workspace:
    """The first of this world's record workspaces that holds ``floats`` and ``flags`` per parity, else a new one
    (collectively: every rank makes the same decisions in the same order). Workspaces are never freed (CUDA graphs
    may hold their addresses); each has its own call state, so calls on different workspaces never share a flag."""
    existing = resources.workspaces(OP)
    found = next((ws for ws in existing if ws.fits(floats, flags)), None)
    if found is not None:
        return found

    def create(world: rt.World) -> _Workspace:
        del world
        made = _Workspace(
            rt.empty(
                2,
                min(max(triton.next_power_of_2(floats), MIN_RECORD_BYTES // 4), MAX_RECORD_BYTES // 4),
                dtype=torch.float32,
            ),
            rt.zeros(2, min(max(triton.next_power_of_2(flags), MIN_FLAGS), MAX_FLAGS), dtype=torch.int32),
            rt.zeros(1, dtype=torch.int64),
        )
        rt.barrier()  # zeroed flags everywhere before any rank's kernel sets one
        return made

    return resources.workspace((OP, len(existing)), create, what=OP)


def _with_combiners(q: torch.Tensor, k: torch.Tensor, config: FlashDecodeConfig) -> FlashDecodeConfig:
    """``config`` with its combiner count decided (``choose_combiners`` unless the config forces one)."""
    if config.combiners:
        return config
    return replace(config, combiners=choose_combiners(q.shape[0] * k.shape[1], sm_count(q.device)))


def _splits_for(q: torch.Tensor, k: torch.Tensor, config: FlashDecodeConfig, world_size: int) -> int:
    if config.splits:
        return config.splits
    batch, q_heads, _ = q.shape
    kv_heads = k.shape[1]
    sms = sm_count(q.device)
    return choose_splits(batch, kv_heads, q_heads // kv_heads, k.shape[2], world_size, sms, config.block_n)


def _signature(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    out: torch.Tensor,
    sm_scale: float,
    config: FlashDecodeConfig | None,
) -> tuple:
    """Everything the steps between the checks and the launch read: the shapes the split count and the agreement
    use, the strides and 16-byte alignments Triton specializes on, dtype, device, the config argument, the scale."""
    return (
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


def _new_plan(
    q: torch.Tensor, k: torch.Tensor, sm_scale: float, config: FlashDecodeConfig | None, signature: tuple
) -> _Plan:
    """The first call of a signature, up to its launch: q on this rank's device, the combiner and split counts, the
    ranks' agreement (a collective: a difference raises on every rank, naming it), the workspace."""
    world = peer_world(OP, FlashDecodeError)
    if q.device != world.device:  # before anything asks the device for its properties
        raise FlashDecodeError(
            f"flash_decode: q is on {q.device}, but this rank's triton_dist device is {world.device}"
        )
    if world is emulated_world():
        default = EMULATED_CONFIG
    else:
        default = gpu_default_config(q.shape[0] * k.shape[1], sm_count(q.device))
    config = _with_combiners(q, k, config or default)  # the count joins the ranks' agreement
    splits = _splits_for(q, k, config, world.world_size)
    batch, q_heads, _ = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    described = {
        "q shape": list(q.shape),
        "k/v shape": list(k.shape),
        "dtype": str(q.dtype),
        "config": asdict(config),
        "splits": splits,
        "scale": sm_scale,
    }

    def make() -> _Plan:
        floats, flags = workspace_need(batch, kv_heads, group, splits, world.world_size)
        if not fits_workspace(batch, kv_heads, group, splits, world.world_size):  # after the agreement: every rank
            raise FlashDecodeError(
                f"flash_decode: batch {batch} x {kv_heads} KV heads x {splits} splits on {world.world_size} ranks "
                f"needs {floats * 4} bytes of records and {flags} flags per call, more than the workspace's "
                f"{MAX_RECORD_BYTES} bytes and {MAX_FLAGS} flags: use fewer splits or a smaller batch per call"
            )
        return _Plan(_Prepared(config, splits, sm_scale, _workspace(floats, flags)))

    return _plans.build(signature, described, make)


def _prepare(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    scale: float | None,
    config: FlashDecodeConfig | None,
) -> _Prepared:
    """What the first call of these inputs (with a new output) decides before its launch: the checks, the counts,
    the agreement, the workspace (tests of the multi-rank host path)."""
    check_inputs(q, k, v, lengths)
    sm_scale = check_scale(scale)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    signature = _signature(q, k, v, lengths, out, sm_scale, config)
    plan = _plans.get(signature)
    return (plan or _new_plan(q, k, sm_scale, config, signature)).prepared


def _run(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    out: torch.Tensor,
    scale: float | None,
    config: FlashDecodeConfig | None = None,
) -> None:
    """The attention into ``out`` with ``config`` (None: the default), inputs checked: how benchmarks and GPU
    checks force a config."""
    _check(q, k, v, lengths)
    sm_scale = check_scale(scale)
    check_out(q, out)
    _launch(q, k, v, lengths, out, sm_scale, config)


def _launch(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    out: torch.Tensor,
    sm_scale: float,
    config: FlashDecodeConfig | None,
) -> None:
    """Enqueue a checked call on the current stream: the signature's plan, or its first call (``_new_plan``, then
    the first launch through Triton, which gives the launch plan)."""
    signature = _signature(q, k, v, lengths, out, sm_scale, config)
    plan = _plans.get(signature)
    if plan is not None and plan.launcher is not None:
        plan.launcher.launch(q.device, q, k, v, lengths, out)
        return
    if plan is None:
        plan = _new_plan(q, k, sm_scale, config, signature)
    if q.shape[0] == 0:
        return
    grid, named, options = launch_args(q, k, v, lengths, out, plan.prepared, rt.current_world().world_size)
    with on_device(q.device):
        plan.launcher = first_launch(_flash_decode_kernel, grid, named, 5, **options)


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
    after one eager call of the shape. Under ``TRITON_INTERPRET=1`` on a world made with ``init(device="cpu")``
    (the CPU emulation, for tests without GPUs) the kernel runs in Triton's interpreter with ``EMULATED_CONFIG``;
    on GPUs with ``gpu_default_config`` (``MANY_GROUPS_CONFIG`` from batch x KV heads of two rounds of the SMs;
    ``$TRITON_DIST_FLASH_DECODE_CONFIG``, e.g. ``block_n=64,num_stages=4``,
    overrides the default key block, warps, stages and counts for every rank that sets it).
    """
    if not plain_eager(q, k, v, lengths):
        return torch.ops.triton_dist.flash_decode(q, k, v, lengths, scale)
    return _checked_call(q, k, v, lengths, scale)


def _checked_call(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float | None
) -> torch.Tensor:
    """The op's implementation: the checks, a new output, the launch."""
    _check(q, k, v, lengths)
    sm_scale = check_scale(scale)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    _launch(q, k, v, lengths, out, sm_scale, None)  # out is new, like q by construction: no check_out
    return out
