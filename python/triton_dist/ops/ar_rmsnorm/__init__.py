"""``all_reduce_residual_rmsnorm(x, residual, weight, eps)``: a tensor-parallel layer's epilogue in one kernel.

```python
normed, residual = triton_dist.ops.all_reduce_residual_rmsnorm(x, residual, weight, eps=1e-6)
```

``new_residual = residual + sum over ranks of x``; ``normed = RMSNorm(new_residual) * weight`` (fp32 inside,
x's dtype out), with the all-reduce's one-shot (push) or two-shot flag rounds by message size.

- ``kernels.py``: the fused kernel (whole rows per program, device-side epochs);
- ``config.py``: :class:`ArRmsNormConfig` and the choice of the algorithm (``all_reduce``'s tables);
- ``op.py``: checks, the per-signature plan, ``torch.ops.triton_dist.all_reduce_residual_rmsnorm``, the function.

Not yet: an fp8 (e4m3) output with a per-token scale, and this epilogue inside ``gemm_ar``.
"""

from __future__ import annotations

from triton_dist.ops.ar_rmsnorm.config import ArRmsNormConfig, ArRmsNormError
from triton_dist.ops.ar_rmsnorm.op import all_reduce_residual_rmsnorm

__all__ = ["ArRmsNormConfig", "ArRmsNormError", "all_reduce_residual_rmsnorm"]
