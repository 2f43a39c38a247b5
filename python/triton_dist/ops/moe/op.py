"""The host side of ``moe_dispatch`` / ``moe_combine``: checks, the per-signature plan, the launches, the custom ops.

A signature is (mode, H, dtype, E, k, max_tokens_per_rank, device): what the kernels and buffers depend on, and
what every rank must agree on (checked once per world by ``ops.common.dispatch.PlanCache``: H, dtype or E that
differ between ranks raise :class:`MoeError` on every rank before anything is launched). T is not part of it:
ranks may send different numbers of tokens, and every T runs the same compiled kernels.

The plan holds the workspace (``_Workspace``: the epoch counter, the flags, the counts matrix; ``_Buffers``: the
token, meta and combine buffers, sized by capacity) and the :class:`~triton_dist.ops.common.launch.LaunchPlan` of
each kernel (``kernels.py``). Normal mode reads the route kernel's summary once per call (its one host
synchronization), raises :class:`MoeStatusError` on every rank if any rank passed an expert id out of range, and
grows the buffers when the busiest rank needs more (every rank sees the same counts matrix, so all grow together,
which keeps the symmetric heap in step). Low-latency mode never synchronizes: its buffers hold
``W * max_tokens_per_rank`` tokens, and a bad expert id is counted in ``MoeHandle.status`` (:func:`check_status`).

The tuning switches and launch constants (the overlaps, their waves, the fp8 push's options: upper-case names in the
docstrings and comments here) and their setters live in ``switches.py``; this module reads each as ``switches.NAME``
at call time, so a setter takes effect from the next call. The phase hooks (:func:`set_phase_hook`,
:func:`set_combine_phase_hook`) stay here: their points are places in this module's code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from triton_dist import runtime as rt
from triton_dist.ops.common import resources
from triton_dist.ops.common.dispatch import PlanCache
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.errors import check_load_store_world, emulated_world, gpu_world
from triton_dist.ops.common.flags import notify_world
from triton_dist.ops.common.gpu import sm_count
from triton_dist.ops.common.launch import compile_plan
from triton_dist.ops.moe import kernels, switches
from triton_dist.ops.moe.config import (
    COPY_PROGRAMS,
    EXPAND_PER_SM,
    FP8_DTYPE,
    FP8_PUSH_WARPS,
    MODES,
    ROUTE_PROGRAMS,
    ROUTE_WARPS,
    SPREAD_REDUCE_RANKS,
    STATUS_BAD_EXPERT,
    STATUS_OVERFLOW,
    MoeConfig,
    MoeError,
    MoeHandle,
    MoeStatusError,
    capacity,
    check_combine_input,
    check_inputs,
    expand_table,
    fp8_groups,
    kernel_constexprs,
    pow2,
    row_stride,
)

OP = "moe_dispatch"
EMULATED_PROGRAMS = 1
"""Programs per data kernel under the CPU emulation. One: with several program threads per rank, the emulation
(Triton 3.6's interpreter, as patched by ``runtime/emulation/interpreter_fixes.py``) intermittently fails a
``range`` over a run-time value at a kernel's first loop with "only 0-dimensional arrays can be converted to
Python scalars" (its ``tensor.__index__`` is briefly the unpatched one while another program runs a primitive)."""
PHASES = ("start", "route", "push", "sync", "alloc", "own", "expand")
"""The points of a normal-mode dispatch a phase hook is called at (:func:`set_phase_hook`): ``start`` on entry,
``route`` after the route kernels' launch, ``push`` after the push launch, ``sync`` once the host has read the summary
(its one synchronization), ``alloc`` after the outputs are allocated, ``own`` (only where this rank's own tokens are
pushed from a side stream) once the current stream waits for that push, ``expand`` after the expand launch (with
``MoeConfig(pipelined=True)``, ``layout="gather"``'s block copy of the payload runs inside it: ``BULK_COPIERS_PER_SM``).
``MoeConfig(pipelined=True)`` on one node, from the second call of a signature on: ``push`` comes before ``sync`` (the
push kernel is launched before the host waits, and does nothing if the buffers turn out too small, in which case it is
launched again after ``sync``); otherwise ``sync`` comes first. A hook that records a CUDA event at each point measures,
per interval, how long the stream took from the previous point to this one: a kernel, or the GPU idle while the host
works. With :data:`switches.EXPAND_OVERLAPS_PUSH` (from a signature's second call) ``expand`` comes right after ``push``
(the expand kernel is launched beside the push, and the stream waits for it), so its interval is how long the expand ran
after the push ended, and ``sync`` follows (no ``alloc``)."""
_phase_hook: Callable[[str], object] | None = None


def set_phase_hook(hook: Callable[[str], object] | None) -> Callable[[str], object] | None:
    """Call ``hook(phase)`` at each of :data:`PHASES` in every normal-mode dispatch from now on (None: stop); returns
    the hook it replaces. For measurements (``bench/moe.py`` records a CUDA event at each point); the hook runs on
    the host, inside the dispatch."""
    global _phase_hook
    previous, _phase_hook = _phase_hook, hook
    return previous


COMBINE_PHASES = ("start", "push", "reduce")
"""The points of a normal-mode combine a combine phase hook is called at (:func:`set_combine_phase_hook`): ``start`` on
entry (the plan found, before the output's allocation), ``push`` after the push kernel's launch, ``reduce`` after the
reduce kernel's launch. A hook that records a CUDA event at each point measures the push kernel (``push``) and the
reduce kernel after it (``reduce``: its wait for every rank's flags, the other ranks' pushes, included); with
:data:`switches.REDUCE_OVERLAPS_PUSH` the reduce runs beside the push and ``reduce`` is how long it ran after the push
ended."""
_combine_phase_hook: Callable[[str], object] | None = None


def set_combine_phase_hook(hook: Callable[[str], object] | None) -> Callable[[str], object] | None:
    """Call ``hook(phase)`` at each of :data:`COMBINE_PHASES` in every normal-mode combine from now on (None: stop);
    returns the hook it replaces. For measurements (``bench/moe.py --only-combine`` records a CUDA event at each
    point); the hook runs on the host, inside the combine."""
    global _combine_phase_hook
    previous, _combine_phase_hook = _combine_phase_hook, hook
    return previous


def _fp8_push_warps(plan: _Plan, prequantized: bool = False) -> int:
    """Warps of ``plan``'s push kernel: for the pipelined fp8 push that quantizes (not ``prequantized``)
    :data:`switches.FP8_NARROW_PUSH_WARPS` with :data:`switches.FP8_NARROW_PUSH`, ``FP8_PUSH_WARPS`` without; else
    4."""
    if not (plan.fp8 and plan.pipelined and not prequantized):
        return 4
    return switches.FP8_NARROW_PUSH_WARPS if switches.FP8_NARROW_PUSH else FP8_PUSH_WARPS


def _prequantized(plan: _Plan) -> bool:
    """Whether this call's fp8 rows are quantized beside the route kernels (normal mode,
    :data:`switches.FP8_PREQUANTIZE`)."""
    return plan.fp8 and switches.FP8_PREQUANTIZE and not plan.low_latency


def _staging(plan: _Plan, tokens: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``plan``'s staging buffers of :data:`switches.FP8_PREQUANTIZE` for at least ``tokens`` rows (fp8 rows and fp32
    scales), grown to the next power of two (the launch plans that name them are keyed by their rows)."""
    staged = plan.staged
    if staged is None or staged[0].shape[0] < max(tokens, 1):
        rows = pow2(max(tokens, 1))
        staged = plan.staged = (
            torch.empty(rows, plan.hidden, dtype=FP8_DTYPE, device=device),
            torch.empty(rows, plan.scales, dtype=torch.float32, device=device),
        )
    return staged


INFO_WORDS = 8
"""The route kernel's summary: rows received, tokens received, token slots and combine slots the busiest rank
needs, then the status (this rank's bad ids at 4, the world's at 5 in normal mode)."""


@dataclass(frozen=True)
class _Workspace:
    """Fixed-size state of a signature: int32 epoch counter (local), flags and counts matrix (symmetric, two
    parities each), the expand kernel's lookup tables (local, one per program: ``config.expand_table``), the route
    count programs' counts, then prefixes (local, one ``ROW`` each)."""

    epochs: torch.Tensor
    flags: torch.Tensor
    counts: torch.Tensor
    table: torch.Tensor
    parts: torch.Tensor
    count_signals: torch.Tensor | None = None
    """Across nodes only (else None): int64 [2, pow2(W)] (symmetric), the signal of each source's counts row put
    from another node."""
    waves: torch.Tensor | None = None
    """Pipelined on one node (else None): int32 [2, pow2(W) * MAX_EXPAND_WAVES * (programs + 1)] (symmetric), per
    parity the push's wave flags ``(source, wave, program)`` then each source's slot count at each wave's end
    (:data:`switches.EXPAND_OVERLAPS_PUSH`)."""
    combine_waves: torch.Tensor | None = None
    """Normal mode on one node (else None): int32 [2, pow2(W) * MAX_COMBINE_WAVES * programs] (symmetric), per parity
    the combine push's wave flags ``(source, wave, program)`` (:data:`switches.REDUCE_OVERLAPS_PUSH`)."""
    started: torch.Tensor | None = None
    """Pipelined on one node (else None): int32 [1] (on the heap, used locally), the push programs that have started
    in this call, 0 between calls (:data:`switches.PUSH_RESIDENT_FIRST`)."""


@dataclass(frozen=True)
class _Buffers:
    """The symmetric token, meta and combine buffers of a signature at one capacity (two parities each)."""

    tokens: torch.Tensor
    meta: torch.Tensor
    combine: torch.Tensor
    across: _AcrossNodes | None = None
    """The buffers of the puts across nodes (None on one node)."""

    @property
    def token_slots(self) -> int:
        return self.tokens.shape[1]

    @property
    def combine_slots(self) -> int:
        return self.combine.shape[1]


@dataclass(frozen=True)
class _AcrossNodes:
    """A plan's symmetric buffers for the puts to other nodes (``kernels.py``): the sources of NVSHMEM's puts must be
    symmetric memory, so what goes to another node is staged in this rank's own buffers first; each put sets a signal
    of its own in the receiver's (one half per epoch parity, as the flags). The staging buffers have one half: a put
    returns once its source may be reused, and the next call writes them after this call's kernels ended."""

    send: torch.Tensor
    """[combine slots, H] of the payload's dtype: dispatch's rows to other nodes, row = the (token, rank) pair's
    place among this rank's pairs (``sum_{d' < d} N[me, d'] + tok_pos[t, d]``)."""
    send_meta: torch.Tensor
    """int32 [combine slots, META]: their meta rows."""
    slot_signals: torch.Tensor
    """int64 [2, token slots, 2]: per receive slot, the signals of its meta row's and its payload's puts."""
    combine_send: torch.Tensor
    """fp32 [token slots, H]: combine's partials for homes on other nodes, row = the received token's slot (viewed in
    y's dtype with ``MoeConfig(combine_partials="input")``: rows of H elements in the first half of the words)."""
    combine_signals: torch.Tensor
    """int64 [2, combine slots]: per combine slot, the signal of the partial put there from another node."""


class _Launch(Protocol):
    """A kernel's plan for later calls: a :class:`LaunchPlan` on GPUs (or what ``compile_plan`` gives elsewhere)."""

    def launch(self, device: torch.device, *leading: Any) -> None: ...


@dataclass
class _Plan:
    """Everything a signature's calls reuse (see the module docstring)."""

    key: tuple[Any, ...]
    mode: str
    world_size: int
    num_experts: int
    topk: int
    hidden: int
    dtype: torch.dtype
    max_tokens: int
    programs: int
    workspace: _Workspace
    buffers: _Buffers | None = None
    launches: dict[tuple[Any, ...], _Launch] = field(default_factory=dict)
    fp8: bool = False
    row_block: int = 0
    """``MoeConfig.row_block(H)``: 0 for chunks, else the whole-row ``BLOCK_H``."""
    route_programs: int = ROUTE_PROGRAMS
    """The route count kernel's programs (``config.ROUTE_PROGRAMS``; fewer under the emulation)."""
    nodes: int = 1
    """The world's nodes: 1 runs the one-node kernels; more, the kernels' puts across nodes (``NODES``)."""
    local: int = 0
    """Ranks per node (``LOCAL``; torchrun's layout: node ``m`` holds ranks ``[m L, (m + 1) L)``)."""
    expand_block: int = 0
    """``MoeConfig.expand_block``: received tokens per step of the expand kernel's meta where ``_bulk_copy`` holds
    (``META_BLOCK``; 0: one)."""
    pipelined: bool = False
    """``MoeConfig(pipelined=True)`` in normal mode on one node (else False): the early push (``_early_push``), the
    host-polled summary (``host_info``), ``expanders``, the gather layout's block copy (``_bulk_copy``) and the fp8
    push's warps (``_fp8_push_warps``)."""
    expanders: int = 0
    """The expand kernel's programs (0: ``programs``): pipelined, on GPUs, ``EXPAND_PER_SM`` per SM (at least
    ``programs``), each waiting for the push's ``programs`` flags per rank (``SENDERS``)."""
    copiers: int = 0
    """Pipelined, on GPUs (else 0): the expand kernel's copy programs in the gather layout, after its ``expanders``
    (``BULK_COPIERS_PER_SM`` per SM; ``COPIERS``)."""
    sms: int = 0
    """The GPU's SMs (0 under the emulation): what the expand beside the push multiplies its per-SM counts by
    (``overlap_split``)."""
    side: Any = None
    """The side stream of ``_self_push``'s launch (a ``torch.cuda.Stream``, made at the first one; None before)."""
    staged: tuple[torch.Tensor, torch.Tensor] | None = None
    """The staging buffers of :data:`switches.FP8_PREQUANTIZE` (``_staging``): this rank's quantized rows and their
    scales, local."""
    combines: set[tuple[torch.dtype, bool, int, bool, int, int]] = field(default_factory=set)
    """The (partials' dtype, ``combine_spread``, waves, own, wave minimum, wave maximum) this plan's combines ran with
    (waves: :data:`switches.COMBINE_WAVES` with :data:`switches.REDUCE_OVERLAPS_PUSH`, else 0; own:
    :data:`switches.OWN_PARTIALS_IN_REDUCE` with it; :data:`switches.COMBINE_WAVE_MIN_SLOTS` with waves, else 0; the
    plan's programs with :data:`switches.COMBINE_WAVES_BY_PROGRAMS`, the minimum then 0), each agreed with every rank
    at its first call (``_combine``)."""
    busiest_slots: int = 0
    """The combine slots the busiest rank needed at this plan's latest normal-mode dispatch (the summary's word 3, the
    same on every rank): what :data:`switches.COMBINE_AUTO` decides on."""
    host_info: torch.Tensor | None = None
    """Pipelined (else None): int32 [INFO_WORDS] in pinned host memory (GPUs; a CPU tensor under the
    emulation), which the route kernel writes the summary into as well, and the host polls instead of copying the
    device's summary and synchronizing (``_summary``)."""

    @property
    def low_latency(self) -> bool:
        return self.mode == "low_latency"

    def overlap_split(self) -> tuple[int, int]:
        """The meta and copy programs of the expand kernel beside the push (:data:`switches.EXPAND_OVERLAPS_PUSH`),
        read from :data:`switches.EXPAND_OVERLAP_PER_SM` and :data:`switches.OVERLAP_COPIERS_PER_SM` at each call
        (their setters take effect from the next dispatch): those per SM, or under the emulation (``sms`` 0) the
        push's ``programs`` and no copy programs."""
        if not self.sms:
            return self.programs, 0
        return switches.EXPAND_OVERLAP_PER_SM * self.sms, switches.OVERLAP_COPIERS_PER_SM * self.sms

    @property
    def scales(self) -> int:
        """fp8 scales per token (0 without fp8): they ride at the end of each token's meta row."""
        return fp8_groups(self.hidden) if self.fp8 else 0

    @property
    def local_experts(self) -> int:
        return self.num_experts // self.world_size


_plans: PlanCache[_Plan] = PlanCache(OP, MoeError)


def _emulated(world: rt.World) -> bool:
    """Whether the kernels run in Triton's interpreter over the CPU heap (``init(device="cpu")`` with
    ``TRITON_INTERPRET=1``: the emulation of ``triton_dist.runtime.emulation``, for tests without GPUs)."""
    return world.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def _world(op: str = OP, mode: str = "normal") -> rt.World:
    """The world the op runs in: a GPU world, or the CPU emulation, whose node layout it can serve.

    One node: every peer reached by load/store. Across nodes (normal mode only): the NVSHMEM heap
    (``triton_dist.init(backend="nvshmem")``) in torchrun's layout (node ``m`` holds ranks ``[m L, (m + 1) L)``).
    Raises RuntimeError before ``triton_dist.init()``; :class:`MoeError` for a CPU world outside the emulation, a
    one-node world with a peer this rank cannot map, and a world across nodes in low-latency mode, on another heap
    or in another layout.
    """
    world = emulated_world() or gpu_world(op, MoeError)
    try:
        return check_load_store_world(op, world, MoeError)
    except MoeError:
        if world.num_nodes == 1:  # a peer this rank cannot map: the one-node check's reason stands
            raise
    layout = [list(node) for node in world.nodes.nodes]
    if mode == "low_latency":
        raise MoeError(
            f"{op}: low_latency mode runs within one node only, and the world spans {world.num_nodes} nodes (ranks "
            f"by node: {layout}): its kernels store into every peer by load/store and have no path across nodes yet. "
            "Use mode='normal' (hierarchical: load/store within a node, NVSHMEM puts across nodes), or run "
            "low_latency within each node (triton_dist.init(group=...) with a per-node group)"
        )
    if world.backend != "nvshmem":
        raise MoeError(
            f"{op}: the world spans {world.num_nodes} nodes (ranks by node: {layout}) but its heap is "
            f"{world.backend!r}; across nodes {op} moves tokens with NVSHMEM's puts, which need the NVSHMEM heap: "
            "triton_dist.init(backend='nvshmem') (or TRITON_DIST_BACKEND=nvshmem; docs/multi-node.md)"
        )
    if world.ranks_per_node is None:
        raise MoeError(
            f"{op}: the nodes hold ranks {layout}; across nodes {op} needs every node to hold the same number L of "
            "consecutive ranks (node m: ranks [m L, (m + 1) L)), as torchrun numbers them"
        )
    return world


def _signature(
    x: torch.Tensor,
    topk: int,
    num_experts: int,
    mode: str,
    max_tokens: int | None,
    fp8: bool = False,
    whole_row: bool = True,
    programs_per_sm: int = 1,
    pipelined: bool = False,
    variant: tuple[int, int] = (0, 0),
) -> tuple[Any, ...]:
    return (
        mode, x.shape[1], x.dtype, num_experts, topk, max_tokens, x.device, fp8, whole_row, programs_per_sm, pipelined,
        *variant,
    )  # fmt: skip


def _make_plan(key: tuple[Any, ...], world: rt.World, programs: int, route_programs: int, sms: int = 0) -> _Plan:
    """A signature's plan: its workspace, and the programs of its kernels (``sms``: the GPU's SMs, 0 under the
    emulation, where the expand kernel runs the push's programs)."""
    mode, hidden, dtype, num_experts, topk, max_tokens, _, fp8, whole_row, _, pipelined, _, expand_block = key
    size = world.world_size
    pipelined = pipelined and mode == "normal" and world.num_nodes == 1  # MoeConfig.pipelined: one node's normal mode
    expanders = max(programs, EXPAND_PER_SM * sms if pipelined else 0)
    copiers = switches.BULK_COPIERS_PER_SM * sms if pipelined else 0
    flags = kernel_constexprs(size, num_experts, topk, programs)["route"]["FLAGS"]

    def create(_: rt.World) -> _Workspace:
        made = _Workspace(
            epochs=torch.zeros(1, dtype=torch.int32, device=world.device),
            flags=rt.zeros(2, flags, dtype=torch.int32),
            counts=rt.zeros(2, pow2(size), row_stride(size, num_experts), dtype=torch.int32),
            table=torch.empty(
                expanders + copiers, expand_table(size, num_experts), dtype=torch.int32, device=world.device
            ),
            parts=torch.empty(route_programs, row_stride(size, num_experts), dtype=torch.int32, device=world.device),
            count_signals=rt.zeros(2, pow2(size), dtype=torch.int64) if world.num_nodes > 1 else None,
            waves=rt.zeros(2, pow2(size) * switches.MAX_EXPAND_WAVES * (programs + 1), dtype=torch.int32)
            if pipelined
            else None,
            combine_waves=rt.zeros(2, pow2(size) * switches.MAX_COMBINE_WAVES * programs, dtype=torch.int32)
            if mode == "normal" and world.num_nodes == 1
            else None,
            started=rt.zeros(1, dtype=torch.int32) if pipelined else None,
        )
        rt.barrier()  # every rank's zeroed flags are in place before any rank's kernel notifies them
        return made

    workspace = resources.workspace(("moe", *key), create, what=f"moe_dispatch {mode} workspace")
    plan = _Plan(key, mode, size, num_experts, topk, hidden, dtype, max_tokens or 0, programs, workspace, fp8=fp8)
    plan.expanders, plan.copiers, plan.sms = expanders, copiers, sms
    plan.route_programs = route_programs
    plan.row_block = MoeConfig(whole_row=whole_row).row_block(hidden)
    plan.nodes, plan.local = world.num_nodes, world.ranks_per_node or size
    plan.pipelined = pipelined
    plan.expand_block = expand_block
    if pipelined:
        plan.host_info = _host_words(world.device)
    if plan.low_latency:
        _grow(plan, size * plan.max_tokens, size * plan.max_tokens)
    return plan


def _host_words(device: torch.device) -> torch.Tensor | None:
    """int32 [INFO_WORDS] the route kernel can store into and the host can read without a copy: pinned host memory
    on a CUDA device (mapped into the device's address space with unified addressing), a CPU tensor on the CPU;
    None where pinned memory is not available (the host then copies the summary)."""
    if device.type == "cpu":
        return torch.full((INFO_WORDS,), -1, dtype=torch.int32)
    try:
        return torch.full((INFO_WORDS,), -1, dtype=torch.int32, pin_memory=True)
    except RuntimeError:
        return None


SUMMARY_POLLS = 64
"""Reads of the host-mapped summary between two queries of the route kernel's completion event (``_summary``)."""


def _summary(info: torch.Tensor, host: torch.Tensor | None, routed: torch.cuda.Event | None) -> list[int]:
    """The route kernel's summary words (the one host synchronization of a normal-mode dispatch).

    From ``host`` (host-mapped, set to -1 before the launch; every word the kernel writes is >= 0): polled until
    every word has landed, without waiting for the stream, so the host goes on while the push kernel runs. Raises
    RuntimeError if ``routed`` (an event recorded after the route kernel) completes and a word is still missing, and
    whatever CUDA error the event reports. Without ``host``: a copy of ``info`` (a stream synchronization)."""
    if host is None:
        return info.tolist()
    while True:
        for _ in range(SUMMARY_POLLS):
            words = host.tolist()
            if min(words) >= 0:
                return words
        if routed is None or routed.query():  # the kernel ended (or there is no stream): its words are in
            words = host.tolist()
            if min(words) >= 0:
                return words
            raise RuntimeError(
                f"moe_dispatch: the route kernel ended without writing its summary into host memory (read {words}); "
                "the pinned host buffer is not mapped into the device's address space"
            )


def _int32s(shapes: list[tuple[int, ...]], device: torch.device, pooled: bool) -> list[torch.Tensor]:
    """Empty int32 tensors of ``shapes``: separate allocations, or (``pooled``) views of one allocation (one call of
    the allocator instead of one per tensor, each view at a multiple of 64 bytes, so the kernels' 16-byte alignment
    holds). Pooled views alias one storage: only for the eager path (a custom op's outputs may not alias)."""
    if not pooled:
        return [torch.empty(shape, dtype=torch.int32, device=device) for shape in shapes]
    block, starts = _int32_block(shapes, device)
    return _int32_views(block, shapes, starts)


def _int32_block(shapes: list[tuple[int, ...]], device: torch.device) -> tuple[torch.Tensor, list[int]]:
    """One int32 allocation for ``_int32s``' pooled views of ``shapes``, and where each starts (elements, multiples
    of 16)."""
    starts, total = [], 0
    for shape in shapes:
        starts.append(total)
        size = 1
        for n in shape:
            size *= n
        total += -(-size // 16) * 16
    return torch.empty(total, dtype=torch.int32, device=device), starts


def _int32_views(block: torch.Tensor, shapes: list[tuple[int, ...]], starts: list[int]) -> list[torch.Tensor]:
    """The contiguous views of ``block`` of ``shapes`` at ``starts`` (``_int32_block``)."""
    out = []
    for shape, start in zip(shapes, starts, strict=True):
        strides, step = [], 1
        for n in reversed(shape):
            strides.append(step)
            step *= n
        out.append(block.as_strided(shape, tuple(reversed(strides)), start))
    return out


def _grow(plan: _Plan, token_slots: int, combine_slots: int) -> None:
    """Give ``plan`` buffers of at least these many slots (collective: every rank asks for the same sizes, which
    normal mode's counts exchange and low-latency mode's fixed sizes guarantee); drops the smaller ones first."""
    old = plan.buffers
    if old is not None and old.token_slots >= token_slots and old.combine_slots >= combine_slots:
        return
    if not plan.low_latency:
        token_slots, combine_slots = capacity(token_slots), capacity(combine_slots)
        if old is not None:
            token_slots, combine_slots = max(token_slots, old.token_slots), max(combine_slots, old.combine_slots)
    prefix = f"moe.buffers.{plan.key!r}"
    plan.buffers = None
    plan.launches.clear()
    resources.drop_workspaces(prefix)

    def create(_: rt.World) -> _Buffers:
        payload, meta = FP8_DTYPE if plan.fp8 else plan.dtype, 1 + 3 * plan.topk + plan.scales
        across = None
        if plan.nodes > 1:
            across = _AcrossNodes(
                send=rt.empty(combine_slots, plan.hidden, dtype=payload),
                send_meta=rt.empty(combine_slots, meta, dtype=torch.int32),
                slot_signals=rt.zeros(2, token_slots, 2, dtype=torch.int64),
                combine_send=rt.empty(token_slots, plan.hidden, dtype=torch.float32),
                combine_signals=rt.zeros(2, combine_slots, dtype=torch.int64),
            )
        made = _Buffers(
            tokens=rt.empty(2, token_slots, plan.hidden, dtype=payload),
            meta=rt.empty(2, token_slots, meta, dtype=torch.int32),
            combine=rt.empty(2, combine_slots, plan.hidden, dtype=torch.float32),
            across=across,
        )
        rt.barrier()  # no peer pushes into buffers this rank has not allocated yet
        return made

    key = (prefix, token_slots, combine_slots)
    plan.buffers = resources.workspace(key, create, what=f"moe_dispatch {plan.mode} buffers")


_GATES = ("push_started", "expand_started")
"""``_launch``'s names of ``kernels._started_kernel``'s two launches: after every program of the push
(:data:`switches.PUSH_RESIDENT_FIRST`), of the expand beside it (:data:`switches.EXPAND_RESIDENT_FIRST`)."""


def _launch_key(name: str, gather: bool, self_mode: int, dtypes: list[torch.dtype], waves: int = 0) -> tuple[Any, ...]:
    """The key of a kernel's launch plan in ``_Plan.launches``: one per kernel, layout, ``self_mode``, ``waves`` and
    the dtypes of its leading tensor arguments, in order."""
    return (name, gather, self_mode, waves, *dtypes)


def _launch(
    plan: _Plan,
    name: str,
    leading: dict[str, Any],
    device: torch.device,
    gather: bool = False,
    self_mode: int = 0,
    waves: int = 0,
    combine: tuple[torch.dtype, bool, int, bool, int, int] = (torch.float32, False, 0, False, 0, 0),
    compile_only: bool = False,
) -> None:
    """Launch kernel ``name`` of ``plan`` with the call's ``leading`` arguments (compiling it on first use; with
    ``compile_only`` only that, its module loaded, nothing launched: under the emulation nothing at all);
    ``gather``: the expand kernel of ``layout="gather"`` (each token copied once, its rows' indices written);
    ``self_mode`` (``_self_push``): 1, the push without this rank's own payload and the expand kernel's copy without
    those rows; 2, the push of this rank's own payload into ``recv_x`` (``self_ptr``) only; ``waves`` > 0
    (:data:`switches.EXPAND_OVERLAPS_PUSH`): the push's wave flags, and the expand kernel that waits for them beside it;
    ``combine`` (the combine kernels): ``MoeConfig.partial_dtype`` of the payload's dtype, ``combine_spread``, the
    waves of :data:`switches.REDUCE_OVERLAPS_PUSH` (0: off), :data:`switches.OWN_PARTIALS_IN_REDUCE`, the waves'
    minimum (:data:`switches.COMBINE_WAVE_MIN_SLOTS`) and maximum (:data:`switches.COMBINE_WAVES_BY_PROGRAMS`)."""
    # A launch plan is compiled for its arguments' dtypes (topk_idx int32 or int64, the weights' dtype): one each.
    # (The dtypes themselves, not their names: a call's host path is on the critical path of a small dispatch.)
    dtypes = [v.dtype for v in leading.values() if isinstance(v, torch.Tensor)]
    launch_key = _launch_key(name, gather, self_mode, dtypes, waves)
    if name.startswith("combine"):  # MoeConfig.combine_partials / combine_spread: a launch plan each
        launch_key += combine
    # PUSH_RESIDENT_FIRST / EXPAND_RESIDENT_FIRST: the push or the expand beside it counts its programs in
    started = waves > 0 and name in ("push", "expand") and _resident_first(plan.fp8) == name
    if started:
        launch_key += ("started",)
    if (name == "expand" and waves) or name == "expand_started":  # its grid: the per-SM split of this call
        launch_key += plan.overlap_split()
    fp8_push = name == "push" and plan.fp8 and self_mode != 2
    # FP8_RECIPROCAL / FP8_NARROW_PUSH and its warps / FP8_PREQUANTIZE (its staging rows): a launch plan each
    staged = plan.staged if (fp8_push or name == "quantize") and _prequantized(plan) else None
    if fp8_push or name == "quantize":
        warps = _fp8_push_warps(plan, staged is not None)
        launch_key += (switches.FP8_RECIPROCAL, warps, 0 if staged is None else staged[0].shape[0])
    found = plan.launches.get(launch_key)
    if found is not None:
        if not compile_only:
            found.launch(device, *leading.values())
        return
    ws, buffers = plan.workspace, plan.buffers
    # An fp8 plan's expand writes fp8 rows and their scales, or dequantizes into recv_x's dtype (a launch each).
    dequantize = plan.fp8 and name == "expand" and leading["recv_ptr"].dtype != FP8_DTYPE
    constexprs = kernel_constexprs(
        plan.world_size,
        plan.num_experts,
        plan.topk,
        plan.programs,
        plan.scales,
        dequantize,
        plan.row_block,
        plan.route_programs,
    )["push" if name in ("quantize", *_GATES) else name]
    world = {"WORLD": notify_world(plan.world_size)}
    # Across nodes, each kernel's path to other nodes (NODES > 1); one node passes none of it (the defaults: the
    # kernels compile as they always have).
    topology = {"NODES": plan.nodes, "LOCAL": plan.local} if plan.nodes > 1 else {}
    across = buffers.across if buffers is not None else None
    fixed: dict[str, Any]
    if name == "quantize":  # FP8_PREQUANTIZE: local, into the staging buffers, the push's BLOCK_H
        assert staged is not None
        constexprs = {"BLOCK_H": constexprs["BLOCK_H"], "SCALES": plan.scales, "RECIPROCAL": switches.FP8_RECIPROCAL}
        fixed = {"q_ptr": staged[0], "scales_ptr": staged[1], "H": plan.hidden}
        grid = (plan.programs, 1, 1)
    elif name in _GATES:  # one program waiting for every program of the push or of the expand beside it
        counted = plan.programs if name == "push_started" else sum(plan.overlap_split())
        constexprs, fixed, grid = {"PROGRAMS": counted}, {"started_ptr": ws.started}, (1, 1, 1)
    elif name == "route_count":  # local: no world constants
        fixed = {"part_ptr": ws.parts, "W": plan.world_size, "E": plan.num_experts, "L": plan.local_experts}
        grid = (plan.route_programs, 1, 1)
    elif name == "route":
        fixed = {"epochs_ptr": ws.epochs, "counts_ptr": ws.counts, "flags_ptr": ws.flags, "part_ptr": ws.parts}
        fixed |= {"E": plan.num_experts, "EXCHANGE": not plan.low_latency, **world}
        if plan.host_info is not None:
            fixed |= {"host_info_ptr": plan.host_info, "HOST_INFO": True}
        if topology:
            fixed |= {"count_signals_ptr": ws.count_signals, **topology}
        grid = (1, 1, 1)
    else:
        assert buffers is not None  # sized before the data kernels
        slots = {"H": plan.hidden, "CAP": buffers.token_slots}
        if name == "push":
            fixed = {"tokens_ptr": buffers.tokens, "meta_ptr": buffers.meta, "counts_ptr": ws.counts}
            fixed |= {"flags_ptr": ws.flags, "part_ptr": ws.parts, **slots, "M": plan.max_tokens, "E": plan.num_experts}
            fixed |= {"LOW_LATENCY": plan.low_latency, **world}
            if _early_push(plan) and self_mode != 2:  # launched before the summary is read: a no-op unless they fit
                fixed |= {"COMBINE_CAP": buffers.combine_slots, "CHECK_CAP": True}
            if self_mode:
                fixed |= {"SELF": self_mode}
            if waves:  # EXPAND_OVERLAPS_PUSH: a flag per wave as well (the early push only)
                fixed |= {"waves_ptr": ws.waves, "WAVES": waves, "WAVE_SLOTS": switches.MAX_EXPAND_WAVES}
            if started:
                fixed |= {"started_ptr": ws.started, "STARTED": True}
            if staged is not None:  # quantized beside the route kernels: the push loads the staged rows
                fixed |= {"pre_ptr": staged[0], "pre_scales_ptr": staged[1], "PREQUANT": True}
            elif fp8_push and switches.FP8_RECIPROCAL:
                fixed |= {"RECIPROCAL": True}
            if across is not None:
                fixed |= {"send_ptr": across.send, "send_meta_ptr": across.send_meta, **topology}
                fixed |= {"slot_signals_ptr": across.slot_signals, "ELEM": buffers.tokens.element_size()}
        elif name == "expand":
            fixed = {"tokens_ptr": buffers.tokens, "meta_ptr": buffers.meta, "counts_ptr": ws.counts}
            fixed |= {"flags_ptr": ws.flags, "table_ptr": ws.table, **slots, "M": plan.max_tokens}
            fixed |= {"L": plan.local_experts}
            bulk = _bulk_copy(plan, gather, dequantize)
            fixed |= {"LOW_LATENCY": plan.low_latency, "GATHER": gather, "BULK": bulk}
            if plan.expanders > plan.programs:
                fixed |= {"SENDERS": plan.programs}
            if bulk:  # the payload's block copy: by copy programs after the meta programs (GPUs), or by each
                fixed |= {
                    "COPIERS": plan.copiers,
                    "COPY_BLOCK": switches.bulk_copy_block(plan.fp8),
                    "SELF_DIRECT": bool(self_mode),
                }
                if plan.expand_block and not waves:  # MoeConfig.expand_block: that many tokens' meta per step
                    fixed |= {"META_BLOCK": plan.expand_block}
            if waves:  # EXPAND_OVERLAPS_PUSH: beside the push, each wave of each source once it landed
                fixed |= {"waves_ptr": ws.waves, "WAVES": waves, "WAVE_SLOTS": switches.MAX_EXPAND_WAVES}
                fixed |= {
                    "SENDERS": plan.programs,
                    "COMBINE_CAP": buffers.combine_slots,
                    "COPIERS": plan.overlap_split()[1],
                }
                if started:
                    fixed |= {"started_ptr": ws.started, "STARTED": True}
            if across is not None:
                fixed |= {"slot_signals_ptr": across.slot_signals, **topology}
        elif name == "combine_push":
            partial, spread, combine_waves, own, least, most = combine  # the fp32 buffers viewed in the partials' dtype
            fixed = {"combine_ptr": buffers.combine.view(partial), "flags_ptr": ws.flags, "H": plan.hidden}
            fixed |= {"CAP": buffers.combine_slots, **world}
            fixed |= _combine_constexprs(partial, spread, plan, waves=combine_waves, own=own, least=least, most=most)
            if combine_waves:
                fixed["waves_ptr"] = ws.combine_waves
            if across is not None:
                fixed |= {"send_ptr": across.combine_send.view(partial), **topology}
                fixed |= {"combine_signals_ptr": across.combine_signals}
        else:
            partial, spread, combine_waves, own, least, most = combine
            fixed = {"combine_ptr": buffers.combine.view(partial), "flags_ptr": ws.flags, "H": plan.hidden}
            fixed |= {"CAP": buffers.combine_slots, "M": plan.max_tokens, "LOW_LATENCY": plan.low_latency}
            fixed |= _combine_constexprs(
                partial, spread, plan, reduce=True, waves=combine_waves, own=own, least=least, most=most
            )
            if combine_waves:
                fixed["waves_ptr"] = ws.combine_waves
            if across is not None:
                fixed |= {"combine_signals_ptr": across.combine_signals, **topology}
        grid = (plan.expanders if name == "expand" and plan.expanders else plan.programs, 1, 1)
        if name == "expand" and waves:
            grid = (plan.overlap_split()[0], 1, 1)
        if name == "expand" and fixed.get("COPIERS"):
            grid = (grid[0] + fixed["COPIERS"], 1, 1)
    kernel = kernels._started_kernel if name in _GATES else getattr(kernels, f"_{name}_kernel")
    named = {**leading, **fixed, **constexprs}
    if device.type == "cpu":  # the emulation: Triton's interpreter, every launch through its generic path
        if not compile_only:
            kernel[grid](**named)
        return
    for param in kernel.params:  # one node: the defaults of the parameters of the paths across nodes
        if param.name not in named and param.has_default:
            named[param.name] = param.default
    with torch.cuda.device(device):
        warps = _fp8_push_warps(plan, staged is not None) if name == "push" else 1 if name in _GATES else 4
        if name == "route" and constexprs["PB"] * constexprs["EP"] > 4096:  # MoeConfig.route_programs' longer steps
            warps = ROUTE_WARPS
        launch = plan.launches[launch_key] = compile_plan(kernel, grid, named, len(leading), num_warps=warps)
        if not compile_only:
            launch.launch(device, *leading.values())


def _combine_constexprs(
    partial: torch.dtype,
    spread: bool,
    plan: Any,
    reduce: bool = False,
    waves: int = 0,
    own: bool = False,
    least: int = 0,
    most: int = 0,
) -> dict[str, Any]:
    """The combine kernels' constants for partials of dtype ``partial`` (``PACK``: partials per fp32 word of the
    combine buffers), ``MoeConfig.combine_spread`` (the push's ``SPREAD``; the reduce's ``UNROLL``, on one node of
    at most ``SPREAD_REDUCE_RANKS`` ranks: ``pow2(W)``) and ``waves`` (:data:`switches.REDUCE_OVERLAPS_PUSH`: ``WAVES``,
    laid out for ``MAX_COMBINE_WAVES``, the reduce waiting for the push's ``plan.programs`` programs) and ``own`` (with
    waves: :data:`switches.OWN_PARTIALS_IN_REDUCE`, ``OWN``; the reduce's ``k`` rows in ``OWN_SPLIT`` steps a row) and
    ``least`` (with waves: :data:`switches.COMBINE_WAVE_MIN_SLOTS`, ``WAVE_MIN``) and ``most`` (with waves:
    :data:`switches.COMBINE_WAVES_BY_PROGRAMS`' slots a wave holds at most, ``WAVE_MAX``); only those that differ
    from the kernels' defaults, so the default config compiles the kernels as before."""
    fixed: dict[str, Any] = {}
    if waves:
        fixed |= {"WAVES": waves, "WAVE_SLOTS": switches.MAX_COMBINE_WAVES, "WP": pow2(plan.world_size)}
        if least:
            fixed["WAVE_MIN"] = least
        if most:
            fixed["WAVE_MAX"] = most
        if reduce:
            fixed["SENDERS"] = plan.programs
        if own:
            fixed["OWN"] = True
            if reduce:
                fixed |= {"K": plan.topk, "SPLIT": switches.OWN_SPLIT}
    if partial != torch.float32:
        fixed["PACK"] = 4 // partial.itemsize
    if spread and not reduce:
        fixed["SPREAD"] = True
    if spread and reduce and plan.nodes == 1 and plan.world_size <= SPREAD_REDUCE_RANKS:
        fixed["UNROLL"] = pow2(plan.world_size)
    return fixed


def _early_push(plan: _Plan) -> bool:
    """Whether ``plan``'s push is launched before the host reads the summary (normal mode on one node): the
    kernel then checks the buffer sizes the summary asks for itself, and does nothing if they do not fit."""
    return plan.pipelined and not plan.low_latency and plan.nodes == 1


def _bulk_copy(plan: _Plan, gather: bool, dequantize: bool) -> bool:
    """Whether ``layout="gather"``'s payload is copied by the expand kernel as one flat block instead of row by row
    (pipelined, one node, no dequantization): ``recv_x``'s row ``i`` is the token buffer's slot ``i``
    (``BULK_COPIERS_PER_SM``)."""
    return plan.pipelined and gather and plan.nodes == 1 and not dequantize


def _self_push(plan: _Plan, gather: bool, fp8: bool, x: torch.Tensor) -> bool:
    """Whether this call's own tokens' payload goes straight into ``recv_x`` (``SELF_PUSH_MIN_ELEMENTS``): the gather
    layout's block copy (``_bulk_copy``) without fp8, on GPUs from that many elements of ``x`` on."""
    large = x.device.type == "cpu" or x.numel() >= switches.SELF_PUSH_MIN_ELEMENTS
    return _bulk_copy(plan, gather, False) and not fp8 and large


def _own_in_push(plan: _Plan, gather: bool, dequantize: bool, fp8: bool = False) -> bool:
    """Whether this call's push stores this rank's own tokens' payload into ``recv_x`` itself (``SELF = 3``):
    :data:`switches.OWN_ROWS_IN_PUSH` (or :data:`switches.EXPAND_OVERLAPS_PUSH`) on, and the gather layout's block copy,
    which a payload dequantized on receipt (``dequantize``) does not take (where ``_self_push`` applies, at any size;
    ``fp8`` rows kept with their scales only with :data:`switches.FP8_OVERLAPS_PUSH`, on by default; off, as before it:
    not)."""
    fp8_joins = not fp8 or switches.FP8_OVERLAPS_PUSH
    return (
        (switches.OWN_ROWS_IN_PUSH or switches.EXPAND_OVERLAPS_PUSH)
        and fp8_joins
        and _bulk_copy(plan, gather, dequantize)
    )


def _waves(plan: _Plan) -> int:
    """The push's waves with :data:`switches.EXPAND_OVERLAPS_PUSH` (``EXPAND_WAVES``, at most the route count programs;
    both powers of two, so a wave is a whole number of route count programs' token ranges)."""
    return min(switches.EXPAND_WAVES, plan.route_programs)


def _combine_waves(plan: _Plan) -> tuple[int, bool]:
    """The combine push's waves (:data:`switches.REDUCE_OVERLAPS_PUSH`: :data:`switches.COMBINE_WAVES`) for ``plan``'s
    combines, or 0, and whether the reduce sums the own partials (:data:`switches.OWN_PARTIALS_IN_REDUCE`, with waves
    only). 0: the option off, or a plan without the ``combine_waves`` workspace (low-latency mode, a world across
    nodes). With :data:`switches.COMBINE_AUTO` the pair from the agreed ``plan.busiest_slots`` >=
    :data:`switches.COMBINE_AUTO_MIN_SLOTS` on, else neither, the same on every rank."""
    if plan.low_latency or plan.nodes != 1 or plan.workspace.combine_waves is None:
        return 0, False
    if switches.COMBINE_AUTO:
        pair = plan.busiest_slots >= switches.COMBINE_AUTO_MIN_SLOTS
        return (switches.COMBINE_WAVES, True) if pair else (0, False)
    return (switches.COMBINE_WAVES, switches.OWN_PARTIALS_IN_REDUCE) if switches.REDUCE_OVERLAPS_PUSH else (0, False)


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a copy of it if its address is not a multiple of 16 (the kernels are compiled for aligned rows)."""
    return t if t.data_ptr() % 16 == 0 else t.clone()


def _plan_for(
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    num_experts: int,
    mode: str,
    max_tokens: int | None,
    fp8: bool = False,
    whole_row: bool = True,
    programs_per_sm: int = 1,
    pipelined: bool = False,
    variant: tuple[int, int] = (0, 0),
) -> _Plan:
    key = _signature(
        x, topk_idx.shape[1], num_experts, mode, max_tokens, fp8, whole_row, programs_per_sm, pipelined, variant
    )
    plan = _plans.get(key)
    if plan is not None:
        return plan
    world = _world(mode=mode)
    emulated = _emulated(world)
    sms = 0 if emulated else sm_count(x.device)
    programs = EMULATED_PROGRAMS if emulated else min(COPY_PROGRAMS, programs_per_sm * sms)
    route_programs = MoeConfig(route_programs=variant[0] or None).route_count_programs(emulated)
    described = {
        "mode": mode,
        "hidden": x.shape[1],
        "dtype": str(x.dtype),
        "num_experts": num_experts,
        "topk": topk_idx.shape[1],
        "max_tokens_per_rank": max_tokens,
        "programs": programs,
        "route_programs": route_programs,
        "fp8": fp8,
        "whole_row": whole_row,
        "programs_per_sm": programs_per_sm,
        "pipelined": pipelined,
        "route_programs_option": variant[0],
        "expand_block": variant[1],
    }
    return _plans.build(key, described, lambda: _make_plan(key, world, programs, route_programs, sms))


def _dispatch(
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_weights: torch.Tensor,
    num_experts: int,
    mode: str,
    max_tokens: int | None,
    fp8: bool = False,
    dequantize: bool = False,
    whole_row: bool = True,
    programs_per_sm: int = 1,
    layout: str = "expanded",
    pooled: bool = False,
    pipelined: bool = False,
    variant: tuple[int, int] = (0, 0),
) -> tuple[torch.Tensor, ...]:
    """The dispatch of checked inputs; returns the 19 tensors the custom op returns, in its order (the last two:
    the fp8 scales of ``recv_x``'s rows, or an empty tensor; ``layout="gather"``'s row of ``recv_x`` per pair row,
    or an empty tensor). ``pooled``: the int32 / fp32 outputs are views of two allocations (the eager path; the
    custom op's outputs may not alias each other). ``variant``: ``(MoeConfig.route_programs or 0,
    MoeConfig.expand_block)``, the last two words of the signature."""
    plan = _plan_for(
        x, topk_idx, num_experts, mode, max_tokens, fp8, whole_row, programs_per_sm, pipelined, variant
    )  # fmt: skip
    device, size, topk = x.device, plan.world_size, plan.topk
    mark = None if plan.low_latency else _phase_hook
    if mark is not None:
        mark("start")
    x, topk_idx, topk_weights = _aligned(x), _aligned(topk_idx), _aligned(topk_weights)
    tokens = x.shape[0]
    # The route kernel writes every word of info (and of the host's copy).
    shapes = [(tokens, size), (tokens, topk), (row_stride(size, num_experts),), (INFO_WORDS,), (1,)]
    tok_pos, pair_pos, row, info, epoch = _int32s(shapes, device, pooled)
    host = plan.host_info
    if host is not None:
        host.fill_(-1)  # every word the route kernel writes is >= 0: -1 is "not landed yet"
    quantized = None  # FP8_PREQUANTIZE: the rows quantized beside the route kernels (on GPUs: its event)
    if _prequantized(plan):
        _staging(plan, tokens, device)
        quantized = _quantize_beside(plan, x, device)
    route = {"idx_ptr": topk_idx, "tok_pos_ptr": tok_pos, "pair_pos_ptr": pair_pos, "T": tokens}
    _launch(plan, "route_count", route, device)
    _launch(plan, "route", {"row_ptr": row, "info_ptr": info, "epoch_ptr": epoch}, device)
    if quantized is not None:  # every push after the quantization (the route kernels beside it)
        torch.cuda.current_stream(device).wait_event(quantized)
    gather = layout == "gather"  # normal mode only (check_inputs): recv_x holds each received token once
    # OWN_ROWS_IN_PUSH: the push's one launch stores them (SELF = 3; fp8 kept only with FP8_OVERLAPS_PUSH)
    inline = _own_in_push(plan, gather, dequantize, fp8)
    own = not inline and _self_push(plan, gather, fp8, x)  # a second launch on a side stream stores them
    push_mode = 3 if inline else int(own)
    routed = None
    if (host is not None or own) and device.type == "cuda":
        routed = torch.cuda.Event()
        routed.record()
    if mark is not None:
        mark("route")
    experts = plan.local_experts
    push = {"x_ptr": x, "idx_ptr": topk_idx, "w_ptr": topk_weights, "tok_pos_ptr": tok_pos, "pair_pos_ptr": pair_pos}
    push |= {"row_ptr": row, "epoch_ptr": epoch, "info_ptr": info, "T": tokens, "self_ptr": x}  # x: a stand-in
    sized = plan.buffers
    # Normal mode on one node, once the plan has buffers: push goes before the host reads the summary, so the host's
    # wait overlaps it (the kernel does nothing if the buffers turn out too small; then it goes again after _grow).
    early = sized is not None and _early_push(plan)
    payload = FP8_DTYPE if fp8 and not dequantize else plan.dtype
    slots_x = None  # inline: recv_x with a row per token slot, allocated before the early push (which fills it)
    status = info[4:]
    overlap = early and inline and switches.EXPAND_OVERLAPS_PUSH  # the expand kernel beside the early push
    beside: list[torch.Tensor] = []  # overlap: its outputs, a row per token slot (and per its k rows)
    if early:
        if inline:
            assert sized is not None
            slots_x = torch.empty(sized.token_slots, plan.hidden, dtype=payload, device=device)
            push["self_ptr"] = slots_x
        waves = _waves(plan) if overlap else 0
        bounds = {"status_ptr": status, "epoch_ptr": epoch, "tok_pos_ptr": tok_pos}
        # EXPAND_RESIDENT_FIRST on GPUs: the expand (side stream) and its gate (this stream) before the push
        expanded = None
        if overlap and _resident_first(fp8) == "expand" and device.type == "cuda":  # (raises if both are on)
            assert sized is not None and slots_x is not None
            # The gate and the push compiled and their modules loaded first: a module load may wait for the kernels
            # running on the device (CUDA's lazy loading), and the expand, once launched, waits for this push.
            _launch(plan, "expand_started", {}, device, compile_only=True)
            _launch(plan, "push", push, device, self_mode=push_mode, waves=waves, compile_only=True)
            beside, expanded = _expand_beside(
                plan, slots_x, sized.token_slots, bounds, device, routed, pooled, waves, fp8, before_push=True
            )
            _launch(plan, "expand_started", {}, device)  # the push, next on this stream, after every expand program
        _launch(plan, "push", push, device, self_mode=push_mode, waves=waves)
        if mark is not None:
            mark("push")
        if overlap:
            assert sized is not None and slots_x is not None
            if expanded is not None:  # nothing follows on this stream in this call: the push is before
                torch.cuda.current_stream(device).wait_event(expanded)
            else:
                beside, _ = _expand_beside(plan, slots_x, sized.token_slots, bounds, device, routed, pooled, waves, fp8)
            if mark is not None:
                mark("expand")
    if plan.low_latency:
        rows_shape: tuple[int, ...] = (experts, size * plan.max_tokens)
        received = size * plan.max_tokens
    else:
        summary = _summary(info, host, routed)  # the one host synchronization: the counts every rank exchanged
        if mark is not None:
            mark("sync")
        if summary[5]:
            raise MoeStatusError(
                f"moe_dispatch: {summary[5]} topk_idx entries over all ranks (this rank: {summary[4]}) are not "
                f"expert ids in [0, {num_experts}) or -1; nothing was received"
            )
        _grow(plan, summary[2], summary[3])
        plan.busiest_slots = summary[3]  # the same on every rank: COMBINE_AUTO's choice
        rows_shape, received = (summary[0],), summary[1]
    recv_shape = (received,) if gather else rows_shape
    pushed = early and plan.buffers is sized  # the early push did nothing exactly when the buffers grew
    if overlap and pushed:  # the expand ran beside the push: its outputs' first rows
        assert slots_x is not None
        rows = rows_shape[0]
        kept = [out[:rows] for out in beside[:6]] + [out[:received] for out in beside[6:9]] + beside[9:13]
        kept.append(beside[13][:received])  # fp8's scales, a row per token slot (else empty)
        gather_rows, src_rank, src_token, expert, slot, weight_bits, comb_rows, comb_src, comb_dst = kept[:9]
        counts, offsets, src_offsets, recv_tokens, scale_bits = kept[9:]
        return (slots_x[:received], counts, offsets, src_offsets, src_rank, src_token, expert,
                weight_bits.view(torch.float32), slot, recv_tokens, status, tok_pos, row, epoch, comb_rows, comb_src,
                comb_dst, scale_bits.view(torch.float32), gather_rows)  # fmt: skip
    if inline and pushed:  # its rows up to the slots this rank receives (its own tokens' rows filled by the push)
        assert slots_x is not None
        recv_x = slots_x[:received]
    elif inline:  # the push stores into it: allocated before
        recv_x = torch.empty(*recv_shape, plan.hidden, dtype=payload, device=device)
        push["self_ptr"] = recv_x
    if not pushed:
        _launch(plan, "push", push, device, self_mode=push_mode)
        if mark is not None:
            mark("push")
    # The host allocates the outputs while push runs (normal mode: the GPU would otherwise idle through them).
    if not inline:
        recv_x = torch.empty(*recv_shape, plan.hidden, dtype=payload, device=device)
    kept_scales = fp8 and not dequantize
    # Low-latency rows nobody fills this call read as "no row" (-1 / 0): the expand kernel writes them too.
    shapes = [rows_shape if gather else (0,), *([rows_shape] * 5), (received, topk), (received,), (received,)]
    shapes += [(experts,), (experts,), (experts, size), (), (*recv_shape, plan.scales) if kept_scales else (0,)]
    places = _expand_places(gather, kept_scales)
    dtypes = [torch.float32 if name in _EXPAND_FP32 else torch.int32 for name in _EXPAND_OUTPUTS]
    direct = int(own or inline)  # the expand kernel's SELF_DIRECT: its block copy leaves my own tokens' rows out
    key = _launch_key("expand", gather, direct, [recv_x.dtype, *dtypes, torch.int32, torch.int32, torch.int32])
    launch = plan.launches.get(key) if pooled and plan.pipelined and _by_address(device) else None
    if launch is not None:
        # Pipelined, once the launch plan exists: the expand kernel is launched from the outputs' addresses, and
        # their views are made after it, host time the GPU does not wait for (a normal-mode dispatch's host work
        # after its synchronization is on the critical path whenever the push ends before it: small T, fp8).
        block, starts = _int32_block(shapes, device)
        if mark is not None:
            mark("alloc")
        if own:  # this rank's own tokens into recv_x, beside the push (a side stream), before the expand kernel
            _push_own(plan, {**push, "self_ptr": recv_x}, device, routed)
            if mark is not None:
                mark("own")
        base = block.data_ptr()
        launch.launch(device, recv_x, *(base + 4 * starts[place] for place in places), status, epoch, tok_pos)
        if mark is not None:
            mark("expand")
        outs = _int32_views(block, shapes, starts)
    else:
        outs = _int32s(shapes, device, pooled)
        if mark is not None:
            mark("alloc")
        if own:
            _push_own(plan, {**push, "self_ptr": recv_x}, device, routed)
            if mark is not None:
                mark("own")
        arguments = [outs[place].view(torch.float32) if name in _EXPAND_FP32 else outs[place]
                     for name, place in zip(_EXPAND_OUTPUTS, places, strict=True)]  # fmt: skip
        expand = {"recv_ptr": recv_x, **dict(zip(_EXPAND_OUTPUTS, arguments, strict=True))}
        expand |= {"status_ptr": status, "epoch_ptr": epoch, "tok_pos_ptr": tok_pos}  # tok_pos: SELF_DIRECT's
        _launch(plan, "expand", expand, device, gather, self_mode=direct)
        if mark is not None:
            mark("expand")
    gather_rows, src_rank, src_token, expert, slot, weight_bits, comb_rows, comb_src, comb_dst = outs[:9]
    counts, offsets, src_offsets, recv_tokens, scale_bits = outs[9:]
    weights, scales = weight_bits.view(torch.float32), scale_bits.view(torch.float32)
    return (recv_x, counts, offsets, src_offsets, src_rank, src_token, expert, weights, slot, recv_tokens, status,
            tok_pos, row, epoch, comb_rows, comb_src, comb_dst, scales, gather_rows)  # fmt: skip


def _quantize_beside(plan: _Plan, x: torch.Tensor, device: torch.device) -> torch.cuda.Event | None:
    """Launch :data:`switches.FP8_PREQUANTIZE`'s quantization of ``x`` into ``plan``'s staging buffers (``_staging``,
    sized before) on ``plan``'s side stream, after the current stream's work so far (``x``, and the last call's push,
    which read the staging buffers); returns the event the push must wait for. On the CPU (the emulation) it runs in
    order and returns None."""
    leading = {"x_ptr": x, "T": x.shape[0]}
    if device.type != "cuda":
        _launch(plan, "quantize", leading, device)
        return None
    if plan.side is None:
        plan.side = torch.cuda.Stream(device)
    side = plan.side
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        _launch(plan, "quantize", leading, device)
    done = torch.cuda.Event()
    done.record(side)
    return done


def _expand_places(gather: bool, kept_scales: bool) -> tuple[int, ...]:
    """The expand kernel's output arguments (``_EXPAND_OUTPUTS``), by their place in a dispatch's list of int32
    outputs (weights and scales: fp32 bits; the stand-ins the kernel never touches: the weights for the scales, the
    slots for the gather rows)."""
    return (1, 2, 3, 5, 4, 6, 7, 8, 9, 10, 11, 12, 13 if kept_scales else 5, 0 if gather else 4)


def _resident_first(fp8: bool) -> str | None:
    """Which kernel's programs the expand beside the push waits to see resident before the other is placed: "push"
    (:data:`switches.PUSH_RESIDENT_FIRST`), "expand" (:data:`switches.EXPAND_RESIDENT_FIRST`, fp8 rows kept only:
    ``fp8``) or None. Raises :class:`MoeError` if both are on (the setters refuse it; an assignment to the module's
    names does not)."""
    if switches.PUSH_RESIDENT_FIRST and switches.EXPAND_RESIDENT_FIRST:
        raise MoeError("moe_dispatch: switches.PUSH_RESIDENT_FIRST and EXPAND_RESIDENT_FIRST are both on; turn one off")
    if switches.PUSH_RESIDENT_FIRST:
        return "push"
    return "expand" if switches.EXPAND_RESIDENT_FIRST and fp8 else None


def _expand_beside(
    plan: _Plan,
    recv_x: torch.Tensor,
    slots: int,
    trailing: dict[str, torch.Tensor],
    device: torch.device,
    routed: torch.cuda.Event | None,
    pooled: bool,
    waves: int,
    fp8: bool = False,
    before_push: bool = False,
) -> tuple[list[torch.Tensor], torch.cuda.Event | None]:
    """Launch the gather layout's expand kernel beside the early push (:data:`switches.EXPAND_OVERLAPS_PUSH`), into
    outputs sized by the plan's ``slots`` token slots (``recv_x``: a row per slot, this rank's own rows stored by the
    push; the per-row outputs ``slots * k`` rows, the per-token ones ``slots``, ``fp8``'s scales of the kept rows
    ``slots`` rows of ``plan.scales``), and return those outputs in the order of ``_dispatch``'s int32 list (the caller
    keeps their first rows once the summary says how many) and None, or with ``before_push`` the expand's event.
    ``trailing``: the kernel's status, epoch and ``tok_pos`` arguments. On GPUs on ``plan``'s side stream after
    ``routed`` (the route kernels' event: the counts matrix and the summary it reads), after the push's launch, the
    current stream waiting for it at once (nothing follows on it in this call, the push is before); with
    ``before_push`` (GPUs, :data:`switches.EXPAND_RESIDENT_FIRST`) before the push's launch, the current stream not
    waiting: the caller launches the gate that waits for every expand program to be resident, then the push, and makes
    the current stream wait for the returned event after them. On the CPU (the emulation) in order,
    after the push (with :data:`switches.EXPAND_RESIDENT_FIRST` the gate after the expand: a kernel runs to its end
    there, and the expand would wait forever for a push after it)."""
    experts, size, topk = plan.local_experts, plan.world_size, plan.topk
    rows = (slots * topk,)
    scales = (slots, plan.scales) if fp8 else (0,)
    shapes = [rows, *([rows] * 5), (slots, topk), (slots,), (slots,), (experts,), (experts,), (experts, size), ()]
    outs = _int32s([*shapes, scales], device, pooled)
    arguments = [outs[place].view(torch.float32) if name in _EXPAND_FP32 else outs[place]
                 for name, place in zip(_EXPAND_OUTPUTS, _expand_places(True, fp8), strict=True)]  # fmt: skip
    expand = {"recv_ptr": recv_x, **dict(zip(_EXPAND_OUTPUTS, arguments, strict=True)), **trailing}
    first = _resident_first(fp8)

    def launch() -> None:
        if first == "push":  # PUSH_RESIDENT_FIRST: every push program on its SM first (the push counted them in)
            _launch(plan, "push_started", {}, device)
        _launch(plan, "expand", expand, device, True, self_mode=1, waves=waves)
        if first == "expand" and not before_push:  # the emulation: the expand counted itself in, the gate checks
            _launch(plan, "expand_started", {}, device)

    return outs, _on_side_stream(plan, device, routed, launch, join=not before_push)


_EXPAND_OUTPUTS = (
    "src_rank_ptr",
    "src_token_ptr",
    "expert_ptr",
    "weight_ptr",
    "slot_ptr",
    "comb_rows_ptr",
    "comb_src_ptr",
    "comb_dst_ptr",
    "counts_out_ptr",
    "offsets_out_ptr",
    "src_offsets_ptr",
    "recv_tokens_ptr",
    "scales_ptr",
    "gather_ptr",
)
"""The expand kernel's leading arguments after ``recv_ptr`` that are a dispatch's int32 outputs, in its order (then
``status_ptr``, ``epoch_ptr``, ``tok_pos_ptr``)."""
_EXPAND_FP32 = ("weight_ptr", "scales_ptr")
"""Those of them that are fp32 (views of int32 storage)."""


def _by_address(device: torch.device) -> bool:
    """Whether a kernel on ``device`` can be launched from its arguments' addresses (a GPU's launch plan; the CPU
    emulation's interpreter takes tensors)."""
    return device.type == "cuda"


def _push_own(plan: _Plan, push: dict[str, Any], device: torch.device, routed: torch.cuda.Event | None) -> None:
    """Launch the push kernel's ``SELF = 2`` pass (this rank's own tokens' payload into ``recv_x``,
    ``push["self_ptr"]``) on ``plan``'s side stream after ``routed`` (the event after the route kernels: the positions
    and counts it reads), and make the current stream wait for it, so it runs beside the push and before the expand
    kernel. On the CPU (the emulation) it is launched in order."""
    _on_side_stream(plan, device, routed, lambda: _launch(plan, "push", push, device, self_mode=2))


def _on_side_stream(
    plan: _Plan,
    device: torch.device,
    routed: torch.cuda.Event | None,
    launch: Callable[[], None],
    join: bool = True,
) -> torch.cuda.Event | None:
    """Run ``launch`` on ``plan``'s side stream after ``routed`` (the route kernels' event; None: after the current
    stream's work so far), the current stream then waiting for it (``join``; else the caller makes it wait for the
    returned event where it must): beside whatever the current stream runs meanwhile, before what it runs next. On the
    CPU (the emulation) ``launch`` runs in order. Returns the side stream's event after ``launch`` where it is not
    joined, else None."""
    if device.type != "cuda":
        launch()
        return None
    current = torch.cuda.current_stream(device)
    if plan.side is None:
        plan.side = torch.cuda.Stream(device)
    side = plan.side
    if routed is not None:
        side.wait_event(routed)
    else:
        side.wait_stream(current)
    with torch.cuda.stream(side):
        launch()
    done = torch.cuda.Event()
    done.record(side)
    if not join:
        return done
    current.wait_event(done)
    return None


def _capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (no collective may run then)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _combine(
    y: torch.Tensor,
    weights: torch.Tensor,
    comb_rows: torch.Tensor,
    comb_src: torch.Tensor,
    comb_dst: torch.Tensor,
    tok_pos: torch.Tensor,
    row: torch.Tensor,
    epoch: torch.Tensor,
    key: tuple[Any, ...],
    partials: str = "input",
    spread: bool = True,
) -> torch.Tensor:
    plan = _plans.get(key)
    if plan is None:
        raise MoeError("moe_combine: no dispatch of this signature in the current world (call moe_dispatch first)")
    config = MoeConfig(combine_partials=partials, combine_spread=spread)
    waves, own = _combine_waves(plan)
    least = switches.COMBINE_WAVE_MIN_SLOTS if waves else 0
    most = 0
    if least and switches.COMBINE_WAVES_BY_PROGRAMS:  # a pair's waves of at most one slot per program instead
        least, most = 0, plan.programs
    combine = (config.partial_dtype(plan.dtype), spread, waves, own, least, most)
    if combine not in plan.combines and not _capturing():
        # Every rank's partials land in its peers' buffers: the ranks agree on their dtype and the waves (once per
        # plan and option; the device, index 6 of the key, differs between ranks).
        described = {"combine_partials": partials, "combine_spread": spread, "plan": repr(key[:6] + key[7:])}
        if waves:  # REDUCE_OVERLAPS_PUSH (described only when on: the default's agreement is as it was)
            described |= {"reduce_overlaps_push_waves": waves, "own_partials_in_reduce": own}
            described |= {"combine_wave_min_slots": least, "combine_wave_max_slots": most}
        _plans.agree(described)
        plan.combines.add(combine)
    mark = None if plan.low_latency else _combine_phase_hook
    if mark is not None:
        mark("start")
    device, y = y.device, _aligned(y)
    out = torch.empty(tok_pos.shape[0], plan.hidden, dtype=plan.dtype, device=device)
    push = {"y_ptr": y, "weight_ptr": weights, "comb_rows_ptr": comb_rows, "comb_src_ptr": comb_src}
    push |= {"comb_dst_ptr": comb_dst, "epoch_ptr": epoch, "slots": comb_src.numel()}
    reduce = {"out_ptr": out, "tok_pos_ptr": tok_pos, "row_ptr": row, "epoch_ptr": epoch, "T": out.shape[0]}
    reduce |= {"y_ptr": y, "weight_ptr": weights, "comb_rows_ptr": comb_rows, "comb_src_ptr": comb_src}
    reduce["slots"] = comb_src.numel()  # (the reduce reads y and the rows only with OWN_PARTIALS_IN_REDUCE)
    if waves:  # the reduce beside the push: on the side stream after what the current stream ran before the push
        before = None
        if device.type == "cuda":
            before = torch.cuda.Event()
            before.record()
        _launch(plan, "combine_push", push, device, combine=combine)
        if mark is not None:
            mark("push")
        _on_side_stream(plan, device, before, lambda: _launch(plan, "combine_reduce", reduce, device, combine=combine))
    else:
        _launch(plan, "combine_push", push, device, combine=combine)
        if mark is not None:
            mark("push")
        _launch(plan, "combine_reduce", reduce, device, combine=combine)
    if mark is not None:
        mark("reduce")
    return out


# --- torch custom ops --------------------------------------------------------------------------------------------

_DISPATCH_OUTPUTS = 19


@torch.library.custom_op("triton_dist::moe_dispatch", mutates_args=())
def _moe_dispatch_op(
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_weights: torch.Tensor,
    num_experts: int,
    mode: str = "normal",
    max_tokens_per_rank: int = 0,
    fp8: bool = False,
    dequantize: bool = False,
    whole_row: bool = True,
    programs_per_sm: int = 1,
    layout: str = "expanded",
    pipelined: bool = False,
    route_programs: int = 0,
    expand_block: int = 0,
) -> list[torch.Tensor]:
    world = _world(mode=mode)
    max_tokens = max_tokens_per_rank or None
    check_inputs(
        x, topk_idx, topk_weights, num_experts, world.world_size, mode, max_tokens, fp8, world.device, dequantize,
        layout,
    )  # fmt: skip
    args = (x, topk_idx, topk_weights, num_experts, mode, max_tokens, fp8, dequantize, whole_row, programs_per_sm)
    return list(_dispatch(*args, layout, pipelined=pipelined, variant=(route_programs, expand_block)))


@_moe_dispatch_op.register_fake
def _moe_dispatch_fake(
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_weights: torch.Tensor,
    num_experts: int,
    mode: str = "normal",
    max_tokens_per_rank: int = 0,
    fp8: bool = False,
    dequantize: bool = False,
    whole_row: bool = True,
    programs_per_sm: int = 1,
    layout: str = "expanded",
    pipelined: bool = False,
    route_programs: int = 0,
    expand_block: int = 0,
) -> list[torch.Tensor]:
    size = rt.current_world().world_size if rt.is_initialized() else 1
    check_inputs(
        x, topk_idx, topk_weights, num_experts, size, mode, max_tokens_per_rank or None, fp8, dequantize=dequantize,
        layout=layout,
    )  # fmt: skip
    experts, topk, tokens = num_experts // size, topk_idx.shape[1], x.shape[0]
    if mode == "low_latency":
        rows: tuple[Any, ...] = (experts, size * max_tokens_per_rank)
        received: Any = size * max_tokens_per_rank
    else:
        ctx = torch.library.get_ctx()
        rows, received = (ctx.new_dynamic_size(),), ctx.new_dynamic_size()

    def ints(*shape: Any) -> torch.Tensor:
        return x.new_empty(shape, dtype=torch.int32)

    kept = fp8 and not dequantize
    recv_rows = (received,) if layout == "gather" else rows
    recv_x = x.new_empty(*recv_rows, x.shape[1], dtype=FP8_DTYPE if kept else x.dtype)
    scales = (
        x.new_empty(*recv_rows, fp8_groups(x.shape[1]), dtype=torch.float32)
        if kept
        else x.new_empty(0, dtype=torch.float32)
    )
    gather_rows = ints(*rows) if layout == "gather" else ints(0)
    return [recv_x, ints(experts), ints(experts), ints(experts, size), ints(*rows),
            ints(*rows), ints(*rows), x.new_empty(rows, dtype=torch.float32), ints(*rows), ints(), ints(4),
            ints(tokens, size), ints(row_stride(size, num_experts)), ints(1), ints(received, topk), ints(received),
            ints(received), scales, gather_rows]  # fmt: skip


@torch.library.custom_op("triton_dist::moe_combine", mutates_args=())
def _moe_combine_op(
    y: torch.Tensor,
    weights: torch.Tensor,
    comb_rows: torch.Tensor,
    comb_src: torch.Tensor,
    comb_dst: torch.Tensor,
    tok_pos: torch.Tensor,
    row: torch.Tensor,
    epoch: torch.Tensor,
    num_experts: int,
    mode: str,
    max_tokens_per_rank: int,
    fp8: bool = False,
    whole_row: bool = True,
    programs_per_sm: int = 1,
    pipelined: bool = False,
    route_programs: int = 0,
    expand_block: int = 0,
    combine_partials: str = "input",
    combine_spread: bool = True,
) -> torch.Tensor:
    key = (mode, y.shape[-1], y.dtype, num_experts, comb_rows.shape[1], max_tokens_per_rank or None, y.device, fp8,
           whole_row, programs_per_sm, pipelined, route_programs, expand_block)  # fmt: skip
    args = (y, weights, comb_rows, comb_src, comb_dst, tok_pos, row, epoch)
    return _combine(*args, key, combine_partials, combine_spread)


@_moe_combine_op.register_fake
def _moe_combine_fake(
    y: torch.Tensor,
    weights: torch.Tensor,
    comb_rows: torch.Tensor,
    comb_src: torch.Tensor,
    comb_dst: torch.Tensor,
    tok_pos: torch.Tensor,
    row: torch.Tensor,
    epoch: torch.Tensor,
    num_experts: int,
    mode: str,
    max_tokens_per_rank: int,
    fp8: bool = False,
    whole_row: bool = True,
    programs_per_sm: int = 1,
    pipelined: bool = False,
    route_programs: int = 0,
    expand_block: int = 0,
    combine_partials: str = "input",
    combine_spread: bool = True,
) -> torch.Tensor:
    return y.new_empty(tok_pos.shape[0], y.shape[-1])


# --- the public functions ----------------------------------------------------------------------------------------


def moe_dispatch(
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_weights: torch.Tensor,
    num_experts: int,
    mode: str = "normal",
    max_tokens_per_rank: int | None = None,
    fp8: bool = False,
    dequantize: bool = False,
    *,
    config: MoeConfig | None = None,
    layout: str = "expanded",
) -> tuple[torch.Tensor, MoeHandle]:
    """Send each token to the ranks holding its experts; returns ``(recv_x, handle)`` (``torch.ops.triton_dist``).

    ``x`` [T, H] (bf16 / fp16 / fp32), ``topk_idx`` [T, k] (int32 / int64 expert ids in [0, E), -1 for none),
    ``topk_weights`` [T, k], all contiguous on this rank's GPU; T may differ between ranks, H, dtype, E and k may
    not (checked with every rank on the first call). Experts are split contiguously, ``E / W`` per rank. Each token
    crosses to each destination rank once; the receiver's rows are grouped by local expert: :class:`MoeHandle`
    describes both layouts and the per-row meta.

    ``mode="normal"`` sizes ``recv_x`` with one host synchronization (after the counts exchange, on the device);
    ``mode="low_latency"`` needs ``max_tokens_per_rank`` (T at most that, else :class:`MoeError`), returns
    ``recv_x`` [E / W, W * max_tokens_per_rank, H], never synchronizes and can be captured in a CUDA graph once the
    signature ran eagerly. At most two dispatch/combine pairs of one signature may be in flight (the buffers are
    double-buffered): combine step n before dispatching step n + 2.

    ``fp8=True`` quantizes each token inside the push kernel to float8_e4m3fn with one fp32 scale per 128 channels
    (``scale = max(amax, 1e-4) / 448``, each value multiplied by ``448 / max(amax, 1e-4)`` and rounded to nearest
    even, as DeepEP's per-token cast; ``reference.quantize_fp8`` is the same in torch; with
    :data:`switches.FP8_RECIPROCAL` off, each value is divided by the scale instead, ``quantize_fp8(x,
    reciprocal=False)``), so about half the bytes cross the links. The receiver gets ``recv_x`` in fp8
    and the scales in ``handle.recv_scales`` (for an fp8 expert GEMM: ``ops.grouped_gemm``), or, with
    ``dequantize=True``, ``recv_x`` dequantized to x's dtype. Combine still takes ``y`` in x's dtype. fp8 needs an
    NVIDIA GPU of sm_89 or later (or the CPU emulation).

    An expert id out of range: normal mode raises :class:`MoeStatusError` on every rank at its synchronization;
    low-latency mode skips it and counts it in ``handle.status`` (:func:`check_status`). A low-latency expert that
    receives more than ``W * max_tokens_per_rank`` rows (a token naming one expert twice) keeps the first ones and
    counts the dropped pairs in the status too: :func:`check_status` raises for either. Needs
    ``triton_dist.init()`` on GPUs.

    Selected by topology: within one node every transfer is a load/store into a peer's buffers. A world across
    nodes (``triton_dist.init(backend="nvshmem")``, torchrun's layout of L consecutive ranks per node) runs normal
    mode with the same load/store within each node and NVSHMEM puts (``dl.put_signal``) to the ranks of other
    nodes, for the counts exchange, the tokens and combine's partials (``kernels.py``); low-latency mode, another
    heap or another layout across nodes raise :class:`MoeError` at the first call.

    ``config``: a :class:`~triton_dist.ops.moe.config.MoeConfig` choosing how the kernels move rows (None: the
    default, whole rows per step; ``MoeConfig(whole_row=False)``: 1024-element chunks, the same results), which
    its combine follows.
    Every rank passes the same one (checked on the first call, like H); anything else raises :class:`MoeError`.

    ``layout`` (normal mode): ``"expanded"`` (the default) copies each received token into one row per local expert
    it picked; ``"gather"`` skips that copy: ``recv_x`` is [N, H], each received token once (N =
    ``handle.num_recv_tokens``; fp8 scales [N, G] likewise), and ``handle.gather_rows`` (int32 [R]) names the row of
    ``recv_x`` each expert-grouped row reads, so ``recv_x[handle.gather_rows]`` is the expanded ``recv_x``.
    ``ops.grouped_gemm(recv_x, w, counts, offsets, gather_rows=handle.gather_rows)`` reads through it; the counts,
    offsets, per-row meta and ``moe_combine`` (``y`` [R, H]) are the same as with the default. ``"gather"`` in
    low-latency mode raises :class:`MoeError`. An option until a GPU run measures it (docs/design.md).
    """
    if config is not None and not isinstance(config, MoeConfig):
        raise MoeError(f"moe_dispatch: config must be a MoeConfig or None, got {type(config).__name__}")
    config_ = config or MoeConfig()
    whole_row, programs_per_sm, pipelined = config_.whole_row, config_.per_sm(mode), config_.pipelined
    variant = (config_.route_programs or 0, config_.expand_block)
    max_tokens = max_tokens_per_rank
    if rt.is_initialized():
        size, device = rt.current_world().world_size, _world(mode=mode if mode in MODES else "normal").device
    else:
        size, device = 1, None
    check_inputs(x, topk_idx, topk_weights, num_experts, size, mode, max_tokens, fp8, device, dequantize, layout)
    world = _world(mode=mode)
    if plain_eager(x, topk_idx, topk_weights):
        outputs: Any = _dispatch(
            x, topk_idx, topk_weights, num_experts, mode, max_tokens, fp8, dequantize, whole_row, programs_per_sm,
            layout, pooled=True, pipelined=pipelined, variant=variant,
        )  # fmt: skip
    else:
        outputs = torch.ops.triton_dist.moe_dispatch(
            x, topk_idx, topk_weights, num_experts, mode, max_tokens or 0, fp8, dequantize, whole_row, programs_per_sm,
            layout, pipelined, *variant,
        )  # fmt: skip
    (recv_x, counts, offsets, src_offsets, src_rank, src_token, expert, weights, slot, recv_tokens, status,
     tok_pos, row, epoch, comb_rows, comb_src, comb_dst, scales, gather_rows) = outputs  # fmt: skip
    handle = MoeHandle(
        mode=mode,
        rank=world.rank,
        world_size=world.world_size,
        num_experts=num_experts,
        num_tokens=x.shape[0],
        hidden=x.shape[1],
        dtype=x.dtype,
        max_tokens_per_rank=max_tokens,
        expert_counts=counts,
        expert_offsets=offsets,
        src_offsets=src_offsets,
        recv_src_rank=src_rank,
        recv_src_token=src_token,
        recv_expert=expert,
        recv_weights=weights,
        recv_topk_slot=slot,
        num_recv_tokens=recv_tokens if mode == "low_latency" else comb_src.shape[0],
        status=status,
        state=(comb_rows, comb_src, comb_dst, tok_pos, row, epoch),
        fp8=fp8,
        recv_scales=scales if fp8 and not dequantize else None,
        config=config,
        layout=layout,
        gather_rows=gather_rows if layout == "gather" else None,
    )
    return recv_x, handle


def moe_combine(y: torch.Tensor, handle: MoeHandle) -> torch.Tensor:
    """For every token of this rank's dispatch, ``sum_k w_k * y_k`` over its experts, returned [T, H] in x's dtype
    (``torch.ops.triton_dist``). ``y``: the experts' unweighted outputs, one row per row of ``recv_x`` (same shape
    and dtype). Every rank calls it for the dispatch it made, in the same order; it runs with that dispatch's
    ``config`` (``handle.config``): by default (``MoeConfig(combine_partials="input")``) each rank's partial sum of a
    token, computed in fp32, crosses the links rounded to y's dtype and is summed in fp32 at home (``"fp32"`` keeps
    the partials in fp32: the reference's bits, twice the bytes), and the kernels take their rows spread
    (``combine_spread``, the same bits as without). The ranks' options are checked against each other at a plan's
    first combine with them (:class:`MoeError` on every rank if they differ; during CUDA-graph capture not checked:
    combine once eagerly first)."""
    device = _world("moe_combine", getattr(handle, "mode", "normal")).device
    check_combine_input(y, handle, device)
    comb_rows, comb_src, comb_dst, tok_pos, row, epoch = handle.state
    args = (y, handle.recv_weights, comb_rows, comb_src, comb_dst, tok_pos, row, epoch)
    config = handle.config or MoeConfig()
    whole_row, programs_per_sm, pipelined = config.whole_row, config.per_sm(handle.mode), config.pipelined
    variant = (config.route_programs or 0, config.expand_block)
    options = (config.combine_partials, config.combine_spread)
    if plain_eager(*args):
        key = (handle.mode, handle.hidden, handle.dtype, handle.num_experts, comb_rows.shape[1],
               handle.max_tokens_per_rank, y.device, handle.fp8, whole_row, programs_per_sm, pipelined,
               *variant)  # fmt: skip
        return _combine(*args, key, *options)
    return torch.ops.triton_dist.moe_combine(
        *args, handle.num_experts, handle.mode, handle.max_tokens_per_rank or 0, handle.fp8, whole_row, programs_per_sm,
        pipelined, *variant, *options,
    )  # fmt: skip


def check_status(handle: MoeHandle) -> None:
    """Raise :class:`MoeStatusError` if this rank's dispatch skipped expert ids out of range, or (low-latency mode)
    dropped pairs over an expert's capacity (reads the device status: a host synchronization, so low-latency
    callers do it outside the graph, e.g. every N steps)."""
    if handle.status is None:
        return
    words = handle.status.tolist()
    bad, dropped = words[STATUS_BAD_EXPERT], words[STATUS_OVERFLOW]
    if dropped:
        raise MoeStatusError(
            f"moe_dispatch: low-latency capacity exceeded on rank {handle.rank}: {dropped} (token, k) pairs did not "
            f"fit their expert's {handle.world_size} * max_tokens_per_rank = "
            f"{handle.world_size * (handle.max_tokens_per_rank or 0)} rows (a token named one expert more than once) "
            "and were dropped from recv_x and combine"
        )
    if bad:
        raise MoeStatusError(
            f"moe_dispatch: {bad} topk_idx entries on rank {handle.rank} were not expert ids in "
            f"[0, {handle.num_experts}) or -1; those pairs were not sent"
        )
