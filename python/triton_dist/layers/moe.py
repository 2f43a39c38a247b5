"""The expert-parallel MoE layer (see the package docstring and docs/layers.md)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional

from triton_dist.layers.linear import LayerError, world_position
from triton_dist.ops import (
    grouped_gemm,
    moe_check_status,
    moe_combine,
    moe_dispatch,
    quantize_fp8,
    quantize_weights_fp8,
)

MODES = ("normal", "low_latency")
WEIGHT_DTYPES = (torch.bfloat16, torch.float16)


def _check_experts(layer: str, name: str, weight: Any) -> None:
    if not isinstance(weight, torch.Tensor):
        raise LayerError(f"{layer}: {name} must be a torch.Tensor, got {type(weight).__name__}")
    if weight.dim() != 3:
        raise LayerError(f"{layer}: {name} must be 3-D [experts, in_features, out_features], got {list(weight.shape)}")
    if weight.dtype not in WEIGHT_DTYPES:
        raise LayerError(f"{layer}: {name} must be bf16 or fp16, got {weight.dtype}")


class ExpertParallelMoE(nn.Module):
    """The experts of an MoE block split over the ranks: ``sum_k w_k * down_e(silu(x @ gate_e) * (x @ up_e))``.

    ``forward(x, topk_idx, topk_weights)``: x [T, H] this rank's tokens (T may differ between ranks), ``topk_idx``
    [T, k] int32 / int64 expert ids in [0, E) (-1: none) and ``topk_weights`` [T, k] (the router's output: the
    router is the model's). Each token goes to the ranks holding its experts (``ops.moe_dispatch``), each rank runs
    its experts with two grouped GEMMs (``ops.grouped_gemm``: gate and up in one, then down), and the weighted sum
    comes home (``ops.moe_combine``, fp32 accumulation). Returns [T, H] in x's dtype.

    ``gate_weight`` and ``up_weight``: the full [E, H, I] weights of every expert; ``down_weight``: [E, I, H]; E a
    multiple of the world size W. This rank keeps experts ``[rank * E/W, (rank + 1) * E/W)`` (``from_shards`` takes
    them directly). Parameters (and ``state_dict``): ``gate_up_weight`` [E/W, H, 2I] (gate's columns, then up's) and
    ``down_weight`` [E/W, I, H]; with ``fp8``, those in float8_e4m3fn plus ``gate_up_scale`` / ``down_scale``
    (fp32, one per 128 x 128 block: ``ops.quantize_weights_fp8``).

    ``mode``: ``"normal"`` (prefill, training-size batches; one host synchronization per call, in the dispatch) or
    ``"low_latency"`` (decode: no host synchronization, CUDA-graph capturable; T at most ``max_tokens_per_rank``).
    ``fp8``: tokens cross the links in e4m3 with per-128-channel scales, and both GEMMs run in fp8 (the activation
    between them quantized per row per 128 channels); x stays bf16 / fp16.
    ``dispatch_layout`` (normal mode): ``"expanded"`` (default) or ``"gather"``: the dispatch returns each received
    token once and the first grouped GEMM reads the rows through ``handle.gather_rows`` (``moe_dispatch(...,
    layout=...)``; the same results, without the dispatch's per-expert copy). An option until a GPU run measures
    it.

    Bad ids: in normal mode an expert id out of range raises ``MoeStatusError`` on every rank; in low-latency mode
    the dispatch counts it on the device and :meth:`check_status` raises (a host synchronization: call it outside
    graphs, e.g. every N steps), as it does for pairs dropped over the low-latency capacity. Inference only
    (``requires_grad=False``). Every rank calls ``forward`` together. Bad input raises :class:`LayerError` naming
    the layer and the tensor.
    """

    def __init__(
        self,
        gate_weight: torch.Tensor,
        up_weight: torch.Tensor,
        down_weight: torch.Tensor,
        *,
        mode: str = "normal",
        max_tokens_per_rank: int | None = None,
        fp8: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        dispatch_layout: str = "expanded",
    ) -> None:
        rank, world_size = world_position(rank, world_size)
        name = type(self).__name__
        for tensor_name, weight in (
            ("gate_weight", gate_weight),
            ("up_weight", up_weight),
            ("down_weight", down_weight),
        ):
            _check_experts(name, tensor_name, weight)
        experts = gate_weight.shape[0]
        if experts % world_size:
            raise LayerError(
                f"{name}: gate_weight has {experts} experts, not a multiple of the world size {world_size} "
                "(experts are split contiguously, E / W per rank)"
            )
        local = experts // world_size
        mine = slice(rank * local, (rank + 1) * local)
        gate, up, down = (w[mine].contiguous().clone() for w in (gate_weight, up_weight, down_weight))
        self._init_from_shards(
            gate, up, down, experts, mode, max_tokens_per_rank, fp8, rank, world_size, dispatch_layout
        )

    @classmethod
    def from_shards(
        cls,
        gate_shard: torch.Tensor,
        up_shard: torch.Tensor,
        down_shard: torch.Tensor,
        *,
        num_experts: int,
        mode: str = "normal",
        max_tokens_per_rank: int | None = None,
        fp8: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        dispatch_layout: str = "expanded",
    ) -> ExpertParallelMoE:
        """A layer holding this rank's experts: gate and up [E/W, H, I], down [E/W, I, H]; ``num_experts`` is E."""
        rank, world_size = world_position(rank, world_size)
        layer = cls.__new__(cls)
        layer._init_from_shards(
            gate_shard, up_shard, down_shard, num_experts, mode, max_tokens_per_rank, fp8, rank, world_size,
            dispatch_layout,
        )  # fmt: skip
        return layer

    def _init_from_shards(
        self,
        gate: torch.Tensor,
        up: torch.Tensor,
        down: torch.Tensor,
        num_experts: int,
        mode: str,
        max_tokens_per_rank: int | None,
        fp8: bool,
        rank: int,
        world_size: int,
        dispatch_layout: str = "expanded",
    ) -> None:
        nn.Module.__init__(self)
        name = type(self).__name__
        for tensor_name, shard in (("gate_shard", gate), ("up_shard", up), ("down_shard", down)):
            _check_experts(name, tensor_name, shard)
        if isinstance(num_experts, bool) or not isinstance(num_experts, int) or num_experts < 1:
            raise LayerError(f"{name}: num_experts must be a positive int, got {num_experts!r}")
        if num_experts % world_size or gate.shape[0] != num_experts // world_size:
            raise LayerError(
                f"{name}: gate_shard holds {gate.shape[0]} experts, but {num_experts} experts over {world_size} "
                f"ranks give {num_experts / world_size:g} per rank"
            )
        if up.shape != gate.shape:
            raise LayerError(f"{name}: up_shard has shape {list(up.shape)}, gate_shard {list(gate.shape)}")
        local, hidden, inter = gate.shape
        if down.shape != (local, inter, hidden):
            raise LayerError(
                f"{name}: down_shard must be [{local}, {inter}, {hidden}] to follow gate [{local}, {hidden}, {inter}], "
                f"got {list(down.shape)}"
            )
        if not gate.dtype == up.dtype == down.dtype:
            raise LayerError(f"{name}: mixed weight dtypes: gate {gate.dtype}, up {up.dtype}, down {down.dtype}")
        if mode not in MODES:
            raise LayerError(f"{name}: mode must be one of {list(MODES)}, got {mode!r}")
        if mode == "low_latency":
            if (
                isinstance(max_tokens_per_rank, bool)
                or not isinstance(max_tokens_per_rank, int)
                or max_tokens_per_rank < 1
            ):
                raise LayerError(f"{name}: low_latency mode needs max_tokens_per_rank, a positive int")
        elif max_tokens_per_rank is not None:
            raise LayerError(f"{name}: max_tokens_per_rank is for low_latency mode")
        if not isinstance(fp8, bool):
            raise LayerError(f"{name}: fp8 must be True or False, got {fp8!r}")
        if dispatch_layout not in ("expanded", "gather"):
            raise LayerError(f"{name}: dispatch_layout must be 'expanded' or 'gather', got {dispatch_layout!r}")
        if dispatch_layout == "gather" and mode != "normal":
            raise LayerError(f"{name}: dispatch_layout='gather' is for normal mode, not {mode!r}")
        self.dispatch_layout = dispatch_layout
        self.rank, self.world_size, self.num_experts = rank, world_size, num_experts
        self.mode, self.max_tokens_per_rank, self.fp8 = mode, max_tokens_per_rank, fp8
        self.dtype = gate.dtype
        self._last_handle: Any = None
        gate_up = torch.cat([gate, up], dim=2)
        if fp8:
            gate_up, gate_up_scale = quantize_weights_fp8(gate_up)
            down, down_scale = quantize_weights_fp8(down)
            self.register_buffer("gate_up_scale", gate_up_scale)
            self.register_buffer("down_scale", down_scale)
        self.gate_up_weight = nn.Parameter(gate_up.detach().contiguous(), requires_grad=False)
        self.down_weight = nn.Parameter(down.detach().contiguous(), requires_grad=False)

    @property
    def hidden_size(self) -> int:
        """H."""
        return int(self.gate_up_weight.shape[1])

    @property
    def intermediate_size(self) -> int:
        """I, each expert's intermediate size."""
        return int(self.down_weight.shape[1])

    @property
    def local_experts(self) -> int:
        """E / W, the experts this rank holds."""
        return int(self.gate_up_weight.shape[0])

    def _check_input(self, x: Any, topk_idx: Any, topk_weights: Any) -> None:
        name = type(self).__name__
        for tensor_name, value in (("x", x), ("topk_idx", topk_idx), ("topk_weights", topk_weights)):
            if not isinstance(value, torch.Tensor):
                raise LayerError(f"{name}: {tensor_name} must be a torch.Tensor, got {type(value).__name__}")
        if x.dim() != 2 or x.shape[1] != self.hidden_size:
            raise LayerError(f"{name}: x must be [tokens, {self.hidden_size}], got shape {list(x.shape)}")
        if x.dtype != self.dtype:
            raise LayerError(f"{name}: x is {x.dtype} but the layer's weights are {self.dtype}")
        if x.device != self.gate_up_weight.device:
            raise LayerError(f"{name}: x is on {x.device} but the weights are on {self.gate_up_weight.device}")
        if topk_idx.dim() != 2 or topk_idx.shape[0] != x.shape[0]:
            raise LayerError(f"{name}: topk_idx must be [{x.shape[0]}, k] (x's tokens), got {list(topk_idx.shape)}")
        if topk_weights.shape != topk_idx.shape:
            raise LayerError(
                f"{name}: topk_weights must have topk_idx's shape {list(topk_idx.shape)}, "
                f"got {list(topk_weights.shape)}"
            )
        if self.mode == "low_latency" and x.shape[0] > (self.max_tokens_per_rank or 0):
            raise LayerError(
                f"{name}: x has {x.shape[0]} tokens, more than max_tokens_per_rank={self.max_tokens_per_rank}"
            )

    def forward(self, x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        """[T, H] tokens, [T, k] expert ids and weights -> [T, H] ``sum_k w_k * expert_k(x)``; every rank calls it
        together."""
        self._check_input(x, topk_idx, topk_weights)
        recv_x, handle = moe_dispatch(
            x.contiguous(),
            topk_idx.contiguous(),
            topk_weights.contiguous(),
            self.num_experts,
            self.mode,
            self.max_tokens_per_rank,
            fp8=self.fp8,
            layout=self.dispatch_layout,
        )
        self._last_handle = handle
        counts, offsets = handle.expert_counts, handle.expert_offsets
        gather = handle.gather_rows  # layout="gather": the first GEMM reads each token's row through it
        inter = self.intermediate_size
        if self.fp8:
            gate_up = grouped_gemm(
                recv_x,
                self.gate_up_weight,
                counts,
                offsets,
                x_scales=handle.recv_scales,
                w_scales=self.gate_up_scale,
                out_dtype=x.dtype,
                gather_rows=gather,
            )
            act_q, act_scales = quantize_fp8(functional.silu(gate_up[..., :inter]) * gate_up[..., inter:])
            y = grouped_gemm(
                act_q,
                self.down_weight,
                counts,
                offsets,
                x_scales=act_scales,
                w_scales=self.down_scale,
                out_dtype=x.dtype,
            )
        else:
            gate_up = grouped_gemm(recv_x, self.gate_up_weight, counts, offsets, gather_rows=gather)
            act = functional.silu(gate_up[..., :inter]) * gate_up[..., inter:]
            y = grouped_gemm(act.contiguous(), self.down_weight, counts, offsets)
        return moe_combine(y, handle)

    def check_status(self) -> None:
        """Raise ``MoeStatusError`` if the last ``forward``'s dispatch skipped expert ids out of range or (low-latency
        mode) dropped pairs over an expert's capacity; reads the device (a host synchronization)."""
        if self._last_handle is not None:
            moe_check_status(self._last_handle)

    def extra_repr(self) -> str:
        return (
            f"num_experts={self.num_experts}, local_experts={self.local_experts}, hidden_size={self.hidden_size}, "
            f"intermediate_size={self.intermediate_size}, mode={self.mode!r}, fp8={self.fp8}, "
            f"dispatch_layout={self.dispatch_layout!r}, rank={self.rank}, "
            f"world_size={self.world_size}"
        )
