"""Probe (session 29): the two modes of the fp8 dispatch with the expand beside the push, ``PUSH_RESIDENT_FIRST`` and
``EXPAND_RESIDENT_FIRST``.

The fp8 default (``switches.FP8_OVERLAPS_PUSH`` + ``FP8_NARROW_PUSH``) at 4096 tokens, H 7168, top-8 of 256, 2 ranks
timed ~197 µs device and ~226 in its phase run on 2 x H200 in session 28, ~241 and ~199 in session 29 (the same code);
``FP8_PREQUANTIZE`` + ``FP8_RECIPROCAL`` 199 / 166 then 167 / 167; bf16 gather 222 / 227 both times
(docs/design.md, "Which kernel the GPU places first"). This probe times each configuration in one process, in
``ROUNDS`` rounds, each round both ways ``bench/moe.py --only-dispatch`` times it:

- ``device``: as ``Bench``'s ``device_us`` (``testing.timing.bench_samples``): per call a GPU spin (``lead_host``) and
  the device barrier, a start event, the dispatch, an end event; no host synchronization between calls;
- ``phases``: as ``Bench.phases``: the same, with ``op.set_phase_hook`` recording an event at each point, and a
  ``torch.cuda.synchronize()`` after each call; per call also ``span`` (the first to the last point: the bench's
  phase ``total``) and the intervals ``route`` (start to the route kernels' end), ``push``, ``tail`` (how long the
  expand ran after the push ended) and ``host`` (from the ``sync`` event to an event recorded after the dispatch
  returned: > a few µs means the host's work after the summary was on the device's path), each as median/max.

Each line: per rank the median and the 10th / 90th percentiles of the calls' totals (start to end event) and how many
calls were more than ``SLOW_US`` over the block's fastest (a bimodal block has some, a stable one ~none), and the max
over ranks of the medians (what the bench prints). Before the timing, each configuration's dispatch with an option
on is checked against the same inputs' dispatch with both off (``same_bits``: every output that must be equal, bit for
bit).

Run from the repository root (about 60-90 s on 2 GPUs, most of it compiling):

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \\
        python3 -m torch.distributed.run --standalone --nproc-per-node=2 \\
        docs/results/probes/2026-11-27-moe_fp8_overlap_modes.py

Measured at 38890c4 (2 x H200, before ``EXPAND_RESIDENT_FIRST``; docs/results/2026-11-27-session29/
probe_fp8_modes_2xH200_38890c4.log): the fp8 default took either mode per call within a round (~187-200 µs: push ~153,
tail ~6; ~240-255: push ~141, tail ~71); ``+first`` the slow mode in every call (243-245 µs device, push 141-143, tail
68-72, no slow call); bf16 gather ~222 either way; prequantized + reciprocal rank-dependent (r0 ~160, r1 ~181).

Expected with ``+expand-first`` (the expand's programs all resident before the push is placed, the order of the fast
calls): the fp8 default's blocks at the fast mode in every call and round, both ways (device ~190-205 µs, the gate's
kernel boundary on the push's path adding a few µs; push ~150-160, tail ~5-15, no slow calls; spread < 5%); bf16
gather within a few µs of its ~222; prequantized + reciprocal no slower than without. If the fp8 default
``+expand-first`` is slow in every call (tail ~70), the modes are not the placement order the design section argues.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

import triton_dist
from triton_dist import runtime as rt
from triton_dist.ops.moe import op as moe_op
from triton_dist.ops.moe import switches
from triton_dist.ops.moe.config import pow2
from triton_dist.runtime.world.host_lead import lead_host
from triton_dist.testing import max_over_ranks, setup_distributed

TOKENS, HIDDEN, EXPERTS, TOPK = 4096, 7168, 256, 8
ROUNDS = 5
CALLS = 30
WARMUP = 3
SLOW_US = 15.0
PREQUANT_RECIP = {"FP8_PREQUANTIZE": True, "FP8_RECIPROCAL": True}
NO_GATE = {"EXPAND_RESIDENT_FIRST": False}
CONFIGS: dict[str, tuple[bool, dict[str, bool]]] = {
    "fp8 default": (True, NO_GATE),
    "fp8 default +first": (True, {**NO_GATE, "PUSH_RESIDENT_FIRST": True}),
    "fp8 default +expand-first": (True, {"EXPAND_RESIDENT_FIRST": True}),
    "fp8 prequant recip": (True, {**NO_GATE, **PREQUANT_RECIP}),
    "fp8 prequant recip +expand-first": (True, {**PREQUANT_RECIP, "EXPAND_RESIDENT_FIRST": True}),
    "bf16 gather": (False, NO_GATE),
    "bf16 gather +expand-first": (False, {"EXPAND_RESIDENT_FIRST": True}),
}
"""label -> (fp8, the ``switches`` options set for its calls (``set_<name lowercased>``, in this order), restored
after). The labels are those of the runs of 38890c4 and 31ba2dc, when the options were all off by default: "default"
is the overlap without either option (``EXPAND_RESIDENT_FIRST``, fp8's default since, set off). (The prequantized and
bf16 ``+first`` blocks of 38890c4's run are left out: both were as without it. Since ``EXPAND_RESIDENT_FIRST`` applies
to fp8 only, "bf16 gather +expand-first" is now bf16 gather.)"""
PLACEMENT = ("PUSH_RESIDENT_FIRST", "EXPAND_RESIDENT_FIRST")
"""The options ``same_bits`` checks against the dispatch without them."""


def log0(text: str) -> None:
    if dist.get_rank() == 0:
        print(text, flush=True)


def with_options(options: dict[str, bool], call: Callable[[], Any]) -> Any:
    setters = [getattr(switches, f"set_{name.lower()}") for name in options]
    previous = [setter(value) for setter, value in zip(setters, options.values(), strict=True)]
    try:
        return call()
    finally:
        for setter, value in zip(setters, previous, strict=True):
            setter(value)


def dispatch(x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, fp8: bool) -> Any:
    return triton_dist.ops.moe_dispatch(x, idx, w, EXPERTS, fp8=fp8, layout="gather")


def tensors(result: Any) -> dict[str, torch.Tensor]:
    recv_x, handle = result
    found = {"recv_x": recv_x.view(torch.uint8) if recv_x.dtype.itemsize == 1 else recv_x}
    for name, value in vars(handle).items():
        if isinstance(value, torch.Tensor):
            found[name] = value
        elif isinstance(value, tuple):
            found |= {f"{name}[{i}]": v for i, v in enumerate(value) if isinstance(v, torch.Tensor)}
    return found


def must_match(name: str, value: torch.Tensor) -> torch.Tensor:
    """The part of output ``name`` that two dispatches of the same inputs must have bit for bit. Not the call's epoch
    (``state[5]``, and ``status`` word 2: the route kernel's summary word 6, ``status`` being its words 4-7); not
    ``state[4]``'s words past the counts row's live ones (``row``, ``ROW`` = ``config.row_stride`` = 272 words here:
    the route kernel writes ``N`` per rank at ``[0, W)``, ``C`` per expert at ``[pow2(W), pow2(W) + E)`` and the bad
    ids at ``pow2(W) + pow2(E)``, and nothing reads the rest: ``torch.empty``'s leftovers, whatever the allocator's
    block held before). These are the words 38890c4's run saw differ ("status", bf16's "state[4]"): no bug."""
    if name == "state[5]":
        return value[:0]
    if name == "status":
        return torch.cat([value[:2], value[3:]])
    if name == "state[4]":
        world, wp, ep = dist.get_world_size(), pow2(dist.get_world_size()), pow2(EXPERTS)
        return torch.cat([value[:world], value[wp : wp + EXPERTS], value[wp + ep : wp + ep + 1]])
    return value


def same_bits(label: str, fp8: bool, options: dict[str, bool], inputs: tuple[torch.Tensor, ...]) -> None:
    """The dispatch with ``options`` against the one without ``PLACEMENT``'s options (both from the second call of
    their plan on, so the expand runs beside the push), every output bit for bit where it must be (``must_match``)."""
    plain = {"EXPAND_RESIDENT_FIRST": False, **{k: v for k, v in options.items() if k not in PLACEMENT}}
    for _ in range(2):
        want = {k: v.clone() for k, v in tensors(with_options(plain, lambda: dispatch(*inputs, fp8))).items()}
        got = tensors(with_options(options, lambda: dispatch(*inputs, fp8)))
    torch.cuda.synchronize()
    wrong = [k for k in want if not torch.equal(must_match(k, want[k]), must_match(k, got[k]))]
    verdict = "ok" if max_over_ranks(float(len(wrong))) == 0.0 else f"DIFFER (rank {dist.get_rank()}: {wrong})"
    log0(f"same bits {label}: {verdict}")


def block(fp8: bool, options: dict[str, bool], inputs: tuple[torch.Tensor, ...], phases: bool) -> dict[str, Any]:
    """``CALLS`` timed calls one way (``phases`` or not); per call its total and (phases) its intervals (µs)."""
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
            dispatch(*inputs, fp8)
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
                "span": at["start"].elapsed_time(at["sync"]) * 1e3,
            })  # fmt: skip
    return {"totals": totals, "parts": parts}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    world = setup_distributed(heap_size="12G")
    rank = world.rank
    gen = torch.Generator(device="cuda").manual_seed(1000 * TOKENS + rank)
    x = torch.randn(TOKENS, HIDDEN, generator=gen, device="cuda").to(torch.bfloat16)
    idx = torch.rand(TOKENS, EXPERTS, generator=gen, device="cuda").topk(TOPK, dim=1).indices.to(torch.int32)
    w = torch.rand(TOKENS, TOPK, generator=gen, device="cuda")
    inputs = (x, idx, w)
    log0(f"probe: {world.world_size} x {torch.cuda.get_device_name()}, T {TOKENS}, H {HIDDEN}, top-{TOPK} of {EXPERTS}")
    for label, (fp8, options) in CONFIGS.items():
        if any(options.get(name) is True for name in PLACEMENT):
            same_bits(label, fp8, options, inputs)
    medians: dict[tuple[str, str], list[float]] = {}
    for round_ in range(ROUNDS):
        for label, (fp8, options) in CONFIGS.items():
            for phases in (round_ % 2 == 1, round_ % 2 == 0):  # which way first alternates between rounds
                way = "phases" if phases else "device"
                got = block(fp8, options, inputs, phases)
                totals = got["totals"]
                median = statistics.median(totals)
                slow = sum(1 for t in totals if t > min(totals) + SLOW_US)
                mine = f"{median:6.1f} [{percentile(totals, 0.1):6.1f}, {percentile(totals, 0.9):6.1f}] slow {slow:2d}"
                if got["parts"]:
                    keys = ("span", "route", "push", "tail", "host")
                    mine += " | " + " ".join(
                        f"{k} {statistics.median(p[k] for p in got['parts']):5.1f}"
                        f"/{max(p[k] for p in got['parts']):5.1f}"
                        for k in keys
                    )  # fmt: skip
                everyone: list[Any] = [None] * world.world_size
                dist.all_gather_object(everyone, mine)
                worst = max_over_ranks(median)
                medians.setdefault((label, way), []).append(worst)
                log0(f"R{round_} {label:32} {way:6} {worst:6.1f} µs | " + " || ".join(
                    f"r{r}: {text}" for r, text in enumerate(everyone)
                ))  # fmt: skip
    log0("summary (max over ranks of each block's median, µs; spread = (max - min) / min over the rounds):")
    for label in CONFIGS:
        for way in ("device", "phases"):
            values = medians[(label, way)]
            spread = (max(values) - min(values)) / min(values)
            log0(f"  {label:32} {way:6} " + " ".join(f"{v:6.1f}" for v in values) + f"  spread {100 * spread:4.1f}%")
    triton_dist.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
