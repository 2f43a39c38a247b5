"""The persistent GEMM that the overlapped ops are built from, and a standalone ``matmul(a, b)``.

Stable API (``ag_gemm`` and ``gemm_rs`` build on it; keep it as is):

Building blocks, ``@triton.jit`` functions to call from other kernels:

- ``grouped_tile(tile, num_m, num_n, GROUP_M) -> (pid_m, pid_n)``: the ``tile``-th output tile in grouped
  ("swizzled") order: ``GROUP_M`` tile rows are walked column by column, so the tiles running at once share
  A rows and B columns in L2.
- ``tma_mainloop(a_desc, b_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K) -> fp32 [BLOCK_M, BLOCK_N]``:
  the K loop of one tile through TMA tensor descriptors (A blocks ``[BLOCK_M, BLOCK_K]``, B ``[BLOCK_K, BLOCK_N]``);
  rows and columns past the tensor's end read as zero, so tiles need not divide the shape.
- ``tma_store(c_desc, acc, off_m, off_n, SPLIT_N)``: store one tile through a descriptor with blocks
  ``[BLOCK_M, BLOCK_N // SPLIT_N]`` (``SPLIT_N`` = 2 stores the tile in two halves: less shared memory, and the
  first half's store overlaps the second half's conversion). Out-of-range rows and columns are not written.
- ``ptr_mainloop(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, off_m, off_n, BLOCK_M,
  BLOCK_N, BLOCK_K)`` and ``ptr_store(c_ptr, acc, M, N, stride_cm, stride_cn, off_m, off_n, BLOCK_M, BLOCK_N)``:
  the same with masked pointer loads and stores, for targets without TMA (AMD gfx942, pre-Hopper NVIDIA).

Host side:

- ``MatmulConfig``: tile shape, group size, pipeline stages, warps, warp specialization, epilogue split, and
  whether to use TMA. ``default_config(m, n, k, dtype, target)`` picks one; ``config_for_target`` the fallback.
- ``matmul(a, b, *, out=None, config=None) -> c``: C = A @ B for 2-D bf16/fp16 CUDA tensors, fp32 accumulate.
- ``make_descriptors(a, b, c, config)`` builds the host ``TensorDescriptor``s for A [M, K], B [K, N] and C.
- ``num_sms(device)``: the SM count the persistent grids are sized by.

The kernel is persistent: ``min(num_sms, tiles)`` programs each walk tiles ``pid, pid + num_programs, ...``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import triton
import triton.language as tl

SUPPORTED_DTYPES = ("bfloat16", "float16")


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


@dataclasses.dataclass(frozen=True)
class MatmulConfig:
    """One GEMM configuration. ``use_tma`` False selects the pointer kernel (no warp specialization there).

    ``warp_specialize`` is passed to Triton's ``tl.range(..., warp_specialize=...)``, which Triton 3.6 ignores on
    sm_90 (identical PTX either way, checked by test_ops_matmul.py): on Hopper the kernel is a software-pipelined
    persistent loop with asynchronous wgmma, and configurations that differ only in this flag are the same kernel.
    """

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    group_m: int = 8
    num_stages: int = 3
    num_warps: int = 8
    warp_specialize: bool = True
    split_n: int = 2
    use_tma: bool = True

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> MatmulConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - fields
        if unknown:
            raise ValueError(f"MatmulConfig: unknown fields {sorted(unknown)}")
        return cls(**values)

    def short(self) -> str:
        if not self.use_tma:
            return f"ptr{self.block_m}x{self.block_n}x{self.block_k}g{self.group_m}s{self.num_stages}w{self.num_warps}"
        ws = "ws" if self.warp_specialize else "pipe"
        return (
            f"{self.block_m}x{self.block_n}x{self.block_k}g{self.group_m}s{self.num_stages}w{self.num_warps}"
            f"{ws}e{self.split_n}"
        )


# Candidates the tuner searches (bench/tune_overlap.py, bench/matmul.py); the first is the default on Hopper.
HOPPER_CANDIDATES = (
    MatmulConfig(128, 256, 64, 8, 3, 8, True, 2),
    MatmulConfig(128, 256, 64, 8, 4, 8, True, 2),
    MatmulConfig(128, 128, 64, 8, 4, 8, True, 1),
    MatmulConfig(128, 256, 64, 8, 3, 8, False, 2),
    MatmulConfig(128, 256, 64, 16, 3, 8, True, 2),
    MatmulConfig(128, 128, 128, 8, 3, 8, True, 1),
)
FALLBACK_CONFIG = MatmulConfig(128, 128, 32, 8, 2, 8, False, 1, use_tma=False)


def target_has_tma(target: Any) -> bool:
    """Whether ``target`` (a triton GPUTarget) has TMA: NVIDIA sm_90 and newer."""
    return target.backend == "cuda" and int(target.arch) >= 90


def pointer_config(config: MatmulConfig) -> MatmulConfig:
    """The pointer kernel (no TMA) with ``config``'s tile, as far as that kernel takes it."""
    return dataclasses.replace(
        FALLBACK_CONFIG, block_m=config.block_m, block_n=min(config.block_n, 128), group_m=config.group_m
    )


def config_for_target(config: MatmulConfig, target: Any) -> MatmulConfig:
    """``config`` where ``target`` supports it, else the pointer-kernel fallback with the same tile."""
    if config.use_tma and not target_has_tma(target):
        return pointer_config(config)
    return config


def rows_fit_tma(*tensors: Any) -> bool:
    """Whether each 2-D tensor's rows lie a multiple of 16 bytes apart, as a TMA descriptor's strides must.

    Depends on shapes only (for contiguous tensors), so every rank of a collective op decides alike."""
    return all((t.stride(0) * t.element_size()) % 16 == 0 for t in tensors)


def default_config(m: int, n: int, k: int, target: Any = None) -> MatmulConfig:
    """The untuned default for an [m, k] x [k, n] GEMM on ``target`` (the current device when None)."""
    if target is None:
        target = triton.runtime.driver.active.get_current_target()
    config = HOPPER_CANDIDATES[0]
    if n <= 128:
        config = HOPPER_CANDIDATES[2]
    return config_for_target(config, target)


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
    if a.device.type != "cuda":
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
