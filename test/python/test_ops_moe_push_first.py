"""``switches.PUSH_RESIDENT_FIRST`` (docs/design.md, "Which kernel the GPU places first") on 2 CPU ranks under the
emulation (``TRITON_INTERPRET=1``, ``init(device="cpu")``, gloo): with the option on, the pipelined gather dispatch
whose expand runs beside the push (bf16, and fp8 rows kept with their scales) gives the reference's results bit for bit
(every output allocated poisoned, the helpers of ``test_ops_moe_emulation.py``), and the plan's ``started`` word
does what the option says: after the push's launch it holds the push's programs (each counted itself in), after the
expand's launch 0 again (``_push_started_kernel`` waited for them, then reset it for the next call); where the
expand does not run beside the push (a plan's first call), and with the option off, the push counts nothing.

``CASES``, in order, each call on its own inputs: bf16 on a fresh plan (its first call: no buffers, the push and the
expand after the summary), then beside the push, then with the buffers growing (the early push counts itself in and
does nothing, the expand beside it does nothing, and both go again after the summary; the word is reset all the
same), then beside the push with the option off; fp8 on a fresh plan likewise (first, beside).
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
    ("bf16 first", "random", True, False),
    ("bf16 beside", "random", True, True),
    ("bf16 grow", "grow_combine", True, True),
    ("bf16 beside, option off", "random", False, True),
    ("fp8 first", "variants", True, False),
    ("fp8 beside", "variants", True, True),
)
"""(name, inputs of ``test_ops_moe_emulation._case_inputs``, the option, whether the expand runs beside the push): the
bf16 cases on one plan (k = 2), the fp8 ones on another (k = 3)."""


def _call(rank: int, name: str, inputs: str, number: int) -> tuple[list[str], list[tuple[str, int]]]:
    """One dispatch (and combine) of case ``name``: what differs from the reference, and the plan's ``started`` word
    at each phase point (``op.set_phase_hook``) from ``push`` on."""
    from test_ops_moe_emulation import _case, _case_inputs, _fp8_call, _PoisonedEmpty

    from triton_dist.ops.moe import op as moe_op

    fp8 = name.startswith("fp8")
    xs, idxs, weights, experts = _case_inputs(inputs, 2, seed=40 + number, hidden=160 if fp8 else 32)
    if fp8:
        xs = [x * 40 for x in xs]  # beyond e4m3's range unscaled: the scales matter
    seen: list[tuple[str, int]] = []

    def hook(phase: str) -> None:
        if phase in ("start", "route"):
            return
        x, idx = xs[rank], idxs[rank]
        plan = moe_op._plan_for(x, idx, experts, "normal", None, fp8, True, CONFIG.programs_per_sm, True, (0, 0))
        started = plan.workspace.started
        seen.append((phase, -1 if started is None else int(started.item())))

    previous = moe_op.set_phase_hook(hook)
    try:
        with _PoisonedEmpty():
            if fp8:
                problems = _fp8_call(rank, (xs, idxs, weights, experts), "normal", False, CONFIG, True)
            else:  # _case makes its inputs from the name (shapes and dtypes as above: the hook's plan is its plan)
                problems = _case(rank, 2, inputs, 40 + number, "normal", CONFIG, "gather")
    finally:
        moe_op.set_phase_hook(previous)
    return problems, seen


def _worker(_: str) -> dict[str, Any]:
    import torch.distributed as dist

    from triton_dist.ops.moe import switches

    record: dict[str, Any] = {}
    for number, (name, inputs, on, _beside) in enumerate(CASES):
        previous = switches.set_push_resident_first(on)
        try:
            record[name] = _call(dist.get_rank(), name, inputs, number)
        finally:
            switches.set_push_resident_first(previous)
    return record


def test_push_resident_first_matches_the_reference_and_resets_its_word() -> None:
    """``CASES`` on 2 emulated ranks: the reference's results with the option on, the push's programs counted in
    after its launch (one program under the emulation) and the word back at 0 after the expand's, on every rank."""
    records = run_ranks(_worker, 2, "", heap_size="16M").results
    for rank, record in enumerate(records):
        assert list(record) == [name for name, _, _, _ in CASES]
        for name, _, on, beside in CASES:
            problems, seen = record[name]
            assert not problems, f"rank {rank}, {name}: {problems}"
            phases = [phase for phase, _ in seen]
            if beside:  # the early push with the waves (counted in, with the option), the expand beside it (reset)
                assert phases[:3] == ["push", "expand", "sync"], f"rank {rank}, {name}: the expand beside: {seen}"
                assert seen[0][1] == (1 if on else 0), f"rank {rank}, {name}: one push program under the emulation"
                seen = seen[1:]
            else:
                assert phases[0] == "sync", f"rank {rank}, {name}: the push after the summary: {seen}"
            assert all(value == 0 for _, value in seen), f"rank {rank}, {name}: {seen}"
            if name == "bf16 grow":  # the buffers grew: the push went again after the summary
                assert phases.count("push") == 2, f"rank {rank}: {phases}"


def test_sm90_the_counting_push_fits_as_before_and_the_gate_waits_then_resets(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On sm_90 (H = 7168, k = 8, 2 ranks, the overlap's waves and own rows): the 4-warp fp8 push with ``STARTED``
    (the default's division and ``FP8_RECIPROCAL``'s) takes no more registers than without it, so two of its programs
    still fit beside the expand's four, and counts itself in (a gpu-scope atomic add) before it loads its first row;
    ``_push_started_kernel`` (one warp) polls the word with acquire loads and only then stores it back to 0."""
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
            kernels._push_started_kernel, {"started_ptr": "*i32"}, "sm_90", {"PROGRAMS": 264}, aligned=("started_ptr",),
            num_warps=1,
        ),
        "sm_90",
    )  # fmt: skip
    lines = gate.splitlines()
    polls = [i for i, line in enumerate(lines) if "ld.acquire.gpu.global" in line]
    zeroes = [i for i, line in enumerate(lines) if re.search(r"st\.global\.b32\s+\[ %rd\d+ \+ 0 \]", line)]
    assert polls and zeroes and polls[0] < zeroes[0] and "nanosleep" in gate, "polls (with backoff), then resets"
