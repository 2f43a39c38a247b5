"""Ping-pong latency: ranks 0 and 1 bounce a flag back and forth, many round trips inside ONE kernel launch.

    torchrun --nproc-per-node=2 examples/ping_pong.py [--rounds 10000] [--launches 20]
    TRITON_INTERPRET=1 torchrun --nproc-per-node=2 examples/ping_pong.py   # on CPUs: checks, does not time

Round i (counting across launches) writes the value i+1, so no flag is ever reset. Also measures, in the same
run, the same protocol in plain Triton (atomic_xchg release / polling atomic_add acquire on the peer's flag).
Ranks beyond 1 only take part in the barriers.

Both loops compile to the same memory instructions per round (one system-scope release write, the acquire poll;
no context load inside the loop; the device-side checks add one CTA-scope fence before the release):
docs/results/2026-11-23-round-trip-sass.md has their SASS side by side, test/python/test_round_trip_loop.py keeps
it so.
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.testing import Checks, bench, main_guard, rank0_print, setup_distributed, teardown


@triton.jit(do_not_specialize=["first"])
def ping_pong(flag_ptr, rounds, first, SERVE: tl.constexpr):
    """``SERVE``: this rank sends first. The flag lives on both ranks; each writes the other's."""
    peer = 1 - dl.rank()
    for i in range(rounds):
        value = first + i
        if SERVE:
            dl.notify(flag_ptr, peer, signal=value, sig_op="set", comm_scope="intra_node")
            dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=value)
        else:
            dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=value)
            dl.notify(flag_ptr, peer, signal=value, sig_op="set", comm_scope="intra_node")


@triton.jit(do_not_specialize=["first"])
def ping_pong_atomics(my_flag_ptr, peer_flag_ptr, rounds, first, SERVE: tl.constexpr):
    """The baseline: the same protocol with Triton's system-scope atomics on host-provided peer pointers."""
    for i in range(rounds):
        value = first + i
        if SERVE:
            tl.atomic_xchg(peer_flag_ptr, value, sem="release", scope="sys")
            while tl.atomic_add(my_flag_ptr, 0, sem="acquire", scope="sys") != value:
                pass
        else:
            while tl.atomic_add(my_flag_ptr, 0, sem="acquire", scope="sys") != value:
                pass
            tl.atomic_xchg(peer_flag_ptr, value, sem="release", scope="sys")


EMULATED = triton.knobs.runtime.interpret
"""``TRITON_INTERPRET=1``: the kernels run on the CPU emulation (docs/getting-started.md, "Develop and test without
GPUs"), a few short launches that check the protocol; times there mean nothing, so none are taken."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20 if EMULATED else 10_000, help="round trips per launch")
    parser.add_argument("--launches", type=int, default=2 if EMULATED else 20, help="timed launches (median reported)")
    args = parser.parse_args()

    world = setup_distributed(heap_size="1M" if EMULATED else "64M", device="cpu" if EMULATED else "cuda")
    checks = Checks()
    if world.world_size < 2:
        raise SystemExit("ping_pong needs at least 2 ranks")
    playing = world.rank < 2
    flags = rt.zeros(2, dtype=torch.int32)  # [0]: triton_dist kernel, [1]: baseline
    dl_flag, atomic_flag = flags[0:1], flags[1:2]
    peer_atomic_flag = rt.peer_tensor(atomic_flag, 1 - world.rank) if playing else None
    rt.barrier()

    state = {"dl": 1, "atomics": 1}  # the next value to write, per protocol

    def launch_dl() -> None:
        if playing:
            ping_pong[(1,)](dl_flag, args.rounds, state["dl"], SERVE=world.rank == 0, num_warps=1)
        state["dl"] += args.rounds

    def launch_atomics() -> None:
        if playing:
            ping_pong_atomics[(1,)](
                atomic_flag, peer_atomic_flag, args.rounds, state["atomics"], SERVE=world.rank == 0, num_warps=1
            )
        state["atomics"] += args.rounds

    results = {}
    for name, launch in (("triton_dist notify/wait", launch_dl), ("triton atomics (baseline)", launch_atomics)):
        if EMULATED:
            for _ in range(args.launches):
                launch()
            rank0_print(f"{name}: {args.launches} launches x {args.rounds} rounds on the CPU emulation (not timed)")
            continue
        per_round = bench(launch, warmup=2, rep=args.launches) * 1000.0 / args.rounds  # max over ranks: the players
        results[name] = per_round
        rank0_print(
            f"{name}: {per_round:.3f} us per round trip (median of {args.launches} launches x {args.rounds} rounds)"
        )

    rt.barrier()
    if playing:
        final = flags.tolist()
        expected = [state["dl"] - 1, state["atomics"] - 1]
        checks.check("every round trip completed", final == expected, f"flags {final}, expected {expected}")
    if EMULATED:
        code = checks.exit_code()
        teardown()
        return code
    ours, baseline = results["triton_dist notify/wait"], results["triton atomics (baseline)"]
    rank0_print(
        f"RESULT ping_pong ranks={world.world_size} triton_dist_us={ours:.3f} baseline_us={baseline:.3f} "
        f"speedup={baseline / ours:.2f}x (goal <= 4.1 us; reference on 4xH200: baseline 6.9, floor 3.72)"
    )
    checks.check("latency measured", ours > 0 and baseline > 0, f"{ours:.3f} us vs {baseline:.3f} us")
    code = checks.exit_code()
    teardown()
    return code


if __name__ == "__main__":
    main_guard(main)
