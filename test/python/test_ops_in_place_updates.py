"""No op kernel updates a location every warp reads without a program barrier (issue 27's race, every op).

Each op's kernels are compiled for sm_90 on the CPU as the op launches them (its default config and warps) and
their TTGIR is checked by ``in_place_check.rewritten_without_barrier``: an epoch counter, position or row loaded by
every warp and stored back by one thread needs a barrier between, or a warp that runs ahead stores before a lagging
warp has loaded and that warp takes the next value (GPUs only: the interpreter runs a program as one thread). The
MoE kernels have their own test (test_ops_moe_kernels.py, the kernels of issue 27).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import triton
import triton.language as tl
from dl_compile import compile_kernel, need_real_library
from in_place_check import compiled_ttgir, rewritten_without_barrier

ALLOWED: dict[str, str] = {}
"""kernel name -> why its flagged update is safe. Empty: every op kernel passes as it is launched. The safe cases the
audit met are the checker's rules (in_place_check's docstring), not entries here:

- one warp: gemm_rs's cuBLAS-path begin kernels and ag_gemm's begin and epoch kernels advance their epoch with no
  barrier, but the ops launch them with ``num_warps=1`` (compiled so here): no other warp to race;
- a reduction across warps: ar_rmsnorm's LL kernels (LL, reader, atomic, spin) load the slot's epoch in every thread
  and store it at the end; the row's sum of squares between is a cross-warp ``tt.reduce`` (a program barrier), and a
  program without rows uses the epoch only under all-false masks;
- a flag round: the flag kernels (all_reduce one-shot / push / two-shot, ar_rmsnorm, gemm_ar) notify and wait
  between the epoch's load and store, and ``dl.notify`` / ``dl.wait`` start with a program barrier;
- the same value: gemm_ar's kernel stores the epoch it loaded where it has no exchange (unchanged);
- each thread its own element: gemm_rs's tile accumulation (a [128, 128] tile read, summed and written back).

all_reduce's ``_one_shot_ll_kernel`` was the one real hazard (no barrier at all between the load and the store with
up to 8 warps); it has a ``tl.debug_barrier()`` before the store now."""


def _all_reduce() -> None:
    from test_ops_decode_all_reduce import _signature
    from test_ops_decode_all_reduce_ll import _ll_kernel

    from triton_dist.ops.all_reduce import AllReduceConfig, kernels
    from triton_dist.ops.all_reduce import config as ar_config

    for name in ("one_shot", "one_shot_push", "two_shot"):
        shape = ar_config.launch_shape(1 << 20, 2, 2, AllReduceConfig(name, 8, 4))
        constexprs = {"REGION": shape.region_elems, "ROUND": shape.round, "STRIDE": shape.stride}
        constexprs |= {"BLOCK": shape.block, "WORLD": 2} | ({"STAGE": True} if name == "one_shot" else {})
        kernel = getattr(kernels, f"_{name}_kernel")
        compile_kernel(kernel, _signature(name, "bf16"), "sm_90", constexprs, ("x_ptr", "out_ptr", "data_ptr"))
    _ll_kernel("bf16", 256, 8)  # the LL kernel at its widest program (8 warps)


def _ar_rmsnorm() -> None:
    from test_emulation_ar_rmsnorm import _ll_kernel_ptx

    from triton_dist.ops.ar_rmsnorm import config as cfg
    from triton_dist.ops.ar_rmsnorm import kernels

    pointer = "*bf16"
    signature = {name: pointer for name in ("x_ptr", "residual_ptr", "weight_ptr", "normed_ptr", "new_residual_ptr")}
    signature |= {"scale_ptr": pointer, "eps": "fp32", "data_ptr": pointer, "flags_ptr": "*i32", "epochs_ptr": "*i32"}
    signature |= {"rows": "i32", "hidden": "i32", "chunk": "i32", "flags_stride": "i32"}
    for algo in ("one_shot", "two_shot"):
        region = cfg.region_bytes(algo, 4096, 2, 2) // 2
        constexprs = {"REGION": region, "BLOCK_H": cfg.block_h(4096), "RANK_STRIDE": region // 4}
        constexprs |= {"ROUND_ROWS": cfg.max_round_rows(algo, 4096, 2, 2), "TWO_SHOT": algo == "two_shot"}
        compile_kernel(kernels._ar_rmsnorm_kernel, signature, "sm_90", constexprs | {"FP8": False, "WORLD": 2})
    flags = {"flags_ptr": "*i32", "flags_stride": "i32"}
    _ll_kernel_ptx(kernels._ar_rmsnorm_ll_kernel, "bf16", 8192, 1, 16, False, False)
    _ll_kernel_ptx(kernels._ar_rmsnorm_ll_kernel, "fp32", 100, 4, 1, False, False)
    _ll_kernel_ptx(kernels._ar_rmsnorm_ll_reader_kernel, "bf16", 8192, 1, 16, False, False, True)
    _ll_kernel_ptx(kernels._ar_rmsnorm_ll_reader_kernel, "fp32", 100, 2, 1, False, False, False)
    _ll_kernel_ptx(kernels._ar_rmsnorm_ll_atomic_kernel, "bf16", 8192, 1, 16, False, False, True, flags)
    for rows, words in ((1, False), (2, True)):
        constants = {"WORDS": words}
        _ll_kernel_ptx(
            kernels._ar_rmsnorm_ll_spin_kernel, "bf16", 8192, rows, 4, False, False, True, flags, 4, constants
        )


def _gemm_rs() -> None:
    from test_ops_gemm_rs import compile_gemm_rs

    from triton_dist.ops.gemm_rs import config as grs_config
    from triton_dist.ops.gemm_rs import kernels

    compile_gemm_rs(next(c for c in grs_config.CANDIDATES if c.gemm == "triton"), "sm_90")
    one_warp = {"epoch_ptr": "*i32", "ack_ptr": "*i32"}
    for kernel in (kernels._cublas_begin_kernel, kernels._cublas_begin_wait_kernel):  # launched with one warp
        compile_kernel(kernel, one_warp, "sm_90", num_warps=1)
    compile_kernel(kernels._cublas_wait_kernel, {"flags_ptr": "*i32", "epoch_ptr": "*i32"}, "sm_90", num_warps=1)
    partials = {"out_ptr": "*bf16", "own_ptr": "*bf16", "recv_ptr": "*bf16"}
    wait_reduce = partials | {"flags_ptr": "*i32", "epoch_ptr": "*i32", "numel": "i32"}
    compile_kernel(kernels._cublas_wait_reduce_kernel, wait_reduce, "sm_90", {"RECEIVED": 1, "BLOCK": 8192}, (), 8)
    reduce = partials | {"numel": "i32", "num_received": "i32"}
    compile_kernel(kernels._cublas_reduce_kernel, reduce, "sm_90", {"BLOCK": 4096}, (), 8)


def _ag_gemm() -> None:
    from test_ops_ag_gemm import GEMM_INTS

    from triton_dist.ops.ag_gemm import PUSH_BLOCK, kernels

    pointers = {name: "*fp16" for name in ("a_ptr", "recv_ptr", "b_ptr", "c_ptr")}
    gemm = pointers | {"flags_ptr": "*i32", "epoch_ptr": "*i32", **GEMM_INTS}
    compile_kernel(kernels._ag_gemm_ptr_kernel, gemm, "sm_90", dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8))
    push = {"a_ptr": "*bf16", "recv_ptr": "*bf16", "flags_ptr": "*i32", "epoch_ptr": "*i32"}
    push |= {name: "i32" for name in ("M_LOCAL", "K", "CHUNK_ROWS", "num_chunks")}
    compile_kernel(kernels._push_kernel, push, "sm_90", {"BLOCK": PUSH_BLOCK}, num_warps=16)
    # The one-program kernels, each with the one warp the op launches it with.
    compile_kernel(kernels._begin_kernel, {"epoch_ptr": "*i32", "barrier_ptr": "*i32"}, "sm_90", num_warps=1)
    wait = {"flags_ptr": "*i32", "epoch_ptr": "*i32", "flag_index": "i32"}
    compile_kernel(kernels._wait_shard_kernel, wait, "sm_90", num_warps=1)
    compile_kernel(kernels._wait_shard_then_advance_kernel, wait, "sm_90", {"ADVANCE": True}, num_warps=1)
    compile_kernel(kernels._advance_epoch_kernel, {"epoch_ptr": "*i32"}, "sm_90", num_warps=1)


def _gemm_ar() -> None:
    from test_ops_decode_gemm_ar import ALIGNED, SIGNATURE, SPLIT_K_CONFIGS, compile_split_k

    from triton_dist.ops.gemm_ar.config import tile_config
    from triton_dist.ops.gemm_ar.kernels import _gemm_ar_kernel

    config = tile_config(16, 8192, 4096, "cuda")
    constexprs = {"REGION": 2 * 2 * 128 * 64, "BLOCK_M": config.block_m, "BLOCK_N": config.block_n}
    constexprs |= {"BLOCK_K": config.block_k, "EXCHANGE": True, "WORLD": 2}
    compile_kernel(_gemm_ar_kernel, SIGNATURE, "sm_90", constexprs, ALIGNED, config.num_warps, None, config.num_stages)
    compile_split_k(SPLIT_K_CONFIGS[0], "sm_90")


def _flash_decode() -> None:
    from test_ops_decode_flash_decode import compile_flash

    compile_flash("sm_90", group=8, splits=2, world=2)


def _all_gather() -> None:
    from triton_dist import testing
    from triton_dist.ops.all_gather.kernels import _all_gather_kernel

    signature = {name: "*bf16" for name in ("x_ptr", "out_ptr", "data_ptr")}
    signature |= {"flags_ptr": "*i32", "signals_ptr": "*i64", "state_ptr": "*i64", "n": "i32", "chunk": "i32"}
    constexprs = {"ELEM_BYTES": 2, "NODES": 1, "LOCAL": 2, "MAX_PROGRAMS": 16, "BLOCK": 2048}
    testing.compile_for(_all_gather_kernel, signature | {"half": "i32"}, "sm_90", constexprs=constexprs)


def _grouped_gemm() -> None:
    from test_ops_moe_grouped_gemm import _compile

    from triton_dist.ops.grouped_gemm import GroupedGemmConfig

    _compile(False, GroupedGemmConfig())


OPS: dict[str, tuple[Callable[[], None], tuple[str, ...]]] = {
    "all_reduce": (
        _all_reduce,
        ("_one_shot_kernel", "_one_shot_push_kernel", "_two_shot_kernel", "_one_shot_ll_kernel"),
    ),
    "ar_rmsnorm": (
        _ar_rmsnorm,
        (
            "_ar_rmsnorm_kernel",
            "_ar_rmsnorm_ll_kernel",
            "_ar_rmsnorm_ll_reader_kernel",
            "_ar_rmsnorm_ll_atomic_kernel",
            "_ar_rmsnorm_ll_spin_kernel",
        ),
    ),
    "gemm_rs": (_gemm_rs, ("_gemm_rs_kernel", "_cublas_begin_kernel", "_cublas_begin_wait_kernel")),
    "ag_gemm": (_ag_gemm, ("_ag_gemm_ptr_kernel", "_push_kernel", "_begin_kernel", "_advance_epoch_kernel")),
    "gemm_ar": (_gemm_ar, ("_gemm_ar_kernel", "_gemm_ar_split_k_kernel")),
    "flash_decode": (_flash_decode, ("_flash_decode_kernel",)),
    "all_gather": (_all_gather, ("_all_gather_kernel",)),
    "grouped_gemm": (_grouped_gemm, ("_grouped_gemm_kernel",)),
}
"""op -> (compiles its kernels as the op launches them, the kernels that must have been compiled)."""


@pytest.mark.parametrize("op", list(OPS))
def test_sm90_op_kernels_update_shared_words_only_after_a_barrier(op: str) -> None:
    need_real_library("sm_90")
    compile_all, expected = OPS[op]
    with compiled_ttgir() as seen:
        compile_all()
    missing = set(expected) - {name for name, _ in seen}
    assert not missing, f"{op}: the check never saw {sorted(missing)}"
    racing = {name: found for name, ttgir in seen if (found := rewritten_without_barrier(ttgir))}
    unexplained = {name: found for name, found in racing.items() if name not in ALLOWED}
    assert not unexplained, f"{op}: in-place updates without a program barrier: {unexplained}"


@triton.jit
def _counter_kernel(counter_ptr, out_ptr, BARRIER: tl.constexpr):
    value = tl.load(counter_ptr) + 1  # every thread of every warp loads the counter
    tl.store(out_ptr + tl.arange(0, 128), tl.full([128], value, tl.int32))
    if BARRIER:
        tl.debug_barrier()
    tl.store(counter_ptr, value)  # one thread stores it


def test_the_check_flags_a_counter_advanced_without_a_barrier_only() -> None:
    """The check itself: the counter stored back with no barrier is flagged at 4 warps, not after
    ``tl.debug_barrier()`` and not in a one-warp program."""
    need_real_library("sm_90")
    signature = {"counter_ptr": "*i32", "out_ptr": "*i32"}

    def ttgir(barrier: bool, num_warps: int) -> str:
        return str(
            compile_kernel(_counter_kernel, signature, "sm_90", {"BARRIER": barrier}, (), num_warps).asm["ttgir"]
        )

    assert rewritten_without_barrier(ttgir(False, 4)), "the racing counter must be flagged"
    assert not rewritten_without_barrier(ttgir(True, 4)), "a barrier between the load and the store is enough"
    assert not rewritten_without_barrier(ttgir(False, 1)), "one warp has nothing to race with"


def test_sm90_example_and_runtime_kernels_update_shared_words_only_after_a_barrier() -> None:
    """The same check over the examples', GPU checks' and runtime's kernels (test_runtime_example_kernels'
    table, compiled as it compiles them)."""
    from test_runtime_example_kernels import KERNELS, load
    from test_runtime_example_kernels import compile_kernel as compile_example

    racing = {}
    for path, name, signature, constexprs in KERNELS:
        ttgir = compile_example(getattr(load(path), name), signature, constexprs, "sm_90").asm["ttgir"]
        if found := rewritten_without_barrier(ttgir):
            racing[f"{path}:{name}"] = found
    assert not racing, f"in-place updates without a program barrier: {racing}"
