"""Grouped GEMM tile configurations: the dataclass, its checks and the default per call."""

from __future__ import annotations

import dataclasses

from triton_dist.ops.common.errors import OpInputError

SCALE_BLOCK = 128
"""The fp8 scale granularity: ``x`` has one scale per row per 128 channels of K; ``w`` one per 128 x 128 block of
(K, N) per expert (or one per expert, broadcast to the blocks)."""


class GroupedGemmError(OpInputError):
    """Bad input to ``grouped_gemm`` (shapes, dtypes, devices, scales, a configuration)."""


@dataclasses.dataclass(frozen=True)
class GroupedGemmConfig:
    """One tile configuration of the grouped GEMM kernel.

    ``block_m`` rows of one expert by ``block_n`` columns per program, ``block_k`` deep steps; ``num_warps`` and
    ``num_stages`` as Triton's. fp8 needs ``block_k`` and ``block_n`` dividing 128 (a step and a column tile lie in
    one scale block) and ``block_k`` at least 32 (the fp8 tensor-core instruction's depth).
    """

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    num_warps: int = 8
    num_stages: int = 3

    def check(self, fp8: bool) -> None:
        """Raise :class:`GroupedGemmError` unless this configuration can run (``fp8``: for fp8 operands)."""
        for name in ("block_m", "block_n", "block_k"):
            value = getattr(self, name)
            if value < 16 or value & (value - 1):
                raise GroupedGemmError(f"grouped_gemm: config.{name} must be a power of two >= 16, got {value}")
        if self.num_warps not in (1, 2, 4, 8, 16) or self.num_stages < 1:
            raise GroupedGemmError(f"grouped_gemm: bad num_warps / num_stages in {self}")
        if fp8 and (self.block_k > SCALE_BLOCK or self.block_n > SCALE_BLOCK or self.block_k < 32):
            raise GroupedGemmError(
                f"grouped_gemm: fp8 needs block_k in [32, 128] and block_n <= 128 (one scale block per step and "
                f"column tile), got {self}"
            )


def default_config(rows_per_expert: float, fp8: bool) -> GroupedGemmConfig:
    """The configuration for a call whose experts hold about ``rows_per_expert`` rows: 64-row tiles for decode-size
    groups (less padding per expert), 128-row tiles otherwise; fp8 steps 128 deep (one scale group per step)."""
    small = rows_per_expert <= 64
    return GroupedGemmConfig(
        block_m=64 if small else 128,
        block_n=128,
        block_k=128 if fp8 else 64,
        num_warps=4 if small else 8,
        num_stages=4 if small else 3,
    )
