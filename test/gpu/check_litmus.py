"""Message-passing litmus test: a producer writes a fresh random tile, then notifies (release); the consumer waits
(acquire), reads the tile and counts elements that are not this round's values (stale reads). Must be zero.

    torchrun --nproc-per-node=N test/gpu/check_litmus.py [--rounds 100000]

Every configuration runs --rounds rounds inside a few launches (the rounds loop is in the kernel):
  sys-push   producer on rank r stores into rank r+1's tile (remote stores), flag set on rank r+1
  sys-pull   producer on rank r stores into its own tile, rank r+1 loads it remotely after the flag
  gpu        producer and consumer are two programs of one kernel on the same GPU, device scope
The consumer reads the same addresses every round, so a wait that does not invalidate caches, or a notify that
does not order the tile stores before the flag, shows up as stale values. A relaxed-wait control run is reported
for information only (it shows whether this machine exposes stale reads at all when ordering is missing).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

import triton_dist.language as dl  # noqa: E402
from triton_dist import runtime as rt  # noqa: E402
from triton_dist.testing import Checks, finish, main_guard, rank0_print, rank_print, setup_distributed

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _epoch_values, also when loaded by path

from _epoch_values import epoch_values  # noqa: E402

TILE = 4096


@triton.jit(do_not_specialize=["first", "seed_here", "seed_left"])
def litmus(
    tile_ptr,
    data_flag_ptr,
    ack_ptr,
    result_ptr,
    first,
    rounds,
    seed_here,
    seed_left,
    PUSH: tl.constexpr,
    LOCAL: tl.constexpr,
    WAIT_SCOPE: tl.constexpr,
    WAIT_SEMANTIC: tl.constexpr,
    NOTIFY_SCOPE: tl.constexpr,
    TILE: tl.constexpr,
):
    """Program 0 produces for the right neighbour, program 1 consumes from the left (both this rank if LOCAL).

    Round r: the producer waits until ack == r (the consumer has read round r-1), writes the tile, sets the
    data flag to r+1; the consumer waits until the data flag == r+1, checks the tile, sets ack to r+1.
    """
    me = dl.rank()
    ranks = dl.num_ranks()
    if LOCAL:
        right = me
        left = me
    else:
        right = (me + 1) % ranks
        left = (me + ranks - 1) % ranks
    offsets = tl.arange(0, TILE)
    if tl.program_id(0) == 0:
        for r in range(first, first + rounds):
            dl.wait(ack_ptr, 1, WAIT_SCOPE, "acquire", waitValue=r)
            values = epoch_values(seed_here, r, offsets)
            if PUSH:
                tl.store(dl.symm_at(tile_ptr + offsets, right), values)
            else:
                tl.store(tile_ptr + offsets, values)
            dl.notify(data_flag_ptr, right, signal=r + 1, sig_op="set", comm_scope=NOTIFY_SCOPE)
    else:
        stale = 0
        for r in range(first, first + rounds):
            token = dl.wait(data_flag_ptr, 1, WAIT_SCOPE, WAIT_SEMANTIC, waitValue=r + 1)
            tile = dl.consume_token(tile_ptr, token)
            if PUSH:
                got = tl.load(tile + offsets)
            else:
                got = tl.load(dl.symm_at(tile + offsets, left))
            stale += tl.sum((got != epoch_values(seed_left, r, offsets)).to(tl.int32), axis=0)
            dl.notify(ack_ptr, left, signal=r + 1, sig_op="set", comm_scope=NOTIFY_SCOPE)
        tl.atomic_add(result_ptr + 0, stale)
        tl.atomic_add(result_ptr + 1, rounds)


CONFIGS = {
    # name: (PUSH, LOCAL, WAIT_SCOPE, NOTIFY_SCOPE)
    "sys-push": (True, False, "sys", "intra_node"),
    "sys-pull": (False, False, "sys", "intra_node"),
    "gpu": (False, True, "gpu", "gpu"),
}


def run_config(world: rt.World, name: str, rounds: int, launches: int, semantic: str = "acquire") -> tuple[int, int]:
    """Run one configuration; returns (stale elements, rounds completed) on this rank."""
    push, local, wait_scope, notify_scope = CONFIGS[name]
    tile = rt.zeros(TILE, dtype=torch.int32)
    data_flag = rt.zeros(1, dtype=torch.int32)
    ack = rt.zeros(1, dtype=torch.int32)
    result = torch.zeros(2, dtype=torch.int32, device="cuda")
    rt.barrier()
    left = world.rank if local else (world.rank - 1) % world.world_size
    per_launch = rounds // launches
    started = time.monotonic()
    for index in range(launches):
        seed = 1_000_003 * index
        litmus[(2,)](
            tile, data_flag, ack, result, index * per_launch, per_launch, seed + world.rank, seed + left,
            PUSH=push, LOCAL=local, WAIT_SCOPE=wait_scope, WAIT_SEMANTIC=semantic, NOTIFY_SCOPE=notify_scope,
            TILE=TILE, num_warps=4,
        )  # fmt: skip
        rt.barrier()
        stale, done = result.tolist()
        rank0_print(
            f"  {name} ({semantic}) launch {index + 1}/{launches}: {done} rounds, {stale} stale elements so far"
        )
    elapsed = time.monotonic() - started
    stale, done = result.tolist()
    per_round = elapsed / max(done, 1) * 1e6
    rank_print(
        f"{name} ({semantic}): {done} rounds in {elapsed:.2f} s ({per_round:.2f} us/round incl. launch overhead), "
        f"{stale} stale elements"
    )
    return stale, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=100_000, help="rounds per configuration")
    parser.add_argument("--launches", type=int, default=4, help="launches the rounds are split over")
    parser.add_argument("--no-control", action="store_true", help="skip the relaxed-wait control run")
    args = parser.parse_args()
    rounds = args.rounds // args.launches * args.launches

    world = setup_distributed(heap_size="64M")
    checks = Checks()
    for name in CONFIGS:
        rank0_print(f"--- litmus {name}: {rounds} rounds of a {TILE}-element int32 tile")

        def body(name: str = name) -> None:
            stale, done = run_config(world, name, rounds, args.launches)
            checks.check(f"litmus {name}: {done}/{rounds} rounds, {stale} stale reads", stale == 0 and done == rounds)

        checks.run(f"litmus {name}", body)
    if not args.no_control:
        rank0_print("--- control: sys-push with a relaxed wait (information only, not a check)")
        stale, done = run_config(world, "sys-push", min(rounds, 20_000), 1, semantic="relaxed")
        rank_print(f"INFO relaxed-wait control: {stale} stale elements in {done} rounds")
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
