"""moe_dispatch / moe_combine on GPUs (skipped with fewer than 2): the emulation's cases
(test_ops_moe_emulation.py) on real kernels, two dispatches in flight before their combines (the double-buffered
halves), and low-latency CUDA-graph replays with fresh routing each time, all against the torch reference.

    torchrun --nproc-per-node=2 test/python/test_ops_moe_gpu.py OUT_DIR   # what the test below runs

Each rank writes, per check, what differed from the reference to ``OUT_DIR/rank<r>.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


def _cpu(handle: Any) -> Any:
    """``handle`` with its tensor fields on the host (the reference's side)."""
    fields = {f.name: getattr(handle, f.name) for f in dataclasses.fields(handle) if f.name != "state"}
    moved = {name: value.cpu() if isinstance(value, torch.Tensor) else value for name, value in fields.items()}
    return dataclasses.replace(handle, **moved)


def _combine_problems(out: torch.Tensor, ys: list[torch.Tensor], refs: list[Any], rank: int) -> list[str]:
    from triton_dist.ops.moe import reference_combine

    exact = reference_combine(ys, [dataclasses.replace(h, dtype=torch.float32) for _, h in refs])[rank]
    try:  # fp32 sums in the reference's order; the GPU may fuse a multiply-add, so allow the last bf16 bit
        torch.testing.assert_close(out.cpu().float(), exact, rtol=8e-3, atol=1e-5)
    except AssertionError as error:
        return [f"combine: {str(error)[:300]}"]
    return []


def _worker(out_dir: str) -> None:
    from test_ops_moe_emulation import CASES, _case_inputs, _differences, _experts

    import triton_dist
    from triton_dist.ops.moe import reference_dispatch
    from triton_dist.testing import setup_distributed, sync

    world = setup_distributed(heap_size="2G")
    rank, size, cuda = world.rank, world.world_size, world.device
    record: dict[str, list[str]] = {}

    def one(name: str, seed: int, mode: str) -> tuple[Any, ...]:
        xs, idxs, weights, experts = _case_inputs(name, size, seed)
        cap = max(max(x.shape[0] for x in xs), 1) if mode == "low_latency" else None
        args = (xs[rank].to(cuda), idxs[rank].to(cuda), weights[rank].to(cuda), experts, mode, cap)
        refs = reference_dispatch(xs, idxs, weights, experts, mode=mode, max_tokens_per_rank=cap)
        return args, refs

    def check(key: str, args: tuple[Any, ...], refs: Any, dispatched: tuple[torch.Tensor, Any], out: Any) -> None:
        recv_x, handle = dispatched
        sync(key)
        problems = _differences(recv_x.cpu(), refs[rank][0], _cpu(handle), refs[rank][1], args[4])
        problems += _combine_problems(out, [_experts(rx, h.recv_expert) for rx, h in refs], refs, rank)
        record[key] = problems

    for number, name in enumerate(CASES):
        for mode in ("normal", "low_latency"):
            args, refs = one(name, number if name != "random" else 0, mode)
            dispatched = triton_dist.ops.moe_dispatch(*args)
            out = triton_dist.ops.moe_combine(_experts(*dispatched[:1], dispatched[1].recv_expert), dispatched[1])
            check(f"{name}#{number}/{mode}", args, refs, dispatched, out)
    for mode in ("normal", "low_latency"):  # two dispatches in flight, then their combines
        (args_a, refs_a), (args_b, refs_b) = one("k8", 11, mode), one("k8", 12, mode)
        first = triton_dist.ops.moe_dispatch(*args_a)
        second = triton_dist.ops.moe_dispatch(*args_b)
        out_a = triton_dist.ops.moe_combine(_experts(first[0], first[1].recv_expert), first[1])
        out_b = triton_dist.ops.moe_combine(_experts(second[0], second[1].recv_expert), second[1])
        check(f"overlap-a/{mode}", args_a, refs_a, first, out_a)
        check(f"overlap-b/{mode}", args_b, refs_b, second, out_b)
    # Low-latency in a CUDA graph: static inputs refilled with fresh routing before each replay.
    args, refs = one("k8", 20, "low_latency")
    static = [a.clone() for a in args[:3]]
    dispatched = triton_dist.ops.moe_dispatch(*static, *args[3:])  # eager first: plans, buffers, compilation
    triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])
    sync("graph warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dispatched = triton_dist.ops.moe_dispatch(*static, *args[3:])
        out = triton_dist.ops.moe_combine(_experts(dispatched[0], dispatched[1].recv_expert), dispatched[1])
    for replay in range(4):
        args, refs = one("k8", 30 + replay, "low_latency")
        for target, value in zip(static, args[:3], strict=True):
            target.copy_(value)
        graph.replay()
        check(f"graph-replay-{replay}/low_latency", args, refs, dispatched, out)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(record))
    triton_dist.finalize()
    sys.stdout.flush()
    os._exit(0)


@pytest.mark.skipif(GPUS < 2, reason=f"needs 2 GPUs, this machine has {GPUS}")
def test_moe_on_two_gpus_matches_the_reference(tmp_path: Path) -> None:
    from test_emulation_primitives import run_torchrun

    run_torchrun(Path(__file__), 2, [str(tmp_path)], extra_env={"TRITON_INTERPRET": "0"})
    for rank in range(2):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert len(record) >= 20
        failed = {key: problems for key, problems in record.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


if __name__ == "__main__":
    _worker(sys.argv[1])
