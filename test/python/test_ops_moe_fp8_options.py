"""The fp8 push's options (``switches.FP8_RECIPROCAL``, ``switches.FP8_NARROW_PUSH``, ``switches.FP8_PREQUANTIZE``;
docs/design.md, "fp8 dispatch at 4096 tokens") on 2 CPU ranks under the emulation (``TRITON_INTERPRET=1``,
``init(device="cpu")``, gloo), against the torch reference, bit for bit: the fp8 gather dispatch with
``switches.FP8_OVERLAPS_PUSH`` on (the default, set for each case all the same: fp8 rows kept with their scales, the
expand beside the push), every output allocated poisoned, with the helpers of
``test_ops_moe_emulation.py`` (its ``_fp8_call`` quantizes the reference as ``switches.FP8_RECIPROCAL`` says).

``CASES``, in order on one plan: its first call (no buffers: the push after the summary) with the reciprocal (the
default) and the 4-warp push; then the expand beside the early push with both; then with the division (the reciprocal
off); then with the rows quantized beside the route kernels and the reciprocal. Each case's inputs quantize
differently with the reciprocal than with the division on every rank (checked), so a push or a quantize kernel that
ignores ``RECIPROCAL`` fails. Run as a script under torchrun (the test
below does), this file is the worker; its own world, so the long emulation worker of ``test_ops_moe_emulation.py``
stays within its time limit.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from emulated_ranks import run_script

CASES = (("first", 24, False, True), ("reciprocal", 25, False, True), ("division", 35, False, False),
         ("prequantized", 27, True, True))  # fmt: skip
"""(name, seed of ``variants``' inputs, ``switches.FP8_PREQUANTIZE``, ``switches.FP8_RECIPROCAL``), and
``switches.FP8_NARROW_PUSH`` (on by default) where the push quantizes (the first three; off in the last, whose push
runs 4 warps whatever it says)."""


def _case(rank: int, name: str, seed: int, prequantize: bool, reciprocal: bool) -> list[str]:
    """Case ``name``: what this rank's fp8 gather dispatch (and its combine) got that the reference did not."""
    from test_ops_moe_emulation import OVERLAP_CONFIG, _case_inputs, _fp8_call, _PoisonedEmpty

    from triton_dist.ops.moe import op as moe_op
    from triton_dist.ops.moe import switches
    from triton_dist.ops.moe.reference import quantize_fp8

    xs, idxs, weights, experts = _case_inputs("variants", 2, seed=seed, hidden=160)
    xs = [x * 40 for x in xs]  # beyond e4m3's range unscaled: the scales matter
    problems = []
    for x in xs:
        if torch.equal(quantize_fp8(x, False)[0].view(torch.uint8), quantize_fp8(x, True)[0].view(torch.uint8)):
            problems.append("a rank's rows quantize alike with and without the reciprocal: they cannot tell them")
    phases: list[str] = []
    hook = moe_op.set_phase_hook(phases.append)
    previous = (
        switches.set_fp8_overlaps_push(True),
        switches.set_fp8_reciprocal(reciprocal),
        switches.set_fp8_narrow_push(not prequantize),
        switches.set_fp8_prequantize(prequantize),
    )
    try:
        with _PoisonedEmpty():
            problems += _fp8_call(rank, (xs, idxs, weights, experts), "normal", False, OVERLAP_CONFIG, True)
    finally:
        moe_op.set_phase_hook(hook)
        switches.set_fp8_overlaps_push(previous[0])
        switches.set_fp8_reciprocal(previous[1])
        switches.set_fp8_narrow_push(previous[2])
        switches.set_fp8_prequantize(previous[3])
    beside = phases[:5] == ["start", "route", "push", "expand", "sync"]
    if beside == (name == "first"):
        problems.append(f"phases {phases}: the expand {'' if name == 'first' else 'not '}beside the push")
    return problems


def _worker(out_dir: str) -> None:
    import torch.distributed as dist

    import triton_dist

    dist.init_process_group("gloo")
    world = triton_dist.init(heap_size="16M", device="cpu")
    record = {name: _case(world.rank, name, *case) for name, *case in CASES}
    Path(out_dir, f"rank{world.rank}.json").write_text(json.dumps(record))
    triton_dist.finalize()
    dist.barrier()
    dist.destroy_process_group()
    # Leave without the interpreter's teardown, where a gloo world's C++ destructors sometimes abort (as
    # test_ops_moe_emulation.py does).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def test_fp8_push_options_match_the_reference(tmp_path: Path) -> None:
    """``CASES`` on 2 emulated ranks: each rank's fp8 rows, scales, meta and combine are the reference's (quantized
    as its switches say), and the expand ran beside the push from the second call on."""
    run_script(Path(__file__), 2, [str(tmp_path)])
    for rank in range(2):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert sorted(record) == sorted(case[0] for case in CASES)
        failed = {name: problems for name, problems in record.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


if __name__ == "__main__":
    _worker(sys.argv[1])
