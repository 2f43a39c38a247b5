"""Probe (session 31): the fp8 push's share of an SM beside the expand (issue 27; docs/design.md, "The fp8 push's share
of an SM").

At 4096 tokens per rank, H 7168, top-8 of 256, 2 ranks, the fp8 gather dispatch's push (4 warps, 121 registers:
16,384 a program) runs 2 programs per SM beside the expand's 2 meta + 2 copy programs (56 registers: 7,168 each) and
moves its ~30 MB in ~130 µs (230 GB/s) on 2 x H200, where the 16-warp push alone takes 100.5 µs (session 30). The
design section's model says the push is bound by its programs' per-token chain, not by the links (Little's law: 2
programs x 7.5 KB per ~8.4 µs per token is the 1.78 KB/µs per SM measured), so more push programs per SM (or more
warps per program) should raise the rate, as long as the expand keeps pace with fewer programs. This probe times, in
one process, the fp8 default and five splits of an SM's 65,536 registers between the push and the expand (all with
``EXPAND_RESIDENT_FIRST``, the default: the expand's programs resident first, the push filling what they leave), and
bf16 gather as the reference:

===============================  ========================================================  ================
label                            push per SM (programs x warps, registers) | expand per SM  registers per SM
===============================  ========================================================  ================
fp8 default                      2 x 4 warps (2 x 16,384) | 2 meta + 2 copy (4 x 7,168)      61,440
fp8 push 3x4w | expand 1+1       3 x 4 warps (3 x 16,384) | 1 + 1 (2 x 7,168)                63,488
fp8 push 2x4w | expand 1+1       2 x 4 warps | 1 + 1                                         47,104
fp8 push 2x8w | expand 2+1       2 x 8 warps (78 registers: 2 x 20,480) | 2 + 1              62,464
fp8 push 3x4w | expand 1+1 w4    as the second, at 4 waves (5 flag rounds, not 9)          63,488
fp8 push 3x4w | expand 1+1 w16   as the second, at 16 waves (the last wave half as large)  63,488
bf16 gather                      2 x 4 warps (96 registers: 12,288) | 2 + 2                  53,248
===============================  ========================================================  ================

Push programs per SM: ``MoeConfig(programs_per_sm=...)`` (a plan of its own); the expand's: ``switches.
set_expand_overlap_per_sm`` / ``set_overlap_copiers_per_sm``; the push's warps: ``switches.set_fp8_narrow_push_warps``;
waves: ``switches.set_expand_waves`` (all restored after each block). Each configuration is timed in ``ROUNDS``
rounds, each round both ways ``bench/moe.py --only-dispatch`` times it (``device``: no host synchronization between
calls; ``phases``: an event at each phase point and a synchronization per call, with the medians of ``route``,
``push`` (the gate included), ``tail`` (the expand after the push) and ``host``), with the timing helpers of
``2026-11-27-moe_fp8_overlap_modes.py`` (imported). Before the timing, each configuration's outputs are checked
against the fp8 default's (or bf16's) for the same inputs, bit for bit where they must be (``must_match``).

Run from the repository root (2 GPUs; about 60-90 s, most of it compiling):

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \\
        python3 -m torch.distributed.run --standalone --nproc-per-node=2 \\
        docs/results/probes/2026-11-27-moe_fp8_push_share.py

Without GPUs, ``--cpu`` (with ``TRITON_INTERPRET=1``) runs every configuration's dispatch once at a tiny size on
emulated ranks and checks its bits against the default's, no timing (the per-SM counts and warps do not apply there:
it checks that each configuration's settings and plan are accepted and restored).

Expected (the model in docs/design.md): ``push 3x4w | expand 1+1`` fastest, its ``push`` phase ~90-105 µs against the
default's ~130 (the links' rate, ~300-340 GB/s), with a ``tail`` of 15-30 µs (one meta program per SM has the last
wave's meta rows to write, half as many programs as the default's): device ~145-160 µs, 1.4-1.55x bf16; ``push 2x4w |
expand 1+1`` within a few µs of the default's push (the expand's programs are not what slows the push) and a longer
tail; the 8-warp push between the two (~110-120 µs of push); ``w4`` a shorter push and a longer tail than 8 waves,
``w16`` the reverse: which way the sum goes says what a flag round costs against the last wave's meta. The default
changes if a split beats the default's device median in every round by more than the rounds' spread, with the same
bits.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

import triton_dist
from triton_dist import runtime as rt
from triton_dist.ops.moe import MoeConfig
from triton_dist.ops.moe import op as moe_op
from triton_dist.ops.moe.config import pow2
from triton_dist.runtime.world.host_lead import lead_host
from triton_dist.testing import max_over_ranks, setup_distributed


def _modes_probe() -> Any:
    """``2026-11-27-moe_fp8_overlap_modes.py`` (beside this file) as a module: its timing and bit-check helpers."""
    path = Path(__file__).with_name("2026-11-27-moe_fp8_overlap_modes.py")
    spec = importlib.util.spec_from_file_location("moe_fp8_overlap_modes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


modes = _modes_probe()
log0, with_options, tensors, percentile = modes.log0, modes.with_options, modes.tensors, modes.percentile

TOKENS, HIDDEN, EXPERTS, TOPK = 4096, 7168, 256, 8
ROUNDS = 3
CALLS = 30
WARMUP = 3
SLOW_US = 15.0
ONE_AND_ONE = {"EXPAND_OVERLAP_PER_SM": 1, "OVERLAP_COPIERS_PER_SM": 1}
CONFIGS: dict[str, tuple[bool, dict[str, int], int | None]] = {
    "fp8 default": (True, {}, None),
    "fp8 push 3x4w | expand 1+1": (True, ONE_AND_ONE, 3),
    "fp8 push 2x4w | expand 1+1": (True, ONE_AND_ONE, None),
    "fp8 push 2x8w | expand 2+1": (True, {**ONE_AND_ONE, "EXPAND_OVERLAP_PER_SM": 2, "FP8_NARROW_PUSH_WARPS": 8}, None),
    "fp8 push 3x4w | expand 1+1 w4": (True, {**ONE_AND_ONE, "EXPAND_WAVES": 4}, 3),
    "fp8 push 3x4w | expand 1+1 w16": (True, {**ONE_AND_ONE, "EXPAND_WAVES": 16}, 3),
    "bf16 gather": (False, {}, None),
}
"""label -> (fp8, the ``switches`` values set for its calls (``set_<name lowercased>``, in this order; restored after),
``MoeConfig.programs_per_sm`` (None: the default, 2))."""
REFERENCE = "bf16 gather"


def must_match(name: str, value: torch.Tensor, experts: int) -> torch.Tensor:
    """``modes.must_match`` (the words of output ``name`` two dispatches of the same inputs must have alike) for
    ``experts`` experts: the counts row's live words sit by ``pow2(experts)``."""
    if name != "state[4]":
        return modes.must_match(name, value)
    world, wp, ep = dist.get_world_size(), pow2(dist.get_world_size()), pow2(experts)
    return torch.cat([value[:world], value[wp : wp + experts], value[wp + ep : wp + ep + 1]])


def dispatch(inputs: tuple[torch.Tensor, ...], fp8: bool, per_sm: int | None, experts: int = EXPERTS) -> Any:
    config = MoeConfig(programs_per_sm=per_sm) if per_sm is not None else None
    x, idx, w = inputs
    return triton_dist.ops.moe_dispatch(x, idx, w, experts, fp8=fp8, layout="gather", config=config)


def same_bits(label: str, inputs: tuple[torch.Tensor, ...], experts: int = EXPERTS) -> None:
    """Configuration ``label``'s outputs against its dtype's default's (each from its plan's second call on, so the
    expand runs beside the push), bit for bit where they must be (``must_match``)."""
    fp8, options, per_sm = CONFIGS[label]
    plain = "fp8 default" if fp8 else REFERENCE
    _, plain_options, plain_per_sm = CONFIGS[plain]
    for _ in range(2):
        want = tensors(with_options(plain_options, lambda: dispatch(inputs, fp8, plain_per_sm, experts)))
        want = {k: v.clone() for k, v in want.items()}
        got = tensors(with_options(options, lambda: dispatch(inputs, fp8, per_sm, experts)))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    wrong = [k for k in want if not torch.equal(must_match(k, want[k], experts), must_match(k, got[k], experts))]
    verdict = "ok" if max_over_ranks(float(len(wrong))) == 0.0 else f"DIFFER (rank {dist.get_rank()}: {wrong})"
    log0(f"same bits {label}: {verdict}")


def block(label: str, inputs: tuple[torch.Tensor, ...], phases: bool) -> dict[str, Any]:
    """``CALLS`` timed calls of configuration ``label`` one way (``phases`` or not): per call its total and (phases)
    its intervals (µs), as ``modes.block`` times them."""
    fp8, options, per_sm = CONFIGS[label]
    marks: list[tuple[str, torch.cuda.Event]] = []

    def hook(phase: str) -> None:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        marks.append((phase, event))

    calls: list[tuple[torch.cuda.Event, torch.cuda.Event, list[tuple[str, torch.cuda.Event]]]] = []

    def run() -> None:
        for number in range(WARMUP + CALLS):
            lead_host()
            rt.barrier_on_device()
            marks.clear()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dispatch(inputs, fp8, per_sm)
            end.record()
            if phases:
                torch.cuda.synchronize()
            if number >= WARMUP:
                calls.append((start, end, list(marks)))
        torch.cuda.synchronize()

    previous = moe_op.set_phase_hook(hook if phases else None)
    try:
        with_options(options, run)
    finally:
        moe_op.set_phase_hook(previous)
    totals, parts = [], []
    for start, end, points in calls:
        totals.append(start.elapsed_time(end) * 1e3)
        if points:
            at = dict(points)
            parts.append({
                "route": at["start"].elapsed_time(at["route"]) * 1e3,
                "push": at["route"].elapsed_time(at["push"]) * 1e3,
                "tail": at["push"].elapsed_time(at["expand"]) * 1e3 if "expand" in at else -1.0,
                "host": at["sync"].elapsed_time(end) * 1e3,
            })  # fmt: skip
    return {"totals": totals, "parts": parts}


def check_on_cpu() -> None:
    """Every configuration's dispatch at a tiny size on emulated ranks (``TRITON_INTERPRET=1``), bits against the
    default's: the settings and plans are accepted and restored (the per-SM counts and warps apply on GPUs only)."""
    world = setup_distributed(heap_size="256M", device="cpu")
    gen = torch.Generator().manual_seed(7 + world.rank)
    tokens, hidden, experts, topk = 8, 256, 8, 2
    x = (40 * torch.randn(tokens, hidden, generator=gen)).to(torch.bfloat16)
    idx = torch.rand(tokens, experts, generator=gen).topk(topk, dim=1).indices.to(torch.int32)
    w = torch.rand(tokens, topk, generator=gen)
    from triton_dist.ops.moe import switches

    before = {name: getattr(switches, name) for options in (o for _, o, _ in CONFIGS.values()) for name in options}
    for label in CONFIGS:
        if label not in ("fp8 default", REFERENCE):
            same_bits(label, (x, idx, w), experts)
    after = {name: getattr(switches, name) for name in before}
    log0(f"switches restored: {'ok' if after == before else f'NO: {before} -> {after}'}")
    triton_dist.finalize()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="emulated ranks, a tiny size, bits only (no timing)")
    if parser.parse_args().cpu:
        check_on_cpu()
        return
    world = setup_distributed(heap_size="12G")
    rank = world.rank
    gen = torch.Generator(device="cuda").manual_seed(1000 * TOKENS + rank)
    x = torch.randn(TOKENS, HIDDEN, generator=gen, device="cuda").to(torch.bfloat16)
    idx = torch.rand(TOKENS, EXPERTS, generator=gen, device="cuda").topk(TOPK, dim=1).indices.to(torch.int32)
    w = torch.rand(TOKENS, TOPK, generator=gen, device="cuda")
    inputs = (x, idx, w)
    log0(f"probe: {world.world_size} x {torch.cuda.get_device_name()}, T {TOKENS}, H {HIDDEN}, top-{TOPK} of {EXPERTS}")
    for label in CONFIGS:
        if label not in ("fp8 default", REFERENCE):
            same_bits(label, inputs)
    medians: dict[tuple[str, str], list[float]] = {}
    phase_medians: dict[str, list[dict[str, float]]] = {}
    for round_ in range(ROUNDS):
        for label in CONFIGS:
            for phases in (round_ % 2 == 1, round_ % 2 == 0):  # which way first alternates between rounds
                way = "phases" if phases else "device"
                got = block(label, inputs, phases)
                totals = got["totals"]
                median = statistics.median(totals)
                slow = sum(1 for t in totals if t > min(totals) + SLOW_US)
                mine = f"{median:6.1f} [{percentile(totals, 0.1):6.1f}, {percentile(totals, 0.9):6.1f}] slow {slow:2d}"
                if got["parts"]:
                    keys = ("route", "push", "tail", "host")
                    here = {k: statistics.median(p[k] for p in got["parts"]) for k in keys}
                    phase_medians.setdefault(label, []).append({k: max_over_ranks(v) for k, v in here.items()})
                    mine += " | " + " ".join(f"{k} {here[k]:5.1f}" for k in keys)
                everyone: list[Any] = [None] * world.world_size
                dist.all_gather_object(everyone, mine)
                worst = max_over_ranks(median)
                medians.setdefault((label, way), []).append(worst)
                log0(f"R{round_} {label:32} {way:6} {worst:6.1f} µs | " + " || ".join(
                    f"r{r}: {text}" for r, text in enumerate(everyone)
                ))  # fmt: skip
    log0("summary (max over ranks of each block's median, µs, per round; median of the rounds; x: bf16 gather's")
    log0("median over the row's, the bar 1.6x; phases: median over the rounds of route / push / tail, max over ranks)")
    reference = statistics.median(medians[(REFERENCE, "device")])
    for label in CONFIGS:
        values = medians[(label, "device")]
        mid = statistics.median(values)
        spread = (max(values) - min(values)) / min(values)
        phases_ = phase_medians.get(label, [])
        parts = " / ".join(f"{statistics.median(p[k] for p in phases_):5.1f}" for k in ("route", "push", "tail"))
        log0(
            f"  {label:32} device " + " ".join(f"{v:6.1f}" for v in values) + f"  median {mid:6.1f}"
            f"  spread {100 * spread:4.1f}%  x{reference / mid:4.2f} bf16  | phases "
            + " ".join(f"{v:6.1f}" for v in medians[(label, "phases")]) + f"  route/push/tail {parts}"
        )  # fmt: skip
    triton_dist.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
