"""torchrun glue: one process per GPU, NCCL and ``triton_dist.init()``, rank-tagged output, pass/fail tallies.

Scripts run under ``torchrun --nproc-per-node=N script.py`` (or ``python -m torch.distributed.run ...``), which
sets ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and the rendezvous address that ``setup_distributed`` reads.
"""

from __future__ import annotations

import functools
import gc
import os
import socket
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.runtime.world.settings import resolve_timeout
from triton_dist.runtime.world.stream_sync import synchronize_stream

_START = time.monotonic()


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0))


def rank_print(message: str) -> None:
    """Print ``message`` on this rank, tagged with the rank and the seconds since the script started."""
    print(f"[{time.monotonic() - _START:7.2f}s rank {_rank()}] {message}", flush=True)


def rank0_print(message: str) -> None:
    """``rank_print`` on rank 0 only (for summaries every rank would print alike)."""
    if _rank() == 0:
        rank_print(message)


def setup_distributed(heap_size: int | str = "1G", timeout_s: float | None = None, *, device: str = "cuda") -> rt.World:
    """Bind this process to GPU ``$LOCAL_RANK``, start the process group and triton_dist; returns the world.

    With ``$TRITON_DIST_SHARED_GPUS=1`` (``shared_gpus()``) ranks may outnumber GPUs and share them over gloo.

    Run without torchrun (``python script.py``), it starts a world of this one process. ``timeout_s`` bounds
    host-side waits (default ``$TRITON_DIST_TIMEOUT_S`` or 300 s); the process group gets
    twice that. ``device="cpu"`` starts gloo and a host-only heap instead (for testing host code without GPUs).
    Raises ``SystemExit`` naming what is missing when this rank has no GPU.
    """
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    timeout_s = resolve_timeout(timeout_s)
    timeout = timedelta(seconds=2 * timeout_s)
    if device == "cpu":
        dist.init_process_group("gloo", timeout=timeout, **_world_of_one())
        world = rt.init(heap_size=heap_size, timeout_s=timeout_s, device="cpu")
        rank_print(f"initialized: {world.world_size} ranks, host-only heap {world.heap.heap_size >> 20} MiB")
        return world
    if device != "cuda":
        raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    sharing = shared_gpus()
    if found == 0 or (found <= local_rank and not sharing):
        raise SystemExit(
            f"this script needs a GPU per rank (LOCAL_RANK={local_rank}, {found} GPUs visible); "
            f"{SHARED_GPUS_ENV}=1 lets ranks share GPUs, for correctness checks only"
        )
    gpu = local_rank % found
    torch.cuda.set_device(gpu)
    if sharing:
        # NCCL refuses two ranks on one GPU; gloo carries the host-side collectives (and the checks' references).
        dist.init_process_group("gloo", timeout=timeout, **_world_of_one())
    else:
        dist.init_process_group("nccl", device_id=torch.device("cuda", gpu), timeout=timeout, **_world_of_one())
    world = rt.init(heap_size=heap_size, timeout_s=timeout_s)
    rank_print(
        f"initialized: {world.world_size} ranks, {torch.cuda.get_device_name()} (cuda:{gpu}), "
        f"heap {world.heap.heap_size >> 20} MiB at {world.heap.bases[world.rank]:#x}"
        + (f"; {SHARED_GPUS_ENV}=1: ranks share {found} GPUs through gloo, timings mean nothing" if sharing else "")
    )
    return world


def _world_of_one() -> dict[str, Any]:
    """Without torchrun's variables (``python script.py``), a process group of this process alone."""
    if "RANK" in os.environ or "MASTER_ADDR" in os.environ:
        return {}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return {"init_method": f"tcp://127.0.0.1:{port}", "rank": 0, "world_size": 1}


SHARED_GPUS_ENV = "TRITON_DIST_SHARED_GPUS"


def shared_gpus() -> bool:
    """Whether ``$TRITON_DIST_SHARED_GPUS=1`` asks ranks to share GPUs (rank ``r`` on GPU ``r % count``; the heap
    then needs every rank on one GPU, so make one visible: ``runtime/heap/mapping.py``).

    A mode for checking multi-rank code on fewer GPUs than ranks: the process group is gloo (NCCL refuses two ranks
    on one GPU), so timings mean nothing, and without MPS the GPU time-slices between the ranks' processes, so a
    wait on another rank progresses only when that rank's kernel gets its slice.
    """
    return os.environ.get(SHARED_GPUS_ENV, "0") == "1"


def teardown() -> None:
    """``triton_dist.finalize()`` and destroy the process group (each only if it exists), releasing the group now.

    The world ``setup_distributed`` returned stops referring to the group (its ``group`` becomes None), so the
    group's backend is freed here and its threads (gloo's workers and TCP loop, the store's server) are joined while
    the interpreter still runs. Left to the end of the script, they were joined only when the interpreter freed that
    world during its shutdown; a gloo worker still freeing the last collective's tensors then needed the GIL, which a
    finalizing interpreter refuses by ending the thread, and the process aborted ("terminate called without an
    active exception"). Keep no other reference to the group past ``teardown()``: a RuntimeWarning says when one
    kept it alive.
    """
    world = rt.current_world() if rt.is_initialized() else None
    rt.finalize()
    group = None
    if dist.is_initialized():
        default_group = dist.group.WORLD
        group = weakref.ref(default_group) if default_group is not None else None
        del default_group
        dist.destroy_process_group()
    if world is not None:
        # The group is destroyed and cannot be used any more; this was the last reference setup_distributed made.
        world.group = None  # type: ignore[assignment]
    # Garbage still in reference cycles can hold the group: the argument tuples of torch.distributed's wrapped calls
    # in the frames of a caught exception's traceback. Left to the collector, the group's threads could outlive the
    # interpreter (in CI the docs' MLP script aborted that way at exit, now and then).
    gc.collect()
    if group is not None and group() is not None:
        warnings.warn(
            "triton_dist.testing.teardown(): the destroyed process group is still referenced, so its threads run "
            "until interpreter exit, where a gloo worker can abort the process; drop other references to it before "
            "teardown()",
            RuntimeWarning,
            stacklevel=2,
        )


def _reduce_device() -> str:
    backend = str(dist.get_backend()) if dist.is_initialized() else ""
    return "cuda" if "nccl" in backend else "cpu"


def max_over_ranks(value: float) -> float:
    """The largest ``value`` over all ranks (a collective; ``value`` itself without a process group)."""
    if not dist.is_initialized():
        return float(value)
    tensor = torch.tensor([value], dtype=torch.float64, device=_reduce_device())
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


def all_ranks_true(ok: bool) -> bool:
    """Whether ``ok`` holds on every rank (a collective): the same answer everywhere, so ranks branch alike."""
    if not dist.is_initialized():
        return bool(ok)
    tensor = torch.tensor([1 if ok else 0], dtype=torch.int32, device=_reduce_device())
    dist.all_reduce(tensor, op=dist.ReduceOp.MIN)
    return bool(tensor.item())


def sync(what: str = "device work") -> None:
    """Wait for this rank's current stream, raising TimeoutError (not hanging) past the runtime's timeout."""
    world = rt.current_world()
    synchronize_stream(world.device, world.timeout_s, f"{what} on rank {world.rank}")


class Checks:
    """A tally of named pass/fail results; ``exit_code`` is non-zero if any check failed on any rank."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        """Record and print ``PASS name`` or ``FAIL name`` (with ``detail``); returns ``ok``."""
        ok = bool(ok)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        rank_print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
        return ok

    def run(self, name: str, body: Callable[[], None]) -> None:
        """Run ``body``; an exception counts as a failure of ``name`` (and is printed), not a crash.

        Timeouts and lost ranks are re-raised: once a rank is stuck or gone, later collectives would only hang.
        """
        try:
            body()
        except (TimeoutError, dist.DistBackendError):
            raise
        except Exception as error:  # noqa: BLE001 (report and go on to the next check)
            self.check(name, False, f"raised {type(error).__name__}: {error}")

    def expect_error(self, name: str, error: type[BaseException], call: Callable[[], object], *words: str) -> bool:
        """Check that ``call()`` raises ``error`` whose message contains every one of ``words``; returns the result.

        Bad input must fail with an exception that names the problem: any other exception, or none, fails ``name``.
        """
        try:
            call()
        except error as raised:
            text = str(raised)
            missing = [word for word in words if word not in text]
            detail = f"{type(raised).__name__}: {text[:200]}" + (f" (missing {missing})" if missing else "")
            return self.check(name, not missing, detail)
        except Exception as raised:  # noqa: BLE001 (the wrong exception is a failed check, not a crash)
            return self.check(name, False, f"raised {type(raised).__name__} instead of {error.__name__}: {raised}")
        return self.check(name, False, f"no {error.__name__} raised")

    def run_each(self, cases: Iterable[tuple[str, Callable[..., None]]], *args: object) -> None:
        """``run`` every ``(name, check)`` as ``check(self, *args)``, announced on rank 0, ranks synced after each."""
        for name, check in cases:
            rank0_print(f"--- {name}")
            self.run(name, functools.partial(check, self, *args))
            if rt.is_initialized():
                rt.barrier()
            elif dist.is_initialized():
                dist.barrier()

    def exit_code(self) -> int:
        """0 iff no rank recorded a failure (a collective); prints this rank's tally and the total."""
        failures = torch.tensor([len(self.failed)], dtype=torch.int64, device=_reduce_device())
        if dist.is_initialized():
            dist.all_reduce(failures)
        total = int(failures.item())
        rank_print(f"{self.passed} passed, {len(self.failed)} failed here; {total} failures over all ranks")
        return 1 if total else 0


def finish(checks: Checks) -> int:
    """The end of a check script: ``checks.exit_code()`` (a collective), then ``teardown()``; returns the code."""
    code = checks.exit_code()
    teardown()
    return code


LAUNCHER_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "MASTER_ADDR",
    "MASTER_PORT",
)
"""What torchrun sets for each rank (besides ``TORCHELASTIC_*``)."""


def env_without_launcher(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) without torchrun's variables, for a child process that starts its own group.

    With ``TORCHELASTIC_USE_AGENT_STORE`` inherited, the child's ``init_process_group("tcp://...")`` connects as a
    client to torchrun's store instead of serving its own, and waits forever for a server on that port.
    """
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if k not in LAUNCHER_VARIABLES and not k.startswith("TORCHELASTIC_")}


def main_guard(main: Callable[[], int]) -> None:
    """Run ``main`` and exit with its code; an uncaught exception is printed as ``FATAL ...`` and re-raised."""
    try:
        code = main()
    except BaseException as error:
        rank_print(f"FATAL {type(error).__name__}: {error}")
        raise
    sys.exit(code)
