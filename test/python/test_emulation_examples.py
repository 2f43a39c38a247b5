"""The examples on CPUs: ``TRITON_INTERPRET=1 torchrun --nproc-per-node=N examples/<each>.py`` at 2 and 3 ranks.

Each example's CPU branch (``EMULATED``) runs its kernels on the emulation with small sizes and checks them (its
``Checks`` make the exit code); timing is skipped there. To start torch and Triton once per world size instead of
once per example, one torchrun runs this file as the runner: it executes every example as ``__main__`` in turn, in
the same processes, with ``triton_dist.testing.setup_distributed`` / ``teardown`` made to keep the one process group
and CPU heap of the run (a gloo group cannot be created again in a process under torchrun's store; the teardown
collects garbage so that every rank's heap is in the same state for the next example). Everything else is the
example's own code, and a failed check is a non-zero exit, as from the command line.
"""

from __future__ import annotations

import gc
import re
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest
from test_emulation_primitives import REPO, run_torchrun

EXAMPLES = ("ping_pong.py", "allgather_push.py", "allgather_pull.py")


@pytest.mark.parametrize("ranks", [2, 3])
def test_the_examples_pass_on_the_cpu_emulation(ranks: int) -> None:
    output = run_torchrun(Path(__file__), ranks, [str(REPO / "examples" / name) for name in EXAMPLES])
    for name in EXAMPLES:
        assert output.count(f"EXAMPLE {name} exit 0") == ranks, output[-4000:]
    assert re.search(r"PASS every round trip completed: flags \[(\d+), (\d+)\], expected \[\1, \2\]", output)
    for variant in ("allgather_push", "allgather_pull"):
        assert output.count(f"PASS {variant} 1 MiB matches gloo (3 rounds, poisoned output)") == ranks, output[-4000:]
    assert " FAIL " not in output


def _run_examples(scripts: list[str]) -> None:
    import triton_dist
    import triton_dist.testing as testing

    setup, teardown = testing.setup_distributed, testing.teardown
    state: dict[str, Any] = {}

    def setup_once(heap_size: int | str = "1G", timeout_s: float | None = None, *, device: str = "cuda") -> Any:
        if "world" not in state:
            state["world"] = setup(heap_size="8M", timeout_s=timeout_s, device=device)
        return state["world"]

    def barrier_only() -> None:
        # The next example allocates from the same heap: blocks still held by reference cycles of this one are
        # freed now on every rank, so that every rank's allocator hands out the same offsets.
        gc.collect()
        triton_dist.barrier()

    testing.setup_distributed = setup_once  # type: ignore[assignment]
    testing.teardown = barrier_only  # type: ignore[assignment]
    sys.path.insert(0, str(Path(scripts[0]).parent))  # the examples import allgather_driver
    for script in scripts:
        sys.argv = [script]
        code: Any = 0
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit_:
            code = exit_.code
        print(f"EXAMPLE {Path(script).name} exit {code}", flush=True)
        if code:
            sys.exit(code)
    teardown()


if __name__ == "__main__":
    _run_examples(sys.argv[1:])
