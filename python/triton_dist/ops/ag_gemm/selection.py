"""Which configuration ``ag_gemm`` runs for a problem: the tuned table, else the calibrated cost model."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch
import triton

from triton_dist import runtime as rt
from triton_dist.ops import tuning
from triton_dist.ops.matmul import MatmulConfig, config_for_target, rows_fit_tma
from triton_dist.ops.tuning import OverlapConfig, autotune


@functools.cache
def gpu_name(device_index: int) -> str:
    """The device's name as the tuning tables key it."""
    return torch.cuda.get_device_name(device_index)


RunConfig = Callable[[torch.Tensor, torch.Tensor, OverlapConfig], object]
"""``run(a, b, config)``: one call of the op with a given configuration (the op passes its own, so that this module
needs nothing from the op's host code)."""

_chosen: dict[tuple[Any, ...], OverlapConfig] = {}


def choose_config(
    m_local: int,
    n: int,
    k: int,
    dtype: torch.dtype,
    world_size: int,
    device: torch.device,
    run: RunConfig | None = None,
) -> OverlapConfig:
    """The configuration ``ag_gemm`` uses for this problem on this GPU: the tuned table's entry, else the cost model
    on this GPU's calibration (measured on first use where none is stored: a collective, as every first call of a
    signature is); where there is no calibration, NCCL + cuBLAS.

    Remembered per problem for the life of the process (tuning files are read once per shape, not per call). With
    ``TRITON_DIST_AUTOTUNE=1`` and ``run`` given, an untuned problem times candidates through ``run`` (autotune.py).
    """
    memo = (m_local, n, k, dtype, world_size, device)
    found = _chosen.get(memo)
    if found is None:
        found = _chosen[memo] = _choose(m_local, n, k, dtype, world_size, device, run)
    return found


def _choose(
    m_local: int, n: int, k: int, dtype: torch.dtype, world_size: int, device: torch.device, run: RunConfig | None
) -> OverlapConfig:
    gpu = gpu_name(device.index)
    itemsize = torch.empty((), dtype=dtype).element_size()
    m, n_global = m_local * world_size, n * world_size
    tuned = tuning.lookup("ag_gemm", m, n_global, k, dtype, world_size, gpu)
    if tuned is not None:
        return tuned
    calibration = tuning.calibration_for(rt.current_world(), gpu) if world_size > 1 else None
    if calibration is None:
        return OverlapConfig(backend="nccl")
    config, _ = tuning.cost_model("ag_gemm", m, n_global, k, itemsize, world_size, calibration)
    if autotune.enabled() and run is not None:
        config = _autotune(config, m_local, n, k, dtype, world_size, device, gpu, run)
    return config


def _autotune(
    modelled: OverlapConfig,
    m_local: int,
    n: int,
    k: int,
    dtype: torch.dtype,
    w: int,
    device: torch.device,
    gpu: str,
    run: RunConfig,
) -> OverlapConfig:
    """Time the model's pick, the unfused path, the cuBLAS path (with each chunk count the model weighs where the
    shard has the rows for it) and neighbours of the fused pick on this shape; keep and store the best."""
    world = rt.current_world()
    fused = (
        modelled
        if modelled.backend == "fused"
        else tuning.cost_model_module.ag_gemm_fused_config(
            m_local * w, n * w, k, torch.empty((), dtype=dtype).element_size(), w, tuning.REFERENCE
        )
    )
    tile_rows = max(1, -(-m_local // fused.matmul.block_m))
    candidates = [modelled]
    cost_model = tuning.cost_model_module
    cublas = [
        OverlapConfig(backend="cublas", cublas_chunks=chunks)
        for chunks in cost_model.CUBLAS_CHUNK_CHOICES
        if chunks == 1 or m_local >= chunks * cost_model.MIN_CUBLAS_CHUNK_ROWS
    ]
    for other in (OverlapConfig(backend="nccl"), *cublas, fused):
        if other not in candidates:
            candidates.append(other)
    for chunk_tiles in sorted({tile_rows, max(1, -(-tile_rows // 4))} - {fused.chunk_tiles}):
        candidates.append(dataclasses.replace(fused, chunk_tiles=chunk_tiles))
    candidates.append(dataclasses.replace(fused, producer="sm", push_ctas=16))
    generator = torch.Generator(device=device).manual_seed(world.rank)
    a = torch.randn(m_local, k, dtype=dtype, device=device, generator=generator)
    b = torch.randn(k, n, dtype=dtype, device=device, generator=generator)

    def time_ms(config: OverlapConfig) -> float:
        return tuning.calibration_module.timed(world, lambda: run(a, b, config))

    best, measured = autotune.pick(world, candidates, time_ms, budget=autotune.budget_s())
    autotune.remember(tuning.key("ag_gemm", m_local * w, n * w, k, dtype, w, gpu), best, measured, world)
    return best


def tma_fits(mm: MatmulConfig, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the TMA kernel can take these operands with tile ``mm`` (else the pointer kernel runs).

    TMA stores of the own shard write whole BLOCK_M rows of C: only when tiles do not cross shard boundaries. A
    descriptor needs rows 16 bytes apart (K and N/W multiples of 8) and a 16-byte aligned start; C and the receive
    buffer share A's and B's row lengths and are allocated aligned. The choice may differ between ranks (a view
    at an odd offset on one of them): the producer's chunks and flags do not depend on it."""
    aligned = a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0
    return mm.use_tma and a.shape[0] % mm.block_m == 0 and rows_fit_tma(a, b) and aligned


def uses_tma(config: OverlapConfig, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``config`` runs the TMA kernel for these operands on the current target."""
    target = triton.runtime.driver.active.get_current_target()
    return tma_fits(config_for_target(config.matmul, target), a, b)
