"""The plan cache: the first call of a signature resolves everything once, later calls look it up and launch.

A *signature* is everything the op's kernels and buffers depend on: shapes, dtypes, strides, device, the
16-byte alignment of each operand, options, and the world (the cache is per world). The *plan* an op builds for it
holds the configuration, the workspace, the compiled kernels with grids and constants, the streams and events, so a
later call does one dict lookup and launches. A plan is never reused for another signature: the op keys it by all
of the above.

Building a plan is a collective: every rank checks that all ranks call with the same signature (else every rank
raises the op's error naming the differences), which also keeps the collective workspace allocations in step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

import torch
from torch._C import _len_torch_dispatch_stack

from triton_dist import runtime as rt
from triton_dist.ops.common.eager import is_dynamo_compiling, torch_compiler
from triton_dist.ops.common.errors import OpInputError
from triton_dist.runtime.world import lifecycle
from triton_dist.runtime.world.rank_agreement import gather_from_ranks

PlanT = TypeVar("PlanT")

_caches: list[PlanCache[Any]] = []

_Tensor = torch.Tensor

EagerEntry = tuple[Any, tuple[int, ...], int, int, int]
"""What :meth:`PlanCache.eager_plan` keeps per signature: the plan, the shape of its output, that output's bytes, and
the bytes that a's and b's elements span (0 for an empty operand), all fixed by the signature."""


def operand_signature(a: Any, b: Any, *options: Hashable) -> tuple[Any, ...] | None:
    """The signature of a two-operand call: both operands' shapes, strides, dtypes, devices and 16-byte alignment,
    then ``options``; None when an operand is not a tensor (the op's checks then say so)."""
    try:
        return (
            a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.device, b.device,
            a.data_ptr() % 16 == 0, b.data_ptr() % 16 == 0, *options,
        )  # fmt: skip
    except AttributeError:
        return None


def span_bytes(shape: tuple[int, ...], stride: tuple[int, ...], itemsize: int) -> int:
    """The bytes from the first to past the last element of a tensor of ``shape``, ``stride`` and ``itemsize``
    (its ``nbytes`` when contiguous; 0 when it has no element)."""
    if 0 in shape:
        return 0
    return (sum((size - 1) * step for size, step in zip(shape, stride, strict=True)) + 1) * itemsize


class _Plans(dict[Hashable, Any]):
    """The plans by signature; every change to them also forgets the eager entries derived from them (``derived``),
    so an entry never outlives or shadows its plan (whoever changes the plans: the cache, or a test's
    ``monkeypatch.setitem``)."""

    def __init__(self) -> None:
        super().__init__()
        self.derived: dict[Hashable, EagerEntry] = {}

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self.derived.clear()
        super().__setitem__(key, value)

    def __delitem__(self, key: Hashable) -> None:
        self.derived.clear()
        super().__delitem__(key)

    def clear(self) -> None:
        self.derived.clear()
        super().clear()

    def pop(self, key: Hashable, *default: Any) -> Any:
        self.derived.clear()
        return super().pop(key, *default)

    def popitem(self) -> tuple[Hashable, Any]:
        self.derived.clear()
        return super().popitem()

    def setdefault(self, key: Hashable, default: Any = None) -> Any:
        self.derived.clear()
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.derived.clear()
        super().update(*args, **kwargs)

    def __ior__(self, other: Any) -> _Plans:  # type: ignore[override,misc]
        self.update(other)
        return self


class PlanCache(Generic[PlanT]):
    """One op's plans by signature, for the current world."""

    def __init__(
        self,
        op: str,
        error: type[OpInputError] = OpInputError,
        *,
        eager_out: Callable[[PlanT], tuple[int, ...]] | None = None,
    ) -> None:
        """``eager_out``: the shape of a plan's output, for :meth:`eager_plan` (ops whose signature is
        ``operand_signature(a, b, None, False)`` and whose output has a's dtype and device)."""
        self.op = op
        self.error = error
        self._world: Any = None
        self._plans: _Plans = _Plans()
        self._agreed: set[str] = set()
        self._eager_out = eager_out
        _caches.append(self)

    def get(self, signature: Hashable) -> PlanT | None:
        """The plan of ``signature`` in the current world, or None (the fast path of every call)."""
        world = rt.current_world() if rt.is_initialized() else None
        if world is not self._world:
            self._plans.clear()
            self._agreed.clear()
            self._world = world
        return self._plans.get(signature)

    def eager_plan(self, a: Any, b: Any, out: Any) -> PlanT | None:
        """The plan of an eager call with operands ``a``, ``b`` and ``out`` (or None) when the call may launch it
        directly, else None: the caller then takes its long way, whose checks raise for bad input.

        The fast path of ``ag_gemm`` and ``gemm_rs`` (issue 24: its Python runs before the first launch, 5-10x
        slower when the CPU comes back from a wait than back to back, bench/results/host_cold_cpu.md), in one
        frame. A plan is returned only where the long way would launch the same plan with the same ``out``:

        - ``a`` and ``b`` are plain tensors, nothing is tracing or compiling, no dispatch mode is active (what
          ``plain_eager`` requires; a non-tensor operand or ``out`` goes the long way, whose checks name it);
        - the world is the one this cache's plans were built for (read where ``rt.current_world()`` reads it;
          any other goes the long way, whose ``get`` forgets the plans);
        - the signature is ``operand_signature(a, b, None, False)``, built here from the same reads, and has a plan;
        - ``out`` is a plain tensor of the plan's output shape, a's dtype and device, contiguous, on a 16-byte
          boundary and sharing no byte with ``a`` or ``b`` (``outputs.check_out``): the spans of ``a``, ``b`` and
          ``out`` follow from the signature, kept per signature, so only the addresses are compared here.
        """
        # Under Dynamo is_dynamo_compiling() is True: it stops here, before any call it could not trace.
        if (
            type(a) is not _Tensor
            or type(b) is not _Tensor
            or torch_compiler._is_compiling_flag  # with the next line: torch.compiler.is_compiling(), a frame less
            or is_dynamo_compiling()
            or _len_torch_dispatch_stack()
        ):
            return None
        if lifecycle._world is not self._world:  # rt.is_initialized() / rt.current_world() read this same global
            return None
        a_first, b_first = a.data_ptr(), b.data_ptr()
        a_shape, b_shape, a_stride, b_stride, dtype, device = (
            a.shape,
            b.shape,
            a.stride(),
            b.stride(),
            a.dtype,
            a.device,
        )
        signature = (
            a_shape, b_shape, a_stride, b_stride, dtype, b.dtype, device, b.device,
            a_first % 16 == 0, b_first % 16 == 0, None, False,
        )  # fmt: skip
        plans = self._plans
        entry = plans.derived.get(signature)
        if entry is None:
            plan = plans.get(signature)
            if plan is None or self._eager_out is None:
                return None
            shape = self._eager_out(plan)
            itemsize = dtype.itemsize
            entry = (
                plan, shape, math.prod(shape) * itemsize,
                span_bytes(a_shape, a_stride, itemsize), span_bytes(b_shape, b_stride, itemsize),
            )  # fmt: skip
            plans.derived[signature] = entry
        plan, shape, out_bytes, a_bytes, b_bytes = entry
        if out is None:
            return plan
        if (
            type(out) is not _Tensor
            or out.shape != shape
            or out.dtype is not dtype  # dtypes are singletons
            or out.device != device
            or not out.is_contiguous()
        ):
            return None
        first = out.data_ptr()
        end = first + out_bytes  # out is contiguous, of the plan's shape and a's dtype
        if first % 16 or (
            end != first
            and (
                (a_bytes and first < a_first + a_bytes and a_first < end)
                or (b_bytes and first < b_first + b_bytes and b_first < end)
            )
        ):
            return None
        return plan

    def build(self, signature: Hashable, described: Mapping[str, Any], make: Callable[[], PlanT]) -> PlanT:
        """Agree on ``described`` with every rank (once per world), then ``make()`` the plan of ``signature``.

        ``described`` says the call in words (shapes, dtypes, options) for the error raised on every rank when the
        ranks disagree. It leaves out what may differ between ranks without changing what they exchange (the
        alignment of a rank's own operands, say), which ``signature`` includes: a rank-local variant of a call the
        ranks agreed on builds its plan without another collective, so ranks never wait for each other here.
        Refused during CUDA-graph capture: run the op once eagerly first.
        """
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                f"{self.op}: the first call with {dict(described)} is being captured in a CUDA graph; run it once "
                "eagerly first (it checks the call with the peers and allocates its buffers, which capture cannot do)"
            )
        self.get(signature)  # forget another world's plans and agreements
        self.agree(described)
        plan = make()
        self._plans[signature] = plan
        return plan

    def agree(self, described: Mapping[str, Any], *, again: bool = False) -> None:
        """Raise the op's error on every rank unless all ranks call with equal ``described`` (a collective, run
        once per world and description; ``again``: run it even if these ranks agreed on it before)."""
        world = rt.current_world()
        agreement = repr(sorted(described.items()))
        if world.world_size > 1 and (again or agreement not in self._agreed):
            everyone = gather_from_ranks(dict(described), world.group)
            problems = []
            for field in described:
                values = [view.get(field) for view in everyone]
                if len(set(map(repr, values))) > 1:
                    problems.append(f"{field}: " + ", ".join(f"rank {r}: {v}" for r, v in enumerate(values)))
            if problems:
                raise self.error(f"{self.op}: ranks called with different inputs ({'; '.join(problems)})")
        self._agreed.add(agreement)

    def clear(self) -> None:
        """Forget every plan and agreement (the next call of each signature agrees and builds again)."""
        self._plans.clear()
        self._agreed.clear()

    def __len__(self) -> int:
        return len(self._plans)


def clear_all() -> None:
    """Forget the plans of every op and the world they were built for (``finalize()`` calls it: plans hold
    compiled launches that refer to the world, whose process group must not outlive it)."""
    for cache in _caches:
        cache.clear()
        cache._world = None


rt.on_finalize(clear_all)
