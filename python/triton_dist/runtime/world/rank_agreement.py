"""Collective checks that every rank sees the same setup, so a mismatch fails loudly on all ranks at once.

A rank that raised alone would leave the others blocked in their next collective; these helpers gather each rank's
view first and raise the same error everywhere.
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist


class AgreedSignatures:
    """The call signatures the ranks of one world have agreed on (``check_ranks_call_alike`` passed), so an op checks
    each signature once per world: a new world (after ``finalize()`` and ``init()``) agrees anew."""

    def __init__(self) -> None:
        self._world: Any = None
        self._signatures: set[Any] = set()

    def known(self, world: Any, signature: Any) -> bool:
        """Whether ``world``'s ranks agreed on ``signature`` already (forgets the signatures of another world)."""
        if world is not self._world:
            self._signatures.clear()
            self._world = world
        return signature in self._signatures

    def add(self, world: Any, signature: Any) -> None:
        """Remember that ``world``'s ranks agreed on ``signature``."""
        if world is not self._world:
            self._signatures.clear()
            self._world = world
        self._signatures.add(signature)


def gather_from_ranks(value: Any, group: dist.ProcessGroup) -> list[Any]:
    """``value`` of every rank of ``group``, by group rank (a collective)."""
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, value, group=group)
    return gathered


def check_ranks_call_alike(
    group: dist.ProcessGroup, rank: int, mine: Any, *, op: str, fields: str, disagreement: str, capture_message: str
) -> None:
    """Raise RuntimeError on every rank unless all ranks of ``group`` call ``op`` with an equal ``mine`` (a collective).

    For an op's first call with a signature (callers remember the signatures that passed, so later calls skip this):
    ``mine`` describes this rank's call as ``fields`` names it; the error names the first rank that differs and
    starts ``"{op}: {disagreement}"``. Under CUDA-graph capture, where no collective may run, it raises
    ``RuntimeError(capture_message)`` instead.
    """
    import torch

    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(capture_message)
    everyone = gather_from_ranks(mine, group)
    problems = [
        f"rank {other} calls {op} with {fields}={theirs}, rank {rank} with {mine}"
        for other, theirs in enumerate(everyone)
        if theirs != mine
    ]
    raise_if_any_rank_failed(group, problems[:1], f"{op}: {disagreement}")


def check_same_setup(group: dist.ProcessGroup, **setup: Any) -> None:
    """Raise on every rank unless all ranks passed equal values for each keyword (e.g. world_size, heap_size)."""
    gathered = gather_from_ranks(setup, group)
    mismatches = []
    for key in setup:
        values = {rank: view[key] for rank, view in enumerate(gathered)}
        if len(set(values.values())) > 1:
            described = ", ".join(f"rank {rank}: {value!r}" for rank, value in values.items())
            mismatches.append(f"{key} differs between ranks ({described})")
    if mismatches:
        raise RuntimeError("triton_dist.init(): ranks disagree: " + "; ".join(mismatches))


def raise_if_any_rank_failed(group: dist.ProcessGroup, problems: list[str], what: str) -> None:
    """Share each rank's list of problems; raise on every rank if any rank has one."""
    gathered = gather_from_ranks(problems, group)
    failed = {rank: found for rank, found in enumerate(gathered) if found}
    if failed:
        described = "; ".join(f"rank {rank}: {', '.join(found)}" for rank, found in failed.items())
        raise RuntimeError(f"{what} failed on {len(failed)} rank(s): {described}")
