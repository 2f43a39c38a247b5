"""The host side of ``grouped_gemm``: the checks, the grid, the launch and the torch custom op."""

from __future__ import annotations

import os
from typing import Any

import torch
import triton

from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.grouped_gemm import kernels
from triton_dist.ops.grouped_gemm.config import SCALE_BLOCK, GroupedGemmConfig, GroupedGemmError, default_config

OP = "grouped_gemm"
FP8_DTYPE = torch.float8_e4m3fn
HALF_DTYPES = (torch.bfloat16, torch.float16)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _blocks(n: int) -> int:
    return -(-n // SCALE_BLOCK)


def _check(
    x: Any,
    w: Any,
    counts: Any,
    offsets: Any,
    x_scales: Any,
    w_scales: Any,
    out_dtype: Any,
    gather_rows: Any = None,
) -> tuple[int, int, int, int, torch.dtype]:
    """Raise :class:`GroupedGemmError` naming the first bad argument; returns (L, K, N, rows per expert, out dtype)
    (rows per expert: the capacity of the low-latency layout, else the total rows: ``gather_rows``' length if
    given)."""
    for name, value in (("x", x), ("w", w), ("expert_counts", counts)):
        if not isinstance(value, torch.Tensor):
            raise GroupedGemmError(f"{OP}: {name} must be a torch.Tensor, got {type(value).__name__}")
    if x.dim() not in (2, 3):
        raise GroupedGemmError(
            f"{OP}: x must be [rows, K] (normal layout) or [L, capacity, K] (low-latency layout), got {list(x.shape)}"
        )
    if w.dim() != 3:
        raise GroupedGemmError(f"{OP}: w must be [L, K, N] (one [K, N] weight per local expert), got {list(w.shape)}")
    experts, k, n = w.shape
    if x.shape[-1] != k:
        raise GroupedGemmError(f"{OP}: x has {x.shape[-1]} columns but w is [L, K={k}, N={n}]")
    if counts.dim() != 1 or counts.shape[0] != experts or counts.dtype != torch.int32:
        raise GroupedGemmError(
            f"{OP}: expert_counts must be int32 [L={experts}] (w's experts), got {_name(counts.dtype)} "
            f"{list(counts.shape)}"
        )
    if x.dim() == 3 and x.shape[0] != experts:
        raise GroupedGemmError(f"{OP}: x [L, capacity, K] has {x.shape[0]} experts but w has {experts}")
    if x.dim() == 2 and offsets is None:
        raise GroupedGemmError(f"{OP}: the normal layout x [rows, K] needs expert_offsets (each expert's first row)")
    if offsets is not None and (
        not isinstance(offsets, torch.Tensor)
        or offsets.dim() != 1
        or offsets.shape[0] != experts
        or offsets.dtype != torch.int32
    ):
        raise GroupedGemmError(f"{OP}: expert_offsets must be an int32 tensor [L={experts}], got {offsets!r}")
    if gather_rows is not None:
        if x.dim() != 2:
            raise GroupedGemmError(f"{OP}: gather_rows is for the normal layout x [rows, K], got x {list(x.shape)}")
        if (
            not isinstance(gather_rows, torch.Tensor)
            or gather_rows.dim() != 1
            or gather_rows.dtype != torch.int32
            or gather_rows.device != x.device
            or not gather_rows.is_contiguous()
        ):
            raise GroupedGemmError(
                f"{OP}: gather_rows must be a contiguous int32 tensor [R] on x's device ({x.device}), got "
                f"{gather_rows!r:.80}"
            )
    if min(k, n, experts) < 1:
        raise GroupedGemmError(f"{OP}: w has an empty dimension: {list(w.shape)}")
    for name, value in (("w", w), ("expert_counts", counts), ("expert_offsets", offsets)):
        if isinstance(value, torch.Tensor) and value.device != x.device:
            raise GroupedGemmError(f"{OP}: {name} is on {value.device}, x on {x.device}")
    if x.stride(-1) != 1:
        raise GroupedGemmError(f"{OP}: x's rows must be contiguous (stride 1 along K), got strides {x.stride()}")
    if x.dim() == 3 and x.stride(0) != x.shape[1] * x.stride(1):
        raise GroupedGemmError(f"{OP}: x [L, capacity, K] must be one block of rows, got strides {x.stride()}")
    fp8 = x.dtype == FP8_DTYPE
    if fp8 != (w.dtype == FP8_DTYPE) or (not fp8 and (x.dtype not in HALF_DTYPES or w.dtype != x.dtype)):
        raise GroupedGemmError(
            f"{OP}: x and w must both be bf16, both fp16 or both float8_e4m3fn, got x {_name(x.dtype)} and w "
            f"{_name(w.dtype)}"
        )
    if fp8:
        want = [*x.shape[:-1], _blocks(k)]
        if not isinstance(x_scales, torch.Tensor) or x_scales.dtype != torch.float32 or list(x_scales.shape) != want:
            got = f"{_name(x_scales.dtype)} {list(x_scales.shape)}" if isinstance(x_scales, torch.Tensor) else x_scales
            raise GroupedGemmError(f"{OP}: fp8 x needs x_scales, fp32 {want} (per row, per 128 of K), got {got}")
        blocks = [experts, _blocks(k), _blocks(n)]
        shape = list(w_scales.shape) if isinstance(w_scales, torch.Tensor) else None
        if shape not in ([experts], blocks) or w_scales.dtype != torch.float32:
            raise GroupedGemmError(
                f"{OP}: fp8 w needs w_scales, fp32 [L] (per expert) or {blocks} (per 128 x 128 block of K x N), got "
                f"{w_scales if shape is None else f'{_name(w_scales.dtype)} {shape}'}"
            )
        for name, value in (("x_scales", x_scales), ("w_scales", w_scales)):
            if value.device != x.device:
                raise GroupedGemmError(f"{OP}: {name} is on {value.device}, x on {x.device}")
    elif x_scales is not None or w_scales is not None:
        raise GroupedGemmError(f"{OP}: x_scales / w_scales are for fp8 operands; x is {_name(x.dtype)}")
    out = out_dtype if out_dtype is not None else (torch.bfloat16 if fp8 else x.dtype)
    if out not in OUT_DTYPES:
        raise GroupedGemmError(f"{OP}: out_dtype must be bf16, fp16 or fp32, got {out_dtype}")
    if x.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise GroupedGemmError(f"{OP}: x is on the CPU; the kernel runs on GPUs (or under TRITON_INTERPRET=1)")
    capacity = x.shape[1] if x.dim() == 3 else x.shape[0] if gather_rows is None else gather_rows.shape[0]
    return experts, k, n, capacity, out


def _launch(
    x: torch.Tensor,
    w: torch.Tensor,
    counts: torch.Tensor,
    offsets: torch.Tensor | None,
    x_scales: torch.Tensor | None,
    w_scales: torch.Tensor | None,
    out_dtype: torch.dtype | None,
    config: GroupedGemmConfig | None,
    gather_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    experts, k, n, capacity, out = _check(x, w, counts, offsets, x_scales, w_scales, out_dtype, gather_rows)
    fp8 = x.dtype == FP8_DTYPE
    x_rows = x.numel() // k
    total = x_rows if gather_rows is None else gather_rows.shape[0]
    if config is None:
        # The low-latency layout is decode's: few rows per expert, whatever its capacity.
        config = default_config(min(capacity, 64) if x.dim() == 3 else total / experts, fp8)
    config.check(fp8)
    y_shape = (total,) if gather_rows is not None else x.shape[:-1]
    y = torch.empty(*y_shape, n, dtype=out, device=x.device)
    if offsets is None:  # the low-latency layout: expert e's rows start at e * capacity
        offsets = torch.arange(experts, dtype=torch.int32, device=x.device) * capacity
    rows = x.view(x_rows, k)
    if fp8:
        assert x_scales is not None and w_scales is not None  # _check
        if w_scales.dim() == 1:
            w_scales = w_scales[:, None, None].expand(experts, _blocks(k), _blocks(n))
        w_scales = w_scales.contiguous()
        scales, stride_xs = x_scales.reshape(x_rows, -1), _blocks(k)
        stride_wse, stride_wsk = w_scales.stride(0), w_scales.stride(1)
    else:
        scales, w_scales, stride_xs, stride_wse, stride_wsk = counts, counts, 0, 0, 0  # stand-ins, never read
    m_tiles = min(triton.cdiv(total, config.block_m) + experts, experts * triton.cdiv(capacity, config.block_m))
    grid = (max(1, m_tiles) * triton.cdiv(n, config.block_n),)
    if total == 0:
        return y
    kernels._grouped_gemm_kernel[grid](
        rows,
        w,
        y.view(total, n),
        counts,
        offsets,
        gather_rows if gather_rows is not None else counts,  # counts: a stand-in the kernel never reads
        scales,
        w_scales,
        n,
        k,
        experts,
        capacity,
        total,
        x_rows,
        rows.stride(0),
        w.stride(0),
        w.stride(1),
        w.stride(2),
        n,
        stride_xs,
        stride_wse,
        stride_wsk,
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        LP=max(2, triton.next_power_of_2(experts)),
        FP8=fp8,
        WIDEN=x.device.type == "cpu",
        GATHER=gather_rows is not None,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return y


def quantize_weights_fp8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``w`` [L, K, N] as the fp8 ``grouped_gemm`` takes it: ``(q, scales)``, q float8_e4m3fn [L, K, N] and scales
    fp32 [L, ceil(K / 128), ceil(N / 128)], one per 128 x 128 block (``scale = max(amax, 1e-4) / 448``, values
    rounded to nearest even). Torch on w's device; raises :class:`GroupedGemmError` unless ``w`` is a 3-D float
    tensor."""
    if not isinstance(w, torch.Tensor) or w.dim() != 3 or not w.is_floating_point():
        raise GroupedGemmError(f"quantize_weights_fp8: w must be a float tensor [L, K, N], got {w!r:.80}")
    experts, k, n = w.shape
    kb, nb = _blocks(k), _blocks(n)
    padded = torch.nn.functional.pad(w.float(), (0, nb * SCALE_BLOCK - n, 0, kb * SCALE_BLOCK - k))
    blocks = padded.reshape(experts, kb, SCALE_BLOCK, nb, SCALE_BLOCK)
    scales = blocks.abs().amax(dim=(2, 4)).clamp(min=1e-4) / 448.0
    q = (blocks / scales[:, :, None, :, None]).clamp(-448.0, 448.0).to(FP8_DTYPE)
    return q.reshape(experts, kb * SCALE_BLOCK, nb * SCALE_BLOCK)[:, :k, :n].contiguous(), scales


@torch.library.custom_op("triton_dist::grouped_gemm", mutates_args=())
def _grouped_gemm_op(
    x: torch.Tensor,
    w: torch.Tensor,
    expert_counts: torch.Tensor,
    expert_offsets: torch.Tensor | None = None,
    x_scales: torch.Tensor | None = None,
    w_scales: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    gather_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    return _launch(x, w, expert_counts, expert_offsets, x_scales, w_scales, out_dtype, None, gather_rows)


@_grouped_gemm_op.register_fake
def _grouped_gemm_fake(
    x: torch.Tensor,
    w: torch.Tensor,
    expert_counts: torch.Tensor,
    expert_offsets: torch.Tensor | None = None,
    x_scales: torch.Tensor | None = None,
    w_scales: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    gather_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    fp8 = x.dtype == FP8_DTYPE
    out = out_dtype if out_dtype is not None else (torch.bfloat16 if fp8 else x.dtype)
    rows = x.shape[:-1] if gather_rows is None else gather_rows.shape
    return x.new_empty(*rows, w.shape[-1], dtype=out)


def grouped_gemm(
    x: torch.Tensor,
    w: torch.Tensor,
    expert_counts: torch.Tensor,
    expert_offsets: torch.Tensor | None = None,
    *,
    x_scales: torch.Tensor | None = None,
    w_scales: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
    config: GroupedGemmConfig | None = None,
    gather_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """``y[rows of expert e] = x[rows of expert e] @ w[e]`` for every local expert ``e``, in one launch
    (``torch.ops.triton_dist.grouped_gemm``; no host synchronization, CUDA-graph capturable).

    The layouts ``moe_dispatch`` gives (``MoeHandle``):

    - normal: ``x`` [R, K], expert ``e``'s rows ``[expert_offsets[e], expert_offsets[e] + expert_counts[e])``;
    - low-latency: ``x`` [L, C, K], expert ``e``'s rows ``x[e, :expert_counts[e]]`` (``expert_offsets`` may be
      left out: ``e * C``).

    ``w`` [L, K, N], any strides (for fp8 an [L, N, K]-contiguous tensor's ``transpose(1, 2)`` feeds the tensor
    cores without a transpose). ``expert_counts`` / ``expert_offsets``: int32 [L] on x's device; a count is clamped to
    the rows its expert can hold. Returns ``y`` shaped like ``x`` with N columns, in ``out_dtype`` (default: x's dtype;
    bf16 for fp8); rows past an expert's count are not written (in the normal layout there are none).

    bf16 / fp16: fp32 accumulation. fp8 (x and w float8_e4m3fn): ``x_scales`` fp32 [rows..., ceil(K / 128)], one
    scale per row per 128 channels of K (``moe_dispatch(fp8=True)``'s ``handle.recv_scales``), and ``w_scales`` fp32
    [L, ceil(K / 128), ceil(N / 128)], one per 128 x 128 block of each expert's weight (DeepSeek-V3's layout), or
    [L], one per expert; ``y = sum over K blocks of (x_q @ w_q) * x_scale * w_scale`` in fp32.

    ``gather_rows`` (normal layout only): int32 [R]; row ``r`` of the grouped problem (expert ``e``'s rows as
    above, over ``[0, R)``) reads row ``gather_rows[r]`` of ``x`` (and of ``x_scales``), so ``x`` holds each token
    once (``moe_dispatch(..., layout="gather")``'s ``recv_x`` and ``handle.gather_rows``); ``y`` is [R, N], the
    same as ``grouped_gemm(x[gather_rows], ...)``. An index outside ``[0, rows of x)`` reads a zero row.

    ``config``: a :class:`GroupedGemmConfig` (default: ``default_config`` by the rows per expert). Raises
    :class:`GroupedGemmError` naming the bad argument. Runs on GPUs (fp8: sm_89 and later), or on CPU tensors
    under ``TRITON_INTERPRET=1``.
    """
    if config is None and plain_eager(x, w, expert_counts, expert_offsets, x_scales, w_scales, gather_rows):
        return _launch(x, w, expert_counts, expert_offsets, x_scales, w_scales, out_dtype, None, gather_rows)
    if config is not None:
        return _launch(x, w, expert_counts, expert_offsets, x_scales, w_scales, out_dtype, config, gather_rows)
    out: torch.Tensor = torch.ops.triton_dist.grouped_gemm(
        x, w, expert_counts, expert_offsets, x_scales, w_scales, out_dtype, gather_rows
    )
    return out
