"""Where a decoder layer's time goes, ours against the torch TP baseline: the measured cause of each shortfall of
bench/decoder.py against issue 28's bar, one run.

    torchrun --nproc-per-node=2 bench/decoder_anatomy.py [--models M1,M2] [--phases prefill,decode]
        [--batch 8,64] [--context 4096] [--tokens 4096] [--layers 2] [--top 8]
        [--decode-variants cublas-o,all-gather,...|all] [--out-dir bench/results]

The same stacks, weights, inputs and baselines as bench/decoder.py (``build_layers``, ``prefill_steps``,
``decode_steps``, ``torch_prefill_layer``), for each model and shape:

- Decode, one CUDA-graphed step (10 steps per graph, as bench/decoder.py times them), ours (sequence-split KV cache)
  and torch: the step's time per layer as bench/decoder.py measures it (graph replays, median, max over ranks), then
  ``--runs`` replays under ``torch.profiler`` (CUDA activity only): the kernels' time per layer summed by category
  (``categorize``: GEMM/GEMV, GEMM with its communication fused, attention, communication, copy-engine copies, the
  fused all-reduce + residual + RMSNorm, norm + residual, other elementwise work (RoPE, SiLU, copies, indexing),
  unknown), their sum,
  the time at least one kernel ran (busy: their union), the profiled span of the step and the GPU's idle time inside
  it (span - busy; kernels that ran concurrently show as overlap = sum - busy).
- Prefill, eager (CUDA events after a device barrier, median, max over ranks, as bench/decoder.py): the same
  breakdown, plus the overlap bound: the same layers with every communication removed. Ours: ``ag_gemm`` and
  ``gemm_rs`` replaced by local ``torch.matmul`` of the same per-rank shapes ([M, K] @ [K, N/W] from a
  preallocated gathered input; [M, K/W] @ [K/W, N] and this rank's rows of it); torch: without its two
  ``all_reduce``. torch / ours-without-communication is the best speedup any overlap could reach.
- ``--decode-variants``: the same decode breakdown for ours with the layers' decode options on (bench/decoder.py's
  ``DECODE_VARIANTS``), a row ``ours <variant>`` each in the case's table (the L2 prefetch's kernel counts as other,
  and as overlap where it runs beside the fused all-reduce).
- Decode's HBM floor: once per run, the GPU's achievable HBM bandwidth (``hbm_bandwidth``: median of 30 timed
  ``torch.sum`` and copies of a 1 GiB bf16 tensor, CUDA events, the larger rate); per case, the bytes each rank
  must move per layer on each side (``decode_bytes``: weight shards, the KV cache it reads, activations; ours
  sequence-split, torch head-split), the floor = bytes / bandwidth for attention, GEMM, the rest and the step,
  each side's fraction of floor, bound = torch's µs / ours' floor, and where ours is furthest above its floor
  (``floor_summary``; one ``RESULT floor`` line per case).

The breakdown shown is the slowest rank's (the largest profiled span), as the timings are max over ranks. Each profiled
run starts after a GPU spin and a device barrier (``testing.timing``'s harness); those two kernels are not counted.
Kernel names no rule knows are listed (``unknown``) so nothing hides in a category.

Defaults: decode of Llama-3-8B and Qwen3-32B at batch 8 and 64 with 4k context, prefill of 4k tokens of all three
models (the rows of bench/results/decoder_2xH200.md below the bar); ``--models`` picks the models of both phases.
Writes ``decoder_anatomy_<W>x<GPU>.md`` (also printed) and ``.json`` to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, describe_machine, markdown_table, write_json  # noqa: E402
from decoder import (  # noqa: E402
    AGREEMENT,
    BAR,
    CACHE_SLACK,
    DECODE_VARIANTS,
    build_layers,
    decode_steps,
    difference,
    gpu_tag,
    layer_options,
    prefill_steps,
    torch_prefill_layer,
)

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.layers import CONFIGS, DecoderConfig, TensorParallelDecoderLayer  # noqa: E402
from triton_dist.layers import linear as linear_layers  # noqa: E402 (where the linears look ag_gemm / gemm_rs up)
from triton_dist.ops import all_reduce  # noqa: E402
from triton_dist.runtime.world.host_lead import lead_host  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed, teardown  # noqa: E402
from triton_dist.testing.distributed import all_ranks_true  # noqa: E402
from triton_dist.testing.timing import graphed_us, time_ms  # noqa: E402

ag_gemm_op = importlib.import_module("triton_dist.ops.ag_gemm")
gemm_rs_op = importlib.import_module("triton_dist.ops.gemm_rs")

DECODE_MODELS = ["Llama-3-8B", "Qwen3-32B"]
"""The models whose decode missed the bar at 4k context (bench/results/decoder_2xH200.md)."""
BATCHES = [8, 64]
CONTEXTS = [4096]
TOKENS = [4096]
GRAPH_CALLS = 10
"""Decode steps per CUDA graph (as ``testing.timing.graphed_us``)."""

CATEGORIES = ("GEMM", "GEMM+comm", "attention", "comm", "memcpy", "AR+norm", "norm+residual", "other", "unknown")
"""The kernel categories, in table order: GEMM/GEMV; a GEMM with its communication fused in one kernel (ours'
``ag_gemm`` / ``gemm_rs`` / ``gemm_ar``); attention (SDPA's kernels, ``flash_decode``); communication kernels (NCCL,
our all-reduce, producer and flag kernels); copy-engine copies (``Memcpy ...``: ours' ``ag_gemm`` sends its rows to
the peers this way, beside its GEMM; a copy within the GPU shows the same); the fused all-reduce + residual +
RMSNorm; RMSNorm and the residual add; other elementwise and copy kernels (RoPE, SiLU, indexing, copies, fills);
unknown names."""
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("memcpy", re.compile(r"^Memcpy")),
    ("AR+norm", re.compile(r"_ar_rmsnorm")),
    ("GEMM+comm", re.compile(r"(?<![A-Za-z0-9])_(ag_gemm|gemm_rs|gemm_ar)\w*_kernel")),
    (
        "comm",
        re.compile(
            r"nccl|_one_shot|_two_shot|(?<![A-Za-z0-9])_push_kernel|(?<![A-Za-z0-9])_begin_kernel|_cublas_\w+_kernel"
            r"|_reduce_partials_kernel|write_flag_kernel|all_?reduce|all_?gather|reduce_?scatter|symm_mem|multimem"
            r"|cross_device",
            re.IGNORECASE,
        ),
    ),
    ("attention", re.compile(r"flash|fmha|sdpa|attention|attn|softmax", re.IGNORECASE)),
    ("GEMM", re.compile(r"gemm|gemv|nvjet|xmma|cutlass|matmul|splitKreduce|cublas|dot_kernel", re.IGNORECASE)),
    ("norm+residual", re.compile(r"rms_?norm|layer_?norm|RowwiseMoments|CUDAFunctor_add<c10::(BFloat16|Half)>")),
    ("other", re.compile(r"at::native|at::cuda|Memset|^triton_|elementwise|copy|fill|index|silu|rope|prefetch")),
)
"""(category, pattern) in order: a kernel's category is the first whose pattern its name contains (the fused kernels'
names hold "gemm" or "rmsnorm", so they come first; flash attention's hold "cutlass", so attention precedes GEMM)."""
HARNESS = re.compile(r"spin_kernel|(?<![A-Za-z0-9])_barrier_kernel$")
"""The kernels each profiled run starts with (``lead_host``'s spin and ``barrier_on_device``), not counted."""
TRANSFER = re.compile(r"Mem(cpy|set) ")
"""The profiler's names of copies and fills (not kernels): among the harness kernels they are the harness's."""


def categorize(name: str) -> str:
    """The category (one of ``CATEGORIES``) of a GPU activity's name (a kernel, ``Memcpy ...``, ``Memset ...``):
    the first of ``RULES`` whose pattern the name contains, else ``unknown``."""
    for category, pattern in RULES:
        if pattern.search(name):
            return category
    return "unknown"


NAMESPACES = ("at::native::", "at::cuda::", "(anonymous namespace)::", "pytorch_flash::")
"""Namespaces ``short_name`` drops."""


def short_name(name: str, width: int = 100) -> str:
    """A kernel's name without ``void``, ``NAMESPACES`` and its parameter list, at most ``width`` characters
    (``void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, ...>(int, ...)``
    -> ``vectorized_elementwise_kernel<4, CUDAFunctor_add<c10::BFloat16>, ...>``)."""
    text = name.removeprefix("void ").strip()
    for namespace in NAMESPACES:
        text = text.replace(namespace, "")
    depth = 0
    for index, char in enumerate(text):  # the parameter list: the first "(" outside template brackets
        depth += (char == "<") - (char == ">")
        if char == "(" and depth <= 0 and index:
            text = text[:index].rstrip()
            break
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class Kernel:
    """One GPU activity of a profile: its name and start / end in µs."""

    name: str
    start: float
    end: float


@dataclass
class Breakdown:
    """What a variant's profiled runs spent per layer, in µs (``breakdown``)."""

    runs: int
    """The runs found in the profile (each begins after a harness spin and barrier)."""
    categories: dict[str, float]
    kernels: float
    """The sum of every kernel's time."""
    busy: float
    """The time at least one kernel ran (their union)."""
    span: float
    """From the end of the run's harness barrier to the end of its last kernel."""
    top: list[tuple[str, str, float, float]] = field(default_factory=list)
    """The longest kernels by total time: (name, category, µs per layer, launches per layer)."""
    unknown: list[str] = field(default_factory=list)
    """The full names of the kernels no rule knows."""
    rank: int = 0
    note: str = ""
    run_shapes: list[tuple[int, float]] = field(default_factory=list)
    """Each run's kernel count and span in µs, in order (where a profile splits into more runs than profiled)."""

    @property
    def idle(self) -> float:
        """The GPU's idle time inside a run: span - busy."""
        return self.span - self.busy

    @property
    def overlap(self) -> float:
        """Kernel time that ran beside other kernels: sum - busy."""
        return self.kernels - self.busy


def union_length(intervals: Sequence[tuple[float, float]]) -> float:
    """The total length covered by ``(start, end)`` intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def breakdown(kernels: Sequence[Kernel], per_run: int, top: int = 8) -> Breakdown:
    """Split a profile's kernels into runs and sum them per layer.

    A run starts when the first non-harness kernel follows harness kernels (``HARNESS``: each profiled run is a spin,
    a device barrier, then the work) and lasts until the next harness kernel; its span runs from the end of its
    harness kernels to the end of its last kernel. Copies and fills (``Memcpy ...``, ``Memset ...``) that land among
    the harness kernels belong to the harness (the barrier's own transfers); those after the last harness kernel
    belong to the run. Every value is the total over the runs / (runs x ``per_run``, the layers a run covers).
    Kernels before the first harness kernel belong to no run and are ignored. Raises ValueError for a ``per_run``
    below 1.
    """
    if per_run < 1:
        raise ValueError(f"per_run must be >= 1 (the layers one run covers), got {per_run}")
    runs: list[list[Kernel]] = []
    starts: list[float] = []
    harness_end: float | None = None
    waiting: list[Kernel] = []  # transfers after a harness kernel, before the run's first kernel: whose are they?
    for kernel in sorted(kernels, key=lambda k: (k.start, k.end)):
        if HARNESS.search(kernel.name):
            harness_end = kernel.end if harness_end is None else max(harness_end, kernel.end)
            waiting = []  # a harness kernel after them: they were the harness's
            continue
        if harness_end is not None and TRANSFER.match(kernel.name):
            waiting.append(kernel)
            continue
        if harness_end is not None:  # the first kernel after a harness block opens a run
            runs.append(waiting)
            starts.append(harness_end)
            harness_end, waiting = None, []
        if runs:
            runs[-1].append(kernel)
    if harness_end is not None and waiting:  # transfers alone after the last harness block: a run of their own
        runs.append(waiting)
        starts.append(harness_end)
    count = max(1, len(runs) * per_run)
    categories = dict.fromkeys(CATEGORIES, 0.0)
    by_name: dict[str, list[float]] = {}
    total = busy = span = 0.0
    for start, work in zip(starts, runs, strict=True):
        span += max(k.end for k in work) - start
        busy += union_length([(max(k.start, start), k.end) for k in work])
        for k in work:
            categories[categorize(k.name)] += k.end - k.start
            total += k.end - k.start
            entry = by_name.setdefault(k.name, [0.0, 0.0])
            entry[0] += k.end - k.start
            entry[1] += 1
    longest = sorted(by_name.items(), key=lambda item: -item[1][0])[:top]
    return Breakdown(
        runs=len(runs),
        categories={name: value / count for name, value in categories.items()},
        kernels=total / count,
        busy=busy / count,
        span=span / count,
        top=[(name, categorize(name), time / count, calls / count) for name, (time, calls) in longest],
        unknown=sorted(name for name in by_name if categorize(name) == "unknown"),
        run_shapes=[(len(work), max(k.end for k in work) - start) for start, work in zip(starts, runs, strict=True)],
    )


# --------------------------------------------------------------------------------------------- the HBM floor (decode)

FLOOR_SIDES = {"ours": "sequence", "torch": "heads"}
"""The KV cache layout each side's decode reads (bench/decoder.py: ours sequence-split, torch TP head-split)."""
REST = "rest (comm, AR+norm, norms, elementwise, idle)"
"""What the floor's third category covers: the timed step less its attention and GEMM kernels."""


@dataclass(frozen=True)
class DecodeBytes:
    """The bytes one rank must move between HBM and the chip in one decode step of one layer (``decode_bytes``)."""

    attention: int
    """The attention kernel: the cached K and V it reads, its queries in and its output out."""
    gemm: int
    """The four projections (QKV, O, gate/up, down): this rank's weight shards, each GEMM's input and output."""
    other: int
    """The rest: the norms' weights; the two residual + RMSNorm steps (x and residual in, normed and residual out);
    RoPE with the cache write (QKV's output in, q, the new k and v out); SiLU(gate) * up (gate/up in, the product
    out)."""

    @property
    def total(self) -> int:
        """Every byte of the step: attention + gemm + other."""
        return self.attention + self.gemm + self.other


def decode_bytes(
    config: DecoderConfig,
    batch: int,
    context: int,
    world_size: int,
    layout: str,
    *,
    max_len: int | None = None,
    dtype_bytes: int = 2,
) -> DecodeBytes:
    """The HBM traffic one rank cannot avoid in a decode step of one layer of ``config``: ``batch`` sequences, one new
    token each at position ``context`` (so ``context + 1`` tokens to attend to), over ``world_size`` ranks, every
    tensor ``dtype_bytes`` wide (bf16: 2), each byte moved once (what a fully fused implementation would move; the
    L2 cache holds none of it across the step: the weights and the cache are far larger).

    ``layout`` "heads" (torch TP): this rank's Hkv/W KV heads over every token, its Hq/W query heads, everything
    else per rank. "sequence" (ours): every KV head over this rank's block of the tokens, every query head's
    attention (ours gathers every head's q, k, v and rotates them all on every rank); the busiest rank's block:
    ``min(context + 1, max_len / W)`` tokens for a cache of ``max_len`` positions split in W equal blocks (rank 0
    holds the first), ``ceil((context + 1) / W)`` without ``max_len`` (an even split). Not counted: the
    communication (NVLink, not HBM), the rotary tables, flash_decode's per-split partial records (fp32, B x Hq x
    (D + 1) per split: under 1% here). Raises ValueError naming a bad layout, a non-positive batch or world size,
    a negative context, heads or the intermediate size that ``world_size`` does not divide, or a ``max_len`` that is
    too short or not a multiple of ``world_size``.
    """
    if layout not in ("heads", "sequence"):
        raise ValueError(f"decode_bytes: layout must be 'heads' or 'sequence', got {layout!r}")
    if batch < 1 or world_size < 1 or context < 0 or dtype_bytes < 1:
        raise ValueError(
            f"decode_bytes: batch, world_size and dtype_bytes must be >= 1 and context >= 0, got batch {batch}, "
            f"world_size {world_size}, dtype_bytes {dtype_bytes}, context {context}"
        )
    h, hq, hkv, d, inter, w = (
        config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim, config.intermediate_size,
        world_size,
    )  # fmt: skip
    if hq % w or hkv % w or inter % w:
        raise ValueError(
            f"decode_bytes: {config.name}'s heads ({hq} query, {hkv} KV) and intermediate size {inter} must be "
            f"multiples of world_size {w}"
        )
    tokens = context + 1
    if layout == "heads":
        kv_heads, q_heads, rotated, cached = hkv // w, hq // w, (hq + 2 * hkv) // w, tokens
    else:
        kv_heads, q_heads, rotated = hkv, hq, hq + 2 * hkv
        if max_len is None:
            cached = -(-tokens // w)
        elif max_len < tokens or max_len % w:
            raise ValueError(
                f"decode_bytes: max_len {max_len} must hold the context's {tokens} tokens and be a multiple of "
                f"world_size {w}"
            )
        else:
            cached = min(tokens, max_len // w)
    qkv_cols = (hq + 2 * hkv) * d // w  # this rank's QKV columns
    attention = 2 * batch * kv_heads * cached * d + 2 * batch * q_heads * d  # K and V; q in, out out
    weights = h * qkv_cols + (hq * d // w) * h + h * (2 * inter // w) + (inter // w) * h
    gemm_io = batch * ((h + qkv_cols) + (hq * d // w + h) + (h + 2 * inter // w) + (inter // w + h))
    norms = 2 * h + (2 * d if config.qk_norm else 0)
    elementwise = 2 * 4 * batch * h  # two residual + RMSNorm: x, residual in; normed, residual out
    elementwise += 2 * batch * rotated * d  # RoPE and the cache write: q, k, v in; q, new k, new v out
    elementwise += 3 * batch * inter // w  # SiLU(gate) * up: gate and up in, the product out
    return DecodeBytes(
        attention=attention * dtype_bytes,
        gemm=(weights + gemm_io) * dtype_bytes,
        other=(norms + elementwise) * dtype_bytes,
    )


def floor_summary(row: dict, config: DecoderConfig, world_size: int, bandwidth: dict) -> dict:
    """A decode row's HBM floor: for each side (``FLOOR_SIDES``), its bytes (``decode_bytes``; ours with bench/
    decoder.py's caches of ``context + CACHE_SLACK`` positions), the floor in µs per layer (bytes / the measured
    ``bandwidth["gbps"]``: attention, GEMM, other, the rest of the step = GEMM + other, the step), what it spent
    (attention and GEMM kernels as profiled, ours' GEMM counting its fused gemm_ar; the rest = the timed step less
    those two, i.e. communication, norms, elementwise kernels and idle), each category's fraction of its floor
    (floor / spent: 1 = at HBM speed), and µs above each floor; then ``bound`` = torch's timed µs / ours' step floor
    (the best speedup over the measured torch of any implementation moving ours' bytes) and ``gap``: ours' category
    furthest above its floor. Raises ValueError for a non-positive bandwidth or a row without both sides."""
    gbps = float(bandwidth.get("gbps", 0.0))
    if gbps <= 0:
        raise ValueError(f"floor_summary: the HBM bandwidth must be > 0 GB/s, got {bandwidth!r}")
    if any(side not in row.get("variants", {}) for side in FLOOR_SIDES):
        raise ValueError(
            f"floor_summary: the row needs variants {list(FLOOR_SIDES)}, got {list(row.get('variants', {}))}"
        )
    per_us = gbps * 1e3  # bytes per µs
    result: dict = {"gbps": gbps, "method": bandwidth.get("method", ""), "sides": {}}
    for side, layout in FLOOR_SIDES.items():
        moved = decode_bytes(
            config, row["batch"], row["context"], world_size, layout, max_len=row["context"] + CACHE_SLACK
        )
        variant = row["variants"][side]
        categories = variant["categories"]
        spent_gemm = categories["GEMM"] + categories["GEMM+comm"]
        spent = {"attention": categories["attention"], "GEMM": spent_gemm}
        spent[REST] = variant["us"] - spent["attention"] - spent_gemm
        floor = {"attention": moved.attention / per_us, "GEMM": moved.gemm / per_us, "other": moved.other / per_us}
        floor[REST] = floor["other"]
        floor["else"] = floor["GEMM"] + floor["other"]
        floor["step"] = moved.total / per_us
        result["sides"][side] = {
            "bytes": asdict(moved),
            "floor": floor,
            "spent": {**spent, "step": variant["us"]},
            "fraction": {c: floor[c] / spent[c] if spent[c] > 0 else float("nan") for c in ("attention", "GEMM")}
            | {"step": floor["step"] / variant["us"]},
            "above": {c: spent[c] - floor[c] for c in spent},
        }
    ours = result["sides"]["ours"]
    result["bound"] = row["variants"]["torch"]["us"] / ours["floor"]["step"]
    result["gap"] = max(ours["above"].items(), key=lambda item: item[1])
    return result


def floor_line(row: dict) -> str:
    """The ``RESULT floor ...`` line of a decode row with its ``floor`` (``floor_summary``)."""
    f = row["floor"]
    ours, base = f["sides"]["ours"], f["sides"]["torch"]
    category, above = f["gap"]
    return (
        f"RESULT floor decode {row['model']} {case_name(row)}: HBM {f['gbps']:.0f} GB/s; ours' floor "
        f"{ours['floor']['step']:.1f} us/layer (attention {ours['floor']['attention']:.1f}, else "
        f"{ours['floor']['else']:.1f}), torch's {base['floor']['step']:.1f}; at floor: ours attention "
        f"{ours['fraction']['attention']:.0%} GEMM {ours['fraction']['GEMM']:.0%}, torch attention "
        f"{base['fraction']['attention']:.0%} GEMM {base['fraction']['GEMM']:.0%}; bound = torch "
        f"{row['variants']['torch']['us']:.1f} / ours' floor = {f['bound']:.2f}x (bar {BAR['decode']}x); ours' "
        f"largest gap: {category.split(' (')[0]} {above:+.1f} us above its floor"
    )


# --------------------------------------------------------------------------------------------- profiling on the GPU


def profile_kernels(launch: Callable[[], object], runs: int) -> list[Kernel]:
    """The GPU activities of ``runs`` calls of ``launch`` under ``torch.profiler`` (CUDA activity only; with CPU
    activity too where that saw nothing), each call after a GPU spin (``lead_host``: the host enqueues the call while
    the GPU spins) and a device barrier."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for activities in ([ProfilerActivity.CUDA], [ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.cuda.synchronize()
        with profile(activities=activities) as prof:
            for _ in range(runs):
                lead_host()
                rt.barrier_on_device()
                launch()
            torch.cuda.synchronize()
        found = [
            Kernel(event.name, float(event.time_range.start), float(event.time_range.end))
            for event in prof.events()
            # GPU user annotations (a record_function's range on the GPU) would count their kernels twice
            if event.device_type == DeviceType.CUDA and not getattr(event, "is_user_annotation", False)
        ]
        if all_ranks_true(bool(found)):
            break
        rank0_print("INFO the profiler saw no GPU activity with CUDA activity alone; again with CPU activity too")
    return found


HBM_BYTES = 1 << 30
"""The tensor ``hbm_bandwidth`` reads: 1 GiB of bf16, far beyond any L2 cache."""


def median_event_us(fn: Callable[[], object], reps: int) -> float:
    """The median device time of ``reps`` calls of ``fn`` in µs, CUDA events around each, after 3 untimed calls."""
    for _ in range(3):
        fn()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return float(torch.tensor([start.elapsed_time(end) for start, end in pairs]).median()) * 1000


def hbm_rates(size_bytes: int, reps: int) -> tuple[float, float]:
    """(read, copy) GB/s of this GPU: ``size_bytes`` / the median ``torch.sum`` of a bf16 tensor that size, and
    2 ``size_bytes`` / the median copy of it into another (``median_event_us``); its tensors are freed on return."""
    source = torch.ones(size_bytes // 2, dtype=torch.bfloat16, device="cuda")
    target = torch.empty_like(source)
    read = size_bytes / median_event_us(lambda: source.sum(dtype=torch.float32), reps) / 1e3
    copy = 2 * size_bytes / median_event_us(lambda: target.copy_(source), reps) / 1e3
    return read, copy


def hbm_bandwidth(size_bytes: int = HBM_BYTES, reps: int = 30) -> dict:
    """This GPU's achievable HBM bandwidth, the max over ranks of each measure (every rank calls it, after a
    barrier): ``hbm_rates``' read rate (``torch.sum``) and copy rate (read + write) of a ``size_bytes`` bf16 tensor,
    medians of ``reps`` (>= 20) by CUDA events. ``gbps`` is the larger of the two (the floor is then a true lower
    bound) and ``method`` says which gave it. Raises ValueError for fewer than 20 reps or under 64 MiB."""
    if reps < 20 or size_bytes < 64 << 20:
        raise ValueError(f"hbm_bandwidth: needs reps >= 20 and size_bytes >= 64 MiB, got {reps} and {size_bytes}")
    rt.barrier()
    both = torch.tensor(hbm_rates(size_bytes, reps), dtype=torch.float64, device="cuda")
    torch.cuda.empty_cache()  # the 2 GiB back, for the layers
    dist.all_reduce(both, op=dist.ReduceOp.MAX)
    read, copy = both.tolist()
    size = f"{size_bytes / 2**30:g} GiB bf16 tensor"
    methods = {
        "read": (read, f"torch.sum of a {size} (bytes read / time)"),
        "copy": (copy, f"a copy of a {size} (bytes read + written / time)"),
    }
    best = max(methods, key=lambda name: methods[name][0])
    return {
        "gbps": methods[best][0],
        "method": f"{methods[best][1]}, median of {reps} by CUDA events, max over ranks",
        "read_gbps": read,
        "copy_gbps": copy,
    }


def capture(fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    """A CUDA graph of ``calls`` calls of ``fn`` (warmed up on a side stream first, as ``graphed_us`` does)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # NCCL's watchdog may query events meanwhile
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def slowest(mine: Breakdown) -> Breakdown:
    """The breakdown of the rank with the largest span (every rank calls it), with its rank, and every rank's unknown
    kernel names."""
    world = rt.current_world()
    everyone: list[Breakdown | None] = [None] * world.world_size
    dist.all_gather_object(everyone, mine)
    found = [b for b in everyone if b is not None]
    for rank, each in enumerate(found):
        each.rank = rank
    worst = max(found, key=lambda b: b.span)
    worst.unknown = sorted({name for b in found for name in b.unknown})
    return worst


def decode_breakdown(step: Callable[[], object], layers: int, runs: int, top: int = 8) -> Breakdown:
    """The graphed step's breakdown per layer, its ``top`` longest kernels listed; where the profiler saw no kernel
    of the graph's replays, the eager step's (noted)."""
    graph = capture(step, GRAPH_CALLS)
    kernels = profile_kernels(graph.replay, runs)
    result = checked(breakdown(kernels, GRAPH_CALLS * layers, top), kernels, runs)
    del graph
    if not all_ranks_true(result.kernels > 0):
        for _ in range(3):
            step()
        kernels = profile_kernels(step, runs)
        result = checked(breakdown(kernels, layers, top), kernels, runs)
        result.note = "eager step (the profiler saw no kernel of the graph replays)"
    return slowest(result)


@contextlib.contextmanager
def without_communication(world_size: int, rank: int) -> Iterator[None]:
    """Within: the layers' ``ag_gemm`` is a local matmul of a preallocated [W*M, K] input and their ``gemm_rs`` a
    local [M, K/W] @ [K/W, N] and this rank's rows of it (the per-rank GEMMs without any communication; wrong
    results, for timing only)."""
    gathered: dict[tuple, torch.Tensor] = {}

    def local_ag_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        key = (a.shape[0] * world_size, a.shape[1], a.dtype, a.device)
        if key not in gathered:
            gathered[key] = torch.randn(key[:2], device=a.device).to(a.dtype)
        return torch.matmul(gathered[key], b)

    def local_gemm_rs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        rows = a.shape[0] // world_size
        return torch.matmul(a, b)[rank * rows : (rank + 1) * rows]

    with (
        mock.patch.object(linear_layers, "ag_gemm", local_ag_gemm),
        mock.patch.object(linear_layers, "gemm_rs", local_gemm_rs),
    ):
        yield


def no_reduce(tensor: torch.Tensor) -> None:
    """The torch baseline's all-reduce removed."""


def checked(result: Breakdown, kernels: Sequence[Kernel], runs: int) -> Breakdown:
    """``result``, after saying (on this rank) when the profile did not split into ``runs`` runs: the harness kernels
    were not found, so the per-layer values are off."""
    if result.runs != runs:
        names = sorted({short_name(k.name) for k in kernels})[:12]
        shapes = ", ".join(f"{n} kernels / {us:.1f} µs" for n, us in result.run_shapes)
        print(
            f"WARN rank {rt.current_world().rank}: {result.runs} profiled runs found, not {runs} ({shapes}); "
            f"names: {names}"
        )
        result.note = (
            f"the profile split into {result.runs} runs, not {runs}: its per-layer kernel times and idle are off "
            f"by about {runs / max(result.runs, 1):.2f}x"
        )
    return result


def prefill_variant(fn: Callable[[], object], layers: int, args: argparse.Namespace) -> tuple[float, Breakdown]:
    """(µs per layer as bench/decoder.py times it, the profiled breakdown) of an eager prefill."""
    us = time_ms(fn, warmup=3, reps=args.iters) * 1000 / layers
    kernels = profile_kernels(fn, args.runs)
    return us, slowest(checked(breakdown(kernels, layers, args.top), kernels, args.runs))


def prefill_case(
    config: DecoderConfig,
    layers: list[TensorParallelDecoderLayer],
    tokens: int,
    gen: torch.Generator,
    args: argparse.Namespace,
) -> dict:
    """Ours, torch, and both without communication, on ``tokens`` tokens."""
    world = rt.current_world()
    ours, base, mine = prefill_steps(config, layers, tokens, gen)
    agreement = difference(ours(), base()[mine])  # as bench/decoder.py: what is timed computes the layer
    variants: dict[str, tuple[float, Breakdown]] = {}
    variants["ours"] = prefill_variant(ours, len(layers), args)
    variants["torch"] = prefill_variant(base, len(layers), args)
    with without_communication(world.world_size, world.rank):
        variants["ours, no comm"] = prefill_variant(ours, len(layers), args)
    base_alone = lambda: base(lambda layer, h: torch_prefill_layer(layer, h, reduce=no_reduce))  # noqa: E731
    variants["torch, no comm"] = prefill_variant(base_alone, len(layers), args)
    row = {"phase": "prefill", "model": config.name, "tokens": tokens, "batch": 1, "context": 0}
    return finish({**row, "difference": agreement}, variants)


def decode_case(
    config: DecoderConfig,
    layers: list[TensorParallelDecoderLayer],
    batch: int,
    context: int,
    gen: torch.Generator,
    args: argparse.Namespace,
) -> dict:
    """Ours (sequence-split KV cache) and torch, one graphed decode step; then ours with each of
    ``args.decode_variants`` (bench/decoder.py's ``DECODE_VARIANTS``: the layers' decode options on), as variants
    named ``ours <variant>`` (the row's difference: the largest of every one's)."""
    ours_step, base_step = decode_steps(config, layers, batch, context, gen)
    x, residual = ours_step("sequence")  # the first calls eager (plans, compilation), as bench/decoder.py
    want = base_step()
    agreement = difference(residual + all_reduce(x), want)
    steps: dict[str, Callable[[], object]] = {"ours": lambda: ours_step("sequence"), "torch": base_step}
    variants: dict[str, tuple[float, Breakdown]] = {}
    for name, step in steps.items():
        us = graphed_us(step, replays=args.iters) / len(layers)
        variants[name] = (us, decode_breakdown(step, len(layers), args.runs, args.top))
        torch.cuda.empty_cache()
    for variant in getattr(args, "decode_variants", []):
        chosen = DECODE_VARIANTS[variant]
        step = functools.partial(ours_step, chosen.layout, chosen.same_position)
        with layer_options(layers, **chosen.options):
            try:
                x, residual = step()  # eager first, as above
                agreement = max(agreement, difference(residual + all_reduce(x), want))
                us = graphed_us(step, replays=args.iters) / len(layers)
                variants[f"ours {variant}"] = (us, decode_breakdown(step, len(layers), args.runs, args.top))
            except Exception as error:  # noqa: BLE001 (a variant that cannot run is reported, not fatal)
                rank0_print(f"INFO ours {variant} B={batch} ctx={context}: {type(error).__name__}: {error}")
        torch.cuda.empty_cache()
    row = {"phase": "decode", "model": config.name, "tokens": batch, "batch": batch, "context": context}
    row = finish({**row, "difference": agreement}, variants)
    if getattr(args, "hbm", None):
        row["floor"] = floor_summary(row, config, rt.current_world().world_size, args.hbm)
        rank0_print(floor_line(row))
    return row


def finish(row: dict, variants: dict[str, tuple[float, Breakdown]]) -> dict:
    """The row's timings, speedup, bound and breakdowns, and its RESULT line."""
    row["variants"] = {name: {"us": us, **asdict(b)} for name, (us, b) in variants.items()}
    row["speedup"] = variants["torch"][0] / variants["ours"][0]
    if "ours, no comm" in variants:
        row["bound"] = variants["torch"][0] / variants["ours, no comm"][0]
    ours, base = variants["ours"][1], variants["torch"][1]
    excess = sorted(((ours.categories[c] - base.categories[c], c) for c in CATEGORIES), reverse=True)
    row["excess"] = [(category, delta) for delta, category in excess if delta > 0]
    bound = f", bound {row['bound']:.2f}x" if "bound" in row else ""
    if row.get("difference", 0.0) > AGREEMENT:
        rank0_print(f"WARN ours and torch differ by {row['difference']:.3g} (bench/decoder.py fails above {AGREEMENT})")
    rank0_print(
        f"RESULT anatomy {row['phase']} {row['model']} {case_name(row)}: ours {variants['ours'][0]:.1f} us/layer, "
        f"torch {variants['torch'][0]:.1f} -> {row['speedup']:.2f}x (bar {BAR[row['phase']]}x){bound}; ours' "
        f"idle {ours.idle:.1f} us vs torch {base.idle:.1f}; ours exceeds torch in "
        + (", ".join(f"{c} +{d:.1f} us" for c, d in row["excess"][:3]) or "nothing")
    )
    for name in sorted({n for _, b in variants.values() for n in b.unknown}):
        rank0_print(f"INFO unknown kernel (category 'unknown'): {name}")
    return row


# --------------------------------------------------------------------------------------------- results


def case_name(row: dict) -> str:
    """``prefill 4096`` or ``B8 4k``."""
    if row["phase"] == "prefill":
        return f"prefill {row['tokens']}"
    return f"B{row['batch']} {row['context'] >> 10}k"


def us_text(value: float) -> str:
    """µs with one decimal below 1000, whole above."""
    return f"{value:.1f}" if abs(value) < 1000 else f"{value:.0f}"


def signed(value: float) -> str:
    """``us_text`` with its sign: +12.3, -4.0."""
    return ("+" if value >= 0 else "") + us_text(value)


def case_lines(row: dict) -> list[str]:
    """The markdown of one case: the timings, the breakdown table, the longest kernels."""
    variants = row["variants"]
    bar = BAR[row["phase"]]
    title = f"### {row['model']}, {row['phase']} " + (
        f"{row['tokens']} tokens" if row["phase"] == "prefill" else f"batch {row['batch']}, context {row['context']}"
    )
    summary = f"ours {us_text(variants['ours']['us'])} µs/layer, torch {us_text(variants['torch']['us'])}: "
    summary += f"**{row['speedup']:.2f}x** (bar {bar}x)"
    if "bound" in row:
        torch_comm = variants["torch"]["us"] - variants["torch, no comm"]["us"]
        summary += (
            f"; bound (torch / ours without communication): **{row['bound']:.2f}x**; torch's own communication "
            f"costs {us_text(torch_comm)} µs/layer ({torch_comm / variants['torch']['us']:.0%} of its layer)"
        )
    excess = ", ".join(f"{c} +{us_text(d)}" for c, d in row["excess"]) or "none"
    lines = [title, "", f"- {summary}.", f"- ours' kernel time above torch's, by category (µs/layer): {excess}."]
    if "difference" in row:
        lines.append(f"- max |ours - torch| / max |torch| of the stack's output: {row['difference']:.4f}.")
    notes = [f"{name}: {v['note']}" for name, v in variants.items() if v["note"]]
    lines += [f"- note: {note}" for note in notes]
    head = ["variant", "timed", "span", *CATEGORIES, "Σ kernels", "busy", "idle", "overlap", "rank"]
    table = []
    for name, v in variants.items():
        cells = [name, us_text(v["us"]), us_text(v["span"]), *(us_text(v["categories"][c]) for c in CATEGORIES)]
        cells += [us_text(v["kernels"]), us_text(v["busy"]), us_text(v["span"] - v["busy"])]
        cells += [us_text(v["kernels"] - v["busy"]), v["rank"]]
        table.append(cells)
    ours, base = variants["ours"], variants["torch"]
    delta = ["ours - torch", us_text(ours["us"] - base["us"]), us_text(ours["span"] - base["span"])]
    delta += [us_text(ours["categories"][c] - base["categories"][c]) for c in CATEGORIES]
    delta += [us_text(ours[k] - base[k]) for k in ("kernels", "busy")]
    delta += [us_text((ours["span"] - ours["busy"]) - (base["span"] - base["busy"])), "", ""]
    lines += ["", markdown_table(head, [*table, delta]), ""]
    for name, v in variants.items():
        longest = "; ".join(f"`{short_name(k)}` ({c}) {us_text(t)} µs ×{n:g}" for k, c, t, n in v["top"]) or "none"
        lines.append(f"- longest kernels, {name} (per layer): {longest}")
    unknown = sorted({k for v in variants.values() for k in v["unknown"]})
    lines += [f"- unknown kernel: `{name}`" for name in unknown]
    return [*lines, ""]


def floor_lines(rows: list[dict]) -> list[str]:
    """The markdown of the decode rows' HBM floors (those with ``floor``; none: no lines): how the bandwidth was
    measured, a table of each side's bytes, floors, spent µs and fractions of floor, and per case the bound and
    where ours is furthest above its floor (the rest split into its profiled categories and idle)."""
    chosen = [row for row in rows if "floor" in row]
    if not chosen:
        return []
    f0 = chosen[0]["floor"]
    lines = [
        "## HBM floor (decode)",
        "",
        f"- HBM bandwidth {f0['gbps']:.0f} GB/s: {f0['method']}.",
        "- Bytes per rank per layer (bench/decoder_anatomy.py `decode_bytes`, each byte moved once, bf16):",
        "  attention = the cached K and V read + q in + out out (ours: every KV head over rank 0's block of",
        f"  min(context + 1, (context + {CACHE_SLACK}) / W) tokens, every query head; torch: Hkv/W heads over",
        "  context + 1 tokens, Hq/W query heads); GEMM = this rank's QKV, O, gate/up and down shards + their inputs",
        "  and outputs; other = norm weights, the residual + RMSNorm steps, RoPE + cache write, SiLU * up in and",
        "  out. Not counted: NVLink traffic, rotary tables, flash_decode's partial records.",
        "- floor µs = bytes / bandwidth; else = GEMM + other; spent: attention and GEMM kernels as profiled (ours'",
        "  GEMM includes gemm_ar), rest = timed - those two (communication, AR+norm, norms, elementwise, idle);",
        "  at floor = floor / spent (1 = HBM speed). bound = torch's timed µs / ours' step floor: the best speedup",
        "  over the measured torch any implementation moving ours' bytes could reach.",
        "",
    ]
    head = ["model", "case", "side", "attention MB", "GEMM MB", "other MB", "floor attention", "floor else"]
    head += ["floor step", "attention", "GEMM", "rest", "timed", "attention at floor", "GEMM at floor", "step at floor"]
    table = []
    for row in chosen:
        for side, s in row["floor"]["sides"].items():
            b, fl, sp, fr = s["bytes"], s["floor"], s["spent"], s["fraction"]
            table.append(
                [row["model"], case_name(row), side]
                + [f"{b[key] / 1e6:.1f}" for key in ("attention", "gemm", "other")]
                + [us_text(fl[key]) for key in ("attention", "else", "step")]
                + [us_text(sp[key]) for key in ("attention", "GEMM", REST, "step")]
                + [f"{fr[key]:.0%}" for key in ("attention", "GEMM", "step")]
            )
    lines += [markdown_table(head, table), ""]
    for row in chosen:
        f, v = row["floor"], row["variants"]
        ours = f["sides"]["ours"]
        above = ", ".join(f"{c.split(' (')[0]} {signed(d)}" for c, d in ours["above"].items())
        cats = v["ours"]["categories"]
        rest = [
            f"{c} {us_text(cats[c])}" for c in CATEGORIES if c not in ("GEMM", "GEMM+comm", "attention") and cats[c]
        ]
        rest.append(f"idle {us_text(v['ours']['span'] - v['ours']['busy'])}")
        category, gap = f["gap"]
        lines.append(
            f"- {row['model']} {case_name(row)}: bound = torch {us_text(v['torch']['us'])} µs / ours' floor "
            f"{us_text(ours['floor']['step'])} = **{f['bound']:.2f}x** (bar {BAR['decode']}x); ours above its floors "
            f"(µs): {above}. Ours at floor where? Furthest from it: **{category.split(' (')[0]}** ({signed(gap)} "
            f"µs); its rest, profiled: {', '.join(rest)} (floor {us_text(ours['floor'][REST])})."
        )
    return [*lines, ""]


def write_results(out_dir: Path, rows: list[dict], args: argparse.Namespace, started: float, show: bool) -> str:
    """Write the markdown and JSON (and print the markdown where ``show``); returns the markdown."""
    out_dir.mkdir(parents=True, exist_ok=True)
    size = rt.current_world().world_size
    stem = out_dir / f"decoder_anatomy_{gpu_tag(size)}"
    lines = [
        f"# Decoder layers' anatomy, ours against torch TP, {size} x {torch.cuda.get_device_name()}, bf16, "
        f"{args.layers} layers per stack",
        "",
        *describe_machine(started),
        "- µs per layer. timed: as bench/decoder.py measures the stack (decode: CUDA graph of 10 steps, median of",
        f"  {args.iters} replays; prefill: eager, median of {args.iters} runs after a device barrier; max over ranks).",
        f"  The rest from torch.profiler over {args.runs} runs (decode: graph replays), the slowest rank's (rank):",
        "  kernel time by category, Σ kernels, busy (their union), span (profiled step), idle = span - busy (the GPU",
        "  idle inside the step: launch gaps, host waits), overlap = Σ - busy (kernels running side by side).",
        "- Categories (kernel names by pattern, bench/decoder_anatomy.py RULES): GEMM (cuBLAS, our matmul); GEMM+comm",
        "  (ours' fused ag_gemm / gemm_rs / gemm_ar kernels, their communication inside); attention (SDPA kernels,",
        "  flash_decode); comm (NCCL, our all-reduce, producer and flag kernels); memcpy (copy-engine copies: ours'",
        "  ag_gemm sends its rows to the peer so, beside its GEMM); AR+norm (the fused all-reduce + residual +",
        "  RMSNorm); norm+residual (RMSNorm, the residual add); other (RoPE, SiLU, copy kernels, indexing, fills);",
        "  unknown (listed).",
        "- Ours: decode with the sequence-split KV cache (flash_decode), as bench/decoder.py's 'ours'. Prefill",
        "  'no comm': ours with ag_gemm / gemm_rs as local torch.matmul of the same per-rank shapes; torch without",
        "  its all_reduce. bound = torch / ours-no-comm: the most any overlap of ours' communication could give.",
        f"- Bar (issue 28): decode >= {BAR['decode']}x, prefill >= {BAR['prefill']}x.",
        "",
        "## Summary",
        "",
    ]
    summary = []
    for row in rows:
        v = row["variants"]
        excess = ", ".join(f"{c} +{us_text(d)}" for c, d in row["excess"][:3]) or "none"
        summary.append(
            [
                row["model"],
                case_name(row),
                us_text(v["ours"]["us"]),
                us_text(v["torch"]["us"]),
                f"{row['speedup']:.2f}x",
                f"{BAR[row['phase']]}x",
                f"{row['bound']:.2f}x" if "bound" in row else "",
                us_text(v["ours"]["span"] - v["ours"]["busy"]),
                us_text(v["torch"]["span"] - v["torch"]["busy"]),
                excess,
            ]
        )
    head = ["model", "case", "ours µs", "torch µs", "speedup", "bar", "bound", "ours idle", "torch idle"]
    lines += [markdown_table([*head, "ours above torch (µs)"], summary), ""]
    lines += floor_lines(rows)
    for phase in ("decode", "prefill"):
        chosen = [row for row in rows if row["phase"] == phase]
        if chosen:
            lines += [f"## {phase.capitalize()}", ""]
            for row in chosen:
                lines += case_lines(row)
    text = "\n".join(lines) + "\n"
    stem.with_suffix(".md").write_text(text)
    write_json(stem.with_suffix(".json"), rows, started)
    if show:
        print(text)
    print(f"wrote {stem}.md, .json")
    return text


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; raises SystemExit naming an unknown model or phase."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models",
        default="",
        help="comma-separated, for both phases (default: prefill of every model, decode of "
        + ", ".join(DECODE_MODELS)
        + "); known: "
        + ", ".join(CONFIGS),
    )
    parser.add_argument("--phases", default="prefill,decode", help="comma-separated: prefill, decode")
    parser.add_argument("--batch", default=",".join(map(str, BATCHES)), help="decode batch sizes")
    parser.add_argument("--context", default=",".join(map(str, CONTEXTS)), help="decode context lengths")
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="prefill token counts")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers per stack (bench/decoder.py: 2)")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per measurement (median; >= 20)")
    parser.add_argument("--runs", type=int, default=5, help="profiled runs per variant")
    parser.add_argument(
        "--top", type=int, default=8, help="longest kernels listed per variant (a large value lists every kernel)"
    )
    parser.add_argument(
        "--decode-variants",
        default="",
        help="comma-separated, or all: also profile ours' decode with some of the layers' decode options on "
        "(bench/decoder.py's DECODE_VARIANTS: " + ", ".join(DECODE_VARIANTS) + ")",
    )
    parser.add_argument("--out-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    args.phases = [p for p in args.phases.split(",") if p]
    if bad := [p for p in args.phases if p not in ("prefill", "decode")]:
        parser.error(f"unknown phases {bad}; known: prefill, decode")
    models = [name for name in args.models.split(",") if name]
    if unknown := [name for name in models if name not in CONFIGS]:
        parser.error(f"unknown models {unknown}; known: {list(CONFIGS)}")
    args.prefill_models = models or list(CONFIGS)
    args.decode_models = models or list(DECODE_MODELS)
    for name in ("batch", "context", "tokens"):
        setattr(args, name, [int(text) for text in getattr(args, name).split(",") if text])
    names = [name for name in args.decode_variants.split(",") if name]
    args.decode_variants = list(DECODE_VARIANTS) if names == ["all"] else names
    if unknown := [name for name in args.decode_variants if name not in DECODE_VARIANTS]:
        parser.error(f"unknown decode variants {unknown}; known: {list(DECODE_VARIANTS)} (or all)")
    if args.layers < 1 or args.runs < 1 or args.top < 1:
        parser.error(f"--layers, --runs and --top must be >= 1, got {args.layers}, {args.runs} and {args.top}")
    return args


def main() -> int:
    args = parse_args()
    world = setup_distributed(heap_size="8G")
    started = time.time()
    rows: list[dict] = []
    if "decode" in args.phases:  # once per run, before the layers take memory: the decode rows' HBM floor
        args.hbm = hbm_bandwidth()
        rank0_print(
            f"RESULT floor HBM bandwidth {args.hbm['gbps']:.0f} GB/s ({args.hbm['method']}; read "
            f"{args.hbm['read_gbps']:.0f}, copy {args.hbm['copy_gbps']:.0f})"
        )
    for name in CONFIGS:
        prefill = "prefill" in args.phases and name in args.prefill_models
        decode = "decode" in args.phases and name in args.decode_models
        if not (prefill or decode):
            continue
        began = time.time()
        config = CONFIGS[name]
        gen = torch.Generator(device="cuda").manual_seed(28)
        layers = build_layers(config, args.layers, gen)
        for tokens in args.tokens if prefill else []:
            rows.append(prefill_case(config, layers, tokens, gen, args))
            torch.cuda.empty_cache()
        ag_gemm_op.clear_workspaces()  # the prefill shapes' symmetric workspaces back to the heap
        gemm_rs_op.clear_workspaces()
        for batch in args.batch if decode else []:
            for context in args.context:
                rows.append(decode_case(config, layers, batch, context, gen, args))
                torch.cuda.empty_cache()
                rt.barrier()
        del layers
        torch.cuda.empty_cache()
        rank0_print(f"INFO {name}: {time.time() - began:.0f} s")
        if world.rank == 0:  # the results so far, in case a time limit stops the run before the end
            write_results(Path(args.out_dir), rows, args, started, show=False)
    if world.rank == 0 and rows:
        write_results(Path(args.out_dir), rows, args, started, show=True)
    rt.barrier()
    del world
    teardown()
    return 0


if __name__ == "__main__":
    main_guard(main)
