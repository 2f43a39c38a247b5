"""ag_gemm's cuBLAS path (``OverlapConfig(backend="cublas")``) on CPU ranks under the emulation, against torch.

Per world size (2 and 4 ranks, one process each, ``emulated_ranks.run_ranks``) every rank draws every rank's A and
the shared B from one seed, fresh per call, and runs the path: the begin kernel's barrier in Triton's interpreter,
the copy-engine producer as host copies into the peers' mapped receive slots each followed by its flag write, the
own shard's ``torch.mm``, then per peer its wait kernel (interpreted) and ``torch.mm``. Before each call the
receive buffer is poisoned (NaN: a GEMM that read a shard before it landed fails) and so is every new tensor the
call allocates (its output: a row block left unwritten fails). Two calls in a row with different data reuse the
plan and the receive slots; the second returns the gathered A too. ``clear_workspaces()`` then returns every block
the calls took to the symmetric heap.
"""

from __future__ import annotations

import pytest
import torch
from emulated_ranks import run_ranks

HEAP = "8M"


def _worker() -> list[str]:
    """This rank's problems (empty: every call matched torch) on the world ``run_ranks`` set up."""
    import triton_dist
    from triton_dist.ops.ag_gemm import op
    from triton_dist.ops.common import resources
    from triton_dist.ops.tuning import OverlapConfig

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    used_before = world.heap.stats()["used"]
    gen = torch.Generator().manual_seed(4321)  # every rank draws every rank's inputs alike
    config = OverlapConfig(backend="cublas")
    m_local, n, k = 5, 12, 16
    problems: list[str] = []
    real_empty = torch.empty

    def poisoned_empty(*args: object, **kwargs: object) -> torch.Tensor:
        tensor = real_empty(*args, **kwargs)  # type: ignore[call-overload]
        return tensor.fill_(float("nan")) if tensor.is_floating_point() else tensor

    for call in range(2):
        a_s = [torch.randn(m_local, k, generator=gen).to(torch.bfloat16) for _ in range(size)]
        b = torch.randn(k, n, generator=gen).to(torch.bfloat16)
        if call:  # the first call built the plan; this rank's slots are free until it passes the next barrier
            op.workspace(world, a_s[rank]).recv.fill_(float("nan"))
        torch.empty = poisoned_empty  # type: ignore[assignment]
        try:
            c, gathered = op.ag_gemm_impl(a_s[rank], b, return_gathered=call == 1, config=config)
        finally:
            torch.empty = real_empty  # type: ignore[assignment]
        want = torch.cat(a_s)
        if c.shape != (size * m_local, n) or c.dtype != torch.bfloat16:
            problems.append(f"call {call}: C is {list(c.shape)} {c.dtype}")
        elif torch.isnan(c.float()).any():
            problems.append(f"call {call}: {int(torch.isnan(c.float()).sum())} NaN elements of C (unwritten rows?)")
        elif not torch.allclose(c.float(), want.float() @ b.float(), atol=0.1, rtol=2e-2):
            problems.append(f"call {call}: max error {(c.float() - want.float() @ b.float()).abs().max():.3g}")
        if call == 1 and (gathered is None or not torch.equal(gathered, want)):
            problems.append("the gathered A differs from torch.cat of every rank's A")
        if call == 0 and gathered is not None:
            problems.append("a gathered A returned without return_gathered")
    plan = op.plan_for(a_s[rank], b, config)
    if not isinstance(plan, op.CublasPlan):
        problems.append(f"the plan is a {type(plan).__name__}")
    elif [segment for segment, _, _ in plan.waits] != [(rank + s) % size for s in range(1, size)]:
        problems.append(f"peers waited for in the order {[s for s, _, _ in plan.waits]}, not arrival order")
    elif plan.double is None:
        problems.append("the plan has no double receive buffers")
    del plan
    op.clear_workspaces()  # every ag_gemm buffer goes, the double receive buffers too
    left = resources.workspaces("ag_gemm") + resources.workspaces("ag_gemm.double")
    if left or world.heap.stats()["used"] != used_before:
        problems.append(f"clear_workspaces() left {len(left)} workspaces, {world.heap.stats()['used'] - used_before} B")
    return problems


@pytest.mark.parametrize("ranks", [2, 4])
def test_cublas_path_matches_torch_on_emulated_ranks(ranks: int) -> None:
    results = run_ranks(_worker, ranks, heap_size=HEAP).results
    failed = {rank: problems for rank, problems in enumerate(results) if problems}
    assert not failed, failed
