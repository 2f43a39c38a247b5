"""The cost model of the overlapped ops, built on a :class:`~.calibration.Calibration`: predicted times of the fused
kernels and of the unfused baseline, and the choice between them for shapes no table holds.

Everything is per rank, global M, N, K as the ops document them. A fused path is chosen only where it is
predicted at least 3% faster than the unfused one, so a shape the model misjudges by a little still runs the
baseline's speed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from triton_dist.ops.matmul import HOPPER_CANDIDATES
from triton_dist.ops.tuning.calibration import CAL_GEMMS, Calibration, Rate
from triton_dist.ops.tuning.overlap import OverlapConfig

MARGIN = 0.97
"""A fused path must be predicted at most this fraction of the unfused path's time."""

REFERENCE = Calibration(
    gpu="reference (2 x H200, 2026-11-23 constants)",
    world_size=2,
    sms=132,
    cublas=Rate(0.0, 700e9),
    ours=Rate(0.0, 650e9),
    allgather=Rate(0.02, 460e6),
    reduce_scatter=Rate(0.03, 400e6),
    push=Rate(0.005, 380e6),
    ag_fused_extra_ms=0.03,
    rs_fused_over_cublas=1.25,
    measured="the hand-set constants of the first cost model (bench/results of 2026-11-23)",
)
"""The hand-set rates of the first cost model (of 2 x H200), for code that has no GPU to calibrate on."""

_BLOCK_M = HOPPER_CANDIDATES[0].block_m
MAX_CHUNKS = 4
"""At most this many chunks per shard: each costs the host two driver calls per peer and call (with 16 chunks the
host time per call delayed the GEMM's launch), while four already let the peers' tiles start a quarter of a shard
after their data starts to arrive."""


def _chunk_tiles(m_local: int, w: int, t_ours: float, t_push: float) -> int:
    """Tile rows per chunk: one chunk per shard where the own shard's GEMM outlasts the pushes of all the others
    (the data is there before it is needed, and each chunk costs two driver calls per peer on the host), else at
    least four tile rows per chunk and at most ``MAX_CHUNKS`` chunks, so the peers' tiles start before their shard
    has fully landed."""
    tile_rows = math.ceil(m_local / _BLOCK_M)
    if t_ours / w >= 1.25 * (w - 1) * t_push:
        return max(1, tile_rows)
    return max(4, math.ceil(tile_rows / MAX_CHUNKS))


def last_wave_penalty(tiles: int, sms: int) -> float:
    """How much longer a persistent GEMM of ``tiles`` equal output tiles on ``sms`` programs runs than its flops at
    the full-wave rate say: each program walks its tiles one after another, so the kernel takes ``ceil(tiles /
    sms)`` tiles' time and pays for the SMs its last wave leaves idle (0.73 of a wave on 132 SMs takes one tile's
    time, 1.36x; 2.2 waves take three, 1.36x; 4.4 waves take five, 1.14x; 18.1 waves take 19, 1.05x).

    At every number of waves, not only a few: at 4.4-18 waves the fused AG kernel's measured time over the model
    without it tracks this factor (docs/results/ag_selection_analysis.md), and there it decides between the fused
    and the cuBLAS path, whose predictions otherwise lie within a few percent of each other.
    """
    waves = tiles / max(sms, 1)
    if waves <= 0:
        return 1.0
    return math.ceil(waves) / waves


AG_FUSED_RESERVED_SMS = 1
"""SMs the fused AG kernel's grid leaves free with the copy-engine producer (the only producer the model prices):
one SM for the driver's small flag copies, so the kernel runs ``sms - 1`` persistent programs."""


def calibrated_wave_factor(sms: int) -> float:
    """The last-wave penalty inside the calibration's rate of our GEMM: ``Calibration.ours`` is fitted through the
    plain persistent GEMM's times at ``CAL_GEMMS`` on all ``sms`` SMs, and each of those ran whole tiles per SM
    too (3.9 and 15.5 waves on 132 SMs: both take 1.031x their flops' time). The full-wave rate is
    ``ours.per_ms`` times this factor (exact where both shapes have the same penalty, the slope of the fit else)."""
    (m1, n1, k1), (m2, n2, k2) = CAL_GEMMS
    tile = HOPPER_CANDIDATES[0]  # matmul's default tile for these shapes (N > 128)

    def penalty(m: int, n: int) -> float:
        return last_wave_penalty(math.ceil(m / tile.block_m) * math.ceil(n / tile.block_n), sms)

    flops1, flops2 = 2.0 * m1 * n1 * k1, 2.0 * m2 * n2 * k2
    return (penalty(m2, n2) * flops2 - penalty(m1, n1) * flops1) / (flops2 - flops1)


def ag_fused_gemm_ms(m: int, n: int, k: int, w: int, cal: Calibration) -> tuple[float, int]:
    """Predicted ms of the fused AG kernel's GEMM alone (global M and N, per rank) and its number of tiles (each
    shard's own tile rows): the calibrated rate at full waves, times the last-wave penalty of its tiles on its
    ``sms - 1`` programs."""
    tile = HOPPER_CANDIDATES[0]
    n_local = n / w
    tiles = w * math.ceil(m / w / tile.block_m) * math.ceil(n_local / tile.block_n)
    flops = 2.0 * m * n_local * k
    programs = max(1, cal.sms - AG_FUSED_RESERVED_SMS)
    # The calibrated rate is all SMs' at full waves: ``programs`` of them do ``programs / sms`` of it.
    full_waves = flops / (cal.ours.per_ms * calibrated_wave_factor(cal.sms) * programs / cal.sms)
    return cal.ours.fixed_ms + full_waves * last_wave_penalty(tiles, programs), tiles


def ag_gemm_estimate(m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration) -> dict[str, float]:
    """Predicted ms of ``ag_gemm``'s fused path and of NCCL all-gather + cuBLAS, and their parts."""
    m_local, n_local = m / w, n / w
    flops = 2.0 * m * n_local * k
    t_cublas = cal.cublas.ms(flops)
    t_ours, tiles = ag_fused_gemm_ms(m, n, k, w, cal)
    programs = max(1, cal.sms - AG_FUSED_RESERVED_SMS)
    t_nccl = cal.allgather.ms(m * k * itemsize)
    t_push = cal.push.ms(m_local * k * itemsize)
    chunks = math.ceil(m_local / (_chunk_tiles(int(m_local), w, t_ours, t_push) * _BLOCK_M))
    # The last chunk's tiles start once it has landed and take at least one tile's time: each SM runs its tiles
    # one after another, so a tile takes the kernel's time over the waves (under one wave, the whole kernel's).
    t_tile = t_ours / math.ceil(tiles / programs)
    arrival = (w - 1) * t_push + max(t_ours / (w * max(1, chunks)), t_tile)
    fused = max(t_ours, arrival) + cal.ag_fused_extra_ms
    return {"baseline_ms": t_nccl + t_cublas, "fused_ms": fused, "cublas_ms": t_cublas, "comm_ms": (w - 1) * t_push}


def ag_gemm_fused_config(m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration) -> OverlapConfig:
    """The fused configuration the model runs for this problem (the default tile, its chunking)."""
    flops = 2.0 * m * (n / w) * k
    chunk_tiles = _chunk_tiles(m // w, w, cal.ours.ms(flops), cal.push.ms(m / w * k * itemsize))
    return OverlapConfig(matmul=HOPPER_CANDIDATES[0], chunk_tiles=chunk_tiles, producer="ce")


CUBLAS_CHUNK_CHOICES = (1, 2, 4)
"""The chunk counts per peer shard the model weighs for the AG cuBLAS path (``OverlapConfig.cublas_chunks``)."""
MIN_CUBLAS_CHUNK_ROWS = 64
"""The model splits a shard into chunks only where each chunk keeps at least this many rows: below that a chunk's
cuBLAS GEMM is mostly its fixed cost, which the calibration's rate (fitted on large GEMMs) does not see."""


def ag_cublas_chunk_ms(cal: Calibration, w: int) -> float:
    """What one more chunk per peer costs the AG cuBLAS path beyond its share of the GEMM and the push: one more
    copy and flag, wait and cuBLAS launch, and a smaller GEMM's lower efficiency.

    ``Calibration.ag_cublas_chunk_ms`` where the calibration measured it; else ``ag_cublas_extra_ms / W``: that
    extra was measured with one chunk per shard, i.e. W cuBLAS GEMMs (the own one, then per peer a wait and a GEMM),
    so each GEMM with what comes with it is charged an equal share, and a chunk adds one such GEMM."""
    if cal.ag_cublas_chunk_ms >= 0:
        return cal.ag_cublas_chunk_ms
    return max(cal.ag_cublas_extra_ms, 0.0) / w


def ag_gemm_cublas_ms(m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration, chunks: int = 1) -> float | None:
    """Predicted ms of ``ag_gemm``'s cuBLAS path with ``chunks`` chunks per peer shard (``OverlapConfig(backend=
    "cublas", cublas_chunks=chunks)``; n global), or None where ``cal`` has not measured the path (no
    ``ag_cublas_extra_ms``) or there is one rank.

    The own shard's cuBLAS GEMM (M/W rows) runs first. The peers' chunks arrive one after another at the push rate
    (the copy engine pushes chunk by chunk, each to every peer, as the fused model assumes): the j-th of the (W - 1)
    chunks a rank receives lands at ``j / chunks`` times one shard's push time, and its GEMM (M / (W chunks) rows,
    the calibrated cuBLAS rate) starts when both it has landed and the previous GEMM is done. Plus the measured
    extra (launches, the wait kernels; measured with one chunk per shard), and ``ag_cublas_chunk_ms`` for each
    chunk beyond one per peer. With one chunk: the shards' arrivals at multiples of the push time, one GEMM each.
    Where the pushes outlast the own GEMM, one chunk ends near comm + GEMM / W and c chunks near comm + GEMM / (W c)
    plus (c - 1)(W - 1) chunk costs.
    """
    if cal.ag_cublas_extra_ms < 0 or w < 2:
        return None
    m_local, n_local = m / w, n / w
    t_shard = cal.cublas.ms(2.0 * m_local * n_local * k)
    t_chunk = cal.cublas.ms(2.0 * (m_local / chunks) * n_local * k)
    t_push = cal.push.ms(m_local * k * itemsize)
    done = t_shard
    for arrived in range(1, (w - 1) * chunks + 1):
        done = max(done, arrived * t_push / chunks) + t_chunk
    return done + cal.ag_cublas_extra_ms + (chunks - 1) * (w - 1) * ag_cublas_chunk_ms(cal, w)


def ag_gemm_cublas_choice(m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration) -> tuple[int, float] | None:
    """The chunk count per peer shard the AG cuBLAS path runs with and its predicted ms, or None where ``cal`` does
    not price the path: the fastest of ``CUBLAS_CHUNK_CHOICES`` that leave every chunk ``MIN_CUBLAS_CHUNK_ROWS``
    rows, more than one chunk only where predicted at most ``MARGIN`` of one chunk's time (each chunk costs the
    host a copy, a flag, a wait and a GEMM launch more, which the device-time model does not see). One chunk where
    the calibration has not measured what a chunk costs (``Calibration.ag_cublas_chunk_ms`` negative): the derived
    share (``ag_cublas_chunk_ms``) was half the measured cost on 2 x H100 (session 29: the sweep's cublas/2 column,
    Llama-3-8B qkv M = 1024 0.069 ms against 0.054 with one chunk, about 15 µs a chunk against the 7.4 derived)."""
    single = ag_gemm_cublas_ms(m, n, k, itemsize, w, cal)
    if single is None:
        return None
    best = (1, single)
    if cal.ag_cublas_chunk_ms < 0:
        return best
    for chunks in CUBLAS_CHUNK_CHOICES:
        if chunks == 1 or m // w < chunks * MIN_CUBLAS_CHUNK_ROWS:
            continue
        predicted = ag_gemm_cublas_ms(m, n, k, itemsize, w, cal, chunks)
        if predicted is not None and predicted <= MARGIN * single and predicted < best[1]:
            best = (chunks, predicted)
    return best


def ag_gemm_choice(
    m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration
) -> tuple[OverlapConfig, dict[str, float]]:
    """The configuration for an untuned ``ag_gemm`` problem and the estimate behind it (with ``cublas_ms`` where the
    calibration predicts the cuBLAS path).

    The fastest prediction of NCCL + cuBLAS, the fused Triton kernel and the cuBLAS path (with the chunk count
    ``ag_gemm_cublas_choice`` picks: ``cublas_chunks`` in the estimate); either fused path only where it is
    predicted at most ``MARGIN`` of the NCCL path's time, the Triton kernel only with at least one ``BLOCK_M`` tile
    row per shard.
    """
    estimate = ag_gemm_estimate(m, n, k, itemsize, w, cal)
    chosen = ag_gemm_cublas_choice(m, n, k, itemsize, w, cal)
    chunks, cublas = chosen if chosen is not None else (1, None)
    if chosen is not None:
        estimate["cublas_chunks"] = chunks
    fused_ok = w > 1 and m // w >= _BLOCK_M
    path = _fastest("nccl", estimate, {"fused": estimate["fused_ms"] if fused_ok else None, "cublas": cublas}, m // w)
    if path == "fused":
        return ag_gemm_fused_config(m, n, k, itemsize, w, cal), estimate
    if path == "cublas":
        return OverlapConfig(backend="cublas", cublas_chunks=chunks), estimate
    return OverlapConfig(backend=path), estimate


def gemm_rs_estimate(m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration) -> dict[str, float]:
    """Predicted ms of ``gemm_rs``'s fused Triton kernel and of cuBLAS + NCCL reduce-scatter (k global)."""
    t_cublas = cal.cublas.ms(2.0 * m * n * (k / w))
    baseline = t_cublas + cal.reduce_scatter.ms(m * n * itemsize)
    return {"baseline_ms": baseline, "fused_ms": cal.rs_ratio(k / w) * t_cublas, "gemm_ms": t_cublas}


def gemm_rs_waves(m: int, n: int, w: int, block_m: int, block_n: int, sms: int) -> float:
    """How many waves of the GPU's SMs the fused kernel's tiles fill (W shards of M/W x N)."""
    tiles = math.ceil(m / w / block_m) * math.ceil(n / block_n)
    return w * tiles / sms


def gemm_rs_uses_fused(
    m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration, block_m: int = 128, block_n: int = 256
) -> tuple[bool, dict[str, float]]:
    """Whether the fused Triton kernel is predicted faster, and the estimate.

    Never with fewer than four waves of tiles: each program then holds one or two tiles, its pushes and its own
    tile's wait serialize against the peer's (about ten times matmul + NCCL's time at M = 1024-2048, N, K >= 4096),
    and the model's per-GEMM ratio does not hold there.
    """
    estimate = gemm_rs_estimate(m, n, k, itemsize, w, cal)
    estimate["waves"] = gemm_rs_waves(m, n, w, block_m, block_n, cal.sms)
    fused = w > 1 and estimate["waves"] >= 4 and estimate["fused_ms"] <= MARGIN * estimate["baseline_ms"]
    return fused, estimate


def gemm_rs_cublas_ms(m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration) -> float | None:
    """Predicted ms of ``gemm_rs``'s cuBLAS path with the "direct" producer (k global), or None where ``cal`` has
    not measured it (no memory rate or no ``rs_cublas_extra_ms``).

    Per peer, one cuBLAS GEMM of M/W rows writes its partial straight into that peer's memory: those W - 1 GEMMs
    take the longer of their compute and the partials' NVLink transfer. Then the own shard's GEMM, and one pass
    that reads the W partials and writes the output. Plus the measured extra (launches, flags).
    """
    if cal.memory is None or cal.rs_cublas_extra_ms < 0 or w < 2:
        return None
    t_gemm = cal.cublas.ms(2.0 * m * n * (k / w))
    shard_bytes = m / w * n * itemsize
    to_peers = max(t_gemm * (w - 1) / w, cal.push.ms((w - 1) * shard_bytes))
    reduce = cal.memory.ms((w + 1) * shard_bytes)
    return to_peers + t_gemm / w + reduce + cal.rs_cublas_extra_ms


def gemm_rs_pull_ms(m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration) -> float | None:
    """Predicted ms of ``gemm_rs``'s cuBLAS path with the "pull" producer (``CUBLAS_PULL``; k global), or None where
    ``cal`` has not measured it (no memory rate or no ``pull`` rate) or there is one rank.

    ONE cuBLAS GEMM of all M rows (the fallback's GEMM, into this rank's symmetric partial), then one pass that reads
    this rank's shard rows of every rank's partial and writes the output: the W - 1 shards read from the peers over
    NVLink at the measured pull rate (``Calibration.pull``: the producer's time beyond its GEMM, fitted through two
    shard sizes, so its two small kernels and flags are its fixed cost), and on local memory the own shard read, the
    output written and the W - 1 shards the peers read from here. The pass's loads of the own shard and the peers'
    are in flight together, so it takes the longer of the two.
    """
    if cal.memory is None or cal.pull is None or w < 2:
        return None
    t_gemm = cal.cublas.ms(2.0 * m * n * (k / w))
    shard_bytes = m / w * n * itemsize
    pulled = cal.pull.ms((w - 1) * shard_bytes)
    local = cal.memory.ms((w + 1) * shard_bytes)
    return t_gemm + max(pulled, local)


def gemm_rs_choice(
    m: int, n: int, k: int, itemsize: int, w: int, cal: Calibration, block_m: int = 128, block_n: int = 256
) -> tuple[str, dict[str, float]]:
    """The path the model picks for an untuned ``gemm_rs`` problem: "fused" (the Triton kernel), "cublas" (the
    cuBLAS path, "direct" producer), "pull" (the cuBLAS path, "pull" producer) or "fallback" (torch.matmul + NCCL),
    and the estimate behind it (with ``cublas_ms`` / ``pull_ms`` where the calibration predicts those paths). A fused
    path must be predicted at most ``MARGIN`` of the fallback's time; among the fused paths the fastest prediction
    wins."""
    fused_ok, estimate = gemm_rs_uses_fused(m, n, k, itemsize, w, cal, block_m, block_n)
    fused = {
        "fused": estimate["fused_ms"] if fused_ok else None,
        "cublas": gemm_rs_cublas_ms(m, n, k, itemsize, w, cal),
        "pull": gemm_rs_pull_ms(m, n, k, itemsize, w, cal),
    }
    path = _fastest("fallback", estimate, fused, m // w)
    return path, estimate


def _fastest(unfused: str, estimate: dict[str, float], fused: dict[str, float | None], rows_per_rank: int) -> str:
    """The path of the lowest prediction: ``unfused`` (at ``estimate["baseline_ms"]``) or one of ``fused`` (name ->
    predicted ms, None where it cannot run or is not calibrated), each only where it is at most ``MARGIN`` of the
    unfused time and every rank has rows. Records the cuBLAS paths' predictions in ``estimate`` (``cublas_ms``,
    ``pull_ms``)."""
    for name in ("cublas", "pull"):
        predicted = fused.get(name)
        if predicted is not None:
            estimate[f"{name}_ms"] = predicted
    options = {unfused: estimate["baseline_ms"]}
    for name, predicted in fused.items():
        if predicted is not None and rows_per_rank > 0 and predicted <= MARGIN * estimate["baseline_ms"]:
            options[name] = predicted
    return min(options, key=lambda name: options[name])


def with_extra(cal: Calibration, **changes: float | Rate | None) -> Calibration:
    """``cal`` with some fields replaced (tests, what-if estimates)."""
    fields: dict[str, Any] = dict(changes)  # Any: mypy checks the dict's values against every field's type
    return dataclasses.replace(cal, **fields)
