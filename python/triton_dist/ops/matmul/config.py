"""GEMM tile configurations: the dataclass, the tuner's candidates, and the choice per target."""

from __future__ import annotations

import dataclasses
from typing import Any

import triton

from triton_dist.ops.common.config_fields import checked_fields


@dataclasses.dataclass(frozen=True)
class MatmulConfig:
    """One GEMM configuration. ``use_tma`` False selects the pointer kernel (no warp specialization there).

    ``warp_specialize`` is passed to Triton's ``tl.range(..., warp_specialize=...)``, which Triton 3.6 ignores on
    sm_90 (identical PTX either way, checked by test_ops_matmul.py): on Hopper the kernel is a software-pipelined
    persistent loop with asynchronous wgmma, and configurations that differ only in this flag are the same kernel.
    """

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    group_m: int = 8
    num_stages: int = 3
    num_warps: int = 8
    warp_specialize: bool = True
    split_n: int = 2
    use_tma: bool = True

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> MatmulConfig:
        """The configuration stored as ``values`` (a tuned table's entry); ValueError naming a bad field."""
        config = cls(**checked_fields(cls, values))
        if min(config.block_m, config.block_n, config.block_k, config.group_m, config.num_warps) < 1:
            raise ValueError(f"MatmulConfig: tile sizes, group and warps must be >= 1, got {config}")
        if config.split_n not in (1, 2):
            raise ValueError(f"MatmulConfig.split_n must be 1 or 2, got {config.split_n}")
        return config

    def short(self) -> str:
        if not self.use_tma:
            return f"ptr{self.block_m}x{self.block_n}x{self.block_k}g{self.group_m}s{self.num_stages}w{self.num_warps}"
        ws = "ws" if self.warp_specialize else "pipe"
        return (
            f"{self.block_m}x{self.block_n}x{self.block_k}g{self.group_m}s{self.num_stages}w{self.num_warps}"
            f"{ws}e{self.split_n}"
        )


# Candidates the tuner searches (bench/tune_overlap.py, bench/matmul.py); the first is the default on Hopper.
HOPPER_CANDIDATES = (
    MatmulConfig(128, 256, 64, 8, 3, 8, True, 2),
    MatmulConfig(128, 256, 64, 8, 4, 8, True, 2),
    MatmulConfig(128, 128, 64, 8, 4, 8, True, 1),
    MatmulConfig(128, 256, 64, 8, 3, 8, False, 2),
    MatmulConfig(128, 256, 64, 16, 3, 8, True, 2),
    MatmulConfig(128, 128, 128, 8, 3, 8, True, 1),
)
FALLBACK_CONFIG = MatmulConfig(128, 128, 32, 8, 2, 8, False, 1, use_tma=False)


def target_has_tma(target: Any) -> bool:
    """Whether ``target`` (a triton GPUTarget) has TMA: NVIDIA sm_90 and newer."""
    return target.backend == "cuda" and int(target.arch) >= 90


def pointer_config(config: MatmulConfig) -> MatmulConfig:
    """The pointer kernel (no TMA) with ``config``'s tile, as far as that kernel takes it."""
    return dataclasses.replace(
        FALLBACK_CONFIG, block_m=config.block_m, block_n=min(config.block_n, 128), group_m=config.group_m
    )


def config_for_target(config: MatmulConfig, target: Any) -> MatmulConfig:
    """``config`` where ``target`` supports it, else the pointer-kernel fallback with the same tile."""
    if config.use_tma and not target_has_tma(target):
        return pointer_config(config)
    return config


def rows_fit_tma(*tensors: Any) -> bool:
    """Whether each 2-D tensor's rows lie a multiple of 16 bytes apart, as a TMA descriptor's strides must.

    Depends on shapes only (for contiguous tensors), so every rank of a collective op decides alike."""
    return all((t.stride(0) * t.element_size()) % 16 == 0 for t in tensors)


def default_config(m: int, n: int, k: int, target: Any = None) -> MatmulConfig:
    """The untuned default for an [m, k] x [k, n] GEMM on ``target`` (the current device when None)."""
    if target is None:
        target = triton.runtime.driver.active.get_current_target()
    config = HOPPER_CANDIDATES[0]
    if n <= 128:
        config = HOPPER_CANDIDATES[2]
    return config_for_target(config, target)
