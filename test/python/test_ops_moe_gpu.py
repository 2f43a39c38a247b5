"""moe_dispatch / moe_combine on GPUs (skipped with fewer than 2): the emulation's cases (test_ops_moe_emulation.py) on
real kernels, hundreds of tokens per rank (``large``: the route count programs' prefixes), normal mode's early push when
its buffers must grow (``EARLY_CASES``), ``MoeConfig(pipelined=False)`` (the path before the pipelined default: every
normal case in both layouts, large, bf16 and fp8), the gather layout's block copy at H = 7168 over more blocks than copy
programs, two dispatches in flight
before their combines (the double-buffered halves), and low-latency CUDA-graph replays with fresh routing each time, all
against the torch reference; fp8 dispatch (bit-exact fp8 rows and scales, dequantized rows, a graphed low-latency fp8
dispatch), a low-latency expert over its capacity, the default whole-row kernels and ``MoeConfig(whole_row=False)``'s
chunks at H = 7168 (a normal and a low-latency case each), normal mode's ``layout="gather"`` (every case, large, two in
flight, H = 7168 both ways, fp8 kept and dequantized: ``recv_x[gather_rows]`` against the reference's rows),
``grouped_gemm`` against torch per expert (both layouts and rows through ``gather_rows``, bf16 and fp8), and
``layers.ExpertParallelMoE`` against a dense torch reference (normal, low-latency graphed with fresh routing, fp8,
``dispatch_layout="gather"`` in bf16 and fp8). ``MoeConfig(route_programs=..., expand_block=...)``
(``VARIANT_CONFIGS``) in the gather layout at H = 7168 and in fp8; and at H = 7168 in the gather layout
``switches.EXPAND_OVERLAPS_PUSH`` (the default: the expand kernel beside the push, wave by wave; bf16, and fp8 rows kept
with their scales under ``switches.FP8_OVERLAPS_PUSH``, on by default with the 4-warp push ``switches.FP8_NARROW_PUSH``,
also with ``switches.FP8_RECIPROCAL`` off (the division), ``FP8_PREQUANTIZE`` and at 16 warps), the dispatch
without it (``switches.OWN_ROWS_IN_PUSH``: the push storing this rank's own rows itself; neither: a push launch on a
side stream; fp8 with both options off, ``expand-after``: the expand after the push, fp8's default before 2026-11-27),
against the reference too. Combine runs its defaults everywhere (``MoeConfig(combine_partials="input",
combine_spread=True)``: bf16 partials, checked against the reference with each rank's partial rounded, within one
flipped bf16 rounding of each); at H = 7168, normal and low-latency graphed, also ``combine_partials="fp32"`` (the
reference's fp32 sums, and different from the default's bits somewhere) and ``combine_spread=False`` (the same bits
as with it) (``_combine_option_checks``).

    torchrun --nproc-per-node=2 test/python/test_ops_moe_gpu.py OUT_DIR   # what the test below runs (run_script)
    torchrun --nproc-per-node=4 test/python/test_ops_moe_gpu.py OUT_DIR --quick   # gpu_check.sh's moe_ranks step

Each rank writes, per check, what differed from the reference to ``OUT_DIR/rank<r>.json``, prints the failed checks
and exits non-zero if any failed. Before each group of checks it prints where it is (``moe: <group> (N checks so
far, F failed)``, with the seconds since it started): compiling the kernels takes minutes, and a step killed by its
timeout then shows the group it stopped in. ``--quick``: the defaults' code paths without the options' sweeps
(``QUICK_SKIPS``), for more than 2 ranks.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
QUICK_SKIPS = (
    "MoeConfig(pipelined=False)",
    "the chunked copies",
    "the route / expand options",
    "the own-rows and side-stream pushes",
    "the fp8 push options",
    "combine's options",
    "the reduce-overlap options",
    "grouped_gemm",
)
"""What ``--quick`` leaves out (``scripts/gpu_check.sh``'s ``moe_ranks`` step at more than 2 ranks: the code paths at
that world size, not every option again; grouped_gemm is local, the same at any world size). It keeps every case in
both modes and the gather layout, the early push's growth, large inputs, two dispatches in flight, the CUDA-graph
replays, H = 7168 (whole rows, the gather layout's block copy, combine's defaults, the reduce beside the push), fp8
(the main cases, once at H = 7168), a low-latency overflow and the layer."""


def _cpu(handle: Any) -> Any:
    """``handle`` with its tensor fields on the host (the reference's side)."""
    fields = {f.name: getattr(handle, f.name) for f in dataclasses.fields(handle) if f.name != "state"}
    moved = {name: value.cpu() if isinstance(value, torch.Tensor) else value for name, value in fields.items()}
    return dataclasses.replace(handle, **moved)


def _combine_problems(
    out: torch.Tensor, ys: list[torch.Tensor], refs: list[Any], rank: int, rtol: float = 8e-3, partials: bool = True
) -> list[str]:
    """``out`` against reference_combine of ``ys``; ``rtol`` 8e-3: fp32 sums in the reference's order, the GPU may
    fuse a multiply-add, so the last bf16 bit may differ (2e-2 where the experts' inputs are dequantized rows, which
    the interpreter of a dry run rounds to bf16 by truncation). ``partials`` (the default's
    ``MoeConfig(combine_partials="input")``; False: ``"fp32"``): the reference with each rank's partial rounded to
    bf16 (nearest even) before the fp32 sum, within ``2^-7 * sum_d |partial_d|`` more (a fused multiply-add may flip
    a partial's rounding: one bf16 ulp)."""
    from triton_dist.ops.moe import reference_combine

    fp32 = [dataclasses.replace(h, dtype=torch.float32) for _, h in refs]
    if partials:
        exact = reference_combine(ys, fp32, lambda p: p.to(torch.bfloat16).float())[rank]
        bound = 2**-7 * reference_combine(ys, fp32, torch.abs)[rank] + rtol * exact.abs() + 1e-5
        got = out.cpu().float()
        if got.shape != exact.shape or not bool(((got - exact).abs() <= bound).all()):
            worst = (got - exact).abs().max().item() if got.shape == exact.shape else None
            return [f"combine with bf16 partials: shapes {list(got.shape)} / {list(exact.shape)}, max off {worst}"]
        return []
    exact = reference_combine(ys, fp32)[rank]
    try:
        torch.testing.assert_close(out.cpu().float(), exact, rtol=rtol, atol=1e-5)
    except AssertionError as error:
        return [f"combine: {str(error)[:300]}"]
    return []


def _graphed(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` captured in a CUDA graph (after the caller's eager warm-up): the returned callable replays it and
    returns the captured outputs. On a CPU world (a dry run of these checks under the emulation) it calls ``fn``."""
    if not torch.cuda.is_available():
        return fn
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = fn()

    def replay() -> Any:
        graph.replay()
        return outputs

    return replay


def _reduce_overlap_checks(
    rank: int,
    size: int,
    cuda: torch.device,
    record: dict[str, list[str]],
    check: Any,
    hidden: int = 7168,
    quick: bool = False,
) -> None:
    """``switches.REDUCE_OVERLAPS_PUSH`` (the combine's reduce beside its push, on the push's wave flags) at H = 7168 in
    normal mode (``large``: 700 and 333 tokens, k = 4; the default combine options at ``COMBINE_WAVES``, and fp32
    partials without ``combine_spread`` at 3 waves; each also with ``switches.OWN_PARTIALS_IN_REDUCE``): against the
    reference, and the same bits as the same dispatch's combine without the option (a fresh dispatch of the same
    inputs); then two dispatches in flight and their combines with both options (the wave flags' two halves).
    ``check``: the worker's, which records under ``reduce-overlap/...``; the settings are restored after.
    ``quick``: the default options' case, the two in flight and ``COMBINE_AUTO``'s pair only."""
    from test_ops_moe_emulation import _case_inputs, _experts

    import triton_dist
    from triton_dist.ops.moe import MoeConfig, reference_dispatch, switches

    def inputs(seed: int) -> tuple[tuple[Any, ...], Any]:
        xs, idxs, weights, experts = _case_inputs("large", size, seed, hidden=hidden)
        args = (xs[rank].to(cuda), idxs[rank].to(cuda), weights[rank].to(cuda), experts, "normal", None)
        return args, reference_dispatch(xs, idxs, weights, experts, mode="normal")

    def combined(dispatched: tuple[torch.Tensor, Any]) -> torch.Tensor:
        return triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])

    previous, waves, own = switches.REDUCE_OVERLAPS_PUSH, switches.COMBINE_WAVES, switches.OWN_PARTIALS_IN_REDUCE
    auto, threshold = switches.set_combine_auto(False), switches.COMBINE_AUTO_MIN_SLOTS  # the options as set
    try:
        plain = MoeConfig(combine_partials="fp32", combine_spread=False)
        cases = [("default", MoeConfig(), waves, False), ("fp32", plain, 3, False)]
        cases += [(f"{label}/own", config, count, True) for label, config, count, _ in cases]
        cases = cases[:1] if quick else cases
        for number, (label, config, count, own_partials) in enumerate(cases):
            partials = config.combine_partials == "input"
            args, refs = inputs(90 + number)
            switches.set_reduce_overlaps_push(False)
            baseline = combined(triton_dist.ops.moe_dispatch(*args, config=config))
            switches.set_reduce_overlaps_push(True)
            switches.set_combine_waves(count)
            switches.set_own_partials_in_reduce(own_partials)
            dispatched = triton_dist.ops.moe_dispatch(*args, config=config)
            out = combined(dispatched)
            key = f"reduce-overlap/{label}/waves-{count}/large-{hidden}/normal"
            check(key, args, refs, dispatched, out, partials)
            if not torch.equal(out, baseline):
                record[key].append("not the bits of the combine without the option")
        switches.set_reduce_overlaps_push(True)
        switches.set_combine_waves(waves)
        switches.set_own_partials_in_reduce(True)
        (args_a, refs_a), (args_b, refs_b) = inputs(95), inputs(96)
        first = triton_dist.ops.moe_dispatch(*args_a)  # two dispatches in flight, then their combines
        second = triton_dist.ops.moe_dispatch(*args_b)
        out_a, out_b = combined(first), combined(second)
        partials = MoeConfig().combine_partials == "input"
        check(f"reduce-overlap/in-flight-a/large-{hidden}/normal", args_a, refs_a, first, out_a, partials)
        check(f"reduce-overlap/in-flight-b/large-{hidden}/normal", args_b, refs_b, second, out_b, partials)
        # COMBINE_AUTO (the default) with the options off: from 0 slots the pair, below an unreachable count not
        args, refs = inputs(97)
        switches.set_reduce_overlaps_push(False)
        switches.set_own_partials_in_reduce(False)
        switches.set_combine_auto(True)
        for label, slots in (("pair", 0), ("push-then-reduce", 1 << 30))[: 1 if quick else 2]:
            switches.set_combine_auto_min_slots(slots)
            dispatched = triton_dist.ops.moe_dispatch(*args)
            check(f"combine-auto/{label}/large-{hidden}/normal", args, refs, dispatched, combined(dispatched), partials)
    finally:
        switches.set_reduce_overlaps_push(previous)
        switches.set_combine_waves(waves)
        switches.set_own_partials_in_reduce(own)
        switches.set_combine_auto(auto)
        switches.set_combine_auto_min_slots(threshold)


def _fp8_checks(rank: int, size: int, cuda: torch.device, record: dict[str, list[str]], quick: bool = False) -> None:
    """fp8 dispatch: normal mode's fp8 rows and scales bit-exact against reference.quantize_fp8 (both round to
    nearest even in fp32 with IEEE division), low-latency dequantized rows exact in bf16, combine of them; at H = 7168
    in the gather layout with the expand beside the push (``switches.FP8_OVERLAPS_PUSH`` and
    ``switches.FP8_NARROW_PUSH``, the default) and without (both off: ``expand-after``), checked by the phases too, and
    with the fp8 push's options; then a low-latency fp8 dispatch + combine in a CUDA graph with fresh routing per
    replay; then an expert over its low-latency capacity. ``quick``: without ``MoeConfig(pipelined=False)``, the
    route and expand options and the fp8 push's options, and H = 7168 once, at the defaults."""
    from test_ops_moe_emulation import UNPIPELINED, VARIANT_CONFIGS, _case_inputs, _experts

    import triton_dist
    from triton_dist.ops.moe import MoeStatusError, check_status, reference_dispatch, switches
    from triton_dist.ops.moe import op as moe_op
    from triton_dist.ops.moe.reference import dequantize_fp8
    from triton_dist.testing import sync

    def inputs(
        seed: int, name: str = "k8", hidden: int = 320
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], int]:
        xs, idxs, weights, experts = _case_inputs(name, size, seed, hidden=hidden)  # 320: groups of 128, 128 and 64
        return [x * 30 for x in xs], idxs, weights, experts

    def compare(key: str, got: tuple[torch.Tensor, Any], out: torch.Tensor, xs: Any, idxs: Any, weights: Any,
                experts: int, mode: str, cap: int | None, dequantize: bool) -> None:  # fmt: skip
        recv_x, handle = got
        reciprocal = switches.FP8_RECIPROCAL  # the option's quantization (the caller keeps it set while comparing)
        refs = reference_dispatch(xs, idxs, weights, experts, mode, cap, fp8=True, fp8_reciprocal=reciprocal)
        want, ref = refs[rank]
        sync(key)
        problems = []
        if not torch.equal(handle.expert_counts.cpu(), ref.expert_counts):
            problems.append(f"counts {handle.expert_counts.tolist()} != {ref.expert_counts.tolist()}")
        counts = ref.expert_counts.tolist()
        rows = [slice(None)] if mode == "normal" else [(e, slice(0, c)) for e, c in enumerate(counts)]
        for at in rows:
            if dequantize:  # fp32 products rounded to bf16: to nearest even (GPUs) or truncated (the interpreter)
                exact = dequantize_fp8(want[at], ref.recv_scales[at])
                truncated = (exact.view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)
                got_rows = recv_x[at].cpu()
                if not (torch.equal(got_rows, exact.to(torch.bfloat16)) or torch.equal(got_rows, truncated)):
                    problems.append(f"dequantized rows {at} differ")
            elif not torch.equal(recv_x[at].cpu().view(torch.uint8), want[at].view(torch.uint8)):
                problems.append(f"fp8 rows {at} differ")
            elif not torch.equal(handle.recv_scales[at].cpu(), ref.recv_scales[at]):
                problems.append(f"scales {at} differ")
        ys = [_experts(dequantize_fp8(rx, h.recv_scales, torch.bfloat16), h.recv_expert) for rx, h in refs]
        problems += _combine_problems(out, ys, refs, rank, rtol=2e-2 if dequantize else 8e-3)
        record[key] = problems

    def run(
        xs: Any, idxs: Any, weights: Any, experts: int, mode: str, cap: int | None, dequantize: bool,
        layout: str = "expanded", config: Any = None,
    ) -> Any:  # fmt: skip
        args = (xs[rank].to(cuda), idxs[rank].to(cuda), weights[rank].to(cuda), experts, mode, cap)
        recv_x, handle = triton_dist.ops.moe_dispatch(
            *args, fp8=True, dequantize=dequantize, layout=layout, config=config
        )
        if layout == "gather":  # each token once: compare and combine its expanded rows (and scales)
            gather = handle.gather_rows.long()
            scales = None if handle.recv_scales is None else handle.recv_scales[gather]
            recv_x, handle = recv_x[gather], dataclasses.replace(handle, recv_scales=scales)
        rows = recv_x if dequantize else dequantize_fp8(recv_x, handle.recv_scales, torch.bfloat16)
        return (recv_x, handle), triton_dist.ops.moe_combine(_experts(rows, handle.recv_expert), handle)

    for mode, dequantize in (("normal", False), ("normal", True), ("low_latency", False), ("low_latency", True)):
        for name in ("k8", "random", "one_rank"):
            xs, idxs, weights, experts = inputs(40, name)
            cap = max(max(x.shape[0] for x in xs), 1) if mode == "low_latency" else None
            got, out = run(xs, idxs, weights, experts, mode, cap, dequantize)
            key = f"fp8-{name}/{mode}" + ("/dequantize" if dequantize else "")
            compare(key, got, out, xs, idxs, weights, experts, mode, cap, dequantize)
            if mode == "normal":
                got, out = run(xs, idxs, weights, experts, mode, cap, dequantize, "gather")
                compare(f"gather/{key}", got, out, xs, idxs, weights, experts, mode, cap, dequantize)
                if quick:
                    continue
                for layout in ("expanded", "gather"):  # the path before the pipelined default
                    got, out = run(xs, idxs, weights, experts, mode, cap, dequantize, layout, UNPIPELINED)
                    compare(f"unpipelined/{layout}/{key}", got, out, xs, idxs, weights, experts, mode, cap, dequantize)
                for config in VARIANT_CONFIGS:  # the route and expand options (fp8 kept: the meta tile's scales)
                    got, out = run(xs, idxs, weights, experts, mode, cap, dequantize, "gather", config)
                    option = f"options/{config.route_programs}-{config.expand_block}/gather/{key}"
                    compare(option, got, out, xs, idxs, weights, experts, mode, cap, dequantize)
    # H = 7168, hundreds of tokens: fp8 rows kept in the gather layout with the expand beside the 4-warp push (the
    # default: switches.FP8_OVERLAPS_PUSH and switches.FP8_NARROW_PUSH on, set explicitly; the plan's first call has no
    # buffers yet: both after the summary), with both off (expand-after: the early push at 16 warps, the expand after
    # it, fp8's default before 2026-11-27), and dequantized on receipt (the expand after the push, widening each row, at
    # the defaults: FP8_OVERLAPS_PUSH, which it ignores), on one plan; the phases say where the expand ran.
    for seed in (74,) if quick else (74, 75):
        xs, idxs, weights, experts = inputs(seed, "large", 7168)
        for key, on, dequantize in (("default", True, False), ("expand-after", False, False),
                                    ("dequantize", True, True))[: 1 if quick else 3]:  # fmt: skip
            previous = switches.set_fp8_overlaps_push(on), switches.set_fp8_narrow_push(on)
            phases: list[str] = []
            hook = moe_op.set_phase_hook(phases.append)
            try:
                got, out = run(xs, idxs, weights, experts, "normal", None, dequantize, "gather")
            finally:
                moe_op.set_phase_hook(hook)
                switches.set_fp8_overlaps_push(previous[0])
                switches.set_fp8_narrow_push(previous[1])
            name = f"{key}/fp8/gather/large-7168#{seed}/normal"
            compare(name, got, out, xs, idxs, weights, experts, "normal", None, dequantize)
            beside = phases[:5] == ["start", "route", "push", "expand", "sync"]
            first = key == "default" and seed == 74  # perhaps the plan's first call: no buffers, nothing beside
            if not first and beside != (key == "default"):
                record[name].append(f"phases {phases}: the expand {'' if beside else 'not '}beside the push")
    # The fp8 push's options (docs/design.md, "fp8 dispatch at 4096 tokens") on the same plan, fp8 rows kept in the
    # gather layout at H = 7168: switches.FP8_RECIPROCAL off (the division, against reference_dispatch(...,
    # fp8_reciprocal=False)), FP8_PREQUANTIZE and the 16-warp push (FP8_NARROW_PUSH off), with and without the expand
    # beside the push; each set for its call only (all four set: (FP8_OVERLAPS_PUSH, FP8_RECIPROCAL, FP8_NARROW_PUSH,
    # FP8_PREQUANTIZE)).
    push_options = (("division", (False, False, False, False)), ("prequantized", (False, False, False, True)),
                    ("overlap-division-narrow", (True, False, True, False)),
                    ("overlap-wide", (True, False, False, False)),
                    ("overlap-prequantized-reciprocal", (True, True, False, True)))  # fmt: skip
    xs, idxs, weights, experts = inputs(75, "large", 7168)  # seed 75's: the buffers fit (no growth)
    setters = (switches.set_fp8_overlaps_push, switches.set_fp8_reciprocal, switches.set_fp8_narrow_push,
               switches.set_fp8_prequantize)  # fmt: skip
    for key, options in () if quick else push_options:
        previous = [setter(on) for setter, on in zip(setters, options, strict=True)]
        phases = []
        hook = moe_op.set_phase_hook(phases.append)
        try:
            got, out = run(xs, idxs, weights, experts, "normal", None, False, "gather")
            name = f"options/{key}/fp8/gather/large-7168#75/normal"
            compare(name, got, out, xs, idxs, weights, experts, "normal", None, False)
        finally:
            moe_op.set_phase_hook(hook)
            for setter, on in zip(setters, previous, strict=True):
                setter(on)
        if (phases[:5] == ["start", "route", "push", "expand", "sync"]) != options[0]:
            record[name].append(f"phases {phases}: the expand {'not ' if options[0] else ''}beside the push")
    xs, idxs, weights, experts = inputs(50)
    cap = max(x.shape[0] for x in xs)
    static = [xs[rank].to(cuda), idxs[rank].to(cuda), weights[rank].to(cuda)]
    run(xs, idxs, weights, experts, "low_latency", cap, False)  # eager first: plans, buffers, compilation
    sync("fp8 graph warm-up")

    def step() -> Any:
        recv_x, handle = triton_dist.ops.moe_dispatch(*static, experts, "low_latency", cap, fp8=True)
        rows = dequantize_fp8(recv_x, handle.recv_scales, torch.bfloat16)
        return recv_x, handle, triton_dist.ops.moe_combine(_experts(rows, handle.recv_expert), handle)

    replayed = _graphed(step)
    for replay in range(3):
        xs, idxs, weights, experts = inputs(60 + replay)
        for target, value in zip(static, (xs[rank], idxs[rank], weights[rank]), strict=True):
            target.copy_(value)
        recv_x, handle, out = replayed()
        compare(f"fp8-graph-replay-{replay}/low_latency", (recv_x, handle), out, xs, idxs, weights, experts,
                "low_latency", cap, False)  # fmt: skip
    # Every token names the last rank's last expert twice: 2 * W * T pairs for its W * T rows.
    tokens, experts = 16, 4 * size
    idx = torch.full((tokens, 2), experts - 1, dtype=torch.int32, device=cuda)
    x = torch.randn(tokens, 64, device=cuda).bfloat16()
    recv_x, handle = triton_dist.ops.moe_dispatch(x, idx, torch.ones(tokens, 2, device=cuda), experts, "low_latency",
                                                  tokens)  # fmt: skip
    triton_dist.ops.moe_combine(recv_x, handle)
    last = rank == size - 1
    try:
        check_status(handle)
        raised = ""
    except MoeStatusError as error:
        raised = str(error)
    problems = [] if last == ("low-latency capacity exceeded" in raised) else [f"check_status: {raised!r}"]
    if handle.status.tolist()[2] != (size * tokens if last else 0):
        problems.append(f"status {handle.status.tolist()}")
    record["overflow/low_latency"] = problems


def _grouped_gemm_checks(cuda: torch.device, record: dict[str, list[str]]) -> None:
    """grouped_gemm against torch per expert: normal and low-latency layouts, bf16 and fp8 (block weight scales),
    uneven counts with an empty expert, K and N with a short last 128-block."""
    from triton_dist.ops import grouped_gemm, quantize_fp8, quantize_weights_fp8
    from triton_dist.ops.moe.reference import dequantize_fp8

    gen = torch.Generator().manual_seed(7)
    experts, k, n, capacity = 8, 1088, 704, 300
    counts = torch.randint(0, capacity, (experts,), generator=gen).to(torch.int32)
    counts[3] = 0
    w = torch.randn(experts, k, n, generator=gen) / k**0.5
    wq, ws = quantize_weights_fp8(w)
    w_value = wq.float() * ws.repeat_interleave(128, 1).repeat_interleave(128, 2)[:, :k, :n]
    for layout in ("normal", "low_latency"):
        if layout == "normal":
            x = torch.randn(int(counts.sum()), k, generator=gen)
            offsets = torch.cumsum(counts, 0) - counts
            rows = [slice(int(o), int(o + c)) for o, c in zip(offsets, counts, strict=True)]
        else:
            x = torch.randn(experts, capacity, k, generator=gen)
            offsets = torch.arange(experts) * capacity
            rows = [(e, slice(0, int(c))) for e, c in enumerate(counts)]  # type: ignore[misc]
        dev_counts, dev_offsets = counts.to(cuda), offsets.to(torch.int32).to(cuda)
        for fp8 in (False, True):
            if fp8:
                xq, xs = quantize_fp8(x)
                y = grouped_gemm(xq.to(cuda), wq.to(cuda), dev_counts, dev_offsets, x_scales=xs.to(cuda),
                                 w_scales=ws.to(cuda))  # fmt: skip
                x_value, weights = dequantize_fp8(xq, xs), w_value
            else:
                y = grouped_gemm(x.bfloat16().to(cuda), w.bfloat16().to(cuda), dev_counts, dev_offsets)
                x_value, weights = x.bfloat16().float(), w.bfloat16().float()
            y = y.cpu().float()
            problems = []
            for e, at in enumerate(rows):
                want = x_value[at] @ weights[e]
                if not torch.allclose(y[at], want, rtol=2e-2, atol=2e-2):
                    problems.append(f"expert {e}: max error {(y[at] - want).abs().max().item():.4g}")
            record[f"grouped_gemm/{layout}/{'fp8' if fp8 else 'bf16'}"] = problems
    # The normal layout's rows read through gather_rows from 200 distinct rows (layout="gather"'s recv_x).
    total = int(counts.sum())
    once = torch.randn(200, k, generator=gen)
    gather = torch.randint(0, 200, (total,), generator=gen, dtype=torch.int32)
    offsets = (torch.cumsum(counts, 0) - counts).to(torch.int32)
    rows = [slice(int(o), int(o + c)) for o, c in zip(offsets, counts, strict=True)]
    for fp8 in (False, True):
        dev = {"gather_rows": gather.to(cuda)}
        if fp8:
            xq, xs = quantize_fp8(once)
            y = grouped_gemm(xq.to(cuda), wq.to(cuda), counts.to(cuda), offsets.to(cuda), x_scales=xs.to(cuda),
                             w_scales=ws.to(cuda), **dev)  # fmt: skip
            x_value, weights = dequantize_fp8(xq, xs)[gather.long()], w_value
        else:
            y = grouped_gemm(once.bfloat16().to(cuda), w.bfloat16().to(cuda), counts.to(cuda), offsets.to(cuda), **dev)
            x_value, weights = once.bfloat16().float()[gather.long()], w.bfloat16().float()
        y = y.cpu().float()
        problems = [] if y.shape == (total, n) else [f"y is {list(y.shape)}"]
        for e, at in enumerate(rows):
            want = x_value[at] @ weights[e]
            if not problems and not torch.allclose(y[at], want, rtol=2e-2, atol=2e-2):
                problems.append(f"expert {e}: max error {(y[at] - want).abs().max().item():.4g}")
        record[f"grouped_gemm/gather/{'fp8' if fp8 else 'bf16'}"] = problems


def _layer_checks(rank: int, size: int, cuda: torch.device, record: dict[str, list[str]]) -> None:
    """ExpertParallelMoE against the dense fp32 reference: normal, fp8, and low-latency in a CUDA graph replayed
    with fresh tokens and routing."""
    from torch.nn import functional

    from triton_dist.layers import ExpertParallelMoE
    from triton_dist.testing import sync

    experts, hidden, inter, topk, max_tokens = 8 * size, 512, 384, 4, 96
    gen = torch.Generator().manual_seed(9)
    gate = (torch.randn(experts, hidden, inter, generator=gen) / hidden**0.5).bfloat16()
    up = (torch.randn(experts, hidden, inter, generator=gen) / hidden**0.5).bfloat16()
    down = (torch.randn(experts, inter, hidden, generator=gen) / inter**0.5).bfloat16()

    def routing(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(seed * 10 + rank)
        tokens = max_tokens - 17 * rank  # uneven T
        x = torch.randn(tokens, hidden, generator=g).bfloat16()
        idx = torch.stack([torch.randperm(experts, generator=g)[:topk] for _ in range(tokens)]).to(torch.int32)
        idx[torch.rand(tokens, topk, generator=g) < 0.1] = -1
        return x, idx, torch.rand(tokens, topk, generator=g)

    def dense(x: torch.Tensor, idx: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        x, out = x.to(cuda).float(), torch.zeros(x.shape[0], hidden, device=cuda)
        idx, weights = idx.to(cuda), weights.to(cuda)
        for e in range(experts):
            hit = idx == e
            tokens = hit.any(dim=1)
            if tokens.any():
                h = functional.silu(x[tokens] @ gate[e].to(cuda).float()) * (x[tokens] @ up[e].to(cuda).float())
                out[tokens] += (weights * hit).sum(dim=1)[tokens, None] * (h @ down[e].to(cuda).float())
        return out

    def problems(got: torch.Tensor, want: torch.Tensor, fp8: bool) -> list[str]:
        error = ((got.float() - want).norm() / want.norm()).item()
        return [] if got.dtype == torch.bfloat16 and error < (0.1 if fp8 else 0.02) else [f"relative error {error:.4g}"]

    gather: dict[str, Any] = {"dispatch_layout": "gather"}
    for name, options in (
        ("normal", {}),
        ("fp8", {"fp8": True}),
        ("gather", gather),
        ("fp8-gather", {"fp8": True, **gather}),
    ):
        layer = ExpertParallelMoE(gate.to(cuda), up.to(cuda), down.to(cuda), **options)  # type: ignore[arg-type]
        for call in range(2):
            x, idx, weights = routing(call)
            got = layer(x.to(cuda), idx.to(cuda), weights.to(cuda))
            record[f"layer/{name}/call{call}"] = problems(got, dense(x, idx, weights), name.startswith("fp8"))
    layer = ExpertParallelMoE(gate.to(cuda), up.to(cuda), down.to(cuda), mode="low_latency",
                              max_tokens_per_rank=max_tokens)  # fmt: skip
    static = [t.to(cuda) for t in routing(5)]
    layer(*static)  # eager first
    sync("layer graph warm-up")
    replayed = _graphed(lambda: layer(*static))
    for replay in range(3):
        x, idx, weights = routing(10 + replay)
        for target, value in zip(static, (x, idx, weights), strict=True):
            target.copy_(value)
        out = replayed()
        sync("layer graph replay")
        record[f"layer/low_latency-graph-replay-{replay}"] = problems(out, dense(x, idx, weights), False)
    layer.check_status()


def _combine_option_checks(
    rank: int,
    size: int,
    cuda: torch.device,
    record: dict[str, list[str]],
    check: Any,
    hidden: int = 7168,
    quick: bool = False,
) -> None:
    """Combine's defaults and options at H = 7168 (k = 4, 700 and 333 tokens: several slots per program, so the spread
    start wraps around): the default (``MoeConfig(combine_partials="input", combine_spread=True)``) against the
    reference with bf16 partials; ``combine_partials="fp32"`` against the reference's fp32 sums and different from
    the default's bits somewhere (a combine ignoring the option fails); ``combine_spread=False`` (with bf16 partials,
    and with fp32 ones: the defaults before 2026-11-27) the same bits as with the spread; in normal mode, and the
    default and fp32 partials in low-latency mode in a CUDA graph replayed with fresh routing (``check``: the
    worker's, which records under ``combine-<option>/...``; ``hidden`` smaller for a dry run on CPU ranks under the
    emulation, where the graph is a plain call). ``quick``: the default only."""
    from test_ops_moe_emulation import _case_inputs, _experts

    import triton_dist
    from triton_dist.ops.moe import MoeConfig, reference_dispatch
    from triton_dist.testing import sync

    options = {
        "default": MoeConfig(),
        "no-spread": MoeConfig(combine_spread=False),
        "fp32": MoeConfig(combine_partials="fp32"),
        "fp32-no-spread": MoeConfig(combine_partials="fp32", combine_spread=False),
    }
    if quick:
        options = {"default": options["default"]}
    same_bits = {"no-spread": "default", "fp32-no-spread": "fp32"}  # without the spread: the bits with it

    def inputs(seed: int, mode: str) -> tuple[tuple[Any, ...], Any]:
        xs, idxs, weights, experts = _case_inputs("large", size, seed, hidden=hidden)
        cap = max(x.shape[0] for x in xs) if mode == "low_latency" else None
        args = (xs[rank].to(cuda), idxs[rank].to(cuda), weights[rank].to(cuda), experts, mode, cap)
        return args, reference_dispatch(xs, idxs, weights, experts, mode=mode, max_tokens_per_rank=cap)

    for mode in ("normal", "low_latency"):
        args, refs = inputs(80, mode)
        outs: dict[str, torch.Tensor] = {}
        for label, config in options.items():  # the options with the spread first
            key = f"combine-{label}/large-7168/{mode}"
            dispatched = triton_dist.ops.moe_dispatch(*args, config=config)
            out = triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])
            outs[label] = out
            check(key, args, refs, dispatched, out, config.combine_partials == "input")
            if label == "fp32" and torch.equal(out, outs["default"]):
                record[key].append("the same bits as the default's bf16 partials: the option did not reach the kernels")
            if label in same_bits and not torch.equal(out, outs[same_bits[label]]):
                record[key].append(f"combine_spread changed the result's bits (against combine-{same_bits[label]})")
    graphed = [label for label in ("default", "fp32") if label in options]  # in one order on every rank
    for label in graphed:  # low-latency, graphed: static inputs refilled before each replay
        config = options[label]
        args, refs = inputs(81, "low_latency")
        static = [a.clone() for a in args[:3]]
        dispatched = triton_dist.ops.moe_dispatch(*static, *args[3:], config=config)  # eager first
        triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])
        sync(f"combine-{label} graph warm-up")

        def step(
            config: Any = config, static: list[torch.Tensor] = static, rest: tuple[Any, ...] = args[3:]
        ) -> tuple[tuple[torch.Tensor, Any], torch.Tensor]:
            dispatched = triton_dist.ops.moe_dispatch(*static, *rest, config=config)
            return dispatched, triton_dist.ops.moe_combine(
                _experts(dispatched[0], dispatched[1].recv_expert), dispatched[1]
            )

        replayed = _graphed(step)
        for replay in range(3):
            args, refs = inputs(82 + replay, "low_latency")
            for target, value in zip(static, args[:3], strict=True):
                target.copy_(value)
            dispatched, out = replayed()
            partials = config.combine_partials == "input"
            check(f"combine-{label}/graph-replay-{replay}/low_latency", args, refs, dispatched, out, partials)


def _worker(out_dir: str, quick: bool = False) -> None:
    """Every check on this rank, a progress line per group of checks (``stage``); ``quick`` (``--quick``): the
    defaults' code paths without the options' sweeps (``QUICK_SKIPS``), for more than 2 ranks."""
    from test_ops_moe_emulation import (
        CASES,
        EARLY_CASES,
        PIPELINED,
        UNPIPELINED,
        VARIANT_CONFIGS,
        _case_inputs,
        _differences,
        _experts,
        _gathered,
    )

    import triton_dist
    from triton_dist.ops.moe import MoeConfig, reference_dispatch, switches
    from triton_dist.testing import rank_print, setup_distributed, sync

    world = setup_distributed(heap_size="2G")
    rank, size, cuda = world.rank, world.world_size, world.device
    record: dict[str, list[str]] = {}

    def stage(name: str) -> None:
        """Where this rank is: a timeout's log then names the group it stopped in (the worker prints nothing else
        until its end, and compiling its kernels takes minutes)."""
        failed = sum(1 for problems in record.values() if problems)
        rank_print(f"moe: {name} ({len(record)} checks so far, {failed} failed)")

    if quick:
        rank_print(f"moe: --quick, without {', '.join(QUICK_SKIPS)}")
    stage("cases")

    def one(name: str, seed: int, mode: str) -> tuple[Any, ...]:
        xs, idxs, weights, experts = _case_inputs(name, size, seed)
        cap = max(max(x.shape[0] for x in xs), 1) if mode == "low_latency" else None
        args = (xs[rank].to(cuda), idxs[rank].to(cuda), weights[rank].to(cuda), experts, mode, cap)
        refs = reference_dispatch(xs, idxs, weights, experts, mode=mode, max_tokens_per_rank=cap)
        return args, refs

    def check(
        key: str,
        args: tuple[Any, ...],
        refs: Any,
        dispatched: tuple[torch.Tensor, Any],
        out: Any,
        partials: bool = True,
    ) -> None:
        recv_x, handle = dispatched
        sync(key)
        problems = _differences(recv_x.cpu(), refs[rank][0], _cpu(handle), refs[rank][1], args[4])
        ys = [_experts(rx, h.recv_expert) for rx, h in refs]
        problems += _combine_problems(out, ys, refs, rank, partials=partials)
        record[key] = problems

    def gathered(args: tuple[Any, ...], config: Any = None) -> tuple[tuple[torch.Tensor, Any], torch.Tensor]:
        """A layout="gather" dispatch of ``args`` and its combine of the expanded rows' experts."""
        dispatched = triton_dist.ops.moe_dispatch(*args, config=config, layout="gather")
        rows = dispatched[0][dispatched[1].gather_rows.long()]
        return dispatched, triton_dist.ops.moe_combine(_experts(rows, dispatched[1].recv_expert), dispatched[1])

    def check_gathered(key: str, args: tuple[Any, ...], refs: Any, dispatched: Any, out: torch.Tensor) -> None:
        """``check`` of a layout="gather" dispatch: its layout, then recv_x[gather_rows] as the expanded recv_x."""
        recv_x, handle = dispatched
        sync(key)
        rows, problems = _gathered(recv_x.cpu(), _cpu(handle), refs[rank][1])
        problems += _differences(rows, refs[rank][0], _cpu(handle), refs[rank][1], "normal")
        problems += _combine_problems(out, [_experts(rx, h.recv_expert) for rx, h in refs], refs, rank)
        record[key] = problems

    for number, name in enumerate(CASES):
        for mode in ("normal", "low_latency"):
            args, refs = one(name, number if name != "random" else 0, mode)
            dispatched = triton_dist.ops.moe_dispatch(*args)
            out = triton_dist.ops.moe_combine(_experts(*dispatched[:1], dispatched[1].recv_expert), dispatched[1])
            check(f"{name}#{number}/{mode}", args, refs, dispatched, out)
            if mode == "normal":
                check_gathered(f"gather/{name}#{number}/normal", args, refs, *gathered(args))
                if quick:
                    continue
                dispatched = triton_dist.ops.moe_dispatch(*args, config=UNPIPELINED)
                out = triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])
                check(f"unpipelined/{name}#{number}/normal", args, refs, dispatched, out)
                check_gathered(f"unpipelined/gather/{name}#{number}/normal", args, refs, *gathered(args, UNPIPELINED))
    # The default (pipelined) k = 2 plan above has buffers of 64 slots: its push goes before the host reads the
    # summary, and does nothing when the combine slots, then the token slots, must grow (pushed again after growing).
    stage("early push, large, in flight")
    for number, name in enumerate(EARLY_CASES, start=len(CASES)):
        args, refs = one(name, number, "normal")
        dispatched = triton_dist.ops.moe_dispatch(*args, config=PIPELINED)
        out = triton_dist.ops.moe_combine(_experts(*dispatched[:1], dispatched[1].recv_expert), dispatched[1])
        check(f"early/{name}#{number}/normal", args, refs, dispatched, out)
    args, refs = one("large", 40, "normal")
    check_gathered("gather/large/normal", args, refs, *gathered(args))
    if not quick:
        check_gathered("unpipelined/gather/large/normal", args, refs, *gathered(args, UNPIPELINED))
    (args_a, refs_a), (args_b, refs_b) = one("k8", 13, "normal"), one("k8", 14, "normal")
    first = triton_dist.ops.moe_dispatch(*args_a, layout="gather")  # two gather dispatches in flight
    second = triton_dist.ops.moe_dispatch(*args_b, layout="gather")
    out_a = triton_dist.ops.moe_combine(_experts(first[0][first[1].gather_rows.long()], first[1].recv_expert), first[1])
    out_b = triton_dist.ops.moe_combine(
        _experts(second[0][second[1].gather_rows.long()], second[1].recv_expert), second[1]
    )
    check_gathered("gather/overlap-a/normal", args_a, refs_a, first, out_a)
    check_gathered("gather/overlap-b/normal", args_b, refs_b, second, out_b)
    for mode in ("normal", "low_latency"):  # hundreds of tokens: the route count programs' prefixes carry
        args, refs = one("large", 40, mode)
        dispatched = triton_dist.ops.moe_dispatch(*args)
        out = triton_dist.ops.moe_combine(_experts(*dispatched[:1], dispatched[1].recv_expert), dispatched[1])
        check(f"large/{mode}", args, refs, dispatched, out)
    for mode in ("normal", "low_latency"):  # two dispatches in flight, then their combines
        (args_a, refs_a), (args_b, refs_b) = one("k8", 11, mode), one("k8", 12, mode)
        first = triton_dist.ops.moe_dispatch(*args_a)
        second = triton_dist.ops.moe_dispatch(*args_b)
        out_a = triton_dist.ops.moe_combine(_experts(first[0], first[1].recv_expert), first[1])
        out_b = triton_dist.ops.moe_combine(_experts(second[0], second[1].recv_expert), second[1])
        check(f"overlap-a/{mode}", args_a, refs_a, first, out_a)
        check(f"overlap-b/{mode}", args_b, refs_b, second, out_b)
    # Low-latency in a CUDA graph: static inputs refilled with fresh routing before each replay.
    stage("graph replays, H = 7168")
    args, refs = one("k8", 20, "low_latency")
    static = [a.clone() for a in args[:3]]
    dispatched = triton_dist.ops.moe_dispatch(*static, *args[3:])  # eager first: plans, buffers, compilation
    triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])
    sync("graph warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dispatched = triton_dist.ops.moe_dispatch(*static, *args[3:])
        out = triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])
    for replay in range(4):
        args, refs = one("k8", 30 + replay, "low_latency")
        for target, value in zip(static, args[:3], strict=True):
            target.copy_(value)
        graph.replay()
        check(f"graph-replay-{replay}/low_latency", args, refs, dispatched, out)
    chunked = MoeConfig(whole_row=False)  # 1024-element copy steps (the default moves 8192-wide whole rows)
    for number, (name, mode) in enumerate((("k8", "normal"), ("random", "low_latency"))):
        xs, idxs, weights, experts = _case_inputs(name, size, 70 + number, hidden=7168)
        cap = max(max(x.shape[0] for x in xs), 1) if mode == "low_latency" else None
        args = (xs[rank].to(cuda), idxs[rank].to(cuda), weights[rank].to(cuda), experts, mode, cap)
        refs = reference_dispatch(xs, idxs, weights, experts, mode=mode, max_tokens_per_rank=cap)
        configs = ((f"whole_row-{name}/{mode}", None), (f"chunked-{name}/{mode}", chunked))
        for key, config in configs[: 1 if quick else 2]:
            dispatched = triton_dist.ops.moe_dispatch(*args, config=config)
            out = triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])
            check(key, args, refs, dispatched, out)
            if dispatched[1].config is not config:
                record[key].append(f"handle.config is {dispatched[1].config!r}")
            if mode == "normal":  # layout="gather" at H = 7168, whole rows and chunks
                check_gathered(f"gather/{key}", args, refs, *gathered(args, config))
    # The gather layout's block copy at H = 7168 over about 1000 received tokens: more 4096-element blocks than the
    # expand kernel has copy programs (BULK_COPIERS_PER_SM per SM), the last one partial; the plan's first call (its
    # push and expand after the summary), then its early push with the expand beside it (switches.EXPAND_OVERLAPS_PUSH,
    # the default, by waves), and the same plan without it: the push storing my own rows itself
    # (switches.OWN_ROWS_IN_PUSH), then neither (a push launch on a side stream).
    stage("gather block copy at H = 7168")
    for seed in (72,) if quick else (72, 73):
        xs, idxs, weights, experts = _case_inputs("large", size, seed, hidden=7168)
        args = (xs[rank].to(cuda), idxs[rank].to(cuda), weights[rank].to(cuda), experts, "normal", None)
        refs = reference_dispatch(xs, idxs, weights, experts, mode="normal")
        check_gathered(f"overlap/gather/large-7168#{seed}/normal", args, refs, *gathered(args, PIPELINED))
        if quick:
            continue
        for key, own in (("own_in_push", True), ("side", False)):
            previous = switches.set_own_rows_in_push(own), switches.set_expand_overlaps_push(False)
            try:
                check_gathered(f"{key}/gather/large-7168#{seed}/normal", args, refs, *gathered(args, PIPELINED))
            finally:
                switches.set_own_rows_in_push(previous[0])
                switches.set_expand_overlaps_push(previous[1])
        for config in VARIANT_CONFIGS:  # the route and expand options: their plan's first call, then its early push
            option = f"options/{config.route_programs}-{config.expand_block}"
            check_gathered(f"{option}/gather/large-7168#{seed}/normal", args, refs, *gathered(args, config))
    stage("combine options")
    _combine_option_checks(rank, size, cuda, record, check, quick=quick)
    stage("reduce beside the push")
    _reduce_overlap_checks(rank, size, cuda, record, check, quick=quick)
    for name, checks in (
        ("fp8", lambda: _fp8_checks(rank, size, cuda, record, quick)),
        ("grouped_gemm", lambda: _grouped_gemm_checks(cuda, record)),
        ("layer", lambda: _layer_checks(rank, size, cuda, record)),
    ):
        if quick and name == "grouped_gemm":
            continue
        stage(name)
        try:
            checks()
        except Exception as error:  # noqa: BLE001 (recorded: the other checks still run)
            record[f"{name}/raised"] = [f"{type(error).__name__}: {error}"]
    Path(out_dir).mkdir(parents=True, exist_ok=True)  # run by hand, OUT_DIR need not exist yet
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(record))
    failed = {key: problems for key, problems in record.items() if problems}
    print(f"rank {rank}: {len(record) - len(failed)} of {len(record)} checks passed; failed: {failed or 'none'}")
    triton_dist.finalize()
    sys.stdout.flush()
    os._exit(1 if failed else 0)


@pytest.mark.skipif(GPUS < 2, reason=f"needs 2 GPUs, this machine has {GPUS}")
def test_moe_on_two_gpus_matches_the_reference(tmp_path: Path) -> None:
    from emulated_ranks import run_script

    run_script(Path(__file__), 2, [str(tmp_path)], env={"TRITON_INTERPRET": "0"})  # as torchrun would run it
    for rank in range(2):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert len(record) >= 20
        failed = {key: problems for key, problems in record.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


if __name__ == "__main__":
    _worker(sys.argv[1], quick="--quick" in sys.argv[2:])
