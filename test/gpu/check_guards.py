"""The device-side checks stop a kernel with a message that names the kernel and the primitive.

    python3 test/gpu/check_guards.py        (one GPU; exit code 0 iff every check passed)

Under torchrun (``scripts/gpu_check.sh`` runs every step that way) local rank 0 runs the cases on its GPU and the
other ranks only report.

Each case runs in its own subprocess: a device-side assert leaves the CUDA context unusable, so nothing after it in
the same process could run. The cases:

- a kernel launched without ``triton_dist.init()``: the first launch fails on the host (the runtime's load hook,
  registered because the kernel was compiled); the second launch, which Triton starts without calling the hook
  again, is refused on the host too (the installer's ``launch_enter_hook``); a third launch with that refusal
  removed (as a launcher that bypasses Triton's hooks would run it) stops on the device: "the device context is not
  initialized";
- a pointer outside the symmetric heap given to ``dl.symm_at`` and to ``dl.wait`` stops the kernel (after the same
  kernel on a symmetric tensor gave the right answer, so the check has no false positive there);
- with ``TRITON_DIST_DEBUG=1``, a tensor of pointers outside the heap given to ``dl.symm_at`` stops the kernel;
- a kernel with a wgmma (``tl.dot``) waiting on a flag outside the heap stops too: by a trap without the message by
  default (its checks are call-free, ``compiler/call_free_checks.py``), with the message under ``TRITON_DIST_DEBUG=1``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _cases, also when loaded by path from test/python

from _cases import Tally, other_local_rank, run_case  # noqa: E402

PRELUDE = """
import os, sys, torch, triton, triton.language as tl
import triton_dist.language as dl

def say(what):
    print("STEP:", what, flush=True)

@triton.jit
def pull(x_ptr, out_ptr, TENSOR: tl.constexpr):
    if TENSOR:
        offsets = tl.arange(0, 16)
        tl.store(out_ptr + offsets, tl.load(dl.symm_at(x_ptr + offsets, dl.rank())))
    else:
        tl.store(out_ptr, tl.load(dl.symm_at(x_ptr, dl.rank())))

@triton.jit
def wait_on(flag_ptr):
    dl.wait(flag_ptr, 1, "sys", "acquire", 0, cmp="ge")

@triton.jit
def dot_then_wait(a_ptr, out_ptr, flag_ptr):
    # A 64x64 tl.dot with 4 warps is a wgmma on sm_90: the checks of this kernel trap without their message
    # (triton_dist/compiler/call_free_checks.py) unless TRITON_DIST_DEBUG=1.
    offsets = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tl.load(a_ptr + offsets)
    dl.wait(flag_ptr, 1, "sys", "acquire", 0, cmp="ge")
    tl.store(out_ptr + offsets, tl.dot(a, a).to(tl.bfloat16))

def init_world_of_one():
    import torch.distributed as dist
    from triton_dist import runtime as rt
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + os.environ["PORT"], rank=0, world_size=1)
    rt.init(heap_size="16M")
    return rt
"""

UNINITIALIZED = """
out = torch.full((16,), -1.0, device="cuda")
x = torch.randn(16, device="cuda")
say("first launch")
try:
    pull[(1,)](x, out, TENSOR=False)
    torch.cuda.synchronize()
    print("FIRST: no error", flush=True)
except RuntimeError as error:
    print("FIRST: host error:", error, flush=True)
say("second launch")
try:
    pull[(1,)](x, out, TENSOR=False)
    torch.cuda.synchronize()
    print("SECOND: ran to the end, out =", out[0].item(), flush=True)
except RuntimeError as error:
    print("SECOND: host error:", error, flush=True)
say("third launch, past the host's refusal (as a launcher that bypasses Triton's hooks would)")
from triton import knobs
from triton_dist.runtime.context.installer import context_installer
knobs.runtime.launch_enter_hook.remove(context_installer.refuse_unfilled_launch)
pull[(1,)](x, out, TENSOR=False)
torch.cuda.synchronize()
print("THIRD: ran to the end, out =", out[0].item(), flush=True)
"""

NOT_SYMMETRIC_SYMM_AT = """
rt = init_world_of_one()
x = rt.empty(16, dtype=torch.float32)
x.copy_(torch.randn(16, device="cuda"))
out = torch.full((16,), float("nan"), device="cuda")
pull[(1,)](x, out, TENSOR=TENSOR)
torch.cuda.synchronize()
count = 16 if TENSOR else 1
print("SYMMETRIC:", "right" if torch.equal(out[:count], x[:count]) else "wrong", flush=True)
private = torch.randn(16, device="cuda")
say("launch on a private tensor")
pull[(1,)](private, out, TENSOR=TENSOR)
torch.cuda.synchronize()
print("PRIVATE: ran to the end", flush=True)
"""

NOT_SYMMETRIC_WAIT = """
rt = init_world_of_one()
flags = rt.zeros(1, dtype=torch.int32)
wait_on[(1,)](flags)
torch.cuda.synchronize()
print("SYMMETRIC: waited", flush=True)
private = torch.zeros(1, dtype=torch.int32, device="cuda")
say("launch on a private flag")
wait_on[(1,)](private)
torch.cuda.synchronize()
print("PRIVATE: ran to the end", flush=True)
"""

DOT_THEN_WAIT = """
rt = init_world_of_one()
a = torch.randn(64, 64, device="cuda").to(torch.bfloat16)
out = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
flags = rt.zeros(1, dtype=torch.int32)
dot_then_wait[(1,)](a, out, flags, num_warps=4)
torch.cuda.synchronize()
right = torch.allclose(out.float(), (a.float() @ a.float()), atol=0.5, rtol=0.02)
print("SYMMETRIC:", "right" if right else "wrong", flush=True)
say("launch on a private flag")
private = torch.zeros(1, dtype=torch.int32, device="cuda")
try:
    dot_then_wait[(1,)](a, out, private, num_warps=4)
    torch.cuda.synchronize()
    print("PRIVATE: ran to the end", flush=True)
except Exception as error:
    print("PRIVATE: stopped:", type(error).__name__, str(error).splitlines()[0], flush=True)
"""


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("SKIP: check_guards needs a GPU")
        return 1
    if other_local_rank("check_guards"):
        return 0
    tally = Tally()

    output = run_case(PRELUDE + UNINITIALIZED)
    tally.check(
        "uninitialized context: the first launch fails on the host (load hook registered at compile time)",
        "FIRST: host error:" in output and "before triton_dist.init()" in output,
        output,
    )
    tally.check(
        "uninitialized context: the second launch (Triton skips the load hook) is refused on the host",
        "SECOND: host error:" in output and output.count("before triton_dist.init()") >= 2,
        output,
    )
    tally.check(
        "uninitialized context: a launch past the host stops on the device, naming the kernel and the primitive",
        "dl.symm_at in kernel pull: the device context is not initialized" in output
        or "dl.rank in kernel pull: the device context is not initialized" in output,
        output,
    )
    tally.check("uninitialized context: that launch does not complete", "THIRD: ran" not in output, output)

    for tensor in (False, True):
        form = "a tensor of pointers" if tensor else "a scalar pointer"
        env = {"TRITON_DIST_DEBUG": "1"} if tensor else {}
        output = run_case(PRELUDE + f"TENSOR = {tensor}\n" + NOT_SYMMETRIC_SYMM_AT, extra_env=env)
        tally.check(f"symm_at on {form} into the heap gives the right data", "SYMMETRIC: right" in output, output)
        tally.check(
            f"symm_at on {form} outside the heap stops the kernel with a message",
            "dl.symm_at in kernel pull: ptr does not point into this rank's symmetric heap" in output
            and "PRIVATE: ran to the end" not in output,
            output,
        )

    output = run_case(PRELUDE + NOT_SYMMETRIC_WAIT)
    tally.check("wait on a symmetric flag passes its check", "SYMMETRIC: waited" in output, output)
    tally.check(
        "wait on a flag outside the heap stops the kernel with a message",
        "dl.wait in kernel wait_on: barrierPtrs does not point into this rank's symmetric heap" in output
        and "PRIVATE: ran to the end" not in output,
        output,
    )

    for debug in (False, True):
        env = {"TRITON_DIST_DEBUG": "1"} if debug else {}
        output = run_case(PRELUDE + DOT_THEN_WAIT, extra_env=env)
        mode = "TRITON_DIST_DEBUG=1" if debug else "default checks"
        tally.check(f"wgmma kernel, {mode}: right result on a symmetric flag", "SYMMETRIC: right" in output, output)
        message = "dl.wait in kernel dot_then_wait: barrierPtrs does not point into this rank's symmetric heap"
        stopped = "PRIVATE: stopped:" in output and "PRIVATE: ran to the end" not in output
        if debug:
            tally.check(
                f"wgmma kernel, {mode}: a private flag stops it with the message", stopped and message in output, output
            )
        else:
            tally.check(f"wgmma kernel, {mode}: a private flag stops it (a trap, no message)", stopped, output)
    return tally.exit_code()


if __name__ == "__main__":
    sys.exit(main())
