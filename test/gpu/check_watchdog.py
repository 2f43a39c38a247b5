"""The wait watchdog on GPUs: a stuck ``dl.wait`` and a dead peer become ``triton_dist.WaitTimeoutError``.

    torchrun --nproc-per-node=2 test/gpu/check_watchdog.py     (exit code 0 iff every check passed)

The CPU tests (test/python/test_watchdog.py, the lit tests wait-watchdog-runtime.mlir) cover the compiled code and
the host side; this script is the real thing on GPUs.

Under torchrun (``scripts/gpu_check.sh`` step ``watchdog``) local rank 0 runs the cases and the other ranks only
report. Each case runs as fresh processes (ranks of a world of their own, rank r on GPU r), because the watchdog's
trap leaves the CUDA context of the rank it stops unusable: two of them where the machine has two GPUs (or where
``TRITON_DIST_SHARED_GPUS=1`` lets two ranks share one, rank r on GPU r % count), else one (the stuck wait needs no
peer; the dead-rank case is then skipped, visibly). Every rank calls
``triton_dist.init(wait_timeout_s=1)``, so their kernels link the watchdog library.

- ``stuck wait``: rank 0's program 1 waits for four flags ``>= 7``; three are set, the third (index 2) holds 5 and
  nobody ever sets it. ``triton_dist.synchronize()`` must raise ``WaitTimeoutError`` within a few seconds, and its
  record and message must name rank 0, the kernel, program 1, flag index 2, the flag's address, the expected value
  7, the comparison ``ge``, the last value seen 5 and the 1 s timeout.
- ``dead rank`` (issue 12, item 2): rank 1 notifies rank 0 once per launch while rank 0 waits for each value; after
  five rounds rank 1 exits without a word. Rank 0 must raise ``WaitTimeoutError`` for the sixth value (last seen
  5) within the timeout plus slack, instead of hanging.
- ``dead rank in the LL all-reduce``: the same death inside ``triton_dist.ops.all_reduce``'s LL one-shot (8 KiB,
  forced), whose poll is plain loads: with the watchdog on its polls are bounded and a missing word is awaited with
  ``dl.wait``, so rank 0's sixth call must raise ``WaitTimeoutError`` naming ``_one_shot_ll_kernel``, the word's
  epoch 6 (``cmp='eq'``) and the last epoch seen in it, 4 (the same parity, two calls earlier).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _cases, also when loaded by path from test/python

from _cases import Tally, other_local_rank, run_case  # noqa: E402

SLACK_S = 10.0
"""How much later than the 1 s timeout the error may surface (launch, trap, error propagation, process noise)."""

STUCK_WAIT_WORDS = ["rank 0", "kernel 'stuck_wait'", "program 1", "flag 2 ", "flag >= 7", "cmp='ge'"]
STUCK_WAIT_WORDS += ["last value seen was 5", "after 1 s"]
DEAD_RANK_WORDS = ["rank 0", "kernel 'wait_for_peer'", "flag >= 6", "last value seen was 5", "after 1 s"]
DEAD_RANK_LL_WORDS = ["rank 0", "kernel '_one_shot_ll_kernel'", "cmp='eq'", "last value seen was 4", "after 1 s"]
"""What each case's WaitTimeoutError message must contain (test/python/test_watchdog.py checks them on CPU)."""

PRELUDE = """
import os, sys, time, torch, triton, triton.language as tl
import torch.distributed as dist
import triton_dist
import triton_dist.language as dl
from triton_dist import runtime as rt

RANK = int(os.environ["CASE_RANK"])

def say(*what):
    print(f"[rank {RANK}]", *what, flush=True)

@triton.jit
def stuck_wait(flags_ptr, value):
    if tl.program_id(0) == 1:
        dl.wait(flags_ptr, 4, "sys", "acquire", waitValue=value, cmp="ge")

@triton.jit(do_not_specialize=["value"])
def wait_for_peer(flag_ptr, value):
    dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=value, cmp="ge")

@triton.jit(do_not_specialize=["value"])
def notify_peer(flag_ptr, peer, value):
    dl.notify(flag_ptr, peer, signal=value, sig_op="set", comm_scope="intra_node")

GPU = RANK % torch.cuda.device_count()  # ranks share GPUs under TRITON_DIST_SHARED_GPUS=1 (gloo, then)
torch.cuda.set_device(GPU)
SHARED = os.environ.get("TRITON_DIST_SHARED_GPUS") == "1"
dist.init_process_group(
    "gloo" if SHARED else "nccl", init_method="tcp://127.0.0.1:" + os.environ["PORT"], rank=RANK,
    world_size=int(os.environ["CASE_WORLD"]), **({} if SHARED else {"device_id": torch.device("cuda", GPU)}),
)
rt.init(heap_size="64M", wait_timeout_s=1.0)

def report(error, started, **expected):
    record = error.record
    elapsed = time.monotonic() - started
    say("ELAPSED", f"{elapsed:.3f}")
    say("MESSAGE", str(error))
    for field, value in expected.items():
        got = getattr(record, field)
        say("FIELD", field, "OK" if got == value else f"WRONG got {got!r} expected {value!r}")
    say("RAISED WaitTimeoutError")
"""

STUCK_WAIT = """
flags = rt.zeros(4, dtype=torch.int32)
flags.copy_(torch.tensor([7, 9, 5, 7], dtype=torch.int32, device="cuda"))
rt.barrier()
if RANK == 0:
    started = time.monotonic()
    stuck_wait[(2,)](flags, 7)
    try:
        triton_dist.synchronize()
        say("NO ERROR: the wait returned")
    except triton_dist.WaitTimeoutError as error:
        report(error, started, rank=0, kernel="stuck_wait", program_id=1, flag_index=2,
               flag_address=flags.data_ptr() + 8, expected=7, last_seen=5, comparison="ge", flag_bits=32,
               timeout_ns=1_000_000_000)
    except Exception as error:
        say("OTHER ERROR", type(error).__name__, error)
    os._exit(0)
else:
    time.sleep(8)  # stay alive (and silent) while rank 0 times out
    os._exit(0)
"""

ROUNDS_BEFORE_DEATH = 5
"""The rounds the dying rank completes before it exits; the survivor's next round is the one that must time out."""


def dead_rank_case(setup: str, survivor_round: str, dying_round: str, record: str) -> str:
    """A dead-rank case (run after PRELUDE): after ``setup``, rank 1 runs ``dying_round`` for ``value`` = 1 ..
    ROUNDS_BEFORE_DEATH, then exits without a word; rank 0 runs ``survivor_round`` (then ``synchronize``) for
    ``value`` = 1, 2, ... and must raise ``WaitTimeoutError`` whose record holds rank 0, the 1 s timeout and the
    fields ``record`` names (keyword arguments of ``report``)."""
    return f"""
{setup}
rt.barrier()
if RANK == 0:
    started = time.monotonic()
    try:
        for value in range(1, 21):
            started = time.monotonic()
            {survivor_round}
            triton_dist.synchronize()
            say("ROUND", value)
        say("NO ERROR: every round completed")
    except triton_dist.WaitTimeoutError as error:
        report(error, started, rank=0, timeout_ns=1_000_000_000, {record})
    except Exception as error:
        say("OTHER ERROR", type(error).__name__, error)
    os._exit(0)
else:
    for value in range(1, {ROUNDS_BEFORE_DEATH} + 1):
        {dying_round}
        torch.cuda.synchronize()
        time.sleep(0.05)
    say("DYING")
    os._exit(3)  # no finalize, no goodbye: a crashed rank
"""


DEAD_RANK = dead_rank_case(
    setup="flag = rt.zeros(1, dtype=torch.int32)",
    survivor_round="wait_for_peer[(1,)](flag, value)",
    dying_round="notify_peer[(1,)](flag, 0, value)",
    record=f'kernel="wait_for_peer", flag_index=0, flag_address=flag.data_ptr(), expected={ROUNDS_BEFORE_DEATH + 1}, '
    f'last_seen={ROUNDS_BEFORE_DEATH}, comparison="ge"',
)

DEAD_RANK_LL = dead_rank_case(
    setup="""import importlib
all_reduce_op = importlib.import_module("triton_dist.ops.all_reduce.op")  # (ops.all_reduce is the function)
x = torch.randn(4096, device="cuda").to(torch.bfloat16)
out = torch.empty_like(x)
config = all_reduce_op.AllReduceConfig("one_shot_ll", 8, 4)""",
    survivor_round='all_reduce_op._run(x, out, "sum", config)',
    dying_round='all_reduce_op._run(x, out, "sum", config)',
    # The missing word's epoch is the sixth call's; it last held the fourth's (the same parity, two calls earlier).
    record=f'kernel="_one_shot_ll_kernel", expected={ROUNDS_BEFORE_DEATH + 1}, last_seen={ROUNDS_BEFORE_DEATH - 1}, '
    'comparison="eq"',
)


def _elapsed(output: str) -> float:
    for line in output.splitlines():
        if "ELAPSED" in line:
            return float(line.split("ELAPSED")[1])
    return float("inf")


def check_case(tally: Tally, name: str, output: str, words: list[str]) -> None:
    raised = "[rank 0] RAISED WaitTimeoutError" in output
    tally.check(f"{name}: rank 0 raises WaitTimeoutError", raised, output)
    wrong = [line for line in output.splitlines() if "FIELD" in line and "OK" not in line.split("FIELD")[1]]
    tally.check(
        f"{name}: the record names the wait (rank, kernel, program, flag, values, timeout)",
        raised and not wrong,
        output,
    )
    message = next((line for line in output.splitlines() if "MESSAGE" in line), "")
    missing = [word for word in words if word not in message]
    tally.check(f"{name}: the message names everything {words}", raised and not missing, f"missing {missing}\n{output}")
    elapsed = _elapsed(output)
    tally.check(
        f"{name}: raised within 1 s + {SLACK_S:.0f} s (took {elapsed:.2f} s)", 1.0 <= elapsed <= 1.0 + SLACK_S, output
    )
    print(
        f"RESULT watchdog {name}: raised after {elapsed:.3f} s; {message.split('MESSAGE', 1)[-1].strip()}", flush=True
    )


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("SKIP: check_watchdog needs a GPU")
        return 1
    if other_local_rank("check_watchdog"):
        return 0
    tally = Tally()
    from triton_dist.testing import shared_gpus

    ranks = 2 if shared_gpus() else min(2, torch.cuda.device_count())
    output = run_case(PRELUDE + STUCK_WAIT, ranks=ranks, extra_env={"CASE_WORLD": str(ranks)})
    check_case(tally, f"stuck wait ({ranks} rank{'s' if ranks > 1 else ''})", output, STUCK_WAIT_WORDS)
    if ranks < 2:
        print("SKIP dead rank: needs a second GPU for the rank that dies (not counted as passed)", flush=True)
        return tally.exit_code()
    output = run_case(PRELUDE + DEAD_RANK, ranks=2, extra_env={"CASE_WORLD": "2"})
    tally.check("dead rank: rank 1 died after its fifth notify", "[rank 1] DYING" in output, output)
    tally.check("dead rank: the five rounds before completed", "[rank 0] ROUND 5" in output, output)
    check_case(tally, "dead rank", output, DEAD_RANK_WORDS)
    output = run_case(PRELUDE + DEAD_RANK_LL, ranks=2, extra_env={"CASE_WORLD": "2"})
    tally.check("dead rank (LL all-reduce): rank 1 died after its fifth call", "[rank 1] DYING" in output, output)
    tally.check("dead rank (LL all-reduce): the five calls before completed", "[rank 0] ROUND 5" in output, output)
    check_case(tally, "dead rank (LL all-reduce)", output, DEAD_RANK_LL_WORDS)
    return tally.exit_code()


if __name__ == "__main__":
    sys.exit(main())
