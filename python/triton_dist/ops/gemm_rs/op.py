"""The ``gemm_rs`` host op: input checks, workspaces, one plan per call signature, the three paths, the custom op.

The first call of a signature (shapes, dtypes, strides, device, the operands' 16-byte alignment, the configuration,
the world) agrees with the peers, allocates the workspace and compiles every kernel the path launches into a plan;
later calls look the plan up and launch (no ``JITFunction`` binding, no ``torch.cuda.stream`` contexts, copies by
address).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from triton_dist import runtime as rt
from triton_dist.ops import tuning
from triton_dist.ops.common import eager_graphs, resources
from triton_dist.ops.common.collectives import reduce_scatter_method
from triton_dist.ops.common.dispatch import PlanCache, operand_signature
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.eager_graphs import EagerGraphs, replays_collective
from triton_dist.ops.common.errors import OpInputError, emulated_world, on_device, peer_world
from triton_dist.ops.common.gpu import EMULATED_SMS
from triton_dist.ops.common.launch import (
    DescriptorCache,
    EmulatedLaunch,
    LaunchPlan,
    compile_plan,
    current_device_index,
    current_raw_stream,
)
from triton_dist.ops.common.outputs import check_out
from triton_dist.ops.common.stream_ops import StreamOps, stream_ops
from triton_dist.ops.gemm_rs.config import CUBLAS_DIRECT, CUBLAS_PULL, GemmRSConfig, choose_config
from triton_dist.ops.gemm_rs.kernels import (
    _cublas_begin_kernel,
    _cublas_begin_wait_kernel,
    _cublas_flag_kernel,
    _cublas_pull_reduce_kernel,
    _cublas_reduce_kernel,
    _cublas_wait_ack_kernel,
    _cublas_wait_kernel,
    _cublas_wait_reduce_kernel,
    _gemm_rs_kernel,
    _reduce_partials_kernel,
)
from triton_dist.ops.matmul import MatmulConfig, check_matrix, num_sms, pointer_config, rows_fit_tma

CHECK_ENV = "TRITON_DIST_GEMM_RS_CHECK"
"""``always``: check that every rank passed the same shapes and dtypes on every eager call (a collective, ~50 us);
by default only the first call of each signature is checked (it builds the plan, a collective anyway)."""


_check_always = False


def _read_check_env() -> None:
    """Read ``CHECK_ENV`` (at each signature's first call: reading the environment costs microseconds per call)."""
    global _check_always
    _check_always = os.environ.get(CHECK_ENV) == "always"


class GemmRsError(OpInputError):
    """Bad input to ``gemm_rs`` (raised on the host before anything is launched)."""


EMULATED_CONFIG = GemmRSConfig(matmul=MatmulConfig(16, 16, 16, 1, 1, 1, False, 1, use_tma=False))
"""The configuration under the CPU emulation (``ops.common.errors.emulated``): the fused kernel with 16x16x16 tiles
of the pointer mainloop, which Triton's interpreter runs quickly."""


def _sms(device: torch.device) -> int:
    """The SMs a persistent grid fills: the GPU's, or ``EMULATED_SMS`` program threads under the CPU emulation."""
    return EMULATED_SMS if device.type == "cpu" else num_sms(device.index)


def check_inputs(a: Any, b: Any, world_size: int, device: torch.device) -> None:
    """Raise ``GemmRsError`` naming the problem unless ``gemm_rs(a, b)`` can run on this rank (devices first)."""
    for name, tensor in (("a", a), ("b", b)):
        if not isinstance(tensor, torch.Tensor):
            raise GemmRsError(f"gemm_rs: {name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.device != device:
            raise GemmRsError(f"gemm_rs: {name} is on {tensor.device}, but this rank's triton_dist device is {device}")
    for name, tensor in (("a", a), ("b", b)):
        try:
            check_matrix("gemm_rs", name, tensor)
        except (TypeError, ValueError) as error:
            raise GemmRsError(str(error)) from None
    if a.dtype != b.dtype:
        raise GemmRsError(f"gemm_rs: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.shape[1] != b.shape[0]:
        raise GemmRsError(
            f"gemm_rs: a is {list(a.shape)} and b is {list(b.shape)}: a.shape[1] (K/W) must equal b.shape[0]"
        )
    if a.shape[0] % world_size:
        raise GemmRsError(f"gemm_rs: a has {a.shape[0]} rows, not a multiple of the world size {world_size}")


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


# ---------------------------------------------------------------------------------------------------- workspaces


@dataclasses.dataclass
class Workspace:
    """Symmetric scratch and flags for one (shape, dtype, partial precision, mode), and the device-side epoch."""

    scratch: torch.Tensor
    flags: torch.Tensor
    epoch: torch.Tensor


def _heap_error(world: rt.World, problems: list[str], what: str) -> None:
    from triton_dist.runtime.world.rank_agreement import raise_if_any_rank_failed

    raise_if_any_rank_failed(world.group, problems, what)


def _workspace(world: rt.World, m: int, n: int, k_local: int, dtype: torch.dtype, config: GemmRSConfig) -> Workspace:
    partial = torch.float32 if config.partial_dtype == "float32" else dtype
    slots = world.world_size - 1 if config.fused else world.world_size
    tiles = triton.cdiv(m // world.world_size, config.matmul.block_m) * triton.cdiv(n, config.matmul.block_n)

    def create(world: rt.World) -> Workspace:
        shard = m // world.world_size
        scratch_bytes = 2 * slots * shard * n * torch.empty((), dtype=partial).element_size()
        problems: list[str] = []
        scratch = flags = None
        try:
            scratch = world.heap.empty((2, slots, shard, n), partial)
            flags = world.heap.empty((2, tiles, world.world_size), torch.int32)
        except rt.HeapExhaustedError as error:
            free = world.heap.stats().get("largest_free_block", 0)
            problems.append(
                f"the symmetric heap is exhausted: gemm_rs needs {scratch_bytes / 2**20:.1f} MiB of scratch for "
                f"a=[{m}, {k_local}], b=[{k_local}, {n}] ({config.partial_dtype} partials) and the largest free "
                f"block is {free / 2**20:.1f} MiB; raise TRITON_DIST_HEAP_SIZE / triton_dist.init(heap_size=...) "
                f"({error})"
            )
        _heap_error(world, problems, "gemm_rs workspace")
        assert scratch is not None and flags is not None
        flags.zero_()
        epoch = torch.zeros((), dtype=torch.int32, device=world.device)
        rt.barrier()  # every rank's flags are zero before any rank's first push can set one
        return Workspace(scratch=scratch, flags=flags, epoch=epoch)

    return resources.workspace(("gemm_rs", m, n, k_local, dtype, partial, slots, tiles), create, what="gemm_rs")


@dataclasses.dataclass
class CublasWorkspace:
    """The cuBLAS path's buffers for one (shape, dtype): receive slots, flags, acks (symmetric), local partials."""

    recv: torch.Tensor  # symmetric [W - 1, M/W, N]: slot s - 1 receives rank (rank + s)'s partial
    flags: torch.Tensor  # symmetric int32 [W]: flags[r] = the epoch whose partial from rank r has landed
    ack: torch.Tensor  # symmetric int32 [W]: ack[r] = the last epoch whose partial from here rank r consumed
    epoch: torch.Tensor  # int32 [1], this rank's epoch counter
    send: torch.Tensor  # [W - 1, M/W, N]: the peers' partials before the copy ("ce")
    own: torch.Tensor  # [M/W, N]: the own shard's partial
    peer_recv: dict[int, torch.Tensor]  # rank -> that rank's receive buffer, viewed from here


def _cublas_workspace(world: rt.World, m: int, n: int, dtype: torch.dtype) -> CublasWorkspace:
    def create(world: rt.World) -> CublasWorkspace:
        w = world.world_size
        shard = m // w
        problems: list[str] = []
        recv = flags = ack = None
        try:
            recv = rt.empty(w - 1, shard, n, dtype=dtype)
            flags = rt.zeros(w, dtype=torch.int32)
            ack = rt.zeros(w, dtype=torch.int32)
        except rt.HeapExhaustedError as error:
            need = (w - 1) * shard * n * torch.empty((), dtype=dtype).element_size()
            problems.append(
                f"the symmetric heap is exhausted: gemm_rs needs {need / 2**20:.1f} MiB of receive buffer for M={m}, "
                f"N={n} ({dtype}); raise TRITON_DIST_HEAP_SIZE / triton_dist.init(heap_size=...) ({error})"
            )
        _heap_error(world, problems, "gemm_rs workspace")
        assert recv is not None and flags is not None and ack is not None
        rt.barrier()  # every rank's zeroed flags are in place before any rank sets one
        return CublasWorkspace(
            recv=recv,
            flags=flags,
            ack=ack,
            epoch=torch.zeros(1, dtype=torch.int32, device=world.device),
            send=torch.empty((w - 1, shard, n), dtype=dtype, device=world.device),
            own=torch.empty((shard, n), dtype=dtype, device=world.device),
            peer_recv={r: rt.peer_tensor(recv, r) for r in range(w) if r != world.rank},
        )

    return resources.workspace(("gemm_rs", "cublas", m, n, dtype), create, what="gemm_rs")


@dataclasses.dataclass
class PullWorkspace:
    """The cuBLAS path's "pull" buffers for one (shape, dtype): the full partial product, flags and acks
    (symmetric), and the epoch."""

    partial: torch.Tensor  # symmetric [M, N]: this rank's partial product; peers read their shard rows of it
    flags: torch.Tensor  # symmetric int32 [W]: flags[r] = the epoch whose partial of rank r is ready
    ack: torch.Tensor  # symmetric int32 [W]: ack[r] = the last epoch whose partial from here rank r has read
    epoch: torch.Tensor  # int32 [1], this rank's epoch counter


def _pull_workspace(world: rt.World, m: int, n: int, dtype: torch.dtype) -> PullWorkspace:
    def create(world: rt.World) -> PullWorkspace:
        w = world.world_size
        problems: list[str] = []
        partial = flags = ack = None
        try:
            partial = rt.empty(m, n, dtype=dtype)
            flags = rt.zeros(w, dtype=torch.int32)
            ack = rt.zeros(w, dtype=torch.int32)
        except rt.HeapExhaustedError as error:
            need = m * n * torch.empty((), dtype=dtype).element_size()
            problems.append(
                f"the symmetric heap is exhausted: gemm_rs's pull producer needs {need / 2**20:.1f} MiB for the "
                f"[{m}, {n}] partial ({dtype}); raise TRITON_DIST_HEAP_SIZE / triton_dist.init(heap_size=...) "
                f"({error})"
            )
        _heap_error(world, problems, "gemm_rs workspace")
        assert partial is not None and flags is not None and ack is not None
        rt.barrier()  # every rank's zeroed flags and acks are in place before any rank sets one
        return PullWorkspace(partial, flags, ack, torch.zeros(1, dtype=torch.int32, device=world.device))

    return resources.workspace(("gemm_rs", "cublas-pull", m, n, dtype), create, what="gemm_rs")


def clear_workspaces() -> None:
    """Free every gemm_rs workspace and plan (a collective: call on all ranks, outside CUDA-graph capture)."""
    rt.barrier()
    resources.drop_workspaces("gemm_rs")
    _plans.clear()


def workspaces() -> list[Any]:
    """The current world's gemm_rs workspaces (diagnostics: the GPU checks poison them)."""
    return resources.workspaces("gemm_rs")


# --------------------------------------------------------------------------------------------------------- plans


@dataclasses.dataclass
class TritonPlan:
    """The persistent Triton kernel (fused epilogue or two kernels), every argument resolved."""

    workspace: Workspace
    gemm: LaunchPlan | EmulatedLaunch
    reduce: LaunchPlan | EmulatedLaunch | None
    use_tma: bool
    a_block: list[int]
    b_block: list[int]
    shard: int
    n: int
    clone_a: bool
    clone_b: bool
    local_only: bool
    emulated: bool = False
    """The CPU emulation: the launches take the tensors themselves (Triton's interpreter), on no stream."""
    _descriptors: tuple[DescriptorCache, DescriptorCache] = dataclasses.field(init=False, repr=False)
    """The TMA descriptors of a and b by address (the TMA kernel)."""
    graphs: EagerGraphs = dataclasses.field(default_factory=EagerGraphs, init=False, repr=False, compare=False)
    """The graphs of this plan's eager calls (``ops.common.eager_graphs``)."""

    def __post_init__(self) -> None:
        self._descriptors = (DescriptorCache(self.a_block), DescriptorCache(self.b_block))

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """This rank's reduced shard of ``a @ b`` over the ranks, enqueued on the current stream, into ``out``
        (checked by the caller: [M/W, N], a's dtype and device, contiguous, 16-byte aligned), else a new tensor."""
        device = a.device
        if device.index is not None and device.index != current_device_index():  # the launchers' context
            with torch.cuda.device(device):
                return self.run(a, b, out)
        if self.clone_a:
            a = a.clone()
        if self.clone_b:
            b = b.clone()
        if out is None:
            out = torch.empty((self.shard, self.n), dtype=a.dtype, device=device)
        if not self.local_only:
            self.workspace.epoch.add_(1)
        if self.emulated:
            self.gemm.launch_on(0, a, b, out)
            if self.reduce is not None:
                self.reduce.launch_on(0, out)
            return out
        stream = current_raw_stream(device.index)
        if self.use_tma:
            a_desc, b_desc = self._descriptors
            a_arg: Any = a_desc(a)
            b_arg: Any = b_desc(b)
        else:
            a_arg, b_arg = a.data_ptr(), b.data_ptr()
        self.gemm.launch_on(stream, a_arg, b_arg, out.data_ptr())
        if self.reduce is not None:
            self.reduce.launch_on(stream, out.data_ptr())
        return out


@dataclasses.dataclass(frozen=True)
class _Send:
    """One peer's partial in a cuBLAS-path call: its rows of A, where the GEMM writes, its flag (and for "ce" the
    ack wait and the copy into the peer's slot)."""

    peer: int
    destination: torch.Tensor
    """"direct": this rank's slot in the peer's receive buffer (mapped here); "ce": the local send buffer."""
    flag: LaunchPlan | EmulatedLaunch
    wait_ack: LaunchPlan | EmulatedLaunch | None
    """The wait for the peer's ack before its GEMM ("direct") or copy ("ce"); None with ``merged_sync``, whose begin
    kernel waits for every ack."""
    copy: tuple[int, int, int]
    """"ce" only: (destination, source, nbytes) of the copy into the peer's slot."""
    slot: torch.Tensor
    """This rank's slot in the peer's receive buffer (the CPU emulation's "ce" copies into it on the host)."""


@dataclasses.dataclass
class CublasPlan:
    """The cuBLAS path: per peer a GEMM into the peer's memory ("direct") or a send buffer copied there ("ce"), its
    flag, then the own shard's GEMM and one reduction.

    Launches per call, "direct" with ``merged_sync`` (the default cuBLAS path): ``_cublas_begin_wait_kernel``
    (epoch, acks, the waits for the peers' acks), per peer the GEMM into its slot and ``_cublas_flag_kernel``, the
    own GEMM, ``_cublas_wait_reduce_kernel`` (the waits for the peers' flags, then the reduction): 2 + W - 1 small
    launches and W GEMMs. Without ``merged_sync``: ``_cublas_begin_kernel``, per peer ``_cublas_wait_ack_kernel``,
    the GEMM and the flag, the own GEMM, ``_cublas_wait_kernel`` and ``_cublas_reduce_kernel``: 3 + 2 (W - 1).
    "ce": ``_cublas_begin_kernel``, per peer the GEMM into the send buffer
    and, on the side stream, the ack wait, the copy and the flag; the own GEMM, ``_cublas_wait_kernel`` and
    ``_cublas_reduce_kernel`` (a reduction that waits deadlocked with this producer: see ``_cublas_wait_kernel``).
    """

    workspace: CublasWorkspace
    me: int
    world_size: int
    shard: int
    n: int
    producer: str
    begin: LaunchPlan | EmulatedLaunch  # as compile_plan returns them
    sends: tuple[_Send, ...]  # the peers in the order the call computes them (rank + 1, rank + 2, ...)
    wait: LaunchPlan | EmulatedLaunch | None  # the separate wait before the reduction (None with merged_sync)
    reduce: LaunchPlan | EmulatedLaunch
    side: torch.cuda.Stream | None  # None under the CPU emulation (as stream_ops)
    stream_ops: StreamOps | None
    _dtype: torch.dtype = dataclasses.field(init=False, repr=False)
    _device: torch.device = dataclasses.field(init=False, repr=False)
    _device_index: int | None = dataclasses.field(init=False, repr=False)
    """The GPU's index (None for a plan of CPU tensors: no device context to switch to)."""
    _side: int = dataclasses.field(init=False, repr=False)
    _direct: bool = dataclasses.field(init=False, repr=False)
    graphs: EagerGraphs = dataclasses.field(default_factory=EagerGraphs, init=False, repr=False, compare=False)
    """The graphs of this plan's eager calls (``ops.common.eager_graphs``)."""

    def __post_init__(self) -> None:
        own = self.workspace.own  # [M/W, N] in the operands' dtype, on their device (the signature fixes both)
        self._dtype, self._device, self._device_index = own.dtype, own.device, own.device.index
        self._side = 0 if self.side is None else self.side.cuda_stream
        self._direct = self.producer == "direct"

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """This rank's reduced shard of ``a @ b`` over the ranks, into ``out`` (checked by the caller), else a new
        tensor; launches on the current stream (and the side stream for "ce")."""
        index = self._device_index
        if index is not None and index != current_device_index():
            with torch.cuda.device(index):  # the launchers launch in the current device's context
                return self.run(a, b, out)
        if out is None:
            out = torch.empty((self.shard, self.n), dtype=self._dtype, device=self._device)
        shards = a.chunk(self.world_size)  # the W row shards (one dispatcher op; m is a multiple of W)
        if self.stream_ops is None:  # the CPU emulation
            return self._run_emulated(shards, b, out)
        main = current_raw_stream(self._device.index)
        self.begin.launch_on(main)
        if self._direct:
            for send in self.sends:
                if send.wait_ack is not None:  # (merged_sync: the begin kernel waited for every ack)
                    send.wait_ack.launch_on(main)
                torch.mm(shards[send.peer], b, out=send.destination)
                send.flag.launch_on(main)
            torch.mm(shards[self.me], b, out=self.workspace.own)
            if self.wait is not None:  # (merged_sync: the reduction waits itself)
                self.wait.launch_on(main)
            self.reduce.launch_on(main, out.data_ptr())
            return out
        side = self._side
        for send in self.sends:
            assert send.wait_ack is not None
            torch.mm(shards[send.peer], b, out=send.destination)
            self.stream_ops.order("gemm_rs.fork", main, side)
            send.wait_ack.launch_on(side)
            self.stream_ops.copy(*send.copy, side)
            send.flag.launch_on(side)
        torch.mm(shards[self.me], b, out=self.workspace.own)
        assert self.wait is not None
        self.wait.launch_on(main)
        self.reduce.launch_on(main, out.data_ptr())
        self.stream_ops.order("gemm_rs.join", side, main)  # CUDA-graph capture needs the join; send is free
        return out

    def _run_emulated(self, shards: tuple[torch.Tensor, ...], b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """The call under the CPU emulation, every step in order on the host; the copy-engine producer is a host
        copy into the peer's mapped receive slot, then the flag kernel."""
        self.begin.launch_on(0)
        for send in self.sends:
            if self.producer == "direct":
                if send.wait_ack is not None:  # (merged_sync: the begin kernel waited for every ack)
                    send.wait_ack.launch_on(0)
                torch.mm(shards[send.peer], b, out=send.destination)
            else:
                torch.mm(shards[send.peer], b, out=send.destination)
                assert send.wait_ack is not None, "ce waits for the ack before its copy"
                send.wait_ack.launch_on(0)
                send.slot.copy_(send.destination)
            send.flag.launch_on(0)
        torch.mm(shards[self.me], b, out=self.workspace.own)
        if self.wait is not None:
            self.wait.launch_on(0)
        self.reduce.launch_on(0, out)
        return out


@dataclasses.dataclass
class CublasPullPlan:
    """The cuBLAS path's "pull" producer: ONE GEMM of all M rows into this rank's symmetric partial, then one kernel
    that flags it ready and pulls this rank's shard rows from every rank's partial (``CUBLAS_PULL``).

    Launches per call, all on the current stream: ``_cublas_begin_wait_kernel`` (advance the epoch; ack to every
    peer that this rank has read its previous partial; wait until every peer has read this rank's), ``torch.mm(a,
    b, out=partial)``, ``_cublas_pull_reduce_kernel`` (flag, wait for the peers' flags, sum in fp32 into ``out``):
    two small launches and one GEMM at any world size, no NCCL call, so eager calls replay from ``graphs``.
    """

    workspace: PullWorkspace
    shard: int
    n: int
    begin: LaunchPlan | EmulatedLaunch
    reduce: LaunchPlan | EmulatedLaunch
    emulated: bool
    """The CPU emulation: the launches take the tensors themselves (Triton's interpreter), on no stream."""
    graphs: EagerGraphs = dataclasses.field(default_factory=EagerGraphs, init=False, repr=False, compare=False)
    """The graphs of this plan's eager calls (``ops.common.eager_graphs``)."""

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """This rank's reduced shard of ``a @ b`` over the ranks, into ``out`` (checked by the caller), else a new
        tensor; launches on the current stream."""
        partial = self.workspace.partial
        index = partial.device.index
        if index is not None and index != current_device_index():
            with torch.cuda.device(index):  # the launchers launch in the current device's context
                return self.run(a, b, out)
        if out is None:
            out = torch.empty((self.shard, self.n), dtype=partial.dtype, device=partial.device)
        if self.emulated:
            self.begin.launch_on(0)
            torch.mm(a, b, out=partial)
            self.reduce.launch_on(0, out)
            return out
        stream = current_raw_stream(index)
        self.begin.launch_on(stream)
        torch.mm(a, b, out=partial)
        self.reduce.launch_on(stream, out.data_ptr())
        return out


@dataclasses.dataclass
class UnfusedPlan:
    """torch.matmul then NCCL reduce-scatter (the baseline, and the fallback where fusion cannot win).

    Per call exactly the baseline's GPU work: one cuBLAS GEMM into ``partial`` and one reduce-scatter of it into
    the output, both on the current stream; the host allocates the output (the op returns a new tensor) and calls
    the group's reduce-scatter with options built once (``reduce_scatter_method``).
    """

    partial: torch.Tensor
    """[M, N]: the partial product, kept by the plan and reused by every call (stream order makes that safe)."""
    reduce_scatter: Callable[..., Any]
    options: Any
    shard: int
    n: int
    graphs: EagerGraphs = dataclasses.field(default_factory=EagerGraphs, init=False, repr=False, compare=False)
    """The graphs of this plan's eager calls (``ops.common.eager_graphs``)."""

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """``torch.mm`` into the kept partial, then the reduce-scatter into ``out`` (checked by the caller), else
        into a new tensor."""
        torch.mm(a, b, out=self.partial)
        if out is None:
            out = self.partial.new_empty((self.shard, self.n))
        work = self.reduce_scatter(out, self.partial, self.options)
        if work is not None:  # as dist.reduce_scatter_tensor: orders the current stream after the collective
            work.wait()
        return out


def _build_unfused(world: rt.World, a: torch.Tensor, m: int, n: int) -> UnfusedPlan:
    method, options = reduce_scatter_method(world.group)
    partial = torch.empty((m, n), dtype=a.dtype, device=a.device)
    return UnfusedPlan(partial, method, options, m // world.world_size, n)


@dataclasses.dataclass
class EmptyPlan:
    """No rows or columns to compute (an empty output), or no K: zeros."""

    shard: int
    n: int
    zero: bool

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The empty or all-zero shard, in ``out`` (checked by the caller), else in a new tensor."""
        if out is None:
            out = torch.empty((self.shard, self.n), dtype=a.dtype, device=a.device)
        return out.zero_() if self.zero else out


Plan = TritonPlan | CublasPlan | CublasPullPlan | UnfusedPlan | EmptyPlan


def _build_triton(
    world: rt.World, a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig, local_only: bool
) -> TritonPlan:
    m, k = a.shape
    n = b.shape[1]
    w = world.world_size
    shard = m // w
    ws = _workspace(world, m, n, k, a.dtype, config)
    clone_a = aligned_for(config, a) is not a
    clone_b = aligned_for(config, b) is not b
    a, b = aligned_for(config, a), aligned_for(config, b)
    tile = config.matmul
    tiles = triton.cdiv(shard, tile.block_m) * triton.cdiv(n, tile.block_n)
    a_block, b_block = [tile.block_m, tile.block_k], [tile.block_k, tile.block_n]
    if tile.use_tma:
        a_arg: Any = TensorDescriptor.from_tensor(a, a_block)
        b_arg: Any = TensorDescriptor.from_tensor(b, b_block)
    else:
        a_arg, b_arg = a, b
    out = torch.empty((shard, n), dtype=a.dtype, device=a.device)
    programs = min(_sms(a.device), w * tiles)
    named = {
        "a": a_arg, "b": b_arg, "out_ptr": out, "scratch_ptr": ws.scratch, "flags_ptr": ws.flags,
        "epoch_ptr": ws.epoch, "M": m, "N": n, "K": k, "stride_am": a.stride(0), "stride_ak": a.stride(1),
        "stride_bk": b.stride(0), "stride_bn": b.stride(1), "stride_om": out.stride(0), "BLOCK_M": tile.block_m,
        "BLOCK_N": tile.block_n, "BLOCK_K": tile.block_k, "GROUP_M": tile.group_m, "SPLIT_N": tile.split_n,
        "USE_TMA": tile.use_tma, "FUSED": config.fused,
        "FLATTEN": config.flattens(), "LOCAL_ONLY": local_only,
    }  # fmt: skip
    gemm = compile_plan(
        _gemm_rs_kernel, (programs, 1, 1), named, 3, num_stages=tile.num_stages, num_warps=tile.num_warps
    )
    reduce = None
    if not config.fused:
        named = {
            "out_ptr": out, "scratch_ptr": ws.scratch, "flags_ptr": ws.flags, "epoch_ptr": ws.epoch, "M": m, "N": n,
            "stride_om": out.stride(0), "BLOCK_M": tile.block_m, "BLOCK_N": tile.block_n, "GROUP_M": tile.group_m,
        }  # fmt: skip
        grid = (min(_sms(a.device), tiles), 1, 1)
        reduce = compile_plan(_reduce_partials_kernel, grid, named, 1, num_warps=8)
    emulated = isinstance(gemm, EmulatedLaunch)
    return TritonPlan(
        ws, gemm, reduce, tile.use_tma, a_block, b_block, shard, n, clone_a, clone_b, local_only, emulated
    )


REDUCE_BLOCK = 4096
"""Elements per program of the separate reduction (one block per program)."""
DIRECT_REDUCE_BLOCK = 8192
"""Elements per iteration of ``merged_sync``'s persistent reduction."""
DIRECT_REDUCE_PROGRAMS_PER_SM = 2
"""Programs per SM of ``merged_sync``'s persistent reduction: with one, the reduction of a 4096 x 8192 shard ran
1-2% behind the separate wait + one-block-per-program reduction on 2 x H200 (2026-11-27): too few bytes in flight."""


PULL_REDUCE_BLOCK = 8192
"""Elements per iteration of the "pull" producer's persistent reduction."""
PULL_REDUCE_PROGRAMS_PER_SM = 2
"""Programs per SM of the "pull" producer's reduction (as ``DIRECT_REDUCE_PROGRAMS_PER_SM``; every program must be
resident at once, since all but program 0 spin until the peers' flags arrive)."""


def _build_cublas_pull(world: rt.World, a: torch.Tensor, b: torch.Tensor) -> CublasPullPlan:
    m, n = a.shape[0], b.shape[1]
    shard = m // world.world_size
    ws = _pull_workspace(world, m, n, a.dtype)
    begin = compile_plan(
        _cublas_begin_wait_kernel, (1, 1, 1), {"epoch_ptr": ws.epoch, "ack_ptr": ws.ack}, 0, num_warps=1
    )
    out = torch.empty((shard, n), dtype=a.dtype, device=a.device)
    named = {
        "out_ptr": out, "partial_ptr": ws.partial, "flags_ptr": ws.flags, "epoch_ptr": ws.epoch, "numel": out.numel(),
        "WORLD": world.world_size, "BLOCK": PULL_REDUCE_BLOCK,
    }  # fmt: skip
    programs = PULL_REDUCE_PROGRAMS_PER_SM * _sms(a.device)
    grid = (min(programs, triton.cdiv(out.numel(), PULL_REDUCE_BLOCK)), 1, 1)
    reduce = compile_plan(_cublas_pull_reduce_kernel, grid, named, 1, num_warps=8)
    return CublasPullPlan(ws, shard, n, begin, reduce, isinstance(begin, EmulatedLaunch))


def _build_cublas(
    world: rt.World, a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig
) -> CublasPlan | CublasPullPlan:
    if config.producer == "pull":
        return _build_cublas_pull(world, a, b)
    m = a.shape[0]
    n = b.shape[1]
    w, me = world.world_size, world.rank
    shard = m // w
    ws = _cublas_workspace(world, m, n, a.dtype)
    direct = config.producer == "direct"
    merged = direct and config.merged_sync
    one = (1, 1, 1)
    sync = {"epoch_ptr": ws.epoch, "ack_ptr": ws.ack}
    begin = compile_plan(_cublas_begin_wait_kernel if merged else _cublas_begin_kernel, one, sync, 0, num_warps=1)
    sends = []
    element = a.element_size()
    for s in range(1, w):
        peer = (me + s) % w
        named = {"ack_ptr": ws.ack, "flags_ptr": ws.flags, "epoch_ptr": ws.epoch, "peer": peer}
        flag = compile_plan(_cublas_flag_kernel, one, named, 0, num_warps=1)
        slot = ws.peer_recv[peer][(me - peer - 1) % w]  # this rank's slot in the peer's receive buffer
        wait_ack = None if merged else compile_plan(_cublas_wait_ack_kernel, one, named, 0, num_warps=1)
        destination = slot if direct else ws.send[s - 1]
        copy = (slot.data_ptr(), ws.send[s - 1].data_ptr(), shard * n * element)
        sends.append(_Send(peer, destination, flag, wait_ack, copy, slot))
    out = torch.empty((shard, n), dtype=a.dtype, device=a.device)
    partials = {"out_ptr": out, "own_ptr": ws.own, "recv_ptr": ws.recv, "numel": out.numel()}
    wait = None
    if merged:
        named = {**partials, "flags_ptr": ws.flags, "epoch_ptr": ws.epoch, "RECEIVED": w - 1}
        named["BLOCK"] = DIRECT_REDUCE_BLOCK
        programs = DIRECT_REDUCE_PROGRAMS_PER_SM * _sms(a.device)
        grid = (min(programs, triton.cdiv(out.numel(), DIRECT_REDUCE_BLOCK)), 1, 1)
        reduce = compile_plan(_cublas_wait_reduce_kernel, grid, named, 1, num_warps=8)
    else:
        wait = compile_plan(_cublas_wait_kernel, one, {"flags_ptr": ws.flags, "epoch_ptr": ws.epoch}, 0, num_warps=1)
        named = {**partials, "num_received": w - 1, "BLOCK": REDUCE_BLOCK}
        grid = (triton.cdiv(out.numel(), REDUCE_BLOCK), 1, 1)
        reduce = compile_plan(_cublas_reduce_kernel, grid, named, 1, num_warps=8)
    if isinstance(begin, EmulatedLaunch):  # the CPU emulation: everything in order on the host, no streams
        return CublasPlan(ws, me, w, shard, n, config.producer, begin, tuple(sends), wait, reduce, None, None)
    side = resources.side_stream(a.device, "gemm_rs")
    return CublasPlan(
        ws, me, w, shard, n, config.producer, begin, tuple(sends), wait, reduce, side, stream_ops(a.device)
    )


_plans: PlanCache[Plan] = PlanCache("gemm_rs", GemmRsError, eager_out=lambda plan: (plan.shard, plan.n))


def plan_for(a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig | None = None, local_only: bool = False) -> Plan:
    """The plan of this call's signature, built (and agreed with the peers) on its first call."""
    signature = operand_signature(a, b, config, local_only)
    plan = _plans.get(signature) if signature is not None else None
    if plan is not None:
        if _check_always and not torch.cuda.is_current_stream_capturing():
            _plans.agree(_described(a, b, plan_config(a, b, config)), again=True)
        return plan
    _read_check_env()
    world = peer_world("gemm_rs", GemmRsError)
    check_inputs(a, b, world.world_size, world.device)
    chosen = plan_config(a, b, config)
    if world is emulated_world() and chosen.gemm == "triton" and chosen.matmul.use_tma:
        # Triton's interpreter cannot run the kernel's TMA loads: the pointer kernel with the same tile.
        chosen = dataclasses.replace(chosen, matmul=dataclasses.replace(chosen.matmul, use_tma=False))
    m, k_local = a.shape
    n = b.shape[1]
    w = world.world_size

    def make() -> Plan:
        if chosen.fallback:
            return _build_unfused(world, a, m, n)
        if m // w == 0 or n == 0 or k_local == 0:
            return EmptyPlan(m // w, n, zero=k_local == 0)
        with on_device(a.device):
            if chosen.gemm == "cublas":
                return _build_cublas(world, a, b, chosen)
            return _build_triton(world, a, b, chosen, local_only)

    return _plans.build(signature, _described(a, b, chosen), make)


def plan_config(a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig | None) -> GemmRSConfig:
    """The configuration a call runs: ``config``, else the tuned table's or the cost model's, fitted to the rows."""
    if config is None and a.device.type == "cpu" and emulated_world() is not None:
        config = EMULATED_CONFIG
    if config is None:
        world = rt.current_world()
        m, k_local = a.shape
        calibration = None
        if world.world_size > 1:
            calibration = tuning.calibration_for(world, torch.cuda.get_device_name(a.device))
        config = choose_config(
            m, b.shape[1], k_local, a.dtype, world.world_size, a.device, calibration=calibration, run=gemm_rs_with
        )
    return config_for_operands(config, a, b)


def _described(a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig) -> dict[str, Any]:
    return {"a": list(a.shape), "b": list(b.shape), "dtype": str(a.dtype), "config": config.short()}


def check_out_for(plan: Plan, a: torch.Tensor, b: torch.Tensor, out: Any) -> None:
    """Raise ``GemmRsError`` naming ``out`` unless ``plan``'s call with ``a`` and ``b`` can write its shard into it:
    [M/W, N], a's dtype and device, contiguous, 16-byte aligned, no memory shared with a or b."""
    check_out("gemm_rs", out, (plan.shard, plan.n), a.dtype, a.device, (("a", a), ("b", b)), GemmRsError)


def gemm_rs_with(
    a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig | None = None, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``gemm_rs(a, b)`` with an explicit configuration (None: tuned or cost-model choice). Not a custom op.

    ``out``: the shard is written into it and it is returned (as ``gemm_rs``'s ``out``; checked after the operands,
    before anything is launched: ``GemmRsError`` naming ``out``)."""
    plan = plan_for(a, b, config)
    if out is None:
        return plan.run(a, b)  # a plan that launches kernels switches to the operands' device
    check_out_for(plan, a, b, out)
    return plan.run(a, b, out)


def path_of(a: torch.Tensor, b: torch.Tensor) -> str:
    """Which path a call with these operands runs (benchmarks' rows): fused, cublas, cublas-pull or matmul+nccl."""
    plan = plan_for(a, b)
    if isinstance(plan, UnfusedPlan):
        return "matmul+nccl"
    if isinstance(plan, CublasPullPlan):
        return "cublas-pull"
    return "cublas" if isinstance(plan, CublasPlan | CublasPullPlan) else "fused"


def launch_without_communication(a: torch.Tensor, b: torch.Tensor, config: GemmRSConfig) -> torch.Tensor:
    """Diagnostic: the Triton kernel of ``config`` with every push stored locally and no flag set or awaited.

    Same GEMM, same stores and loads, no NVLink traffic and no synchronization, so its time beside ``gemm_rs``'s
    says what the communication costs. The result is meaningless and no epoch is used up; call it on every rank
    alike (the first call of a shape allocates the workspace, a collective).
    """
    if config.fallback or config.gemm != "triton" or not config.fused:
        raise GemmRsError(f"launch_without_communication: needs a fused Triton configuration, got {config.short()}")
    plan = plan_for(a, b, config, local_only=True)
    with torch.cuda.device(a.device):
        return plan.run(a, b)


def matmul_reduce_scatter(a: torch.Tensor, b: torch.Tensor, group: Any = None) -> torch.Tensor:
    """The baseline and fallback: ``torch.matmul`` then NCCL ``reduce_scatter_tensor`` (in A's dtype)."""
    world_size = dist.get_world_size(group)
    partial = a @ b
    out = partial.new_empty((a.shape[0] // world_size, b.shape[1]))
    dist.reduce_scatter_tensor(out, partial, group=group)
    return out


@torch.library.custom_op("triton_dist::gemm_rs", mutates_args=())
def _gemm_rs_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return gemm_rs_with(a, b)


@_gemm_rs_op.register_fake
def _gemm_rs_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    world_size = rt.current_world().world_size if rt.is_initialized() else dist.get_world_size()
    return a.new_empty((a.shape[0] // world_size, b.shape[1]))


def gemm_rs(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """This rank's row shard of ``sum over ranks of a @ b``: [M/W, N] in a's dtype, reduced in fp32.

    Call on every rank of the triton_dist world (after ``triton_dist.init()``) with A_r [M, K/W] and B_r [K/W, N],
    bf16 or fp16, contiguous, on this rank's device; M a multiple of the world size. Ordinary torch tensors are fine
    (the op reads them only on their own rank). The first call of each signature allocates a workspace on the
    symmetric heap collectively, checks that every rank passed the same shapes and dtypes, and plans the call; run
    it once eagerly before capturing a CUDA graph. Later eager calls skip torch's dispatcher and launch the plan;
    from the second call with the same operand and output addresses they replay a CUDA graph of the call that the
    op captures itself (one launch; never the matmul + NCCL fallback, whose collective every rank would have to
    replay alike; ``TRITON_DIST_EAGER_GRAPHS=0`` turns it off: ``ops.common.eager_graphs``).
    Under ``torch.compile`` it is the custom op ``torch.ops.triton_dist.gemm_rs``. Raises ``GemmRsError`` (an
    ``OpInputError``) naming the problem for bad input. Under ``TRITON_INTERPRET=1`` on a world made with
    ``init(device="cpu")`` (the CPU emulation, for tests without GPUs) the fused kernel runs in Triton's
    interpreter with ``EMULATED_CONFIG`` unless a configuration is given.

    ``out``: where the shard goes, as ``torch.mm``'s ``out``: the op writes it into ``out`` and returns ``out``
    itself, allocating nothing for it (the eager call's host time then has no allocator call). It must be a tensor
    of exactly [M/W, N], a's dtype and device, contiguous, starting on a 16-byte boundary (as from ``torch.empty``),
    sharing no memory with ``a`` or ``b``; else ``GemmRsError`` names ``out`` and what is wrong, before anything is
    launched. Under ``torch.compile`` or a dispatch mode the registered op (which returns a new tensor) runs and its
    result is then copied into ``out`` (one more copy; the alignment and overlap are not checked there, the copy
    needs neither).
    """
    plan = None if _check_always else _plans.eager_plan(a, b, out)
    if plan is not None:  # the common call, all checked in one frame: the plan's launches (or its graph)
        return _eager_call(plan, a, b, out)
    if plain_eager(a, b) and (out is None or type(out) is torch.Tensor or not isinstance(out, torch.Tensor)):
        plan = None if _check_always else _plans.get(operand_signature(a, b, None, False))
        if plan is not None:  # a planned call eager_plan refused: another world, or out to be checked (and named)
            if out is not None:
                check_out_for(plan, a, b, out)
            return _eager_call(plan, a, b, out)
        return gemm_rs_with(a, b) if out is None else gemm_rs_with(a, b, out=out)
    if out is None:
        return torch.ops.triton_dist.gemm_rs(a, b)
    shard = a.shape[0] // rt.current_world().world_size
    check_out("gemm_rs", out, (shard, b.shape[1]), a.dtype, a.device, (), GemmRsError, addresses=False)
    return out.copy_(torch.ops.triton_dist.gemm_rs(a, b))


def _eager_call(plan: Plan, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """An eager call of ``plan`` into ``out`` (checked; else a new tensor), replayed from the plan's graph of these
    addresses once it has one (``ops.common.eager_graphs``)."""
    if isinstance(plan, UnfusedPlan) and not (eager_graphs.REPLAY_COLLECTIVES and replays_collective(a.device)):
        # Eager: a graph of NCCL's reduce-scatter must be captured and replayed by every rank alike, which a rank's
        # own choice cannot promise (eager_graphs.REPLAY_COLLECTIVES). With it on: eager while the GPU is still busy
        # (the host's launches are hidden behind it and start exactly when the baseline's would, where a replay of
        # the two read 0.97-0.98x the baseline's device time on 2 x H200, docs/results/2026-11-27-session25.md), a
        # replay from an idle GPU (1.00x against 0.84-0.88x eager there). First, and with out as given: the plan
        # launches its GEMM before it allocates a new output, as the baseline does (issue 24's from-idle row; the
        # flag is read here first, which saves the call and a's device while it is off).
        return plan.run(a, b, out)
    if isinstance(plan, EmptyPlan):
        return plan.run(a, b, out)
    if out is None:
        out = torch.empty((plan.shard, plan.n), dtype=a.dtype, device=a.device)
    if out.numel() == 0 or a.numel() == 0:  # nothing worth a graph
        return plan.run(a, b, out)
    plan.graphs.launch((a.data_ptr(), b.data_ptr(), out.data_ptr()), a.device, lambda: plan.run(a, b, out))
    return out


CALIBRATE_PULL = os.environ.get("TRITON_DIST_CALIBRATE_PULL", "1") != "0"
"""Whether the calibration also times the "pull" producer (``Calibration.pull``, without which the cost model never
picks it). On by default: the producer has run on 2 x H200 (``check_gemm_rs.py --pull-only`` on every rank, and the
layer sweep's 32 ReduceScatter rows, all correct). ``TRITON_DIST_CALIBRATE_PULL=0`` (or ``bench/calibrate.py
--without-pull``) turns it off; the calibration, which also runs on a GPU's first call of an overlapped op when no
calibration is stored, then leaves ``pull`` unmeasured."""


def _pull_rate(small: tuple[float, float], large: tuple[float, float]) -> tuning.Rate | None:
    """The pull producer's rate through two (bytes pulled per rank, ms beyond the GEMM) points, or None (with a
    warning) where the larger shard did not take longer: no positive rate fits, so the path stays unpriced."""
    if large[0] <= small[0] or large[1] <= small[1]:
        warnings.warn(
            f"triton_dist: gemm_rs's pull producer took {small[1]:.4f} ms beyond its GEMM at {small[0]:.0f} bytes "
            f"pulled and {large[1]:.4f} ms at {large[0]:.0f}: no positive rate fits, so the calibration leaves "
            "Calibration.pull unmeasured and the cost model never picks that producer",
            stacklevel=2,
        )
        return None
    return tuning.Rate.fit(small, large)


def _calibration_probe(world: rt.World, partial: tuning.Calibration) -> dict[str, float | tuning.Rate]:
    """The fused kernel's time over cuBLAS's GEMM alone at a large and a small K
    (``Calibration.rs_fused_over_cublas`` and ``rs_fused_over_cublas_small_k``), the direct cuBLAS producer's time
    beyond its model at the same two shapes, averaged (``rs_cublas_extra_ms``), and, with ``CALIBRATE_PULL``, the
    pull producer's rate (``Calibration.pull``): its time beyond a timed ``torch.matmul`` of the same operands at
    ``CAL_RS`` and ``CAL_RS_PULL_SMALL_M``, fitted against the bytes each rank pulls there. Neither cuBLAS producer is
    timed without a memory rate (the model cannot price them)."""
    from triton_dist.ops.tuning import calibration

    w = world.world_size
    ratios: list[float] = []
    direct: list[float] = []
    without_extra = dataclasses.replace(partial, rs_cublas_extra_ms=0.0)
    pull_points: dict[tuple[int, int, int], tuple[float, float]] = {}
    time_pull = CALIBRATE_PULL and partial.memory is not None and w >= 2

    def operands(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.randn(m, k // w, device=world.device, dtype=torch.bfloat16)
        return a, torch.randn(k // w, n, device=world.device, dtype=torch.bfloat16)

    def pull_point(a: torch.Tensor, b: torch.Tensor, gemm_ms: float) -> tuple[float, float]:
        pulled = (w - 1) * a.shape[0] / w * b.shape[1] * a.element_size()
        return pulled, calibration.timed(world, functools.partial(gemm_rs_with, a, b, CUBLAS_PULL)) - gemm_ms

    for m, n, k in (calibration.CAL_RS, calibration.CAL_RS_SMALL_K):
        a, b = operands(m, n, k)
        config = GemmRSConfig(partial_dtype="input")
        fused = calibration.timed(world, functools.partial(gemm_rs_with, a, b, config))
        cublas = calibration.timed(world, functools.partial(torch.matmul, a, b))
        ratios.append(fused / cublas)
        modelled = tuning.gemm_rs_cublas_ms(m, n, k, a.element_size(), w, without_extra)
        if modelled is not None:
            direct.append(calibration.timed(world, functools.partial(gemm_rs_with, a, b, CUBLAS_DIRECT)) - modelled)
        if time_pull and (m, n, k) == calibration.CAL_RS:
            pull_points[(m, n, k)] = pull_point(a, b, cublas)
        clear_workspaces()
    if time_pull:
        a, b = operands(*calibration.CAL_RS_PULL_SMALL_M)
        gemm_ms = calibration.timed(world, functools.partial(torch.matmul, a, b))
        pull_points[calibration.CAL_RS_PULL_SMALL_M] = pull_point(a, b, gemm_ms)
        clear_workspaces()
    measured: dict[str, float | tuning.Rate] = {
        "rs_fused_over_cublas": ratios[0],
        "rs_fused_over_cublas_small_k": ratios[1],
    }
    if direct:
        measured["rs_cublas_extra_ms"] = max(0.0, sum(direct) / len(direct))
    if time_pull:
        pull = _pull_rate(pull_points[calibration.CAL_RS_PULL_SMALL_M], pull_points[calibration.CAL_RS])
        if pull is not None:
            measured["pull"] = pull
    return measured


tuning.calibration_module.register_fused_probe("gemm_rs", _calibration_probe)
