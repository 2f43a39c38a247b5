"""What the wait watchdog costs, on the ping-pong and push all-gather examples, with and without it in one run.

    torchrun --nproc-per-node=2 bench/watchdog_cost.py [--rounds 10000] [--sizes-mib 1 128] [--timeout-s 60] \
        [--results bench/results/watchdog_cost]

NOT RUN YET: written in a session without GPU time (the device budget was spent), so it has never executed on a
GPU and has no committed numbers; the watchdog stays off by default until this runs and shows a cost <= 2%.

Each example kernel is compiled twice from its source: with the watchdog off (the default device library, what every
kernel gets unless ``TRITON_DIST_WAIT_TIMEOUT_S`` is set) and on (the watchdog library; the runtime writes
``--timeout-s``, long enough never to fire). The two are timed in turn, twice (off, on, then on, off, so drift shows
as a difference between passes): each time the median of ``--iters`` (>= 20) runs after warm-up, every run started
by a device barrier, maximum over ranks. The cost is the on variant's best pass over the off variant's, minus one.
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
from triton_dist.compiler import set_wait_timeout  # noqa: E402

VARIANTS = ("off", "on")


def compile_with(
    timeout_s: float, kernel: triton.JITFunction, first_launch: Callable[[triton.JITFunction], None]
) -> triton.JITFunction:
    """A fresh ``JITFunction`` of ``kernel``'s source, compiled and loaded (by its first launch) with the watchdog
    set to ``timeout_s`` (0: off): the library it links and the timeout the runtime writes are fixed then."""
    set_wait_timeout(timeout_s)
    try:
        fresh = triton.jit(kernel.fn, do_not_specialize=kernel.do_not_specialize)
        first_launch(fresh)
        rt.synchronize()
    finally:
        set_wait_timeout(None)
    return fresh


def ping_pong_launchers(rounds: int, timeout_s: float) -> dict[str, Callable[[], None]]:
    world = rt.current_world()
    playing = world.rank < 2
    launchers = {}
    for variant in VARIANTS:
        flag = rt.zeros(1, dtype=torch.int32)
        rt.barrier()
        state = {"next": 1}

        def launch(kernel, flag=flag, state=state) -> None:
            if playing:
                kernel[(1,)](flag, rounds, state["next"], SERVE=world.rank == 0, num_warps=1)
            state["next"] += rounds

        kernel = compile_with(timeout_s if variant == "on" else 0.0, ping_pong, launch)
        rt.barrier()
        launchers[variant] = lambda kernel=kernel, launch=launch: launch(kernel)
    return launchers


def allgather_launchers(size_mib: int, block: int, num_warps: int, timeout_s: float) -> dict[str, Callable[[], None]]:
    world = rt.current_world()
    total = size_mib << 20 >> 2  # fp32 elements of the output
    shard_elems = total // world.world_size
    shard = torch.randn(shard_elems, device=world.device)
    out = rt.empty(shard_elems * world.world_size, dtype=torch.float32)
    sm_count = torch.cuda.get_device_properties(world.device).multi_processor_count
    ctas_per_peer = max(16, min(64, sm_count // world.world_size))
    grid = (ctas_per_peer, world.world_size)
    launchers = {}
    for variant in VARIANTS:
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

        kernel = compile_with(timeout_s if variant == "on" else 0.0, allgather_push, launch)
        rt.barrier()
        launchers[variant] = lambda kernel=kernel, launch=launch: launch(kernel)
    reference = torch.empty_like(out)
    torch.distributed.all_gather_into_tensor(reference, shard)
    for variant, launch in launchers.items():
        out.fill_(float("nan"))
        rt.barrier()
        launch()
        rt.synchronize()
        rt.barrier()
        if not torch.equal(out, reference):
            raise AssertionError(f"all-gather with the watchdog {variant} gathered wrong data")
    return launchers


def time_variants(launchers: dict[str, Callable[[], None]], iters: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for order in (VARIANTS, tuple(reversed(VARIANTS))):
        for variant in order:
            times[variant].append(testing.bench(launchers[variant], warmup=3, rep=iters))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10_000, help="ping-pong round trips per launch")
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[1, 128], help="all-gather output sizes")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per variant and pass (median, >= 20)")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="the watchdog's timeout in the 'on' variant")
    parser.add_argument("--block", type=int, default=4096)
    parser.add_argument("--num-warps", type=int, default=8)
    parser.add_argument("--results", default=None, help="write PATH.md on rank 0")
    args = parser.parse_args()
    world = testing.setup_distributed(heap_size=f"{2 * max(args.sizes_mib) + 64}M")
    tally = testing.Checks()
    rows = []

    def report(name: str, times: dict[str, list[float]], unit: str, scale: float) -> None:
        base = min(times["off"])
        for variant in VARIANTS:
            best = min(times[variant])
            passes = " / ".join(f"{t * scale:.3f}" for t in times[variant])
            cost = best / base - 1.0
            rows.append((name, variant, passes, f"{best * scale:.3f}", f"{cost:+.2%}"))
            line = f"{name} watchdog={variant} {unit} per pass: {passes} best {best * scale:.3f} cost {cost:+.2%}"
            testing.rank0_print(f"RESULT watchdog_cost {line}")

    if world.world_size >= 2:
        times = time_variants(ping_pong_launchers(args.rounds, args.timeout_s), args.iters)
        report(f"ping_pong x{args.rounds}", times, "us/round", 1000.0 / args.rounds)
    for size_mib in args.sizes_mib:
        times = time_variants(allgather_launchers(size_mib, args.block, args.num_warps, args.timeout_s), args.iters)
        report(f"allgather_push {size_mib} MiB", times, "us", 1000.0)
    expected_rows = len(VARIANTS) * (len(args.sizes_mib) + (world.world_size >= 2))
    tally.check("every variant measured", len(rows) == expected_rows)
    if args.results and world.rank == 0:
        notes = [
            f"command: `torchrun --nproc-per-node={world.world_size} bench/watchdog_cost.py "
            f"--results {args.results}` (rounds {args.rounds}, iters {args.iters}, timeout {args.timeout_s} s)",
            f"machine: {world.world_size} x {torch.cuda.get_device_name()}, torch {torch.__version__}",
            "method: per variant and pass, median of the timed runs (CUDA events, device barrier before each, max "
            "over ranks); two passes (off, on, then on, off); cost = best pass / off's best pass - 1",
        ]
        headers = ["kernel", "watchdog", "per pass", "best", "cost vs off"]
        testing.write_markdown(f"{args.results}.md", "Cost of the wait watchdog", headers, rows, notes)
    code = tally.exit_code()
    testing.teardown()
    return code


if __name__ == "__main__":
    testing.main_guard(main)
