"""GEMM + reduce-scatter: ``gemm_rs(a, b)`` returns this rank's row shard of ``sum_r A_r @ B_r``, reduced in fp32.

Rank r holds A_r [M, K/W] and B_r [K/W, N]; the result on rank r is rows ``[r * M/W, (r + 1) * M/W)`` of the sum
over ranks, [M/W, N], in A's dtype (bf16 or fp16). Semantics as ``torch.ops.symm_mem.fused_matmul_reduce_scatter``
with ``scatter_dim=0``.

How (one persistent kernel, ``_gemm_rs_kernel``): every rank walks the W row shards of its partial product in the
order ``rank + 1, rank + 2, ..., rank`` (staggered, so at any time each rank pushes to a different peer, and its own
shard comes last). A tile of a peer's shard is computed and stored in fp32 (or the input dtype: ``partial_dtype``)
straight into that peer's symmetric scratch (``dl.symm_at`` stores), then flagged there (``dl.notify``, one int32
flag per (tile, source rank) holding the call's epoch). A tile of its own shard is computed last; before its main
loop it waits for the W - 1 flags of that tile (``dl.wait``), which the peers set long before because they computed
this shard first, and its epilogue adds the received partials in fp32 and stores the output.

The two-kernel variant (``fused=False``) stores the own shard's partial locally and leaves the sum to a second,
memory-bound kernel (``_reduce_partials_kernel``); kept to compare against.

Inputs are read only by their own rank, so ordinary torch tensors work without staging: nothing has to be on the
symmetric heap except the op's workspace (scratch, flags), which is allocated collectively the first time each
shape is seen. Calls are told apart by an epoch that lives on the device (``Workspace.epoch``, incremented by a
one-element add before each launch), so the op works inside CUDA graphs and under ``torch.compile`` without a host
sync. Scratch and flags are double-buffered by the epoch's parity: a rank can be at most one call ahead of any peer
(its own shard waits for every peer's contribution to the same call), so a peer's next call never overwrites data
this call has not read yet.

The cuBLAS path (``GemmRSConfig(gemm="cublas")``, opt-in and a tuning candidate): one ``torch.mm`` per
destination shard, peers' first in the same staggered order; each peer's partial goes to that peer's symmetric
receive slot by the copy engine on a side stream (``producer="ce"``) or straight from cuBLAS's epilogue
(``"direct"``), after an ack that the peer consumed the previous call's partial and followed by an epoch flag
(one-program ``dl.wait`` / ``dl.notify`` kernels, epochs in device memory); the own shard's GEMM runs meanwhile;
then a one-program wait kernel and an fp32 reduction kernel. Waiting is kept out of the wide reduction kernel on
purpose: its spinning programs filled every SM and starved the peer-bound flag kernel of the side stream, which
deadlocked both ranks (at a [4096, 4096] shard). The "pull" producer (``CUBLAS_PULL``, an option only) runs ONE
``torch.mm`` of all M rows into this rank's symmetric [M, N] partial (after a begin kernel that waits until every
peer has read the previous one), then one kernel that flags it ready, waits for the peers' flags and sums this
rank's shard rows of every rank's partial in fp32 (``dl.symm_at`` loads): cuBLAS keeps its full-M efficiency.

Which path runs for a shape (the fused kernel, the cuBLAS path, or torch.matmul + NCCL): the tuned table, else the
calibrated cost model (``config.choose_config``); ``path_of(a, b)`` says which. The torch.matmul + NCCL fallback
does per call exactly what the hand-written baseline does on the GPU (one cuBLAS GEMM into a partial the plan keeps,
one reduce-scatter into the output, on the current stream) and on the host little more than the output's
allocation: the group's reduce-scatter is called with options built once, not through ``dist.reduce_scatter_tensor``
(whose per-call Python showed in small shapes' times, issue 24).

- ``kernels.py``: the device code; ``config.py``: configurations, candidates, the choice; ``op.py``: checks,
  workspaces, plans, the custom op.
"""

from __future__ import annotations

from triton_dist.ops.gemm_rs.config import (
    CANDIDATES,
    CUBLAS_CE,
    CUBLAS_DIRECT,
    CUBLAS_DIRECT_SEPARATE,
    CUBLAS_PULL,
    FALLBACK,
    GemmRSConfig,
    choose_config,
    estimate_ms,
    lookup_tuned,
    tuning_key,
    workspace_bytes,
)
from triton_dist.ops.gemm_rs.kernels import (
    _cublas_begin_kernel,
    _cublas_flag_kernel,
    _cublas_pull_reduce_kernel,
    _cublas_reduce_kernel,
    _cublas_wait_ack_kernel,
    _cublas_wait_kernel,
    _gemm_rs_kernel,
    _loop_layout,
    _reduce_partials_kernel,
)
from triton_dist.ops.gemm_rs.op import (
    CHECK_ENV,
    GemmRsError,
    aligned_for,
    check_inputs,
    clear_workspaces,
    config_for_operands,
    gemm_rs,
    gemm_rs_with,
    launch_without_communication,
    matmul_reduce_scatter,
    path_of,
    plan_for,
    workspaces,
)

__all__ = [
    "CANDIDATES",
    "CHECK_ENV",
    "CUBLAS_CE",
    "CUBLAS_DIRECT",
    "CUBLAS_DIRECT_SEPARATE",
    "CUBLAS_PULL",
    "FALLBACK",
    "GemmRSConfig",
    "GemmRsError",
    "_cublas_begin_kernel",
    "_cublas_flag_kernel",
    "_cublas_pull_reduce_kernel",
    "_cublas_reduce_kernel",
    "_cublas_wait_ack_kernel",
    "_cublas_wait_kernel",
    "_gemm_rs_kernel",
    "_loop_layout",
    "_reduce_partials_kernel",
    "aligned_for",
    "check_inputs",
    "choose_config",
    "clear_workspaces",
    "config_for_operands",
    "estimate_ms",
    "gemm_rs",
    "gemm_rs_with",
    "launch_without_communication",
    "lookup_tuned",
    "matmul_reduce_scatter",
    "path_of",
    "plan_for",
    "tuning_key",
    "workspace_bytes",
    "workspaces",
]
