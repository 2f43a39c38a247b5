"""The litmus shapes behind docs/memory-model.md, on 2+ GPUs: each must show 0 stale reads, and its control (the
same shape with a relaxed wait) shows that the check can see a violation.

    torchrun --nproc-per-node=2 test/gpu/check_memory_model.py [--rounds 20000] [--control-rounds 5000]

Shapes (rank r produces for r+1 and consumes from r-1; every value depends on the seed, the epoch and the element,
so data of an earlier epoch never passes for this one; flags are never reset: epochs across rounds and launches):

  mp-push     message passing, push: the producer stores its tile into the consumer's memory (symm_at), then
              notify(set, epoch) on the consumer's flag (system-scope release); the consumer waits flag == epoch
              (system-scope acquire), consume_token, reads its own memory
  mp-pull     message passing, pull: the producer stores into its own memory and notifies; the consumer waits on
              its own flag, then reads the producer's memory remotely (symm_at)
  mp-gpu      message passing between two programs of one kernel on one GPU, device scope (gpu / gpu)
  counter     counter flags: P producer programs per rank each push a slice, then notify(add, 1); the consumer
              waits counter >= P * epoch (cmp="ge", acquire) and reads every slice; the counter never resets
Each round the consumer acknowledges (notify set / wait ge) so the producer does not overwrite a tile being read.
After every shape the final flag values are checked (epochs counted exactly, no add lost).

A control runs each shape with ``semantic="relaxed"`` on the consumer's wait (nothing else changes); the stale
reads it sees are reported (RESULT lines) and, for the shapes in CONTROLS_MUST_SEE_STALE (where a run on 2 x H200
showed it), must be > 0, proving that the check can fail on this machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist import testing

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _epoch_values, also when loaded by path

from _epoch_values import epoch_values  # noqa: E402

TILE = 4096
PRODUCERS = 4  # producer programs per rank in the counter shape
SLICE = TILE // PRODUCERS

# Shapes whose relaxed control must see stale reads (else the check could not fail here): the shape of
# check_litmus.py's sys-push, whose relaxed control saw 81,915,904 stale elements in 20,000 rounds on 2 x H200. The
# other controls are reported (INFO) until a run on that machine shows what they see.
CONTROLS_MUST_SEE_STALE = ("mp-push",)


@triton.jit(do_not_specialize=["first", "rounds", "seed_here", "seed_left"])
def message_passing(
    tile_ptr,
    flag_ptr,
    ack_ptr,
    result_ptr,
    first,
    rounds,
    seed_here,
    seed_left,
    PUSH: tl.constexpr,
    LOCAL: tl.constexpr,
    SCOPE: tl.constexpr,
    NOTIFY_SCOPE: tl.constexpr,
    WAIT_SEMANTIC: tl.constexpr,
    TILE: tl.constexpr,
):
    """Program 0 produces for the right rank, program 1 consumes from the left one (this rank for both if LOCAL).

    Epoch e = r + 1 of round r: the producer waits ack >= r, writes the tile, sets the flag to e; the consumer
    waits flag == e, reads and checks the tile, sets the producer's ack to e.
    """
    me = dl.rank()
    ranks = dl.num_ranks()
    right = me if LOCAL else (me + 1) % ranks
    left = me if LOCAL else (me + ranks - 1) % ranks
    offsets = tl.arange(0, TILE)
    if tl.program_id(0) == 0:
        for r in range(first, first + rounds):
            dl.wait(ack_ptr, 1, SCOPE, "acquire", waitValue=r, cmp="ge")
            values = epoch_values(seed_here, r, offsets)
            if PUSH:
                tl.store(dl.symm_at(tile_ptr + offsets, right), values)
            else:
                tl.store(tile_ptr + offsets, values)
            dl.notify(flag_ptr, right, signal=r + 1, sig_op="set", comm_scope=NOTIFY_SCOPE)
    else:
        stale = 0
        for r in range(first, first + rounds):
            token = dl.wait(flag_ptr, 1, SCOPE, WAIT_SEMANTIC, waitValue=r + 1)
            tile = dl.consume_token(tile_ptr, token)
            if PUSH:
                got = tl.load(tile + offsets)
            else:
                got = tl.load(dl.symm_at(tile + offsets, left))
            stale += tl.sum((got != epoch_values(seed_left, r, offsets)).to(tl.int32), axis=0)
            dl.notify(ack_ptr, left, signal=r + 1, sig_op="set", comm_scope=NOTIFY_SCOPE)
        tl.atomic_add(result_ptr + 0, stale)
        tl.atomic_add(result_ptr + 1, rounds)


@triton.jit(do_not_specialize=["first", "rounds", "seed_here", "seed_left"])
def counter_flags(
    buf_ptr,
    counter_ptr,
    ack_ptr,
    result_ptr,
    first,
    rounds,
    seed_here,
    seed_left,
    WAIT_SEMANTIC: tl.constexpr,
    PRODUCERS: tl.constexpr,
    SLICE: tl.constexpr,
):
    """Programs 0..P-1 push slice p to the right rank and add 1 to its counter; program P consumes from the left.

    Round r: each producer waits ack >= r, stores its slice, notify(add, 1); the consumer waits counter >=
    P * (r + 1) (cmp "ge": counts accumulate, the counter is never reset), checks all P slices, sets ack to r + 1.
    """
    me = dl.rank()
    ranks = dl.num_ranks()
    right = (me + 1) % ranks
    left = (me + ranks - 1) % ranks
    pid = tl.program_id(0)
    offsets = tl.arange(0, SLICE)
    if pid < PRODUCERS:
        for r in range(first, first + rounds):
            dl.wait(ack_ptr, 1, "sys", "acquire", waitValue=r, cmp="ge")
            values = epoch_values(seed_here, r, pid * SLICE + offsets)
            tl.store(dl.symm_at(buf_ptr + pid * SLICE + offsets, right), values)
            dl.notify(counter_ptr, right, signal=1, sig_op="add", comm_scope="intra_node")
    else:
        stale = 0
        for r in range(first, first + rounds):
            token = dl.wait(counter_ptr, 1, "sys", WAIT_SEMANTIC, waitValue=PRODUCERS * (r + 1), cmp="ge")
            buf = dl.consume_token(buf_ptr, token)
            for p in tl.static_range(PRODUCERS):
                got = tl.load(buf + p * SLICE + offsets)
                stale += tl.sum((got != epoch_values(seed_left, r, p * SLICE + offsets)).to(tl.int32), axis=0)
            dl.notify(ack_ptr, left, signal=r + 1, sig_op="set", comm_scope="intra_node")
        tl.atomic_add(result_ptr + 0, stale)
        tl.atomic_add(result_ptr + 1, rounds)


# name: (PUSH, LOCAL, SCOPE, NOTIFY_SCOPE)
MESSAGE_PASSING = {
    "mp-push": (True, False, "sys", "intra_node"),
    "mp-pull": (False, False, "sys", "intra_node"),
    "mp-gpu": (False, True, "gpu", "gpu"),
}
SHAPES = (*MESSAGE_PASSING, "counter")


def run_shape(world: rt.World, name: str, rounds: int, launches: int, semantic: str) -> dict:
    """Runs one shape; returns this rank's stale count, rounds done and the final flag values."""
    tile = rt.zeros(TILE, dtype=torch.int32)
    flag = rt.zeros(1, dtype=torch.int32)
    ack = rt.zeros(1, dtype=torch.int32)
    result = torch.zeros(2, dtype=torch.int32, device="cuda")
    local = name == "mp-gpu"
    left = world.rank if local else (world.rank - 1) % world.world_size
    per_launch = rounds // launches
    rt.barrier()
    started = time.monotonic()
    for index in range(launches):
        seed = 1_000_003 * (index + 1) + 7919 * SHAPES.index(name)
        first = index * per_launch
        if name == "counter":
            counter_flags[(PRODUCERS + 1,)](
                tile, flag, ack, result, first, per_launch, seed + world.rank, seed + left,
                WAIT_SEMANTIC=semantic, PRODUCERS=PRODUCERS, SLICE=SLICE, num_warps=4,
            )  # fmt: skip
        else:
            push, local, scope, notify_scope = MESSAGE_PASSING[name]
            message_passing[(2,)](
                tile, flag, ack, result, first, per_launch, seed + world.rank, seed + left,
                PUSH=push, LOCAL=local, SCOPE=scope, NOTIFY_SCOPE=notify_scope, WAIT_SEMANTIC=semantic,
                TILE=TILE, num_warps=4,
            )  # fmt: skip
        testing.sync(f"{name} ({semantic}) launch {index + 1}")
        rt.barrier()
    elapsed = time.monotonic() - started
    stale, done = result.tolist()
    return {
        "stale": stale,
        "done": done,
        "flag": int(flag.item()),
        "ack": int(ack.item()),
        "expected_rounds": per_launch * launches,
        "seconds": elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20_000, help="rounds per shape (epochs)")
    parser.add_argument("--launches", type=int, default=4, help="kernel launches the rounds are split over")
    parser.add_argument("--control-rounds", type=int, default=5_000, help="rounds of each relaxed control")
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=SHAPES)
    args = parser.parse_args()

    world = testing.setup_distributed(heap_size="64M")
    checks = testing.Checks()
    for name in args.shapes:
        testing.rank0_print(f"--- {name}: {args.rounds} rounds over {args.launches} launches")

        def body(name: str = name) -> None:
            got = run_shape(world, name, args.rounds, args.launches, "acquire")
            n = got["expected_rounds"]
            per_round = PRODUCERS if name == "counter" else 1
            checks.check(
                f"{name}: {got['done']}/{n} rounds, {got['stale']} stale reads",
                got["stale"] == 0 and got["done"] == n,
                f"{got['seconds']:.2f} s, {got['seconds'] / max(n, 1) * 1e6:.2f} us/round",
            )
            # Epochs: nothing reset the flags, no add was lost.
            checks.check(
                f"{name}: final flag {got['flag']} == {per_round} x {n}, ack {got['ack']} == {n}",
                got["flag"] == per_round * n and got["ack"] == n,
            )
            testing.rank_print(f"RESULT {name}: {n} rounds, {got['stale']} stale reads")

        checks.run(name, body)

    for name in args.shapes:
        testing.rank0_print(f"--- control: {name} with a relaxed wait, {args.control_rounds} rounds")

        def control(name: str = name) -> None:
            got = run_shape(world, name, args.control_rounds, 1, "relaxed")
            stale = testing.max_over_ranks(float(got["stale"]))
            testing.rank_print(f"RESULT control {name} (relaxed wait): {got['stale']} stale reads here")
            if name in CONTROLS_MUST_SEE_STALE:
                checks.check(f"control {name}: a relaxed wait shows stale reads (the check can fail)", stale > 0)
            else:
                testing.rank_print(f"INFO control {name}: max {int(stale)} stale reads over ranks")

        checks.run(f"control {name}", control)
    code = checks.exit_code()
    testing.teardown()
    return code


if __name__ == "__main__":
    testing.main_guard(main)
