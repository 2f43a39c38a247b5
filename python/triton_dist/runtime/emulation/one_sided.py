"""NVSHMEM's one-sided primitives in the CPU emulation, and worlds laid out over emulated nodes.

``dl.put_signal``, ``dl.get`` and ``dl.signal_wait`` emit calls of the NVSHMEM wrapper library (``abi.
put_signal_symbol`` and friends); ``device_library.call`` hands them to :func:`call`:

- ``put_signal_{set,add}(dest, src, nbytes, signal_addr, signal, rank)``: copies ``nbytes`` bytes from ``src``
  (any memory of this process) to ``dest``'s offset in ``rank``'s heap, then stores (``set``) or atomically adds
  (``add``) the 64-bit ``signal`` at ``signal_addr``'s offset there, with release ordering (as NVSHMEM delivers the
  data before the signal);
- ``get(dest, src, nbytes, rank)``: copies ``nbytes`` bytes from ``src``'s offset in ``rank``'s heap to ``dest``;
- ``signal_wait_{cmp}(signal_addr, value)``: polls the int64 at ``signal_addr`` in this rank's heap with acquire
  loads until it passes the **unsigned** test, under the watchdog's timeout (``WaitTimeoutError``), as ``dl.wait``.

They reach a rank through its heap as NVSHMEM would, not through the load/store mapping: :func:`remote_bases`,
which for a world made by :func:`emulate_nodes` includes the ranks of the other nodes that ``dl.symm_at`` refuses.
``dest``, ``src`` (get) and the signal must lie in this rank's heap, and the rank in the world, or the call is an
``EmulationError`` naming the primitive, the rank and the offset. The stale-read mode (``visibility``) does not
model the bytes a put or get moves: they are visible at once.

:func:`emulate_nodes` makes the current CPU world look like ``nodes`` nodes of torchrun's layout with an NVSHMEM
heap: the same heap memory, the layout, ``backend="nvshmem"``, and no load/store mapping of the other nodes' heaps
(their bases 0, as NVSHMEM maps them), so ops pick their inter-node paths and a ``dl.symm_at`` across nodes fails
as it would on GPUs.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from triton.runtime.interpreter import TensorHandle

from triton_dist import abi
from triton_dist.runtime.context.wait_timeout import WaitTimeoutError
from triton_dist.runtime.emulation.state import EmulatedWaitTimeoutRecord, EmulationError, Program, ProgramAborted

PUT_SIGNAL = {abi.put_signal_symbol(op): op for op in abi.SIG_OPS}
SIGNAL_WAIT = {abi.signal_wait_symbol(cmp): cmp for cmp in abi.COMPARISONS}
SYMBOLS = frozenset([*PUT_SIGNAL, *SIGNAL_WAIT, abi.NVSHMEM_GET])
"""The NVSHMEM wrapper functions this module emulates."""

_TESTS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "ge": np.greater_equal,
    "gt": np.greater,
    "le": np.less_equal,
    "lt": np.less,
}
_POLL_SLEEP_S = (0.0, 1e-5, 1e-4, 1e-3)


@dataclass(frozen=True)
class NodeEmulation:
    """What :func:`emulate_nodes` keeps with the heap mapping of its world: every rank's heap as mapped in this
    process (NVSHMEM's view), and the one-node mapping whose views keep those mappings alive."""

    bases: tuple[int, ...]
    keepalive: object


def remote_bases(world: Any) -> np.ndarray:
    """``bases[r]``: rank ``r``'s heap as the one-sided primitives reach it from this process (uint64): every rank,
    including those on other emulated nodes, whose load/store base is 0."""
    keepalive = world.heap.mapping.keepalive
    bases = keepalive.bases if isinstance(keepalive, NodeEmulation) else world.heap.bases
    return np.array(bases, dtype=np.uint64)


def emulate_nodes(nodes: int) -> Any:
    """Make the current world (``init(device="cpu")`` under ``TRITON_INTERPRET=1``, one node) ``nodes`` nodes of
    ``world_size / nodes`` consecutive ranks on an emulated NVSHMEM heap, and return it. Every rank calls it at the
    same point, before allocating anything it keeps (the new world's heap starts empty); ``finalize()`` ends it.

    Raises RuntimeError without an initialized CPU world, and ValueError when ``nodes`` does not divide the world
    size.
    """
    from triton_dist.runtime.heap.mapping import HeapMapping
    from triton_dist.runtime.heap.symmetric_heap import SymmetricHeap
    from triton_dist.runtime.world import lifecycle
    from triton_dist.runtime.world.topology import NodeLayout

    world = lifecycle._world
    if world is None or world.device.type != "cpu" or world.num_nodes != 1:
        raise RuntimeError("emulate_nodes: call triton_dist.init(device='cpu') first (a one-node CPU world)")
    size = world.world_size
    if nodes < 1 or size % nodes:
        raise ValueError(f"emulate_nodes: {nodes} nodes do not divide {size} ranks into equal nodes")
    local = size // nodes
    layout = NodeLayout(tuple(tuple(range(m * local, (m + 1) * local)) for m in range(nodes)))
    old = world.heap.mapping
    mine = layout.node_of(world.rank)
    peers = tuple(view if layout.node_of(peer) == mine else None for peer, view in enumerate(old.peers))
    mapping = HeapMapping(
        old.rank,
        old.world_size,
        old.heap_size,
        old.device,
        peers,
        keepalive=NodeEmulation(tuple(old.bases), old),
        backend="nvshmem",
    )
    heap = SymmetricHeap(mapping)
    flags = heap.empty((size,), torch.int32)
    flags.zero_()
    emulated = lifecycle.World(
        group=world.group,
        heap=heap,
        timeout_s=world.timeout_s,
        barrier_flags=flags,
        backend="nvshmem",
        layout=layout,
    )
    lifecycle._world = emulated
    # The replaced world stops referring to the process group, as finalize() leaves a world: the group is then freed
    # when it is destroyed (testing.teardown warns about a group kept alive).
    world.group = None  # type: ignore[assignment]
    lifecycle.barrier()
    return emulated


def _scalar(handle: TensorHandle) -> int:
    return int(np.atleast_1d(handle.data).astype(np.int64)[0])


def _address(handle: TensorHandle) -> int:
    return int(np.atleast_1d(handle.data).astype(np.int64).view(np.uint64)[0])


def _offset(program: Program, address: int, nbytes: int, what: str, align: int = 1) -> int:
    """``address``'s offset in this rank's heap, checked: ``nbytes`` bytes from it lie in the heap, aligned."""
    launch = program.launch
    offset = address - int(launch.bases[launch.rank])
    if offset < 0 or offset + nbytes > launch.heap_size or offset % align:
        raise EmulationError(
            f"triton_dist: {program.primitive} on {program.where()}: {what} ({nbytes} bytes at heap offset {offset}) "
            f"does not lie in this rank's symmetric heap [0, {launch.heap_size})"
            + (f" at a multiple of {align} bytes" if align > 1 else "")
        )
    return offset


def _peer_base(program: Program, rank: int, bases: np.ndarray) -> int:
    launch = program.launch
    if not 0 <= rank < launch.world_size:
        raise EmulationError(
            f"triton_dist: {program.primitive} on {program.where()}: rank {rank} is outside the world "
            f"[0, {launch.world_size})"
        )
    return int(bases[rank])


def _put_signal(program: Program, op: str, args: list[TensorHandle], bases: np.ndarray) -> None:
    from triton._C.libtriton import interpreter as native

    dest, src, nbytes, signal_addr, signal, rank = args
    count = _scalar(nbytes)
    if count < 0:
        raise EmulationError(f"triton_dist: dl.put_signal on {program.where()}: nbytes={count} is negative")
    dest_offset = _offset(program, _address(dest), count, "dest")
    signal_offset = _offset(program, _address(signal_addr), 8, "the signal", align=8)
    base = _peer_base(program, _scalar(rank), bases)
    if count:
        ctypes.memmove(base + dest_offset, _address(src), count)
    target = np.array([base + signal_offset], dtype=np.uint64)
    value = np.array([_scalar(signal)], dtype=np.int64)
    rmw = native.RMW_OP.XCHG if op == "set" else native.RMW_OP.ADD
    native.atomic_rmw(rmw, target, value, np.ones(1, dtype=bool), native.MEM_SEMANTIC.RELEASE)


def _get(program: Program, args: list[TensorHandle], bases: np.ndarray) -> None:
    dest, src, nbytes, rank = args
    count = _scalar(nbytes)
    if count < 0:
        raise EmulationError(f"triton_dist: dl.get on {program.where()}: nbytes={count} is negative")
    src_offset = _offset(program, _address(src), count, "src")
    base = _peer_base(program, _scalar(rank), bases)
    if count:
        ctypes.memmove(_address(dest), base + src_offset, count)


def _signal_wait(program: Program, cmp: str, args: list[TensorHandle]) -> None:
    from triton_dist.runtime.emulation.device_library import read_flags

    launch = program.launch
    address = _address(args[0])
    offset = _offset(program, address, 8, "the signal", align=8)
    expected = np.array([_scalar(args[1])], dtype=np.int64).view(np.uint64)
    addresses = np.array([address], dtype=np.uint64)
    test = _TESTS[cmp]
    start = time.monotonic_ns()
    polls = 0
    while True:
        seen = read_flags(addresses, np.int64, acquire=True).view(np.uint64)
        if bool(test(seen, expected)[0]):
            return
        if launch.aborted.is_set():
            raise ProgramAborted()
        if launch.timeout_ns and time.monotonic_ns() - start > launch.timeout_ns:
            record = EmulatedWaitTimeoutRecord(
                kernel=launch.kernel,
                rank=launch.rank,
                program_id=program.program_id,
                flag_index=0,
                flag_address=address,
                expected=int(expected[0]),
                last_seen=int(seen[0]),
                comparison=cmp,
                flag_bits=64,
                timeout_ns=launch.timeout_ns,
                heap_offset=offset,
            )
            raise WaitTimeoutError(record)
        time.sleep(_POLL_SLEEP_S[min(polls // 64, len(_POLL_SLEEP_S) - 1)])
        polls += 1


def call(program: Program, symbol: str, args: list[TensorHandle]) -> None:
    """Run the NVSHMEM wrapper function ``symbol`` (one of :data:`SYMBOLS`) for ``program``."""
    launch = program.launch
    bases = launch.bases if launch.remote_bases is None else launch.remote_bases
    if symbol in PUT_SIGNAL:
        _put_signal(program, PUT_SIGNAL[symbol], args, bases)
    elif symbol == abi.NVSHMEM_GET:
        _get(program, args, bases)
    elif symbol in SIGNAL_WAIT:
        _signal_wait(program, SIGNAL_WAIT[symbol], args)
    else:
        raise EmulationError(f"triton_dist: the CPU emulation has no NVSHMEM function {symbol!r}")
