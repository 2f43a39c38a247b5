"""triton_dist.ops: overlapped communication + GEMM operators built from plain ``@triton.jit`` kernels.

- :func:`matmul` (``ops/matmul.py``): the persistent Hopper GEMM the fused ops are built from, standalone.
- :func:`ag_gemm` (``ops/ag_gemm.py``): C = all_gather(A) @ B, overlapping the gather with the GEMM.
- :func:`gemm_rs` (``ops/gemm_rs.py``): this rank's row shard of sum over ranks of A_r @ B_r (GEMM + reduce-scatter).
- :func:`all_reduce` (``ops/all_reduce/``): one-launch one-shot / two-shot all-reduce for decode-size messages.
- :func:`gemm_ar` (``ops/gemm_ar/``): sum over ranks of a @ b (row-parallel decode linear), GEMM and all-reduce
  in one kernel.
- :func:`flash_decode` (``ops/flash_decode/``): decode attention over a KV cache split across ranks along the
  sequence, partial results combined inside the one kernel.
- ``ops/tuning.py``: the joint (GEMM tile x chunk x producer x tile order) configurations, their on-disk cache and
  the cost model for shapes never tuned.
"""

from __future__ import annotations

# Each op's name is bound to the function, not to the submodule of the same name: importing the function (after
# Python bound the submodule to the name) rebinds it, and later submodule imports leave it alone.
from triton_dist.ops.ag_gemm import ag_gemm
from triton_dist.ops.all_reduce import all_reduce
from triton_dist.ops.flash_decode import flash_decode
from triton_dist.ops.gemm_ar import gemm_ar
from triton_dist.ops.gemm_rs import gemm_rs
from triton_dist.ops.matmul import MatmulConfig, matmul

__all__ = ["MatmulConfig", "ag_gemm", "all_reduce", "flash_decode", "gemm_ar", "gemm_rs", "matmul"]
