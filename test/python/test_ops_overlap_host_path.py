"""The eager host path of ag_gemm and gemm_rs on the CPU (issue 24: host µs per call), what its shortcuts must keep:

- the public function looks its plan up by the call's whole signature and runs it directly: a call that differs in
  strides, dtype, shape or 16-byte alignment never reaches another signature's plan;
- a plan's TMA descriptors come from a cache by address (``DescriptorCache``): each launch gets descriptors of the
  call's own a, b and C (address, shape, strides, block), and the cache keeps no tensor alive.
"""

from __future__ import annotations

import gc
import importlib
import weakref
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from triton_dist.ops.common.dispatch import operand_signature
from triton_dist.ops.common.eager_graphs import EagerGraphs
from triton_dist.ops.common.launch import DescriptorCache

ag = importlib.import_module("triton_dist.ops.ag_gemm.op")
rs = importlib.import_module("triton_dist.ops.gemm_rs.op")
tuning = importlib.import_module("triton_dist.ops.tuning")


class _Plan:
    """A stored plan (of CPU tensors: no graphs) that records the operands it ran with and marks its output."""

    rows = shard = 8
    n = 8

    def __init__(self) -> None:
        self.ran: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.graphs = EagerGraphs()

    def run(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        self.ran.append((a, b))
        assert out is not None, "the eager call allocates the output before the plan runs"
        return out.fill_(7.0)


def _planned(result: Any) -> bool:
    return isinstance(result, torch.Tensor) and bool((result == 7.0).all())


def _variants(a: torch.Tensor) -> dict[str, torch.Tensor]:
    """Operands like ``a`` that differ from it in one part of the signature each."""
    rows, cols = a.shape
    unaligned = torch.empty(rows * cols + 1, dtype=a.dtype)[1:].view(rows, cols)  # 2 bytes past a 16-byte boundary
    unaligned.copy_(a)
    return {
        "strides": a.t().contiguous().t(),  # the same shape, column-major
        "dtype": a.to(torch.float16),
        "shape": a[: rows // 2],
        "alignment": unaligned,
    }


@pytest.mark.parametrize("name", ["ag_gemm", "gemm_rs"])
def test_the_eager_call_runs_only_its_own_signatures_plan(monkeypatch, name: str) -> None:
    """The signature's plan runs for a call with equal operands (other tensors, other values); each variant of one
    part of the signature misses it and goes the long way (plan lookup, checks, build), stubbed here."""
    op = ag if name == "ag_gemm" else rs
    long_way: list[torch.Tensor] = []
    if name == "ag_gemm":
        call = ag.ag_gemm
        monkeypatch.setattr(ag, "ag_gemm_impl", lambda a, b, gathered: long_way.append(a) or ("long way", None))
    else:
        call = rs.gemm_rs
        monkeypatch.setattr(rs, "gemm_rs_with", lambda a, b: long_way.append(a) or "long way")
    a = torch.randn(8, 16).to(torch.bfloat16)
    b = torch.randn(16, 8).to(torch.bfloat16)
    plan = _Plan()
    signature = operand_signature(a, b, None, False)
    op._plans.get(signature)  # binds the cache to the current world (none)
    monkeypatch.setitem(op._plans._plans, signature, plan)
    same = torch.randn(8, 16).to(torch.bfloat16)
    assert _planned(call(same, b)) and plan.ran[-1][0] is same, "an equal signature runs the plan"
    for part, other in _variants(a).items():
        assert call(other, b) == "long way", f"a call with other {part} must not run the plan"
        assert long_way[-1] is other
    assert call(a, b.t().contiguous().t()) == "long way", "b's strides are part of the signature too"
    assert len(plan.ran) == 1


class _Launch:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def launch_on(self, stream: int, *leading: Any) -> None:
        self.log.append(leading)


class _StreamOps:
    def copy(self, destination: int, source: int, nbytes: int, stream: int) -> None:
        pass

    def order(self, name: str, first: int, then: int) -> None:
        pass


def _same_descriptor(got: TensorDescriptor, tensor: torch.Tensor, block: list[int]) -> bool:
    want = TensorDescriptor.from_tensor(tensor, block)
    return (
        got.base.data_ptr() == tensor.data_ptr()
        and list(got.shape) == list(want.shape)
        and list(got.strides) == list(want.strides)
        and got.block_shape == block
        and got.padding == want.padding
    )


def test_a_tma_call_gets_descriptors_of_its_own_operands(monkeypatch) -> None:
    """Three fused TMA calls, with new a and C each time and b kept: every launch's descriptors describe that
    call's a, b and C (a stale descriptor from the cache would point at the previous call's memory)."""
    monkeypatch.setattr(ag, "current_raw_stream", lambda index: 7)
    log: list[Any] = []
    w, m_local, k, n = 2, 16, 32, 64
    workspace = ag.Workspace(
        recv=torch.empty(w * m_local, k, dtype=torch.bfloat16),
        flags=torch.zeros(8, dtype=torch.int32),
        epoch=torch.zeros(1, dtype=torch.int32),
        barrier=torch.zeros(w, dtype=torch.int32),
        peer_recv={},
        peer_flags={},
    )
    a_block, b_block, c_block = [16, 32], [32, 64], [16, 32]
    recv_desc = TensorDescriptor.from_tensor(workspace.recv, a_block)
    plan = ag.FusedPlan(
        config=tuning.OverlapConfig(), workspace=workspace, rows=w * m_local, n=n, begin=_Launch([]),
        gemm=_Launch(log), use_tma=True, a_block=a_block, b_block=b_block, c_block=c_block, recv_desc=recv_desc,
        push=None, copies=(), side=SimpleNamespace(cuda_stream=9), stream_ops=_StreamOps(), no_comm=False,
        flag_count=w, first_copies=w - 1,
    )  # fmt: skip
    b = torch.randn(k, n).to(torch.bfloat16)
    outputs = []  # kept, so that every call's C is at a new address
    for _ in range(3):
        a = torch.randn(m_local, k).to(torch.bfloat16)
        c = plan.run(a, b)
        outputs.append((a, c))
        a_desc, recv, b_desc, c_desc = log[-1]
        assert recv is recv_desc
        assert _same_descriptor(a_desc, a, a_block) and _same_descriptor(b_desc, b, b_block)
        assert _same_descriptor(c_desc, c, c_block)
    assert len({id(call[2]) for call in log}) == 1, "b's descriptor was built once"


def test_descriptor_cache_reuses_by_address_keeps_nothing_alive_and_stays_bounded() -> None:
    cache = DescriptorCache([8, 16])
    t = torch.randn(8, 16)
    first = cache(t)
    assert cache(t) is first, "the same address: the same descriptor"
    assert cache(t.clone()) is not first, "another address: another descriptor"
    gone = weakref.ref(t)
    del t
    gc.collect()
    assert gone() is None, "the cache holds addresses, not tensors"
    kept = [torch.randn(8, 16) for _ in range(2 * DescriptorCache.MAX_ENTRIES)]
    for tensor in kept:
        assert cache(tensor).base.data_ptr() == tensor.data_ptr()
    assert len(cache._by_address) <= DescriptorCache.MAX_ENTRIES
    unaligned = torch.empty(8 * 16 + 1)[1:].view(8, 16)
    with pytest.raises(AssertionError, match="16-byte aligned"):
        cache(unaligned)
