"""The cost model's price of gemm_rs's cuBLAS "pull" producer (``CUBLAS_PULL``, issue 24): its arithmetic, its
absence from calibrations that never measured it, the choice it wins and loses, and the calibration probe that
measures its extra. CPU only: no kernel runs."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
import json
import math
from types import SimpleNamespace

import pytest
import torch
from triton.backends.compiler import GPUTarget

from triton_dist.ops import tuning
from triton_dist.ops.tuning import calibration as cal_mod
from triton_dist.ops.tuning import cost_model_module as cm

grs = importlib.import_module("triton_dist.ops.gemm_rs")  # the package (ops.gemm_rs is the function)
grs_op = importlib.import_module("triton_dist.ops.gemm_rs.op")

GPUS = ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
FALLBACK_ROWS = ((1024, 4096, 14336), (2048, 3584, 3584), (1024, 3584, 18944), (1024, 5120, 25600))
"""The four RS rows of the 2 x H200 sweep (session 26, job 5) that the committed calibration runs as matmul + NCCL
(global M, N, K): the rows the pull producer is for."""
GRID = tuple(itertools.product((1024, 2048, 4096, 8192, 16384), (3584, 4096, 8192, 28672), (2048, 4096, 14336, 28672)))


def committed(gpu: str) -> tuning.Calibration:
    """The package's calibration of 2 x ``gpu``."""
    return tuning.Calibration.from_dict(
        tuning.read_table(cal_mod.PACKAGE_CALIBRATIONS)[cal_mod.calibration_key(gpu, 2)]["config"]
    )


def test_the_pull_model_prices_one_gemm_then_the_longer_of_link_and_local_memory() -> None:
    cal = dataclasses.replace(
        tuning.REFERENCE, memory=tuning.Rate(0.002, 2.5e9), push=tuning.Rate(0.005, 380e6), rs_pull_extra_ms=0.004
    )
    m, n, k, w = 4096, 2048, 8192, 4
    shard = 1024 * 2048 * 2  # bytes of one rank's rows of the [M, N] bf16 partial
    gemm = 2.0 * 4096 * 2048 * 2048 / 700e9  # all M rows at K / W, at the reference's cuBLAS rate
    link = 0.005 + 3 * shard / 380e6  # three peers' shards over NVLink
    assert link > 0.002 + 5 * shard / 2.5e9, "this calibration's link is the slower part"
    predicted = tuning.gemm_rs_pull_ms(m, n, k, 2, w, cal)
    assert predicted is not None and math.isclose(predicted, gemm + link + 0.004)
    # Slow local memory: the own shard read, the output written and the three shards the peers read from here.
    slow = dataclasses.replace(cal, memory=tuning.Rate(0.002, 1e8))
    assert math.isclose(tuning.gemm_rs_pull_ms(m, n, k, 2, w, slow), gemm + 0.002 + 5 * shard / 1e8 + 0.004)
    fp32 = tuning.gemm_rs_pull_ms(m, n, k, 4, w, cal)  # four-byte partials: twice the bytes
    assert math.isclose(fp32, gemm + 0.005 + 6 * shard / 380e6 + 0.004)
    assert tuning.gemm_rs_pull_ms(m, n, k, 2, 1, cal) is None, "one rank: nothing to pull"


def test_the_pull_model_needs_its_measured_extra_and_a_memory_rate() -> None:
    cal = dataclasses.replace(tuning.REFERENCE, memory=tuning.Rate(0.0, 2.5e9), rs_cublas_extra_ms=0.01)
    assert cal.rs_pull_extra_ms < 0 and tuning.gemm_rs_pull_ms(8192, 4096, 8192, 2, 2, cal) is None
    assert (
        tuning.gemm_rs_pull_ms(8192, 4096, 8192, 2, 2, dataclasses.replace(tuning.REFERENCE, rs_pull_extra_ms=0.0))
        is None
    )
    measured = cm.with_extra(cal, rs_pull_extra_ms=0.0)
    assert tuning.gemm_rs_pull_ms(8192, 4096, 8192, 2, 2, measured) is not None, "an extra of 0 is a measurement"


@pytest.mark.parametrize("gpu", GPUS)
def test_calibrations_without_the_pull_field_load_and_never_pick_pull(gpu) -> None:
    cal = committed(gpu)
    assert cal.rs_pull_extra_ms == -1.0 and cal.version == cal_mod.CALIBRATION_VERSION
    old = dataclasses.replace(cal, rs_pull_extra_ms=0.004).as_dict()
    del old["rs_pull_extra_ms"]
    assert tuning.Calibration.from_dict(old) == cal, "a dict without the field loads as not measured"
    cpu, target = torch.device("cpu"), GPUTarget("cuda", 90, 32)
    for m, n, k in GRID:
        path, estimate = tuning.gemm_rs_choice(m, n, k, 2, 2, cal)
        assert path != "pull" and "pull_ms" not in estimate, (m, n, k)
        assert grs.choose_config(m, n, k // 2, torch.bfloat16, 2, cpu, target, calibration=cal) != grs.CUBLAS_PULL
    measured = cm.with_extra(cal, rs_pull_extra_ms=0.004)
    assert tuning.Calibration.from_dict(json.loads(json.dumps(measured.as_dict()))) == measured, "round trip"


@pytest.mark.parametrize("gpu", GPUS)
def test_a_small_pull_extra_takes_the_fallback_rows_and_not_the_large_ones(gpu) -> None:
    cal = committed(gpu)
    cheap = cm.with_extra(cal, rs_pull_extra_ms=0.005)
    cpu, target = torch.device("cpu"), GPUTarget("cuda", 90, 32)
    for m, n, k in FALLBACK_ROWS:
        assert tuning.gemm_rs_choice(m, n, k, 2, 2, cal)[0] == "fallback", "the committed calibration's pick"
        path, estimate = tuning.gemm_rs_choice(m, n, k, 2, 2, cheap)
        assert path == "pull" and estimate["pull_ms"] <= cm.MARGIN * estimate["baseline_ms"], (m, n, k, estimate)
        assert estimate["pull_ms"] < estimate["cublas_ms"], "the direct producer is priced too, and slower"
        chosen = grs.choose_config(m, n, k // 2, torch.bfloat16, 2, cpu, target, calibration=cheap)
        assert chosen == grs.CUBLAS_PULL, (m, n, k)
        # Priced like the direct producer's measured extra, the pull producer loses these rows again.
        costly = cm.with_extra(cal, rs_pull_extra_ms=cal.rs_cublas_extra_ms)
        assert tuning.gemm_rs_choice(m, n, k, 2, 2, costly)[0] == "fallback", (m, n, k)
    # Large rows: splitting the GEMM per peer hides the partials' transfer behind it, the pull pays it after.
    for m, n, k in ((16384, 8192, 8192), (8192, 28672, 4096), (8192, 4096, 16384)):
        path, estimate = tuning.gemm_rs_choice(m, n, k, 2, 2, cheap)
        assert path == "cublas" and estimate["cublas_ms"] < estimate["pull_ms"], (m, n, k, estimate)
        assert grs.choose_config(m, n, k // 2, torch.bfloat16, 2, cpu, target, calibration=cheap) == grs.CUBLAS_DIRECT


def test_between_the_two_cublas_producers_the_faster_prediction_wins() -> None:
    cal = cm.with_extra(committed("NVIDIA H200"), rs_pull_extra_ms=0.005)
    m, n, k = 2048, 3584, 3584
    for direct_extra, expected in ((0.020, "pull"), (0.005, "cublas")):
        both = cm.with_extra(cal, rs_cublas_extra_ms=direct_extra)
        path, estimate = tuning.gemm_rs_choice(m, n, k, 2, 2, both)
        bar = cm.MARGIN * estimate["baseline_ms"]
        assert estimate["cublas_ms"] <= bar and estimate["pull_ms"] <= bar, "both producers qualify"
        assert path == expected, (direct_extra, estimate)


def test_the_calibration_probe_measures_the_pull_extra_like_the_direct_one(monkeypatch) -> None:
    assert cal_mod._fused_probes["gemm_rs"] is grs_op._calibration_probe, "gemm_rs registers its probe"
    # Small calibration shapes (the probe reads them when called), a timer that answers per function and config.
    monkeypatch.setattr(cal_mod, "CAL_RS", (64, 32, 128))
    monkeypatch.setattr(cal_mod, "CAL_RS_SMALL_K", (64, 32, 32))
    monkeypatch.setattr(grs_op, "clear_workspaces", lambda: None)
    world = SimpleNamespace(world_size=2, rank=0, device=torch.device("cpu"))
    partial = dataclasses.replace(tuning.REFERENCE, memory=tuning.Rate(0.001, 2.5e9), version=2)
    beyond = {grs.CUBLAS_DIRECT: (0.020, 0.030), grs.CUBLAS_PULL: (0.006, 0.002)}  # ms beyond each model, per shape
    timed: list[object] = []

    def fake_timed(world_: object, fn: functools.partial) -> float:
        a, b = fn.args[0], fn.args[1]
        m, n, k = a.shape[0], b.shape[1], a.shape[1] * 2
        shape = 0 if (m, n, k) == cal_mod.CAL_RS else 1
        if fn.func is torch.matmul:
            timed.append("matmul")
            return 1.0
        config = fn.args[2]
        timed.append(config)
        if config in beyond:
            model = tuning.gemm_rs_pull_ms if config.producer == "pull" else tuning.gemm_rs_cublas_ms
            zero = dataclasses.replace(partial, rs_cublas_extra_ms=0.0, rs_pull_extra_ms=0.0)
            return model(m, n, k, 2, 2, zero) + beyond[config][shape]
        return (1.5, 2.0)[shape]  # the fused kernel

    monkeypatch.setattr(cal_mod, "timed", fake_timed)
    # Off by default (the pull kernel has not run on GPUs): only the direct producer is timed.
    monkeypatch.setattr(grs_op, "CALIBRATE_PULL", False)
    assert "rs_pull_extra_ms" not in grs_op._calibration_probe(world, partial)
    assert grs.CUBLAS_PULL not in timed and timed.count(grs.CUBLAS_DIRECT) == 2, timed
    timed.clear()
    monkeypatch.setattr(grs_op, "CALIBRATE_PULL", True)
    measured = grs_op._calibration_probe(world, partial)
    assert timed.count(grs.CUBLAS_PULL) == 2 and timed.count(grs.CUBLAS_DIRECT) == 2, timed
    assert math.isclose(measured["rs_pull_extra_ms"], 0.004) and math.isclose(measured["rs_cublas_extra_ms"], 0.025)
    assert measured["rs_fused_over_cublas"] == 1.5 and measured["rs_fused_over_cublas_small_k"] == 2.0
    # The calibration folds the field in (an unknown one is refused).
    monkeypatch.setattr(cal_mod, "_fused_probes", {"gemm_rs": lambda world_, partial_: {"rs_pull_extra_ms": 0.004}})
    assert cal_mod._measure_fused(world, partial).rs_pull_extra_ms == 0.004
    monkeypatch.setattr(cal_mod, "_fused_probes", {"gemm_rs": lambda world_, partial_: {"rs_pull_ms": 0.004}})
    with pytest.raises(ValueError, match="rs_pull_ms"):
        cal_mod._measure_fused(world, partial)
    # Without a memory rate neither cuBLAS producer is modelled, so neither is timed or reported.
    timed.clear()
    unmeasured = grs_op._calibration_probe(world, dataclasses.replace(partial, memory=None))
    assert "rs_pull_extra_ms" not in unmeasured and "rs_cublas_extra_ms" not in unmeasured
    assert grs.CUBLAS_PULL not in timed and grs.CUBLAS_DIRECT not in timed
