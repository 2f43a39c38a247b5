"""AllGather + GEMM device code: the call's epoch and barrier, the SM producer, the persistent GEMMs that wait
per chunk (TMA and pointer variants), and the cuBLAS path's one-program wait per chunk of a shard (and its
double-buffered variants': the epoch counters, the wait that resets its flag)."""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.matmul import grouped_tile, ptr_mainloop, ptr_store, tma_mainloop, tma_store


@triton.jit
def _begin_kernel(epoch_ptr, barrier_ptr):
    """Advance the epoch and pass a barrier with every peer (flags compared with >=, so never reset)."""
    epoch = tl.load(epoch_ptr) + 1
    tl.store(epoch_ptr, epoch)
    me = dl.rank()
    world = dl.num_ranks()
    for peer in range(0, world):
        dl.notify(barrier_ptr + me, peer, signal=epoch, sig_op="set", comm_scope="intra_node")
    # A dl.wait, not a hand-written spin: the wait watchdog can then stop it if a peer never arrives.
    dl.wait(barrier_ptr, world, "sys", "acquire", waitValue=epoch, cmp="ge")


@triton.jit(do_not_specialize=["flag_index"])
def _wait_shard_kernel(flags_ptr, epoch_ptr, flag_index):
    """One program (the cuBLAS path): wait until one chunk of a peer's shard has landed in this rank's receive
    buffer, i.e. its flag ``flag_index`` (``op.cublas_flag_index``: chunk c of rank s is flag s + W * c, so with
    one chunk per shard flag s) holds this call's epoch, read from device memory so that CUDA-graph replays wait for
    their own call. The cuBLAS GEMM of that chunk's rows follows on the stream."""
    dl.wait(flags_ptr + flag_index, 1, "sys", "acquire", waitValue=tl.load(epoch_ptr))


@triton.jit(do_not_specialize=["flag_index"])
def _wait_shard_then_advance_kernel(flags_ptr, epoch_ptr, flag_index, ADVANCE: tl.constexpr):
    """One program (the cuBLAS path with double buffers, eager calls): as ``_wait_shard_kernel`` on the receive
    epoch, but with ``>=``: without a barrier the peer may already have sent its next call's flag. The call's last
    wait (``ADVANCE``) then moves that epoch to the next call's, after every thread has read it (stream order gives
    the next call's waits the new value)."""
    epoch = tl.load(epoch_ptr)
    dl.wait(flags_ptr + flag_index, 1, "sys", "acquire", waitValue=epoch, cmp="ge")
    if ADVANCE:
        tl.debug_barrier()
        tl.store(epoch_ptr, epoch + 1)


@triton.jit(do_not_specialize=["value", "flag_index"])
def _wait_shard_value_kernel(value, flags_ptr, flag_index):
    """One program (the double-buffered cuBLAS path whose flags are written by stream memory operations): wait until
    flag ``flag_index`` (one chunk of a peer's shard) is at least ``value``, the call count the host passes. Unlike
    a memory-operation wait, the wait watchdog can stop it if the peer never arrives."""
    dl.wait(flags_ptr + flag_index, 1, "sys", "acquire", waitValue=value, cmp="ge")


@triton.jit(do_not_specialize=["flag_index"])
def _wait_flag_then_reset_kernel(flag_index, flags_ptr):
    """One program (the double-buffered cuBLAS path's ``"memop_parity"`` flags): wait until flag ``flag_index`` (one
    chunk of a peer's shard, among the flags of this call's parity) is 1, which the peer's stream memory operation
    wrote after the chunk's copy, then reset it to 0 once every thread has seen it, so that the next call of this
    parity waits for its own write. The wait watchdog watches the wait. The index is the launch's one argument, the
    parity's row chosen per call (``op.DoubleBuffer`` says why the reset cannot race the peer's next write)."""
    flag = flags_ptr + flag_index
    dl.wait(flag, 1, "sys", "acquire", waitValue=1)
    tl.debug_barrier()
    tl.store(flag, 0)


@triton.jit
def _advance_epoch_kernel(epoch_ptr):
    """One program (the cuBLAS path with double buffers): the send epoch to the next call's, on the side stream
    after this call's flag copies have read it."""
    tl.store(epoch_ptr, tl.load(epoch_ptr) + 1)


@triton.jit(do_not_specialize=["M_LOCAL", "K", "CHUNK_ROWS", "num_chunks"])
def _push_kernel(a_ptr, recv_ptr, flags_ptr, epoch_ptr, M_LOCAL, K, CHUNK_ROWS, num_chunks, BLOCK: tl.constexpr):
    """Push this rank's shard into slot ``rank`` of every peer's receive buffer, chunk by chunk.

    Every program copies its share of each chunk and sets its own flag of that chunk on the peer, so the GEMM
    waits for ``num_programs`` flags per chunk.
    """
    me = dl.rank()
    world = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    shard = M_LOCAL.to(tl.int64) * K
    my_slot = recv_ptr + me.to(tl.int64) * shard
    for chunk in range(0, num_chunks):
        lo = tl.cast(chunk, tl.int64) * CHUNK_ROWS * K  # tl.cast, not .to(): mypy types a range index int
        hi = tl.minimum(lo + CHUNK_ROWS.to(tl.int64) * K, shard)
        share = tl.cdiv(tl.cdiv(hi - lo, programs), BLOCK) * BLOCK
        mine_lo = lo + pid * share
        mine_hi = tl.minimum(mine_lo + share, hi)
        for step in range(1, world):
            dst = (me - step + world) % world
            for start in range(mine_lo, mine_hi, BLOCK):
                offsets = start + tl.arange(0, BLOCK)
                mask = offsets < mine_hi
                values = tl.load(a_ptr + offsets, mask=mask)
                tl.store(dl.symm_at(my_slot + offsets, dst), values, mask=mask)
            index = (me * num_chunks + chunk) * programs + pid
            dl.notify(flags_ptr + index, dst, signal=epoch, sig_op="set", comm_scope="intra_node")


@triton.jit
def _fence_async_proxy(value):
    """Order this thread's earlier (generic-proxy) acquire before its later TMA (async-proxy) reads."""
    return tl.inline_asm_elementwise(
        "fence.proxy.async.global;\n\tmov.b32 $0, $1;", "=r,r", [value], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _peer_tile(tile, first_peer_tile, me, world, num_m, num_n, GROUP_M: tl.constexpr):
    """(segment, pid_m, pid_n) of global tile ``tile`` of the peer phase: segments me + 1, me + 2, ... in turn."""
    tiles_per_segment = num_m * num_n
    index = tile - first_peer_tile
    segment = (me + 1 + index // tiles_per_segment) % world
    pid_m, pid_n = grouped_tile(index % tiles_per_segment, num_m, num_n, GROUP_M)
    return segment, pid_m, pid_n


@triton.jit
def _first_peer_tile(pid, programs, own_tiles):
    """The first tile index >= own_tiles that program ``pid`` meets walking pid, pid + programs, ..."""
    own_done = tl.maximum(own_tiles - pid + programs - 1, 0) // programs
    return pid + own_done * programs


@triton.jit
def _ag_gemm_tma_kernel(
    a_desc,
    recv_desc,
    b_desc,
    c_desc,
    flags_ptr,
    epoch_ptr,
    M_LOCAL,
    N,
    K,
    chunk_tiles,
    flags_per_chunk,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_N: tl.constexpr,
    FLATTEN_PEERS: tl.constexpr,
):
    me = dl.rank()
    world = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    num_m = tl.cdiv(M_LOCAL, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    num_chunks = tl.cdiv(num_m, chunk_tiles)
    own_tiles = num_m * num_n
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    own_row = me * M_LOCAL
    # Own shard first: its rows come straight from `a`, nothing to wait for.
    for tile in tl.range(pid, own_tiles, programs, flatten=True):
        pid_m, pid_n = grouped_tile(tile, num_m, num_n, GROUP_M)
        acc = tma_mainloop(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, K, BLOCK_M, BLOCK_N, BLOCK_K)
        tma_store(c_desc, acc, own_row + pid_m * BLOCK_M, pid_n * BLOCK_N, SPLIT_N)
    # Then the peers' rows, each tile after its chunk's flags hold this call's epoch. FLATTEN_PEERS (a tuning
    # choice) makes this one software-pipelined loop, whose next tile's loads overlap this tile's last MMAs and its
    # store. That stays correct: each TMA load's row comes through the token of its own tile's wait, so the
    # pipeliner cannot issue a load before that wait (test_ops_ag_gemm.py checks it in TTGIR).
    first = _first_peer_tile(pid, programs, own_tiles)
    for tile in tl.range(first, world * own_tiles, programs, flatten=FLATTEN_PEERS):
        segment, pid_m, pid_n = _peer_tile(tile, own_tiles, me, world, num_m, num_n, GROUP_M)
        chunk = pid_m // chunk_tiles
        token = dl.wait(
            flags_ptr + (segment * num_chunks + chunk) * flags_per_chunk, flags_per_chunk, "sys", "acquire", epoch
        )
        row = dl.consume_token(segment * M_LOCAL + pid_m * BLOCK_M, token)
        row = _fence_async_proxy(row)
        acc = tma_mainloop(recv_desc, b_desc, row, pid_n * BLOCK_N, K, BLOCK_M, BLOCK_N, BLOCK_K)
        tma_store(c_desc, acc, segment * M_LOCAL + pid_m * BLOCK_M, pid_n * BLOCK_N, SPLIT_N)


@triton.jit
def _ag_gemm_ptr_kernel(
    a_ptr,
    recv_ptr,
    b_ptr,
    c_ptr,
    flags_ptr,
    epoch_ptr,
    M_LOCAL,
    N,
    K,
    chunk_tiles,
    flags_per_chunk,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """The same schedule with masked pointer loads: any M_LOCAL, and targets without TMA."""
    me = dl.rank()
    world = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    num_m = tl.cdiv(M_LOCAL, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    num_chunks = tl.cdiv(num_m, chunk_tiles)
    own_tiles = num_m * num_n
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    segment_a = M_LOCAL.to(tl.int64) * K
    segment_c = M_LOCAL.to(tl.int64) * N
    for tile in range(pid, own_tiles, programs):
        pid_m, pid_n = grouped_tile(tile, num_m, num_n, GROUP_M)
        acc = ptr_mainloop(
            a_ptr, b_ptr, M_LOCAL, N, K, K, 1, N, 1, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N, BLOCK_K
        )
        ptr_store(c_ptr + me * segment_c, acc, M_LOCAL, N, N, 1, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
    first = _first_peer_tile(pid, programs, own_tiles)
    for tile in range(first, world * own_tiles, programs):
        segment, pid_m, pid_n = _peer_tile(tile, own_tiles, me, world, num_m, num_n, GROUP_M)
        chunk = pid_m // chunk_tiles
        token = dl.wait(
            flags_ptr + (segment * num_chunks + chunk) * flags_per_chunk, flags_per_chunk, "sys", "acquire", epoch
        )
        src = dl.consume_token(recv_ptr + segment * segment_a, token)
        acc = ptr_mainloop(
            src, b_ptr, M_LOCAL, N, K, K, 1, N, 1, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N, BLOCK_K
        )
        ptr_store(
            c_ptr + segment * segment_c, acc, M_LOCAL, N, N, 1, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N
        )
