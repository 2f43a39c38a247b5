"""Stage (f) of scripts/demo.sh: a plain ``@triton.jit`` kernel using ``triton_dist.language``, compiled by the stock
Triton wheel for sm_90 and gfx942 (no GPU needed), and the lines of its PTX / AMDGCN that implement the primitives.

    PYTHONPATH=python python3 scripts/demo_triton.py [--save DIR]   # --save: also write the whole assembly to DIR

Exit status 0 also when the frontend is not importable yet (the stage says it is skipped); 1 when it is but the
kernel does not compile (the device library missing, say).
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

try:
    import triton_dist.language as dl
except ImportError as err:  # the frontend is written concurrently with this demo
    print(f"SKIPPED stage (f): triton_dist.language is not importable yet ({err})")
    sys.exit(0)


@triton.jit
def ring_step(x_ptr, inbox_ptr, flag_ptr, epoch, BLOCK: tl.constexpr):
    """The Triton twin of examples/ir/ring_step.mlir: send a block to the next rank, wait for the previous one's."""
    offs = tl.arange(0, BLOCK)
    peer = (dl.rank() + 1) % dl.num_ranks()
    x = tl.load(x_ptr + offs)
    tl.store(dl.symm_at(inbox_ptr + offs, peer), x)  # a plain (vector) store into the peer's inbox
    dl.notify(flag_ptr, peer, signal=epoch, sig_op="set", comm_scope="intra_node")  # release, system scope
    token = dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=epoch)  # acquire, system scope
    inbox_ptr = dl.consume_token(inbox_ptr, token)  # the loads below stay after the wait
    tl.store(x_ptr + offs, tl.load(inbox_ptr + offs) + 1)


TARGETS = {
    "sm_90": (GPUTarget("cuda", 90, 32), "ptx", "//"),
    "gfx942": (GPUTarget("hip", "gfx942", 64), "amdgcn", ";"),
}

# What implements each primitive once Triton has linked and inlined the device library (docs/design.md has the table).
PATTERNS = {
    "sm_90": [
        ("runtime context (rank, num_ranks, heap bases)", r"__triton_dist_context"),
        ("16-byte vector access (also through symm_at / consume_token)", r"\b(ld|st)\.global\.v4\."),
        ("program barrier (notify, wait)", r"\bbar\.sync\b|\bbarrier\.sync\b"),
        ("notify: release", r"\.release\.|\bfence\.|\bmembar\."),
        ("wait: acquire poll", r"\.acquire\.|\bld\.relaxed\.|\bld\.volatile\."),
        ("wait: backoff", r"\bnanosleep\b"),
        ("notify: atomic add", r"\batom\."),
    ],
    "gfx942": [
        ("runtime context (rank, num_ranks, heap bases)", r"__triton_dist_context"),
        ("16-byte vector access (also through symm_at / consume_token)", r"global_(load|store)_dwordx4"),
        ("program barrier (notify, wait)", r"\bs_barrier\b"),
        ("notify: release (L2 write-back)", r"\bbuffer_wbl2\b"),
        ("system-scope flag access (notify store / wait poll)", r"global_(load|store)_dword\b.*\bsc0 sc1"),
        ("notify: atomic add", r"\bglobal_atomic"),
        ("wait: acquire (cache invalidate)", r"\bbuffer_inv\b"),
        ("wait: backoff", r"\bs_sleep\b"),
    ],
}


def code_lines(asm: str, comment: str) -> list[tuple[int, str]]:
    """(line number, line) of the assembly, without comments, blank lines and debug sections."""
    lines = []
    for number, line in enumerate(asm.splitlines(), 1):
        if line.strip().startswith(".section") and "debug" in line or line.startswith(".Lfunc_end"):
            break  # the code is over: debug info, or (AMDGCN) the kernel descriptor and metadata
        code = line.split(comment, 1)[0].rstrip()
        if code.strip() and not code.strip().startswith((".loc", ".file", ".cfi")):
            lines.append((number, code))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, help="write the whole PTX / AMDGCN into this directory")
    args = parser.parse_args()

    signature = {"x_ptr": "*fp32", "inbox_ptr": "*fp32", "flag_ptr": "*i32", "epoch": "i32", "BLOCK": "constexpr"}
    # Pointers are 16-byte aligned at launch (the runtime's heap guarantees it): specialize the same way.
    attrs = {(ring_step.arg_names.index(name),): [["tt.divisibility", 16]] for name in ("x_ptr", "inbox_ptr")}
    print("kernel (scripts/demo_triton.py):")
    print(inspect.getsource(ring_step.fn))
    failed = False
    for name, (target, kind, comment) in TARGETS.items():
        print(f"--- {name}: triton.compile(ASTSource(ring_step, ...), target={target})")
        source = ASTSource(fn=ring_step, signature=signature, constexprs={"BLOCK": 1024}, attrs=attrs)
        try:
            compiled = triton.compile(source, target=target)
        except Exception as err:  # report every target, then fail
            print(f"FAILED to compile for {name}: {type(err).__name__}: {err}")
            failed = True
            continue
        asm = compiled.asm[kind]
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            path = args.save / f"ring_step.{name}.{'ptx' if kind == 'ptx' else 's'}"
            path.write_text(asm)
            print(f"(whole {kind} in {path})")
        lines = code_lines(asm, comment)
        print(f"{len(lines)} lines of {kind}; the ones implementing the primitives:")
        shown = set()
        for number, line in lines:
            labels = [label for label, pattern in PATTERNS[name] if re.search(pattern, line)]
            if labels and number not in shown:
                shown.add(number)
                print(f"  {number:5d}  {line.strip():70s}  <- {', '.join(labels)}")
        print()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
