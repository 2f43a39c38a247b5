"""Shared pytest fixtures and markers of test/python (keep it small: helpers for compiling live in dl_compile.py).

``@pytest.mark.isolated``: the test body runs in a forked child process. A child killed by a signal (an abort
from an assertion inside Triton's C++ code, a segfault) fails that test, with the signal's name, instead of taking
the whole pytest process down; a child that hangs is killed after ``ISOLATED_TIMEOUT_S`` and fails the test.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import time
import traceback

import pytest

ISOLATED_TIMEOUT_S = 120.0

# The wait watchdog is on by default; the compile tests pin the kernels' code without it (the watched variants have
# their own tests, test_watchdog.py and the LL all-reduce's, which set the timeout themselves).
os.environ.setdefault("TRITON_DIST_WAIT_TIMEOUT_S", "0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "isolated: run the test in a forked child, so a signal (abort, segfault) fails only that test"
    )


def _run_child(item: pytest.Function, write_end: int) -> None:
    """In the child: run the test function, send back None or the formatted failure, and leave at once."""
    try:
        arguments = {name: item.funcargs[name] for name in item._fixtureinfo.argnames}
        item.obj(**arguments)
        outcome = None
    except BaseException as error:  # noqa: BLE001 (everything goes back to the parent)
        skipped = isinstance(error, pytest.skip.Exception)
        outcome = (skipped, type(error).__name__, str(error), "".join(traceback.format_exception(error)))
    with os.fdopen(write_end, "wb") as pipe:
        pickle.dump(outcome, pipe)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _wait_for_child(pid: int, read_end: int) -> tuple[int, bytes]:
    deadline = time.monotonic() + ISOLATED_TIMEOUT_S
    data = b""
    with os.fdopen(read_end, "rb") as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"the isolated test did not finish in {ISOLATED_TIMEOUT_S:.0f} s (killed)", pytrace=False)
            chunk = os.read(pipe.fileno(), 1 << 16)
            if not chunk:
                break
            data += chunk
    _, status = os.waitpid(pid, 0)
    return status, data


_warmed_up = False


def _warm_up_compiler() -> None:
    """Fill Triton's per-process caches (the hash of its installation, tool versions) once, in the parent: a child
    that had to compute them would take about a second per test."""
    global _warmed_up
    if _warmed_up:
        return
    _warmed_up = True
    import triton
    from dl_compile import TARGETS, compile_kernel

    @triton.jit
    def _empty_kernel(x_ptr):
        pass

    for target_name in TARGETS:
        compile_kernel(_empty_kernel, {"x_ptr": "*i32"}, target_name)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if pyfuncitem.get_closest_marker("isolated") is None or not hasattr(os, "fork"):
        return None
    _warm_up_compiler()
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _run_child(pyfuncitem, write_end)
    os.close(write_end)
    status, data = _wait_for_child(pid, read_end)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        pytest.fail(f"the test's process was killed by {name} (e.g. an abort inside Triton's C++ code)", pytrace=False)
    if not data:
        pytest.fail(f"the isolated test exited with status {os.waitstatus_to_exitcode(status)} and no result")
    outcome = pickle.loads(data)
    if outcome is not None:
        skipped, kind, message, text = outcome
        if skipped:
            pytest.skip(message)
        pytest.fail(f"{kind} in the isolated test:\n{text}", pytrace=False)
    return True
