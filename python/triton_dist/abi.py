"""The device-library ABI of docs/abi.md, on the Python side: the one home of every fact the frontend, the compiler
hook and the runtime share with the C++ lowering (``RuntimeContext.h``) and the built bitcode.

A test (``test/python/test_abi_agreement.py``) reads the built libraries and checks them against this module, so the
two sides cannot drift apart silently.

```
@__triton_dist_context = addrspace(1) externally_initialized global
    { i32 rank, i32 num_ranks, i64 heap_size, [256 x i64] heap_bases, i32 local_rank, i32 local_num_ranks }
                                                                                   ; 2072 bytes
```
"""

from __future__ import annotations

import struct

LIB_NAME = "triton_dist"
"""The ``extern_libs`` name Triton links the library under; every ABI symbol contains it (the AMD backend links a
library only when an unresolved symbol contains its name)."""

SYMBOL_PREFIX = "__triton_dist_"
CONTEXT_SYMBOL = "__triton_dist_context"
MAX_RANKS = 256
"""The length of the context's ``heap_bases`` array: the largest world size."""

HEAP_BASE_ALIGNMENT = 4096
"""Every heap base is page aligned (checked at ``init()``), so a translated pointer keeps its alignment."""

CONTEXT_LAYOUT = struct.Struct(f"<iiq{MAX_RANKS}qii")
"""rank (i32, offset 0), num_ranks (i32, offset 4; 0 = never filled), heap_size (i64 bytes, offset 8),
heap_bases[MAX_RANKS] (i64, offset 16 + 8 r), local_rank (i32, offset 2064: this rank's rank among the ranks of its
node), local_num_ranks (i32, offset 2068: how many ranks its node holds; 0 = never filled)."""
CONTEXT_BYTES = CONTEXT_LAYOUT.size
CONTEXT_HEAP_SIZE_OFFSET = 8
CONTEXT_HEAP_BASES_OFFSET = 16
CONTEXT_LOCAL_RANK_OFFSET = CONTEXT_HEAP_BASES_OFFSET + 8 * MAX_RANKS
CONTEXT_LOCAL_NUM_RANKS_OFFSET = CONTEXT_LOCAL_RANK_OFFSET + 4

WAIT_TIMEOUT_SYMBOL = "__triton_dist_wait_timeout"
"""The wait watchdog's record as a module global (addrspace 1, external, zero-initialized): in every module that
holds a wait watched with a compile-time timeout (``timeout_ns`` attribute or the lowering's ``wait-timeout-ns``
option). Neither device library defines it: the watchdog library records through ``WAIT_WATCHDOG_SYMBOL``'s
pointer instead, into a record of the same layout."""

WAIT_TIMEOUT_LAYOUT = struct.Struct("<iiiiqqqiiq")
"""state (i32, offset 0: 0 none, 1 being written, 2 written; the writer publishes 2 with a system-scope release),
rank (i32, 4), program id x (i32, 8), flag index (i32, 12: the word of the n awaited that timed out),
flag address (i64, 16: that word's address), expected value (i64, 24, sign-extended), last value seen (i64, 32,
sign-extended), comparison (i32, 40: index into COMPARISONS), flag width in bits (i32, 44: 32 or 64),
timeout in ns (i64, 48). 56 bytes. The first lane to time out fills it; every lane that times out then traps."""
WAIT_TIMEOUT_BYTES = WAIT_TIMEOUT_LAYOUT.size
WAIT_TIMEOUT_WRITTEN = 2

WAIT_WATCHDOG_SYMBOL = "__triton_dist_wait_watchdog"
"""The runtime-timeout watchdog's settings (lowering option ``wait-timeout-from-runtime``): an addrspace(1),
externally initialized global that the watchdog device libraries (``WATCHDOG_LIBRARY_VARIANT``) define and the
runtime writes into every loaded module that has it, like the context."""

WAIT_WATCHDOG_LAYOUT = struct.Struct("<qq")
"""timeout in ns (i64, offset 0: compared unsigned; 0 = the watchdog never fires), device address of the record
(i64, offset 8: a ``WAIT_TIMEOUT_LAYOUT`` record, 8-byte aligned, that the first timed-out lane fills with
system-scope atomics; the runtime points it at host-mapped pinned memory, readable after the trap). 16 bytes."""
WAIT_WATCHDOG_BYTES = WAIT_WATCHDOG_LAYOUT.size

LIBRARY_TRIPLES = {"cuda": "nvptx64-nvidia-cuda", "hip": "amdgcn-amd-amdhsa"}
"""Triton backend name -> the target triple each device library is built for (``TargetInfo::getTriple`` of the
lowering). The compiler checks the architecture (the triple's first component) of the bitcode it links."""

WATCHDOG_LIBRARY_VARIANT = "watchdog"
"""The watchdog device libraries are ``triton_dist.watchdog.{nvptx64,amdgcn}.bc``: the same functions as the default
libraries, lowered with ``wait-timeout-from-runtime=true``."""

# Functions of the device library (docs/abi.md has the semantics of each).
RANK = "__triton_dist_rank"  # () -> i32
NUM_RANKS = "__triton_dist_num_ranks"  # () -> i32
LOCAL_RANK = "__triton_dist_local_rank"  # () -> i32: the context's local_rank
LOCAL_NUM_RANKS = "__triton_dist_local_num_ranks"  # () -> i32: the context's local_num_ranks
NODE = "__triton_dist_node"  # () -> i32: rank / local_num_ranks
NUM_NODES = "__triton_dist_num_nodes"  # () -> i32: num_ranks / local_num_ranks
SYMM_AT = "__triton_dist_symm_at"  # (i64 addr, i32 rank) -> i64
CONSUME_TOKEN = "__triton_dist_consume_token"  # (i64 value, i32 token) -> i64
HEAP_OFFSET = "__triton_dist_heap_offset"  # (i64 addr) -> i64: addr - heap_bases[rank]
HEAP_SIZE = "__triton_dist_heap_size"  # () -> i64

RANK_AXES = ("world", "local", "node")
"""``dl.rank(axis=...)`` / ``dl.num_ranks(axis=...)``: the whole world, the ranks of this node, the nodes (every node
holds the same number of consecutive ranks: torchrun's layout)."""
RANK_SYMBOLS = {"world": (RANK, NUM_RANKS), "local": (LOCAL_RANK, LOCAL_NUM_RANKS), "node": (NODE, NUM_NODES)}
"""axis -> the (rank, number) functions that answer it."""

SCOPES = ("cta", "gpu", "sys")
SEMANTICS = ("acquire", "relaxed")
COMPARISONS = ("eq", "ne", "ge", "gt", "le", "lt")
"""``dl.wait``'s tests of a flag against the wait value (signed, as NVSHMEM's ``signal_wait_until``)."""
SIG_OPS = ("set", "add")
COMM_SCOPES = ("gpu", "intra_node", "inter_node")
FLAG_TYPES = ("i32", "i64")


def wait_symbol(scope: str, semantic: str, cmp: str, flag: str) -> str:
    """``__triton_dist_wait_{scope}_{semantic}_{cmp}_{flag}``: (i64 addr, i32 n, iN value) -> i32 token."""
    return f"{SYMBOL_PREFIX}wait_{scope}_{semantic}_{cmp}_{flag}"


def notify_symbol(sig_op: str, comm_scope: str, flag: str) -> str:
    """``__triton_dist_notify_{sig_op}_{comm_scope}_{flag}``: (i64 addr, i32 rank, iN signal) -> i32 (0)."""
    return f"{SYMBOL_PREFIX}notify_{sig_op}_{comm_scope}_{flag}"


def library_globals(watchdog: bool = False) -> list[str]:
    """The globals a device library defines: the context, and in the watchdog variant its settings."""
    return [CONTEXT_SYMBOL, WAIT_WATCHDOG_SYMBOL] if watchdog else [CONTEXT_SYMBOL]


def all_symbols() -> list[str]:
    """Every function the device library defines, sorted (the agreement test compares the built library to it)."""
    names = [RANK, NUM_RANKS, LOCAL_RANK, LOCAL_NUM_RANKS, NODE, NUM_NODES, SYMM_AT, CONSUME_TOKEN, HEAP_OFFSET]
    names += [HEAP_SIZE]
    names += [wait_symbol(s, m, c, f) for s in SCOPES for m in SEMANTICS for c in COMPARISONS for f in FLAG_TYPES]
    names += [notify_symbol(o, c, f) for o in SIG_OPS for c in COMM_SCOPES for f in FLAG_TYPES]
    return sorted(names)


# ---------------------------------------------------------------------------------------------------------------
# The NVSHMEM library (NVIDIA only; docs/multi-node.md): lib/DeviceLibrary/triton_dist_nvshmem.mlir, built into
# NVSHMEM_LIBRARY_FILE. Its functions call NVSHMEM's device functions (NVSHMEM_DEVICE_FUNCTIONS), which the
# nvidia-nvshmem wheel's libnvshmem_device_sm_<N>.bc defines; the compiler links both only into kernels that call one
# of NVSHMEM_SYMBOL_PREFIX's symbols.
# ---------------------------------------------------------------------------------------------------------------

NVSHMEM_SYMBOL_PREFIX = "__triton_dist_nvshmem_"
NVSHMEM_LIB_NAME = "triton_dist_nvshmem"
"""The ``extern_libs`` name of the wrapper library; NVSHMEM's own bitcode is linked as ``NVSHMEM_DEVICE_LIB_NAME``."""
NVSHMEM_DEVICE_LIB_NAME = "libnvshmem_device"
NVSHMEM_LIBRARY_FILE = "triton_dist.nvshmem.nvptx64.bc"
NVSHMEM_DEVICE_FUNCTIONS = ("nvshmem_signal_wait_until", "nvshmemx_getmem_block", "nvshmemx_putmem_signal_block")
"""The NVSHMEM device functions the wrapper library declares and calls (and nothing else)."""
NVSHMEM_GET = "__triton_dist_nvshmem_get"  # (i64 dest, i64 src, i64 bytes, i32 rank) -> i32 (0)


def put_signal_symbol(sig_op: str) -> str:
    """``__triton_dist_nvshmem_put_signal_{sig_op}``: (i64 dest, i64 src, i64 bytes, i64 signal_addr, i64 signal,
    i32 rank) -> i32 (0)."""
    return f"{NVSHMEM_SYMBOL_PREFIX}put_signal_{sig_op}"


def signal_wait_symbol(cmp: str) -> str:
    """``__triton_dist_nvshmem_signal_wait_{cmp}``: (i64 signal_addr, i64 value) -> i32 token; compared unsigned."""
    return f"{NVSHMEM_SYMBOL_PREFIX}signal_wait_{cmp}"


def nvshmem_symbols() -> list[str]:
    """Every function the NVSHMEM wrapper library defines, sorted."""
    names = [NVSHMEM_GET, *(put_signal_symbol(op) for op in SIG_OPS), *(signal_wait_symbol(c) for c in COMPARISONS)]
    return sorted(names)
