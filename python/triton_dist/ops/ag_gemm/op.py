"""The ``ag_gemm`` host op: input checks, the workspace, one plan per call signature, and the custom op.

How one call runs (all on the GPU, no host synchronization, so it can be captured in a CUDA graph):

1. ``_begin_kernel`` (current stream): advances this op's epoch counter in device memory (every rank's counter
   moves in step, so epochs never need the host) and passes a device barrier with the peers: after it every peer
   has finished its previous call, so its receive buffer is free.
2. The producer, on a side stream forked after step 1, pushes this rank's A chunk by chunk (``chunk_tiles *
   BLOCK_M`` rows) into slot r of every peer's symmetric receive buffer and sets one flag per chunk (and per
   pushing program) on that peer to the epoch:
   - ``"ce"``: one copy-engine copy per chunk and peer, each followed by a 4-byte copy of this rank's epoch counter
     into the peer's flag (the value is read on the device, so a CUDA graph replays it correctly);
   - ``"sm"``: ``_push_kernel`` on ``push_ctas`` SMs (vector stores through ``dl.symm_at``, then ``dl.notify``).
   Rank r sends to r - 1 first, then r - 2, ...: rank r receives from r + 1 first.
3. The persistent GEMM first computes the rows of its own shard straight from ``a`` (no wait, no copy), then the
   peers' rows in arrival order, each tile after ``dl.wait`` on its chunk's flags; the side stream joins after.

The cuBLAS path (``OverlapConfig(backend="cublas")``, :class:`CublasPlan`) keeps steps 1 and 2 (the copy-engine
producer, ``cublas_chunks`` chunks per shard: one by default) and replaces step 3 by cuBLAS on the current stream:
``torch.mm`` of the own rows straight from ``a`` into their rows of C, then per chunk in arrival order (chunk 0 of
every peer, then chunk 1, ...) a one-program kernel that waits for that chunk's flag and ``torch.mm`` of its
received rows into their rows of C; the side stream joins after. It trades the fused kernel's per-tile overlap for
cuBLAS's GEMM speed, which wins where the fused kernel's fixed cost and partly filled last wave dominate (small M,
small N x K). Chunks (``cublas_chunk_rows``: whole multiples of 8 rows, the last one shorter, never empty) let a
peer's first rows be multiplied while its last ones are still on the way: where the pushes outlast the own GEMM,
one chunk per shard ends at about comm + GEMM / W, c chunks at about comm + GEMM / (W c), for one more copy, flag,
wait and cuBLAS launch per chunk and smaller GEMMs (the cost model weighs both: ``cost_model.ag_gemm_cublas_ms``).
With ``CUBLAS_DOUBLE_BUFFER`` (the default) its eager calls skip step 1: they alternate between two receive buffers
(:class:`DoubleBuffer` says why no barrier is then needed); with ``CUBLAS_WAIT_BESIDE`` (an option) their waits run
on a high-priority stream beside the own GEMM (``CublasPlan.wait_beside``).

The first call of a signature (shapes, dtypes, strides, device, the operands' 16-byte alignment, the world) builds a
plan: the configuration, the workspace, the compiled kernels with their grids and constants, every copy's address,
the receive buffer's TMA descriptor. Later calls look the plan up and launch: a handful of driver calls.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from triton_dist import runtime as rt
from triton_dist.ops import tuning
from triton_dist.ops.ag_gemm.kernels import (
    _advance_epoch_kernel,
    _ag_gemm_ptr_kernel,
    _ag_gemm_tma_kernel,
    _begin_kernel,
    _push_kernel,
    _wait_flag_then_reset_kernel,
    _wait_shard_kernel,
    _wait_shard_then_advance_kernel,
    _wait_shard_value_kernel,
)
from triton_dist.ops.ag_gemm.selection import choose_config, uses_tma
from triton_dist.ops.common import eager_graphs, resources
from triton_dist.ops.common.collectives import all_gather_method
from triton_dist.ops.common.dispatch import PlanCache, operand_signature
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.eager_graphs import EagerGraphs, capturing_eager_call, replays_collective
from triton_dist.ops.common.errors import OpInputError, check_tensor, emulated_world, on_device, peer_world
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
from triton_dist.ops.matmul import MatmulConfig, check_operands, config_for_target, num_sms
from triton_dist.ops.tuning import OverlapConfig
from triton_dist.ops.tuning.overlap import MAX_CUBLAS_CHUNKS

MAX_PUSH_CTAS = 64
PUSH_BLOCK = 8192
MIN_BLOCK_M = 64
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
CUBLAS_BEGIN_ON_SIDE = False
"""``CublasPlan.begin_on_side`` of the cuBLAS plans built from now on (an option until a GPU run decides)."""
CUBLAS_WAIT_BESIDE = False
"""``CublasPlan.wait_beside`` of the cuBLAS plans built from now on: the double-buffered eager calls' waits on a
high-priority waiter stream beside the own GEMM (an option until a GPU run times it; ``CublasPlan.wait_beside``
says why it is safe and what it should save)."""
CUBLAS_DOUBLE_BUFFER = True
"""Whether the cuBLAS plans built from now on get :class:`DoubleBuffer` receive buffers for their eager calls. On by
default: on 2 x H100 every cuBLAS-path row of the AG sweep ran 0.3-8% faster with them (docs/results/
2026-11-27-session23.md)."""
DOUBLE_BUFFER_FLAGS = "auto"
"""How double-buffered eager calls set and await their flags (``DoubleBuffer.flags_by``, fixed when the buffers are
made; :class:`DoubleBuffer` says why each scheme is safe):

- ``"memop_parity"``: a stream memory operation (``cuStreamWriteValue32``) writes the constant 1 into the peer's
  flag of this call's parity after each copy; a one-program kernel the wait watchdog watches waits for it and resets
  it to 0 (``_wait_flag_then_reset_kernel``). The device work of ``"memop_write"`` (no flag copy, no advance
  kernel), and its values are the same every call of a parity, so eager calls replay from the op's own CUDA graphs
  (``ops.common.eager_graphs``) as ``"kernels"``' do.
- ``"memops"``: the host's call count written and awaited by stream memory operations (no kernel; nothing can stop
  a memory-operation wait whose peer never arrives, and host values cannot be replayed from a graph).
- ``"memop_write"``: the call count written by a memory operation, awaited by a watched one-program kernel (no
  replays either).
- ``"kernels"``: 4-byte copies of a device send epoch, the kernel that advances it, the watched wait kernels.

``"auto"``: ``"memop_parity"`` where it can run (the driver, cuda-bindings, is reachable; or the CPU emulation, whose
host writes the 1 where the memory operation would), whether the watchdog is on or off; else ``"kernels"``. A scheme
that cannot run here (any but ``"kernels"`` without the driver; ``"memops"`` and ``"memop_write"`` under the
emulation) gives ``"kernels"`` (:func:`flag_scheme`)."""
FLAG_SCHEMES = ("memop_parity", "memops", "memop_write", "kernels")
"""Every scheme ``DOUBLE_BUFFER_FLAGS`` may name besides ``"auto"``."""
REPLAYABLE_FLAG_SCHEMES = ("memop_parity", "kernels")
"""The schemes whose eager calls enqueue the same work in every call of a parity (no host value), so the op's own
CUDA graphs can replay them (``CublasPlan.graph_phase``)."""
EMULATED_FLAG_SCHEMES = ("memop_parity", "kernels")
"""The schemes the CPU emulation runs (``"memop_parity"``: the host writes the 1 where the GPU's memory operation
would)."""
DOUBLE_BUFFER_MAX_BYTES = 512 << 20
"""The largest pair of double receive buffers a cuBLAS plan allocates (bytes, per rank); larger problems keep the
begin barrier."""


class AgGemmError(OpInputError):
    """Bad input to ``ag_gemm`` (raised on the host before anything is launched)."""


EMULATED_CONFIG = OverlapConfig(
    matmul=MatmulConfig(MIN_BLOCK_M, 16, 16, 1, 1, 1, False, 1, use_tma=False), chunk_tiles=1, producer="ce"
)
"""The configuration under the CPU emulation (``ops.common.errors.emulated``): the fused pointer kernel with
64x16x16 tiles (the smallest row tile the flags allow), one chunk per tile row, the copy-engine producer (a host
copy, then the flag write)."""


def check_inputs(a: Any, b: Any) -> rt.World:
    """Checks of ``ag_gemm``'s operands, devices first (types, devices, dtypes, shapes, layout, then the world).

    Returns the world. Everything but the world is checked before ``triton_dist.init()`` is asked for, so a bad
    operand is named as such whatever the state of the runtime.
    """
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, torch.Tensor):
            raise AgGemmError(f"ag_gemm: {name} must be a torch.Tensor, got {type(value).__name__}")
        if value.device.type != "cuda" and not (value.device.type == "cpu" and emulated_world() is not None):
            raise AgGemmError(f"ag_gemm: the operands must be on a GPU, but {name} is on {value.device}")
    if a.device != b.device:
        raise AgGemmError(f"ag_gemm: a is on {a.device} but b is on {b.device}")
    try:
        check_operands(a, b, "ag_gemm", tma_rows=False)
    except (TypeError, ValueError) as error:
        raise AgGemmError(str(error)) from None
    world = peer_world("ag_gemm", AgGemmError)
    check_tensor("ag_gemm", "a", a, world.device, SUPPORTED_DTYPES, AgGemmError)
    return world


# ---------------------------------------------------------------------------------------------------- workspace


@dataclasses.dataclass
class Workspace:
    """Buffers of one (M_local, K, dtype) problem: receive buffer, flags, epoch, barrier, the peers' views."""

    recv: torch.Tensor  # [W * M_local, K], symmetric; slot s holds rank s's shard once its flags are set
    flags: torch.Tensor  # int32, symmetric: (segment, chunk, pushing program)
    epoch: torch.Tensor  # int32 [1], this rank's epoch counter
    barrier: torch.Tensor  # int32 [W], symmetric
    peer_recv: dict[int, torch.Tensor]
    peer_flags: dict[int, torch.Tensor]


def _no_room(what: str, need: int, error: Exception) -> rt.HeapExhaustedError:
    """The error for a workspace the symmetric heap cannot hold (``need`` bytes)."""
    return rt.HeapExhaustedError(
        f"ag_gemm: the symmetric heap has no room for {what} ({need >> 20} MiB); pass a larger heap_size to "
        f"triton_dist.init() ({error})"
    )


def _peer_views(
    world: rt.World, recv: torch.Tensor, flags: torch.Tensor
) -> tuple[dict[int, torch.Tensor], dict[int, torch.Tensor]]:
    """Every peer's ``recv`` and ``flags`` through its mapping, after a barrier: every rank's zeroed flags are in
    place before any rank sets one."""
    rt.barrier()
    peers = [r for r in range(world.world_size) if r != world.rank]
    return {r: rt.peer_tensor(recv, r) for r in peers}, {r: rt.peer_tensor(flags, r) for r in peers}


def workspace(world: rt.World, a: torch.Tensor) -> Workspace:
    """The buffers for shards like ``a`` ([M_local, K], its dtype), allocated on first use and kept.

    The flags have room for the finest chunking (one ``MIN_BLOCK_M`` tile row per chunk) times the most pushing
    programs, so every configuration shares them (the cuBLAS path's ``cublas_flag_index`` layout, at most W x
    ``MAX_CUBLAS_CHUNKS`` flags, fits too): a flag counts only when it equals the current epoch, and the epoch moves
    on every call, so a flag left by another configuration never matches.
    """
    m_local, k = a.shape

    def create(world: rt.World) -> Workspace:
        w = world.world_size
        max_chunks = triton.cdiv(m_local, MIN_BLOCK_M)
        try:
            recv = rt.empty(w * m_local, k, dtype=a.dtype)
            flags = rt.zeros(w * max_chunks * MAX_PUSH_CTAS, dtype=torch.int32)
            barrier = rt.zeros(w, dtype=torch.int32)
        except rt.HeapExhaustedError as error:
            need = w * m_local * k * a.element_size()
            raise _no_room(f"the receive buffer of {w} x [{m_local}, {k}] {a.dtype}", need, error) from None
        epoch = torch.zeros(1, dtype=torch.int32, device=world.device)
        return Workspace(recv, flags, epoch, barrier, *_peer_views(world, recv, flags))

    return resources.workspace(("ag_gemm", m_local, k, a.dtype), create, what="ag_gemm")


@dataclasses.dataclass
class DoubleBuffer:
    """The cuBLAS path's receive buffers for eager calls, which then need no begin barrier.

    Eager calls alternate between two receive buffers (``calls`` counts them, for every plan of the problem). A
    call's copies into a peer's buffer ``n % 2`` cannot overtake that peer's reading of it in call ``n - 2``: this
    rank's side stream starts call ``n`` after its current stream finished call ``n - 1``, whose wait saw the
    peer's flag of call ``n - 1``, which the peer's side stream set only after the peer's current stream finished
    call ``n - 2``. A peer may thus run one call ahead (it may set its flags of call ``n + 1`` while this rank still
    waits in call ``n``), and the flag schemes (``flags_by``) differ in how a wait tells this call's flag from the
    next one's:

    - ``"kernels"``, ``"memops"``, ``"memop_write"``: the flags (row 0 of ``flags``) count the calls and the waits
      compare with ``>=``. With the driver the host writes (and ``"memops"`` awaits) ``calls + 1`` by stream memory
      operations; ``"kernels"`` keeps two device counters in step on every rank instead: ``send_epoch`` (what the
      flag copies send, advanced on the side stream after them) and ``recv_epoch`` (what the wait kernels expect,
      advanced by the call's last wait).
    - ``"memop_parity"``: one row of flags per parity. The producer of call ``n`` writes 1 into the peer's flag of
      (``n % 2``, its segment, the chunk) after the chunk's copy; this rank's wait kernel of call ``n`` waits for 1
      and then resets the flag to 0. A peer one call ahead writes the other parity's row, which no wait of call ``n``
      reads. The reset cannot race that producer's next write of the same flag, which comes in call ``n + 2``: by
      the argument above (with the roles swapped), the producer's side stream starts call ``n + 2`` only after its
      current stream finished call ``n + 1``, whose wait saw this rank's flag of call ``n + 1``, which this rank's
      side stream wrote only after its current stream had finished call ``n``, the reset included. So each flag is
      0 when its call's write comes, that write is the only one until this rank's wait resets it, and once a rank's
      calls are done (stream-ordered) every flag on it is 0 again. Every plan of the problem writes exactly the
      flags its waits reset (one per chunk and peer), so plans with different chunk counts can share the flags.
      The values are constants, so a graph of a call replays it correctly.

    Calls captured in a user's CUDA graph replay with fixed addresses, so they cannot alternate: they keep the begin
    barrier and the shared :class:`Workspace`. The op's own graphs of eager calls (``ops.common.eager_graphs``)
    capture one graph per parity, where the scheme replays (``REPLAYABLE_FLAG_SCHEMES``).
    """

    recv: torch.Tensor  # [2, W * M_local, K], symmetric
    flags: torch.Tensor  # int32 [2, W * MAX_CUBLAS_CHUNKS], symmetric: flags[p, cublas_flag_index(s, c, W)] is
    # chunk c of rank s's; "memop_parity" uses row p for calls of parity p (1 from the chunk's landing until this
    # rank's wait resets it), the other schemes row 0 alone (the epoch or count of the last call whose chunk landed)
    send_epoch: torch.Tensor  # int32 [1]
    recv_epoch: torch.Tensor  # int32 [1]
    peer_recv: dict[int, torch.Tensor]
    peer_flags: dict[int, torch.Tensor]
    flags_by: str = "kernels"
    """One of ``FLAG_SCHEMES`` (``DOUBLE_BUFFER_FLAGS`` resolved when the buffers were made, the same on every rank):
    fixed for the buffers' life, because the schemes' flag values agree only from the first call on."""
    calls: int = 0
    """Eager calls so far (the host's count, the same on every rank): call ``n`` fills buffer ``n % 2``."""


def flag_scheme(choice: str, available: tuple[str, ...]) -> str:
    """The ``FLAG_SCHEMES`` entry of ``DOUBLE_BUFFER_FLAGS`` = ``choice`` (see there) where the schemes in
    ``available`` can run (:func:`available_flag_schemes`): ``"auto"`` gives ``"memop_parity"`` where available, a
    scheme is taken where available, anything else gives ``"kernels"`` (which runs everywhere). Raises
    ``ValueError`` for a choice that is not ``"auto"`` or a scheme."""
    if choice != "auto" and choice not in FLAG_SCHEMES:
        raise ValueError(f"ag_gemm: DOUBLE_BUFFER_FLAGS must be 'auto' or one of {FLAG_SCHEMES}, got {choice!r}")
    wanted = "memop_parity" if choice == "auto" else choice
    return wanted if wanted in available else "kernels"


def available_flag_schemes(device: torch.device) -> tuple[str, ...]:
    """The flag schemes that can run on ``device``: every one on a GPU whose stream operations reach the driver,
    ``EMULATED_FLAG_SCHEMES`` under the CPU emulation, else ``"kernels"`` alone."""
    if device.type == "cpu":
        return EMULATED_FLAG_SCHEMES
    return FLAG_SCHEMES if stream_ops(device).uses_driver else ("kernels",)


def double_buffer(world: rt.World, a: torch.Tensor) -> DoubleBuffer | None:
    """The double receive buffers for shards like ``a``, allocated on first use and kept; None where they would
    take more than ``DOUBLE_BUFFER_MAX_BYTES`` or the symmetric heap has no room for them (a ``RuntimeWarning``
    says so): the plan's eager calls then keep the begin barrier, as captured calls do. Every rank allocates the
    same sizes in the same order, so every rank gets the same answer."""
    m_local, k = a.shape
    w = world.world_size
    need = 2 * w * m_local * k * a.element_size()
    if need > DOUBLE_BUFFER_MAX_BYTES:
        return None

    def create(world: rt.World) -> DoubleBuffer:
        recv = rt.empty(2, w * m_local, k, dtype=a.dtype)
        # Per parity, room for every chunk count (cublas_flag_index).
        flags = rt.zeros(2, w * MAX_CUBLAS_CHUNKS, dtype=torch.int32)
        send_epoch = torch.ones(1, dtype=torch.int32, device=world.device)
        recv_epoch = torch.ones(1, dtype=torch.int32, device=world.device)
        scheme = flag_scheme(DOUBLE_BUFFER_FLAGS, available_flag_schemes(a.device))
        return DoubleBuffer(recv, flags, send_epoch, recv_epoch, *_peer_views(world, recv, flags), flags_by=scheme)

    try:
        return resources.workspace(("ag_gemm.double", m_local, k, a.dtype), create, what="ag_gemm")
    except rt.HeapExhaustedError as error:
        warnings.warn(
            f"ag_gemm: the symmetric heap has no room for the cuBLAS path's double receive buffers ({need >> 20} "
            f"MiB for [{m_local}, {k}] {a.dtype}): its eager calls keep the begin barrier; a larger heap_size for "
            f"triton_dist.init() removes it ({error})",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


# --------------------------------------------------------------------------------------------------------- plans


@dataclasses.dataclass
class _Copy:
    """One chunk for one peer: ``nbytes`` from ``a`` + ``source_offset`` to ``destination``, then the flag."""

    destination: int
    source_offset: int
    nbytes: int
    flag: int  # the peer's flag address; the epoch counter's 4 bytes are copied there after the chunk


@dataclasses.dataclass
class _HostCopy:
    """The CPU emulation's copy-engine producer for one chunk and peer: rows ``lo:hi`` of ``a`` copied on the host
    into ``destination`` (the peer's receive rows, through its mapping), then the epoch written into ``flag``."""

    destination: torch.Tensor
    lo: int
    hi: int
    flag: torch.Tensor


@dataclasses.dataclass
class FusedPlan:
    """Everything one fused call of a signature launches, resolved at its first call."""

    config: OverlapConfig
    workspace: Workspace
    rows: int
    n: int
    begin: LaunchPlan | EmulatedLaunch
    gemm: LaunchPlan | EmulatedLaunch
    use_tma: bool
    a_block: list[int]
    b_block: list[int]
    c_block: list[int]
    recv_desc: Any
    push: LaunchPlan | EmulatedLaunch | None
    copies: tuple[_Copy, ...]
    side: torch.cuda.Stream | None  # None under the CPU emulation (as stream_ops)
    stream_ops: StreamOps | None
    no_comm: bool
    flag_count: int
    first_copies: int  # how many copies (the first chunk for every peer) go before the GEMM's launch
    host_copies: tuple[_HostCopy, ...] = ()
    """The copy-engine producer under the CPU emulation (``copies`` is empty there)."""
    _call: _CallConstants = dataclasses.field(init=False, repr=False)
    _first: tuple[tuple[int, int, int, int], ...] = dataclasses.field(init=False, repr=False)
    """The producer's copies enqueued before the GEMM's launch, as ``_enqueue_copies`` takes them."""
    _rest: tuple[tuple[int, int, int, int], ...] = dataclasses.field(init=False, repr=False)
    _pushes: bool = dataclasses.field(init=False, repr=False)
    _descriptors: tuple[DescriptorCache, DescriptorCache, DescriptorCache] = dataclasses.field(init=False, repr=False)
    """The TMA descriptors of a, b and C by address (the TMA kernel)."""
    graphs: EagerGraphs = dataclasses.field(default_factory=EagerGraphs, init=False, repr=False, compare=False)
    """The graphs of this plan's eager calls (``ops.common.eager_graphs``)."""

    def __post_init__(self) -> None:
        self._call = _CallConstants.of(self.workspace, self.rows, self.n, self.side, self.gemm)
        copies = () if self.no_comm or self.push is not None else _copy_arguments(self.copies)
        self._first, self._rest = copies[: self.first_copies], copies[self.first_copies :]
        self._pushes = self.push is not None and not self.no_comm
        self._descriptors = (
            DescriptorCache(self.a_block), DescriptorCache(self.b_block), DescriptorCache(self.c_block)
        )  # fmt: skip

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """C = all_gather(a) @ b: enqueues the call on the current stream and the side stream (joined back). C is
        ``out`` (checked by the caller: the plan's output shape, dtype and device, contiguous, 16-byte aligned), else
        a new tensor."""
        call = self._call
        if call.emulated:  # the CPU emulation
            return self._run_emulated(a, b, out)
        index = call.device_index
        if index is not None and index != current_device_index():  # the launchers launch in the current context
            with torch.cuda.device(index):
                return self.run(a, b, out)
        ops = self.stream_ops
        assert ops is not None, "a GPU plan has its stream operations"
        c = torch.empty(call.c_shape, dtype=call.dtype, device=call.device) if out is None else out
        main = current_raw_stream(call.device.index)
        side = call.side
        self.begin.launch_on(main)
        if self.no_comm:  # diagnosis only (bench/ag_gemm.py): every flag already holds the epoch, nothing travels
            ws = self.workspace
            ws.flags[: self.flag_count].copy_(ws.epoch.expand(self.flag_count))
        ops.order("ag_gemm.fork", main, side)
        base = a.data_ptr()
        if self._pushes:
            assert self.push is not None
            self.push.launch_on(side, base)
        elif self._first:
            # The first chunk for every peer before the GEMM's launch, the rest after it: the copy engine and the
            # GEMM both start as early as the host allows, whatever the number of chunks. Each chunk's flag copy is
            # stream-ordered after it.
            _enqueue_copies(ops, self._first, base, call.epoch, side)
        if self.use_tma:
            a_desc, b_desc, c_desc = self._descriptors
            self.gemm.launch_on(main, a_desc(a), self.recv_desc, b_desc(b), c_desc(c))
        else:
            self.gemm.launch_on(main, base, call.recv, b.data_ptr(), c.data_ptr())
        if self._rest:
            _enqueue_copies(ops, self._rest, base, call.epoch, side)
        ops.order("ag_gemm.join", side, main)
        return c

    def _run_emulated(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        """The call under the CPU emulation, every step in order on the host: the begin kernel, the producer (the
        push kernel, or host copies each followed by its flag write), then the GEMM into ``out`` (or a new C)."""
        c = torch.empty((self.rows, self.n), dtype=a.dtype, device=a.device) if out is None else out
        ws = self.workspace
        self.begin.launch_on(0)
        if self.no_comm:
            ws.flags[: self.flag_count].copy_(ws.epoch.expand(self.flag_count))
        elif self.push is not None:
            self.push.launch_on(0, a)
        else:
            for copy in self.host_copies:
                copy.destination.copy_(a[copy.lo : copy.hi])
                copy.flag.copy_(ws.epoch)  # after the rows: the peer's GEMM reads them once it sees the epoch
        self.gemm.launch_on(0, a, ws.recv, b, c)
        return c

    def gathered(self, a: torch.Tensor, rank: int) -> torch.Tensor:
        """all_gather(a), from the receive buffer this call filled (stream-ordered after the call)."""
        return _gathered(self.workspace.recv, a, rank)


@dataclasses.dataclass(frozen=True)
class _CallConstants:
    """What every GPU call of a plan reads besides the launches, resolved once: the output's shape, dtype and
    device, the device's index (None for a plan of CPU tensors), the side stream's handle, the addresses of the
    epoch counter and the receive buffer, and whether the plan runs under the CPU emulation."""

    c_shape: tuple[int, int]
    dtype: torch.dtype
    device: torch.device
    device_index: int | None
    side: int
    epoch: int
    recv: int
    emulated: bool

    @staticmethod
    def of(
        ws: Workspace, rows: int, n: int, side: torch.cuda.Stream | None, launch: LaunchPlan | EmulatedLaunch
    ) -> _CallConstants:
        """The constants of a plan on ``ws`` with a [rows, n] output (its operands are the receive buffer's dtype:
        the signature fixes it)."""
        device = ws.recv.device
        return _CallConstants(
            c_shape=(rows, n),
            dtype=ws.recv.dtype,
            device=device,
            device_index=device.index,
            side=0 if side is None else side.cuda_stream,
            epoch=ws.epoch.data_ptr(),
            recv=ws.recv.data_ptr(),
            emulated=isinstance(launch, EmulatedLaunch),
        )


def _copy_arguments(copies: tuple[_Copy, ...]) -> tuple[tuple[int, int, int, int], ...]:
    """``copies`` as ``_enqueue_copies`` takes them: (destination, source offset, bytes, flag address)."""
    return tuple((copy.destination, copy.source_offset, copy.nbytes, copy.flag) for copy in copies)


def _enqueue_copies(
    ops: StreamOps, copies: tuple[tuple[int, int, int, int], ...], base: int, epoch: int, stream: int
) -> None:
    """The copy-engine producer's part of a call on ``stream``: per (destination, source offset, bytes, flag) of
    ``copies``, the chunk at ``base`` + offset to its destination, then the epoch counter's 4 bytes at ``epoch`` to
    the peer's flag (stream-ordered after the chunk, so the peer reads the rows once it sees the epoch)."""
    copy = ops.copy
    for destination, offset, nbytes, flag in copies:
        copy(destination, base + offset, nbytes, stream)
        copy(flag, epoch, 4, stream)


def _gathered(recv: torch.Tensor, a: torch.Tensor, rank: int) -> torch.Tensor:
    """all_gather(a): a copy of ``recv``, the receive buffer a call filled, with this rank's own rows (never pushed
    to itself) taken from ``a`` (stream-ordered after the call, whose side stream has joined the current one)."""
    gathered = recv.clone()
    m_local = a.shape[0]
    gathered[rank * m_local : (rank + 1) * m_local].copy_(a)
    return gathered


class CublasChunk(NamedTuple):
    """One chunk of a peer's shard on the cuBLAS path: the peer (``segment``), its rows ``lo:hi`` within the shard,
    and its flag's index in the flags (``cublas_flag_index``)."""

    segment: int
    lo: int
    hi: int
    flag: int


def cublas_chunk_rows(m_local: int, chunks: int) -> int:
    """Rows per chunk where the cuBLAS path splits shards of ``m_local`` rows ``chunks`` ways: ``ceil(m_local /
    chunks)`` rounded up to a multiple of 8, the last chunk taking what is left. A multiple of 8 rows keeps every
    chunk's rows of A, of the receive buffer and of C as aligned as the shard's first row whatever K and N are
    (8 rows of 2-byte elements are a multiple of 16 bytes), as cuBLAS's fastest kernels want; the copy engine needs
    no alignment. A shard too small for ``chunks`` chunks of that size gets fewer (never an empty one):
    ``cdiv(m_local, cublas_chunk_rows(m_local, chunks))`` of them; one chunk (``chunks = 1``) is the whole shard."""
    rows = triton.cdiv(max(m_local, 1), max(chunks, 1))
    return triton.cdiv(rows, 8) * 8


def cublas_flag_index(segment: int, chunk: int, world_size: int) -> int:
    """The flag of chunk ``chunk`` of rank ``segment``'s shard on the cuBLAS path: ``segment + world_size * chunk``.
    Chunk-major, so one chunk per shard uses flags 0..W-1 as before chunks existed, and a flag's meaning does not
    depend on the chunk count: plans of one problem with different counts share the double buffers' flags, whose
    values only grow, without one plan's flag standing for another's chunk."""
    return segment + world_size * chunk


@dataclasses.dataclass
class CublasPlan:
    """Everything one call of the cuBLAS path launches, resolved at its first call: the begin kernel, the
    copy-engine producer on the side stream (``chunks`` chunks per shard and peer, each followed by its flag copy),
    and on the current stream the own shard's ``torch.mm``, then per chunk in arrival order its wait kernel and the
    ``torch.mm`` of its rows."""

    workspace: Workspace
    rank: int
    m_local: int
    rows: int
    n: int
    begin: LaunchPlan | EmulatedLaunch
    waits: tuple[tuple[int, LaunchPlan | EmulatedLaunch, torch.Tensor], ...]
    """Per chunk in arrival order (chunk 0 of rank + 1, of rank + 2, ..., then chunk 1 of each, ...: every rank
    pushes chunk by chunk, to rank - 1 first): its part of C (``parts``), the kernel that waits for its flag, and
    its rows of the receive buffer."""
    copies: tuple[_Copy, ...]
    side: torch.cuda.Stream | None  # None under the CPU emulation (as stream_ops)
    stream_ops: StreamOps | None
    host_copies: tuple[_HostCopy, ...] = ()
    """The copy-engine producer under the CPU emulation (``copies`` is empty there)."""
    begin_on_side: bool = False
    """Where the begin kernel (epoch and barrier) runs. False (the default): on the current stream before the fork,
    so the own shard's GEMM starts after the barrier (5 µs of a 51 µs call on 2 x H200: bench/timeline_gpu.py).
    True (an option until measured): on the side stream, after the fork and before the copies, so the own GEMM
    starts at once; the current stream waits for the begin kernel only before the first wait kernel, which reads
    the epoch it advanced. Its risk: cuBLAS's grid may take every SM before the one-program begin kernel gets one,
    which then waits for a GEMM wave and delays the copies (the side stream has the device's highest priority for
    that reason)."""
    priority_side: torch.cuda.Stream | None = None
    """The side stream of ``begin_on_side``: the device's highest priority (None under the CPU emulation)."""
    wait_beside: bool = False
    """Where the double-buffered eager calls (``_run_double``) wait for their chunks. False (the default): each
    chunk's wait on the current stream right before its GEMM, after the own GEMM: on 2 x H200 at M = 1024 the
    wait kernel's 1.7-2.1 µs sat on the chain between the own GEMM and the first peer GEMM although its flag had
    been set long before (bench/timeline_gpu.py, session 30). True (an option until timed; ``CUBLAS_WAIT_BESIDE``):
    the waits on ``waiter``, a high-priority stream forked from the current stream at the call's start, the first
    one enqueued before the own GEMM, so it runs beside it; the current stream waits for chunk i's wait (an event)
    only right before chunk i's GEMM, and the wait is off the chain wherever its flag is set before the own GEMM
    ends. Every scheme of ``DOUBLE_BUFFER_FLAGS`` (the wait kernels, ``"memops"``'s memory-operation waits).

    Safe as the waits on the current stream are (``DoubleBuffer``'s argument): chunk i's GEMM still starts after
    its wait, and the current stream's last GEMM waits for the call's last wait, after which nothing is enqueued
    on the waiter, so "the current stream finished call n" still includes every wait (and ``"memop_parity"``'s
    reset) of call n: the side stream's copies and flag writes of call n + 1, forked after it, cannot come first.
    The waiter of call n + 1 forks after the whole of call n too, so waits never run a call ahead. One waiter
    stream holds every chunk's wait in arrival order, as the current stream did: the GEMMs consume the chunks in
    that order anyway, so more waiter streams would start no GEMM earlier, and one 1-warp program at a time holds
    one SM slot at most. The waiter joins the current stream through the last chunk's event, so a capture of the
    call (the op's own graphs: one per parity and per ``wait_beside``, ``graph_phase``) has it fork from and join
    back to the capturing stream. Calls captured in a user's CUDA graph keep the barrier path and its waits on the
    current stream.

    Its costs: one more fork (an event) and one cross-stream dependency per chunk (a graph edge in the replays),
    and the first wait needs an SM slot while cuBLAS's own-GEMM grid runs. At M = 1024 on two ranks the own GEMM's
    grid (512 rows) may leave SMs free, and torch instantiates graphs with node priorities, so the waiter keeps its
    stream's priority in the replays; where cuBLAS's CTAs hold every SM's registers, the waiter starts when the
    first CTA retires, still before the own GEMM ends. A wait whose flag is not yet set spins on its SM beside the
    GEMM (one SM of the GEMM's grid lost only where the GEMM needs a further wave)."""
    waiter: torch.cuda.Stream | None = None
    """The waits' stream with ``wait_beside``: the device's highest priority (None under the CPU emulation)."""
    double: DoubleBuffer | None = None
    """Eager calls' double receive buffers (no begin barrier), or None: every call as a captured one."""
    double_waits: tuple[
        tuple[int, int, LaunchPlan | EmulatedLaunch | None, tuple[torch.Tensor, torch.Tensor]], ...
    ] = ()
    """With ``double``: per chunk in arrival order (as ``waits``), its part of C, its flag's index (in a row of
    ``double.flags``), the kernel that waits for its flag (``"kernels"``: the last one also advances the receive
    epoch; ``"memop_write"``: the call count its one argument; ``"memop_parity"``: the flag's index in the flags of
    the call's parity its one argument, and it resets the flag; ``"memops"``: None), and its rows of each receive
    buffer."""
    double_copies: tuple[tuple[_Copy, ...], tuple[_Copy, ...]] = ((), ())
    """With ``double``: the copies into the peers' buffer 0, then buffer 1, each with the peer's flag it sets (row 0
    of the flags; ``"memop_parity"``: the row of the buffer's parity)."""
    double_host_copies: tuple[tuple[_HostCopy, ...], tuple[_HostCopy, ...]] = ((), ())
    """``double_copies`` under the CPU emulation."""
    advance: LaunchPlan | EmulatedLaunch | None = None
    """With ``double``: the kernel that moves the send epoch on, after the flag copies."""
    chunks: int = 1
    """Chunks per peer shard (``OverlapConfig.cublas_chunks``, fewer where the shard is too small for them)."""
    part_rows: tuple[int, ...] = ()
    """C's row blocks, the parts ``waits`` name: the own shard whole, each peer's shard by chunks (in row order).
    Empty: one chunk per shard, C's W blocks of ``m_local`` rows (part s is rank s's shard)."""
    own_part: int | None = None
    """The part of C the own shard's GEMM writes (None: ``rank``, as with one chunk per shard)."""
    peer_chunks: tuple[CublasChunk, ...] = ()
    """Every peer chunk in the order of ``waits`` (what is waited for, where; for tests and tools)."""
    _call: _CallConstants = dataclasses.field(init=False, repr=False)
    _copies: tuple[tuple[int, int, int, int], ...] = dataclasses.field(init=False, repr=False)
    _world_size: int = dataclasses.field(init=False, repr=False)
    _split: list[int] | None = dataclasses.field(init=False, repr=False)
    _own: int = dataclasses.field(init=False, repr=False)
    _priority_side: int = dataclasses.field(init=False, repr=False)
    _waiter: int = dataclasses.field(init=False, repr=False)
    _double_copies: tuple[tuple[tuple[int, int, int, int], ...], ...] = dataclasses.field(init=False, repr=False)
    _send_epoch: int = dataclasses.field(init=False, repr=False)
    _double_flags: int = dataclasses.field(init=False, repr=False)
    _flags_per_parity: int = dataclasses.field(init=False, repr=False)
    """The flags in a row of ``double.flags`` (parity p's flag i is flag p * this + i)."""
    _double_recv: tuple[torch.Tensor, ...] = dataclasses.field(init=False, repr=False)
    _last_recv: torch.Tensor = dataclasses.field(init=False, repr=False)
    """The receive buffer the last call of this plan filled (``gathered``)."""
    graphs: EagerGraphs = dataclasses.field(default_factory=EagerGraphs, init=False, repr=False, compare=False)
    """The graphs of this plan's eager calls (``ops.common.eager_graphs``)."""

    def __post_init__(self) -> None:
        self._call = _CallConstants.of(self.workspace, self.rows, self.n, self.side, self.begin)
        self._copies = _copy_arguments(self.copies)
        self._world_size = self.rows // self.m_local
        self._split = list(self.part_rows) if self.part_rows else None
        self._own = self.rank if self.own_part is None else self.own_part
        self._priority_side = 0 if self.priority_side is None else self.priority_side.cuda_stream
        self._waiter = 0 if self.waiter is None else self.waiter.cuda_stream
        self._double_copies = tuple(_copy_arguments(copies) for copies in self.double_copies)
        self._send_epoch = 0 if self.double is None else self.double.send_epoch.data_ptr()
        self._double_flags = 0 if self.double is None else self.double.flags.data_ptr()
        self._flags_per_parity = 0 if self.double is None else self.double.flags.shape[-1]
        self._double_recv = () if self.double is None else tuple(self.double.recv.unbind())
        self._last_recv = self.workspace.recv

    def _parts(self, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """C's parts (``part_rows``): one dispatcher op (rows = W * m_local: W parts of m_local rows, or the
        chunks' sizes)."""
        return c.chunk(self._world_size) if self._split is None else c.split(self._split)

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """C = all_gather(a) @ b: enqueues the call on the current stream and the side stream (joined back). C is
        ``out`` (checked by the caller: the plan's output shape, dtype and device, contiguous), else a new tensor."""
        call = self._call
        if call.emulated:  # the CPU emulation
            return self._run_emulated(a, b, out)
        index = call.device_index
        if index is not None and index != current_device_index():  # the launchers launch in the current context
            with torch.cuda.device(index):
                return self.run(a, b, out)
        ops = self.stream_ops
        assert ops is not None, "a GPU plan has its stream operations"
        if self.double is not None and (capturing_eager_call() or not torch.cuda.is_current_stream_capturing()):
            return self._run_double(a, b, ops, self.double, out)
        self._last_recv = self.workspace.recv
        c = torch.empty(call.c_shape, dtype=call.dtype, device=call.device) if out is None else out
        parts = self._parts(c)
        main = current_raw_stream(call.device.index)
        side = call.side
        if self.begin_on_side:
            # The fork first: the barrier on the side stream then still means every peer's current stream has
            # finished its previous call's GEMMs (which read the slots the copies overwrite).
            side = self._priority_side
            ops.order("ag_gemm.cublas.fork", main, side)
            self.begin.launch_on(side)
            torch.mm(a, b, out=parts[self._own])
            ops.order("ag_gemm.cublas.begun", side, main)  # before the copies are enqueued: waits for begin alone
            _enqueue_copies(ops, self._copies, a.data_ptr(), call.epoch, side)
        else:
            self.begin.launch_on(main)
            ops.order("ag_gemm.cublas.fork", main, side)
            _enqueue_copies(ops, self._copies, a.data_ptr(), call.epoch, side)
            torch.mm(a, b, out=parts[self._own])
        for part, wait, received in self.waits:
            wait.launch_on(main)
            torch.mm(received, b, out=parts[part])
        ops.order("ag_gemm.cublas.join", side, main)
        return c

    def graph_phase(self) -> int | None:
        """The host state an eager call's launches depend on (``eager_graphs``): which double buffer it fills (and,
        with ``"memop_parity"``, which row of flags), plus 2 with ``wait_beside`` (where its waits run, which a tool
        may switch on a built plan); 0 without double buffers; None where the host writes the flags' values
        (``"memops"``, ``"memop_write"``: those cannot be replayed)."""
        double = self.double
        if double is None:
            return 0
        if double.flags_by not in REPLAYABLE_FLAG_SCHEMES:
            return None
        return (double.calls & 1) + (2 if self.wait_beside else 0)

    def replayed(self, phase: Hashable) -> None:
        """The host-state change of an eager call of ``phase`` whose launches a graph replayed."""
        double = self.double
        if double is None:
            self._last_recv = self.workspace.recv
        else:
            assert isinstance(phase, int), "a double-buffered call's phase is its buffer (+ 2 with wait_beside)"
            double.calls += 1
            self._last_recv = self._double_recv[phase & 1]

    def _run_double(
        self, a: torch.Tensor, b: torch.Tensor, ops: StreamOps, double: DoubleBuffer, out: torch.Tensor | None
    ) -> torch.Tensor:
        """An eager call on the double buffers: no begin kernel; the side stream forks at once and copies into the
        peers' buffer ``calls % 2``; the current stream runs the own GEMM, then per chunk its wait and its GEMM (C:
        ``out``, else a new tensor). With ``wait_beside`` the waits run on the waiter stream instead, forked right
        after the side stream, the first one enqueued before the own GEMM; the current stream waits for each (an
        event recorded after it) right before its chunk's GEMM.

        The flags by ``double.flags_by``: ``"memop_parity"``, a stream memory write of 1 into the peer's flag of
        this call's parity after each copy, a wait kernel per chunk (which resets its flag) before its GEMM;
        ``"memops"``, stream memory operations carrying the host's count of calls (this call's ``calls + 1``, what
        the device epochs would hold): a write into the peer's flag after each copy, a wait on each chunk's flag
        before its GEMM, no kernel; ``"memop_write"``, those writes and a wait kernel given the count;
        ``"kernels"``, the send epoch copied into the peers' flags and advanced by a kernel, and the wait kernels
        (the last one advances the receive epoch)."""
        call = self._call
        parity = double.calls & 1
        double.calls += 1
        c = torch.empty(call.c_shape, dtype=call.dtype, device=call.device) if out is None else out
        parts = self._parts(c)
        main = current_raw_stream(call.device.index)
        side = call.side
        waits = self.double_waits
        beside = self.wait_beside and bool(waits)
        waiter = self._waiter if beside else main
        ops.order("ag_gemm.cublas.fork", main, side)
        if beside:  # after the current stream's earlier work, as the side stream: no wait runs a call ahead
            ops.order("ag_gemm.cublas.waiter", main, waiter)
        scheme = double.flags_by
        base = a.data_ptr()
        value = 1 if scheme == "memop_parity" else double.calls & 0xFFFFFFFF  # the count: waits compare cyclically
        if scheme == "kernels":
            advance = self.advance
            assert advance is not None, "a double-buffered plan has its advance kernel"
            _enqueue_copies(ops, self._double_copies[parity], base, self._send_epoch, side)
            advance.launch_on(side)
        else:  # memory-operation writes: "memop_parity"'s constant 1 (a graph replays it) into its parity's row
            copy, write_value = ops.copy, ops.write_value
            for destination, offset, nbytes, flag in self._double_copies[parity]:
                copy(destination, base + offset, nbytes, side)
                write_value(flag, value, side)
        row = parity * self._flags_per_parity
        flags = self._double_flags

        def enqueue_wait(flag_index: int, wait: LaunchPlan | EmulatedLaunch | None) -> None:
            if scheme == "memop_parity":
                assert wait is not None, "the parity scheme has its wait kernels"
                wait.launch_on(waiter, row + flag_index)
            elif scheme == "kernels":
                assert wait is not None, "the kernel scheme has its wait kernels"
                wait.launch_on(waiter)
            elif wait is None:  # "memops"
                ops.wait_value(flags + 4 * flag_index, value, waiter)
            else:  # "memop_write": a kernel the watchdog watches
                wait.launch_on(waiter, value)

        if beside:  # the first wait before the own GEMM: its program is pending before cuBLAS's grid
            enqueue_wait(waits[0][1], waits[0][2])
        torch.mm(a, b, out=parts[self._own])
        for index, (part, flag_index, wait, received) in enumerate(waits):
            if index or not beside:  # beside: the first is enqueued above, the later ones behind it on the waiter
                enqueue_wait(flag_index, wait)
            if beside:
                ops.order("ag_gemm.cublas.waited", waiter, main)  # this chunk's wait and every one before it
            torch.mm(received[parity], b, out=parts[part])
        ops.order("ag_gemm.cublas.join", side, main)  # the waiter joined at the last chunk's order above
        self._last_recv = self._double_recv[parity]
        return c

    def _run_emulated(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        """The call under the CPU emulation, every step in order on the host: the begin kernel, the producer (host
        copies each followed by its flag write), the own GEMM, then each chunk's wait kernel and GEMM (with double
        buffers: the producer into buffer ``calls % 2``, each copy followed by the write of the send epoch, or with
        ``"memop_parity"`` of 1 into the flag of the call's parity, where the GPU's memory operation would write it;
        then the send epoch's advance (``"kernels"``), the own GEMM and per chunk its wait kernel and GEMM); C is
        ``out``, else a new tensor.

        With ``wait_beside`` every wait kernel runs before the own GEMM: the waiter stream's work in host order, an
        order the GPU may take too. It cannot deadlock: a wait needs only its peer's copy and flag write of the same
        call, which every rank makes at its call's start, before its own waits, and a rank starts call n + 1 only
        once call n (waits included) is done, so no rank waits for a flag that its peer sets only after a wait of
        its own."""
        double = self.double
        if double is not None:
            parity = double.calls & 1
            double.calls += 1
            by_parity = double.flags_by == "memop_parity"
            for copy in self.double_host_copies[parity]:
                copy.destination.copy_(a[copy.lo : copy.hi])
                if by_parity:  # after the rows: the peer's GEMM reads them once it sees the flag
                    copy.flag.fill_(1)
                else:
                    copy.flag.copy_(double.send_epoch)
            if not by_parity:
                assert self.advance is not None, "a double-buffered plan has its advance kernel"
                self.advance.launch_on(0)
            c = torch.empty((self.rows, self.n), dtype=a.dtype, device=a.device) if out is None else out
            parts = self._parts(c)
            row = parity * self._flags_per_parity

            def await_chunk(flag_index: int, wait: LaunchPlan | EmulatedLaunch | None) -> None:
                assert wait is not None, "the emulation's schemes wait by kernels"
                if by_parity:
                    wait.launch_on(0, row + flag_index)
                else:
                    wait.launch_on(0)

            beside = self.wait_beside
            if beside:  # the waiter stream's work in host order: every wait before the own GEMM (see above)
                for _, flag_index, wait, _ in self.double_waits:
                    await_chunk(flag_index, wait)
            torch.mm(a, b, out=parts[self._own])
            for part, flag_index, wait, received in self.double_waits:
                if not beside:
                    await_chunk(flag_index, wait)
                torch.mm(received[parity], b, out=parts[part])
            self._last_recv = self._double_recv[parity]
            return c
        c = torch.empty((self.rows, self.n), dtype=a.dtype, device=a.device) if out is None else out
        parts = self._parts(c)
        ws = self.workspace
        self.begin.launch_on(0)
        for copy in self.host_copies:
            copy.destination.copy_(a[copy.lo : copy.hi])
            copy.flag.copy_(ws.epoch)  # after the rows: the peer's GEMM reads them once it sees the epoch
        torch.mm(a, b, out=parts[self._own])
        for part, wait, received in self.waits:
            wait.launch_on(0)
            torch.mm(received, b, out=parts[part])
        return c

    def gathered(self, a: torch.Tensor, rank: int) -> torch.Tensor:
        """all_gather(a), from the receive buffer this call filled (stream-ordered after the call)."""
        return _gathered(self._last_recv, a, rank)


@dataclasses.dataclass
class UnfusedPlan:
    """NCCL all-gather then cuBLAS: where fusion cannot win, and for empty problems.

    Per call the baseline's GPU work (one all-gather, one cuBLAS GEMM, on the current stream); the host allocates
    the output and calls the group's all-gather with options built once (``ops.common.collectives``).
    """

    all_gather: Callable[..., Any]
    options: Any
    rows: int
    n: int
    k: int
    gathered: torch.Tensor | None = None
    """all_gather(a), kept by the plan and reused by every call that does not return it (stream order makes that
    safe), so such a call allocates only its output."""
    graphs: EagerGraphs = dataclasses.field(default_factory=EagerGraphs, init=False, repr=False, compare=False)
    """The graphs of this plan's eager calls (``ops.common.eager_graphs``)."""

    def run(
        self, a: torch.Tensor, b: torch.Tensor, keep_gathered: bool = False, out: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(C, all_gather(a)): the all-gather into the kept buffer (a new one with ``keep_gathered``), then
        ``torch.matmul`` into ``out`` (checked by the caller), else into a new C."""
        if keep_gathered:
            gathered = torch.empty((self.rows, self.k), dtype=a.dtype, device=a.device)
        else:
            if self.gathered is None:
                self.gathered = torch.empty((self.rows, self.k), dtype=a.dtype, device=a.device)
            gathered = self.gathered
        work = self.all_gather(gathered, a, self.options)
        if work is not None:  # as dist.all_gather_into_tensor: orders the current stream after the collective
            work.wait()
        c = torch.empty((self.rows, self.n), dtype=a.dtype, device=a.device) if out is None else out
        torch.matmul(gathered, b, out=c)
        return c, gathered


def _build_fused(world: rt.World, a: torch.Tensor, b: torch.Tensor, config: OverlapConfig, no_comm: bool) -> FusedPlan:
    m_local, k = a.shape
    n = b.shape[1]
    w, me = world.world_size, world.rank
    if config.matmul.block_m < MIN_BLOCK_M or config.push_ctas > MAX_PUSH_CTAS:
        raise AgGemmError(f"ag_gemm: block_m must be >= {MIN_BLOCK_M} and push_ctas <= {MAX_PUSH_CTAS}: {config}")
    ws = workspace(world, a)
    device = a.device
    mm = config.matmul
    emulated = device.type == "cpu"  # the CPU emulation: no driver, no streams, the pointer kernel
    target = None if emulated else triton.runtime.driver.active.get_current_target()
    sms = EMULATED_SMS if emulated else num_sms(device.index)
    # One SM stays free beside the copy engine too: should the driver run a small copy (the 4-byte flag copies)
    # as a kernel, it must not queue behind GEMM programs that spin on that very flag.
    reserved = config.push_ctas if config.producer == "sm" else 1
    chunk_rows = config.chunk_tiles * mm.block_m
    num_chunks = triton.cdiv(m_local, chunk_rows)
    flags_per_chunk = config.push_ctas if config.producer == "sm" else 1
    side = None if emulated else resources.side_stream(device, "ag_gemm")
    begin = compile_plan(_begin_kernel, (1, 1, 1), {"epoch_ptr": ws.epoch, "barrier_ptr": ws.barrier}, 0, num_warps=1)
    push = None
    if config.producer == "sm":
        named = {
            "a_ptr": a, "recv_ptr": ws.recv, "flags_ptr": ws.flags, "epoch_ptr": ws.epoch, "M_LOCAL": m_local,
            "K": k, "CHUNK_ROWS": chunk_rows, "num_chunks": num_chunks, "BLOCK": PUSH_BLOCK,
        }  # fmt: skip
        push = compile_plan(_push_kernel, (config.push_ctas, 1, 1), named, 1, num_warps=16)
    use_tma = not emulated and uses_tma(config, a, b)
    recv_desc = None
    a_block = b_block = c_block = [0, 0]
    if use_tma:
        bm, bn, bk = mm.block_m, mm.block_n, mm.block_k
        a_block, b_block, c_block = [bm, bk], [bk, bn], [bm, bn // mm.split_n]
        recv_desc = TensorDescriptor.from_tensor(ws.recv, a_block)
        c = torch.empty((w * m_local, n), dtype=a.dtype, device=device)
        grid = (max(1, min(sms - reserved, triton.cdiv(m_local, bm) * triton.cdiv(n, bn) * w)), 1, 1)
        named = {
            "a_desc": TensorDescriptor.from_tensor(a, a_block), "recv_desc": recv_desc,
            "b_desc": TensorDescriptor.from_tensor(b, b_block), "c_desc": TensorDescriptor.from_tensor(c, c_block),
            "flags_ptr": ws.flags, "epoch_ptr": ws.epoch, "M_LOCAL": m_local, "N": n, "K": k,
            "chunk_tiles": config.chunk_tiles, "flags_per_chunk": flags_per_chunk, "BLOCK_M": bm, "BLOCK_N": bn,
            "BLOCK_K": bk, "GROUP_M": mm.group_m, "SPLIT_N": mm.split_n, "FLATTEN_PEERS": config.flatten_peers,
        }  # fmt: skip
        gemm = compile_plan(_ag_gemm_tma_kernel, grid, named, 4, num_stages=mm.num_stages, num_warps=mm.num_warps)
    else:
        fallback = dataclasses.replace(mm, use_tma=False)
        if target is not None:
            fallback = config_for_target(fallback, target)
        tiles = triton.cdiv(m_local, fallback.block_m) * triton.cdiv(n, fallback.block_n) * w
        grid = (max(1, min(sms - reserved, tiles)), 1, 1)
        c = torch.empty((w * m_local, n), dtype=a.dtype, device=device)
        named = {
            "a_ptr": a, "recv_ptr": ws.recv, "b_ptr": b, "c_ptr": c, "flags_ptr": ws.flags, "epoch_ptr": ws.epoch,
            "M_LOCAL": m_local, "N": n, "K": k, "chunk_tiles": config.chunk_tiles * mm.block_m // fallback.block_m,
            "flags_per_chunk": flags_per_chunk, "BLOCK_M": fallback.block_m, "BLOCK_N": fallback.block_n,
            "BLOCK_K": fallback.block_k, "GROUP_M": fallback.group_m,
        }  # fmt: skip
        gemm = compile_plan(
            _ag_gemm_ptr_kernel, grid, named, 4, num_stages=fallback.num_stages, num_warps=fallback.num_warps
        )
    copies: tuple[_Copy, ...] = ()
    host_copies: tuple[_HostCopy, ...] = ()
    if config.producer == "ce":
        copies, host_copies = _producer_copies(ws.peer_recv, ws.peer_flags, a, me, w, chunk_rows, emulated)
    if push is not None and not emulated:
        # Load the producer's module now, harmlessly (zero chunks): with CUDA's lazy loading its first launch
        # could otherwise wait for kernels that spin on the peers' flags, and the peer's the same way.
        _push_kernel[(1,)](a, ws.recv, ws.flags, ws.epoch, m_local, k, MIN_BLOCK_M, 0, BLOCK=PUSH_BLOCK, num_warps=16)
    return FusedPlan(
        config=config,
        workspace=ws,
        rows=w * m_local,
        n=n,
        begin=begin,
        gemm=gemm,
        use_tma=use_tma,
        a_block=a_block,
        b_block=b_block,
        c_block=c_block,
        recv_desc=recv_desc,
        push=push,
        copies=copies,
        side=side,
        stream_ops=None if emulated else stream_ops(device),
        no_comm=no_comm,
        flag_count=w * num_chunks * flags_per_chunk,
        first_copies=w - 1,
        host_copies=host_copies,
    )


def _producer_copies(
    peer_recv: dict[int, torch.Tensor],
    peer_flags: dict[int, torch.Tensor],
    a: torch.Tensor,
    me: int,
    w: int,
    chunk_rows: int,
    emulated: bool,
    cublas_flags: bool = False,
) -> tuple[tuple[_Copy, ...], tuple[_HostCopy, ...]]:
    """The copy-engine producer's copies: per chunk of ``chunk_rows`` rows of ``a`` and per peer (rank - 1 first,
    then rank - 2, ...), the rows into slot ``me`` of that peer's receive buffer (``peer_recv``, [W * M_local, K]),
    then its flag (``peer_flags``): the fused kernel's ``me * num_chunks + chunk``, or with ``cublas_flags`` the
    cuBLAS path's ``cublas_flag_index(me, chunk, W)``. On a GPU by address (``_Copy``), under the CPU emulation
    through the peers' mappings (``_HostCopy``)."""
    m_local, k = a.shape
    num_chunks = triton.cdiv(m_local, chunk_rows)
    row_bytes = k * a.element_size()
    copies, host_copies = [], []
    for chunk in range(num_chunks):
        lo = chunk * chunk_rows
        hi = min(lo + chunk_rows, m_local)
        for step in range(1, w):
            dst = (me - step) % w
            flag = cublas_flag_index(me, chunk, w) if cublas_flags else me * num_chunks + chunk
            if emulated:
                rows = peer_recv[dst][me * m_local + lo : me * m_local + hi]
                host_copies.append(_HostCopy(rows, lo, hi, peer_flags[dst][flag : flag + 1]))
                continue
            copies.append(
                _Copy(
                    destination=peer_recv[dst].data_ptr() + (me * m_local + lo) * row_bytes,
                    source_offset=lo * row_bytes,
                    nbytes=(hi - lo) * row_bytes,
                    flag=peer_flags[dst].data_ptr() + flag * peer_flags[dst].element_size(),
                )
            )
    return tuple(copies), tuple(host_copies)


def _build_cublas(world: rt.World, a: torch.Tensor, b: torch.Tensor, chunks: int = 1) -> CublasPlan:
    """The cuBLAS path's plan with ``chunks`` chunks per peer shard (``cublas_chunk_rows`` says how many it gets):
    the shared workspace, the begin and wait kernels compiled, every copy's address; with ``CUBLAS_DOUBLE_BUFFER``
    also the eager calls' :class:`DoubleBuffer`, their waits, copies per buffer and the send epoch's advance
    kernel."""
    m_local, k = a.shape
    w, me = world.world_size, world.rank
    ws = workspace(world, a)
    device = a.device
    emulated = device.type == "cpu"
    one = (1, 1, 1)
    chunk_rows = cublas_chunk_rows(m_local, chunks)
    num_chunks = triton.cdiv(m_local, chunk_rows)
    part_rows: list[int] = []
    part_of: dict[tuple[int, int], int] = {}
    own_part = 0
    for segment in range(w):  # C's row blocks in row order: the own shard whole, each peer's by chunks
        if segment == me:
            own_part = len(part_rows)
            part_rows.append(m_local)
            continue
        for chunk in range(num_chunks):
            part_of[segment, chunk] = len(part_rows)
            part_rows.append(min(chunk_rows, m_local - chunk * chunk_rows))
    # Arrival order: every rank pushes chunk by chunk, to rank - 1 first, so rank r receives chunk 0 from r + 1,
    # then from r + 2, ..., then chunk 1 from r + 1, ...
    order = [
        CublasChunk(
            segment, chunk * chunk_rows, min((chunk + 1) * chunk_rows, m_local), cublas_flag_index(segment, chunk, w)
        )
        for chunk in range(num_chunks)
        for segment in ((me + step) % w for step in range(1, w))
    ]
    begin = compile_plan(_begin_kernel, one, {"epoch_ptr": ws.epoch, "barrier_ptr": ws.barrier}, 0, num_warps=1)
    waits = []
    for piece in order:
        named = {"flags_ptr": ws.flags, "epoch_ptr": ws.epoch, "flag_index": piece.flag}
        wait = compile_plan(_wait_shard_kernel, one, named, 0, num_warps=1)
        rows = slice(piece.segment * m_local + piece.lo, piece.segment * m_local + piece.hi)
        waits.append((part_of[piece.segment, piece.lo // chunk_rows], wait, ws.recv[rows]))
    copies, host_copies = _producer_copies(
        ws.peer_recv, ws.peer_flags, a, me, w, chunk_rows, emulated, cublas_flags=True
    )
    double = double_buffer(world, a) if CUBLAS_DOUBLE_BUFFER and w > 1 else None
    double_parts: dict[str, Any] = {}
    if double is not None:
        double_waits: list[tuple[int, int, LaunchPlan | EmulatedLaunch | None, tuple[torch.Tensor, torch.Tensor]]] = []
        for index, piece in enumerate(order):
            double_wait: LaunchPlan | EmulatedLaunch | None = None
            if double.flags_by == "kernels":
                named = {"flags_ptr": double.flags, "epoch_ptr": double.recv_epoch, "flag_index": piece.flag}
                named["ADVANCE"] = index == len(order) - 1
                double_wait = compile_plan(_wait_shard_then_advance_kernel, one, named, 0, num_warps=1)
            elif double.flags_by == "memop_write":
                named = {"value": 1, "flags_ptr": double.flags, "flag_index": piece.flag}
                double_wait = compile_plan(_wait_shard_value_kernel, one, named, 1, num_warps=1)
            elif double.flags_by == "memop_parity":  # the flag's index in the whole of flags: a call's argument
                named = {"flag_index": piece.flag, "flags_ptr": double.flags}
                double_wait = compile_plan(_wait_flag_then_reset_kernel, one, named, 1, num_warps=1)
            rows = slice(piece.segment * m_local + piece.lo, piece.segment * m_local + piece.hi)
            part = part_of[piece.segment, piece.lo // chunk_rows]
            double_waits.append((part, piece.flag, double_wait, (double.recv[0][rows], double.recv[1][rows])))
        by_parity = double.flags_by == "memop_parity"  # each buffer's flags in its own row, else both in row 0
        per_buffer = [
            _producer_copies(
                {r: buffers[parity] for r, buffers in double.peer_recv.items()},
                {r: flags[parity if by_parity else 0] for r, flags in double.peer_flags.items()}, a, me, w,
                chunk_rows, emulated, cublas_flags=True,
            )
            for parity in (0, 1)
        ]  # fmt: skip
        double_parts = {
            "double": double,
            "double_waits": tuple(double_waits),
            "double_copies": (per_buffer[0][0], per_buffer[1][0]),
            "double_host_copies": (per_buffer[0][1], per_buffer[1][1]),
            "advance": compile_plan(_advance_epoch_kernel, one, {"epoch_ptr": double.send_epoch}, 0, num_warps=1),
        }
    return CublasPlan(
        workspace=ws,
        rank=me,
        m_local=m_local,
        rows=w * m_local,
        n=b.shape[1],
        begin=begin,
        waits=tuple(waits),
        copies=copies,
        side=None if emulated else resources.side_stream(device, "ag_gemm"),
        stream_ops=None if emulated else stream_ops(device),
        host_copies=host_copies,
        begin_on_side=CUBLAS_BEGIN_ON_SIDE,
        priority_side=None if emulated else resources.side_stream(device, "ag_gemm.priority", high_priority=True),
        wait_beside=CUBLAS_WAIT_BESIDE,
        waiter=None if emulated else resources.side_stream(device, "ag_gemm.waiter", high_priority=True),
        chunks=num_chunks,
        part_rows=() if num_chunks == 1 else tuple(part_rows),
        own_part=None if num_chunks == 1 else own_part,
        peer_chunks=tuple(order),
        **double_parts,
    )


Plan = FusedPlan | CublasPlan | UnfusedPlan
_plans: PlanCache[Plan] = PlanCache("ag_gemm", AgGemmError, eager_out=lambda plan: (plan.rows, plan.n))


def plan_for(a: torch.Tensor, b: torch.Tensor, config: OverlapConfig | None = None, no_comm: bool = False) -> Plan:
    """The plan of this call's signature, built (and agreed with the peers) on its first call.

    Raises ``AgGemmError`` for bad operands, and for ``no_comm`` with the cuBLAS backend (a diagnosis of the fused
    kernel only)."""
    signature = operand_signature(a, b, config, no_comm)
    plan = _plans.get(signature) if signature is not None else None
    if plan is not None:
        return plan
    world = check_inputs(a, b)
    m_local, k = a.shape
    n = b.shape[1]
    w = world.world_size
    if config is None and world is emulated_world():
        config = EMULATED_CONFIG
    if config is None:
        config = choose_config(m_local, n, k, a.dtype, w, a.device, run=_run_with)
    if no_comm and config.backend == "cublas":
        raise AgGemmError("ag_gemm: _no_comm diagnoses the fused kernel; backend='cublas' has no such mode")
    described = {"a": list(a.shape), "b": list(b.shape), "dtype": str(a.dtype), "config": config.short()}

    def make() -> Plan:
        if config.backend == "nccl" or m_local == 0 or n == 0:
            return UnfusedPlan(*all_gather_method(world.group), w * m_local, n, k)
        with on_device(a.device):
            if config.backend == "cublas":
                return _build_cublas(world, a, b, config.cublas_chunks)
            return _build_fused(world, a, b, config, no_comm)

    return _plans.build(signature, described, make)


def _run_with(a: torch.Tensor, b: torch.Tensor, config: OverlapConfig) -> torch.Tensor:
    """One call with ``config`` (the autotuner's candidates)."""
    return ag_gemm_impl(a, b, config=config)[0]


def clear_workspaces() -> None:
    """Free every ag_gemm workspace (the cuBLAS path's double receive buffers too) and plan, with the plans' graphs
    (a collective: call on all ranks, outside CUDA-graph capture)."""
    rt.barrier()
    _plans.clear()  # first: the plans hold the buffers, which the collections below then free on every rank alike
    resources.drop_workspaces("ag_gemm")
    resources.drop_workspaces("ag_gemm.double")


def check_out_for(plan: Plan, a: torch.Tensor, b: torch.Tensor, out: Any) -> None:
    """Raise ``AgGemmError`` naming ``out`` unless ``plan``'s call with ``a`` and ``b`` can write C into it: C's
    shape [W * M_local, N], a's dtype and device, contiguous, 16-byte aligned, no memory shared with a or b."""
    check_out("ag_gemm", out, (plan.rows, plan.n), a.dtype, a.device, (("a", a), ("b", b)), AgGemmError)


def ag_gemm_impl(
    a: torch.Tensor,
    b: torch.Tensor,
    return_gathered: bool = False,
    config: OverlapConfig | None = None,
    _no_comm: bool = False,
    *,
    out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``ag_gemm`` without the custom-op wrapper; ``config`` overrides the tuned choice (benchmarks, tuning).

    ``out``: C is written into it and returned (as ``ag_gemm``'s ``out``; checked after the operands, before
    anything is launched: ``AgGemmError`` naming ``out``). ``_no_comm`` (diagnosis only, wrong results): the fused
    kernel runs with every flag already set and no producer, which separates the cost of the concurrent
    communication from that of the kernel's schedule.
    """
    plan = plan_for(a, b, config, _no_comm)
    if out is not None:
        check_out_for(plan, a, b, out)
    if isinstance(plan, UnfusedPlan):
        c, gathered = plan.run(a, b, keep_gathered=return_gathered, out=out)
        return c, (gathered if return_gathered else None)
    c = plan.run(a, b, out)
    if not return_gathered:
        return c, None
    return c, plan.gathered(a, rt.current_world().rank)


def path_of(a: torch.Tensor, b: torch.Tensor) -> str:
    """Which path a call with these operands runs: ``"fused"``, ``"cublas"`` (``"cublas/<c>"`` with c > 1 chunks
    per peer shard) or ``"nccl+cublas"`` (benchmarks' rows)."""
    return path_name(plan_for(a, b))


def path_name(plan: Plan) -> str:
    """The name ``path_of`` gives ``plan``'s path: ``"fused"``, ``"cublas"``, ``"cublas/<c>"`` (the cuBLAS path with
    c > 1 chunks per peer shard) or ``"nccl+cublas"``."""
    if isinstance(plan, UnfusedPlan):
        return "nccl+cublas"
    if isinstance(plan, CublasPlan):
        return "cublas" if plan.chunks == 1 else f"cublas/{plan.chunks}"
    return "fused"


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
    a: torch.Tensor, b: torch.Tensor, *, return_gathered: bool = False, out: torch.Tensor | None = None
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """C = all_gather(a) @ b across all ranks of the triton_dist world, overlapped.

    ``a``: this rank's rows [M_local, K]; ``b``: [K, N]; both bf16 or fp16, contiguous, on this rank's GPU, the
    same shapes and dtype on every rank (checked with the peers on the first call per shape). Returns C
    [W * M_local, N], and with ``return_gathered=True`` also all_gather(a) [W * M_local, K].

    ``out``: where C goes, as ``torch.mm``'s ``out``: the op writes C into it and returns ``out`` itself, allocating
    nothing for C (the eager call's host time then has no allocator call). It must be a tensor of exactly C's shape,
    a's dtype and device, contiguous, starting on a 16-byte boundary (as from ``torch.empty``), sharing no memory
    with ``a`` or ``b``; else ``AgGemmError`` names ``out`` and what is wrong, before anything is launched. Under
    ``torch.compile`` or a dispatch mode the registered op (which returns a new C) runs and C is then copied into
    ``out`` (one more copy; the alignment and overlap are not checked there, the copy needs neither).

    Every rank must call it the same number of times (it synchronizes with the peers on the GPU). The first call
    of a signature compiles and plans (run it once eagerly before capturing a CUDA graph); later eager calls skip
    torch's dispatcher and launch the plan, and from the second call with the same operand and output addresses
    replay a CUDA graph of the call that the op captures itself (one launch; never the NCCL fallback, whose
    collective every rank would have to replay alike; ``TRITON_DIST_EAGER_GRAPHS=0`` turns it off:
    ``ops.common.eager_graphs``). Under ``torch.compile`` it
    is ``torch.ops.triton_dist.ag_gemm``.
    Raises ``AgGemmError`` (an ``OpInputError``) naming the problem for bad input, ``HeapExhaustedError`` when the
    heap cannot hold the receive buffer. Under ``TRITON_INTERPRET=1`` on a world made with ``init(device="cpu")``
    (the CPU emulation, for tests without GPUs) the operands are CPU tensors and the fused pointer kernel runs in
    Triton's interpreter with ``EMULATED_CONFIG`` unless a configuration is given.
    """
    if not return_gathered:
        plan = _plans.eager_plan(a, b, out)
        if plan is not None:  # the common call, all checked in one frame: the plan's launches (or its graph)
            return _eager_call(plan, a, b, out)
    if plain_eager(a, b) and (out is None or type(out) is torch.Tensor or not isinstance(out, torch.Tensor)):
        if not return_gathered:  # a planned call eager_plan refused: another world, or out to be checked (and named)
            plan = _plans.get(operand_signature(a, b, None, False))
            if plan is not None:
                if out is not None:
                    check_out_for(plan, a, b, out)
                return _eager_call(plan, a, b, out)
        if out is None:
            c, gathered = ag_gemm_impl(a, b, return_gathered)
        else:
            c, gathered = ag_gemm_impl(a, b, return_gathered, out=out)
    else:
        if out is not None:  # the registered op is functional: check, then copy its C into out
            rows = rt.current_world().world_size * a.shape[0]
            check_out("ag_gemm", out, (rows, b.shape[1]), a.dtype, a.device, (), AgGemmError, addresses=False)
        c, gathered = torch.ops.triton_dist.ag_gemm(a, b, return_gathered)
        if out is not None:
            c = out.copy_(c)
    return (c, gathered) if return_gathered else c


def _eager_call(plan: Plan, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """An eager call of ``plan`` returning C in ``out`` (checked; else a new tensor), replayed from the plan's graph
    of these addresses once it has one (``ops.common.eager_graphs``)."""
    if isinstance(plan, UnfusedPlan) and not (eager_graphs.REPLAY_COLLECTIVES and replays_collective(a.device)):
        # Eager: a graph of NCCL's all-gather must be captured and replayed by every rank alike, which a rank's own
        # choice cannot promise (eager_graphs.REPLAY_COLLECTIVES). With it on, as gemm_rs's fallback: eager while
        # the GPU is still busy (the launches are hidden and start when the baseline's would), a replay from idle.
        # First, and with out as given: the plan launches its all-gather before it allocates a new C, as the
        # baseline does (issue 24's from-idle rows; the flag read first saves the call and a's device while off).
        return plan.run(a, b, out=out)[0]
    if out is None:
        out = torch.empty((plan.rows, plan.n), dtype=a.dtype, device=a.device)
    c = out
    if c.numel() == 0 or a.numel() == 0:  # nothing worth a graph
        phase: Hashable | None = None
    elif isinstance(plan, CublasPlan):
        phase = plan.graph_phase()
    else:
        phase = 0  # the fused plan, and the fallback where it may replay (above)
    addresses = (a.data_ptr(), b.data_ptr(), c.data_ptr())
    if isinstance(plan, UnfusedPlan):
        plan.graphs.launch(addresses, a.device, lambda: plan.run(a, b, out=c), phase)
    else:
        replayed = plan.replayed if isinstance(plan, CublasPlan) else None
        plan.graphs.launch(addresses, a.device, lambda: plan.run(a, b, c), phase, replayed)
    return c


def _calibration_probe(world: rt.World, partial: tuning.Calibration) -> dict[str, float]:
    """The fused path's and the cuBLAS path's times beyond their models at the calibration shape
    (``Calibration.ag_fused_extra_ms`` and ``ag_cublas_extra_ms``), and what each chunk per peer shard beyond one
    costs the cuBLAS path beyond its model (``ag_cublas_chunk_ms``: the path with the most chunks the model weighs
    against its prediction with the extra just measured, per added chunk and peer)."""
    from triton_dist.ops.tuning import calibration
    from triton_dist.ops.tuning.cost_model import (
        CUBLAS_CHUNK_CHOICES,
        ag_gemm_cublas_ms,
        ag_gemm_estimate,
        ag_gemm_fused_config,
    )

    m, n, k = calibration.CAL_AG
    w = world.world_size
    a = torch.randn(m // w, k, device=world.device, dtype=torch.bfloat16)
    b = torch.randn(k, n // w, device=world.device, dtype=torch.bfloat16)
    config = ag_gemm_fused_config(m, n, k, 2, w, partial)
    fused = calibration.timed(world, lambda: ag_gemm_impl(a, b, config=config))
    modelled = ag_gemm_estimate(m, n, k, 2, w, partial)["fused_ms"]
    measured = {"ag_fused_extra_ms": max(0.0, fused - modelled)}
    cublas_modelled = ag_gemm_cublas_ms(m, n, k, 2, w, dataclasses.replace(partial, ag_cublas_extra_ms=0.0))
    if cublas_modelled is not None:
        cublas_config = OverlapConfig(backend="cublas")
        cublas = calibration.timed(world, lambda: ag_gemm_impl(a, b, config=cublas_config))
        extra = measured["ag_cublas_extra_ms"] = max(0.0, cublas - cublas_modelled)
        chunks = max(CUBLAS_CHUNK_CHOICES)
        with_extra = dataclasses.replace(partial, ag_cublas_extra_ms=extra, ag_cublas_chunk_ms=0.0)
        chunked_modelled = ag_gemm_cublas_ms(m, n, k, 2, w, with_extra, chunks)
        assert chunked_modelled is not None, "priced: the extra is measured and there are peers"
        chunked_config = OverlapConfig(backend="cublas", cublas_chunks=chunks)
        chunked = calibration.timed(world, lambda: ag_gemm_impl(a, b, config=chunked_config))
        measured["ag_cublas_chunk_ms"] = max(0.0, chunked - chunked_modelled) / ((w - 1) * (chunks - 1))
    clear_workspaces()
    return measured


tuning.calibration_module.register_fused_probe("ag_gemm", _calibration_probe)
