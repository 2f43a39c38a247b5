"""What the wait watchdog costs, on the ping-pong and push all-gather examples, with and without it in one run.

    torchrun --nproc-per-node=2 bench/watchdog_cost.py [--rounds 10000] [--sizes-mib 1 128] [--timeout-s 60] \
        [--results bench/results/watchdog_cost]

Measured at 1 rank (docs/results/2026-11-23-1xH200-evening.md), at 2 ranks sharing one H200
(docs/results/2026-11-23-shared-gpu.md: ping-pong +1.8%, all-gather 128 MiB +0.02%) and across two H200s
(docs/results/2026-11-23-2xH200-ops.md: ping-pong -0.11%, all-gather 128 MiB +0.02%; it is on by default since).

Each example kernel is compiled twice from its source: with the watchdog off (the plain device library, what
``TRITON_DIST_WAIT_TIMEOUT_S=0`` selects) and on (the watchdog library, the default; the runtime writes
``--timeout-s``, long enough never to fire). The two are timed in turn, twice (off, on, then on, off, so drift shows
as a difference between passes): each time the median of ``--iters`` (>= 20) runs after warm-up, every run started
by a device barrier, maximum over ranks. The cost is the on variant's best pass over the off variant's, minus one.
(The measuring is ``_variant_cost.py``'s, shared with ``guard_cost.py``.)
"""

from __future__ import annotations

import argparse

import triton
from _variant_cost import Launch, Study, add_arguments, fresh_jit, run

from triton_dist import runtime as rt
from triton_dist import testing
from triton_dist.compiler import set_wait_timeout

VARIANTS = ("off", "on")


def compile_with(timeout_s: float, kernel: triton.JITFunction, first_launch: Launch) -> triton.JITFunction:
    """A fresh ``JITFunction`` of ``kernel``'s source, compiled and loaded (by its first launch) with the watchdog
    set to ``timeout_s`` (0: off): the library it links and the timeout the runtime writes are fixed then."""
    set_wait_timeout(timeout_s)
    try:
        fresh = fresh_jit(kernel)
        first_launch(fresh)
        rt.synchronize()
    finally:
        set_wait_timeout(None)
    return fresh


def study(timeout_s: float) -> Study:
    """The watchdog off (baseline) and on with ``timeout_s``."""
    return Study(
        script="watchdog_cost",
        title="Cost of the wait watchdog",
        column="watchdog",
        noun="variant",
        variants=VARIANTS,
        label=str,
        compile=lambda variant, kernel, launch: compile_with(timeout_s if variant == "on" else 0.0, kernel, launch),
        passes="off, on, then on, off",
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, "variant")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="the watchdog's timeout in the 'on' variant")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    return run(study(args.timeout_s), args, settings=f", timeout {args.timeout_s} s")


if __name__ == "__main__":
    testing.main_guard(main)
