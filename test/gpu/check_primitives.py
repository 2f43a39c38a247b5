"""Every triton_dist primitive on GPUs, on random data with poisoned outputs, plus the runtime's bad-input errors.

    torchrun --nproc-per-node=N test/gpu/check_primitives.py      (N >= 2; exit code 0 iff every check passed)
    TRITON_DIST_BACKEND=nvshmem torchrun ...                       (the same checks on the NVSHMEM heap)

Each check logs PASS/FAIL per rank; a failing check does not stop the others.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

REPO = Path(__file__).resolve().parents[2]

import triton_dist.language as dl  # noqa: E402
from triton_dist import runtime as rt  # noqa: E402
from triton_dist.testing import (  # noqa: E402
    Checks,
    env_without_launcher,
    finish,
    main_guard,
    rank0_print,
    rank_print,
    setup_distributed,
    sync,
)

POISON = -7777


def make_data(owner: int, round_index: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Rank ``owner``'s data for a round; every rank can regenerate it to check what it received."""
    generator = torch.Generator(device="cuda").manual_seed(100_003 * owner + 7919 * round_index + n)
    if dtype.is_floating_point:
        return torch.randn(n, generator=generator, device="cuda").to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=generator, device="cuda", dtype=dtype)


@triton.jit
def probe_context(out_ptr, heap_ptr):
    tl.store(out_ptr + 0, dl.rank().to(tl.int64))
    tl.store(out_ptr + 1, dl.num_ranks().to(tl.int64))
    for peer in range(0, dl.num_ranks()):
        delta = dl.symm_at(heap_ptr, peer).to(tl.int64) - heap_ptr.to(tl.int64)
        tl.store(out_ptr + 2 + peer, delta)


@triton.jit
def probe_rank_axes(out_ptr):
    tl.store(out_ptr + 0, dl.rank("local"))
    tl.store(out_ptr + 1, dl.num_ranks("local"))
    tl.store(out_ptr + 2, dl.rank("node"))
    tl.store(out_ptr + 3, dl.num_ranks("node"))
    tl.store(out_ptr + 4, dl.rank(axis="world"))
    tl.store(out_ptr + 5, dl.num_ranks(axis="world"))


@triton.jit
def read_peer(src_ptr, out_ptr, n, peer, SCALAR_FORM: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    if SCALAR_FORM:
        values = tl.load(dl.symm_at(src_ptr, peer) + offsets, mask=mask)
    else:
        values = tl.load(dl.symm_at(src_ptr + offsets, peer), mask=mask)
    tl.store(out_ptr + offsets, values, mask=mask)


@triton.jit
def write_all_peers(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    """Store this rank's ``src`` into slot ``rank`` of every rank's ``dst``."""
    me = dl.rank()
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    values = tl.load(src_ptr + offsets, mask=mask)
    for peer in range(0, dl.num_ranks()):
        tl.store(dl.symm_at(dst_ptr + me * n + offsets, peer), values, mask=mask)


@triton.jit(do_not_specialize=["value"])
def set_everywhere_then_wait(flags_ptr, value, SCOPE: tl.constexpr):
    me = dl.rank()
    for peer in range(0, dl.num_ranks()):
        dl.notify(flags_ptr + me, peer, signal=value, sig_op="set", comm_scope=SCOPE)
    dl.wait(flags_ptr, dl.num_ranks(), "sys", "acquire", waitValue=value)


@triton.jit(do_not_specialize=["expected"])
def add_everywhere_then_wait(counter_ptr, expected, SCOPE: tl.constexpr):
    me = dl.rank()
    for peer in range(0, dl.num_ranks()):
        dl.notify(counter_ptr, peer, signal=me + 1, sig_op="add", comm_scope=SCOPE)
    dl.wait(counter_ptr, 1, "sys", "acquire", waitValue=expected)


@triton.jit(do_not_specialize=["expected"])
def add_to_self_then_wait(counter_ptr, expected):
    dl.notify(counter_ptr, dl.rank(), signal=1, sig_op="add", comm_scope="gpu")
    dl.wait(counter_ptr, 1, "gpu", "acquire", waitValue=expected)


@triton.jit(do_not_specialize=["epoch"])
def pass_right(src_ptr, inbox_ptr, flag_ptr, out_ptr, n, epoch, BLOCK: tl.constexpr):
    """Send ``src`` into the right neighbour's inbox, flag it, wait for the left neighbour's, copy the inbox."""
    me = dl.rank()
    ranks = dl.num_ranks()
    right = (me + 1) % ranks
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dl.symm_at(inbox_ptr + offsets, right), tl.load(src_ptr + offsets, mask=mask), mask=mask)
    dl.notify(flag_ptr, right, signal=epoch, sig_op="set", comm_scope="intra_node")
    token = dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=epoch)
    inbox_ptr = dl.consume_token(inbox_ptr, token)
    tl.store(out_ptr + offsets, tl.load(inbox_ptr + offsets, mask=mask), mask=mask)


@triton.jit(do_not_specialize=["signal", "expected"])
def notify_vector(flags_ptr, signal, expected, N: tl.constexpr, OP: tl.constexpr):
    """Notify N flags of the right neighbour at once (a tensor of pointers); wait for the left neighbour's N."""
    me = dl.rank()
    ranks = dl.num_ranks()
    right = (me + 1) % ranks
    left = (me + ranks - 1) % ranks
    dl.notify(flags_ptr + me * N + tl.arange(0, N), right, signal=signal, sig_op=OP, comm_scope="intra_node")
    dl.wait(flags_ptr + left * N, N, "sys", "acquire", waitValue=expected)


@triton.jit
def read_stamps(stamps_ptr, out_ptr):
    for peer in range(0, dl.num_ranks()):
        tl.store(out_ptr + peer, tl.load(dl.symm_at(stamps_ptr, peer)))


def check_context(checks: Checks, world: rt.World) -> None:
    out = rt.full((2 + world.world_size,), POISON, dtype=torch.int64)
    probe_context[(1,)](out, out)
    rt.barrier()
    bases = world.heap.bases
    expected = [world.rank, world.world_size] + [base - bases[world.rank] for base in bases]
    got = out.tolist()
    checks.check("dl.rank / dl.num_ranks / symm_at deltas match the heap bases", got == expected, f"{got[:6]}...")


def check_rank_axes(checks: Checks, world: rt.World) -> None:
    out = rt.full((6,), POISON, dtype=torch.int32)
    probe_rank_axes[(1,)](out)
    local, per_node = world.nodes.local_rank_of(world.rank), world.nodes.local_world_size_of(world.rank)
    expected = [local, per_node, world.rank // per_node, world.world_size // per_node, world.rank, world.world_size]
    got = out.tolist()
    checks.check("dl.rank / dl.num_ranks along 'local' and 'node' match the world's layout", got == expected, f"{got}")


def check_reads(checks: Checks, world: rt.World) -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.int64):
        for n in (1, 1000, 70_001):
            src = rt.empty(n, dtype=dtype)
            src.copy_(make_data(world.rank, 0, n, dtype))
            rt.barrier()
            for peer in range(world.world_size):
                expected = make_data(peer, 0, n, dtype)
                for scalar_form in (False, True):
                    out = torch.full((n,), POISON, device="cuda").to(dtype)
                    read_peer[(triton.cdiv(n, 1024),)](src, out, n, peer, SCALAR_FORM=scalar_form, BLOCK=1024)
                    sync("read_peer")
                    form = "symm_at(ptr)+offs" if scalar_form else "symm_at(ptr+offs)"
                    checks.check(f"read {n} x {dtype} from rank {peer} via {form}", torch.equal(out, expected))
                peer_view = rt.peer_tensor(src, peer)
                checks.check(
                    f"peer_tensor({n} x {dtype}, {peer}) sees rank {peer}'s data", torch.equal(peer_view, expected)
                )
            rt.barrier()


def check_writes(checks: Checks, world: rt.World) -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.int16):
        for round_index, n in enumerate((3, 4096, 50_000)):
            dst = rt.empty(world.world_size * n, dtype=dtype)
            dst.copy_(torch.full((world.world_size * n,), POISON, device="cuda").to(dtype))
            src = make_data(world.rank, round_index, n, dtype)
            rt.barrier_on_device()  # every rank's poison lands before any rank writes
            write_all_peers[(triton.cdiv(n, 1024),)](src, dst, n, BLOCK=1024)
            rt.barrier()
            expected = torch.cat([make_data(peer, round_index, n, dtype) for peer in range(world.world_size)])
            checks.check(f"every rank wrote {n} x {dtype} into slot <rank> here", torch.equal(dst, expected))


def check_set_wait(checks: Checks, world: rt.World) -> None:
    shared = random.Random(1234)  # the same values on every rank
    for dtype in (torch.int32, torch.int64):
        flags = rt.zeros(world.world_size, dtype=dtype)
        rt.barrier()
        for scope in ("intra_node", "inter_node"):
            for _ in range(5):
                value = shared.randrange(1, 2**31 - 1)
                set_everywhere_then_wait[(1,)](flags, value, SCOPE=scope, num_warps=4)
                rt.barrier()
                got = flags.tolist()
                checks.check(f"notify set {dtype} {scope} = {value}", got == [value] * world.world_size, f"{got}")
                rt.barrier()  # every rank has read this round's flags before any rank sets the next round's


def check_add_wait(checks: Checks, world: rt.World) -> None:
    per_round = world.world_size * (world.world_size + 1) // 2
    for dtype in (torch.int32, torch.int64):
        counter = rt.zeros(1, dtype=dtype)
        rt.barrier()
        total = 0
        for scope in ("intra_node", "inter_node"):
            for _ in range(20):
                total += per_round
                add_everywhere_then_wait[(1,)](counter, total, SCOPE=scope, num_warps=2)
                # Waits test for equality: no rank may add the next round before every rank has seen this total.
                rt.barrier_on_device()
            rt.barrier()
            got = counter.item()
            checks.check(f"notify add {dtype} {scope}: counter {got} == {total}", got == total)


def check_gpu_scope(checks: Checks, world: rt.World) -> None:
    """Programs of one kernel on one GPU count each other in with device-scope adds and waits."""
    programs = 64
    counter = rt.zeros(1, dtype=torch.int32)
    rt.barrier()
    for round_index in range(1, 11):
        add_to_self_then_wait[(programs,)](counter, programs * round_index, num_warps=4)
    sync("add_to_self_then_wait")
    got = counter.item()
    checks.check(f"gpu-scope notify add from {programs} programs x 10 rounds", got == programs * 10, f"{got}")


def check_consume_token(checks: Checks, world: rt.World) -> None:
    inbox = rt.empty(1000, dtype=torch.float32)
    flag = rt.zeros(1, dtype=torch.int32)
    rt.barrier()
    left = (world.rank - 1) % world.world_size
    good = True
    for epoch in range(1, 51):
        n = 1 + (epoch * 37) % 1000
        src = make_data(world.rank, epoch, n, torch.float32)
        out = torch.full((n,), float(POISON), device="cuda")
        inbox.fill_(float(POISON))
        rt.barrier_on_device()
        pass_right[(1,)](src, inbox, flag, out, n, epoch, BLOCK=1024, num_warps=4)
        sync("pass_right")
        if not torch.equal(out, make_data(left, epoch, n, torch.float32)):
            rank_print(f"pass_right epoch {epoch}: wrong data from rank {left}")
            good = False
    checks.check("wait + consume_token: 50 rounds of data passed right arrive intact", good)


def check_vector_notify(checks: Checks, world: rt.World) -> None:
    for n, warps in ((64, 4), (256, 1), (8, 8)):
        flags = rt.zeros(world.world_size * n, dtype=torch.int32)
        rt.barrier()
        left = (world.rank - 1) % world.world_size
        for value in (5, 9, 2):
            notify_vector[(1,)](flags, value, value, N=n, OP="set", num_warps=warps)
            rt.barrier_on_device()  # the right neighbour has seen this value before it is overwritten
        rt.barrier()
        got = flags.view(world.world_size, n)
        ok = bool((got[left] == 2).all()) and all(
            bool((got[r] == 0).all()) for r in range(world.world_size) if r != left
        )
        checks.check(f"tensor-of-pointers notify set: {n} flags from rank {left}, others untouched ({warps} warps)", ok)

        counters = rt.zeros(world.world_size * n, dtype=torch.int32)
        rt.barrier()
        for round_index in range(1, 11):
            notify_vector[(1,)](counters, 3, 3 * round_index, N=n, OP="add", num_warps=warps)
            rt.barrier_on_device()
        rt.barrier()
        got = counters.view(world.world_size, n)[left]
        checks.check(
            f"tensor-of-pointers notify add hits each of {n} flags exactly once per call ({warps} warps)",
            bool((got == 30).all()),
            f"min {int(got.min())} max {int(got.max())}, expected 30",
        )


def check_device_barrier(checks: Checks, world: rt.World) -> None:
    stamps = rt.zeros(1, dtype=torch.int64)
    rt.barrier()
    delays = random.Random(99 + world.rank)
    good = True
    for round_index in range(1, 21):
        time.sleep(delays.random() * 0.02)  # ranks arrive in a different order every round
        stamps.fill_(round_index)
        rt.barrier_on_device()
        out = torch.full((world.world_size,), POISON, dtype=torch.int64, device="cuda")
        read_stamps[(1,)](stamps, out)
        rt.barrier_on_device()  # nobody overwrites its stamp before everyone has read it
        if out.tolist() != [round_index] * world.world_size:
            rank_print(f"barrier_on_device round {round_index}: read stamps {out.tolist()}")
            good = False
    rt.barrier()
    checks.check("barrier_on_device orders writes before it against reads after it on every rank", good)


def check_bad_input(checks: Checks, world: rt.World) -> None:
    plain = torch.zeros(16, device="cuda")
    try:
        rt.require_symmetric(plain, "plain")
        checks.check("require_symmetric rejects a plain CUDA tensor", False, "no error")
    except ValueError as error:
        checks.check("require_symmetric rejects a plain CUDA tensor", "plain must be a symmetric tensor" in str(error))
    try:
        rt.empty(world.heap.heap_size + 1, dtype=torch.uint8)
        checks.check("an exhausted heap raises HeapExhaustedError", False, "no error")
    except rt.HeapExhaustedError as error:
        checks.check("an exhausted heap raises HeapExhaustedError naming the knob", "heap_size" in str(error))
    checks.check("a plain tensor is not symmetric", not rt.is_symmetric(plain))
    if world.world_size >= 2:
        peer_view = rt.peer_tensor(rt.zeros(4), (world.rank + 1) % world.world_size)
        checks.check("a view of a peer's heap is not in this rank's heap", not rt.is_symmetric(peer_view))
    else:
        rank0_print("SKIP a view of a peer's heap is not in this rank's heap: needs 2 or more ranks")
    check_subprocess_errors(checks)  # on every rank (its own GPU), so the ranks stay in step
    rt.barrier()


INIT_WITHOUT_GROUP = """
import torch
from triton_dist import runtime as rt
try:
    rt.init()
except RuntimeError as error:
    print("ERROR:", error)
"""

KERNEL_BEFORE_INIT = """
import os, torch, triton, triton.language as tl
import torch.distributed as dist
import triton_dist.language as dl
from triton_dist import runtime as rt

def step(what):
    print("STEP:", what, flush=True)

@triton.jit
def who(out_ptr):
    tl.store(out_ptr, dl.rank() * 100 + dl.num_ranks())

out = torch.full((1,), -1, dtype=torch.int32, device="cuda")
step("launch before init")
try:
    who[(1,)](out)
    torch.cuda.synchronize()
    print("NO ERROR")
except RuntimeError as error:
    print("ERROR:", error)
step("init_process_group")
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + os.environ["PORT"], rank=0, world_size=1)
step("triton_dist.init")
rt.init(heap_size="16M")
step("launch after init")
who[(1,)](out)
torch.cuda.synchronize()
print("AFTER INIT:", out.item(), flush=True)
step("finalize")
rt.finalize()
dist.destroy_process_group()
step("done")
"""


SUBPROCESS_TIMEOUT_S = 90


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


def check_subprocess_errors(checks: Checks) -> None:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    device = torch.cuda.current_device()
    this_gpu = visible.split(",")[device] if visible else str(device)  # the subprocess sees only this rank's GPU
    # Without torchrun's variables: the subprocess starts a process group of its own.
    # A world of one rank: the NVSHMEM heap needs two (init refuses), so these cases take the CUDA-IPC heap.
    env = dict(
        env_without_launcher(), PYTHONPATH=str(REPO / "python"), CUDA_VISIBLE_DEVICES=this_gpu, TRITON_DIST_BACKEND=""
    )
    result = subprocess.run(
        [sys.executable, "-c", INIT_WITHOUT_GROUP], env=env, capture_output=True, text=True, timeout=120
    )
    checks.check(
        "init() without a process group says to call init_process_group first",
        "init_process_group" in result.stdout and "ERROR" in result.stdout,
        textwrap.shorten(result.stdout + result.stderr, 300),
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        env["PORT"] = str(probe.getsockname()[1])
    # Triton reads a @jit function's source from its file, so the script must be a file, not `python -c`.
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "kernel_before_init.py"
        script.write_text(KERNEL_BEFORE_INIT)
        try:
            result = subprocess.run(
                [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S
            )
            stdout, output = result.stdout, result.stdout + result.stderr
        except subprocess.TimeoutExpired as expired:  # report how far it got instead of hanging the whole check
            stdout = _text(expired.stdout)
            output = f"TIMEOUT after {SUBPROCESS_TIMEOUT_S}s; " + stdout + _text(expired.stderr)
    checks.check(
        "a triton_dist kernel loaded before init() raises 'call triton_dist.init() first'",
        "before triton_dist.init()" in stdout,
        textwrap.shorten(output, 400),
    )
    checks.check(
        "init() then fills the module that was loaded too early (rank 0 of 1)",
        "AFTER INIT: 1" in stdout,
        textwrap.shorten(output[-600:], 600),
    )


def main() -> int:
    world = setup_distributed(heap_size="256M")
    checks = Checks()
    rank0_print(f"checking primitives on {world.world_size} ranks, on the {world.backend} heap")
    # TRITON_DIST_BACKEND=nvshmem (gpu_check.sh's primitives_nvshmem) runs every check on the NVSHMEM heap.
    asked = os.environ.get("TRITON_DIST_BACKEND", "").strip().lower() or "cuda_ipc"
    checks.check(f"the heap is on the backend $TRITON_DIST_BACKEND asks for ({asked})", world.backend == asked)
    cases = (
        ("context", check_context),
        ("rank axes", check_rank_axes),
        ("symm_at reads", check_reads),
        ("symm_at writes", check_writes),
        ("notify set + wait", check_set_wait),
        ("notify add + wait", check_add_wait),
        ("gpu scope", check_gpu_scope),
        ("consume_token", check_consume_token),
        ("tensor-of-pointers notify", check_vector_notify),
        ("barrier_on_device", check_device_barrier),
        ("bad input", check_bad_input),
    )
    checks.run_each(cases, world)
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
