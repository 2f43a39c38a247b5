"""The skinny GEMM's configuration (``SkinnyConfig``) and its choice from the shape and the SM count by a cost model.

The cost model (``skinny_cost_us``), for C[M, N] = A[M, K] @ B[K, N] with M <= 64, where reading B from HBM is the
work: B is cut into ``cdiv(N, block_n)`` column tiles, each tile's ``cdiv(K, block_k)`` blocks into ``split_k``
contiguous ranges, one program per (tile, range). With ``slots`` programs resident at once (SMs x the programs an
SM holds, by shared memory), the programs run in ``waves = cdiv(programs, slots)`` rounds; in a round each program
streams its blocks at the least of its share of the HBM bandwidth (``bandwidth / programs resident``), its share of
what one SM streams (``SM_BYTES_PER_US``) and what its pipeline keeps in flight (``num_stages`` blocks per
``LATENCY_US``), after one ``LATENCY_US`` of pipeline fill. A
block's bytes are B's plus A's (M x block_k, re-read from L2 by every tile: weighted ``L2_WEIGHT``). Split-K adds
its partials (fp32, M x N per split, written then read back by the last split: weighted ``L2_WEIGHT`` too, they
mostly stay in L2) and one ``LATENCY_US`` for the last split's arrival and reads. The constants are round
estimates for H100 / H200 (50 MB L2, ~3-4 TB/s): the model ranks configurations, it does not predict times; the
bench (``bench/matmul.py --decode``) times the choice against its neighbours.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import triton

from triton_dist.ops.common.config_fields import checked_fields

MAX_ROWS = 64
"""The most rows (M) the skinny GEMM takes: one tile row of at most 64 (wgmma's M on sm_90)."""
BANDWIDTH_BYTES_PER_US = 4.0e6
"""HBM bandwidth the model assumes (4 TB/s: an H200 copies at ~4.25, an H100 at ~3.0; only ratios matter)."""
SM_BYTES_PER_US = 60e3
"""The most one SM streams (60 GB/s, about twice its share of 4 TB/s over 132 SMs): why narrow GEMMs split K."""
LATENCY_US = 1.0
"""One HBM round trip under load: a pipeline's fill, and the split-K arrival's wait."""
L2_WEIGHT = 0.25
"""What a byte served by L2 (A's re-reads, split-K partials) costs against one from HBM."""
SHARED_MEMORY_BYTES = 227 * 1024
"""Shared memory per SM for a block on sm_90 (H100 / H200)."""
STAGE_BUDGET_BYTES = 200 * 1024
"""The most shared memory the pipeline's buffers may take (Triton adds barriers and the epilogue's scratch)."""
TILES = ((64, 256), (128, 128), (128, 64), (64, 128), (256, 64))
"""The (block_k, block_n) B blocks ``skinny_config`` considers: 16-32 KB of bf16 per block, at least 128 bytes
along N for TMA's rows."""
MAX_SPLIT_K = 32


@dataclasses.dataclass(frozen=True)
class SkinnyConfig:
    """One skinny-GEMM configuration: the tile (``block_m`` rows, >= M: 16 compiles to ``mma.sync`` on sm_90, 64 to
    ``wgmma``), the B block ``block_k x block_n``, the K split (1: none), the pipeline depth, warps, and whether to
    load through TMA descriptors (sm_90 and newer, 16-byte aligned rows) or masked pointers."""

    block_m: int = 64
    block_n: int = 128
    block_k: int = 128
    split_k: int = 1
    num_stages: int = 4
    num_warps: int = 4
    use_tma: bool = True

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SkinnyConfig:
        """The configuration stored as ``values``; ValueError naming a bad field."""
        config = cls(**checked_fields(cls, values))
        if config.block_m not in (16, 32, 64) or config.block_n < 16 or config.block_k < 16:
            raise ValueError(f"SkinnyConfig: block_m must be 16, 32 or 64 and blocks >= 16, got {config}")
        if min(config.split_k, config.num_stages, config.num_warps) < 1:
            raise ValueError(f"SkinnyConfig: split_k, num_stages and num_warps must be >= 1, got {config}")
        return config

    def short(self) -> str:
        kind = "tma" if self.use_tma else "ptr"
        return f"{kind}{self.block_m}x{self.block_n}x{self.block_k}k{self.split_k}s{self.num_stages}w{self.num_warps}"

    def stage_bytes(self, element_size: int = 2) -> int:
        """Shared memory of one pipeline stage: an A block and a B block."""
        return (self.block_m * self.block_k + self.block_k * self.block_n) * element_size


def split_blocks(k: int, config: SkinnyConfig) -> tuple[int, int]:
    """``(blocks per split, splits)`` of K: ``config.split_k`` ranges of whole ``block_k`` blocks, without empty
    ones (so the splits launched may be fewer than asked)."""
    blocks = triton.cdiv(k, config.block_k)
    per_split = triton.cdiv(blocks, max(1, min(config.split_k, blocks)))
    return per_split, triton.cdiv(blocks, per_split)


def skinny_cost_us(m: int, n: int, k: int, sms: int, config: SkinnyConfig) -> float:
    """The cost model's µs for ``config`` (module docstring): B's streaming by waves plus split-K's partials."""
    per_split, splits = split_blocks(k, config)
    programs = triton.cdiv(n, config.block_n) * splits
    per_sm = max(1, SHARED_MEMORY_BYTES // (config.num_stages * config.stage_bytes()))
    slots = sms * per_sm
    waves = triton.cdiv(programs, slots)
    block_bytes = config.block_k * config.block_n * 2 + L2_WEIGHT * m * config.block_k * 2
    resident = min(programs, slots)
    rate = min(
        BANDWIDTH_BYTES_PER_US / resident,
        SM_BYTES_PER_US / triton.cdiv(resident, sms),
        config.num_stages * block_bytes / LATENCY_US,
    )
    stream = waves * (per_split * block_bytes / rate + LATENCY_US)
    if splits == 1:
        return stream
    return stream + L2_WEIGHT * 2 * splits * m * n * 4 / BANDWIDTH_BYTES_PER_US + LATENCY_US


def skinny_candidates(m: int, use_tma: bool = True) -> list[SkinnyConfig]:
    """The configurations ``skinny_config`` ranks for M rows, every split up to ``MAX_SPLIT_K``: each of ``TILES``
    with ``block_m`` 64, the deepest pipeline (up to 6 stages; 3 without TMA) that fits ``STAGE_BUDGET_BYTES``, 8
    warps for 256-wide blocks (two warpgroups side by side: 64 accumulator registers each) and for the pointer
    kernel (its masked address tiles spill at 4 warps), 4 otherwise."""
    if not 1 <= m <= MAX_ROWS:
        raise ValueError(f"skinny GEMM: M must be 1..{MAX_ROWS}, got {m}")
    out = []
    for block_k, block_n in TILES:
        base = SkinnyConfig(64, block_n, block_k, 1, 2, 8 if block_n >= 256 or not use_tma else 4, use_tma)
        stages = min(6 if use_tma else 3, STAGE_BUDGET_BYTES // base.stage_bytes())
        for split in range(1, MAX_SPLIT_K + 1):
            out.append(dataclasses.replace(base, split_k=split, num_stages=stages))
    return out


@functools.cache  # ranks ~160 candidates: once per shape, not per call
def skinny_config(m: int, n: int, k: int, sms: int, use_tma: bool = True) -> SkinnyConfig:
    """The cheapest of ``skinny_candidates`` by ``skinny_cost_us`` for an [m, k] x [k, n] GEMM on ``sms`` SMs
    (ties: fewer splits, then the earlier tile), with splits that would be empty dropped; TMA loads or (``use_tma``
    False: targets without TMA) the pointer kernel. ValueError for m outside 1..64."""
    best = min(
        skinny_candidates(m, use_tma),
        key=lambda c: (round(skinny_cost_us(m, n, k, sms, c), 3), split_blocks(k, c)[1]),
    )
    return dataclasses.replace(best, split_k=split_blocks(k, best)[1])
