"""What the device-side checks of the primitives cost, on the ping-pong and push all-gather examples, in one run.

    torchrun --nproc-per-node=2 bench/guard_cost.py [--rounds 10000] [--sizes-mib 1 128] \
        [--results bench/results/guard_cost]

Each example kernel is compiled four times from its source, one per check level (``triton_dist.compiler.Checks``):
NONE (no check), CONTEXT (``num_ranks() > 0`` in every primitive), DEFAULT (also the heap check of scalar
pointers; what kernels get unless ``TRITON_DIST_DEBUG=1``) and DEBUG (also every element of a tensor of pointers).
The levels are timed in turn, twice (forward, then backward, so drift shows as a difference between passes): each
time the median of ``--iters`` runs after warm-up, every run started by a device barrier, maximum over ranks.
The cost of a level is its time over NONE's, minus one. (The measuring is ``_variant_cost.py``'s, shared with
``watchdog_cost.py``.)
"""

from __future__ import annotations

import argparse

import triton
from _variant_cost import Launch, Study, add_arguments, fresh_jit, run

from triton_dist import testing
from triton_dist.compiler import Checks, override_checks

LEVELS = (Checks.NONE, Checks.CONTEXT, Checks.DEFAULT, Checks.DEBUG)


def compile_at(level: Checks, kernel: triton.JITFunction, first_launch: Launch) -> triton.JITFunction:
    """A fresh ``JITFunction`` of ``kernel``'s source, compiled (by its first launch) with ``level``'s checks."""
    with override_checks(level):
        fresh = fresh_jit(kernel)
        first_launch(fresh)
    return fresh


STUDY = Study(
    script="guard_cost",
    title="Cost of the device-side checks",
    column="checks",
    noun="level",
    variants=LEVELS,
    label=lambda level: level.name,
    compile=compile_at,
    passes="levels forward, then backward",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, STUDY.noun)
    return parser.parse_args(argv)


def main() -> int:
    return run(STUDY, parse_args())


if __name__ == "__main__":
    testing.main_guard(main)
