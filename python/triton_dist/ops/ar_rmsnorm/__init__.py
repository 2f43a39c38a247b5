"""``all_reduce_residual_rmsnorm(x, residual, weight, eps)``: a tensor-parallel layer's epilogue in one kernel.

```python
normed, residual = triton_dist.ops.all_reduce_residual_rmsnorm(x, residual, weight, eps=1e-6)
normed_fp8, scale, residual = all_reduce_residual_rmsnorm_fp8(x, residual, weight, eps=1e-6)  # e4m3, per token
```

``new_residual = residual + sum over ranks of x``; ``normed = RMSNorm(new_residual) * weight`` (fp32 inside, the
norm of the rounded new residual, x's dtype out), with the all-reduce's one-shot (push) or two-shot flag rounds by
message size (``all_reduce.select_config`` chooses). The fp8 variant quantizes each normed row to e4m3 with one
fp32 scale per token (``scale = max|row| / 448``, ``[..., 1]``: ``normed_fp8.float() * scale`` dequantizes).
``gemm_ar(a, b, residual=, norm_weight=)`` feeds its product to this op. A low-latency variant, the LL one-shot
(``all_reduce``'s "one_shot_ll": the call's epoch inside the data words, no flag round, a row split over up to 16
programs at small M; NVIDIA, decode sizes), is never chosen yet; force it with
``op._run(x, residual, weight, eps, ArRmsNormConfig("one_shot_ll", 256, 4))`` (or ``op._run_fp8``). Its option
``ll_single_reader=True`` has one program per row receive, norm and write the whole row while the row's other
programs only push their slice (no redundant reads of the row, no step between programs; an option until measured);
``ll_reduce="atomic"`` has each program poll only its slice and the last of a row's programs to arrive (an atomic
count) norm the row from the slices' partial sums of squares (an option until measured); ``ll_reduce="spin"`` has
every program of the row wait for the others' arrivals and norm only its own slice from registers, and
``ll_reduce="spin_words"`` the same with the partials exchanged as epoch-tagged words, no counter (options until
measured; their e4m3 output runs "atomic").

- ``kernels.py``: the fused kernel (whole rows per program, several per flag round for large calls, device-side
  epochs) and the LL one-shot's kernel (``all_reduce``'s LL device helpers; rows split into slices over programs);
- ``config.py``: :class:`ArRmsNormConfig` and the choice of the algorithm (``all_reduce``'s tables);
- ``op.py``: checks, the per-signature plan, ``torch.ops.triton_dist.all_reduce_residual_rmsnorm``, the function.
"""

from __future__ import annotations

from triton_dist.ops.ar_rmsnorm.config import MAX_HIDDEN, ArRmsNormConfig, ArRmsNormError
from triton_dist.ops.ar_rmsnorm.op import all_reduce_residual_rmsnorm, all_reduce_residual_rmsnorm_fp8

__all__ = [
    "MAX_HIDDEN",
    "ArRmsNormConfig",
    "ArRmsNormError",
    "all_reduce_residual_rmsnorm",
    "all_reduce_residual_rmsnorm_fp8",
]
