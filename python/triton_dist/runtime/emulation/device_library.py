"""The device library of docs/abi.md, in Python over the interpreter's numpy values, for the CPU emulation.

The primitives of ``triton_dist.language`` run unchanged in the emulation: they check their arguments and emit
calls of the library's functions (``tl.extern_elementwise`` under the library name ``triton_dist``), which the
emulation's builder (``builder.py``) hands to :func:`call`. Each function gets the interpreter's ``TensorHandle`` s
(numpy arrays, broadcast to one shape) and returns one:

- ``rank`` / ``num_ranks`` / ``heap_size``: from the world of ``triton_dist.init(device="cpu")``; ``local_rank`` /
  ``local_num_ranks`` from its layout, ``node`` / ``num_nodes`` divided by ``local_num_ranks`` as on a GPU.
- ``symm_at(addr, rank)``: ``addr - bases[me] + bases[rank]`` over the heap files every rank maps; a rank outside
  the world, or one whose heap has no mapping here (base 0), is an ``EmulationError``.
- ``heap_offset(addr)``: ``addr - bases[me]`` (the primitives' guards compare it with ``heap_size``).
- ``consume_token(value, token)``: ``value``.
- ``notify_{set,add}_*(remote, me, signal)``: one atomic exchange / add with release ordering on the flag.
- ``wait_*(addr, n, value)``: polls the ``n`` flags with acquire loads until each passes the test, sleeping
  between polls so the other programs run; the watchdog's timeout raises ``WaitTimeoutError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from triton._C.libtriton import interpreter as _native
from triton.runtime.interpreter import TensorHandle

from triton_dist import abi
from triton_dist.runtime.context.wait_timeout import WaitTimeoutError
from triton_dist.runtime.emulation import one_sided
from triton_dist.runtime.emulation.state import (
    EmulatedWaitTimeoutRecord,
    EmulationError,
    Program,
    ProgramAborted,
    current_program,
)

_TESTS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "ge": np.greater_equal,
    "gt": np.greater,
    "le": np.less_equal,
    "lt": np.less,
}
_SIGNED = {"i32": np.int32, "i64": np.int64}
_NOTIFY = {
    abi.notify_symbol(op, scope, flag): (op, flag)
    for op in abi.SIG_OPS
    for scope in abi.COMM_SCOPES
    for flag in _SIGNED
}
_WAIT = {
    abi.wait_symbol(scope, semantic, cmp, flag): (semantic, cmp, flag)
    for scope in abi.SCOPES
    for semantic in abi.SEMANTICS
    for cmp in abi.COMPARISONS
    for flag in _SIGNED
}
POLL_SLEEP_S = (0.0, 1e-5, 1e-4, 1e-3)
"""Sleeps between a wait's polls: the first polls only yield to the other programs, later ones back off to 1 ms."""


def _program(symbol: str) -> Program:
    program = current_program()
    if program is None:
        raise EmulationError(
            f"triton_dist: {symbol} was called outside an emulated launch (the kernel was not recognized as one that "
            "calls triton_dist primitives: call them as dl.<primitive> through `import triton_dist.language as dl`)"
        )
    return program


def _handle(data: np.ndarray, dtype: Any) -> TensorHandle:
    return TensorHandle(np.ascontiguousarray(data), dtype.scalar)


def _addresses(handle: TensorHandle) -> np.ndarray:
    return np.atleast_1d(handle.data).astype(np.int64).view(np.uint64)


def check_ranks(program: Program, ranks: np.ndarray, what: str = "rank") -> None:
    """Refuse a rank outside the world, and a rank whose heap has no mapping in this process (base 0: on another
    node of an NVSHMEM world, where a GPU would fault), naming the primitive, this rank and the value."""
    launch = program.launch
    bad = (ranks < 0) | (ranks >= launch.world_size)
    if bad.any():
        raise EmulationError(
            f"triton_dist: {program.primitive} on {program.where()}: {what} {int(ranks[bad][0])} is outside the world "
            f"[0, {launch.world_size})"
        )
    unmapped = launch.bases[ranks] == 0
    if unmapped.any():
        raise EmulationError(
            f"triton_dist: {program.primitive} on {program.where()}: {what} {int(ranks[unmapped][0])} is not reachable "
            "by load/store (another node: its heap has no mapping in this process, its base in the context is 0); "
            "dl.symm_at / dl.notify reach the ranks of this node only"
        )


def _symm_at(program: Program, address: TensorHandle, rank: TensorHandle, ret: Any) -> TensorHandle:
    launch = program.launch
    ranks = np.atleast_1d(rank.data).astype(np.int64)
    if ranks.size == 1:
        check_ranks(program, ranks)
    else:
        # A tensor of ranks (dl.notify's): the lanes its mask turns off may name ranks beyond the world (a
        # tl.arange rounded up to a power of two); they are never accessed (the backend checked the others).
        ranks = np.where((ranks < 0) | (ranks >= launch.world_size), launch.rank, ranks)
    moved = _addresses(address) - launch.bases[launch.rank] + launch.bases[ranks]
    return _handle(moved.view(np.int64).reshape(np.broadcast_shapes(np.shape(address.data), np.shape(rank.data))), ret)


def _notify(program: Program, op: str, flag: str, remote: TensorHandle, signal: TensorHandle) -> None:
    launch = program.launch
    addresses = _addresses(remote)
    for address in addresses.tolist():
        owner = launch.owner(address)
        if owner is None or address + np.dtype(_SIGNED[flag]).itemsize > launch.bases[owner] + launch.heap_size:
            raise EmulationError(
                f"triton_dist: dl.notify on {program.where()}: the flag at {address:#x} is in no rank's symmetric heap"
            )
    values = np.broadcast_to(np.atleast_1d(signal.data).astype(_SIGNED[flag]), addresses.shape).copy()
    if launch.visibility is not None:
        launch.visibility.release(program, addresses)  # recorded before the flag is: a reader finds it
    rmw = _native.RMW_OP.XCHG if op == "set" else _native.RMW_OP.ADD
    _native.atomic_rmw(rmw, addresses, values, np.ones(addresses.shape, dtype=bool), _native.MEM_SEMANTIC.RELEASE)


def read_flags(addresses: np.ndarray, dtype: type, acquire: bool) -> np.ndarray:
    """The flags at ``addresses``, each read atomically (an atomic add of 0), acquire or relaxed."""
    semantic = _native.MEM_SEMANTIC.ACQUIRE if acquire else _native.MEM_SEMANTIC.RELAXED
    zeros: np.ndarray = np.zeros(addresses.shape, dtype=dtype)
    return _native.atomic_rmw(_native.RMW_OP.ADD, addresses, zeros, np.ones(addresses.shape, dtype=bool), semantic)


def _wait(
    program: Program,
    semantic: str,
    cmp: str,
    flag: str,
    address: TensorHandle,
    count: TensorHandle,
    value: TensorHandle,
) -> None:
    launch = program.launch
    dtype = _SIGNED[flag]
    size = np.dtype(dtype).itemsize
    first = int(_addresses(address)[0])
    n = int(np.atleast_1d(count.data)[0])
    offset = first - int(launch.bases[launch.rank])
    if n < 0 or offset < 0 or offset + n * size > launch.heap_size:
        raise EmulationError(
            f"triton_dist: dl.wait on {program.where()}: barrierPtrs at heap offset {offset} with numBarriers={n} "
            f"({size}-byte flags) does not lie in this rank's symmetric heap [0, {launch.heap_size})"
        )
    if n == 0:
        return
    addresses = np.uint64(first) + np.arange(n, dtype=np.uint64) * np.uint64(size)
    expected = np.atleast_1d(value.data).astype(dtype)[0]
    test = _TESTS[cmp]
    start = time.monotonic_ns()
    polls = 0
    while True:
        seen = read_flags(addresses, dtype, acquire=semantic == "acquire")
        passed = test(seen, expected)
        if passed.all():
            if launch.visibility is not None and semantic == "acquire":
                launch.visibility.acquire(program, addresses)
            return
        if launch.aborted.is_set():
            raise ProgramAborted()
        if launch.timeout_ns and time.monotonic_ns() - start > launch.timeout_ns:
            index = int(np.argmin(passed))
            record = EmulatedWaitTimeoutRecord(
                kernel=launch.kernel,
                rank=launch.rank,
                program_id=program.program_id,
                flag_index=index,
                flag_address=int(addresses[index]),
                expected=int(expected),
                last_seen=int(seen[index]),
                comparison=cmp,
                flag_bits=size * 8,
                timeout_ns=launch.timeout_ns,
                heap_offset=offset + index * size,
            )
            raise WaitTimeoutError(record)
        time.sleep(POLL_SLEEP_S[min(polls // 64, len(POLL_SLEEP_S) - 1)])
        polls += 1


def call(symbol: str, args: Sequence[TensorHandle], ret: Any) -> TensorHandle:
    """Run the library function ``symbol`` on ``args`` for the program of this thread; ``ret`` is its result type
    (an interpreter type, scalar or block)."""
    program = _program(symbol)
    launch = program.launch
    if symbol == abi.RANK:
        return _handle(np.array([launch.rank], dtype=np.int32), ret)
    if symbol == abi.NUM_RANKS:
        return _handle(np.array([launch.world_size], dtype=np.int32), ret)
    if symbol == abi.LOCAL_RANK:
        return _handle(np.array([launch.local_rank], dtype=np.int32), ret)
    if symbol == abi.LOCAL_NUM_RANKS:
        return _handle(np.array([launch.local_num_ranks], dtype=np.int32), ret)
    if symbol == abi.NODE:
        return _handle(np.array([launch.rank // launch.local_num_ranks], dtype=np.int32), ret)
    if symbol == abi.NUM_NODES:
        return _handle(np.array([launch.world_size // launch.local_num_ranks], dtype=np.int32), ret)
    if symbol == abi.HEAP_SIZE:
        return _handle(np.array([launch.heap_size], dtype=np.int64), ret)
    if symbol == abi.HEAP_OFFSET:
        return _handle(launch.heap_offsets(_addresses(args[0])).reshape(np.shape(args[0].data)), ret)
    if symbol == abi.SYMM_AT:
        return _symm_at(program, args[0], args[1], ret)
    if symbol == abi.CONSUME_TOKEN:
        return _handle(np.asarray(args[0].data).astype(np.int64), ret)
    zero = _handle(np.zeros(np.shape(args[0].data) if args else (1,), dtype=np.int32), ret)
    if symbol in _NOTIFY:
        _notify(program, *_NOTIFY[symbol], args[0], args[2])
        return zero
    if symbol in _WAIT:
        _wait(program, *_WAIT[symbol], args[0], args[1], args[2])
        return zero
    if symbol in one_sided.SYMBOLS:
        one_sided.call(program, symbol, list(args))
        return zero
    raise EmulationError(f"triton_dist: the CPU emulation has no device-library function {symbol!r}")
