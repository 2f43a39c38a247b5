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

How a rank starts: as a fork of the zygote, a process of this module (``python emulated_ranks.py --zygote``, started
on first use by a launching process) that imported torch once. The fork then becomes what ``python script args...``
would be (argv, environment, working directory, stdio, ``sys.path``: the script's directory and ``PYTHONPATH``
first) and runs the script as ``__main__``; the zygote reaps it and reports its exit code (negative for a signal, as
``Popen``'s). Importing torch costs about 1.2 s of CPU, once per rank of a fresh interpreter: on 2026-11-27 the
tests of this launcher, ``test_runtime_world``, ``test_testing`` and ``test_nvshmem_team_device`` took 45 s of CPU
with fresh interpreters and 23 s with forks, and the whole pytest step of scripts/test.sh 692 s of CPU (6:03 wall)
and 596 s (5:17; with run_in_interpreter's runs forked too, ``run_python``). What differs from a fresh interpreter:
torch and its dependencies are imported already (a zygote per set of ``OMP_*`` / ``TORCH_*`` / ... variables,
``IMPORT_TIME_PREFIXES``), and the ranks of a launching process share the zygote's hash seed.
``TRITON_DIST_TEST_FRESH_RANKS=1`` starts every rank as a fresh interpreter.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

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


def run_python(
    script: Path | str, args: Sequence[str], env: Mapping[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """Run ``python script *args`` once, as ``subprocess.run(..., capture_output=True, text=True, env=env,
    timeout=timeout_s)`` would in this process's working directory, but forked from the zygote as a rank is (a fresh
    interpreter where ``TRITON_DIST_TEST_FRESH_RANKS=1``): ``env`` is the whole environment, nothing of the ranks'
    is added. Returns the finished process (``returncode``, ``stdout``, ``stderr``); raises
    ``subprocess.TimeoutExpired`` after ``timeout_s``, the process and what it started killed."""
    command = [sys.executable, str(Path(script).resolve()), *map(str, args)]
    with tempfile.TemporaryDirectory(prefix="emulated-ranks-") as directory:
        out, err = Path(directory, "stdout"), Path(directory, "stderr")
        process = _start(command, dict(env), out, err, Path.cwd())
        deadline = time.monotonic() + timeout_s
        try:
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(command, timeout_s)
                time.sleep(POLL_S)
        finally:
            _kill(process)
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    return subprocess.CompletedProcess(command, process.wait(), stdout, stderr)


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
    processes: list[Rank] = []
    logs = [directory / f"rank{rank}.log" for rank in range(ranks)]
    try:
        for rank in range(ranks):
            rank_env = {**shared, "RANK": str(rank), "LOCAL_RANK": str(rank), "ROLE_RANK": str(rank)}
            processes.append(_start(command, rank_env, logs[rank]))
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


class Rank(Protocol):
    """A rank's process as ``_launch`` uses it: ``subprocess.Popen``'s surface (``_ForkedRank`` has the same)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...


FRESH_RANKS_VARIABLE = "TRITON_DIST_TEST_FRESH_RANKS"
"""Set to 1, every rank is a fresh interpreter (``subprocess.Popen``) instead of a fork of the zygote."""
IMPORT_TIME_PREFIXES = ("OMP_", "MKL_", "KMP_", "OPENBLAS", "TORCH_", "PYTORCH_", "CUDA", "LD_", "PYTHON")
"""Variables that torch (imported by the zygote) may read while it is imported: ranks fork from a zygote started
with the same values of these (``PYTHONPATH`` aside: the fork puts its entries on ``sys.path``)."""


def _start(command: list[str], env: dict[str, str], log: Path, err: Path | None = None, cwd: Path = REPO) -> Rank:
    """Start a rank: ``command`` (``[python, script, *args]``) in ``cwd`` with ``env``, stdin from /dev/null,
    stdout and stderr into ``log`` (stderr into ``err`` if given), in a session of its own (killed with whatever it
    started).

    A fork of the zygote where it can (see ``_Zygote``): the same script, arguments, environment, working directory
    and ``sys.path`` as a fresh interpreter, without importing torch again (about 1.2 s of CPU a rank); else a fresh
    interpreter (``TRITON_DIST_TEST_FRESH_RANKS=1``, or no ``os.fork``)."""
    zygote = _zygote_for(env) if len(command) >= 2 and command[0] == sys.executable else None
    for path in (log, err):
        if path is not None:
            path.write_bytes(b"")  # there for the launcher to read even if the rank dies before it opens it
    if zygote is not None:
        return zygote.start(command[1:], env, str(cwd), str(log), None if err is None else str(err))
    with open(log, "wb") as out, open(err or os.devnull, "wb") as errors:
        return subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if err is None else errors,
            start_new_session=True,  # its own process group: killed with whatever it started
        )


def _import_time(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES) and k != "PYTHONPATH"}


MAX_ZYGOTES = 4
"""Zygotes a launching process keeps (one per set of import-time variables; the oldest goes first)."""
_zygotes: dict[tuple[tuple[str, str], ...], _Zygote] = {}


def _zygote_for(env: dict[str, str]) -> _Zygote | None:
    """This process's zygote for ``env``'s import-time variables (started on first use: a test may have set one,
    as ``triton_dist.runtime.heap.symm_mem`` sets ``TORCH_SYMM_MEM_DISABLE_MULTICAST``), or None where ranks start
    as fresh interpreters."""
    if os.environ.get(FRESH_RANKS_VARIABLE) == "1" or not hasattr(os, "fork"):
        return None
    key = tuple(sorted(_import_time(env).items()))
    zygote = _zygotes.get(key)
    if zygote is None or not zygote.usable():
        if zygote is None and len(_zygotes) >= MAX_ZYGOTES:
            _zygotes.pop(next(iter(_zygotes))).close()
        zygote = _zygotes[key] = _Zygote(env)
    return zygote


_STARTED, _EXITED = b"P", b"X"
_MESSAGE = struct.Struct("<1sqq")
"""What the zygote tells its launcher: (``_STARTED``, pid, 0) once it forked a rank, (``_EXITED``, pid, exit code as
``Popen.returncode`` gives it: negative for a signal) once it reaped one."""


class _Zygote:
    """A process that imported torch once and forks the ranks from there (``python emulated_ranks.py --zygote``,
    ``_zygote_main``), one per launching process and set of import-time variables (a forked pytest child starts its
    own).

    A fork of a process that has only imported modules (one thread) is the rank a fresh interpreter would be, less
    the imports: the rank's process is the zygote's child, which reaps it and sends its exit code back."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.owner = os.getpid()
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--zygote"],
            env=env,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.buffer = b""
        self.exits: dict[int, int] = {}
        self.started: list[int] = []
        atexit.register(self.close)

    def close(self) -> None:
        """Let the zygote go (its stdin closed: it leaves) and reap it."""
        if self.owner == os.getpid() and self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
            self.process.wait()

    def usable(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def start(self, argv: list[str], env: dict[str, str], cwd: str, log: str, err: str | None) -> _ForkedRank:
        request = pickle.dumps((argv, env, cwd, log, err))
        assert self.process.stdin is not None
        self.process.stdin.write(struct.pack("<I", len(request)) + request)
        self.process.stdin.flush()
        deadline = time.monotonic() + TIMEOUT_S
        while not self.started:
            if time.monotonic() > deadline:
                raise RankFailure(f"the zygote did not fork a rank within {TIMEOUT_S:g} s")
            self.read(POLL_S)
        return _ForkedRank(self, self.started.pop(0))

    def read(self, timeout_s: float) -> None:
        """Take in what the zygote said within ``timeout_s`` (nothing waited for if 0)."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            return
        chunk = os.read(self.process.stdout.fileno(), 1 << 16)
        if not chunk:
            raise RankFailure("the zygote that forks the ranks exited (its output went to pytest's stderr)")
        self.buffer += chunk
        while len(self.buffer) >= _MESSAGE.size:
            kind, pid, code = _MESSAGE.unpack(self.buffer[: _MESSAGE.size])
            self.buffer = self.buffer[_MESSAGE.size :]
            if kind == _STARTED:
                self.started.append(pid)
            else:
                self.exits[pid] = code


class _ForkedRank:
    """A rank forked by a ``_Zygote``: ``Popen``'s ``pid``, ``returncode``, ``poll`` and ``wait``."""

    def __init__(self, zygote: _Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.zygote.read(0)
            self.returncode = self.zygote.exits.pop(self.pid, None)
        return self.returncode

    def wait(self) -> int:
        while self.poll() is None:
            self.zygote.read(POLL_S)
        assert self.returncode is not None
        return self.returncode


def _wait(processes: list[Rank], timeout_s: float, grace_s: float, dumps_stacks: bool) -> tuple[list[int], list[int]]:
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


def _signal(process: Rank, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def _kill(process: Rank) -> None:
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
    processes: list[Rank],
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


# --- in the zygote ----------------------------------------------------------------------------------------------


def _zygote_main() -> None:
    """Import torch, then fork a rank for each request on stdin (``_Zygote.start``) and report on stdout when each
    started and how each ended; leave when stdin closes (the launching process is gone)."""
    requests, replies = os.dup(0), os.dup(1)  # the ranks get /dev/null and their logs there
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    import runpy

    import torch  # noqa: F401 (what the ranks need not import again)
    import torch.distributed  # noqa: F401

    base = [path for path in sys.path[1:] if path not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    children: set[int] = set()
    buffer = b""
    while True:
        ready, _, _ = select.select([requests], [], [], POLL_S if children else None)
        if ready:
            chunk = os.read(requests, 1 << 16)
            if not chunk:
                return
            buffer += chunk
            while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack("<I", buffer[:4])[0]:
                size = struct.unpack("<I", buffer[:4])[0]
                argv, env, cwd, log, err = pickle.loads(buffer[4 : 4 + size])
                buffer = buffer[4 + size :]
                in_session, told = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(requests)
                    os.close(replies)
                    os.close(in_session)
                    os.setsid()  # its own session and process group: killed with whatever it starts
                    os.close(told)
                    _become_the_rank(argv, env, cwd, (log, err or log), base)
                    runpy.run_path(argv[0], run_name="__main__")
                    return  # the script ended: the interpreter exits as after it (atexit, finalization, status 0)
                os.close(told)
                os.read(in_session, 1)  # until the child's setsid (or its end): killpg(pid) reaches it from now on
                os.close(in_session)
                children.add(pid)
                os.write(replies, _MESSAGE.pack(_STARTED, pid, 0))
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                os.write(replies, _MESSAGE.pack(_EXITED, pid, os.waitstatus_to_exitcode(status)))


def _become_the_rank(argv: list[str], env: dict[str, str], cwd: str, logs: tuple[str, str], base: list[str]) -> None:
    """In a fork of the zygote, in a session of its own: become what ``python argv...`` would be before it runs the
    script (stdio, working directory, environment, ``sys.argv``, ``sys.path``: the script's directory, ``PYTHONPATH``,
    then the interpreter's own). The script then runs as ``__main__`` in ``_zygote_main``'s frame, so that an
    uncaught exception or ``SystemExit`` ends the process as it ends a fresh interpreter's."""
    for fd, log in zip((1, 2), logs, strict=True):
        out = os.open(log, os.O_WRONLY | os.O_APPEND)
        os.dup2(out, fd)
        os.close(out)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = list(argv)
    extra = [path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path]
    sys.path[:] = [str(Path(argv[0]).resolve().parent), *extra, *base]


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        _zygote_main()
    else:
        _rank_main(sys.argv[1])
