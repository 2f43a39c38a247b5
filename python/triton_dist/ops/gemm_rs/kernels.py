"""GEMM + reduce-scatter device code: the persistent fused kernel (pushes peers' tiles, reduces its own), the
two-kernel variant's reduction, and the cuBLAS path's small flag, wait and reduction kernels (the "direct"
producer's begin and reduction each with their waits inside; the "pull" producer's reduction, which flags, waits
and reads the peers' partials itself)."""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.matmul import grouped_tile, ptr_mainloop, tma_mainloop


@triton.jit
def _tile_part(base, part, row0, col0, num_rows, N, stride, LOAD: tl.constexpr):
    """Store ``part`` at (row0, col0) of the [num_rows, N] matrix at ``base`` (or, LOAD, return part + that block)."""
    rows = row0 + tl.arange(0, part.shape[0])
    cols = col0 + tl.arange(0, part.shape[1])
    mask = (rows[:, None] < num_rows) & (cols[None, :] < N)
    ptrs = base + rows[:, None].to(tl.int64) * stride + cols[None, :]
    if LOAD:
        return part + tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(ptrs, part.to(base.dtype.element_ty), mask=mask)
    return part


@triton.jit
def _halves(acc, SPLIT_N: tl.constexpr):
    """The tile as (left, right) column halves when SPLIT_N == 2 (right is unused otherwise)."""
    if SPLIT_N == 2:
        BLOCK_M: tl.constexpr = acc.shape[0]
        BLOCK_N: tl.constexpr = acc.shape[1]
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
    else:
        left = acc
        right = acc
    return left, right


@triton.jit
def _loop_layout(tile):
    """``tile`` unchanged (its column halves split apart and joined back), for the own tile's peer loop.

    Triton keeps a ``tl.dot`` result in the MMA layout through the additions of ``_add_received``, so every
    received tile, loaded in a coalesced layout, was converted to it through shared memory, once per peer (sm_90,
    128x128 fp32: four barriers and 64 KiB stored and reloaded per peer). After this round trip the tile is in no
    layout Triton prefers to keep: it takes the loads' layout, converted once before the loop, and the loop holds
    only the loads and the adds. The values and the order of the sums are unchanged, so the result is the same bits.
    """
    BLOCK_M: tl.constexpr = tile.shape[0]
    BLOCK_N: tl.constexpr = tile.shape[1]
    left, right = tl.split(tl.permute(tl.reshape(tile, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
    return tl.reshape(tl.permute(tl.join(left, right), (0, 2, 1)), (BLOCK_M, BLOCK_N))


@triton.jit
def _store_tile(base, acc, row0, col0, num_rows, N, stride, SPLIT_N: tl.constexpr):
    left, right = _halves(acc, SPLIT_N)
    _tile_part(base, left, row0, col0, num_rows, N, stride, False)
    if SPLIT_N == 2:
        _tile_part(base, right, row0, col0 + acc.shape[1] // 2, num_rows, N, stride, False)


@triton.jit
def _await_received(scratch, tile_flags, me, W, epoch, awaited):
    """``scratch``, readable once every peer's flag of the tile holds ``epoch`` (the waits' tokens consumed), where
    ``awaited``; else ``scratch`` at once.

    No branch and no loop: the fused kernel calls it at the end of an item of its flattened persistent loop, where
    Triton 3.6's loop fusion (TritonGPUFuseNestedLoops) fails on a branch that yields a value to the next item, and
    on a loop inside a branch. The peers' flags (all but this rank's own, which nobody sets) are awaited in two
    waits over consecutive flags, of no flag each where not ``awaited``. Never called while MMA results are live: a
    watched wait (the watchdog's default) holds a path that stops the kernel, and ptxas serializes every wgmma of a
    kernel where that path is reachable while they are (info C7518)."""
    before = tl.where(awaited, me, 0)
    after = tl.where(awaited, W - 1 - me, 0)
    received = dl.consume_token(scratch, dl.wait(tile_flags, before, "sys", "acquire", waitValue=epoch))
    later = tile_flags + tl.minimum(me + 1, W - 1)  # (the last rank awaits no flag after its own)
    return dl.consume_token(received, dl.wait(later, after, "sys", "acquire", waitValue=epoch))


@triton.jit
def _add_received(part, received, slot_elems, W, row0, col0, num_rows, N):
    """``part`` plus every peer's partial of the same block from the ``received`` slots (already awaited)."""
    for s in range(1, W):
        part = _tile_part(received + (s - 1) * slot_elems, part, row0, col0, num_rows, N, N, True)
    return part


@triton.jit
def _notify_pushed(flags, local, W, me, dest, epoch):
    """Flag (tile ``local``, source ``me``) on rank ``dest``: its partial is in dest's scratch."""
    dl.notify(flags + local * W + me, dest, signal=epoch, sig_op="set", comm_scope="intra_node")


@triton.jit
def _gemm_rs_kernel(
    a,
    b,
    out_ptr,
    scratch_ptr,
    flags_ptr,
    epoch_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_N: tl.constexpr,
    USE_TMA: tl.constexpr,
    FUSED: tl.constexpr,
    FLATTEN: tl.constexpr = True,
    LOCAL_ONLY: tl.constexpr = False,
):
    """Persistent GEMM over the W row shards in staggered order; peers' tiles pushed, own tiles reduced.

    ``a``/``b`` are TMA descriptors (USE_TMA) or pointers. ``scratch_ptr``: symmetric [2, slots, M/W, N] (slot
    ``s - 1`` receives rank ``rank + s``'s partial; slot W - 1 holds the own partial when not FUSED).
    ``flags_ptr``: symmetric int32 [2, tiles per shard, W]. ``epoch_ptr``: this call's epoch (device scalar).
    ``LOCAL_ONLY`` (a diagnostic, see ``launch_without_communication``): pushes land in this rank's own scratch and
    nothing is flagged or awaited; the same GEMM and memory traffic without NVLink or flags. Wrong results.
    """
    me = dl.rank()
    W = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    parity = epoch % 2
    shard_m = M // W
    num_m = tl.cdiv(shard_m, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    tiles = num_m * num_n
    slot_elems = shard_m.to(tl.int64) * N
    slots = W
    if FUSED:
        slots = W - 1
    flags = flags_ptr + parity * tiles * W
    scratch = scratch_ptr + parity * slots * slot_elems
    items = W * tiles
    own_items = (W - 1) * tiles  # the first own item: the last step's tiles are this rank's shard
    # A program awaits an own tile's peers only after it has flagged every tile it pushed before: at the end of the
    # previous item (below), or here where its first item is own. Awaited at the top of the own item, the wait was
    # part of what the flattened, pipelined loop computes num_stages - 1 iterations early (with the next item's
    # load coordinates), so it ran before the previous item's push and flag. That flag then waited for the peers'
    # flags of the own tile, which could wait the same way on their own tiles: a cycle through the ranks whenever
    # tiles <= programs <= (W - 1) * tiles (4096^3 on 4 x H200: 128 tiles per shard for 132 programs, every rank
    # hung; at 2 ranks only with exactly as many tiles as programs).
    received = scratch
    if FUSED and not LOCAL_ONLY:
        first = tl.program_id(0)
        own_tile = tl.maximum(first - own_items, 0)
        received = _await_received(scratch, flags + own_tile * W, me, W, epoch, first >= own_items)
    for t in tl.range(tl.program_id(0), items, tl.num_programs(0), flatten=FLATTEN):
        step = t // tiles
        local = t - step * tiles
        dest = (me + 1 + step) % W
        pid_m, pid_n = grouped_tile(local, num_m, num_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if USE_TMA:
            acc = tma_mainloop(a, b, dest * shard_m + off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        else:
            acc = ptr_mainloop(
                a, b, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, dest * shard_m + off_m, off_n,
                BLOCK_M, BLOCK_N, BLOCK_K,
            )  # fmt: skip
        if dest != me:
            peer_slot = (me - dest - 1 + W) % W
            store_rank = dest
            if LOCAL_ONLY:
                store_rank = me
            remote = dl.symm_at(scratch + peer_slot * slot_elems, store_rank)
            _store_tile(remote, acc, off_m, off_n, shard_m, N, N, SPLIT_N)
            if not LOCAL_ONLY:
                # Flagged right after its stores: a flag deferred past the next item's main loop hung or faulted in
                # the flattened, pipelined loop (docs/results/2026-11-26-2xH200-session18.md).
                _notify_pushed(flags, local, W, me, dest, epoch)
        elif FUSED:
            left, right = _halves(acc, SPLIT_N)
            # Hopper: each half leaves the MMA layout just before its own peer loop (_loop_layout): no conversion
            # per peer, and the flattened loop's epilogue stops spilling (sm_90, ptxas -v, spill stores/loads:
            # 396/484 B -> 92/84 for the default tile with fp32 partials, 352/484 -> 36/36 with bf16 partials; the
            # round trip of the right half must come after the left half's loop for that). The pointer kernel (AMD)
            # keeps the per-peer conversion: converting the fp32 tile once takes all 64 KiB of a gfx942 CU's LDS and
            # twice the bytes of a bf16 received tile, which pays only from three ranks on (not measured).
            if USE_TMA:
                left = _loop_layout(left)
            left = _add_received(left, received, slot_elems, W, off_m, off_n, shard_m, N)
            _tile_part(out_ptr, left, off_m, off_n, shard_m, N, stride_om, False)
            if SPLIT_N == 2:
                if USE_TMA:
                    right = _loop_layout(right)
                right_n = off_n + BLOCK_N // 2
                right = _add_received(right, received, slot_elems, W, off_m, right_n, shard_m, N)
                _tile_part(out_ptr, right, off_m, right_n, shard_m, N, stride_om, False)
        else:
            _store_tile(scratch + (W - 1) * slot_elems, acc, off_m, off_n, shard_m, N, N, SPLIT_N)
        if FUSED and not LOCAL_ONLY:
            following = t + tl.num_programs(0)
            awaited = (following >= own_items) & (following < items)  # this program's next item is an own tile
            own_tile = tl.where(awaited, following - own_items, 0)
            received = _await_received(scratch, flags + own_tile * W, me, W, epoch, awaited)


@triton.jit
def _reduce_partials_kernel(
    out_ptr,
    scratch_ptr,
    flags_ptr,
    epoch_ptr,
    M,
    N,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """Second kernel of the two-kernel variant: out tile = own partial + every peer's, once their flags are set."""
    me = dl.rank()
    W = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    parity = epoch % 2
    shard_m = M // W
    num_m = tl.cdiv(shard_m, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    tiles = num_m * num_n
    slot_elems = shard_m.to(tl.int64) * N
    flags = flags_ptr + parity * tiles * W
    scratch = scratch_ptr + parity * W * slot_elems
    for local in range(tl.program_id(0), tiles, tl.num_programs(0)):
        pid_m, pid_n = grouped_tile(local, num_m, num_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        received = _await_received(scratch, flags + local * W, me, W, epoch, True)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc = _tile_part(scratch + (W - 1) * slot_elems, acc, off_m, off_n, shard_m, N, N, True)
        acc = _add_received(acc, received, slot_elems, W, off_m, off_n, shard_m, N)
        _tile_part(out_ptr, acc, off_m, off_n, shard_m, N, stride_om, False)


@triton.jit
def _cublas_begin_kernel(epoch_ptr, ack_ptr):
    """Start a call of the cuBLAS path: advance the epoch; tell every peer this rank has read the last call's data.

    ``ack_ptr``: symmetric int32 [W]; ack[r] on rank p = the last call whose partials from p rank r has consumed.
    Stream order puts this after the previous call's reduction, so the peers may overwrite their slot here.
    """
    me = dl.rank()
    epoch = tl.load(epoch_ptr) + 1
    tl.store(epoch_ptr, epoch)
    for s in range(1, dl.num_ranks()):
        dl.notify(ack_ptr + me, (me + s) % dl.num_ranks(), signal=epoch - 1, sig_op="set", comm_scope="intra_node")


@triton.jit
def _cublas_wait_ack_kernel(ack_ptr, epoch_ptr, peer):
    """Wait until ``peer`` has consumed this rank's previous partial (its receive slot is free again)."""
    dl.wait(ack_ptr + peer, 1, "sys", "acquire", waitValue=tl.load(epoch_ptr) - 1)


@triton.jit
def _cublas_flag_kernel(flags_ptr, epoch_ptr, peer):
    """Flag on ``peer``: this rank's partial for it has landed (stream-ordered after the copy or the GEMM)."""
    dl.notify(flags_ptr + dl.rank(), peer, signal=tl.load(epoch_ptr), sig_op="set", comm_scope="intra_node")


@triton.jit
def _cublas_wait_kernel(flags_ptr, epoch_ptr):
    """One program: wait until every peer's partial for this call has landed here.

    The reduction kernel after it on the stream does not wait itself: thousands of spinning programs would fill
    every SM and starve the peers' flag kernels on this GPU's side stream: both ranks deadlock (they did at a
    [4096, 4096] shard while the waiting was inside the reduction).
    """
    me = dl.rank()
    W = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    for s in range(1, W):
        dl.wait(flags_ptr + (me + s) % W, 1, "sys", "acquire", waitValue=epoch)


@triton.jit
def _cublas_begin_wait_kernel(epoch_ptr, ack_ptr):
    """Start a call of the "direct" producer: ``_cublas_begin_kernel``, then wait until every peer's receive slot
    for this rank is free again (what ``_cublas_wait_ack_kernel`` did before each peer's GEMM), in one launch.

    Sets this rank's ack on every peer (``epoch - 1``: this rank has consumed the peers' partials of the last call,
    stream order puts the kernel after that call's reduction), advances the epoch, then waits for every peer's ack
    for this rank to reach ``epoch - 1``. The GEMMs after it on the stream write into the peers' slots.

    No deadlock: every rank sets all its acks before it waits for any, so rank A's wait in call e ends as soon as
    each peer B has started its own begin of call e. B gets there once its call e - 1 is done, and that call waits
    only on what A issued in its call e - 1 (A's flags, sent before A's own GEMM and reduction), all of which A
    enqueued before this kernel: nothing B needs depends on A getting past this wait. One program spins, so it
    takes no SM from anything. Acks only grow, so the test is "ge" (a peer cannot be further ahead: its next ack
    needs this call's partial first).
    """
    me = dl.rank()
    W = dl.num_ranks()
    epoch = tl.load(epoch_ptr) + 1
    tl.store(epoch_ptr, epoch)
    for s in range(1, W):
        dl.notify(ack_ptr + me, (me + s) % W, signal=epoch - 1, sig_op="set", comm_scope="intra_node")
    for s in range(1, W):
        dl.wait(ack_ptr + (me + s) % W, 1, "sys", "acquire", waitValue=epoch - 1, cmp="ge")


@triton.jit
def _cublas_reduce_kernel(out_ptr, own_ptr, recv_ptr, numel, num_received, BLOCK: tl.constexpr):
    """out = own partial + the received partials, summed in fp32 (the "ce" producer's, after
    ``_cublas_wait_kernel``: one block per program, waiting for nothing)."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    acc = tl.load(own_ptr + offsets, mask=mask).to(tl.float32)
    for s in range(0, num_received):
        acc += tl.load(recv_ptr + s * numel + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _cublas_wait_reduce_kernel(
    out_ptr, own_ptr, recv_ptr, flags_ptr, epoch_ptr, numel, RECEIVED: tl.constexpr, BLOCK: tl.constexpr
):
    """The "direct" producer's end of a call: wait for every peer's partial, then out = own + the ``RECEIVED``
    (W - 1) received partials, summed in fp32, in one launch (``_cublas_wait_kernel`` + ``_cublas_reduce_kernel``).

    A persistent grid of a few programs per SM (``DIRECT_REDUCE_PROGRAMS_PER_SM``): each program waits for every
    peer's flag of this call's epoch (read from device memory), then reduces blocks ``program_id, program_id +
    programs, ...``, issuing the loads of all ``RECEIVED + 1`` blocks of an iteration together (the peers' loop
    unrolled) to keep bytes in flight.

    Why this cannot deadlock as the waiting reduction of the "ce" producer did (``_cublas_wait_kernel``): there, a
    rank's own flags are set by kernels on its side stream, which could still be queued while the reduction's
    spinning programs filled every SM of the same GPU, so each rank waited for a flag its own GPU could not run.
    With "direct" every flag this rank sends is a kernel on the main stream, enqueued before the own GEMM and this
    reduction: by stream order all of them have run before any program here spins. What the spinners wait for is
    the peers' flags, sent from the peers' main streams before their own reductions, and depending on nothing this
    rank has not already done (its acks in ``_cublas_begin_wait_kernel``). The persistent grid bounds the spinners
    anyway, so kernels of other streams on this GPU keep SMs while they wait (thousands of blocks in a
    one-block-per-program grid would take them all).
    """
    me = dl.rank()
    W = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    received = recv_ptr
    for s in range(1, W):
        token = dl.wait(flags_ptr + (me + s) % W, 1, "sys", "acquire", waitValue=epoch)
        received = dl.consume_token(received, token)
    for block in range(tl.program_id(0), tl.cdiv(numel, BLOCK), tl.num_programs(0)):
        offsets = tl.cast(block, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.load(own_ptr + offsets, mask=mask).to(tl.float32)
        for slot in tl.static_range(RECEIVED):
            acc += tl.load(received + slot * numel + offsets, mask=mask).to(tl.float32)
        tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _cublas_pull_reduce_kernel(
    out_ptr, partial_ptr, flags_ptr, epoch_ptr, numel, WORLD: tl.constexpr, BLOCK: tl.constexpr
):
    """The "pull" producer's end of a call: flag this rank's partial ready on every peer, wait for every peer's
    flag, then out = the sum in fp32 of this rank's shard rows of every rank's partial (its own first, then the peers'
    in the staggered order ``rank + 1, rank + 2, ...``, read through ``dl.symm_at``), in one launch.

    ``partial_ptr``: symmetric [M, N] (this rank's full partial product, written by the ``torch.mm`` before this
    kernel on the stream); ``numel``: the elements of one shard (M/W * N; this rank's rows start at ``rank *
    numel``). ``flags_ptr``: symmetric int32 [W], ``flags[r]`` = the epoch of rank r's latest ready partial.
    ``WORLD``: the world size. A persistent grid of a few programs per SM, as ``_cublas_wait_reduce_kernel``.

    Program 0 sets the flags: the GEMM that wrote the partial ran before this kernel (stream order), so any program
    may, and one suffices. Every program waits for every peer's flag (``eq``: a peer's flag cannot reach the next
    epoch before this rank's next begin kernel, which follows this kernel, released it). The grid is bounded so that
    every program is resident and program 0, dispatched first, runs even while the others spin.

    Reuse of the partial (a fast rank's next GEMM must not overwrite it while a slow peer still reads it): the begin
    kernel of the next call (``_cublas_begin_wait_kernel``) sends this rank's ack ``epoch`` to every peer after this
    kernel (stream order: this rank has finished reading the peers' partials of ``epoch``) and waits for every
    peer's ack of ``epoch`` before the next GEMM.
    """
    me = dl.rank()
    epoch = tl.load(epoch_ptr)
    if tl.program_id(0) == 0:
        for s in range(1, WORLD):
            dl.notify(flags_ptr + me, (me + s) % WORLD, signal=epoch, sig_op="set", comm_scope="intra_node")
    shard = partial_ptr + tl.cast(me, tl.int64) * numel
    for s in range(1, WORLD):
        token = dl.wait(flags_ptr + (me + s) % WORLD, 1, "sys", "acquire", waitValue=epoch)
        shard = dl.consume_token(shard, token)
    for block in range(tl.program_id(0), tl.cdiv(numel, BLOCK), tl.num_programs(0)):
        offsets = tl.cast(block, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < numel
        acc = tl.load(shard + offsets, mask=mask).to(tl.float32)
        for step in tl.static_range(1, WORLD):
            acc += tl.load(dl.symm_at(shard, (me + step) % WORLD) + offsets, mask=mask).to(tl.float32)
        tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)
