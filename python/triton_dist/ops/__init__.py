"""triton_dist.ops: overlapped communication + GEMM operators built from plain ``@triton.jit`` kernels.

The ops (each importable from here; all but ``matmul`` and ``skinny_matmul`` also registered as
``torch.ops.triton_dist.<name>``):

- :func:`matmul`: the persistent Hopper GEMM the fused ops are built from, standalone.
- :func:`skinny_matmul`: C = A @ B for A of at most 64 rows (the decode step's GEMMs), made to stream B at HBM
  speed; split-K summed in a fixed order (deterministic). The layers' decode option ``decode_triton_gemm``.
- :func:`ag_gemm`: C = all_gather(A) @ B, overlapping the gather with the GEMM.
- :func:`gemm_rs`: this rank's row shard of sum over ranks of A_r @ B_r (GEMM + reduce-scatter).
- :func:`all_gather`: every rank's tensor concatenated along dim 0; load/store within a node, NVSHMEM puts across
  nodes (hierarchical, selected by topology).
- :func:`all_reduce`: one-launch one-shot / two-shot all-reduce for decode-size messages.
- :func:`all_reduce_residual_rmsnorm`: all-reduce, residual add and RMSNorm in one kernel (a TP layer's epilogue);
  :func:`all_reduce_residual_rmsnorm_fp8`: the same with an e4m3 output and a per-token scale.
- :func:`gemm_ar`: sum over ranks of a @ b (row-parallel decode linear), GEMM and all-reduce in one kernel; with
  ``residual=`` and ``norm_weight=``, the residual add and RMSNorm too (through ``all_reduce_residual_rmsnorm``).
- :func:`flash_decode`: decode attention over a KV cache split across ranks along the sequence, partial results
  combined inside the one kernel.
- :func:`moe_dispatch` / :func:`moe_combine`: expert-parallel token dispatch (each token once per destination
  rank, grouped by local expert) and the weighted combine back to the tokens' home ranks (normal and
  low-latency modes; checked under the CPU emulation, not yet on GPUs).
- :func:`grouped_gemm`: the experts' GEMM over the rows ``moe_dispatch`` grouped per local expert (bf16 / fp16, or
  fp8 with per-row and per-block scales), one launch, no host synchronization. ``quantize_fp8`` (rows, per 128
  channels, as the fp8 dispatch does) and ``quantize_weights_fp8`` (per 128 x 128 block) make its fp8 operands;
  ``moe_check_status`` reads a low-latency dispatch's device-side status.

Layout: each op is a package ``ops/<op>/`` split by role, its ``__init__.py`` documenting the op and exporting its
public names:

- ``kernels.py``: the device code (``@triton.jit`` kernels and helpers);
- ``config.py`` (``selection.py`` for ``ag_gemm``): the configuration dataclass, the defaults, and the choice of a
  configuration for a call (tuned table, else cost model or heuristic);
- ``op.py``: the host op: input checks, the per-signature plan, the launches, the torch custom op.

Shared by every op: ``ops/common/`` (input errors, the plan cache, the workspace and side-stream registry, launches
of compiled kernels without Triton's generic path, device-side call epochs and flag rounds) and ``ops/tuning/``
(the tuned tables ``ops/tuned_configs.json`` and the user's cache, per-GPU calibrations, the cost model for shapes
never tuned). An op imports another op only through that op's public names (``ag_gemm`` and ``gemm_rs`` build on
``matmul``'s building blocks), and nothing here imports ``triton_dist.testing``.
"""

from __future__ import annotations

# Each op's name is bound to the function, not to the submodule of the same name: importing the function (after
# Python bound the submodule to the name) rebinds it, and later submodule imports leave it alone.
from triton_dist.ops.ag_gemm import ag_gemm
from triton_dist.ops.all_gather import all_gather
from triton_dist.ops.all_reduce import all_reduce
from triton_dist.ops.ar_rmsnorm import all_reduce_residual_rmsnorm, all_reduce_residual_rmsnorm_fp8
from triton_dist.ops.flash_decode import flash_decode
from triton_dist.ops.gemm_ar import gemm_ar
from triton_dist.ops.gemm_rs import gemm_rs
from triton_dist.ops.grouped_gemm import grouped_gemm, quantize_weights_fp8
from triton_dist.ops.matmul import MatmulConfig, matmul, skinny_matmul
from triton_dist.ops.moe import check_status as moe_check_status
from triton_dist.ops.moe import moe_combine, moe_dispatch, quantize_fp8

__all__ = [
    "MatmulConfig",
    "ag_gemm",
    "all_gather",
    "all_reduce",
    "all_reduce_residual_rmsnorm",
    "all_reduce_residual_rmsnorm_fp8",
    "flash_decode",
    "gemm_ar",
    "gemm_rs",
    "grouped_gemm",
    "matmul",
    "moe_check_status",
    "moe_combine",
    "moe_dispatch",
    "quantize_fp8",
    "quantize_weights_fp8",
    "skinny_matmul",
]
