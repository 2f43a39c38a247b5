"""Shared host code for the examples and GPU checks: torchrun setup, rank-tagged logs, timing, pass/fail tally.

Run scripts that use it with ``torchrun --nproc-per-node=N script.py``; torchrun puts the script's directory on
``sys.path``, so ``from common import ...`` works from ``examples/``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.runtime.world.settings import resolve_timeout
from triton_dist.runtime.world.stream_sync import synchronize_stream

_START = time.monotonic()


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0))


def log(message: str) -> None:
    """Print ``message`` tagged with the rank and seconds since start (every rank)."""
    print(f"[{time.monotonic() - _START:7.2f}s rank {rank()}] {message}", flush=True)


def log0(message: str) -> None:
    """Print ``message`` on rank 0 only."""
    if rank() == 0:
        log(message)


def setup(heap_size: int | str = "1G", timeout_s: float | None = None) -> rt.World:
    """Bind this process to GPU ``$LOCAL_RANK``, start NCCL and triton_dist; returns the world.

    ``timeout_s`` bounds host-side waits (default ``$TRITON_DIST_TIMEOUT_S`` or 300 s); NCCL gets twice that.
    """
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if not torch.cuda.is_available() or torch.cuda.device_count() <= local_rank:
        found = torch.cuda.device_count()
        raise SystemExit(f"this script needs a GPU per rank (LOCAL_RANK={local_rank}, {found} GPUs visible)")
    torch.cuda.set_device(local_rank)
    timeout_s = resolve_timeout(timeout_s)
    dist.init_process_group(
        "nccl", device_id=torch.device("cuda", local_rank), timeout=timedelta(seconds=2 * timeout_s)
    )
    world = rt.init(heap_size=heap_size, timeout_s=timeout_s)
    log(
        f"initialized: {world.world_size} ranks, {torch.cuda.get_device_name()} (cuda:{local_rank}), "
        f"heap {world.heap.heap_size >> 20} MiB at {world.heap.bases[world.rank]:#x}"
    )
    return world


def teardown() -> None:
    rt.finalize()
    if dist.is_initialized():
        dist.destroy_process_group()


class Checks:
    """A tally of named pass/fail results; ``exit_code`` is non-zero if any check failed on any rank."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        if ok:
            self.passed += 1
            log(f"PASS {name}{': ' + detail if detail else ''}")
        else:
            self.failed.append(name)
            log(f"FAIL {name}{': ' + detail if detail else ''}")
        return ok

    def run(self, name: str, body: Callable[[], None]) -> None:
        """Run ``body``; an exception counts as a failure of ``name`` (and is logged), not a crash."""
        try:
            body()
        except (TimeoutError, dist.DistBackendError):
            raise  # a rank is stuck or gone: later collectives would only hang
        except Exception as error:  # noqa: BLE001 (report and go on to the next check)
            self.check(name, False, f"raised {type(error).__name__}: {error}")

    def exit_code(self) -> int:
        failures = torch.tensor([len(self.failed)], device="cuda")
        dist.all_reduce(failures)
        total = int(failures.item())
        log(f"{self.passed} passed, {len(self.failed)} failed here; {total} failures over all ranks")
        return 1 if total else 0


def sync(what: str = "device work") -> None:
    """Wait for this rank's current stream, raising TimeoutError (not hanging) past the runtime's timeout."""
    world = rt.current_world()
    synchronize_stream(world.device, world.timeout_s, f"{what} on rank {world.rank}")


def max_over_ranks(value: float) -> float:
    tensor = torch.tensor([value], dtype=torch.float64, device="cuda")
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


def time_us(launch: Callable[[], None], iters: int = 20, warmup: int = 3, sync_ranks: bool = True) -> float:
    """Median microseconds of ``launch()`` on this rank, CUDA events around each call.

    With ``sync_ranks`` every call is preceded by ``barrier_on_device()``, so all ranks start each call together
    and a rank's time does not include waiting for a late peer to launch.
    """
    for _ in range(warmup):
        if sync_ranks:
            rt.barrier_on_device()
        launch()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for start, end in zip(starts, ends, strict=True):
        if sync_ranks:
            rt.barrier_on_device()
        start.record()
        launch()
        end.record()
    rt.barrier()
    return statistics.median(start.elapsed_time(end) * 1000.0 for start, end in zip(starts, ends, strict=True))


def main_guard(main: Callable[[], int]) -> None:
    """Run ``main`` and exit with its code; an uncaught exception exits non-zero after logging it."""
    try:
        code = main()
    except BaseException as error:
        log(f"FATAL {type(error).__name__}: {error}")
        raise
    sys.exit(code)
