"""The device-side checks stop a kernel with a message that names the kernel and the primitive.

    python3 test/gpu/check_guards.py        (one GPU; exit code 0 iff every check passed)

Under torchrun (``scripts/gpu_check.sh`` runs every step that way) local rank 0 runs the cases on its GPU and the
other ranks only report.

Each case runs in its own subprocess: a device-side assert leaves the CUDA context unusable, so nothing after it in
the same process could run. The cases:

- a kernel launched without ``triton_dist.init()``: the first launch fails on the host (the runtime's load hook,
  registered because the kernel was compiled), and the second launch, which Triton starts without calling the hook
  again, stops on the device: "the device context is not initialized";
- a pointer outside the symmetric heap given to ``dl.symm_at`` and to ``dl.wait`` stops the kernel (after the same
  kernel on a symmetric tensor gave the right answer, so the check has no false positive there);
- with ``TRITON_DIST_DEBUG=1``, a tensor of pointers outside the heap given to ``dl.symm_at`` stops the kernel.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120

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
pull[(1,)](x, out, TENSOR=False)
torch.cuda.synchronize()
print("SECOND: ran to the end, out =", out[0].item(), flush=True)
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


def _free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def run_case(body: str, extra_env: dict[str, str] | None = None) -> str:
    """Run PRELUDE + ``body`` in a fresh Python on this process's first visible GPU; returns stdout + stderr."""
    from triton_dist.testing import env_without_launcher

    # A world of one of its own: torchrun's variables would make init_process_group join torchrun's store.
    env = dict(env_without_launcher(), PYTHONPATH=str(REPO / "python"), PORT=_free_port(), PYTHONUNBUFFERED="1")
    env.update(extra_env or {})
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "case.py"  # Triton reads @jit source from a file
        script.write_text(PRELUDE + body)
        try:
            result = subprocess.run(
                [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=TIMEOUT_S
            )
            return result.stdout + result.stderr
        except subprocess.TimeoutExpired as expired:
            text = (expired.stdout or b"") + (expired.stderr or b"")
            text = text.decode(errors="replace") if isinstance(text, bytes) else text
            return f"TIMEOUT after {TIMEOUT_S} s\n{text}"


class Tally:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, ok: bool, output: str) -> None:
        print(f"{'PASS' if ok else 'FAIL'} {name}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(textwrap.indent(output[-3000:], "    | "), flush=True)


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("SKIP: check_guards needs a GPU")
        return 1
    if os.environ.get("LOCAL_RANK", "0") != "0":
        print("check_guards runs its cases on local rank 0 only; 0 passed, 0 failed here; 0 failures over all ranks")
        return 0
    tally = Tally()

    output = run_case(UNINITIALIZED)
    tally.check(
        "uninitialized context: the first launch fails on the host (load hook registered at compile time)",
        "FIRST: host error:" in output and "before triton_dist.init()" in output,
        output,
    )
    tally.check(
        "uninitialized context: the second launch stops on the device, naming the kernel and the primitive",
        "dl.symm_at in kernel pull: the device context is not initialized" in output
        or "dl.rank in kernel pull: the device context is not initialized" in output,
        output,
    )
    tally.check("uninitialized context: the second launch does not complete", "SECOND: ran" not in output, output)

    for tensor in (False, True):
        form = "a tensor of pointers" if tensor else "a scalar pointer"
        env = {"TRITON_DIST_DEBUG": "1"} if tensor else {}
        output = run_case(f"TENSOR = {tensor}\n" + NOT_SYMMETRIC_SYMM_AT, env)
        tally.check(f"symm_at on {form} into the heap gives the right data", "SYMMETRIC: right" in output, output)
        tally.check(
            f"symm_at on {form} outside the heap stops the kernel with a message",
            "dl.symm_at in kernel pull: ptr does not point into this rank's symmetric heap" in output
            and "PRIVATE: ran to the end" not in output,
            output,
        )

    output = run_case(NOT_SYMMETRIC_WAIT)
    tally.check("wait on a symmetric flag passes its check", "SYMMETRIC: waited" in output, output)
    tally.check(
        "wait on a flag outside the heap stops the kernel with a message",
        "dl.wait in kernel wait_on: barrierPtrs does not point into this rank's symmetric heap" in output
        and "PRIVATE: ran to the end" not in output,
        output,
    )
    print(f"{tally.passed} passed, {tally.failed} failed here; {tally.failed} failures over all ranks", flush=True)
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())
