"""Column- and row-parallel linear layers over ``ops.ag_gemm`` and ``ops.gemm_rs`` (see the package docstring)."""

from __future__ import annotations

from typing import Self

import torch
from torch import nn

from triton_dist import runtime
from triton_dist.ops import ag_gemm, gemm_rs

WEIGHT_DTYPES = (torch.bfloat16, torch.float16)
"""The dtypes the ops take."""


class LayerError(ValueError):
    """Bad input to a layer of :mod:`triton_dist.layers`; the message names the layer and the tensor."""


def world_position(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """``(rank, world_size)``: the ones given, else the initialized triton_dist world's (``triton_dist.init()``).

    Passing both builds a layer without a world (to shard weights ahead of time, or in tests).
    """
    if rank is None or world_size is None:
        world = runtime.current_world()
        rank = world.rank if rank is None else rank
        world_size = world.world_size if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise LayerError(f"rank {rank} is not in a world of {world_size} ranks")
    return rank, world_size


def check_weight(layer: str, name: str, weight: torch.Tensor) -> None:
    """Raise LayerError unless ``weight`` is a 2-D bf16 or fp16 tensor."""
    if not isinstance(weight, torch.Tensor):
        raise LayerError(f"{layer}: {name} must be a torch.Tensor, got {type(weight).__name__}")
    if weight.dim() != 2:
        raise LayerError(f"{layer}: {name} must be 2-D [in_features, out_features], got shape {list(weight.shape)}")
    if weight.dtype not in WEIGHT_DTYPES:
        raise LayerError(f"{layer}: {name} must be bf16 or fp16, got {weight.dtype}")


def shard_of(layer: str, name: str, weight: torch.Tensor, dim: int, rank: int, world_size: int) -> torch.Tensor:
    """Block ``rank`` of ``world_size`` equal blocks of ``weight`` along ``dim``, contiguous (a copy)."""
    check_weight(layer, name, weight)
    if weight.shape[dim] % world_size:
        raise LayerError(
            f"{layer}: {name} has {weight.shape[dim]} {'columns' if dim else 'rows'} (shape {list(weight.shape)}), "
            f"not a multiple of the world size {world_size}"
        )
    step = weight.shape[dim] // world_size
    return weight.narrow(dim, rank * step, step).contiguous().clone()


def check_input(layer: str, x: torch.Tensor, weight: torch.Tensor, features: int) -> None:
    """Raise LayerError unless ``x`` is 2-D with ``features`` columns, in the weight's dtype and on its device."""
    if x.dim() != 2 or x.shape[1] != features:
        raise LayerError(f"{layer}: input must be [rows, {features}], got shape {list(x.shape)}")
    if x.dtype != weight.dtype:
        raise LayerError(f"{layer}: input is {x.dtype} but weight is {weight.dtype}")
    if x.device != weight.device:
        raise LayerError(f"{layer}: input is on {x.device} but weight is on {weight.device}")


class _ShardedLinear(nn.Module):
    """What both linears share: one weight block of ``world_size`` along ``SHARD_DIM`` (1: columns, 0: rows), built
    from the full weight or given as the shard, and the repr."""

    SHARD_DIM: int

    def __init__(self, weight: torch.Tensor, *, rank: int | None = None, world_size: int | None = None) -> None:
        super().__init__()
        self.rank, self.world_size = world_position(rank, world_size)
        shard = shard_of(type(self).__name__, "weight", weight, self.SHARD_DIM, self.rank, self.world_size)
        self.weight = nn.Parameter(shard, requires_grad=False)

    @classmethod
    def from_shard(cls, weight_shard: torch.Tensor, *, rank: int | None = None, world_size: int | None = None) -> Self:
        """A layer holding ``weight_shard``, this rank's block, as given (made contiguous)."""
        check_weight(cls.__name__, "weight_shard", weight_shard)
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer.rank, layer.world_size = world_position(rank, world_size)
        layer.weight = nn.Parameter(weight_shard.detach().contiguous(), requires_grad=False)
        return layer

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"rank={self.rank}, world_size={self.world_size}"
        )


class ColumnParallelLinear(_ShardedLinear):
    """``y = all_gather(x) @ W[:, this rank's columns]`` through ``ops.ag_gemm`` (sequence-parallel input).

    ``weight``: the full weight [K, N] (in_features, out_features); this rank keeps columns
    ``[rank * N/W, (rank + 1) * N/W)``, N a multiple of the world size W. ``forward(x)``: x is this rank's rows
    [M/W, K] of the input, the same shape on every rank; returns [M, N/W] (every rank's rows, this rank's columns).
    ``rank`` / ``world_size`` default to the triton_dist world's. ``state_dict()["weight"]`` is this rank's shard.
    """

    SHARD_DIM = 1  # from_shard takes [K, N/W], this rank's column block

    @property
    def in_features(self) -> int:
        """K."""
        return int(self.weight.shape[0])

    @property
    def out_features(self) -> int:
        """N, the full weight's columns (this rank holds N/W of them)."""
        return int(self.weight.shape[1]) * self.world_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[M/W, K] (this rank's rows) -> [M, N/W]; every rank calls it together."""
        check_input(type(self).__name__, x, self.weight, self.in_features)
        out = ag_gemm(x.contiguous(), self.weight)
        assert isinstance(out, torch.Tensor)  # without return_gathered, only C
        return out


class RowParallelLinear(_ShardedLinear):
    """This rank's rows of ``sum over ranks of x_r @ W[this rank's rows]`` through ``ops.gemm_rs`` (prefill).

    ``weight``: the full weight [K, N]; this rank keeps rows ``[rank * K/W, (rank + 1) * K/W)``, K a multiple of the
    world size W. ``forward(x)``: x [M, K/W] is this rank's columns of the input (as a column-parallel layer
    leaves them), M a multiple of W; returns this rank's rows [M/W, N] of ``x_full @ weight``.
    ``rank`` / ``world_size`` default to the triton_dist world's. ``state_dict()["weight"]`` is this rank's shard.
    """

    SHARD_DIM = 0  # from_shard takes [K/W, N], this rank's row block

    @property
    def in_features(self) -> int:
        """K, the full weight's rows (this rank holds K/W of them)."""
        return int(self.weight.shape[0]) * self.world_size

    @property
    def out_features(self) -> int:
        """N."""
        return int(self.weight.shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[M, K/W] -> [M/W, N] (this rank's rows of the reduced product); every rank calls it together."""
        name = type(self).__name__
        check_input(name, x, self.weight, int(self.weight.shape[0]))
        if x.shape[0] % self.world_size:
            raise LayerError(f"{name}: input has {x.shape[0]} rows, not a multiple of the world size {self.world_size}")
        return gemm_rs(x.contiguous(), self.weight)
