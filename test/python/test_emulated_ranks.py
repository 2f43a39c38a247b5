"""emulated_ranks, the launcher of the emulation tests' ranks: results and output come back per rank; a rank that
raises, dies or hangs fails the run naming it, with its traceback or its stacks; nothing is left in the temporary
directory on any of these paths.

This module imports no torch at its top: the ranks of the cases without a process group start in a fraction of a
second."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
from emulated_ranks import RankFailure, run_ranks, run_script


def _all_reduce_my_rank(offset: int) -> tuple[int, int, float, str | None]:
    import torch
    import torch.distributed as dist

    total = torch.tensor([float(dist.get_rank() + offset)])
    dist.all_reduce(total)
    print(f"rank {dist.get_rank()} says hello", flush=True)
    return dist.get_rank(), dist.get_world_size(), total.item(), os.environ.get("TRITON_INTERPRET")


def _raise_on_rank_1() -> None:
    if os.environ["RANK"] == "1":
        raise ValueError("rank 1 cannot go on")
    time.sleep(600)  # rank 0 waits for nothing: killed grace_s after rank 1 failed


def _hang_on_rank_1() -> str:
    if os.environ["RANK"] == "1":
        _stuck_here()
    return "done"


def _stuck_here() -> None:
    time.sleep(600)


def _abort_on_rank_0() -> None:
    if os.environ["RANK"] == "0":
        os.abort()


def _no_files_left(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point the launcher's temporary directory at an empty folder of this test (checked empty afterwards)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


def test_every_rank_returns_its_value_through_one_process_group(monkeypatch, tmp_path):
    scratch = _no_files_left(monkeypatch, tmp_path)
    run = run_ranks(_all_reduce_my_rank, 3, 10)
    assert run.results == [(rank, 3, 33.0, "1") for rank in range(3)]
    for rank in range(3):
        assert f"rank {rank} says hello" in run.outputs[rank] and run.outputs[rank].count("says hello") == 1
    assert run.output.count("says hello") == 3
    assert list(scratch.iterdir()) == []


def test_a_rank_that_raises_is_named_with_its_traceback(monkeypatch, tmp_path):
    scratch = _no_files_left(monkeypatch, tmp_path)
    began = time.monotonic()
    with pytest.raises(RankFailure) as failure:
        run_ranks(_raise_on_rank_1, 2, process_group=False, grace_s=0.5)
    message = str(failure.value)
    assert message.startswith("rank 1 of 2 failed first: it exited with status 1"), message
    assert "in _raise_on_rank_1" in message and "ValueError: rank 1 cannot go on" in message, message
    assert "rank(s) [0] were still running 0.5 s after rank 1 failed: killed" in message, message
    assert time.monotonic() - began < 60
    assert list(scratch.iterdir()) == []


def test_a_hung_rank_times_out_naming_it_with_its_stack(monkeypatch, tmp_path):
    scratch = _no_files_left(monkeypatch, tmp_path)
    with pytest.raises(RankFailure) as failure:
        run_ranks(_hang_on_rank_1, 2, process_group=False, timeout_s=4)
    message = str(failure.value)
    assert message.startswith("rank(s) [1] of 2 did not finish within 4 s (a hang?) and were killed; rank(s) [0]")
    assert "in _stuck_here" in message and "in _hang_on_rank_1" in message, message  # faulthandler's dump
    assert list(scratch.iterdir()) == []


def test_a_rank_killed_by_a_signal_is_named(monkeypatch, tmp_path):
    scratch = _no_files_left(monkeypatch, tmp_path)
    with pytest.raises(RankFailure, match="rank 0 of 2 failed first: it was killed by SIGABRT"):
        run_ranks(_abort_on_rank_0, 2, process_group=False)
    assert list(scratch.iterdir()) == []


def test_a_script_runs_as_torchrun_runs_it_and_a_failing_rank_is_named(monkeypatch, tmp_path):
    scratch = _no_files_left(monkeypatch, tmp_path)
    script = tmp_path / "script.py"
    script.write_text(
        "import os, sys\n"
        "names = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'TRITON_INTERPRET')\n"
        "print(sys.argv[1:], [os.environ[name] for name in names], flush=True)\n"
        "sys.exit(3 if os.environ['RANK'] == sys.argv[1] else 0)\n"
    )
    run = run_script(script, 2, ["7"])
    assert run.results == [None, None]
    assert run.outputs == [f"['7'] ['{rank}', '{rank}', '2', '2', '0', '1']\n" for rank in range(2)]
    with pytest.raises(RankFailure, match=r"rank 1 of 2 failed first: it exited with status 3\n(.|\n)*\['1'\]"):
        run_script(script, 2, ["1"])
    assert list(scratch.iterdir()) == []


def test_a_function_that_is_not_at_module_level_is_refused():
    with pytest.raises(ValueError, match="not a module-level function"):
        run_ranks(lambda: None, 2)


_DESCRIBE_THE_PROCESS = (
    "import os, sys\n"
    "print(sys.argv[1:], os.getcwd(), sys.path[0] == os.path.dirname(os.path.abspath(__file__)), flush=True)\n"
    "print(sorted(path for path in os.environ['PYTHONPATH'].split(os.pathsep) if path not in sys.path), flush=True)\n"
    "print(os.environ['RANK'], os.environ['TRITON_INTERPRET'], os.getsid(0) == os.getpid(), flush=True)\n"
    "print('PARENT', os.getppid(), flush=True)\n"
    "raise SystemExit(0 if __name__ == '__main__' else 5)\n"
)


def test_a_forked_rank_starts_as_a_fresh_interpreter_would(monkeypatch, tmp_path):
    """The ranks fork from the zygote (its children: the CPU of importing torch once per launching process, not once
    per rank) with the argv, working directory, ``sys.path`` (the script's directory, then ``PYTHONPATH``), variables
    and session a fresh interpreter has; ``TRITON_DIST_TEST_FRESH_RANKS=1`` starts fresh interpreters instead, which
    print the same."""
    import emulated_ranks

    script = tmp_path / "describe.py"
    script.write_text(_DESCRIBE_THE_PROCESS)
    monkeypatch.delenv(emulated_ranks.FRESH_RANKS_VARIABLE, raising=False)
    forked = run_script(script, 2, ["a b"])
    zygotes = {str(zygote.process.pid) for zygote in emulated_ranks._zygotes.values() if zygote.usable()}
    parents = {line.split()[1] for line in forked.output.splitlines() if line.startswith("PARENT")}
    assert len(parents) == 1 and parents <= zygotes, (forked.output, zygotes)
    monkeypatch.setenv(emulated_ranks.FRESH_RANKS_VARIABLE, "1")
    fresh = run_script(script, 2, ["a b"])
    assert {line.split()[1] for line in fresh.output.splitlines() if line.startswith("PARENT")} == {str(os.getpid())}
    for rank in range(2):
        want = f"['a b'] {emulated_ranks.REPO} True\n[]\n{rank} 1 True\n"
        assert forked.outputs[rank].startswith(want) and fresh.outputs[rank].startswith(want), (forked, fresh)


def test_run_python_keeps_stdout_and_stderr_apart_and_kills_at_its_timeout(tmp_path):
    """``run_python`` (``dl_compile.run_in_interpreter``'s): ``subprocess.run``'s result, from a fork as the ranks'."""
    import subprocess

    from emulated_ranks import run_python

    script = tmp_path / "talk.py"
    script.write_text(
        "import sys, time\n"
        "print('out', sys.argv[1], flush=True)\n"
        "print('err', file=sys.stderr, flush=True)\n"
        "time.sleep(60 if sys.argv[1] == 'slow' else 0)\n"
        "sys.exit(4)\n"
    )
    done = run_python(script, ["x y"], dict(os.environ), timeout_s=60)
    assert (done.returncode, done.stdout, done.stderr) == (4, "out x y\n", "err\n")
    began = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_python(script, ["slow"], dict(os.environ), timeout_s=2)
    assert time.monotonic() - began < 30
