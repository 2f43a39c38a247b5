"""``ops.moe.switches.REDUCE_OVERLAPS_PUSH`` on CPU ranks: the normal-mode combine whose push sets a flag per wave and
whose reduce waits, per token, for the waves its partials are in (``kernels._combine_push_kernel`` /
``_combine_reduce_kernel`` with ``WAVES``), under the emulation (``TRITON_INTERPRET=1``, ``init(device="cpu")``, gloo)
at 2 ranks, against the torch reference, every output allocated poisoned (``test_ops_moe_emulation``'s cases and
checks: dispatch exactly, combine the reference's bits).

Cases (``OVERLAP_CASES``, one run of ranks: each start costs about 10 s here): every token to the last rank (only it
pushes partials, and each home waits for its waves alone), T = 0 on rank 1 (a home that waits for nothing, whose
push has no slot of its own) with fp32 partials and without ``combine_spread`` (the reduce's loop over ranks) at 3
waves, k = 8 with bf16 partials, and 16 waves (``switches.set_combine_waves``) on 19, 13 and 7 tokens (most waves of a
home hold one slot or none); then three of them with ``switches.OWN_PARTIALS_IN_REDUCE`` (the reduce sums its own
tokens' partials itself, the push stores only the others'). Those run at ``switches.COMBINE_WAVE_MIN_SLOTS`` 0 (every
pair all its waves); two more at 1 and 4 (each (home, holder) pair its own waves, fewer than the call's: 16 waves on 7
to 19 tokens, 8 on k = 8's few). Then ``switches.COMBINE_AUTO`` with the options themselves off, on "one_rank" (5 and 9
tokens: a choice on each rank's own combine slots would differ at 7) at a threshold of 7, below the busiest rank's 9
slots (the pair on both ranks), and of 10, above them (the default on both). Two cases run on a plan of three programs a
kernel (``ROTATION_CASES``: the push's waves dealt round the programs). ``BY_PROGRAMS_CASES`` run with
``switches.COMBINE_WAVES_BY_PROGRAMS`` on plans of one and of three programs (a pair's waves: at most one slot per
program each). Each combine is checked to have launched both kernels with its waves, own and wave-minimum (or
-maximum) setting (a spy on ``op._launch``), so a combine that ignored the options fails.
"""

from __future__ import annotations

from typing import Any

import pytest
from emulated_ranks import run_ranks

from triton_dist.ops.moe.config import MoeConfig

SPREAD = MoeConfig(combine_partials="fp32", combine_spread=True)
INPUT = MoeConfig(combine_partials="input", combine_spread=True)
PLAIN = MoeConfig(combine_partials="fp32", combine_spread=False)
OVERLAP_CASES: tuple[tuple[str, str, Any, int, bool, int], ...] = (
    ("one_rank", "one_rank", SPREAD, 8, False, 0),
    ("t0/plain", "t0", PLAIN, 3, False, 0),
    ("k8/input", "k8", INPUT, 8, False, 0),
    ("waves16", "variants", SPREAD, 16, False, 0),
    ("own/one_rank", "one_rank", SPREAD, 8, True, 0),
    ("own/t0/plain", "t0", PLAIN, 3, True, 0),
    ("own/k8/input", "k8", INPUT, 8, True, 0),
    ("least1/waves16", "variants", SPREAD, 16, True, 1),
    ("least4/k8/input", "k8", INPUT, 8, False, 4),
)
"""(label, ``test_ops_moe_emulation`` case, config, waves, ``switches.OWN_PARTIALS_IN_REDUCE``,
``switches.COMBINE_WAVE_MIN_SLOTS``), in this order on the default dispatch's plans (bf16 partials on k = 8 only, where
every token has rows on every rank: ``_case`` checks that they differ)."""
THREE = MoeConfig(combine_partials="fp32", combine_spread=True, expand_block=4)
"""``ROTATION_CASES``' config: a plan of its own (``expand_block``), made with three programs a kernel."""
ROTATION_CASES: tuple[tuple[str, str, Any, int, bool, int], ...] = (
    ("programs3/waves16", "variants", THREE, 16, False, 0),
    ("programs3/own/least1", "variants", THREE, 16, True, 1),
)
"""As ``OVERLAP_CASES``, on a plan of three programs a kernel (``op.EMULATED_PROGRAMS``, else 1): the push deals each
wave's slots round its programs from where the wave before ended (a wave of one slot to program 0, the next to 1)."""
BY_PROGRAMS_CASES: tuple[tuple[str, str, Any, int, bool, int], ...] = (
    ("by_programs/own/waves16", "variants", SPREAD, 16, True, 1),
    ("by_programs/k8/input", "k8", INPUT, 8, False, 3),
)
"""As ``OVERLAP_CASES`` (the wave minimum only switching the rule on) with ``switches.COMBINE_WAVES_BY_PROGRAMS``, each
on a plan of one and of three programs a kernel: a pair of ``n`` slots takes ``min(waves, ceil(n / programs))``
waves (one program: a wave per slot up to the call's waves), launched with the minimum 0 and the programs as
``WAVE_MAX``."""
AUTO_CASES: tuple[tuple[str, int, tuple[int, bool, int]], ...] = (
    ("auto/below", 7, (8, True, 256)),
    ("auto/above", 10, (0, False, 0)),
)
"""(label, ``switches.COMBINE_AUTO_MIN_SLOTS``, the launches' (waves, own, wave minimum) expected on every rank) on
"one_rank" at 2 ranks (5 + 9 tokens, every one held by rank 1: rank 0's partials need 5 combine slots, rank 1's 9,
the busiest rank's, which both ranks decide on; a choice on a rank's own 5 or 9 would differ at 7), with
``switches.COMBINE_AUTO`` on and ``switches.REDUCE_OVERLAPS_PUSH`` / ``OWN_PARTIALS_IN_REDUCE`` off, 8 waves and the
wave minimum at 256."""


def _worker() -> dict[str, list[str]]:
    """Every ``OVERLAP_CASES`` entry with ``switches.REDUCE_OVERLAPS_PUSH`` on: what this rank's dispatch and combine
    got that the reference did not, and whether both combine kernels were launched with the case's waves."""
    import test_ops_moe_emulation as emulation

    from triton_dist.ops.moe import op as moe_op
    from triton_dist.ops.moe import switches

    record: dict[str, list[str]] = {}
    launched: list[tuple[str, int, bool, int, int]] = []
    launch = moe_op._launch

    def spy(plan: Any, name: str, *args: Any, **kwargs: Any) -> None:
        if name.startswith("combine"):
            combine = kwargs.get("combine", (None, None, 0, False, 0, 0))
            launched.append((name, combine[2], combine[3], combine[4], combine[5]))
        launch(plan, name, *args, **kwargs)

    moe_op._launch = spy  # type: ignore[assignment]
    previous = switches.set_reduce_overlaps_push(True)
    waves_before, own_before = switches.COMBINE_WAVES, switches.OWN_PARTIALS_IN_REDUCE
    least_before, auto_before = switches.COMBINE_WAVE_MIN_SLOTS, switches.COMBINE_AUTO
    threshold_before = switches.COMBINE_AUTO_MIN_SLOTS
    by_programs_before = switches.COMBINE_WAVES_BY_PROGRAMS
    try:
        switches.set_combine_auto(False)  # the options as set, not the auto choice (its cases follow)
        cases = [(case, 1, False) for case in OVERLAP_CASES] + [(case, 3, False) for case in ROTATION_CASES]
        cases += [(case, programs, True) for programs in (1, 3) for case in BY_PROGRAMS_CASES]
        for number, ((label, name, config, waves, own, least), programs, by_programs) in enumerate(cases):
            moe_op.EMULATED_PROGRAMS = programs
            switches.set_combine_waves(waves)
            switches.set_own_partials_in_reduce(own)
            switches.set_combine_wave_min_slots(least)
            switches.set_combine_waves_by_programs(by_programs)
            if programs == 3 and by_programs:  # a plan of its own (expand_block), made with three programs a kernel
                config = MoeConfig(combine_partials=config.combine_partials, combine_spread=True, expand_block=8)
            launched.clear()
            with emulation._PoisonedEmpty():
                problems = emulation._case(rank_of(), size_of(), name, 100 + number, "normal", config)
            rule = (0, programs) if by_programs else (least, 0)
            expected = [(kernel, waves, own, *rule) for kernel in ("combine_push", "combine_reduce")]
            if launched != expected:
                problems.append(f"combine launches {launched}, not {expected}")
            record[f"{label}#{number}"] = problems
        switches.set_reduce_overlaps_push(False)
        switches.set_own_partials_in_reduce(False)
        switches.set_combine_waves_by_programs(False)
        switches.set_combine_waves(8)
        switches.set_combine_wave_min_slots(256)
        switches.set_combine_auto(True)
        moe_op.EMULATED_PROGRAMS = 1
        for number, (label, threshold, (waves, own, least)) in enumerate(AUTO_CASES, start=len(cases)):
            switches.set_combine_auto_min_slots(threshold)
            launched.clear()
            with emulation._PoisonedEmpty():
                problems = emulation._case(rank_of(), size_of(), "one_rank", 100 + number, "normal", SPREAD)
            expected = [(kernel, waves, own, least, 0) for kernel in ("combine_push", "combine_reduce")]
            if launched != expected:
                problems.append(f"combine launches {launched}, not {expected}")
            record[f"{label}#{number}"] = problems
    finally:
        moe_op.EMULATED_PROGRAMS = 1
        switches.set_reduce_overlaps_push(previous)
        switches.set_combine_waves(waves_before)
        switches.set_own_partials_in_reduce(own_before)
        switches.set_combine_wave_min_slots(least_before)
        switches.set_combine_auto(auto_before)
        switches.set_combine_auto_min_slots(threshold_before)
        switches.set_combine_waves_by_programs(by_programs_before)
        moe_op._launch = launch  # type: ignore[assignment]
    return record


def rank_of() -> int:
    """This rank (the emulation's world)."""
    import triton_dist.runtime as rt

    return rt.current_world().rank


def size_of() -> int:
    """The world's size (the emulation's world)."""
    import triton_dist.runtime as rt

    return rt.current_world().world_size


def test_the_reduce_beside_the_push_matches_the_reference() -> None:
    """The combine with its reduce waiting for the push's waves gives the reference's bits on every rank, in every
    ``OVERLAP_CASES`` entry, with both kernels launched at the case's waves."""
    records = run_ranks(_worker, 2, heap_size="16M").results
    for rank, record in enumerate(records):
        by_programs = [label for label, *_ in BY_PROGRAMS_CASES]
        labels = [label for label, *_ in (*OVERLAP_CASES, *ROTATION_CASES)] + 2 * by_programs
        labels += [label for label, *_ in AUTO_CASES]
        assert sorted(record) == sorted(f"{label}#{n}" for n, label in enumerate(labels))
        failed = {key: problems for key, problems in record.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


def test_reduce_overlaps_push_is_an_option_off_by_default() -> None:
    """Off by default; its setters check their values and return the previous setting."""
    from triton_dist.ops.moe import MoeError, switches

    assert switches.REDUCE_OVERLAPS_PUSH is False and switches.COMBINE_WAVES == 8
    with pytest.raises(MoeError, match="set_reduce_overlaps_push: on must be True or False, got 1"):
        switches.set_reduce_overlaps_push(1)  # type: ignore[arg-type]
    assert switches.set_reduce_overlaps_push(True) is False
    assert switches.set_reduce_overlaps_push(False) is True
    for bad in (0, switches.MAX_COMBINE_WAVES + 1, 2.0):
        with pytest.raises(MoeError, match=r"set_combine_waves: waves must be an int in \[1, 16\], got"):
            switches.set_combine_waves(bad)  # type: ignore[arg-type]
    assert switches.set_combine_waves(3) == 8 and switches.set_combine_waves(8) == 3
    assert switches.OWN_PARTIALS_IN_REDUCE is False
    with pytest.raises(MoeError, match="set_own_partials_in_reduce: on must be True or False, got None"):
        switches.set_own_partials_in_reduce(None)  # type: ignore[arg-type]
    assert switches.COMBINE_AUTO is True and switches.COMBINE_WAVE_MIN_SLOTS == 256
    with pytest.raises(MoeError, match="set_combine_auto: on must be True or False, got 1"):
        switches.set_combine_auto(1)  # type: ignore[arg-type]
    for setter in (switches.set_combine_wave_min_slots, switches.set_combine_auto_min_slots):
        for bad in (-1, 2.0, True):
            with pytest.raises(MoeError, match=f"{setter.__name__}: slots must be an int >= 0, got"):
                setter(bad)  # type: ignore[arg-type]
    assert switches.set_combine_wave_min_slots(0) == 256 and switches.set_combine_wave_min_slots(256) == 0
    threshold = switches.COMBINE_AUTO_MIN_SLOTS
    assert switches.set_combine_auto_min_slots(5) == threshold and switches.set_combine_auto_min_slots(threshold) == 5


def test_bench_only_combine_times_the_option_beside_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench/moe.py --only-combine``: its own default sizes (128 to 4096, the auto choice's crossover),
    ``--combine-waves`` only with it, and each row's setting of ``switches.REDUCE_OVERLAPS_PUSH`` / ``COMBINE_WAVES`` /
    ``OWN_PARTIALS_IN_REDUCE`` / ``COMBINE_WAVE_MIN_SLOTS`` / ``COMBINE_AUTO`` / ``COMBINE_WAVES_BY_PROGRAMS`` for its
    call only (restored after, also if the combine raises)."""
    import importlib.util
    import sys
    from pathlib import Path

    import triton_dist.ops
    from triton_dist.ops.moe import MoeError, switches

    spec = importlib.util.spec_from_file_location("bench_moe_combine", Path(__file__).parents[2] / "bench" / "moe.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    assert not bench.parse_args([]).only_combine
    assert bench.parse_args(["--only-combine"]).tokens == [128, 512, 1024, 2048, 4096]
    assert bench.parse_args(["--only-combine", "--tokens", "512"]).tokens == [512]
    assert bench.parse_args(["--only-combine", "--combine-waves", "16,4"]).combine_waves == [4, 16]
    for wrong in (["--combine-waves", "4"], ["--only-combine", "--only-dispatch"]):
        with pytest.raises(SystemExit):
            bench.parse_args(wrong)
    seen: list[tuple[bool, int, bool, int, bool, bool]] = []

    def now() -> tuple[bool, int, bool, int, bool, bool]:
        options = (switches.REDUCE_OVERLAPS_PUSH, switches.COMBINE_WAVES, switches.OWN_PARTIALS_IN_REDUCE)
        return (*options, switches.COMBINE_WAVE_MIN_SLOTS, switches.COMBINE_AUTO, switches.COMBINE_WAVES_BY_PROGRAMS)

    def fake(y: Any, handle: Any) -> str:
        seen.append(now())
        if handle == "bad":
            raise MoeError("refused")
        return "combined"

    monkeypatch.setattr(triton_dist.ops, "moe_combine", fake)
    before = now()
    assert bench.combine_with("y", "handle", (True, 4, True, 0, False, False)) == "combined"
    with pytest.raises(MoeError, match="refused"):
        bench.combine_with("y", "bad", (True, 16, False, 7, True, True))
    assert bench.combine_with("y", "handle", (False, 8, False, 256, not before[4], not before[5])) == "combined"
    assert seen == [
        (True, 4, True, 0, False, False),
        (True, 16, False, 7, True, True),
        (False, 8, False, 256, not before[4], not before[5]),
    ]
    assert now() == before
