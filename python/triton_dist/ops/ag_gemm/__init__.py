"""AllGather + GEMM, overlapped: ``ag_gemm(a, b)`` = ``all_gather(a) @ b``.

Rank r holds A_r [M_local, K] and B [K, N]; the result is C [W * M_local, N] (rows of rank s at s * M_local),
optionally with the gathered A [W * M_local, K]. bf16 or fp16, any world size.

- ``kernels.py``: the device code (epoch and barrier, SM producer, the persistent GEMMs that wait per chunk, the
  cuBLAS path's wait per chunk of a shard);
- ``selection.py``: which configuration runs (tuned table, else the calibrated cost model);
- ``op.py``: input checks, the workspace, one plan per call signature, the custom op.

Zero-copy: ``a`` and ``b`` may be ordinary torch tensors; only the peers' shards travel, into a receive buffer on
the symmetric heap that the op keeps per (shape, dtype) and reuses.
"""

from __future__ import annotations

from triton_dist.ops.ag_gemm.kernels import (
    _ag_gemm_ptr_kernel,
    _ag_gemm_tma_kernel,
    _begin_kernel,
    _push_kernel,
    _wait_shard_kernel,
)
from triton_dist.ops.ag_gemm.op import (
    MAX_PUSH_CTAS,
    MIN_BLOCK_M,
    PUSH_BLOCK,
    AgGemmError,
    CublasPlan,
    FusedPlan,
    UnfusedPlan,
    ag_gemm,
    ag_gemm_impl,
    check_inputs,
    clear_workspaces,
    path_of,
    plan_for,
    workspace,
)
from triton_dist.ops.ag_gemm.selection import choose_config, tma_fits, uses_tma
from triton_dist.ops.tuning import OverlapConfig

__all__ = [
    "MAX_PUSH_CTAS",
    "MIN_BLOCK_M",
    "PUSH_BLOCK",
    "AgGemmError",
    "CublasPlan",
    "FusedPlan",
    "OverlapConfig",
    "UnfusedPlan",
    "_ag_gemm_ptr_kernel",
    "_ag_gemm_tma_kernel",
    "_begin_kernel",
    "_push_kernel",
    "_wait_shard_kernel",
    "ag_gemm",
    "ag_gemm_impl",
    "check_inputs",
    "choose_config",
    "clear_workspaces",
    "path_of",
    "plan_for",
    "tma_fits",
    "uses_tma",
    "workspace",
]
