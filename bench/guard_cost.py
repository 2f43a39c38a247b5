"""What the device-side checks of the primitives cost, on the ping-pong and push all-gather examples, in one run.

    torchrun --nproc-per-node=2 bench/guard_cost.py [--rounds 10000] [--sizes-mib 1 128] \
        [--results bench/results/guard_cost]

Each example kernel is compiled four times from its source, one per check level (``triton_dist.compiler.Checks``):
NONE (no check), CONTEXT (``num_ranks() > 0`` in every primitive), DEFAULT (also the heap check of scalar
pointers; what kernels get unless ``TRITON_DIST_DEBUG=1``) and DEBUG (also every element of a tensor of pointers).
The levels are timed in turn, twice (forward, then backward, so drift shows as a difference between passes): each
time the median of ``--iters`` runs after warm-up, every run started by a device barrier, maximum over ranks.
The cost of a level is its time over NONE's, minus one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import triton

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

from allgather_push import allgather_push  # noqa: E402
from ping_pong import ping_pong  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist import testing  # noqa: E402
from triton_dist.compiler import Checks, override_checks  # noqa: E402

LEVELS = (Checks.NONE, Checks.CONTEXT, Checks.DEFAULT, Checks.DEBUG)


def compile_at(level: Checks, kernel: triton.JITFunction, first_launch: Callable[[triton.JITFunction], None]):
    """A fresh ``JITFunction`` of ``kernel``'s source, compiled (by its first launch) with ``level``'s checks."""
    with override_checks(level):
        fresh = triton.jit(kernel.fn, do_not_specialize=kernel.do_not_specialize)
        first_launch(fresh)
    return fresh


def ping_pong_launchers(rounds: int) -> dict[Checks, Callable[[], None]]:
    world = rt.current_world()
    playing = world.rank < 2
    launchers = {}
    for level in LEVELS:
        flag = rt.zeros(1, dtype=torch.int32)
        rt.barrier()
        state = {"next": 1}

        def launch(kernel, flag=flag, state=state) -> None:
            if playing:
                kernel[(1,)](flag, rounds, state["next"], SERVE=world.rank == 0, num_warps=1)
            state["next"] += rounds

        kernel = compile_at(level, ping_pong, launch)
        launchers[level] = lambda kernel=kernel, launch=launch: launch(kernel)
    return launchers


def allgather_launchers(size_mib: int, block: int, num_warps: int) -> dict[Checks, Callable[[], None]]:
    world = rt.current_world()
    total = size_mib << 20 >> 2  # fp32 elements of the output
    shard_elems = total // world.world_size
    shard = torch.randn(shard_elems, device=world.device)
    out = rt.empty(shard_elems * world.world_size, dtype=torch.float32)
    sm_count = torch.cuda.get_device_properties(world.device).multi_processor_count
    ctas_per_peer = max(16, min(64, sm_count // world.world_size))
    grid = (ctas_per_peer, world.world_size)
    launchers = {}
    for level in LEVELS:
        flags = rt.zeros(world.world_size * ctas_per_peer, dtype=torch.int32)
        rt.barrier()
        state = {"epoch": 0}

        def launch(kernel, flags=flags, state=state) -> None:
            state["epoch"] += 1
            kernel[grid](
                shard,
                out,
                flags,
                shard_elems,
                state["epoch"],
                CTAS_PER_PEER=ctas_per_peer,
                BLOCK=block,
                num_warps=num_warps,
            )

        kernel = compile_at(level, allgather_push, launch)
        launchers[level] = lambda kernel=kernel, launch=launch: launch(kernel)
    rt.barrier()
    reference = torch.empty_like(out)
    torch.distributed.all_gather_into_tensor(reference, shard)
    for level, launch in launchers.items():
        out.fill_(float("nan"))
        rt.barrier()
        launch()
        torch.cuda.synchronize()
        rt.barrier()
        if not torch.equal(out, reference):
            raise AssertionError(f"all-gather at checks={level.name} gathered wrong data")
    return launchers


def time_levels(launchers: dict[Checks, Callable[[], None]], iters: int) -> dict[Checks, list[float]]:
    times: dict[Checks, list[float]] = {level: [] for level in LEVELS}
    for order in (LEVELS, tuple(reversed(LEVELS))):
        for level in order:
            times[level].append(testing.bench(launchers[level], warmup=3, rep=iters))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10_000, help="ping-pong round trips per launch")
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[1, 128], help="all-gather output sizes")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per level and pass (median)")
    parser.add_argument("--block", type=int, default=4096)
    parser.add_argument("--num-warps", type=int, default=8)
    parser.add_argument("--results", default=None, help="write PATH.md on rank 0")
    args = parser.parse_args()
    world = testing.setup_distributed(heap_size=f"{2 * max(args.sizes_mib) + 64}M")
    tally = testing.Checks()
    rows = []

    def report(name: str, times: dict[Checks, list[float]], unit: str, scale: float) -> None:
        base = min(times[Checks.NONE])
        for level in LEVELS:
            best = min(times[level])
            passes = " / ".join(f"{t * scale:.3f}" for t in times[level])
            cost = best / base - 1.0
            rows.append((name, level.name, passes, f"{best * scale:.3f}", f"{cost:+.2%}"))
            line = f"{name} checks={level.name} {unit} per pass: {passes} best {best * scale:.3f} cost {cost:+.2%}"
            testing.rank0_print(f"RESULT guard_cost {line}")

    if world.world_size >= 2:
        times = time_levels(ping_pong_launchers(args.rounds), args.iters)
        report(f"ping_pong x{args.rounds}", times, "us/round", 1000.0 / args.rounds)
    for size_mib in args.sizes_mib:
        times = time_levels(allgather_launchers(size_mib, args.block, args.num_warps), args.iters)
        report(f"allgather_push {size_mib} MiB", times, "us", 1000.0)
    tally.check("every level measured", len(rows) == len(LEVELS) * (len(args.sizes_mib) + (world.world_size >= 2)))
    if args.results and world.rank == 0:
        notes = [
            f"command: `torchrun --nproc-per-node={world.world_size} bench/guard_cost.py "
            f"--results {args.results}` (rounds {args.rounds}, iters {args.iters})",
            f"machine: {world.world_size} x {torch.cuda.get_device_name()}, torch {torch.__version__}",
            "method: per level and pass, median of the timed runs (CUDA events, device barrier before each, max "
            "over ranks); two passes (levels forward, then backward); cost = best pass / NONE's best pass - 1",
        ]
        headers = ["kernel", "checks", "per pass", "best", "cost vs NONE"]
        testing.write_markdown(f"{args.results}.md", "Cost of the device-side checks", headers, rows, notes)
    code = tally.exit_code()
    testing.teardown()
    return code


if __name__ == "__main__":
    testing.main_guard(main)
