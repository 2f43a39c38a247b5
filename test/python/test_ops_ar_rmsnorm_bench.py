"""bench/ar_rmsnorm.py's bar lines on the CPU: each names the worst ratio's M (and, where graphed and eager are
both compared, the mode), and PASS / FAIL follows the ratio; the forced LL variant's grid."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ar_rmsnorm", REPO / "bench" / "ar_rmsnorm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load()


def _row(m: int, times: dict[str, tuple[float, float]]) -> dict[str, object]:
    """A result row at M = ``m``: name -> (graphed µs, eager µs)."""
    row: dict[str, object] = {"M": float(m)}
    for name, (graphed, eager) in times.items():
        row[f"{name} graphed"], row[f"{name} eager"] = graphed, eager
    return row


def test_each_bar_line_names_where_its_worst_ratio_is() -> None:
    b = bench
    rows = [
        _row(1, {b.FUSED: (7.4, 69.6), b.OURS: (4.9, 70.5), b.UNFUSED: (13.2, 142.9), b.NCCL: (15.8, 206.0)}),
        _row(4, {b.FUSED: (7.6, 91.2), b.OURS: (5.4, 66.8), b.UNFUSED: (14.6, 81.0), b.NCCL: (16.9, 170.8)}),
        _row(1024, {b.FUSED: (75.9, 128.9), b.OURS: (66.5, 105.7), b.UNFUSED: (96.4, 146.0), b.NCCL: (107.9, 1.0)}),
    ]
    forced = ((5.0, 8.9, 5.6, 5.7, 4.8, 4.5), (5.3, 9.2, 6.9, 6.0, 6.8, 5.0), (None,) * 6)
    for row, (split, unsplit, reader, atomic, spin, words) in zip(rows, forced, strict=True):
        if split is not None:
            row[f"{b.FUSED_LL} graphed"], row[f"{b.FUSED_LL_UNSPLIT} graphed"] = split, unsplit
            row[f"{b.FUSED_LL_READER} graphed"], row[f"{b.FUSED_LL_ATOMIC} graphed"] = reader, atomic
            row[f"{b.FUSED_LL_SPIN} graphed"], row[f"{b.FUSED_LL_SPIN_WORDS} graphed"] = spin, words
    lines = b.bar_summary(rows)
    assert lines[0] == "fused / our AR at M <= 128: worst 1.51 at M=1 (<= 1.2: FAIL)"
    assert lines[1] == "fused / NCCL + add + RMSNorm at M <= 128: worst 0.47 at M=1 (<= 0.45: FAIL)"
    # The eager M = 4 (91.2 / 81.0), not a graphed ratio and not M = 1024 (past the bar's M, but in this line).
    assert lines[2] == "fused / our unfused path, every M, graphed and eager: worst 1.13 at M=4 eager (<= 1: FAIL)"
    assert lines[3] == "(not the default) fused LL (forced) / our AR at M <= 128: worst 1.02 at M=1 (<= 1.2: PASS)"
    assert lines[4].endswith("worst 1.82 at M=1 (<= 1.2: FAIL)") and b.FUSED_LL_UNSPLIT in lines[4]
    assert lines[5].endswith("worst 1.28 at M=4 (<= 1.2: FAIL)") and b.FUSED_LL_READER in lines[5]
    assert (
        lines[6] == "(not the default) fused LL atomic (forced) / our AR at M <= 128: worst 1.16 at M=1 (<= 1.2: PASS)"
    )
    # The spin variant's worst is at M = 4 (6.8 / 5.4), though its M = 1 (4.8 / 4.9) passes.
    assert lines[7] == "(not the default) fused LL spin (forced) / our AR at M <= 128: worst 1.26 at M=4 (<= 1.2: FAIL)"
    assert lines[8].endswith("spin words (forced) / our AR at M <= 128: worst 0.93 at M=4 (<= 1.2: PASS)")
    rows[1][f"{b.FUSED} eager"] = 70.0
    assert b.bar_summary(rows)[2].endswith("worst 0.88 at M=1024 eager (<= 1: PASS)")
    del rows[0][f"{b.OURS} graphed"]  # a missing time: no verdict but FAIL
    assert b.bar_summary(rows)[0] == "fused / our AR at M <= 128: worst nan (<= 1.2: FAIL)"


def test_the_ll_grid_is_groups_by_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton_dist.ops.ar_rmsnorm import config as cfg

    monkeypatch.setattr(cfg, "ll_supported", lambda: True)
    assert [bench.ll_grid(m, 8192, 2) for m in (1, 4, 256, 257)] == ["1x16", "4x8", "256x1", "-"]
    reader = [bench.ll_grid(m, 8192, 2, bench.LL_READER) for m in (1, 4, 16, 32, 256)]
    assert reader == ["1x16", "4x16", "16x8", "32x4", "256x1"]
    atomic = [bench.ll_grid(m, 8192, 2, bench.LL_ATOMIC) for m in (1, 4, 16, 32, 256)]
    assert atomic == ["1x16", "4x16", "16x8", "32x4", "256x1"]
    spin = [bench.ll_grid(m, 8192, 2, bench.LL_SPIN) for m in (1, 4, 16, 32, 64, 256)]
    assert spin == ["1x16", "4x16", "16x8", "32x4", "64x2", "256x1"]


def test_the_sweep_names_each_config_apart() -> None:
    names = [bench.sweep_name(config) for config in bench.SWEEP]
    assert len(set(names)) == len(names)
    assert "one_shot_ll 8w 16 slices" in names and "one_shot_ll 8w" in names
    assert "one_shot_ll 8w 1 reader" in names and "one_shot_ll 16w 1 reader" in names
    spins = {f"one_shot_ll {warps}w {reduce}" for reduce in ("spin", "spin_words") for warps in (1, 2, 8)}
    assert spins <= set(names)
