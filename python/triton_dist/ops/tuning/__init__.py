"""One home for how the ops choose: tuned tables, per-GPU calibrations, and the cost model for everything else.

- ``tables.py``: the committed ``ops/tuned_configs.json`` and the user's cache, every entry checked on reading,
  written atomically (``key``, ``lookup_entry``, ``store``, ``cache_path``);
- ``overlap.py``: :class:`OverlapConfig`, the joint configuration of ``ag_gemm``;
- ``calibration.py``: per-GPU measured rates, committed for 2 x H100 and 2 x H200, measured once elsewhere;
- ``cost_model.py``: predicted times of the fused and unfused paths, and the choice for untuned shapes;
- ``autotune.py``: opt-in (``TRITON_DIST_AUTOTUNE=1``) timing of a few candidates on a shape's first call.

A call's configuration (:func:`choose`): the tuned entry for its exact problem on this GPU (user cache, then the
package table), else the cost model on this GPU's calibration.
"""

from __future__ import annotations

import math
from typing import Any

from triton_dist.ops.tuning import autotune
from triton_dist.ops.tuning import calibration as calibration_module
from triton_dist.ops.tuning import cost_model as cost_model_module
from triton_dist.ops.tuning.calibration import Calibration, Rate, calibration_for
from triton_dist.ops.tuning.cost_model import (
    REFERENCE,
    ag_gemm_choice,
    ag_gemm_estimate,
    gemm_rs_choice,
    gemm_rs_cublas_ms,
    gemm_rs_pull_ms,
    gemm_rs_uses_fused,
)
from triton_dist.ops.tuning.overlap import BACKENDS, PRODUCERS, OverlapConfig
from triton_dist.ops.tuning.tables import (
    PACKAGE_TABLE,
    StoredConfig,
    cache_dir,
    cache_path,
    key,
    lookup_entry,
    read_table,
    store,
)


def lookup(op: str, m: int, n: int, k: int, dtype: Any, world_size: int, gpu: str) -> OverlapConfig | None:
    """The tuned ``ag_gemm`` configuration for this problem (user cache first, then the package table), or None.

    An entry that does not hold a valid configuration is ignored with a warning."""
    entry = lookup_entry(key(op, m, n, k, dtype, world_size, gpu))
    if entry is None:
        return None
    try:
        return OverlapConfig.from_dict(entry["config"])
    except (TypeError, ValueError) as error:
        import warnings

        warnings.warn(
            f"triton_dist: tuned entry for {op} {m},{n},{k} on {gpu} is invalid ({error}); ignored", stacklevel=2
        )
        return None


def cost_model(
    op: str, m: int, n: int, k: int, itemsize: int, world_size: int, calibration: Calibration | None = None
) -> tuple[OverlapConfig, dict[str, float]]:
    """The cost model's ``ag_gemm`` configuration for a problem and the estimate behind it (default calibration:
    :data:`~triton_dist.ops.tuning.cost_model.REFERENCE`)."""
    if op != "ag_gemm":
        raise ValueError(f"cost_model: only ag_gemm has an OverlapConfig; got {op!r} (gemm_rs: gemm_rs_uses_fused)")
    return ag_gemm_choice(m, n, k, itemsize, world_size, calibration or REFERENCE)


def choose(
    op: str,
    m: int,
    n: int,
    k: int,
    dtype: Any,
    itemsize: int,
    world_size: int,
    gpu: str,
    calibration: Calibration | None = None,
) -> tuple[OverlapConfig, str]:
    """The ``ag_gemm`` configuration for one call and where it came from (``"tuned"`` or ``"cost model"``)."""
    tuned = lookup(op, m, n, k, dtype, world_size, gpu)
    if tuned is not None:
        return tuned, "tuned"
    config, _ = cost_model(op, m, n, k, itemsize, world_size, calibration)
    return config, "cost model"


def geomean(values: list[float]) -> float:
    """The geometric mean (NaN for no values)."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


__all__ = [
    "BACKENDS",
    "PACKAGE_TABLE",
    "PRODUCERS",
    "REFERENCE",
    "Calibration",
    "OverlapConfig",
    "Rate",
    "StoredConfig",
    "ag_gemm_estimate",
    "autotune",
    "cache_dir",
    "cache_path",
    "calibration_for",
    "calibration_module",
    "choose",
    "cost_model",
    "cost_model_module",
    "gemm_rs_choice",
    "gemm_rs_cublas_ms",
    "gemm_rs_pull_ms",
    "gemm_rs_uses_fused",
    "geomean",
    "key",
    "lookup",
    "lookup_entry",
    "read_table",
    "store",
]
