"""Opt-in tuning on the first call of a shape no table holds: time a few candidates, keep the fastest.

With ``TRITON_DIST_AUTOTUNE=1`` the first call of an untuned problem times the cost model's pick, its neighbours
and the unfused path on the call's own shapes (fresh random operands, device time, maximum over ranks, so every
rank sees the same times and picks the same configuration), within ``TRITON_DIST_AUTOTUNE_BUDGET_S`` seconds
(default 5; the candidates are timed in order of the model's preference and the rest skipped once the budget is
spent), and stores the winner in the user's cache, where every later process finds it as a tuned entry.

It is a collective like every first call of a signature: all ranks run the same candidates in the same order. A
candidate that fails on any rank (a tile the shape cannot take) is skipped on every rank.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from triton_dist.ops.tuning import tables

AUTOTUNE_ENV = "TRITON_DIST_AUTOTUNE"
BUDGET_ENV = "TRITON_DIST_AUTOTUNE_BUDGET_S"
DEFAULT_BUDGET_S = 5.0

ConfigT = TypeVar("ConfigT")


def enabled() -> bool:
    """Whether first calls of untuned shapes tune (``TRITON_DIST_AUTOTUNE=1``)."""
    return os.environ.get(AUTOTUNE_ENV, "0") == "1"


def budget_s() -> float:
    """The time budget of one problem's tuning, from ``TRITON_DIST_AUTOTUNE_BUDGET_S`` (a positive number)."""
    text = os.environ.get(BUDGET_ENV, "")
    if not text:
        return DEFAULT_BUDGET_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{BUDGET_ENV} must be a positive finite number of seconds, got {text!r}")
    return value


def pick(
    world: Any,
    candidates: Sequence[ConfigT],
    time_ms: Callable[[ConfigT], float],
    *,
    budget: float,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[ConfigT, dict[str, float]]:
    """The fastest of ``candidates`` by ``time_ms`` (device ms, the same on every rank), and every time measured.

    ``candidates`` come in order of preference; once ``budget`` seconds are spent no further one is timed (the
    first always is). A candidate whose timing raises on any rank is skipped everywhere: the ranks share whether
    it failed before comparing, so they never diverge.
    """
    from triton_dist.runtime.world.rank_agreement import gather_from_ranks

    started = clock()
    measured: dict[str, float] = {}
    best: ConfigT | None = None
    best_ms = float("inf")
    for index, candidate in enumerate(candidates):
        if index and clock() - started > budget:
            break
        try:
            ms = time_ms(candidate)
            failure = ""
        except Exception as error:  # noqa: BLE001 - shared with the peers, then skipped
            ms, failure = float("inf"), f"{type(error).__name__}: {error}"
        if world.world_size > 1:
            failures = [f for f in gather_from_ranks(failure, world.group) if f]
        else:
            failures = [failure] if failure else []
        name = candidate.short() if hasattr(candidate, "short") else str(candidate)
        if failures:
            warnings.warn(f"triton_dist autotune: {name} skipped ({failures[0]})", stacklevel=2)
            continue
        measured[name] = ms
        if ms < best_ms:
            best, best_ms = candidate, ms
    if best is None:
        raise RuntimeError(f"triton_dist autotune: every candidate failed ({', '.join(map(str, candidates))})")
    return best, measured


def remember(entry_key: str, config: Any, measured: dict[str, float], world: Any) -> None:
    """Store the winner in the user's cache (rank 0 writes; every rank then finds it as a tuned entry)."""
    if world.rank == 0:
        tables.store(tables.cache_path(), entry_key, config, {"autotune_ms": measured})
