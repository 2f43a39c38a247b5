"""all_reduce's LL one-shot ("one_shot_ll") without GPUs: the kernel compiles for sm_90 with the accesses its
memory-ordering argument needs (system-scope fence first, 8-byte relaxed stores and polling loads, the poll a real
loop without local memory or calls); its word packing (two bf16 / fp16 elements or one fp32 per word) round-trips
every bf16 / fp16 bit pattern and fp32's special ones exactly in Triton's interpreter; configs that cannot run raise
clearly; tuning offers it only on NVIDIA builds and up to its size, and never keeps a candidate whose result is
wrong."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl
from case_grid import check_each, grid
from test_ops_decode_agreement_world import fake_world
from test_ops_decode_all_reduce import tables  # noqa: F401 (a fixture of these tests)

import triton_dist.ops  # noqa: F401 (registers torch.ops.triton_dist.*)
from triton_dist.ops.all_reduce import AllReduceError
from triton_dist.ops.all_reduce import config as ar_config
from triton_dist.ops.all_reduce import kernels as ar_kernels
from triton_dist.ops.all_reduce import op as ar_op
from triton_dist.ops.common import ll_words

AllReduceConfig = ar_config.AllReduceConfig
BENCH = Path(__file__).resolve().parents[2] / "bench"

EPOCHS = [1, 2, 3, 0x12345, 2**31 - 2, 2**31 - 1]


# ---------------------------------------------------------------------------------------------------------------
# Kernels run in the interpreter (the subprocess below): the packing helpers, the epoch step.


@triton.jit
def _pack_kernel(x_ptr, words_ptr, epoch, n, BLOCK: tl.constexpr, PER_WORD: tl.constexpr):
    word = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    words = ll_words._ll_pack(ll_words._ll_payload(x_ptr, word, n, PER_WORD), epoch)
    tl.store(words_ptr + word, words.to(tl.int64, bitcast=True), mask=word * PER_WORD < n)


@triton.jit
def _unpack_kernel(words_ptr, out_ptr, epochs_ptr, n, BLOCK: tl.constexpr, PER_WORD: tl.constexpr):
    word = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = word * PER_WORD < n
    words = tl.load(words_ptr + word, mask=mask).to(tl.uint64, bitcast=True)
    high, payload = ll_words._ll_unpack(words)
    low_values, high_values = ll_words._ll_elements(payload, out_ptr.dtype.element_ty, PER_WORD)
    ll_words._ll_store_elements(out_ptr, word, n, low_values, high_values, PER_WORD)
    tl.store(epochs_ptr + word, high, mask=mask)


@triton.jit
def _next_epoch_kernel(epochs_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, ll_words._ll_next_epoch(tl.load(epochs_ptr + offs, mask=mask)), mask=mask)


BITS = {"bfloat16": torch.int16, "float16": torch.int16, "float32": torch.int32}


def bit_patterns(dtype_name: str) -> torch.Tensor:
    """Every 16-bit pattern (bf16 / fp16: NaNs, infinities, -0, subnormals included); for fp32 the special values,
    their neighbours and random patterns."""
    if BITS[dtype_name] == torch.int16:
        return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    special = torch.tensor(
        [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-45, -1e-45, 3.4028235e38, -3.4028235e38]
    ).view(torch.int32)
    edges = torch.tensor([0x7FC00001, 0x7F800001, -1, -(2**31), 2**31 - 1, 0x00800000, 0x007FFFFF], dtype=torch.int32)
    random = torch.randint(-(2**31), 2**31 - 1, (20_000,), generator=torch.Generator().manual_seed(0))
    return torch.cat([special, edges, random.to(torch.int32)])


def round_trip(dtype_name: str, epoch: int, drop: int = 0) -> dict:
    """Pack and unpack every pattern (less the last ``drop``: an odd count leaves a half-used last word)."""
    bits = bit_patterns(dtype_name)
    bits = bits[: bits.numel() - drop]
    x = bits.view(getattr(torch, dtype_name))
    n = x.numel()
    per_word = ar_config.ll_elements_per_word(x.element_size())
    count = triton.cdiv(n, per_word)
    words = torch.zeros(count, dtype=torch.int64)
    block = 1024
    _pack_kernel[(triton.cdiv(count, block),)](x, words, epoch, n, BLOCK=block, PER_WORD=per_word)
    out = torch.zeros_like(x)
    epochs = torch.zeros(count, dtype=torch.int32)
    _unpack_kernel[(triton.cdiv(count, block),)](words, out, epochs, n, BLOCK=block, PER_WORD=per_word)
    width = 16 if BITS[dtype_name] == torch.int16 else 32
    unsigned = bits.to(torch.int64) & ((1 << width) - 1)
    if per_word == 2:  # element 2w in the low half, 2w + 1 (0 past the end) in the high
        unsigned = torch.nn.functional.pad(unsigned, (0, count * 2 - n))
        unsigned = unsigned[0::2] | (unsigned[1::2] << 16)
    return {
        "bits_back": bool(torch.equal(out.view(BITS[dtype_name]), bits)),
        "epochs_back": bool((epochs == epoch).all()),
        "high_is_epoch": bool(((words >> 32) == epoch).all()),
        "low_is_the_elements_bits": bool(((words & 0xFFFFFFFF) == unsigned).all()),
    }


def next_epochs(values: list[int]) -> list[int]:
    epochs = torch.tensor(values, dtype=torch.int32)
    out = torch.zeros_like(epochs)
    _next_epoch_kernel[(1,)](epochs, out, len(values), BLOCK=triton.next_power_of_2(len(values)))
    return out.tolist()


def _main() -> None:
    request = json.loads(sys.argv[1])
    results = {
        "round_trip": {f"{d} {e}": round_trip(d, e) for d in BITS for e in request["epochs"]},
        "odd": {d: round_trip(d, request["epochs"][0], drop=1) for d in BITS},
        "next": next_epochs(request["next"]),
    }
    print(json.dumps(results))


def test_packing_round_trips_every_bit_pattern_and_epoch_is_the_high_word():
    from dl_compile import run_in_interpreter

    results = run_in_interpreter(__file__, {"epochs": EPOCHS, "next": [0, 1, 2, 7, 2**31 - 3, 2**31 - 2, 2**31 - 1]})
    assert len(results["round_trip"]) == len(BITS) * len(EPOCHS)
    for what, got in [*results["round_trip"].items(), *results["odd"].items()]:
        assert got == dict.fromkeys(got, True), f"{what}: {got}"
    # Epochs never reach 0 (the zeroed buffers' value) and the parity alternates, across the wrap too.
    assert results["next"] == [1, 2, 3, 8, 2**31 - 2, 2**31 - 1, 2]


# ---------------------------------------------------------------------------------------------------------------
# The compiled kernel (sm_90)


def _ll_kernel(dtype: str, block: int, num_warps: int, world: int = 2):
    from dl_compile import compile_kernel, need_real_library

    need_real_library("sm_90")
    signature = {"x_ptr": f"*{dtype}", "out_ptr": f"*{dtype}", "data_ptr": "*i64", "epochs_ptr": "*i32", "n": "i32"}
    constexprs = {
        "REGION": ar_config.ll_region_bytes(world) // 8,
        "LANES": ar_config.LL_LANES,
        "BLOCK": block,
        "PER_WORD": PER_WORD[dtype],
        "WATCHED": False,
    }
    aligned = ("x_ptr", "out_ptr", "data_ptr")
    return compile_kernel(ar_kernels._one_shot_ll_kernel, signature, "sm_90", constexprs, aligned, num_warps=num_warps)


PER_WORD = {"bf16": 2, "fp16": 2, "fp32": 1}

# (dtype, block, num_warps): the extremes of the launch shapes (one word per thread; 16 per thread).
SHAPES = [("bf16", 32, 1), ("bf16", 512, 1), ("fp16", 1024, 2), ("fp32", 256, 4), ("fp32", 1024, 4), ("bf16", 256, 8)]


@pytest.mark.parametrize(("dtype", "block", "num_warps"), SHAPES)
def test_ll_kernel_ptx_fence_relaxed_words_and_poll_loop(dtype, block, num_warps):
    from asm_loops import loop_components, ptx_blocks
    from dl_compile import assembly

    asm = assembly(_ll_kernel(dtype, block, num_warps), "sm_90")
    lines = asm.splitlines()
    stores = [i for i, line in enumerate(lines) if "st.relaxed.sys.global.b64" in line]
    loads = [i for i, line in enumerate(lines) if "ld.relaxed.sys.global.b64" in line]
    fences = [i for i, line in enumerate(lines) if "fence.acq_rel.sys" in line]
    assert stores and loads, "the words must travel as relaxed system-scope 8-byte accesses"
    assert len(fences) == 1 and fences[0] < min(stores + loads), "one fence.acq_rel.sys before the first word access"
    per_thread = max(1, block // (32 * num_warps))
    assert len(stores) == per_thread, "one 8-byte store per word of a thread (not merged, not duplicated)"
    # No weak store reaches the word buffer: the only other stores are the output and the epoch.
    assert not re.search(r"st\.global(\.v\d)?\.b64", asm), "a weak 8-byte store (not single-copy atomic)"
    loops = loop_components(ptx_blocks(asm))
    polls = [loop for loop in loops if any("ld.relaxed.sys.global.b64" in line for b in loop for line in b.lines)]
    assert polls, "the relaxed loads must be inside the poll loop (not hoisted out of it)"
    inside = [line.strip() for loop in loops for block_ in loop for line in block_.lines]
    assert not [line for line in inside if ".local" in line], "local memory inside a loop"
    assert not [line for line in inside if re.match(r"(@!?%p\d+\s+)?call", line)], "a call inside a loop"
    # One relaxed load per word of a thread, all in the poll's loop (the poll is not cloned: see below).
    assert len(loads) == per_thread


@pytest.mark.parametrize(("dtype", "block", "num_warps"), [("bf16", 512, 1), ("fp32", 1024, 2), ("fp32", 1024, 8)])
def test_ll_kernel_sass_strong_system_accesses_and_no_spills_in_loops(dtype, block, num_warps):
    from asm_loops import loop_instructions
    from dl_compile import sass

    listing = sass(_ll_kernel(dtype, block, num_warps))
    loops = loop_instructions(listing, "sass")
    assert any("LDG.E.64.STRONG.SYS" in line for line in loops), "the poll's loads must be strong, system scope"
    assert "STG.E.64.STRONG.SYS" in listing
    assert "MEMBAR.ALL.SYS" in listing or "MEMBAR.SC.SYS" in listing, "fence.acq_rel.sys became no system fence"
    assert not [line for line in loops if re.search(r"\b(LDL|STL)\b", line)], "local memory inside a loop"
    assert not [line for line in loops if re.search(r"\bCALL\b", line)], "a call inside a loop"
    assert not re.search(r"\b(LDL|STL)\b", listing), "register spills (at most 16 words per thread)"


# ---------------------------------------------------------------------------------------------------------------
# The poll: a per-thread PTX loop, at every launch shape the tuner tries

TUNER_SHAPES = [
    (32, 1), (64, 1), (64, 2), (128, 1), (128, 2), (128, 4), (256, 1), (256, 2), (256, 4), (256, 8),
    (512, 1), (512, 2), (512, 4), (512, 8), (1024, 2), (1024, 4), (1024, 8),
]  # fmt: skip
"""(block, num_warps) of every LL launch shape tune() tries at 2 ranks (bf16 and fp32, 64 B to 1 MiB)."""

_SASS_NOT_IN_A_POLL = r"\b(BAR|STS|LDS|LDSM|SHFL|ATOMS|MEMBAR|ERRBAR|CALL|LDL|STL)\b"
"""Barriers, shared memory, shuffles, fences, calls, local memory: none belongs in the poll or the peer loop."""


def test_tuner_shapes_are_the_ones_compiled(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", None)
    shapes = set()
    for nbytes in [1 << k for k in range(6, 21)]:
        for itemsize in (2, 4):
            for config in ar_config.candidate_configs(nbytes, itemsize, 2):
                if config.algo == "one_shot_ll":
                    shapes.add(
                        (ar_config.launch_shape(nbytes // itemsize, itemsize, 2, config).block, config.num_warps)
                    )
    assert shapes == set(TUNER_SHAPES)


def _normalized_sass(listing: str) -> str:
    """asm_loops reads ``[@P] BRA target``; ptxas also puts a branch's condition among its operands (``@P1 BRA P3,
    0x800``, ``BRA !P3, 0x800``): spelled the first way here, so the loop analysis sees those back edges too."""
    listing = re.sub(r"(@!?U?P\w+\s+)BRA\s+!?U?P\w+,\s*", r"\1BRA ", listing)
    return re.sub(r"(\s)BRA\s+(!?U?P\w+),\s*", r"\1@\2 BRA ", listing)


def _innermost_loops(blocks: list) -> list[list]:
    """The innermost loops of a listing's blocks: a loop component's header is its block entered from outside it;
    without the edges back to the header, the component's own loops are the nested ones."""
    from asm_loops import Block, loop_components

    found = []
    for loop in loop_components(blocks):
        names = {block.name for block in loop}
        entered = {s for block in blocks if block.name not in names for s in block.successors} & names
        headers = [block.name for block in loop if block.name in entered or block is blocks[0]]
        assert len(headers) == 1, f"a loop with {len(headers)} entries"
        inner = [Block(b.name, b.lines, [s for s in b.successors if s in names and s != headers[0]]) for b in loop]
        inner.sort(key=lambda block: block.name != headers[0])  # the header first: the sub-graph's entry
        nested = _innermost_loops(inner)
        found += nested or [loop]
    return found


def _poll_asm_blocks(ptx: str) -> list[list[str]]:
    """The lines of each innermost ``{ }`` block of ``ptx`` (braces on lines of their own: not the function's
    body) that loads a relaxed system-scope word, braces included."""
    lines = [line.strip() for line in ptx.splitlines()]
    opened, found = [], []
    for i, line in enumerate(lines):
        if line == "{":
            opened.append(i)
        elif line == "}" and opened:
            start = opened.pop()
            inner = any(start < other for other, _ in found)
            if not inner and any("ld.relaxed.sys.global.b64" in line_ for line_ in lines[start:i]):
                found.append((start, i))
    return [lines[start : end + 1] for start, end in found]


def _check_poll_ptx(lines: list[str], per_thread: int) -> None:
    """One asm instance's poll: a loop on its own label, every load inside, no other thread involved."""
    label = lines.index("LL_POLL:")
    back = [i for i, line in enumerate(lines) if re.fullmatch(r"@%\w+ bra LL_POLL;", line)]
    loads = [i for i, line in enumerate(lines) if re.search(r"(^|\s)ld\.", line)]
    assert len(back) == 1 and label < min(loads) and max(loads) < back[0], "the loads are not inside the poll loop"
    assert all("ld.relaxed.sys.global.b64" in lines[i] for i in loads) and len(loads) == per_thread
    text = "\n".join(lines)
    assert lines[0] == "{" and lines[-1] == "}", "the label must be local to a { } block"
    assert not re.search(r"\b(bar|barrier|shfl|membar|fence|atom|red|st)\.|\.shared", text), text


@pytest.mark.parametrize(("block", "num_warps"), TUNER_SHAPES)
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_ll_poll_is_a_per_thread_loop_without_barriers(dtype, block, num_warps):
    """Each thread spins on its own words in PTX: the loop has only its relaxed loads, compares and branch, and the
    peer loop around it no barrier, shared memory or shuffle (a Triton while needs a block-wide reduction per pass,
    and a thread holding several elements also converted layouts through shared memory per peer)."""
    from asm_loops import loop_components, ptx_blocks, sass_blocks
    from dl_compile import assembly, sass

    compiled = _ll_kernel(dtype, block, num_warps)
    per_thread = max(1, block // (32 * num_warps))
    ptx = assembly(compiled, "sm_90")
    polls = _poll_asm_blocks(ptx)
    assert len(polls) == 1, f"{len(polls)} poll instances: one per peer iteration expected (a cloned poll runs twice)"
    _check_poll_ptx(polls[0], per_thread)
    assert ptx.count("ld.relaxed.sys.global.b64") == per_thread
    in_loops = [line for loop in loop_components(ptx_blocks(ptx)) for block_ in loop for line in block_.lines]
    assert any("ld.relaxed.sys.global.b64" in line for line in in_loops), "the poll must sit in the peer loop"
    assert not [line for line in in_loops if re.search(r"\b(bar|barrier|shfl)\.|\.shared", line)]

    listing = _normalized_sass(sass(compiled))
    blocks = sass_blocks(listing)
    strong = "LDG.E.64.STRONG.SYS"
    assert listing.count(strong) == per_thread, "one strong 8-byte load per element of a thread, in one poll"
    (poll,) = [loop for loop in _innermost_loops(blocks) if any(strong in line for b in loop for line in b.lines)]
    poll_lines = [line for b in poll for line in b.lines]
    assert sum(strong in line for line in poll_lines) == per_thread, "every load of the poll in its innermost loop"
    assert not [line for line in poll_lines if "LDG" in line and strong not in line]
    (peer_loop,) = [loop for loop in loop_components(blocks) if any(strong in line for b in loop for line in b.lines)]
    peer_lines = [line for b in peer_loop for line in b.lines if not line.startswith("@!PT")]  # never executed
    assert not [line for line in peer_lines if re.search(_SASS_NOT_IN_A_POLL, line)], "a barrier in the receive"


@triton.jit
def _polls_kernel(words_ptr, out_ptr, epoch, n, BLOCK: tl.constexpr, PEERS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for peer in tl.static_range(PEERS):  # unrolled: PEERS instances of the poll's asm in one function
        _, payload = ll_words._ll_unpack(ll_words._ll_poll(words_ptr + peer * BLOCK + offs, tl.where(mask, epoch, 0)))
        acc += payload.to(tl.float32, bitcast=True)
    tl.store(out_ptr + offs, acc, mask=mask)


@pytest.mark.parametrize(("block", "num_warps"), [(128, 4), (512, 4), (1024, 2)])
def test_poll_asm_assembles_many_times_in_one_kernel(block, num_warps):
    """Its label and registers are local to its { } block: three unrolled polls of 1, 4 and 16 words per thread
    assemble (Triton's ptxas) into three loops of their own."""
    from asm_loops import sass_blocks
    from dl_compile import assembly, compile_kernel, need_real_library, sass

    need_real_library("sm_90")
    signature = {"words_ptr": "*i64", "out_ptr": "*fp32", "epoch": "i32", "n": "i32"}
    constexprs = {"BLOCK": block, "PEERS": 3}
    compiled = compile_kernel(_polls_kernel, signature, "sm_90", constexprs, ("words_ptr",), num_warps=num_warps)
    per_thread = block // (32 * num_warps)
    polls = _poll_asm_blocks(assembly(compiled, "sm_90"))
    assert len(polls) == 3
    for poll in polls:
        _check_poll_ptx(poll, per_thread)
    strong = "LDG.E.64.STRONG.SYS"
    loops = [loop for loop in _innermost_loops(sass_blocks(_normalized_sass(sass(compiled)))) if strong in str(loop)]
    assert [sum(strong in line for b in loop for line in b.lines) for loop in loops] == [per_thread] * 3


def test_poll_asm_operands():
    """$0.. the words, then the addresses, then the epochs; the pending state is one 32-bit register per word (the
    epoch still awaited, 0 once seen), not a predicate per word (16 would spill out of sm_90's 7 predicates)."""
    asm, constraints = ll_words._ll_poll_asm(3)
    assert constraints == "=l,=l,=l,l,l,l,r,r,r"
    assert "ld.relaxed.sys.global.b64 %llw2, [$5];" in asm and "mov.b32 %llk2, $8;" in asm
    assert "mov.b64 $2, %llw2;" in asm and asm.count("LL_POLL") == 2
    assert asm.count(".reg .pred") == 1 and ".reg .b32 %llk<3>;" in asm
    assert ll_words._ll_words_per_thread(1024, 2) == 16 and ll_words._ll_words_per_thread(32, 4) == 1


# ---------------------------------------------------------------------------------------------------------------
# Configs, launch shapes, selection


def _check_ll_launch_shape(world_size: int, numel: int, programs: int, num_warps: int, itemsize: int) -> None:
    config = AllReduceConfig("one_shot_ll", programs, num_warps)
    per_word = 2 if itemsize == 2 else 1
    capacity = ar_config.ll_capacity(config, itemsize)
    assert capacity == programs * min(ar_config.LL_LANES, 16 * 32 * num_warps) * per_word
    if numel > capacity:
        assert not ar_config.fits(config, numel, itemsize)
        with pytest.raises(ValueError, match=rf"one_shot_ll with {programs} programs .* at most {capacity}"):
            ar_config.launch_shape(numel, itemsize, world_size, config)
        return
    assert ar_config.fits(config, numel, itemsize)
    shape = ar_config.launch_shape(numel, itemsize, world_size, config)
    words = -(-numel // per_word)
    assert shape.block == shape.round and shape.round & (shape.round - 1) == 0
    assert 32 * num_warps <= shape.round <= min(ar_config.LL_LANES, 16 * 32 * num_warps)  # >= 1, <= 16 words per thread
    assert 1 <= shape.programs <= programs and shape.programs * shape.round >= words  # one round covers it
    assert (shape.programs - 1) * shape.round < words  # no program without a word
    assert shape.region_elems * 8 == ar_config.ll_region_bytes(world_size) == 2 * world_size * ar_config.LL_LANES * 8


def test_ll_launch_shape_one_round_within_the_slot():
    """Every (world size, message, programs, warps, element size) of the grid: one round of at most 16 words per
    thread covers the message, or the config is refused naming its capacity (case_grid: a failure names its case)."""
    cases = grid(
        world_size=[1, 2, 3, 8],
        numel=[1, 7, 33, 4096, 4097, 65_539, 131_072, 262_144],
        programs=[1, 4, 37, 128],
        num_warps=[1, 2, 4, 8, 16],
        itemsize=[2, 4],
    )
    assert check_each(_check_ll_launch_shape, cases) == 4 * 8 * 4 * 5 * 2


def test_ll_config_bounds_and_vendor(monkeypatch):
    assert ar_config.SLOTS["one_shot_ll"] == 128 and ar_config.ll_max_numel(4) == 128 * ar_config.LL_LANES
    assert ar_config.ll_max_numel(2) == 2 * 128 * ar_config.LL_LANES  # two 16-bit elements per word
    with pytest.raises(ValueError, match=r"one_shot_ll programs must be in \[1, 128\]"):
        AllReduceConfig("one_shot_ll", 129)
    for itemsize in (2, 4):
        ar_config.launch_shape(ar_config.ll_max_numel(itemsize), itemsize, 2, AllReduceConfig("one_shot_ll", 128, 2))
        with pytest.raises(
            ValueError, match=f"at most {ar_config.ll_max_numel(itemsize)} elements of {itemsize} bytes"
        ):
            ar_config.launch_shape(
                ar_config.ll_max_numel(itemsize) + 1, itemsize, 2, AllReduceConfig("one_shot_ll", 128, 2)
            )
    with pytest.raises(ValueError, match="at most 131072 elements"):  # one warp: 16 words per thread
        ar_config.launch_shape(ar_config.ll_max_numel(2), 2, 2, AllReduceConfig("one_shot_ll", 128, 1))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert not ar_config.ll_supported() and not ar_config.fits(AllReduceConfig("one_shot_ll", 8), 10, 2)
    with pytest.raises(ValueError, match="one_shot_ll needs an NVIDIA GPU"):
        ar_config.launch_shape(10, 2, 2, AllReduceConfig("one_shot_ll", 8))
    assert ar_config.fits(AllReduceConfig("one_shot", 8), 10, 2) and ar_config.fits(
        AllReduceConfig("two_shot", 8), 1 << 30, 4
    )


def test_a_config_that_cannot_run_raises_before_the_collective(monkeypatch):
    fake = fake_world(monkeypatch, ar_op)
    x = torch.zeros(5000)
    with pytest.raises(AllReduceError, match="at most 4096 elements"):
        ar_op._run(x, torch.empty_like(x), "sum", AllReduceConfig("one_shot_ll", 4, 4))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    with pytest.raises(AllReduceError, match="NVIDIA"):
        ar_op._run(torch.zeros(16), torch.empty(16), "sum", AllReduceConfig("one_shot_ll", 4, 4))
    assert fake.agreements == [] and fake.launches == [], "the rank agreement ran for a config that cannot run"


@pytest.mark.parametrize("itemsize", [2, 4])
@pytest.mark.parametrize("nbytes", [8 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 64 << 20])
def test_candidates_offer_ll_on_cuda_up_to_its_size(monkeypatch, nbytes, itemsize):
    numel = nbytes // itemsize
    monkeypatch.setattr(torch.version, "hip", None)
    cuda = ar_config.candidate_configs(nbytes, itemsize, 2)
    ll = [c for c in cuda if c.algo == "one_shot_ll"]
    if numel <= ar_config.ll_max_numel(itemsize):
        assert ll, f"no one_shot_ll candidate at {nbytes} bytes"
        assert all(ar_config.fits(c, numel, itemsize) for c in ll)
        assert {c.num_warps for c in ll} >= {2, 4, 8}
        shapes = [(ar_config.launch_shape(numel, itemsize, 2, c), c.num_warps) for c in ll]
        assert len(set(shapes)) == len(shapes), "one candidate per launch shape"
    else:
        assert not ll
    assert {c.algo for c in cuda} >= {"two_shot"}
    monkeypatch.setattr(torch.version, "hip", "6.2")
    hip = ar_config.candidate_configs(nbytes, itemsize, 2)
    assert not [c for c in hip if c.algo == "one_shot_ll"]
    assert hip == [c for c in cuda if c.algo != "one_shot_ll"]


def test_selection_falls_back_when_a_table_ll_row_cannot_run(monkeypatch, tables):  # noqa: F811 (the fixture)
    device = torch.device("cuda", 0)
    ll = AllReduceConfig("one_shot_ll", 16, 4)  # 16 x 1024 words: 32768 bf16 or 16384 fp32 elements
    tables([(32 << 10, ll)])  # a table tuned up to 32 KiB only
    assert ar_config.select_config(32 << 10, device, 2, 2) == ll
    assert ar_config.select_config(16 << 10, device, 2, 4) == ll
    assert ar_config.select_config(64 << 10, device, 2, 2) == ll  # past the last row: 32768 bf16 elements still fit
    assert ar_config.select_config(64 << 10, device, 2, 4) == ll  # and 16384 fp32
    assert ar_config.select_config(128 << 10, device, 2, 2) == ar_config.heuristic_config(
        128 << 10, 2
    )  # 65536 bf16 do not
    assert ar_config.select_config(128 << 10, device, 2, 4) == ar_config.heuristic_config(128 << 10, 2)
    ar_config._selected.clear()
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert ar_config.select_config(1024, device, 2, 2) == ar_config.heuristic_config(1024, 2)


def test_the_watchdog_leaves_ll_in_the_selection_and_the_tuner(monkeypatch, tables):  # noqa: F811 (the fixture)
    """With a wait timeout configured the LL kernel is compiled with bounded polls that end in a dl.wait (below), so
    the selection and the tuner keep offering it."""
    from triton_dist.compiler import watchdog

    monkeypatch.setattr(torch.version, "hip", None)
    device = torch.device("cuda", 0)
    ll = AllReduceConfig("one_shot_ll", 16, 4)
    tables([(32 << 10, ll)])
    watchdog.set_wait_timeout(5)
    try:
        assert ar_config.select_config(8 << 10, device, 2, 2) == ll
        assert any(c.algo == "one_shot_ll" for c in ar_config.candidate_configs(8 << 10, 2, 2))
    finally:
        watchdog.set_wait_timeout(None)


def test_a_forced_ll_config_runs_with_the_watchdog_on(monkeypatch):
    """A forced LL config passes the checks and reaches the ranks' agreement with the watchdog on."""
    from triton_dist.compiler import watchdog

    monkeypatch.setattr(torch.version, "hip", None)
    fake = fake_world(monkeypatch, ar_op)
    watchdog.set_wait_timeout(5)
    try:
        x = torch.zeros(4096, dtype=torch.bfloat16)
        ar_op._run(x, torch.empty_like(x), "sum", AllReduceConfig("one_shot_ll", 4, 4))
    finally:
        watchdog.set_wait_timeout(None)
    assert len(fake.agreements) == 1


def test_bounded_poll_asm_gives_up_after_its_passes():
    """The watched poll counts its passes in one register and leaves the loop when they run out, through the same
    single predicated branch back (no second exit, nothing per pass but an add and a compare)."""
    asm, constraints = ll_words._ll_poll_asm(2, ll_words.LL_WATCHED_POLL_PASSES)
    assert constraints == ll_words._ll_poll_asm(2)[1]
    lines = [line.strip() for line in asm.split("\n")]
    assert "mov.b32 %llpass, 0;" in lines and "add.u32 %llpass, %llpass, 1;" in lines
    assert f"setp.lt.u32 %llp, %llpass, {ll_words.LL_WATCHED_POLL_PASSES};" in lines
    assert "setp.ne.and.b32 %llp, %llany, 0, %llp;" in lines
    assert sum("bra" in line for line in lines) == 1 and "@%llp bra LL_POLL;" in lines
    assert "%llpass" not in ll_words._ll_poll_asm(2), "the unwatched poll is unchanged"


@pytest.mark.parametrize(("dtype", "block", "num_warps"), [("bf16", 32, 1), ("bf16", 1024, 2), ("fp32", 1024, 4)])
def test_watched_ll_kernel_bounded_polls_then_a_watched_wait(dtype, block, num_warps, monkeypatch):
    """WATCHED=True (the watchdog on): the peer loop's poll is bounded and still free of barriers, shared memory and
    shuffles; after it, one reduction decides whether any word missed; the late path waits with dl.wait, which the
    watchdog library times out (it reads %globaltimer); nothing spills."""
    from asm_loops import loop_components, ptx_blocks
    from dl_compile import assembly, compile_kernel, need_real_library, sass

    from triton_dist.compiler import watchdog

    need_real_library("sm_90")
    watchdog.set_wait_timeout(5)
    try:
        signature = {"x_ptr": f"*{dtype}", "out_ptr": f"*{dtype}", "data_ptr": "*i64", "epochs_ptr": "*i32", "n": "i32"}
        constexprs = {
            "REGION": ar_config.ll_region_bytes(2) // 8,
            "LANES": ar_config.LL_LANES,
            "BLOCK": block,
            "PER_WORD": PER_WORD[dtype],
            "WATCHED": True,
        }
        aligned = ("x_ptr", "out_ptr", "data_ptr")
        compiled = compile_kernel(
            ar_kernels._one_shot_ll_kernel, signature, "sm_90", constexprs, aligned, num_warps=num_warps
        )
    finally:
        watchdog.set_wait_timeout(None)
    ptx = assembly(compiled, "sm_90")
    per_thread = max(1, block // (32 * num_warps))
    polls = _poll_asm_blocks(ptx)
    assert len(polls) == 3, "the peer loop's poll, and the late path's first and repeated polls"
    for poll in polls:
        assert f"setp.lt.u32 %llp, %llpass, {ll_words.LL_WATCHED_POLL_PASSES};" in poll, "an unbounded poll"
        assert sum("ld.relaxed.sys.global.b64" in line for line in poll) == per_thread
    assert "globaltimer" in ptx, "the late path's dl.wait is not the watched one"
    first_load = next(line.strip() for line in ptx.splitlines() if "ld.relaxed.sys.global.b64" in line)
    (peer_loop,) = [
        loop
        for loop in loop_components(ptx_blocks(ptx))
        if any(first_load == line.strip() for b in loop for line in b.lines)
    ]
    peer_lines = [line for b in peer_loop for line in b.lines]
    assert not [line for line in peer_lines if re.search(r"\b(bar|barrier|shfl)\.|\.shared", line)], "a barrier"
    assert not re.search(r"\b(LDL|STL)\b", sass(compiled)), "register spills"


# ---------------------------------------------------------------------------------------------------------------
# tune(): a wrong candidate is never kept, whatever its speed


def test_tune_skips_a_wrong_candidate_however_fast(monkeypatch, capsys):
    """bench/all_reduce.py's tuner."""
    sys.path.insert(0, str(BENCH))
    try:
        bench = importlib.import_module("all_reduce")
    finally:
        sys.path.remove(str(BENCH))
    world = SimpleNamespace(device=torch.device("cpu"), world_size=2, rank=0, group=None)
    monkeypatch.setattr(bench.rt, "current_world", lambda: world)
    right = AllReduceConfig("one_shot", 4, 4)
    stale = AllReduceConfig("one_shot_ll", 8, 4)  # fastest, but sums only some ranks (a broken protocol)
    unwritten = AllReduceConfig("two_shot", 2, 8)  # leaves part of the output unwritten
    slow_right = AllReduceConfig("two_shot", 8, 8)
    monkeypatch.setattr(bench, "candidate_configs", lambda *args: [stale, unwritten, right, slow_right])

    def fake_all_reduce(tensor, op=None, group=None):  # noqa: ANN001
        if op is None:  # sum over two ranks holding the same input
            tensor.mul_(2)

    monkeypatch.setattr(torch.distributed, "all_reduce", fake_all_reduce)

    def fake_run(x, out, config):  # noqa: ANN001
        if config == stale:
            out.copy_(x)
        elif config == unwritten:
            out[: x.numel() // 2].copy_(x[: x.numel() // 2] * 2)
        else:
            out.copy_((x.float() * 2).to(x.dtype))

    monkeypatch.setattr(bench, "run_config", fake_run)
    speed = {stale: 1.0, unwritten: 2.0, right: 3.0, slow_right: 4.0}
    timed = []

    def fake_graphed_us(fn):  # noqa: ANN001
        config = fn.__defaults__[2]
        timed.append(config)
        return speed[config]

    monkeypatch.setattr(bench, "graphed_us", fake_graphed_us)
    rows = bench.tune([8 << 10, 4 << 10], torch.bfloat16, write_cache=False)
    assert [(b, c) for b, c, _ in rows] == [(4 << 10, right), (8 << 10, right)]
    assert timed == [right, slow_right] * 2, "a wrong candidate was timed"
    printed = capsys.readouterr().out
    assert printed.count("one_shot_ll") == 2 and "wrong result" in printed
    assert printed.count("two_shot") == 2 and "nan" in printed  # the unwritten half is still the NaN poison
    monkeypatch.setattr(bench, "candidate_configs", lambda *args: [stale])
    with pytest.raises(RuntimeError, match="no candidate config gave the right sum at 8192 bytes"):
        bench.tune([8 << 10], torch.bfloat16, write_cache=False)


if __name__ == "__main__":
    _main()
