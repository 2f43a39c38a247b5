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

The skinny GEMM, for the decode step's products with few rows (``skinny_kernels``, ``skinny_config``,
``skinny_op``):

- ``skinny_matmul(a, b, *, out=None, config=None) -> c``: C = A @ B for A [M <= 64, K], made to stream B at HBM
  speed (one pass over B in large blocks, split over K to fill the SMs, split-K partials summed in a fixed order:
  deterministic).
- ``SkinnyConfig`` and ``skinny_config(m, n, k, sms, use_tma)``: its configuration and the cost model's choice
  (``skinny_cost_us``).
"""

from __future__ import annotations

from triton_dist.ops.matmul.config import (
    FALLBACK_CONFIG,
    HOPPER_CANDIDATES,
    MatmulConfig,
    config_for_target,
    default_config,
    pointer_config,
    rows_fit_tma,
    target_has_tma,
)
from triton_dist.ops.matmul.kernels import (
    _matmul_ptr_kernel,
    _matmul_tma_kernel,
    grouped_tile,
    ptr_mainloop,
    ptr_store,
    tma_mainloop,
    tma_store,
)
from triton_dist.ops.matmul.op import (
    SUPPORTED_DTYPES,
    _set_tma_allocator,
    check_matrix,
    check_operands,
    launch_matmul,
    make_descriptors,
    matmul,
    num_sms,
)
from triton_dist.ops.matmul.skinny_config import SkinnyConfig, skinny_config, skinny_cost_us, split_blocks
from triton_dist.ops.matmul.skinny_kernels import _skinny_ptr_kernel, _skinny_tma_kernel
from triton_dist.ops.matmul.skinny_op import default_skinny_config, skinny_matmul

__all__ = [
    "FALLBACK_CONFIG",
    "HOPPER_CANDIDATES",
    "SUPPORTED_DTYPES",
    "MatmulConfig",
    "SkinnyConfig",
    "check_matrix",
    "check_operands",
    "config_for_target",
    "default_config",
    "default_skinny_config",
    "grouped_tile",
    "launch_matmul",
    "make_descriptors",
    "matmul",
    "num_sms",
    "pointer_config",
    "ptr_mainloop",
    "ptr_store",
    "rows_fit_tma",
    "skinny_config",
    "skinny_cost_us",
    "skinny_matmul",
    "split_blocks",
    "target_has_tma",
    "tma_mainloop",
    "tma_store",
    "_matmul_ptr_kernel",
    "_matmul_tma_kernel",
    "_skinny_ptr_kernel",
    "_skinny_tma_kernel",
    "_set_tma_allocator",
]
