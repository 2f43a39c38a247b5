"""``triton_dist.ops.all_reduce`` when a peer runs a call ahead: under the CPU emulation (``TRITON_INTERPRET=1``,
``init(device="cpu")``, one process per rank on gloo, as ``test_emulation_ops.py``, which covers the op's results
otherwise), at 2 ranks.

Rank 1 reads call A late (1 s after each of its flag waits) while rank 0, done with A, runs call B on the same slot
with another number of elements per flag round; both calls' results must match torch on both ranks. A slot's
layout (the one-shot's parity halves, the push's rows per sender and parity, the two-shot's inbox and gather
buffer) must be fixed by the workspace: where it followed the call's elements per round, B's writes landed in the
part of the slot that rank 1 was still reading for A (``ops/all_reduce/kernels.py``, "the layout is fixed").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
from emulated_ranks import run_ranks

HEAP = "160M"
"""Each rank's CPU heap: the three workspaces (256 x 64 KiB, 256 x 64 KiB, 128 x 256 KiB at 2 ranks) fit."""

LATE_S = 1.0
"""How long rank 1 sleeps after each of call A's flag waits (rank 0 runs call B meanwhile)."""


def _close(got: torch.Tensor, want: torch.Tensor) -> list[str]:
    """What differs between fp32 ``got`` and ``want``: NaNs left from the poison, values beyond 1e-4."""
    if torch.isnan(got).any():
        return [f"{int(torch.isnan(got).sum())} NaN elements (left unwritten?)"]
    if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
        bad = ~torch.isclose(got, want, atol=1e-4, rtol=1e-4)
        first = int(bad.nonzero()[0, 0])
        return [f"{int(bad.sum())} elements wrong, the first at {first}: {got[first].item()} != {want[first].item()}"]
    return []


def _cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    from triton_dist.ops.all_reduce import config as cfg
    from triton_dist.ops.all_reduce.op import _run
    from triton_dist.ops.common.slot_workspace import slot_workspace
    from triton_dist.runtime.emulation import device_library

    def peer_ahead_by_a_call(algo: str, first: int, second: int) -> list[str]:
        """Call A (``first`` fp32 elements, one program: one slot, one flag round) read late on rank 1 while rank 0
        runs call B (``second`` elements: another number per round) on the same slot. One-shot and push: A at an
        even epoch (parity 0) and B at fewer elements per round (so B's parity-1 half began inside A's half where
        the halves followed the round); two-shot: B at more elements per round than A (B's inbox reached over A's
        gather buffer)."""
        config = cfg.AllReduceConfig(algo, 1, 1)
        calls = [[torch.randn(n, generator=gen) for _ in range(size)] for n in (first, second)]

        def run(xs: list[torch.Tensor]) -> torch.Tensor:
            out = torch.full_like(xs[rank], float("nan"))
            _run(xs[rank], out, config=config)
            return out

        for xs in calls:  # the plans (a signature's first call is collective)
            run(xs)
        shape = cfg.launch_shape(first, 4, size, config)
        region = shape.region_elems * 4
        epochs = slot_workspace(f"all_reduce.{algo}", cfg.SLOTS[algo], 2 * size, region).epochs
        if algo != "two_shot" and int(epochs[0]) % 2 == 0:  # A at the next epoch: make that even (parity 0)
            run(calls[1])
        wait = device_library._wait

        def late_wait(*args: Any) -> None:
            wait(*args)
            time.sleep(LATE_S)

        problems = []
        for call, xs in enumerate(calls):
            if rank == 1 and call == 0:
                device_library._wait = late_wait
            try:
                out = run(xs)
            finally:
                device_library._wait = wait
            problems += [f"call {'AB'[call]}: {p}" for p in _close(out, sum(xs))]
        return problems

    # fp32 at one warp: blocks of 256 elements. One-shot and push: 1024 elements per round, then 256; two-shot: a
    # chunk (and round) of 256 per rank, then 1024.
    return {
        "peer_ahead/one_shot": lambda: peer_ahead_by_a_call("one_shot", 1024, 256),
        "peer_ahead/one_shot_push": lambda: peer_ahead_by_a_call("one_shot_push", 1024, 256),
        "peer_ahead/two_shot": lambda: peer_ahead_by_a_call("two_shot", 512, 2048),
    }


def _worker() -> dict[str, list[str]]:
    """This rank's problems per case (empty: right), on the world ``run_ranks`` set up."""
    import triton_dist
    import triton_dist.ops  # noqa: F401 (registers the ops)

    world = triton_dist.current_world()
    gen = torch.Generator().manual_seed(2468)  # every rank draws every rank's inputs alike
    record: dict[str, list[str]] = {}
    for name, case in _cases(world.rank, world.world_size, gen).items():
        try:
            record[name] = case()
        except Exception as error:  # noqa: BLE001 (recorded for the test)
            record[name] = [f"{type(error).__name__}: {error}"]
    return record


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return run_ranks(_worker, 2, heap_size=HEAP).results


@pytest.mark.parametrize("algo", ["one_shot", "one_shot_push", "two_shot"])
def test_a_peer_ahead_by_a_call_overwrites_nothing(records: list[dict[str, list[str]]], algo: str) -> None:
    """Both calls right on both ranks: rank 0's call B wrote nothing rank 1 still read for call A."""
    for rank, record in enumerate(records):
        assert f"peer_ahead/{algo}" in record, f"rank {rank} ran no {algo} case"
        assert not record[f"peer_ahead/{algo}"], f"rank {rank}: {record[f'peer_ahead/{algo}']}"
