"""GEMM + reduce-scatter configurations, the tuner's candidates, and the choice per problem (table, else model)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton

from triton_dist.ops import tuning
from triton_dist.ops.common.config_fields import checked_fields
from triton_dist.ops.matmul import MatmulConfig, config_for_target
from triton_dist.ops.tuning import Calibration

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
PARTIAL_DTYPES = ("float32", "input")
GEMMS = ("triton", "cublas")
PRODUCERS = ("ce", "direct", "pull")


@dataclass(frozen=True)
class GemmRSConfig:
    """How ``gemm_rs`` runs: the GEMM tile configuration and the communication choices tuned with it.

    - ``matmul``: tile shape, stages, warps, epilogue split, TMA or pointer loads (``ops.matmul.MatmulConfig``).
    - ``fused``: True reduces in the own tiles' epilogue; False writes partials and reduces in a second kernel.
    - ``partial_dtype``: "float32" pushes fp32 partial tiles (exact fp32 reduction of the fp32 accumulators);
      "input" pushes them in A's dtype (half the NVLink bytes, each partial rounded once before the fp32 sum).
    - ``flatten``: let Triton flatten the persistent tile loop with the K loop (the next tile's loads overlap this
      tile's epilogue). Not applied where Triton 3.6 cannot (a fused epilogue with one column block, no TMA).
    - ``gemm``: "triton" (the persistent kernel above; every field but ``producer`` applies) or "cublas": per
      destination shard one ``torch.matmul`` (peers' shards first, in the staggered order), each peer's partial
      sent while the next shard's GEMM runs, then ``_cublas_reduce_kernel`` adds the received partials (input
      dtype, summed in fp32). Only ``producer`` applies to it.
    - ``producer`` (cuBLAS only): "ce" computes a peer's partial locally and a side stream copies it into the
      peer's receive slot (the copy engine: no SM taken from the GEMMs); "direct" lets cuBLAS write it straight
      into the peer's memory; "pull" runs ONE GEMM of all M rows into this rank's own symmetric partial and then
      one kernel that flags it ready and pulls this rank's shard rows from every peer's partial (``CUBLAS_PULL``:
      the GEMM keeps cuBLAS's full-M efficiency where W GEMMs of M/W rows lose it at small M and large K).
    - ``merged_sync`` (cuBLAS "direct" only): begin with the waits for the peers' acks and reduce with the waits for
      their flags, in two kernels instead of five per call at two ranks: 7-17 µs less host time per call, device
      time equal or up to 3% lower (2 x H200, 2026-11-27); the cost model's cuBLAS path (``CUBLAS_DIRECT``).
    - ``fallback``: ignore the rest and run ``torch.matmul`` + NCCL ``reduce_scatter_tensor``.
    """

    matmul: MatmulConfig = MatmulConfig(128, 256, 64, 8, 3, 8, False, 2)
    fused: bool = True
    partial_dtype: str = "float32"
    flatten: bool = True
    gemm: str = "triton"
    producer: str = "ce"
    fallback: bool = False
    merged_sync: bool = False

    def __post_init__(self) -> None:
        if self.partial_dtype not in PARTIAL_DTYPES:
            raise ValueError(f"GemmRSConfig: partial_dtype must be one of {PARTIAL_DTYPES}, got {self.partial_dtype!r}")
        if self.gemm not in GEMMS:
            raise ValueError(f"GemmRSConfig: gemm must be one of {GEMMS}, got {self.gemm!r}")
        if self.producer not in PRODUCERS:
            raise ValueError(f"GemmRSConfig: producer must be one of {PRODUCERS}, got {self.producer!r}")
        if self.merged_sync and (self.gemm, self.producer) != ("cublas", "direct"):
            raise ValueError('GemmRSConfig: merged_sync applies to the cuBLAS path\'s "direct" producer only')

    def short(self) -> str:
        if self.fallback:
            return "torch.matmul+nccl"
        if self.gemm == "cublas":
            return f"cublas-{self.producer}" + ("-merged" if self.merged_sync else "")
        mode = "fused" if self.fused else "2kernel"
        part = "f32" if self.partial_dtype == "float32" else "in"
        flat = "" if self.flatten else "-noflat"
        return f"{self.matmul.short()}-{mode}-{part}{flat}"

    def flattens(self) -> bool:
        """Whether the kernel is compiled with a flattened tile loop (see ``flatten``)."""
        # Triton 3.6's loop fusion fails on the fused epilogue's peer loop when it is the only one (SPLIT_N 1).
        return self.flatten and self.matmul.use_tma and not (self.fused and self.matmul.split_n == 1)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "matmul": self.matmul.as_dict()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GemmRSConfig:
        """The configuration stored as ``values`` (a tuned table's entry); ValueError naming a bad field."""
        if not isinstance(values, dict):
            raise ValueError(f"GemmRSConfig: expected an object of fields, got {type(values).__name__}")
        values = dict(values)
        matmul = MatmulConfig.from_dict(values.pop("matmul", {}))
        return cls(matmul=matmul, **checked_fields(cls, values))


FALLBACK = GemmRSConfig(fallback=True)

# The joint search space (bench/gemm_rs.py --tune, the tune_gemm_rs step of scripts/gpu_check.sh): GEMM tiles x
# reduction mode x partial precision. Tiles stay within Hopper's 227 KiB of shared memory with an
# fp32 epilogue.
_TILES = (
    MatmulConfig(128, 256, 64, 8, 3, 8, False, 2),
    MatmulConfig(128, 256, 64, 16, 3, 8, False, 2),
    MatmulConfig(128, 128, 64, 8, 4, 8, False, 1),
    MatmulConfig(128, 128, 128, 8, 3, 8, False, 1),
)
CUBLAS_CE = GemmRSConfig(partial_dtype="input", gemm="cublas", producer="ce")
CUBLAS_DIRECT = GemmRSConfig(partial_dtype="input", gemm="cublas", producer="direct", merged_sync=True)
"""The cuBLAS path the cost model picks (``tuning.cost_model.gemm_rs_cublas_ms``): cuBLAS writes each peer's
partial into its memory; two small launches per call besides the GEMMs (``merged_sync``)."""
CUBLAS_DIRECT_SEPARATE = dataclasses.replace(CUBLAS_DIRECT, merged_sync=False)
"""``CUBLAS_DIRECT`` with its waits in separate kernels (five small launches at two ranks): kept for comparison."""
CUBLAS_PULL = GemmRSConfig(partial_dtype="input", gemm="cublas", producer="pull")
"""The cuBLAS path's pull producer (issue 24): per call one begin kernel (acks: every peer has read this rank's
previous partial), one ``torch.mm`` of all M rows into this rank's symmetric [M, N] partial, and one kernel that
flags the partial ready, waits for the peers' flags and sums this rank's shard rows of every rank's partial in fp32.
No NCCL call, so its eager calls replay from the plan's graphs. The cost model picks it where the GPU's calibration
measured its pull rate (``Calibration.pull``; ``tuning.cost_model.gemm_rs_pull_ms``) and predicts it fastest."""
CANDIDATES = (
    CUBLAS_CE,
    CUBLAS_DIRECT,
    CUBLAS_DIRECT_SEPARATE,
    *(GemmRSConfig(_TILES[0], True, partial) for partial in PARTIAL_DTYPES),
    GemmRSConfig(_TILES[0], True, "float32", flatten=False),
    GemmRSConfig(_TILES[0], False, "float32"),
    GemmRSConfig(_TILES[0], False, "input"),
    *(GemmRSConfig(tile, True, partial) for tile in _TILES[1:] for partial in PARTIAL_DTYPES),
    FALLBACK,
)


def tuning_key(m: int, n: int, k_local: int, dtype: torch.dtype, world_size: int, device: torch.device) -> str:
    """The key of this problem in ``ops.tuning``'s tables (global M, N, K, as the issue's shape list)."""
    return tuning.key("gemm_rs", m, n, k_local * world_size, dtype, world_size, torch.cuda.get_device_name(device))


def lookup_tuned(key: str) -> GemmRSConfig | None:
    """The configuration ``bench/gemm_rs.py --tune`` stored for ``key`` (user cache, then the package table); an
    entry that holds no valid configuration is ignored with a warning."""
    entry = tuning.lookup_entry(key)
    if entry is None:
        return None
    try:
        return GemmRSConfig.from_dict(entry["config"])
    except (TypeError, ValueError) as error:
        warnings.warn(f"triton_dist: tuned gemm_rs entry {key} is invalid ({error}); ignored", stacklevel=2)
        return None


def estimate_ms(
    m: int, n: int, k_local: int, element_size: int, world_size: int, calibration: Calibration | None = None
) -> dict[str, float]:
    """The cost model: the fused Triton kernel's and torch.matmul + NCCL's predicted time, in ms (``triton_ms``,
    ``baseline_ms``, ``gemm_ms``), on ``calibration`` (default: the reference constants)."""
    estimate = tuning.cost_model_module.gemm_rs_estimate(
        m, n, k_local * world_size, element_size, world_size, calibration or tuning.REFERENCE
    )
    return {"triton_ms": estimate["fused_ms"], "baseline_ms": estimate["baseline_ms"], "gemm_ms": estimate["gemm_ms"]}


def choose_config(
    m: int,
    n: int,
    k_local: int,
    dtype: torch.dtype,
    world_size: int,
    device: torch.device,
    target: Any = None,
    calibration: Calibration | None = None,
    run: Callable[[torch.Tensor, torch.Tensor, GemmRSConfig], object] | None = None,
) -> GemmRSConfig:
    """The tuned configuration for this problem if one is stored, else the cost model's pick (with
    ``TRITON_DIST_AUTOTUNE=1`` and ``run(a, b, config)`` given by the op: the fastest of a few candidates timed
    through ``run``).

    ``target`` (a triton ``GPUTarget``) defaults to the current device's. The tuned table (``bench/gemm_rs.py
    --tune``) holds the fastest measured candidate, torch.matmul + NCCL included, so a tuned shape never runs
    slower than that baseline. Untuned: the cost model on ``calibration`` (this GPU's
    measured rates; None: the baseline) picks the fused Triton kernel (where its loads can run: rows of 16-byte
    multiples) or the cuBLAS path (``CUBLAS_DIRECT`` or ``CUBLAS_PULL``, each where the calibration measured it),
    whichever it predicts fastest and at least 3% faster than the baseline, else the baseline. One rank: the
    baseline.
    """
    if target is None:
        target = triton.runtime.driver.active.get_current_target()
    if world_size == 1:
        return FALLBACK
    element_size = torch.empty((), dtype=dtype).element_size()
    if target.backend == "cuda" and device.type == "cuda":
        tuned = lookup_tuned(tuning_key(m, n, k_local, dtype, world_size, device))
        if tuned is not None:
            return tuned
    aligned = (k_local * element_size) % 16 == 0 and (n * element_size) % 16 == 0
    if calibration is None or not aligned or m // world_size == 0:
        return FALLBACK
    # Input-dtype partials: half the bytes of fp32 ones to push, faster on every seed shape, with a normwise error
    # still below torch.matmul + NCCL's; the sum is still taken in fp32.
    default = GemmRSConfig(partial_dtype="input")
    tile = config_for_target(default.matmul, target)
    path, _ = tuning.gemm_rs_choice(
        m, n, k_local * world_size, element_size, world_size, calibration, tile.block_m, tile.block_n
    )
    paths = {"fused": dataclasses.replace(default, matmul=tile), "cublas": CUBLAS_DIRECT, "pull": CUBLAS_PULL}
    chosen = paths.get(path, FALLBACK)
    if tuning.autotune.enabled() and run is not None and device.type == "cuda":
        fused_config = dataclasses.replace(default, matmul=tile)
        chosen = _autotune(chosen, fused_config, m, n, k_local, dtype, world_size, device, run)
    return chosen


def _autotune(
    modelled: GemmRSConfig,
    fused: GemmRSConfig,
    m: int,
    n: int,
    k_local: int,
    dtype: torch.dtype,
    world_size: int,
    device: torch.device,
    run: Callable[[torch.Tensor, torch.Tensor, GemmRSConfig], object],
) -> GemmRSConfig:
    """Time the model's pick, the other of fused / unfused, the cuBLAS path and fp32 partials on this shape; keep
    and store the best (``TRITON_DIST_AUTOTUNE=1``)."""
    from triton_dist import runtime as rt

    world = rt.current_world()
    candidates = [modelled, fused if modelled.fallback else FALLBACK, CUBLAS_CE, CUBLAS_DIRECT]
    candidates = list(dict.fromkeys(candidates))  # the model's pick may be one of the others
    candidates.append(dataclasses.replace(fused, partial_dtype="float32"))
    generator = torch.Generator(device=device).manual_seed(world.rank)
    a = torch.randn(m, k_local, dtype=dtype, device=device, generator=generator)
    b = torch.randn(k_local, n, dtype=dtype, device=device, generator=generator)

    def time_ms(config: GemmRSConfig) -> float:
        return tuning.calibration_module.timed(world, lambda: run(a, b, config))

    best, measured = tuning.autotune.pick(world, candidates, time_ms, budget=tuning.autotune.budget_s())
    key = tuning_key(m, n, k_local, dtype, world_size, device)
    tuning.autotune.remember(key, best, measured, world)
    return best


def workspace_bytes(m: int, n: int, dtype: torch.dtype, world_size: int, config: GemmRSConfig) -> int:
    """Symmetric-heap bytes one shape's workspace takes (scratch + flags), per rank."""
    partial = 4 if config.partial_dtype == "float32" else torch.empty((), dtype=dtype).element_size()
    slots = world_size - 1 if config.fused else world_size
    shard = m // world_size
    tiles = math.ceil(shard / config.matmul.block_m) * math.ceil(n / config.matmul.block_n)
    return 2 * slots * shard * n * partial + 2 * tiles * world_size * 4
