"""triton_dist.layers: the tensor-parallel decoder layer and attention block at 2 CPU ranks under the emulation
(``TRITON_INTERPRET=1``, ``init(device="cpu")``) against a one-process fp32 torch reference with the same full
weights, prefill and decode, both KV cache layouts; and, without a world, the configs, the sharding, ``state_dict``
round trips, RoPE against a complex-number rotation, and the bad-input errors.

On 2 ranks (``emulated_ranks.run_ranks``; the emulation test runs it), ``_worker`` builds the same full weights and
tokens from one seed on every rank; prefills ``S`` tokens of 2 sequences (its rows, sequence-parallel) into a
"heads" and a "sequence" KV cache; decodes two more tokens per sequence with each cache (the second at a position
held by the other rank of the sequence-split cache); checks the attention block's own ``decode`` (``gemm_ar``);
and returns what differed from the reference.
"""

from __future__ import annotations

import functools
import math
import sys
import time
from collections.abc import Callable
from unittest import mock

import pytest
import torch
from emulated_ranks import run_ranks
from torch.nn import functional
from torch.utils._python_dispatch import TorchDispatchMode

from triton_dist.layers import (
    CONFIGS,
    DecoderConfig,
    LayerError,
    TensorParallelAttention,
    TensorParallelDecoderLayer,
    random_weights,
)
from triton_dist.layers.attention import apply_rope, rope_cos_sin, rope_inv_freq, rope_tables, rotate
from triton_dist.layers.decoder import DECODE_PREFETCH_BYTES

HEAP = "160M"
"""Each rank's CPU heap (the ops' workspaces are sized for GPUs)."""
TINY = DecoderConfig("tiny", 32, 4, 2, 128, 64, 10000.0, 1e-6, qk_norm=True)
"""A small layer with GQA (2 query heads per KV head), QK norm, head dim 128 (what flash_decode takes, for the
sequence-split cache), 2 KV heads (one per rank)."""
TINY_D32 = DecoderConfig("tiny-d32", 32, 4, 2, 32, 64, 500000.0, 1e-5)
"""The same with head dim 32 and no QK norm, for the head-split cache (a quarter of the QKV GEMM's columns: the
interpreter's time goes with them)."""
LAYOUTS = {"heads": TINY_D32, "sequence": TINY}
BATCH, PREFILL, MAX_LEN = 2, 7, 16
"""2 sequences of 7 prompt tokens (7 rows per rank), then 2 decoded tokens each (positions 7 and 8: the sequence-
split cache of 16 positions holds them on rank 0 and rank 1), then one at positions 9 and 3."""
TOLERANCE = 5e-2
"""atol and rtol of bf16 weights and activations through a layer against the fp32 reference."""
BF16_ULPS = 2**-5
"""rtol (and atol) of a fused kernel against the torch ops it replaces: 4 bf16 ulps at the bottom of a binade, for
the kernels' roundings (Triton's interpreter rounds fp32 to bf16 toward zero, torch to nearest; QK norm rounds
three times)."""


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x [B, T, heads, D] rotated by its position along T: dims (i, i + D/2) as one complex number."""
    d = x.shape[-1]
    steps = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)
    angles = torch.arange(x.shape[1], dtype=torch.float64, device=x.device)[:, None] * theta ** (-steps / d)
    turn = torch.polar(torch.ones_like(angles), angles)[None, :, None, :]  # [1, T, 1, D/2]
    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2 :].double()) * turn
    return torch.cat([z.real, z.imag], dim=-1).float()


def reference(
    config: DecoderConfig, weights: dict[str, torch.Tensor], x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The unsplit layer in fp32 on one process over x [B, T, H] (positions 0..T-1, causal): ``(attention
    output, layer output)``, each [B, T, H]."""
    w = {name: value.float() for name, value in weights.items()}
    x = x.float()
    batch, tokens, _ = x.shape
    d, eps = config.head_dim, config.rms_eps
    h = _rms(x, w["input_norm"], eps)
    q = (h @ w["q"]).view(batch, tokens, config.num_heads, d)
    k = (h @ w["k"]).view(batch, tokens, config.num_kv_heads, d)
    v = (h @ w["v"]).view(batch, tokens, config.num_kv_heads, d)
    if config.qk_norm:
        q, k = _rms(q, w["q_norm"], eps), _rms(k, w["k_norm"], eps)
    q, k = _rope(q, config.rope_theta), _rope(k, config.rope_theta)
    group = config.num_heads // config.num_kv_heads
    k, v = (t.repeat_interleave(group, dim=2) for t in (k, v))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
    scores = scores.masked_fill(torch.ones(tokens, tokens, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
    attn = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(batch, tokens, -1) @ w["o"]
    h1 = x + attn
    h2 = _rms(h1, w["post_norm"], eps)
    return attn, h1 + (functional.silu(h2 @ w["gate"]) * (h2 @ w["up"])) @ w["down"]


STEP_OPS = {
    "sequence": ["aten.mul.Tensor", "aten.cos.default", "aten.sin.default", "aten.index.Tensor"],
    "heads": ["aten.mul.Tensor", "aten.cos.default", "aten.sin.default", "aten.gt.Tensor", "aten.where.self"],
}
"""The ops (each one launch on a GPU) that ``decode_positions`` runs once its tables are made: the rotary angles,
their cosine and sine, then the slots and lengths in one lookup (sequence-split) or the mask (head-split)."""
COPIES = {"aten.cat.default", "aten.stack.default", "aten.zeros.default", "aten.zero_.default", "aten.fill_.Scalar"}
COPIES |= {"aten.copy_.default", "aten.clone.default", "aten.masked_fill_.Scalar", "aten.new_zeros.default"}
"""Fills, concatenations and copies (not dtype casts: the CPU's RMSNorm is made of them): a sequence-split decode
step runs none of them (its kernels put q, k and v where they go)."""


class _Ops(TorchDispatchMode):
    """Records the name of every aten op (and custom op) called inside it, views excepted, and those Triton's
    interpreter calls while it runs a kernel (its copies of the arguments: on a GPU the kernel is one launch)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(
        self, func: torch._ops.OpOverload, types: object, args: tuple = (), kwargs: dict | None = None
    ) -> object:
        frame = sys._getframe(1)
        while frame is not None and "triton/runtime/interpreter" not in frame.f_code.co_filename:
            frame = frame.f_back  # type: ignore[assignment]
        if frame is None and not func.is_view:
            self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def _problems(got: torch.Tensor, want: torch.Tensor) -> list[str]:
    if got.shape != want.shape:
        return [f"shape {list(got.shape)} != {list(want.shape)}"]
    if got.dtype != torch.bfloat16:
        return [f"dtype {got.dtype}, not the weights' bf16"]
    if torch.allclose(got.float(), want, atol=TOLERANCE, rtol=TOLERANCE):
        return []
    return [f"max abs error {(got.float() - want).abs().max().item():.4g}"]


def _check_kernels(gen: torch.Generator) -> dict[str, list[str]]:
    """The decode step's fused kernels (``layers._kernels``, in the interpreter) against the torch ops they
    replace, on fresh random data with poisoned outputs: ``rope_scatter`` with QK norm and head dim 128, and without
    it at head dim 96 (not a power of two: masked) (2 blocks of 3 q heads, 1 KV head, 2 tokens, one of them at the
    spare slot), ``silu_mul``."""
    from triton_dist.layers._kernels import rope_scatter, silu_mul
    from triton_dist.layers.attention import rms_norm, rope_tables

    blocks, batch, hq, hkv, slots_len = 2, 2, 3, 1, 5
    record: dict[str, list[str]] = {}
    for qk_norm, d in ((False, 96), (True, 128)):
        src = torch.randn(blocks, batch, (hq + 2 * hkv) * d, generator=gen).to(torch.bfloat16)
        positions = torch.tensor([1000, 77777])
        cos, sin = rope_tables(positions, rope_inv_freq(d, 10000.0))
        slots = torch.tensor([2, slots_len - 1], dtype=torch.int32)
        weights = (1 + torch.randn(2, d, generator=gen) / 8).to(torch.bfloat16)
        q = torch.full((batch, blocks * hq, d), float("nan"), dtype=torch.bfloat16)
        k, v = (torch.full((batch, blocks * hkv, slots_len, d), float("nan"), dtype=torch.bfloat16) for _ in "kv")
        norm = (weights[0], weights[1], 1e-6) if qk_norm else None
        rope_scatter(src, cos, sin, slots, q, k, v, (hq, hkv), norm)
        # decode_rope_tiles' kernel: one program per token and block, its heads as tiles, into poisoned tensors too
        tiled = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        rope_scatter(src, cos, sin, slots, *tiled, (hq, hkv), norm, tiled=True)
        want_q, want_k, want_v = q.clone().fill_(float("nan")), k.clone().fill_(float("nan")), v.clone()
        want_v.fill_(float("nan"))
        for r in range(blocks):
            qk = src[r, :, : (hq + hkv) * d].unflatten(-1, (hq + hkv, d))
            if qk_norm:
                qk = rms_norm(qk, None, 1e-6) * torch.cat([weights[0].expand(hq, d), weights[1].expand(hkv, d)])
            qk = rotate(qk, cos, sin)
            want_q[:, r * hq : (r + 1) * hq] = qk[:, :hq]
            for b in range(batch):
                want_k[b, r * hkv : (r + 1) * hkv, slots[b]] = qk[b, hq:]
                want_v[b, r * hkv : (r + 1) * hkv, slots[b]] = src[r, b, (hq + hkv) * d :].view(hkv, d)
        for name, got, want in (("q", q, want_q), ("k", k, want_k), ("v", v, want_v)):
            if not torch.allclose(got.float(), want.float(), atol=BF16_ULPS, rtol=BF16_ULPS, equal_nan=True):
                record[f"kernels/rope_scatter{'_qk_norm' if qk_norm else ''}"] = [f"{name} differs from torch's"]
        for name, got, want in zip("qkv", tiled, (want_q, want_k, want_v), strict=True):
            if not torch.allclose(got.float(), want.float(), atol=BF16_ULPS, rtol=BF16_ULPS, equal_nan=True):
                record[f"kernels/rope_scatter tiled{' qk_norm' if qk_norm else ''}"] = [f"{name} differs from torch's"]
    gate_up = torch.randn(3, 2 * 1500, generator=gen).to(torch.bfloat16)
    gate, up = gate_up.chunk(2, dim=1)
    if not torch.allclose(silu_mul(gate_up).float(), (functional.silu(gate) * up).float(), atol=0, rtol=BF16_ULPS):
        record["kernels/silu_mul"] = ["differs from silu(gate) * up"]
    # As prefill calls it: more rows, a row longer than one program's block and not a multiple of it, rows of a
    # wider tensor (stride 2 * 1100 + 16), written into a poisoned output of wider rows too.
    wide = (torch.randn(5, 2 * 1100 + 16, generator=gen) * 4).to(torch.bfloat16)
    gate_up = wide[:, : 2 * 1100]
    out = torch.full((5, 1100 + 8), float("nan"), dtype=torch.bfloat16)
    got = silu_mul(gate_up, out=out[:, :1100])
    want = (functional.silu(gate_up[:, :1100]) * gate_up[:, 1100:]).float()
    problems = [] if got.data_ptr() == out.data_ptr() else ["did not write out"]
    if not torch.allclose(out[:, :1100].float(), want, atol=0, rtol=BF16_ULPS):
        problems.append(f"differs from silu(gate) * up by {(out[:, :1100].float() - want).abs().max().item():.3g}")
    if not out[:, 1100:].isnan().all():
        problems.append("wrote past its columns")
    record["kernels/silu_mul_prefill"] = problems
    # Prefill's QK norm and RoPE (rope_rows) against rotate_qkv's torch ops: 2 sequences of 5 tokens (positions
    # restart), rows of a wider tensor, a poisoned output; head dim 96 (halves of 48: masked) and 128 with QK norm.
    from triton_dist.layers._kernels import rope_rows

    problems = []
    for qk_norm, d in ((False, 96), (True, 128)):
        cols = (hq + 2 * hkv) * d
        qkv = torch.randn(2 * 5, cols + 16, generator=gen).to(torch.bfloat16)[:, :cols]
        cos, sin = rope_tables(torch.arange(5), rope_inv_freq(d, 10000.0))
        weights = (1 + torch.randn(2, d, generator=gen) / 8).to(torch.bfloat16)
        norm = (weights[0], weights[1], 1e-6) if qk_norm else None
        out = torch.full((2 * 5, hq + hkv, d), float("nan"), dtype=torch.bfloat16)
        rope_rows(qkv, cos, sin, 5, (hq, hkv), norm, out=out)
        qk = qkv[:, : (hq + hkv) * d].view(2, 5, hq + hkv, d)
        if qk_norm:
            qk = rms_norm(qk, None, 1e-6) * torch.cat([weights[0].expand(hq, d), weights[1].expand(hkv, d)])
        want = rotate(qk, cos, sin).view(2 * 5, hq + hkv, d).float()
        if not torch.allclose(out.float(), want, atol=BF16_ULPS, rtol=BF16_ULPS):
            problems.append(f"D {d}: differs from rotate_qkv's by {(out.float() - want).abs().max().item():.3g}")
    record["kernels/rope_rows"] = problems
    # The decode option's L2 prefetch: what each program read, summed (its sink), against the same sums here: 2
    # programs, a byte count that ends inside the third block (program 0 reads blocks 0 and 2, program 1 block 1).
    from triton_dist.layers._kernels import L2_PREFETCH_BLOCK, l2_prefetch

    block = L2_PREFETCH_BLOCK
    src = torch.randn(4 * block, generator=gen).to(torch.bfloat16)
    sink = torch.full((2,), float("nan"))
    l2_prefetch(src, 2 * (2 * block + 999), sink)
    parts = src.float()
    want = torch.stack([parts[:block].sum() + parts[2 * block : 2 * block + 999].sum(), parts[block : 2 * block].sum()])
    close = torch.allclose(sink, want, atol=1e-2, rtol=1e-4)
    record["kernels/l2_prefetch"] = [] if close else [f"read sums {sink.tolist()}, not {want.tolist()}"]
    return record


def _skinny_products(step: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, list[int]]:
    """``step()``'s result and the address of the B operand of each ``skinny_matmul`` it ran, in order."""
    from triton_dist.layers import attention

    real, seen = attention.skinny_matmul, []

    def recorded(a: torch.Tensor, b: torch.Tensor, **kwargs: object) -> torch.Tensor:
        seen.append(b.data_ptr())
        return real(a, b, **kwargs)

    with mock.patch.object(attention, "skinny_matmul", recorded):
        return step(), seen


def _worker() -> dict[str, list[str]]:
    """This rank's problems per step (empty: it matched), on the world ``run_ranks`` set up."""
    import triton_dist
    from triton_dist.layers.attention import rms_norm

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    gen = torch.Generator().manual_seed(28)
    record: dict[str, list[str]] = {}
    began = time.perf_counter()
    try:
        record.update(_check_kernels(gen))
        for layout, config in LAYOUTS.items():
            weights = random_weights(config, generator=gen)
            tokens = torch.randn(BATCH, PREFILL + 3, config.hidden_size, generator=gen).to(torch.bfloat16)
            attn_ref, want = reference(config, weights, tokens)
            layer = TensorParallelDecoderLayer(config, weights)
            # Both settings of each prefill option, one per layout: the sequence-split one (QK norm) keeps the
            # attention's defaults (q and k rotated in one kernel, SDPA on the KV heads as they are: enable_gqa) and
            # its MLP runs torch's SiLU and product; the head-split one turns the attention's two off (rotate_qkv's
            # torch ops, SDPA on copies of the KV heads) and keeps the fused SiLU * up.
            layer.attention.prefill_gqa = layer.attention.prefill_fused_rope = layout == "sequence"
            layer.mlp.fused_silu_mul = layout == "heads"
            rows = BATCH * PREFILL // size
            mine = slice(rank * rows, (rank + 1) * rows)
            prompt = tokens[:, :PREFILL].reshape(BATCH * PREFILL, -1)
            cache = layer.new_cache(BATCH, MAX_LEN, layout)
            got = layer.prefill(prompt[mine], batch=BATCH, cache=cache)
            record[f"{layout}/prefill"] = _problems(got, want[:, :PREFILL].reshape(BATCH * PREFILL, -1)[mine])
            if layout == "heads":  # the attention block alone, O reduced by gemm_ar, on a copy of the cache
                copy = cache.clone()
                normed = rms_norm(tokens[:, PREFILL], layer.input_norm_weight, config.rms_eps)
                positions = torch.full((BATCH,), PREFILL)
                record["attention/decode_gemm_ar"] = _problems(
                    layer.attention.decode(normed, positions, copy), attn_ref[:, PREFILL]
                )
                # decode's fused kernel (RoPE and the cache writes) against the torch ops it fuses
                fused, plain = cache.clone(), cache.clone()
                got = layer.attention.decode_partial(normed, positions, fused)
                with mock.patch("triton_dist.layers.attention.fused_kernels", return_value=False):
                    want_partial = layer.attention.decode_partial(normed, positions, plain).float()
                problems = _problems(got, want_partial)
                for side in ("k", "v"):
                    new_kv = (getattr(fused, side)[:, :, PREFILL].float(), getattr(plain, side)[:, :, PREFILL].float())
                    if not torch.allclose(*new_kv, atol=BF16_ULPS, rtol=BF16_ULPS) or not new_kv[0].abs().sum():
                        problems.append(f"the new token's {side} differs from the torch ops'")
                record["attention/decode_fused"] = problems
            for step in (PREFILL, PREFILL + 1):
                positions = torch.full((BATCH,), step, dtype=torch.int32)
                ops = _Ops()
                if step > PREFILL:  # the per-step tensors made once, as a stack of layers would share them
                    with ops:  # the second step: decode_positions' tables and the gather buffer are kept
                        positions = layer.decode_positions(positions, cache)  # type: ignore[assignment]
                    step_ops, ops.names = ops.names, []
                    if step_ops != STEP_OPS[layout]:
                        record[f"{layout}/launches"] = [f"decode_positions ran {step_ops}, not {STEP_OPS[layout]}"]
                hidden = tokens[:, step].contiguous()  # as a layer's output is (else decode copies it)
                with ops:
                    got = layer.decode_hidden(hidden, positions, cache)
                record[f"{layout}/decode@{step}"] = _problems(got, want[:, step])
                copies = [name for name in ops.names if name in COPIES]
                if step > PREFILL and layout == "sequence" and copies:
                    record[f"{layout}/launches"] = [f"a decode step ran fills and copies: {copies}"]
            if layout == "heads":  # step 8 again, told every sequence is at 8: SDPA over 9 positions, no mask
                at8 = torch.full((BATCH,), PREFILL + 1, dtype=torch.int32)
                same = layer.decode_positions(at8, cache, same_position=PREFILL + 1)
                got = layer.decode_hidden(tokens[:, PREFILL + 1].contiguous(), same, cache)
                record["heads/decode@8 same_position"] = _problems(got, want[:, PREFILL + 1])
                # and with the options head-same-pos-cublas-o-tiles-k-major times: cuBLAS O, RoPE as one program
                # per token, every decode GEMM on a kept [N, K] copy of its weight
                layer.decode_cublas_o = layer.attention.decode_rope_tiles = True
                layer.decode_k_major = layer.attention.decode_k_major = True
                got = layer.decode_hidden(tokens[:, PREFILL + 1].contiguous(), same, cache)
                problems = _problems(got, want[:, PREFILL + 1])
                kept = {**layer._k_major, **layer.attention._k_major}
                if sorted(kept) != ["down", "gate_up", "o", "qkv"] or kept["qkv"][1].shape[1] != config.hidden_size:
                    problems.append(f"decode_k_major kept {[(n, list(c.shape)) for n, (_, c) in kept.items()]}")
                record["heads/decode@8 same_position tiles"] = problems
                # and with decode_triton_gemm: QKV, O (cuBLAS O's place), gate/up and down by skinny_matmul (in the
                # interpreter) on the [K, N] weights, decode_k_major left on (the option overrides it)
                layer.decode_triton_gemm = layer.attention.decode_triton_gemm = True
                got, products = _skinny_products(
                    functools.partial(layer.decode_hidden, tokens[:, PREFILL + 1].contiguous(), same, cache)
                )
                problems = _problems(got, want[:, PREFILL + 1])
                weights_used = [layer.attention.qkv.weight, layer.attention.o.weight, layer.mlp.gate_up.weight]
                weights_used.append(layer.mlp.down.weight)
                if products != [w.data_ptr() for w in weights_used]:
                    problems.append(f"skinny_matmul ran on {len(products)} weights, not QKV, O, gate/up, down's")
                record["heads/decode@8 triton gemm"] = problems
                layer.decode_triton_gemm = layer.attention.decode_triton_gemm = False
                layer.decode_cublas_o = layer.attention.decode_rope_tiles = False
                layer.decode_k_major = layer.attention.decode_k_major = False
            # Positions that differ per sequence: sequence 0 goes on at 9 (rank 1's block of the sequence-split
            # cache), sequence 1 restarts at 3 (rank 0's), as if its prompt had been 3 tokens.
            new = tokens[:, PREFILL + 2]
            got = layer.decode_hidden(new, torch.tensor([PREFILL + 2, 3]), cache)
            restarted = torch.cat([tokens[1:, :3], new[1:, None]], dim=1)
            want_mixed = torch.stack([want[0, PREFILL + 2], reference(config, weights, restarted)[1][0, 3]])
            record[f"{layout}/decode@9,3"] = _problems(got, want_mixed)
            # The same step again (it writes the same keys and values) with the decode options on: O by cuBLAS,
            # then the fused all-reduce; the L2 prefetch (inline here); the gather as an all_gather (sequence-
            # split), SDPA pinned to a backend (head-split; the CPU has only "math").
            layer.decode_cublas_o, layer.decode_prefetch_bytes = True, DECODE_PREFETCH_BYTES
            layer.attention.decode_gather = "all_gather"
            layer.attention.decode_sdpa_backend = "math"
            layer.attention.decode_rope_tiles = True  # rope_scatter as one program per token (both layouts)
            got = layer.decode_hidden(new, torch.tensor([PREFILL + 2, 3]), cache)
            record[f"{layout}/decode@9,3 options"] = _problems(got, want_mixed)
            if layout == "sequence":  # and the gather fused with RoPE (gather_rope: peers' blocks after a flag)
                layer.attention.decode_gather, layer.attention.decode_rope_tiles = "fused", False
                got = layer.decode_hidden(new, torch.tensor([PREFILL + 2, 3]), cache)
                record["sequence/decode@9,3 fused"] = _problems(got, want_mixed)
                # and the QKV GEMM (into this rank's block of the symmetric buffer), O, gate/up, down by skinny_matmul
                layer.decode_triton_gemm = layer.attention.decode_triton_gemm = True
                got, products = _skinny_products(
                    functools.partial(layer.decode_hidden, new, torch.tensor([PREFILL + 2, 3]), cache)
                )
                problems = _problems(got, want_mixed)
                if len(products) != 4:
                    problems.append(f"skinny_matmul ran {len(products)} times, not 4")
                record["sequence/decode@9,3 fused triton gemm"] = problems
                layer.decode_triton_gemm = layer.attention.decode_triton_gemm = False
            print(f"rank {rank}: {layout} done at {time.perf_counter() - began:.1f} s", flush=True)
    except Exception as error:  # noqa: BLE001 (recorded for the test)
        record["raised"] = [f"{type(error).__name__}: {error}"]
    return record


def test_the_decoder_layer_at_2_ranks_matches_torch() -> None:
    records = run_ranks(_worker, 2, heap_size=HEAP).results
    names = {"attention/decode_gemm_ar", "attention/decode_fused", "kernels/silu_mul_prefill", "kernels/rope_rows"}
    names |= {"kernels/l2_prefetch", "heads/decode@8 same_position", "sequence/decode@9,3 fused"}
    names |= {"heads/decode@8 same_position tiles", "heads/decode@8 triton gemm"}
    names |= {"sequence/decode@9,3 fused triton gemm"}
    names |= {
        f"{layout}/{what}"
        for layout in ("heads", "sequence")
        for what in ("prefill", "decode@7", "decode@8", "decode@9,3", "decode@9,3 options")
    }
    for rank, record in enumerate(records):
        assert set(record) == names, f"rank {rank}: {record}"
        failed = {name: problems for name, problems in record.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


# --------------------------------------------------------------------------------------- without a world


def test_the_configs_are_the_published_ones() -> None:
    # (hidden, heads, KV heads, head dim, intermediate, rope theta, eps, QK norm, layers) of each model's config.json
    published = {
        "Llama-3-8B": (4096, 32, 8, 128, 14336, 500000.0, 1e-5, False, 32),
        "Llama-3-70B": (8192, 64, 8, 128, 28672, 500000.0, 1e-5, False, 80),
        "Qwen3-32B": (5120, 64, 8, 128, 25600, 1000000.0, 1e-6, True, 64),
    }
    for name, values in published.items():
        c = CONFIGS[name]
        got = (c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, c.rope_theta)
        assert got + (c.rms_eps, c.qk_norm, c.num_layers) == values, name


def test_rope_matches_a_complex_rotation() -> None:
    x = torch.randn(2, 5, 3, 16)
    cos, sin = rope_cos_sin(torch.arange(5), rope_inv_freq(16, 500000.0))
    assert torch.allclose(apply_rope(x, cos, sin), _rope(x, 500000.0), atol=1e-5)


def _layer(rank: int, world_size: int, seed: int = 0) -> tuple[TensorParallelDecoderLayer, dict[str, torch.Tensor]]:
    weights = random_weights(TINY, generator=torch.Generator().manual_seed(seed))
    return TensorParallelDecoderLayer(TINY, weights, rank=rank, world_size=world_size), weights


def test_the_layer_keeps_this_ranks_heads_and_rows() -> None:
    layer, w = _layer(1, 2)
    d = TINY.head_dim
    q_cols = slice(2 * d, 4 * d)  # query heads 2, 3 of 4
    kv_cols = slice(d, 2 * d)  # KV head 1 of 2
    want_qkv = torch.cat([w["q"][:, q_cols], w["k"][:, kv_cols], w["v"][:, kv_cols]], dim=1)
    assert torch.equal(layer.attention.qkv.weight, want_qkv)
    assert torch.equal(layer.attention.o.weight, w["o"][2 * d :])
    half = TINY.intermediate_size // 2
    assert torch.equal(layer.mlp.gate_up.weight, torch.cat([w["gate"][:, half:], w["up"][:, half:]], dim=1))
    assert torch.equal(layer.mlp.down.weight, w["down"][half:])
    assert torch.equal(layer.input_norm_weight, w["input_norm"]) and torch.equal(layer.post_norm_weight, w["post_norm"])
    assert torch.equal(layer.attention.q_norm_weight, w["q_norm"])  # type: ignore[arg-type]
    assert (layer.attention.local_heads, layer.attention.local_kv_heads) == (2, 1)


def test_decoder_state_dict_round_trips() -> None:
    layer, _ = _layer(1, 2)
    state = layer.state_dict()
    assert set(state) == {
        "input_norm_weight",
        "post_norm_weight",
        "attention.qkv.weight",
        "attention.o.weight",
        "attention.q_norm_weight",
        "attention.k_norm_weight",
        "mlp.gate_up.weight",
        "mlp.down.weight",
    }
    again = TensorParallelDecoderLayer.from_shards(TINY, state, rank=1, world_size=2)
    other, _ = _layer(1, 2, seed=1)
    other.load_state_dict(state)
    for built in (again, other):
        for key, value in built.state_dict().items():
            assert torch.equal(value, state[key]), key


def test_caches_have_the_layouts_shapes() -> None:
    layer, _ = _layer(0, 2)
    heads = layer.new_cache(3, 10, "heads")
    sequence = layer.new_cache(3, 10, "sequence")
    assert list(heads.k.shape) == [3, 1, 10, 128] and heads.max_len == 10
    assert list(sequence.k.shape) == [3, 2, 5, 128] and sequence.max_len == 10
    assert list(sequence.k_store.shape) == [3, 2, 6, 128]  # and a spare position
    assert heads.k.abs().sum() == 0 and sequence.v_store.abs().sum() == 0
    copy = sequence.clone()
    copy.k.fill_(1)
    assert sequence.k.abs().sum() == 0 and copy.k_store[:, :, 5].abs().sum() == 0


def test_decode_positions_place_each_token() -> None:
    positions = torch.tensor([3, 7])
    for rank, slots, lengths in ((0, [3, 5], [4, 5]), (1, [5, 2], [0, 3])):  # 5: the spare position
        layer, _ = _layer(rank, 2)
        step = layer.decode_positions(positions, layer.new_cache(2, 10, "sequence"))
        assert step.slots.tolist() == slots and step.lengths is not None and step.lengths.tolist() == lengths
        assert step.lengths.dtype == torch.int32 and step.mask is None
    heads = layer.decode_positions(positions, layer.new_cache(2, 10, "heads"))
    assert heads.slots.tolist() == [3, 7] and heads.mask is not None and heads.lengths is None
    assert (heads.mask[:, 0, 0] == 0).tolist() == [[i <= 3 for i in range(10)], [i <= 7 for i in range(10)]]
    assert heads.mask.dtype == torch.bfloat16 and heads.mask.max() == 0 and heads.mask.min() == float("-inf")
    cos, sin = rope_cos_sin(positions, layer.attention.inv_freq)
    x = torch.randn(2, 3, TINY.head_dim)
    assert torch.allclose(rotate(x, heads.cos, heads.signed_sin), apply_rope(x, cos, sin))
    other = layer.new_cache(2, 12, "heads")
    with pytest.raises(LayerError, match=r"the DecodePositions were made for \('heads', 10"):
        layer.attention.decode_partial(torch.zeros(2, 32, dtype=torch.bfloat16), heads, other)


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """fp32 causal attention of q [B, Hq, S, D] over k, v [B, Hkv, S, D], query head h reading KV head
    ``h // (Hq / Hkv)``, written out (no SDPA)."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.float().repeat_interleave(group, dim=1) for t in (k, v))
    scores = torch.einsum("bhqd,bhkd->bhqk", q.float(), k) / math.sqrt(q.shape[-1])
    seq = q.shape[2]
    scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)


@pytest.mark.parametrize("prefill_gqa", [False, True])
def test_prefill_attention_reads_each_kv_head_for_its_group(prefill_gqa: bool) -> None:
    """Prefill's SDPA (``TensorParallelAttention._prefill_sdpa``) against written-out attention on fresh random
    q, k, v laid out as prefill has them (transposed views of [B, S, heads, D]); with ``prefill_gqa`` without
    copying k and v (no ``repeat_interleave``), without it with the copies."""
    config = DecoderConfig("gqa4", 32, 8, 2, 16, 64, 1e4, 1e-6)  # 4 query heads per KV head
    weights = random_weights(config)
    block = TensorParallelAttention(
        weights["q"], weights["k"], weights["v"], weights["o"], num_heads=8, num_kv_heads=2, head_dim=16,
        rank=0, world_size=1, prefill_gqa=prefill_gqa,
    )  # fmt: skip
    assert block.prefill_gqa is prefill_gqa and f"prefill_gqa={prefill_gqa}" in repr(block)
    assert block.prefill_fused_rope  # the default, whatever prefill_gqa is
    gen = torch.Generator().manual_seed(int(prefill_gqa))
    q, k, v = (torch.randn(2, 9, heads, 16, generator=gen).to(torch.bfloat16).transpose(1, 2) for heads in (8, 2, 2))
    sdpa = functional.scaled_dot_product_attention
    with mock.patch.object(functional, "scaled_dot_product_attention", wraps=sdpa) as called:
        got = block._prefill_sdpa(q, k, v)
    assert got.shape == (2, 8, 9, 16) and got.dtype == torch.bfloat16
    want = _causal_attention(q, k, v)
    assert torch.allclose(got.float(), want, atol=2e-2, rtol=2e-2), (got.float() - want).abs().max()
    (_, k_in, v_in), options = called.call_args
    assert options == ({"is_causal": True, "enable_gqa": True} if prefill_gqa else {"is_causal": True})
    if prefill_gqa:  # SDPA reads prefill's k and v where they are
        assert k_in.data_ptr() == k.data_ptr() and v_in.data_ptr() == v.data_ptr()
    else:
        assert k_in.shape[1] == v_in.shape[1] == 8


def test_the_prefill_kernels_refuse_what_they_cannot_take() -> None:
    from triton_dist.layers._kernels import rope_rows, silu_mul

    layer, _ = _layer(0, 2)
    assert layer.mlp.fused_silu_mul and "fused_silu_mul=True" in repr(layer.mlp)
    with pytest.raises(
        ValueError, match=r"silu_mul: gate_up must be \[M, 2 \* I\] with contiguous rows, got shape \[2, 3\]"
    ):
        silu_mul(torch.zeros(2, 3, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"with contiguous rows, got shape \[2, 4\] and strides \[1, 2\]"):
        silu_mul(torch.zeros(4, 2, dtype=torch.bfloat16).t())
    with pytest.raises(ValueError, match=r"silu_mul: out must be a torch.bfloat16 \[2, 2\] tensor"):
        silu_mul(torch.zeros(2, 4, dtype=torch.bfloat16), out=torch.zeros(2, 3, dtype=torch.bfloat16))
    cos, sin = rope_tables(torch.arange(4), rope_inv_freq(8, 10000.0))
    qkv = torch.zeros(6, 5 * 8, dtype=torch.bfloat16)  # 3 q heads, 1 KV head, D 8
    with pytest.raises(ValueError, match=r"rope_rows: qkv must be \[M, \(Hq \+ 2 \* Hkv\) \* D\] = \[M, 48\]"):
        rope_rows(qkv, cos, sin, 3, (4, 1))
    with pytest.raises(ValueError, match=r"cos / signed_sin fp32 \[>= 6, D\]"):
        rope_rows(qkv, cos, sin, 6, (3, 1))  # positions 0..5, a table of 4
    with pytest.raises(ValueError, match=r"rope_rows: out must be a torch.bfloat16 \[6, 4, 8\] tensor"):
        rope_rows(qkv, cos, sin, 3, (3, 1), out=torch.zeros(6, 5, 8, dtype=torch.bfloat16))
    block, _ = _layer(0, 2)  # the defaults: prefill's fused RoPE and SDPA with enable_gqa
    assert block.attention.prefill_fused_rope and "prefill_fused_rope=True" in repr(block.attention)
    assert block.attention.prefill_gqa and "prefill_gqa=True" in repr(block.attention)


def test_same_position_drops_the_mask_and_bounds_the_length() -> None:
    layer, _ = _layer(0, 2)
    cache = layer.new_cache(2, 10, "heads")
    step = layer.decode_positions(torch.tensor([4, 4]), cache, same_position=4)
    assert step.mask is None and step.length == 5 and step.slots.tolist() == [4, 4]
    assert layer.decode_positions(torch.tensor([4, 4]), cache).length is None
    for bad in (10, -1, True, 2.0):
        with pytest.raises(LayerError, match=r"same_position must be None or an int in \[0, 10\)"):
            layer.decode_positions(torch.tensor([4, 4]), cache, same_position=bad)  # type: ignore[arg-type]


def test_the_decode_options_are_off_by_default_and_refuse_bad_values() -> None:
    layer, _ = _layer(0, 2)
    assert (layer.decode_cublas_o, layer.decode_prefetch_bytes) == (False, 0)
    assert (layer.attention.decode_gather, layer.attention.decode_sdpa_backend) == ("all_reduce", None)
    assert "decode_cublas_o=False, decode_prefetch_bytes=0" in repr(layer)
    assert "decode_gather='all_reduce', decode_sdpa_backend=None, decode_rope_tiles=False" in repr(layer.attention)
    assert layer.attention.decode_rope_tiles is False
    again = TensorParallelDecoderLayer.from_shards(
        TINY, layer.state_dict(), rank=0, world_size=2, decode_cublas_o=True, decode_prefetch_bytes=1 << 20
    )
    assert (again.decode_cublas_o, again.decode_prefetch_bytes) == (True, 1 << 20)
    with pytest.raises(LayerError, match=r"TensorParallelDecoderLayer: decode_prefetch_bytes must be an int >= 0"):
        TensorParallelDecoderLayer(TINY, _weights(), rank=0, world_size=2, decode_prefetch_bytes=-1)
    with pytest.raises(LayerError, match=r"TensorParallelDecoderLayer: decode_cublas_o must be a bool, got 'yes'"):
        TensorParallelDecoderLayer.from_shards(TINY, layer.state_dict(), rank=0, world_size=2, decode_cublas_o="yes")  # type: ignore[arg-type]
    w = _weights()
    qkvo = (w["q"], w["k"], w["v"], w["o"])
    with pytest.raises(
        LayerError, match=r"decode_gather must be one of \['all_reduce', 'all_gather', 'fused'\], got 'nccl'"
    ):
        TensorParallelAttention(
            *qkvo, num_heads=4, num_kv_heads=2, head_dim=128, rank=0, world_size=2, decode_gather="nccl"
        )
    block = TensorParallelAttention(*qkvo, num_heads=4, num_kv_heads=2, head_dim=128, rank=0, world_size=2)
    block.decode_sdpa_backend = "fast"  # an attribute set later is checked at the next decode
    positions = torch.tensor([1, 2])
    with pytest.raises(LayerError, match=r"decode_sdpa_backend must be None or one of \['cudnn', 'efficient'"):
        block.decode_partial(torch.zeros(2, 32, dtype=torch.bfloat16), positions, block.new_cache(2, 8, "heads"))
    block.decode_sdpa_backend, block.decode_rope_tiles = None, 1  # type: ignore[assignment]
    with pytest.raises(LayerError, match=r"TensorParallelAttention: decode_rope_tiles must be a bool, got 1"):
        block.decode_partial(torch.zeros(2, 32, dtype=torch.bfloat16), positions, block.new_cache(2, 8, "heads"))
    block.decode_rope_tiles, block.decode_k_major = False, "yes"  # type: ignore[assignment]
    with pytest.raises(LayerError, match=r"TensorParallelAttention: decode_k_major must be a bool, got 'yes'"):
        block.decode_partial(torch.zeros(2, 32, dtype=torch.bfloat16), positions, block.new_cache(2, 8, "heads"))
    block.decode_k_major, block.decode_triton_gemm = False, "on"  # type: ignore[assignment]
    with pytest.raises(LayerError, match=r"TensorParallelAttention: decode_triton_gemm must be a bool, got 'on'"):
        block.decode_partial(torch.zeros(2, 32, dtype=torch.bfloat16), positions, block.new_cache(2, 8, "heads"))
    assert layer.decode_triton_gemm is False and layer.attention.decode_triton_gemm is False
    layer.decode_triton_gemm = 1  # type: ignore[assignment]
    with pytest.raises(LayerError, match=r"TensorParallelDecoderLayer: decode_triton_gemm must be a bool, got 1"):
        layer.decode(torch.zeros(2, 32, dtype=torch.bfloat16), torch.zeros(2, 32, dtype=torch.bfloat16), positions,
                     layer.new_cache(2, 8, "heads"))  # fmt: skip
    layer.decode_triton_gemm = False
    layer.decode_k_major = 0  # type: ignore[assignment]
    with pytest.raises(LayerError, match=r"TensorParallelDecoderLayer: decode_k_major must be a bool, got 0"):
        layer.decode(torch.zeros(2, 32, dtype=torch.bfloat16), torch.zeros(2, 32, dtype=torch.bfloat16), positions,
                     layer.new_cache(2, 8, "heads"))  # fmt: skip
    shards = TensorParallelAttention.from_shards(
        block.qkv.weight, block.o.weight, num_heads=4, num_kv_heads=2, head_dim=128, rank=0, world_size=2,
        decode_rope_tiles=True,
    )  # fmt: skip
    assert shards.decode_rope_tiles is True


def test_k_major_weight_is_the_weight_stored_n_by_k_and_follows_changes() -> None:
    from triton_dist.layers.attention import k_major_weight

    weight = torch.randn(6, 10, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    kept: dict[str, tuple[tuple[int, int], torch.Tensor]] = {}
    view = k_major_weight(kept, "w", weight)
    assert torch.equal(view, weight) and view.stride() == (1, 6) and view.data_ptr() != weight.data_ptr()
    assert k_major_weight(kept, "w", weight).data_ptr() == view.data_ptr()  # kept, not copied again
    weight.mul_(2)  # changed in place: copied again
    assert torch.equal(k_major_weight(kept, "w", weight), weight) and not torch.equal(view, weight)
    with torch.inference_mode():  # a weight made there has no version counter
        frozen = torch.ones(3, 4)
        assert torch.equal(k_major_weight(kept, "f", frozen), frozen)


def _weights(**changes: torch.Tensor) -> dict[str, torch.Tensor]:
    return {**random_weights(TINY), **changes}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: TensorParallelDecoderLayer(TINY, _weights(), rank=0, world_size=4),
            "TensorParallelAttention: num_kv_heads 2 does not split over 4 ranks",
        ),
        (
            lambda: TensorParallelAttention(
                *(torch.zeros(64, 6 * 16, dtype=torch.bfloat16) for _ in range(3)),
                torch.zeros(96, 64, dtype=torch.bfloat16),
                num_heads=6,
                num_kv_heads=4,
                head_dim=16,
                rank=0,
                world_size=1,
            ),  # fmt: skip
            "num_heads 6 is not a multiple of num_kv_heads 4",
        ),
        (
            lambda: TensorParallelDecoderLayer(TINY, _weights(o=torch.zeros(64, 64)), rank=0, world_size=2),
            r"TensorParallelDecoderLayer: weight 'o' must be \[512, 32\] for 'tiny', got \[64, 64\]",
        ),
        (
            lambda: TensorParallelDecoderLayer(
                TINY, _weights(down=torch.zeros(64, 32, dtype=torch.half)), rank=0, world_size=2
            ),
            "TensorParallelDecoderLayer: weight 'down' is torch.float16 but 'q' is torch.bfloat16",
        ),
        (
            lambda: TensorParallelDecoderLayer(TINY, {"q": torch.zeros(1)}, rank=0, world_size=2),
            r"TensorParallelDecoderLayer: weights missing \['input_norm', 'k'",
        ),
        (
            lambda: TensorParallelDecoderLayer(
                DecoderConfig("wide", 40960, 4, 2, 128, 128, 1e4, 1e-6), {}, rank=0, world_size=2
            ),
            "TensorParallelDecoderLayer: hidden size 40960 cannot be tiled by the fused all-reduce",
        ),
        (
            lambda: TensorParallelDecoderLayer.from_shards(TINY, {}, rank=0, world_size=2),
            r"TensorParallelDecoderLayer: the shards lack \['input_norm_weight'",
        ),
        (
            lambda: TensorParallelDecoderLayer.from_shards(
                TINY,
                {**_layer(0, 2)[0].state_dict(), "attention.o.weight": torch.zeros(512, 32, dtype=torch.bfloat16)},
                rank=0,
                world_size=2,
            ),  # fmt: skip
            r"TensorParallelAttention: o_shard must be \[256, 32\], got \[512, 32\]",
        ),
        (
            lambda: TensorParallelAttention(
                *(torch.zeros(32, 4 * 16, dtype=torch.bfloat16) for _ in range(3)),
                torch.zeros(64, 32, dtype=torch.half),
                num_heads=4,
                num_kv_heads=4,
                head_dim=16,
                rank=0,
                world_size=1,
            ),  # fmt: skip
            "TensorParallelAttention: mixed weight dtypes: q_weight is torch.bfloat16, o_weight torch.float16",
        ),
        (lambda: _layer(0, 2)[0].new_cache(2, 9, "sequence"), "max_len a multiple of the world size 2, got 9"),
        (lambda: _layer(0, 2)[0].new_cache(2, 8, "pages"), "layout must be one of"),
    ],
)
def test_bad_input_names_the_layer_and_tensor(build: Callable[[], object], message: str) -> None:
    with pytest.raises(LayerError, match=message):
        build()


def test_bad_decode_input_names_the_layer() -> None:
    layer, _ = _layer(0, 1)
    cache = layer.new_cache(2, 8)
    x = torch.zeros(2, 32, dtype=torch.bfloat16)
    with pytest.raises(LayerError, match=r"TensorParallelAttention: x is torch.float16 but the weights are"):
        layer.attention.decode_partial(x.half(), torch.zeros(2, dtype=torch.long), cache)
    with pytest.raises(
        LayerError, match=r"TensorParallelAttention: positions must be an integer tensor of shape \[2\]"
    ):
        layer.attention.decode_partial(x, torch.zeros(3, dtype=torch.long), cache)
    with pytest.raises(LayerError, match=r"TensorParallelAttention: the KV cache \(heads, k \[2, 2, 8, 128\]"):
        layer.attention.decode_partial(x[:1], torch.zeros(1, dtype=torch.long), cache)


def test_bad_layer_input_names_the_decoder_layer() -> None:
    layer, _ = _layer(0, 2)
    cache = layer.new_cache(2, 8)
    x = torch.zeros(2, 32, dtype=torch.bfloat16)
    positions = torch.zeros(2, dtype=torch.long)
    with pytest.raises(LayerError, match="TensorParallelDecoderLayer: x is torch.float16 but the weights are"):
        layer.prefill(x.half())
    with pytest.raises(LayerError, match=r"TensorParallelDecoderLayer: residual must be \[rows, 32\], got \[2, 16\]"):
        layer.decode(x, x[:, :16], positions, cache)
    with pytest.raises(LayerError, match=r"TensorParallelDecoderLayer: x and residual must have one shape"):
        layer.decode(x, x[:1], positions, cache)


def test_sequence_cache_needs_flash_decodes_head_dim() -> None:
    small = DecoderConfig("d64", 64, 4, 2, 64, 128, 1e4, 1e-6)
    layer = TensorParallelDecoderLayer(small, random_weights(small), rank=0, world_size=2)
    with pytest.raises(LayerError, match="takes head_dim 128, not 64"):
        layer.new_cache(1, 8, "sequence")


@pytest.mark.parametrize("qk_norm", [False, True])
def test_the_prefill_kernels_compile_to_16_byte_accesses(qk_norm: bool) -> None:
    """``silu_mul`` and ``rope_rows`` for sm_90 at prefill's layouts (row strides and widths multiples of 16
    elements, as a launch specializes them): every global load and store moves 16 bytes (``v4.b32``), what keeps
    the elementwise passes at memory bandwidth. ``rope_rows`` reads each half of x once (2 such loads per thread
    each at 4 warps over [32 tokens, 64] tiles) and one half of each fp32 table (4 each; 2 more loads for the QK
    norm weights), and stores each half once (2 each)."""
    import re
    from collections import Counter

    from triton_dist import testing
    from triton_dist.layers._kernels import ROPE_ROWS_BLOCK_T, SILU_BLOCK, _rope_rows_kernel, _silu_mul_kernel

    ints = {"cols": "i32", "stride_s": "i32", "stride_o": "i32"}
    silu = testing.compile_for(
        _silu_mul_kernel,
        {"src_ptr": "*bf16", "out_ptr": "*bf16", **ints},
        constexprs={"BLOCK": SILU_BLOCK},
        aligned=["src_ptr", "out_ptr", *ints],
    )
    accesses = Counter(re.findall(r"(?:ld|st)\.global[.\w]*", silu.asm["ptx"]))
    assert accesses == {"ld.global.v4.b32": 2, "st.global.v4.b32": 1}, accesses
    pointers = {name: "*bf16" for name in ("src_ptr", "qw_ptr", "kw_ptr", "out_ptr")}
    pointers |= {"cos_ptr": "*fp32", "sin_ptr": "*fp32"}
    scalars = {"rows": "i32", "seq": "i32", "eps": "fp32", "stride_s": "i32", "stride_c": "i32", "stride_o": "i32"}
    rope = testing.compile_for(
        _rope_rows_kernel,
        pointers | scalars,
        constexprs={"HQ": 16, "D": 128, "BLOCK_T": ROPE_ROWS_BLOCK_T, "BLOCK_H": 64, "QK_NORM": qk_norm},
        aligned=[*pointers, "rows", "stride_s", "stride_c", "stride_o"],
    )
    accesses = Counter(re.findall(r"(?:ld|st)\.global[.\w]*", rope.asm["ptx"]))
    assert accesses == {"ld.global.v4.b32": 2 * 2 + 2 * 4 + 2 * qk_norm, "st.global.v4.b32": 2 * 2}, accesses


def test_the_l2_prefetch_compiles_to_l2_only_16_byte_loads() -> None:
    """``l2_prefetch``'s kernel for sm_90 as the decode step launches it (8 warps, bf16 weights): 64 elements a thread
    per iteration as 8 loads of 16 bytes that bypass L1 (``ld.global.cg``: the lines land in L2 only), 32 KB in
    flight per program; one store, the program's sum."""
    import re
    from collections import Counter

    from triton_dist import testing
    from triton_dist.layers._kernels import L2_PREFETCH_BLOCK, _l2_prefetch_kernel

    kernel = testing.compile_for(
        _l2_prefetch_kernel,
        {"src_ptr": "*bf16", "sink_ptr": "*fp32", "n": "i32", "iters": "i32"},
        constexprs={"BLOCK": L2_PREFETCH_BLOCK},
        aligned=["src_ptr", "sink_ptr", "n"],
        num_warps=8,
    )
    accesses = Counter(re.findall(r"(?:ld|st)\.global[.\w]*", kernel.asm["ptx"]))
    assert accesses == {"ld.global.cg.v4.b32": 8, "st.global.b32": 1}, accesses


@pytest.mark.parametrize("qk_norm", [False, True])
def test_the_fused_gather_compiles_to_16_byte_tiles(qk_norm: bool) -> None:
    """``gather_rope``'s kernel (dl.wait, dl.symm_at, the epoch's arrival) compiles for sm_90 at a Llama-3-8B rank's
    heads (16 q, 4 k, 4 v per block, D 128, aligned rows): each of its two [32, 64] tiles of a block's row loaded
    with 16-byte accesses (2 a thread each), the tables' halves (and the QK norm weights) too, and the two rotated
    halves stored so (2 a thread each)."""
    import re
    from collections import Counter

    from triton_dist import testing
    from triton_dist.layers._kernels import _gather_rope_kernel

    pointers = {name: "*bf16" for name in ("sym_ptr", "qw_ptr", "kw_ptr", "q_ptr", "k_ptr", "v_ptr")}
    pointers |= {"flags_ptr": "*i32", "state_ptr": "*i64", "cos_ptr": "*fp32", "sin_ptr": "*fp32", "slots_ptr": "*i32"}
    strides = [f"stride_{name}" for name in ("sr", "sb", "cb", "qb", "qh", "kb", "kh", "ks", "vb", "vh", "vs")]
    kernel = testing.compile_for(
        _gather_rope_kernel,
        {**pointers, "batch": "i32", "eps": "fp32", **dict.fromkeys(strides, "i32")},
        constexprs={"HQ": 16, "HKV": 4, "D": 128, "BLOCK_H": 32, "QK_NORM": qk_norm},
        aligned=[*pointers, *strides],
    )
    accesses = Counter(re.findall(r"(?:ld|st)\.global[.\w]*", kernel.asm["ptx"]))
    assert accesses["ld.global.v4.b32"] == 2 * 2 + 2 * 2 + 4 * qk_norm, accesses
    assert accesses["st.global.v4.b32"] == 2 * 2, accesses
