"""The flag round trip of examples/ping_pong.py, compiled on the CPU as the example launches it (num_warps=1):

- the loop reads nothing from the runtime context: the flag's address on the peer is computed once, before the loop
  (it used to be reloaded every iteration, after the wait's acquire had invalidated L1);
- in SASS (ptxas + cuobjdump from Triton's wheel) the loop's memory and synchronization instructions are those of
  the plain-Triton atomics loop beside it (one system-scope release fence and write, the acquire poll with its L1
  invalidation, barriers), plus, with the device-side checks on, the one fence ptxas adds because the kernel holds
  the checks' ``__assertfail`` call;
- the release write still lands on the peer's copy of the flag (``symm_at``), evaluated on the optimized LLVM IR.

docs/results/2026-11-23-round-trip-sass.md has the listings side by side and the reasoning about their cost.
"""

from __future__ import annotations

import re
import struct
import sys
from collections import Counter
from pathlib import Path

import pytest
import triton
import triton.language as tl
from asm_loops import BLOCKS, loop_components
from dl_compile import assembly, compile_kernel, need_real_library, sass

import triton_dist.language as dl
from triton_dist import abi
from triton_dist.compiler import Checks

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))
try:
    from ping_pong import ping_pong, ping_pong_atomics
finally:
    sys.path.remove(str(REPO / "examples"))

PING_PONG_SIGNATURE = {"flag_ptr": "*i32", "rounds": "i32", "first": "i32"}
ATOMICS_SIGNATURE = {"my_flag_ptr": "*i32", "peer_flag_ptr": "*i32", "rounds": "i32", "first": "i32"}
LEVELS = [Checks.NONE, Checks.DEFAULT]


def _compile(kernel, signature, target_name: str, serve: bool, checks: Checks | None):
    return compile_kernel(kernel, signature, target_name, {"SERVE": serve}, num_warps=1, checks=checks)


def _release_loop(text: str, kind: str, release: str) -> list[str]:
    """The instructions of the loop that holds the release write (the round-trip loop, its poll loop included)."""
    loops = [
        [line.strip() for block in loop for line in block.lines if line.strip()]
        for loop in loop_components(BLOCKS[kind](text))
    ]
    holding = [loop for loop in loops if any(re.search(release, line) for line in loop)]
    assert len(holding) == 1, f"expected one loop with a release write /{release}/, got {len(holding)}:\n{text}"
    return holding[0]


# ---------------------------------------------------------------------------------------------------------------
# PTX and AMDGCN: no context load in the loop.


@pytest.mark.parametrize("checks", LEVELS, ids=lambda level: level.name.lower())
@pytest.mark.parametrize("serve", [True, False], ids=["serve", "receive"])
def test_the_ping_pong_loop_loads_only_the_polled_flag_on_sm_90(serve, checks):
    need_real_library("sm_90")
    ptx = assembly(_compile(ping_pong, PING_PONG_SIGNATURE, "sm_90", serve, checks), "sm_90")
    loop = _release_loop(ptx, "ptx", r"\bst\.release\.sys\.global\.b32\b")
    loads = [line for line in loop if re.search(r"\bld\.", line)]
    assert loads and all(re.search(r"\bld\.acquire\.sys\.global\.b32\b", line) for line in loads), "\n".join(loop)
    assert sum(bool(re.search(r"\bst\.release\.sys\.global\.b32\b", line)) for line in loop) == 1, "\n".join(loop)
    assert not any(abi.CONTEXT_SYMBOL in line for line in loop), "\n".join(loop)


@pytest.mark.parametrize("checks", LEVELS, ids=lambda level: level.name.lower())
@pytest.mark.parametrize("serve", [True, False], ids=["serve", "receive"])
def test_the_ping_pong_loop_loads_only_the_polled_flag_on_gfx942(serve, checks):
    need_real_library("gfx942")
    asm = assembly(_compile(ping_pong, PING_PONG_SIGNATURE, "gfx942", serve, checks), "gfx942")
    loop = _release_loop(asm, "amdgcn", r"\bglobal_store_dword\b.*\bsc0 sc1\b")
    assert not any(re.match(r"s_load_", line) for line in loop), "the context is read with scalar loads:\n" + "\n".join(
        loop
    )
    loads = [line for line in loop if re.match(r"(global|flat|buffer)_load", line)]
    assert loads and all(re.search(r"\bsc0 sc1\b", line) for line in loads), (
        "only the system-scope poll:\n" + "\n".join(loop)
    )


# ---------------------------------------------------------------------------------------------------------------
# SASS: the loop against the atomics loop.

_SASS_MEMORY = re.compile(r"^(?:@!?U?P\w+\s+)?(?P<op>(LDG|STG|ATOMG|REDG|LDS|STS|MEMBAR|CCTL|BAR|NANOSLEEP)\S*)")


def _memory_ops(loop: list[str]) -> Counter[str]:
    """The loop's global and shared memory, fence, barrier and sleep instructions by opcode; those predicated on
    ``!PT`` (never true: they access nothing) counted apart. Constant-bank reads (kernel arguments) are left out."""
    ops: Counter[str] = Counter()
    for line in loop:
        match = _SASS_MEMORY.match(line)
        if match:
            ops[("predicated-off " if line.startswith("@!PT") else "") + match.group("op")] += 1
    return ops


_SASS_RELEASE = r"\b(STG\.E\.STRONG\.SYS|ATOMG\.E\.EXCH\.STRONG\.SYS)\b"


@pytest.mark.parametrize("serve", [True, False], ids=["serve", "receive"])
def test_the_ping_pong_loop_has_the_memory_instructions_of_the_atomics_loop(serve):
    need_real_library("sm_90")
    ours = _release_loop(
        sass(_compile(ping_pong, PING_PONG_SIGNATURE, "sm_90", serve, Checks.NONE)), "sass", _SASS_RELEASE
    )
    baseline = _release_loop(
        sass(_compile(ping_pong_atomics, ATOMICS_SIGNATURE, "sm_90", serve, None)), "sass", _SASS_RELEASE
    )
    mine, theirs = _memory_ops(ours), _memory_ops(baseline)
    # Global loads: only the acquire poll (LDG.E.STRONG.SYS; ptxas peels the first poll off the backoff loop, so it
    # appears twice in our text), never a context load (LDG.E.64.CONSTANT before the fix).
    assert (
        {op for op in mine if op.startswith("LDG")}
        == {"LDG.E.STRONG.SYS"}
        == {op for op in theirs if op.startswith("LDG")}
    ), (mine, theirs)
    # One release: the same system-scope fence before the write (a store here, an exchange in the atomics loop).
    assert mine["MEMBAR.ALL.SYS"] == theirs["MEMBAR.ALL.SYS"] == 1, (mine, theirs)
    assert mine["STG.E.STRONG.SYS"] == theirs["ATOMG.E.EXCH.STRONG.SYS"] == 1, (mine, theirs)
    assert {op for op in mine if op.startswith("MEMBAR")} == {"MEMBAR.ALL.SYS"}, mine
    # The acquire's L1 invalidation follows each poll in both; no more barriers than the atomics loop's two.
    assert mine["CCTL.IVALL"] == mine["LDG.E.STRONG.SYS"] and theirs["CCTL.IVALL"] == theirs["LDG.E.STRONG.SYS"]
    assert mine["BAR.SYNC.DEFER_BLOCKING"] <= theirs["BAR.SYNC.DEFER_BLOCKING"] == 2, (mine, theirs)
    # No constant-bank reads of the context either (a .const context would have read it through LDC c[0x3]).
    assert not any(re.search(r"c\[0x3\]", line) for line in ours), "\n".join(ours)


@pytest.mark.parametrize("checks", LEVELS, ids=lambda level: level.name.lower())
@pytest.mark.parametrize("serve", [True, False], ids=["serve", "receive"])
def test_the_whole_warp_polls_in_step(serve, checks):
    """The one-flag wait polls with every lane of the warp, so its loop is uniform: ptxas puts no ``YIELD`` (which
    lets the lanes that left a divergent loop make progress) and no ``WARPSYNC`` (their reconvergence) into it.
    When lane 0 alone polled, both were there, and the round trip was 3% slower than with the whole warp polling
    (2.573 against 2.494 µs on 2 x H200, docs/results/2026-11-24-2xH200-session14.md)."""
    need_real_library("sm_90")
    loop = _release_loop(sass(_compile(ping_pong, PING_PONG_SIGNATURE, "sm_90", serve, checks)), "sass", _SASS_RELEASE)
    assert any("LDG.E.STRONG.SYS" in line for line in loop), "\n".join(loop)
    divergent = [line for line in loop if re.match(r"(YIELD|WARPSYNC)\b", line)]
    assert not divergent, "\n".join(loop)


@pytest.mark.parametrize("serve", [True, False], ids=["serve", "receive"])
def test_the_checks_add_one_cta_fence_to_the_loop(serve):
    """What the default checks cost inside the loop: their conditions are hoisted out of it, but the kernel now holds
    a call (``__assertfail``, on the failure path outside the loop), and ptxas then puts ``MEMBAR.ALL.CTA`` (after
    four ``@!PT LDS`` that access nothing) before every release. Nothing else in the loop changes."""
    need_real_library("sm_90")
    loops = {
        level: _release_loop(
            sass(_compile(ping_pong, PING_PONG_SIGNATURE, "sm_90", serve, level)), "sass", _SASS_RELEASE
        )
        for level in LEVELS
    }
    checked, unchecked = _memory_ops(loops[Checks.DEFAULT]), _memory_ops(loops[Checks.NONE])
    assert checked - unchecked == Counter({"MEMBAR.ALL.CTA": 1, "predicated-off LDS": 4}), (checked, unchecked)
    assert unchecked - checked == Counter(), (checked, unchecked)


# ---------------------------------------------------------------------------------------------------------------
# The release write's address, evaluated on the optimized LLVM IR with a concrete context.

RANK, WORLD = 1, 4
HEAP_SIZE = 1 << 30
BASES = [0x7F00_0000_0000 + (r + 1) * 0x10_0000_0000 for r in range(WORLD)]
FLAG_OFFSET = 0x2340


def _context_bytes() -> bytes:
    bases = BASES + [0] * (abi.MAX_RANKS - WORLD)
    return abi.CONTEXT_LAYOUT.pack(RANK, WORLD, HEAP_SIZE, *bases, RANK, WORLD)  # one node


class _AddressEvaluator:
    """Integer value of an SSA value of an optimized kernel's LLVM IR, for the instructions that compute addresses.

    Arguments are given by position; a load is allowed only from the context global, whose bytes are
    ``_context_bytes()``. Anything else (a phi, a call) raises: the address must not depend on it.
    """

    _BINARY = {
        "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b,
        "mul": lambda a, b: a * b,
        "shl": lambda a, b: a << b,
        "ashr": lambda a, b: a >> b,
        "and": lambda a, b: a & b,
        "or": lambda a, b: a | b,
    }
    _SIZES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "ptr": 8}
    CONTEXT_ADDRESS = 0x1000

    def __init__(self, llir: str, arguments: dict[int, int]) -> None:
        body = llir[llir.index("define ") :]
        body = body[: body.index("\n}\n")]
        self.definitions = {
            match.group(1): match.group(2).split(", !")[0]
            for match in re.finditer(r"^\s*(%[\w.]+) = (.*)$", body, re.MULTILINE)
        }
        self.arguments = arguments
        self.body = body
        self.context = _context_bytes()

    def value(self, operand: str) -> int:
        operand = operand.strip()
        if re.fullmatch(r"-?\d+", operand):
            return int(operand)
        if operand.startswith("getelementptr"):
            return self._gep(operand[operand.index("(") + 1 : operand.rindex(")")])
        if operand.startswith("@"):
            assert operand == f"@{abi.CONTEXT_SYMBOL}", operand
            return self.CONTEXT_ADDRESS
        if re.fullmatch(r"%\d+", operand) and int(operand[1:]) in self.arguments:
            return self.arguments[int(operand[1:])]
        return self._instruction(self.definitions[operand])

    @staticmethod
    def _typed(operand: str) -> str:
        """``i64 %x`` / ``ptr addrspace(1) %x`` / ``ptr addrspace(1) getelementptr (...)`` -> the value part."""
        operand = operand.strip()
        operand = re.sub(r"^(i\d+|ptr( addrspace\(\d+\))?)\s+", "", operand)
        return re.sub(r"^(noundef|nonnull)\s+", "", operand)

    def _gep(self, text: str) -> int:
        parts = self._split(re.sub(r"^(inbounds |nuw |nusw )+", "", text))
        element, base, indices = parts[0], self.value(self._typed(parts[1])), parts[2:]
        assert len(indices) == 1, f"only single-index GEPs are expected after optimization: {text}"
        return base + self._SIZES[element] * self.value(self._typed(indices[0]))

    @staticmethod
    def _split(text: str) -> list[str]:
        parts, depth, current = [], 0, ""
        for char in text:
            depth += char == "("
            depth -= char == ")"
            if char == "," and depth == 0:
                parts.append(current)
                current = ""
            else:
                current += char
        return [*parts, current]

    def _instruction(self, text: str) -> int:
        op = text.split()[0]
        if op == "getelementptr":
            return self._gep(text[len(op) :].strip())
        if op in ("sext", "zext", "ptrtoint", "inttoptr", "bitcast", "addrspacecast", "trunc"):
            match = re.match(rf"{op}( nneg)? (\S+( addrspace\(\d+\))?) (.+) to (\S+)", text)
            assert match, text
            value = self.value(match.group(4))
            if op == "sext" and match.group(2) == "i32":
                value = struct.unpack("<i", struct.pack("<I", value & 0xFFFFFFFF))[0]
            return value
        if op == "load":
            match = re.match(r"load (i\d+), ptr addrspace\(\d+\) (.+?), align", text)
            assert match, text
            offset = self.value(match.group(2)) - self.CONTEXT_ADDRESS
            size = self._SIZES[match.group(1)]
            assert 0 <= offset <= len(self.context) - size, f"a load outside the context: {text}"
            return int.from_bytes(self.context[offset : offset + size], "little", signed=True)
        match = re.match(r"(\w+)( nuw| nsw| exact)* (i\d+) ([^,]+), (.+)", text)
        assert match and match.group(1) in self._BINARY, f"unexpected instruction on the address's path: {text}"
        return self._BINARY[match.group(1)](self.value(match.group(4)), self.value(match.group(5)))

    def release_addresses(self) -> list[int]:
        """The address of every release write to a flag: a release store or atomicrmw, or the inline PTX
        ``atom.release`` add (its first operand is the address)."""
        found = []
        for match in re.finditer(
            r"store atomic i\d+ [^,]+, ptr addrspace\(1\) ([^ ,]+)(?: syncscope\(\"\w+\"\))? "
            r"release",
            self.body,
        ):
            found.append(self.value(match.group(1)))
        for match in re.finditer(r"atomicrmw \w+ ptr addrspace\(1\) ([^ ,]+), [^\n]*release", self.body):
            found.append(self.value(match.group(1)))
        for match in re.finditer(
            r'asm sideeffect "atom\.release[^"]*", "[^"]*"\((i64|ptr addrspace\(1\)) ([^ ,)]+)', self.body
        ):
            found.append(self.value(match.group(2)))
        return found


@triton.jit(do_not_specialize=["signal"])
def notify_to_argument(flag_ptr, peer, signal, OP: tl.constexpr, COMM: tl.constexpr):
    dl.notify(flag_ptr, peer, signal=signal, sig_op=OP, comm_scope=COMM)


@pytest.mark.parametrize("target_name", ["sm_90", "gfx942"])
@pytest.mark.parametrize("op", ["set", "add"])
@pytest.mark.parametrize("peer", [0, 1, 3])
def test_notify_writes_the_flag_on_the_peer(peer, op, target_name):
    need_real_library(target_name)
    compiled = compile_kernel(
        notify_to_argument,
        {"flag_ptr": "*i32", "peer": "i32", "signal": "i32"},
        target_name,
        {"OP": op, "COMM": "intra_node"},
    )
    flag = BASES[RANK] + FLAG_OFFSET
    addresses = _AddressEvaluator(compiled.asm["llir"], {0: flag, 1: peer}).release_addresses()
    assert addresses == [BASES[peer] + FLAG_OFFSET], [hex(a) for a in addresses]


@pytest.mark.parametrize("target_name", ["sm_90", "gfx942"])
@pytest.mark.parametrize("serve", [True, False], ids=["serve", "receive"])
def test_the_ping_pong_writes_the_peers_flag(serve, target_name):
    need_real_library(target_name)
    compiled = _compile(ping_pong, PING_PONG_SIGNATURE, target_name, serve, None)
    flag = BASES[RANK] + FLAG_OFFSET
    addresses = _AddressEvaluator(compiled.asm["llir"], {0: flag}).release_addresses()
    assert addresses == [BASES[1 - RANK] + FLAG_OFFSET], [hex(a) for a in addresses]


# ---------------------------------------------------------------------------------------------------------------
# bench/round_trip_variants.py: the release write and the poll crossed, each as ours or Triton's atomic.


@pytest.mark.parametrize("serve", [True, False])
def test_round_trip_variants_cross_the_release_write_and_the_poll(serve):
    """Each variant's round-trip loop has exactly the release write and the poll its name says (SASS, sm_90)."""
    need_real_library("sm_90")
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import round_trip_variants as variants
    finally:
        sys.path.remove(str(REPO / "bench"))
    assert variants.VARIANTS[0] == "notify+wait" and set(variants.CONSTEXPRS) == set(variants.VARIANTS[1:])
    counts: dict[str, int] = {}
    for name in variants.VARIANTS:
        if name == "notify+wait":
            compiled = _compile(ping_pong, PING_PONG_SIGNATURE, "sm_90", serve, None)
        else:
            constexprs = {"SERVE": serve, **variants.CONSTEXPRS[name]}
            compiled = compile_kernel(variants.ping_pong_variant, PING_PONG_SIGNATURE, "sm_90", constexprs, num_warps=1)
        listing = sass(compiled)
        loop = _release_loop(listing, "sass", r"STG\.E\.STRONG\.SYS|ATOMG\.E\.EXCH\.STRONG\.SYS")
        xchg = any("ATOMG.E.EXCH.STRONG.SYS" in line for line in loop)
        store = any("STG.E.STRONG.SYS" in line for line in loop)
        # Both polls load with LDG.E.STRONG.SYS (Triton's atomic add of 0 with acquire becomes a strong load); ours
        # backs off with NANOSLEEP, Triton's while broadcasts the scalar result through shared memory.
        assert any("LDG.E.STRONG.SYS" in line for line in loop), (name, loop)
        ours_poll = any("NANOSLEEP" in line for line in loop)
        atomic_poll = any(re.match(r"(@!?P\w+\s+)?STS\b", line) for line in loop)
        barriers = sum(bool(re.match(r"(@!?P\w+\s+)?BAR\.SYNC", line)) for line in loop)
        base = name.removeprefix("barrier+").removesuffix("+barrier")
        release, poll = base.split("+")
        assert (xchg, store) == (release == "xchg", release in ("notify", "store")), (name, loop)
        assert (atomic_poll, ours_poll) == (poll == "atomic poll", poll == "wait"), (name, loop)
        counts[name] = barriers
    # The barrier variants hold one CTA barrier more than the atomics loop, in the round-trip loop.
    assert counts["barrier+xchg+atomic poll"] == counts["xchg+atomic poll"] + 1, counts
    assert counts["xchg+atomic poll+barrier"] == counts["xchg+atomic poll"] + 1, counts
