"""``triton_dist.ops.gemm_rs`` without a GPU: its kernels compile for sm_90 (TMA + wgmma, remote pushes, release
flags, acquire waits) and gfx942 (the pointer fallback), and the host side rejects bad input before any launch.

The GPU behaviour (correctness against torch, CUDA graphs, torch.compile, errors that need peers) is checked by
test/gpu/check_gemm_rs.py under torchrun.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import re
import sys

import pytest
import torch
import torch.distributed as dist
import triton
import triton.language as tl
from dl_compile import assembly, compile_kernel, context_is_defined_and_used, need_library
from triton.backends.compiler import GPUTarget

from triton_dist.compiler import Checks
from triton_dist.ops import tuning
from triton_dist.ops.matmul import MatmulConfig

grs = importlib.import_module("triton_dist.ops.gemm_rs")  # the module (ops.gemm_rs is the function)
grs_kernels = importlib.import_module("triton_dist.ops.gemm_rs.kernels")

SCALARS = {"M": "i32", "N": "i32", "K": "i32", "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32",
           "stride_bn": "i32", "stride_om": "i32"}  # fmt: skip
ALIGNED = ("out_ptr", "scratch_ptr", "flags_ptr", "N", "stride_om")


def gemm_rs_signature(config: grs.GemmRSConfig, dtype: str = "bf16") -> dict[str, str]:
    tile = config.matmul
    if tile.use_tma:
        operands = {
            "a": f"tensordesc<{dtype}[{tile.block_m}, {tile.block_k}]>",
            "b": f"tensordesc<{dtype}[{tile.block_k}, {tile.block_n}]>",
        }
    else:
        operands = {"a": f"*{dtype}", "b": f"*{dtype}"}
    partial = "fp32" if config.partial_dtype == "float32" else dtype
    return {**operands, "out_ptr": f"*{dtype}", "scratch_ptr": f"*{partial}", "flags_ptr": "*i32",
            "epoch_ptr": "*i32", **SCALARS}  # fmt: skip


def compile_gemm_rs(  # noqa: ANN201
    config: grs.GemmRSConfig,
    target_name: str,
    dtype: str = "bf16",
    local_only: bool = False,
    checks: Checks | None = None,
):
    tile = config.matmul
    constexprs = {
        "LOCAL_ONLY": local_only,
        "BLOCK_M": tile.block_m, "BLOCK_N": tile.block_n, "BLOCK_K": tile.block_k, "GROUP_M": tile.group_m,
        "SPLIT_N": tile.split_n, "USE_TMA": tile.use_tma, "FUSED": config.fused,
        "FLATTEN": config.flattens(),
    }  # fmt: skip
    return compile_kernel(
        grs._gemm_rs_kernel,
        gemm_rs_signature(config, dtype),
        target_name,
        constexprs=constexprs,
        aligned=ALIGNED,
        num_warps=tile.num_warps,
        checks=checks,
    )


HOPPER_SHARED_MEMORY = 232448  # bytes a Hopper program may use (227 KiB)


@pytest.mark.parametrize("config", [c for c in grs.CANDIDATES if c.gemm == "triton"], ids=lambda c: c.short())
def test_every_candidate_compiles_for_sm90_within_shared_memory(config):
    need_library("sm_90")
    compiled = compile_gemm_rs(config, "sm_90")
    assert compiled.metadata.shared <= HOPPER_SHARED_MEMORY, f"{config.short()} needs {compiled.metadata.shared} B"
    asm = assembly(compiled, "sm_90")
    assert "wgmma.mma_async" in asm, "the main loop runs on the tensor cores"
    assert "cp.async.bulk.tensor" in asm, "A and B tiles come in through TMA"
    assert context_is_defined_and_used(asm, "sm_90")
    waits = "ld.acquire.sys" in asm or "ld.global.acquire.sys" in asm
    assert waits == config.fused, "own tiles poll their peers' flags with system-scope acquire (fused only)"
    assert "release.sys" in asm, "pushed tiles are flagged with a system-scope release"


def test_the_no_communication_diagnostic_neither_flags_nor_waits():
    need_library("sm_90")
    asm = assembly(compile_gemm_rs(grs.GemmRSConfig(partial_dtype="input"), "sm_90", local_only=True), "sm_90")
    assert "wgmma.mma_async" in asm and "cp.async.bulk.tensor" in asm, "the same GEMM"
    assert "release.sys" not in asm and "acquire.sys" not in asm, "no flag written or polled"


@pytest.mark.parametrize("partial_dtype", ["input", "float32"])
def test_the_fused_kernels_main_loop_is_pipelined_as_without_communication(partial_dtype):
    """The flag protocol must not stop Triton's pipeliner: the fused kernel issues as many TMA loads as the same
    GEMM without communication (prologue + loop). A flag flushed just before the own tile's wait left 2 of 6, the
    main loop ran unpipelined and the fused kernel took 0.945 instead of 0.61 ms on 2 x H200 (8192,4096,12288)."""
    need_library("sm_90")
    config = grs.GemmRSConfig(partial_dtype=partial_dtype)
    assert config.fused and config.flattens(), "the default is the flattened fused kernel"
    fused = assembly(compile_gemm_rs(config, "sm_90"), "sm_90")
    alone = assembly(compile_gemm_rs(config, "sm_90", local_only=True), "sm_90")
    loads = fused.count("cp.async.bulk.tensor")
    assert loads == alone.count("cp.async.bulk.tensor") > 2, (
        f"{loads} TMA loads, without communication {alone.count('cp.async.bulk.tensor')}"
    )


def _loop_bodies(ttgir: str) -> list[list[str]]:
    """The lines of every ``scf.for`` region of a TTGIR listing (nested loops' lines included), outermost first."""
    lines = ttgir.splitlines()
    bodies = []
    for start, line in enumerate(lines):
        if re.search(r"\bscf\.for\b", line) and line.rstrip().endswith("{"):
            indent = len(line) - len(line.lstrip())
            end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(" " * indent + "}"))
            bodies.append(lines[start + 1 : end])
    return bodies


def _awaits_before_flagging(ttgir: str) -> bool:
    """Whether a loop of the fused kernel polls a flag before it sets the flag of its push, in one iteration.

    Where it does, in the flattened, pipelined loop an iteration holds the prologue of an item ``num_stages - 1``
    iterations ahead (the next one) and the epilogue of the current one: the next item's wait comes before the
    current item's flag."""
    for body in _loop_bodies(ttgir):
        flags = [i for i, line in enumerate(body) if "__triton_dist_notify" in line]
        waits = [i for i, line in enumerate(body) if "__triton_dist_wait" in line]
        if flags and waits and min(waits) < min(flags):
            return True
    return False


@functools.cache
def _fused_ttgir(config: grs.GemmRSConfig) -> str:
    return compile_gemm_rs(config, "sm_90").asm["ttgir"]


FUSED_CANDIDATES = [c for c in grs.CANDIDATES if c.gemm == "triton" and not c.fallback and c.fused]


@pytest.mark.parametrize("config", FUSED_CANDIDATES, ids=lambda c: c.short())
def test_the_fused_kernel_awaits_an_own_tile_only_after_flagging_its_pushes(config):
    """Every loop of the fused kernel sets its push's flag before it polls any flag. The default kernel awaited the
    own tile at the top of the item: in the flattened, pipelined loop that wait ran before the previous item's flag,
    and at 4096^3 on 4 x H200 every rank hung (``test_the_fused_kernels_waits_close_no_cycle``)."""
    need_library("sm_90")
    ttgir = _fused_ttgir(config)
    assert "__triton_dist_notify" in ttgir and "__triton_dist_wait" in ttgir
    assert not _awaits_before_flagging(ttgir), f"{config.short()}: a wait precedes the push's flag in a loop"


def _programs_finish(world: int, tiles: int, programs: int, await_before_flag: bool) -> bool:
    """Whether every program of the fused kernel on every rank gets through its items, in the kernel's item order.

    The model of ``_gemm_rs_kernel``: ``world * tiles`` items; program p takes p, p + programs, ...; item t is tile
    ``t % tiles`` of step ``t // tiles``, pushed to rank ``(rank + 1 + step) % world`` and flagged there, except at
    the last step (this rank's own tiles), awaited until all ``world - 1`` peers flagged that tile. A program whose
    next item is own awaits it after the current item's flag, or before it (``await_before_flag``, what the
    flattened loop did with the wait at the top of the item)."""
    items, own = world * tiles, (world - 1) * tiles
    events: dict[tuple[int, int], list[tuple[str, int, int]]] = {}
    for rank in range(world):
        for program in range(programs):
            order = list(range(program, items, programs))
            program_events = [("await", rank, order[0] - own)] if order and order[0] >= own else []
            for t, following in zip(order, [*order[1:], items], strict=True):
                step, tile = divmod(t, tiles)
                await_next = [("await", rank, following - own)] if own <= following < items else []
                flag = [("flag", (rank + 1 + step) % world, tile)] if step < world - 1 else []
                program_events += await_next + flag if await_before_flag else flag + await_next
            events[(rank, program)] = program_events
    done = dict.fromkeys(events, 0)
    flagged: dict[tuple[int, int], int] = {}
    moved = True
    while moved:
        moved = False
        for key, program_events in events.items():
            while done[key] < len(program_events):
                kind, rank, tile = program_events[done[key]]
                if kind == "flag":
                    flagged[(rank, tile)] = flagged.get((rank, tile), 0) + 1
                elif flagged.get((rank, tile), 0) < world - 1:
                    break
                done[key] += 1
                moved = True
    return all(done[key] == len(program_events) for key, program_events in events.items())


@pytest.mark.parametrize(
    ("world", "tiles", "programs"),
    [(2, 256, 132), (4, 128, 132), (2, 132, 132), (3, 66, 132), (4, 44, 132), (8, 64, 132), (3, 1, 2), (8, 19, 132)],
)
def test_the_fused_kernels_waits_close_no_cycle(world, tiles, programs):
    """The world-size-dependent hang, in the program order the compiled default kernel has: (tiles per shard,
    programs) as 4096^3 gives on 132 SMs at 2 ranks (256, 132) and at 4 (128, 132). With the own tile awaited
    before the previous item's flag, every tiles <= programs <= (world - 1) * tiles closes a cycle of waits through
    the ranks: 4096^3 at 4 ranks (every rank hung on 4 x H200), never at 2 ranks unless tiles == programs (the
    2-rank checks passed). The emulation cannot show it: the interpreter runs each program in source order."""
    need_library("sm_90")
    await_before_flag = _awaits_before_flagging(_fused_ttgir(grs.GemmRSConfig()))
    assert _programs_finish(world, tiles, programs, await_before_flag), (
        f"{world} ranks, {tiles} tiles per shard, {programs} programs: the waits close a cycle"
    )
    assert not _programs_finish(world, tiles, programs, True) or not tiles <= programs <= (world - 1) * tiles, (
        "the model shows the hang of the wait before the flag"
    )


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("fused", [True, False])
def test_pointer_fallback_compiles_for_gfx942(dtype, fused):
    need_library("gfx942")
    config = grs.choose_config(
        16384, 2048, 2048, torch.bfloat16, 2, torch.device("cpu"), GPUTarget("hip", "gfx942", 64), tuning.REFERENCE
    )
    assert not config.fallback and not config.matmul.use_tma, "AMD has no TMA: the pointer kernel"
    config = dataclasses.replace(config, fused=fused)
    compiled = compile_gemm_rs(config, "gfx942", dtype)
    asm = assembly(compiled, "gfx942")
    assert context_is_defined_and_used(asm, "gfx942")
    assert "v_mfma" in asm, "the main loop runs on the matrix cores"


@pytest.mark.parametrize("target_name", ["sm_90", "gfx942"])
def test_cublas_path_kernels_compile(target_name):
    need_library(target_name)
    kernels = [
        (grs._cublas_begin_kernel, {"epoch_ptr": "*i32", "ack_ptr": "*i32"}),
        (grs._cublas_wait_ack_kernel, {"ack_ptr": "*i32", "epoch_ptr": "*i32", "peer": "i32"}),
        (grs._cublas_flag_kernel, {"flags_ptr": "*i32", "epoch_ptr": "*i32", "peer": "i32"}),
    ]
    for kernel, signature in kernels:
        assert context_is_defined_and_used(
            assembly(compile_kernel(kernel, signature, target_name), target_name), target_name
        )
    wait = assembly(
        compile_kernel(grs._cublas_wait_kernel, {"flags_ptr": "*i32", "epoch_ptr": "*i32"}, target_name), target_name
    )
    assert context_is_defined_and_used(wait, target_name)
    reduce = compile_kernel(
        grs._cublas_reduce_kernel,
        {"out_ptr": "*bf16", "own_ptr": "*bf16", "recv_ptr": "*bf16", "numel": "i32", "num_received": "i32"},
        target_name,
        constexprs={"BLOCK": 4096},
        aligned=("out_ptr", "own_ptr", "recv_ptr", "numel"),
        num_warps=8,
    )
    asm = assembly(reduce, target_name)
    assert "__triton_dist_context" not in asm, "the ce reduction waits for nothing: no spinning programs"
    if target_name == "sm_90":
        assert re.search(r"ld\.global(\.nc)?\.v4", asm), "16-byte loads of the partials"
    if target_name == "sm_90":
        assert "ld.acquire.sys" in wait or "ld.global.acquire.sys" in wait


@pytest.mark.parametrize("target_name", ["sm_90", "gfx942"])
def test_direct_producers_begin_and_reduction_compile_with_their_waits(target_name):
    """The "direct" producer's two merged kernels: the begin (acks released to the peers, then their acks awaited
    with acquire) and the persistent reduction (the peers' flags awaited with acquire, then 16-byte loads)."""
    need_library(target_name)
    begin = assembly(
        compile_kernel(grs_kernels._cublas_begin_wait_kernel, {"epoch_ptr": "*i32", "ack_ptr": "*i32"}, target_name),
        target_name,
    )
    assert context_is_defined_and_used(begin, target_name)
    reduce = assembly(
        compile_kernel(
            grs_kernels._cublas_wait_reduce_kernel,
            {"out_ptr": "*bf16", "own_ptr": "*bf16", "recv_ptr": "*bf16", "flags_ptr": "*i32", "epoch_ptr": "*i32",
             "numel": "i32"},
            target_name,
            constexprs={"RECEIVED": 1, "BLOCK": 8192},
            aligned=("out_ptr", "own_ptr", "recv_ptr", "numel"),
            num_warps=8,
        ),
        target_name,
    )  # fmt: skip
    assert context_is_defined_and_used(reduce, target_name)
    if target_name == "sm_90":
        for asm in (begin, reduce):
            assert "ld.acquire.sys" in asm or "ld.global.acquire.sys" in asm, "waits with system-scope acquire"
        assert "release.sys" in begin, "acks sent with a system-scope release"
        assert len(re.findall(r"ld\.global(?:\.nc)?\.v4", reduce)) >= 2, "16-byte loads of own and received"


def test_reduce_kernel_compiles_for_both_targets():
    for target_name in ("sm_90", "gfx942"):
        need_library(target_name)
        compiled = compile_kernel(
            grs._reduce_partials_kernel,
            {
                "out_ptr": "*bf16",
                "scratch_ptr": "*fp32",
                "flags_ptr": "*i32",
                "epoch_ptr": "*i32",
                "M": "i32",
                "N": "i32",
                "stride_om": "i32",
            },  # fmt: skip
            target_name,
            constexprs={"BLOCK_M": 128, "BLOCK_N": 128, "GROUP_M": 8},
            num_warps=8,
        )
        assert context_is_defined_and_used(assembly(compiled, target_name), target_name)


def test_config_round_trips_and_rejects_unknown_partial_dtype():
    config = grs.GemmRSConfig(MatmulConfig(128, 128, 64, 8, 4, 8, False, 1), fused=False, partial_dtype="input")
    assert grs.GemmRSConfig.from_dict(config.as_dict()) == config
    assert "2kernel" in config.short() and "in" in config.short()
    with pytest.raises(ValueError, match="partial_dtype"):
        grs.GemmRSConfig(partial_dtype="float64")
    assert grs.FALLBACK.short() == "torch.matmul+nccl"
    assert grs.CUBLAS_CE.short() == "cublas-ce"
    with pytest.raises(ValueError, match="producer"):
        grs.GemmRSConfig(gemm="cublas", producer="nvlink")
    assert len({c.short() for c in grs.CANDIDATES}) == len(grs.CANDIDATES), "candidate names are unique"


def test_flatten_is_dropped_where_triton_cannot_flatten():
    one_block = grs.GemmRSConfig(MatmulConfig(128, 128, 64, 8, 4, 8, False, 1))
    assert not one_block.flattens()
    assert dataclasses.replace(one_block, fused=False).flattens()
    assert grs.GemmRSConfig().flattens()
    assert not grs.GemmRSConfig(flatten=False).flattens()


def test_choose_config_falls_back_where_fusion_cannot_run_or_win():
    cpu = torch.device("cpu")
    for target in (GPUTarget("cuda", 90, 32), GPUTarget("hip", "gfx942", 64)):
        pick = functools.partial(
            grs.choose_config, dtype=torch.bfloat16, device=cpu, target=target, calibration=tuning.REFERENCE
        )
        assert pick(4096, 2048, 2048, world_size=1).fallback, "one rank: no reduction"
        assert pick(8192, 1024, 32768, world_size=2).fallback, "the GEMM dominates: the kernel's GEMM is slower"
        assert pick(16384, 2050, 2048, world_size=2).fallback, "N rows not 16-byte aligned"
        assert pick(16384, 2048, 2044, world_size=2).fallback, "K/W not 16-byte aligned"
        assert pick(2048, 4096, 8192, world_size=2).fallback, "under four waves of tiles: the small-M regime"
        chosen = pick(16384, 2048, 2048, world_size=2)
        assert not chosen.fallback and chosen.gemm == "triton", "communication-heavy: the fused kernel"
        assert chosen.matmul.use_tma == (target.backend == "cuda"), "AMD has no TMA: the pointer kernel"
        uncalibrated = grs.choose_config(16384, 2048, 2048, torch.bfloat16, 2, cpu, target)
        assert uncalibrated.fallback, "a GPU without a calibration runs matmul + NCCL"
        measured = dataclasses.replace(tuning.REFERENCE, memory=tuning.Rate(0.0, 2.5e9), rs_cublas_extra_ms=0.01)
        chosen = grs.choose_config(2048, 4096, 4096, torch.bfloat16, 2, cpu, target, calibration=measured)
        assert chosen == grs.CUBLAS_DIRECT, "under four waves, where the cuBLAS path is measured and cheaper"


def test_rows_that_cannot_feed_tma_get_the_pointer_kernel_of_the_same_tile():
    # K = 528 at 4 ranks: rows of A are 132 bf16 = 264 bytes apart, which a TMA descriptor refuses (found at 4 ranks
    # on a shared GPU: the forced TMA configurations of check_gemm_rs raised Triton's "strides must be 16-byte
    # aligned" before this).
    config = grs.GemmRSConfig()
    b = torch.empty(132, 600, dtype=torch.bfloat16)
    chosen = grs.config_for_operands(config, torch.empty(1040, 132, dtype=torch.bfloat16), b)
    assert not chosen.matmul.use_tma and chosen.matmul.block_m == config.matmul.block_m
    assert dataclasses.replace(chosen, matmul=config.matmul) == config, "only the GEMM tile changes"
    kept = grs.config_for_operands(config, torch.empty(1040, 264, dtype=torch.bfloat16), torch.empty(264, 600))
    assert kept is config
    assert grs.config_for_operands(grs.CUBLAS_CE, torch.empty(8, 132, dtype=torch.bfloat16), b) is grs.CUBLAS_CE
    # A start off a 16-byte boundary is this rank's own: the kernel stays (it must match the peers'), A is copied.
    odd = torch.randn(1040 * 264 + 1).to(torch.bfloat16)[1:].view(1040, 264)
    assert grs.config_for_operands(config, odd, torch.empty(264, 600, dtype=torch.bfloat16)) is config
    copy = grs.aligned_for(config, odd)
    assert copy.data_ptr() % 16 == 0 and torch.equal(copy, odd)
    assert grs.aligned_for(grs.CUBLAS_CE, odd) is odd, "cuBLAS takes any start"


def test_cost_model_matches_the_measured_seed_shape():
    # 2 x H200, bench/results/gemm_rs.md: 8192,4096,12288 ran 0.693 ms fused vs 0.690 ms for torch.matmul + NCCL.
    estimate = grs.estimate_ms(8192, 4096, 6144, 2, 2)
    assert abs(estimate["triton_ms"] - estimate["baseline_ms"]) < 0.1 * estimate["baseline_ms"]
    assert "torch.matmul+nccl" in grs.FALLBACK.short() and grs.FALLBACK in grs.CANDIDATES, "the tuner times it"


def test_workspace_bytes_counts_double_buffered_scratch_and_flags():
    config = grs.GemmRSConfig()
    tiles = (4096 // 128) * (4096 // 256)
    assert grs.workspace_bytes(8192, 4096, torch.bfloat16, 2, config) == 2 * 4096 * 4096 * 4 + 2 * tiles * 2 * 4
    two_kernel = dataclasses.replace(config, fused=False, partial_dtype="input")
    assert grs.workspace_bytes(8192, 4096, torch.bfloat16, 2, two_kernel) == 2 * 2 * 4096 * 4096 * 2 + 2 * tiles * 2 * 4


def _operands(m: int = 64, k: int = 32, n: int = 48, dtype: torch.dtype = torch.bfloat16):
    return torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda a, b: (a.t().contiguous().t(), b), "contiguous"),
        (lambda a, b: (a, b.half()), "same dtype"),
        (lambda a, b: (a.float(), b.float()), "bfloat16 or float16"),
        (lambda a, b: (a, b[:-1]), "a.shape[1]"),
        (lambda a, b: (a[:-1], b), "multiple of the world size"),
        (lambda a, b: (a[None], b), "2-D"),
        (lambda a, b: (a.float().numpy(), b), "torch.Tensor"),
        (lambda a, b: (a.to("meta"), b), "meta"),
    ],
    ids=["non-contiguous", "dtype-mix", "float32", "k-mismatch", "rows", "3-d", "numpy", "wrong-device"],
)
def test_bad_input_is_rejected_before_launch(make, words):
    """One exception family (GemmRsError, an OpInputError and a ValueError) for every bad input."""
    a, b = make(*_operands())
    with pytest.raises(grs.GemmRsError, match=words.replace("[", r"\[").replace("]", r"\]")):
        grs.check_inputs(a, b, 2, torch.device("cpu"))


def test_the_device_is_checked_before_the_dtype():
    a, b = _operands()
    with pytest.raises(grs.GemmRsError, match="meta"):
        grs.check_inputs(a.float().to("meta"), b.float(), 2, torch.device("cpu"))


def test_good_input_passes_the_checks():
    grs.check_inputs(*_operands(), 2, torch.device("cpu"))
    grs.check_inputs(*_operands(dtype=torch.float16), 4, torch.device("cpu"))


def test_custom_op_is_registered_with_a_fake_that_shards_rows():
    assert hasattr(torch.ops.triton_dist, "gemm_rs")
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode():
            a = torch.empty(96, 32, dtype=torch.bfloat16)
            b = torch.empty(32, 40, dtype=torch.bfloat16)
            out = torch.ops.triton_dist.gemm_rs(a, b)
        assert out.shape == (96, 40) and out.dtype == torch.bfloat16
    finally:
        dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------------------------
# The matmul + NCCL fallback: per call the baseline's GPU work and as little host work (issue 24)


class _TwoRankGroup:
    """A process group stand-in for rank ``rank`` of two: its reduce-scatter adds the peer's partial to this rank's
    in fp32 (as NCCL's sum of two bf16 values), writes this rank's rows into ``out``, and records every call."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.peer_partial: torch.Tensor | None = None
        self.calls: list[tuple[torch.Tensor, torch.Tensor, object]] = []
        self.waits = 0

    def _reduce_scatter_base(self, out: torch.Tensor, partial: torch.Tensor, options: object) -> _TwoRankGroup:
        assert self.peer_partial is not None
        self.calls.append((out, partial, options))
        rows = out.shape[0]
        total = partial.float() + self.peer_partial.float()
        out.copy_(total[self.rank * rows : (self.rank + 1) * rows])
        return self

    def wait(self) -> bool:
        self.waits += 1
        return True


@pytest.mark.parametrize("rank", [0, 1])
def test_fallback_plan_is_one_matmul_and_one_reduce_scatter_into_a_new_output(rank: int) -> None:
    """The plan's call: ``torch.mm`` into the partial it keeps, a new output, the group's reduce-scatter with options
    built once (sum, synchronous: NCCL on the current stream), one wait; the result is this rank's rows of the sum."""
    import types

    from triton_dist.ops.gemm_rs import op

    m, n, k_local = 12, 10, 8
    group = _TwoRankGroup(rank)
    plan = op._build_unfused(
        types.SimpleNamespace(group=group, world_size=2), torch.empty(m, k_local, dtype=torch.bfloat16), m, n
    )
    assert isinstance(plan, op.UnfusedPlan) and plan.partial.shape == (m, n)
    partial = plan.partial
    outputs = []
    for call in range(2):
        a, b, peer_a, peer_b = (torch.randn(shape).to(torch.bfloat16) for shape in [(m, k_local), (k_local, n)] * 2)
        group.peer_partial = peer_a @ peer_b
        plan.partial.fill_(float("nan"))  # poisoned: the matmul must write all of it
        out = plan.run(a, b)
        # The op's partials are bf16 GEMM outputs summed in fp32 (NCCL's sum): the reference rounds them alike, so
        # only the output's rounding is left to the tolerance (fp32 products missed it by up to 0.023 near zero).
        want = ((a @ b).float() + group.peer_partial.float())[rank * m // 2 : (rank + 1) * m // 2]
        assert out.shape == (m // 2, n) and out.dtype == torch.bfloat16
        torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
        assert len(group.calls) == call + 1 and group.waits == call + 1, "one reduce-scatter and one wait per call"
        sent_out, sent_partial, options = group.calls[-1]
        assert sent_out is out and sent_partial is partial, "into the returned output, from the kept partial"
        outputs.append(out)
    assert outputs[0].data_ptr() != outputs[1].data_ptr(), "every call returns a tensor of its own"
    first, second = group.calls[0][2], group.calls[1][2]
    assert first is second, "the options are built once per plan, not per call"
    assert first.reduceOp == dist.ReduceOp.SUM and not first.asyncOp


@pytest.mark.filterwarnings("ignore:.*reduce_scatter_tensor.*:FutureWarning")
def test_fallback_runs_the_baselines_ops_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a one-rank gloo world: the fallback's dispatcher ops are the baseline's (``torch.matmul`` into a kept buffer
    + ``dist.reduce_scatter_tensor`` into a kept output) plus the one allocation of the output it returns; no other
    copy, cast, fill or collective; the c10d Python wrapper is not on its path; its result is A @ B exactly."""
    from dispatch_recording import DispatchRecording

    import triton_dist
    from triton_dist.ops.gemm_rs import op

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the CPU emulation's world (no kernel runs on this path)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        world = triton_dist.init(heap_size="1M", device="cpu")
        a, b = (torch.randn(shape).to(torch.bfloat16) for shape in [(16, 8), (8, 12)])
        op.gemm_rs_with(a, b, grs.FALLBACK)  # builds the plan
        plan = op.plan_for(a, b, grs.FALLBACK)
        assert isinstance(plan, op.UnfusedPlan)
        plan.partial.fill_(float("nan"))

        def no_wrapper(*args: object, **kwargs: object) -> None:
            raise AssertionError("the fallback called dist.reduce_scatter_tensor's Python wrapper")

        with monkeypatch.context() as patched:
            for name in ("reduce_scatter_tensor", "reduce_scatter_single"):
                for module in (dist, dist.distributed_c10d):
                    patched.setattr(module, name, no_wrapper, raising=False)
            with DispatchRecording() as ours:
                out = op.gemm_rs_with(a, b, grs.FALLBACK)
        kept, kept_out = torch.empty(16, 12, dtype=torch.bfloat16), torch.empty(16, 12, dtype=torch.bfloat16)
        with DispatchRecording() as baseline:
            torch.matmul(a, b, out=kept)
            dist.reduce_scatter_tensor(kept_out, kept, group=world.group)
        assert baseline.ops[:2] == ["aten.mm.out", "c10d._reduce_scatter_base_.default"], baseline.ops
        allocation = ours.ops[1] if len(ours.ops) > 1 else None
        assert allocation in ("aten.new_empty.default", "aten.empty.memory_format"), ours.ops
        assert ours.ops == [baseline.ops[0], allocation, *baseline.ops[1:]], ours.ops
        assert torch.equal(out, a @ b) and torch.equal(out, kept_out)
    finally:
        triton_dist.finalize()
        dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------------------------
# The own tile's peer loop (the fused epilogue): loads and adds only


def peer_loops(ttgir: str) -> list[str]:
    """The TTGIR of each innermost ``scf.for`` that loads a 2-D tile through pointers and holds no MMA:
    ``_add_received``'s loop over the peers (the flattened kernels hold two copies of it, the second for K = 0)."""
    lines = ttgir.splitlines()
    loops = []
    for start, line in enumerate(lines):
        if "scf.for" not in line:
            continue
        depth, end = 0, start
        for end in range(start, len(lines)):
            depth += lines[end].count("{") - lines[end].count("}")
            if depth <= 0 and end > start:
                break
        body = lines[start + 1 : end + 1]
        innermost = not any("scf.for" in text for text in body)
        mma = any(re.search(r"\b(tt\.dot|ttng\.warp_group_dot)\b", text) for text in body)
        loads = any(re.search(r"tt\.load .*tensor<\d+x\d+x!tt\.ptr", text) for text in body)
        if innermost and loads and not mma:
            loops.append("\n".join(lines[start : end + 1]))
    return loops


FUSED_CANDIDATES = [c for c in grs.CANDIDATES if c.gemm == "triton" and c.fused and not c.fallback]


@pytest.mark.parametrize("config", FUSED_CANDIDATES, ids=lambda c: c.short())
def test_own_tile_peer_loop_adds_without_layout_conversion(config):
    """Each peer's partial is loaded and added in the loads' layout: no conversion, shared memory or barrier per peer
    (the tile left the MMA layout once, before the loop; before that fix every received 128x128 fp32 tile went
    through shared memory in the loop: four barriers and 64 KiB per peer on sm_90)."""
    need_library("sm_90")
    loops = peer_loops(compile_gemm_rs(config, "sm_90").asm["ttgir"])
    assert len(loops) >= config.matmul.split_n, "one peer loop per column half"
    for loop in loops:
        assert "arith.addf" in loop, loop
        for op in ("ttg.convert_layout", "ttg.local_alloc", "ttg.local_load", "ttg.local_store", "gpu.barrier"):
            assert op not in loop, f"{op} in the peer loop of {config.short()}:\n{loop}"


def sass_loops(listing: str) -> list[list[str]]:
    """The instructions of every loop of a SASS listing, inner loops too (those of a loop's blocks once the edges
    back to its header, the block entered from outside, are cut)."""
    from asm_loops import loop_components, sass_blocks

    blocks = sass_blocks(listing)
    predecessors: dict[str, set[str]] = {}
    for block in blocks:
        for successor in block.successors:
            predecessors.setdefault(successor, set()).add(block.name)
    found: list[list[str]] = []

    def walk(level):
        for loop in loop_components(level):
            found.append([line for block in loop for line in block.lines])
            names = {block.name for block in loop}
            entered = [block.name for block in loop if predecessors.get(block.name, set()) - names]
            header = entered[0] if entered else loop[0].name
            inner = [
                dataclasses.replace(block, entry=True, successors=[s for s in block.successors if s != header])
                for block in loop
                if block.name != header
            ]
            walk(inner)

    walk(blocks)
    return found


@pytest.mark.parametrize("partial_dtype", ["float32", "input"])
def test_default_tile_epilogue_loops_do_not_spill(partial_dtype):
    """The default tile (128x256, flattened) with either partial dtype: no local memory in the own
    tile's peer loops (the innermost loops that load the peers' partials; before the tile left the MMA layout
    there, each peer cost every thread 26-43 spill loads and 4-24 spill stores per column half), and at most a
    few local accesses in any other loop that is not the wgmma loop: a value or two reloaded once per tile or
    per awaited flag (ptxas does that for the float32 partials, unwatched, with the wait's current lowering).

    Not held to that: the copy of the persistent loop that Triton's loop fusion keeps for an empty K loop (it runs
    where K < 1, which the op never launches: ``EmptyPlan``), the one loop without wgmma that holds peer loops (5
    local accesses there, float32 unwatched, since the own tiles are awaited at the end of the previous item)."""
    from dl_compile import sass

    need_library("sm_90")
    config = dataclasses.replace(grs.GemmRSConfig(), partial_dtype=partial_dtype)
    assert config.flattens()
    loops = sass_loops(sass(compile_gemm_rs(config, "sm_90")))
    epilogue = [loop for loop in loops if not any("HGMMA" in line for line in loop)]
    assert any(any("LDG.E.STRONG.SYS" in line for line in loop) for loop in epilogue), "the await loop is found"

    def innermost(loop: list[str]) -> bool:
        return not any(len(other) < len(loop) and set(other) <= set(loop) for other in loops)

    peer_loops = [
        loop for loop in epilogue if innermost(loop) and any(re.search(r"\bLDG\.E\.128\b", line) for line in loop)
    ]
    assert peer_loops, "the peer loops are found"
    empty_k_copies = [
        loop for loop in epilogue if any(len(peer) < len(loop) and set(peer) <= set(loop) for peer in peer_loops)
    ]
    assert len(empty_k_copies) <= 1, f"{len(empty_k_copies)} loops without wgmma hold peer loops"
    for loop in epilogue:
        local = [line for line in loop if re.search(r"\b(LDL|STL)\b", line)]
        if loop in empty_k_copies:
            continue
        if loop in peer_loops:
            assert not local, f"{config.short()}: local memory in a peer loop: {local[:4]}"
        else:
            assert len(local) <= 4, f"{config.short()}: {len(local)} local accesses in an epilogue loop: {local[:6]}"


@triton.jit
def _loop_layout_kernel(x_ptr, y_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offsets = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tl.store(y_ptr + offsets, grs._loop_layout(tl.load(x_ptr + offsets)))


def _loop_layout_round_trips(shapes: list[list[int]]) -> dict[str, bool]:
    """In the interpreter: ``_loop_layout`` returns every fp32 bit pattern (NaN payloads, -0, subnormals) in place."""
    found = {}
    for rows, cols in shapes:
        special = torch.tensor([0x7FC00001, 0x7F800001, -(2**31), 1, 0x007FFFFF, -1], dtype=torch.int32)
        random = torch.randint(-(2**31), 2**31 - 1, (rows * cols,), generator=torch.Generator().manual_seed(rows))
        bits = torch.cat([special, random.to(torch.int32)])[: rows * cols].reshape(rows, cols)
        out = torch.zeros_like(bits)
        _loop_layout_kernel[(1,)](bits.view(torch.float32), out.view(torch.float32), BLOCK_M=rows, BLOCK_N=cols)
        found[f"{rows}x{cols}"] = bool(torch.equal(out, bits))
    return found


def test_loop_layout_leaves_every_value_in_place():
    from dl_compile import run_in_interpreter

    shapes = [[128, 128], [128, 64], [16, 32], [2, 2]]
    assert run_in_interpreter(__file__, {"shapes": shapes}) == {f"{r}x{c}": True for r, c in shapes}


if __name__ == "__main__":
    print(json.dumps(_loop_layout_round_trips(json.loads(sys.argv[1])["shapes"])))
