"""What the NVSHMEM heap costs within a node: ping-pong, push all-gather and all_reduce on both heaps, one run.

    python3 bench/heap_backends.py [--nproc 2] [--trials 3] [--out bench/results/heap_backends.md]
    python3 bench/heap_backends.py --only all_reduce --ar-sizes 64 1024 --probe --trials 5 --replays 50 \\
        --variants cuda_ipc nvshmem nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1     # issue 29's 64 KiB probe
    python3 bench/heap_backends.py --only replay --trials 1 --replays 40 --variants cuda_ipc nvshmem
                                                          # issue 29: where the 64 KiB op's extra per replay goes
    python3 bench/heap_backends.py --only all_reduce replay --ar-sizes 64 --trials 2 --replays 40 \\
        --ar-timers graphed mirror no_sync own_stream current_warmup device_start fresh_tensors probe late \\
        --variants cuda_ipc nvshmem cuda_ipc:HEAP_BACKENDS_AR_TIMERS_FIRST=1
                                                          # issue 29: the bar's timer against the probe's

torch symmetric memory allows one backend per process (no switch after an allocation), so each measurement is its
own ``torchrun --nproc-per-node=N`` of this script in ``--worker`` mode, with ``triton_dist.init(backend=...)`` on
``cuda_ipc`` or ``nvshmem``. A ``--variants`` entry is a backend, optionally with environment variables for its
workers (``nvshmem:NVSHMEM_DISABLE_LOCAL_ONLY_PROXY=1,NVSHMEM_CUMEM_GRANULARITY=2097152``); the first variant is
the baseline. The driver rotates the variants (``--trials`` times each, the first variant of a trial rotating too)
and reports per metric the median over trials, each variant's overhead against the baseline, and each variant's
spread over its trials. Issue 29's bar: at most 3% on every metric, for every variant against the baseline.
Two worker variables of this script's own change the heap's setup in the worker only: ``HEAP_BACKENDS_BASE_ALIGN``
(below) and ``HEAP_BACKENDS_CTX_SYNC_MEMOPS=0|1``, which clears or sets the CUDA context's ``CU_CTX_SYNC_MEMOPS``
(NVSHMEM's init sets it) right after ``init()``, before any metric (``bench/_replay_probe.py``).

Each worker measures, on its heap (``--only`` picks the groups):

- ``ping_pong_us``: one flag round trip between ranks 0 and 1 (``examples/ping_pong.py``'s kernel, ``--rounds``
  round trips per launch, median of 20 launches);
- ``allgather_push_<S>MiB_us``: ``examples/allgather_push.py`` at output size S (median of ``--iters`` runs);
- ``all_reduce_<S>KiB_us``: ``triton_dist.ops.all_reduce`` of S KiB of bf16 (``--ar-sizes``), per call under
  CUDA-graph replay (``--replays`` timed replays of 10 calls, the GPU kept behind the host: ``graphed_us(lead=True)``;
  without it a slow host's graph launches counted, 2.3 µs more per replay on the NVSHMEM heap's context), after one
  such timing of the same call, discarded: a worker's first timing of the op read 4.31-4.38 µs at 64 KiB on the
  CUDA-IPC heap whichever timer took it, every later one 4.47-4.66 on either heap (2 x H200, 2026-11-27,
  docs/results/2026-11-27-session26.md), so the bar compared the CUDA-IPC heap's first timing with the NVSHMEM
  heap's steady one;

- ``all_reduce_<S>KiB_by_<timer>_us`` (``--ar-timers``, never by default): the same call timed again by another
  timer, each differing from the bar's in one respect (``AR_TIMERS``; below);

- ``replay_*`` and ``split_*`` (``--only replay``, never by default): issue 29's replay probe, where the 64 KiB
  all_reduce's extra ~2 µs per graph replay on the NVSHMEM heap goes (``bench/_replay_probe.py``'s docstring: the
  cases, the conditions, how to read them);

all the max over ranks. Before timing, the all-gather and the all-reduce are checked against NCCL on fresh random
data with poisoned outputs; a mismatch fails the worker. A failing baseline worker ends the run; another variant's
is reported as FAILED (exit code 1) and that variant is not tried again, the others' results still reported.

``--probe`` (issue 29: why the 64 KiB all-reduce, the LL one-shot, costs more on the NVSHMEM heap) adds, per
all-reduce size, what tells the candidate causes apart (docs/results/2026-11-27-session24-heap64.md):

- facts, from rank 0 of each variant's first trial: the config the size selects, the sha256 of the LL kernel's
  cubin, every rank's heap base and the op's LL workspace modulo 2 MiB (the GPU's large page), and what the driver
  says of the heap's mapping (``cuPointerGetAttribute``: the mapping's base and size, GPUDirect RDMA capable, sync
  memops);
- ``all_reduce_<S>KiB_<algo>_us``: the same message with the one-shot and the one-shot push forced (32 programs of
  4 warps): an overhead of the LL one-shot alone points at its protocol, one of every algorithm at the heap;
- ``all_reduce_<S>KiB_graph<C>_us``: the op with 10x the calls per CUDA graph: a cost that shrinks with more calls
  per graph is the host's (graph launches not keeping ahead of the GPU), not the kernel's;
- ``ll_<S>KiB_phase<P>_us``: the LL kernel, launched by this script with the selected LL config, on a fresh
  symmetric workspace placed at ``P`` bytes past a 2 MiB boundary (0, 4 KiB, 1 MiB and the op's own workspace's
  phase): if the cost follows the phase rather than the heap, the NVSHMEM heap's base (512-byte aligned by
  ``nvshmem_malloc``, 4 KiB by triton_dist, where the CUDA-IPC heap starts on a 2 MiB boundary) is the cause; the
  variant ``nvshmem:HEAP_BACKENDS_BASE_ALIGN=2097152`` then tries the fix on the op (``BASE_ALIGN_ENV``).

``--ar-timers`` (issue 29: in one run the bar's 64 KiB op read +3.4% on NVSHMEM where the replay probe's timing of
the same op and call read -0.3%; the NVSHMEM bar agreed with the probe, the CUDA-IPC bar was 3.4% below its probe
row): per all-reduce size, the op timed by each named timer of ``AR_TIMERS``, right after the bar metric (right
before it in a worker with ``HEAP_BACKENDS_AR_TIMERS_FIRST=1``; ``late``: after every group of the worker).
``graphed`` is the bar's timer again (only its place differs); ``mirror`` is this script's copy of its steps
(``timed_replays``), which ``no_sync``, ``own_stream``, ``current_warmup`` and ``device_start`` change one at a time;
``fresh_tensors`` and ``probe`` do what the replay group does differently. Each rank's min / median / max over the
replays, and the nodes of the graph ``torch.cuda.graph`` captures, are facts. How to read a run:

- ``graphed``, ``mirror`` and ``probe`` on the bar's value on both heaps, the replay group's ``op10`` row (and
  ``late``) off it: the place in the worker (what ran before), not the timer;
- ``graphed`` off the bar on one heap: the worker's first timing is not its steady one there; with
  ``HEAP_BACKENDS_AR_TIMERS_FIRST=1`` the odd value should move to whichever timer runs first;
- ``graphed`` on the bar, ``probe`` off it: the timer; the one-respect timer off ``mirror`` names the step
  (``no_sync``: torch.cuda.graph's synchronize and cache emptying; ``own_stream``: its capture stream;
  ``current_warmup``: the warm-up's side stream; ``device_start``: the ranks' start offset on the GPU;
  ``fresh_tensors``: where the op's input and output lie), none of them: the probe's extra lead-check event;
- ``mirror`` off ``graphed``: the copy is not faithful; read the one-respect timers against ``mirror`` only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BACKENDS = ("cuda_ipc", "nvshmem")
BAR = 0.03
"""Issue 29: the NVSHMEM heap may cost at most 3% more than the CUDA-IPC heap per op, within a node."""
GROUPS = ("ping_pong", "allgather_push", "all_reduce", "replay")
DEFAULT_GROUPS = GROUPS[:3]
"""What a run measures unless ``--only`` says otherwise: issue 29's bar (the replay probe is a diagnosis, not a
metric of the bar)."""
REPLAY_SIZE_KIB = 64
"""The all_reduce size the replay probe times (issue 29's one metric over the bar)."""
AG_SIZES_MIB = (1, 64)
AR_SIZES_KIB = (64, 1024, 16384)
LARGE_PAGE = 2 << 20
"""The GPU's large page (cuMemCreate's recommended granularity on Hopper): what the probe's placement is relative to."""
PROBE_PHASES = (0, 4 << 10, 1 << 20)
"""Where the probe puts its LL workspaces, in bytes past a 2 MiB boundary (the op's own phase is added)."""
BASE_ALIGN_ENV = "HEAP_BACKENDS_BASE_ALIGN"
"""A worker environment variable (bytes, a power of two >= 4096): start the heap on such a boundary instead of the
runtime's 4 KiB (``runtime/heap/symm_mem.py``'s ``HEAP_BASE_ALIGNMENT``, patched in the worker only), e.g. the
variant ``nvshmem:HEAP_BACKENDS_BASE_ALIGN=2097152``: the candidate fix of the 64 KiB probe, tried on the op itself
without changing the runtime."""
PROBE_GRAPH_CALLS_FACTOR = 10
"""The probe also times the op with this many times ``--graph-calls`` calls per CUDA graph."""
POINTER_ATTRIBUTES = ("MAPPING_BASE_ADDR", "MAPPING_SIZE", "IS_GPU_DIRECT_RDMA_CAPABLE", "SYNC_MEMOPS")
AR_TIMERS = {
    "graphed": "graphed_us(lead=True) itself, as for the bar metric, timed again: only its place in the worker differs",
    "mirror": "this script's copy of graphed_us(lead=True)'s steps, none changed (timed_replays)",
    "no_sync": "the copy, capturing without torch.cuda.graph's synchronize and cache emptying (on its stream)",
    "own_stream": "the copy, capturing on a stream of its own ordered after the current one (as the probe does)",
    "current_warmup": "the copy, with the warm-up calls on the current stream instead of a new side stream",
    "device_start": "the copy, the ranks started together on the GPU (a device barrier after the lead spin)",
    "fresh_tensors": "graphed_us(lead=True) on a new input and output (copies), as the replay group allocates its own",
    "probe": "the replay probe's timer (bench/_replay_probe.py's replay_us), per call",
    "late": "graphed_us(lead=True) on the bar's call after every group of the worker (the replay group included)",
}
"""``--ar-timers``: what each timer of the all-reduce does, against the bar's ``graphed_us(lead=True)``."""
MIRROR_TIMERS = ("mirror", "no_sync", "own_stream", "current_warmup", "device_start")
"""The timers that run :func:`timed_replays` (the others run ``graphed_us`` or the probe's ``replay_us``)."""
AR_TIMERS_FIRST_ENV = "HEAP_BACKENDS_AR_TIMERS_FIRST"
"""A worker environment variable, ``0`` or ``1``: with ``1`` the ``--ar-timers`` run before the bar metric instead of
after it (``late`` still last), e.g. the variant ``cuda_ipc:HEAP_BACKENDS_AR_TIMERS_FIRST=1``: whether a timing reads
differently for being the worker's first."""


@dataclass(frozen=True)
class Variant:
    """One column of the comparison: a heap backend and the environment variables its workers get."""

    backend: str
    env: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """How the tables name it: the backend, then ``:NAME=VALUE,...`` as given."""
        if not self.env:
            return self.backend
        return self.backend + ":" + ",".join(f"{name}={value}" for name, value in self.env)


def parse_variant(text: str) -> Variant:
    """``BACKEND`` or ``BACKEND:NAME=VALUE[,NAME=VALUE...]`` as a :class:`Variant`.

    Raises ``argparse.ArgumentTypeError`` naming the problem: an unknown backend, an entry without ``=``, or an
    environment variable name that is not an identifier (or is ``TRITON_DIST_BACKEND``, which the backend sets).
    """
    backend, _, rest = text.partition(":")
    if backend not in BACKENDS:
        raise argparse.ArgumentTypeError(
            f"variant {text!r}: the backend must be one of {list(BACKENDS)}, got {backend!r}"
        )
    env = []
    for entry in rest.split(",") if rest else []:
        name, equals, value = entry.partition("=")
        if not equals or not name.isidentifier():
            raise argparse.ArgumentTypeError(f"variant {text!r}: {entry!r} is not NAME=VALUE")
        if name == "TRITON_DIST_BACKEND":
            raise argparse.ArgumentTypeError(f"variant {text!r}: the backend sets TRITON_DIST_BACKEND; name it first")
        env.append((name, value))
    return Variant(backend, tuple(env))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``argv``: ``sys.argv[1:]`` when None). Exits with a usage error on bad options, such as
    two variants with the same label or ``--iters`` below 20."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2, help="ranks (GPUs) per measurement")
    parser.add_argument("--trials", type=int, default=3, help="measurements per variant (median reported)")
    parser.add_argument("--rounds", type=int, default=10_000, help="ping-pong round trips per launch")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per all-gather size (>= 20)")
    parser.add_argument("--replays", type=int, default=20, help="timed CUDA-graph replays per all-reduce (>= 20)")
    parser.add_argument(
        "--graph-calls", type=int, default=10, help="all-reduce calls per CUDA graph (more: less launch cost per call)"
    )
    parser.add_argument("--heap-size", default="512M", help="each rank's symmetric heap")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=GROUPS,
        default=list(DEFAULT_GROUPS),
        help=f"the metric groups to run (default: {' '.join(DEFAULT_GROUPS)})",
    )
    parser.add_argument(
        "--ar-sizes", nargs="+", type=int, default=list(AR_SIZES_KIB), metavar="KIB", help="all-reduce sizes, KiB"
    )
    parser.add_argument("--probe", action="store_true", help="the 64 KiB probe's facts and A/B timings (docstring)")
    parser.add_argument(
        "--ar-timers",
        nargs="+",
        choices=list(AR_TIMERS),
        default=[],
        metavar="TIMER",
        help=f"time each all-reduce again by these timers, in this order ({', '.join(AR_TIMERS)}; docstring)",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        type=parse_variant,
        default=[Variant(backend) for backend in BACKENDS],
        metavar="BACKEND[:NAME=VALUE,...]",
        help="the heaps compared, the first the baseline (default: cuda_ipc nvshmem)",
    )
    parser.add_argument(
        "--out", default=None, help="write the markdown table here (e.g. bench/results/heap_backends.md)"
    )
    parser.add_argument("--enforce-bar", action="store_true", help="exit 1 when a metric is over the 3%% bar")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", choices=BACKENDS, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    labels = [variant.label for variant in args.variants]
    if len(set(labels)) != len(labels):
        parser.error(f"--variants names a variant twice: {labels}")
    if args.graph_calls < 1:
        parser.error(f"--graph-calls must be >= 1, got {args.graph_calls}")
    if args.iters < 20 or args.replays < 20:
        parser.error(f"--iters and --replays must be >= 20 (a reported median), got {args.iters} and {args.replays}")
    if any(size <= 0 for size in args.ar_sizes):
        parser.error(f"--ar-sizes must be positive KiB, got {args.ar_sizes}")
    if len(set(args.ar_timers)) != len(args.ar_timers):
        parser.error(f"--ar-timers names a timer twice: {args.ar_timers}")
    if args.ar_timers and "all_reduce" not in args.only:
        parser.error("--ar-timers times the all_reduce group's calls: add all_reduce to --only")
    return args


# ------------------------------------------------------------------------------------------------------------------
# Worker: one heap, the chosen metrics (under torchrun)
# ------------------------------------------------------------------------------------------------------------------


def pointer_facts(label: str, address: int) -> dict[str, str]:
    """What the CUDA driver says of the memory at ``address`` (``POINTER_ATTRIBUTES``), as ``{label attr: value}``;
    an attribute the driver or cuda-bindings cannot give reads ``n/a (why)``."""
    try:
        from cuda.bindings import driver
    except ImportError as error:
        return {f"{label} pointer attributes": f"n/a ({error})"}
    found = {}
    for name in POINTER_ATTRIBUTES:
        key = f"{label} {name.lower()}"
        try:
            attribute = getattr(driver.CUpointer_attribute, f"CU_POINTER_ATTRIBUTE_{name}")
            status, value = driver.cuPointerGetAttribute(attribute, address)
            if status != driver.CUresult.CUDA_SUCCESS:
                found[key] = f"n/a ({status.name})"
                continue
            number = int(value)
            found[key] = f"{number:#x}" if name.startswith("MAPPING") else str(number)
        except Exception as error:  # an attribute this driver or binding lacks: a fact, not a failure
            found[key] = f"n/a ({type(error).__name__}: {error})"
    return found


def phases(addresses: Sequence[int]) -> str:
    """The addresses modulo ``LARGE_PAGE``, in hex, one per rank."""
    return " ".join(f"{address % LARGE_PAGE:#x}" for address in addresses)


def base_alignment(environ: Mapping[str, str]) -> int | None:
    """The heap base alignment ``$HEAP_BACKENDS_BASE_ALIGN`` asks for (None: unset). Raises SystemExit naming the
    value unless it is a power of two of at least 4096 bytes."""
    text = environ.get(BASE_ALIGN_ENV)
    if not text:
        return None
    try:
        value = int(text, 0)
    except ValueError:
        value = 0
    if value < 4096 or value & (value - 1):
        raise SystemExit(f"${BASE_ALIGN_ENV} must be a power of two >= 4096 (bytes), got {text!r}")
    return value


def timers_first(environ: Mapping[str, str]) -> bool:
    """Whether ``$HEAP_BACKENDS_AR_TIMERS_FIRST`` asks for the ``--ar-timers`` before the bar metric (unset: after).
    Raises SystemExit naming the value unless it is ``0`` or ``1``."""
    text = environ.get(AR_TIMERS_FIRST_ENV, "")
    if text not in ("", "0", "1"):
        raise SystemExit(f"${AR_TIMERS_FIRST_ENV} must be 0 (timers after the bar metric) or 1 (before), got {text!r}")
    return text == "1"


def timer_schedule(timers: Sequence[str], first: bool) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Where each of ``timers`` runs, in their order: (before the bar metric, after it, after every group). ``late``
    always runs after every group; the others before the bar metric when ``first``, else after it. Raises
    ValueError naming a timer that ``AR_TIMERS`` does not know."""
    unknown = [timer for timer in timers if timer not in AR_TIMERS]
    if unknown:
        raise ValueError(f"unknown all-reduce timers {unknown}: known are {list(AR_TIMERS)}")
    now = tuple(timer for timer in timers if timer != "late")
    late = ("late",) if "late" in timers else ()
    return (now, (), late) if first else ((), now, late)


def describe_replays(per_rank: Sequence[Sequence[float]]) -> str:
    """Each rank's min / median / max over its replays (µs per call), e.g. ``4.31/4.38/4.62, 4.30/4.37/4.60``.
    Raises ValueError for a rank without replays."""
    if any(not values for values in per_rank):
        raise ValueError("describe_replays needs at least one replay per rank")
    return ", ".join(f"{min(values):.3f}/{statistics.median(values):.3f}/{max(values):.3f}" for values in per_rank)


def worker(args: argparse.Namespace) -> int:
    """Measure the chosen metrics on ``args.backend``'s heap; rank 0 writes them (and the probe's facts) to
    ``args.json``. Returns the exit code."""
    os.environ["TRITON_DIST_BACKEND"] = args.backend  # read by init()'s default, as the GPU checks do
    sys.path.insert(0, str(REPO / "examples"))
    import torch
    from _replay_probe import apply_sync_memops_request, sync_memops_request

    from triton_dist.runtime.heap import symm_mem
    from triton_dist.testing import Checks, rank0_print, setup_distributed, teardown
    from triton_dist.testing.timing import graphed_us

    align = base_alignment(os.environ)
    sync_memops_request(os.environ)  # a bad value fails before the collective init
    timers_first(os.environ)
    if align is not None:  # the candidate fix, in this worker only: symm_mem reads the name at each call
        symm_mem.HEAP_BASE_ALIGNMENT = align
    world = setup_distributed(heap_size=args.heap_size)
    if world.backend != args.backend:
        raise SystemExit(f"asked for the {args.backend} heap, init() built {world.backend}")
    checks = Checks()
    metrics: dict[str, float] = {}
    facts: dict[str, str] = {}
    apply_sync_memops_request(facts)  # $HEAP_BACKENDS_CTX_SYNC_MEMOPS: before any metric
    generator = torch.Generator(device=world.device).manual_seed(29 + world.rank)
    if args.probe:
        facts["device"] = torch.cuda.get_device_name(world.device)
        facts["CPUs this rank may run on"] = str(len(os.sched_getaffinity(0)))
        facts["heap base alignment asked"] = f"{align or 4096} bytes"
        facts["heap bases mod 2 MiB, by rank"] = phases(world.heap.bases)
        facts.update(pointer_facts("heap base", world.heap.bases[world.rank]))
        for peer, base in enumerate(world.heap.bases):
            if peer != world.rank and base:
                facts.update(pointer_facts(f"rank {peer}'s heap as mapped here", base))
        facts["NVSHMEM_* in the environment"] = (
            " ".join(f"{key}={value}" for key, value in sorted(os.environ.items()) if key.startswith("NVSHMEM_"))
            or "none"
        )
    if "ping_pong" in args.only:
        measure_ping_pong(args, world, checks, metrics)
    if "allgather_push" in args.only:
        measure_allgather(args, world, checks, metrics, generator)
    late: list[tuple[str, Callable[[], object]]] = []
    if "all_reduce" in args.only:
        late = measure_all_reduce(args, world, checks, metrics, facts, generator)
    if "replay" in args.only:
        measure_replay(args, world, checks, metrics, facts, generator)
    for name, call in late:  # "late": the bar's call, after every group
        metrics[f"{name}_by_late_us"] = graphed_us(call, calls=args.graph_calls, replays=args.replays, lead=True)

    for name, value in metrics.items():
        rank0_print(f"RESULT heap_backends backend={args.backend} {name}={value:.3f}")
    for name, value in facts.items():
        rank0_print(f"FACT heap_backends backend={args.backend} {name}: {value}")
    if world.rank == 0 and args.json:
        Path(args.json).write_text(json.dumps({"backend": args.backend, "metrics": metrics, "facts": facts}))
    code = checks.exit_code()
    teardown()
    return code


def measure_ping_pong(args: argparse.Namespace, world: Any, checks: Any, metrics: dict[str, float]) -> None:
    """``ping_pong_us`` between ranks 0 and 1 (others only join the barriers)."""
    import torch
    from ping_pong import ping_pong

    from triton_dist import runtime as rt
    from triton_dist.testing import bench

    flag = rt.zeros(1, dtype=torch.int32)
    rt.barrier()
    playing, state = world.rank < 2, {"next": 1}

    def launch_ping_pong() -> None:
        if playing:
            ping_pong[(1,)](flag, args.rounds, state["next"], SERVE=world.rank == 0, num_warps=1)
        state["next"] += args.rounds

    metrics["ping_pong_us"] = bench(launch_ping_pong, warmup=2, rep=20) * 1000.0 / args.rounds
    rt.barrier()
    if playing:
        checks.check("every ping-pong round trip completed", flag.item() == state["next"] - 1, str(flag.item()))


def measure_allgather(
    args: argparse.Namespace, world: Any, checks: Any, metrics: dict[str, float], generator: Any
) -> None:
    """``allgather_push_<S>MiB_us`` per size of ``AG_SIZES_MIB``, each checked against NCCL first."""
    import torch
    import torch.distributed as dist
    from allgather_push import make_launch

    from triton_dist import runtime as rt
    from triton_dist.testing import bench, poison_

    sm_count = torch.cuda.get_device_properties(world.device).multi_processor_count
    ctas_per_peer = max(16, min(64, sm_count // world.world_size))
    ag_args = argparse.Namespace(block=4096, num_warps=8)
    epoch = {"value": 0}

    def next_epoch() -> int:
        epoch["value"] += 1
        return epoch["value"]

    for size_mib in AG_SIZES_MIB:
        shard_elems = (size_mib << 20) // 2 // world.world_size
        shard = torch.randn(shard_elems, generator=generator, device=world.device).to(torch.bfloat16)
        out = rt.empty((shard_elems * world.world_size,), dtype=torch.bfloat16)
        reference = torch.empty_like(out)
        launch = make_launch(ag_args, shard, out, ctas_per_peer)
        poison_(out)
        dist.all_gather_into_tensor(reference, shard)
        rt.barrier_on_device()  # every rank's poison is in place before any rank writes
        launch(next_epoch())
        rt.barrier()
        checks.check(f"allgather_push {size_mib} MiB matches NCCL (poisoned output)", torch.equal(out, reference))
        metrics[f"allgather_push_{size_mib}MiB_us"] = (
            bench(lambda launch=launch: launch(next_epoch()), rep=args.iters) * 1000.0
        )
        del out


def checked(checks: Any, name: str, call: Callable[[], object], out: Any, reference: Any) -> bool:
    """Poison ``out``, run ``call`` once and check ``out`` against ``reference`` (NCCL's fp32 sum): whether it
    matched (a mismatch is recorded in ``checks``)."""
    import torch

    from triton_dist.testing import poison_

    poison_(out)
    call()
    torch.cuda.synchronize()
    error = (out.float() - reference).abs().max().item()
    scale = reference.abs().max().item()
    return checks.check(
        f"{name} matches NCCL's fp32 sum (poisoned output)", error <= 1e-2 * max(scale, 1.0), f"{error}"
    )


def checked_us(
    checks: Any, name: str, call: Callable[[], object], out: Any, reference: Any, args: argparse.Namespace
) -> float | None:
    """``checked``, then time ``call`` under CUDA-graph replay (``args.graph_calls`` calls per graph,
    ``args.replays`` replays): µs per call, or None (no timing) when the check failed."""
    from triton_dist.testing.timing import graphed_us

    if not checked(checks, name, call, out, reference):
        return None
    return graphed_us(call, calls=args.graph_calls, replays=args.replays, lead=True)


def measure_all_reduce(
    args: argparse.Namespace,
    world: Any,
    checks: Any,
    metrics: dict[str, float],
    facts: dict[str, str],
    generator: Any,
) -> list[tuple[str, Callable[[], object]]]:
    """``all_reduce_<S>KiB_us`` per size of ``args.ar_sizes`` (bf16, input off the heap); with ``args.probe`` also
    the probe's facts and timings, with ``args.ar_timers`` the other timers' (module docstring). Returns the metric
    name and call of each size whose check passed, when the ``late`` timer is asked for (the worker times them
    after every group)."""
    import torch
    import torch.distributed as dist

    from triton_dist.ops.all_reduce import all_reduce
    from triton_dist.testing.timing import graphed_us

    before, after, at_end = timer_schedule(args.ar_timers, timers_first(os.environ))
    if args.ar_timers:
        facts["all-reduce timers"] = (
            f"before the bar metric: {' '.join(before) or 'none'}; after it: {' '.join(after) or 'none'}; "
            f"after every group: {' '.join(at_end) or 'none'}"
        )
    late: list[tuple[str, Callable[[], object]]] = []
    for size_kib in args.ar_sizes:
        x = torch.randn((size_kib << 10) // 2, generator=generator, device=world.device).to(torch.bfloat16)
        out = torch.empty_like(x)
        reference = x.float()
        dist.all_reduce(reference)
        name = f"all_reduce_{size_kib}KiB"
        call = lambda x=x, out=out: all_reduce(x, out=out)  # noqa: E731
        if checked(checks, name, call, out, reference):  # then timed as checked_us does
            time_all_reduce(args, world, metrics, facts, name, call, x, out, before)
            graphed_us(call, calls=args.graph_calls, replays=args.replays, lead=True)  # discarded (docstring)
            metrics[f"{name}_us"] = graphed_us(call, calls=args.graph_calls, replays=args.replays, lead=True)
            time_all_reduce(args, world, metrics, facts, name, call, x, out, after)
            if at_end:
                late.append((name, call))
            if args.ar_timers:
                facts[f"{name} graph of {args.graph_calls} calls as torch.cuda.graph captures it"] = torch_graph_nodes(
                    call, args.graph_calls
                )
        if args.probe:
            probe_all_reduce(args, world, checks, metrics, facts, x, out, reference, size_kib)
    return late


def time_all_reduce(
    args: argparse.Namespace,
    world: Any,
    metrics: dict[str, float],
    facts: dict[str, str],
    name: str,
    call: Callable[[], object],
    x: Any,
    out: Any,
    timers: Sequence[str],
) -> None:
    """``<name>_by_<timer>_us`` for each of ``timers`` (``AR_TIMERS``, not ``late``): ``call``, the bar metric's
    all-reduce of ``x`` into ``out`` (checked already), per call, max over ranks; each rank's spread over the
    replays, and whether the lead held, into ``facts``. Every rank must call it with the same timers (the timings
    are collectives). No timers: nothing at all (the bar metric's path stays as without ``--ar-timers``)."""
    if not timers:
        return
    import torch
    import torch.distributed as dist
    from _replay_probe import replay_us

    from triton_dist.ops.all_reduce import all_reduce
    from triton_dist.testing.distributed import max_over_ranks
    from triton_dist.testing.timing import graphed_us

    calls, replays = args.graph_calls, args.replays
    for timer in timers:
        metric = f"{name}_by_{timer}_us"
        samples: list[float] | None = None
        held = True
        if timer == "graphed":
            metrics[metric] = graphed_us(call, calls=calls, replays=replays, lead=True)
        elif timer == "fresh_tensors":
            x2, out2 = x.clone(), torch.empty_like(out)
            fresh = lambda x2=x2, out2=out2: all_reduce(x2, out=out2)  # noqa: E731
            metrics[metric] = graphed_us(fresh, calls=calls, replays=replays, lead=True)
            facts[f"{metric}: input and output mod 2 MiB"] = (
                f"{phases([x2.data_ptr(), out2.data_ptr()])} (the bar's: {phases([x.data_ptr(), out.data_ptr()])})"
            )
        elif timer == "probe":
            spans, held = replay_us(call, calls, replays)
            samples = [span / calls for span in spans]
        elif timer in MIRROR_TIMERS:
            samples, held = timed_replays(call, calls, replays, timer)
        else:
            raise ValueError(f"{timer!r} is not an all-reduce timer to run here ({list(AR_TIMERS)}, not late)")
        if samples is not None:
            metrics[metric] = max_over_ranks(statistics.median(samples))
            every: list[list[float]] = [[] for _ in range(world.world_size)]
            dist.all_gather_object(every, samples, group=world.group)
            facts[f"{metric} by rank (min/median/max over replays)"] = describe_replays(every)
            if not held:
                facts[f"{metric}: the lead did not hold"] = "the GPU reached the first timed replay before the host"
    torch.cuda.synchronize()


def timed_replays(fn: Callable[[], object], calls: int, replays: int, change: str) -> tuple[list[float], bool]:
    """µs per call of each of ``replays`` timed replays of a graph of ``calls`` calls of ``fn`` on this rank, and
    whether the lead held (the GPU had not reached the first timed replay when the host had enqueued the last):
    ``graphed_us(lead=True)``'s steps, in its order, with the one ``change`` of :data:`MIRROR_TIMERS` (``mirror``:
    none). Raises ValueError for another ``change``."""
    import torch

    from triton_dist import runtime as rt
    from triton_dist.runtime.world.host_lead import HOST_LEAD_CYCLES

    if change not in MIRROR_TIMERS:
        raise ValueError(f"timed_replays: change must be one of {list(MIRROR_TIMERS)}, got {change!r}")
    warmup = 3
    current = torch.cuda.current_stream()
    warm = current if change == "current_warmup" else torch.cuda.Stream()
    if warm != current:
        warm.wait_stream(current)
    with torch.cuda.stream(warm):
        for _ in range(warmup):
            fn()
    if warm != current:
        current.wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    if change == "no_sync":  # torch.cuda.graph's own capture stream, without its __enter__'s host-side steps
        if torch.cuda.graph.default_capture_stream is None:
            torch.cuda.graph.default_capture_stream = torch.cuda.Stream()
        with torch.cuda.stream(torch.cuda.graph.default_capture_stream):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                for _ in range(calls):
                    fn()
            finally:
                graph.capture_end()
    else:
        stream = None
        if change == "own_stream":
            stream = torch.cuda.Stream()
            stream.wait_stream(current)
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            for _ in range(calls):
                fn()
    for _ in range(warmup):
        graph.replay()
    rt.barrier()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    torch.cuda._sleep(HOST_LEAD_CYCLES * max(1, -(-replays // 10)))
    if change == "device_start":
        rt.barrier_on_device()
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    held = not events[0][0].query()  # a host-side query: no work on the GPU
    rt.barrier()
    return [start.elapsed_time(end) * 1000.0 / calls for start, end in events], held


def torch_graph_nodes(fn: Callable[[], object], calls: int) -> str:
    """The nodes of a graph of ``calls`` calls of ``fn`` as ``torch.cuda.graph`` captures it (the bar's capture;
    the replay probe's ``op graph`` fact is its own capture's), described by the probe's ``describe_graph``;
    ``n/a (why)`` where this torch or cuda-bindings cannot say."""
    import torch
    from _replay_probe import _check, _driver, _graph_node, describe_graph

    try:
        driver = _driver()
        graph = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            for _ in range(calls):
                fn()
        raw = driver.CUgraph(graph.raw_cuda_graph())
        count = _check(driver.cuGraphGetNodes(raw, 0), "cuGraphGetNodes")[-1]
        handles = _check(driver.cuGraphGetNodes(raw, count), "cuGraphGetNodes")[0]
        edges = _check(driver.cuGraphGetEdges(raw, 0), "cuGraphGetEdges")[-1]
        text = describe_graph([_graph_node(driver, handle) for handle in handles], int(edges))
        del graph
        return text
    except Exception as error:  # a fact, not a failure
        return f"n/a ({type(error).__name__}: {error})"


def measure_replay(
    args: argparse.Namespace,
    world: Any,
    checks: Any,
    metrics: dict[str, float],
    facts: dict[str, str],
    generator: Any,
) -> None:
    """Issue 29's replay probe (``bench/_replay_probe.py``) with the ``REPLAY_SIZE_KIB`` all_reduce, checked against
    NCCL first (no probe when it does not match), and its LL controls (``ll_controls``)."""
    import torch
    import torch.distributed as dist
    from _replay_probe import measure_replay as probe

    from triton_dist.ops.all_reduce import all_reduce

    x = torch.randn((REPLAY_SIZE_KIB << 10) // 2, generator=generator, device=world.device).to(torch.bfloat16)
    out = torch.empty_like(x)
    reference = x.float()
    dist.all_reduce(reference)
    call = lambda: all_reduce(x, out=out)  # noqa: E731
    if checked(checks, f"all_reduce_{REPLAY_SIZE_KIB}KiB (replay probe)", call, out, reference):
        controls = ll_controls(world, checks, facts, x, out, reference)
        probe(world, call, args.replays, metrics, facts, controls)


def ll_controls(
    world: Any, checks: Any, facts: dict[str, str], x: Any, out: Any, reference: Any
) -> dict[str, tuple[Callable[[], object], int]]:
    """The replay probe's LL controls for the all_reduce of ``x`` (empty, with a fact saying why, when its config is
    not the LL one-shot): its kernel launched by Triton's launcher on the op's own workspace and on a fresh one, and
    by a plan of this worker's own (``DriverLaunch``, as the op launches) on the fresh one; 10 calls per graph. Each
    is checked against ``reference`` first (a control that does not match is left out)."""
    import torch

    from triton_dist import runtime as rt
    from triton_dist.compiler.watchdog import watchdog_enabled
    from triton_dist.ops.all_reduce import config as ar_config
    from triton_dist.ops.all_reduce.kernels import _one_shot_ll_kernel
    from triton_dist.ops.common.launch import first_launch
    from triton_dist.ops.common.slot_workspace import slot_workspace

    itemsize, numel, ranks = x.element_size(), x.numel(), world.world_size
    config = ar_config.select_config(numel * itemsize, x.device, ranks, itemsize)
    if config.algo != "one_shot_ll":
        facts["replay probe LL controls"] = f"not run: the op's config is {config}"
        return {}
    shape = ar_config.launch_shape(numel, itemsize, ranks, config)
    slots, region = ar_config.SLOTS["one_shot_ll"], ar_config.ll_region_bytes(ranks)
    own = slot_workspace("all_reduce.one_shot_ll", slots, 1, region)  # the op's, made by its first call
    fresh_data = rt.zeros(slots * region, dtype=torch.uint8).view(torch.int64)  # zero words, epochs from 0: the
    fresh_epochs = rt.zeros(slots, dtype=torch.int32)  # LL protocol's start (kernels.py)
    rt.barrier()
    for label, tensor in (
        ("op's LL epochs", own.epochs),
        ("op's LL words", own.data),
        ("fresh LL epochs", fresh_epochs),
        ("fresh LL words", fresh_data),
    ):
        facts[f"{label}: heap offset, mod 2 MiB"] = (
            f"{world.heap.offset_of(tensor)}, {tensor.data_ptr() % LARGE_PAGE:#x}"
        )

    def named(data: Any, epochs: Any) -> dict[str, Any]:
        return {
            "x_ptr": x,
            "out_ptr": out,
            "data_ptr": data,
            "epochs_ptr": epochs,
            "n": numel,
            "REGION": shape.region_elems,
            "LANES": ar_config.LL_LANES,
            "BLOCK": shape.block,
            "PER_WORD": ar_config.ll_elements_per_word(itemsize),
            "WATCHED": watchdog_enabled(),
        }

    grid = (shape.programs, 1, 1)
    own_named, fresh_named = named(own.data_as(torch.int64), own.epochs), named(fresh_data, fresh_epochs)
    plan = first_launch(_one_shot_ll_kernel, grid, fresh_named, 2, num_warps=config.num_warps)  # launches once
    facts["replay probe LL plan launches by"] = "DriverLaunch" if getattr(plan, "_direct", None) else "Triton"
    candidates: dict[str, Callable[[], object]] = {
        "ll_triton_own10": lambda: _one_shot_ll_kernel[grid](**own_named, num_warps=config.num_warps),
        "ll_triton_fresh10": lambda: _one_shot_ll_kernel[grid](**fresh_named, num_warps=config.num_warps),
        "ll_driver_fresh10": lambda: plan.launch(x.device, x, out),
    }
    return {
        name: (launch, 10)
        for name, launch in candidates.items()
        if checked(checks, f"all_reduce_{REPLAY_SIZE_KIB}KiB {name} (replay probe)", launch, out, reference)
    }


def probe_all_reduce(
    args: argparse.Namespace,
    world: Any,
    checks: Any,
    metrics: dict[str, float],
    facts: dict[str, str],
    x: Any,
    out: Any,
    reference: Any,
    size_kib: int,
) -> None:
    """The probe at one all-reduce size: the selected config, the other algorithms forced, and the LL kernel on
    workspaces at chosen 2 MiB phases (module docstring)."""
    import torch
    import torch.distributed as dist

    from triton_dist import runtime as rt
    from triton_dist.compiler.watchdog import watchdog_enabled
    from triton_dist.ops.all_reduce import all_reduce
    from triton_dist.ops.all_reduce import config as ar_config
    from triton_dist.ops.all_reduce import op as ar_op
    from triton_dist.ops.all_reduce.kernels import _one_shot_ll_kernel
    from triton_dist.ops.common.slot_workspace import slot_workspace
    from triton_dist.testing.timing import graphed_us

    name = f"all_reduce_{size_kib}KiB"
    itemsize, numel, ranks = x.element_size(), x.numel(), world.world_size
    selected = ar_config.select_config(numel * itemsize, x.device, ranks, itemsize)
    facts[f"{name} config"] = str(selected)
    # The op again with 10x the calls per graph: a cost that shrinks with them is the host's, between replays.
    calls = PROBE_GRAPH_CALLS_FACTOR * args.graph_calls
    metrics[f"{name}_graph{calls}_us"] = graphed_us(
        lambda: all_reduce(x, out=out), calls=calls, replays=args.replays, lead=True
    )
    for forced in (ar_config.AllReduceConfig("one_shot", 32, 4), ar_config.AllReduceConfig("one_shot_push", 32, 4)):
        if forced != selected:
            call = lambda forced=forced: ar_op._run(x, out, "sum", forced)  # noqa: E731
            us = checked_us(checks, f"{name} {forced.algo}", call, out, reference, args)
            if us is not None:
                metrics[f"{name}_{forced.algo}_us"] = us
    ll = selected
    if ll.algo != "one_shot_ll":  # the LL config bench/all_reduce.py falls back to
        ll = ar_config.AllReduceConfig("one_shot_ll", min(ar_config.SLOTS["one_shot_ll"], -(-numel // 512)), 4)
    if not ar_config.fits(ll, numel, itemsize):
        facts[f"{name} LL"] = f"not probed: {numel} elements do not fit one LL round"
        return
    slots, region = ar_config.SLOTS["one_shot_ll"], ar_config.ll_region_bytes(ranks)
    own = slot_workspace("all_reduce.one_shot_ll", slots, 1, region)  # the op's (created here if it made none)
    own_phase = own.data.data_ptr() % LARGE_PAGE
    facts[f"{name} op's LL workspace mod 2 MiB"] = f"{own_phase:#x} (heap offset {world.heap.offset_of(own.data)})"
    shape = ar_config.launch_shape(numel, itemsize, ranks, ll)
    block = rt.zeros(slots * region + LARGE_PAGE, dtype=torch.uint8)
    epochs = rt.zeros(slots, dtype=torch.int32)
    for phase in dict.fromkeys((*PROBE_PHASES, own_phase)):
        shift = torch.tensor([(phase - block.data_ptr()) % LARGE_PAGE], device=world.device)
        dist.broadcast(shift, src=0, group=world.group)  # one heap offset on every rank: the workspace is symmetric
        data = block[int(shift.item()) : int(shift.item()) + slots * region].view(torch.int64)
        seen: list[int] = [0] * ranks
        dist.all_gather_object(seen, data.data_ptr(), group=world.group)
        facts[f"{name} LL at phase {phase:#x}: workspace mod 2 MiB, by rank"] = phases(seen)
        rt.barrier()  # no kernel of the previous phase is in flight anywhere
        block.zero_()  # fresh words and epochs: the LL protocol's start (kernels.py)
        epochs.zero_()
        rt.barrier()
        compiled: dict[str, Any] = {}

        def launch(data: Any = data, compiled: dict[str, Any] = compiled) -> None:
            compiled["kernel"] = _one_shot_ll_kernel[(shape.programs, 1, 1)](
                x,
                out,
                data,
                epochs,
                numel,
                REGION=shape.region_elems,
                LANES=ar_config.LL_LANES,
                BLOCK=shape.block,
                PER_WORD=ar_config.ll_elements_per_word(itemsize),
                WATCHED=watchdog_enabled(),
                num_warps=ll.num_warps,
            )

        us = checked_us(checks, f"{name} LL at phase {phase:#x}", launch, out, reference, args)
        if us is not None:
            metrics[f"ll_{size_kib}KiB_phase{phase:#x}_us"] = us
        cubin = compiled["kernel"].asm.get("cubin", b"")
        facts[f"{name} LL kernel ({ll}) cubin sha256"] = hashlib.sha256(cubin).hexdigest()[:16]
    rt.barrier()


# ------------------------------------------------------------------------------------------------------------------
# Driver: every variant, rotating, one command
# ------------------------------------------------------------------------------------------------------------------


@dataclass
class Samples:
    """What the trials of one variant gave: every metric's values, and the facts of its first trial."""

    metrics: dict[str, list[float]] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)

    def add(self, result: dict[str, Any]) -> None:
        """Record one worker's ``{"metrics": ..., "facts": ...}``."""
        for name, value in result.get("metrics", {}).items():
            self.metrics.setdefault(name, []).append(float(value))
        if not self.facts:
            self.facts = dict(result.get("facts", {}))


def measure(args: argparse.Namespace, variant: Variant, scratch: Path, index: int) -> dict[str, Any]:
    """One torchrun of the worker on ``variant``; its JSON. Raises SystemExit with its output if it fails."""
    out = scratch / f"{hashlib.sha256(variant.label.encode()).hexdigest()[:12]}-{index}.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}"]
    command += [__file__, "--worker", "--backend", variant.backend, "--json", str(out)]
    command += ["--rounds", str(args.rounds), "--iters", str(args.iters), "--replays", str(args.replays)]
    command += ["--graph-calls", str(args.graph_calls)]
    command += ["--heap-size", str(args.heap_size), "--only", *args.only, "--ar-sizes", *map(str, args.ar_sizes)]
    command += ["--probe"] if args.probe else []
    command += ["--ar-timers", *args.ar_timers] if args.ar_timers else []
    env = {key: value for key, value in os.environ.items() if key != "TRITON_DIST_BACKEND"}
    env.update(variant.env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "python"), env.get("PYTHONPATH", "")) if p)
    began = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    print(f"[{variant.label} #{index}] exit {done.returncode} in {time.monotonic() - began:.0f} s", flush=True)
    print("\n".join(line for line in done.stdout.splitlines() if "RESULT" in line or "FAIL" in line), flush=True)
    if done.returncode != 0 or not out.exists():
        print(done.stdout[-4000:] + done.stderr[-4000:], flush=True)
        raise SystemExit(f"FAIL the {variant.label} worker (trial {index}) exited {done.returncode}")
    return json.loads(out.read_text())


def spread(values: Sequence[float]) -> float:
    """(max - min) / median of ``values``."""
    return (max(values) - min(values)) / statistics.median(values)


@dataclass(frozen=True)
class Row:
    """One metric: the baseline's median and spread, then each other variant's median, overhead and spread."""

    metric: str
    base_us: float
    base_spread: float
    others: tuple[tuple[str, float, float, float], ...]  # (label, median µs, overhead, spread)


def compare(samples: dict[str, Samples], labels: Sequence[str]) -> list[Row]:
    """A :class:`Row` per metric of the baseline (``labels[0]``), in its order; variants without the metric are
    left out of its row."""
    base = samples[labels[0]].metrics
    rows = []
    for metric, values in base.items():
        base_us = statistics.median(values)
        others = []
        for label in labels[1:]:
            theirs = samples[label].metrics.get(metric)
            if theirs:
                median = statistics.median(theirs)
                others.append((label, median, median / base_us - 1.0, spread(theirs)))
        rows.append(Row(metric, base_us, spread(values), tuple(others)))
    return rows


def over_bar(rows: Sequence[Row], bar: float = BAR) -> list[str]:
    """``metric (variant)`` for every variant's overhead above ``bar``."""
    return [f"{row.metric} ({label})" for row in rows for label, _, overhead, _ in row.others if overhead > bar]


def render(rows: Sequence[Row], labels: Sequence[str]) -> str:
    """The markdown table of ``rows``: per variant its µs, its overhead against the baseline and its spread."""
    head = f"| metric | {labels[0]} µs | {labels[0]} spread |"
    rule = "|---|---|---|"
    for label in labels[1:]:
        head += f" {label} µs | {label} overhead | {label} spread |"
        rule += "---|---|---|"
    lines = [head, rule]
    for row in rows:
        cells = {label: (us, overhead, spread_) for label, us, overhead, spread_ in row.others}
        line = f"| {row.metric} | {row.base_us:.3f} | {row.base_spread:.1%} |"
        for label in labels[1:]:
            if label in cells:
                us, overhead, spread_ = cells[label]
                line += f" {us:.3f} | {overhead:+.1%} | {spread_:.1%} |"
            else:
                line += " - | - | - |"
        lines.append(line)
    return "\n".join(lines)


def render_facts(samples: dict[str, Samples], labels: Sequence[str]) -> str:
    """The facts of each variant's first trial (the probe's), as markdown lists; empty when there are none."""
    parts = []
    for label in labels:
        if samples[label].facts:
            parts.append(f"Facts, {label} (rank 0, first trial):\n")
            parts += [f"- {name}: {value}" for name, value in samples[label].facts.items()]
            parts.append("")
    return "\n".join(parts)


def drive(args: argparse.Namespace) -> int:
    """Rotate the variants ``args.trials`` times; print and optionally write the comparison. Returns the exit
    code: 1 when a variant's worker failed (the others' results are still reported; a failing baseline ends the run
    with SystemExit) or, with ``--enforce-bar``, when a metric is over the bar."""
    variants: list[Variant] = args.variants
    labels = [variant.label for variant in variants]
    samples = {label: Samples() for label in labels}
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as directory:
        for trial in range(args.trials):
            shift = trial % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                if variant.label in failed:
                    continue
                try:
                    samples[variant.label].add(measure(args, variant, Path(directory), trial))
                except SystemExit as error:
                    if variant == variants[0]:
                        raise
                    failed[variant.label] = str(error)  # e.g. an NVSHMEM setting its init refuses
    labels = [label for label in labels if label not in failed]
    rows = compare(samples, labels)
    over = over_bar(rows)
    for row in rows:
        for label, us, overhead, spread_ in row.others:
            verdict = "within" if overhead <= BAR else "OVER"
            print(
                f"RESULT heap_backends {row.metric} {labels[0]}_us={row.base_us:.3f} {label}_us={us:.3f} "
                f"overhead={overhead:+.1%} ({verdict} the {BAR:.0%} bar; {labels[0]} spread over trials "
                f"{row.base_spread:.1%}, {label} {spread_:.1%})"
            )
    table = render(rows, labels)
    facts = render_facts(samples, labels)
    summary = (
        f"{args.nproc} ranks, {args.trials} trials per variant rotating, median per metric, baseline {labels[0]}; "
        f"bar: overhead <= {BAR:.0%}; over it: {', '.join(over) if over else 'none'}"
        + "".join(f"; FAILED {label}: {why}" for label, why in failed.items())
    )
    print(table + "\n\n" + summary + ("\n\n" + facts if facts else ""))
    if args.out:
        Path(args.out).write_text(
            f"# Heap backends: {' vs '.join(labels)}\n\n- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
            f"- command: `{' '.join(sys.argv)}`\n- {summary}\n\n" + table + "\n" + ("\n" + facts if facts else "")
        )
    return 1 if failed or (over and args.enforce_bar) else 0


def main() -> int:
    args = parse_args()
    if args.worker:
        return worker(args)
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
