"""The tensor-parallel gated MLP (see the package docstring)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from triton_dist.layers._kernels import fused_kernels, silu_mul
from triton_dist.layers.linear import (
    ColumnParallelLinear,
    LayerError,
    RowParallelLinear,
    check_weight,
    shard_of,
    world_position,
)


class TensorParallelMLP(nn.Module):
    """``down(silu(x @ gate) * (x @ up))`` split across ranks, sequence-parallel in and out.

    ``gate_weight`` and ``up_weight``: the full [H, I] weights; ``down_weight``: the full [I, H]; I a multiple of the
    world size W. The gate and up column shards of this rank are concatenated into one column-parallel layer
    (``gate_up``, weight [H, 2*I/W]: gate's columns, then up's) so one ``ag_gemm`` computes both; ``down`` is a
    row-parallel layer holding rows [rank * I/W, (rank + 1) * I/W) of ``down_weight``.

    ``forward(x)``: x is this rank's rows [M/W, H] of the input; returns this rank's rows [M/W, H] of the MLP's
    output. The state dict holds this rank's shards: ``gate_up.weight`` and ``down.weight``.

    ``fused_silu_mul`` (default True; an attribute of that name, which may be changed later): ``silu(gate) * up``
    as one Triton kernel (``_kernels.silu_mul``: one read of gate and up, one write) instead of torch's SiLU
    and product over the strided halves of the gate/up output; used on GPUs and under the emulation
    (``TRITON_INTERPRET=1``), torch's ops on the CPU otherwise. Either way the result is torch's up to bf16 rounding.
    """

    def __init__(
        self,
        gate_weight: torch.Tensor,
        up_weight: torch.Tensor,
        down_weight: torch.Tensor,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        fused_silu_mul: bool = True,
    ) -> None:
        rank, world_size = world_position(rank, world_size)
        name = type(self).__name__
        for tensor_name, weight in (("gate_weight", gate_weight), ("up_weight", up_weight)):
            check_weight(name, tensor_name, weight)
        if gate_weight.shape != up_weight.shape:
            raise LayerError(
                f"{name}: up_weight has shape {list(up_weight.shape)}, gate_weight {list(gate_weight.shape)}"
            )
        gate = shard_of(name, "gate_weight", gate_weight, 1, rank, world_size)
        up = shard_of(name, "up_weight", up_weight, 1, rank, world_size)
        down = shard_of(name, "down_weight", down_weight, 0, rank, world_size)
        self._init_from_shards(gate, up, down, rank, world_size, fused_silu_mul)

    @classmethod
    def from_shards(
        cls,
        gate_shard: torch.Tensor,
        up_shard: torch.Tensor,
        down_shard: torch.Tensor,
        *,
        rank: int | None = None,
        world_size: int | None = None,
        fused_silu_mul: bool = True,
    ) -> TensorParallelMLP:
        """An MLP holding this rank's shards: gate and up [H, I/W] (column blocks), down [I/W, H] (a row block);
        ``fused_silu_mul`` as the class's."""
        rank, world_size = world_position(rank, world_size)
        mlp = cls.__new__(cls)
        mlp._init_from_shards(gate_shard, up_shard, down_shard, rank, world_size, fused_silu_mul)
        return mlp

    def _init_from_shards(
        self,
        gate: torch.Tensor,
        up: torch.Tensor,
        down: torch.Tensor,
        rank: int,
        world_size: int,
        fused_silu_mul: bool,
    ) -> None:
        nn.Module.__init__(self)
        name = type(self).__name__
        for tensor_name, shard in (("gate_shard", gate), ("up_shard", up), ("down_shard", down)):
            check_weight(name, tensor_name, shard)
        if gate.shape != up.shape:
            raise LayerError(f"{name}: up_shard has shape {list(up.shape)}, gate_shard {list(gate.shape)}")
        hidden, inter = gate.shape
        if down.shape != (inter, hidden):
            raise LayerError(
                f"{name}: down_shard must be [{inter}, {hidden}] to follow gate [{hidden}, {inter}], "
                f"got {list(down.shape)}"
            )
        if not gate.dtype == up.dtype == down.dtype:
            raise LayerError(f"{name}: mixed weight dtypes: gate {gate.dtype}, up {up.dtype}, down {down.dtype}")
        self.rank, self.world_size = rank, world_size
        self.fused_silu_mul = bool(fused_silu_mul)
        self.gate_up = ColumnParallelLinear.from_shard(torch.cat([gate, up], dim=1), rank=rank, world_size=world_size)
        self.down = RowParallelLinear.from_shard(down, rank=rank, world_size=world_size)

    @property
    def hidden_size(self) -> int:
        """H."""
        return self.gate_up.in_features

    @property
    def intermediate_size(self) -> int:
        """I, the full intermediate size (this rank computes I/W of it)."""
        return int(self.down.weight.shape[0]) * self.world_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[M/W, H] (this rank's rows) -> [M/W, H] (this rank's rows of the output); every rank calls it together."""
        gate_up = self.gate_up(x)  # [M, 2 * I/W]
        if self.fused_silu_mul and fused_kernels(gate_up):
            gated = silu_mul(gate_up)  # one launch: one read of gate and up, one write
        else:
            gate, up = gate_up.chunk(2, dim=1)
            gated = functional.silu(gate) * up
        return self.down(gated)

    def extra_repr(self) -> str:
        return (
            f"hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, "
            f"fused_silu_mul={self.fused_silu_mul}"
        )
