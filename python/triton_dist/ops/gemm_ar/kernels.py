"""The ``gemm_ar`` kernels: the fused GEMM + all-reduce of ``split_k=1`` and the split-K kernel (see the package
docstring for what each does and why it cannot deadlock)."""

from __future__ import annotations

import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops.common.call_epoch import arrive
from triton_dist.ops.common.flags import flag_round, notify_every_rank
from triton_dist.ops.gemm_ar.config import SPLIT_K_MAX_ELEMS, SPLIT_K_MAX_ITEMS

SPLIT_K_EXCHANGE_DATA = tl.constexpr(SPLIT_K_MAX_ELEMS)
"""Split K: where the exchange area starts in a parity's fp32 buffer (after the local area)."""
SPLIT_K_EXCHANGE_FLAGS = tl.constexpr(SPLIT_K_MAX_ITEMS)
"""Split K: where the exchange flags start in a parity's flags (after the local ones)."""


@triton.jit
def _split_k_partial(
    a_ptr,
    b_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bk,
    tile,
    split,
    chunk,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """fp32 ``a[rows of tile, split's K range] @ b[that range, columns of tile]``; the range is
    ``[split * chunk, min(K, (split + 1) * chunk))`` with ``chunk`` a multiple of ``BLOCK_K``, so only ``K`` needs a
    mask. Rows >= M and columns >= N come out 0."""
    tiles_n = tl.cdiv(N, BLOCK_N)
    rm = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    start = split * chunk
    a_ptrs = a_ptr + rm[:, None] * stride_am + (start + ks)[None, :]
    b_ptrs = b_ptr + (start + ks)[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(start, tl.minimum(K, start + chunk), BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k + ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def _gemm_ar_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    epochs_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bk,
    stride_om,
    flags_stride,
    REGION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EXCHANGE: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    slot_data = data_ptr + slot * REGION  # [2 parities][ranks][BLOCK_M * BLOCK_N]
    slot_flags = flags_ptr + slot * flags_stride  # [2 parities][ranks]
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    tiles_n = tl.cdiv(N, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    in_tile = rows[:, None] * BLOCK_N + cols[None, :]
    for tile in range(slot, tl.cdiv(M, BLOCK_M) * tiles_n, tl.num_programs(0)):
        rm = (tile // tiles_n) * BLOCK_M + rows
        rn = (tile % tiles_n) * BLOCK_N + cols
        acc = _split_k_partial(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, tile, 0, K, BLOCK_M, BLOCK_N, BLOCK_K)
        row_ok = rm[:, None] < M
        out_ptrs = out_ptr + rm[:, None] * stride_om + rn[None, :]
        out_mask = row_ok & (rn[None, :] < N)
        if EXCHANGE:
            epoch += 1
            parity = epoch % 2
            partials = slot_data + parity * (ranks * TILE)
            partial = acc.to(out_ptr.dtype.element_ty)
            for peer in range(0, ranks):
                tl.store(dl.symm_at(partials + me * TILE + in_tile, peer), partial, mask=row_ok)
            partials = flag_round(slot_flags + parity * ranks, me, epoch, ranks, partials, WORLD)
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for peer in range(0, ranks):
                total += tl.load(partials + peer * TILE + in_tile, mask=row_ok, other=0.0).to(tl.float32)
            tl.store(out_ptrs, total.to(out_ptr.dtype.element_ty), mask=out_mask)
        else:
            tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _split_k_item(item, tiles):
    """(tile, split) of a phase-1 item: items ``[0, tiles)`` are split 0 of every tile, then split 1, ..."""
    return item % tiles, item // tiles


@triton.jit
def _split_k_local_slot(tile, split, splits):
    """Partial and flag index of (tile, split) in this rank's local area: a tile's splits are consecutive, in the
    order its owner sums them."""
    return tile * splits + split


@triton.jit
def _split_k_exchange_slot(tile, rank, ranks):
    """Sum and flag index of (tile, rank) in the exchange area (after the local one): a tile's ranks are
    consecutive, in the order phase 2 sums them."""
    return tile * ranks + rank


@triton.jit
def _split_k_rows(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``[BLOCK_M, 1]``: which rows of tile ``tile`` are rows of the output (< M). Only those travel and are summed:
    at M = 1 in 16-row tiles that is 1/16 of each partial."""
    rm = (tile // tl.cdiv(N, BLOCK_N)) * BLOCK_M + tl.arange(0, BLOCK_M)
    return rm[:, None] < M


@triton.jit
def _split_k_sum(tile_partials, count, rows, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The fp32 sum of the ``count`` consecutive ``BLOCK_M x BLOCK_N`` partials at ``tile_partials``, in order, over
    the ``rows`` (``_split_k_rows``; the other rows come out 0, never read)."""
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, count):
        total += tl.load(tile_partials + i * TILE + in_tile, mask=rows, other=0.0)
    return total


@triton.jit
def _split_k_store(out_ptr, total, tile, M, N, stride_om, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``total`` rounded to the output dtype into ``out``'s tile ``tile``."""
    tiles_n = tl.cdiv(N, BLOCK_N)
    rm = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], total.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gemm_ar_split_k_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    state_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bk,
    stride_om,
    chunk,
    splits,
    flags_stride,
    REGION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EXCHANGE: tl.constexpr,
    WORLD: tl.constexpr,
):
    # Deadlock freedom: phase 1 never waits; phase 1b waits only for phase-1 items of this GPU's programs, and the
    # host caps the grid at the SM count, so every program of the grid is resident at once and finishes its phase 1
    # whatever the others do; phase 2 waits for the peers' phase-1b sums, which wait only on their own phase 1.
    # Every rank runs the same grid for the same call, so every flag any wait needs is eventually set. Tiles are
    # fixed by program index (tile t: program t mod grid), not by arrival. (Residency assumes no concurrently
    # running kernel keeps SMs forever, e.g. another spinning collective.)
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    _, epoch = arrive(state_ptr, programs)
    parity = epoch % 2
    # Double-buffered by parity: rank r can be one call ahead of rank q (it finished call c, q is still summing
    # call c's partials), but not two, since call c + 1 on r waits for q's call c + 1 sums of every tile.
    local = data_ptr + parity * REGION  # fp32 [tiles][splits][BLOCK_M * BLOCK_N]: this rank's split partials
    exchange = local + SPLIT_K_EXCHANGE_DATA  # fp32 [tiles][ranks][BLOCK_M * BLOCK_N]: every rank's tile sums
    local_flags = flags_ptr + parity * flags_stride  # int32 [tiles][splits]
    exchange_flags = local_flags + SPLIT_K_EXCHANGE_FLAGS  # int32 [tiles][ranks]
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(M, BLOCK_M) * tiles_n
    # Phase 1: every (tile, split) item's fp32 partial into this rank's local area, flagged at GPU scope.
    for item in range(pid, tiles * splits, programs):
        tile, split = _split_k_item(item, tiles)
        acc = _split_k_partial(
            a_ptr, b_ptr, M, N, K, stride_am, stride_bk, tile, split, chunk, BLOCK_M, BLOCK_N, BLOCK_K
        )
        slot = _split_k_local_slot(tile, split, splits)
        tl.store(local + slot * TILE + in_tile, acc, mask=_split_k_rows(tile, M, N, BLOCK_M, BLOCK_N))
        dl.notify(local_flags + slot, dl.rank(), signal=epoch, sig_op="set", comm_scope="gpu")
    # Phase 1b: each owned tile's splits summed here (in split order), then only that sum travels to every rank:
    # split_k times less NVLink traffic than pushing every split.
    for tile in range(pid, tiles, programs):
        rows = _split_k_rows(tile, M, N, BLOCK_M, BLOCK_N)
        first = _split_k_local_slot(tile, 0, splits)
        token = dl.wait(local_flags + first, splits, "gpu", "acquire", waitValue=epoch)
        total = _split_k_sum(dl.consume_token(local + first * TILE, token), splits, rows, BLOCK_M, BLOCK_N)
        if EXCHANGE:
            me = dl.rank()
            ranks = dl.num_ranks()
            slot = _split_k_exchange_slot(tile, me, ranks)
            for peer in range(0, ranks):
                tl.store(dl.symm_at(exchange + slot * TILE + in_tile, peer), total, mask=rows)
            notify_every_rank(exchange_flags + slot, epoch, ranks, WORLD)
        else:
            _split_k_store(out_ptr, total, tile, M, N, stride_om, BLOCK_M, BLOCK_N)
    # Phase 2: each owned tile's W sums, in rank order.
    if EXCHANGE:
        ranks = dl.num_ranks()
        for tile in range(pid, tiles, programs):
            first = _split_k_exchange_slot(tile, 0, ranks)
            token = dl.wait(exchange_flags + first, ranks, "sys", "acquire", waitValue=epoch)
            rows = _split_k_rows(tile, M, N, BLOCK_M, BLOCK_N)
            total = _split_k_sum(dl.consume_token(exchange + first * TILE, token), ranks, rows, BLOCK_M, BLOCK_N)
            _split_k_store(out_ptr, total, tile, M, N, stride_om, BLOCK_M, BLOCK_N)
