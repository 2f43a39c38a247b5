"""The one registry of what ops keep between calls: symmetric workspaces and side streams (the copy-engine
producers' reusable events live with their driver calls, in ``stream_ops``).

Everything is per world: a new world (``finalize()`` then ``init()``) starts empty, and a workspace of the old
world is never handed out again. Creating a workspace is a collective (every rank makes its first call of an op
with the same signature together, which the plan cache checks) and cannot happen during CUDA-graph capture.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from triton_dist import runtime as rt

T = TypeVar("T")

_world: Any = None
_workspaces: dict[tuple[Any, ...], Any] = {}
_streams: dict[tuple[str, int], torch.cuda.Stream] = {}


def _current() -> rt.World:
    global _world
    world = rt.current_world()
    if world is not _world:
        _workspaces.clear()
        _world = world
    return world


def workspace(key: tuple[Any, ...], create: Callable[[rt.World], T], *, what: str) -> T:
    """The workspace stored under ``key`` for the current world, made by ``create(world)`` on first use.

    ``key`` starts with the op's name. ``create`` allocates symmetric memory collectively and ends with a barrier
    (so that no peer writes into memory this rank has not zeroed yet). ``what`` names the workspace in the error
    raised when it would have to be created during CUDA-graph capture.
    """
    _current()
    found = _workspaces.get(key)
    if found is not None:
        return found
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"{what}: its buffers do not exist yet and cannot be allocated during CUDA-graph capture (allocating "
            "symmetric memory is a collective); run the op once eagerly with the same shapes first"
        )
    world = rt.current_world()
    made = create(world)
    _check_symmetric(world, made, what)
    _workspaces[key] = made
    return made


def _heap_offsets(world: rt.World, made: Any) -> list[tuple[str, int]]:
    """(field, heap offset) of every tensor field of ``made`` that lies on the symmetric heap."""
    fields = dataclasses.fields(made) if dataclasses.is_dataclass(made) else []
    found = []
    for field in fields:
        value = getattr(made, field.name)
        if isinstance(value, torch.Tensor):
            offset = world.heap.offset_of(value)
            if offset is not None:
                found.append((field.name, offset))
    return found


def _check_symmetric(world: rt.World, made: Any, what: str) -> None:
    """Raise on every rank unless the workspace's symmetric tensors sit at the same heap offsets on every rank.

    Peers address each other's buffers by offset, so a heap whose allocations diverged (a buffer freed on one rank
    and not yet on another) would make peers write into the wrong memory and wait forever for flags that landed
    elsewhere. Creating a workspace is a collective already; this one gather turns that into an error.
    """
    if world.world_size == 1:
        return
    from triton_dist.runtime.world.rank_agreement import gather_from_ranks

    mine = _heap_offsets(world, made)
    everyone = gather_from_ranks(mine, world.group)
    if any(other != mine for other in everyone):
        described = "; ".join(f"rank {rank}: {offsets}" for rank, offsets in enumerate(everyone))
        raise RuntimeError(
            f"{what}: the symmetric heap diverged between ranks (its buffers sit at different offsets: {described}); "
            "every rank must allocate and free symmetric tensors in the same order"
        )


def workspaces(prefix: str) -> list[Any]:
    """The current world's workspaces whose key starts with ``prefix`` (diagnostics and tests)."""
    _current()
    return [value for key, value in _workspaces.items() if key and key[0] == prefix]


def drop_workspaces(prefix: str) -> None:
    """Forget the workspaces whose key starts with ``prefix``; their memory returns to the heap now.

    Call it on every rank at the same point (the ops' ``clear_workspaces`` do, after a barrier). A garbage
    collection frees what reference cycles still held, so no rank keeps a block another rank has freed: the next
    allocations land at the same offsets everywhere.
    """
    for key in [key for key in _workspaces if key and key[0] == prefix]:
        del _workspaces[key]
    gc.collect()


def side_stream(device: torch.device, name: str = "comm", high_priority: bool = False) -> torch.cuda.Stream:
    """A stream of ``device`` kept for the life of the process, one per ``name`` (producers, copies); with
    ``high_priority`` (fixed by the name's first call) of the device's highest priority, so its pending programs
    are scheduled before those of default-priority streams."""
    key = (name, device.index)
    stream = _streams.get(key)
    if stream is None:
        # torch maps a priority beyond the device's range to its nearest end: -(1 << 10) is the highest.
        stream = _streams[key] = torch.cuda.Stream(device=device, priority=-(1 << 10) if high_priority else 0)
    return stream


def forget_world() -> None:
    """Drop every workspace and the world they belong to (``finalize()`` calls it; side streams stay, they
    belong to the device)."""
    global _world
    _workspaces.clear()
    _world = None


rt.on_finalize(forget_world)
