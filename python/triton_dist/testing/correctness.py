"""Checking results: poisoned outputs, per-dtype tolerances, comparison with a torch reference and across ranks.

Poison an output before the kernel writes it (``poison_``), so an element the kernel forgot keeps a value no
correct result has: NaN for floating types, the most negative integer for integer types. ``assert_close`` reports
such leftovers by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")

# (rtol, atol) per dtype: the rounding of one result in that dtype, with atol for results near zero. Pass looser
# values for long accumulations (e.g. a GEMM with large K in bf16).
_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}
for _name in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        _TOLERANCES[getattr(torch, _name)] = (2.5e-1 if "e5m2" in _name else 1.25e-1, 1e-2)


def tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` for results of ``dtype``; ``(0, 0)`` for integer and bool types (exact)."""
    if dtype in _TOLERANCES:
        return _TOLERANCES[dtype]
    if not dtype.is_floating_point and not dtype.is_complex:
        return 0.0, 0.0
    raise ValueError(f"no default tolerance for {dtype}; pass rtol= and atol=")


def _poison_value(dtype: torch.dtype) -> float | int | bool:
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    return torch.iinfo(dtype).min


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill ``tensor`` in place with a value no correct result has (NaN; the smallest integer) and return it."""
    return tensor.fill_(_poison_value(tensor.dtype))


def assert_close(
    out: torch.Tensor,
    ref: torch.Tensor,
    dtype: torch.dtype | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    name: str = "output",
) -> None:
    """Raise AssertionError unless ``out`` matches the torch reference ``ref`` within the tolerances of ``dtype``.

    ``dtype`` (default ``out.dtype``) picks ``tolerances(dtype)``; ``rtol``/``atol`` override them. Both tensors
    are compared in float64 on ``out``'s device, elementwise ``|out - ref| <= atol + rtol * |ref|``; NaN never
    matches (so a poisoned element that was never written fails). The message names the number of mismatches,
    the worst element's index and values, and how many elements still hold the poison value.
    """
    if out.shape != ref.shape:
        raise AssertionError(f"{name}: shape {list(out.shape)} != reference shape {list(ref.shape)}")
    dtype = dtype if dtype is not None else out.dtype
    default_rtol, default_atol = tolerances(dtype)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    exact = not (out.dtype.is_floating_point or out.dtype.is_complex) and rtol == 0 and atol == 0
    got = out.detach().to(torch.float64)
    want = ref.detach().to(device=out.device, dtype=torch.float64)
    error = (got - want).abs()
    if exact:  # integers compared as integers: float64 would round int64 values beyond 2**53
        bad = out.detach() != ref.detach().to(device=out.device, dtype=out.dtype)
    else:
        bad = ~(error <= atol + rtol * want.abs())
    mismatches = int(bad.sum().item())
    if not mismatches:
        return
    poison = _poison_value(out.dtype)
    unwritten = int((out != out).sum().item()) if isinstance(poison, float) else int((out == poison).sum().item())
    worst = int(torch.where(bad.flatten(), error.flatten().nan_to_num(float("inf")), -1.0).argmax().item())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), out.shape)) if out.dim() else ()
    raise AssertionError(
        f"{name}: {mismatches} of {out.numel()} elements differ from the reference beyond rtol={rtol:g}, "
        f"atol={atol:g} ({dtype}); worst at {list(index)}: got {got.flatten()[worst].item()!r}, expected "
        f"{want.flatten()[worst].item()!r}; {unwritten} elements still hold the poison value {poison!r} "
        f"(never written?)"
    )


def allclose_across_ranks(
    tensor: torch.Tensor, *, rtol: float = 0.0, atol: float = 0.0, group: dist.ProcessGroup | None = None
) -> bool:
    """Whether ``tensor`` is the same (within ``rtol``/``atol``) on every rank of ``group`` (a collective).

    Every rank gets the same answer. Use it for results every rank must agree on (an all-reduce, an all-gather);
    the default tolerance is exact. Without a process group it returns True.
    """
    if not dist.is_initialized():
        return True
    world_size = dist.get_world_size(group)
    local = tensor.detach().contiguous()
    gathered = [torch.empty_like(local) for _ in range(world_size)]
    dist.all_gather(gathered, local, group=group)
    if rtol == 0 and atol == 0:
        return all(torch.equal(other, gathered[0]) for other in gathered)
    first = gathered[0].to(torch.float64)
    return all(bool(torch.allclose(other.to(torch.float64), first, rtol=rtol, atol=atol)) for other in gathered)


EAGER_GRAPH_KEYS = (0, 0, 0, 1, 1, 1, 0, 1, 0, 1, 0, 0)
"""Which of two operand / output sets each call of ``eager_replay_calls`` uses: a key seen once, then repeated (an
op captures the second call and replays later ones), alternated, with call 7 eager (graphs off) in the middle."""


def eager_replay_calls(
    operands: list[tuple[torch.Tensor, torch.Tensor]],
    outs: list[torch.Tensor],
    fresh: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    call: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    snapshot: Callable[[torch.Tensor], T],
    *,
    from_idle: bool = False,
) -> list[tuple[T, torch.Tensor, torch.Tensor]]:
    """Exercise an op's eager calls replayed from its own CUDA graphs (``ops.common.eager_graphs``) the way a model
    does: call ``call(a, b, out)`` once per entry of ``EAGER_GRAPH_KEYS`` on the set it names (``operands[key]``,
    ``outs[key]``), each time after refilling that set's operands in place with ``fresh(i)`` and poisoning its
    output with NaN; call 7 runs with the replays off; before call i the GPU of rank ``i % world size`` sleeps a
    little, so the ranks start out of step. Nothing synchronizes with the host in between, unless ``from_idle``:
    then each call starts from an idle GPU (a device synchronization, no sleep), as the fallback paths need to
    replay (a busy GPU makes them launch eagerly). Returns, per call,
    ``snapshot(out)`` (taken in stream order right after the call, e.g. a clone) and the fresh operands it used,
    for comparison with a reference afterwards."""
    from triton_dist.ops.common import eager_graphs

    rank = dist.get_rank() if dist.is_initialized() else 0
    ranks = dist.get_world_size() if dist.is_initialized() else 1
    results = []
    for i, key in enumerate(EAGER_GRAPH_KEYS):
        a, b = operands[key]
        fresh_a, fresh_b = fresh(i)
        a.copy_(fresh_a)
        b.copy_(fresh_b)
        outs[key].fill_(float("nan"))
        if from_idle:
            torch.cuda.synchronize()
        elif rank == i % ranks:
            torch.cuda._sleep(50_000)
        eager_graphs.set_enabled(i != 7)
        try:
            call(a, b, outs[key])
        finally:
            eager_graphs.set_enabled(True)
        results.append((snapshot(outs[key]), fresh_a, fresh_b))
    return results


def mixed_replay_calls(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    fresh: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    call: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object],
    snapshot: Callable[[torch.Tensor], T],
    calls: int = 8,
) -> list[tuple[T, torch.Tensor, torch.Tensor]]:
    """Eager calls of an op on one operand / output set from a common idle start, with one rank's GPU kept busy per
    call (rank ``i % world size`` sleeps before call ``i``) and the others idle: where an op's replay choice depends
    on its stream being idle, one rank then launches eagerly while its peers capture or replay. Before each call the
    operands are refilled in place with ``fresh(i)``, the output poisoned with NaN and the ranks pass a barrier.
    Returns, per call, ``snapshot(out)`` (taken in stream order after the call) and the fresh operands it used."""
    from triton_dist import runtime as rt

    rank = dist.get_rank() if dist.is_initialized() else 0
    ranks = dist.get_world_size() if dist.is_initialized() else 1
    results = []
    for i in range(calls):
        fresh_a, fresh_b = fresh(i)
        a.copy_(fresh_a)
        b.copy_(fresh_b)
        out.fill_(float("nan"))
        rt.barrier()
        if rank == i % ranks:
            torch.cuda._sleep(1_000_000)
        call(a, b, out)
        results.append((snapshot(out), fresh_a, fresh_b))
    return results
