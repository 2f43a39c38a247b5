"""The stale-read mode of the emulation: ``TRITON_DIST_EMULATE_VISIBILITY=happens-before``.

CPU memory is coherent and, on x86, strongly ordered, so an emulated kernel that reads a peer's data without
synchronizing usually reads it anyway. In this mode a load of heap memory that another program (of any rank) stored
during the launch returns the stored value only if the store *happens before* the load: the writer ``dl.notify``-ed
(a release) after the store, and the reader's acquire ``dl.wait`` observed that flag (transitively). Otherwise the
load returns the value the memory held before the launch. Everything is visible once the launch has returned.

How: vector clocks over the programs of the launch, on every rank (actor ``rank * MAX_PROGRAMS + program``).

- A program's own clock starts at 1 and advances at each release. A store to any rank's heap appends, per element,
  a record (element, writer, writer's clock, the element's value before the store) to this rank's *log*.
- A ``dl.notify`` appends a release record (the flag, the writer's vector clock) before it writes the flag; a
  ``dl.wait`` with ``semantic="acquire"`` joins, once its flags pass, the clocks of every release recorded on them.
- A load takes, for each element, the records of the launch on that element: if the reader's clock of a record's
  writer is below the record's clock, the store is invisible and the element reads the value the first record
  saved (its value before the launch's first store to it).

The logs are shared-memory files, one per rank, mapped by every rank (created collectively at the first launch in
this mode); records carry the launch's sequence number, so a rank already in its next launch ignores old ones.
"""

from __future__ import annotations

import mmap
import os
import threading
import uuid
from dataclasses import dataclass

import numpy as np
import torch.distributed as dist

from triton_dist.runtime.emulation.state import EmulationError, Launch, Program
from triton_dist.runtime.heap.shared_file import shared_dir

VISIBILITY_ENV = "TRITON_DIST_EMULATE_VISIBILITY"
"""``happens-before``: the stale-read mode; unset, empty or ``coherent``: loads see memory as it is."""
MODES = ("coherent", "happens-before")
MAX_PROGRAMS = 64
"""Programs per launch and rank that the mode's vector clocks have room for."""
MAX_RANKS = 8
MAX_ACTORS = MAX_PROGRAMS * MAX_RANKS
MAX_STORES = 1 << 18
"""Element stores one rank may make in one launch in this mode (keep the sizes small)."""
MAX_RELEASES = 1 << 12

_HEADER = np.dtype([("seq", np.int64), ("stores", np.int64), ("releases", np.int64), ("pad", np.int64, 5)])
_STORE = np.dtype([("key", np.int64), ("actor", np.int64), ("clock", np.int64), ("old", np.uint64), ("seq", np.int64)])
_RELEASE = np.dtype([("key", np.int64), ("seq", np.int64), ("clock", np.int64, MAX_ACTORS)])
_BYTES = _HEADER.itemsize + MAX_STORES * _STORE.itemsize + MAX_RELEASES * _RELEASE.itemsize
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def mode() -> str:
    """The mode ``$TRITON_DIST_EMULATE_VISIBILITY`` asks for (read at each launch)."""
    value = os.environ.get(VISIBILITY_ENV, "").strip().lower() or "coherent"
    if value not in MODES:
        raise ValueError(f"${VISIBILITY_ENV} must be one of {list(MODES)}, got {value!r}")
    return value


@dataclass
class _Log:
    header: np.ndarray
    stores: np.ndarray
    releases: np.ndarray


def _view(buffer: mmap.mmap) -> _Log:
    header = np.frombuffer(buffer, dtype=_HEADER, count=1)
    offset = _HEADER.itemsize
    stores = np.frombuffer(buffer, dtype=_STORE, count=MAX_STORES, offset=offset)
    offset += MAX_STORES * _STORE.itemsize
    releases = np.frombuffer(buffer, dtype=_RELEASE, count=MAX_RELEASES, offset=offset)
    return _Log(header, stores, releases)


class Logs:
    """Every rank's log, mapped in this process; this rank's is the one it appends to."""

    def __init__(self, group: dist.ProcessGroup, rank: int, world_size: int) -> None:
        path = os.path.join(shared_dir(), f"triton_dist-visibility-{uuid.uuid4().hex}-{rank}")
        with open(path, "wb") as file:
            file.truncate(_BYTES)  # sparse: only the records written take memory
        paths: list[str | None] = [None] * world_size
        dist.all_gather_object(paths, path, group=group)
        self._maps = []
        for peer_path in paths:
            with open(str(peer_path), "r+b") as file:
                self._maps.append(mmap.mmap(file.fileno(), _BYTES))
        dist.barrier(group=group)
        os.unlink(path)
        self.logs = [_view(buffer) for buffer in self._maps]
        self.mine = self.logs[rank]
        self.lock = threading.Lock()


_logs: Logs | None = None
_logs_world: object = None


def logs_for(launch: Launch, group: dist.ProcessGroup) -> Logs:
    """The logs of ``launch``'s world (created, collectively, at the first launch in this mode)."""
    global _logs, _logs_world
    if _logs is None or _logs_world is not group:
        if launch.world_size > MAX_RANKS:
            raise EmulationError(f"{VISIBILITY_ENV}=happens-before supports at most {MAX_RANKS} ranks")
        _logs, _logs_world = Logs(group, launch.rank, launch.world_size), group
    return _logs


class Visibility:
    """The happens-before state of one launch on this rank."""

    def __init__(self, launch: Launch, logs: Logs, seq: int) -> None:
        self.launch = launch
        self.logs = logs
        self.seq = seq
        with logs.lock:
            logs.mine.header["stores"] = 0
            logs.mine.header["releases"] = 0
            logs.mine.header["seq"] = seq

    # Actors and clocks ------------------------------------------------------------------------------------------

    def actor(self, program: Program) -> int:
        if program.program_id >= MAX_PROGRAMS:
            raise EmulationError(
                f"{VISIBILITY_ENV}=happens-before: {program.where()} is beyond the {MAX_PROGRAMS} programs per rank "
                "its vector clocks hold; launch a smaller grid"
            )
        return self.launch.rank * MAX_PROGRAMS + program.program_id

    def clock(self, program: Program) -> np.ndarray:
        """``program``'s vector clock (its own entry starts at 1)."""
        clock = program.clock
        if clock is None:
            clock = np.zeros(MAX_ACTORS, dtype=np.int64)
            clock[self.actor(program)] = 1
            program.clock = clock
        return clock

    def _keys(self, addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(keys, in_heap) of ``addresses``: ``rank << 40 | offset`` of those in some rank's heap."""
        launch = self.launch
        keys = np.full(addresses.shape, -1, dtype=np.int64)
        for rank in range(launch.world_size):
            offsets = launch.heap_offsets(addresses, rank)
            inside = (offsets >= 0) & (offsets < launch.heap_size)
            keys[inside] = (rank << 40) | offsets[inside]
        return keys, keys >= 0

    # Events -----------------------------------------------------------------------------------------------------

    def store(self, program: Program, addresses: np.ndarray, mask: np.ndarray, old: np.ndarray) -> None:
        """Record the stores of the lanes ``mask`` keeps (``old``: their values before, as uint64)."""
        keys, inside = self._keys(addresses)
        keep = inside & mask
        count = int(keep.sum())
        if count == 0:
            return
        mine = self.logs.mine
        actor, clock = self.actor(program), self.clock(program)[self.actor(program)]
        with self.logs.lock:
            first = int(mine.header["stores"][0])
            if first + count > MAX_STORES:
                raise EmulationError(
                    f"{VISIBILITY_ENV}=happens-before: {program.where()} stored more than {MAX_STORES} elements in "
                    "one launch; emulate smaller sizes"
                )
            records = mine.stores[first : first + count]
            records["key"] = keys[keep]
            records["actor"] = actor
            records["clock"] = clock
            records["old"] = old[keep]
            records["seq"] = self.seq
            mine.header["stores"] = first + count

    def release(self, program: Program, flag_addresses: np.ndarray) -> None:
        """A ``dl.notify`` of ``program`` on the flags at ``flag_addresses``: record its clock, then advance it."""
        keys, inside = self._keys(flag_addresses)
        clock = self.clock(program)
        mine = self.logs.mine
        with self.logs.lock:
            first = int(mine.header["releases"][0])
            if first + int(inside.sum()) > MAX_RELEASES:
                raise EmulationError(
                    f"{VISIBILITY_ENV}=happens-before: more than {MAX_RELEASES} notifies in one launch on rank "
                    f"{self.launch.rank}"
                )
            for index, key in enumerate(keys[inside].tolist()):
                record = mine.releases[first + index]
                record["key"] = key
                record["seq"] = self.seq
                record["clock"] = clock
            mine.header["releases"] = first + int(inside.sum())
        clock[self.actor(program)] += 1

    def acquire(self, program: Program, flag_addresses: np.ndarray) -> None:
        """A ``dl.wait`` of ``program`` whose flags passed: join the clocks released on them."""
        keys, _ = self._keys(flag_addresses)
        clock = self.clock(program)
        for log in self.logs.logs:
            count = int(log.header["releases"][0])
            records = log.releases[:count]
            chosen = records[(records["seq"] == self.seq) & np.isin(records["key"], keys)]
            if chosen.size:
                np.maximum(clock, chosen["clock"].max(axis=0), out=clock)

    def stale(self, program: Program, addresses: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lanes, values): the lanes of a load whose element a store invisible to ``program`` wrote during the
        launch, and the values (uint64) the element held before the launch."""
        keys, inside = self._keys(addresses)
        stale = np.zeros(addresses.shape, dtype=bool)
        values = np.zeros(addresses.shape, dtype=np.uint64)
        wanted = inside & mask
        if not wanted.any():
            return stale, values
        clock = self.clock(program)
        actor = self.actor(program)
        for log in reversed(self.logs.logs):  # lower ranks last: their first records win the old values
            count = int(log.header["stores"][0])
            records = log.stores[:count]
            records = records[(records["seq"] == self.seq) & np.isin(records["key"], keys[wanted])]
            if records.size == 0:
                continue
            hidden = (records["actor"] != actor) & (clock[records["actor"]] < records["clock"])
            earliest = {}
            for key, old in zip(records["key"][::-1].tolist(), records["old"][::-1].tolist(), strict=True):
                earliest[key] = old  # the first record of an element, in log order
            hidden_keys = set(records["key"][hidden].tolist())
            for lane in np.flatnonzero(wanted.ravel()).tolist():
                key = int(keys.ravel()[lane])
                if key in hidden_keys or (stale.ravel()[lane] and key in earliest):
                    stale.ravel()[lane] = True
                    values.ravel()[lane] = earliest[key]
        return stale, values


def as_bits(values: np.ndarray) -> np.ndarray:
    """``values`` as uint64 bit patterns (their own width, zero-extended)."""
    return np.ascontiguousarray(values).view(_UNSIGNED[values.dtype.itemsize]).astype(np.uint64)


def from_bits(bits: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Bit patterns (uint64) back to ``dtype``."""
    return bits.astype(_UNSIGNED[np.dtype(dtype).itemsize]).view(dtype)
