"""``PlanCache.eager_plan``, the one-frame fast path of ``ag_gemm`` and ``gemm_rs`` (issue 24: the Python before the
first launch, bench/host_cold.py), against the long way it shortcuts, on plain CPU tensors:

- it returns a plan only for the call's own signature (``operand_signature(a, b, None, False)``), and only for a
  plain eager call (no tensor subclass, no dispatch mode) in the world the plans were built for;
- it accepts exactly the ``out`` tensors that ``check_out`` accepts (shape, dtype, device, layout, alignment, and no
  byte shared with a or b, over random layouts and offsets into one storage), so no bad ``out`` skips the long way's
  error;
- what it keeps per signature never outlives or shadows the plan (a plan stored, replaced, removed, cleared);
- the public ops still raise their errors naming ``out`` on a planned call, and launch nothing then.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
from dispatch_recording import DispatchRecording

from triton_dist.ops.common.dispatch import PlanCache, operand_signature, span_bytes
from triton_dist.ops.common.eager import plain_eager
from triton_dist.ops.common.eager_graphs import EagerGraphs
from triton_dist.ops.common.errors import OpInputError
from triton_dist.ops.common.outputs import check_out
from triton_dist.runtime.world import lifecycle

ag = importlib.import_module("triton_dist.ops.ag_gemm.op")
rs = importlib.import_module("triton_dist.ops.gemm_rs.op")


class _Plan:
    """A stored plan of CPU tensors that records its runs and fills its output with 7."""

    def __init__(self, rows: int, n: int) -> None:
        self.rows = self.shard = rows
        self.n = n
        self.ran = 0
        self.graphs = EagerGraphs()

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        assert out is not None
        self.ran += 1
        return out.fill_(7.0)


def _cache(a: torch.Tensor, b: torch.Tensor, plan: Any) -> PlanCache[Any]:
    cache: PlanCache[Any] = PlanCache("test_op", eager_out=lambda plan: (plan.rows, plan.n))
    signature = operand_signature(a, b, None, False)
    cache.get(signature)  # binds the cache to the current world
    cache._plans[signature] = plan
    return cache


def _accepted(a: torch.Tensor, b: torch.Tensor, out: Any, shape: tuple[int, int]) -> bool:
    """Whether the long way's ``check_out`` accepts ``out`` for a call with ``a`` and ``b``."""
    try:
        check_out("test_op", out, shape, a.dtype, a.device, (("a", a), ("b", b)), OpInputError)
    except OpInputError:
        return False
    return True


def test_the_signature_is_operand_signatures() -> None:
    """The plan of an equal signature comes back; a call that differs in any part of it gets None, as the long
    way's lookup would; a call with the signature of another stored plan gets that plan."""
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(8, 16, generator=gen).to(torch.bfloat16), torch.randn(16, 4, generator=gen).to(torch.bfloat16)
    plan = _Plan(8, 4)
    cache = _cache(a, b, plan)
    assert cache.eager_plan(torch.randn(8, 16).to(torch.bfloat16), b.clone(), None) is plan
    unaligned = torch.empty(8 * 16 + 1, dtype=torch.bfloat16)[1:].view(8, 16)
    variants = {
        "a's strides": (a.t().contiguous().t(), b),
        "b's strides": (a, b.t().contiguous().t()),
        "a's dtype": (a.half(), b),
        "b's dtype": (a, b.half()),
        "a's shape": (a[:4], b),
        "b's shape": (a, b[:, :2]),
        "a's alignment": (unaligned, b),
        "b's device": (a, b.to("meta")),
    }
    for part, (x, y) in variants.items():
        assert cache.eager_plan(x, y, None) is None, f"another {part}: no plan"
        other = _Plan(8, 4)
        cache._plans[operand_signature(x, y, None, False)] = other
        assert cache.eager_plan(x, y, None) is other, f"another {part}: that signature's own plan"
    assert cache.eager_plan(a, b, None) is plan


def test_only_plain_eager_calls_in_the_plans_world_take_it(monkeypatch) -> None:
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    plan = _Plan(8, 4)
    cache = _cache(a, b, plan)
    assert cache.eager_plan(a, b, None) is plan
    assert cache.eager_plan(torch.nn.Parameter(a), b, None) is None, "a tensor subclass: the dispatcher's way"
    assert cache.eager_plan(a.tolist(), b, None) is None, "a non-tensor: the long way's checks name it"
    with DispatchRecording():
        assert cache.eager_plan(a, b, None) is None, "a dispatch mode: the registered op's way"
    assert plain_eager(a, b) and not torch.compiler.is_compiling()
    with monkeypatch.context() as patched:  # what export and compile sessions set: is_compiling() is True
        patched.setattr(torch.compiler, "_is_compiling_flag", True)
        assert torch.compiler.is_compiling() and not plain_eager(a, b)
        assert cache.eager_plan(a, b, None) is None, "while compiling: the registered op's way"
    monkeypatch.setattr(lifecycle, "_world", object())
    assert cache.eager_plan(a, b, None) is None, "another world: the long way (which forgets the plans)"


def test_out_is_accepted_exactly_where_check_out_accepts_it() -> None:
    """Outs drawn at random offsets into one storage with a and b (overlapping either, adjacent, apart,
    unaligned), of other shapes, dtypes, layouts and types: the fast path's answer is check_out's, every time."""
    gen = torch.Generator().manual_seed(7)
    storage = torch.zeros(4096, dtype=torch.bfloat16)
    rows, n, k = 6, 8, 16
    seen = {True: 0, False: 0}
    for case in range(400):
        offsets = torch.randint(0, 4096 - 4 * rows * k, (3,), generator=gen).tolist()
        if case % 4 == 0:  # aligned starts: more cases that only the overlap test refuses
            offsets = [offset // 8 * 8 for offset in offsets]
        a = storage[offsets[0] :][: rows * k].view(rows, k)
        b = storage[offsets[1] :][: 2 * k * n].view(k, 2 * n)[:, :n] if case % 3 == 0 else None
        b = storage[offsets[1] :][: k * n].view(k, n) if b is None else b
        if case % 5 == 0:  # column-major a over a wider span
            a = storage[offsets[0] :][: 2 * rows * k].view(k, 2 * rows)[:, :rows].t()
        out: Any = storage[offsets[2] :][: rows * n].view(rows, n)
        if case % 7 == 1:
            out = storage[offsets[2] :][: 2 * rows * n].view(n, 2 * rows)[:, :rows].t()  # not contiguous
        elif case % 7 == 2:
            out = torch.zeros(rows, n + 1, dtype=torch.bfloat16)
        elif case % 7 == 3:
            out = torch.zeros(rows, n, dtype=torch.float16)
        elif case % 7 == 4 and case % 2:
            out = out.tolist()
        plan = _Plan(rows, n)
        cache = _cache(a, b, plan)
        accepted = _accepted(a, b, out, (rows, n))
        assert (cache.eager_plan(a, b, out) is plan) == accepted, (
            f"case {case}: offsets {offsets}, a {tuple(a.stride())}, b {tuple(b.stride())}: check_out says {accepted}"
        )
        seen[accepted] += 1
    assert min(seen.values()) > 50, f"both answers drawn often: {seen}"


def test_empty_operands_share_no_byte_with_out() -> None:
    """An empty a and b (K = 0), views into out's storage, share no memory with it (wherever a torch version puts
    their pointers): the fast path and check_out both accept out."""
    storage = torch.zeros(256, dtype=torch.bfloat16)
    out = storage[:64].view(8, 8)
    a, b = storage[16:16].view(8, 0), storage[32:32].view(0, 8)
    plan = _Plan(8, 8)
    assert _cache(a, b, plan).eager_plan(a, b, out) is plan
    assert _accepted(a, b, out, (8, 8))
    assert span_bytes((8, 0), (0, 1), 2) == 0 and span_bytes((3, 5), (1, 3), 4) == 60


def test_what_it_keeps_follows_the_plans() -> None:
    """A stored plan replaced, removed, cleared (by the cache or by hand, as a test's monkeypatch does): the fast
    path returns the plan stored now, or None."""
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    signature = operand_signature(a, b, None, False)
    first, second = _Plan(8, 4), _Plan(8, 4)
    cache = _cache(a, b, first)
    assert cache.eager_plan(a, b, None) is first
    cache._plans[signature] = second
    assert cache.eager_plan(a, b, None) is second
    del cache._plans[signature]
    assert cache.eager_plan(a, b, None) is None
    for forget in (cache.clear, lambda: cache._plans.pop(signature), lambda: cache._plans.popitem()):
        cache._plans[signature] = first
        assert cache.eager_plan(a, b, None) is first
        forget()
        assert cache.eager_plan(a, b, None) is None
    cache._plans.update({signature: second})
    assert cache.eager_plan(a, b, None) is second


@pytest.mark.parametrize("name", ["ag_gemm", "gemm_rs"])
def test_a_planned_call_refuses_each_bad_out_and_runs_a_good_one(monkeypatch, name: str) -> None:
    """The public op on a stored plan: each bad ``out`` raises the op's error naming it and runs nothing; a good
    ``out`` (and none) runs the plan into it."""
    op, error = (ag, ag.AgGemmError) if name == "ag_gemm" else (rs, rs.GemmRsError)
    call = ag.ag_gemm if name == "ag_gemm" else rs.gemm_rs
    bf16 = torch.bfloat16
    storage = torch.zeros(8 * 16 + 64 + 16, dtype=bf16)
    a, b = storage[: 8 * 16].view(8, 16), torch.randn(16, 8).to(bf16)
    plan = _Plan(8, 8)
    op._plans.get(operand_signature(a, b, None, False))  # binds the cache to the current world (none)
    monkeypatch.setitem(op._plans._plans, operand_signature(a, b, None, False), plan)
    bad = {
        "shape": (torch.zeros(9, 8, dtype=bf16), "out has shape [9, 8]"),
        "dtype": (torch.zeros(8, 8, dtype=torch.float16), "out has dtype torch.float16"),
        "layout": (torch.zeros(8, 8, dtype=bf16).t(), "out has strides [1, 8]"),
        "alignment": (torch.zeros(65, dtype=bf16)[1:].view(8, 8), "out starts 2 bytes past a 16-byte boundary"),
        "overlap": (storage[8 * 16 - 8 :][:64].view(8, 8), "out overlaps the input a"),
        "type": ([[0.0] * 8] * 8, "out must be a torch.Tensor, got list"),
    }
    for problem, (out, message) in bad.items():
        with pytest.raises(error, match=f"^{name}: " + message.replace("[", r"\[").replace("]", r"\]")):
            call(a, b, out=out)
        assert plan.ran == 0, f"a refused out ({problem}) ran the plan"
    out = torch.zeros(8, 8, dtype=bf16)
    assert call(a, b, out=out) is out and bool((out == 7).all()) and plan.ran == 1
    assert bool((call(a, b) == 7).all()) and plan.ran == 2


def test_dynamo_traces_the_registered_op_without_a_graph_break(monkeypatch) -> None:
    """Under ``torch.compile(fullgraph=True)`` the fast path's compile test stops Dynamo before any read it could
    not trace, and each op's call becomes its registered custom op (a graph break would raise here), although a
    plan of the call's signature is stored."""
    from types import SimpleNamespace

    from triton_dist import runtime as rt

    monkeypatch.setattr(rt, "is_initialized", lambda: True)  # the fake kernels' world size
    monkeypatch.setattr(rt, "current_world", lambda: SimpleNamespace(world_size=1))
    a, b = torch.randn(8, 16).to(torch.bfloat16), torch.randn(16, 8).to(torch.bfloat16)
    for op in (ag, rs):
        op._plans.get(operand_signature(a, b, None, False))
        monkeypatch.setitem(op._plans._plans, operand_signature(a, b, None, False), _Plan(8, 8))
    targets: list[str] = []

    def backend(graph: torch.fx.GraphModule, inputs: Any) -> Any:
        targets.extend(str(node.target) for node in graph.graph.nodes if node.op == "call_function")
        return lambda *args: (torch.zeros(8, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16))

    torch._dynamo.reset()
    torch.compile(lambda a, b: (ag.ag_gemm(a, b), rs.gemm_rs(a, b)), backend=backend, fullgraph=True)(a, b)
    assert "triton_dist.ag_gemm" in targets and "triton_dist.gemm_rs" in targets, targets
