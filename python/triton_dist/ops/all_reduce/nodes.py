"""The host side of ``all_reduce`` on a world across nodes: the world it accepts, sizes, buffers, the first launch.

``op.py`` takes this path when the one-node check (``peer_world``) refuses a world because it spans nodes
(``across_nodes_world``); a one-node world keeps the one-node kernels (``kernels.py``), their configs and their
first-call path unchanged. The kernel and its ordering argument: ``nodes_kernel.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from triton_dist import runtime as rt
from triton_dist.ops.all_reduce.config import AllReduceError
from triton_dist.ops.all_reduce.nodes_kernel import _all_reduce_nodes_kernel
from triton_dist.ops.common import resources
from triton_dist.ops.common.errors import emulated, emulated_world, gpu_world, on_device
from triton_dist.ops.common.launch import EmulatedLaunch, LaunchPlan, first_launch

OP = "all_reduce"
WORKSPACE = "all_reduce.nodes"
"""The key prefix of this path's workspaces (``resources.workspaces``)."""
MAX_PROGRAMS = 16
"""The most programs one call launches: the flags and signals have this many per-program rows."""
EMULATED_PROGRAMS = 2
"""The most programs under the CPU emulation (each one a thread of the interpreter)."""
CHUNK_BYTES = 32 * 1024
"""The least bytes of an owned part one program reduces (fewer programs for small messages)."""
EMULATED_CHUNK_BYTES = 128
"""``CHUNK_BYTES`` under the CPU emulation (so that small messages take several programs)."""
BLOCK_BYTES = 4096
"""Bytes of the input one program moves per loop step (the kernel's ``BLOCK`` elements)."""
EMULATED_BLOCK = 32
"""``BLOCK`` under the CPU emulation (small blocks run quickly in the interpreter)."""
ALIGN = 16
"""Parts and programs' chunks are multiples of this many elements (so their accesses stay 16-byte aligned)."""
MIN_ROW_BYTES = 4096
"""The smallest row: row sizes are rounded up to a power of two, so calls of nearby sizes share a workspace."""
MAX_OFFSET = 1 << 31
"""The kernel's offsets are 32-bit: the message and the buffers it indexes must stay below this many elements."""


@dataclass(frozen=True)
class NodesWorkspace:
    """One size class's buffers (``nodes_kernel.py``): all symmetric, zeroed at creation."""

    data: torch.Tensor
    """uint8 ``[2 parities][inbox, gather][local ranks][row bytes]``: the load/store buffers."""
    partials: torch.Tensor
    """uint8 ``[2 parities][nodes][row bytes]``, read as fp32: the nodes' partial sums (NVSHMEM puts land here)."""
    flags: torch.Tensor
    """int32 ``[2 parities][2 steps][MAX_PROGRAMS][local ranks]``: the intra-node flags."""
    signals: torch.Tensor
    """int64 ``[2 parities][MAX_PROGRAMS][nodes]``: the inter-node signals."""
    state: torch.Tensor
    """int64 ``[1]``: the call-epoch state (``ops/common/call_epoch.py``); read by this rank only."""


@dataclass(frozen=True)
class NodesShape:
    """How a message of ``n`` elements is cut: ``part`` elements per local rank, ``chunk`` per program, ``programs``
    programs, rows of ``row_bytes`` bytes."""

    part: int
    chunk: int
    programs: int
    row_bytes: int


def across_nodes_world(refused: AllReduceError) -> rt.World:
    """The world ``all_reduce`` runs its hierarchical kernel on, after the one-node check (``peer_world``) refused
    the current world with ``refused``: the world, if it spans nodes on the NVSHMEM heap in torchrun's layout.

    Raises ``refused`` when the world does not span nodes (the one-node check's reason stands: a CPU world outside
    the emulation, a peer this rank cannot map); AllReduceError for a world across nodes whose heap is not
    NVSHMEM's (only NVSHMEM's puts reach another node) or whose node ``m`` does not hold ranks ``[m L, (m + 1) L)``.
    """
    world = emulated_world() or gpu_world(OP, AllReduceError)
    if world.num_nodes == 1:
        raise refused
    layout = [list(node) for node in world.nodes.nodes]
    if world.backend != "nvshmem":
        raise AllReduceError(
            f"all_reduce: the world spans {world.num_nodes} nodes (ranks by node: {layout}) but its heap is "
            f"{world.backend!r}; across nodes all_reduce moves the nodes' partial sums with NVSHMEM's puts, which need "
            "the NVSHMEM heap: triton_dist.init(backend='nvshmem') (or TRITON_DIST_BACKEND=nvshmem; docs/multi-node.md)"
        )
    if world.ranks_per_node is None:
        raise AllReduceError(
            f"all_reduce: the nodes hold ranks {layout}; across nodes all_reduce needs every node to hold the same "
            "number L of consecutive ranks (node m: ranks [m L, (m + 1) L)), as torchrun numbers them"
        )
    return world


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def nodes_shape(numel: int, itemsize: int, local: int, is_emulated: bool) -> NodesShape:
    """The parts, chunks, programs and row size of a message of ``numel`` elements of ``itemsize`` bytes over
    ``local`` ranks per node: ``local`` parts of a multiple of ``ALIGN`` elements, one program per ``CHUNK_BYTES``
    of a part (at least 1, at most ``MAX_PROGRAMS``; ``EMULATED_*`` under the emulation), each program a multiple of
    ``ALIGN`` elements of every part; rows a power of two of at least ``MIN_ROW_BYTES`` holding a part in fp32."""
    part = _ceil(_ceil(numel, local), ALIGN) * ALIGN
    most, least = (EMULATED_PROGRAMS, EMULATED_CHUNK_BYTES) if is_emulated else (MAX_PROGRAMS, CHUNK_BYTES)
    wanted = max(1, min(most, _ceil(part * itemsize, least)))
    chunk = _ceil(_ceil(part, wanted), ALIGN) * ALIGN
    programs = _ceil(part, chunk)
    row_bytes = 1 << (max(MIN_ROW_BYTES, part * 4) - 1).bit_length()
    return NodesShape(part, chunk, programs, row_bytes)


def check_size(numel: int, itemsize: int, world: rt.World) -> None:
    """Raise AllReduceError when a message of ``numel`` elements would take the kernel past its 32-bit offsets
    (the message, or the buffers of ``4 L`` rows a part each)."""
    local = world.ranks_per_node or world.world_size
    shape = nodes_shape(numel, itemsize, local, False)
    indexed = max(numel + shape.chunk, 4 * local * shape.row_bytes // itemsize)
    if indexed >= MAX_OFFSET:
        raise AllReduceError(
            f"all_reduce: {numel} elements of {itemsize} bytes across {world.num_nodes} nodes of {local} ranks need "
            f"buffers of {indexed} elements, past the kernel's 32-bit offsets (at most {MAX_OFFSET - 1}): reduce in "
            "parts"
        )


def _workspace(row_bytes: int, world: rt.World) -> NodesWorkspace:
    """The workspace of rows of ``row_bytes`` bytes, created collectively on first use."""
    local = world.ranks_per_node or world.world_size

    def create(world: rt.World) -> NodesWorkspace:
        made = NodesWorkspace(
            data=rt.empty(2 * 2 * local * row_bytes, dtype=torch.uint8),
            partials=rt.empty(2 * world.num_nodes * row_bytes, dtype=torch.uint8),
            flags=rt.zeros(2, 2, MAX_PROGRAMS, local, dtype=torch.int32),
            signals=rt.zeros(2, MAX_PROGRAMS, world.num_nodes, dtype=torch.int64),
            state=rt.zeros(1, dtype=torch.int64),
        )
        rt.barrier()  # every rank's zeroed flags and signals are in place before any rank's kernel sets one
        return made

    return resources.workspace((WORKSPACE, row_bytes), create, what=f"all_reduce across nodes (rows of {row_bytes} B)")


def first_nodes_launch(x: torch.Tensor, out: torch.Tensor, world: rt.World) -> LaunchPlan | EmulatedLaunch:
    """The first launch of a signature on a world across nodes (through Triton, compiling if needed) and the plan it
    gives. ``x`` (not empty) and ``out`` are checked; every rank calls it together (it may allocate the workspace)."""
    is_emulated = emulated(world)
    local = world.ranks_per_node or world.world_size
    shape = nodes_shape(x.numel(), x.element_size(), local, is_emulated)
    ws = _workspace(shape.row_bytes, world)
    named = {
        "x_ptr": x,
        "out_ptr": out,
        "data_ptr": ws.data.view(x.dtype),
        "partials_ptr": ws.partials.view(torch.float32),
        "flags_ptr": ws.flags,
        "signals_ptr": ws.signals,
        "state_ptr": ws.state,
        "n": x.numel(),
        "part": shape.part,
        "chunk": shape.chunk,
        "row": shape.row_bytes // x.element_size(),
        "row_f32": shape.row_bytes // 4,
        "NODES": world.num_nodes,
        "LOCAL": local,
        "MAX_PROGRAMS": MAX_PROGRAMS,
        "BLOCK": EMULATED_BLOCK if is_emulated else BLOCK_BYTES // x.element_size(),
    }
    with on_device(x.device):
        return first_launch(_all_reduce_nodes_kernel, (shape.programs, 1, 1), named, 2, num_warps=4)
