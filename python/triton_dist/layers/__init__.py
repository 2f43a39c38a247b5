"""triton_dist.layers: tensor-parallel ``torch.nn.Module``s built on :mod:`triton_dist.ops`, to drop into a model.

- :class:`ColumnParallelLinear`: sequence-parallel input through ``ops.ag_gemm``; input this rank's rows
  [M/W, K], weight shard [K, N/W] (a column block of the full [K, N] weight), output [M, N/W].
- :class:`RowParallelLinear`: ``ops.gemm_rs`` (prefill); input [M, K/W], weight shard [K/W, N] (a row block),
  output this rank's rows [M/W, N] of the sum over ranks.
- :class:`TensorParallelMLP`: column-parallel gate and up projections (one ``ag_gemm``), SiLU(gate) * up, then the
  row-parallel down projection: sequence-parallel in, sequence-parallel out ([M/W, H] -> [M/W, H]).
- :class:`ExpertParallelMoE`: the experts of an MoE block, E/W per rank: ``ops.moe_dispatch``, gate/up and down
  through ``ops.grouped_gemm`` with SiLU(gate) * up between, ``ops.moe_combine``; input this rank's tokens [T, H]
  with the router's top-k ids and weights, output [T, H] (normal or low-latency mode, bf16 or fp8).

Weights are in the ops' [in_features, out_features] layout (the transpose of ``nn.Linear.weight``: pass
``linear.weight.t()``). Each layer takes the full weight and keeps this rank's shard, or takes the shard itself
(``from_shard`` / ``from_shards``). The parameters, and so ``state_dict``, hold this rank's shard only (the key
``weight``; the MLP's ``gate_up.weight`` and ``down.weight``): save one state dict per rank and load it into a layer
of the same world size and rank. The layers are for inference (no autograd through the ops: the parameters have
``requires_grad=False``), have no bias, and take bf16 or fp16 weights. Bad input raises :class:`LayerError` naming
the layer and the tensor.

- :class:`TensorParallelAttention`: grouped-query attention with its heads split over the ranks (QKV column-parallel,
  QK norm and RoPE, SDPA on this rank's heads, O row-parallel); prefill sequence-parallel (``ag_gemm``,
  ``gemm_rs``), decode on replicated tokens (O through ``gemm_ar``, or left partial); a :class:`KVCache` split by
  heads, or by sequence (decode attention through ``ops.flash_decode``); :class:`DecodePositions`, what a decode
  step derives from the positions, made once for every layer.
- :class:`TensorParallelDecoderLayer`: RMSNorm, attention, residual, RMSNorm, MLP, residual; at decode its two all-
  reduces are ``ops.all_reduce_residual_rmsnorm`` (after O as ``ops.gemm_ar``'s norm epilogue). :class:`DecoderConfig`
  and ``CONFIGS`` (Llama-3-8B, Llama-3-70B, Qwen3-32B) give the shapes, ``random_weights`` full weights of one.
  Decode options, off by default until measured (docs/design.md, "The decode step at batch 64"): the layer's
  ``decode_cublas_o`` and ``decode_prefetch_bytes``, the attention block's ``decode_gather`` ("all_gather",
  "fused"), ``decode_sdpa_backend`` and ``decode_rope_tiles``, and ``decode_positions(..., same_position=p)``.

Every rank must call ``forward`` together, with the same shapes (the ops synchronize with the peers).

This is the package's top layer: it imports the ops' public names and the runtime, and nothing below imports it.
"""

from __future__ import annotations

from triton_dist.layers.attention import DecodePositions, KVCache, TensorParallelAttention
from triton_dist.layers.decoder import (
    CONFIGS,
    LLAMA_3_8B,
    LLAMA_3_70B,
    QWEN3_32B,
    DecoderConfig,
    TensorParallelDecoderLayer,
    random_weights,
)
from triton_dist.layers.linear import ColumnParallelLinear, LayerError, RowParallelLinear
from triton_dist.layers.mlp import TensorParallelMLP
from triton_dist.layers.moe import ExpertParallelMoE

__all__ = [
    "CONFIGS",
    "LLAMA_3_70B",
    "LLAMA_3_8B",
    "QWEN3_32B",
    "ColumnParallelLinear",
    "DecodePositions",
    "DecoderConfig",
    "ExpertParallelMoE",
    "KVCache",
    "LayerError",
    "RowParallelLinear",
    "TensorParallelAttention",
    "TensorParallelDecoderLayer",
    "TensorParallelMLP",
    "random_weights",
]
