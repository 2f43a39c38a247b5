"""``all_reduce(x)``: sum a tensor over every rank in one kernel launch, for the small messages of decoding.

```python
y = triton_dist.ops.all_reduce(x)              # x: any-shape bf16/fp16/fp32 CUDA tensor, on or off the heap
triton_dist.ops.all_reduce(x, out=x)           # in place
```

Two algorithms, both one launch, both without host synchronization (so they can be captured in CUDA graphs):

- **one-shot** (pull): each program copies its slice of ``x`` into its slot of a symmetric staging buffer, tells
  every rank (one flag per rank, ``dl.notify`` with the epoch), waits for every rank's flag (``dl.wait``), then
  loads the slice from every rank's staging buffer through ``dl.symm_at`` (16-byte vector loads) and sums in fp32.
  One flag round; each rank reads ``(W - 1) * bytes`` over NVLink. Best for small messages.
- **two-shot** (push reduce-scatter, then push all-gather): rank ``r`` owns chunk ``r``. Each program pushes the
  slice of chunk ``p`` straight from ``x`` into rank ``p``'s inbox (remote 16-byte stores), flags; the owner sums
  its inbox in fp32, writes the result to ``out`` and pushes it into every rank's gather buffer, flags again; each
  rank copies the gathered chunks into ``out``. Two flag rounds; each rank sends ``2 (W - 1) / W * bytes``. Best
  for large messages. Stores rather than loads cross NVLink because stores reach full bandwidth with far fewer
  programs (the reference measurements: ~325 GB/s from 16 CTAs, where loads need ~66).

Each flag round is one ``dl.notify`` to a tensor of every rank (one program barrier, the writes in parallel) when the
world size is a power of two, a loop of notifies otherwise. Calls after the first of a size launch the compiled
kernel through a cached ``LaunchPlan`` (``launch_plan.py``), skipping Triton's per-call argument binding.

Every rank sums the ranks' values in the same order (rank 0, 1, ...), and a two-shot chunk is reduced by one rank
only, so all ranks get bit-identical results.

Synchronization, per program slot (``comm_workspace.py``): a device-side epoch counter, flags that only take
epoch values, so nothing is ever reset and nothing waits on the host. The ordering arguments:

- one-shot: the staging buffer and the flags are double-buffered by epoch parity. A rank rewrites parity ``p`` at
  epoch ``e + 2`` only after its wait at ``e + 1`` returned, i.e. after every peer notified ``e + 1``, which each
  peer does after it finished reading epoch ``e``'s data (the notify's release covers those loads) and after its
  wait for ``e`` returned (so the ``eq`` test cannot miss a value).
- two-shot: single buffers suffice. A peer pushes into my inbox at ``e + 1`` only after its second wait at ``e``,
  i.e. after my second notify at ``e``, which follows my inbox reads of ``e``; it pushes into my gather buffer at
  ``e + 1`` only after its first wait at ``e + 1``, i.e. after my first notify at ``e + 1``, which follows my
  gather-buffer reads of ``e``. The same two facts order the flags.

The algorithm and launch shape come from a table of (message bytes -> algorithm, programs, warps) per GPU and world
size: a cache written by :func:`tune` (``$TRITON_DIST_CACHE_DIR`` or ``~/.cache/triton_dist``), else the committed
table measured on 2 x H200, else a size heuristic.

The op is ``torch.ops.triton_dist.all_reduce`` (and ``all_reduce_out``), so it works under ``torch.compile``.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import _get_current_dispatch_mode

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.ops import tuning
from triton_dist.ops.comm_workspace import slot_workspace
from triton_dist.ops.launch_plan import LaunchPlan, first_launch
from triton_dist.runtime.world.rank_agreement import check_ranks_call_alike

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SUPPORTED_OPS = ("sum",)
ALGORITHMS = ("one_shot", "two_shot")

SLOTS = {"one_shot": 256, "two_shot": 128}
"""Program slots per workspace, per algorithm: the most programs one launch uses (one-shot: two per SM, so one
program's loads overlap another's flag wait)."""
ONE_SHOT_REGION_BYTES = 64 << 10
"""Per slot: two staging halves (epoch parity) of 32 KiB; a program moves up to 32 KiB per flag round."""
TWO_SHOT_REGION_BYTES = 256 << 10
"""Per slot: an inbox and a gather buffer of W slices each; up to 128 KiB of input per program per flag round."""
CHUNK_ALIGN = 16
"""Two-shot chunks start at multiples of 16 elements, so every chunk's slices stay 16-byte aligned."""


@dataclass(frozen=True)
class AllReduceConfig:
    """How one all-reduce runs: ``algo`` ("one_shot" / "two_shot"), at most ``programs`` programs (each moving
    up to its slot's capacity per flag round, in as many rounds as needed), ``num_warps`` warps each."""

    algo: str
    programs: int
    num_warps: int = 4

    def __post_init__(self) -> None:
        if self.algo not in ALGORITHMS:
            raise ValueError(f"all_reduce: algo must be one of {list(ALGORITHMS)}, got {self.algo!r}")
        if not 1 <= self.programs <= SLOTS[self.algo]:
            most = SLOTS[self.algo]
            raise ValueError(f"all_reduce: {self.algo} programs must be in [1, {most}], got {self.programs}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"all_reduce: num_warps must be a power of two <= 16, got {self.num_warps}")


# ---------------------------------------------------------------------------------------------------------------
# Kernels


@triton.jit
def _notify_every_rank(flag_ptr, epoch, ranks, WORLD: tl.constexpr):
    """Set ``flag_ptr`` to ``epoch`` on every rank (release). ``WORLD`` = the world size when it is a power of two:
    one ``dl.notify`` to a tensor of ranks (one barrier, the ranks' writes in parallel); else 0: one per rank."""
    if WORLD > 0:
        dl.notify(flag_ptr, tl.arange(0, WORLD), signal=epoch, sig_op="set", comm_scope="intra_node")
    else:
        for peer in range(0, ranks):
            dl.notify(flag_ptr, peer, signal=epoch, sig_op="set", comm_scope="intra_node")


@triton.jit
def _one_shot_kernel(
    x_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    epochs_ptr,
    n,
    flags_stride,
    REGION: tl.constexpr,
    ROUND: tl.constexpr,
    BLOCK: tl.constexpr,
    STAGE: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    slot_data = data_ptr + slot * REGION
    slot_flags = flags_ptr + slot * flags_stride
    for t in range(slot, tl.cdiv(n, ROUND), tl.num_programs(0)):
        epoch += 1
        parity = epoch % 2
        base = t * ROUND
        if STAGE:
            staged = slot_data + parity * ROUND
            for s in range(0, ROUND, BLOCK):
                offs = s + tl.arange(0, BLOCK)
                mask = base + offs < n
                tl.store(staged + offs, tl.load(x_ptr + base + offs, mask=mask), mask=mask)
        else:  # x is on the heap and stays unchanged (benchmarks of the staging cost only)
            staged = x_ptr + base
        flags = slot_flags + parity * ranks
        _notify_every_rank(flags + me, epoch, ranks, WORLD)
        token = dl.wait(flags, ranks, "sys", "acquire", waitValue=epoch)
        staged = dl.consume_token(staged, token)
        for s in range(0, ROUND, BLOCK):
            offs = s + tl.arange(0, BLOCK)
            mask = base + offs < n
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for peer in range(0, ranks):
                acc += tl.load(dl.symm_at(staged + offs, peer), mask=mask).to(tl.float32)
            tl.store(out_ptr + base + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _two_shot_kernel(
    x_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    epochs_ptr,
    n,
    chunk,
    flags_stride,
    REGION: tl.constexpr,
    ROUND: tl.constexpr,
    BLOCK: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    inbox = data_ptr + slot * REGION  # [ranks][ROUND]: slice of chunk `me` from each rank
    gathered = inbox + ranks * ROUND  # [ranks][ROUND]: reduced slice of chunk `owner` from each owner
    scatter_flags = flags_ptr + slot * flags_stride
    gather_flags = scatter_flags + ranks
    for t in range(slot, tl.cdiv(chunk, ROUND), tl.num_programs(0)):
        epoch += 1
        base = t * ROUND
        # Reduce-scatter: push slice t of chunk `peer` into rank peer's inbox, row `me`.
        for peer in range(0, ranks):
            remote = dl.symm_at(inbox + me * ROUND, peer)
            for s in range(0, ROUND, BLOCK):
                offs = s + tl.arange(0, BLOCK)
                mask = (base + offs < chunk) & (peer * chunk + base + offs < n)
                tl.store(remote + offs, tl.load(x_ptr + peer * chunk + base + offs, mask=mask), mask=mask)
        _notify_every_rank(scatter_flags + me, epoch, ranks, WORLD)
        token = dl.wait(scatter_flags, ranks, "sys", "acquire", waitValue=epoch)
        arrived = dl.consume_token(inbox, token)
        # Reduce my chunk's slice; store it here and push it into every peer's gather buffer, row `me`.
        for s in range(0, ROUND, BLOCK):
            offs = s + tl.arange(0, BLOCK)
            mask = (base + offs < chunk) & (me * chunk + base + offs < n)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for peer in range(0, ranks):
                acc += tl.load(arrived + peer * ROUND + offs, mask=mask).to(tl.float32)
            reduced = acc.to(out_ptr.dtype.element_ty)
            tl.store(out_ptr + me * chunk + base + offs, reduced, mask=mask)
            for peer in range(0, ranks):
                if peer != me:
                    tl.store(dl.symm_at(gathered + me * ROUND + offs, peer), reduced, mask=mask)
        _notify_every_rank(gather_flags + me, epoch, ranks, WORLD)
        token = dl.wait(gather_flags, ranks, "sys", "acquire", waitValue=epoch)
        landed = dl.consume_token(gathered, token)
        # All-gather: copy every other owner's reduced slice into out.
        for owner in range(0, ranks):
            if owner != me:
                for s in range(0, ROUND, BLOCK):
                    offs = s + tl.arange(0, BLOCK)
                    mask = (base + offs < chunk) & (owner * chunk + base + offs < n)
                    values = tl.load(landed + owner * ROUND + offs, mask=mask)
                    tl.store(out_ptr + owner * chunk + base + offs, values, mask=mask)
    tl.store(epochs_ptr + slot, epoch)


# ---------------------------------------------------------------------------------------------------------------
# Launch shapes


@dataclass(frozen=True)
class LaunchShape:
    """What a config means for one message: elements per program per flag round, block, grid, workspace."""

    round: int
    block: int
    programs: int
    region_elems: int
    chunk: int


def _pow2_floor(value: int) -> int:
    return 1 << (max(1, value).bit_length() - 1)


def launch_shape(numel: int, itemsize: int, world_size: int, config: AllReduceConfig) -> LaunchShape:
    """The grid and per-program sizes ``config`` gives a message of ``numel`` elements of ``itemsize`` bytes."""
    if config.algo == "one_shot":
        region_bytes = ONE_SHOT_REGION_BYTES
        capacity = region_bytes // (2 * itemsize)
        chunk = numel
        length = numel
    else:
        region_bytes = TWO_SHOT_REGION_BYTES
        capacity = _pow2_floor(region_bytes // (2 * world_size * itemsize))
        chunk = triton.cdiv(triton.cdiv(numel, world_size), CHUNK_ALIGN) * CHUNK_ALIGN
        length = chunk
    block = min(config.num_warps * 32 * (32 // itemsize), capacity)  # two 16-byte vectors per thread
    round_ = min(max(triton.next_power_of_2(triton.cdiv(length, config.programs)), block), capacity)
    programs = max(1, min(triton.cdiv(length, round_), config.programs))  # the rest in more flag rounds
    return LaunchShape(round_, block, programs, region_bytes // itemsize, chunk)


def notify_world(world_size: int) -> int:
    """The kernels' ``WORLD``: the world size if it is a power of two (one tensor-of-ranks notify), else 0."""
    return world_size if world_size & (world_size - 1) == 0 else 0


_plans: dict[tuple, LaunchPlan] = {}


def _launch(x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig, stage: bool = True) -> None:
    """Enqueue the kernel on the current stream (x, out: contiguous, same dtype and size; no checks)."""
    key = (x.numel(), x.dtype, x.device, x.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0, config, stage)
    plan = _plans.get(key)
    world = rt.current_world()
    if plan is not None and plan.world is world:
        plan.launch(x.device, x, out)
        return
    world_size = world.world_size
    shape = launch_shape(x.numel(), x.element_size(), world_size, config)
    one_shot = config.algo == "one_shot"
    region_bytes = ONE_SHOT_REGION_BYTES if one_shot else TWO_SHOT_REGION_BYTES
    ws = slot_workspace(f"all_reduce.{config.algo}", SLOTS[config.algo], 2 * world_size, region_bytes)
    kernel = _one_shot_kernel if one_shot else _two_shot_kernel
    named = {
        "x_ptr": x,
        "out_ptr": out,
        "data_ptr": ws.data_as(x.dtype),
        "flags_ptr": ws.flags,
        "epochs_ptr": ws.epochs,
        "n": x.numel(),
        "chunk": shape.chunk,
        "flags_stride": ws.flags.shape[1],
        "REGION": shape.region_elems,
        "ROUND": shape.round,
        "BLOCK": shape.block,
        "STAGE": stage,
        "WORLD": notify_world(world_size),
    }
    _plans[key] = first_launch(kernel, (shape.programs, 1, 1), named, 2, num_warps=config.num_warps)


# ---------------------------------------------------------------------------------------------------------------
# Choosing a config: tuned cache -> committed table -> heuristic

Table = list[tuple[int, AllReduceConfig]]
"""(largest message in bytes, config) rows, ascending; the first row whose bound covers the message applies."""

_C = AllReduceConfig
DEFAULT_TABLES: dict[tuple[str, int], Table] = {
    # 2 x H200 (NV18), bench/all_reduce.py --tune, graphed, bf16 (bench/results/all_reduce.md has the run).
    ("NVIDIA H200", 2): [
        (8 << 10, _C("one_shot", 2, 4)),
        (16 << 10, _C("one_shot", 4, 4)),
        (32 << 10, _C("one_shot", 8, 4)),
        (64 << 10, _C("one_shot", 16, 4)),
        (128 << 10, _C("one_shot", 32, 4)),
        (256 << 10, _C("one_shot", 64, 4)),
        (512 << 10, _C("one_shot", 128, 4)),
        (1 << 20, _C("one_shot", 128, 8)),
        (2 << 20, _C("one_shot", 128, 8)),
        (4 << 20, _C("one_shot", 128, 8)),
        (64 << 20, _C("two_shot", 128, 8)),
    ],
}
"""Committed tables measured by ``bench/all_reduce.py --tune``, keyed by (GPU name, world size)."""


def heuristic_config(nbytes: int, world_size: int) -> AllReduceConfig:
    """A reasonable config without measurements: one-shot up to 256 KiB (less for many ranks), else two-shot."""
    if nbytes <= (512 << 10) // max(1, world_size):
        return AllReduceConfig("one_shot", max(1, min(32, nbytes // (8 << 10))), 4)
    return AllReduceConfig("two_shot", max(8, min(SLOTS["two_shot"], nbytes // (64 << 10))), 8)


def _cache_path() -> Path:
    return tuning.cache_dir() / "all_reduce_tuning.json"


def _table_key(device: torch.device, world_size: int) -> tuple[str, int]:
    return (torch.cuda.get_device_name(device), world_size)


_tables: dict[tuple[str, int], Table] = {}


def _load_cached_tables() -> None:
    path = _cache_path()
    if not path.is_file():
        return
    try:
        raw = json.loads(path.read_text())
        for key, rows in raw.items():
            name, size = key.rsplit("|", 1)
            _tables[(name, int(size))] = [(int(b), AllReduceConfig(**c)) for b, c in rows]
    except (ValueError, TypeError, KeyError) as error:
        raise RuntimeError(f"all_reduce: the tuning cache {path} is unreadable ({error}); delete it") from error


_cache_loaded = False
_selected: dict[tuple[int, torch.device, int], AllReduceConfig] = {}


def select_config(nbytes: int, device: torch.device, world_size: int) -> AllReduceConfig:
    """The config for a message of ``nbytes``: tuned cache, else the committed table, else the heuristic."""
    memo = (nbytes, device, world_size)
    found = _selected.get(memo)
    if found is None:
        found = _selected[memo] = _select_config(nbytes, device, world_size)
    return found


def _select_config(nbytes: int, device: torch.device, world_size: int) -> AllReduceConfig:
    global _cache_loaded
    if not _cache_loaded:
        _load_cached_tables()
        _cache_loaded = True
    key = _table_key(device, world_size)
    table = _tables.get(key) or DEFAULT_TABLES.get(key)
    if table:
        for bound, config in table:
            if nbytes <= bound:
                return config
        return table[-1][1]
    return heuristic_config(nbytes, world_size)


# ---------------------------------------------------------------------------------------------------------------
# Checks, the custom op, the public function


def check_inputs(x: torch.Tensor, op: str, out: torch.Tensor | None = None) -> None:
    """Raise a TypeError/ValueError naming the problem (shapes and dtypes only; fake tensors pass through)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"all_reduce: x must be a torch.Tensor, got {type(x).__name__}")
    if op not in SUPPORTED_OPS:
        raise ValueError(f"all_reduce: op must be one of {list(SUPPORTED_OPS)}, got {op!r}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"all_reduce: x must be bfloat16, float16 or float32, got {x.dtype}")
    if not x.is_contiguous():
        raise ValueError(f"all_reduce: x must be contiguous, got shape {list(x.shape)} with strides {x.stride()}")
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"all_reduce: out must be a torch.Tensor, got {type(out).__name__}")
        if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device or not out.is_contiguous():
            raise ValueError(
                f"all_reduce: out must be a contiguous {x.dtype} tensor of shape {list(x.shape)} on {x.device}, "
                f"got {out.dtype} {list(out.shape)} on {out.device} (contiguous={out.is_contiguous()})"
            )


_agreed: set[tuple[int, torch.dtype, AllReduceConfig]] = set()


def _check_device_and_agreement(x: torch.Tensor, config: AllReduceConfig) -> None:
    """x is on this rank's heap device; the first call of each (size, dtype) checks all ranks agree (collective).

    A rank that launched with another size would read past its peers' data or wait forever for flags; the check
    makes that a RuntimeError on every rank instead. Later calls of the same signature cost a set lookup.
    """
    world = rt.current_world()
    if x.device != world.device:
        raise ValueError(f"all_reduce: x is on {x.device}, but this rank's symmetric heap is on {world.device}")
    signature = (x.numel(), x.dtype, config)
    if signature in _agreed:
        return
    check_ranks_call_alike(
        world.group,
        world.rank,
        (x.numel(), str(x.dtype), asdict(config)),
        op="all_reduce",
        fields="(numel, dtype, config)",
        disagreement="ranks disagree on the message",
        capture_message=f"all_reduce: first call with {x.numel()} x {x.dtype} during CUDA-graph capture; the ranks' "
        "agreement on the size is checked (a collective) on the first call of each size: call it once before capturing",
    )
    _agreed.add(signature)


def _run(x: torch.Tensor, out: torch.Tensor, op: str, config: AllReduceConfig | None = None) -> None:
    check_inputs(x, op, out)
    world = rt.current_world()
    if x.device != world.device:  # before anything asks the device for its properties
        raise ValueError(f"all_reduce: x is on {x.device}, but this rank's symmetric heap is on {world.device}")
    if config is None:
        config = select_config(x.numel() * x.element_size(), x.device, world.world_size)
    _check_device_and_agreement(x, config)
    if x.numel() == 0:
        return
    if x.device.index == torch.cuda.current_device():
        _launch(x, out, config)
    else:
        with torch.cuda.device(x.device):
            _launch(x, out, config)


@torch.library.custom_op("triton_dist::all_reduce", mutates_args=())
def _all_reduce_op(x: torch.Tensor, op: str) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _run(x, out, op)
    return out


@_all_reduce_op.register_fake
def _all_reduce_fake(x: torch.Tensor, op: str) -> torch.Tensor:
    check_inputs(x, op)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("triton_dist::all_reduce_out", mutates_args=("out",))
def _all_reduce_out_op(x: torch.Tensor, out: torch.Tensor, op: str) -> None:
    _run(x, out, op)


@_all_reduce_out_op.register_fake
def _all_reduce_out_fake(x: torch.Tensor, out: torch.Tensor, op: str) -> None:
    check_inputs(x, op, out)


def plain_eager(x: torch.Tensor) -> bool:
    """Whether a call with ``x`` may skip the dispatcher: a plain tensor, no compiler tracing, no dispatch mode
    (fake tensors, make_fx, functionalization and torch.compile all need the registered op)."""
    return type(x) is torch.Tensor and not torch.compiler.is_compiling() and _get_current_dispatch_mode() is None


def all_reduce(x: torch.Tensor, op: str = "sum", *, out: torch.Tensor | None = None) -> torch.Tensor:
    """The sum of ``x`` over every rank of the triton_dist world, on every rank (``torch.ops.triton_dist``).

    ``x``: a contiguous bf16 / fp16 / fp32 tensor on this rank's GPU, anywhere in memory (on the symmetric heap
    or not: the kernel stages what it needs). Every rank must call it with the same shape and dtype, in the
    same order (checked collectively the first time a size is seen). Sums in fp32; the result, in ``x``'s dtype,
    is bit-identical on all ranks. ``out`` (same shape and dtype, contiguous; may be ``x``) receives it.

    Needs ``triton_dist.init()``. Enqueued on the current stream without host synchronization; CUDA-graph capture
    works once the size has been called eagerly (the first call allocates the workspace and checks the ranks
    agree). Under ``torch.compile`` this is the custom op; eager calls run its implementation directly (the same
    function), skipping the dispatcher's few tens of µs, which would dominate a decode-size all-reduce.
    """
    if not plain_eager(x):
        if out is None:
            return torch.ops.triton_dist.all_reduce(x, op)
        torch.ops.triton_dist.all_reduce_out(x, out, op)
        return out
    if out is None:
        check_inputs(x, op)
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _run(x, out, op)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Tuning


def graphed_us(fn: object, calls: int = 10, replays: int = 20, warmup: int = 3) -> float:
    """Median microseconds per call of ``fn`` under CUDA-graph replay (``calls`` per graph), max over ranks."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()  # type: ignore[operator]
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # NCCL's watchdog may query events meanwhile
        for _ in range(calls):
            fn()  # type: ignore[operator]
    for _ in range(warmup):
        graph.replay()
    rt.barrier()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    rt.barrier()
    median = statistics.median(start.elapsed_time(end) * 1000.0 / calls for start, end in events)
    worst = torch.tensor([median], dtype=torch.float64, device="cuda")
    torch.distributed.all_reduce(worst, op=torch.distributed.ReduceOp.MAX, group=rt.current_world().group)
    return float(worst.item())


def candidate_configs(nbytes: int, itemsize: int, world_size: int) -> list[AllReduceConfig]:
    """The configs :func:`tune` tries for one message size (distinct launch shapes only)."""
    numel = nbytes // itemsize
    found: dict[tuple[str, LaunchShape, int], AllReduceConfig] = {}
    for algo in ALGORITHMS:
        if algo == "one_shot" and nbytes > (8 << 20):
            continue  # many flag rounds per program; two-shot wins by far
        for num_warps in (4, 8):
            for programs in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                if programs > SLOTS[algo]:
                    continue
                config = AllReduceConfig(algo, programs, num_warps)
                shape = launch_shape(numel, itemsize, world_size, config)
                found.setdefault((algo, shape, num_warps), config)
    return list(found.values())


def tune(
    sizes: list[int], dtype: torch.dtype = torch.bfloat16, *, write_cache: bool = True
) -> list[tuple[int, AllReduceConfig, float]]:
    """Measure every candidate config per message size (graphed, max over ranks) and keep the fastest.

    A collective: call it on every rank with the same arguments. Returns (bytes, best config, µs) rows, makes
    them this process's table and (rank 0, ``write_cache``) stores them in the tuning cache for this GPU and
    world size.
    """
    world = rt.current_world()
    itemsize = torch.empty((), dtype=dtype).element_size()
    rows: list[tuple[int, AllReduceConfig, float]] = []
    for nbytes in sorted(sizes):
        x = torch.randn(nbytes // itemsize, device=world.device).to(dtype)
        out = torch.empty_like(x)
        best: tuple[float, AllReduceConfig] | None = None
        for config in candidate_configs(nbytes, itemsize, world.world_size):
            _check_device_and_agreement(x, config)
            us = graphed_us(lambda x=x, out=out, config=config: _launch(x, out, config))
            if best is None or us < best[0]:
                best = (us, config)
        assert best is not None
        rows.append((nbytes, best[1], best[0]))
    key = _table_key(world.device, world.world_size)
    _tables[key] = [(nbytes, config) for nbytes, config, _ in rows]
    _selected.clear()
    if write_cache and world.rank == 0:
        path = _cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = json.loads(path.read_text()) if path.is_file() else {}
        existing[f"{key[0]}|{key[1]}"] = [[nbytes, asdict(config)] for nbytes, config in _tables[key]]
        path.write_text(json.dumps(existing, indent=1))
    return rows
