"""The one exception family for bad input to an op, and the checks every op makes first."""

from __future__ import annotations

import contextlib
import os
import weakref
from typing import Any

import torch

from triton_dist import runtime as rt


class OpInputError(ValueError):
    """Bad input to a triton_dist op (shapes, dtypes, devices, layout, ranks that disagree).

    Raised on the host before anything is launched. Each op raises its own subclass (``AgGemmError``, ...), so a
    caller can catch one op's errors or all of them.
    """


def gpu_world(op: str, error: type[OpInputError] = OpInputError) -> rt.World:
    """The current world, if it can run GPU ops; else an error that says what to do.

    Raises RuntimeError before ``triton_dist.init()``, and ``error`` for a world on the CPU
    (``init(device="cpu")`` gives a host heap for CPU emulation and tests; the ops need GPUs).
    """
    if not rt.is_initialized():
        raise RuntimeError(f"{op}: call triton_dist.init() first (the op needs the symmetric heap)")
    world = rt.current_world()
    if world.device.type != "cuda":
        raise error(
            f"{op}: triton_dist was initialized with device={str(world.device)!r}; the ops run on GPUs "
            "(call triton_dist.init() on a machine with GPUs, one per rank; the ops that support the CPU emulation run "
            "on this world under TRITON_INTERPRET=1)"
        )
    return world


def emulated(world: rt.World) -> bool:
    """Whether the ops run their kernels in Triton's interpreter over a CPU heap: a world made with
    ``init(device="cpu")`` while ``TRITON_INTERPRET=1`` (the multi-rank CPU emulation of
    ``triton_dist.runtime.emulation``, docs/getting-started.md, "Develop and test without GPUs"). Such a world
    launches every kernel through ``kernel[grid](...)``, one after the other on the host: no streams, events,
    CUDA graphs or driver calls."""
    return world.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def emulated_world() -> rt.World | None:
    """The current world if it is :func:`emulated`, else None: an op that supports the CPU emulation takes its
    world as ``emulated_world() or gpu_world(op, error)``."""
    if rt.is_initialized():
        world = rt.current_world()
        if emulated(world):
            return world
    return None


_LOAD_STORE_CHECKED: weakref.ref[rt.World] | None = None
"""The last world :func:`check_load_store_world` passed (the check runs once per world, not once per call)."""


def load_store_problem(world: rt.World) -> str | None:
    """Why the ranks of ``world`` cannot all reach each other's heaps by load/store (None: they can).

    Two things stop them: the world spans nodes (``init(backend="nvshmem")`` across nodes), or this rank has no
    mapping of some peer's heap (its base in the device context is 0: a ``dl.symm_at`` to it would compute an
    address from 0 and fault).
    """
    layout = [list(node) for node in world.nodes.nodes]
    unmapped = [peer for peer, reachable in enumerate(world.heap.mapping.reachable) if not reachable]
    if world.num_nodes > 1:
        others = [peer for peer in range(world.world_size) if world.nodes.node_of(peer) != world.node]
        return (
            f"the world spans {world.num_nodes} nodes (ranks by node: {layout}); rank {world.rank} is on node "
            f"{world.node} and reaches ranks {others} only through NVSHMEM's puts, not by load/store"
        )
    if unmapped:
        return f"rank {world.rank} has no load/store mapping of the heaps of ranks {unmapped} (ranks by node: {layout})"
    return None


def check_load_store_world(op: str, world: rt.World, error: type[OpInputError] = OpInputError) -> rt.World:
    """Return ``world`` if every rank of it reaches every other rank's heap by load/store; else raise ``error``.

    Every op but the local ones (``matmul``, ``grouped_gemm``) reaches its peers with ``dl.symm_at`` /
    ``peer_tensor`` and has no inter-node path yet, so on a world that spans nodes (or has a peer without a
    mapping) it would fault on the GPU; this check stops it on the host at its first call instead, naming the op,
    the node layout and what to do. Checked once per world.
    """
    global _LOAD_STORE_CHECKED
    if _LOAD_STORE_CHECKED is not None and _LOAD_STORE_CHECKED() is world:
        return world
    problem = load_store_problem(world)
    if problem is not None:
        raise error(
            f"{op}: {problem}; {op} reaches every peer by load/store (dl.symm_at) and has no inter-node path yet. "
            "Run it within each node instead: on every rank, triton_dist.init(group=node_group) with node_group "
            "from torch.distributed.new_subgroups() (the ranks of its node, a cuda_ipc heap), and combine across "
            "nodes with torch.distributed; the hierarchical algorithms that span nodes are not implemented yet "
            "(issue 29, docs/multi-node.md)"
        )
    _LOAD_STORE_CHECKED = weakref.ref(world)
    return world


def peer_world(op: str, error: type[OpInputError] = OpInputError) -> rt.World:
    """The world an op that reaches its peers by load/store runs on: the CPU emulation's (:func:`emulated_world`)
    or a GPU world (:func:`gpu_world`), checked by :func:`check_load_store_world`.

    Raises RuntimeError before ``triton_dist.init()``; ``error`` for a world on the CPU outside the emulation, and
    for a world whose ranks are not all reachable by load/store (it spans nodes).
    """
    return check_load_store_world(op, emulated_world() or gpu_world(op, error), error)


def on_device(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """``torch.cuda.device(device)`` for a GPU; nothing for the CPU emulation's host device."""
    if device.type == "cpu":
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def check_tensor(
    op: str, name: str, value: Any, device: torch.device, dtypes: tuple[torch.dtype, ...], error: type[OpInputError]
) -> None:
    """Raise ``error`` unless ``value`` is a tensor on ``device`` with one of ``dtypes`` (device checked first)."""
    if not isinstance(value, torch.Tensor):
        raise error(f"{op}: {name} must be a torch.Tensor, got {type(value).__name__}")
    if value.device != device:
        raise error(f"{op}: {name} is on {value.device}, but this rank's triton_dist device is {device}")
    if value.dtype not in dtypes:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise error(f"{op}: {name} has dtype {str(value.dtype).removeprefix('torch.')}; supported: {allowed}")
