"""``moe_dispatch`` / ``moe_combine``: expert-parallel token exchange for MoE layers (DeepEP's semantics).

```python
recv_x, handle = triton_dist.ops.moe_dispatch(x, topk_idx, topk_weights, num_experts)   # normal mode
y = my_experts(recv_x, handle.expert_counts, handle.expert_offsets)                       # unweighted outputs
out = triton_dist.ops.moe_combine(y, handle)                                             # sum_k w_k y_k, x's dtype
```

Each rank holds tokens ``x`` [T, H] (T may differ between ranks), ``topk_idx`` [T, k] (expert ids in [0, E), -1 for
none) and ``topk_weights`` [T, k]. Experts are split contiguously, E / W per rank. Dispatch sends each token once
per destination rank; the receiver gets its rows grouped by local expert (see :class:`MoeHandle` for the layouts of
``mode="normal"`` and ``mode="low_latency"``). Combine returns, for every token on its home rank,
``sum_k w_k * y_k`` accumulated in fp32, in ``x``'s dtype.

``fp8=True`` quantizes the payload to e4m3 inside the push kernel, one fp32 scale per 128 channels (``quantize_fp8``
is the same in torch); the receiver gets the fp8 rows and ``handle.recv_scales`` for an fp8 expert GEMM
(``ops.grouped_gemm``), or ``dequantize=True`` rows in x's dtype. Device-side problems (ids out of range, a
low-latency expert over its capacity) land in ``handle.status``: :func:`check_status`.

``layout="gather"`` (normal mode; an option until a GPU run measures it) skips the per-expert copies: ``recv_x``
holds each received token once and ``handle.gather_rows`` the row each expert-grouped row reads, which
``ops.grouped_gemm(..., gather_rows=...)`` loads through; counts, offsets and combine are unchanged.

- ``config.py``: :class:`MoeError`, :class:`MoeHandle` (the layouts), :class:`MoeConfig` (how the kernels move
  rows: whole rows by default, ``moe_dispatch(..., config=MoeConfig(whole_row=False))`` for chunks), the input
  checks, the launch constants.
- ``kernels.py``: the five ``@triton.jit`` kernels (route, push, expand; combine push and reduce) and their
  ordering argument.
- ``op.py``: the checks, the per-signature plan and workspace, ``torch.ops.triton_dist.moe_dispatch`` /
  ``moe_combine``, the public functions and :func:`check_status`.
- ``switches.py``: the tuning switches ``op.py`` reads at each call (the overlaps, their waves, the fp8 push's options),
  each with the measurements behind its default, and their setters (``switches.set_expand_overlaps_push``, ...).
- ``reference.py``: the torch reference (one process, every rank's inputs as lists), which the tests hold the
  kernels to.
"""

from __future__ import annotations

from triton_dist.ops.moe.config import MoeConfig, MoeError, MoeHandle, MoeStatusError
from triton_dist.ops.moe.op import check_status, moe_combine, moe_dispatch
from triton_dist.ops.moe.reference import dequantize_fp8, quantize_fp8, reference_combine, reference_dispatch

__all__ = [
    "MoeConfig",
    "MoeError",
    "MoeHandle",
    "MoeStatusError",
    "check_status",
    "dequantize_fp8",
    "moe_combine",
    "moe_dispatch",
    "quantize_fp8",
    "reference_combine",
    "reference_dispatch",
]
