"""Runs a test's code on N ranks, one process per rank, as ``torchrun --standalone --nproc-per-node=N`` would.

The tests of the CPU emulation (``TRITON_INTERPRET=1``, ``triton_dist.init(device="cpu")``, gloo) use it:

```python
from emulated_ranks import run_ranks, run_script


def _worker(out: str) -> dict[str, list[str]]:  # module level: every rank imports this module and calls it
    ...  # the process group and the CPU heap are up (heap_size=...), on every rank
    return record  # pickled back to the test


records = run_ranks(_worker, 2, "x", heap_size="16M").results  # [rank 0's record, rank 1's record]
output = run_script(REPO / "test/gpu/check_all_gather.py", 4, ["--worker", "1,2,4", "nvshmem", "--emulate"]).output
```

Every rank gets torchrun's variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``MASTER_ADDR`` / ``MASTER_PORT``, ...) with the rendezvous store served by the calling process, as torchrun's agent
serves it (``TORCHELASTIC_USE_AGENT_STORE``: the ranks connect to it as clients, so there is no free port to guess
and no agent process to start), and ``TRITON_INTERPRET=1``, ``OMP_NUM_THREADS=1``, a 120 s wait watchdog,
``PYTHONPATH`` with the package and the test's directory (``env`` overrides any of them).

How a run fails (``RankFailure``, a test failure naming the rank):

- a rank raises (``run_ranks``) or exits non-zero, or a signal kills it: the first rank that failed, with its
  traceback and the end of its output, then the others that failed; ranks still running ``grace_s`` later (waiting
  for the failed one, say) are killed;
- ranks still running after ``timeout_s``: which ranks, and (``run_ranks``) the Python stack of each thread of each,
  dumped by ``faulthandler`` just before they are killed.

Every rank runs in its own session and is killed with whatever it started; its output and results go through a
temporary directory that is removed on every path out.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240.0
"""How long a run may take by default (starting the processes included) before its ranks are killed."""
GRACE_S = 20.0
"""How long the other ranks may still run after one failed (gloo usually fails them at once) before being killed."""
TAIL_CHARS = 6000
"""How much of a failed rank's output a ``RankFailure`` quotes."""
POLL_S = 0.05
DUMP_WAIT_S = 0.5
"""How long a hung rank gets to print its stacks (``faulthandler``, on SIGUSR1) before it is killed."""


class RankFailure(Exception):
    """A rank of ``run_ranks`` / ``run_script`` failed (raised, exited non-zero, was killed) or did not finish."""


@dataclasses.dataclass
class RankRun:
    """What the ranks of a run gave back, in rank order."""

    results: list[Any]
    """Each rank's return value (``run_ranks``), or None per rank (``run_script``)."""
    outputs: list[str]
    """Each rank's stdout and stderr, interleaved as written."""

    @property
    def output(self) -> str:
        """Every rank's output, rank 0's first."""
        return "".join(self.outputs)


@dataclasses.dataclass
class _Call:
    """What a rank of ``run_ranks`` runs: ``module.qualname(*args)``, with the process group / CPU heap set up."""

    module: str
    qualname: str
    args: tuple[Any, ...]
    process_group: bool
    heap_size: str | int | None


def run_ranks(
    function: Callable[..., Any],
    ranks: int,
    *args: Any,
    heap_size: str | int | None = None,
    process_group: bool = True,
    env: Mapping[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
    grace_s: float = GRACE_S,
) -> RankRun:
    """Call ``function(*args)`` on each of ``ranks`` fresh processes; returns each rank's return value and output.

    ``function`` must be a module-level function of a module on ``sys.path`` (a test module): each rank imports
    that module (under the ranks' environment, ``TRITON_INTERPRET=1`` by default, so its kernels are the
    interpreter's) and calls it. ``args`` and the return values are pickled. ``process_group``: each rank first
    joins a gloo process group of all ranks (``dist.init_process_group("gloo")``) and, after ``function`` returned,
    waits in a barrier for the others; ``heap_size``: each rank also calls ``triton_dist.init(heap_size=...,
    device="cpu")`` before and ``triton_dist.finalize()`` after. Without either, ``function`` sets up what it needs.

    Raises ``RankFailure`` naming the rank and quoting its traceback where a rank raised, exited or was killed, or
    naming the ranks still running after ``timeout_s`` (with their stacks); ``ValueError`` where ``function`` is
    not a module-level function.
    """
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", "")
    if module is None or module == "__main__" or getattr(sys.modules.get(module), qualname, None) is not function:
        raise ValueError(
            f"run_ranks: {function!r} is not a module-level function of an importable module (each rank imports "
            "its module and looks it up by name): define it at the top level of the test module"
        )
    call = _Call(module, qualname, tuple(args), process_group or heap_size is not None, heap_size)
    module_dir = str(Path(sys.modules[module].__file__ or ".").resolve().parent)
    with tempfile.TemporaryDirectory(prefix="emulated-ranks-") as directory:
        Path(directory, "call.pkl").write_bytes(pickle.dumps(call))
        command = [sys.executable, str(Path(__file__).resolve()), directory]
        outputs = _launch(command, ranks, _environment(env, module_dir), timeout_s, grace_s, Path(directory), True)
        return RankRun([_result(Path(directory), rank) for rank in range(ranks)], outputs)


def run_script(
    script: Path | str,
    ranks: int,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
    grace_s: float = GRACE_S,
) -> RankRun:
    """Run ``python script *args`` on each of ``ranks`` processes, as ``torchrun --nproc-per-node=ranks`` would;
    returns each rank's output. The script sets up its process group itself (``init_process_group("gloo")``, or
    ``triton_dist.testing.setup_distributed``). Raises ``RankFailure`` naming the rank that exited non-zero or was
    killed, with the end of its output, or the ranks still running after ``timeout_s``."""
    script = Path(script).resolve()
    with tempfile.TemporaryDirectory(prefix="emulated-ranks-") as directory:
        command = [sys.executable, str(script), *map(str, args)]
        outputs = _launch(command, ranks, _environment(env, None), timeout_s, grace_s, Path(directory), False)
        return RankRun([None] * ranks, outputs)


def _environment(env: Mapping[str, str] | None, module_dir: str | None) -> dict[str, str]:
    """The environment every rank shares: this process's, without a launcher's variables, plus the emulation's."""
    from triton_dist.testing.distributed import env_without_launcher

    inherited = env_without_launcher()
    paths = [str(REPO / "python"), module_dir or "", os.environ.get("PYTHONPATH", "")]
    return {
        **inherited,
        "TRITON_INTERPRET": "1",
        "PYTHONPATH": os.pathsep.join(path for path in paths if path),
        "OMP_NUM_THREADS": "1",
        "TRITON_DIST_WAIT_TIMEOUT_S": "120",
        **(env or {}),
    }


def _launch(
    command: list[str],
    ranks: int,
    env: dict[str, str],
    timeout_s: float,
    grace_s: float,
    directory: Path,
    dumps_stacks: bool,
) -> list[str]:
    """Start ``command`` once per rank, wait for all, kill what is left; returns the outputs or raises."""
    from torch.distributed import TCPStore

    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)  # the agent's store, as torchrun's
    shared = {
        **env,
        "WORLD_SIZE": str(ranks),
        "LOCAL_WORLD_SIZE": str(ranks),
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "ROLE_NAME": "default",
        "ROLE_WORLD_SIZE": str(ranks),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(store.port),
        "TORCHELASTIC_USE_AGENT_STORE": "True",
    }
    processes: list[subprocess.Popen] = []
    logs = [directory / f"rank{rank}.log" for rank in range(ranks)]
    try:
        for rank in range(ranks):
            rank_env = {**shared, "RANK": str(rank), "LOCAL_RANK": str(rank), "ROLE_RANK": str(rank)}
            with open(logs[rank], "wb") as log:
                processes.append(
                    subprocess.Popen(
                        command,
                        env=rank_env,
                        cwd=REPO,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its own process group: killed with whatever it started
                    )
                )
        failed, hung = _wait(processes, timeout_s, grace_s, dumps_stacks)
    finally:
        for process in processes:
            _kill(process)
        del store
    outputs = [log.read_text(errors="replace") for log in logs]
    if failed or hung:
        what = (timeout_s, grace_s, dumps_stacks)
        raise RankFailure(_failure_message(processes, outputs, failed, hung, what, directory))
    return outputs


def _wait(
    processes: list[subprocess.Popen], timeout_s: float, grace_s: float, dumps_stacks: bool
) -> tuple[list[int], list[int]]:
    """Wait for every rank; returns the ranks that failed (in the order they did) and those still running at the
    deadline (``timeout_s``, or ``grace_s`` after the first failure), which are told to dump their stacks."""
    deadline = time.monotonic() + timeout_s
    failed: list[int] = []
    while True:
        codes = [process.poll() for process in processes]
        for rank, code in enumerate(codes):
            if code is not None and code != 0 and rank not in failed:
                failed.append(rank)
                deadline = min(deadline, time.monotonic() + grace_s)
        running = [rank for rank, code in enumerate(codes) if code is None]
        if not running:
            return failed, []
        if time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    if dumps_stacks and not failed:
        for rank in running:
            _signal(processes[rank], signal.SIGUSR1)  # faulthandler prints every thread's stack (_rank_main)
        time.sleep(DUMP_WAIT_S)  # faulthandler writes from its signal handler, at once
    return failed, running


def _signal(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def _kill(process: subprocess.Popen) -> None:
    """Kill the rank's process group (it and what it started) unless it is gone, and reap it."""
    _signal(process, signal.SIGKILL)
    process.wait()


def _describe(code: int | None) -> str:
    if code is None:
        return "was still running"
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def _failure_message(
    processes: list[subprocess.Popen],
    outputs: list[str],
    failed: list[int],
    hung: list[int],
    what: tuple[float, float, bool],
    directory: Path,
) -> str:
    """The message of a failed run: the first rank that failed and how, or the ranks that hung (``what``: the run's
    timeout_s, grace_s and whether the hung ranks dumped their stacks)."""
    timeout_s, grace_s, dumps_stacks = what
    ranks = len(processes)
    if not failed:
        finished = [rank for rank in range(ranks) if rank not in hung]
        lines = [
            f"rank(s) {hung} of {ranks} did not finish within {timeout_s:g} s (a hang?) and were killed; "
            f"rank(s) {finished} had finished"
        ]
        stacks = " (its threads' stacks last)" if dumps_stacks else ""
        for rank in hung:
            lines.append(f"--- rank {rank}'s output{stacks}:")
            lines.append(outputs[rank][-TAIL_CHARS:])
        return "\n".join(lines)
    first = failed[0]
    code = processes[first].returncode
    lines = [f"rank {first} of {ranks} failed first: it {_describe(code)}"]
    raised = _raised(directory, first)
    if raised:
        lines += [f"--- rank {first}'s traceback:", raised]
    lines += [f"--- rank {first}'s output:", outputs[first][-TAIL_CHARS:]]
    for rank in failed[1:]:
        raised = _raised(directory, rank)
        summary = raised.strip().splitlines()[-1] if raised else outputs[rank][-300:].strip()
        lines.append(f"--- rank {rank} then {_describe(processes[rank].returncode)}: {summary}")
    if hung:
        lines.append(f"--- rank(s) {hung} were still running {grace_s:g} s after rank {first} failed: killed")
    return "\n".join(lines)


def _raised(directory: Path, rank: int) -> str:
    """The traceback a rank of ``run_ranks`` recorded, or "" (none recorded: it did not raise, or ran a script)."""
    path = directory / f"rank{rank}.result"
    if not path.exists():
        return ""
    outcome = pickle.loads(path.read_bytes())
    return outcome[1] if outcome[0] == "raised" else ""


def _result(directory: Path, rank: int) -> Any:
    path = directory / f"rank{rank}.result"
    if not path.exists():
        raise RankFailure(f"rank {rank} exited with status 0 without a result (did the function call os._exit?)")
    kind, value = pickle.loads(path.read_bytes())
    if kind != "returned":
        raise RankFailure(f"rank {rank} exited with status 0 but recorded {kind}:\n{value}")
    return value


# --- in each rank ----------------------------------------------------------------------------------------------------


def _run_call(call: _Call) -> Any:
    """Set up what ``call`` asks for, call it, tear down; returns its value."""
    function = getattr(importlib.import_module(call.module), call.qualname)
    if call.process_group:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    if call.heap_size is not None:
        import triton_dist

        triton_dist.init(heap_size=call.heap_size, device="cpu")
    value = function(*call.args)
    if call.heap_size is not None:
        triton_dist.finalize()  # ends with a barrier: every rank is done with every heap
    if call.process_group:
        if dist.is_initialized():
            dist.barrier()  # every rank done before any leaves
    return value


def _rank_main(directory: str) -> None:
    """A rank of ``run_ranks``: run the call, write ``rank<r>.result`` (what it returned or its traceback), exit.

    It leaves with ``os._exit``, without the interpreter's teardown: in a gloo world under the emulation, a C++
    destructor at exit now and then aborted the process ("terminate called without an active exception") after
    everything had passed."""
    import faulthandler

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the launcher's "where are you stuck?"
    rank = int(os.environ["RANK"])
    call = pickle.loads(Path(directory, "call.pkl").read_bytes())
    try:
        outcome: tuple[str, Any] = ("returned", _run_call(call))
    except BaseException as error:  # noqa: BLE001 (everything goes back to the launcher)
        outcome = ("raised", "".join(traceback.format_exception(error)))
        print(f"rank {rank}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    try:
        data = pickle.dumps(outcome)
    except Exception as error:  # noqa: BLE001 (an unpicklable return value)
        outcome = ("raised", f"the value {call.qualname} returned cannot be pickled: {error!r}")
        data = pickle.dumps(outcome)
    partial = Path(directory, f"rank{rank}.result.partial")
    partial.write_bytes(data)
    partial.rename(Path(directory, f"rank{rank}.result"))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if outcome[0] == "returned" else 1)


if __name__ == "__main__":
    _rank_main(sys.argv[1])
