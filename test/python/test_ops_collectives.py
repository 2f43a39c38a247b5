"""The NCCL fallbacks of ag_gemm and gemm_rs call the process group's collective with options built once.

``ops.common.collectives`` resolves the group's own method; these tests pin that the fallbacks' per-call work is the
hand-written baseline's (the collective and the GEMM) without the c10d Python wrappers, and that the results are
right, on a one-rank gloo world under the CPU emulation.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.distributed as dist
from dispatch_recording import DispatchRecording

from triton_dist.ops.common.collectives import all_gather_method, reduce_scatter_method
from triton_dist.ops.common.errors import OpInputError


def test_a_group_without_the_collective_is_named() -> None:
    with pytest.raises(OpInputError, match="all-gather"):
        all_gather_method(object())
    with pytest.raises(OpInputError, match="reduce-scatter"):
        reduce_scatter_method(object())


def test_options_are_synchronous_and_sum() -> None:
    class Group:
        def _allgather_base(self) -> None: ...

        def _reduce_scatter_base(self) -> None: ...

    _, gather_options = all_gather_method(Group())
    _, scatter_options = reduce_scatter_method(Group())
    assert not getattr(gather_options, "asyncOp", False) and not getattr(scatter_options, "asyncOp", False)
    assert scatter_options.reduceOp == dist.ReduceOp.SUM


@pytest.mark.filterwarnings("ignore:.*all_gather_into_tensor.*:FutureWarning")
def test_ag_gemm_fallback_runs_the_baselines_ops_without_the_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    import triton_dist
    from triton_dist.ops.tuning import OverlapConfig

    op = importlib.import_module("triton_dist.ops.ag_gemm.op")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        triton_dist.init(heap_size="1M", device="cpu")
        nccl = dataclasses.replace(OverlapConfig(), backend="nccl")
        generator = torch.Generator().manual_seed(24)
        a, b = (torch.randn(shape, generator=generator).to(torch.bfloat16) for shape in [(16, 8), (8, 12)])
        op.ag_gemm_impl(a, b, config=nccl)  # builds the plan
        plan = op.plan_for(a, b, nccl)
        assert isinstance(plan, op.UnfusedPlan)
        assert plan.gathered is not None
        plan.gathered.fill_(float("nan"))  # poisoned: the all-gather must write all of it

        def no_wrapper(*args: object, **kwargs: object) -> None:
            raise AssertionError("the fallback called a c10d Python wrapper")

        with monkeypatch.context() as patched:
            for name in ("all_gather_into_tensor", "all_gather_single"):
                for module in (dist, dist.distributed_c10d):
                    patched.setattr(module, name, no_wrapper, raising=False)
            with DispatchRecording() as ours:
                c, _ = op.ag_gemm_impl(a, b, config=nccl)
        gathered = [op for op in ours.ops if "allgather" in op or "all_gather" in op]
        matmuls = [op for op in ours.ops if op.startswith("aten.mm") or op.startswith("aten.matmul")]
        assert len(gathered) == 1 and len(matmuls) == 1, ours.ops
        assert not [op for op in ours.ops if "copy" in op or "fill" in op or "_to_copy" in op], ours.ops
        torch.testing.assert_close(c, (a.float() @ b.float()).to(torch.bfloat16), rtol=1e-2, atol=1e-2)
    finally:
        triton_dist.finalize()
        dist.destroy_process_group()
