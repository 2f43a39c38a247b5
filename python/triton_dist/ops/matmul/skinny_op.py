"""The skinny GEMM's host side: ``skinny_matmul(a, b)`` for A [M <= 64, K] @ B [K, N], and its kept workspaces."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import triton

from triton_dist.ops.matmul.config import target_has_tma
from triton_dist.ops.matmul.op import num_sms
from triton_dist.ops.matmul.skinny_config import MAX_ROWS, SkinnyConfig, skinny_config, split_blocks
from triton_dist.ops.matmul.skinny_kernels import _skinny_ptr_kernel, _skinny_tma_kernel

INTERPRETER_SMS = 4
"""The SM count the configuration is chosen for under Triton's interpreter (CPU tensors): a few programs."""
_workspaces: dict[Any, tuple[Any, Any]] = {}
"""Per device: (fp32 split-K partials, int32 per-tile arrival counters, zeroed once: the last split resets its
tile's counter). Grown when a call needs more (make the first call of each shape eagerly, before any CUDA-graph
capture); shared by every call on the device, so calls must not run concurrently on two streams."""
_outgrown: list[tuple[Any, Any]] = []
"""Workspaces replaced by larger ones, kept alive: a CUDA graph captured before the growth still uses them."""


def _interpreted(t: Any) -> bool:
    return t.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def _check(a: Any, b: Any, out: Any) -> None:
    import torch

    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            raise ValueError(f"skinny_matmul: {name} must be a 2-D tensor, got {getattr(t, 'shape', type(t))}")
        if t.dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"skinny_matmul: {name} must be bfloat16 or float16, got {t.dtype}")
        if t.shape[1] > 1 and t.stride(1) != 1:
            raise ValueError(f"skinny_matmul: {name} must be row-major (unit column stride), got {t.stride()}")
    if a.dtype != b.dtype:
        raise TypeError(f"skinny_matmul: a and b must have one dtype, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"skinny_matmul: a is on {a.device} but b is on {b.device}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"skinny_matmul: a is {list(a.shape)} and b {list(b.shape)}: a.shape[1] must be b.shape[0]")
    if not 1 <= a.shape[0] <= MAX_ROWS:
        raise ValueError(f"skinny_matmul: a must have 1..{MAX_ROWS} rows, got {a.shape[0]}")
    if a.device.type != "cuda" and not _interpreted(a):
        raise ValueError("skinny_matmul: the operands must be on a GPU (or the CPU under TRITON_INTERPRET=1)")
    shape = (a.shape[0], b.shape[1])
    if out is not None and (
        tuple(out.shape) != shape or out.dtype != a.dtype or out.device != a.device or out.stride(1) != 1
    ):
        raise ValueError(
            f"skinny_matmul: out must be a row-major {a.dtype} tensor of shape {list(shape)} on {a.device}, got "
            f"{out.dtype} {list(out.shape)} strides {out.stride()} on {out.device}"
        )


def _rows_fit_tma(*tensors: Any) -> bool:
    """Whether TensorDescriptor takes each tensor: unit column stride, the row stride a multiple of 16 bytes, the
    base 16-byte aligned."""
    return all(
        t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0 for t in tensors
    )


def skinny_workspace(device: Any, partial_elements: int, tiles: int) -> tuple[Any, Any]:
    """The device's kept (partials fp32 [>= partial_elements], counters int32 [>= tiles], zeroed when made)."""
    import torch

    kept = _workspaces.get(device)
    if kept is None or kept[0].numel() < partial_elements or kept[1].numel() < tiles:
        partials = max(partial_elements, kept[0].numel() if kept else 0, 1)
        counters = max(tiles, kept[1].numel() if kept else 0, 1)
        if kept is not None:
            _outgrown.append(kept)
        kept = _workspaces[device] = (
            torch.empty(partials, dtype=torch.float32, device=device),
            torch.zeros(counters, dtype=torch.int32, device=device),
        )
    return kept


def reduce_chunk(config: SkinnyConfig) -> int:
    """Elements the last split sums per round: its ``split_k`` loads take about 64 fp32 registers per thread."""
    budget = 64 * 32 * config.num_warps // max(1, config.split_k)
    return max(128, min(triton.next_power_of_2(budget + 1) // 2, config.block_m * config.block_n))


def default_skinny_config(a: Any, b: Any) -> SkinnyConfig:
    """``skinny_config`` for these operands on their device; the pointer kernel where a TMA descriptor cannot
    describe them (rows not 16-byte multiples), or under the interpreter with small blocks."""
    m, k = a.shape
    n = b.shape[1]
    if a.device.type != "cuda":
        config = skinny_config(m, n, k, INTERPRETER_SMS, use_tma=False)
        return dataclasses.replace(config, block_m=max(16, triton.next_power_of_2(m)), num_stages=1, use_tma=False)
    target = triton.runtime.driver.active.get_current_target()
    config = skinny_config(m, n, k, num_sms(a.device.index), use_tma=target_has_tma(target))
    if config.use_tma and not _rows_fit_tma(a, b):
        config = dataclasses.replace(config, use_tma=False, num_stages=min(config.num_stages, 3), num_warps=8)
    return config


def launch_skinny(a: Any, b: Any, out: Any, config: SkinnyConfig) -> None:
    """Enqueue out = a @ b with ``config`` on the current stream (no checks; ``skinny_matmul`` checks)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = b.shape[1]
    if m > config.block_m:
        raise ValueError(f"skinny_matmul: {config.short()} holds {config.block_m} rows, a has {m}")
    per_split, splits = split_blocks(k, config)
    tiles = triton.cdiv(n, config.block_n)
    partials, counters = skinny_workspace(a.device, splits * m * n if splits > 1 else 0, tiles)
    common = dict(
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        SPLIT_K=splits,
        REDUCE_CHUNK=reduce_chunk(dataclasses.replace(config, split_k=splits)),
        WIDEN=a.device.type == "cpu",
        num_stages=config.num_stages,
        num_warps=config.num_warps,
    )
    grid = (tiles, splits)
    if config.use_tma:
        a_desc = TensorDescriptor.from_tensor(a, [config.block_m, config.block_k])
        b_desc = TensorDescriptor.from_tensor(b, [config.block_k, config.block_n])
        _skinny_tma_kernel[grid](a_desc, b_desc, out, partials, counters, m, n, k, out.stride(0), per_split, **common)
    else:
        _skinny_ptr_kernel[grid](
            a, b, out, partials, counters, m, n, k, a.stride(0), b.stride(0), out.stride(0), per_split, **common
        )


def skinny_matmul(a: Any, b: Any, *, out: Any = None, config: SkinnyConfig | None = None) -> Any:
    """C = A @ B for a skinny A: A [M, K] with 1 <= M <= 64, B [K, N], bf16 or fp16 (one dtype), row-major (unit
    column stride, any row stride), fp32 accumulation, C in A's dtype. Made for the decode step's GEMMs, bound by
    reading B: one pass over B in large blocks, split over K where N alone would not fill the SMs, split-K partials
    summed in a fixed order by the last split (deterministic; ``skinny_kernels``). ``out`` (optional, [M, N],
    A's dtype, row-major) receives C; ``config`` defaults to ``default_skinny_config``. On GPUs, and on the CPU
    under Triton's interpreter (``TRITON_INTERPRET=1``). No host synchronization: CUDA-graph capturable once the
    shape ran eagerly (its workspace is then made). Raises ValueError/TypeError naming the problem."""
    import torch

    _check(a, b, out)
    if out is None:
        out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    if b.shape[1] == 0:
        return out
    if a.shape[1] == 0:
        return out.zero_()
    config = config or default_skinny_config(a, b)
    if a.device.type == "cuda":
        with torch.cuda.device(a.device):
            launch_skinny(a, b, out, config)
    else:
        launch_skinny(a, b, out, config)
    return out
