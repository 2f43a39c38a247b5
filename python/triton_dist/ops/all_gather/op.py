"""The host side of ``all_gather``: input checks, the world it can run on, one plan per call signature, the custom op.

A call's first time with a signature (size, dtype, device, whether the wait watchdog is on) checks the world's
node layout, checks with every rank that they call alike (a collective, ``ops.common.dispatch.PlanCache``), gets the
workspace of its size class (allocated collectively on first use) and launches through Triton, keeping the
:class:`~triton_dist.ops.common.launch.LaunchPlan`. Later calls check their inputs, look the plan up and relaunch it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from triton_dist import runtime as rt
from triton_dist.compiler.watchdog import watchdog_enabled
from triton_dist.ops.all_gather.config import (
    BLOCK_BYTES,
    EMULATED_BLOCK,
    MAX_PROGRAMS,
    SUPPORTED_DTYPES,
    AllGatherError,
    half_bytes_for,
    programs_for,
)
from triton_dist.ops.all_gather.kernels import _all_gather_kernel
from triton_dist.ops.common import resources
from triton_dist.ops.common.dispatch import PlanCache
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.errors import emulated, emulated_world, gpu_world, load_store_problem, on_device
from triton_dist.ops.common.launch import EmulatedLaunch, LaunchPlan, first_launch

OP = "all_gather"
CHUNK_ALIGN = 16
"""Programs' chunks are multiples of this many elements."""
MAX_ELEMENTS = 1 << 31
"""The gathered output must hold fewer elements (the kernel's offsets are 32-bit)."""


class _Empty:
    """The plan of an empty shard: nothing to launch."""

    def launch(self, device: torch.device, x: torch.Tensor, out: torch.Tensor) -> None:
        """Enqueue nothing."""


@dataclass(frozen=True)
class GatherWorkspace:
    """One size class's buffers (kernels.py): all symmetric, zeroed at creation."""

    data: torch.Tensor
    """uint8 [2 * half]: the gather buffer, one half per parity."""
    flags: torch.Tensor
    """int32 [2, MAX_PROGRAMS, world_size]: the intra-node flags."""
    signals: torch.Tensor
    """int64 [2, MAX_PROGRAMS, nodes]: the inter-node signals."""
    state: torch.Tensor
    """int64 [1]: the call-epoch state (``ops/common/call_epoch.py``); read by this rank only."""


_plans: PlanCache[LaunchPlan | EmulatedLaunch | _Empty] = PlanCache(OP, AllGatherError)
"""The plan of each call signature, per world."""


def output_shape(x: torch.Tensor, world_size: int) -> list[int]:
    """The shape of the gathered tensor: ``x``'s with dimension 0 multiplied by ``world_size``."""
    return [world_size * x.shape[0], *x.shape[1:]]


def check_inputs(x: torch.Tensor, device: torch.device | None = None) -> None:
    """Raise AllGatherError naming the first problem: not a tensor, not on ``device`` (when given: this rank's
    triton_dist device), an unsupported dtype, no dimension 0, not contiguous."""
    if not isinstance(x, torch.Tensor):
        raise AllGatherError(f"all_gather: x must be a torch.Tensor, got {type(x).__name__}")
    if device is not None and x.device != device:
        raise AllGatherError(f"all_gather: x is on {x.device}, but this rank's triton_dist device is {device}")
    if x.dtype not in SUPPORTED_DTYPES:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)
        raise AllGatherError(f"all_gather: x has dtype {str(x.dtype).removeprefix('torch.')}; supported: {allowed}")
    if x.dim() == 0:
        raise AllGatherError("all_gather: x is a 0-d tensor; it gathers along dimension 0, so x needs at least one")
    if not x.is_contiguous():
        raise AllGatherError(f"all_gather: x must be contiguous, got shape {list(x.shape)} with strides {x.stride()}")


def gather_world() -> rt.World:
    """The world ``all_gather`` runs on: the CPU emulation's or a GPU world, whose node layout it can serve.

    Raises RuntimeError before ``triton_dist.init()``; AllGatherError for a CPU world outside the emulation, a
    world across nodes whose heap is not NVSHMEM's (only NVSHMEM's puts reach another node), a world across nodes
    whose node ``m`` does not hold ranks ``[m L, (m + 1) L)`` (torchrun's layout, which the kernel computes with),
    and a one-node world where some peer's heap has no load/store mapping here.
    """
    world = emulated_world() or gpu_world(OP, AllGatherError)
    layout = [list(node) for node in world.nodes.nodes]
    if world.num_nodes == 1:
        problem = load_store_problem(world)
        if problem is not None:
            raise AllGatherError(f"all_gather: {problem}; within a node all_gather moves data by load/store")
        return world
    if world.backend != "nvshmem":
        raise AllGatherError(
            f"all_gather: the world spans {world.num_nodes} nodes (ranks by node: {layout}) but its heap is "
            f"{world.backend!r}; across nodes all_gather moves data with NVSHMEM's puts, which need the NVSHMEM heap: "
            "triton_dist.init(backend='nvshmem') (or TRITON_DIST_BACKEND=nvshmem; docs/multi-node.md)"
        )
    if world.ranks_per_node is None:
        raise AllGatherError(
            f"all_gather: the nodes hold ranks {layout}; all_gather needs every node to hold the same number L of "
            "consecutive ranks (node m: ranks [m L, (m + 1) L)), as torchrun numbers them"
        )
    return world


def _workspace(half_bytes: int, world: rt.World) -> GatherWorkspace:
    """The workspace of buffers of ``2 * half_bytes`` bytes, created collectively on first use."""

    def create(world: rt.World) -> GatherWorkspace:
        made = GatherWorkspace(
            data=rt.empty(2 * half_bytes, dtype=torch.uint8),
            flags=rt.zeros(2, MAX_PROGRAMS, world.world_size, dtype=torch.int32),
            signals=rt.zeros(2, MAX_PROGRAMS, world.num_nodes, dtype=torch.int64),
            state=rt.zeros(1, dtype=torch.int64),
        )
        rt.barrier()  # every rank's zeroed flags and signals are in place before any rank's kernel sets one
        return made

    return resources.workspace((OP, half_bytes), create, what=f"all_gather (buffers of 2 x {half_bytes} bytes)")


def _launch(x: torch.Tensor, out: torch.Tensor) -> None:
    """Enqueue the all-gather of ``x`` (checked) into ``out`` (fresh) on the current stream."""
    signature = (x.numel(), x.dtype, x.device, watchdog_enabled())
    plan = _plans.get(signature)
    if plan is not None:
        plan.launch(x.device, x, out)
        return
    world = gather_world()
    check_inputs(x, world.device)
    if world.world_size * x.numel() >= MAX_ELEMENTS:
        raise AllGatherError(
            f"all_gather: {world.world_size} ranks x {x.numel()} elements = {world.world_size * x.numel()} gathered "
            f"elements; the kernel indexes the output with 32-bit offsets (at most {MAX_ELEMENTS - 1}): gather in parts"
        )
    described = {"numel": x.numel(), "dtype": str(x.dtype), "shape": list(x.shape)}
    _plans.build(signature, described, lambda: _plan(x, out, world))


def _plan(x: torch.Tensor, out: torch.Tensor, world: rt.World) -> LaunchPlan | EmulatedLaunch | _Empty:
    """The first launch of a signature (through Triton, compiling if needed) and the plan it gives."""
    if x.numel() == 0:
        return _Empty()
    shard_bytes = x.numel() * x.element_size()
    is_emulated = emulated(world)
    # Each program's chunk a multiple of 16 elements, so its offsets keep n's divisibility (vector accesses).
    per_program = -(-x.numel() // programs_for(shard_bytes, is_emulated))
    chunk = -(-per_program // CHUNK_ALIGN) * CHUNK_ALIGN
    programs = -(-x.numel() // chunk)
    ws = _workspace(half_bytes_for(shard_bytes, world.world_size), world)
    local = world.ranks_per_node or world.world_size
    named = {
        "x_ptr": x,
        "out_ptr": out,
        "data_ptr": ws.data.view(x.dtype),
        "flags_ptr": ws.flags,
        "signals_ptr": ws.signals,
        "state_ptr": ws.state,
        "n": x.numel(),
        "chunk": chunk,
        "half": ws.data.numel() // 2 // x.element_size(),
        "ELEM_BYTES": x.element_size(),
        "NODES": world.num_nodes,
        "LOCAL": local,
        "MAX_PROGRAMS": MAX_PROGRAMS,
        "BLOCK": EMULATED_BLOCK if is_emulated else BLOCK_BYTES // x.element_size(),
    }
    with on_device(x.device):
        return first_launch(_all_gather_kernel, (programs, 1, 1), named, 2, num_warps=4)


def _gather(x: torch.Tensor) -> torch.Tensor:
    """Check ``x``, allocate the output and enqueue the all-gather."""
    check_inputs(x)
    world_size = rt.current_world().world_size if rt.is_initialized() else 1
    out = torch.empty(output_shape(x, world_size), dtype=x.dtype, device=x.device)
    _launch(x, out)
    return out


@torch.library.custom_op("triton_dist::all_gather", mutates_args=())
def _all_gather_op(x: torch.Tensor) -> torch.Tensor:
    return _gather(x)


@_all_gather_op.register_fake
def _all_gather_fake(x: torch.Tensor) -> torch.Tensor:
    check_inputs(x)
    world_size = rt.current_world().world_size if rt.is_initialized() else 1
    return x.new_empty(output_shape(x, world_size))


def all_gather(x: torch.Tensor) -> torch.Tensor:
    """Every rank's ``x`` concatenated along dimension 0, in rank order, on every rank (``torch.ops.triton_dist``).

    ``x``: a contiguous tensor of at least one dimension (float32 / float16 / bfloat16 / int64 / int32 / int16 /
    int8 / uint8) on this rank's GPU, anywhere in memory; every rank passes the same shape and dtype (checked
    collectively the first time a size is seen). Returns a new tensor of shape ``[world_size * x.shape[0],
    *x.shape[1:]]``.

    Selected by topology: within one node every rank stores its shard into its peers' buffers (load/store); a world
    across nodes (``triton_dist.init(backend="nvshmem")``, torchrun's layout of L ranks per node) also puts each
    shard to the same local rank of every other node with NVSHMEM, which forwards it within its node
    (``ops/all_gather/kernels.py``). Needs ``triton_dist.init()`` on GPUs, or ``init(device="cpu")`` under
    ``TRITON_INTERPRET=1`` (the CPU emulation). Enqueued on the current stream without host synchronization;
    CUDA-graph capture works once the size has been called eagerly.

    Raises :class:`AllGatherError` for bad input, an output of ``2**31`` elements or more, or a world it cannot run
    on (``gather_world``), before any launch; RuntimeError before ``triton_dist.init()``.
    """
    if not plain_eager(x):
        return torch.ops.triton_dist.all_gather(x)
    return _gather(x)
