"""MoE dispatch / combine: the error type, the modes, the launch constants and the buffer sizes.

Experts are split contiguously over the ``W`` ranks: rank ``d`` holds experts ``[d * L, (d + 1) * L)``, ``L = E / W``
(``local_experts``). Nothing here needs a GPU or a world.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from triton_dist.ops.common.errors import OpInputError


class MoeError(OpInputError):
    """Bad input to ``moe_dispatch`` / ``moe_combine`` (shapes, dtypes, devices, an expert id out of range, a
    low-latency call over its capacity, ranks that disagree on H, dtype or the expert count)."""


class MoeStatusError(RuntimeError):
    """A device-side check of a dispatch failed (an expert id out of range found by the kernel), raised when the
    status is read: at normal mode's host synchronization, or by :func:`~triton_dist.ops.moe.check_status`."""


MODES = ("normal", "low_latency")
LAYOUTS = ("expanded", "gather")
"""``moe_dispatch``'s ``layout``: ``recv_x`` with one row per (token, local expert) pair (the default), or, in normal
mode, with each received token once and ``MoeHandle.gather_rows`` naming the row each pair reads."""
"""``normal``: the output sized by one host synchronization after the counts exchange (prefill, training);
``low_latency``: fixed buffers of ``max_tokens_per_rank``, no host synchronization (decode, CUDA graphs)."""

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
"""The dtypes of ``x`` (the payload); ``y`` in combine has ``x``'s dtype."""
INDEX_DTYPES = (torch.int32, torch.int64)
"""The dtypes of ``topk_idx``."""
WEIGHT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
"""The dtypes of ``topk_weights`` (the kernels and the reference use them as fp32)."""

MAX_RANKS = 64
"""The most ranks the kernels handle (the per-rank vectors of the layout kernel are padded to a power of two)."""
MAX_TOPK = 32
"""The most experts per token (``topk_idx.shape[1]``)."""

STATUS_BAD_EXPERT = 0
"""Index of the status word counting this rank's ``topk_idx`` entries outside ``[-1, E)`` (the kernels skip them)."""
STATUS_WORLD_BAD_EXPERT = 1
"""Index of the status word counting the whole world's bad ids (normal mode only: the counts exchange sees them)."""
STATUS_OVERFLOW = 2
"""Index of the status word counting the (token, k) pairs a low-latency dispatch dropped because an expert received
more than its ``W * max_tokens_per_rank`` rows (only possible when a token names one expert several times in its
``topk_idx`` row): those pairs are missing from ``recv_x`` and from combine's sums, and :func:`check_status` raises."""
STATUS_WORDS = 4
"""Length of the int32 status tensor of a dispatch (words ``STATUS_*``; word 3 reserved, zero)."""

FP8_GROUP = 128
"""Channels per fp8 scale: a token's row is quantized in groups of 128 consecutive channels (the last group may be
shorter), one fp32 scale per group."""
FP8_MAX = 448.0
"""The largest finite float8_e4m3fn value: each group is scaled so that its largest magnitude maps to it."""
FP8_AMAX_FLOOR = 1e-4
"""The smallest amax a group is scaled by (an all-zero group quantizes to zeros with scale ``1e-4 / 448``)."""
FP8_PUSH_WARPS = 16
"""Warps of the fp8 push kernel with ``MoeConfig(pipelined=True)`` (otherwise, and the other kernels: 4). Its
quantization is about 2000 instructions per thread per row at 4 warps (a division per element, the group maxima, the
rounding: one warp per scheduler, each instruction waiting for the last), which made the fp8 dispatch no faster than
bf16's on 2 x H100 (2026-11-27, 4096 tokens: 420.6 against 394.1 µs in the gather layout) although it moves half the
bytes; 16 warps split each row four times finer and give every scheduler four warps to switch between."""
FP8_DTYPE = torch.float8_e4m3fn
"""The dtype of fp8 payloads (NVIDIA's e4m3, sm_89 and later; the CPU emulation runs it too)."""

COPY_PROGRAMS = 512
"""The most programs of the push, expand and combine kernels (each strides over tokens); a plan launches
``MoeConfig.per_sm(mode)`` per SM (by default two in normal mode, one in low-latency mode; an H100 has 132 SMs)
up to this (the expand kernel in normal mode: ``EXPAND_PER_SM``)."""
NORMAL_PROGRAMS_PER_SM = 2
"""``MoeConfig.programs_per_sm`` of normal mode when the config leaves it None (low-latency mode: 1). On 2 x H100
(2026-11-27, 4096 tokens per rank) two programs per SM took the normal dispatch from 698.4 to 522.4 µs and its
combine from 806.4 to 643.2 µs; low-latency mode's graphed dispatch went from 36.2 to 39.7 µs, so it keeps one."""
EXPAND_PER_SM = 4
"""Programs per SM of the expand kernel with ``MoeConfig(pipelined=True)`` in normal mode on one node (GPUs; at least
the push's programs; under the CPU emulation and in low-latency mode the push's): its loop over received tokens is a
chain of dependent loads per token (the meta row, then the lookup table, then the stores), so one program per SM left
the expanded layout's expand at 265.6 µs and the gather layout's at 157.6 µs for 4096 tokens per rank on 2 x H100
(2026-11-27); the kernel uses 64 registers per thread or fewer at 4 warps, so four fit on an SM together (its
grid-stride loop needs every program resident)."""
BLOCK_H = 1024
"""Elements of the hidden dimension one program moves per step of the chunked loops (rows wider than
``MAX_ROW_BLOCK``, or ``MoeConfig(whole_row=False)``; 16-byte vectors when H is a multiple of 16)."""
ROUTE_PROGRAMS = 64
"""Programs of the route count kernel: each counts and places ``ceil(T / ROUTE_PROGRAMS)`` consecutive tokens, the
one-program route kernel turns their counts into prefixes, and push adds a token's program's prefix to its local
positions (so the positions are those of one serial pass in (token, k) order)."""
EMULATED_ROUTE_PROGRAMS = 4
"""Route count programs under the CPU emulation (the kernel uses no primitive, so Triton's interpreter runs its
programs one after the other): several, so the emulation tests the prefixes over programs."""
ROUTE_SCAN_VALUES = 16384
"""Count values the route kernel's prefix over the count programs' rows takes per step with more programs than
``ROUTE_PROGRAMS`` (``MoeConfig.route_programs``; 4096 otherwise): 64 rows of 256 experts, so 256 programs take 4
steps as the default 64 do (each step waits for its loads from L2), at ``ROUTE_WARPS`` warps (64 values a thread,
no spills on sm_90)."""
ROUTE_WARPS = 8
"""Warps of the route kernel whose prefix steps take more than 4096 values (``ROUTE_SCAN_VALUES``; otherwise 4)."""
MAX_ROUTE_PROGRAMS = 1024
"""The most route count programs ``MoeConfig(route_programs=...)`` takes."""
MAX_EXPAND_BLOCK = 64
"""The most received tokens per step ``MoeConfig(expand_block=...)`` takes (a [block, pow2(k)] tile per step)."""
ROUTE_BLOCK_T = 16
"""Tokens per step of the routing kernel's serial prefix at k = 8 (one step builds a [tokens * k, experts] one-hot;
``route_block_t``)."""
ROUTE_TOKENS = 4096
"""Tokens per rank the route count kernel's step is sized for (``route_block_t``): its programs take no step with more
than ``ROUTE_TOKENS / programs`` tokens, so at that many tokens every program takes one step or more, none masked."""
MAX_ROW_BLOCK = 16384
"""The widest row the default ``MoeConfig(whole_row=True)`` moves in one step (elements; 128 registers of fp32 per
thread at 4 warps): rows wider than it move in ``BLOCK_H`` chunks."""

COMBINE_PARTIALS = ("fp32", "input")
"""``MoeConfig.combine_partials``: the dtype combine's partials cross the links in (fp32, or ``y``'s dtype: the
default)."""
SPREAD_REDUCE_RANKS = 4
"""The most ranks whose partials ``MoeConfig(combine_spread=True)``'s reduce loads as one unrolled step (more: the
loop over ranks): at H = 7168 (BLOCK_H 8192, 4 warps) each rank's row is 64 fp32 registers per thread once widened."""


@dataclass(frozen=True)
class MoeConfig:
    """How ``moe_dispatch`` / ``moe_combine`` move rows (``moe_dispatch(..., config=MoeConfig(...))``; combine
    follows its dispatch's handle). The default is the layout measured fastest on GPUs.

    ``whole_row`` (default True): every copy loop moves a whole row per step (``BLOCK_H = max(128, next power of
    two of H)``, while that is at most ``MAX_ROW_BLOCK``; wider rows always move in ``BLOCK_H``-element chunks):
    the push kernel loads a token's row once, before any store, and stores it to every destination; expand loads a
    received row once and stores it to each of its local rows; combine's push loads its ``k`` row indices, weights
    and rows unconditionally (masked, no branch), so the loads of every row are in flight together. It beat the
    chunks on every row of the 2 x H100 run of 2026-11-27 (normal dispatch at 4096 tokens 1908 against 2409 µs,
    combine 1283 against 2577; results/2026-11-26-moe-analysis.md). ``whole_row=False`` forces the 1024-element
    chunks at any H (the same results, bit for bit), which the tests use to cover the wide-row path at small H.

    ``programs_per_sm`` (at most 8; default None: ``NORMAL_PROGRAMS_PER_SM`` = 2 in normal mode, 1 in low-latency
    mode, :meth:`per_sm`): programs of the push, expand and combine kernels per SM of the GPU
    (``COPY_PROGRAMS`` at most; 1 under the CPU emulation); more keep more rows in flight, at more flags per wait
    (each wait covers W x programs flags). ``bench/moe.py`` times 2 beside the default.

    ``pipelined`` (default True; normal mode on one node, elsewhere ignored; ``MoeConfig(pipelined=False)`` keeps the
    path before it, which ``bench/moe.py --only-dispatch`` times beside the default): the host's wait for the route
    kernel's summary overlaps the push (the push is launched before the wait, checks the buffer sizes itself and does
    nothing if they must grow, then goes again), the host polls the summary in pinned host memory instead of a copy and
    a stream synchronization, the expand kernel runs ``EXPAND_PER_SM`` programs per SM, ``layout="gather"``'s expand
    kernel copies the payload as one flat block in copy programs of its own (``switches.BULK_COPIERS_PER_SM``) beside
    the meta programs instead of row by row (and with ``switches.EXPAND_OVERLAPS_PUSH``, on by default, without fp8 -
    fp8 rows kept join with ``switches.FP8_OVERLAPS_PUSH``, on by default too, and dequantized never: this rank's own
    tokens skip the token buffer and the expand kernel runs beside the push), the expand kernel is launched from its
    outputs' addresses once its launch plan exists (their views made after it, off the GPU's critical path), and the fp8
    push runs 4 warps (``switches.FP8_NARROW_PUSH``; off, ``FP8_PUSH_WARPS``). Same results, bit for bit. The default
    since a 2 x H200 run (2026-11-27, ``bench/moe.py --only-dispatch``, 4096 tokens per rank, H 7168, top-8 of 256, two
    runs of the same code): the expanded layout's dispatch took 378.4 / 379.3 µs pipelined against 474.5 / 476.3 µs
    without, fp8 287.1 / 308.4 µs pipelined, and the whole ``bench/moe.py`` run had it faster at every size from 1 to
    16384 tokens (device µs 289 against 362 at 1 token, 167 / 205 at 128, 249 / 269 at 2048, 382 / 443 at 4096, 1418 /
    1538 at 16384); the gather layout with ``switches.EXPAND_OVERLAPS_PUSH`` at 8 waves took 224.3 / 225.3 µs (76% of
    the push all-gather's bandwidth), against 334.5 / 377.5 µs unpipelined and 357.1 / 383.6 µs pipelined without the
    overlap (bf16); fp8's gather dispatch with the overlap and the 4-warp push took 196.9 µs against 336.7 for the
    expand after the 16-warp push (2 x H200, 2026-11-27).
    """

    whole_row: bool = True
    programs_per_sm: int | None = None
    pipelined: bool = True
    route_programs: int | None = None
    """Programs of the route count kernel (a power of two in [1, ``MAX_ROUTE_PROGRAMS``]; None: ``ROUTE_PROGRAMS``;
    under the CPU emulation the same ratio to ``EMULATED_ROUTE_PROGRAMS``, at least 1 and at most 16). Each counts
    ``ceil(T / route_programs)`` tokens in steps of ``route_block_t`` tokens, one after the other, so more of them
    take fewer steps each (at 4096 tokens and k = 8: 4 steps of 16 tokens at 64, 1 at 256, 1 of 8 at 512) while the
    one-program route kernel's prefix over their rows takes more (``kernel_constexprs``' ``PB`` rows a step: 4 steps
    at 64 and 256, 8 at 512). Same results, bit for bit: the positions are those of one serial pass over the tokens
    whatever the split. An option until a GPU run measures it (``bench/moe.py --only-dispatch --route-programs
    128,256,512``)."""
    expand_block: int = 0
    """Received tokens whose meta the expand kernel writes per step where the pipelined gather layout copies the payload
    as one block (``op._bulk_copy``: one node, no dequantization); 0 (the default): one token per step, a chain of
    dependent loads (its meta row, then the lookup table) and then the stores, token after token; a power of two in
    [1, ``MAX_EXPAND_BLOCK``]: that many tokens' meta rows as the rows of one tile, their loads in flight together.
    Elsewhere ignored. Same results, bit for bit (each output word is written once, from the same values). An option
    until a GPU run measures it (``bench/moe.py --only-dispatch --expand-block 16``)."""

    combine_partials: str = "input"
    """The dtype of the partials combine's push sends to each token's home rank (``COMBINE_PARTIALS``): ``"input"``
    (the default: ``sum_k w_k * y_k`` of a token's rows on one rank computed in fp32, rounded to ``y``'s dtype, bf16 /
    fp16, and widened to fp32 at home before the sum, as the NCCL dispatcher of ``bench/moe.py`` and DeepEP do; fp32
    inputs are unchanged) or ``"fp32"`` (the partial stored in fp32 and summed in fp32 at home: the reference's bits,
    :func:`~triton_dist.ops.moe.reference_combine` without ``round_partial``, at twice the bytes). The bytes: at
    H = 7168, 4096 tokens per rank, top-8 of 256 experts on 2 ranks, each rank sends about 4080 partials to the other
    (a token misses a rank only when all 8 experts sit on the other one, 2 * 0.5^8 of the tokens): 117 MB of fp32,
    344 µs at the 339 GB/s per rank the push all-gather measured over NVLink on 2 x H200 (2026-11-27), 58 MB and
    172 µs in bf16; the reduce at home reads half the bytes as well (235 against 117 MB from HBM, about 59 against
    29 µs at 4 TB/s). Each rank's partial ``p_d`` is rounded once (to nearest even: within ``2^-8 |p_d|`` in bf16,
    ``2^-11 |p_d|`` in fp16), so the result is within ``2^-8 * sum_d |p_d|`` (bf16) of the fp32 sum before its own
    final rounding, which both settings share (``reference_combine(..., round_partial=lambda p:
    p.to(torch.bfloat16).float())`` gives the default's sums on GPUs).

    The default since the 2 x H200 run of 2026-11-27 17:42 UTC (commit 8ca72c0, ``bench/moe.py --tokens
    128,4096,16384``, H 7168, top-8 of 256; every row checked against the reference): combine's device µs with fp32
    partials / ``"input"`` / ``"input"`` and ``combine_spread`` were 33.6 / 30.5 / 30.8 at 128 tokens per rank,
    589.3 / 381.3 / 331.2 at 4096 and 2292.4 / 1447.2 / 1248.3 at 16384 in normal mode, and 38.2 / 29.7 / 29.6 in
    low-latency mode at 128 tokens, CUDA-graphed (4.86x the NCCL dispatcher's 143.9 µs with both options, 3.8x
    with fp32 partials). ``bench/moe.py`` times fp32 partials beside the default (``ours combine-partials=fp32``
    rows)."""
    combine_spread: bool = True
    """Two changes to combine's kernels, the same results bit for bit (default True since the 2 x H200 run of
    2026-11-27 described at ``combine_partials``: with bf16 partials 381.3 -> 331.2 µs at 4096 tokens per rank and
    1447.2 -> 1248.3 at 16384 in normal mode, 29.7 -> 29.6 µs low-latency graphed at 128; False, the kernels'
    order before it, is ``bench/moe.py``'s ``ours combine-partials=fp32, no spread`` row with fp32 partials).

    (1) The push's programs start spread over the received tokens: program ``p`` of ``P`` at the
    ``floor((p + 1) * n / (P + 1))``-th of its ``n`` slots, wrapping around (the CPU emulation's one program starts
    halfway), instead of all at their first. The slots are grouped by source rank, which is the partial's home, so in
    the grid-stride order every program works on rank 0's tokens first: on 2 ranks, rank 0 first stores only local
    partials (HBM; NVLink idle) and then only remote ones (NVLink: 117 MB of fp32 at 4096 tokens, about 344 µs at
    339 GB/s), rank 1 the other way round, so the two halves run one after the other instead of together (the 2 x
    H200 run of 2026-11-27: 594 µs in all, against about 344 + 59 µs for the link's and the reduce's bytes).
    Spread, every moment has local and remote partials in the ratio of the whole call, so the link is busy all along.

    (2) The reduce loads a token's partials of every rank (``W`` up to ``SPREAD_REDUCE_RANKS``, one node) in one
    unrolled step of masked loads, in flight together, instead of a loop of a ``tok_pos`` load, a branch and then the
    partial's load per rank (on 2 ranks two dependent round trips to HBM per token, 16 tokens per program at 4096
    tokens and 264 programs). A rank without the token adds a masked +0.0, which changes no fp32 sum (a sum started
    at +0.0 is never -0.0).

    Looked at and left as they are (4096 tokens per rank, H = 7168, top-8 of 256, 2 ranks): each rank receives
    32768 rows, so the push reads 470 MB of ``y`` from HBM (about 120 µs at 4 TB/s, beside the link's 172 µs of bf16
    partials once spread) and the reduce 117 MB of bf16 partials and writes 58 MB (about 44 µs): about 220 µs in
    all, the bar's 230 µs (75% of the all-gather's 339 GB/s) only with the link near the all-gather's rate. The
    push already issues all k = 8 rows' 64 16-byte loads per thread before its first store (``test_ops_moe_kernels``);
    264 programs (2 per SM) keep about 4 rows of 14 KB in flight each; ``BLOCK_H`` 8192 for 7168 masks 12.5% of the
    lanes but moves no extra bytes; a partial is one contiguous row (16-byte stores). The reduce's wait for every
    flag costs only the peers' skew: it is launched after this rank's push, and on 2 ranks all but 2^-7 of the
    tokens need the other rank's partial, so waiting per source would start almost nothing earlier."""

    def __post_init__(self) -> None:
        if self.combine_partials not in COMBINE_PARTIALS:
            raise MoeError(
                f"MoeConfig: combine_partials must be one of {list(COMBINE_PARTIALS)}, got {self.combine_partials!r}"
            )
        if not isinstance(self.combine_spread, bool):
            raise MoeError(f"MoeConfig: combine_spread must be True or False, got {self.combine_spread!r}")
        if not isinstance(self.whole_row, bool):
            raise MoeError(f"MoeConfig: whole_row must be True or False, got {self.whole_row!r}")
        if not isinstance(self.pipelined, bool):
            raise MoeError(f"MoeConfig: pipelined must be True or False, got {self.pipelined!r}")
        per_sm = self.programs_per_sm
        if per_sm is not None and (isinstance(per_sm, bool) or not isinstance(per_sm, int) or not 1 <= per_sm <= 8):
            raise MoeError(f"MoeConfig: programs_per_sm must be None or an int in [1, 8], got {per_sm!r}")
        route = self.route_programs
        if route is not None and not _power_of_two_in(route, MAX_ROUTE_PROGRAMS):
            raise MoeError(
                f"MoeConfig: route_programs must be None or a power of two in [1, {MAX_ROUTE_PROGRAMS}], got {route!r}"
            )
        block = self.expand_block
        if not (_power_of_two_in(block, MAX_EXPAND_BLOCK) or (type(block) is int and block == 0)):
            raise MoeError(
                f"MoeConfig: expand_block must be 0 or a power of two in [1, {MAX_EXPAND_BLOCK}], "
                f"got {self.expand_block!r}"
            )

    def route_count_programs(self, emulated: bool) -> int:
        """The route count kernel's programs: ``route_programs`` (None: ``ROUTE_PROGRAMS``) on GPUs; under the CPU
        emulation (``emulated``) ``EMULATED_ROUTE_PROGRAMS`` scaled by ``route_programs / ROUTE_PROGRAMS``, in
        [1, 16] (a power of two)."""
        if not emulated:
            return self.route_programs or ROUTE_PROGRAMS
        if self.route_programs is None:
            return EMULATED_ROUTE_PROGRAMS
        return min(16, max(1, EMULATED_ROUTE_PROGRAMS * self.route_programs // ROUTE_PROGRAMS))

    def per_sm(self, mode: str) -> int:
        """The copy kernels' programs per SM in ``mode``: ``programs_per_sm``, or when it is None the mode's
        default (``NORMAL_PROGRAMS_PER_SM`` in normal mode, 1 in low-latency mode)."""
        if self.programs_per_sm is not None:
            return self.programs_per_sm
        return NORMAL_PROGRAMS_PER_SM if mode == "normal" else 1

    def partial_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype combine's partials of a ``dtype`` payload cross the links in (``combine_partials``): fp32, or
        ``dtype`` itself with ``"input"``."""
        return dtype if self.combine_partials == "input" else torch.float32

    def row_block(self, hidden: int) -> int:
        """The ``BLOCK_H`` of a whole-row plan for rows of ``hidden`` elements, or 0 where the plan moves
        ``BLOCK_H`` chunks (``whole_row`` off, or the row wider than ``MAX_ROW_BLOCK``)."""
        block = max(FP8_GROUP, 1 << max(0, hidden - 1).bit_length())
        return block if self.whole_row and block <= MAX_ROW_BLOCK else 0


def _power_of_two_in(value: object, most: int) -> bool:
    """Whether ``value`` is an int (not a bool) and a power of two in ``[1, most]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return 1 <= value <= most and value & (value - 1) == 0


def fp8_groups(hidden: int) -> int:
    """Scales per token of an fp8 payload of ``hidden`` channels: ``ceil(hidden / FP8_GROUP)``."""
    return -(-hidden // FP8_GROUP)


def local_experts(num_experts: int, world_size: int) -> int:
    """Experts per rank, ``E / W``; raises :class:`MoeError` unless ``W`` divides ``E``."""
    if num_experts <= 0 or num_experts % world_size:
        raise MoeError(
            f"moe_dispatch: num_experts ({num_experts}) must be a positive multiple of the world size "
            f"({world_size}): experts are split contiguously, E / W per rank"
        )
    return num_experts // world_size


def capacity(needed: int) -> int:
    """Rows a normal-mode receive buffer is allocated for when ``needed`` do not fit: the next power of two (at
    least 64), so a growing workload reallocates a logarithmic number of times."""
    return max(64, 1 << max(0, needed - 1).bit_length())


@dataclass
class MoeHandle:
    """What a dispatch tells its receiver, and what ``moe_combine`` needs to send the results home.

    The receive layout (``recv_x`` and the per-row tensors below), per rank ``d`` holding local experts
    ``l = 0 .. L-1`` (global id ``d * L + l``):

    - **normal**: ``recv_x`` is [R, H], R = ``sum(expert_counts)``. Expert ``l``'s rows are
      ``[expert_offsets[l], expert_offsets[l] + expert_counts[l])``, ordered by (source rank, source token, k). A
      token routed to two local experts of this rank fills two rows (it crossed the link once).
    - **low_latency**: ``recv_x`` is [L, W * max_tokens_per_rank, H] (a grouped GEMM's layout); the per-row tensors
      are [L, W * max_tokens_per_rank]. Expert ``l``'s rows are ``recv_x[l, :expert_counts[l]]``, in the same order;
      ``expert_offsets[l]`` is ``l * W * max_tokens_per_rank`` (its first row in ``recv_x.view(-1, H)``). Rows past
      the count are not written by the kernels (the reference zeroes them; their meta is -1 / 0).

    Per row: ``recv_src_rank`` / ``recv_src_token`` (where the token came from), ``recv_expert`` (its global
    expert id), ``recv_topk_slot`` (its column k in the source's ``topk_idx``) and ``recv_weights`` (fp32, the
    router weight combine applies: the expert computes ``y`` unweighted).
    ``src_offsets[l, s]``: the first row of source ``s``'s tokens within expert ``l``'s rows (relative to the
    expert's first row). ``num_recv_tokens``: distinct tokens received, which is what crossed the links.

    ``status`` (int32 [STATUS_WORDS], kernels only): word ``STATUS_BAD_EXPERT`` counts ``topk_idx`` entries outside
    ``[-1, E)`` that this rank's dispatch skipped; normal mode raises :class:`MoeStatusError` at its host
    synchronization, low-latency mode leaves it for :func:`check_status` (a host synchronization of its own), as it
    does word ``STATUS_OVERFLOW``, the pairs dropped because an expert's rows exceeded the low-latency capacity.

    fp8 payloads (``moe_dispatch(..., fp8=True)``): ``fp8`` is True, and unless the dispatch dequantized on receipt
    ``recv_x`` is float8_e4m3fn and ``recv_scales`` holds, per row, the fp32 scale of each group of 128 channels
    (normal [R, G]; low-latency [L, W * max_tokens_per_rank, G]; G = ``ceil(H / 128)``): row value = ``fp8 value *
    scale`` (see ``reference.quantize_fp8``). ``dtype`` stays x's dtype, which combine's ``y`` must have.
    """

    mode: str
    rank: int
    world_size: int
    num_experts: int
    num_tokens: int
    """T of this rank: the rows combine returns."""
    hidden: int
    dtype: torch.dtype
    max_tokens_per_rank: int | None
    expert_counts: torch.Tensor
    expert_offsets: torch.Tensor
    src_offsets: torch.Tensor
    recv_src_rank: torch.Tensor
    recv_src_token: torch.Tensor
    recv_expert: torch.Tensor
    recv_weights: torch.Tensor
    recv_topk_slot: torch.Tensor
    """Per row: its ``k``, the column of the source token's ``topk_idx`` row that routed it here."""
    num_recv_tokens: int | torch.Tensor
    """An int (reference, normal mode) or a 0-d int32 device tensor (low-latency mode: no host synchronization)."""
    status: torch.Tensor | None = None
    state: Any = field(default=None, repr=False)
    """The kernels' own tensors (routing positions, combine rows, epoch, workspace); None in the reference."""
    fp8: bool = False
    """Whether the payload crossed the links as float8_e4m3fn with per-128-channel scales."""
    recv_scales: torch.Tensor | None = None
    """fp32 [rows..., G]: the scales of an fp8 ``recv_x`` (None unless ``fp8`` without dequantization)."""
    config: MoeConfig | None = None
    """The :class:`MoeConfig` the dispatch ran with (None: the default); its combine runs with it too."""
    layout: str = "expanded"
    """``"expanded"``: ``recv_x`` has one row per row above. ``"gather"`` (normal mode): ``recv_x`` is [N, H], N =
    ``num_recv_tokens``, each received token once (``recv_scales`` [N, G] likewise), and ``gather_rows`` says which
    row of it each row above reads: ``recv_x[gather_rows]`` is the expanded layout's ``recv_x``."""
    gather_rows: torch.Tensor | None = None
    """int32 [R] (``layout="gather"`` only, else None): the row of ``recv_x`` each expert-grouped row reads (pass it
    to ``ops.grouped_gemm(..., gather_rows=...)``)."""

    @property
    def local_experts(self) -> int:
        """Experts on each rank, ``E / W``."""
        return self.num_experts // self.world_size


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _check_tensor(name: str, value: Any, device: torch.device | None) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise MoeError(f"moe_dispatch: {name} must be a torch.Tensor, got {type(value).__name__}")
    if device is not None and value.device != device:
        raise MoeError(f"moe_dispatch: {name} is on {value.device}, but this rank's triton_dist device is {device}")
    return value


def _check_dtype(name: str, value: torch.Tensor, dtypes: tuple[torch.dtype, ...]) -> None:
    if value.dtype not in dtypes:
        allowed = ", ".join(_dtype_name(d) for d in dtypes)
        raise MoeError(f"moe_dispatch: {name} has dtype {_dtype_name(value.dtype)}; supported: {allowed}")


def check_inputs(
    x: Any,
    topk_idx: Any,
    topk_weights: Any,
    num_experts: Any,
    world_size: int,
    mode: Any = "normal",
    max_tokens_per_rank: Any = None,
    fp8: Any = False,
    device: torch.device | None = None,
    dequantize: Any = False,
    layout: Any = "expanded",
) -> None:
    """Raise :class:`MoeError` naming the first problem of one rank's dispatch arguments.

    The order: each argument a tensor; the devices (when ``device``, this rank's triton_dist device, is given);
    the dtypes; the shapes ([T, H], [T, k], [T, k], contiguous); the mode and the expert count (a positive
    multiple of ``world_size``); ``fp8`` and ``dequantize`` (bools; ``dequantize`` only with ``fp8``); ``layout``
    (one of :data:`LAYOUTS`; ``"gather"`` in normal mode only); in
    low-latency mode ``max_tokens_per_rank``, a positive int with T at most it. The expert ids' values are checked
    where they are read (the reference on the host, the kernels on the device: ``MoeHandle.status``).
    """
    tensors = {"x": x, "topk_idx": topk_idx, "topk_weights": topk_weights}
    for name, value in tensors.items():
        _check_tensor(name, value, device)
    _check_dtype("x", x, SUPPORTED_DTYPES)
    _check_dtype("topk_idx", topk_idx, INDEX_DTYPES)
    _check_dtype("topk_weights", topk_weights, WEIGHT_DTYPES)
    if x.dim() != 2:
        raise MoeError(f"moe_dispatch: x must be [tokens, hidden], got shape {list(x.shape)}")
    if topk_idx.dim() != 2 or topk_idx.shape[0] != x.shape[0]:
        raise MoeError(
            f"moe_dispatch: topk_idx must be [tokens, k] with x's {x.shape[0]} tokens, got {list(topk_idx.shape)}"
        )
    if topk_weights.shape != topk_idx.shape:
        raise MoeError(
            f"moe_dispatch: topk_weights must have topk_idx's shape {list(topk_idx.shape)}, "
            f"got {list(topk_weights.shape)}"
        )
    if not 1 <= topk_idx.shape[1] <= MAX_TOPK:
        raise MoeError(f"moe_dispatch: k (topk_idx.shape[1]) must be in [1, {MAX_TOPK}], got {topk_idx.shape[1]}")
    if x.shape[1] < 1:
        raise MoeError("moe_dispatch: x has hidden size 0")
    for name, value in tensors.items():
        if not value.is_contiguous():
            raise MoeError(f"moe_dispatch: {name} must be contiguous, got strides {value.stride()}")
    if mode not in MODES:
        raise MoeError(f"moe_dispatch: mode must be one of {list(MODES)}, got {mode!r}")
    if isinstance(num_experts, bool) or not isinstance(num_experts, int):
        raise MoeError(f"moe_dispatch: num_experts must be an int, got {num_experts!r}")
    if world_size > MAX_RANKS:
        raise MoeError(f"moe_dispatch: at most {MAX_RANKS} ranks, the world has {world_size}")
    local_experts(num_experts, world_size)
    if not isinstance(fp8, bool):
        raise MoeError(f"moe_dispatch: fp8 must be True or False, got {fp8!r}")
    if not isinstance(dequantize, bool):
        raise MoeError(f"moe_dispatch: dequantize must be True or False, got {dequantize!r}")
    if dequantize and not fp8:
        raise MoeError("moe_dispatch: dequantize=True is for fp8 payloads; pass fp8=True with it, or neither")
    if mode == "low_latency":
        if isinstance(max_tokens_per_rank, bool) or not isinstance(max_tokens_per_rank, int) or max_tokens_per_rank < 1:
            raise MoeError(
                f"moe_dispatch: low_latency mode needs max_tokens_per_rank, a positive int, got {max_tokens_per_rank!r}"
            )
        if x.shape[0] > max_tokens_per_rank:
            raise MoeError(
                f"moe_dispatch: {x.shape[0]} tokens exceed max_tokens_per_rank={max_tokens_per_rank} (the "
                "low-latency buffers hold that many per rank; raise it, or split the batch)"
            )
    elif max_tokens_per_rank is not None:
        raise MoeError("moe_dispatch: max_tokens_per_rank is for low_latency mode; normal mode sizes its buffers")
    if layout not in LAYOUTS:
        raise MoeError(f"moe_dispatch: layout must be one of {list(LAYOUTS)}, got {layout!r}")
    if layout == "gather" and mode != "normal":
        raise MoeError(
            "moe_dispatch: layout='gather' is for normal mode (low-latency mode's recv_x is already per expert)"
        )


def check_combine_input(y: Any, handle: Any, device: torch.device | None = None) -> None:
    """Raise :class:`MoeError` unless ``y`` fits ``handle``: a contiguous tensor of the dispatched dtype with one
    row per received row (normal: [R, H]; low-latency: [L, W * max_tokens_per_rank, H])."""
    if not isinstance(handle, MoeHandle):
        raise MoeError(f"moe_combine: handle must be the MoeHandle moe_dispatch returned, got {type(handle).__name__}")
    if handle.state is None:
        raise MoeError(
            "moe_combine: this handle has no device state (reference_dispatch made it); combine it with "
            "reference_combine, or pass the handle moe_dispatch returned"
        )
    if not isinstance(y, torch.Tensor):
        raise MoeError(f"moe_combine: y must be a torch.Tensor, got {type(y).__name__}")
    if device is not None and y.device != device:
        raise MoeError(f"moe_combine: y is on {y.device}, but this rank's triton_dist device is {device}")
    if y.dtype != handle.dtype:
        raise MoeError(
            f"moe_combine: y has dtype {_dtype_name(y.dtype)}, but the dispatch moved {_dtype_name(handle.dtype)}"
        )
    expected = [*handle.recv_src_rank.shape, handle.hidden]
    if list(y.shape) != expected:
        raise MoeError(f"moe_combine: y must have shape {expected} (one row per received row), got {list(y.shape)}")
    if not y.is_contiguous():
        raise MoeError(f"moe_combine: y must be contiguous, got strides {y.stride()}")


FLAG_REGION = MAX_RANKS
"""Flags per parity before the data flags: one count flag per rank (normal mode's exchange)."""


def pow2(n: int) -> int:
    """The smallest power of two at least ``n`` and 2 (the kernels' padded vector lengths)."""
    return max(2, 1 << max(0, n - 1).bit_length())


def flag_layout(programs: int) -> dict[str, int]:
    """The flag offsets of one parity: count flags at 0, data flags ``(source, program)`` at ``DATA_FLAGS``, combine
    flags at ``COMBINE_FLAGS``; ``FLAGS`` is the stride between the two parities."""
    data = FLAG_REGION
    combine = data + MAX_RANKS * programs
    return {"DATA_FLAGS": data, "COMBINE_FLAGS": combine, "FLAGS": combine + MAX_RANKS * programs}


def expand_table(world_size: int, num_experts: int) -> int:
    """int32 words of the expand kernel's per-program lookup table: ``pow2(W) x pow2(L)`` rows of the sources
    before each source per local expert, then ``pow2(L)`` expert starts, ``pow2(L)`` row counts and ``pow2(W)`` home
    slot bases (``L = E / W``)."""
    wp, lp = pow2(world_size), pow2(num_experts // world_size)
    return wp * lp + 2 * lp + wp


def route_block_t(topk: int, route_programs: int) -> int:
    """Tokens per step of the route count kernel: ``128 / pow2(k)`` (a [128, experts] one-hot per step), fewer where
    ``ROUTE_TOKENS`` tokens would leave a step partly empty (``MoeConfig(route_programs=512)`` and more: 8 tokens a
    program at 4096 tokens, so a step of 8, half the one-hot, instead of 16 with half of them masked)."""
    return max(1, min(128 // pow2(topk), ROUTE_TOKENS // route_programs))


def row_stride(world_size: int, num_experts: int) -> int:
    """The ``ROW`` of the counts matrix: ``[N per rank (pow2(W)) | C per expert (pow2(E)) | bad ids]``, padded to
    16 int32."""
    return (pow2(world_size) + pow2(num_experts) + 1 + 15) // 16 * 16


def kernel_constexprs(
    world_size: int,
    num_experts: int,
    topk: int,
    programs: int,
    scales: int = 0,
    dequantize: bool = False,
    row_block: int = 0,
    route_programs: int = ROUTE_PROGRAMS,
) -> dict[str, dict[str, int]]:
    """The compile-time constants of each kernel (without the mode's ``EXCHANGE`` / ``LOW_LATENCY`` and ``WORLD``).

    ``scales``: 0 for a payload in x's dtype, else the fp8 scales per token (``fp8_groups(H)``), which ride at the end
    of each token's meta row; ``dequantize``: the expand kernel writes x's dtype from an fp8 payload; ``row_block``:
    0 for the default ``BLOCK_H`` chunks, else ``MoeConfig.row_block(H)`` (a power of two, at least 128 and H): the
    copy kernels move whole rows (``WHOLE_ROW``); ``route_programs``: the route count kernel's grid (a power of two).
    Raises :class:`MoeError` for a ``row_block`` that is neither, or ``route_programs`` not a power of two."""
    if route_programs < 1 or route_programs & (route_programs - 1):
        raise MoeError(f"moe kernels: route_programs must be a power of two, got {route_programs}")
    if row_block and (row_block < FP8_GROUP or row_block & (row_block - 1) or row_block > MAX_ROW_BLOCK):
        raise MoeError(
            f"moe kernels: row_block must be 0 or a power of two in [{FP8_GROUP}, {MAX_ROW_BLOCK}], got {row_block}"
        )
    block, whole = (row_block, True) if row_block else (BLOCK_H, False)
    flags = flag_layout(programs)
    shared = {"WP": pow2(world_size), "EP": pow2(num_experts), "ROW": row_stride(world_size, num_experts)}
    kp = pow2(topk)
    # Count rows the route kernel scans per step: at most 4096 values, and at least 4 steps (GPUs: 64 programs of
    # 256 experts take 4 of 16 rows; the emulation's 4 programs 4 of 1, so it runs the carried prefix too). More
    # programs than ROUTE_PROGRAMS (MoeConfig.route_programs): up to ROUTE_SCAN_VALUES a step, at ROUTE_WARPS.
    most = ROUTE_SCAN_VALUES if route_programs > ROUTE_PROGRAMS else 4096
    scan_rows = min(max(1, route_programs // 4), max(1, most // shared["EP"]))
    return {
        "route_count": {"K": topk, "KP": kp, **shared, "BLOCK_T": route_block_t(topk, route_programs)},
        "route": {**shared, "FLAGS": flags["FLAGS"], "PARTS": route_programs, "PB": scan_rows},
        "push": {
            "K": topk,
            **shared,
            "MP": pow2(1 + 3 * topk),
            "FLAGS": flags["FLAGS"],
            "DATA_FLAGS": flags["DATA_FLAGS"],
            "PARTS": route_programs,
            "BLOCK_H": block,
            "WHOLE_ROW": whole,
            "SCALES": scales,
        },
        "expand": {
            "K": topk,
            "KP": kp,
            **shared,
            "LP": pow2(num_experts // world_size),
            "FLAGS": flags["FLAGS"],
            "DATA_FLAGS": flags["DATA_FLAGS"],
            "BLOCK_H": block,
            "WHOLE_ROW": whole,
            "SCALES": scales,
            "SP": pow2(scales),
            "DEQUANT": dequantize,
        },
        "combine_push": {
            "K": topk,
            "FLAGS": flags["FLAGS"],
            "COMBINE_FLAGS": flags["COMBINE_FLAGS"],
            "BLOCK_H": block,
            "WHOLE_ROW": whole,
        },
        "combine_reduce": {
            "FLAGS": flags["FLAGS"],
            "COMBINE_FLAGS": flags["COMBINE_FLAGS"],
            "PROGRAMS": programs,
            "BLOCK_H": block,  # a whole row: the loop over chunks runs once
        },
    }
