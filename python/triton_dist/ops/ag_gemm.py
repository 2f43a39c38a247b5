"""AllGather + GEMM, overlapped: ``ag_gemm(a, b)`` = ``all_gather(a) @ b``.

Rank r holds A_r [M_local, K] and B [K, N]; the result is C [W * M_local, N] (rows of rank s at s * M_local),
optionally with the gathered A [W * M_local, K]. bf16 or fp16, any world size.

How one call runs (all on the GPU, no host synchronization, so it can be captured in a CUDA graph):

1. ``_begin_kernel`` (current stream): advances this op's epoch counter in device memory (every rank's counter
   moves in step, so epochs never need the host) and passes a device barrier with the peers: after it every peer
   has finished its previous call, so its receive buffer is free.
2. The producer pushes this rank's A, chunk by chunk (``chunk_tiles * BLOCK_M`` rows), into slot r of every peer's
   symmetric receive buffer and sets one flag per chunk (and per pushing program) on that peer to the epoch:
   - ``"ce"``: ``copy_`` on a side stream (the copy engine), each followed by a 4-byte copy of this rank's epoch
     counter into the peer's flag (the value is read on the device, so a CUDA graph replays it correctly);
   - ``"sm"``: ``_push_kernel`` on ``push_ctas`` SMs (vector stores through ``dl.symm_at``, then ``dl.notify``).
   Rank r sends to r - 1 first, then r - 2, ...: rank r receives from r + 1 first.
3. The persistent GEMM (``_ag_gemm_tma_kernel``, or the pointer kernel where there is no TMA) first computes the
   rows of its own shard straight from ``a`` (no wait, no copy), then the peers' rows in arrival order, each tile
   after ``dl.wait`` on its chunk's flags (acquire) and ``dl.consume_token`` on the row it loads from.

Zero-copy: ``a`` and ``b`` may be ordinary torch tensors; only the peers' shards travel, into a receive buffer on
the symmetric heap that the op keeps per (shape, dtype) and reuses. Nothing is staged.

The configuration (tile shape, chunk size, producer, or the plain NCCL + cuBLAS path where fusion cannot win)
comes from :mod:`triton_dist.ops.tuning`. ``ag_gemm`` is the torch custom op ``torch.ops.triton_dist.ag_gemm``;
it works under ``torch.compile`` and in CUDA graphs once the same shapes ran eagerly (the first call for a shape
allocates its buffers and checks with the peers that every rank passes the same shapes and dtypes).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch
import torch.distributed as dist
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.ops import tuning
from triton_dist.ops.matmul import (
    MatmulConfig,
    check_operands,
    config_for_target,
    grouped_tile,
    num_sms,
    ptr_mainloop,
    ptr_store,
    rows_fit_tma,
    tma_mainloop,
    tma_store,
)
from triton_dist.ops.tuning import OverlapConfig

# ----------------------------------------------------------------------------------------------------- kernels


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
        lo = chunk.to(tl.int64) * CHUNK_ROWS * K
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


# ------------------------------------------------------------------------------------------------ host state


class AgGemmError(ValueError):
    """Bad input to ``ag_gemm`` (raised on the host before anything is launched)."""


@dataclasses.dataclass
class _Workspace:
    """Buffers of one (M_local, N, K, dtype, config) problem: receive buffer, flags, epoch, barrier."""

    recv: torch.Tensor  # [W * M_local, K], symmetric; slot s holds rank s's shard once its flags are set
    flags: torch.Tensor  # int32, symmetric: (segment, chunk, pushing program)
    epoch: torch.Tensor  # int32 [1], this rank's epoch counter
    barrier: torch.Tensor  # int32 [W], symmetric
    peer_recv: dict[int, torch.Tensor]
    peer_flags: dict[int, torch.Tensor]


_workspaces: dict[tuple[Any, ...], _Workspace] = {}
_side_streams: dict[int, torch.cuda.Stream] = {}
_checked: set[tuple[Any, ...]] = set()


def _side_stream(device: torch.device) -> torch.cuda.Stream:
    if device.index not in _side_streams:
        _side_streams[device.index] = torch.cuda.Stream(device=device)
    return _side_streams[device.index]


def _capturing() -> bool:
    return torch.cuda.is_current_stream_capturing()


def check_inputs(a: torch.Tensor, b: torch.Tensor) -> rt.World:
    """Local checks of ``ag_gemm``'s operands (types, dtypes, shapes, layout, device); returns the world."""
    try:
        check_operands(a, b, "ag_gemm", tma_rows=False)
    except (TypeError, ValueError) as error:
        raise AgGemmError(str(error)) from None
    if not rt.is_initialized():
        raise RuntimeError("ag_gemm: call triton_dist.init() first (it needs the symmetric heap)")
    world = rt.current_world()
    if a.device != world.device:
        raise AgGemmError(f"ag_gemm: the operands are on {a.device}, but this rank's heap is on {world.device}")
    return world


def _check_same_on_all_ranks(world: rt.World, signature: tuple[Any, ...]) -> None:
    """Raise on every rank unless all ranks call with the same shapes and dtypes (once per signature)."""
    if signature in _checked:
        return
    if _capturing():
        raise RuntimeError(
            "ag_gemm: the first call with these shapes is being captured in a CUDA graph; run it once eagerly "
            "first (it allocates its buffers and checks the shapes with the peers)"
        )
    gathered: list[Any] = [None] * world.world_size
    dist.all_gather_object(gathered, signature, group=world.group)
    if any(other != signature for other in gathered):
        described = "; ".join(f"rank {r}: a {s[0]} b {s[1]} {s[2]}" for r, s in enumerate(gathered))
        raise AgGemmError(f"ag_gemm: ranks disagree on shapes or dtypes ({described}); all must pass the same")
    _checked.add(signature)


def _load_producer_kernels(
    world: rt.World, a: torch.Tensor, recv: torch.Tensor, flags: torch.Tensor, epoch: torch.Tensor
) -> None:
    """Launch the producer kernels once, harmlessly, so they are loaded before any GEMM of this op can spin.

    With CUDA's lazy module loading (the default), the first launch of a kernel loads its module, and that load
    can wait for the kernels running on the GPU. A flag kernel loaded for the first time while this rank's GEMM
    spins on the peer's flags, and the peer's flag kernel waiting the same way, would block both ranks forever.
    The launch below changes nothing: the push kernel gets zero chunks.
    """
    _push_kernel[(1,)](a, recv, flags, epoch, a.shape[0], a.shape[1], MIN_BLOCK_M, 0, BLOCK=PUSH_BLOCK, num_warps=16)


MAX_PUSH_CTAS = 64
PUSH_BLOCK = 8192
MIN_BLOCK_M = 64


def _workspace(world: rt.World, a: torch.Tensor) -> _Workspace:
    """The buffers for shards like ``a`` ([M_local, K], its dtype), allocated on first use and kept.

    The flags have room for the finest chunking (one ``MIN_BLOCK_M`` tile row per chunk) times the most pushing
    programs, so every configuration shares them: a flag counts only when it equals the current epoch, and the
    epoch moves on every call, so a flag left by another configuration never matches.
    """
    m_local, k = a.shape
    ws_key = (m_local, k, a.dtype)
    found = _workspaces.get(ws_key)
    if found is not None:
        return found
    if _capturing():
        raise RuntimeError("ag_gemm: needs new buffers while a CUDA graph is being captured; run it eagerly first")
    w = world.world_size
    max_chunks = triton.cdiv(m_local, MIN_BLOCK_M)
    try:
        recv = rt.empty(w * m_local, k, dtype=a.dtype)
        flags = rt.zeros(w * max_chunks * MAX_PUSH_CTAS, dtype=torch.int32)
        barrier = rt.zeros(w, dtype=torch.int32)
    except rt.HeapExhaustedError as error:
        need = w * m_local * k * a.element_size()
        raise rt.HeapExhaustedError(
            f"ag_gemm: the symmetric heap has no room for the receive buffer ({need >> 20} MiB for "
            f"{w} x [{m_local}, {k}] {a.dtype}); pass a larger heap_size to triton_dist.init() ({error})"
        ) from None
    epoch = torch.zeros(1, dtype=torch.int32, device=world.device)
    _load_producer_kernels(world, a, recv, flags, epoch)
    rt.barrier()  # every rank's zeroed flags are in place before any rank sets one
    peer_recv = {r: rt.peer_tensor(recv, r) for r in range(w) if r != world.rank}
    peer_flags = {r: rt.peer_tensor(flags, r) for r in range(w) if r != world.rank}
    found = _Workspace(recv, flags, epoch, barrier, peer_recv, peer_flags)
    _workspaces[ws_key] = found
    return found


@functools.cache
def _gpu_name(device_index: int) -> str:
    return torch.cuda.get_device_name(device_index)


@functools.cache
def choose_config(m_local: int, n: int, k: int, dtype: torch.dtype, world_size: int, device: torch.device) -> Any:
    """The configuration ``ag_gemm`` uses for this problem (tuned, else the cost model), for the current target.

    Remembered per problem for the life of the process (tuning files are read once per shape, not per call).
    """
    config, _ = tuning.choose(
        "ag_gemm",
        m_local * world_size,
        n * world_size,
        k,
        dtype,
        torch.empty((), dtype=dtype).element_size(),
        world_size,
        _gpu_name(device.index),
    )
    return config


def tma_fits(mm: MatmulConfig, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the TMA kernel can take these operands with tile ``mm`` (else the pointer kernel runs).

    TMA stores of the own shard write whole BLOCK_M rows of C: only when tiles do not cross shard boundaries. A
    descriptor needs rows 16 bytes apart (K and N/W multiples of 8) and a 16-byte aligned start; C and the receive
    buffer share A's and B's row lengths and are allocated aligned. The choice may differ between ranks (a view
    at an odd offset on one of them): the producer's chunks and flags do not depend on it."""
    aligned = a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0
    return mm.use_tma and a.shape[0] % mm.block_m == 0 and rows_fit_tma(a, b) and aligned


def _use_tma(config: OverlapConfig, a: torch.Tensor, b: torch.Tensor) -> bool:
    target = triton.runtime.driver.active.get_current_target()
    return tma_fits(config_for_target(config.matmul, target), a, b)


def _launch_fused(
    world: rt.World, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: OverlapConfig, no_comm: bool = False
) -> _Workspace:
    m_local, k = a.shape
    n = b.shape[1]
    ws = _workspace(world, a)
    if config.matmul.block_m < MIN_BLOCK_M or config.push_ctas > MAX_PUSH_CTAS:
        raise AgGemmError(f"ag_gemm: block_m must be >= {MIN_BLOCK_M} and push_ctas <= {MAX_PUSH_CTAS}: {config}")
    device = a.device
    main = torch.cuda.current_stream(device)
    _begin_kernel[(1,)](ws.epoch, ws.barrier, num_warps=1)
    mm = config.matmul
    target = triton.runtime.driver.active.get_current_target()
    sms = num_sms(device.index)
    # One SM stays free beside the copy engine too: should the driver run a small copy (the 4-byte flag copies)
    # as a kernel, it must not queue behind GEMM programs that spin on that very flag.
    reserved = config.push_ctas if config.producer == "sm" else 1
    chunk_rows = config.chunk_tiles * mm.block_m
    num_chunks = triton.cdiv(m_local, chunk_rows)
    flags_per_chunk = config.push_ctas if config.producer == "sm" else 1
    w_all = world.world_size
    side = _side_stream(device)
    if no_comm:  # diagnosis only (bench/ag_gemm.py): every flag already holds the epoch, nothing travels
        ws.flags[: w_all * num_chunks * flags_per_chunk].copy_(ws.epoch.expand(w_all * num_chunks * flags_per_chunk))
    side.wait_stream(main)
    if config.producer == "sm" and not no_comm:
        with torch.cuda.stream(side):
            _push_kernel[(config.push_ctas,)](
                a, ws.recv, ws.flags, ws.epoch, m_local, k, chunk_rows, num_chunks, BLOCK=PUSH_BLOCK, num_warps=16
            )
    if _use_tma(config, a, b):
        from triton.tools.tensor_descriptor import TensorDescriptor

        bm, bn, bk = mm.block_m, mm.block_n, mm.block_k
        grid = (max(1, min(sms - reserved, triton.cdiv(m_local, bm) * triton.cdiv(n, bn) * world.world_size)),)
        _ag_gemm_tma_kernel[grid](
            TensorDescriptor.from_tensor(a, [bm, bk]),
            TensorDescriptor.from_tensor(ws.recv, [bm, bk]),
            TensorDescriptor.from_tensor(b, [bk, bn]),
            TensorDescriptor.from_tensor(c, [bm, bn // mm.split_n]),
            ws.flags,
            ws.epoch,
            m_local,
            n,
            k,
            config.chunk_tiles,
            flags_per_chunk,
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            GROUP_M=mm.group_m,
            SPLIT_N=mm.split_n,
            FLATTEN_PEERS=config.flatten_peers,
            num_stages=mm.num_stages,
            num_warps=mm.num_warps,
        )
    else:
        fallback = config_for_target(dataclasses.replace(mm, use_tma=False), target)
        grid = (
            max(
                1,
                min(
                    sms - reserved,
                    triton.cdiv(m_local, fallback.block_m) * triton.cdiv(n, fallback.block_n) * world.world_size,
                ),
            ),
        )
        _ag_gemm_ptr_kernel[grid](
            a,
            ws.recv,
            b,
            c,
            ws.flags,
            ws.epoch,
            m_local,
            n,
            k,
            config.chunk_tiles * mm.block_m // fallback.block_m,
            flags_per_chunk,
            BLOCK_M=fallback.block_m,
            BLOCK_N=fallback.block_n,
            BLOCK_K=fallback.block_k,
            GROUP_M=fallback.group_m,
            num_stages=fallback.num_stages,
            num_warps=fallback.num_warps,
        )
    if config.producer == "ce" and not no_comm:
        me, w = world.rank, world.world_size
        with torch.cuda.stream(side):
            for chunk in range(num_chunks):
                lo = chunk * chunk_rows
                hi = min(lo + chunk_rows, m_local)
                for step in range(1, w):
                    dst = (me - step) % w
                    ws.peer_recv[dst][me * m_local + lo : me * m_local + hi].copy_(a[lo:hi])
                    flag = me * num_chunks + chunk
                    ws.peer_flags[dst][flag : flag + 1].copy_(ws.epoch)  # stream-ordered after the chunk
    main.wait_stream(side)
    return ws


def ag_gemm_impl(
    a: torch.Tensor,
    b: torch.Tensor,
    return_gathered: bool = False,
    config: OverlapConfig | None = None,
    _no_comm: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``ag_gemm`` without the custom-op wrapper; ``config`` overrides the tuned choice (benchmarks, tuning).

    ``_no_comm`` (diagnosis only, wrong results): the fused kernel runs with every flag already set and no
    producer, which separates the cost of the concurrent communication from that of the kernel's schedule.
    """
    world = check_inputs(a, b)
    m_local, k = a.shape
    n = b.shape[1]
    w = world.world_size
    _check_same_on_all_ranks(world, (tuple(a.shape), tuple(b.shape), str(a.dtype)))
    if config is None:
        config = choose_config(m_local, n, k, a.dtype, w, a.device)
    c = torch.empty((w * m_local, n), dtype=a.dtype, device=a.device)
    if config.backend == "nccl" or m_local == 0 or n == 0:
        gathered = torch.empty((w * m_local, k), dtype=a.dtype, device=a.device)
        dist.all_gather_into_tensor(gathered, a, group=world.group)
        torch.matmul(gathered, b, out=c)
        return c, (gathered if return_gathered else None)
    with torch.cuda.device(a.device):
        ws = _launch_fused(world, a, b, c, config, no_comm=_no_comm)
    if not return_gathered:
        return c, None
    gathered = ws.recv.clone()
    gathered[world.rank * m_local : (world.rank + 1) * m_local].copy_(a)
    return c, gathered


# -------------------------------------------------------------------------------------------- the custom op


@torch.library.custom_op("triton_dist::ag_gemm", mutates_args=())
def _ag_gemm_op(a: torch.Tensor, b: torch.Tensor, return_gathered: bool) -> tuple[torch.Tensor, torch.Tensor]:
    c, gathered = ag_gemm_impl(a, b, return_gathered)
    if gathered is None:
        gathered = a.new_empty((0, a.shape[1]))
    return c, gathered


@_ag_gemm_op.register_fake
def _(a: torch.Tensor, b: torch.Tensor, return_gathered: bool) -> tuple[torch.Tensor, torch.Tensor]:
    w = rt.current_world().world_size
    rows = w * a.shape[0]
    gathered_rows = rows if return_gathered else 0
    return a.new_empty((rows, b.shape[1])), a.new_empty((gathered_rows, a.shape[1]))


def ag_gemm(
    a: torch.Tensor, b: torch.Tensor, *, return_gathered: bool = False
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """C = all_gather(a) @ b across all ranks of the triton_dist world, overlapped.

    ``a``: this rank's rows [M_local, K]; ``b``: [K, N]; both bf16 or fp16, contiguous, on this rank's GPU, the
    same shapes and dtype on every rank (checked with the peers on the first call per shape). Returns C
    [W * M_local, N], and with ``return_gathered=True`` also all_gather(a) [W * M_local, K].

    Every rank must call it the same number of times (it synchronizes with the peers on the GPU).
    Raises ``AgGemmError`` (a ValueError) naming the problem for bad input, ``HeapExhaustedError`` when the heap
    cannot hold the receive buffer.
    """
    c, gathered = torch.ops.triton_dist.ag_gemm(a, b, return_gathered)
    return (c, gathered) if return_gathered else c
