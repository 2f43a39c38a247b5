"""Where ``check_moe_nodes.py``'s one-node failures come from (2 GPUs, one node): which kernel of a large
normal-mode dispatch first goes wrong (or faults), which rows are wrong and what they hold, and whether ordering
the kernels on the host (a device synchronization and a barrier in between) makes them right.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \\
        python3 test/gpu/diagnose_moe_one_node.py [--backend cuda_ipc|nvshmem] [--only GROUP,...] [--timeout S]

Run it with plain ``python3``: it starts one ``torchrun --standalone --nproc-per-node=2`` per group of variants
(``--worker GROUP``), because a kernel fault (session 25: the first crowd dispatch of a fresh process raised
``cudaErrorInvalidAddressSpace``) leaves the process's CUDA context unusable: nothing can run after it in the same
process. A group that faults prints its ``DIAG`` lines up to the fault and the Python traceback's last frames, and
the next group starts in a fresh process. The groups, most informative first:

- ``stepwise``: the crowd routing's first call (fresh plan, buffers sized in the call), every kernel launch followed
  by a device synchronization and a barrier, and host checks of what that kernel wrote: after ``route`` this rank's
  counts row and summary; after ``push`` every slot of this rank's token buffer (meta row and payload, by source)
  against the reference; after ``expand`` the per-row meta, the ranges of ``comb_src`` / ``comb_dst`` /
  ``comb_rows`` (the addresses combine computes from them) and ``recv_x`` by source; the combine result at the end
  of the call. A fault is reported with the kernel it followed. Then the k = 4 routing's first call, the same way.
- ``first``: the crowd routing's first call without any ordering (session 25's fault; a fault's line names the
  kernels that finished before it, from a 4-byte copy into pinned host memory after each launch), then, if it
  survives, the earlier variants: the call again, a host barrier before the expand kernel or the push, the k = 4
  routing, ``programs_per_sm=1``, fewer tokens.
- ``warm``: check_moe_nodes' order: a small call of the same signature first, then the crowd (the buffers grow)
  and the k = 4 routing.
- ``no_watchdog``: ``first``'s first call with ``TRITON_DIST_WAIT_TIMEOUT_S=0`` (kernels without the wait
  watchdog library and its host-mapped records).
- ``sanitizer``: ``first``'s first call under ``compute-sanitizer --tool memcheck`` (skipped where it is not
  installed): the kernel, thread and address of the first bad access.

Informational (exit status 0 unless the launcher itself fails). ``--worker GROUP`` runs one group under torchrun
(``TRITON_INTERPRET=1`` with gloo: a smoke test on CPU ranks at 1/100 of the sizes; ``MOE_DIAG_SCALE=1``: the
GPU's sizes, minutes per call). The inputs are
``check_moe_nodes.py``'s failing cases (2000 / 1333 tokens, H 512: every token to rank 0 at k = 2, and random
routing at k = 4). Per variant ``_analyse`` reports the rows of ``recv_x`` that differ from the reference by source
rank, the token-buffer slots they were read from, what they hold (NaN: the poison, never written; zero; other),
whether the token buffer holds the right rows *now* (after a device synchronization: right now but wrong in
``recv_x`` means the expand kernel read them before they landed), and the data flags of the call's parity.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

GROUPS = ("stepwise", "first", "warm", "no_watchdog", "sanitizer")
"""The groups of variants, each in a process of its own, in the order the launcher runs them."""
REPO = Path(__file__).resolve().parents[2]


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


def _expected_slots(inputs: tuple[Any, ...], me: int) -> list[tuple[int, int]]:
    """``(source rank, source token)`` of each slot of rank ``me``'s token buffer, in slot order: the sources in rank
    order, each source's tokens bound for ``me`` (any of its experts there) in token order."""
    xs, idxs, _, experts = inputs
    per_rank = experts // len(xs)
    slots = []
    for source, idx in enumerate(idxs):
        bound = ((idx >= 0) & (idx.div(per_rank, rounding_mode="floor") == me)).any(dim=1)
        slots += [(source, int(t)) for t in bound.nonzero().flatten().tolist()]
    return slots


class StepChecks:
    """Host checks of what each kernel of one dispatch / combine wrote on this rank (``stepwise``): ``after`` is
    called once every rank's launch of kernel ``name`` has finished (synchronization, barrier)."""

    def __init__(self, rank: int, inputs: tuple[Any, ...]) -> None:
        from triton_dist.ops.moe import reference_dispatch

        self.rank = rank
        self.inputs = inputs
        self.refs = reference_dispatch(*inputs)
        self.slots = _expected_slots(inputs, rank)

    def after(self, plan: Any, name: str, leading: dict[str, Any]) -> str:
        """One line on what kernel ``name`` (launched with ``leading``) left on this rank, against the reference."""
        import torch

        xs, idxs, weights, experts = self.inputs
        size, me = len(xs), self.rank
        per_rank = experts // size
        if name == "route":
            row = leading["row_ptr"].cpu()
            want = [
                int(((idxs[me] >= 0) & (idxs[me].div(per_rank, rounding_mode="floor") == d)).any(dim=1).sum())
                for d in range(size)
            ]
            info = leading["info_ptr"].cpu().tolist()
            return f"counts row N[me, :] {row[:size].tolist()} (reference {want}); summary {info}"
        if name == "push":
            epoch = int(leading["epoch_ptr"].cpu().item())
            assert plan.buffers is not None
            tokens = plan.buffers.tokens[epoch % 2].cpu()
            meta = plan.buffers.meta[epoch % 2].cpu()
            k = idxs[0].shape[1]
            bad_meta: dict[int, int] = {}
            bad_row: dict[int, int] = {}
            poison = zero = 0
            first: list[int] = []
            for slot, (source, t) in enumerate(self.slots):
                head = meta[slot, : 1 + 2 * k]
                want_head = torch.cat(
                    [torch.tensor([t]), idxs[source][t].to(torch.int32), weights[source][t].float().view(torch.int32)]
                )
                if not torch.equal(head, want_head.to(torch.int32)):
                    bad_meta[source] = bad_meta.get(source, 0) + 1
                got = tokens[slot].view(torch.int16)
                if not torch.equal(got, xs[source][t].view(torch.int16)):
                    bad_row[source] = bad_row.get(source, 0) + 1
                    poison += int(bool((got == -1).all()))
                    zero += int(bool((got == 0).all()))
                    if len(first) < 4:
                        first.append(slot)
            # Combine's reduce reads tok_pos (final after the push) as offsets into the combine buffer.
            home = torch.where(idxs[me] >= 0, idxs[me].div(per_rank, rounding_mode="floor"), -1)
            bound = home[:, :, None] == torch.arange(size)
            bound = bound.any(dim=1)  # [T, W]: token t goes to rank d
            want_pos = torch.where(bound, bound.to(torch.int32).cumsum(dim=0) - 1, -1).to(torch.int32)
            tok_pos = leading["tok_pos_ptr"].cpu()
            bad_pos = int((tok_pos != want_pos).sum()) if tok_pos.shape == want_pos.shape else -1
            return (
                f"tok_pos entries wrong {bad_pos}; "
                f"epoch {epoch}, {len(self.slots)} slots (CAP {plan.buffers.token_slots}): wrong meta rows by source "
                f"{bad_meta}, wrong payload rows by source {bad_row} (all-0xFF {poison}, all-zero {zero}; first "
                f"slots {first})"
            )
        if name == "expand":
            want, ref = self.refs[me]
            assert plan.buffers is not None
            comb_src = leading["comb_src_ptr"].cpu()
            comb_dst = leading["comb_dst_ptr"].cpu()
            comb_rows = leading["comb_rows_ptr"].cpu()
            rows = int(want.shape[0])
            bad_src = int(((comb_src < 0) | (comb_src >= size)).sum())
            bad_dst = int(((comb_dst < 0) | (comb_dst >= plan.buffers.combine_slots)).sum())
            bad_rows = int(((comb_rows < -1) | (comb_rows >= rows)).sum())
            meta_wrong = [
                field
                for field, got in (("src_rank", leading["src_rank_ptr"]), ("src_token", leading["src_token_ptr"]),
                                   ("expert", leading["expert_ptr"]), ("slot", leading["slot_ptr"]))
                if not torch.equal(got.cpu(), getattr(ref, f"recv_{field}" if field != "slot" else "recv_topk_slot"))
            ]  # fmt: skip
            got = leading["recv_ptr"].cpu()
            wrong = (got.view(torch.int16) != want.view(torch.int16)).any(dim=1) if got.shape == want.shape else None
            by_source = (
                {s: int(wrong[ref.recv_src_rank == s].sum()) for s in range(size)} if wrong is not None else "shape"
            )
            return (
                f"out of range: comb_src {bad_src}, comb_dst {bad_dst} (combine slots "
                f"{plan.buffers.combine_slots}), comb_rows {bad_rows} (of {comb_rows.numel()}, rows {rows}); per-row "
                f"meta wrong: {meta_wrong or 'none'}; recv_x wrong rows by source {by_source}"
            )
        return ""


def _setup(backend: str) -> tuple[Any, bool]:
    """``triton_dist.init`` on this torchrun rank (GPUs, or CPU ranks under ``TRITON_INTERPRET=1``); returns the
    world and whether it is emulated."""
    import torch
    import torch.distributed as dist

    import triton_dist

    emulated = os.environ.get("TRITON_INTERPRET") == "1"  # a smoke test of this script on CPU ranks, small sizes
    if emulated:
        dist.init_process_group("gloo")
        return triton_dist.init(heap_size="64M", device="cpu"), True
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return triton_dist.init(heap_size="4G", backend=backend), False


def worker(group: str, backend: str) -> int:
    """Run ``group``'s variants on this torchrun rank, printing one ``DIAG`` line per rank and variant (and per
    kernel in ``stepwise``)."""
    import check_moe_nodes as check
    import torch
    import torch.distributed as dist

    import triton_dist
    import triton_dist.ops as ops
    from triton_dist import runtime as rt
    from triton_dist.ops.moe import MoeConfig
    from triton_dist.ops.moe import op as moe_op

    world, emulated = _setup(backend)
    backend = world.backend
    rank, size, device = world.rank, world.world_size, world.device
    original = moe_op._launch

    def say(line: str) -> None:
        print(f"DIAG rank {rank} {backend} {group} {line}", flush=True)

    def sync() -> None:
        if not emulated:
            torch.cuda.synchronize()

    def ordered(plan: Any, name: str, *args: Any, **kwargs: Any) -> None:
        """``_launch`` with every rank's push finished (device synchronization, barrier) before the kernels in
        ``stops``."""
        if name in stops:
            sync()
            dist.barrier()
            sync()
        original(plan, name, *args, **kwargs)

    stops = {"expand"}
    checks: list[StepChecks] = []

    def stepwise(plan: Any, name: str, leading: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        """``_launch``, then a device synchronization (a fault is reported with this kernel's name), a barrier, and
        ``StepChecks.after``'s line on what the kernel wrote."""
        original(plan, name, leading, *args, **kwargs)
        try:
            sync()
        except Exception as error:
            say(f"FAULT at the synchronization after kernel {name!r}: {type(error).__name__}: {error}")
            raise
        dist.barrier()
        line = checks[-1].after(plan, name, leading)
        if line:
            say(f"  after {name}: {line}")
        dist.barrier()

    def poison_all() -> None:
        rt.barrier()
        for plan in moe_op._plans._plans.values():
            if plan.buffers is not None:
                for tensor in (plan.buffers.tokens, plan.buffers.meta, plan.buffers.combine):
                    tensor.view(torch.uint8).fill_(0xFF)
        rt.barrier()

    # Which kernels finished before a fault: after each launch a 4-byte copy into pinned host memory, ordered on the
    # stream after the kernel (the host can still read it once a fault has made the CUDA context unusable).
    marks: list[str] = []
    progress = None if emulated else torch.zeros(256, dtype=torch.int32, pin_memory=True)
    stamps = None if emulated else torch.arange(1, 257, dtype=torch.int32, device=device)

    def marked(launch: Callable[..., None]) -> Callable[..., None]:
        def call(plan: Any, name: str, *args: Any, **kwargs: Any) -> None:
            launch(plan, name, *args, **kwargs)
            if progress is not None and stamps is not None and len(marks) < progress.numel():
                at = len(marks)
                progress[at : at + 1].copy_(stamps[at : at + 1], non_blocking=True)
            marks.append(name)

        return call

    def finished() -> str:
        if progress is None:
            return "(not tracked on CPU ranks)"
        landed = progress.tolist()
        done = [name for at, name in enumerate(marks) if at < len(landed) and landed[at] == at + 1]
        return f"kernels finished: {done}; launched, not finished: {marks[len(done) :]}"

    def run(name: str, inputs: tuple[Any, ...], launch: Callable[..., None] = original, **options: Any) -> None:
        xs, idxs, weights, experts = inputs
        poison_all()
        if launch is stepwise:
            checks.append(StepChecks(rank, inputs))
        marks.clear()
        if progress is not None:
            progress.zero_()
        moe_op._launch = marked(launch)
        try:
            x, idx, w = (t[rank].to(device) for t in (xs, idxs, weights))
            recv_x, handle = ops.moe_dispatch(x, idx, w, experts, **options)
            out = ops.moe_combine(check._experts(recv_x, handle.recv_expert), handle)
            sync()
            rt.barrier()
            line = _analyse(name, rank, inputs, x, recv_x, handle, out)
        except Exception as error:
            frames = "".join(traceback.format_exception(error)[-6:]).replace("\n", " | ")
            say(f"{name}: raised {type(error).__name__}: {error} | {finished()} | {frames[-1500:]}")
            if "CUDA" in str(error):  # a fault leaves this process's CUDA context unusable: end the group here
                raise
            line = "(no analysis: raised)"
        finally:
            moe_op._launch = original
        say(line)
        rt.barrier()

    scale = int(os.environ.get("MOE_DIAG_SCALE", "100" if emulated else "1"))  # sizes divided by it
    crowd = check.routing(3, size, [2000 // scale, 1333 // scale], 2, 512 // scale, only=0, none_rate=0.0)
    more = check.routing(4, size, [2000 // scale, 1333 // scale], 4, 512 // scale, none_rate=0.0)
    say(f"starts: {size} ranks on {device}")
    if group == "stepwise":
        run("crowd first call, each kernel synchronized and checked", crowd, stepwise)
        run("crowd again, each kernel synchronized and checked", crowd, stepwise)
        run("k=4 first call, each kernel synchronized and checked", more, stepwise)
        run("crowd again, plain", crowd)
    elif group in ("first", "no_watchdog", "sanitizer"):
        run("crowd first call (fresh plan, buffers sized in the call)", crowd)
        if group == "first":
            run("crowd again (buffers poisoned before)", crowd)
            run("crowd, expand after every rank's push (host barrier)", crowd, ordered)
            stops.clear()
            stops.add("push")
            run("crowd, push after every rank's route and host work (host barrier)", crowd, ordered)
            stops.clear()
            stops.add("expand")
            run("k=4 first call", more)
            run("k=4 again", more)
            run("k=4, expand after every rank's push (host barrier)", more, ordered)
            one: dict[str, Any] = {"config": MoeConfig(programs_per_sm=1)}
            run("crowd, programs_per_sm=1, first", crowd, **one)
            run("crowd, programs_per_sm=1, again", crowd, **one)
            small = check.routing(3, size, [500 // scale, 333 // scale], 2, 512 // scale, only=0, none_rate=0.0)
            run("crowd at 500 / 333 tokens", small)
    elif group == "warm":
        tokens = [5, 0] if emulated else [300, 0]
        run("small call first (check_moe_nodes' first case)", check.routing(1, size, tokens, 2, 512 // scale))
        run("crowd after it (the buffers grow)", crowd)
        run("crowd again", crowd)
        run("k=4 first call after them", more)
        run("k=4, expand after every rank's push (host barrier)", more, ordered)
    else:
        raise SystemExit(f"unknown group {group!r}; the groups: {', '.join(GROUPS)}")
    say("done")
    triton_dist.finalize()
    dist.destroy_process_group()
    return 0


def launch(groups: list[str], backend: str, timeout_s: float) -> int:
    """Run each group in a ``torchrun --standalone --nproc-per-node=2`` of its own (killed after ``timeout_s``),
    printing its ``DIAG`` lines and, when it failed, its last lines; returns 0."""
    script = Path(__file__).resolve()
    for group in groups:
        env = dict(os.environ)
        if group == "no_watchdog":
            env["TRITON_DIST_WAIT_TIMEOUT_S"] = "0"
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script),
                "--worker", group, "--backend", backend]  # fmt: skip
        if group == "sanitizer":
            found = [shutil.which("compute-sanitizer"), *sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"))]
            tool = next((path for path in found if path), None)
            if tool is None:
                print("=== sanitizer: skipped (no compute-sanitizer on PATH or in /usr/local/cuda*/bin)", flush=True)
                continue
            argv = [tool, "--tool", "memcheck", "--target-processes", "all", "--print-limit", "8", *argv]
        print(f"=== {group}: {' '.join(argv[1:])}", flush=True)
        started = time.monotonic()
        process = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            output, _ = process.communicate()
            print(f"=== {group}: killed after {timeout_s:.0f} s", flush=True)
        text = output.decode(errors="replace")
        lines = text.splitlines()
        reports = [line for line in lines if line.startswith("=========")][:60]  # compute-sanitizer's
        for line in lines:
            if line.startswith("DIAG") or line in reports:
                print(line[:3000], flush=True)
        if process.returncode:
            interesting = [line for line in lines if "Error" in line or "error" in line or "FAULT" in line]
            print(f"=== {group}: exit {process.returncode}; its error lines:", flush=True)
            for line in interesting[:12]:
                print("    " + line[:600], flush=True)
        print(f"=== {group}: {time.monotonic() - started:.0f} s", flush=True)
    return 0


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("legacy_backend", nargs="?", help=argparse.SUPPRESS)  # the old positional backend
    parser.add_argument("--backend", default=None, choices=("cuda_ipc", "nvshmem"))
    parser.add_argument("--worker", default=None, help="run this group on this torchrun rank")
    parser.add_argument("--only", default=",".join(GROUPS), help="comma-separated groups (launcher)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per group (launcher)")
    args = parser.parse_args()
    backend = args.backend or args.legacy_backend or "cuda_ipc"
    if args.worker is not None:
        return worker(args.worker, backend)
    if "LOCAL_RANK" in os.environ:  # started under torchrun without --worker: the first groups, as before
        return worker("first", backend)
    groups = [group for group in args.only.split(",") if group]
    unknown = [group for group in groups if group not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {unknown}; the groups: {', '.join(GROUPS)}")
    return launch(groups, backend, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
