"""Heap bounds in the emulation: ``dl.symm_at`` of an address outside the heap, and any access through it.

On a GPU the primitives' guards stop a kernel whose scalar pointer lies outside the symmetric heap; the elements of
a tensor of pointers are checked only with ``TRITON_DIST_DEBUG=1``, because lanes a later ``mask`` turns off may
legitimately point past the heap. The emulation checks every element, without refusing those lanes:

- a scalar ``ptr`` of ``dl.symm_at`` outside this rank's heap is an ``EmulationError`` at once;
- an element of a tensor ``ptr`` outside the heap becomes a *poisoned* address in the result: a non-canonical
  address (``POISON_TAG`` in its top 16 bits; no process can map it) that refers to an entry of the launch's table
  (the element's heap offset and the target rank) and moves with the pointer arithmetic applied to it afterwards.
  Every load, store or atomic of the launch refuses a poisoned address in a lane its mask keeps, with an
  ``EmulationError`` naming the primitive, the rank and the offset; lanes masked off are never touched, as on a GPU.
"""

from __future__ import annotations

import numpy as np

from triton_dist.runtime.emulation.state import EmulationError, Program, current_program

POISON_TAG = 0xDEAD
"""Top 16 bits of a poisoned address (non-canonical on x86-64 and AArch64: never a mapped address)."""
_ENTRY_SHIFT = 24
_DRIFT_BIAS = 1 << (_ENTRY_SHIFT - 1)
"""The low 24 bits of a poisoned address start at this value; the pointer arithmetic applied after ``dl.symm_at``
moves them (by less than 8 MiB, or the address is reported with the wrong offset, never as inside the heap)."""


def poison(program: Program, offsets: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Poisoned addresses (uint64) for the heap ``offsets`` (int64) that ``dl.symm_at`` was asked to translate to
    rank ``target``: each refers to an entry of the launch's table, which keeps the offset and the rank."""
    launch = program.launch
    with launch.lock:
        first = len(launch.poisoned)
        launch.poisoned.extend(zip(target.tolist(), offsets.tolist(), strict=True))
    entries = np.arange(first, first + offsets.size, dtype=np.uint64) & np.uint64((1 << 24) - 1)
    return np.uint64(POISON_TAG << 48) | (entries << np.uint64(_ENTRY_SHIFT)) | np.uint64(_DRIFT_BIAS)


def _decode(program: Program, address: int) -> tuple[int, int]:
    """(target rank, heap offset) of a poisoned address."""
    entry = (address >> _ENTRY_SHIFT) & ((1 << 24) - 1)
    target, offset = program.launch.poisoned[entry]
    return target, offset + (address & ((1 << _ENTRY_SHIFT) - 1)) - _DRIFT_BIAS


def outside(program: Program, addresses: np.ndarray) -> np.ndarray:
    """Which of ``addresses`` (uint64) lie outside this rank's heap."""
    offsets = program.launch.heap_offsets(addresses)
    return (offsets < 0) | (offsets >= program.launch.heap_size)


def describe_outside(program: Program, primitive: str, name: str, address: int) -> str:
    """The message for ``name`` of ``primitive`` at ``address``, outside this rank's heap."""
    launch = program.launch
    offset = int(launch.heap_offsets(np.array([address], dtype=np.uint64))[0])
    return (
        f"triton_dist: {primitive} on {program.where()}: {name} is at heap offset {offset} (address {address:#x}), "
        f"outside this rank's symmetric heap [0, {launch.heap_size}): allocate it with triton_dist.empty/zeros/..."
    )


def check_access(addresses: np.ndarray, mask: np.ndarray | None, what: str) -> None:
    """Raise ``EmulationError`` if a lane that ``mask`` keeps (all lanes without one) has a poisoned address."""
    program = current_program()
    if program is None:
        return
    flat = np.atleast_1d(np.asarray(addresses)).astype(np.uint64, copy=False).ravel()
    tagged = (flat >> np.uint64(48)) == np.uint64(POISON_TAG)
    if mask is not None:
        tagged &= np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(addresses)).ravel()
    if not tagged.any():
        return
    target, offset = _decode(program, int(flat[tagged][0]))
    raise EmulationError(
        f"triton_dist: dl.symm_at on {program.where()}: a {what} through the address it returned for rank {target} "
        f"is at heap offset {offset}, outside the symmetric heap [0, {program.launch.heap_size}) (the pointer given "
        "to dl.symm_at was not in this rank's heap)"
    )
