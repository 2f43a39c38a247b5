"""The standalone ``matmul(a, b)`` host op, the operand checks the GEMM ops share, and the GPU facts they need."""

from __future__ import annotations

import functools
from typing import Any

import triton

from triton_dist.ops.matmul.config import MatmulConfig, default_config
from triton_dist.ops.matmul.kernels import _matmul_ptr_kernel, _matmul_tma_kernel

SUPPORTED_DTYPES = ("bfloat16", "float16")


@functools.cache
def num_sms(device_index: int) -> int:
    import torch

    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _set_tma_allocator() -> None:
    import torch

    def alloc(size: int, alignment: int, stream: int | None) -> Any:
        return torch.empty(size, device="cuda", dtype=torch.int8)

    triton.set_allocator(alloc)


def check_matrix(op: str, name: str, t: Any, *, contiguous: bool = True) -> None:
    """Raise a TypeError/ValueError naming the problem unless ``t`` is a 2-D bfloat16/float16 tensor laid out for
    the GEMM kernels: contiguous, or (``contiguous=False``) row-major with any row stride. Shared by the GEMM ops."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 2:
        raise ValueError(f"{op}: {name} must be 2-D, got shape {list(t.shape)}")
    if str(t.dtype).removeprefix("torch.") not in SUPPORTED_DTYPES:
        raise TypeError(f"{op}: {name} must be bfloat16 or float16, got {t.dtype}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{op}: {name} must be contiguous (row-major), got strides {t.stride()}")
    if not contiguous and t.stride(1) != 1:
        raise ValueError(f"{op}: {name} must be row-major (stride 1 along dim 1), got strides {t.stride()}")


def _emulated_cpu(device: Any) -> bool:
    """Whether ``device`` is the host device of a world under the CPU emulation (``ops.common.errors.emulated``),
    where the GEMM ops run their kernels in Triton's interpreter."""
    from triton_dist.ops.common.errors import emulated_world

    world = emulated_world()
    return world is not None and device == world.device


def check_operands(a: Any, b: Any, op: str, *, tma_rows: bool = True) -> None:
    """Raise a ValueError/TypeError naming the problem unless A [M, K] @ B [K, N] can run on the GPU kernels.

    ``tma_rows=False`` for ops that run the pointer kernel where rows cannot feed TMA (``rows_fit_tma``)."""
    for name, t in (("a", a), ("b", b)):
        check_matrix(op, name, t)
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"{op}: a is on {a.device} but b is on {b.device}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{op}: a is {list(a.shape)} and b is {list(b.shape)}: a.shape[1] must equal b.shape[0]")
    if a.device.type != "cuda" and not _emulated_cpu(a.device):
        raise ValueError(f"{op}: the operands must be on a GPU, got {a.device}")
    if tma_rows and ((a.shape[1] * a.element_size()) % 16 or (b.shape[1] * b.element_size()) % 16):
        raise ValueError(
            f"{op}: rows must be 16-byte multiples for TMA (K={a.shape[1]}, N={b.shape[1]} must be multiples of 8)"
        )


def make_descriptors(a: Any, b: Any, c: Any, config: MatmulConfig) -> tuple[Any, Any, Any]:
    """Host TensorDescriptors for A [M, K], B [K, N] and C [M, N] with ``config``'s block shapes."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk = config.block_m, config.block_n, config.block_k
    return (
        TensorDescriptor.from_tensor(a, [bm, bk]),
        TensorDescriptor.from_tensor(b, [bk, bn]),
        TensorDescriptor.from_tensor(c, [bm, bn // config.split_n]),
    )


def launch_matmul(a: Any, b: Any, c: Any, config: MatmulConfig, grid_size: int | None = None) -> None:
    """Enqueue C = A @ B on the current stream with ``config`` (no checks; ``matmul`` checks)."""
    m, k = a.shape
    n = b.shape[1]
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    programs = min(grid_size or num_sms(a.device.index), tiles)
    if config.use_tma:
        a_desc, b_desc, c_desc = make_descriptors(a, b, c, config)
        _matmul_tma_kernel[(programs,)](
            a_desc,
            b_desc,
            c_desc,
            m,
            n,
            k,
            BLOCK_M=config.block_m,
            BLOCK_N=config.block_n,
            BLOCK_K=config.block_k,
            GROUP_M=config.group_m,
            SPLIT_N=config.split_n,
            WARP_SPECIALIZE=config.warp_specialize,
            num_stages=config.num_stages,
            num_warps=config.num_warps,
        )
    else:
        _matmul_ptr_kernel[(programs,)](
            a,
            b,
            c,
            m,
            n,
            k,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            c.stride(0),
            c.stride(1),
            BLOCK_M=config.block_m,
            BLOCK_N=config.block_n,
            BLOCK_K=config.block_k,
            GROUP_M=config.group_m,
            num_stages=config.num_stages,
            num_warps=config.num_warps,
        )


def matmul(a: Any, b: Any, *, out: Any = None, config: MatmulConfig | None = None) -> Any:
    """C = A @ B with the persistent Triton GEMM: A [M, K], B [K, N], bf16 or fp16, contiguous, on one GPU.

    ``out`` (optional, [M, N], A's dtype, contiguous) receives the result; ``config`` defaults to
    ``default_config``. Raises ValueError/TypeError naming the problem for bad operands.
    """
    import torch

    check_operands(a, b, "matmul")
    if a.device.type != "cuda":  # check_operands lets the CPU emulation's device through for the distributed ops
        raise ValueError(
            f"matmul: the operands must be on a GPU, got {a.device} (the standalone matmul has no CPU path)"
        )
    m, n = a.shape[0], b.shape[1]
    if out is None:
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    elif out.shape != (m, n) or out.dtype != a.dtype or not out.is_contiguous() or out.device != a.device:
        raise ValueError(
            f"matmul: out must be a contiguous {a.dtype} tensor of shape {[m, n]} on {a.device}, got "
            f"{out.dtype} {list(out.shape)} on {out.device}"
        )
    if config is None:
        config = default_config(m, n, a.shape[1])
    if m == 0 or n == 0:
        return out
    with torch.cuda.device(a.device):
        launch_matmul(a, b, out, config)
    return out
