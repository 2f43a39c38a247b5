"""GEMM + reduce-scatter: ``gemm_rs(a, b)`` returns this rank's row shard of ``sum_r A_r @ B_r``, reduced in fp32.

Rank r holds A_r [M, K/W] and B_r [K/W, N]; the result on rank r is rows ``[r * M/W, (r + 1) * M/W)`` of the sum
over ranks, [M/W, N], in A's dtype (bf16 or fp16). Semantics as ``torch.ops.symm_mem.fused_matmul_reduce_scatter``
with ``scatter_dim=0``.

How (one persistent kernel, ``_gemm_rs_kernel``): every rank walks the W row shards of its partial product in the
order ``rank + 1, rank + 2, ..., rank`` (staggered, so at any time each rank pushes to a different peer, and its own
shard comes last). A tile of a peer's shard is computed and stored in fp32 (or the input dtype: ``partial_dtype``)
straight into that peer's symmetric scratch (``dl.symm_at`` stores), then flagged there (``dl.notify``, one int32
flag per (tile, source rank) holding the call's epoch). A tile of its own shard is computed last; before its main
loop it waits for the W - 1 flags of that tile (``dl.wait``), which the peers set long before because they computed
this shard first, and its epilogue adds the received partials in fp32 and stores the output. The ``DEFER_NOTIFY``
variant flags a pushed tile only after the next tile's main loop, so the release never waits for its own stores to
drain over NVLink.

The two-kernel variant (``fused=False``) stores the own shard's partial locally and leaves the sum to a second,
memory-bound kernel (``_reduce_partials_kernel``); kept to compare against.

Inputs are read only by their own rank, so ordinary torch tensors work without staging: nothing has to be on the
symmetric heap except the op's workspace (scratch, flags), which is allocated collectively the first time each
shape is seen. Calls are told apart by an epoch that lives on the device (``Workspace.epoch``, incremented by a
one-element add before each launch), so the op works inside CUDA graphs and under ``torch.compile`` without a host
sync. Scratch and flags are double-buffered by the epoch's parity: a rank can be at most one call ahead of any peer
(its own shard waits for every peer's contribution to the same call), so a peer's next call never overwrites data
this call has not read yet.

The cuBLAS path (``GemmRSConfig(gemm="cublas")``, opt-in and a tuning candidate): one ``torch.mm`` per
destination shard, peers' first in the same staggered order; each peer's partial goes to that peer's symmetric
receive slot by the copy engine on a side stream (``producer="ce"``) or straight from cuBLAS's epilogue
(``"direct"``), after an ack that the peer consumed the previous call's partial and followed by an epoch flag
(one-program ``dl.wait`` / ``dl.notify`` kernels, epochs in device memory); the own shard's GEMM runs meanwhile;
then a one-program wait kernel and an fp32 reduction kernel. Waiting is kept out of the wide reduction kernel on
purpose: its spinning programs filled every SM and starved the peer-bound flag kernel of the side stream, which
deadlocked both ranks (2 x H200, shard [4096, 4096]).

Measured on 2 x H200 (bench/results/gemm_rs.md, docs/results/2026-11-23-2xH200-session13.md, watchdog on): the op with
the committed table 1.13-1.16x over torch.matmul + NCCL (geo-mean of three runs; the overlap bound 1.16-1.18x). The
fused kernel wins the two smaller shapes (8192,4096,12288: 0.60-0.61 ms against 0.70 for matmul + NCCL), the cuBLAS
path the others. What keeps the fused kernel above the bound is its epilogue's NVLink stores: 0.612 ms against 0.521
ms with the communication switched off (``LOCAL_ONLY``), the 32 MiB push at link speed, since the warps that store a
tile are the ones that issue the next tile's MMAs (Triton 3.6 does not warp-specialize this kernel on Hopper). The
cost model's constants predate the wgmma fixes (docs/results/2026-11-23-wgmma-serialization.md and section 1 of the
session-13 results) and are to be measured again. Untuned shapes go to the cost model (:func:`estimate_ms`), which
keeps ``torch.matmul`` + NCCL ``reduce_scatter_tensor`` (``GemmRSConfig.fallback``) unless the communication share is
large enough for the fused kernel to win; the tuner (``bench/gemm_rs.py --tune``) times every candidate including that
baseline and the cuBLAS path and stores the fastest.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.ops import tuning
from triton_dist.ops.matmul import (
    MatmulConfig,
    check_matrix,
    config_for_target,
    grouped_tile,
    num_sms,
    pointer_config,
    ptr_mainloop,
    rows_fit_tma,
    tma_mainloop,
)
from triton_dist.runtime.world.rank_agreement import AgreedSignatures

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
PARTIAL_DTYPES = ("float32", "input")
GEMMS = ("triton", "cublas")
PRODUCERS = ("ce", "direct")
CHECK_ENV = "TRITON_DIST_GEMM_RS_CHECK"
"""``always``: check that every rank passed the same shapes and dtypes on every eager call (a collective, ~50 us);
by default only the first call of each shape is checked (it allocates the workspace, a collective anyway)."""


# ----------------------------------------------------------------------------------------------------------------
# Device code
# ----------------------------------------------------------------------------------------------------------------


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
def _await_received(scratch, tile_flags, me, W, epoch):
    """``scratch``, readable once every peer's flag of the tile holds ``epoch`` (the waits' tokens consumed).

    Called before the own tile's main loop, not after it: a watched wait (the watchdog's default) holds a path that
    stops the kernel, and ptxas serializes every wgmma of a kernel where that path is reachable while MMA results are
    live (info C7518; the right half of the tile waited while the left half's peers were awaited). The peers
    flagged these tiles a whole step earlier (they compute this shard before their own), so nothing is lost."""
    received = scratch
    for s in range(1, W):
        token = dl.wait(tile_flags + (me + s) % W, 1, "sys", "acquire", waitValue=epoch)
        received = dl.consume_token(received, token)
    return received


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
    DEFER_NOTIFY: tl.constexpr,
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
    pending_local = -1
    pending_dest = 0
    for t in tl.range(tl.program_id(0), W * tiles, tl.num_programs(0), flatten=FLATTEN):
        step = t // tiles
        local = t - step * tiles
        dest = (me + 1 + step) % W
        pid_m, pid_n = grouped_tile(local, num_m, num_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        received = scratch
        if FUSED and not LOCAL_ONLY:
            if dest == me:
                received = _await_received(scratch, flags + local * W, me, W, epoch)
        if USE_TMA:
            acc = tma_mainloop(a, b, dest * shard_m + off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        else:
            acc = ptr_mainloop(
                a, b, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, dest * shard_m + off_m, off_n,
                BLOCK_M, BLOCK_N, BLOCK_K,
            )  # fmt: skip
        if DEFER_NOTIFY and not LOCAL_ONLY:
            # The previous pushed tile's stores had this whole main loop to drain: flag it now.
            if pending_local >= 0:
                _notify_pushed(flags, pending_local, W, me, pending_dest, epoch)
            pending_local = -1
        if dest != me:
            peer_slot = (me - dest - 1 + W) % W
            store_rank = dest
            if LOCAL_ONLY:
                store_rank = me
            remote = dl.symm_at(scratch + peer_slot * slot_elems, store_rank)
            _store_tile(remote, acc, off_m, off_n, shard_m, N, N, SPLIT_N)
            if not LOCAL_ONLY:
                if DEFER_NOTIFY:
                    pending_local = local
                    pending_dest = dest
                else:
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
    if DEFER_NOTIFY and not LOCAL_ONLY:
        if pending_local >= 0:
            _notify_pushed(flags, pending_local, W, me, pending_dest, epoch)


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
        received = _await_received(scratch, flags + local * W, me, W, epoch)
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
    every SM and starve the peers' flag kernels on this GPU's side stream (a deadlock seen on 2 x H200 with a
    [4096, 4096] shard, where the waiting was inside the reduction).
    """
    me = dl.rank()
    W = dl.num_ranks()
    epoch = tl.load(epoch_ptr)
    for s in range(1, W):
        dl.wait(flags_ptr + (me + s) % W, 1, "sys", "acquire", waitValue=epoch)


@triton.jit
def _cublas_reduce_kernel(out_ptr, own_ptr, recv_ptr, numel, num_received, BLOCK: tl.constexpr):
    """out = own partial + the received partials, summed in fp32 (after ``_cublas_wait_kernel``)."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    acc = tl.load(own_ptr + offsets, mask=mask).to(tl.float32)
    for s in range(0, num_received):
        acc += tl.load(recv_ptr + s * numel + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------------------------------------------
# Configuration and cost model
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GemmRSConfig:
    """How ``gemm_rs`` runs: the GEMM tile configuration and the communication choices tuned with it.

    - ``matmul``: tile shape, stages, warps, epilogue split, TMA or pointer loads (``ops.matmul.MatmulConfig``).
    - ``fused``: True reduces in the own tiles' epilogue; False writes partials and reduces in a second kernel.
    - ``partial_dtype``: "float32" pushes fp32 partial tiles (exact fp32 reduction of the fp32 accumulators);
      "input" pushes them in A's dtype (half the NVLink bytes, each partial rounded once before the fp32 sum).
    - ``defer_notify``: flag a pushed tile after the next tile's main loop instead of right after its stores.
    - ``flatten``: let Triton flatten the persistent tile loop with the K loop (the next tile's loads overlap this
      tile's epilogue). Not applied where Triton 3.6 cannot (a fused epilogue with one column block, no TMA).
    - ``gemm``: "triton" (the persistent kernel above; every field but ``producer`` applies) or "cublas": per
      destination shard one ``torch.matmul`` (peers' shards first, in the staggered order), each peer's partial
      sent while the next shard's GEMM runs, then ``_cublas_reduce_kernel`` adds the received partials (input
      dtype, summed in fp32). Only ``producer`` applies to it.
    - ``producer`` (cuBLAS only): "ce" computes a peer's partial locally and a side stream copies it into the
      peer's receive slot (the copy engine: no SM taken from the GEMMs); "direct" lets cuBLAS write it straight
      into the peer's memory.
    - ``fallback``: ignore the rest and run ``torch.matmul`` + NCCL ``reduce_scatter_tensor``.
    """

    matmul: MatmulConfig = MatmulConfig(128, 256, 64, 8, 3, 8, False, 2)
    fused: bool = True
    partial_dtype: str = "float32"
    defer_notify: bool = True
    flatten: bool = True
    gemm: str = "triton"
    producer: str = "ce"
    fallback: bool = False

    def __post_init__(self) -> None:
        if self.partial_dtype not in PARTIAL_DTYPES:
            raise ValueError(f"GemmRSConfig: partial_dtype must be one of {PARTIAL_DTYPES}, got {self.partial_dtype!r}")
        if self.gemm not in GEMMS:
            raise ValueError(f"GemmRSConfig: gemm must be one of {GEMMS}, got {self.gemm!r}")
        if self.producer not in PRODUCERS:
            raise ValueError(f"GemmRSConfig: producer must be one of {PRODUCERS}, got {self.producer!r}")

    def short(self) -> str:
        if self.fallback:
            return "torch.matmul+nccl"
        if self.gemm == "cublas":
            return f"cublas-{self.producer}"
        mode = "fused" if self.fused else "2kernel"
        part = "f32" if self.partial_dtype == "float32" else "in"
        flat = "" if self.flatten else "-noflat"
        return f"{self.matmul.short()}-{mode}-{part}{'-defer' if self.defer_notify else ''}{flat}"

    def flattens(self) -> bool:
        """Whether the kernel is compiled with a flattened tile loop (see ``flatten``)."""
        # Triton 3.6's loop fusion fails on the fused epilogue's peer loop when it is the only one (SPLIT_N 1).
        return self.flatten and self.matmul.use_tma and not (self.fused and self.matmul.split_n == 1)

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "matmul": self.matmul.as_dict()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GemmRSConfig:
        values = dict(values)
        values["matmul"] = MatmulConfig.from_dict(values.get("matmul", {}))
        return cls(**values)


FALLBACK = GemmRSConfig(fallback=True)

# The joint search space (bench/gemm_rs.py --tune, the tune_gemm_rs step of scripts/gpu_check.sh): GEMM tiles x
# reduction mode x partial precision x when to flag. Tiles stay within Hopper's 227 KiB of shared memory with an
# fp32 epilogue.
_TILES = (
    MatmulConfig(128, 256, 64, 8, 3, 8, False, 2),
    MatmulConfig(128, 256, 64, 16, 3, 8, False, 2),
    MatmulConfig(128, 128, 64, 8, 4, 8, False, 1),
    MatmulConfig(128, 128, 128, 8, 3, 8, False, 1),
)
CUBLAS_CE = GemmRSConfig(partial_dtype="input", gemm="cublas", producer="ce")
CANDIDATES = (
    CUBLAS_CE,
    GemmRSConfig(partial_dtype="input", gemm="cublas", producer="direct"),
    *(GemmRSConfig(_TILES[0], True, partial, defer) for partial in PARTIAL_DTYPES for defer in (True, False)),
    GemmRSConfig(_TILES[0], True, "float32", True, flatten=False),
    GemmRSConfig(_TILES[0], False, "float32", True),
    GemmRSConfig(_TILES[0], False, "input", True),
    *(GemmRSConfig(tile, True, partial, True) for tile in _TILES[1:] for partial in PARTIAL_DTYPES),
    FALLBACK,
)


def tuning_key(m: int, n: int, k_local: int, dtype: torch.dtype, world_size: int, device: torch.device) -> str:
    """The key of this problem in ``ops.tuning``'s tables (global M, N, K, as the issue's shape list)."""
    return tuning.key("gemm_rs", m, n, k_local * world_size, dtype, world_size, torch.cuda.get_device_name(device))


def lookup_tuned(key: str) -> GemmRSConfig | None:
    """The configuration ``bench/gemm_rs.py --tune`` stored for ``key`` (user cache, then the package table)."""
    entry = tuning.lookup_entry(key)
    return None if entry is None else GemmRSConfig.from_dict(entry["config"])


# our fused kernel / cuBLAS matmul alone: 1.14-1.33 on the 2 x H200 seed shapes, measured with serialized wgmma
_TRITON_PATH_OVER_CUBLAS = 1.25
_NCCL_REDUCE_SCATTER_GBPS = 400.0  # input bytes / time: 64 MiB in 0.168 ms on 2 x H200 (bench/results/gemm_rs.md)


def estimate_ms(m: int, n: int, k_local: int, element_size: int, world_size: int) -> dict[str, float]:
    """The cost model: the Triton kernel's and torch.matmul + NCCL's expected time, in ms.

    Both scale with cuBLAS's GEMM time at ``tuning.Machine().gemm_tflops``. The Triton kernel costs a measured
    multiple of it (1.14-1.33 on the 2 x H200 seed shapes, pushes included); the baseline adds NCCL's
    reduce-scatter of the whole [M, N] partial at its measured bandwidth and a launch overhead.
    """
    machine = tuning.Machine()
    gemm = 2.0 * m * n * k_local / (machine.gemm_tflops * 1e9)
    nccl = m * n * element_size / (_NCCL_REDUCE_SCATTER_GBPS * 1e6) + machine.launch_overhead_ms
    return {"triton_ms": gemm * _TRITON_PATH_OVER_CUBLAS + 0.02, "baseline_ms": gemm + nccl, "gemm_ms": gemm}


def choose_config(
    m: int, n: int, k_local: int, dtype: torch.dtype, world_size: int, device: torch.device, target: Any = None
) -> GemmRSConfig:
    """The tuned configuration for this problem if one is stored, else the cost model's pick.

    ``target`` (a triton ``GPUTarget``) defaults to the current device's. The tuned table (``bench/gemm_rs.py
    --tune``) holds the fastest measured candidate, torch.matmul + NCCL included, so a tuned shape never runs
    slower than that baseline. Untuned: the Triton kernel where :func:`estimate_ms` expects it at least 5% faster
    than the baseline and its loads can run (rows of 16-byte multiples), else the baseline. The cuBLAS path is
    chosen only by measurement (the tuner), never by the model. One rank: the baseline.
    """
    if target is None:
        target = triton.runtime.driver.active.get_current_target()
    if world_size == 1:
        return FALLBACK
    element_size = torch.empty((), dtype=dtype).element_size()
    if target.backend == "cuda" and device.type == "cuda":
        tuned = lookup_tuned(tuning_key(m, n, k_local, dtype, world_size, device))
        if tuned is not None:
            return tuned
    aligned = (k_local * element_size) % 16 == 0 and (n * element_size) % 16 == 0
    estimate = estimate_ms(m, n, k_local, element_size, world_size)
    if not aligned or m // world_size == 0 or estimate["triton_ms"] >= 0.95 * estimate["baseline_ms"]:
        return FALLBACK
    # Input-dtype partials: 10% faster than fp32 ones on every seed shape, normwise error 2.0e-3 against 1.7e-3
    # (torch.matmul + NCCL: 2.5e-3); the sum is still taken in fp32.
    default = GemmRSConfig(partial_dtype="input")
    return dataclasses.replace(default, matmul=config_for_target(default.matmul, target))


# ----------------------------------------------------------------------------------------------------------------
# Workspace
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Workspace:
    """Symmetric scratch and flags for one (shape, dtype, partial precision, mode), and the device-side epoch."""

    scratch: torch.Tensor
    flags: torch.Tensor
    epoch: torch.Tensor


_workspaces: dict[tuple[Any, ...], Any] = {}


def _world() -> Any:
    from triton_dist.runtime import current_world

    return current_world()


_agreed = AgreedSignatures()
"""The (a shape, b shape, dtype, config) signatures the current world's ranks agreed on."""


def _check_same_on_all_ranks(world: Any, a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig) -> None:
    """Raise the same ValueError on every rank unless all ranks pass the same shapes, dtypes and configuration.

    A collective, run the first time this rank sees a signature (and on every eager call with
    ``TRITON_DIST_GEMM_RS_CHECK=always``), before anything is allocated or launched.
    """
    signature = (tuple(a.shape), tuple(b.shape), a.dtype, config)
    capturing = torch.cuda.is_current_stream_capturing()
    if _agreed.known(world, signature) and (capturing or os.environ.get(CHECK_ENV) != "always"):
        return
    if capturing:
        raise RuntimeError(
            f"gemm_rs: first call with a={list(a.shape)}, b={list(b.shape)} ({a.dtype}) inside CUDA-graph capture; "
            "it checks the shapes with the peers and allocates a symmetric workspace, which capture cannot do: "
            "run the op once eagerly with these shapes before capturing"
        )
    what = {"a": list(a.shape), "b": list(b.shape), "dtype": str(a.dtype), "config": config.short()}
    _agree(world, what)
    _agreed.add(world, signature)


def _agree(world: Any, what: dict[str, Any]) -> None:
    from triton_dist.runtime.world.rank_agreement import gather_from_ranks

    gathered = gather_from_ranks(what, world.group)
    problems = []
    for key in what:
        values = [view.get(key) for view in gathered]
        if len(set(map(repr, values))) > 1:
            problems.append(f"{key}: " + ", ".join(f"rank {r}: {v}" for r, v in enumerate(values)))
    if problems:
        raise ValueError("gemm_rs: ranks passed different inputs (" + "; ".join(problems) + ")")


def _workspace(world: Any, m: int, n: int, k_local: int, dtype: torch.dtype, config: GemmRSConfig) -> Workspace:
    partial = torch.float32 if config.partial_dtype == "float32" else dtype
    slots = world.world_size - 1 if config.fused else world.world_size
    tiles = triton.cdiv(m // world.world_size, config.matmul.block_m) * triton.cdiv(n, config.matmul.block_n)
    key = (m, n, k_local, dtype, partial, slots, tiles)
    found = _workspaces.get(key)
    if found is not None:
        return found
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"gemm_rs: first call with shape a=[{m}, {k_local}], b=[{k_local}, {n}] ({dtype}) inside CUDA-graph "
            "capture; its symmetric workspace is allocated collectively, which capture cannot do: run the op once "
            "eagerly with these shapes before capturing"
        )
    from triton_dist.runtime.heap.allocator import HeapExhaustedError
    from triton_dist.runtime.world.rank_agreement import raise_if_any_rank_failed

    shard = m // world.world_size
    scratch_bytes = 2 * slots * shard * n * torch.empty((), dtype=partial).element_size()
    problems: list[str] = []
    scratch = flags = None
    try:
        scratch = world.heap.empty((2, slots, shard, n), partial)
        flags = world.heap.empty((2, tiles, world.world_size), torch.int32)
    except HeapExhaustedError as error:
        free = world.heap.stats().get("largest_free_block", 0)
        problems.append(
            f"the symmetric heap is exhausted: gemm_rs needs {scratch_bytes / 2**20:.1f} MiB of scratch for "
            f"a=[{m}, {k_local}], b=[{k_local}, {n}] ({config.partial_dtype} partials) and the largest free block is "
            f"{free / 2**20:.1f} MiB; raise TRITON_DIST_HEAP_SIZE / triton_dist.init(heap_size=...) ({error})"
        )
    raise_if_any_rank_failed(world.group, problems, "gemm_rs workspace")
    assert scratch is not None and flags is not None
    flags.zero_()
    epoch = torch.zeros((), dtype=torch.int32, device=world.device)
    from triton_dist.runtime import barrier

    barrier()  # every rank's flags are zero before any rank's first push can set one
    workspace = Workspace(scratch=scratch, flags=flags, epoch=epoch)
    _workspaces[key] = workspace
    return workspace


@dataclass
class CublasWorkspace:
    """The cuBLAS path's buffers for one (shape, dtype): receive slots, flags, acks (symmetric), local partials."""

    recv: torch.Tensor  # symmetric [W - 1, M/W, N]: slot s - 1 receives rank (rank + s)'s partial
    flags: torch.Tensor  # symmetric int32 [W]: flags[r] = the epoch whose partial from rank r has landed
    ack: torch.Tensor  # symmetric int32 [W]: ack[r] = the last epoch whose partial from here rank r consumed
    epoch: torch.Tensor  # int32 [1], this rank's epoch counter
    send: torch.Tensor  # [W - 1, M/W, N]: the peers' partials before the copy ("ce")
    own: torch.Tensor  # [M/W, N]: the own shard's partial
    peer_recv: dict[int, torch.Tensor]  # rank -> that rank's receive buffer, viewed from here


def _cublas_workspace(world: Any, m: int, n: int, dtype: torch.dtype) -> CublasWorkspace:
    key = ("cublas", m, n, dtype)
    found = _workspaces.get(key)
    if found is not None:
        return found
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("gemm_rs: needs new buffers while a CUDA graph is being captured; run it eagerly first")
    from triton_dist import runtime as rt
    from triton_dist.runtime.heap.allocator import HeapExhaustedError
    from triton_dist.runtime.world.rank_agreement import raise_if_any_rank_failed

    w = world.world_size
    shard = m // w
    problems: list[str] = []
    recv = flags = ack = None
    try:
        recv = rt.empty(w - 1, shard, n, dtype=dtype)
        flags = rt.zeros(w, dtype=torch.int32)
        ack = rt.zeros(w, dtype=torch.int32)
    except HeapExhaustedError as error:
        need = (w - 1) * shard * n * torch.empty((), dtype=dtype).element_size()
        problems.append(
            f"the symmetric heap is exhausted: gemm_rs needs {need / 2**20:.1f} MiB of receive buffer for M={m}, "
            f"N={n} ({dtype}); raise TRITON_DIST_HEAP_SIZE / triton_dist.init(heap_size=...) ({error})"
        )
    raise_if_any_rank_failed(world.group, problems, "gemm_rs workspace")
    assert recv is not None and flags is not None and ack is not None
    rt.barrier()  # every rank's zeroed flags are in place before any rank sets one
    found = CublasWorkspace(
        recv=recv,
        flags=flags,
        ack=ack,
        epoch=torch.zeros(1, dtype=torch.int32, device=world.device),
        send=torch.empty((w - 1, shard, n), dtype=dtype, device=world.device),
        own=torch.empty((shard, n), dtype=dtype, device=world.device),
        peer_recv={r: rt.peer_tensor(recv, r) for r in range(w) if r != world.rank},
    )
    _workspaces[key] = found
    return found


_side_streams: dict[int, torch.cuda.Stream] = {}


def _launch_cublas(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmRSConfig, world: Any) -> None:
    """The cuBLAS path (see ``GemmRSConfig.gemm``): peers' shards first, each sent while the next GEMM runs."""
    w, me = world.world_size, world.rank
    shard = out.shape[0]
    ws = _cublas_workspace(world, a.shape[0], b.shape[1], a.dtype)
    main = torch.cuda.current_stream(a.device)
    side = _side_streams.get(a.device.index)
    if side is None:
        side = _side_streams[a.device.index] = torch.cuda.Stream(a.device)
    _cublas_begin_kernel[(1,)](ws.epoch, ws.ack, num_warps=1)
    for s in range(1, w):
        peer = (me + s) % w
        slot = (me - peer - 1) % w  # this rank's slot in the peer's receive buffer
        rows = a[peer * shard : (peer + 1) * shard]
        if config.producer == "direct":
            _cublas_wait_ack_kernel[(1,)](ws.ack, ws.epoch, peer, num_warps=1)
            torch.mm(rows, b, out=ws.peer_recv[peer][slot])
            _cublas_flag_kernel[(1,)](ws.flags, ws.epoch, peer, num_warps=1)
            continue
        torch.mm(rows, b, out=ws.send[s - 1])
        side.wait_stream(main)
        with torch.cuda.stream(side):
            _cublas_wait_ack_kernel[(1,)](ws.ack, ws.epoch, peer, num_warps=1)
            ws.peer_recv[peer][slot].copy_(ws.send[s - 1], non_blocking=True)
            _cublas_flag_kernel[(1,)](ws.flags, ws.epoch, peer, num_warps=1)
    torch.mm(a[me * shard : (me + 1) * shard], b, out=ws.own)
    _cublas_wait_kernel[(1,)](ws.flags, ws.epoch, num_warps=1)
    block = 4096
    _cublas_reduce_kernel[(triton.cdiv(out.numel(), block),)](
        out, ws.own, ws.recv, out.numel(), w - 1, BLOCK=block, num_warps=8
    )
    if config.producer == "ce":
        main.wait_stream(side)  # the side stream rejoins (CUDA-graph capture needs it; ws.send is free again)


def clear_workspaces() -> None:
    """Free every gemm_rs workspace (a collective: call on all ranks, outside CUDA-graph capture)."""
    from triton_dist.runtime import barrier

    barrier()
    _workspaces.clear()


# ----------------------------------------------------------------------------------------------------------------
# Host entry points
# ----------------------------------------------------------------------------------------------------------------


def check_inputs(a: Any, b: Any, world_size: int, device: torch.device) -> None:
    """Raise TypeError/ValueError naming the problem unless ``gemm_rs(a, b)`` can run on this rank."""
    for name, tensor in (("a", a), ("b", b)):
        check_matrix("gemm_rs", name, tensor)
        if tensor.device != device:
            raise ValueError(f"gemm_rs: {name} is on {tensor.device}, but this rank's triton_dist device is {device}")
    if a.dtype != b.dtype:
        raise TypeError(f"gemm_rs: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"gemm_rs: a is {list(a.shape)} and b is {list(b.shape)}: a.shape[1] (K/W) must equal b.shape[0]"
        )
    if a.shape[0] % world_size:
        raise ValueError(f"gemm_rs: a has {a.shape[0]} rows, not a multiple of the world size {world_size}")


def _launch(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmRSConfig, ws: Workspace, local_only: bool = False
) -> None:
    m, k = a.shape
    n = b.shape[1]
    world_size = m // out.shape[0] if out.shape[0] else 1
    tile = config.matmul
    tiles = triton.cdiv(out.shape[0], tile.block_m) * triton.cdiv(n, tile.block_n)
    if tile.use_tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        a_arg: Any = TensorDescriptor.from_tensor(a, [tile.block_m, tile.block_k])
        b_arg: Any = TensorDescriptor.from_tensor(b, [tile.block_k, tile.block_n])
    else:
        a_arg, b_arg = a, b
    programs = min(num_sms(a.device.index), world_size * tiles)
    if not local_only:
        ws.epoch.add_(1)
    _gemm_rs_kernel[(programs,)](
        a_arg, b_arg, out, ws.scratch, ws.flags, ws.epoch,
        m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0),
        BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k, GROUP_M=tile.group_m,
        SPLIT_N=tile.split_n, USE_TMA=tile.use_tma, FUSED=config.fused, DEFER_NOTIFY=config.defer_notify,
        FLATTEN=config.flattens(), LOCAL_ONLY=local_only, num_stages=tile.num_stages, num_warps=tile.num_warps,
    )  # fmt: skip
    if not config.fused:
        _reduce_partials_kernel[(min(num_sms(a.device.index), tiles),)](
            out, ws.scratch, ws.flags, ws.epoch, m, n, out.stride(0),
            BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, GROUP_M=tile.group_m, num_warps=8,
        )  # fmt: skip


def launch_without_communication(a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig) -> torch.Tensor:
    """Diagnostic: the Triton kernel of ``config`` with every push stored locally and no flag set or awaited.

    Same GEMM, same stores and loads, no NVLink traffic and no synchronization, so its time beside ``gemm_rs``'s
    says what the communication costs. The result is meaningless and no epoch is used up; call it on every rank
    alike (the first call of a shape allocates the workspace, a collective).
    """
    world = _world()
    check_inputs(a, b, world.world_size, world.device)
    if config.fallback or config.gemm != "triton" or not config.fused:
        raise ValueError(f"launch_without_communication: needs a fused Triton configuration, got {config.short()}")
    m, k_local = a.shape
    config = config_for_operands(config, a, b)
    a, b = aligned_for(config, a), aligned_for(config, b)
    ws = _workspace(world, m, b.shape[1], k_local, a.dtype, config)
    out = torch.empty((m // world.world_size, b.shape[1]), dtype=a.dtype, device=a.device)
    with torch.cuda.device(a.device):
        _launch(a, b, out, config, ws, local_only=True)
    return out


def matmul_reduce_scatter(a: torch.Tensor, b: torch.Tensor, group: Any = None) -> torch.Tensor:
    """The baseline and fallback: ``torch.matmul`` then NCCL ``reduce_scatter_tensor`` (in A's dtype)."""
    world_size = dist.get_world_size(group)
    partial = a @ b
    out = partial.new_empty((a.shape[0] // world_size, b.shape[1]))
    dist.reduce_scatter_tensor(out, partial, group=group)
    return out


_chosen: dict[tuple[Any, ...], GemmRSConfig] = {}  # choose_config per problem, so the table is read once


def config_for_operands(config: GemmRSConfig, a: torch.Tensor, b: torch.Tensor) -> GemmRSConfig:
    """``config``, with the pointer kernel of the same tile where A's or B's rows cannot feed TMA.

    K/W * 2 bytes is not a multiple of 16 for some world sizes even when K is (K = 528: 264 bytes per row of A at 4
    ranks), and a TMA descriptor refuses such strides. The choice depends on shapes only, so every rank makes it
    alike (the tile decides how partials are exchanged).
    """
    if config.fallback or config.gemm != "triton" or not config.matmul.use_tma or rows_fit_tma(a, b):
        return config
    return dataclasses.replace(config, matmul=pointer_config(config.matmul))


def aligned_for(config: GemmRSConfig, t: torch.Tensor) -> torch.Tensor:
    """``t``, or a copy of it where the TMA kernel would get a start off a 16-byte boundary (a view at an odd
    element offset). A copy, not another kernel: the kernel must be the same on every rank, the alignment is this
    rank's own."""
    uses_tma = not config.fallback and config.gemm == "triton" and config.matmul.use_tma
    return t.clone() if uses_tma and t.data_ptr() % 16 else t


def gemm_rs_with(a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig | None = None) -> torch.Tensor:
    """``gemm_rs(a, b)`` with an explicit configuration (None: tuned or cost-model choice). Not a custom op."""
    world = _world()
    check_inputs(a, b, world.world_size, world.device)
    m, k_local = a.shape
    n = b.shape[1]
    if config is None:
        config_key = (m, n, k_local, a.dtype, world.world_size, a.device)
        config = _chosen.get(config_key)
        if config is None:
            config = _chosen[config_key] = choose_config(m, n, k_local, a.dtype, world.world_size, a.device)
    config = config_for_operands(config, a, b)
    a, b = aligned_for(config, a), aligned_for(config, b)
    _check_same_on_all_ranks(world, a, b, config)
    if config.fallback:
        return matmul_reduce_scatter(a, b, world.group)
    out = torch.empty((m // world.world_size, n), dtype=a.dtype, device=a.device)
    if out.numel() == 0:
        return out
    if k_local == 0:
        return out.zero_()
    with torch.cuda.device(a.device):
        if config.gemm == "cublas":
            _launch_cublas(a, b, out, config, world)
        else:
            _launch(a, b, out, config, _workspace(world, m, n, k_local, a.dtype, config))
    return out


@torch.library.custom_op("triton_dist::gemm_rs", mutates_args=())
def _gemm_rs_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return gemm_rs_with(a, b)


@_gemm_rs_op.register_fake
def _gemm_rs_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    from triton_dist.runtime import is_initialized

    world_size = _world().world_size if is_initialized() else dist.get_world_size()
    return a.new_empty((a.shape[0] // world_size, b.shape[1]))


def gemm_rs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """This rank's row shard of ``sum over ranks of a @ b``: [M/W, N] in a's dtype, reduced in fp32.

    Call on every rank of the triton_dist world (after ``triton_dist.init()``) with A_r [M, K/W] and B_r [K/W, N],
    bf16 or fp16, contiguous, on this rank's device; M a multiple of the world size. Ordinary torch tensors are fine
    (the op reads them only on their own rank). The first call of each shape allocates a workspace on the
    symmetric heap collectively and checks that every rank passed the same shapes and dtypes; run it once eagerly
    before capturing a CUDA graph. A torch custom op (``torch.ops.triton_dist.gemm_rs``): works under
    ``torch.compile`` and in CUDA graphs.
    """
    return torch.ops.triton_dist.gemm_rs(a, b)


def workspace_bytes(m: int, n: int, dtype: torch.dtype, world_size: int, config: GemmRSConfig) -> int:
    """Symmetric-heap bytes one shape's workspace takes (scratch + flags), per rank."""
    partial = 4 if config.partial_dtype == "float32" else torch.empty((), dtype=dtype).element_size()
    slots = world_size - 1 if config.fused else world_size
    shard = m // world_size
    tiles = math.ceil(shard / config.matmul.block_m) * math.ceil(n / config.matmul.block_n)
    return 2 * slots * shard * n * partial + 2 * tiles * world_size * 4


__all__ = [
    "CANDIDATES",
    "FALLBACK",
    "GemmRSConfig",
    "check_inputs",
    "choose_config",
    "clear_workspaces",
    "estimate_ms",
    "lookup_tuned",
    "gemm_rs",
    "gemm_rs_with",
    "launch_without_communication",
    "matmul_reduce_scatter",
    "tuning_key",
    "workspace_bytes",
]
