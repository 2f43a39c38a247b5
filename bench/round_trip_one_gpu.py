"""The flag round trip inside one GPU: two programs of one launch bounce a flag, ``dl.notify``/``dl.wait`` beside
the same protocol in plain Triton atomics, one run.

    torchrun --nproc-per-node=1 bench/round_trip_one_gpu.py [--rounds 10000] [--launches 20]

``examples/ping_pong.py`` times the round trip between two GPUs (2.83 µs ours, 2.54 µs the atomics loop, 2 x H200).
Here both ends are programs 0 and 1 of one launch on one GPU, with the same instructions per round as the example
(system-scope release write, system-scope acquire poll, one warp each), so the transport is the GPU's own L2 instead
of NVLink: what is left of a difference between the two loops is the cost of the instructions themselves.
Round i writes i + 1 (flags are never reset). Prints ``RESULT`` lines; exit code 0 iff every round completed.
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.testing import Checks, bench, main_guard, rank0_print, setup_distributed, teardown


@triton.jit(do_not_specialize=["first"])
def round_trip(flags_ptr, rounds, first):
    """Program p waits on ``flags[p]`` and writes ``flags[1 - p]`` (program 0 writes first)."""
    me = tl.program_id(0)
    rank = dl.rank()
    for i in range(rounds):
        value = first + i
        if me == 0:
            dl.notify(flags_ptr + 1, rank, signal=value, sig_op="set", comm_scope="intra_node")
            dl.wait(flags_ptr, 1, "sys", "acquire", waitValue=value)
        else:
            dl.wait(flags_ptr + 1, 1, "sys", "acquire", waitValue=value)
            dl.notify(flags_ptr, rank, signal=value, sig_op="set", comm_scope="intra_node")


@triton.jit(do_not_specialize=["first"])
def round_trip_atomics(flags_ptr, rounds, first):
    """The baseline: Triton's system-scope release exchange and acquire polling ``atomic_add(0)``."""
    me = tl.program_id(0)
    for i in range(rounds):
        value = first + i
        if me == 0:
            tl.atomic_xchg(flags_ptr + 1, value, sem="release", scope="sys")
            while tl.atomic_add(flags_ptr, 0, sem="acquire", scope="sys") != value:
                pass
        else:
            while tl.atomic_add(flags_ptr + 1, 0, sem="acquire", scope="sys") != value:
                pass
            tl.atomic_xchg(flags_ptr, value, sem="release", scope="sys")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10_000, help="round trips per launch")
    parser.add_argument("--launches", type=int, default=20, help="timed launches (median reported)")
    args = parser.parse_args()
    setup_distributed(heap_size="64M")
    checks = Checks()
    flags = {"dl": rt.zeros(2, dtype=torch.int32), "atomics": rt.zeros(2, dtype=torch.int32)}
    kernels = {"dl": round_trip, "atomics": round_trip_atomics}
    state = {"dl": 1, "atomics": 1}

    def launcher(name: str):  # noqa: ANN202
        def launch() -> None:
            kernels[name][(2,)](flags[name], args.rounds, state[name], num_warps=1)
            state[name] += args.rounds

        return launch

    results = {}
    # Interleaved passes (ours, atomics, atomics, ours): drift shows as a difference between passes.
    for name in ("dl", "atomics", "atomics", "dl"):
        per_round = bench(launcher(name), warmup=2, rep=args.launches) * 1000.0 / args.rounds
        results.setdefault(name, []).append(per_round)
    torch.cuda.synchronize()
    for name, tensor in flags.items():
        final = tensor.tolist()
        expected = [state[name] - 1] * 2
        checks.check(f"{name}: every round trip completed", final == expected, f"flags {final}, expected {expected}")
    ours, baseline = min(results["dl"]), min(results["atomics"])
    rank0_print(
        f"RESULT round_trip_one_gpu {torch.cuda.get_device_name()} rounds={args.rounds}: triton_dist "
        f"{' / '.join(f'{t:.3f}' for t in results['dl'])} us, atomics "
        f"{' / '.join(f'{t:.3f}' for t in results['atomics'])} us per round trip (median of {args.launches} "
        f"launches per pass) -> ours/atomics {ours / baseline:.3f}"
    )
    code = checks.exit_code()
    teardown()
    return code


if __name__ == "__main__":
    main_guard(main)
