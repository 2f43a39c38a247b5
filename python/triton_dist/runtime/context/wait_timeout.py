"""The wait watchdog on the host: one record per loaded module in host-mapped pinned memory, its decoding, the error.

A kernel linked with the watchdog library (``TRITON_DIST_WAIT_TIMEOUT_S`` / ``init(wait_timeout_s=...)``) has the
global ``__triton_dist_wait_watchdog`` (``abi.WAIT_WATCHDOG_LAYOUT``): the timeout, and the device address of the
record that the first lane whose ``dl.wait`` outlived the timeout fills before the kernel traps
(``abi.WAIT_TIMEOUT_LAYOUT``). The installer gives every such module a record slot of its own here, so a written
record names its kernel. The slots are pinned host memory mapped into the device (``ModuleGlobals.host_mapped_alloc``):
the trap makes the CUDA / HIP context unusable, but the host still reads its own memory.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass

from triton_dist.abi import COMPARISONS, WAIT_TIMEOUT_BYTES, WAIT_TIMEOUT_LAYOUT, WAIT_TIMEOUT_WRITTEN

SLOT_BYTES = 64
"""Each module's record starts on its own 64-byte boundary (the record is 56 bytes, 8-byte aligned)."""
SLOTS_PER_CHUNK = 256
"""Records are allocated 256 at a time (16 KiB of pinned memory)."""

_COMPARISON_TEXT = {"eq": "==", "ne": "!=", "ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


@dataclass(frozen=True)
class WaitTimeoutRecord:
    """A written watchdog record, decoded, with the kernel of the module it belongs to."""

    kernel: str
    rank: int
    program_id: int
    flag_index: int
    flag_address: int
    expected: int
    last_seen: int
    comparison: str
    flag_bits: int
    timeout_ns: int

    def message(self) -> str:
        """What a user needs to find the stuck wait."""
        op = _COMPARISON_TEXT.get(self.comparison, self.comparison)
        return (
            f"triton_dist: dl.wait timed out on rank {self.rank} in kernel {self.kernel!r}, program {self.program_id}: "
            f"flag {self.flag_index} of the awaited flags (i{self.flag_bits} at {self.flag_address:#x}) never "
            f"satisfied flag {op} {self.expected} (cmp={self.comparison!r}); the last value seen was {self.last_seen}, "
            f"after {self.timeout_ns / 1e9:g} s (TRITON_DIST_WAIT_TIMEOUT_S). A peer that never notified (a dead "
            f"rank, a skipped launch, mismatched epochs or wait values) leaves a wait like this; the kernel was "
            f"stopped with a trap, so this process's GPU context is unusable now"
        )


class WaitTimeoutError(RuntimeError):
    """A ``dl.wait`` outlived the watchdog's timeout; ``record`` says which wait, where, and what it saw."""

    def __init__(self, record: WaitTimeoutRecord) -> None:
        super().__init__(record.message())
        self.record = record


def decode_record(payload: bytes, kernel: str) -> WaitTimeoutRecord | None:
    """The record in ``payload`` (``abi.WAIT_TIMEOUT_LAYOUT``) if it is written (state 2), else None."""
    if len(payload) != WAIT_TIMEOUT_BYTES:
        raise ValueError(f"a watchdog record is {WAIT_TIMEOUT_BYTES} bytes, got {len(payload)}")
    state, rank, program_id, index, address, expected, last_seen, cmp, bits, timeout_ns = WAIT_TIMEOUT_LAYOUT.unpack(
        payload
    )
    if state != WAIT_TIMEOUT_WRITTEN:
        return None
    comparison = COMPARISONS[cmp] if 0 <= cmp < len(COMPARISONS) else f"<unknown comparison {cmp}>"
    mask = (1 << 64) - 1
    return WaitTimeoutRecord(
        kernel=kernel,
        rank=rank,
        program_id=program_id,
        flag_index=index,
        flag_address=address & mask,
        expected=expected,
        last_seen=last_seen,
        comparison=comparison,
        flag_bits=bits,
        timeout_ns=timeout_ns & mask,
    )


def _read_host(address: int, size: int) -> bytes:
    return ctypes.string_at(address, size)


class RecordSlots:
    """The process's watchdog records: a slot per loaded module, in chunks of host-mapped pinned memory.

    ``allocate(size) -> (host address, device address)`` is the driver's ``host_mapped_alloc``; ``read(address,
    size)`` reads host memory (tests substitute both).
    """

    def __init__(
        self,
        allocate: Callable[[int], tuple[int, int]],
        read: Callable[[int, int], bytes] = _read_host,
    ) -> None:
        self._allocate = allocate
        self._read = read
        self._lock = threading.Lock()
        self._chunks: list[tuple[int, int]] = []
        self._kernels: list[str] = []

    def assign(self, kernel: str) -> int:
        """A fresh zeroed record for a module of ``kernel``: its device address (what the module's
        ``__triton_dist_wait_watchdog`` points at)."""
        with self._lock:
            slot = len(self._kernels)
            chunk, within = divmod(slot, SLOTS_PER_CHUNK)
            if chunk == len(self._chunks):
                self._chunks.append(self._allocate(SLOTS_PER_CHUNK * SLOT_BYTES))
            self._kernels.append(kernel)
            return self._chunks[chunk][1] + within * SLOT_BYTES

    def written(self) -> list[WaitTimeoutRecord]:
        """Every written record, in the order the modules were loaded."""
        with self._lock:
            kernels = list(self._kernels)
            chunks = list(self._chunks)
        records = []
        for slot, kernel in enumerate(kernels):
            chunk, within = divmod(slot, SLOTS_PER_CHUNK)
            payload = self._read(chunks[chunk][0] + within * SLOT_BYTES, WAIT_TIMEOUT_BYTES)
            record = decode_record(payload, kernel)
            if record is not None:
                records.append(record)
        return records

    def raise_if_written(self, cause: BaseException | None = None) -> None:
        """Raise ``WaitTimeoutError`` for the first written record (from ``cause``); return if there is none."""
        records = self.written()
        if records:
            raise WaitTimeoutError(records[0]) from cause
