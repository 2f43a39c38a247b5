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

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

import torch

from triton_dist import runtime as rt
from triton_dist.ops.common.errors import OpInputError
from triton_dist.runtime.world.rank_agreement import gather_from_ranks

PlanT = TypeVar("PlanT")

_caches: list[PlanCache[Any]] = []


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


class PlanCache(Generic[PlanT]):
    """One op's plans by signature, for the current world."""

    def __init__(self, op: str, error: type[OpInputError] = OpInputError) -> None:
        self.op = op
        self.error = error
        self._world: Any = None
        self._plans: dict[Hashable, PlanT] = {}
        self._agreed: set[str] = set()
        _caches.append(self)

    def get(self, signature: Hashable) -> PlanT | None:
        """The plan of ``signature`` in the current world, or None (the fast path of every call)."""
        world = rt.current_world() if rt.is_initialized() else None
        if world is not self._world:
            self._plans.clear()
            self._agreed.clear()
            self._world = world
        return self._plans.get(signature)

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
