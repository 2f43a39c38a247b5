"""``grouped_gemm``: the experts' GEMM of an MoE layer, one launch for every local expert.

```python
recv_x, handle = triton_dist.ops.moe_dispatch(x, topk_idx, topk_weights, num_experts)
h = triton_dist.ops.grouped_gemm(recv_x, w_gate_up, handle.expert_counts, handle.expert_offsets)  # [R, N]
```

Rows grouped per expert as ``moe_dispatch`` leaves them (the normal [R, K] layout with counts and offsets, or the
low-latency [L, C, K] layout with counts), weights [L, K, N]; bf16 / fp16, or fp8 e4m3 with per-row-per-128-channel
activation scales and per-128x128-block (or per-expert) weight scales. Local: no communication.

- ``config.py``: :class:`GroupedGemmConfig`, :class:`GroupedGemmError`, the default configuration.
- ``kernels.py``: the ``@triton.jit`` kernel (the expert of each tile found on the device).
- ``op.py``: the checks, the launch, ``torch.ops.triton_dist.grouped_gemm``, :func:`grouped_gemm` and
  :func:`quantize_weights_fp8` (weights to fp8 with per-128x128-block scales, in torch).
"""

from __future__ import annotations

from triton_dist.ops.grouped_gemm.config import GroupedGemmConfig, GroupedGemmError
from triton_dist.ops.grouped_gemm.op import grouped_gemm, quantize_weights_fp8

__all__ = ["GroupedGemmConfig", "GroupedGemmError", "grouped_gemm", "quantize_weights_fp8"]
