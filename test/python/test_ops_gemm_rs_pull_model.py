"""The cost model's price of gemm_rs's cuBLAS "pull" producer (``CUBLAS_PULL``, issue 24): its arithmetic, its
absence from calibrations that never measured it, the choice it wins and loses, and the calibration probe that
fits its rate (``Calibration.pull``). CPU only: no kernel runs."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
import json
import math
import os
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
PULL_FASTER_ROWS = (*FALLBACK_ROWS, (1024, 6144, 6144))
"""The five RS rows where the 2 x H200 layer sweep ran matmul + NCCL and timed the pull producer faster (device ms,
pull / matmul + NCCL: 0.105/0.115, 0.078/0.092, 0.126/0.134, 0.206/0.210, 0.086/0.097)."""
H200_PULL = tuning.Rate(fixed_ms=0.0168, per_ms=321e6)
"""The pull producer's time beyond each row's measured GEMM over that sweep's 32 RS rows, linear in the bytes each
rank pulls: 25 us at 3.7 MB ... 422 us at 134 MB, about 16.8 us + bytes / 321 GB/s."""
GRID = tuple(itertools.product((1024, 2048, 4096, 8192, 16384), (3584, 4096, 8192, 28672), (2048, 4096, 14336, 28672)))


def committed(gpu: str) -> tuning.Calibration:
    """The package's calibration of 2 x ``gpu``."""
    return tuning.Calibration.from_dict(
        tuning.read_table(cal_mod.PACKAGE_CALIBRATIONS)[cal_mod.calibration_key(gpu, 2)]["config"]
    )


def test_the_pull_model_prices_one_gemm_then_the_longer_of_the_pull_and_local_memory() -> None:
    pull = tuning.Rate(0.004, 300e6)
    cal = dataclasses.replace(tuning.REFERENCE, memory=tuning.Rate(0.002, 2.5e9), pull=pull)
    m, n, k, w = 4096, 2048, 8192, 4
    shard = 1024 * 2048 * 2  # bytes of one rank's rows of the [M, N] bf16 partial
    gemm = 2.0 * 4096 * 2048 * 2048 / 700e9  # all M rows at K / W, at the reference's cuBLAS rate
    pulled = 0.004 + 3 * shard / 300e6  # three peers' shards at the pull rate
    assert pulled > 0.002 + 5 * shard / 2.5e9, "this calibration's pull is the slower part"
    predicted = tuning.gemm_rs_pull_ms(m, n, k, 2, w, cal)
    assert predicted is not None and math.isclose(predicted, gemm + pulled)
    # Slow local memory: the own shard read, the output written and the three shards the peers read from here.
    slow = dataclasses.replace(cal, memory=tuning.Rate(0.002, 1e8))
    assert math.isclose(tuning.gemm_rs_pull_ms(m, n, k, 2, w, slow), gemm + 0.002 + 5 * shard / 1e8)
    fp32 = tuning.gemm_rs_pull_ms(m, n, k, 4, w, cal)  # four-byte partials: twice the bytes
    assert math.isclose(fp32, gemm + 0.004 + 6 * shard / 300e6)
    two = tuning.gemm_rs_pull_ms(m, n, k, 2, 2, cal)  # one peer: its shard is M / 2 rows
    assert math.isclose(two, 2.0 * 4096 * 2048 * 4096 / 700e9 + 0.004 + 2048 * 2048 * 2 / 300e6)
    assert tuning.gemm_rs_pull_ms(m, n, k, 2, 1, cal) is None, "one rank: nothing to pull"


def test_the_pull_model_needs_its_rate_and_a_memory_rate() -> None:
    cal = dataclasses.replace(tuning.REFERENCE, memory=tuning.Rate(0.0, 2.5e9), rs_cublas_extra_ms=0.01)
    assert cal.pull is None and tuning.gemm_rs_pull_ms(8192, 4096, 8192, 2, 2, cal) is None
    no_memory = dataclasses.replace(tuning.REFERENCE, pull=H200_PULL)
    assert no_memory.memory is None and tuning.gemm_rs_pull_ms(8192, 4096, 8192, 2, 2, no_memory) is None
    assert tuning.gemm_rs_pull_ms(8192, 4096, 8192, 2, 2, cm.with_extra(cal, pull=H200_PULL)) is not None


@pytest.mark.parametrize("gpu", GPUS)
def test_calibrations_without_a_pull_rate_load_and_never_pick_pull(gpu) -> None:
    cal = dataclasses.replace(committed(gpu), pull=None)  # as H100's (never calibrated with pull) and older ones
    assert cal.version == cal_mod.CALIBRATION_VERSION
    cpu, target = torch.device("cpu"), GPUTarget("cuda", 90, 32)
    for m, n, k in GRID:
        path, estimate = tuning.gemm_rs_choice(m, n, k, 2, 2, cal)
        assert path != "pull" and "pull_ms" not in estimate, (m, n, k)
        assert grs.choose_config(m, n, k // 2, torch.bfloat16, 2, cpu, target, calibration=cal) != grs.CUBLAS_PULL
    measured = cm.with_extra(cal, pull=H200_PULL)
    assert tuning.Calibration.from_dict(json.loads(json.dumps(measured.as_dict()))) == measured, "round trip"


def test_a_stored_constant_pull_extra_is_dropped_and_a_bad_pull_rate_refused() -> None:
    cal = committed("NVIDIA H200")
    legacy = {**cal.as_dict(), "rs_pull_extra_ms": 0.024551750719547294}  # the 2026-11-27 15:30 calibration's
    assert tuning.Calibration.from_dict(legacy) == cal, "the legacy key is dropped, the rest kept as stored"
    with_rate = {**cm.with_extra(cal, pull=H200_PULL).as_dict(), "rs_pull_extra_ms": 0.02}
    assert tuning.Calibration.from_dict(with_rate).pull == H200_PULL
    for bad in ({"fixed_ms": 0.01, "per_ms": 0.0}, {"fixed_ms": -0.001, "per_ms": 3e8}):
        with pytest.raises(ValueError, match="Calibration.pull"):
            tuning.Calibration.from_dict({**cal.as_dict(), "pull": bad})


def test_the_sweeps_pull_rate_takes_the_rows_it_won_and_leaves_the_large_ones_to_direct() -> None:
    cal = committed("NVIDIA H200")
    fitted = cm.with_extra(cal, pull=H200_PULL)
    cpu, target = torch.device("cpu"), GPUTarget("cuda", 90, 32)
    for m, n, k in PULL_FASTER_ROWS:
        path, estimate = tuning.gemm_rs_choice(m, n, k, 2, 2, fitted)
        assert path == "pull" and estimate["pull_ms"] <= cm.MARGIN * estimate["baseline_ms"], (m, n, k, estimate)
        assert estimate["pull_ms"] < estimate["cublas_ms"], "the direct producer is priced too, and slower"
        chosen = grs.choose_config(m, n, k // 2, torch.bfloat16, 2, cpu, target, calibration=fitted)
        assert chosen == grs.CUBLAS_PULL, (m, n, k)
        # The old price (the push rate plus a constant measured at CAL_RS's 33.6 MB shard) lost these rows.
        constant = tuning.Rate(cal.push.fixed_ms + 0.0246, cal.push.per_ms)
        assert tuning.gemm_rs_choice(m, n, k, 2, 2, cm.with_extra(cal, pull=constant))[0] != "pull", (m, n, k)
    without = dataclasses.replace(cal, pull=None)
    for m, n, k in FALLBACK_ROWS:
        assert tuning.gemm_rs_choice(m, n, k, 2, 2, without)[0] == "fallback", "the pick without a pull rate"
    # Large rows: splitting the GEMM per peer hides the partials' transfer behind it, the pull pays it after.
    for m, n, k in ((8192, 4096, 14336), (16384, 4096, 4096), (16384, 8192, 8192), (8192, 28672, 4096)):
        path, estimate = tuning.gemm_rs_choice(m, n, k, 2, 2, fitted)
        assert path == "cublas" and estimate["cublas_ms"] < estimate["pull_ms"], (m, n, k, estimate)
        chosen = grs.choose_config(m, n, k // 2, torch.bfloat16, 2, cpu, target, calibration=fitted)
        assert chosen == grs.CUBLAS_DIRECT, (m, n, k)


def test_the_committed_h200_rate_picks_what_the_sweep_ran() -> None:
    """The 2 x H200 calibration of 2026-11-27 15:55 measured the pull rate itself (18.0 us + bytes / 327 GB/s, at
    CAL_RS and CAL_RS_PULL_SMALL_M, not at the sweep's rows); the sweep run on it (docs/results/
    2026-11-27-session27.md, job 5) took pull on three of these rows and Qwen2.5-72B o_proj M = 1024, and kept
    1024,5120,25600 on matmul + NCCL (pull predicted within the 3% margin there)."""
    cal = committed("NVIDIA H200")
    assert cal.pull is not None and math.isclose(cal.pull.per_ms, H200_PULL.per_ms, rel_tol=0.05)
    ran = {
        (1024, 4096, 14336): "pull",
        (2048, 3584, 3584): "pull",
        (1024, 3584, 18944): "pull",
        (1024, 6144, 6144): "pull",
        (1024, 8192, 8192): "pull",
        (1024, 5120, 25600): "fallback",
        (8192, 4096, 14336): "cublas",
    }
    for (m, n, k), path in ran.items():
        assert tuning.gemm_rs_choice(m, n, k, 2, 2, cal)[0] == path, (m, n, k)


def test_between_the_two_cublas_producers_the_faster_prediction_wins() -> None:
    cal = cm.with_extra(committed("NVIDIA H200"), pull=H200_PULL)
    m, n, k = 2048, 3584, 3584
    for direct_extra, expected in ((0.020, "pull"), (0.002, "cublas")):
        both = cm.with_extra(cal, rs_cublas_extra_ms=direct_extra)
        path, estimate = tuning.gemm_rs_choice(m, n, k, 2, 2, both)
        bar = cm.MARGIN * estimate["baseline_ms"]
        assert estimate["cublas_ms"] <= bar and estimate["pull_ms"] <= bar, "both producers qualify"
        assert path == expected, (direct_extra, estimate)


def test_the_calibration_probe_fits_the_pull_rate_through_two_shard_sizes(monkeypatch) -> None:
    assert cal_mod._fused_probes["gemm_rs"] is grs_op._calibration_probe, "gemm_rs registers its probe"
    if "TRITON_DIST_CALIBRATE_PULL" not in os.environ:
        assert grs_op.CALIBRATE_PULL, "on by default"
    # Small calibration shapes (the probe reads them when called), a timer that answers per function and shape.
    monkeypatch.setattr(cal_mod, "CAL_RS", (64, 32, 128))
    monkeypatch.setattr(cal_mod, "CAL_RS_SMALL_K", (64, 32, 32))
    monkeypatch.setattr(cal_mod, "CAL_RS_PULL_SMALL_M", (16, 32, 128))
    monkeypatch.setattr(grs_op, "clear_workspaces", lambda: None)
    world = SimpleNamespace(world_size=2, rank=0, device=torch.device("cpu"))
    partial = dataclasses.replace(tuning.REFERENCE, memory=tuning.Rate(0.001, 2.5e9), version=2)
    shapes = (cal_mod.CAL_RS, cal_mod.CAL_RS_SMALL_K, cal_mod.CAL_RS_PULL_SMALL_M)
    matmul_ms = dict(zip(shapes, (1.0, 0.25, 0.125), strict=True))  # the timed GEMM the pull is measured beyond
    truth = tuning.Rate(0.01, 1000.0)  # ms beyond the GEMM: 0.01 + bytes pulled / 1000
    direct_beyond = {cal_mod.CAL_RS: 0.020, cal_mod.CAL_RS_SMALL_K: 0.030}
    timed: list[object] = []

    def fake_timed(world_: object, fn: functools.partial) -> float:
        a, b = fn.args[0], fn.args[1]
        m, n, k = a.shape[0], b.shape[1], a.shape[1] * 2
        if fn.func is torch.matmul:
            timed.append("matmul")
            return matmul_ms[(m, n, k)]
        config = fn.args[2]
        timed.append(config)
        if config == grs.CUBLAS_PULL:
            return matmul_ms[(m, n, k)] + truth.ms(m // 2 * n * 2)
        if config == grs.CUBLAS_DIRECT:
            zero = dataclasses.replace(partial, rs_cublas_extra_ms=0.0)
            return tuning.gemm_rs_cublas_ms(m, n, k, 2, 2, zero) + direct_beyond[(m, n, k)]
        return {cal_mod.CAL_RS: 1.5, cal_mod.CAL_RS_SMALL_K: 0.5}[(m, n, k)]  # the fused kernel

    monkeypatch.setattr(cal_mod, "timed", fake_timed)
    monkeypatch.setattr(grs_op, "CALIBRATE_PULL", True)
    measured = grs_op._calibration_probe(world, partial)
    assert timed.count(grs.CUBLAS_PULL) == 2 and timed.count(grs.CUBLAS_DIRECT) == 2, timed
    pull = measured["pull"]
    assert isinstance(pull, tuning.Rate), measured
    assert math.isclose(pull.fixed_ms, truth.fixed_ms) and math.isclose(pull.per_ms, truth.per_ms), pull
    assert math.isclose(measured["rs_cublas_extra_ms"], 0.025)
    assert measured["rs_fused_over_cublas"] == 1.5 and measured["rs_fused_over_cublas_small_k"] == 2.0
    # The calibration folds the rate in (an unknown field is refused).
    monkeypatch.setattr(cal_mod, "_fused_probes", {"gemm_rs": lambda world_, partial_: {"pull": truth}})
    assert cal_mod._measure_fused(world, partial).pull == truth
    monkeypatch.setattr(cal_mod, "_fused_probes", {"gemm_rs": lambda world_, partial_: {"rs_pull_extra_ms": 0.004}})
    with pytest.raises(ValueError, match="rs_pull_extra_ms"):
        cal_mod._measure_fused(world, partial)
    # A larger shard that did not take longer: no positive rate fits, the rate stays unmeasured, with a warning.
    truth = tuning.Rate(0.05, -1000.0)
    with pytest.warns(UserWarning, match="no positive rate fits"):
        assert "pull" not in grs_op._calibration_probe(world, partial)
    # Off (TRITON_DIST_CALIBRATE_PULL=0): only the direct producer is timed.
    timed.clear()
    monkeypatch.setattr(grs_op, "CALIBRATE_PULL", False)
    assert "pull" not in grs_op._calibration_probe(world, partial)
    assert grs.CUBLAS_PULL not in timed and timed.count(grs.CUBLAS_DIRECT) == 2, timed
    # Without a memory rate neither cuBLAS producer is modelled, so neither is timed or reported.
    timed.clear()
    monkeypatch.setattr(grs_op, "CALIBRATE_PULL", True)
    unmeasured = grs_op._calibration_probe(world, dataclasses.replace(partial, memory=None))
    assert "pull" not in unmeasured and "rs_cublas_extra_ms" not in unmeasured
    assert grs.CUBLAS_PULL not in timed and grs.CUBLAS_DIRECT not in timed
