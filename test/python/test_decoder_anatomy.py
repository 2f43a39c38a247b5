"""bench/decoder_anatomy.py's CPU parts: the kernel-name categorizer on real kernel names (cuBLAS, NCCL, torch's
ATen and SDPA kernels, triton_dist's ops), the split of a profile into runs and per-layer sums (harness kernels,
concurrent kernels, idle time), the names shown, the case summary and the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_scripts import load_bench
from case_grid import check_each

anatomy = load_bench("decoder_anatomy.py")
NORM = "norm+residual"

REAL_NAMES = {
    # cuBLAS / cuBLASLt (Hopper), their split-K reduction and GEMV; our Triton matmul
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x"
    "_cublas": "GEMM",
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT": "GEMM",
    "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT": "GEMM",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, false, false>"
    "(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, __nv_bfloat16*, float const*, float "
    "const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, float*, int*)": "GEMM",
    "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false, "
    "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGemvTensorStridedBatched"
    "<__nv_bfloat16 const>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float> >(cublasGemvParamsEx<int, "
    "cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, "
    "cublasGemvTensorStridedBatched<__nv_bfloat16>, float>, float, float)": "GEMM",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)": "GEMM",
    "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn": "GEMM",
    "_matmul_tma_kernel": "GEMM",
    "_matmul_ptr_kernel": "GEMM",
    # triton_dist's fused GEMM + communication kernels
    "_ag_gemm_tma_kernel": "GEMM+comm",
    "_ag_gemm_ptr_kernel": "GEMM+comm",
    "_gemm_rs_kernel": "GEMM+comm",
    "_gemm_ar_kernel": "GEMM+comm",
    "_gemm_ar_split_k_kernel": "GEMM+comm",
    # communication: NCCL, our all-reduce, producers, flags, the cuBLAS paths' side kernels
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "comm",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)": "comm",
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)": "comm",
    "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)": "comm",
    "_one_shot_kernel": "comm",
    "_one_shot_ll_kernel": "comm",
    "_one_shot_push_kernel": "comm",
    "_two_shot_kernel": "comm",
    "_push_kernel": "comm",
    "_begin_kernel": "comm",
    "_cublas_begin_kernel": "comm",
    "_cublas_flag_kernel": "comm",
    "_cublas_wait_kernel": "comm",
    "_cublas_wait_ack_kernel": "comm",
    "_cublas_reduce_kernel": "comm",
    "_reduce_partials_kernel": "comm",
    "_all_gather_kernel": "comm",
    # copy-engine copies (ours' ag_gemm producer), whichever way the profiler names them
    "Memcpy PtoP (Device -> Device)": "memcpy",
    "Memcpy DtoD (Device -> Device)": "memcpy",
    # the fused all-reduce + residual + RMSNorm
    "_ar_rmsnorm_kernel": "AR+norm",
    "_ar_rmsnorm_ll_kernel": "AR+norm",
    # attention: SDPA's flash, memory-efficient and cuDNN kernels; flash_decode
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
    "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>"
    "(pytorch_flash::Flash_fwd_params)": "attention",
    "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, false, false, false, "
    "true, true, false, false>(pytorch_flash::Flash_fwd_params)": "attention",
    "void pytorch_flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, 1, true>"
    "(pytorch_flash::Flash_fwd_params)": "attention",
    "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
    "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_kernel0_0": "attention",
    "_flash_decode_kernel": "attention",
    # torch's RMSNorm (aten::_fused_rms_norm) and the bf16 residual add
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)": NORM,
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)": NORM,
    # other: integer adds, SiLU, RoPE's roll and multiplies, copies, indexing, fills, torch.compile's kernels
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<long>, std::array<char*, 3ul> >"
    "(int, at::native::CUDAFunctor_add<long>, std::array<char*, 3ul>)": "other",
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel"
    "(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::silu_kernel"
    "(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)": "other",
    "void at::native::roll_cuda_kernel<c10::BFloat16>(c10::BFloat16 const*, c10::BFloat16*, long, long, long, long, "
    "long, long)": "other",
    "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_put_kernel_impl"
    "<at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, "
    "char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::"
    "index_put_kernel_impl<at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef"
    "<long>)::{lambda(char*, char const*, long)#1} const&, bool)::{lambda(int)#1}>(long, at::native::gpu_index_kernel"
    "<...>)": "other",
    "Memset (Device)": "other",
    "_rope_scatter_kernel": "other",  # ours' decode: QK norm, RoPE and the cache writes (layers/_kernels.py)
    "_silu_mul_kernel": "other",
    "triton_poi_fused_add_mul_0": "other",
    # nothing knows these
    "my_new_fused_kernel": "unknown",
    "_some_future_kernel": "unknown",
}


def test_real_kernel_names_fall_in_their_categories() -> None:
    def check(name: str, category: str) -> None:
        assert category in anatomy.CATEGORIES
        assert anatomy.categorize(name) == category

    cases = [{"name": name, "category": category} for name, category in REAL_NAMES.items()]
    assert check_each(check, cases) == len(REAL_NAMES)
    # every category is reached by some real name, so none is dead
    assert {anatomy.categorize(name) for name in REAL_NAMES} == set(anatomy.CATEGORIES)


def test_harness_kernels_are_recognized_and_nothing_else() -> None:
    for name in ("void at::cuda::(anonymous namespace)::spin_kernel(long)", "_barrier_kernel"):
        assert anatomy.HARNESS.search(name), name
    for name in REAL_NAMES:
        assert not anatomy.HARNESS.search(name), name
    assert not anatomy.HARNESS.search("_gemm_barrier_kernel_x")


def _k(name: str, start: float, end: float) -> object:
    return anatomy.Kernel(name, start, end)


SPIN, BARRIER = "at::cuda::(anonymous namespace)::spin_kernel(long)", "_barrier_kernel"
GEMM, NCCL = "nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, x>(x)"


def test_breakdown_splits_runs_at_the_harness_and_sums_per_layer() -> None:
    kernels = [
        _k(GEMM, -50.0, -40.0),  # before any harness: belongs to no run
        # run 1: harness ends at 100; GEMM 100-110, NCCL 105-120 beside it (overlap 5), idle 120-130, add 130-134
        _k(SPIN, 0.0, 90.0),
        _k(BARRIER, 90.0, 100.0),
        _k(GEMM, 100.0, 110.0),
        _k(NCCL, 105.0, 120.0),
        _k(ADD, 130.0, 134.0),
        # run 2, listed out of order: harness ends at 300; GEMM 302-312, NCCL 312-322, "mystery" 322-326
        _k("mystery_kernel", 322.0, 326.0),
        _k(NCCL, 312.0, 322.0),
        _k(BARRIER, 290.0, 300.0),
        _k(GEMM, 302.0, 312.0),
        _k(SPIN, 200.0, 290.0),
    ]
    b = anatomy.breakdown(kernels, per_run=2)  # each run covers 2 layers: totals / (2 runs x 2)
    assert b.runs == 2
    assert b.categories["GEMM"] == pytest.approx((10 + 10) / 4)
    assert b.categories["comm"] == pytest.approx((15 + 10) / 4)
    assert b.categories["norm+residual"] == pytest.approx(4 / 4)
    assert b.categories["unknown"] == pytest.approx(4 / 4)
    assert b.categories["attention"] == 0.0
    assert b.kernels == pytest.approx((29 + 24) / 4)
    assert b.busy == pytest.approx((24 + 24) / 4)  # run 1: 100-120 and 130-134; run 2: 302-326
    assert b.span == pytest.approx((34 + 26) / 4)
    assert b.idle == pytest.approx(((34 - 24) + (26 - 24)) / 4)
    assert b.overlap == pytest.approx(5 / 4)
    assert b.unknown == ["mystery_kernel"]
    assert b.top[0] == (NCCL, "comm", pytest.approx(25 / 4), pytest.approx(2 / 4))
    assert [name for name, *_ in b.top] == [NCCL, GEMM, ADD, "mystery_kernel"]


def test_transfers_among_the_harness_kernels_open_no_run() -> None:
    """A copy between the spin and the barrier is the harness's (one run, as profiled); one after the barrier is
    the run's; a run never splits at one (2 x H200, session 29: 6 runs found for 5, every value 5/6 of its due)."""
    copy = "Memcpy HtoD (Pageable -> Device)"
    kernels = [
        _k(SPIN, 0.0, 90.0),
        _k(copy, 90.0, 91.0),  # the harness's
        _k(BARRIER, 91.0, 100.0),
        _k(copy, 100.0, 102.0),  # the run's
        _k(GEMM, 102.0, 110.0),
        _k(SPIN, 200.0, 290.0),
        _k(BARRIER, 290.0, 300.0),
        _k(GEMM, 300.0, 310.0),
    ]
    b = anatomy.breakdown(kernels, per_run=1)
    assert b.runs == 2
    assert b.categories["GEMM"] == pytest.approx((8 + 10) / 2)
    assert b.kernels == pytest.approx((2 + 8 + 10) / 2)
    assert b.span == pytest.approx((10 + 10) / 2)


def test_breakdown_of_a_profile_without_work_is_empty_and_per_run_is_checked() -> None:
    b = anatomy.breakdown([_k(SPIN, 0.0, 90.0), _k(BARRIER, 90.0, 100.0)], per_run=1)
    assert (b.runs, b.kernels, b.span, b.busy) == (0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="per_run"):
        anatomy.breakdown([], per_run=0)


def test_union_length_merges_overlaps_and_nesting() -> None:
    assert anatomy.union_length([]) == 0.0
    assert anatomy.union_length([(0.0, 10.0), (5.0, 15.0), (2.0, 3.0), (20.0, 21.0)]) == 16.0


def test_short_name_drops_void_namespaces_and_the_parameter_list() -> None:
    assert anatomy.short_name("void at::native::roll_cuda_kernel<c10::BFloat16>(c10::BFloat16 const*, long)") == (
        "roll_cuda_kernel<c10::BFloat16>"
    )
    anonymous = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>(int)"
    assert anatomy.short_name(anonymous) == "vectorized_layer_norm_kernel<c10::BFloat16, float, true>"
    add = [name for name, category in REAL_NAMES.items() if "CUDAFunctor_add<c10::BFloat16>" in name][0]
    assert anatomy.short_name(add) == (
        "vectorized_elementwise_kernel<4, CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >"
    )
    assert anatomy.short_name("Memcpy PtoP (Device -> Device)") == "Memcpy PtoP"
    assert anatomy.short_name("_gemm_ar_kernel") == "_gemm_ar_kernel"
    long = anatomy.short_name("x" * 120, width=20)
    assert len(long) == 20 and long.endswith("...")


def _breakdown(gemm: float, comm: float, span: float, busy: float) -> object:
    categories = dict.fromkeys(anatomy.CATEGORIES, 0.0)
    categories.update(GEMM=gemm, comm=comm)
    return anatomy.Breakdown(runs=5, categories=categories, kernels=gemm + comm, busy=busy, span=span)


def test_a_prefill_case_reports_speedup_bound_and_where_ours_spends_more() -> None:
    variants = {
        "ours": (2100.0, _breakdown(1500.0, 500.0, 2050.0, 1900.0)),
        "torch": (2200.0, _breakdown(1700.0, 300.0, 2150.0, 2000.0)),
        "ours, no comm": (1600.0, _breakdown(1550.0, 0.0, 1580.0, 1550.0)),
        "torch, no comm": (1900.0, _breakdown(1700.0, 0.0, 1880.0, 1700.0)),
    }
    row = anatomy.finish({"phase": "prefill", "model": "M", "tokens": 4096, "batch": 1, "context": 0}, variants)
    assert row["speedup"] == pytest.approx(2200 / 2100)
    assert row["bound"] == pytest.approx(2200 / 1600)
    assert row["excess"] == [("comm", pytest.approx(200.0))]
    text = "\n".join(anatomy.case_lines(row))
    assert "**1.05x** (bar 1.15x)" in text and "**1.38x**" in text
    assert "torch's own communication costs 300.0 µs/layer (14% of its layer)" in text
    table = [line for line in text.splitlines() if line.startswith("| ours - torch |")]
    # timed, span, the categories (GEMM -200, comm +200), Σ kernels, busy, idle, and no overlap or rank
    assert table == ["| ours - torch | -100.0 | -100.0 | -200.0 | 0.0 | 0.0 | 200.0 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 "
                     "| 0.0 | -100.0 | 0.0 |  |  |"]  # fmt: skip


def test_the_defaults_cover_the_rows_that_missed_the_bar() -> None:
    args = anatomy.parse_args([])
    assert args.phases == ["prefill", "decode"]
    assert args.prefill_models == ["Llama-3-8B", "Llama-3-70B", "Qwen3-32B"] and args.tokens == [4096]
    assert args.decode_models == ["Llama-3-8B", "Qwen3-32B"]
    assert args.batch == [8, 64] and args.context == [4096] and args.layers == 2
    chosen = anatomy.parse_args(["--models", "Llama-3-70B", "--batch", "1", "--phases", "decode"])
    assert chosen.prefill_models == chosen.decode_models == ["Llama-3-70B"] and chosen.batch == [1]
    assert args.top == 8 and anatomy.parse_args(["--top", "40"]).top == 40
    with pytest.raises(SystemExit):
        anatomy.parse_args(["--top", "0"])
    with pytest.raises(SystemExit):
        anatomy.parse_args(["--models", "GPT-5"])
    with pytest.raises(SystemExit):
        anatomy.parse_args(["--phases", "train"])


def test_the_results_file_has_a_summary_row_and_a_section_per_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(anatomy.rt, "current_world", lambda: type("World", (), {"world_size": 2})())
    monkeypatch.setattr(anatomy.torch.cuda, "get_device_name", lambda *_: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(anatomy, "gpu_tag", lambda size: f"{size}xH100")
    decode = anatomy.finish(
        {"phase": "decode", "model": "Qwen3-32B", "tokens": 64, "batch": 64, "context": 4096},
        {
            "ours": (397.0, _breakdown(250.0, 60.0, 390.0, 330.0)),
            "torch": (380.0, _breakdown(260.0, 40.0, 375.0, 300.0)),
        },
    )
    rows = [decode]
    text = anatomy.write_results(tmp_path, rows, anatomy.parse_args([]), 0.0, show=False)
    assert (tmp_path / "decoder_anatomy_2xH100.md").read_text() == text
    assert '"rows"' in (tmp_path / "decoder_anatomy_2xH100.json").read_text()
    assert "| Qwen3-32B | B64 4k | 397.0 | 380.0 | 0.96x | 1.25x |  | 60.0 | 75.0 | comm +20.0 |" in text
    assert "## Decode" in text and "### Qwen3-32B, decode batch 64, context 4096" in text and "## Prefill" not in text


def test_without_communication_runs_the_layers_gemms_locally_and_restores_the_ops() -> None:
    import torch

    from triton_dist.layers import DecoderConfig, TensorParallelDecoderLayer, random_weights
    from triton_dist.layers import linear as linear_layers

    real = linear_layers.ag_gemm, linear_layers.gemm_rs
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(6, 16, generator=gen).to(torch.bfloat16)
    b = torch.randn(16, 8, generator=gen).to(torch.bfloat16)
    with anatomy.without_communication(world_size=2, rank=1):
        gathered = linear_layers.ag_gemm(a, b)
        assert gathered.shape == (12, 8)
        assert torch.equal(linear_layers.ag_gemm(a, b), gathered)  # one preallocated input per shape
        torch.testing.assert_close(linear_layers.gemm_rs(a, b), (a @ b)[3:6])  # rank 1's rows of the local product
        config = DecoderConfig("tiny", 64, 4, 2, 16, 128, 10000.0, 1e-5)
        layer = TensorParallelDecoderLayer(config, random_weights(config, generator=gen), rank=1, world_size=2)
        out = layer.prefill(torch.randn(4, 64, generator=gen).to(torch.bfloat16))  # 8 tokens, this rank's 4
        assert out.shape == (4, 64) and bool(out.isfinite().all())
    assert (linear_layers.ag_gemm, linear_layers.gemm_rs) == real


# Llama-3-8B (H 4096, Hq 32, Hkv 8, D 128, I 14336), batch 64, context 4096 (4097 tokens with the new one), W = 2,
# bf16 (2 bytes), caches of 4096 + 64 = 4160 positions, per rank per layer, by hand:
# - GEMM weights: QKV 4096 x (32 + 2*8)*128/2 = 12,582,912; O 2048 x 4096 = 8,388,608; gate/up 4096 x 2*7168 =
#   58,720,256; down 7168 x 4096 = 29,360,128: 109,051,904 elements. Their inputs and outputs, 64 rows each:
#   64 x ((4096 + 3072) + (2048 + 4096) + (4096 + 14336) + (7168 + 4096)) = 2,752,512. GEMM: 111,804,416 elements
#   = 223,608,832 bytes.
# - attention, ours (every KV head, rank 0's block: min(4097, 4160/2) = 2080 tokens; all 32 query heads):
#   2 x 64 x 8 x 2080 x 128 = 272,629,760 (K, V) + 2 x 64 x 32 x 128 = 524,288 (q, out) -> 546,308,096 bytes.
#   torch (4 KV heads, 4097 tokens; 16 query heads): 2 x 64 x 4 x 4097 x 128 = 268,500,992 + 2 x 64 x 16 x 128 =
#   262,144 -> 537,526,272 bytes.
# - other: norm weights 2 x 4096 = 8,192; two residual + RMSNorm 2 x 4 x 64 x 4096 = 2,097,152; SiLU * up
#   3 x 64 x 7168 = 1,376,256; RoPE + cache write 2 x 64 x 48 x 128 = 786,432 (ours, all 48 heads) or
#   2 x 64 x 24 x 128 = 393,216 (torch): 4,268,032 elements = 8,536,064 bytes (ours), 3,874,816 = 7,749,632 (torch).
LLAMA_B64_4K = {
    "sequence": (546_308_096, 223_608_832, 8_536_064),
    "heads": (537_526_272, 223_608_832, 7_749_632),
}


def test_decode_bytes_of_llama_3_8b_at_batch_64_4k_on_two_ranks_match_the_hand_count() -> None:
    from triton_dist.layers import CONFIGS

    llama = CONFIGS["Llama-3-8B"]
    for layout, (attention, gemm, other) in LLAMA_B64_4K.items():
        got = anatomy.decode_bytes(llama, 64, 4096, 2, layout, max_len=4096 + anatomy.CACHE_SLACK)
        assert (got.attention, got.gemm, got.other) == (attention, gemm, other), layout
        assert got.total == attention + gemm + other
    # an even split (no max_len): ceil(4097 / 2) = 2049 tokens, 31 fewer than rank 0's block of 2080
    even = anatomy.decode_bytes(llama, 64, 4096, 2, "sequence")
    assert LLAMA_B64_4K["sequence"][0] - even.attention == 2 * 64 * 8 * 31 * 128 * 2
    # Qwen3's QK norm weights: 2 x 128 more elements; one rank reads every weight and every KV head
    qwen = CONFIGS["Qwen3-32B"]
    plain = anatomy.DecoderConfig(**{**qwen.__dict__, "qk_norm": False})
    assert (
        anatomy.decode_bytes(qwen, 1, 0, 1, "heads").other - anatomy.decode_bytes(plain, 1, 0, 1, "heads").other == 512
    )
    alone = anatomy.decode_bytes(llama, 1, 0, 1, "heads")
    assert alone == anatomy.decode_bytes(llama, 1, 0, 1, "sequence")
    assert alone.attention == (2 * 8 * 128 + 2 * 32 * 128) * 2  # one token's K and V; q and out


def test_decode_bytes_rejects_bad_cases_by_name() -> None:
    from triton_dist.layers import CONFIGS

    llama = CONFIGS["Llama-3-8B"]
    for kwargs, match in (
        ({"layout": "rows"}, "layout"),
        ({"batch": 0}, "batch"),
        ({"context": -1}, "context"),
        ({"world_size": 3}, "multiples of world_size 3"),
        ({"max_len": 4096}, "max_len 4096"),
        ({"max_len": 4161}, "max_len 4161"),
    ):
        case = {"batch": 64, "context": 4096, "world_size": 2, "layout": "sequence", **kwargs}
        with pytest.raises(ValueError, match=match):
            anatomy.decode_bytes(llama, case.pop("batch"), case.pop("context"), case.pop("world_size"), **case)


def _decode_row(ours_us: float, torch_us: float) -> dict:
    """A Llama-3-8B B64 4k decode row as ``finish`` makes it, with the 2 x H100 run's categories (µs/layer)."""
    ours = _breakdown(81.0, 8.5, 390.8, 372.3)
    ours.categories.update({"GEMM+comm": 9.7, "attention": 200.7, "AR+norm": 20.0, "other": 52.3})
    base = _breakdown(89.9, 20.2, 371.5, 351.2)
    base.categories.update({"attention": 185.6, "norm+residual": 16.1, "other": 39.4})
    row = {"phase": "decode", "model": "Llama-3-8B", "tokens": 64, "batch": 64, "context": 4096}
    return anatomy.finish(row, {"ours": (ours_us, ours), "torch": (torch_us, base)})


def test_the_floor_of_a_decode_row_its_bound_fractions_gap_and_result_line() -> None:
    from triton_dist.layers import CONFIGS

    row = _decode_row(379.7, 367.0)
    with pytest.raises(ValueError, match="bandwidth"):
        anatomy.floor_summary(row, CONFIGS["Llama-3-8B"], 2, {"gbps": 0.0})
    f = anatomy.floor_summary(row, CONFIGS["Llama-3-8B"], 2, {"gbps": 3000.0, "method": "torch.sum"})
    ours, base = f["sides"]["ours"], f["sides"]["torch"]
    per_us = 3000.0 * 1e3  # bytes per µs at 3000 GB/s
    attention, gemm, other = LLAMA_B64_4K["sequence"]
    assert ours["floor"]["attention"] == pytest.approx(attention / per_us)  # 182.1 µs
    assert ours["floor"]["else"] == pytest.approx((gemm + other) / per_us)
    assert ours["floor"]["step"] == pytest.approx((attention + gemm + other) / per_us)  # 259.5 µs
    assert base["floor"]["attention"] == pytest.approx(LLAMA_B64_4K["heads"][0] / per_us)
    assert ours["fraction"]["attention"] == pytest.approx(attention / per_us / 200.7)
    assert ours["fraction"]["GEMM"] == pytest.approx(gemm / per_us / (81.0 + 9.7))  # gemm_ar counts as GEMM
    assert base["fraction"]["GEMM"] == pytest.approx(gemm / per_us / 89.9)
    rest = 379.7 - 200.7 - 90.7
    assert ours["spent"][anatomy.REST] == pytest.approx(rest)
    assert ours["above"][anatomy.REST] == pytest.approx(rest - other / per_us)
    assert f["bound"] == pytest.approx(367.0 / ((attention + gemm + other) / per_us))  # 1.41x
    assert f["gap"] == (anatomy.REST, pytest.approx(rest - other / per_us))  # 85.5 µs, before attention's 18.6
    row["floor"] = f
    line = anatomy.floor_line(row)
    assert line.startswith("RESULT floor decode Llama-3-8B B64 4k: HBM 3000 GB/s; ours' floor 259.5 us/layer")
    assert "bound = torch 367.0 / ours' floor = 1.41x (bar 1.25x)" in line and "ours attention 91%" in line
    assert line.endswith("largest gap: rest +85.5 us above its floor")
    text = "\n".join(anatomy.floor_lines([row, _decode_row(300.0, 350.0)]))  # a row without a floor: not listed
    assert text.startswith("## HBM floor (decode)") and "HBM bandwidth 3000 GB/s: torch.sum." in text
    assert text.count("| Llama-3-8B | B64 4k |") == 2
    assert (
        "| Llama-3-8B | B64 4k | ours | 546.3 | 223.6 | 8.5 | 182.1 | 77.4 | 259.5 | 200.7 | 90.7 | 88.3 | 379.7"
        in text
    )
    assert "= **1.41x** (bar 1.25x)" in text and "Furthest from it: **rest** (+85.5 µs)" in text
    assert "comm 8.5, AR+norm 20.0, other 52.3, idle 18.5" in text
    assert anatomy.floor_lines([_decode_row(300.0, 350.0)]) == []


def test_hbm_bandwidth_checks_its_arguments_before_touching_a_gpu() -> None:
    with pytest.raises(ValueError, match="reps >= 20"):
        anatomy.hbm_bandwidth(reps=5)
    with pytest.raises(ValueError, match="64 MiB"):
        anatomy.hbm_bandwidth(size_bytes=1 << 20)


@pytest.mark.skipif(not anatomy.torch.cuda.is_available(), reason="needs a GPU: hbm_rates times its HBM")
def test_hbm_rates_on_a_gpu_are_plausible() -> None:
    read, copy = anatomy.hbm_rates(256 << 20, 20)
    assert 100 < read < 20_000 and 100 < copy < 20_000  # GB/s: any GPU's HBM, and no L2 (256 MiB > any L2)
