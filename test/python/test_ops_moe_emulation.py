"""moe_dispatch / moe_combine on CPU ranks: the op's own host code and kernels under the emulation of the dl
primitives (``TRITON_INTERPRET=1``, ``init(device="cpu")``, one process per rank on gloo), at 2 and 3 ranks,
against the torch reference (``ops/moe/reference.py``).

Run as a script under torchrun (the tests below do, once per world size), this file is the worker: every rank
builds every rank's inputs from one seed, runs each case in both modes, computes the whole reference itself and
writes, per case, what differed from it on this rank to ``<out>/rank<r>.json``.

Cases: random routing with uneven T and slots of -1; k = 1 (int64 ids); k = 8 (bf16 weights); every token to the
last rank (rank 0 receives nothing); T = 0 on rank 1; an expert no token picks; enough tokens that normal mode grows
its buffers; the first case again (the epochs and buffer halves moved on); an expert id out of range (``_bad_ids``);
at 2 ranks, fp8 payloads (``_fp8``: H = 160, a full and a short scale group; normal mode keeping fp8 and scales,
low-latency mode dequantizing), a low-latency expert over its capacity (``_overflow``), ``MoeConfig(pipelined=False)``
(``PIPELINED_CASES`` in both layouts: the path before the pipelined default), the pipelined default's early push when
the buffers must grow (``EARLY_CASES``) and its gather layout without ``switches.EXPAND_OVERLAPS_PUSH`` (the own rows
from a side stream: ``SIDE_CASES``), ``MoeConfig(whole_row=False)``'s chunked kernels (``CHUNKED_CASES`` in both modes,
then fp8 both ways: the same bits as the default's whole rows), and ``MoeConfig(programs_per_sm=2)`` through dispatch
and combine once. The default (``MoeConfig(pipelined=True)``, and ``switches.EXPAND_OVERLAPS_PUSH`` in the gather
layout) runs ``CASES``; the options' own cases: ``_variants``, ``_own_rows_in_push``, ``_overlap`` (with fp8 rows kept
under ``switches.FP8_OVERLAPS_PUSH``, on by default, and once with it and ``switches.FP8_NARROW_PUSH`` off: the expand
after the push, fp8's default before 2026-11-27). Normal mode's
``layout="gather"`` (each token once, ``recv_x[handle.gather_rows]`` the expanded rows): ``GATHER_CASES`` (at 2
ranks also chunked k = 8, fp8 kept and dequantized).
Dispatch must match the reference exactly (rows, counts, offsets, per-row meta); combine, whose experts scale by
their expert id, too: the reference's fp32 sums (the same order of additions) with each rank's partial rounded to bf16
first (the default ``MoeConfig(combine_partials="input")``; not with ``"fp32"``, ``COMBINE_CASES``), rounded to bf16
(Triton 3.6's interpreter truncates where GPUs round to nearest even); the default's k = 8 case is one whose sums
differ with fp32 partials, so a combine sending fp32 partials fails it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from emulated_ranks import run_script

from triton_dist.ops.moe.config import LAYOUTS, MoeConfig

HIDDEN = 32
PIPELINED = MoeConfig(pipelined=True)
"""Normal mode's pipelined dispatch, the default (``EARLY_CASES``; the GPU test's worker uses it too)."""
UNPIPELINED = MoeConfig(pipelined=False)
"""Normal mode's dispatch before the pipelined default (``PIPELINED_CASES``; the GPU test's worker uses it too)."""


def _case_inputs(
    name: str, world: int, seed: int, hidden: int = HIDDEN
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], int]:
    """Every rank's (x, topk_idx, topk_weights) and E for case ``name`` at ``world`` ranks."""
    gen = torch.Generator().manual_seed(seed)
    experts, k, none_rate = 4 * world, 2, 0.0

    def per_rank(pattern: list[int]) -> list[int]:  # any world size: the pattern repeated over the ranks
        return [pattern[r % len(pattern)] for r in range(world)]

    counts = per_rank([5, 9, 3])
    if name == "random":
        none_rate = 0.25
    elif name == "k1":
        k, counts = 1, [6] * world
    elif name == "k8":
        k, counts = 8, per_rank([4, 7, 2])
    elif name == "t0":
        counts = per_rank([6, 0, 4])
    elif name == "grow":
        k, counts = 3, [40] * world
    elif name == "grow_combine":  # rank 0's tokens need more combine slots than 64; no rank receives 64 tokens
        counts = [60] + [0] * (world - 1)
    elif name == "grow_tokens":  # then every rank receives more than 64 tokens (combine: within the 128 above)
        counts = [70] * world
    elif name == "variants":  # VARIANT_CONFIGS': several tokens per route count program, -1 slots
        k, counts, none_rate = 3, per_rank([19, 13, 7]), 0.2
    elif name == "large":  # the GPU test's: several tokens per route count program (64 of them), uneven chunks
        k, counts = 4, per_rank([700, 333, 517])
    xs, idxs, weights = [], [], []
    for tokens in counts:
        xs.append(torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16))
        rows = [torch.randperm(experts, generator=gen)[:k] for _ in range(tokens)]
        idx = torch.stack(rows) if rows else torch.zeros(0, k, dtype=torch.int64)
        if name == "one_rank":  # every token's experts on the last rank
            idx = (world - 1) * 4 + torch.randint(0, 4, (tokens, k), generator=gen)
        if name == "empty_expert":
            idx[idx == 1] = 2
        idx[torch.rand(tokens, k, generator=gen) < none_rate] = -1
        idxs.append(idx.to(torch.int64 if name == "k1" else torch.int32))  # k1: int64 ids
        weights.append(torch.rand(tokens, k, generator=gen).to(torch.bfloat16 if name == "k8" else torch.float32))
    return xs, idxs, weights, experts


CASES = ("random", "k1", "k8", "one_rank", "t0", "empty_expert", "grow", "random")
CHUNKED_CASES = ("random", "k8")
EARLY_CASES = ("grow_combine", "grow_tokens")
"""At 2 ranks, normal mode with ``MoeConfig(pipelined=True)`` (the default), after ``CASES`` (whose k = 2 plan has
buffers of 64 slots): its push goes before the host reads the summary, and does nothing when the buffers must grow
(combine slots only, then token slots only); the op then grows them and pushes again."""
PIPELINED_CASES = ("random", "t0")
"""Run again at 2 ranks in normal mode with ``MoeConfig(pipelined=False)`` (the summary copied after a stream
synchronization, the push after it), expanded and gather; and (``SIDE_CASES``) with the default in the gather layout
with ``switches.EXPAND_OVERLAPS_PUSH`` off (the own rows stored by a push launch on a side stream), the first of
them."""
SIDE_CASES = ("random",)
GATHER_CASES = {2: ("random", "k1", "k8", "one_rank", "t0", "empty_expert"), 3: ("t0",)}
"""The cases run again in normal mode with ``layout="gather"``, per world size (their first place in ``CASES``); at
2 ranks also chunked k = 8 and fp8 kept and dequantized."""
"""Run again at 2 ranks with ``MoeConfig(whole_row=False)`` (the chunked loops): -1 slots, k = 8, bf16 weights."""


VARIANT_CONFIGS = (
    MoeConfig(pipelined=True, route_programs=512, expand_block=4),
    MoeConfig(pipelined=True, route_programs=32, expand_block=64),
)
"""At 2 ranks, the pipelined gather dispatch (bf16, and fp8 kept) with these options against the same dispatch with
the default (``VARIANT_BASE``; ``_variants``): every output bit for bit, outputs allocated poisoned. Under
the emulation the route count kernel runs 16 and 2 programs (the default 4); the expand kernel writes 4 tokens' meta
a step (several steps, a partial last one) and 64 (one step wider than the slots). (On GPUs, ``test_ops_moe_gpu.py``:
512 count programs of 8-token steps, 64 prefix rows a step at 8 warps, and 32.)"""
VARIANT_BASE = MoeConfig(programs_per_sm=5)
"""What ``VARIANT_CONFIGS`` are compared with: the default's kernels (one program each under the emulation) in plans of
their own, whose epochs start with the options' (the default's plans ran ``CASES`` before)."""


COMBINE_CONFIGS = {
    "fp32": MoeConfig(combine_partials="fp32"),
    "no-spread": MoeConfig(combine_spread=False),
    "fp32+no-spread": MoeConfig(combine_partials="fp32", combine_spread=False),
}
"""Combine's options beside its defaults (``MoeConfig.combine_partials="input"``: bf16 partials, each rank's rounded
to bf16 and summed in fp32; ``combine_spread=True``: the push's programs starting spread, the emulation's one program
halfway, wrapping around, and the reduce's partials loaded unrolled over the ranks, masked lanes past W at 3 ranks),
which ``CASES`` run: the default dispatch's plan with fp32 partials (the reference's fp32 sums), with the kernels'
order before the spread (the loop over ranks in the reduce), and both (the defaults before the 2 x H200 run of
2026-11-27). ``_combined`` gives each one's bits exactly, rounded to nearest even as GPUs do or truncated as the
interpreter does."""
COMBINE_CASES = {
    2: (("fp32", "k8"), ("no-spread", "k8"), ("fp32+no-spread", "random")),
    3: (("fp32+no-spread", "k8"),),
}
"""The (option, case) pairs run per world size, in both modes, every output allocated poisoned. The k = 8 case, where
every token has rows on every rank, has sums that differ between bf16 and fp32 partials (``_case(..., distinct=True)``
checks that they do: a combine ignoring ``combine_partials`` fails)."""


OWN_CONFIG = MoeConfig(pipelined=True, programs_per_sm=3)
"""``switches.OWN_ROWS_IN_PUSH``'s plan (``_own_rows_in_push``): a signature of its own (under the emulation the same
kernels as ``PIPELINED``'s, one program each), so its first call has no buffers yet."""
OWN_CASES = ("random", "t0", "grow_combine", "grow_tokens")
"""``switches.OWN_ROWS_IN_PUSH`` on, in this order on ``OWN_CONFIG``'s plan: the push after the summary (no buffers
yet), the early push filling the rows of a ``recv_x`` of the plan's 64 token slots, and the early push doing nothing
while the combine slots, then the token slots grow (the push then goes again, into a ``recv_x`` of the received
rows)."""

OVERLAP_CONFIG = MoeConfig(pipelined=True, programs_per_sm=4)
"""``switches.EXPAND_OVERLAPS_PUSH``'s plans (``_overlap``): signatures of their own, so each k's first call has no
buffers (the push and the expand after the summary, as without the option)."""
OVERLAP_CASES = ("random", "variants", "random", "one_rank", "t0", "variants", "grow_combine")
"""``switches.EXPAND_OVERLAPS_PUSH`` on, in this order on ``OVERLAP_CONFIG``'s plans (k = 2 and k = 3), at 2 and 3
ranks: each k's first call without buffers; then the expand beside the early push with uneven T, a rank receiving
nothing (``one_rank``), a rank sending nothing (``t0``) and four waves of several tokens each (``variants``: 19, 13 and
7 tokens, 4 route count programs under the emulation); at 2 ranks last (``OVERLAP_AT_TWO``) the early push and the
expand beside it doing nothing while the combine slots grow (both go again after the summary); then ``variants`` in two
waves (``switches.set_expand_waves(2)``: two route count programs' ranges a wave)."""
OVERLAP_AT_TWO = ("grow_combine",)
OVERLAP_FP8 = (("first", True), ("beside", True), ("expand-after", False))
"""At 2 ranks, fp8 rows kept (H = 160: a full and a short scale group) on ``OVERLAP_CONFIG``'s k = 3 plan of fp8,
``variants``' inputs each call fresh, with ``switches.FP8_OVERLAPS_PUSH`` and ``switches.FP8_NARROW_PUSH`` as the second
item says (True: their defaults, on; False: both off for the call): its first call (no buffers: the push and the expand
after the summary), then the expand beside the push, then with both off the path before them (the early push, the expand
after it): each checked by its phases, and against the reference, bit for bit (rows and scales), every output
allocated poisoned. (Dequantized on receipt the expand stays after the push, whatever the options.)"""


def _experts(recv_x: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """The experts: expert e multiplies its rows by (e + 1) / 4 (rows with expert -1 give 0).

    On the GPU every row (no host synchronization: the GPU test captures it in CUDA graphs); on the CPU (the
    references' rows) only the held rows, the padding zeros: a low-latency reference's rows are mostly capacity
    padding, [E / W, W * T, H] per rank, whose fp32 copy took seconds per check at 4 ranks and H = 7168."""
    scale = ((expert.float() + 1) / 4).unsqueeze(-1)
    if recv_x.device.type != "cpu":
        return (recv_x.float() * scale).to(recv_x.dtype)
    out = torch.zeros_like(recv_x)
    held = expert >= 0
    out[held] = (recv_x[held].float() * scale[held]).to(recv_x.dtype)
    return out


def _differences(got: Any, want: Any, handle: Any, ref: Any, mode: str) -> list[str]:
    """What differs between the op's dispatch on this rank and the reference's."""
    problems = []
    fields = ("expert_counts", "src_offsets", "recv_src_rank", "recv_src_token", "recv_expert", "recv_weights",
              "recv_topk_slot", "expert_offsets")  # fmt: skip
    for field in fields:
        mine, theirs = getattr(handle, field), getattr(ref, field)
        if mine.shape != theirs.shape or not torch.equal(mine, theirs):
            problems.append(f"{field}: {mine.tolist()} != {theirs.tolist()}")
    if int(handle.num_recv_tokens) != ref.num_recv_tokens:
        problems.append(f"num_recv_tokens: {int(handle.num_recv_tokens)} != {ref.num_recv_tokens}")
    if mode == "normal":
        if got.shape != want.shape or not torch.equal(got, want):
            problems.append(f"recv_x differs (shapes {list(got.shape)} / {list(want.shape)})")
    else:
        for e, count in enumerate(ref.expert_counts.tolist()):
            if not torch.equal(got[e, :count], want[e, :count]):
                problems.append(f"recv_x rows of local expert {e} differ")
    if int(handle.status[0]) != 0:
        problems.append(f"status {handle.status.tolist()}")
    return problems


def _bad_ids(rank: int, size: int) -> list[str]:
    """An expert id out of range on rank 0 only: normal mode raises MoeStatusError on every rank (nothing sent);
    low-latency mode counts it in rank 0's status (check_status raises there only); calls after both work."""
    import triton_dist
    from triton_dist.ops.moe import MoeStatusError, check_status, reference_dispatch

    xs, idxs, weights, experts = _case_inputs("random", size, seed=0)
    bad = [idx.clone() for idx in idxs]
    bad[0][1, 0] = experts + 3
    problems = []
    try:
        triton_dist.ops.moe_dispatch(xs[rank], bad[rank], weights[rank], experts)
        problems.append("normal mode: no error")
    except MoeStatusError as error:
        if "1 topk_idx entries over all ranks" not in str(error):
            problems.append(f"normal mode: {error}")
    cap = max(x.shape[0] for x in xs)
    _, handle = triton_dist.ops.moe_dispatch(xs[rank], bad[rank], weights[rank], experts, "low_latency", cap)
    if int(handle.status[0]) != (1 if rank == 0 else 0):
        problems.append(f"low-latency status {handle.status.tolist()}")
    try:
        check_status(handle)
        raised = False
    except MoeStatusError as error:
        raised = f"1 topk_idx entries on rank {rank}" in str(error)
    if raised != (rank == 0):
        problems.append("check_status")
    recv_x, handle = triton_dist.ops.moe_dispatch(xs[rank], idxs[rank], weights[rank], experts)
    want = reference_dispatch(xs, idxs, weights, experts)[rank][0]
    if not torch.equal(recv_x, want):
        problems.append("the next normal dispatch differs from the reference")
    triton_dist.ops.moe_combine(recv_x, handle)
    return problems


def _bf16_problems(what: str, got: torch.Tensor, exact: torch.Tensor) -> list[str]:
    """``got`` (bf16) must be ``exact`` (fp32) rounded to nearest even (GPUs) or truncated (Triton 3.6's
    interpreter)."""
    truncated = (exact.view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)
    if got.shape == exact.shape and (torch.equal(got, exact.to(torch.bfloat16)) or torch.equal(got, truncated)):
        return []
    worst = (got.float() - exact).abs().max().item() if got.shape == exact.shape else None
    return [f"{what} differs: shapes {list(got.shape)} / {list(exact.shape)}, max {worst}"]


def _nearest(values: torch.Tensor) -> torch.Tensor:
    """fp32 ``values`` rounded to bf16 to nearest even (GPUs), as fp32."""
    return values.to(torch.bfloat16).float()


def _truncated(values: torch.Tensor) -> torch.Tensor:
    """fp32 ``values`` rounded to bf16 by truncation (Triton 3.6's interpreter), as fp32."""
    return (values.view(torch.int32) & ~0xFFFF).view(torch.float32)


def _combined(ys: list[torch.Tensor], handles: list[Any], rank: int, partials: bool = False) -> list[torch.Tensor]:
    """The bf16 results ``rank``'s combine of ``ys`` may give, rounded to nearest even (GPUs) or truncated (Triton
    3.6's interpreter): the reference's fp32 sums (each rank's partial in k order, the partials in rank order), with
    ``partials`` (``MoeConfig(combine_partials="input")``) each rank's fp32 partial rounded the same way first."""
    from triton_dist.ops.moe import reference_combine

    fp32 = [dataclasses.replace(h, dtype=torch.float32) for h in handles]
    wanted = []
    for rounding in (_nearest, _truncated):
        exact = reference_combine(ys, fp32, rounding if partials else None)[rank]
        wanted.append(rounding(exact).to(torch.bfloat16))
    return wanted


def _fp8(
    rank: int, size: int, config: Any = None, gather: bool = False, pipelined: bool = False
) -> dict[str, list[str]]:
    """fp8 dispatch against the reference: normal mode keeps fp8 rows (bit-exact) and their scales (exact);
    low-latency mode dequantizes (the reference's fp32 values in bf16); then combine of the dequantized rows.
    ``config``: the ``MoeConfig`` both run with (its keys start ``fp8/chunked/`` for a chunked one). ``gather``:
    normal mode only, with ``layout="gather"``, kept and dequantized (keys ``fp8/gather/normal[/dequantize]``).
    ``pipelined``: ``MoeConfig(pipelined=True)``, gather, kept only, after ``gather``'s calls of the same plan (its
    block copy of the rows and scales; the default's early push and, ``switches.FP8_OVERLAPS_PUSH`` being on by default,
    the expand beside it: checked by the phases; key ``fp8/pipelined/gather/normal``)."""
    from triton_dist.ops.moe import op as moe_op

    xs, idxs, weights, experts = _case_inputs("random", size, seed=5, hidden=160)
    xs = [x * 40 for x in xs]  # beyond e4m3's range unscaled: the scales matter
    record: dict[str, list[str]] = {}
    runs = (("normal", False), ("normal", True)) if gather else (("normal", False), ("low_latency", True))
    prefix = "fp8/gather/" if gather else "fp8/chunked/" if config is not None else "fp8/"
    if pipelined:
        config, gather, runs, prefix = PIPELINED, True, (("normal", False),), "fp8/pipelined/gather/"
    for mode, dequantize in runs:
        key = prefix + mode + ("/dequantize" if dequantize else "")
        phases: list[str] = []
        hook = moe_op.set_phase_hook(phases.append)
        try:
            record[key] = _fp8_call(rank, (xs, idxs, weights, experts), mode, dequantize, config, gather)
        finally:
            moe_op.set_phase_hook(hook)
        if pipelined and phases[:5] != ["start", "route", "push", "expand", "sync"]:  # both before the summary
            record[key].append(f"phases {phases}: not the early push with the expand beside it (FP8_OVERLAPS_PUSH)")
    return record


def _fp8_call(rank: int, inputs: tuple[Any, ...], mode: str, dequantize: bool, config: Any, gather: bool) -> list[str]:
    """One fp8 dispatch of ``inputs`` (every rank's x, ids and weights, and E) and its combine: what differs from the
    reference (see ``_fp8``; quantized as ``switches.FP8_RECIPROCAL`` says)."""
    import triton_dist
    from triton_dist.ops.moe import reference_combine, reference_dispatch, switches
    from triton_dist.ops.moe.reference import dequantize_fp8

    xs, idxs, weights, experts = inputs
    cap = max(x.shape[0] for x in xs) if mode == "low_latency" else None
    try:
        recv_x, handle = triton_dist.ops.moe_dispatch(
            xs[rank], idxs[rank], weights[rank], experts, mode, cap, fp8=True, dequantize=dequantize,
            config=config, layout="gather" if gather else "expanded",
        )  # fmt: skip
        refs = reference_dispatch(
            xs, idxs, weights, experts, mode, cap, fp8=True, fp8_reciprocal=switches.FP8_RECIPROCAL
        )
        want, ref = refs[rank]
        counts = ref.expert_counts.tolist()
        rows = [slice(None)] if mode == "normal" else [(e, slice(0, c)) for e, c in enumerate(counts)]
        problems = []
        if gather:
            scales = handle.recv_scales
            if not dequantize and (scales is None or scales.shape[0] != recv_x.shape[0]):
                problems.append(f"gather: recv_scales {scales!r:.60} for {recv_x.shape[0]} rows")
            elif not dequantize:
                handle.recv_scales = scales[handle.gather_rows.long()]
            recv_x, wrong = _gathered(recv_x, handle, ref)
            problems += wrong
        if not torch.equal(handle.expert_counts, ref.expert_counts) or handle.fp8 is not True:
            problems.append(f"counts {handle.expert_counts.tolist()} != {counts}")
        for at in rows:
            exact = dequantize_fp8(want[at], ref.recv_scales[at])
            if dequantize:
                problems += _bf16_problems(f"dequantized rows {at}", recv_x[at], exact)
            elif not torch.equal(recv_x[at].view(torch.uint8), want[at].view(torch.uint8)):
                problems.append(f"fp8 rows {at} differ")
            elif handle.recv_scales is None or not torch.equal(handle.recv_scales[at], ref.recv_scales[at]):
                problems.append(f"scales {at} differ")
        mine = recv_x if dequantize else dequantize_fp8(recv_x, handle.recv_scales, torch.bfloat16)
        out = triton_dist.ops.moe_combine(_experts(mine, handle.recv_expert), handle)
        ys = [_experts(dequantize_fp8(rx, h.recv_scales, torch.bfloat16), h.recv_expert) for rx, h in refs]
        partials = (config or MoeConfig()).combine_partials == "input"
        if not dequantize:  # the same ys as the reference's: its sums' bits
            if not any(torch.equal(out, want) for want in _combined(ys, [h for _, h in refs], rank, partials)):
                problems.append("combine differs")
        else:
            # Each rank's rows: the reference's bf16 (nearest even) or the interpreter's (truncated), 2^-7 of each
            # term at most, and a partial's rounding to bf16 may flip with them (2^-7 of it): within 2^-6 of the sum
            # of the terms' magnitudes.
            fp32 = [dataclasses.replace(h, dtype=torch.float32) for _, h in refs]
            exact = reference_combine(ys, fp32, _nearest if partials else None)[rank]
            bound = 2**-6 * reference_combine([y.abs() for y in ys], fp32)[rank] + 2e-2 * exact.abs() + 1e-2
            if out.shape != exact.shape or not bool(((out.float() - exact).abs() <= bound).all()):
                problems.append("combine of the dequantized rows differs")
    except Exception as error:  # noqa: BLE001 (recorded for the test)
        problems = [f"{type(error).__name__}: {error}"]
    return problems


def _overflow(rank: int, size: int) -> list[str]:
    """Every pair of every rank to one expert of the last rank, each token naming it twice (k = 2), at
    max_tokens_per_rank = T: the expert would need 2 * W * T rows of its W * T. The last rank keeps the first
    W * T, counts the other W * T in its status (check_status raises there, naming the capacity), combine still
    completes, and a normal dispatch after it works."""
    import triton_dist
    from triton_dist.ops.moe import MoeStatusError, check_status

    tokens, experts = 4, 4 * size
    x = torch.randn(tokens, HIDDEN, generator=torch.Generator().manual_seed(rank)).to(torch.bfloat16)
    idx = torch.full((tokens, 2), experts - 1, dtype=torch.int32)
    recv_x, handle = triton_dist.ops.moe_dispatch(x, idx, torch.ones(tokens, 2), experts, "low_latency", tokens)
    last = rank == size - 1
    problems = []
    if handle.status.tolist() != [0, 0, size * tokens if last else 0, 0]:
        problems.append(f"status {handle.status.tolist()}")
    if handle.expert_counts.tolist() != ([0, 0, 0, size * tokens] if last else [0, 0, 0, 0]):
        problems.append(f"counts {handle.expert_counts.tolist()}")
    try:
        check_status(handle)
        raised = ""
    except MoeStatusError as error:
        raised = str(error)
    if last != (f"low-latency capacity exceeded on rank {rank}: {size * tokens} (token, k) pairs" in raised):
        problems.append(f"check_status: {raised!r}")
    out = triton_dist.ops.moe_combine(recv_x, handle)
    if out.shape != x.shape:
        problems.append(f"combine shape {list(out.shape)}")
    recv_x, handle = triton_dist.ops.moe_dispatch(x, idx[:, :1].contiguous(), torch.ones(tokens, 1), experts)
    if handle.expert_counts.tolist() != ([0, 0, 0, size * tokens] if last else [0, 0, 0, 0]):
        problems.append(f"the next normal dispatch: counts {handle.expert_counts.tolist()}")
    triton_dist.ops.moe_combine(recv_x, handle)
    return problems


def _gathered(recv_x: torch.Tensor, handle: Any, ref: Any) -> tuple[torch.Tensor, list[str]]:
    """A ``layout="gather"`` dispatch's ``recv_x[handle.gather_rows]`` (what the expanded layout returns) and what
    is wrong with the layout itself: one row per received token, every row read by some pair row."""
    rows = handle.gather_rows
    problems = []
    if handle.layout != "gather" or rows is None or rows.dtype != torch.int32 or rows.shape != ref.recv_expert.shape:
        return recv_x, [f"layout {handle.layout!r}, gather_rows {rows!r:.60}"]
    if recv_x.shape[0] != ref.num_recv_tokens:
        problems.append(f"recv_x has {recv_x.shape[0]} rows for {ref.num_recv_tokens} received tokens")
    elif not torch.equal(rows.unique(), torch.arange(recv_x.shape[0], dtype=torch.int32)):
        problems.append(f"gather_rows {rows.tolist()} do not read every row of recv_x once or more")
    return recv_x[rows.long()], problems


class _PoisonedEmpty:
    """While entered, ``torch.empty`` returns tensors filled with a poison (0xA5 bytes: NaN-free garbage such as
    -1515870811 in int32), so an output a kernel leaves unwritten cannot hold last call's value by chance."""

    def __enter__(self) -> None:
        self.empty = torch.empty

        def poisoned(*args: Any, **kwargs: Any) -> torch.Tensor:
            tensor = self.empty(*args, **kwargs)
            if tensor.numel() and not tensor.is_pinned():
                tensor.reshape(-1).view(torch.uint8).fill_(0xA5)
            return tensor

        torch.empty = poisoned  # type: ignore[assignment]

    def __exit__(self, *exc: object) -> None:
        torch.empty = self.empty  # type: ignore[assignment]


def _outputs(recv_x: torch.Tensor, handle: Any, out: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every tensor a dispatch returns (recv_x, the handle's, its combine state) and its combine's output, as bytes."""
    tensors = {"recv_x": recv_x, "combine": out}
    for field in dataclasses.fields(handle):
        value = getattr(handle, field.name)
        if isinstance(value, torch.Tensor):
            tensors[field.name] = value
    for number, value in enumerate(handle.state):
        tensors[f"state{number}"] = value
    return {name: t.contiguous().reshape(-1).view(torch.uint8) for name, t in tensors.items()}


def _variants(rank: int, size: int) -> dict[str, list[str]]:
    """``VARIANT_CONFIGS`` against the default pipelined gather dispatch on the same fresh inputs (bf16, then fp8
    kept): every output and combine's, bit for bit; each config's outputs allocated poisoned."""
    import triton_dist
    from triton_dist.ops.moe.reference import dequantize_fp8

    record: dict[str, list[str]] = {}
    for fp8 in (False, True):
        xs, idxs, weights, experts = _case_inputs("variants", size, seed=11 + fp8, hidden=160 if fp8 else HIDDEN)
        got: dict[str, dict[str, torch.Tensor]] = {}
        for label, config in (("default", VARIANT_BASE), *((repr(c), c) for c in VARIANT_CONFIGS)):
            try:
                with _PoisonedEmpty():
                    recv_x, handle = triton_dist.ops.moe_dispatch(
                        xs[rank], idxs[rank], weights[rank], experts, fp8=fp8, config=config, layout="gather"
                    )
                    rows = handle.gather_rows.long()
                    y = dequantize_fp8(recv_x[rows], handle.recv_scales[rows], torch.bfloat16) if fp8 else recv_x[rows]
                    out = triton_dist.ops.moe_combine(_experts(y, handle.recv_expert), handle)
                got[label] = _outputs(recv_x, handle, out)
            except Exception as error:  # noqa: BLE001 (recorded for the test)
                record[f"variants/{'fp8/' if fp8 else ''}{label}"] = [f"{type(error).__name__}: {error}"]
        base = got.get("default", {})
        for label, outputs in got.items():
            if label == "default":
                continue
            differ = [name for name, t in outputs.items() if name not in base or not torch.equal(t, base[name])]
            record[f"variants/{'fp8/' if fp8 else ''}{label}"] = [f"{name} differs" for name in differ]
    return record


def _own_rows_in_push(rank: int, size: int) -> dict[str, list[str]]:
    """``switches.OWN_ROWS_IN_PUSH`` on and ``switches.EXPAND_OVERLAPS_PUSH`` off (``OWN_CASES``): the pipelined gather
    dispatch whose push stores this rank's own tokens' rows into ``recv_x`` itself (``SELF = 3``), and its combine,
    against the reference, outputs allocated poisoned; the settings restored after."""
    from triton_dist.ops.moe import switches

    record: dict[str, list[str]] = {}
    previous = switches.set_own_rows_in_push(True)
    overlapped = switches.set_expand_overlaps_push(False)  # the own rows alone
    try:
        for number, name in enumerate(OWN_CASES):
            with _PoisonedEmpty():
                problems = _case(rank, size, name, number, "normal", OWN_CONFIG, "gather")
            record[f"own_in_push/{name}#{number}/normal"] = problems
    finally:
        switches.set_own_rows_in_push(previous)
        switches.set_expand_overlaps_push(overlapped)
    return record


def _side_stream(rank: int, size: int) -> dict[str, list[str]]:
    """``SIDE_CASES``: the pipelined gather dispatch with ``switches.EXPAND_OVERLAPS_PUSH`` off (this rank's own rows
    stored by a second push launch, ``_self_push``), against the reference; the setting restored after."""
    from triton_dist.ops.moe import switches

    record: dict[str, list[str]] = {}
    previous = switches.set_expand_overlaps_push(False)
    try:
        for name in SIDE_CASES:
            number = CASES.index(name)
            record[f"side/gather/{name}#{number}/normal"] = _case(
                rank, size, name, number, "normal", PIPELINED, "gather"
            )
    finally:
        switches.set_expand_overlaps_push(previous)
    return record


def _overlap(rank: int, size: int) -> dict[str, list[str]]:
    """``switches.EXPAND_OVERLAPS_PUSH`` on (``OVERLAP_CASES``): the pipelined gather dispatch whose expand kernel runs
    beside the early push, waiting for each (wave, source) of it, and its combine, against the reference, outputs
    allocated poisoned; the setting restored after."""
    from triton_dist.ops.moe import switches

    record: dict[str, list[str]] = {}
    previous = switches.set_expand_overlaps_push(True)
    try:
        for number, name in enumerate(OVERLAP_CASES):
            if name in OVERLAP_AT_TWO and size != 2:
                continue
            with _PoisonedEmpty():
                problems = _case(rank, size, name, number, "normal", OVERLAP_CONFIG, "gather")
            record[f"overlap/{name}#{number}/normal"] = problems
        waves = switches.set_expand_waves(2)  # two route count programs a wave
        try:
            with _PoisonedEmpty():
                problems = _case(rank, size, "variants", len(OVERLAP_CASES), "normal", OVERLAP_CONFIG, "gather")
            record[f"overlap/waves2/variants#{len(OVERLAP_CASES)}/normal"] = problems
        finally:
            switches.set_expand_waves(waves)
        if size == 2:
            record |= _overlap_fp8(rank, size)
    finally:
        switches.set_expand_overlaps_push(previous)
    return record


def _overlap_fp8(rank: int, size: int) -> dict[str, list[str]]:
    """``OVERLAP_FP8``: the fp8 gather dispatch with ``switches.EXPAND_OVERLAPS_PUSH`` on and
    ``switches.FP8_OVERLAPS_PUSH`` / ``switches.FP8_NARROW_PUSH`` at their defaults (on), then both off (restored
    after), against the reference."""
    from triton_dist.ops.moe import op as moe_op
    from triton_dist.ops.moe import switches

    record: dict[str, list[str]] = {}
    for number, (name, defaults) in enumerate(OVERLAP_FP8):
        xs, idxs, weights, experts = _case_inputs("variants", size, seed=21 + number, hidden=160)
        inputs = ([x * 40 for x in xs], idxs, weights, experts)  # beyond e4m3's range unscaled: the scales matter
        phases: list[str] = []
        hook = moe_op.set_phase_hook(phases.append)
        previous = (switches.FP8_OVERLAPS_PUSH, switches.FP8_NARROW_PUSH)
        if not defaults:
            previous = (switches.set_fp8_overlaps_push(False), switches.set_fp8_narrow_push(False))
        try:
            with _PoisonedEmpty():
                problems = _fp8_call(rank, inputs, "normal", False, OVERLAP_CONFIG, True)
        finally:
            moe_op.set_phase_hook(hook)
            switches.set_fp8_overlaps_push(previous[0])
            switches.set_fp8_narrow_push(previous[1])
        beside = phases[:5] == ["start", "route", "push", "expand", "sync"]
        if beside != (name == "beside"):
            problems.append(f"phases {phases}: the expand {'not ' if name == 'beside' else ''}beside the push")
        if name == "expand-after" and phases[:4] != ["start", "route", "push", "sync"]:
            problems.append(f"phases {phases}: not the early push with the expand after it (both options off)")
        record[f"overlap/fp8/{name}#{number}/normal"] = problems
    return record


def _case(
    rank: int,
    size: int,
    name: str,
    number: int,
    mode: str,
    config: Any = None,
    layout: str = "expanded",
    distinct: bool = False,
) -> list[str]:
    """Case ``name`` (the ``number``-th of its list) in ``mode`` with ``config`` (a ``MoeConfig`` or None: the
    default) and ``layout``: what this rank's dispatch and combine got that the reference did not (combine with bf16
    or fp32 partials, ``config.combine_partials``). ``distinct``: also a problem if the case's bf16 and fp32 partials
    give the same sums (then it could not tell a combine ignoring ``combine_partials``)."""
    import triton_dist
    from triton_dist.ops.moe import reference_dispatch

    xs, idxs, weights, experts = _case_inputs(name, size, seed=number if name != "random" else 0)
    cap = max(max(x.shape[0] for x in xs), 1) if mode == "low_latency" else None
    try:
        recv_x, handle = triton_dist.ops.moe_dispatch(
            xs[rank], idxs[rank], weights[rank], experts, mode=mode, max_tokens_per_rank=cap, config=config,
            layout=layout,
        )  # fmt: skip
        refs = reference_dispatch(xs, idxs, weights, experts, mode=mode, max_tokens_per_rank=cap)
        problems = []
        if layout == "gather":
            recv_x, problems = _gathered(recv_x, handle, refs[rank][1])
        problems += _differences(recv_x, refs[rank][0], handle, refs[rank][1], mode)
        if handle.config is not config:
            problems.append(f"handle.config {handle.config!r} is not the dispatch's {config!r}")
        out = triton_dist.ops.moe_combine(_experts(recv_x, handle.recv_expert), handle)
        ys = [_experts(rx, h.recv_expert) for rx, h in refs]
        partials = (config or MoeConfig()).combine_partials == "input"
        wanted = _combined(ys, [h for _, h in refs], rank, partials)
        other = _combined(ys, [h for _, h in refs], rank, not partials) if distinct else []
        if distinct and any(torch.equal(a, b) for a, b in zip(wanted, other, strict=True)):
            problems.append("the case gives the same bf16 sums with bf16 and fp32 partials: it cannot tell them apart")
        if not any(torch.equal(out, want) for want in wanted):
            exact = wanted[0].float()
            worst = (out.float() - exact).abs().max().item() if out.shape == exact.shape else None
            problems.append(f"combine differs: shapes {list(out.shape)} / {list(exact.shape)}, max {worst}")
    except Exception as error:  # noqa: BLE001 (recorded for the test)
        problems = [f"{type(error).__name__}: {error}"]
    return problems


def _worker(out_dir: str) -> None:
    import torch.distributed as dist

    import triton_dist
    from triton_dist.ops.moe import MoeConfig

    dist.init_process_group("gloo")
    world = triton_dist.init(heap_size="16M", device="cpu")
    rank, size = world.rank, world.world_size
    record: dict[str, list[str]] = {}
    for number, name in enumerate(CASES):
        for mode in ("normal", "low_latency"):
            record[f"{name}#{number}/{mode}"] = _case(rank, size, name, number, mode, distinct=name == "k8")
        if name in GATHER_CASES[size] and CASES.index(name) == number:  # layout="gather": recv_x[gather_rows]
            record[f"gather/{name}#{number}/normal"] = _case(rank, size, name, number, "normal", layout="gather")
    record["bad_ids"] = _bad_ids(rank, size)
    for label, name in COMBINE_CASES[size]:
        for mode in ("normal", "low_latency"):
            number = CASES.index(name)
            with _PoisonedEmpty():
                problems = _case(rank, size, name, number, mode, COMBINE_CONFIGS[label], distinct=name == "k8")
            record[f"combine/{label}/{name}#{number}/{mode}"] = problems
    if size == 2:  # the fp8, capacity and chunked paths once (the emulation is slow; W is a run-time value)
        record |= _fp8(rank, size)
        record["overflow"] = _overflow(rank, size)
        for name in PIPELINED_CASES:
            number = CASES.index(name)
            for layout in LAYOUTS:
                key = f"unpipelined/{layout}/{name}#{number}/normal"
                record[key] = _case(rank, size, name, number, "normal", UNPIPELINED, layout)
        record |= _side_stream(rank, size)
        for number, name in enumerate(EARLY_CASES, start=len(CASES)):
            record[f"early/{name}#{number}/normal"] = _case(rank, size, name, number, "normal", PIPELINED)
        chunked = MoeConfig(whole_row=False)
        for name in CHUNKED_CASES:
            for mode in ("normal", "low_latency"):
                record[f"chunked/{name}#{CASES.index(name)}/{mode}"] = _case(
                    rank, size, name, CASES.index(name), mode, chunked
                )
        record |= _fp8(rank, size, chunked)
        record |= _fp8(rank, size, gather=True)
        record |= _fp8(rank, size, pipelined=True)
        record["gather/chunked/k8#2/normal"] = _case(rank, size, "k8", 2, "normal", chunked, "gather")
        # Two programs per SM: one under the emulation, but the config travels through dispatch and combine.
        record["programs2/random#0/normal"] = _case(rank, size, "random", 0, "normal", MoeConfig(programs_per_sm=2))
        record |= _variants(rank, size)
        record |= _own_rows_in_push(rank, size)
    record |= _overlap(rank, size)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(record))
    triton_dist.finalize()
    dist.barrier()
    dist.destroy_process_group()
    # Leave without the interpreter's teardown, where a gloo world's C++ destructors sometimes abort ("terminate
    # called without an active exception") after everything passed (test_runtime_world.py does the same).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.fixture(scope="module", params=[2, 3], ids=lambda n: f"{n}ranks")
def records(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, list[str]]]:
    ranks = request.param
    out = tmp_path_factory.mktemp(f"moe{ranks}")
    run_script(Path(__file__), ranks, [str(out)])
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(ranks)]


@pytest.mark.parametrize("mode", ["normal", "low_latency"])
def test_dispatch_and_combine_match_the_reference(records: list[dict[str, list[str]]], mode: str) -> None:
    for rank, record in enumerate(records):
        cases = {
            key: problems
            for key, problems in record.items()
            if key.endswith(f"/{mode}")
            and "#" in key
            and not key.startswith(
                (
                    "chunked/",
                    "programs2/",
                    "gather/",
                    "early/",
                    "unpipelined/",
                    "side/",
                    "own_in_push/",
                    "overlap/",
                    "combine/",
                )  # fmt: skip
            )
        }
        cases["bad_ids"] = record["bad_ids"]
        assert len(cases) == len(CASES) + 1
        if len(records) == 2:
            prefixes = (
                ("fp8/", "overflow", "early/", "unpipelined/", "side/") if mode == "normal" else ("fp8/", "overflow")
            )
            extra = {key: problems for key, problems in record.items() if key.startswith(prefixes)}
            early = [f"early/{name}#{n}/normal" for n, name in enumerate(EARLY_CASES, len(CASES))]
            early += [f"unpipelined/{lay}/{n}#{CASES.index(n)}/normal" for n in PIPELINED_CASES for lay in LAYOUTS]
            early += [f"side/gather/{n}#{CASES.index(n)}/normal" for n in SIDE_CASES]
            fixed = ["fp8/chunked/low_latency/dequantize", "fp8/chunked/normal", "fp8/gather/normal",
                     "fp8/gather/normal/dequantize", "fp8/low_latency/dequantize", "fp8/normal",
                     "fp8/pipelined/gather/normal", "overflow"]  # fmt: skip
            assert sorted(extra) == sorted(fixed + (early if mode == "normal" else []))
            chunked = {key: problems for key, problems in record.items() if key.startswith("chunked/")}
            assert len(chunked) == 2 * len(CHUNKED_CASES)
            cases |= extra | chunked | {"programs2": record["programs2/random#0/normal"]}
        if mode == "normal":
            gathered = {key: problems for key, problems in record.items() if key.startswith("gather/")}
            want = len(GATHER_CASES[len(records)]) + (1 if len(records) == 2 else 0)  # 2 ranks: chunked k8 too
            assert len(gathered) == want, sorted(gathered)
            cases |= gathered
        failed = {key: problems for key, problems in cases.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


def test_combine_options_match_the_reference(records: list[dict[str, list[str]]]) -> None:
    """Combine's options beside its defaults (``COMBINE_CASES``): ``MoeConfig(combine_partials="fp32")`` the
    reference's fp32 sums, ``combine_spread=False`` the same bits as the spread default (bf16 partials, each rank's
    rounded once, summed in fp32: the exact bits ``_combined`` expects), and both (the defaults before 2026-11-27)."""
    for rank, record in enumerate(records):
        got = {key: problems for key, problems in record.items() if key.startswith("combine/")}
        want = [f"combine/{label}/{name}#{CASES.index(name)}/{mode}" for label, name in COMBINE_CASES[len(records)]
                for mode in ("normal", "low_latency")]  # fmt: skip
        assert sorted(got) == sorted(want)
        failed = {key: problems for key, problems in got.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


def test_route_and_expand_options_match_the_default_bit_for_bit(records: list[dict[str, list[str]]]) -> None:
    """``MoeConfig(route_programs=..., expand_block=...)`` (``VARIANT_CONFIGS``): the same outputs as the default
    pipelined gather dispatch, bf16 and fp8, at 2 ranks (``_variants``)."""
    if len(records) != 2:
        pytest.skip("the options run at 2 ranks only (the emulation is slow)")
    for rank, record in enumerate(records):
        variants = {key: problems for key, problems in record.items() if key.startswith("variants/")}
        assert sorted(variants) == sorted(
            f"variants/{prefix}{config!r}" for prefix in ("", "fp8/") for config in VARIANT_CONFIGS
        ), sorted(variants)
        failed = {key: problems for key, problems in variants.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


def test_own_rows_stored_by_the_push_match_the_reference(records: list[dict[str, list[str]]]) -> None:
    """``switches.OWN_ROWS_IN_PUSH`` (``OWN_CASES``, 2 ranks): the push's one launch stores this rank's own rows into
    ``recv_x`` (allocated before the early push, or after the summary when there is none or it did nothing) and the
    gather dispatch and its combine match the reference exactly, every output allocated poisoned."""
    if len(records) != 2:
        pytest.skip("the option runs at 2 ranks only (the emulation is slow)")
    for rank, record in enumerate(records):
        own = {key: problems for key, problems in record.items() if key.startswith("own_in_push/")}
        assert sorted(own) == sorted(f"own_in_push/{name}#{n}/normal" for n, name in enumerate(OWN_CASES))
        failed = {key: problems for key, problems in own.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


def test_the_expand_beside_the_push_matches_the_reference(records: list[dict[str, list[str]]]) -> None:
    """``switches.EXPAND_OVERLAPS_PUSH`` (``OVERLAP_CASES``, 2 and 3 ranks): the push's wave flags and slot counts, and
    the expand kernel waiting for each (wave, source) beside it, give the gather dispatch and its combine the
    reference's results exactly, every output allocated poisoned, through the first calls, the overlap and a growth; at
    2 ranks fp8 rows kept with their scales too, with ``switches.FP8_OVERLAPS_PUSH`` on (the default) and off
    (``OVERLAP_FP8``)."""
    for rank, record in enumerate(records):
        got = {key: problems for key, problems in record.items() if key.startswith("overlap/")}
        want = [f"overlap/{name}#{n}/normal" for n, name in enumerate(OVERLAP_CASES)
                if len(records) == 2 or name not in OVERLAP_AT_TWO]  # fmt: skip
        want.append(f"overlap/waves2/variants#{len(OVERLAP_CASES)}/normal")
        if len(records) == 2:
            want += [f"overlap/fp8/{name}#{n}/normal" for n, (name, _) in enumerate(OVERLAP_FP8)]
        assert sorted(got) == sorted(want)
        failed = {key: problems for key, problems in got.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


if __name__ == "__main__":
    _worker(sys.argv[1])


@pytest.mark.parametrize("world", [2, 3, 4, 5])
def test_every_case_gives_inputs_to_every_rank_of_any_world(world: int) -> None:
    """The cases (here and in the GPU test's worker, which runs at every GPU of its machine) give each of ``world``
    ranks its x, ids and weights, with expert ids in [-1, E) and E a multiple of the world (the 4-GPU run of
    2026-11-27 stopped at 4 ranks: the case lists had 3 entries)."""
    for name in (*CASES, "large", "variants", "grow_combine", "grow_tokens", "k1"):
        xs, idxs, weights, experts = _case_inputs(name, world, 1, hidden=8)
        assert len(xs) == len(idxs) == len(weights) == world, name
        assert experts % world == 0, name
        for x, idx, w in zip(xs, idxs, weights, strict=True):
            assert idx.shape == w.shape and idx.shape[0] == x.shape[0], name
            assert idx.numel() == 0 or (int(idx.min()) >= -1 and int(idx.max()) < experts), name
