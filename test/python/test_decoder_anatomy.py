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
