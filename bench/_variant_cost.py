"""What ``guard_cost.py`` and ``watchdog_cost.py`` share: the cost of a compile-time variant of two example kernels.

A variant is a way to compile the same kernel source (a check level; the wait watchdog off or on). A study compiles
the ping-pong (``examples/ping_pong.py``) and the push all-gather (``examples/allgather_push.py``) once per variant,
each as a fresh ``JITFunction`` so that no variant reuses another's binary, checks each all-gather variant against
``torch.distributed.all_gather_into_tensor``, and times the variants in turn, twice: in order, then in reverse, so
drift shows as a difference between passes. Each time is ``triton_dist.testing.bench``: the median of ``--iters``
runs after warm-up, every run started by a device barrier, maximum over ranks. The cost of a variant is its best pass
over the first (baseline) variant's best pass, minus one.

``run(study, args)`` is a benchmark's whole main after argument parsing (``add_arguments``): RESULT lines on rank 0,
a markdown table at ``--results PATH`` (``PATH.md``), exit code 0 iff every variant was measured.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from allgather_push import allgather_push  # noqa: E402
from ping_pong import ping_pong  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist import testing  # noqa: E402

Launch = Callable[[triton.JITFunction], None]
"""Launches a given compiled variant of a kernel once (the same arguments every variant gets)."""


@dataclass(frozen=True)
class Study:
    """One cost benchmark: its variants and how to compile a kernel as each, and how its output names them."""

    script: str
    """The script's name under bench/ without ``.py``: the RESULT lines' tag and the results' command line."""
    title: str
    """The title of the results table."""
    column: str
    """What a variant is called in RESULT lines (``<column>=<label>``) and in the table's second column."""
    noun: str
    """One variant in prose ("level", "variant"): help texts, the check's name, the method note."""
    variants: Sequence[Any]
    """Every variant, in timing order; the first is the baseline the costs are relative to."""
    label: Callable[[Any], str]
    """A variant's name in the output."""
    compile: Callable[[Any, triton.JITFunction, Launch], triton.JITFunction]
    """``compile(variant, kernel, first_launch)``: a fresh ``JITFunction`` of ``kernel``'s source, compiled as
    ``variant`` by calling ``first_launch`` on it (see ``fresh_jit``)."""
    passes: str
    """The two passes' orders in words, for the method note."""

    @property
    def baseline(self) -> str:
        return self.label(self.variants[0])


def fresh_jit(kernel: triton.JITFunction) -> triton.JITFunction:
    """A new ``JITFunction`` of ``kernel``'s source: Triton keeps one binary per ``JITFunction`` and specialization,
    so a variant compiled on it cannot be served another variant's binary."""
    return triton.jit(kernel.fn, do_not_specialize=kernel.do_not_specialize)


def add_arguments(parser: argparse.ArgumentParser, noun: str) -> None:
    """The arguments every study takes (``noun``: one variant in the help texts)."""
    parser.add_argument("--rounds", type=int, default=10_000, help="ping-pong round trips per launch")
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[1, 128], help="all-gather output sizes")
    parser.add_argument("--iters", type=int, default=20, help=f"timed runs per {noun} and pass (median, >= 20)")
    parser.add_argument("--block", type=int, default=4096)
    parser.add_argument("--num-warps", type=int, default=8)
    parser.add_argument("--results", default=None, help="write PATH.md on rank 0")


def _compiled(study: Study, kernel: triton.JITFunction, launch: Launch, variant: Any) -> Callable[[], None]:
    """``launch`` bound to ``kernel`` compiled as ``variant``; every rank waits until all have compiled (and run) it."""
    compiled = study.compile(variant, kernel, launch)
    rt.barrier()
    return lambda: launch(compiled)


def ping_pong_launchers(study: Study, rounds: int) -> dict[Any, Callable[[], None]]:
    """Per variant, one launch of ``rounds`` ping-pong round trips between ranks 0 and 1 (other ranks idle), each
    variant with a flag of its own; the round numbers continue across launches, as the kernel expects."""
    world = rt.current_world()
    playing = world.rank < 2
    launchers = {}
    for variant in study.variants:
        flag = rt.zeros(1, dtype=torch.int32)
        rt.barrier()
        state = {"next": 1}

        def launch(kernel, flag=flag, state=state) -> None:
            if playing:
                kernel[(1,)](flag, rounds, state["next"], SERVE=world.rank == 0, num_warps=1)
            state["next"] += rounds

        launchers[variant] = _compiled(study, ping_pong, launch, variant)
    return launchers


def allgather_launchers(study: Study, size_mib: int, block: int, num_warps: int) -> dict[Any, Callable[[], None]]:
    """Per variant, one push all-gather into a ``size_mib`` MiB fp32 output (flags of its own, epochs counting up);
    raises ``AssertionError`` unless each variant gathers what ``all_gather_into_tensor`` does."""
    world = rt.current_world()
    total = size_mib << 20 >> 2  # fp32 elements of the output
    shard_elems = total // world.world_size
    shard = torch.randn(shard_elems, device=world.device)
    out = rt.empty(shard_elems * world.world_size, dtype=torch.float32)
    sm_count = torch.cuda.get_device_properties(world.device).multi_processor_count
    ctas_per_peer = max(16, min(64, sm_count // world.world_size))
    grid = (ctas_per_peer, world.world_size)
    launchers = {}
    for variant in study.variants:
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

        launchers[variant] = _compiled(study, allgather_push, launch, variant)
    reference = torch.empty_like(out)
    torch.distributed.all_gather_into_tensor(reference, shard)
    for variant, launch in launchers.items():
        out.fill_(float("nan"))
        rt.barrier()
        launch()
        rt.synchronize()
        rt.barrier()
        if not torch.equal(out, reference):
            raise AssertionError(f"all-gather with {study.column}={study.label(variant)} gathered wrong data")
    return launchers


def time_both_orders(
    launchers: Mapping[Any, Callable[[], None]],
    iters: int,
    bench: Callable[..., float] = testing.bench,
) -> dict[Any, list[float]]:
    """Two times per variant (``bench(fn, warmup=3, rep=iters)``, ms): the variants in order, then in reverse."""
    order = tuple(launchers)
    times: dict[Any, list[float]] = {variant: [] for variant in order}
    for passing in (order, tuple(reversed(order))):
        for variant in passing:
            times[variant].append(bench(launchers[variant], warmup=3, rep=iters))
    return times


def cost_rows(
    study: Study, name: str, times: Mapping[Any, Sequence[float]], unit: str, scale: float
) -> list[tuple[tuple[str, ...], str]]:
    """Per variant, its table row ``(kernel, variant, per pass, best, cost)`` and its RESULT line; times are ms,
    shown times ``scale`` in ``unit``; cost = best / the baseline's best - 1."""
    base = min(times[study.variants[0]])
    rows = []
    for variant in study.variants:
        best = min(times[variant])
        passes = " / ".join(f"{t * scale:.3f}" for t in times[variant])
        cost = best / base - 1.0
        label = study.label(variant)
        row = (name, label, passes, f"{best * scale:.3f}", f"{cost:+.2%}")
        line = f"{name} {study.column}={label} {unit} per pass: {passes} best {best * scale:.3f} cost {cost:+.2%}"
        rows.append((row, f"RESULT {study.script} {line}"))
    return rows


def run(study: Study, args: argparse.Namespace, settings: str = "") -> int:
    """Measure ``study`` with ``args`` (from ``add_arguments``) under torchrun; ``settings`` (", timeout 60 s") is
    added to the results' command note. Returns the exit code (0 iff every variant of every kernel was measured)."""
    world = testing.setup_distributed(heap_size=f"{2 * max(args.sizes_mib, default=0) + 64}M")
    tally = testing.Checks()
    rows = []

    def report(name: str, times: Mapping[Any, Sequence[float]], unit: str, scale: float) -> None:
        for row, line in cost_rows(study, name, times, unit, scale):
            rows.append(row)
            testing.rank0_print(line)

    if world.world_size >= 2:
        times = time_both_orders(ping_pong_launchers(study, args.rounds), args.iters)
        report(f"ping_pong x{args.rounds}", times, "us/round", 1000.0 / args.rounds)
    for size_mib in args.sizes_mib:
        times = time_both_orders(allgather_launchers(study, size_mib, args.block, args.num_warps), args.iters)
        report(f"allgather_push {size_mib} MiB", times, "us", 1000.0)
    expected_rows = len(study.variants) * (len(args.sizes_mib) + (world.world_size >= 2))
    tally.check(f"every {study.noun} measured", len(rows) == expected_rows > 0)
    if args.results and world.rank == 0:
        notes = [
            f"command: `torchrun --nproc-per-node={world.world_size} bench/{study.script}.py "
            f"--results {args.results}` (rounds {args.rounds}, iters {args.iters}{settings})",
            f"machine: {world.world_size} x {torch.cuda.get_device_name()}, torch {torch.__version__}",
            f"method: per {study.noun} and pass, median of the timed runs (CUDA events, device barrier before each, "
            f"max over ranks); two passes ({study.passes}); cost = best pass / {study.baseline}'s best pass - 1",
        ]
        headers = ["kernel", study.column, "per pass", "best", f"cost vs {study.baseline}"]
        testing.write_markdown(f"{args.results}.md", study.title, headers, rows, notes)
    code = tally.exit_code()
    testing.teardown()
    return code
