"""triton_dist.ops: overlapped communication + GEMM operators built from plain ``@triton.jit`` kernels.

- :func:`matmul` (``ops/matmul.py``): the persistent Hopper GEMM the fused ops are built from, standalone.
- :func:`ag_gemm` (``ops/ag_gemm.py``): C = all_gather(A) @ B, overlapping the gather with the GEMM.
- ``ops/tuning.py``: the joint (GEMM tile x chunk x producer x tile order) configurations, their on-disk cache and
  the cost model for shapes never tuned.
"""

from __future__ import annotations

from triton_dist.ops.matmul import MatmulConfig, matmul

__all__ = ["MatmulConfig", "matmul"]
