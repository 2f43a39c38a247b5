"""bench/sweep.py's arithmetic on the CPU: each row's overlap bound (baseline / max(collective, GEMM)), issue 24's
bar per op (the geo-mean speedup against 1.30x / 1.08x, or against 0.95 / 0.97 x the geo-mean bound where that is
lower), the per-row floors, and the results writer's bar lines and columns."""

from __future__ import annotations

import importlib.util
import json
import random
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_sweep", REPO / "bench" / "sweep.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


sweep = _load()


def test_overlap_bound_is_the_baseline_over_the_longer_part() -> None:
    rng = random.Random()
    for _ in range(50):
        comm, gemm = rng.uniform(0.01, 5.0), rng.uniform(0.01, 5.0)
        base = (comm + gemm) * rng.uniform(0.9, 1.2)
        longer = comm if comm > gemm else gemm
        assert sweep.overlap_bound(base, comm, gemm) == pytest.approx(base / longer, rel=1e-12)
    # equal parts: a perfect overlap halves the serial baseline
    assert sweep.overlap_bound(2.0, 1.0, 1.0) == pytest.approx(2.0)
    # a tiny all-gather beside a large GEMM (large-N gate_up): no overlap gives much
    assert sweep.overlap_bound(1.05, 0.05, 1.0) == pytest.approx(1.05)


@pytest.mark.parametrize(
    ("times", "name"),
    [((1.0, 0.0, 1.0), "collective"), ((1.0, 1.0, float("nan")), "GEMM"), ((-1.0, 1.0, 1.0), "baseline")],
)
def test_overlap_bound_names_a_bad_time(times: tuple[float, float, float], name: str) -> None:
    with pytest.raises(ValueError, match=f"the {name} time"):
        sweep.overlap_bound(*times)


def test_the_bar_is_the_goal_where_the_bound_reaches_it() -> None:
    rng = random.Random()
    bounds = [rng.uniform(1.3, 1.9) for _ in range(24)]
    speedups = [rng.uniform(1.0, 1.6) for _ in range(24)]
    verdict = sweep.bar_verdict("ag", speedups, bounds)
    assert verdict.speedup == pytest.approx(statistics.geometric_mean(speedups))
    assert verdict.bound == pytest.approx(statistics.geometric_mean(bounds))
    assert verdict.target == 1.30
    assert verdict.met == (statistics.geometric_mean(speedups) >= 1.30)
    line = verdict.line()
    assert line.startswith(f"bar: geo-mean {verdict.speedup:.3f} vs 1.30 (bound geo-mean {verdict.bound:.3f}")
    assert line.endswith(": met" if verdict.met else ": NOT met")
    # the same rows scaled to just above / just below the goal
    scale = 1.30 / verdict.speedup
    assert sweep.bar_verdict("ag", [s * scale * 1.001 for s in speedups], bounds).met
    low = sweep.bar_verdict("ag", [s * scale * 0.999 for s in speedups], bounds)
    assert not low.met and low.line().endswith(": NOT met")


@pytest.mark.parametrize(("op", "goal", "share"), [("ag", 1.30, 0.95), ("rs", 1.08, 0.97)])
def test_the_bar_is_a_share_of_the_bound_where_that_is_lower(op: str, goal: float, share: float) -> None:
    rng = random.Random()
    bounds = [rng.uniform(1.01, goal - 0.01) for _ in range(20)]  # every row's bound below the goal
    bound = statistics.geometric_mean(bounds)
    for factor, met in ((share * 1.002, True), (share * 0.998, False)):
        speedups = [b * factor for b in bounds]  # geo-mean speedup = factor x geo-mean bound
        verdict = sweep.bar_verdict(op, speedups, bounds)
        assert verdict.target == pytest.approx(share * bound)
        assert verdict.met is met
        assert f"vs {share:.2f} x bound geo-mean {bound:.3f} = {share * bound:.3f} (bound below {goal:.2f})" in (
            verdict.line()
        )
        assert verdict.line().endswith(": met" if met else ": NOT met")
    # below the goal but within the share of a low bound: met although far from the goal
    assert sweep.bar_verdict(op, [1.0] * 3, [1.0] * 3).met
    assert not sweep.bar_verdict(op, [0.9] * 3, [1.0] * 3).met


def test_the_session18_ag_sweep_is_judged_against_its_bound() -> None:
    # issue 24's AG rows where the all-gather is small beside the GEMM: 1.147x geo-mean misses 1.30 outright, but
    # against a bound of 1.2 (below the goal) the bar is 0.95 x 1.2 = 1.14, which it meets
    verdict = sweep.bar_verdict("ag", [1.147] * 4, [1.2] * 4)
    assert verdict.met and verdict.target == pytest.approx(1.14)
    assert not sweep.bar_verdict("ag", [1.147] * 4, [1.3] * 4).met
    # a bound at or above the goal is not "lower": the goal stands, though 0.95 x the bound would be below it
    assert not sweep.bar_verdict("ag", [1.27] * 4, [1.32] * 4).met
    assert sweep.bar_verdict("rs", [1.06] * 4, [1.07] * 4).met  # 0.97 x 1.07 = 1.038


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("mm", [1.0], [1.0]), "unknown op 'mm'"),
        (("ag", [], []), "0 speedups and 0 bounds"),
        (("rs", [1.0, 1.1], [1.2]), "2 speedups and 1 bounds"),
        (("ag", [1.0, 0.0], [1.2, 1.2]), "a speedup of 0.0"),
        (("rs", [1.0], [float("nan")]), "a bound of nan"),
    ],
)
def test_bar_verdict_names_bad_input(args: tuple[str, list[float], list[float]], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        sweep.bar_verdict(*args)


def _row(model: str, m: int, speedup: float, idle: float) -> dict[str, object]:
    return {"model": model, "layer": "qkv", "m": m, "speedup": speedup, "idle_speedup": idle}


def test_floor_lines_name_every_row_below() -> None:
    rows = [_row("A", 1024, 1.10, 1.00), _row("B", 2048, 0.97, 0.96), _row("C", 4096, 0.98, 0.94)]
    assert sweep.floor_line(rows, "speedup", 0.98, "device barrier") == (
        "floor (device barrier) >= 0.98: NOT met, 1 of 3 rows below: B qkv M=2048 0.97"
    )
    assert sweep.floor_line(rows, "idle_speedup", 0.95, "from idle") == (
        "floor (from idle) >= 0.95: NOT met, 1 of 3 rows below: C qkv M=4096 0.94"
    )
    assert sweep.floor_line(rows[:1], "speedup", 0.98, "device barrier") == (
        "floor (device barrier) >= 0.98: met (worst 1.10)"
    )
    nan_row = [_row("D", 1024, float("nan"), 1.0)]  # a missing timing is not a pass
    assert "NOT met" in sweep.floor_line(nan_row, "speedup", 0.98, "device barrier")
    with pytest.raises(ValueError, match="no rows"):
        sweep.floor_line([], "speedup", 0.98, "device barrier")


def _measured(rng: random.Random, op: str, model: str, m: int) -> dict[str, object]:
    comm, gemm = rng.uniform(0.05, 1.0), rng.uniform(0.2, 3.0)
    base = comm + gemm
    row: dict[str, object] = {"op": op, "model": model, "layer": "qkv" if op == "ag" else "down", "m": m}
    row.update(n=4096, k=8192, path="fused", rel_error=0.0, fused_ms=0.5, comm_ms=comm, gemm_ms=gemm)
    row.update(base_ms=base, base_ms_2=base * 1.01, ours_ms=base / rng.uniform(0.9, 1.4))
    row.update(ours_ms_2=float(row["ours_ms"]) * 1.02, ours_idle_ms=base, base_idle_ms=base * rng.uniform(0.9, 1.2))
    row.update(ours_host_us=80.0, unfused_host_us=70.0, base_host_us=60.0)
    return row


def test_derive_adds_the_ratios() -> None:
    rng = random.Random()
    row = _measured(rng, "ag", "A", 1024)
    sweep.derive(row)
    assert row["speedup"] == pytest.approx(float(row["base_ms"]) / float(row["ours_ms"]))
    assert row["speedup_2"] == pytest.approx(float(row["base_ms_2"]) / float(row["ours_ms_2"]))
    assert row["idle_speedup"] == pytest.approx(float(row["base_idle_ms"]) / float(row["ours_idle_ms"]))
    bound = float(row["base_ms"]) / max(float(row["comm_ms"]), float(row["gemm_ms"]))
    assert row["bound"] == pytest.approx(bound)
    assert row["of_bound"] == pytest.approx(float(row["speedup"]) / bound)


def test_the_results_carry_the_bound_and_the_bar_lines(tmp_path: Path) -> None:
    rng = random.Random()
    results = [_measured(rng, op, f"M{i}", 1024 * (i + 1)) for op in ("ag", "rs") for i in range(3)]
    for row in results:
        sweep.derive(row)
    sweep.write(results, 0.0, tmp_path, "2xTEST", gpu="TEST GPU", world_size=2)
    text = (tmp_path / "sweep_2xTEST.md").read_text()
    assert "Overlap bound = baseline / max(comm, GEMM)" in text
    assert "| comm / GEMM ms |" in text and "| bound (speedup / bound) |" in text
    for op in ("ag", "rs"):
        rows = [r for r in results if r["op"] == op]
        for line in sweep.summary_lines(op, rows):
            assert f"- {line}\n" in text
        first = rows[0]
        assert f"| {first['comm_ms']:.3f} / {first['gemm_ms']:.3f} |" in text
        assert f"| {first['bound']:.2f} ({first['of_bound']:.2f}) |" in text
    assert text.count("bar: geo-mean ") == 2 and text.count("floor (") == 4
    data = json.loads((tmp_path / "sweep_2xTEST.json").read_text())
    assert [r["bound"] for r in data["rows"]] == pytest.approx([r["bound"] for r in results])
    assert all({"comm_ms", "gemm_ms", "of_bound"} <= set(r) for r in data["rows"])
