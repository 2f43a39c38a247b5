"""Collective checks that every rank sees the same setup, so a mismatch fails loudly on all ranks at once.

A rank that raised alone would leave the others blocked in their next collective; these helpers gather each rank's
view first and raise the same error everywhere.
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist


def gather_from_ranks(value: Any, group: dist.ProcessGroup) -> list[Any]:
    """``value`` of every rank of ``group``, by group rank (a collective)."""
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, value, group=group)
    return gathered


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
