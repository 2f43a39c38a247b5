"""What the GPU checks that judge fresh processes share (``check_guards.py``, ``check_watchdog.py``).

A device-side assert or the watchdog's trap leaves the CUDA context of its process unusable, so nothing after it in
that process can run. These checks therefore write each case as a script and run it in fresh Python processes (one,
or one per rank of a world of their own), then judge the case by what the processes printed:

    output = run_case(PRELUDE + BODY, ranks=2)
    tally.check("rank 0 raises WaitTimeoutError", "[rank 0] RAISED" in output, output)

Under torchrun only local rank 0 runs the cases (``other_local_rank``); the tally's last line has the form
``scripts/gpu_check.sh`` and the pytest entry look for (``N failures over all ranks``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASE_TIMEOUT_S = 120
"""How long one case process may run before it is killed (its output then starts with ``TIMEOUT``)."""


def free_port() -> str:
    """A TCP port on 127.0.0.1 that is free now, for a case's own process group."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def run_case(
    source: str, *, ranks: int = 1, extra_env: dict[str, str] | None = None, timeout_s: float = CASE_TIMEOUT_S
) -> str:
    """Run ``source`` as ``ranks`` fresh Python processes at once; returns their outputs, rank 0's first.

    Each process gets ``CASE_RANK`` (0, 1, ...), ``PORT`` (one free port for all, to start their own process group
    on 127.0.0.1), ``PYTHONPATH`` = this checkout's python/ and unbuffered output, but none of torchrun's variables:
    inherited, they would make ``init_process_group`` join torchrun's store instead of starting its own.
    ``extra_env`` is added last. A process's output is its stdout, then its stderr; the processes' outputs are
    joined by newlines. A process still running ``timeout_s`` seconds after the wait for it began (waits go in rank
    order) is killed, and its output is ``TIMEOUT after <timeout_s> s`` and then what it had printed.
    """
    from triton_dist.testing import env_without_launcher

    env = dict(env_without_launcher(), PYTHONPATH=str(REPO / "python"), PORT=free_port(), PYTHONUNBUFFERED="1")
    env.update(extra_env or {})
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "case.py"  # Triton reads @jit source from a file
        script.write_text(source)
        processes = [
            subprocess.Popen(
                [sys.executable, str(script)],
                env=dict(env, CASE_RANK=str(rank)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for rank in range(ranks)
        ]
        outputs = []
        for process in processes:
            try:
                stdout, stderr = process.communicate(timeout=timeout_s)
                outputs.append(stdout + stderr)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, stderr = process.communicate()
                outputs.append(f"TIMEOUT after {timeout_s:g} s\n{stdout}{stderr}")
        return "\n".join(outputs)


class Tally:
    """Pass/fail results of one script's checks, printed as they come (``PASS name`` / ``FAIL name``)."""

    TAIL_CHARS = 4000
    """How much of a failed check's output is shown (its end: where a crash or a timeout is)."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, ok: bool, output: str) -> None:
        """Count and print the result of ``name``; a failure also prints the end of ``output``, indented."""
        print(f"{'PASS' if ok else 'FAIL'} {name}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(textwrap.indent(output[-self.TAIL_CHARS :], "    | "), flush=True)

    def exit_code(self) -> int:
        """Print the totals (every case ran on this process, so its failures are all ranks'); 1 if any failed."""
        print(f"{self.passed} passed, {self.failed} failed here; {self.failed} failures over all ranks", flush=True)
        return 1 if self.failed else 0


def other_local_rank(script: str) -> bool:
    """Whether this process is not local rank 0 under torchrun; if so, says that it ran nothing (0 failures)."""
    if os.environ.get("LOCAL_RANK", "0") == "0":
        return False
    print(f"{script} runs its cases on local rank 0 only; 0 passed, 0 failed here; 0 failures over all ranks")
    return True
