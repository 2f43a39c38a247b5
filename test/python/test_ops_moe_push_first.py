"""``switches.PUSH_RESIDENT_FIRST`` and ``switches.EXPAND_RESIDENT_FIRST`` (docs/design.md, "Which kernel the GPU
places first") on 2 CPU ranks under the emulation (``TRITON_INTERPRET=1``, ``init(device="cpu")``, gloo): with either
option on, the pipelined gather dispatch whose expand runs beside the push (bf16, and fp8 rows kept with their scales)
gives the reference's results bit for bit (every output allocated poisoned, the helpers of
``test_ops_moe_emulation.py``), and the plan's ``started`` word does what the option says: when its gate
(``kernels._started_kernel``) is launched it holds every program of the kernel counted in (the push's, or the expand's:
each counted itself in first thing), and at every phase point after the expand's launch it is 0 again (the gate reset
it for the next call); where the expand does not run beside the push (a plan's first call), and with both options
off, nothing counts and no gate is launched. (Under the emulation the expand's gate runs after the expand, a kernel
running to its end there; on GPUs the order is expand, gate, push, which the probe
docs/results/probes/2026-11-27-moe_fp8_overlap_modes.py runs.)

``CASES``, in order, each call on its own inputs: bf16 on a fresh plan (its first call: no buffers, the push and the
expand after the summary), then beside the push, then with the buffers growing (the early push and the expand beside
it count themselves in and do nothing, and both go again after the summary; the word is reset all the same), then
beside the push with both options off, then with the expand first, beside and with the token buffers growing; fp8 on a
fresh plan likewise (first, beside, and beside with the expand first).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from emulated_ranks import run_ranks

from triton_dist.ops.moe import MoeConfig

CONFIG = MoeConfig(pipelined=True, programs_per_sm=6)
"""A signature no other test file's plan has (under the emulation every plan runs one program per kernel)."""
CASES = (
    ("bf16 first", "random", "push", False),
    ("bf16 beside", "random", "push", True),
    ("bf16 grow", "grow_combine", "push", True),
    ("bf16 beside, options off", "random", None, True),
    ("bf16 beside, expand first", "random", "expand", True),
    ("bf16 grow, expand first", "grow_tokens", "expand", True),
    ("fp8 first", "variants", "push", False),
    ("fp8 beside", "variants", "push", True),
    ("fp8 beside, expand first", "variants", "expand", True),
)
"""(name, inputs of ``test_ops_moe_emulation._case_inputs``, the option on (``"push"``: ``PUSH_RESIDENT_FIRST``,
``"expand"``: ``EXPAND_RESIDENT_FIRST``, None: neither), whether the expand runs beside the push): the bf16 cases on one
plan (k = 2), the fp8 ones on another (k = 3)."""
GATES = {"push": "push_started", "expand": "expand_started"}
"""The op's ``_launch`` name of each option's gate."""


def _call(
    rank: int, name: str, inputs: str, number: int
) -> tuple[list[str], list[tuple[str, int]], list[tuple[str, int, int]]]:
    """One dispatch (and combine) of case ``name``: what differs from the reference, the plan's ``started`` word at
    each phase point (``op.set_phase_hook``) from ``push`` on, and per gate launched (``op._launch`` wrapped) its name,
    the word just before it and the programs it waits for (the push's or the expand's grid)."""
    from test_ops_moe_emulation import _case, _case_inputs, _fp8_call, _PoisonedEmpty

    from triton_dist.ops.moe import op as moe_op

    fp8 = name.startswith("fp8")
    xs, idxs, weights, experts = _case_inputs(inputs, 2, seed=40 + number, hidden=160 if fp8 else 32)
    if fp8:
        xs = [x * 40 for x in xs]  # beyond e4m3's range unscaled: the scales matter
    seen: list[tuple[str, int]] = []
    gates: list[tuple[str, int, int]] = []

    def word() -> int:
        x, idx = xs[rank], idxs[rank]
        plan = moe_op._plan_for(x, idx, experts, "normal", None, fp8, True, CONFIG.programs_per_sm, True, (0, 0))
        started = plan.workspace.started
        return -1 if started is None else int(started.item())

    def hook(phase: str) -> None:
        if phase not in ("start", "route"):
            seen.append((phase, word()))

    launch = moe_op._launch

    def counting_launch(plan: Any, kernel: str, *args: Any, **kwargs: Any) -> None:
        if kernel in GATES.values() and not kwargs.get("compile_only"):
            grid = plan.programs if kernel == "push_started" else sum(plan.overlap_split())
            gates.append((kernel, word(), grid))
        launch(plan, kernel, *args, **kwargs)

    previous = moe_op.set_phase_hook(hook)
    moe_op._launch = counting_launch  # type: ignore[assignment]
    try:
        with _PoisonedEmpty():
            if fp8:
                problems = _fp8_call(rank, (xs, idxs, weights, experts), "normal", False, CONFIG, True)
            else:  # _case makes its inputs from the name (shapes and dtypes as above: the hook's plan is its plan)
                problems = _case(rank, 2, inputs, 40 + number, "normal", CONFIG, "gather")
    finally:
        moe_op._launch = launch  # type: ignore[assignment]
        moe_op.set_phase_hook(previous)
    return problems, seen, gates


def _worker(_: str) -> dict[str, Any]:
    import torch.distributed as dist

    from triton_dist.ops.moe import switches

    record: dict[str, Any] = {}
    for number, (name, inputs, first, _beside) in enumerate(CASES):
        expanded = switches.set_expand_resident_first(first == "expand")  # first: the default is on
        pushed = switches.set_push_resident_first(first == "push")
        try:
            record[name] = _call(dist.get_rank(), name, inputs, number)
        finally:
            switches.set_push_resident_first(pushed)
            switches.set_expand_resident_first(expanded)
    return record


def test_resident_first_matches_the_reference_and_resets_its_word() -> None:
    """``CASES`` on 2 emulated ranks: the reference's results with either option on; the option's gate launched once
    per call whose expand runs beside the push (where the buffers grew too: the push and expand after the summary
    count nothing), finding every program of its kernel counted in (the push's one program under the emulation; the
    expand's grid), and the word 0 at every phase point after the expand's launch, on every rank."""
    records = run_ranks(_worker, 2, "", heap_size="16M").results
    for rank, record in enumerate(records):
        assert list(record) == [name for name, _, _, _ in CASES]
        for name, _, first, beside in CASES:
            problems, seen, gates = record[name]
            assert not problems, f"rank {rank}, {name}: {problems}"
            phases = [phase for phase, _ in seen]
            if beside:  # the early push with the waves (counted in, with PUSH_RESIDENT_FIRST), the expand beside it
                assert phases[:3] == ["push", "expand", "sync"], f"rank {rank}, {name}: the expand beside: {seen}"
                assert seen[0][1] == (1 if first == "push" else 0), f"rank {rank}, {name}: one push program counted"
                seen = seen[1:]
            else:
                assert phases[0] == "sync", f"rank {rank}, {name}: the push after the summary: {seen}"
            assert all(value == 0 for _, value in seen), f"rank {rank}, {name}: {seen}"
            gated = first == "push" or (first == "expand" and name.startswith("fp8"))  # expand first: fp8 only
            if beside and gated:
                assert len(gates) == 1 and gates[0][0] == GATES[first], f"rank {rank}, {name}: {gates}"
                _, counted, programs = gates[0]
                assert counted == programs >= 1, f"rank {rank}, {name}: every program counted in: {gates}"
            else:
                assert gates == [], f"rank {rank}, {name}: no gate: {gates}"
            if "grow" in name:  # the buffers grew: the push went again after the summary
                assert phases.count("push") == 2, f"rank {rank}: {phases}"


def test_the_two_options_exclude_each_other() -> None:
    """Either setter refuses True while the other option is on (and a non-bool); a dispatch with both on (assigned,
    past the setters) raises before it launches anything."""
    from triton_dist.ops.moe import op as moe_op
    from triton_dist.ops.moe import switches
    from triton_dist.ops.moe.config import MoeError

    assert switches.PUSH_RESIDENT_FIRST is False and switches.EXPAND_RESIDENT_FIRST is True  # the defaults
    try:
        with pytest.raises(MoeError, match="EXPAND_RESIDENT_FIRST is on"):
            switches.set_push_resident_first(True)
        assert switches.set_push_resident_first(False) is False
        assert moe_op._resident_first(True) == "expand" and moe_op._resident_first(False) is None  # fp8 only
        with pytest.raises(MoeError, match="must be True or False"):
            switches.set_expand_resident_first(1)  # type: ignore[arg-type]
        assert switches.set_expand_resident_first(False) is True
        assert moe_op._resident_first(True) is None
        assert switches.set_push_resident_first(True) is False
        with pytest.raises(MoeError, match="PUSH_RESIDENT_FIRST is on"):
            switches.set_expand_resident_first(True)
        assert moe_op._resident_first(True) == "push" and moe_op._resident_first(False) == "push"
        switches.EXPAND_RESIDENT_FIRST = True
        with pytest.raises(MoeError, match="both on"):
            moe_op._resident_first(True)
    finally:
        switches.EXPAND_RESIDENT_FIRST = True
        switches.PUSH_RESIDENT_FIRST = False
    assert moe_op._resident_first(True) == "expand"


def test_sm90_the_counting_push_fits_as_before_and_the_gate_waits_then_resets(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On sm_90 (H = 7168, k = 8, 2 ranks, the overlap's waves and own rows): the 4-warp fp8 push with ``STARTED``
    (the default's division and ``FP8_RECIPROCAL``'s) takes no more registers than without it, so two of its programs
    still fit beside the expand's four, and counts itself in (a gpu-scope atomic add) before it loads its first row;
    ``_started_kernel`` (one warp) polls the word with acquire loads and only then stores it back to 0."""
    import test_ops_moe_kernels as moe_kernels
    from dl_compile import assembly, compile_kernel, need_real_library

    from triton_dist.ops.moe import kernels, switches

    need_real_library("sm_90")
    monkeypatch.setitem(moe_kernels.SIGNATURES, "push", {**moe_kernels.SIGNATURES["push"], "started_ptr": "*i32"})
    block = MoeConfig(whole_row=True).row_block(7168)
    for extra in ({}, {"RECIPROCAL": True}):
        plain, counting = (
            moe_kernels._compile(
                "push", "sm_90", False, world_size=2, row_block=block, scales=56, waves=switches.EXPAND_WAVES,
                self_mode=3, extra={**extra, **started},
            )
            for started in ({}, {"STARTED": True})
        )  # fmt: skip
        assert moe_kernels._registers(counting, tmp_path) <= -(-moe_kernels._registers(plain, tmp_path) // 8) * 8
        lines = counting.splitlines()
        adds = [i for i, line in enumerate(lines) if re.search(r"atom\.release\.gpu\.global\.add", line)]
        rows = [i for i, line in enumerate(lines) if re.search(r"ld\.global(\.nc)?\.v4\.", line)]
        assert adds and rows and adds[0] < rows[0], f"{extra}: counted in before the first row's load"
        assert not any(re.search(r"atom\.release\.gpu\.global\.add", line) for line in plain.splitlines())
    gate = assembly(
        compile_kernel(
            kernels._started_kernel, {"started_ptr": "*i32"}, "sm_90", {"PROGRAMS": 264}, aligned=("started_ptr",),
            num_warps=1,
        ),
        "sm_90",
    )  # fmt: skip
    lines = gate.splitlines()
    polls = [i for i, line in enumerate(lines) if "ld.acquire.gpu.global" in line]
    zeroes = [i for i, line in enumerate(lines) if re.search(r"st\.global\.b32\s+\[ %rd\d+ \+ 0 \]", line)]
    assert polls and zeroes and polls[0] < zeroes[0] and "nanosleep" in gate, "polls (with backoff), then resets"


def test_sm90_the_counting_expand_fits_as_before_and_counts_in_before_its_first_load(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``switches.EXPAND_RESIDENT_FIRST`` on sm_90 (H = 7168, k = 8, 2 ranks; the expand beside the push as the op
    launches it: the gather layout's block copy by ``OVERLAP_COPIERS_PER_SM`` x 132 copy programs, the waves), bf16 and
    fp8 rows kept: the expand with ``STARTED`` takes the registers it takes without within 8, at most 64, so its
    ``EXPAND_OVERLAP_PER_SM + OVERLAP_COPIERS_PER_SM`` programs per SM all fit resident at once with two push programs
    of up to 128 registers beside them (the switch's progress argument), and counts itself in (one thread's relaxed
    gpu-scope atomic add: 1 a program) before its first load of anything."""
    import test_ops_moe_kernels as moe_kernels
    from dl_compile import need_real_library

    from triton_dist.ops.moe import switches

    need_real_library("sm_90")
    monkeypatch.setitem(moe_kernels.SIGNATURES, "expand", {**moe_kernels.SIGNATURES["expand"], "started_ptr": "*i32"})
    block = MoeConfig(whole_row=True).row_block(7168)
    per_sm = switches.EXPAND_OVERLAP_PER_SM + switches.OVERLAP_COPIERS_PER_SM

    def allocated(registers: int) -> int:  # per program of 4 warps: a warp's registers come in units of 256
        return 4 * -(-registers * 32 // 256) * 256

    for scales in (0, 56):
        plain, counting = (
            moe_kernels._compile(
                "expand", "sm_90", False, world_size=2, row_block=block, gather=True, bulk=True, scales=scales,
                copiers=switches.OVERLAP_COPIERS_PER_SM * 132, self_mode=1, waves=switches.EXPAND_WAVES, extra=started,
            )
            for started in ({}, {"STARTED": True})
        )  # fmt: skip
        before = moe_kernels._expand_beside_push_registers(plain, tmp_path)
        after = moe_kernels._expand_beside_push_registers(counting, tmp_path)
        assert abs(after - before) <= 8 and after <= 64, (scales, before, after)
        assert per_sm * allocated(after) + 2 * allocated(128) <= 65536, (scales, after)
        lines = counting.splitlines()
        adds = [i for i, line in enumerate(lines) if re.search(r"atom\.global\.gpu\.relaxed\.add", line)]
        loads = [i for i, line in enumerate(lines) if re.search(r"\bld\.(global|volatile|acquire|relaxed)", line)]
        assert len(adds) == 1 and loads and adds[0] < loads[0], f"fp8 {bool(scales)}: counted in before any load"
        assert re.search(r"@%p\d+ atom", lines[adds[0]]), "one thread adds (the program counts 1)"
        assert not any(re.search(r"atom\.global\.gpu\.relaxed\.add", line) for line in plain.splitlines())
