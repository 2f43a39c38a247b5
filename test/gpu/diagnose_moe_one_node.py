"""Where ``check_moe_nodes.py``'s one-node failures come from (2 GPUs, one node): which rows of a large normal-mode
dispatch are wrong, what they hold, and whether ordering the expand kernel after every rank's push on the host
(a device synchronization and a barrier in between) makes them right.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \\
        torchrun --standalone --nproc-per-node=2 test/gpu/diagnose_moe_one_node.py [cuda_ipc|nvshmem]

Informational (exit status 0 unless it crashes): it prints one ``DIAG`` line per rank and variant. The inputs are
``check_moe_nodes.py``'s failing cases (2000 / 1333 tokens, H 512: every token to rank 0 at k = 2, and random
routing at k = 4). Per variant it reports the rows of ``recv_x`` that differ from the reference by source rank, the
token-buffer slots they were read from, what they hold (NaN: the poison, never written; zero; other), whether the
token buffer holds the right rows *now* (after a device synchronization: right now but wrong in ``recv_x`` means the
expand kernel read them before they landed), and the data flags of the call's parity.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _analyse(name: str, rank: int, inputs: tuple[Any, ...], x: Any, recv_x: Any, handle: Any, out: Any) -> str:
    """One line on what this rank's dispatch of ``x`` (``recv_x``, ``handle``) and combine (``out``) got wrong."""
    import check_moe_nodes as check
    import torch

    from triton_dist.ops.moe import MoeConfig, reference_dispatch
    from triton_dist.ops.moe import op as moe_op
    from triton_dist.ops.moe.config import flag_layout

    xs, idxs, weights, experts = inputs
    refs = reference_dispatch(xs, idxs, weights, experts)
    want, ref = refs[rank]
    got = recv_x.cpu()
    problems = check.compare(rank, recv_x, handle, out, inputs)
    if got.shape != want.shape:
        return f"{name}: shapes differ {list(got.shape)} / {list(want.shape)}; {problems}"
    wrong = (got.view(torch.int16) != want.view(torch.int16)).any(dim=1)
    rows = wrong.nonzero().flatten()
    src = ref.recv_src_rank
    by_source = {s: (int(wrong[src == s].sum()), int((src == s).sum())) for s in range(len(xs))}
    # The source tokens of the wrong rows, per source: their range and the push programs that sent them.
    tokens_of = {}
    for s in range(len(xs)):
        bad = ref.recv_src_token[wrong & (src == s)]
        if bad.numel():
            tokens_of[s] = (int(bad.min()), int(bad.max()), int(bad.unique().numel()))
    x_intact = torch.equal(x.cpu().view(torch.int16), xs[rank].view(torch.int16))
    differ = got[rows].view(torch.int16) != want[rows].view(torch.int16)
    per_row = differ.sum(dim=1)
    columns = differ.any(dim=0).nonzero().flatten()
    delta = (got[rows].float() - want[rows].float()).abs().nan_to_num(1e9).max().item() if rows.numel() else 0.0
    elements = (
        f"elements differing per wrong row: min {int(per_row.min())} max {int(per_row.max())}, columns "
        f"[{int(columns.min())}, {int(columns.max())}], max |diff| {delta:.3g}"
        if rows.numel()
        else "no element differs"
    )
    nan = int(torch.isnan(got[rows].float()).all(dim=1).sum()) if rows.numel() else 0
    zero = int((got[rows].float() == 0).all(dim=1).sum()) if rows.numel() else 0
    # Slots: the expand kernel's i (received token i) whose comb_rows hold row r.
    comb_rows, comb_src = handle.state[0].cpu(), handle.state[1].cpu()
    epoch = int(handle.state[5].cpu().item())
    slot_of_row = torch.full((got.shape[0],), -1, dtype=torch.int64)
    for i in range(comb_rows.shape[0]):
        for r in comb_rows[i].tolist():
            if r >= 0:
                slot_of_row[r] = i
    bad_slots = sorted({int(slot_of_row[r]) for r in rows.tolist()})
    config = handle.config or MoeConfig()
    key = (handle.mode, handle.hidden, handle.dtype, handle.num_experts, comb_rows.shape[1], None, recv_x.device,
           handle.fp8, config.whole_row, config.per_sm(handle.mode), config.pipelined, config.route_programs or 0,
           config.expand_block)  # fmt: skip
    plan = moe_op._plans.get(key)
    assert plan is not None and plan.buffers is not None, key
    tokens = plan.buffers.tokens[epoch % 2].cpu()
    now_wrong = []
    for i in range(comb_rows.shape[0]):
        r = next((r for r in comb_rows[i].tolist() if r >= 0), -1)
        if r >= 0 and not torch.equal(tokens[i].view(torch.int16), want[r].view(torch.int16)):
            now_wrong.append(i)
    flags = plan.workspace.flags[epoch % 2].cpu()
    data = flag_layout(plan.programs)["DATA_FLAGS"]
    data_flags = flags[data : data + len(xs) * plan.programs]
    set_flags = int((data_flags == epoch).sum())
    span = f"[{bad_slots[0]}, {bad_slots[-1]}] ({len(bad_slots)} slots)" if bad_slots else "none"
    by_src_slots = {}
    for s in range(len(xs)):
        mine = (comb_src == s).nonzero().flatten()
        if mine.numel():
            by_src_slots[s] = (int(mine.min()), int(mine.max()))
    return (
        f"{name}: epoch {epoch}, {int(wrong.sum())} of {got.shape[0]} rows wrong; by source (wrong, rows) {by_source}; "
        f"wrong rows' source tokens (min, max, distinct) {tokens_of}; {elements}; this rank's x intact {x_intact}; "
        f"slots per source {by_src_slots}; wrong rows' slots {span}; wrong rows all-NaN {nan}, all-zero {zero}; "
        f"token buffer wrong now at {len(now_wrong)} slots {now_wrong[:3]}...{now_wrong[-3:]}; data flags == epoch: "
        f"{set_flags} of {data_flags.numel()}; CAP {plan.buffers.token_slots}, programs {plan.programs}; "
        f"problems: {'; '.join(problems)[:300] or 'none'}"
    )


def main() -> int:
    import check_moe_nodes as check
    import torch
    import torch.distributed as dist

    import triton_dist
    import triton_dist.ops as ops
    from triton_dist import runtime as rt
    from triton_dist.ops.moe import MoeConfig
    from triton_dist.ops.moe import op as moe_op

    backend = sys.argv[1] if len(sys.argv) > 1 else "cuda_ipc"
    emulated = os.environ.get("TRITON_INTERPRET") == "1"  # a smoke test of this script on CPU ranks, small sizes
    if emulated:
        dist.init_process_group("gloo")
        world = triton_dist.init(heap_size="64M", device="cpu")
        backend = world.backend
    else:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        world = triton_dist.init(heap_size="4G", backend=backend)
    rank, size, device = world.rank, world.world_size, world.device
    original = moe_op._launch

    def sync() -> None:
        if not emulated:
            torch.cuda.synchronize()

    def ordered(plan: Any, name: str, *args: Any, **kwargs: Any) -> None:
        """``_launch`` with every rank's push finished (device synchronization, barrier) before the expand kernel."""
        if name in stops:
            sync()
            dist.barrier()
            sync()
        original(plan, name, *args, **kwargs)

    stops = {"expand"}

    def poison_all() -> None:
        rt.barrier()
        for plan in moe_op._plans._plans.values():
            if plan.buffers is not None:
                for tensor in (plan.buffers.tokens, plan.buffers.meta, plan.buffers.combine):
                    tensor.view(torch.uint8).fill_(0xFF)
        rt.barrier()

    def run(name: str, inputs: tuple[Any, ...], launch: Callable[..., None] = original, **options: Any) -> None:
        xs, idxs, weights, experts = inputs
        poison_all()
        moe_op._launch = launch
        try:
            x, idx, w = (t[rank].to(device) for t in (xs, idxs, weights))
            recv_x, handle = ops.moe_dispatch(x, idx, w, experts, **options)
            out = ops.moe_combine(check._experts(recv_x, handle.recv_expert), handle)
            sync()
            rt.barrier()
            line = _analyse(name, rank, inputs, x, recv_x, handle, out)
        except Exception as error:  # noqa: BLE001 (informational: the reason is the result)
            line = f"{name}: raised {type(error).__name__}: {error}"
        finally:
            moe_op._launch = original
        print(f"DIAG rank {rank} {backend} {line}", flush=True)
        rt.barrier()

    scale = 100 if emulated else 1
    crowd = check.routing(3, size, [2000 // scale, 1333 // scale], 2, 512 // scale, only=0, none_rate=0.0)
    more = check.routing(4, size, [2000 // scale, 1333 // scale], 4, 512 // scale, none_rate=0.0)
    run("crowd first call (fresh plan, buffers sized in the call)", crowd)
    run("crowd again (buffers poisoned before)", crowd)
    run("crowd, expand after every rank's push (host barrier)", crowd, ordered)
    run("crowd again, plain", crowd)
    stops.clear()
    stops.add("push")
    run("crowd, push after every rank's route and host work (host barrier)", crowd, ordered)
    stops.clear()
    stops.add("expand")
    run("k=4 first call", more)
    run("k=4 again", more)
    run("k=4, expand after every rank's push (host barrier)", more, ordered)
    one = {"config": MoeConfig(programs_per_sm=1)}
    run("crowd, programs_per_sm=1, first", crowd, **one)
    run("crowd, programs_per_sm=1, again", crowd, **one)
    small = check.routing(3, size, [500 // scale, 333 // scale], 2, 512 // scale, only=0, none_rate=0.0)
    run("crowd at 500 / 333 tokens", small)
    run("crowd at 500 / 333 tokens again", small)
    triton_dist.finalize()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
