"""What one emulated launch knows (the world's rank, heap bases, the watchdog timeout) and which program a thread
runs; the errors the emulation raises.

Every program of a launch runs on a thread of its own (``executor.py``); :func:`current_program` tells the code the
program is running (the emulated device library, the memory hooks of the builder) which launch and program it
belongs to.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from triton_dist.runtime.context.wait_timeout import WaitTimeoutRecord


class EmulationError(RuntimeError):
    """A distributed kernel cannot run, or did something a GPU would stop it for, in the CPU emulation
    (``TRITON_INTERPRET=1``): the message names the kernel or primitive, the rank and what is wrong."""


class ProgramAborted(Exception):
    """Raised in a program's pending ``dl.wait`` once another program of its launch failed, so the launch ends with
    that program's error instead of waiting for the watchdog. Never reaches the user."""


@dataclass(frozen=True)
class EmulatedWaitTimeoutRecord(WaitTimeoutRecord):
    """A ``dl.wait`` of the emulation that outlived the watchdog's timeout (``WaitTimeoutError.record``)."""

    heap_offset: int = 0
    """The stuck flag's byte offset in the symmetric heap (the same on every rank)."""

    def message(self) -> str:
        """What a user needs to find the stuck wait: rank, kernel, program, which flag, what it held."""
        op = {"eq": "==", "ne": "!=", "ge": ">=", "gt": ">", "le": "<=", "lt": "<"}[self.comparison]
        return (
            f"triton_dist (CPU emulation): dl.wait timed out on rank {self.rank} in kernel {self.kernel!r}, program "
            f"{self.program_id}: flag {self.flag_index} of the awaited flags (i{self.flag_bits} at heap offset "
            f"{self.heap_offset}, address {self.flag_address:#x}) never satisfied flag {op} {self.expected} "
            f"(cmp={self.comparison!r}); the last value seen was {self.last_seen}, after {self.timeout_ns / 1e9:g} s "
            f"(TRITON_DIST_WAIT_TIMEOUT_S or init(wait_timeout_s=...)). A peer that never notified (a rank that did "
            f"not launch the kernel, mismatched epochs or wait values) leaves a wait like this"
        )


@dataclass
class Launch:
    """One launch of a distributed kernel on this rank, shared by the threads of its programs."""

    kernel: str
    rank: int
    world_size: int
    heap_size: int
    bases: np.ndarray
    """``bases[r]``: rank ``r``'s heap as mapped in this process (uint64), what ``dl.symm_at`` translates with."""
    grid: tuple[int, int, int]
    timeout_ns: int
    """The wait watchdog's timeout (0: waits never time out)."""
    local_rank: int = 0
    """This rank's rank among the ranks of its node (the context's ``local_rank``)."""
    local_num_ranks: int = 1
    """How many ranks its node holds (the context's ``local_num_ranks``)."""
    remote_bases: np.ndarray | None = None
    """``remote_bases[r]``: rank ``r``'s heap as NVSHMEM's one-sided primitives reach it from this process (every
    rank, those on other emulated nodes included: ``one_sided.remote_bases``); None: ``bases``."""
    aborted: threading.Event = field(default_factory=threading.Event)
    """Set when a program failed: the others' waits stop (``ProgramAborted``)."""
    errors: list[BaseException] = field(default_factory=list)
    poisoned: list[tuple[int, int]] = field(default_factory=list)
    """(target rank, heap offset) of each address outside the heap that ``dl.symm_at`` poisoned (``heap_check``)."""
    visibility: Any = None
    """The stale-read mode's state (``visibility.Visibility``), or None (loads see memory as it is)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, error: BaseException) -> None:
        """Record a program's error and stop the launch's waits."""
        with self.lock:
            self.errors.append(error)
        self.aborted.set()

    def first_error(self) -> BaseException | None:
        """The first error a program raised (not counting waits stopped because of it)."""
        with self.lock:
            for error in self.errors:
                if not isinstance(error, ProgramAborted):
                    return error
            return self.errors[0] if self.errors else None

    def heap_offsets(self, addresses: np.ndarray, rank: int | None = None) -> np.ndarray:
        """Byte offsets of ``addresses`` (uint64) in ``rank``'s heap (default this rank's), as int64."""
        base = self.bases[self.rank if rank is None else rank]
        return (addresses.astype(np.uint64) - base).view(np.int64)

    def owner(self, address: int) -> int | None:
        """The rank whose heap mapping holds ``address``, or None."""
        for rank, base in enumerate(self.bases.tolist()):
            if base <= address < base + self.heap_size:
                return rank
        return None


@dataclass
class Program:
    """The program a thread runs: its launch, grid index and linear id, the primitive being emulated."""

    launch: Launch
    index: tuple[int, int, int]
    primitive: str = "dl primitive"
    clock: np.ndarray | None = None
    """The program's vector clock in the stale-read mode (``visibility``)."""

    @property
    def program_id(self) -> int:
        """``x + y * nx + z * nx * ny`` (what the GPU watchdog reports as the program)."""
        x, y, z = self.index
        nx, ny, _ = self.launch.grid
        return x + y * nx + z * nx * ny

    def where(self) -> str:
        """``rank 1, kernel 'ring', program 3`` for messages."""
        return f"rank {self.launch.rank}, kernel {self.launch.kernel!r}, program {self.program_id}"


_local = threading.local()


def current_program() -> Program | None:
    """The program this thread runs, or None outside an emulated launch."""
    return getattr(_local, "program", None)


def set_current_program(program: Program | None) -> None:
    """Make this thread run ``program`` (None: no program)."""
    _local.program = program
