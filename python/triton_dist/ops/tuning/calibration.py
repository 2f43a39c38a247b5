"""Per-GPU calibration: the measured rates the cost model predicts with, committed per GPU kind or measured once.

A :class:`Calibration` holds, for one GPU model at one world size, a fixed cost plus a rate for each thing the
overlapped ops are made of: cuBLAS's GEMM, our persistent GEMM, NCCL's all-gather and reduce-scatter, a
copy-engine push of a shard to a peer, a local device-memory copy, and measured properties of the fused paths
(what the fused AllGather + GEMM costs beyond its model, the fused GEMM + ReduceScatter's time over cuBLAS's GEMM
alone, what GEMM + ReduceScatter's cuBLAS path with the direct producer costs beyond its model, and the pull
producer's time beyond its GEMM as a fixed cost plus a rate of the bytes pulled).

Where it comes from (:func:`calibration_for`): the user's cache (``calibration.json`` beside ``tuning.json``),
then the committed ``calibrations.json`` (the GPU kinds measured at the current ``CALIBRATION_VERSION``), else it is
measured on the first call that needs it (a collective of a few seconds on every rank, with one warning) and stored
in the user's cache.
``TRITON_DIST_CALIBRATE=0`` forbids that measurement: an unknown GPU then runs the unfused path, correctly.

The measurement uses shapes of its own (not the sweep's), so the cost model is fitted on one set and judged on
another. Every value is the maximum over ranks, so every rank holds the same calibration and decides alike.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import gc
import math
import os
import pathlib
import statistics
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from triton_dist.ops.common.config_fields import checked_fields
from triton_dist.ops.tuning import tables

PACKAGE_CALIBRATIONS = pathlib.Path(__file__).resolve().parent / "calibrations.json"
CALIBRATE_ENV = "TRITON_DIST_CALIBRATE"


@dataclasses.dataclass(frozen=True)
class Rate:
    """``fixed_ms + amount / per_ms``: a launch or latency cost plus a throughput (flops or bytes per ms)."""

    fixed_ms: float
    per_ms: float

    def ms(self, amount: float) -> float:
        return self.fixed_ms + amount / self.per_ms

    @classmethod
    def fit(cls, small: tuple[float, float], large: tuple[float, float]) -> Rate:
        """The rate through two (amount, ms) measurements (the fixed cost clamped at zero)."""
        (a1, t1), (a2, t2) = small, large
        per_ms = (a2 - a1) / max(t2 - t1, 1e-6)
        return cls(fixed_ms=max(0.0, t1 - a1 / per_ms), per_ms=per_ms)


CALIBRATION_VERSION = 2
"""What a stored calibration must have been measured with to be used. Version 1 (2026-11-26) timed part of the
host's launch path into its device times (no host lead before the device barrier: fixed costs of 0.077 ms for
NCCL's collectives on 2 x H200, against 0.016-0.021 ms measured with the lead on 2 x H100) and has no memory rate
or cuBLAS-path fields: such entries are ignored, so the GPU is calibrated again on first use."""


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Measured rates of one GPU model at one world size (see the module docstring)."""

    gpu: str
    world_size: int
    sms: int
    cublas: Rate
    ours: Rate
    allgather: Rate
    reduce_scatter: Rate
    push: Rate
    ag_fused_extra_ms: float
    rs_fused_over_cublas: float
    rs_fused_over_cublas_small_k: float = 0.0
    memory: Rate | None = None
    """A local device-to-device copy, per byte moved (read + written); None in calibrations older than it."""
    rs_cublas_extra_ms: float = -1.0
    """What GEMM + ReduceScatter's cuBLAS path (peers' partials written by cuBLAS into their memory) costs beyond
    ``cost_model.gemm_rs_cublas_ms`` without it (launches, flags); negative: not measured, the path is not chosen."""
    ag_cublas_extra_ms: float = -1.0
    """What AllGather + GEMM's cuBLAS path (copy-engine pushes, one cuBLAS GEMM per shard as it lands) costs beyond
    ``cost_model.ag_gemm_cublas_ms`` without it (launches, waits); negative: not measured, the path is not chosen."""
    ag_cublas_chunk_ms: float = -1.0
    """What each chunk per peer shard beyond the first costs the AG cuBLAS path beyond its model (one more copy,
    flag, wait and GEMM launch, smaller GEMMs), measured at ``CAL_AG`` with four chunks per shard against one;
    negative: not measured (calibrations before it), ``cost_model.ag_cublas_chunk_ms`` derives it from
    ``ag_cublas_extra_ms``."""
    pull: Rate | None = None
    """GEMM + ReduceScatter's cuBLAS "pull" producer (one GEMM of all rows, then each rank pulls its shard rows of
    the peers' partials): its time beyond its one GEMM of all rows (timed ``torch.matmul`` at the same shape), per
    byte each rank pulls ((W - 1) shards): its fixed cost (two small kernels, flags) and its remote-read rate. None:
    not measured, the path is never chosen (calibrations of the same version measured before this field lack it)."""
    measured: str = ""
    version: int = 1
    """The measurement's ``CALIBRATION_VERSION`` (entries without one are version 1)."""

    def rs_ratio(self, k_local: float) -> float:
        """The fused GEMM + ReduceScatter's time over cuBLAS's GEMM alone at a per-rank K of ``k_local``:
        interpolated in log K between the two calibration points (the kernel's main loop falls further behind
        cuBLAS's as K grows, while its pushes are hidden best at small K)."""
        small, large = self.rs_fused_over_cublas_small_k or self.rs_fused_over_cublas, self.rs_fused_over_cublas
        lo, hi = math.log2(CAL_RS_SMALL_K[2] / self.world_size), math.log2(CAL_RS[2] / self.world_size)
        where = min(1.0, max(0.0, (math.log2(max(k_local, 1.0)) - lo) / (hi - lo)))
        return small + (large - small) * where

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Any) -> Calibration:
        """The calibration stored as ``values``; ValueError naming a bad field."""
        if not isinstance(values, dict):
            raise ValueError(f"Calibration: expected an object, got {type(values).__name__}")
        values = dict(values)
        # A constant extra of the pull producer, replaced by the ``pull`` rate: stored user calibrations and
        # calibrations.json measured before may hold it; it prices nothing now, so it is dropped unread.
        values.pop("rs_pull_extra_ms", None)
        rates: dict[str, Any] = {}  # Any: mypy cannot match a dict's values to the fields they fill
        for name in ("cublas", "ours", "allgather", "reduce_scatter", "push", "memory", "pull"):
            if name in ("memory", "pull") and values.get(name) is None:  # optional: calibrations older lack them
                values.pop(name, None)
                continue
            rate = Rate(**checked_fields(Rate, values.pop(name, None)))
            if rate.per_ms <= 0 or rate.fixed_ms < 0:
                raise ValueError(f"Calibration.{name}: the rate must be positive and the fixed cost >= 0: {rate}")
            rates[name] = rate
        return cls(**rates, **checked_fields(cls, values))


def calibration_key(gpu: str, world_size: int) -> str:
    return f"calibration|{world_size}|{gpu}"


def user_calibrations() -> pathlib.Path:
    """The user's cache of measured calibrations."""
    return tables.cache_dir() / "calibration.json"


def stored(gpu: str, world_size: int) -> Calibration | None:
    """The stored calibration of ``gpu`` at ``world_size`` ranks (user cache, then the committed one), or None; an
    entry older than ``CALIBRATION_VERSION`` counts as none."""
    for path in (user_calibrations(), PACKAGE_CALIBRATIONS):
        entry = tables.read_table(path).get(calibration_key(gpu, world_size))
        if entry is None:
            continue
        try:
            found = Calibration.from_dict(entry["config"])
        except (TypeError, ValueError) as error:
            warnings.warn(f"triton_dist: calibration of {gpu} in {path} is malformed ({error}); ignored", stacklevel=2)
            continue
        if found.version >= CALIBRATION_VERSION:
            return found
    return None


_known: dict[tuple[str, int], Calibration | None] = {}


def calibration_for(world: Any, gpu: str) -> Calibration | None:
    """The calibration of this world's GPUs: stored, else measured now (a collective; every rank must call it).

    None when it is unknown and may not be measured (``TRITON_DIST_CALIBRATE=0``) or the measurement failed; the
    ops then run their unfused path.
    """
    memo = (gpu, world.world_size)
    if memo in _known:
        return _known[memo]
    found = stored(gpu, world.world_size)
    from triton_dist.runtime.world.rank_agreement import gather_from_ranks

    # Measure where any rank lacks it (ranks may have different caches): every rank measures, or none.
    missing = any(gather_from_ranks(found is None, world.group)) if world.world_size > 1 else found is None
    if missing:
        if os.environ.get(CALIBRATE_ENV, "1") == "0":
            warnings.warn(
                f"triton_dist: no calibration for {gpu} at {world.world_size} ranks and {CALIBRATE_ENV}=0: the "
                "overlapped ops run their unfused path (NCCL + cuBLAS) on this GPU",
                stacklevel=2,
            )
            found = None
        else:
            warnings.warn(
                f"triton_dist: no calibration for {gpu} at {world.world_size} ranks; measuring it now (a few "
                f"seconds, once; stored in {user_calibrations()})",
                stacklevel=2,
            )
            found = measure(world, gpu)
            tables.store(user_calibrations(), calibration_key(gpu, world.world_size), found, {})
    _known[memo] = found
    return found


def forget() -> None:
    """Forget the calibrations read or measured by this process (tests; a new calibration file)."""
    _known.clear()


# ------------------------------------------------------------------------------------------------- measurement

CAL_GEMMS = ((4096, 4096, 8192), (8192, 8192, 8192))
"""(M, N, K) of the two GEMMs the rates are fitted through (none is a layer of the sweep)."""
CAL_BYTES = (4 << 20, 64 << 20)
"""Message sizes the communication rates are fitted through."""
CAL_AG = (4096, 8192, 4096)
"""Global (M, N, K) at which the fused AllGather + GEMM is measured against its model."""
CAL_RS = (8192, 4096, 16384)
CAL_RS_SMALL_K = (8192, 4096, 2048)
"""Global (M, N, K) at which the fused GEMM + ReduceScatter is measured against cuBLAS's GEMM alone (eight waves
of tiles at two ranks on 132 SMs, a large and a small K)."""
CAL_RS_PULL_SMALL_M = (1024, 4096, 16384)
"""Global (M, N, K) of the pull producer's second point beside ``CAL_RS``: its time beyond the GEMM grows with the
bytes each rank pulls (2 x H200: 25 us at a 3.7 MB shard, 124 us at 33.6 MB, 422 us at 134 MB), so two shard sizes
(8x apart) fit its fixed cost and its rate (``Calibration.pull``); one constant measured at ``CAL_RS`` charged
small shards ~20 us too much."""


def timed(world: Any, fn: Callable[[], object], reps: int = 10) -> float:
    """Median device ms of ``fn`` over ``reps`` calls, each after a GPU spin and a device barrier with the other
    ranks (``runtime.world.host_lead``: the GPU spins while the host enqueues, so the host's launch path is not
    timed: the device time the cost model predicts), maximum over ranks.

    The calibration's and the opt-in autotuner's timer, which run inside an op's first call (the ops cannot depend
    on the testing package, where the benchmarks' timing lives).
    """
    import torch
    import torch.distributed as dist

    from triton_dist import runtime as rt
    from triton_dist.runtime.world.host_lead import lead_host

    for _ in range(3):
        fn()
    torch.cuda.synchronize(world.device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        lead_host(world.device)
        if world.world_size > 1:
            rt.barrier_on_device()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(world.device)
    value = torch.tensor([statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))])
    value = value.to(world.device)
    if world.world_size > 1:
        dist.all_reduce(value, op=dist.ReduceOp.MAX, group=world.group)
    return float(value.item())


def measure(world: Any, gpu: str) -> Calibration:
    """Measure every rate of :class:`Calibration` on this world (a collective: call on every rank)."""
    import torch
    import torch.distributed as dist

    from triton_dist import runtime as rt
    from triton_dist.ops.matmul import matmul, num_sms

    device, dtype, w = world.device, torch.bfloat16, world.world_size
    group = world.group
    gemm_points: dict[str, list[tuple[float, float]]] = {"cublas": [], "ours": []}
    for m, n, k in CAL_GEMMS:
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        c = torch.empty(m, n, device=device, dtype=dtype)
        flops = 2.0 * m * n * k
        gemm_points["cublas"].append((flops, timed(world, functools.partial(torch.matmul, a, b, out=c))))
        gemm_points["ours"].append((flops, timed(world, functools.partial(matmul, a, b, out=c))))
    comm: dict[str, list[tuple[float, float]]] = {"allgather": [], "reduce_scatter": [], "push": [], "memory": []}
    for nbytes in CAL_BYTES:
        elements = nbytes // 2
        shard = torch.randn(elements // w, device=device, dtype=dtype)
        gathered = torch.empty(elements, device=device, dtype=dtype)
        gather = functools.partial(dist.all_gather_into_tensor, gathered, shard, group=group)
        comm["allgather"].append((nbytes, timed(world, gather)))
        full = torch.randn(elements, device=device, dtype=dtype)
        scatter = functools.partial(dist.reduce_scatter_tensor, shard, full, group=group)
        comm["reduce_scatter"].append((nbytes, timed(world, scatter)))
        if w > 1:
            buffer = rt.empty(elements, dtype=dtype)
            rt.barrier()
            peer = rt.peer_tensor(buffer, (world.rank + 1) % w)
            source = torch.randn(elements, device=device, dtype=dtype)
            push = functools.partial(peer.copy_, source)
            comm["push"].append((nbytes, timed(world, push)))
            rt.barrier()
            del buffer, peer, push
            gc.collect()
        else:
            comm["push"].append((nbytes, 1.0))
        source, target = (
            torch.randn(elements, device=device, dtype=dtype),
            torch.empty(elements, device=device, dtype=dtype),
        )
        comm["memory"].append((2.0 * nbytes, timed(world, functools.partial(target.copy_, source))))
        del source, target
    partial = Calibration(
        gpu=gpu,
        world_size=w,
        sms=num_sms(device.index),
        cublas=Rate.fit(*gemm_points["cublas"]),
        ours=Rate.fit(*gemm_points["ours"]),
        allgather=Rate.fit(*comm["allgather"]),
        reduce_scatter=Rate.fit(*comm["reduce_scatter"]),
        push=Rate.fit(*comm["push"]),
        memory=Rate.fit(*comm["memory"]),
        ag_fused_extra_ms=0.0,
        rs_fused_over_cublas=1.0,
        measured=f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {w} x {gpu}",
        version=CALIBRATION_VERSION,
    )
    if w == 1:
        return partial
    return _measure_fused(world, partial)


FusedProbe = Callable[[Any, Calibration], Mapping[str, float | Rate]]
"""``probe(world, partial) -> {field: value}``: an op times its fused kernel at the calibration shapes against
``partial`` (every rate already measured) and returns the :class:`Calibration` fields it measured (a number or,
for a field that is a rate, a :class:`Rate`)."""

_fused_probes: dict[str, FusedProbe] = {}


def register_fused_probe(op: str, probe: FusedProbe) -> None:
    """Let ``op`` measure its fused kernel during a calibration (each op registers itself when imported, so this
    module needs nothing from the ops)."""
    _fused_probes[op] = probe


def _measure_fused(world: Any, partial: Calibration) -> Calibration:
    """Run every registered op's probe and fold what it measured into ``partial`` (a field whose op is not
    imported keeps its default)."""
    measured: dict[str, Any] = {}
    for op in sorted(_fused_probes):
        measured.update(_fused_probes[op](world, partial))
    unknown = set(measured) - {
        "ag_fused_extra_ms",
        "rs_fused_over_cublas",
        "rs_fused_over_cublas_small_k",
        "rs_cublas_extra_ms",
        "ag_cublas_extra_ms",
        "ag_cublas_chunk_ms",
        "pull",
    }
    if unknown:
        raise ValueError(f"calibration probes returned fields that are not the fused kernels': {sorted(unknown)}")
    return dataclasses.replace(partial, **measured)
