"""MoE dispatch / combine (issue 27): ours beside an NCCL ``all_to_all_single`` dispatcher, torch symm-mem's NVSHMEM
``all_to_all_vdev`` and the push all-gather's bandwidth, in one run.

    torchrun --nproc-per-node=2 bench/moe.py [--tokens 1,128,512,2048,4096,16384] [--reps 20] [--skip-nvshmem]
        [--layer-tokens 128,4096] [--layer-intermediate 2048] [--skip-layer]

The problem: H 7168 bf16, top-8 of 256 experts (E / W per rank), random routing (each token's 8 experts distinct and
uniform; the verification inputs also carry some ids of -1). Paths:

- **ours**: ``triton_dist.ops.moe_dispatch`` / ``moe_combine``, ``mode="normal"`` at every ``--tokens`` (one host
  synchronization per dispatch, by design), and ``mode="low_latency"`` at ``--ll-tokens`` per rank, both CUDA-graphed
  (``GRAPHED_CALLS`` calls per graph, the device µs per call; ``Bench.graphed_calls``) and eager; fp8 dispatch rows
  (dispatch only; fp8 rows with their scales, and dequantized on receipt) where ``moe_dispatch`` takes an fp8 option
  that works (otherwise the reason is printed and written).
- **ours chunked** (``--chunked``): the same calls with ``config=MoeConfig(whole_row=False)`` (1024-element copy
  steps, the default before whole rows), normal mode at every ``--tokens`` and low-latency mode graphed and eager,
  each row beside the default's. Its plan has buffers of its own: at 16384 tokens per rank and H 7168 both plans
  need about 2.8 GB each of the heap (``--heap 12G`` leaves room).
- **ours 2 programs/SM** (unless ``--skip-programs``): ``config=MoeConfig(programs_per_sm=2)``, normal mode at 4096
  tokens (or the largest ``--tokens`` below it; normal mode's default since 2026-11-27, so the same plan) and
  low-latency mode (twice its default's copy programs) graphed and eager, beside the default's rows.
- **ours combine-partials=fp32** and **ours combine-partials=fp32, no spread** (unless ``--skip-combine-options``):
  ``config=MoeConfig(combine_partials="fp32")`` (combine's partials cross the links in fp32, the reference's bits,
  twice the bytes of the default's bf16 partials, which are rounded once per rank and summed in fp32 at home as the
  NCCL dispatcher's) and with ``combine_spread=False`` too (the push's programs all starting at their first slot,
  the reduce's loop over ranks: the defaults before the 2 x H200 run of 2026-11-27, commit 8ca72c0, timed
  ``MoeConfig(combine_partials="input", combine_spread=True)`` fastest), normal mode at every ``--tokens`` and
  low-latency mode graphed and eager, beside the default's rows (the same plan: no buffers of their own). Their
  combine is checked against the reference within 8e-3 (fp32 partials; the default's, bf16 partials, within the
  NCCL dispatcher's tolerance), and their bars printed as ``RESULT bar <path> combine ...`` lines beside the
  default's (``combine_bars``).
- **ours unpipelined** and **ours gather unpipelined** (unless ``--skip-pipelined``):
  ``config=MoeConfig(pipelined=False)`` in normal mode at every ``--tokens``, expanded and gather layouts, with their
  phases: the path before the pipelined default (which "ours" is since 2026-11-27: the push before the host's wait,
  the summary polled in pinned memory, more expand programs, the gather layout's payload copied as one block by copy
  programs of the expand kernel, which runs beside the push: ``ops.moe.switches.EXPAND_OVERLAPS_PUSH``; fp8 rows kept
  with ``ops.moe.switches.FP8_OVERLAPS_PUSH``, on by default, at 4 warps: ``FP8_NARROW_PUSH``).
- **ours gather** (unless ``--skip-gather``): ``moe_dispatch(..., layout="gather")``, normal mode only, at every
  ``--tokens``, with its phases: the dispatch returns each received token once and ``handle.gather_rows`` (the
  expert GEMM reads through it: ``grouped_gemm(..., gather_rows=...)``), skipping the default's per-expert copy;
  its combine takes ``recv_x[gather_rows]`` (built once, untimed). fp8 too (``ours fp8 gather``).
- **NCCL**: :class:`A2ADispatcher` over ``dist.all_to_all_single``, written the usual way with the care ours gets:
  route on the device (tokens per destination rank and pairs per expert, no host sync), one counts exchange, one
  host synchronization for the split sizes, each token packed once per destination rank with its ids and weights in
  the same row (one payload exchange, staging buffers preallocated), then grouped by local expert on the receiver
  (rows in (source, token, k) order, as ours). Combine reduces each received token's rows (weights applied, fp32)
  into one partial per (token, rank) in x's dtype, sends it home, and sums the partials in fp32 there.
- **NVSHMEM**: the same dispatcher with the payload exchanges made by ``torch.ops.symm_mem.all_to_all_vdev`` on
  NVSHMEM symmetric buffers (the counts still over NCCL). NVSHMEM needs ``symm_mem.set_backend("NVSHMEM")`` before
  any symmetric allocation, and the backend cannot change afterwards, while triton_dist's heap is a symm-mem
  allocation of the ``CUDA`` backend: the two cannot share a process. So this phase runs last, in child processes
  (one per rank, their own process group), and a failure lands in the table as its reason.
- **the EP MoE layer** (unless ``--skip-layer``; issue 27's layer bar): ``triton_dist.layers.ExpertParallelMoE``
  (normal mode) with E / W experts of intermediate size ``--layer-intermediate`` per rank (random bf16 weights), a
  whole forward (dispatch -> gate/up grouped GEMM -> SiLU * up -> down grouped GEMM -> combine) at every
  ``--layer-tokens`` per rank: (1) the default layout, (2) ``dispatch_layout="gather"``, (3) the same weights through
  :class:`A2ADispatcher` (NCCL) + the same two ``ops.grouped_gemm`` calls + its NCCL combine. Before timing, at each
  size, (2) and (3) are checked against (1), and at the smallest size all three against a dense fp32 torch reference
  (every expert's tokens through its weights, summed over the ranks). The bar: (3)'s device µs / (1)'s >= 1.5.
  Beside them: (4) ``layer: grouped GEMMs only``: the layer's expert compute alone (gate/up grouped GEMM, SiLU * up,
  down grouped GEMM, :func:`expert_gemms`) on ours' receive layout, dispatched once outside the timing (checked:
  combined, against (1)); (3)'s µs / (4)'s is the bound, the most any dispatcher can reach with this GEMM, printed
  beside the bar. (5) at ``--layer-tokens`` <= ``--ll-tokens``: ``layer: ours low-latency (graphed)``, the layer
  with ``mode="low_latency", max_tokens_per_rank=--ll-tokens``, one forward per CUDA graph (captured on empty
  routing, replayed on these inputs; checked against (1) first); host µs: its eager forward.
- **push all-gather**: ``examples/allgather_push.py``'s kernel, a shard of ``--ag-tokens`` x H per rank; its
  per-rank bandwidth (bytes each rank sends to its peers / µs) is the bar for normal mode at 4096 tokens.

Per row: dispatch and combine µs three ways (max over ranks of the median of ``--reps`` >= 20 calls):

- **device**: CUDA events around one call, a device barrier across ranks before each (``rt.barrier_on_device``;
  an NCCL one-element all-reduce in the NVSHMEM phase); a combine's dispatch runs before its barrier, untimed. The
  low-latency graphed rows instead: µs per call in CUDA graphs of ``GRAPHED_CALLS`` calls, what a model's graphed step
  sees (one graph launch, many ops): dispatch = ``testing.timing.graphed_us`` of ``GRAPHED_CALLS`` dispatches in one
  graph / ``GRAPHED_CALLS``; combine = that of ``GRAPHED_CALLS`` dispatch + combine steps in one graph, minus the
  dispatch's (combines of one handle cannot repeat: ``Bench.graphed_calls``). The one-call graphs' device µs (events
  around one replay after a device barrier, the graph's launch on the GPU included) are kept beside them
  (``ONE_CALL`` columns, a table of their own);
- **from idle**: events around one call after a host synchronize and a ``dist.barrier`` (the host path included);
- **host**: CPU µs to enqueue one call while the GPU is busy (``testing.host_us``); a call that synchronizes with
  the host (normal-mode dispatch, ours and the baselines) has none, nor does the NVSHMEM phase. Host µs of a
  combine repeat one dispatch's combine (the host work does not depend on the data).

Phases of ours' normal dispatch at every ``--tokens``: CUDA events at the points ``ops.moe.op.set_phase_hook`` names
(route kernels / push / what the host's wait for the summary and its allocations add / expand, the pipelined gather
layout's block copy included), after the same GPU spin and device barrier as the device timing (``Bench.phases``),
the median of each interval over ``--reps`` calls, max over ranks, printed as ``RESULT ours normal T=... dispatch
phases`` lines and kept as notes.

``--only-layer``: only the EP MoE layer's rows and its bar (results files written as usual).

``--only-dispatch`` (a minute or two): only ours' normal dispatch, bf16 and fp8, expanded and gather layouts (the
default config: pipelined, and in the gather layout ``ops.moe.switches.EXPAND_OVERLAPS_PUSH``'s expand beside the push
at ``EXPAND_WAVES``; its phases are route, push, expand = how long the expand ran after the push ended, sync), each also
with ``MoeConfig(pipelined=False)`` (``... unpipelined``; unless ``--skip-pipelined``, which leaves out the option rows
below too), each checked once against the reference, then its device µs and phases at ``--tokens`` (default 1 and
4096), the push all-gather and the two dispatch bars (gather at 75% of the all-gather's bandwidth; fp8 1.6x faster than
bf16); RESULT lines only, no results files. Beside the gather rows, the default without the overlap: ``ours gather
side-stream`` (neither ``EXPAND_OVERLAPS_PUSH`` nor ``OWN_ROWS_IN_PUSH``: this rank's own rows stored by a push launch
on a side stream), ``ours gather own-in-push`` (``OWN_ROWS_IN_PUSH`` alone: by the push's one launch), and beside ``ours
fp8 gather`` (fp8 rows kept: by default the expand beside the 4-warp push, ``ops.moe.switches.FP8_OVERLAPS_PUSH`` and
``FP8_NARROW_PUSH``) the fp8 push's options (``FP8_PUSH_ROWS``: ``... expand-after``, both off, the default before
2026-11-27; ``... overlap wide``, the overlap at ``FP8_PUSH_WARPS``; ``... division``,
``ops.moe.switches.FP8_RECIPROCAL`` off; ``... prequantized``, ``ops.moe.switches.FP8_PREQUANTIZE``; and a pair), each
with its speed against the default and its fp8 bar;
``--expand-waves 8,16`` adds the default at those waves (``ours gather overlap N waves``,
``ops.moe.switches.set_expand_waves``). With ``--route-programs 128,256`` and / or ``--expand-block 16`` it also times
the gather dispatch (bf16 and fp8) with ``MoeConfig(route_programs=R)``, ``MoeConfig(expand_block=B)`` and each pair of
both (``option_configs``) beside the default, in the same run: their verification, totals, phases, speed against that
default and bars.

``--only-combine`` (a minute): only ours' normal combine (the default config, the experts the identity: ``y`` =
``recv_x``) at ``--tokens`` (default 128, 512, 1024, 2048 and 4096: the crossover of ``ops.moe.switches.COMBINE_AUTO``),
beside ``ours reduce-overlap`` (``ops.moe.switches.REDUCE_OVERLAPS_PUSH``: the reduce kernel beside the push, on its
wave flags, at ``COMBINE_WAVES`` and ``COMBINE_WAVE_MIN_SLOTS``), ``ours reduce-overlap own-partials`` (with
``ops.moe.switches.OWN_PARTIALS_IN_REDUCE``: the reduce sums this rank's own partials itself) and ``ours reduce-overlap
own-partials all-waves`` (that with ``COMBINE_WAVE_MIN_SLOTS`` 0: every pair all its waves, as before it), ``...
own-partials by-programs`` (``COMBINE_WAVES_BY_PROGRAMS``: a pair's fewest waves of at most one slot per program) and
``... own-partials again`` (the own-partials row once more, after those two; ``--combine-waves 4,16`` adds the
reduce-overlap, own-partials and by-programs rows at those waves), each checked once against the reference at
``--ll-tokens`` per rank and at every size against the identity expert's closed form, then its device µs (the
dispatch before each call untimed) and phases (``Bench.combine_phases``: push, then reduce = how long the reduce ran
after the push ended), the push all-gather and the bar (normal combine at 4096 tokens >= 75% of the all-gather's
bandwidth, bf16 bytes); RESULT lines only, no results files.

GB/s per rank: tokens this rank sends to other ranks (once per destination rank) x H x 2 bytes / device µs, the
same count for combine (what crosses the links at x's dtype; ours moves bf16 partials back by default, fp32 ones in
the ``combine-partials=fp32`` rows). Every path is checked once against ``triton_dist.ops.moe.reference_*`` before
timing, and at every size ours, NCCL and NVSHMEM against the closed form of an identity expert (combine = x * sum of
the valid weights). Writes ``bench/results/moe_<W>x<GPU>.md``, ``.json`` and ``.png`` (``--out-dir``, ``--tag``).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch.nn import functional

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from _common import RESULTS, describe_machine, markdown_table, panel_chart, run_date, write_json  # noqa: E402

from triton_dist.ops.moe import MoeConfig, reference_combine, reference_dispatch  # noqa: E402

TOKENS = (1, 128, 512, 2048, 4096, 16384)
HIDDEN, EXPERTS, TOPK = 7168, 256, 8
LL_TOKENS = 128
GRAPHED_CALLS = 10
"""Calls per CUDA graph in the low-latency graphed rows' device µs (``Bench.graphed_calls``): a model's graphed step
launches one graph of many ops, so each op's time per call in a graph of several is what it pays; one call per graph
adds the graph's launch on the GPU to every call (the default combine: 29.6 µs in one-call graphs, 25.0 eager, on 2 x
H200, 2026-11-27)."""
ONE_CALL = "1-call graph"
"""The suffix of the low-latency graphed rows' columns that keep the one-call graphs' device µs (``dispatch device
1-call graph``: events around one replay of a graph of one call after a device barrier)."""
QUICK_TOKENS = (1, 4096)
"""``--only-dispatch``'s default ``--tokens``."""
NONE_RATE = 0.03
"""Share of the verification inputs' ids set to -1 (no expert)."""
OURS, NCCL, NVSHMEM, FP8 = "ours", "NCCL all_to_all_single", "NVSHMEM all_to_all_vdev", "ours fp8"
CHUNKED = "ours chunked"
"""The path label of ``MoeConfig(whole_row=False)``'s rows (ours with 1024-element copy steps)."""
PER_SM2 = "ours 2 programs/SM"
"""The path label of ``MoeConfig(programs_per_sm=2)``'s rows (normal mode's default; twice low-latency mode's)."""
GATHER = "ours gather"
"""The path label of ``moe_dispatch(..., layout="gather")``'s rows (normal mode: each received token once, no
per-expert copy; ``handle.gather_rows`` for the expert GEMM)."""
OWN_IN_PUSH = "own-in-push"
"""``--only-dispatch``: the suffix of the gather row with ``ops.moe.switches.OWN_ROWS_IN_PUSH`` on and
``EXPAND_OVERLAPS_PUSH`` off (this rank's own tokens' rows stored into ``recv_x`` by the push's one launch, not by a
second launch on a side stream, and the expand after the push), and the key of its options that says so
(``dispatch_with``)."""
OVERLAP = "overlap"
"""``--only-dispatch``: the key of a row's options that sets ``ops.moe.switches.EXPAND_OVERLAPS_PUSH`` for its calls
(the default: on; an int: on at that many waves; ``dispatch_with``), and the suffix of the gather rows at other waves
and of the fp8 gather rows with ``FP8_OVERLAP`` at 16 warps (``WIDE``)."""
FP8_OVERLAP = "fp8-overlap"
"""``--only-dispatch``: the key of a row's options that sets ``ops.moe.switches.FP8_OVERLAPS_PUSH`` for its calls (on by
default: fp8 rows kept join the expand beside the push; off: the expand after the push; ``dispatch_with``)."""
FP8_RECIPROCAL = "fp8-reciprocal"
"""``--only-dispatch``: the key of a row's options that sets ``ops.moe.switches.FP8_RECIPROCAL`` for its calls (on by
default: the fp8 push multiplies each value by 448 / amax, one division per group; off: a division per value;
``dispatch_with``)."""
FP8_NARROW = "fp8-narrow"
"""``--only-dispatch``: the key of a row's options that sets ``ops.moe.switches.FP8_NARROW_PUSH`` for its calls (on by
default: the fp8 push at 4 warps, so two of its programs per SM fit beside the expand; off: ``FP8_PUSH_WARPS``;
``dispatch_with``)."""
FP8_PREQUANTIZE = "fp8-prequantize"
"""``--only-dispatch``: the key of a row's options that sets ``ops.moe.switches.FP8_PREQUANTIZE`` for its calls (an
option, off by default: the rows quantized by a kernel of their own beside the route kernels; ``dispatch_with``)."""
EXPAND_AFTER = "expand-after"
"""``--only-dispatch``: the suffix of the fp8 gather rows with ``FP8_OVERLAPS_PUSH`` and ``FP8_NARROW_PUSH`` off (the
expand after the 16-warp push: fp8's default before 2026-11-27)."""
WIDE = f"{OVERLAP} wide"
"""``--only-dispatch``: the suffix of the fp8 gather rows with ``FP8_OVERLAPS_PUSH`` on and ``FP8_NARROW_PUSH`` off (the
expand beside the push at ``FP8_PUSH_WARPS``)."""
FP8_PUSH_ROWS = {
    EXPAND_AFTER: {FP8_OVERLAP: False, FP8_NARROW: False},
    WIDE: {FP8_OVERLAP: True, FP8_NARROW: False},
    "division": {FP8_RECIPROCAL: False},
    "prequantized": {FP8_PREQUANTIZE: True},
    "prequantized division": {FP8_PREQUANTIZE: True, FP8_RECIPROCAL: False},
    f"{EXPAND_AFTER} prequantized": {FP8_OVERLAP: False, FP8_NARROW: False, FP8_PREQUANTIZE: True},
}
"""``--only-dispatch``: the fp8 push's option rows beside ``ours fp8 gather`` (the default: ``FP8_OVERLAPS_PUSH`` and
``FP8_NARROW_PUSH`` and ``FP8_RECIPROCAL`` on), by suffix: the first two off (``EXPAND_AFTER``, the default before
2026-11-27), the overlap at 16 warps (``WIDE``), the default with ``FP8_RECIPROCAL`` off (the division per value, the
default before session 30), the default with ``FP8_PREQUANTIZE``, with the division too, and prequantized without the
overlap (docs/design.md, "fp8 dispatch at 4096 tokens")."""
SIDE_STREAM = "side-stream"
"""``--only-dispatch``: the suffix of the gather row with neither ``EXPAND_OVERLAPS_PUSH`` nor ``OWN_ROWS_IN_PUSH``
(the own rows stored by a push launch on a side stream: the pipelined default before the overlap)."""
UNPIPELINED, UNPIPELINED_GATHER = f"{OURS} unpipelined", f"{GATHER} unpipelined"
"""The path labels of ``MoeConfig(pipelined=False)``'s rows (normal mode, expanded and gather layouts): the path
before the pipelined default (``ops.moe.config.MoeConfig``), timed beside it."""
COMBINE_FP32, COMBINE_FP32_NO_SPREAD = f"{OURS} combine-partials=fp32", f"{OURS} combine-partials=fp32, no spread"
"""The path labels of combine's options beside its defaults (``MoeConfig(combine_partials="input",
combine_spread=True)``, ``OURS``): ``MoeConfig(combine_partials="fp32")``, and with ``combine_spread=False`` too (the
defaults before the 2 x H200 run of 2026-11-27)."""
COMBINE_PATHS = (COMBINE_FP32, COMBINE_FP32_NO_SPREAD)
REDUCE_OVERLAP = f"{OURS} reduce-overlap"
"""``--only-combine``: the path label of the combine with ``ops.moe.switches.REDUCE_OVERLAPS_PUSH`` on (the reduce
kernel beside the push, on its wave flags), timed beside the default's (off)."""
OWN_PARTIALS = "own-partials"
"""``--only-combine``: the suffix of the reduce-overlap rows with ``ops.moe.switches.OWN_PARTIALS_IN_REDUCE`` on too
(the reduce sums this rank's own tokens' partials itself; the push stores only the other ranks')."""
ALL_WAVES = "all-waves"
"""``--only-combine``: the suffix of the own-partials row with ``ops.moe.switches.COMBINE_WAVE_MIN_SLOTS`` 0 (every
(home, holder) pair ``COMBINE_WAVES`` waves, however few its slots)."""
BY_PROGRAMS = "by-programs"
"""``--only-combine``: the suffix of the own-partials rows with ``ops.moe.switches.COMBINE_WAVES_BY_PROGRAMS`` on (a
pair's fewest waves of at most one slot per program: the last wave, which the reduce sums after the push, one token
per reduce program)."""
AGAIN = "again"
"""``--only-combine``: the suffix of the own-partials row timed once more after the ``all-waves`` and ``by-programs``
rows (how much the same setting moves between two places in one run)."""
AUTO = f"{OURS} auto"
"""``--only-combine``: the label of the combine with ``ops.moe.switches.COMBINE_AUTO`` on (the default since session
29), beside ``ours`` with it off (push, then reduce) and the reduce-overlap rows (it off too)."""
COMBINE_TOKENS = (128, 512, 1024, 2048, 4096)
"""``--only-combine``'s default ``--tokens``: the sizes ``ops.moe.switches.COMBINE_AUTO_MIN_SLOTS`` is set from."""
LAYER_OURS, LAYER_GATHER = "layer: ours", "layer: ours gather"
LAYER_NCCL = "layer: NCCL dispatcher + same GEMM"
"""The path labels of the EP MoE layer's rows (mode ``"layer"``): ``ExpertParallelMoE`` with the default layout,
with ``dispatch_layout="gather"``, and the same weights through :class:`A2ADispatcher` + ``ops.grouped_gemm``."""
LAYER_PATHS = (LAYER_OURS, LAYER_GATHER, LAYER_NCCL)
LAYER_GEMMS = "layer: grouped GEMMs only"
"""The row of the layer's expert compute alone (both grouped GEMMs and SiLU * up on ours' receive layout, dispatched
once outside the timing): ``LAYER_NCCL``'s µs / its µs bounds what any dispatcher can reach with this GEMM."""
LAYER_LL = "layer: ours low-latency (graphed)"
"""The row of ``ExpertParallelMoE(mode="low_latency", max_tokens_per_rank=--ll-tokens)``, one forward per CUDA graph,
at every ``--layer-tokens`` up to that capacity."""
LAYER_ROWS = (*LAYER_PATHS, LAYER_LL, LAYER_GEMMS)
"""Every layer row's path, in the table's and the chart's order."""
LAYER_TOKENS = (128, 4096)
LAYER_INTERMEDIATE = 2048
LAYER_BAR = 1.5
"""Issue 27: the layer >= 1.5x faster than the NCCL dispatcher with the same grouped GEMM (device µs)."""
CHUNK_ELEMENTS = 1 << 27
"""Elements of fp32 a baseline's weighted sum converts at once (bounds its temporaries at 512 MiB)."""
NVSHMEM_TIMEOUT_S = 120


# --- arguments ---------------------------------------------------------------------------------------------------


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from error
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive ints, got {text!r}")
    return sorted(set(values))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring); raises ``SystemExit`` (argparse) on a bad value."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tokens", type=_positive_ints, default=list(TOKENS), help="normal mode: tokens per rank")
    parser.add_argument("--ll-tokens", type=int, default=LL_TOKENS, help="low-latency mode: tokens per rank")
    parser.add_argument("--hidden", type=int, default=HIDDEN)
    parser.add_argument("--experts", type=int, default=EXPERTS)
    parser.add_argument("--topk", type=int, default=TOPK)
    parser.add_argument("--ag-tokens", type=int, default=4096, help="push all-gather shard: this many tokens x H")
    parser.add_argument("--reps", type=int, default=20, help="timed calls per measurement (median; >= 20)")
    parser.add_argument("--heap", default="8G", help="triton_dist's symmetric heap per rank")
    parser.add_argument("--skip-nvshmem", action="store_true", help="leave out the NVSHMEM all_to_all_vdev phase")
    parser.add_argument("--chunked", action="store_true", help="also time MoeConfig(whole_row=False) (chunked rows)")
    parser.add_argument("--skip-programs", action="store_true", help="leave out the MoeConfig(programs_per_sm=2) rows")
    parser.add_argument("--skip-gather", action="store_true", help="leave out the layout='gather' rows")
    parser.add_argument("--skip-layer", action="store_true", help="leave out the EP MoE layer rows")
    parser.add_argument("--skip-combine-options", action="store_true",
                        help="leave out combine's option rows (MoeConfig(combine_partials='fp32'), and with "
                        "combine_spread=False: the defaults before 2026-11-27)")  # fmt: skip
    parser.add_argument(
        "--skip-pipelined",
        action="store_true",
        help="leave out the MoeConfig(pipelined=False) rows (--only-dispatch: its option rows too)",
    )
    parser.add_argument("--layer-tokens", type=_positive_ints, default=list(LAYER_TOKENS),
                        help="the EP MoE layer: tokens per rank")  # fmt: skip
    parser.add_argument("--layer-intermediate", type=int, default=LAYER_INTERMEDIATE,
                        help="the EP MoE layer: each expert's intermediate size")  # fmt: skip
    parser.add_argument("--nvshmem-timeout", type=int, default=NVSHMEM_TIMEOUT_S, help="seconds for that phase")
    parser.add_argument("--out-dir", default=str(RESULTS))
    parser.add_argument("--tag", default="", help="results file suffix (default: <W>x<GPU>)")
    parser.add_argument("--nvshmem-child", default="", help=argparse.SUPPRESS)  # internal: the NVSHMEM phase
    parser.add_argument("--only-dispatch", action="store_true",
                        help="only ours' normal dispatch (bf16 / fp8, expanded / gather): totals and phases at "
                        f"--tokens (default {','.join(map(str, QUICK_TOKENS))}), and the push all-gather; no "
                        "results files")  # fmt: skip
    parser.add_argument("--only-combine", action="store_true",
                        help="only ours' normal combine, the default and with "
                        "ops.moe.switches.REDUCE_OVERLAPS_PUSH: totals and phases at --tokens (default "
                        f"{','.join(map(str, COMBINE_TOKENS))}), and the push all-gather; no results "
                        "files")  # fmt: skip
    parser.add_argument(
        "--combine-waves",
        type=_positive_ints,
        default=[],
        help="--only-combine: also time the reduce-overlap row with ops.moe.switches.set_combine_waves(N) for each N",
    )
    parser.add_argument("--only-layer", action="store_true",
                        help="only the EP MoE layer rows (and their bar); writes the results files")  # fmt: skip
    parser.add_argument("--route-programs", type=_positive_ints, default=[],
                        help="--only-dispatch: also time the pipelined gather dispatch with MoeConfig(route_programs="
                        "R) for each R (powers of two), beside the default")  # fmt: skip
    parser.add_argument(
        "--expand-block",
        type=_positive_ints,
        default=[],
        help="--only-dispatch: also time it with MoeConfig(expand_block=B) for each B (powers of two)",
    )
    parser.add_argument(
        "--expand-waves",
        type=_positive_ints,
        default=[],
        help="--only-dispatch: also time the overlap row with ops.moe.switches.set_expand_waves(N) for each N",
    )
    args = parser.parse_args(argv)
    if (args.route_programs or args.expand_block or args.expand_waves) and not args.only_dispatch:
        parser.error(
            "--route-programs, --expand-block and --expand-waves time options of --only-dispatch: pass "
            "--only-dispatch too"
        )
    if args.only_dispatch and args.tokens == list(TOKENS):
        args.tokens = list(QUICK_TOKENS)
    if args.combine_waves and not args.only_combine:
        parser.error("--combine-waves times an option of --only-combine: pass --only-combine too")
    if args.only_combine and (args.only_dispatch or args.only_layer):
        parser.error("--only-combine runs only the combine rows: leave out --only-dispatch and --only-layer")
    if args.only_combine and args.tokens == list(TOKENS):
        args.tokens = list(COMBINE_TOKENS)
    if args.only_layer and (args.only_dispatch or args.skip_layer):
        parser.error("--only-layer runs only the layer rows: leave out --only-dispatch and --skip-layer")
    if args.only_layer and args.tokens == list(TOKENS):
        args.tokens = list(args.layer_tokens)  # the NCCL dispatcher's buffers: the layer's sizes only
    if args.reps < 20:
        parser.error(f"--reps {args.reps}: a reported median needs at least 20 timed calls")
    if args.topk < 1 or args.topk > args.experts:
        parser.error(f"--topk {args.topk} must be in [1, --experts {args.experts}]")
    if args.ll_tokens < 1 or args.hidden < 1 or args.ag_tokens < 1 or args.layer_intermediate < 1:
        parser.error("--ll-tokens, --hidden, --ag-tokens and --layer-intermediate must be positive")
    return args


# --- inputs and the checks -----------------------------------------------------------------------------------------


def option_configs(route_programs: Sequence[int], expand_blocks: Sequence[int]) -> dict[str, Any]:
    """``--route-programs`` / ``--expand-block``: the ``MoeConfig(pipelined=True, ...)`` to time beside the pipelined
    default, by label suffix (``route R``, ``expand B``, and ``route R expand B`` for each pair). Raises
    ``triton_dist.ops.moe.MoeError`` for a value ``MoeConfig`` refuses."""
    configs: dict[str, Any] = {}
    for r in route_programs:
        configs[f"route {r}"] = MoeConfig(pipelined=True, route_programs=r)
    for b in expand_blocks:
        configs[f"expand {b}"] = MoeConfig(pipelined=True, expand_block=b)
    for r in route_programs:
        for b in expand_blocks:
            configs[f"route {r} expand {b}"] = MoeConfig(pipelined=True, route_programs=r, expand_block=b)
    return configs


def dispatch_with(x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, experts: int, options: dict[str, Any]) -> Any:
    """``triton_dist.ops.moe_dispatch(x, idx, w, experts, **options)``; an ``OWN_IN_PUSH`` key in ``options`` is not
    passed on but sets ``ops.moe.switches.OWN_ROWS_IN_PUSH`` for the call, an ``OVERLAP`` key likewise
    ``ops.moe.switches.EXPAND_OVERLAPS_PUSH`` (an int: that many waves, ``set_expand_waves``), an ``FP8_OVERLAP`` key
    ``ops.moe.switches.FP8_OVERLAPS_PUSH``, ``FP8_RECIPROCAL``, ``FP8_NARROW`` and ``FP8_PREQUANTIZE`` keys
    ``ops.moe.switches.FP8_RECIPROCAL``, ``FP8_NARROW_PUSH`` and ``FP8_PREQUANTIZE`` (all restored after; an absent key
    leaves its setting as it is)."""
    import triton_dist
    from triton_dist.ops.moe import switches

    options = dict(options)
    own = options.pop(OWN_IN_PUSH, None)
    overlap = options.pop(OVERLAP, None)
    fp8_overlap = options.pop(FP8_OVERLAP, None)
    reciprocal = options.pop(FP8_RECIPROCAL, None)
    narrow = options.pop(FP8_NARROW, None)
    prequantize = options.pop(FP8_PREQUANTIZE, None)
    if all(key is None for key in (own, overlap, fp8_overlap, reciprocal, narrow, prequantize)):
        return triton_dist.ops.moe_dispatch(x, idx, w, experts, **options)
    previous = switches.set_own_rows_in_push(switches.OWN_ROWS_IN_PUSH if own is None else bool(own))
    overlapped = switches.set_expand_overlaps_push(switches.EXPAND_OVERLAPS_PUSH if overlap is None else bool(overlap))
    fp8_overlapped = switches.set_fp8_overlaps_push(
        switches.FP8_OVERLAPS_PUSH if fp8_overlap is None else bool(fp8_overlap)
    )
    reciprocated = switches.set_fp8_reciprocal(switches.FP8_RECIPROCAL if reciprocal is None else bool(reciprocal))
    narrowed = switches.set_fp8_narrow_push(switches.FP8_NARROW_PUSH if narrow is None else bool(narrow))
    prequantized = switches.set_fp8_prequantize(switches.FP8_PREQUANTIZE if prequantize is None else bool(prequantize))
    waves = switches.EXPAND_WAVES
    try:
        if type(overlap) is int:
            switches.set_expand_waves(overlap)
        return triton_dist.ops.moe_dispatch(x, idx, w, experts, **options)
    finally:
        switches.set_own_rows_in_push(previous)
        switches.set_expand_overlaps_push(overlapped)
        switches.set_fp8_overlaps_push(fp8_overlapped)
        switches.set_fp8_reciprocal(reciprocated)
        switches.set_fp8_narrow_push(narrowed)
        switches.set_fp8_prequantize(prequantized)
        switches.set_expand_waves(waves)


def add_phase_samples(samples: dict[str, list[float]], events: list[tuple[str, Any]]) -> None:
    """Append one call's phases to ``samples``: per phase the µs from the event before it to its own (``events``:
    (phase, CUDA event) in the order the hook recorded them, synchronized), and ``total`` from the first to the
    last."""
    for (_, begin), (phase, end) in zip(events, events[1:], strict=False):
        samples.setdefault(phase, []).append(begin.elapsed_time(end) * 1e3)
    samples.setdefault("total", []).append(events[0][1].elapsed_time(events[-1][1]) * 1e3)


CombineSetting = tuple[bool, int, bool, int, bool, bool]
"""``combine_with``'s setting: ``ops.moe.switches`` ``REDUCE_OVERLAPS_PUSH``, ``COMBINE_WAVES``,
``OWN_PARTIALS_IN_REDUCE``, ``COMBINE_WAVE_MIN_SLOTS``, ``COMBINE_AUTO``, ``COMBINE_WAVES_BY_PROGRAMS``."""


def combine_with(y: torch.Tensor, handle: Any, setting: CombineSetting) -> torch.Tensor:
    """``triton_dist.ops.moe_combine(y, handle)`` with ``ops.moe.switches.REDUCE_OVERLAPS_PUSH`` set to ``setting[0]``,
    ``COMBINE_WAVES`` to ``setting[1]``, ``OWN_PARTIALS_IN_REDUCE`` to ``setting[2]``, ``COMBINE_WAVE_MIN_SLOTS`` to
    ``setting[3]``, ``COMBINE_AUTO`` to ``setting[4]`` (on, it overrides the first and third) and
    ``COMBINE_WAVES_BY_PROGRAMS`` to ``setting[5]`` for the call (all restored after, also if it raises)."""
    import triton_dist
    from triton_dist.ops.moe import switches

    overlap = switches.set_reduce_overlaps_push(setting[0])
    waves = switches.set_combine_waves(setting[1])
    own = switches.set_own_partials_in_reduce(setting[2])
    least = switches.set_combine_wave_min_slots(setting[3])
    auto = switches.set_combine_auto(setting[4])
    by_programs = switches.set_combine_waves_by_programs(setting[5])
    try:
        return triton_dist.ops.moe_combine(y, handle)
    finally:
        switches.set_reduce_overlaps_push(overlap)
        switches.set_combine_waves(waves)
        switches.set_own_partials_in_reduce(own)
        switches.set_combine_wave_min_slots(least)
        switches.set_combine_auto(auto)
        switches.set_combine_waves_by_programs(by_programs)


def make_inputs(
    tokens: int,
    hidden: int,
    experts: int,
    topk: int,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
    none_rate: float = 0.0,
    dtype: torch.dtype = torch.bfloat16,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One rank's (x [T, H], topk_idx [T, k] int32, topk_weights [T, k] fp32): distinct uniform experts per token,
    a ``none_rate`` share of the ids set to -1. ``generator`` lives on ``device``."""
    x = torch.randn(tokens, hidden, generator=generator, device=device).to(dtype)
    idx = torch.rand(tokens, experts, generator=generator, device=device).topk(topk, dim=1).indices.to(torch.int32)
    if none_rate:
        idx[torch.rand(tokens, topk, generator=generator, device=device) < none_rate] = -1
    weights = torch.rand(tokens, topk, generator=generator, device=device)
    return x, idx, weights


def scaled_experts(rows: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """The verification's experts: expert e multiplies its rows by (e + 1) / 4 (rows of expert -1 give 0)."""
    return (rows.float() * ((expert.float() + 1) / 4).unsqueeze(-1)).to(rows.dtype)


@dataclass
class PathResult:
    """What a path gave for one rank's verification inputs, in normal mode's layout: rows grouped by local expert,
    each expert's rows in (source, token, k) order."""

    rows: torch.Tensor
    expert_counts: list[int]
    experts: torch.Tensor
    weights: torch.Tensor
    combined: torch.Tensor
    """combine of :func:`scaled_experts` applied to the rows."""


def compare(got: PathResult, want_rows: torch.Tensor, want: Any, combined: torch.Tensor, rtol: float) -> str:
    """What differs between a path's result on this rank and the reference's ('' if nothing): the dispatch exactly,
    the combine within ``rtol`` of |reference| plus 1% of the largest |reference| when ``rtol`` > 1e-2 (partials
    rounded to x's dtype), else an absolute 1e-5."""
    problems = []
    if got.expert_counts != want.expert_counts.tolist():
        problems.append(f"expert counts {got.expert_counts[:8]}... != reference {want.expert_counts.tolist()[:8]}...")
    elif not torch.equal(got.rows.cpu(), want_rows):
        problems.append("received rows differ from the reference's")
    elif not torch.equal(got.experts.cpu().long(), want.recv_expert.long()):
        problems.append("received rows' expert ids differ from the reference's")
    elif not torch.equal(got.weights.cpu().float(), want.recv_weights.float()):
        problems.append("received rows' weights differ from the reference's")
    out, exact = got.combined.cpu().float(), combined.float()
    atol = 1e-2 * float(exact.abs().max()) if rtol > 1e-2 and exact.numel() else 1e-5
    bad = ~((out - exact).abs() <= atol + rtol * exact.abs())
    if int(bad.sum()):
        first = tuple(int(v) for v in bad.nonzero()[0])
        problems.append(
            f"combine: {int(bad.sum())} of {out.numel()} elements off (at {first}: {float(out[first])!r}, "
            f"reference {float(exact[first])!r})"
        )
    return "; ".join(problems)


def combine_rtol(options: dict[str, Any] | None) -> float:
    """The combine tolerance of :func:`compare` for ours with ``options`` (``config``: a ``MoeConfig``; none, the
    default): 2e-2 as the NCCL dispatcher's where ``MoeConfig(combine_partials="input")``, the default, rounds each
    rank's partial to bf16 (which :func:`compare` then also allows 1% of the largest |reference|), 8e-3 with
    ``"fp32"`` partials (a fused multiply-add may change the last bf16 bit)."""
    config = (options or {}).get("config") or MoeConfig()
    return 2e-2 if config.combine_partials == "input" else 8e-3


def verification_inputs(
    world_size: int, tokens: int, hidden: int, experts: int, topk: int
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """Every rank's verification inputs, on the host, the same on every rank (seeded per rank)."""
    xs, idxs, ws = [], [], []
    for rank in range(world_size):
        x, idx, w = make_inputs(
            tokens, hidden, experts, topk, torch.Generator().manual_seed(2700 + rank), none_rate=NONE_RATE
        )
        xs.append(x)
        idxs.append(idx)
        ws.append(w)
    return xs, idxs, ws


def reference_results(
    xs: list[torch.Tensor], idxs: list[torch.Tensor], ws: list[torch.Tensor], experts: int
) -> tuple[list[tuple[torch.Tensor, Any]], list[torch.Tensor]]:
    """``reference_dispatch`` of every rank, and each rank's exact (fp32) combine of :func:`scaled_experts`."""
    refs = reference_dispatch(xs, idxs, ws, experts)
    ys = [scaled_experts(rows, handle.recv_expert) for rows, handle in refs]
    exact = reference_combine(ys, [dataclasses.replace(handle, dtype=torch.float32) for _, handle in refs])
    return refs, exact


# --- the all-to-all dispatcher (NCCL, NVSHMEM) -------------------------------------------------------------------


class Comm(Protocol):
    """What :class:`A2ADispatcher` needs from a transport."""

    rank: int
    world_size: int

    def buffer(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor: ...

    def exchange_counts(self, out: torch.Tensor, inp: torch.Tensor) -> None: ...

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> None: ...


class TorchComm:
    """``dist.all_to_all_single`` over a process group (NCCL on GPUs, gloo on CPUs)."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)

    def buffer(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A staging buffer [rows, cols] (plain device memory)."""
        return torch.empty(rows, cols, dtype=dtype, device=device)

    def exchange_counts(self, out: torch.Tensor, inp: torch.Tensor) -> None:
        """Row d of ``inp`` to rank d; row s of ``out`` from rank s."""
        dist.all_to_all_single(out, inp, group=self.group)

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> None:
        """Rows ``in_splits[d]`` of ``inp`` (in rank order) to rank d; ``out`` gets ``out_splits[s]`` from rank s."""
        dist.all_to_all_single(out, inp, out_splits, in_splits, group=self.group)


class NvshmemComm(TorchComm):
    """The payload exchanges through ``torch.ops.symm_mem.all_to_all_vdev`` on NVSHMEM symmetric buffers (the caller
    set the NVSHMEM backend before any symmetric allocation); the counts over the process group."""

    def __init__(self, group: dist.ProcessGroup | None, device: torch.device) -> None:
        super().__init__(group)
        import torch.distributed._symmetric_memory as symm_mem

        self.symm_mem = symm_mem
        self.group_name = (group or dist.group.WORLD).group_name
        self.device = device
        self.buffers: list[torch.Tensor] = []
        self.in_splits = self._symmetric((self.world_size,), torch.int64)
        self.out_splits_offsets = self._symmetric((2, self.world_size), torch.int64)

    def _symmetric(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        with torch.cuda.device(self.device):
            made = self.symm_mem.empty(*shape, dtype=dtype, device=self.device)
            self.symm_mem.rendezvous(made, self.group_name)
        self.buffers.append(made)
        return made

    def buffer(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A symmetric buffer [rows, cols] (a collective: every rank allocates the same shape in the same order)."""
        return self._symmetric((rows, cols), dtype)

    def _owner(self, view: torch.Tensor) -> torch.Tensor:
        """The symmetric buffer ``view`` lies in (RuntimeError if none)."""
        for made in self.buffers:
            if made.data_ptr() <= view.data_ptr() < made.data_ptr() + max(1, made.nbytes):
                return made
        raise RuntimeError("NvshmemComm: a tensor outside this comm's symmetric buffers")

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> None:
        """``all_to_all_vdev`` of the whole buffers holding ``inp`` and ``out``, ``in_splits`` copied to the device
        (from pageable memory: the copy is done when ``copy_`` returns, so the next call cannot change it); the
        received sizes come out on the device (``out_splits`` is what the counts exchange said)."""
        self.in_splits.copy_(torch.tensor(in_splits, dtype=torch.int64))
        torch.ops.symm_mem.all_to_all_vdev(
            self._owner(inp), self._owner(out), self.in_splits, self.out_splits_offsets, self.group_name
        )


@dataclass
class A2AHandle:
    """What :meth:`A2ADispatcher.combine` needs of a dispatch."""

    tokens: int
    send_token: torch.Tensor
    """[S]: the home token of each sent row (rows in destination order, tokens ascending within)."""
    send_splits: list[int]
    recv_splits: list[int]
    pair_row: torch.Tensor
    """[P]: the received row each expert row came from."""
    recv_weights: torch.Tensor
    """[P] fp32: each expert row's router weight."""
    recv_expert: torch.Tensor
    """[P]: each expert row's global expert id."""
    expert_counts: list[int]


def _add_rows(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor, weight: torch.Tensor | None = None) -> None:
    """``out[index[i]] += weight[i] * src[i]`` in fp32 (``out`` fp32), a bounded number of rows at a time."""
    if src.shape[0] == 0:
        return
    chunk = max(1, CHUNK_ELEMENTS // max(1, src.shape[1]))
    for start in range(0, src.shape[0], chunk):
        part = src[start : start + chunk].float()
        if weight is not None:
            part.mul_(weight[start : start + chunk, None])
        out.index_add_(0, index[start : start + chunk], part)


class A2ADispatcher:
    """An MoE dispatcher over an all-to-all with host-known splits (see the module docstring), for one rank.

    ``max_tokens``: the most tokens per rank a call may bring (the staging buffers hold ``max_tokens * W`` rows).
    Raises ValueError for a larger T, a dtype whose rows cannot carry the int32 meta, or E not a multiple of W.
    """

    def __init__(
        self,
        comm: Comm,
        num_experts: int,
        hidden: int,
        topk: int,
        max_tokens: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        size = comm.world_size
        if num_experts % size:
            raise ValueError(f"A2ADispatcher: {num_experts} experts do not split over {size} ranks")
        itemsize = torch.empty((), dtype=dtype).element_size()
        if 4 % itemsize:
            raise ValueError(f"A2ADispatcher: {dtype} rows cannot carry int32 meta")
        self.comm, self.hidden, self.topk, self.dtype, self.device = comm, hidden, topk, dtype, device
        self.num_experts, self.local = num_experts, num_experts // size
        self.max_tokens = max_tokens
        self.words = topk * 4 // itemsize  # elements of ``dtype`` holding k int32
        row = hidden + 2 * self.words  # [x | ids (int32) | weights (fp32 bits)]
        self.send = comm.buffer(max_tokens * size, row, dtype, device)
        self.recv = comm.buffer(max_tokens * size, row, dtype, device)
        self.back_send = comm.buffer(max_tokens * size, hidden, dtype, device)
        self.back_recv = comm.buffer(max_tokens * size, hidden, dtype, device)
        self.counts = torch.empty(size, 1 + self.local, dtype=torch.int64, device=device)
        self.recv_counts = torch.empty_like(self.counts)
        self.ranks = torch.arange(size, device=device)

    def dispatch(self, x: torch.Tensor, idx: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, A2AHandle]:
        """(recv_x [P, H] grouped by local expert, handle); one host synchronization (the split sizes)."""
        tokens, size, local, hidden, k = x.shape[0], self.comm.world_size, self.local, self.hidden, self.topk
        if tokens > self.max_tokens:
            raise ValueError(f"A2ADispatcher: {tokens} tokens exceed max_tokens={self.max_tokens}")
        ids = idx.long()
        dest = ids.div(local, rounding_mode="floor")  # -1 stays -1
        hit = (dest.unsqueeze(-1) == self.ranks).any(1)  # [T, W]: token t goes to rank d
        self.counts[:, 0] = hit.sum(0)
        pairs = torch.zeros(self.num_experts + 1, dtype=torch.int64, device=x.device)
        pairs.scatter_add_(0, ids.flatten() + 1, torch.ones(ids.numel(), dtype=torch.int64, device=x.device))
        self.counts[:, 1:] = pairs[1:].view(size, local)
        self.comm.exchange_counts(self.recv_counts, self.counts)
        positions = torch.arange(tokens, device=x.device) + self.ranks.unsqueeze(1) * tokens  # [W, T]: d * T + t
        order = torch.sort(torch.where(hit.t(), positions, size * tokens).flatten()).values
        both = torch.cat([self.counts.flatten(), self.recv_counts.flatten()]).tolist()  # the one host sync
        stride, offset = 1 + local, size * (1 + local)
        send_splits = [both[d * stride] for d in range(size)]
        recv_splits = [both[offset + s * stride] for s in range(size)]
        expert_counts = [sum(both[offset + s * stride + 1 + e] for s in range(size)) for e in range(local)]
        sent, received = sum(send_splits), sum(recv_splits)
        send_token = order[:sent] % tokens if tokens else order[:0]
        torch.index_select(x, 0, send_token, out=self.send[:sent, :hidden])
        meta = torch.cat([idx.to(torch.int32), weights.float().view(torch.int32)], 1).view(self.dtype)
        torch.index_select(meta, 0, send_token, out=self.send[:sent, hidden:])
        self.comm.all_to_all(self.recv[:received], self.send[:sent], recv_splits, send_splits)
        # Group by local expert: pair (r, j) of received row r sorts by (expert, r, j), i.e. (source, token, k).
        rows = self.recv[:received]
        got_ids = rows[:, hidden : hidden + self.words].view(torch.int32).long() - self.comm.rank * local
        got_weights = rows[:, hidden + self.words :].view(torch.float32)
        mine = (got_ids >= 0) & (got_ids < local)
        slots = torch.arange(received * k, device=x.device).view(received, k)
        key = torch.where(mine, got_ids * (received * k) + slots, local * received * k).flatten()
        chosen = torch.sort(key).indices[: sum(expert_counts)]
        pair_row = chosen.div(k, rounding_mode="floor")
        recv_x = torch.index_select(rows[:, :hidden], 0, pair_row)
        handle = A2AHandle(
            tokens=tokens,
            send_token=send_token,
            send_splits=send_splits,
            recv_splits=recv_splits,
            pair_row=pair_row,
            recv_weights=got_weights.reshape(-1)[chosen],
            recv_expert=got_ids.flatten()[chosen] + self.comm.rank * local,
            expert_counts=expert_counts,
        )
        return recv_x, handle

    def combine(self, y: torch.Tensor, handle: A2AHandle) -> torch.Tensor:
        """Per home token, sum_k w_k y_k: each rank's partial (fp32, rounded to x's dtype) sent home, summed there in
        fp32; returns [T, H] in x's dtype. No host synchronization."""
        received, sent = sum(handle.recv_splits), sum(handle.send_splits)
        partial = torch.zeros(received, self.hidden, dtype=torch.float32, device=y.device)
        _add_rows(partial, handle.pair_row, y, handle.recv_weights)
        self.back_send[:received].copy_(partial)
        self.comm.all_to_all(self.back_recv[:sent], self.back_send[:received], handle.send_splits, handle.recv_splits)
        out = torch.zeros(handle.tokens, self.hidden, dtype=torch.float32, device=y.device)
        _add_rows(out, handle.send_token, self.back_recv[:sent])
        return out.to(self.dtype)


def run_a2a(disp: A2ADispatcher, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> PathResult:
    """One dispatch and combine of :func:`scaled_experts` through ``disp``."""
    rows, handle = disp.dispatch(x, idx, w)
    combined = disp.combine(scaled_experts(rows, handle.recv_expert), handle)
    return PathResult(rows, handle.expert_counts, handle.recv_expert, handle.recv_weights, combined)


# --- the EP MoE layer ----------------------------------------------------------------------------------------------

GroupedGemm = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``gemm(x, w, expert_counts, expert_offsets)``: ``ops.grouped_gemm``'s normal layout (int32 counts / offsets)."""


def nccl_layer_forward(
    disp: A2ADispatcher,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    x: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    gemm: GroupedGemm,
) -> torch.Tensor:
    """``ExpertParallelMoE.forward``'s math with ``disp``'s dispatch and combine: the rows grouped by local expert,
    ``gemm`` with ``gate_up`` [L, H, 2I] (gate's columns, then up's), ``silu(gate) * up``, ``gemm`` with ``down``
    [L, I, H], then ``disp.combine`` (the router weights applied there). The counts and offsets the GEMMs take are
    built on the device from the counts exchange (no host synchronization past the dispatch's). Returns [T, H] in
    x's dtype; raises what ``disp`` or ``gemm`` raise."""
    recv_x, handle = disp.dispatch(x, idx, weights)
    counts = disp.recv_counts[:, 1:].sum(0).to(torch.int32)  # rows per local expert, summed over the sources
    offsets = (torch.cumsum(counts, 0) - counts).to(torch.int32)
    return disp.combine(expert_gemms(recv_x, gate_up, down, counts, offsets, gemm), handle)


def expert_gemms(
    rows: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    counts: torch.Tensor,
    offsets: torch.Tensor,
    gemm: GroupedGemm,
) -> torch.Tensor:
    """The expert compute of ``ExpertParallelMoE.forward`` (bf16) on rows grouped by local expert: ``gemm`` with
    ``gate_up`` [L, H, 2I] (gate's columns, then up's), ``silu(gate) * up``, ``gemm`` with ``down`` [L, I, H];
    ``counts`` / ``offsets``: int32 [L], each expert's rows of ``rows`` [R, H]. Returns the experts' unweighted
    outputs [R, H] (what a combine takes); raises what ``gemm`` raises."""
    inter = down.shape[1]
    gate_up_rows = gemm(rows, gate_up, counts, offsets)
    act = functional.silu(gate_up_rows[:, :inter]) * gate_up_rows[:, inter:]
    return gemm(act.contiguous(), down, counts, offsets)


def dense_moe_partial(
    x: torch.Tensor,
    idx: torch.Tensor,
    weights: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    first_expert: int,
) -> torch.Tensor:
    """The dense fp32 reference of the experts ``[first_expert, first_expert + L)`` one rank holds, for every token
    of ``x`` [N, H] (all ranks' tokens): ``sum over k with idx[t, k] held here of weights[t, k] * (silu(x_t @ gate)
    * (x_t @ up)) @ down``; [N, H] fp32 (summed over the ranks, the layer's output before rounding)."""
    inter = down.shape[1]
    out = torch.zeros(x.shape[0], down.shape[2], dtype=torch.float32, device=x.device)
    for local in range(gate_up.shape[0]):
        token, slot = (idx.long() == first_expert + local).nonzero(as_tuple=True)
        if token.numel() == 0:
            continue
        h = x[token].float() @ gate_up[local].float()
        act = functional.silu(h[:, :inter]) * h[:, inter:]
        out.index_add_(0, token, (act @ down[local].float()) * weights[token, slot].float().unsqueeze(1))
    return out


def layer_problem(got: torch.Tensor, want: torch.Tensor, what: str, rtol: float = 2e-2) -> str:
    """'' if ``got`` is within ``rtol`` of |``want``| plus 1% of the largest |``want``| everywhere (bf16 GEMMs and
    activations against fp32, or two bf16 paths), else ``what``: how many elements are off and the first."""
    if got.shape != want.shape:
        return f"{what}: shape {list(got.shape)} != {list(want.shape)}"
    out, exact = got.float(), want.float()
    atol = 1e-2 * float(exact.abs().max()) if exact.numel() else 0.0
    bad = ~((out - exact).abs() <= atol + rtol * exact.abs())  # NaN counts as off
    if not int(bad.sum()):
        return ""
    first = tuple(int(v) for v in bad.nonzero()[0])
    return (
        f"{what}: {int(bad.sum())} of {out.numel()} elements off (at {first}: {float(out[first])!r}, "
        f"want {float(exact[first])!r})"
    )


# --- timing --------------------------------------------------------------------------------------------------------


def device_us(
    fn: Callable[[], object], barrier: Callable[[], object], reps: int, prepare: Callable[[], object] | None = None
) -> float:
    """Median µs of ``fn`` between CUDA events, ``barrier`` (a device barrier across ranks) before each call and
    ``prepare`` (untimed) before that; max over ranks (``testing.time_ms``)."""
    from triton_dist.testing.timing import time_ms

    return time_ms(fn, warmup=2, reps=reps, prepare=prepare, start_together=barrier) * 1e3


def idle_us(fn: Callable[[], object], reps: int, prepare: Callable[[], object] | None = None) -> float:
    """Median µs of one call of ``fn`` from an idle GPU (host synchronize and ``dist.barrier`` first, after
    ``prepare``), the host's launch path included; max over ranks (``testing.idle_ms_samples``)."""
    from triton_dist.testing import max_over_ranks
    from triton_dist.testing.timing import idle_ms_samples

    return max_over_ranks(statistics.median(idle_ms_samples(fn, rep=reps, warmup=2, prepare=prepare))) * 1e3


def maybe_host_us(fn: Callable[[], object]) -> float | None:
    """``testing.host_us`` of ``fn``, or None (with an INFO line) where it cannot be measured."""
    from triton_dist.testing import host_us

    try:
        return host_us(fn)
    except RuntimeError as error:
        log0(f"INFO host µs not measured: {error}")
        return None


def log0(message: str) -> None:
    """Print on rank 0 (or without a process group)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)


def sent_bytes(idx: torch.Tensor, local: int, rank: int, world_size: int, hidden: int, itemsize: int) -> float:
    """Mean over ranks of the bytes a rank's tokens cross the links with (once per other destination rank)."""
    dest = idx.long().div(local, rounding_mode="floor")
    ranks = torch.arange(world_size, device=idx.device)
    hit = (dest.unsqueeze(-1) == ranks).any(1)
    hit[:, rank] = False
    total = torch.tensor([float(hit.sum()) * hidden * itemsize], dtype=torch.float64, device=idx.device)
    dist.all_reduce(total)
    return float(total) / world_size


# --- results -------------------------------------------------------------------------------------------------------

COLUMNS = ("dispatch", "combine")
TIMINGS = ("device", "idle", "host")


def _us(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, float) else "—"


def _ratio(base: object, ours: object) -> str:
    return f"{base / ours:.2f}" if isinstance(base, float) and isinstance(ours, float) and ours > 0 else "—"


def graphed_per_call(dispatch_us: float, step_us: float) -> dict[str, float | None]:
    """The low-latency graphed rows' device µs per call from two graphs of ``GRAPHED_CALLS`` calls each: ``dispatch``
    (a graph of dispatches), ``step`` (a graph of dispatch + combine steps) and ``combine`` = step - dispatch (None
    where that is not positive: the two medians' noise exceeds the combine, which no real run shows)."""
    combine = step_us - dispatch_us
    return {"dispatch": dispatch_us, "combine": combine if combine > 0 else None, "step": step_us}


def with_graphed_calls(row: dict[str, Any], per_call: dict[str, float | None]) -> dict[str, Any]:
    """A low-latency graphed row (``timed_row``'s, on one-call graphs) with its device µs per call in graphs of
    ``GRAPHED_CALLS`` calls (``graphed_per_call``): ``dispatch device`` / ``combine device`` (what the bars read) and
    the GB/s become the per-call ones, ``step device`` is the dispatch + combine step's, and the one-call graphs'
    device µs move to ``dispatch device 1-call graph`` / ``combine device 1-call graph`` (``ONE_CALL``). The from-idle
    and host columns stay (one call's). Returns a new row; raises KeyError if ``per_call`` lacks an op."""
    out = dict(row)
    nbytes = row.get("bytes per rank")
    for op in COLUMNS:
        value = per_call[op]
        out[f"{op} device {ONE_CALL}"] = row.get(f"{op} device")
        out[f"{op} device"] = value
        out[f"{op} GB/s"] = nbytes / value / 1e3 if nbytes and isinstance(value, float) else None
    out["step device"] = per_call["step"]
    return out


def graphed_table_rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The markdown cells of the low-latency graphed rows that carry both timings (``with_graphed_calls``): path,
    tokens, then dispatch, combine and step µs per call in graphs of ``GRAPHED_CALLS`` beside the one-call graphs'."""
    cells = []
    for r in rows:
        if f"dispatch device {ONE_CALL}" not in r:
            continue
        one_d, one_c = (r.get(f"{op} device {ONE_CALL}") for op in COLUMNS)
        step = one_d + one_c if isinstance(one_d, float) and isinstance(one_c, float) else None
        line = [r["path"], str(r["tokens"])]
        line += [f"{_us(r.get(f'{op} device'))} / {_us(r.get(f'{op} device {ONE_CALL}'))}" for op in COLUMNS]
        line.append(f"{_us(r.get('step device'))} / {_us(step)}")
        cells.append(line)
    return cells


GRAPHED_HEADERS = [
    "path", "tokens/rank", f"dispatch µs: {GRAPHED_CALLS} per graph / 1 per graph",
    f"combine µs: {GRAPHED_CALLS} per graph / 1 per graph",
    f"dispatch + combine µs: {GRAPHED_CALLS} steps per graph / the two 1-call graphs",
]  # fmt: skip


def nccl_row(rows: Sequence[dict[str, Any]], tokens: int) -> dict[str, Any] | None:
    """The NCCL row at ``tokens`` per rank, if any."""
    return next((r for r in rows if r["path"] == NCCL and r["tokens"] == tokens), None)


def _per_call(row: dict[str, Any]) -> str:
    """' (per call, N calls per graph)' for a low-latency graphed row timed so (``with_graphed_calls``), else ''."""
    return f" (per call, {GRAPHED_CALLS} calls per graph)" if f"dispatch device {ONE_CALL}" in row else ""


def _one_call(row: dict[str, Any]) -> str:
    """' (one call per graph: dispatch D, combine C µs)' for a row with the one-call graphs' µs, else ''."""
    if f"dispatch device {ONE_CALL}" not in row:
        return ""
    d, c = (row.get(f"{op} device {ONE_CALL}") for op in COLUMNS)
    return f" (one call per graph: dispatch {_us(d)}, combine {_us(c)} µs)"


def bars(rows: Sequence[dict[str, Any]], extras: dict[str, Any], ll_tokens: int) -> list[str]:
    """The issue's bars, each with its measured numbers and PASS / FAIL / not measured."""
    lines = []

    def verdict(ok: bool | None) -> str:
        return "not measured" if ok is None else ("PASS" if ok else "FAIL")

    ll = next((r for r in rows if r["path"] == OURS and r["mode"] == "low_latency graphed"), None)
    base = nccl_row(rows, ll_tokens)
    if ll is not None:
        d, c = ll.get("dispatch device"), ll.get("combine device")
        ok = isinstance(d, float) and isinstance(c, float) and d <= 40 and c <= 50
        lines.append(f"- low-latency, {ll_tokens} tokens, graphed{_per_call(ll)}: dispatch {_us(d)} µs (≤ 40), combine "
                     f"{_us(c)} µs (≤ 50): {verdict(ok)}{_one_call(ll)}")  # fmt: skip
        if base is not None:
            speed = [
                base[f"{op} {t}"] / ll[f"{op} {t}"]
                for op in COLUMNS
                for t in ("device", "idle")
                if isinstance(base.get(f"{op} {t}"), float) and isinstance(ll.get(f"{op} {t}"), float)
            ]
            lines.append(
                f"- low-latency{_per_call(ll)} ≥ 5x the NCCL dispatcher (device and from idle, dispatch and combine): "
                f"{', '.join(f'{s:.1f}x' for s in speed) or '—'}: {verdict(bool(speed) and min(speed) >= 5)}"
            )
    ag = extras.get("allgather_gbps")
    at = next((r for r in rows if r["path"] == OURS and r["mode"] == "normal" and r["tokens"] == 4096), None)
    if at is not None and isinstance(ag, float):
        d, c = at.get("dispatch GB/s"), at.get("combine GB/s")
        ok = isinstance(d, float) and isinstance(c, float) and min(d, c) >= 0.75 * ag
        lines.append(f"- normal, 4096 tokens: dispatch {_us(d)} GB/s, combine {_us(c)} GB/s per rank vs 75% of the "
                     f"push all-gather's {ag:.1f} GB/s = {0.75 * ag:.1f}: {verdict(ok)}")  # fmt: skip
    slower = []
    normal = [r for r in rows if r["path"] == OURS and r["mode"] == "normal"]
    for r in normal:
        other = nccl_row(rows, r["tokens"])
        for op in COLUMNS:
            for t in ("device", "idle"):
                mine, theirs = r.get(f"{op} {t}"), (other or {}).get(f"{op} {t}")
                if isinstance(mine, float) and isinstance(theirs, float) and mine > theirs:
                    slower.append(f"{op} {t} at {r['tokens']} ({mine:.0f} vs {theirs:.0f} µs)")
    if normal:
        lines.append(f"- normal never slower than NCCL (1..16384 tokens): {verdict(not slower)}"
                     + (f" — slower: {'; '.join(slower)}" if slower else ""))  # fmt: skip
    fp8 = next((r for r in rows if r["path"] == FP8 and r["tokens"] == 4096), None)
    bf16 = next((r for r in normal if r["tokens"] == 4096), None)
    if fp8 is not None and bf16 is not None and isinstance(fp8.get("dispatch device"), float):
        ratio = _ratio(bf16.get("dispatch device"), fp8.get("dispatch device"))
        ok = ratio != "—" and float(ratio) >= 1.6
        lines.append(f"- fp8 dispatch ≥ 1.6x bf16 at 4096 tokens (device): {ratio}x: {verdict(ok)}")
    else:
        lines.append(f"- fp8 dispatch ≥ 1.6x bf16 at 4096 tokens: not measured ({extras.get('fp8', 'no fp8 row')})")
    return lines + [f"- {line}" for line in combine_bars(rows, extras, ll_tokens)]


def combine_bars(rows: Sequence[dict[str, Any]], extras: dict[str, Any], ll_tokens: int) -> list[str]:
    """The combine's bars for ours and each of combine's options (``COMBINE_PATHS``) that has rows: normal mode at
    4096 tokens against 75% of the push all-gather's per-rank bandwidth, and low-latency mode graphed at most 50 µs
    and at least 5x the NCCL dispatcher's combine (device and from idle), with PASS / FAIL."""
    lines = []
    ag = extras.get("allgather_gbps")
    base = nccl_row(rows, ll_tokens)

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    for path in (OURS, *COMBINE_PATHS):
        at = next((r for r in rows if r["path"] == path and r["mode"] == "normal" and r["tokens"] == 4096), None)
        if at is not None and isinstance(ag, float):
            gbps, us = at.get("combine GB/s"), at.get("combine device")
            ok = isinstance(gbps, float) and gbps >= 0.75 * ag
            lines.append(f"{path} combine normal T=4096: {_us(us)} µs device, {_us(gbps)} GB/s per rank vs 75% of the "
                         f"push all-gather's {ag:.1f} GB/s = {0.75 * ag:.1f}: {verdict(ok)}")  # fmt: skip
        ll = next((r for r in rows if r["path"] == path and r["mode"] == "low_latency graphed"), None)
        if ll is not None:
            us = ll.get("combine device")
            speed = [
                base[f"combine {t}"] / ll[f"combine {t}"]
                for t in ("device", "idle")
                if base is not None and isinstance(base.get(f"combine {t}"), float)
                and isinstance(ll.get(f"combine {t}"), float)
            ]  # fmt: skip
            ok = isinstance(us, float) and us <= 50 and len(speed) == 2 and min(speed) >= 5
            one = f" (one call per graph: {_us(ll[f'combine device {ONE_CALL}'])} µs)" if _per_call(ll) else ""
            lines.append(f"{path} combine low-latency T={ll_tokens} graphed{_per_call(ll)}: {_us(us)} µs device (≤ "
                         f"50), {', '.join(f'{v:.1f}x' for v in speed) or '—'} the NCCL dispatcher's combine (device, "
                         f"idle; ≥ 5x): {verdict(ok)}{one}")  # fmt: skip
    return lines


def table_rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The markdown cells of every row."""
    cells = []
    for r in rows:
        base = nccl_row(rows, r["tokens"]) if r["path"] != NCCL else None
        line = [r["path"], r["mode"], str(r["tokens"])]
        for op in COLUMNS:
            line.append(" / ".join(_us(r.get(f"{op} {t}")) for t in TIMINGS))
        line += [_us(r.get("dispatch GB/s")), _us(r.get("combine GB/s"))]
        if base is None:
            line.append("—")
        else:
            line.append(" / ".join(_ratio(base.get(f"{op} {t}"), r.get(f"{op} {t}"))
                                   for op in COLUMNS for t in ("device", "idle")))  # fmt: skip
        line.append(str(r.get("verified", "—")).replace("|", "/"))
        cells.append(line)
    return cells


def layer_row(rows: Sequence[dict[str, Any]], path: str, tokens: int) -> dict[str, Any] | None:
    """The EP MoE layer's row of ``path`` at ``tokens`` per rank, if any."""
    return next((r for r in rows if r["mode"] == "layer" and r["path"] == path and r["tokens"] == tokens), None)


def _speedup(base: dict[str, Any] | None, row: dict[str, Any] | None, timing: str) -> float | None:
    """``base``'s forward µs / ``row``'s (``timing``: device or idle), or None where either is missing."""
    theirs, mine = (base or {}).get(f"forward {timing}"), (row or {}).get(f"forward {timing}")
    if isinstance(theirs, float) and isinstance(mine, float) and mine > 0:
        return theirs / mine
    return None


def layer_bound(rows: Sequence[dict[str, Any]], tokens: int) -> float | None:
    """The most any dispatcher can reach with this GEMM at ``tokens`` per rank: ``LAYER_NCCL``'s device µs /
    ``LAYER_GEMMS``' (the layer's expert compute alone), or None without both rows."""
    return _speedup(layer_row(rows, LAYER_NCCL, tokens), layer_row(rows, LAYER_GEMMS, tokens), "device")


def layer_bar(rows: Sequence[dict[str, Any]], tokens: int) -> str:
    """Issue 27's layer bar at ``tokens`` per rank: ``layer: ours / NCCL dispatcher + same GEMM: X.XXx (>= 1.5:
    PASS/FAIL; bound Y.YYx: the grouped GEMMs take G of O µs)`` (device µs; FAIL too where a row at this size failed
    its check; 'not measured' without both rows; the bound where the GEMMs-only row was measured: ``layer_bound``),
    then from idle, the gather layout's and the low-latency layer's ratios."""
    ours, gather, base = (layer_row(rows, path, tokens) for path in LAYER_PATHS)
    gemms, low = layer_row(rows, LAYER_GEMMS, tokens), layer_row(rows, LAYER_LL, tokens)
    speed = _speedup(base, ours, "device")
    if speed is None:
        return f"layer: ours / NCCL dispatcher + same GEMM at {tokens} tokens/rank: not measured"
    checked = all(str(r.get("verified", "")).startswith("ok") for r in (ours, base, gather) if r is not None)
    verdict = "PASS" if checked and speed >= LAYER_BAR else "FAIL"
    bound = layer_bound(rows, tokens)
    if bound is not None and gemms is not None and ours is not None:
        below = ", below the bar" if bound < LAYER_BAR else ""
        verdict += (
            f"; bound {bound:.2f}x{below}: the grouped GEMMs take {gemms['forward device']:.0f} of "
            f"{ours['forward device']:.0f} µs"
        )
    text = (
        f"layer: ours / NCCL dispatcher + same GEMM: {speed:.2f}x (>= {LAYER_BAR}: {verdict}) at {tokens} tokens/rank"
    )
    more = [f"device {_us(ours and ours.get('forward device'))} vs {_us(base and base.get('forward device'))} µs"]
    idle = _speedup(base, ours, "idle")
    if idle is not None:
        more.append(f"from idle {idle:.2f}x")
    gathered = _speedup(base, gather, "device")
    if gathered is not None:
        more.append(f"gather layout {gathered:.2f}x")
    graphed = _speedup(base, low, "device")
    if graphed is not None:
        more.append(f"low-latency graphed {graphed:.2f}x")
    if not checked:
        more.append("a row failed its check")
    more += [f"{r['path']} failed its check" for r in (gemms, low)
             if r is not None and not str(r.get("verified", "")).startswith("ok")]  # fmt: skip
    return f"{text} ({'; '.join(more)})"


def layer_table_rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The markdown cells of the EP MoE layer's rows."""
    cells = []
    for r in (r for r in rows if r["mode"] == "layer"):
        base = layer_row(rows, LAYER_NCCL, r["tokens"]) if r["path"] != LAYER_NCCL else None
        line = [r["path"], str(r["tokens"]), " / ".join(_us(r.get(f"forward {t}")) for t in TIMINGS)]
        speeds = [_speedup(base, r, t) for t in ("device", "idle")] if base is not None else []
        line.append(" / ".join(f"{v:.2f}" if v is not None else "—" for v in speeds) or "—")
        line.append(str(r.get("verified", "—")).replace("|", "/"))
        cells.append(line)
    return cells


LAYER_HEADERS = ["path", "tokens/rank", "forward µs device / from idle / host",
                 "speedup over NCCL + same GEMM: device / idle", "verified"]  # fmt: skip

HEADERS = [
    "path", "mode", "tokens/rank", "dispatch µs device / from idle / host", "combine µs device / from idle / host",
    "dispatch GB/s per rank", "combine GB/s per rank", "speedup over NCCL: dispatch dev / idle, combine dev / idle",
    "verified",
]  # fmt: skip


def write_results(
    out_dir: Path,
    slug: str,
    rows: Sequence[dict[str, Any]],
    extras: dict[str, Any],
    header: Sequence[str],
    started: float,
    ll_tokens: int = LL_TOKENS,
) -> Path:
    """``moe_<slug>.md`` (header, bars, table, notes), ``.json`` (rows and extras) and ``.png`` (µs per normal-mode
    call against tokens, every path) in ``out_dir``; returns the markdown's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    layer = [r for r in rows if r["mode"] == "layer"]
    layer_sizes = sorted({r["tokens"] for r in layer})
    main_rows = [r for r in rows if r["mode"] != "layer"]
    lines = [f"# MoE dispatch / combine ({extras.get('title', '')})", "", *header, ""]
    lines += [
        f"H {extras.get('hidden', HIDDEN)} bf16, top-{extras.get('topk', TOPK)} of {extras.get('experts', EXPERTS)} "
        "experts, random routing. µs: max over ranks of the median of >= 20 calls; device: events around one call "
        f"after a device barrier, except the low-latency graphed rows: µs per call in CUDA graphs of {GRAPHED_CALLS} "
        "calls (testing.timing.graphed_us, lead=True: replays back to back after a GPU spin; dispatch: "
        f"{GRAPHED_CALLS} dispatches per graph; combine: {GRAPHED_CALLS} dispatch + combine steps per graph minus "
        "the dispatch's), what a model's graphed step sees, their one-call graphs' device µs in the table after this "
        "one; from idle: after a host sync and a barrier (graphed rows: one replay of a one-call graph); host: CPU µs "
        "to enqueue one call while the GPU is busy (— where the call synchronizes with the host). GB/s per rank: "
        "tokens sent to other ranks (once per destination) x H x 2 B / device µs. Speedup: NCCL's µs / this row's, "
        "NCCL at the same tokens per rank.",
        "",
        "## Bars (issue 27)",
        "",
        *bars(main_rows, extras, ll_tokens),
        *[f"- {layer_bar(rows, tokens)}" for tokens in layer_sizes],
        "",
    ]
    if main_rows or not layer:  # --only-layer: no dispatch table
        lines += [markdown_table(HEADERS, table_rows(main_rows)), ""]
    graphed = graphed_table_rows(main_rows)
    if graphed:
        lines += [
            f"## Low-latency graphed: {GRAPHED_CALLS} calls per graph against one",
            "",
            f"Device µs per call in CUDA graphs of {GRAPHED_CALLS} calls (the table's and the bars' graphed numbers) / "
            "events around one replay of a one-call graph after a device barrier (the graph's launch on the GPU "
            f"included, the graphed rows' device µs before {GRAPHED_CALLS}-call graphs). Every graph on the same "
            "static inputs; the experts the identity (combine's y = recv_x).",
            "",
            markdown_table(GRAPHED_HEADERS, graphed),
            "",
        ]
    if layer:
        lines += [
            "## The EP MoE layer",
            "",
            f"triton_dist.layers.ExpertParallelMoE (normal mode), H {extras.get('hidden', HIDDEN)}, top-"
            f"{extras.get('topk', TOPK)} of {extras.get('experts', EXPERTS)} experts, intermediate size "
            f"{extras.get('layer_intermediate', LAYER_INTERMEDIATE)} per expert, bf16: one forward (dispatch, gate/up "
            "grouped GEMM, SiLU * up, down grouped GEMM, combine). µs as above (host: — since the dispatch "
            f"synchronizes with the host). {LAYER_NCCL}: the same weights through the NCCL A2ADispatcher, the same "
            f"two ops.grouped_gemm calls and its NCCL combine. Speedup: its µs / this row's. {LAYER_GEMMS}: the "
            "layer's two grouped GEMMs and SiLU * up alone on ours' receive layout (dispatched once, untimed); its "
            "speedup is the bound, the most any dispatcher can reach with this GEMM (in the bar's line). "
            f"{LAYER_LL}: the layer with mode='low_latency' (max_tokens_per_rank "
            f"{extras.get('ll_tokens', LL_TOKENS)}), one forward per CUDA graph, replayed; host: its eager forward.",
            "",
            markdown_table(LAYER_HEADERS, layer_table_rows(rows)),
            "",
        ]
    lines += ["## Notes", ""]
    lines += [f"- {note}" for note in extras.get("notes", [])]
    (out_dir / f"moe_{slug}.md").write_text("\n".join(lines) + "\n")
    write_json(out_dir / f"moe_{slug}.json", [dict(r) for r in rows], started)
    data = json.loads((out_dir / f"moe_{slug}.json").read_text())
    data["extras"] = {k: v for k, v in extras.items() if isinstance(v, str | int | float | list)}
    (out_dir / f"moe_{slug}.json").write_text(json.dumps(data, indent=1))
    xs = [r["tokens"] for r in rows if r["path"] == OURS and r["mode"] == "normal"]
    panels = []
    for op in COLUMNS:
        series = {}
        for path in (OURS, CHUNKED, PER_SM2, GATHER, UNPIPELINED, UNPIPELINED_GATHER, NCCL, NVSHMEM):
            at = {r["tokens"]: r.get(f"{op} device") for r in rows if r["path"] == path and r["mode"] == "normal"}
            if at:
                series[path] = [float(at.get(t) or float("nan")) for t in xs]
        if xs:
            panels.append((f"{op}, device µs", xs, series))
    if layer_sizes:
        series = {}
        for path in LAYER_ROWS:
            at = {r["tokens"]: r.get("forward device") for r in layer if r["path"] == path}
            if at:
                series[path] = [float(at.get(t) or float("nan")) for t in layer_sizes]
        panels.append(("EP MoE layer forward, device µs", layer_sizes, series))
    if panels:
        panel_chart(
            out_dir / f"moe_{slug}.png",
            panels,
            title=f"MoE dispatch / combine, normal mode ({run_date(started)})",
            xlabel="tokens per rank",
            ylabel="µs per call",
            logy=True,
        )
    return out_dir / f"moe_{slug}.md"


# --- the GPU phases ------------------------------------------------------------------------------------------------


def moe_fp8_option() -> tuple[dict[str, Any] | None, str]:
    """The keyword arguments that ask ``moe_dispatch`` for fp8 payloads, or None and why not."""
    from triton_dist.ops.moe import moe_dispatch

    params = inspect.signature(moe_dispatch).parameters
    if "fp8" in params:
        return {"fp8": True}, ""
    for name in ("payload_dtype", "quant_dtype", "dispatch_dtype"):
        if name in params:
            return {name: torch.float8_e4m3fn}, ""
    return None, f"moe_dispatch has no fp8 option (parameters: {', '.join(params)})"


def chunked_option() -> tuple[dict[str, Any] | None, str]:
    """The keyword arguments that ask ``moe_dispatch`` for chunked copy steps, or None and why not."""
    from triton_dist.ops import moe

    if not hasattr(moe, "MoeConfig") or "config" not in inspect.signature(moe.moe_dispatch).parameters:
        return None, "moe_dispatch has no config=MoeConfig(...) option"
    return {"config": moe.MoeConfig(whole_row=False)}, ""


def expanded(recv_x: torch.Tensor, handle: Any) -> torch.Tensor:
    """``recv_x`` with one row per expert-grouped row: as it is, or ``recv_x[handle.gather_rows]`` after a
    ``layout="gather"`` dispatch."""
    rows = getattr(handle, "gather_rows", None)
    return recv_x if rows is None else recv_x[rows.long()]


def _ours_result(recv_x: torch.Tensor, handle: Any, combined: torch.Tensor) -> PathResult:
    """Normal mode's layout of a dispatch (low-latency's rows past each expert's count dropped)."""
    counts = handle.expert_counts.tolist()
    if recv_x.dim() == 2:
        return PathResult(recv_x, counts, handle.recv_expert, handle.recv_weights, combined)
    pick = [slice(0, c) for c in counts]
    return PathResult(
        torch.cat([recv_x[e, s] for e, s in enumerate(pick)]),
        counts,
        torch.cat([handle.recv_expert[e, s] for e, s in enumerate(pick)]),
        torch.cat([handle.recv_weights[e, s] for e, s in enumerate(pick)]),
        combined,
    )


def closed_form_problem(out: torch.Tensor, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, rtol: float) -> str:
    """'' if ``out`` is x * (sum of the valid weights), the combine of an identity expert, within ``rtol`` of it
    plus 1% of its largest magnitude; else how many elements are off."""
    want = x.float() * (w * (idx >= 0)).sum(1, keepdim=True)
    atol = 1e-2 * float(want.abs().max()) if want.numel() else 0.0
    bad = int((~((out.float() - want).abs() <= atol + rtol * want.abs())).sum())
    return f"identity-expert combine: {bad} of {out.numel()} elements off" if bad else ""


def fp8_problem(recv_x: torch.Tensor, handle: Any, want_rows: torch.Tensor, want: Any) -> str:
    """What is wrong with an fp8 dispatch's rows ('' if nothing): counts, expert ids and weights exactly, the rows
    (times ``handle.recv_scales`` per 128 channels unless dequantized) within 5% relative error per row."""
    scales = getattr(handle, "recv_scales", None)
    rows = recv_x.float()
    if recv_x.dtype != want_rows.dtype:
        if scales is None:
            return f"recv_x is {recv_x.dtype} but the handle has no recv_scales"
        group = -(-rows.shape[-1] // scales.shape[-1])
        rows = rows * scales.float().repeat_interleave(group, dim=-1)[..., : rows.shape[-1]]
    got = _ours_result(rows, handle, torch.zeros(0))
    if got.expert_counts != want.expert_counts.tolist():
        return "fp8: expert counts differ from the reference's"
    if not torch.equal(got.experts.cpu().long(), want.recv_expert.long()):
        return "fp8: received rows' expert ids differ from the reference's"
    if not torch.equal(got.weights.cpu().float(), want.recv_weights.float()):
        return "fp8: received rows' weights differ from the reference's"
    exact = want_rows.float()
    error = (got.rows.cpu() - exact).norm(dim=-1) / exact.norm(dim=-1).clamp_min(1e-12)
    if error.numel() and float(error.max()) > 0.05:
        return f"fp8: a row's relative error {float(error.max()):.3f} > 0.05 (row {int(error.argmax())})"
    return ""


class Bench:
    """The main phase (triton_dist's world): verification, the sweeps, the push all-gather."""

    def __init__(self, args: argparse.Namespace) -> None:
        from triton_dist import runtime as rt
        from triton_dist.testing import setup_distributed

        self.args = args
        self.rt = rt
        self.world = setup_distributed(heap_size=args.heap)
        self.rank, self.size, self.device = self.world.rank, self.world.world_size, self.world.device
        self.local = args.experts // self.size
        self.rows: list[dict[str, Any]] = []
        self.extras: dict[str, Any] = {"hidden": args.hidden, "experts": args.experts, "topk": args.topk, "notes": []}
        self.started = time.time()
        gpu = torch.cuda.get_device_name(self.device)
        short = gpu.replace("NVIDIA ", "").split()[0]
        self.slug = args.tag or f"{self.size}x{short}"
        self.extras["title"] = f"{self.size} x {gpu}"
        self.header = describe_machine(self.started)
        self.extras["notes"] += [
            f"ours: triton_dist.ops.moe_dispatch / moe_combine; normal mode syncs with the host once per dispatch (to "
            f"size recv_x); low_latency mode (max_tokens_per_rank {args.ll_tokens}) never does. The experts are the "
            "identity in the timed calls (combine's y = recv_x).",
            f"{NCCL}: the A2ADispatcher of bench/moe.py (route on the device, one counts exchange, one host sync, "
            "each token packed once per destination rank with its ids and weights, one payload exchange, grouped by "
            "local expert on receipt; combine sends one partial per token and rank in bf16, summed in fp32 at home).",
            f"{NVSHMEM}: the same dispatcher, its payload exchanges through torch.ops.symm_mem.all_to_all_vdev on "
            "NVSHMEM symmetric buffers (counts over NCCL), in child processes after the main phase: symm-mem's "
            "backend is per process and fixed by the first allocation, and triton_dist's heap is a CUDA-backend one.",
        ]
        self.variants: dict[str, dict[str, Any]] = {}
        """Label -> ``moe_dispatch`` options of ours' variants, each timed beside the default."""
        self.variant_sizes: dict[str, int | None] = {}
        """Label -> the one normal-mode size it is timed at (None: every ``--tokens``)."""
        if args.chunked:
            chunked, why = chunked_option()
            if chunked is not None:
                self.variants[CHUNKED], self.variant_sizes[CHUNKED] = chunked, None
            self.extras["notes"].append(
                f"{CHUNKED}: ours with moe_dispatch(..., config=MoeConfig(whole_row=False)): every copy step moves "
                "1024 elements instead of a whole row (the default); same results."
                if chunked is not None
                else f"{CHUNKED} rows skipped: {why}"
            )
        if not args.skip_programs:
            self.variants[PER_SM2] = {"config": MoeConfig(programs_per_sm=2)}
            self.variant_sizes[PER_SM2] = max([t for t in args.tokens if t <= 4096] or [min(args.tokens)])
            self.extras["notes"].append(
                f"{PER_SM2}: ours with moe_dispatch(..., config=MoeConfig(programs_per_sm=2)): two programs per SM "
                "in the copy kernels (normal mode's default, low-latency mode's twice its default); normal mode at "
                f"{self.variant_sizes[PER_SM2]} tokens and "
                "low-latency mode."
            )
        self.normal_only: set[str] = set()
        """Variants without a low-latency mode (``layout="gather"``)."""
        if not args.skip_gather:
            self.variants[GATHER], self.variant_sizes[GATHER] = {"layout": "gather"}, None
            self.normal_only.add(GATHER)
            self.extras["notes"].append(
                f"{GATHER}: ours with moe_dispatch(..., layout='gather') in normal mode: each received token once "
                "(no per-expert copy) and handle.gather_rows for the expert GEMM; its combine's y is "
                "recv_x[gather_rows], built once outside the timing."
            )
        if not args.skip_combine_options:
            self.variants[COMBINE_FP32] = {"config": MoeConfig(combine_partials="fp32")}
            old = MoeConfig(combine_partials="fp32", combine_spread=False)
            self.variants[COMBINE_FP32_NO_SPREAD] = {"config": old}
            self.variant_sizes |= {COMBINE_FP32: None, COMBINE_FP32_NO_SPREAD: None}
            self.extras["notes"].append(
                f"{OURS}: combine's partials cross the links in bf16 (each rank's rounded once, summed in fp32 at "
                "home, as the NCCL dispatcher's), the push's programs start spread over the received tokens (local and "
                "remote homes at once) and the reduce loads every rank's partial together: MoeConfig's defaults "
                "combine_partials='input', combine_spread=True (since the 2 x H200 run of 2026-11-27, commit "
                f"8ca72c0). {COMBINE_FP32} / {COMBINE_FP32_NO_SPREAD}: ours with moe_dispatch(..., config=MoeConfig("
                "combine_partials='fp32'[, combine_spread=False])): fp32 partials (twice the bytes, the reference's "
                "bits); without the spread, the kernels' order before it (both: the defaults before that run)."
            )
        if not args.skip_pipelined:
            unpipelined = MoeConfig(pipelined=False)
            self.variants[UNPIPELINED], self.variant_sizes[UNPIPELINED] = {"config": unpipelined}, None
            self.variants[UNPIPELINED_GATHER] = {"config": unpipelined, "layout": "gather"}
            self.variant_sizes[UNPIPELINED_GATHER] = None
            self.normal_only |= {UNPIPELINED, UNPIPELINED_GATHER}
            self.extras["notes"].append(
                f"{UNPIPELINED} / {UNPIPELINED_GATHER}: ours with moe_dispatch(..., config=MoeConfig(pipelined="
                "False)) in normal mode, the path before the pipelined default (the push after the host's wait for "
                "the summary, read by a copy and a stream synchronization; the expand after the push), with its "
                "phases. Ours (the default) pushes before that wait, polls the summary in pinned host memory, and in "
                "the gather layout runs the expand kernel beside the push (ops.moe.switches.EXPAND_OVERLAPS_PUSH; "
                "fp8 rows kept too, ops.moe.switches.FP8_OVERLAPS_PUSH, their push at 4 warps: FP8_NARROW_PUSH)."
            )
        self.nccl = A2ADispatcher(
            TorchComm(), args.experts, args.hidden, args.topk,
            max(args.tokens + [args.ll_tokens] + ([] if args.skip_layer else args.layer_tokens)),
            torch.bfloat16, self.device,
        )  # fmt: skip

    def note(self, text: str) -> None:
        log0(f"INFO {text}")
        self.extras["notes"].append(text)

    def barrier(self) -> None:
        self.rt.barrier_on_device()

    def agreed(self, problem: str) -> str:
        """'ok' if no rank saw a problem, else this rank's problem (or 'failed on another rank')."""
        from triton_dist.testing import all_ranks_true

        if all_ranks_true(not problem):
            return "ok"
        if problem:
            print(f"FAIL rank {self.rank}: {problem}", flush=True)
        return f"FAILED: {problem}" if problem else "FAILED on another rank"

    def save(self) -> None:
        if self.rank == 0 and not (self.args.only_dispatch or self.args.only_combine):  # RESULT lines only
            path = write_results(
                Path(self.args.out_dir), self.slug, self.rows, self.extras, self.header, self.started,
                self.args.ll_tokens,
            )  # fmt: skip
            print(f"wrote {path}", flush=True)

    # - verification -

    def verify(self) -> dict[str, str]:
        """Every path once against the reference at ``--ll-tokens`` per rank; returns path/mode -> 'ok' or why not."""
        import triton_dist

        a = self.args
        xs, idxs, ws = verification_inputs(self.size, a.ll_tokens, a.hidden, a.experts, a.topk)
        refs, exact = reference_results(xs, idxs, ws, a.experts)
        want_rows, want = refs[self.rank]
        x, idx, w = (t.to(self.device) for t in (xs[self.rank], idxs[self.rank], ws[self.rank]))
        found: dict[str, str] = {}

        def ours(mode: str, options: dict[str, Any] | None = None) -> PathResult:
            cap = a.ll_tokens if mode == "low_latency" else None
            recv_x, handle = triton_dist.ops.moe_dispatch(
                x, idx, w, a.experts, mode=mode, max_tokens_per_rank=cap, **(options or {})
            )
            recv_x = expanded(recv_x, handle)
            combined = triton_dist.ops.moe_combine(scaled_experts(recv_x, handle.recv_expert), handle)
            return _ours_result(recv_x, handle, combined)

        checks: dict[str, tuple[Callable[[], PathResult], float]] = {
            f"{OURS}/normal": (lambda: ours("normal"), combine_rtol(None)),
            f"{OURS}/low_latency": (lambda: ours("low_latency"), combine_rtol(None)),
            f"{NCCL}/normal": (lambda: run_a2a(self.nccl, x, idx, w), 2e-2),
        }
        for label, options in self.variants.items():
            rtol = combine_rtol(options)
            checks[f"{label}/normal"] = (lambda options=options: ours("normal", options), rtol)
            if label not in self.normal_only:
                checks[f"{label}/low_latency"] = (lambda options=options: ours("low_latency", options), rtol)
        for name, (run, rtol) in checks.items():
            try:
                problem = compare(run(), want_rows, want, exact[self.rank], rtol)
            except Exception as error:  # noqa: BLE001 (reported in the table)
                problem = f"{type(error).__name__}: {error}"[:300]
            found[name] = self.agreed(problem)
            log0(f"RESULT verify {name}: {found[name]}")
        found[f"{OURS}/low_latency graphed"] = self.verify_graph(xs, idxs, ws, refs, exact)
        log0(f"RESULT verify {OURS}/low_latency graphed: {found[f'{OURS}/low_latency graphed']}")
        for label, options in self.variants.items():
            if label in self.normal_only:
                continue
            found[f"{label}/low_latency graphed"] = self.verify_graph(xs, idxs, ws, refs, exact, options)
            log0(f"RESULT verify {label}/low_latency graphed: {found[f'{label}/low_latency graphed']}")
        return found

    def ll_graphs(
        self, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, options: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Static inputs, one CUDA graph with a low-latency dispatch, one with its combine (of a static ``y``, a
        copy of the dispatch graph's ``recv_x`` after one replay: the identity experts, never zeros);
        ``options``: more keyword arguments of the dispatch (the chunked rows' config)."""
        import triton_dist

        a = self.args
        static = {"x": x.clone(), "idx": idx.clone(), "w": w.clone()}
        args = (static["x"], static["idx"], static["w"], a.experts)
        kwargs = {"mode": "low_latency", "max_tokens_per_rank": a.ll_tokens, **(options or {})}
        recv_x, handle = triton_dist.ops.moe_dispatch(*args, **kwargs)  # eager first: plan, buffers, compilation
        triton_dist.ops.moe_combine(recv_x, handle)
        torch.cuda.synchronize()
        dispatch_graph, combine_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(dispatch_graph, capture_error_mode="thread_local"):
            recv_x, handle = triton_dist.ops.moe_dispatch(*args, **kwargs)
        y = torch.empty_like(recv_x)
        with torch.cuda.graph(combine_graph, pool=dispatch_graph.pool(), capture_error_mode="thread_local"):
            out = triton_dist.ops.moe_combine(y, handle)
        dispatch_graph.replay()  # the same static inputs give the same rows at every replay (a dispatch alone is
        y.copy_(recv_x)  # legal: only a combine must come before the dispatch two steps later)
        torch.cuda.synchronize()
        return {**static, "dispatch": dispatch_graph, "combine": combine_graph, "recv_x": recv_x, "handle": handle,
                "y": y, "out": out}  # fmt: skip

    def verify_graph(self, xs: list[torch.Tensor], idxs: list[torch.Tensor], ws: list[torch.Tensor],
                     refs: list[tuple[torch.Tensor, Any]], exact: list[torch.Tensor],
                     options: dict[str, Any] | None = None) -> str:  # fmt: skip
        """Low-latency mode through its CUDA graphs (captured on other inputs, replayed on these) vs the reference."""
        try:
            x, idx, w = (t.to(self.device) for t in (xs[self.rank], idxs[self.rank], ws[self.rank]))
            graphs = self.ll_graphs(torch.zeros_like(x), torch.full_like(idx, -1), torch.zeros_like(w), options)
            for name, value in (("x", x), ("idx", idx), ("w", w)):
                graphs[name].copy_(value)
            graphs["out"].fill_(float("nan"))
            graphs["dispatch"].replay()
            graphs["y"].copy_(scaled_experts(graphs["recv_x"], graphs["handle"].recv_expert))
            graphs["combine"].replay()
            torch.cuda.synchronize()
            got = _ours_result(graphs["recv_x"], graphs["handle"], graphs["out"])
            problem = compare(got, refs[self.rank][0], refs[self.rank][1], exact[self.rank], combine_rtol(options))
        except Exception as error:  # noqa: BLE001 (reported in the table)
            problem = f"{type(error).__name__}: {error}"[:300]
        return self.agreed(problem)

    def graphed_calls(
        self, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, options: dict[str, Any] | None = None
    ) -> dict[str, float | None]:
        """Low-latency dispatch's and combine's device µs per call in CUDA graphs of ``GRAPHED_CALLS`` calls
        (``graphed_per_call``): ``testing.timing.graphed_us(fn, calls=GRAPHED_CALLS, lead=True)``, the project's
        timing of graphed ops (all_reduce's bench too), of ``GRAPHED_CALLS`` dispatches and of ``GRAPHED_CALLS``
        dispatch + combine steps (``x``, ``idx``, ``w`` static, the experts the identity: combine's y = recv_x);
        combine = the steps' µs - the dispatches'. ``lead``: a GPU spin first, so every timed replay is submitted
        before the GPU reaches it and each span holds the graph's GPU work only, back to back as in a model's step.
        Not ``device_us`` over a graph / ``GRAPHED_CALLS``: its device barrier before each replay would time a share
        of the graph's launch on the GPU into every call and line the ranks up before each graph, where a model's
        step runs its ops back to back (the one-call graphs' device µs, launch included, are kept: ``ONE_CALL``).

        A combine cannot repeat alone: each call waits for its peers' combine flags to equal its dispatch's epoch
        (``ops/moe/kernels.py``), which the first combine of a handle already set, so a second combine of the same
        handle would not wait for its peers' partials (the same bytes here, so still the right sums, but unsynchronized
        and so too fast). Each dispatch advances the device's epoch counter, so the graphs' calls are each a fresh
        epoch, as a model's steps; ``check_steps_graph`` checks such a graph's every output. ``options``: more keyword
        arguments of the dispatch (a variant's config). A collective; raises what the ops raise."""
        import triton_dist
        from triton_dist.testing.timing import graphed_us

        a = self.args
        kwargs = {"mode": "low_latency", "max_tokens_per_rank": a.ll_tokens, **(options or {})}

        def dispatch() -> None:
            triton_dist.ops.moe_dispatch(x, idx, w, a.experts, **kwargs)

        def step() -> None:
            triton_dist.ops.moe_combine(*triton_dist.ops.moe_dispatch(x, idx, w, a.experts, **kwargs))

        dispatch_us = graphed_us(dispatch, calls=GRAPHED_CALLS, replays=a.reps, lead=True)
        step_us = graphed_us(step, calls=GRAPHED_CALLS, replays=a.reps, lead=True)
        return graphed_per_call(dispatch_us, step_us)

    def check_steps_graph(
        self, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, options: dict[str, Any] | None = None
    ) -> str:
        """``GRAPHED_CALLS`` low-latency dispatch + combine steps (identity experts) captured in one CUDA graph and
        replayed twice, on ``x`` then on ``-x`` (a step that read a stale partial or row would keep the other sign),
        every step's output poisoned with NaN before each replay and checked against the identity expert's closed form
        (``closed_form_problem``); 'ok' or what was wrong (``agreed``; an exception is reported, not raised)."""
        import triton_dist

        a = self.args
        kwargs = {"mode": "low_latency", "max_tokens_per_rank": a.ll_tokens, **(options or {})}
        static = x.clone()
        outs: list[torch.Tensor] = []
        problem = ""
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                for _ in range(GRAPHED_CALLS):
                    outs.append(triton_dist.ops.moe_combine(*triton_dist.ops.moe_dispatch(static, idx, w, a.experts,
                                                                                           **kwargs)))  # fmt: skip
            for sign in (1, -1):
                static.copy_(x * sign)
                for out in outs:
                    out.fill_(float("nan"))
                graph.replay()
                torch.cuda.synchronize()
                found = [
                    (i, closed_form_problem(out, static, idx, w, combine_rtol(options))) for i, out in enumerate(outs)
                ]
                bad = [f"step {i} of {GRAPHED_CALLS} (x * {sign}): {why}" for i, why in found if why]
                if bad:
                    problem = bad[0]
                    break
        except Exception as error:  # noqa: BLE001 (reported in the table)
            problem = f"{type(error).__name__}: {error}"[:300]
        return self.agreed(problem)

    def graphed_row(
        self,
        label: str,
        graphs: dict[str, Any],
        inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        nbytes: float,
        host: tuple[Callable[[], object], Callable[[], object]],
        verified: dict[str, str],
        options: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``label``'s low-latency graphed row: ``timed_row`` on the one-call graphs (from idle, host, and the
        one-call device µs), then the device µs per call in graphs of ``GRAPHED_CALLS`` (``graphed_calls``,
        ``with_graphed_calls``), verified by the one-call graphs' check and ``check_steps_graph``."""
        a = self.args
        row = self.timed_row(label, "low_latency graphed", a.ll_tokens, graphs["dispatch"].replay,
                             graphs["combine"].replay, nbytes, host=host)  # fmt: skip
        row = with_graphed_calls(row, self.graphed_calls(*inputs, options))
        steps = self.check_steps_graph(*inputs, options)
        row["verified"] = (
            f"{verified.get(f'{label}/low_latency graphed', '—')}; {GRAPHED_CALLS} steps in one graph: {steps}"
        )
        log0(f"RESULT {label} low_latency graphed T={a.ll_tokens}: per call in graphs of {GRAPHED_CALLS}: dispatch "
             f"{_us(row['dispatch device'])}, combine {_us(row['combine device'])}, step {_us(row['step device'])} µs; "
             f"one call per graph: dispatch {_us(row[f'dispatch device {ONE_CALL}'])}, combine "
             f"{_us(row[f'combine device {ONE_CALL}'])} µs; {GRAPHED_CALLS} steps in one graph: {steps}")  # fmt: skip
        return row

    # - the sweeps -

    def inputs(self, tokens: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        gen = torch.Generator(device=self.device).manual_seed(1000 * tokens + self.rank)
        a = self.args
        return make_inputs(tokens, a.hidden, a.experts, a.topk, gen, self.device)

    def timed_row(
        self,
        path: str,
        mode: str,
        tokens: int,
        dispatch: Callable[[], object],
        combine: Callable[[], object],
        nbytes: float,
        *,
        host: tuple[Callable[[], object] | None, Callable[[], object] | None] = (None, None),
    ) -> dict[str, Any]:
        """Time ``dispatch`` (``dispatch()`` makes a fresh state ``combine()`` reads) three ways; the row."""
        reps = self.args.reps
        row: dict[str, Any] = {"path": path, "mode": mode, "tokens": tokens, "bytes per rank": nbytes}
        row["dispatch device"] = device_us(dispatch, self.barrier, reps)
        row["combine device"] = device_us(combine, self.barrier, reps, prepare=dispatch)
        row["dispatch idle"] = idle_us(dispatch, reps)
        row["combine idle"] = idle_us(combine, reps, prepare=dispatch)
        for op, fn in zip(COLUMNS, host, strict=True):
            row[f"{op} host"] = maybe_host_us(fn) if fn is not None else None
        for op in COLUMNS:
            row[f"{op} GB/s"] = nbytes / row[f"{op} device"] / 1e3 if nbytes else None
        log0(f"RESULT {path} {mode} T={tokens}: " + ", ".join(
            f"{op} {_us(row[f'{op} device'])}/{_us(row[f'{op} idle'])}/{_us(row[f'{op} host'])} µs" for op in COLUMNS
        ))  # fmt: skip
        return row

    def normal_sizes(self, verified: dict[str, str]) -> None:
        """Ours and NCCL in normal mode at every ``--tokens`` (NCCL also at ``--ll-tokens``, the low-latency rows'
        baseline), each checked at that size against the identity expert's closed form first."""
        for tokens in sorted(set(self.args.tokens) | {self.args.ll_tokens}):
            self.normal_size(tokens, verified)
            torch.cuda.empty_cache()
            self.save()

    def normal_size(self, tokens: int, verified: dict[str, str]) -> None:
        import triton_dist

        a = self.args
        x, idx, w = self.inputs(tokens)
        nbytes = sent_bytes(idx, self.local, self.rank, self.size, a.hidden, x.element_size())
        state: dict[str, Any] = {}

        def ours_dispatch() -> None:
            state["ours"] = triton_dist.ops.moe_dispatch(x, idx, w, a.experts)

        def ours_combine() -> None:
            recv_x, handle = state["ours"]
            triton_dist.ops.moe_combine(recv_x, handle)

        def nccl_dispatch() -> None:
            state["nccl"] = self.nccl.dispatch(x, idx, w)

        def nccl_combine() -> None:
            recv_x, handle = state["nccl"]
            self.nccl.combine(recv_x, handle)

        ours_dispatch()
        ours_ok = self.agreed(
            closed_form_problem(triton_dist.ops.moe_combine(*state["ours"]), x, idx, w, combine_rtol(None))
        )
        nccl_dispatch()
        nccl_ok = self.agreed(closed_form_problem(self.nccl.combine(*state["nccl"]), x, idx, w, 2e-2))
        if tokens in a.tokens:
            row = self.timed_row(OURS, "normal", tokens, ours_dispatch, ours_combine, nbytes, host=(None, ours_combine))
            row["verified"] = f"{verified.get(f'{OURS}/normal', '—')}; this size: {ours_ok}"
            row["phases"] = self.phases(tokens, ours_dispatch)
            self.rows.append(row)
            for label in self.variants:
                if self.variant_sizes[label] in (None, tokens):
                    self.variant_normal(label, tokens, x, idx, w, nbytes, verified)
        row = self.timed_row(NCCL, "normal", tokens, nccl_dispatch, nccl_combine, nbytes, host=(None, nccl_combine))
        row["verified"] = f"{verified.get(f'{NCCL}/normal', '—')}; this size: {nccl_ok}"
        self.rows.append(row)

    def phases(self, tokens: int, dispatch: Callable[[], object], label: str = OURS) -> dict[str, float]:
        """Normal dispatch split into its phases: a CUDA event at each point ``op.set_phase_hook`` names
        (``op.PHASES``) over ``--reps`` calls, each after a GPU spin that keeps the GPU behind the host and a device
        barrier (as ``device_us``: the host's work before the first kernel is not timed, and the ranks start
        together); per interval, named by the point it ends at, the median, max over ranks (and the sum of the
        medians beside ``total``, the median of the whole span); printed as a RESULT line and kept as a note.

        Each interval is how long the stream took from the previous point to this one: a kernel (the host had
        enqueued it in time) or the GPU idle while the host works. ``route``: the route kernels (the counts
        exchange included); ``push``: the push kernel, launched before the host reads the summary from the
        second call of a plan on (one node), or after it; ``sync``: what the host's wait for the summary adds;
        ``alloc``: what the host's allocations add; ``own`` (the pipelined gather layout): what waiting for this
        rank's own tokens' push from the side stream adds; ``expand``: the expand kernel (pipelined, the default,
        in the gather layout the payload's block copy too; beside the push, ``ops.moe.switches.EXPAND_OVERLAPS_PUSH``,
        how long it ran after the push ended).

        A second RESULT line gives the host's side: when the host reached each point after ``sync`` (the summary
        landed, about when the push starts on the GPU), in µs after it (median, max over ranks). A point the host
        reaches later than the GPU's work before it takes puts host time on the device's path: with the push's
        length beside it, it says whether the side stream's own-rows launch (``own``: the host after that launch)
        or the expand kernel's went in while the push still ran."""
        from triton_dist.ops.moe import op as moe_op
        from triton_dist.runtime.world.host_lead import lead_host
        from triton_dist.testing import max_over_ranks

        events: list[tuple[str, torch.cuda.Event]] = []
        clock: dict[str, float] = {}

        def hook(phase: str) -> None:
            clock[phase] = time.perf_counter()
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            events.append((phase, event))

        samples: dict[str, list[float]] = {}
        host: dict[str, list[float]] = {}  # per point after sync: the host's µs after it
        previous = moe_op.set_phase_hook(hook)
        try:
            for rep in range(self.args.reps + 2):  # the first two: warm-up
                lead_host()
                self.barrier()
                events.clear()
                clock.clear()
                dispatch()
                torch.cuda.synchronize()
                if rep < 2:
                    continue
                add_phase_samples(samples, events)
                if "sync" in clock:
                    for phase, _ in events[[p for p, _ in events].index("sync") + 1 :]:
                        host.setdefault(phase, []).append((clock[phase] - clock["sync"]) * 1e6)
        finally:
            moe_op.set_phase_hook(previous)
        # Every rank takes part in the same collectives: the phases in op.PHASES' order, each rank's median.
        names = [phase for phase in (*moe_op.PHASES[1:], "total")]
        medians = {phase: max_over_ranks(statistics.median(samples[phase]) if phase in samples else -1.0)
                   for phase in names}  # fmt: skip
        medians = {phase: us for phase, us in medians.items() if us >= 0}
        text = ", ".join(f"{phase} {us:.1f}" for phase, us in medians.items())
        parts = sum(us for phase, us in medians.items() if phase != "total")
        log0(f"RESULT {label} normal T={tokens} dispatch phases µs (device, median, max over ranks): {text} "
             f"(sum of the phases {parts:.1f})")  # fmt: skip
        self.extras["notes"].append(f"{label} normal dispatch at {tokens} tokens, phases (µs, CUDA events): {text}")
        after = {phase: max_over_ranks(statistics.median(values)) for phase, values in host.items()}  # every rank's
        if after:
            log0(f"RESULT {label} normal T={tokens} dispatch host µs after sync (median, max over ranks): "
                 + ", ".join(f"{phase} {us:.1f}" for phase, us in after.items()))  # fmt: skip
        return medians

    def variant_normal(
        self,
        label: str,
        tokens: int,
        x: torch.Tensor,
        idx: torch.Tensor,
        w: torch.Tensor,
        nbytes: float,
        verified: dict[str, str],
    ) -> None:
        """Variant ``label``'s row in normal mode at ``tokens`` (checked against the closed form first); a failure
        that every rank sees (e.g. the heap too small for a second plan's buffers) becomes a note and the sweep
        goes on."""
        import triton_dist
        from triton_dist.testing import all_ranks_true

        options = self.variants[label]
        state: dict[str, Any] = {}

        def dispatch() -> None:
            state["d"] = triton_dist.ops.moe_dispatch(x, idx, w, self.args.experts, **options)

        def combine() -> None:  # y: the expanded rows of the first dispatch (the same inputs give the same rows)
            triton_dist.ops.moe_combine(state["y"], state["d"][1])

        raised = ""
        try:
            dispatch()
            state["y"] = expanded(*state["d"])
            out = triton_dist.ops.moe_combine(state["y"], state["d"][1])
            problem = closed_form_problem(out, x, idx, w, combine_rtol(options))
        except Exception as error:  # noqa: BLE001 (the reason is the result)
            problem = raised = f"{type(error).__name__}: {error}"[:300]
        ok = self.agreed(problem)  # every rank takes part in both collectives, whatever it raised
        if not all_ranks_true(not raised):
            self.note(f"{label} normal row at {tokens} tokens skipped: {raised or 'raised on another rank'}")
            return
        row = self.timed_row(label, "normal", tokens, dispatch, combine, nbytes, host=(None, combine))
        row["verified"] = f"{verified.get(f'{label}/normal', '—')}; this size: {ok}"
        if label in self.normal_only:
            row["phases"] = self.phases(tokens, dispatch, label)
        self.rows.append(row)

    def low_latency(self, verified: dict[str, str]) -> None:
        """The low-latency rows, graphed and eager: the default's, then each variant's with a low-latency mode."""
        a = self.args
        x, idx, w = self.inputs(a.ll_tokens)
        nbytes = sent_bytes(idx, self.local, self.rank, self.size, a.hidden, x.element_size())
        self.low_latency_rows(OURS, {}, (x, idx, w), nbytes, verified)
        for label in self.variants:
            if label not in self.normal_only:
                self.low_latency_rows(label, self.variants[label], (x, idx, w), nbytes, verified)
        self.save()

    def low_latency_rows(
        self,
        label: str,
        options: dict[str, Any],
        inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        nbytes: float,
        verified: dict[str, str],
    ) -> None:
        """``label``'s low-latency rows with ``moe_dispatch`` options ``options`` (the default's: none): graphed
        (``graphed_row``) and eager (``timed_row``), each with its verification."""
        import triton_dist

        a = self.args
        x, idx, w = inputs
        kwargs = {"mode": "low_latency", "max_tokens_per_rank": a.ll_tokens, **options}
        graphs = self.ll_graphs(x, idx, w, options)
        state: dict[str, Any] = {}

        def eager_dispatch() -> None:
            state["d"] = triton_dist.ops.moe_dispatch(x, idx, w, a.experts, **kwargs)

        def eager_combine() -> None:
            triton_dist.ops.moe_combine(*state["d"])

        host = (eager_dispatch, eager_combine)
        eager_dispatch()
        torch.cuda.synchronize()
        self.rows.append(self.graphed_row(label, graphs, inputs, nbytes, host, verified, options))
        row = self.timed_row(label, "low_latency eager", a.ll_tokens, eager_dispatch, eager_combine, nbytes,
                             host=host)  # fmt: skip
        row["verified"] = verified.get(f"{label}/low_latency", "—")
        self.rows.append(row)

    def fp8(self) -> None:
        """fp8 dispatch rows (fp8 rows + scales; dequantized on receipt) at 4096 tokens (or the largest ``--tokens``
        below it), if ``moe_dispatch`` has an fp8 option that runs: each checked once against the bf16 reference's
        rows (dequantized, relative error per row under 5%: e4m3 keeps 3 mantissa bits), then timed (dispatch only:
        combine takes ``y`` in x's dtype either way, the normal rows' combine)."""
        import triton_dist
        from triton_dist.testing import all_ranks_true

        a = self.args
        option, why = moe_fp8_option()
        if option is None:
            self.extras["fp8"] = why
            self.note(f"fp8 rows skipped: {why}")
            return
        tokens = max([t for t in a.tokens if t <= 4096] or [a.tokens[0]])
        variants = {f"{FP8}": dict(option)}
        if "dequantize" in inspect.signature(triton_dist.ops.moe_dispatch).parameters:
            variants[f"{FP8} (dequantized on receipt)"] = {**option, "dequantize": True}
        if not a.skip_gather and "layout" in inspect.signature(triton_dist.ops.moe_dispatch).parameters:
            variants[f"{FP8} gather"] = {**option, "layout": "gather"}
        xs, idxs, ws = verification_inputs(self.size, a.ll_tokens, a.hidden, a.experts, a.topk)
        refs = reference_dispatch(xs, idxs, ws, a.experts)
        want_rows, want = refs[self.rank]
        vx, vidx, vw = (t.to(self.device) for t in (xs[self.rank], idxs[self.rank], ws[self.rank]))
        x, idx, w = self.inputs(tokens)
        nbytes = sent_bytes(idx, self.local, self.rank, self.size, a.hidden, x.element_size())
        for path, kwargs in variants.items():
            raised = ""
            try:
                recv_x, handle = triton_dist.ops.moe_dispatch(vx, vidx, vw, a.experts, **kwargs)
                gather = getattr(handle, "gather_rows", None)
                if gather is not None:  # each token once: the expanded rows and their scales
                    rows, scales = gather.long(), handle.recv_scales
                    recv_x = recv_x[rows]
                    handle = dataclasses.replace(handle, recv_scales=None if scales is None else scales[rows])
                problem = fp8_problem(recv_x, handle, want_rows, want)
            except Exception as error:  # noqa: BLE001 (the reason is the result)
                problem = raised = f"{type(error).__name__}: {error}"[:300]
            verified = self.agreed(problem)
            log0(f"RESULT verify {path}: {verified}")
            if not all_ranks_true(not raised):  # every rank takes the same branch
                self.extras["fp8"] = f"moe_dispatch(..., {kwargs}) raised: {raised or 'on another rank'}"
                self.note(f"{path} row skipped: {self.extras['fp8']}")
                continue

            def dispatch(kwargs: dict[str, Any] = kwargs) -> None:
                triton_dist.ops.moe_dispatch(x, idx, w, a.experts, **kwargs)

            row: dict[str, Any] = {"path": path, "mode": "normal", "tokens": tokens, "bytes per rank": nbytes}
            row["dispatch device"] = device_us(dispatch, self.barrier, a.reps)
            row["dispatch idle"] = idle_us(dispatch, a.reps)
            row["dispatch host"] = row["combine device"] = row["combine idle"] = row["combine host"] = None
            row["dispatch GB/s"] = nbytes / row["dispatch device"] / 1e3  # at bf16 bytes, to compare with bf16's
            row["combine GB/s"] = None
            row["verified"] = f"{verified} (rows vs the bf16 reference, dequantized, < 5% per row)"
            log0(f"RESULT {path} T={tokens}: dispatch {row['dispatch device']:.1f}/{row['dispatch idle']:.1f} us")
            self.rows.append(row)
        self.save()

    # - --only-dispatch -

    def only_dispatch(self) -> None:
        """``--only-dispatch``: ours' normal dispatch in bf16 and fp8, expanded and gather layouts, each also with
        ``MoeConfig(pipelined=False)`` (the path before the pipelined default) and the gather layout without the
        overlap options (see the module docstring), each checked once against the
        reference at ``--ll-tokens`` per rank (bf16: dispatch and combine exactly as ``verify``;
        fp8: the rows within 5%, as :meth:`fp8`), then at every ``--tokens`` its device µs (``device_us``) and
        phases (:meth:`phases`); then the push all-gather and the two bars at the largest size at most 4096: the
        gather dispatch at 75% of the all-gather's per-rank bandwidth, and fp8 1.6x faster than bf16. RESULT
        lines only (no results files)."""
        import triton_dist
        from triton_dist.testing import all_ranks_true

        a = self.args
        plain: dict[str, dict[str, Any]] = {
            OURS: {},
            GATHER: {"layout": "gather"},
            FP8: {"fp8": True},
            f"{FP8} gather": {"fp8": True, "layout": "gather"},
        }
        variants = dict(plain)
        # Beside each default row, its path before the pipelined default; beside the gather layout's, the default
        # without switches.EXPAND_OVERLAPS_PUSH (the same plan: the own rows from a side stream, or with
        # switches.OWN_ROWS_IN_PUSH from the push's one launch) and at --expand-waves; beside fp8's (the expand beside
        # the 4-warp push), the fp8 push's options (FP8_PUSH_ROWS: among them the expand after the push, fp8's default
        # before 2026-11-27).
        compared = {f"{label} unpipelined": label for label in plain}
        if not a.skip_pipelined:
            for label, options in plain.items():
                variants[f"{label} unpipelined"] = {**options, "config": MoeConfig(pipelined=False)}
                if label == GATHER:
                    variants[f"{GATHER} {SIDE_STREAM}"] = {**options, OWN_IN_PUSH: False, OVERLAP: False}
                    variants[f"{GATHER} {OWN_IN_PUSH}"] = {**options, OWN_IN_PUSH: True, OVERLAP: False}
                    for waves in a.expand_waves:  # --expand-waves: the default with that many waves
                        variants[f"{GATHER} {OVERLAP} {waves} waves"] = {**options, OVERLAP: waves}
                if label == f"{FP8} gather":
                    for suffix, keys in FP8_PUSH_ROWS.items():  # the fp8 push's options
                        variants[f"{label} {suffix}"] = {**options, **keys}
            compared |= {f"{GATHER} {SIDE_STREAM}": GATHER, f"{GATHER} {OWN_IN_PUSH}": GATHER}
            compared |= {f"{GATHER} {OVERLAP} {n} waves": GATHER for n in a.expand_waves}
            compared |= {f"{FP8} gather {suffix}": f"{FP8} gather" for suffix in FP8_PUSH_ROWS}
        options_of = option_configs(a.route_programs, a.expand_block)  # the gather layout's, beside its default
        for suffix, config in options_of.items():
            for label in (GATHER, f"{FP8} gather"):
                variants[f"{label} {suffix}"] = {**plain[label], "config": config}
                compared[f"{label} {suffix}"] = label
        xs, idxs, ws = verification_inputs(self.size, a.ll_tokens, a.hidden, a.experts, a.topk)
        refs, exact = reference_results(xs, idxs, ws, a.experts)
        want_rows, want = refs[self.rank]
        vx, vidx, vw = (t.to(self.device) for t in (xs[self.rank], idxs[self.rank], ws[self.rank]))
        verified: dict[str, str] = {}
        for label, options in list(variants.items()):
            raised = ""
            try:
                recv_x, handle = dispatch_with(vx, vidx, vw, a.experts, options)
                if handle.gather_rows is not None:  # each token once: the expanded rows and their scales
                    rows, scales = handle.gather_rows.long(), handle.recv_scales
                    recv_x = recv_x[rows]
                    handle = dataclasses.replace(handle, recv_scales=None if scales is None else scales[rows])
                if options.get("fp8"):
                    problem = fp8_problem(recv_x, handle, want_rows, want)
                else:
                    combined = triton_dist.ops.moe_combine(scaled_experts(recv_x, handle.recv_expert), handle)
                    got = _ours_result(recv_x, handle, combined)
                    problem = compare(got, want_rows, want, exact[self.rank], combine_rtol(options))
            except Exception as error:  # noqa: BLE001 (the reason is the result)
                problem = raised = f"{type(error).__name__}: {error}"[:300]
            verified[label] = self.agreed(problem)
            log0(f"RESULT verify {label}/normal: {verified[label]}")
            if not all_ranks_true(not raised):  # every rank takes the same branch
                del variants[label]
        totals: dict[tuple[str, int], float] = {}
        for tokens in a.tokens:
            x, idx, w = self.inputs(tokens)
            nbytes = sent_bytes(idx, self.local, self.rank, self.size, a.hidden, x.element_size())
            for label, options in variants.items():

                def dispatch(options: dict[str, Any] = options, inputs: tuple[torch.Tensor, ...] = (x, idx, w)) -> None:
                    dispatch_with(*inputs, a.experts, options)

                dispatch()  # the plan's buffers at this size, untimed
                us = totals[label, tokens] = device_us(dispatch, self.barrier, a.reps)
                log0(f"RESULT {label} normal T={tokens}: dispatch {us:.1f} µs device, {nbytes / us / 1e3:.1f} GB/s "
                     f"per rank at bf16 bytes (verified: {verified[label]})")  # fmt: skip
                self.phases(tokens, dispatch, label)
            torch.cuda.empty_cache()
        for tokens in a.tokens:  # each row against the default it was timed beside
            for label, default in compared.items():
                if (label, tokens) in totals and (default, tokens) in totals:
                    ratio = totals[default, tokens] / totals[label, tokens]
                    log0(f"RESULT against the default: {label} T={tokens}: {ratio:.2f}x the speed of {default} "
                         "(the default)")  # fmt: skip
        self.allgather()
        tokens = max([t for t in a.tokens if t <= 4096] or [min(a.tokens)])
        gbps = self.extras.get("allgather_gbps")
        x, idx, w = self.inputs(tokens)
        nbytes = sent_bytes(idx, self.local, self.rank, self.size, a.hidden, x.element_size())
        options = [f"{GATHER} {suffix}" for suffix in options_of]
        others = [f"{GATHER} {SIDE_STREAM}", f"{GATHER} {OWN_IN_PUSH}"]
        others += [f"{GATHER} {OVERLAP} {n} waves" for n in a.expand_waves]
        for label in (OURS, GATHER, UNPIPELINED, UNPIPELINED_GATHER, *others, *options):
            if (label, tokens) in totals and gbps:
                share = nbytes / totals[label, tokens] / 1e3 / gbps
                log0(f"RESULT bar {label} normal T={tokens}: {100 * share:.0f}% of the push all-gather's {gbps:.1f} "
                     f"GB/s per rank (>= 75%: {'PASS' if share >= 0.75 else 'FAIL'})")  # fmt: skip
        pairs = [(OURS, FP8), (GATHER, f"{FP8} gather")]
        pairs += [(f"{GATHER} {suffix}", f"{FP8} gather {suffix}") for suffix in options_of]
        pairs += [(f"{b} unpipelined", f"{f} unpipelined") for b, f in pairs[:2]]
        pairs.append((f"{GATHER} {SIDE_STREAM}", f"{FP8} gather {EXPAND_AFTER}"))  # neither with the expand beside
        pairs += [(GATHER, f"{FP8} gather {suffix}") for suffix in FP8_PUSH_ROWS]  # the fp8 push's options
        for bf16, fp8 in pairs:
            if (bf16, tokens) in totals and (fp8, tokens) in totals:
                ratio = totals[bf16, tokens] / totals[fp8, tokens]
                log0(f"RESULT bar {fp8} T={tokens}: {ratio:.2f}x faster than {bf16} (>= 1.6: "
                     f"{'PASS' if ratio >= 1.6 else 'FAIL'})")  # fmt: skip

    # - --only-combine -

    def only_combine(self) -> None:
        """``--only-combine``: ours' normal combine with the default config, ``ops.moe.switches.REDUCE_OVERLAPS_PUSH``
        off (``ours``) and on (``ours reduce-overlap``, at ``COMBINE_WAVES`` and at each ``--combine-waves``, each also
        with ``OWN_PARTIALS_IN_REDUCE``), each
        checked once against the reference at ``--ll-tokens`` per rank (as ``verify``) and at every ``--tokens``
        against the identity expert's closed form, then its device µs (``device_us``, a fresh dispatch before each
        call, untimed) and phases (:meth:`combine_phases`); then the push all-gather, the bar at the largest size at
        most 4096 (75% of the all-gather's per-rank bandwidth) and each option's speed against the default. RESULT
        lines only (no results files)."""
        import triton_dist
        from triton_dist.ops.moe import switches

        a = self.args
        least = switches.COMBINE_WAVE_MIN_SLOTS
        waves = switches.COMBINE_WAVES
        by = switches.COMBINE_WAVES_BY_PROGRAMS
        settings: dict[str, CombineSetting] = {OURS: (False, waves, False, least, False, by)}
        settings[AUTO] = (False, waves, False, least, True, by)
        settings[REDUCE_OVERLAP] = (True, waves, False, least, False, False)
        pair = f"{REDUCE_OVERLAP} {OWN_PARTIALS}"
        settings[pair] = (True, waves, True, least, False, False)
        settings[f"{pair} {ALL_WAVES}"] = (True, waves, True, 0, False, False)
        settings[f"{pair} {BY_PROGRAMS}"] = (True, waves, True, max(least, 1), False, True)
        settings[f"{pair} {AGAIN}"] = settings[pair]
        for extra in a.combine_waves:
            settings[f"{REDUCE_OVERLAP} {extra} waves"] = (True, extra, False, least, False, False)
            settings[f"{pair} {extra} waves"] = (True, extra, True, least, False, False)
            settings[f"{pair} {BY_PROGRAMS} {extra} waves"] = (True, extra, True, max(least, 1), False, True)

        xs, idxs, ws = verification_inputs(self.size, a.ll_tokens, a.hidden, a.experts, a.topk)
        refs, exact = reference_results(xs, idxs, ws, a.experts)
        want_rows, want = refs[self.rank]
        vx, vidx, vw = (t.to(self.device) for t in (xs[self.rank], idxs[self.rank], ws[self.rank]))
        verified: dict[str, str] = {}
        for label, setting in settings.items():
            try:
                recv_x, handle = triton_dist.ops.moe_dispatch(vx, vidx, vw, a.experts)
                recv_x = expanded(recv_x, handle)
                combined = combine_with(scaled_experts(recv_x, handle.recv_expert), handle, setting)
                result = _ours_result(recv_x, handle, combined)
                problem = compare(result, want_rows, want, exact[self.rank], combine_rtol(None))
            except Exception as error:  # noqa: BLE001 (the reason is the result)
                problem = f"{type(error).__name__}: {error}"[:300]
            verified[label] = self.agreed(problem)
            log0(f"RESULT verify {label}/normal combine: {verified[label]}")
        totals: dict[tuple[str, int], float] = {}
        sizes: dict[int, float] = {}
        state: dict[str, Any] = {}  # the latest dispatch, which each combine reads
        for tokens in a.tokens:
            x, idx, w = self.inputs(tokens)
            sizes[tokens] = sent_bytes(idx, self.local, self.rank, self.size, a.hidden, x.element_size())
            holders = (idx.long() // (a.experts // self.size)).clamp(min=0)  # the rank of each (token, k)'s expert
            held = sum(int(((holders == d) & (idx >= 0)).any(dim=1).sum()) for d in range(self.size))
            log0(f"RESULT combine slots T={tokens}: rank 0's partials need {held} (switches.COMBINE_AUTO decides on "
                 f"the busiest rank's; switches.COMBINE_AUTO_MIN_SLOTS {switches.COMBINE_AUTO_MIN_SLOTS})")  # fmt: skip

            def dispatch(inputs: tuple[torch.Tensor, ...] = (x, idx, w)) -> None:
                state["d"] = triton_dist.ops.moe_dispatch(*inputs, a.experts)

            for label, setting in settings.items():

                def combine(setting: CombineSetting = setting) -> None:
                    combine_with(*state["d"], setting)

                dispatch()
                out = combine_with(*state["d"], setting)  # compiled, and checked at this size
                ok = self.agreed(closed_form_problem(out, x, idx, w, combine_rtol(None)))
                us = totals[label, tokens] = device_us(combine, self.barrier, a.reps, prepare=dispatch)
                log0(f"RESULT {label} normal T={tokens}: combine {us:.1f} µs device, {sizes[tokens] / us / 1e3:.1f} "
                     f"GB/s per rank at bf16 bytes (verified: {verified[label]}; this size: {ok})")  # fmt: skip
                self.combine_phases(tokens, combine, dispatch, label)
            torch.cuda.empty_cache()
        for (label, tokens), us in totals.items():
            if label != OURS and (OURS, tokens) in totals:
                log0(f"RESULT against push then reduce: {label} T={tokens}: combine {totals[OURS, tokens] / us:.2f}x "
                     f"the speed of {OURS} (COMBINE_AUTO and the options off)")  # fmt: skip
        self.allgather()
        gbps = self.extras.get("allgather_gbps")
        tokens = max([t for t in a.tokens if t <= 4096] or [min(a.tokens)])
        for label in settings:
            if (label, tokens) in totals and gbps:
                share = sizes[tokens] / totals[label, tokens] / 1e3 / gbps
                log0(f"RESULT bar {label} combine normal T={tokens}: {100 * share:.0f}% of the push all-gather's "
                     f"{gbps:.1f} GB/s per rank (>= 75%: {'PASS' if share >= 0.75 else 'FAIL'})")  # fmt: skip

    def combine_phases(
        self, tokens: int, combine: Callable[[], object], prepare: Callable[[], object], label: str = OURS
    ) -> dict[str, float]:
        """Normal combine split into its phases: a CUDA event at each point ``op.set_combine_phase_hook`` names
        (``op.COMBINE_PHASES``) over ``--reps`` calls, each after ``prepare`` (a fresh dispatch, untimed), a GPU spin
        that keeps the GPU behind the host and a device barrier (as ``device_us``); per interval, named by the point it
        ends at, the median, max over ranks, and ``total``; printed as a RESULT line. ``push``: the push kernel (each
        received token's partial into its home's buffer, over the links or locally); ``reduce``: the reduce kernel
        after it, its wait for every rank's push included (``ops.moe.switches.REDUCE_OVERLAPS_PUSH``: how long the
        reduce, launched beside the push, ran after the push ended)."""
        from triton_dist.ops.moe import op as moe_op
        from triton_dist.runtime.world.host_lead import lead_host
        from triton_dist.testing import max_over_ranks

        events: list[tuple[str, torch.cuda.Event]] = []

        def hook(phase: str) -> None:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            events.append((phase, event))

        samples: dict[str, list[float]] = {}
        previous = moe_op.set_combine_phase_hook(hook)
        try:
            for rep in range(self.args.reps + 2):  # the first two: warm-up
                prepare()
                lead_host()
                self.barrier()
                events.clear()
                combine()
                torch.cuda.synchronize()
                if rep < 2:
                    continue
                add_phase_samples(samples, events)
        finally:
            moe_op.set_combine_phase_hook(previous)
        names = [*moe_op.COMBINE_PHASES[1:], "total"]  # every rank takes part in the same collectives
        medians = {phase: max_over_ranks(statistics.median(samples[phase]) if phase in samples else -1.0)
                   for phase in names}  # fmt: skip
        medians = {phase: us for phase, us in medians.items() if us >= 0}
        text = ", ".join(f"{phase} {us:.1f}" for phase, us in medians.items())
        log0(f"RESULT {label} normal T={tokens} combine phases µs (device, median, max over ranks): {text}")
        return medians

    def layer(self) -> None:
        """The EP MoE layer's rows (see the module docstring) at every ``--layer-tokens``; its weights (about
        ``3 * E/W * H * I * 2`` bytes per rank, 11 GiB at the defaults on 2 ranks) are freed afterwards. A failure
        every rank sees while building or checking becomes a note and the other phases go on."""
        self._layer_rows()
        torch.cuda.empty_cache()  # the layer's weights, gone with _layer_rows' frame

    def _layer_rows(self) -> None:
        from triton_dist.layers import ExpertParallelMoE
        from triton_dist.ops import grouped_gemm
        from triton_dist.testing import all_ranks_true

        a = self.args
        if a.skip_layer:
            self.note("EP MoE layer rows skipped (--skip-layer)")
            return
        self.extras["layer_intermediate"] = a.layer_intermediate
        hidden, inter, local = a.hidden, a.layer_intermediate, self.local
        layers: list[Any] = []
        raised = ""
        try:
            gen = torch.Generator(device=self.device).manual_seed(27_000 + self.rank)  # each rank its own experts

            def weight(*shape: int) -> torch.Tensor:
                made = torch.randn(*shape, generator=gen, device=self.device, dtype=torch.bfloat16)
                return made.mul_(shape[1] ** -0.5)  # unit-size activations through every GEMM

            gate, up = weight(local, hidden, inter), weight(local, hidden, inter)
            ours = ExpertParallelMoE.from_shards(gate, up, weight(local, inter, hidden), num_experts=a.experts)
            del gate, up
            gather = ExpertParallelMoE.from_shards(
                ours.gate_up_weight[..., :inter], ours.gate_up_weight[..., inter:], ours.down_weight,
                num_experts=a.experts, dispatch_layout="gather",
            )  # fmt: skip
            gather.gate_up_weight = ours.gate_up_weight  # the same weights, one copy
            layers = [ours, gather]
            torch.cuda.empty_cache()
        except Exception as error:  # noqa: BLE001 (the reason is the result)
            raised = f"{type(error).__name__}: {error}"[:300]
        if not all_ranks_true(not raised):
            self.note(f"EP MoE layer rows skipped: building the layer raised {raised or 'on another rank'}")
            return
        ours, gather = layers
        gate_up_weight, down_weight = ours.gate_up_weight, ours.down_weight
        self.extras["notes"].append(
            f"EP MoE layer: ExpertParallelMoE.from_shards, {local} experts per rank of [{hidden}, {inter}] gate and "
            f"up, [{inter}, {hidden}] down, random bf16 (N(0, 1) / sqrt(fan-in)); {LAYER_GATHER}: the same weights "
            f"with dispatch_layout='gather'; {LAYER_NCCL}: the same weights through A2ADispatcher, ops.grouped_gemm "
            "twice (counts and offsets from the counts exchange, on the device) and A2ADispatcher.combine."
        )
        low = self.layer_low_latency(ours) if any(t <= a.ll_tokens for t in a.layer_tokens) else None

        def nccl(x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return nccl_layer_forward(self.nccl, gate_up_weight, down_weight, x, idx, w, grouped_gemm)

        paths: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]] = {
            LAYER_OURS: ours, LAYER_GATHER: gather, LAYER_NCCL: nccl,
        }  # fmt: skip
        for tokens in a.layer_tokens:
            gen = torch.Generator(device=self.device).manual_seed(5_000_000 + 1000 * tokens + self.rank)
            x, idx, w = make_inputs(tokens, hidden, a.experts, a.topk, gen, self.device)
            verified = self.layer_check(paths, x, idx, w, dense=tokens == min(a.layer_tokens))
            if verified is None:
                continue
            for path, forward in paths.items():

                def run(forward: Callable[..., torch.Tensor] = forward, inputs: tuple[Any, ...] = (x, idx, w)) -> None:
                    forward(*inputs)

                row: dict[str, Any] = {"path": path, "mode": "layer", "tokens": tokens}
                row["forward device"] = device_us(run, self.barrier, a.reps)
                row["forward idle"] = idle_us(run, a.reps)
                row["forward host"] = None  # the dispatch synchronizes with the host
                row["verified"] = verified[path]
                log0(f"RESULT {path} T={tokens}: forward {row['forward device']:.1f}/{row['forward idle']:.1f} µs "
                     f"(device / from idle)")  # fmt: skip
                self.rows.append(row)
            want = ours(x, idx, w)  # the default layer's output, what the rows below are checked against
            self.layer_gemms_row(ours, x, idx, w, want)
            if low is not None and tokens <= a.ll_tokens:
                self.layer_low_latency_row(low, x, idx, w, want)
            del want
            bound = layer_bound(self.rows, tokens)
            if bound is not None:
                log0(
                    f"RESULT layer bound at {tokens} tokens/rank: {LAYER_NCCL} / {LAYER_GEMMS} = {bound:.2f}x (device)"
                )
            log0(f"RESULT {layer_bar(self.rows, tokens)}")
            torch.cuda.empty_cache()
            self.save()

    def layer_low_latency(self, ours: Any) -> Any:
        """``ours``' weights (shared, no second copy) in ``ExpertParallelMoE(mode="low_latency",
        max_tokens_per_rank=--ll-tokens)``, or None with a note where building it raised on some rank."""
        from triton_dist.layers import ExpertParallelMoE
        from triton_dist.testing import all_ranks_true

        a = self.args
        inter = ours.intermediate_size
        self.extras["ll_tokens"] = a.ll_tokens
        low, raised = None, ""
        try:
            low = ExpertParallelMoE.from_shards(
                ours.gate_up_weight[..., :inter], ours.gate_up_weight[..., inter:], ours.down_weight,
                num_experts=a.experts, mode="low_latency", max_tokens_per_rank=a.ll_tokens,
            )  # fmt: skip
            low.gate_up_weight = ours.gate_up_weight  # the same weights, one copy
            torch.cuda.empty_cache()
        except Exception as error:  # noqa: BLE001 (the reason is the result)
            raised = f"{type(error).__name__}: {error}"[:300]
        if not all_ranks_true(not raised):
            self.note(f"{LAYER_LL} rows skipped: building the layer raised {raised or 'on another rank'}")
            return None
        return low

    def layer_gemms_row(
        self, layer: Any, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, want: torch.Tensor
    ) -> None:
        """``LAYER_GEMMS``' row: ``layer``'s expert compute alone (:func:`expert_gemms` with its weights and
        ``ops.grouped_gemm``, as its forward runs it) on ours' receive layout of these inputs, dispatched once
        outside the timing; checked first (its output combined, against ``want``, the layer's output), then timed
        as the other layer rows (device, from idle, and host: no host synchronization). A failure every rank sees
        becomes a note."""
        import triton_dist
        from triton_dist.ops import grouped_gemm
        from triton_dist.testing import all_ranks_true

        a, tokens = self.args, x.shape[0]
        state: dict[str, Any] = {}

        def run() -> torch.Tensor:
            recv_x, handle = state["d"]
            counts, offsets = handle.expert_counts, handle.expert_offsets
            return expert_gemms(recv_x, layer.gate_up_weight, layer.down_weight, counts, offsets, grouped_gemm)

        raised = ""
        try:
            state["d"] = triton_dist.ops.moe_dispatch(x, idx, w, a.experts)
            out = triton_dist.ops.moe_combine(run(), state["d"][1])
            problem = layer_problem(out, want, f"combined vs {LAYER_OURS}")
        except Exception as error:  # noqa: BLE001 (the reason is the result)
            problem = raised = f"{type(error).__name__}: {error}"[:300]
        verified = self.agreed(problem)
        log0(f"RESULT verify {LAYER_GEMMS} T={tokens} (combined, vs {LAYER_OURS}): {verified}")
        if not all_ranks_true(not raised):
            self.note(f"{LAYER_GEMMS} at {tokens} tokens skipped: {raised or 'raised on another rank'}")
            return
        row: dict[str, Any] = {"path": LAYER_GEMMS, "mode": "layer", "tokens": tokens}
        row["forward device"] = device_us(run, self.barrier, a.reps)
        row["forward idle"] = idle_us(run, a.reps)
        row["forward host"] = maybe_host_us(run)
        row["verified"] = verified
        log0(f"RESULT {LAYER_GEMMS} T={tokens}: {row['forward device']:.1f}/{row['forward idle']:.1f}/"
             f"{_us(row['forward host'])} µs (device / from idle / host)")  # fmt: skip
        self.rows.append(row)

    def layer_low_latency_row(
        self, layer: Any, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, want: torch.Tensor
    ) -> None:
        """``LAYER_LL``'s row: the low-latency ``layer``'s forward in one CUDA graph (run eagerly, then captured,
        on empty routing: x zero, every id -1), these inputs copied into the captured ones and the output poisoned,
        one replay checked against ``want`` (the default layer's output) and ``layer.check_status()``; then the
        replay timed as the bench's other graphed rows (device, from idle) and the eager forward's host µs. A
        failure every rank sees becomes a note."""
        from triton_dist.testing import all_ranks_true

        a, tokens = self.args, x.shape[0]
        graph = torch.cuda.CUDAGraph()
        raised = ""
        try:
            static = (torch.zeros_like(x), torch.full_like(idx, -1), torch.zeros_like(w))
            layer(*static)  # eager first: plan, buffers, compilation
            torch.cuda.synchronize()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out = layer(*static)
            for held, value in zip(static, (x, idx, w), strict=True):
                held.copy_(value)
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            layer.check_status()
            problem = layer_problem(out, want, f"replayed vs {LAYER_OURS}")
        except Exception as error:  # noqa: BLE001 (the reason is the result)
            problem = raised = f"{type(error).__name__}: {error}"[:300]
        verified = self.agreed(problem)
        log0(f"RESULT verify {LAYER_LL} T={tokens} (graph replayed on these inputs, vs {LAYER_OURS}): {verified}")
        if not all_ranks_true(not raised):
            self.note(f"{LAYER_LL} at {tokens} tokens skipped: {raised or 'raised on another rank'}")
            return

        def eager() -> None:
            layer(x, idx, w)

        row: dict[str, Any] = {"path": LAYER_LL, "mode": "layer", "tokens": tokens}
        row["forward device"] = device_us(graph.replay, self.barrier, a.reps)
        row["forward idle"] = idle_us(graph.replay, a.reps)
        row["forward host"] = maybe_host_us(eager)
        row["verified"] = verified
        log0(f"RESULT {LAYER_LL} T={tokens}: {row['forward device']:.1f}/{row['forward idle']:.1f}/"
             f"{_us(row['forward host'])} µs (device / from idle / host of the eager forward)")  # fmt: skip
        self.rows.append(row)

    def layer_check(
        self,
        paths: dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]],
        x: torch.Tensor,
        idx: torch.Tensor,
        w: torch.Tensor,
        dense: bool,
    ) -> dict[str, str] | None:
        """Each layer path once on these inputs: the gather layout and the NCCL path against the default, and with
        ``dense`` every path against :func:`dense_moe_partial` summed over the ranks (all ranks' tokens gathered);
        path -> 'ok' or why not, or None (with a note) where a path raised on some rank."""
        from triton_dist.testing import all_ranks_true

        outs: dict[str, torch.Tensor] = {}
        raised = ""
        try:
            for path, forward in paths.items():
                outs[path] = forward(x, idx, w)
            want = None
            if dense:
                every = [t.new_empty((self.size * t.shape[0], *t.shape[1:])) for t in (x, idx, w)]  # rank-major
                for gathered, mine in zip(every, (x, idx, w), strict=True):
                    dist.all_gather_into_tensor(gathered, mine.contiguous())
                layer = paths[LAYER_OURS]
                assert isinstance(layer, torch.nn.Module)
                partial = dense_moe_partial(*every, layer.gate_up_weight, layer.down_weight, self.rank * self.local)
                dist.all_reduce(partial)
                want = partial.view(self.size, x.shape[0], -1)[self.rank]
            torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 (the reason is the result)
            raised = f"{type(error).__name__}: {error}"[:300]
        if not all_ranks_true(not raised):
            self.note(f"EP MoE layer at {x.shape[0]} tokens skipped: {raised or 'raised on another rank'}")
            return None
        found = {}
        for path, out in outs.items():
            problems = [layer_problem(out, want, "vs the dense fp32 reference")] if want is not None else []
            if path != LAYER_OURS:
                problems.append(layer_problem(out, outs[LAYER_OURS], f"vs {LAYER_OURS}"))
            found[path] = self.agreed("; ".join(p for p in problems if p))
            what = "dense reference and " if want is not None else ""
            log0(f"RESULT verify {path} T={x.shape[0]} ({what}{LAYER_OURS}): {found[path]}")
        return found

    def allgather(self) -> None:
        """The push all-gather example's per-rank bandwidth at a shard of ``--ag-tokens`` x H bf16."""
        sys.path.insert(0, str(BENCH.parent / "examples"))
        from allgather_push import allgather_push

        a = self.args
        rt = self.rt
        elems = a.ag_tokens * a.hidden
        shard = torch.randn(elems, device=self.device).to(torch.bfloat16)
        out = rt.empty(elems * self.size, dtype=torch.bfloat16)
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        ctas = max(16, min(64, sms // self.size))
        flags = rt.zeros(self.size * ctas, dtype=torch.int32)
        rt.barrier()
        epoch = [0]

        def launch() -> None:
            epoch[0] += 1
            allgather_push[(ctas, self.size)](shard, out, flags, elems, epoch[0], CTAS_PER_PEER=ctas, BLOCK=4096,
                                              num_warps=8)  # fmt: skip

        reference = torch.empty_like(out)
        dist.all_gather_into_tensor(reference, shard)
        out.fill_(float("nan"))
        rt.barrier_on_device()
        launch()
        rt.barrier()
        ok = self.agreed("" if torch.equal(out, reference) else "push all-gather output differs from NCCL's")
        us = device_us(launch, self.barrier, a.reps)
        gbps = elems * 2 * (self.size - 1) / us / 1e3
        self.extras["allgather_gbps"] = gbps
        self.extras["allgather_us"] = us
        self.note(
            f"push all-gather (examples/allgather_push.py, {ctas} programs per peer, BLOCK 4096, 8 warps), shard "
            f"{a.ag_tokens} x {a.hidden} bf16 = {elems * 2 / 2**20:.1f} MiB per rank: {us:.1f} µs device, "
            f"{gbps:.1f} GB/s per rank sent to peers (checked against all_gather_into_tensor: {ok})"
        )
        log0(f"RESULT push all-gather {gbps:.1f} GB/s per rank ({us:.1f} us)")
        for line in combine_bars(self.rows, self.extras, a.ll_tokens):
            log0(f"RESULT bar {line}")
        self.save()

    def nvshmem(self) -> None:
        """The NVSHMEM phase in child processes (see the module docstring); its rows or its reason."""
        a = self.args
        if a.skip_nvshmem:
            self.note("NVSHMEM all_to_all_vdev phase skipped (--skip-nvshmem)")
            return
        shared: list[Any] = [None, None]
        if self.rank == 0:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                shared = [probe.getsockname()[1], tempfile.mkdtemp(prefix="moe_nvshmem_")]
        dist.broadcast_object_list(shared, src=0)
        port, folder = shared
        os.makedirs(folder, exist_ok=True)
        record_path = Path(folder, f"rank{self.rank}.json")
        rows, error = run_nvshmem_children(a, self.rank, self.size, port, record_path)
        dist.barrier()
        self.rows += rows
        if error:
            self.extras["nvshmem"] = error
            self.note(f"NVSHMEM all_to_all_vdev: {error}")
        self.save()


def child_env(rank: int, size: int, port: int, needed_bytes: int) -> dict[str, str]:
    """The environment of one rank's NVSHMEM child: torchrun's variables replaced by a group of its own."""
    from triton_dist.testing import env_without_launcher

    env = env_without_launcher()
    env.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=os.environ.get("LOCAL_RANK", str(rank)),
               LOCAL_WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))  # fmt: skip
    env.setdefault("NVSHMEM_SYMMETRIC_SIZE", str(needed_bytes + (1 << 30)))
    return env


def run_nvshmem_children(
    args: argparse.Namespace, rank: int, size: int, port: int, record_path: Path
) -> tuple[list[dict[str, Any]], str]:
    """Run this rank's NVSHMEM child; returns its rows and '' or the reason it gave none."""
    max_tokens = max(args.tokens)
    row = args.hidden + 4 * args.topk
    needed = 2 * max_tokens * size * (row + args.hidden) * 2
    command = [sys.executable, str(Path(__file__).resolve()), "--nvshmem-child", str(record_path),
               "--tokens", ",".join(map(str, args.tokens)), "--ll-tokens", str(args.ll_tokens),
               "--hidden", str(args.hidden), "--experts", str(args.experts), "--topk", str(args.topk),
               "--reps", str(args.reps)]  # fmt: skip
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    try:
        done = subprocess.run(command, env=child_env(rank, size, port, needed), capture_output=True, text=True,
                              timeout=args.nvshmem_timeout)  # fmt: skip
        output = done.stdout + done.stderr
        status = f"exit {done.returncode}"
    except subprocess.TimeoutExpired as timeout:
        out = timeout.stdout.decode() if isinstance(timeout.stdout, bytes) else (timeout.stdout or "")
        err = timeout.stderr.decode() if isinstance(timeout.stderr, bytes) else (timeout.stderr or "")
        output = out + err
        status = f"timed out after {args.nvshmem_timeout} s"
    tail = output[-3000:]
    record: dict[str, Any] = {}
    if record_path.exists():
        try:
            record = json.loads(record_path.read_text())
        except json.JSONDecodeError:
            record = {}
    rows = record.get("rows", [])
    error = record.get("error", "")
    if not record.get("done"):
        lines = [line for line in tail.splitlines() if "Error" in line or "error" in line or "FATAL" in line]
        error = error or f"child {status}: " + (lines[-1] if lines else tail[-300:]).strip()[:300]
    if rank == 0:
        for line in output.splitlines():
            if line.startswith("RESULT"):
                print(line, flush=True)
        if error:
            print(f"INFO NVSHMEM child of rank {rank}: {status}; output tail:\n{tail[-1500:]}", flush=True)
    return rows, error


def nvshmem_row(
    disp: A2ADispatcher, tokens: int, args: argparse.Namespace, barrier: Callable[[], object]
) -> dict[str, Any]:
    """One NVSHMEM row: ``disp`` at ``tokens`` per rank, timed device and from idle."""
    rank, size = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator(device=disp.device).manual_seed(1000 * tokens + rank)
    x, idx, w = make_inputs(tokens, args.hidden, args.experts, args.topk, gen, disp.device)
    nbytes = sent_bytes(idx, args.experts // size, rank, size, args.hidden, x.element_size())
    state: dict[str, Any] = {}

    def dispatch() -> None:
        state["d"] = disp.dispatch(x, idx, w)

    def combine() -> None:
        disp.combine(*state["d"])

    dispatch()
    flag = torch.tensor([0 if closed_form_problem(disp.combine(*state["d"]), x, idx, w, 2e-2) else 1], device=x.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    row: dict[str, Any] = {"path": NVSHMEM, "mode": "normal", "tokens": tokens, "bytes per rank": nbytes}
    row["this size"] = "ok" if int(flag) else "FAILED (identity-expert combine)"
    row["dispatch device"] = device_us(dispatch, barrier, args.reps)
    row["combine device"] = device_us(combine, barrier, args.reps, prepare=dispatch)
    row["dispatch idle"] = idle_us(dispatch, args.reps)
    row["combine idle"] = idle_us(combine, args.reps, prepare=dispatch)
    row["dispatch host"] = row["combine host"] = None
    for op in COLUMNS:
        row[f"{op} GB/s"] = nbytes / row[f"{op} device"] / 1e3
    return row


def nvshmem_child(args: argparse.Namespace) -> int:
    """The NVSHMEM phase, one process per rank (``--nvshmem-child PATH``): verification, then the normal-mode sizes
    through the all-to-all dispatcher with ``all_to_all_vdev`` exchanges; writes its record to PATH as it goes."""
    record: dict[str, Any] = {"rows": [], "error": "", "done": False}
    path = Path(args.nvshmem_child)

    def save() -> None:
        path.write_text(json.dumps(record))

    try:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        rank, size = dist.get_rank(), dist.get_world_size()
        import torch.distributed._symmetric_memory as symm_mem

        if not symm_mem.is_nvshmem_available():
            raise RuntimeError("torch reports NVSHMEM unavailable (symm_mem.is_nvshmem_available() is False)")
        symm_mem.set_backend("NVSHMEM")
        comm = NvshmemComm(dist.group.WORLD, device)
        max_tokens = max(args.tokens + [args.ll_tokens])
        disp = A2ADispatcher(comm, args.experts, args.hidden, args.topk, max_tokens, torch.bfloat16, device)
        xs, idxs, ws = verification_inputs(size, args.ll_tokens, args.hidden, args.experts, args.topk)
        refs, exact = reference_results(xs, idxs, ws, args.experts)
        x, idx, w = (t.to(device) for t in (xs[rank], idxs[rank], ws[rank]))
        try:
            problem = compare(run_a2a(disp, x, idx, w), refs[rank][0], refs[rank][1], exact[rank], 2e-2)
        except Exception as error:  # noqa: BLE001 (reported)
            problem = f"{type(error).__name__}: {error}"[:300]
        flag = torch.tensor([0 if problem else 1], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        verified = "ok" if int(flag) else f"FAILED: {problem or 'on another rank'}"
        log0(f"RESULT verify {NVSHMEM}/normal: {verified}")
        one = torch.zeros(1, device=device)

        def barrier() -> None:
            dist.all_reduce(one)

        for tokens in args.tokens:
            row = nvshmem_row(disp, tokens, args, barrier)
            row["verified"] = f"{verified}; this size: {row.pop('this size')}"
            record["rows"].append(row)
            log0(f"RESULT {NVSHMEM} T={tokens}: dispatch {row['dispatch device']:.1f} combine "
                 f"{row['combine device']:.1f} us")  # fmt: skip
            save()
        record["done"] = True
    except Exception as error:  # noqa: BLE001 (the reason is the result)
        record["error"] = f"{type(error).__name__}: {error}"[:300]
        print(f"FATAL {record['error']}", flush=True)
    save()
    sys.stdout.flush()
    os._exit(0)  # NVSHMEM's finalize at exit is not needed here and has crashed on some stacks


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.nvshmem_child:
        return nvshmem_child(args)
    from triton_dist.testing import teardown

    bench = Bench(args)
    if args.experts % bench.size:
        raise SystemExit(f"--experts {args.experts} must be a multiple of the world size {bench.size}")
    log0(f"moe bench: {bench.size} ranks, H {args.hidden}, top-{args.topk} of {args.experts}, tokens {args.tokens}")
    if args.only_dispatch:
        bench.only_dispatch()
        bench.rt.barrier()
        teardown()
        return 0
    if args.only_combine:
        bench.only_combine()
        bench.rt.barrier()
        teardown()
        return 0
    if args.only_layer:
        bench.layer()
        bench.save()  # its notes too, where the layer was skipped
        bench.rt.barrier()
        teardown()
        return 0
    verified = bench.verify()
    bench.normal_sizes(verified)
    bench.low_latency(verified)
    bench.fp8()
    bench.layer()
    bench.allgather()
    bench.nvshmem()
    bench.rt.barrier()
    teardown()
    return 0


if __name__ == "__main__":
    from triton_dist.testing import main_guard

    main_guard(main)
