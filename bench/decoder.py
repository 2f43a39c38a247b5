"""Stacks of tensor-parallel decoder layers (``triton_dist.layers.TensorParallelDecoderLayer``) shaped like
Llama-3-8B, Llama-3-70B and Qwen3-32B (their published configs, random bf16 weights, a few layers), against a torch
tensor-parallel baseline of the same weights, one run.

    torchrun --nproc-per-node=2 bench/decoder.py [--layers 2] [--compile] [--out-dir bench/results]
        [--prefill-variants unfused,no-gqa,no-rope] [--kernels]

- Prefill, 4k and 8k tokens (one sequence): ours is sequence-parallel (each rank holds M/W rows; QKV and gate/up
  through ``ag_gemm``, O and down through ``gemm_rs``, local RMSNorm); the baseline is Megatron-style TP on
  replicated rows (cuBLAS GEMMs on this rank's heads and columns, SDPA causal, NCCL ``all_reduce`` after O and
  after down, torch RMSNorm). Eager; CUDA events around the whole stack after a device barrier, median of >= 20,
  max over ranks. Ours runs the layers' defaults: SiLU(gate) * up as one Triton kernel
  (``TensorParallelMLP.fused_silu_mul``), SDPA with ``enable_gqa=True`` on the KV heads as they are
  (``TensorParallelAttention.prefill_gqa``; the baseline's SDPA reads copies of them repeated for their query
  groups) and QK norm and RoPE as one Triton kernel (``prefill_fused_rope``; the baseline: torch's ops).
  ``--prefill-variants`` also times ours with some of these options off (``PREFILL_VARIANTS``: ``unfused``, all
  three off, the torch ops; ``no-gqa``, SDPA on copies of the KV heads; ``no-rope``, ``rotate_qkv``'s torch ops),
  each checked against the baseline too; the baseline stays as it is. ``--kernels``: prefill's two fused kernels
  alone against the torch ops they replace, at each model's per-rank prefill shapes (µs, GB/s; ``kernel_rows``).
- Decode, one token per sequence at batch 1, 8, 64 with 4k and 32k tokens of context already cached: ours with
  the sequence-split KV cache (every rank's new q/k/v gathered by one ``all_reduce``, attention by
  ``flash_decode``) and with the head-split one (SDPA with a length mask), both with the two fused
  ``all_reduce_residual_rmsnorm`` per layer and cuBLAS GEMMs; the baseline: torch RMSNorm, cuBLAS, SDPA on this
  rank's heads (the query group as query rows, no mask: the cache is sliced to the context), NCCL ``all_reduce``
  after O and after down, torch residual adds. Everything CUDA-graphed (10 steps per graph, median of >= 20
  replays, max over ranks). The rotary tables are the same torch code on both sides; ours' decode runs QK norm,
  RoPE and the KV cache writes as one Triton kernel and SiLU(gate) * up as another (layers/_kernels.py),
  the baseline torch's ops (``rotate_qkv``, index_put, SiLU and a product).
- ``--decode-variants``: also times ours' decode with the layers' decode options (``DECODE_VARIANTS``, off by default;
  docs/design.md, "The decode step at batch 64"), each beside the default in the same run and checked against the
  baseline: ``cublas-o`` (O's GEMM by cuBLAS, then the fused all-reduce + RMSNorm), ``all-gather`` (the sequence-
  split gather by ``all_gather``), ``prefetch`` / ``prefetch-32m`` (cuBLAS O and an L2 prefetch of the next GEMM's
  weight, 16 / 32 MiB, beside each fused all-reduce), ``combined`` (the three), ``head-cudnn`` /
  ``head-efficient`` (the head-split cache, SDPA pinned to cuDNN / memory-efficient attention), ``head-combined``
  (cuDNN, cuBLAS O, the prefetch), ``head-same-pos`` / ``head-same-pos-combined`` (the head-split cache with
  ``decode_positions(same_position=context)``: no mask, as the baseline; alone / with cuBLAS O and the prefetch),
  ``fused-gather`` / ``fused-combined`` (the sequence split's gather and RoPE as one kernel, ``decode_gather=
  "fused"``; alone / with cuBLAS O and the prefetch), ``head-same-pos-cublas-o`` / ``head-same-pos-rope-tiles`` /
  ``head-same-pos-cublas-o-tiles`` (``head-same-pos`` with cuBLAS O and no prefetch / with the RoPE and cache
  writes as one program per token, ``decode_rope_tiles`` / both), ``head-same-pos-k-major`` /
  ``head-same-pos-cublas-o-tiles-k-major`` (cuBLAS O and every decode GEMM on a kept [N, K] copy of its weight,
  ``decode_k_major``: cuBLAS's "TN" GEMM; without / with ``decode_rope_tiles``), ``rope-tiles`` (the sequence
  split's default with ``decode_rope_tiles``), ``triton-gemm`` / ``triton-gemm-o`` (the decode GEMMs QKV, gate/up
  and down by the skinny Triton GEMM, ``decode_triton_gemm``; O in ``gemm_ar`` / O by the skinny GEMM too, then the
  fused all-reduce + RMSNorm), ``head-same-pos-triton-gemm`` / ``head-same-pos-triton-gemm-o-tiles`` (the same on
  ``head-same-pos``; the second with O by the skinny GEMM and ``decode_rope_tiles``).
  For the batch-64 gap, in under 2 minutes:
  ``torchrun --nproc-per-node=2 bench/decoder.py --prefill "" --batches 64 --contexts 4096 --decode-variants all``.
- ``--compile``: also the baseline's layer under ``torch.compile`` (graphed for decode), where it compiles.

Before timing, each case compares ours with the baseline (the stack's output, relative to its largest element);
a case off by more than 5% is marked and the run exits 1 after writing the results. ms per layer = the stack's time
/ layers; tokens/s = tokens per step / (ms per layer x the model's published depth), i.e. extrapolated to the whole
model's decoder layers (no embedding, no LM head).

Writes ``decoder_<W>x<GPU>.md``, ``.png`` and ``.json`` to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn import functional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    bar_chart,
    describe_machine,
    markdown_table,
    run_date,
    write_json,
    write_on_rank0_and_finish,
)

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.layers import CONFIGS, DecoderConfig, KVCache, TensorParallelDecoderLayer, random_weights  # noqa: E402
from triton_dist.layers._kernels import rope_rows, silu_mul  # noqa: E402
from triton_dist.layers.attention import rms_norm  # noqa: E402
from triton_dist.layers.decoder import DECODE_PREFETCH_BYTES  # noqa: E402
from triton_dist.ops import all_reduce  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402
from triton_dist.testing.timing import graphed_us, time_ms  # noqa: E402

ag_gemm_op = importlib.import_module("triton_dist.ops.ag_gemm")  # the packages (ops' names are the functions)
gemm_rs_op = importlib.import_module("triton_dist.ops.gemm_rs")

PREFILL = [4096, 8192]
BATCHES = [1, 8, 64]
CONTEXTS = [4096, 32768]
AGREEMENT = 0.05
"""The largest difference between ours and the baseline, relative to the output's largest element."""
BAR = {"prefill": 1.15, "decode": 1.25}
"""Issue 28's bar for the stack against the torch baseline."""
KERNEL_AGREEMENT = 2**-6
"""The largest difference of a fused kernel from the torch ops it replaces (``--kernels``), relative to their
output's largest element: a few bf16 roundings."""
OURS_OPTIONS: dict[str, bool] = {"fused_silu_mul": True, "prefill_gqa": True, "prefill_fused_rope": True}
"""The layers' defaults, which ``ours`` runs: the MLP's ``fused_silu_mul``, the attention block's ``prefill_gqa``
and ``prefill_fused_rope``."""
PREFILL_VARIANTS: dict[str, dict[str, bool]] = {
    "unfused": {"fused_silu_mul": False, "prefill_gqa": False, "prefill_fused_rope": False},
    "no-gqa": {**OURS_OPTIONS, "prefill_gqa": False},
    "no-rope": {**OURS_OPTIONS, "prefill_fused_rope": False},
}
"""Ours' prefill with some of the layers' default options (``OURS_OPTIONS``) off, by name (``--prefill-variants``):
``unfused`` all three (torch's SiLU and product, SDPA on copies of the KV heads repeated for their query groups,
``rotate_qkv``'s torch ops: the path before the fused kernels), ``no-gqa`` only ``prefill_gqa`` (the KV copies),
``no-rope`` only ``prefill_fused_rope`` (``rotate_qkv``'s torch ops)."""


@dataclasses.dataclass(frozen=True)
class DecodeVariant:
    """One of ours' decode variants: the KV cache ``layout`` ("sequence" or "heads"), the layer ``options`` it sets
    (``layer_options``) and whether its steps pass ``same_position`` (every sequence's new token at the case's
    context, as the baseline has them: the head split attends without a mask)."""

    layout: str
    options: dict[str, object]
    same_position: bool = False


_PREFETCH = {"decode_cublas_o": True, "decode_prefetch_bytes": DECODE_PREFETCH_BYTES}
_K_MAJOR = {"decode_cublas_o": True, "decode_k_major": True}
_TRITON_GEMM = {"decode_triton_gemm": True}
DECODE_VARIANTS: dict[str, DecodeVariant] = {
    "cublas-o": DecodeVariant("sequence", {"decode_cublas_o": True}),
    "all-gather": DecodeVariant("sequence", {"decode_gather": "all_gather"}),
    "prefetch": DecodeVariant("sequence", _PREFETCH),
    "prefetch-32m": DecodeVariant("sequence", {**_PREFETCH, "decode_prefetch_bytes": 32 << 20}),
    "combined": DecodeVariant("sequence", {**_PREFETCH, "decode_gather": "all_gather"}),
    "head-cudnn": DecodeVariant("heads", {"decode_sdpa_backend": "cudnn"}),
    "head-efficient": DecodeVariant("heads", {"decode_sdpa_backend": "efficient"}),
    "head-combined": DecodeVariant("heads", {**_PREFETCH, "decode_sdpa_backend": "cudnn"}),
    "head-same-pos": DecodeVariant("heads", {}, same_position=True),
    "head-same-pos-combined": DecodeVariant("heads", _PREFETCH, same_position=True),
    "head-same-pos-cublas-o": DecodeVariant("heads", {"decode_cublas_o": True}, same_position=True),
    "head-same-pos-rope-tiles": DecodeVariant("heads", {"decode_rope_tiles": True}, same_position=True),
    "head-same-pos-cublas-o-tiles": DecodeVariant(
        "heads", {"decode_cublas_o": True, "decode_rope_tiles": True}, same_position=True
    ),
    "head-same-pos-k-major": DecodeVariant("heads", _K_MAJOR, same_position=True),
    "head-same-pos-cublas-o-tiles-k-major": DecodeVariant(
        "heads", {**_K_MAJOR, "decode_rope_tiles": True}, same_position=True
    ),
    "rope-tiles": DecodeVariant("sequence", {"decode_rope_tiles": True}),
    "fused-gather": DecodeVariant("sequence", {"decode_gather": "fused"}),
    "fused-combined": DecodeVariant("sequence", {**_PREFETCH, "decode_gather": "fused"}),
    "triton-gemm": DecodeVariant("sequence", _TRITON_GEMM),
    "triton-gemm-o": DecodeVariant("sequence", {**_TRITON_GEMM, "decode_cublas_o": True}),
    "head-same-pos-triton-gemm": DecodeVariant("heads", _TRITON_GEMM, same_position=True),
    "head-same-pos-triton-gemm-o-tiles": DecodeVariant(
        "heads", {**_TRITON_GEMM, "decode_cublas_o": True, "decode_rope_tiles": True}, same_position=True
    ),
}
"""Ours' decode with the layers' decode options on (``--decode-variants``; ``all``: every one), by name: the KV cache
layout and the options (``TensorParallelDecoderLayer``'s ``decode_cublas_o`` and ``decode_prefetch_bytes``, the
attention block's ``decode_gather``, ``decode_sdpa_backend`` and ``decode_rope_tiles``; ``decode_k_major`` and
``decode_triton_gemm`` on both; ``same_position``), each timed beside ours' default (``ours``, the sequence-split
cache; ``ours head-KV``, the head-split one with a mask and torch's SDPA choice)."""


# --------------------------------------------------------------------------------------------- the torch baseline


def torch_prefill_layer(
    layer: TensorParallelDecoderLayer,
    x: torch.Tensor,
    reduce: Callable[[torch.Tensor], object] = dist.all_reduce,
) -> torch.Tensor:
    """Megatron-style TP of one layer on replicated rows x [M, H]: this rank's heads and MLP columns, NCCL
    all-reduce after O and after down (``reduce``, in place; bench/decoder_anatomy.py passes one that does nothing
    for the layer without communication)."""
    att, eps = layer.attention, layer.config.rms_eps
    tokens = x.shape[0]
    h = rms_norm(x, layer.input_norm_weight, eps)
    rope = att.rope_tables(torch.arange(tokens, device=x.device))
    q, k, v = att.rotate_qkv((h @ att.qkv.weight).view(1, tokens, -1), rope)
    group = att.num_heads // att.num_kv_heads
    out = functional.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.transpose(1, 2).repeat_interleave(group, dim=1),
        v.transpose(1, 2).repeat_interleave(group, dim=1),
        is_causal=True,
    )
    o = out.transpose(1, 2).reshape(tokens, -1) @ att.o.weight
    reduce(o)
    x = x + o
    gate, up = (rms_norm(x, layer.post_norm_weight, eps) @ layer.mlp.gate_up.weight).chunk(2, dim=1)
    down = (functional.silu(gate) * up) @ layer.mlp.down.weight
    reduce(down)
    return x + down


def torch_decode_layer(
    layer: TensorParallelDecoderLayer,
    hidden: torch.Tensor,
    positions: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    context: int,
    rope: tuple[torch.Tensor, torch.Tensor],
    rows: torch.Tensor,
) -> torch.Tensor:
    """One new token per sequence through one layer, torch TP: replicated hidden [B, H], this rank's heads with a
    head-split cache [B, Hkv/W, max_len, D] (every sequence at position ``context``), NCCL all-reduces. ``rope``
    (the rotary tables) and ``rows`` (``arange(B)``) are made once per step, as HF's models do."""
    att, eps = layer.attention, layer.config.rms_eps
    batch = hidden.shape[0]
    q, k, v = att.rotate_qkv(rms_norm(hidden, layer.input_norm_weight, eps) @ att.qkv.weight, rope)
    k_cache[rows, :, positions] = k
    v_cache[rows, :, positions] = v
    group = att.num_heads // att.num_kv_heads
    out = functional.scaled_dot_product_attention(
        q.reshape(batch, att.local_kv_heads, group, att.head_dim),
        k_cache[:, :, : context + 1],
        v_cache[:, :, : context + 1],
    )
    o = out.reshape(batch, -1) @ att.o.weight
    dist.all_reduce(o)
    hidden = hidden + o
    gate, up = (rms_norm(hidden, layer.post_norm_weight, eps) @ layer.mlp.gate_up.weight).chunk(2, dim=1)
    down = (functional.silu(gate) * up) @ layer.mlp.down.weight
    dist.all_reduce(down)
    return hidden + down


# --------------------------------------------------------------------------------------------- one model


def difference(ours: torch.Tensor, base: torch.Tensor) -> float:
    """max |ours - base| / max |base|, max over ranks."""
    value = torch.tensor(
        [float((ours.float() - base.float()).abs().max()) / max(float(base.float().abs().max()), 1e-6)],
        device=ours.device,
    )
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value)


def build_layers(config: DecoderConfig, count: int, gen: torch.Generator) -> list[TensorParallelDecoderLayer]:
    """``count`` layers of ``config`` with random weights from ``gen`` (the same on every rank), on the GPU."""
    layers = []
    for _ in range(count):
        weights = random_weights(config, device="cuda", generator=gen)
        layers.append(TensorParallelDecoderLayer(config, weights))
        del weights
    return layers


def bench_model(config: DecoderConfig, args: argparse.Namespace, rows: list[dict]) -> int:
    """Prefill and decode rows of one model; returns the number of cases where ours and the baseline disagree."""
    gen = torch.Generator(device="cuda").manual_seed(28)
    layers = build_layers(config, args.layers, gen)
    failures = 0
    for tokens in args.prefill:
        row = prefill_case(config, layers, tokens, gen, args)
        failures += row["difference"] > AGREEMENT
        rows.append(row)
        torch.cuda.empty_cache()
        if args.kernels:
            kernels = kernel_rows(config, layers, tokens, gen, args.iters)
            failures += sum(row["difference"] > KERNEL_AGREEMENT for row in kernels)
            rows += kernels
            torch.cuda.empty_cache()
    # The prefill shapes' symmetric workspaces go back to the heap before the next model's.
    ag_gemm_op.clear_workspaces()
    gemm_rs_op.clear_workspaces()
    for batch in args.batches:
        for context in args.contexts:
            row = decode_case(config, layers, batch, context, gen, args)
            failures += row["difference"] > AGREEMENT
            rows.append(row)
            torch.cuda.empty_cache()
            rt.barrier()
    return failures


def prefill_steps(
    config: DecoderConfig, layers: list[TensorParallelDecoderLayer], tokens: int, gen: torch.Generator
) -> tuple[Callable[[], torch.Tensor], Callable[..., torch.Tensor], slice]:
    """``(ours, base, mine)`` of a prefill of ``tokens`` random tokens (from ``gen``) through the stack: ``ours()``
    runs the layers sequence-parallel on this rank's rows ``mine`` and returns them; ``base(fn=torch_prefill_layer)``
    runs ``fn(layer, h)`` of every layer on every row."""
    world = rt.current_world()
    mine = slice(world.rank * tokens // world.world_size, (world.rank + 1) * tokens // world.world_size)
    x = torch.randn(tokens, config.hidden_size, device="cuda", generator=gen).to(torch.bfloat16)

    def ours() -> torch.Tensor:
        h = x[mine]
        for layer in layers:
            h = layer.prefill(h)
        return h

    def base(fn: Callable = torch_prefill_layer) -> torch.Tensor:
        h = x
        for layer in layers:
            h = fn(layer, h)
        return h

    return ours, base, mine


@contextlib.contextmanager
def layer_options(layers: list[TensorParallelDecoderLayer], **options: object) -> Iterator[None]:
    """Within: every layer, its MLP and its attention block with ``options`` (each set on the modules that have an
    attribute of that name: ``fused_silu_mul``, ``prefill_gqa``, ``prefill_fused_rope``, see ``PREFILL_VARIANTS``;
    the decode options of ``DECODE_VARIANTS``); restored after. Raises ValueError naming an option that no layer
    module has."""
    modules = [module for layer in layers for module in (layer, layer.mlp, layer.attention)]
    kept = [(module, name, getattr(module, name)) for module in modules for name in options if hasattr(module, name)]
    missing = [name for name in options if not any(name == kept_name for _, kept_name, _ in kept)]
    if missing:
        raise ValueError(f"layer_options: no layer module has the options {missing}")
    try:
        for module, name, _ in kept:
            setattr(module, name, options[name])
        yield
    finally:
        for module, name, value in kept:
            setattr(module, name, value)


def prefill_case(
    config: DecoderConfig,
    layers: list[TensorParallelDecoderLayer],
    tokens: int,
    gen: torch.Generator,
    args: argparse.Namespace,
) -> dict:
    """One prefill row: ours (sequence-parallel, the layers' default options, and each of
    ``args.prefill_variants``) and the baseline (replicated rows) on the same tokens."""
    ours, base, mine = prefill_steps(config, layers, tokens, gen)
    row: dict = {"phase": "prefill", "model": config.name, "tokens": tokens, "batch": 1, "context": 0}
    want = base()[mine]
    row["difference"] = difference(ours(), want)
    row["ours ms"] = time_ms(ours, warmup=3, reps=args.iters) / args.layers
    for variant in args.prefill_variants:
        with layer_options(layers, **PREFILL_VARIANTS[variant]):
            row[f"difference {variant}"] = difference(ours(), want)
            row[f"ours {variant} ms"] = time_ms(ours, warmup=3, reps=args.iters) / args.layers
        row["difference"] = max(row["difference"], row[f"difference {variant}"])
    del want
    row["torch ms"] = time_ms(base, warmup=3, reps=args.iters) / args.layers
    if args.compile:
        compiled = torch.compile(torch_prefill_layer)
        try:
            row["torch compiled ms"] = time_ms(lambda: base(compiled), warmup=3, reps=args.iters) / args.layers
        except Exception as error:  # noqa: BLE001 (a baseline that cannot run is reported, not fatal)
            rank0_print(f"INFO torch.compile prefill {config.name}: {type(error).__name__}: {error}")
    finish_row(row, config)
    return row


CACHE_SLACK = 64
"""Positions past ``context`` in every decode KV cache: a multiple of W (<= 64 ranks), room for the new token in
either layout."""


def decode_steps(
    config: DecoderConfig, layers: list[TensorParallelDecoderLayer], batch: int, context: int, gen: torch.Generator
) -> tuple[Callable[[str], tuple[torch.Tensor, torch.Tensor]], Callable[..., torch.Tensor]]:
    """``(ours, base)``: one decode step of the stack, one new token for each of ``batch`` sequences with
    ``context`` random tokens (from ``gen``) already cached, the same tokens in both cache layouts.
    ``ours(layout, same_position=False)`` ("sequence" or "heads"; ``same_position``: the steps' ``decode_positions``
    told every position is ``context``) returns the last layer's ``(x, residual)`` (``decode``'s pair);
    ``base(fn=torch_decode_layer)`` runs ``fn`` of every layer over the head-split caches and returns the hidden
    states."""
    world = rt.current_world()
    rank, size = world.rank, world.world_size
    max_len = context + CACHE_SLACK
    caches: dict[str, list[KVCache]] = {
        layout: [layer.new_cache(batch, max_len, layout) for layer in layers] for layout in ("heads", "sequence")
    }
    full = torch.empty(batch, config.num_kv_heads, max_len, config.head_dim, device="cuda", dtype=torch.bfloat16)
    hkv = config.num_kv_heads // size
    for head_cache, seq_cache in zip(caches["heads"], caches["sequence"], strict=True):  # the same tokens in both
        for side in ("k", "v"):
            full.normal_(generator=gen)
            getattr(head_cache, side).copy_(full[:, rank * hkv : (rank + 1) * hkv])
            local = seq_cache.local_len
            getattr(seq_cache, side).copy_(full[:, :, rank * local : (rank + 1) * local])
    del full
    hidden = torch.randn(batch, config.hidden_size, device="cuda", generator=gen).to(torch.bfloat16)
    positions = torch.full((batch,), context, device="cuda", dtype=torch.int32)
    zeros = torch.zeros_like(hidden)

    def ours(layout: str, same_position: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        mine = caches[layout]
        same = context if same_position else None  # every sequence's new token is at position context
        step = layers[0].decode_positions(positions, mine[0], same_position=same)  # once per step, for every layer
        x, residual = zeros, hidden
        for layer, cache in zip(layers, mine, strict=True):
            x, residual = layer.decode(x, residual, step, cache)
        return x, residual

    def base(fn: Callable = torch_decode_layer) -> torch.Tensor:
        rope = layers[0].attention.rope_tables(positions)
        rows = torch.arange(batch, device=hidden.device)
        h = hidden
        for layer, cache in zip(layers, caches["heads"], strict=True):
            h = fn(layer, h, positions, cache.k, cache.v, context, rope, rows)
        return h

    return ours, base


def decode_case(
    config: DecoderConfig,
    layers: list[TensorParallelDecoderLayer],
    batch: int,
    context: int,
    gen: torch.Generator,
    args: argparse.Namespace,
) -> dict:
    """One decode row: a step of ours with either cache layout and of the baseline, from the same cached tokens."""
    row: dict = {"phase": "decode", "model": config.name, "tokens": batch, "batch": batch, "context": context}
    ours_step, base_step = decode_steps(config, layers, batch, context, gen)
    want = base_step()
    for name, layout in (("seq-KV", "sequence"), ("head-KV", "heads")):
        x, residual = ours_step(layout)
        row[f"difference {name}"] = difference(residual + all_reduce(x), want)
    row["difference"] = max(row["difference seq-KV"], row["difference head-KV"])
    impls: dict[str, Callable[[], object]] = {
        "ours ms": lambda: ours_step("sequence"),
        "ours head-KV ms": lambda: ours_step("heads"),
        "torch ms": base_step,
    }
    if args.compile:
        compiled = torch.compile(torch_decode_layer)
        impls["torch compiled ms"] = lambda: base_step(compiled)
    for column, fn in impls.items():
        try:
            row[column] = graphed_us(fn, replays=args.iters) / 1000 / args.layers
        except Exception as error:  # noqa: BLE001 (a variant that cannot run is reported, not fatal)
            row[column] = float("nan")
            rank0_print(f"INFO {column} B={batch} ctx={context}: {type(error).__name__}: {error}")
    for variant in args.decode_variants:
        chosen = DECODE_VARIANTS[variant]
        step = functools.partial(ours_step, chosen.layout, chosen.same_position)
        with layer_options(layers, **chosen.options):
            try:
                x, residual = step()
                row[f"difference {variant}"] = difference(residual + all_reduce(x), want)
                timed = graphed_us(step, replays=args.iters)
                row[f"ours {variant} ms"] = timed / 1000 / args.layers
            except Exception as error:  # noqa: BLE001 (a variant that cannot run is reported, not fatal)
                row[f"ours {variant} ms"] = float("nan")
                rank0_print(f"INFO ours {variant} B={batch} ctx={context}: {type(error).__name__}: {error}")
        row["difference"] = max(row["difference"], row.get(f"difference {variant}", 0.0))
    finish_row(row, config)
    return row


def kernel_rows(
    config: DecoderConfig, layers: list[TensorParallelDecoderLayer], tokens: int, gen: torch.Generator, iters: int
) -> list[dict]:
    """Prefill's fused elementwise kernels alone (``--kernels``) against the torch ops they replace, at this rank's
    shapes of a prefill of ``tokens`` tokens (one sequence), on random inputs from ``gen``: ``silu_mul`` against
    ``silu(gate) * up`` on the halves of the gate/up output [tokens, 2 * I/W], ``rope_rows`` against
    ``rotate_qkv`` (QK norm too where the model has it) on the QKV output [tokens, (Hq/W + 2 * Hkv/W) * D].
    µs: median of ``iters`` after a device barrier, max over ranks; GB/s: the traffic a kernel cannot avoid (each
    input read once, each output written once, the rotary tables left out) / ours' or torch's time; difference:
    max |ours - torch| / max |torch|."""
    world = rt.current_world().world_size
    att, mlp = layers[0].attention, layers[0].mlp
    inter = mlp.intermediate_size // world
    hq, hkv, d = att.local_heads, att.local_kv_heads, att.head_dim
    device = att.qkv.weight.device
    gate_up = torch.randn(tokens, 2 * inter, device=device, generator=gen).to(torch.bfloat16)
    gate, up = gate_up.chunk(2, dim=1)
    qkv = torch.randn(tokens, (hq + 2 * hkv) * d, device=device, generator=gen).to(torch.bfloat16)
    rope = att.prefill_rope(tokens, qkv.device)

    def torch_rope() -> torch.Tensor:
        q, k, _ = att.rotate_qkv(qkv.view(1, tokens, -1), rope)
        return torch.cat([q, k], dim=2).view(tokens, hq + hkv, d)  # the check's layout (the cat is not timed)

    cases: dict[str, tuple[Callable[[], torch.Tensor], Callable[[], object], Callable[[], torch.Tensor], int]] = {
        "silu_mul": (
            lambda: silu_mul(gate_up),
            lambda: functional.silu(gate) * up,
            lambda: functional.silu(gate) * up,
            3 * tokens * inter * 2,
        ),
        "rope_rows": (
            lambda: rope_rows(qkv, *rope, tokens, (hq, hkv), att._qk_norm_args()),
            lambda: att.rotate_qkv(qkv.view(1, tokens, -1), rope),
            torch_rope,
            2 * tokens * (hq + hkv) * d * 2,
        ),
    }
    rows = []
    for name, (ours, base, want, traffic) in cases.items():
        row: dict = {"phase": "kernel", "model": config.name, "tokens": tokens, "kernel": name}
        row["difference"] = difference(ours(), want())
        row["ours us"] = time_ms(ours, warmup=3, reps=iters) * 1000
        row["torch us"] = time_ms(base, warmup=3, reps=iters) * 1000
        row["ours GB/s"] = traffic / row["ours us"] / 1e3
        row["torch GB/s"] = traffic / row["torch us"] / 1e3
        row["speedup"] = row["torch us"] / row["ours us"]
        flag = "" if row["difference"] <= KERNEL_AGREEMENT else f" (DIFFERS from torch by {row['difference']:.3g})"
        rank0_print(
            f"RESULT kernel {config.name} prefill {tokens} {name}: ours {row['ours us']:.1f} us "
            f"({row['ours GB/s']:.0f} GB/s), torch {row['torch us']:.1f} us ({row['torch GB/s']:.0f} GB/s) -> "
            f"{row['speedup']:.2f}x{flag}"
        )
        rows.append(row)
    return rows


def finish_row(row: dict, config: DecoderConfig) -> None:
    """Speedup, tokens/s through the model's depth, and the RESULT line."""
    nan = float("nan")
    times = [row[column] for column in ("torch ms", "torch compiled ms") if row.get(column, nan) == row.get(column)]
    row["best torch ms"] = baseline = min(times, default=nan)
    row["speedup"] = baseline / row["ours ms"]
    if "ours head-KV ms" in row:
        row["speedup head-KV"] = baseline / row["ours head-KV ms"]
    variants = [name for name in (*PREFILL_VARIANTS, *DECODE_VARIANTS) if f"ours {name} ms" in row]
    for name in variants:
        row[f"speedup {name}"] = baseline / row[f"ours {name} ms"]
    for column in ("ours ms", "best torch ms"):
        row[column.replace("ms", "tok/s")] = row["tokens"] / (row[column] * config.num_layers / 1000)
    what = case_name(row)
    extra = f", ours head-KV {row['ours head-KV ms']:.3f}" if "ours head-KV ms" in row else ""
    extra += f" ({row['speedup head-KV']:.2f}x)" if "speedup head-KV" in row else ""
    extra += "".join(f", ours {name} {row[f'ours {name} ms']:.3f} ({row[f'speedup {name}']:.2f}x)" for name in variants)
    flag = "" if row["difference"] <= AGREEMENT else f" (DIFFERS from torch by {row['difference']:.3g})"
    rank0_print(
        f"RESULT {row['phase']} {row['model']} {what}: ours {row['ours ms']:.3f} ms/layer{extra}, torch "
        f"{baseline:.3f} -> {row['speedup']:.2f}x{flag}"
    )


# --------------------------------------------------------------------------------------------- results


def case_name(row: dict) -> str:
    """``prefill 4096`` or ``B8 32k``."""
    if row["phase"] == "prefill":
        return f"prefill {row['tokens']}"
    return f"B{row['batch']} {row['context'] >> 10}k"


def gpu_tag(world_size: int) -> str:
    """``2xH100``, ``2xH200``, ... (the GPU's model from its name)."""
    name = torch.cuda.get_device_name()
    model = next((word for word in name.replace("-", " ").split() if word[:1] in "HABL" and word[1:2].isdigit()), "")
    return f"{world_size}x{model or 'GPU'}"


def write_results(out_dir: Path, rows: list[dict], args: argparse.Namespace, started: float) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    size = rt.current_world().world_size
    stem = out_dir / f"decoder_{gpu_tag(size)}"

    def fmt(value: object, digits: int = 3) -> str:
        return f"{value:.{digits}f}" if isinstance(value, float) and value == value else str(value)

    prefill = [r for r in rows if r["phase"] == "prefill"]
    decode = [r for r in rows if r["phase"] == "decode"]
    kernels = [r for r in rows if r["phase"] == "kernel"]
    compiled = any("torch compiled ms" in r for r in rows)
    lines = [
        f"# Decoder-layer stacks, {size} x {torch.cuda.get_device_name()}, bf16, {args.layers} layers each",
        "",
        *describe_machine(started),
        "- Configs: "
        + "; ".join(
            f"{c.name} (H {c.hidden_size}, heads {c.num_heads}/{c.num_kv_heads}, D {c.head_dim}, I "
            f"{c.intermediate_size}, {c.num_layers} layers{', QK norm' if c.qk_norm else ''})"
            for c in (CONFIGS[name] for name in args.models)
        ),
        "- ms per layer: the stack's time / layers, max over ranks. Prefill eager (median of >= 20 after a device",
        "  barrier); decode CUDA-graphed (10 steps per graph, median of >= 20 replays). tok/s: tokens per step /",
        "  (ms per layer x the model's depth): the decoder layers of the whole model, no embedding or LM head.",
        "- ours: triton_dist.layers (prefill sequence-parallel through ag_gemm / gemm_rs, SiLU(gate) * up one",
        "  Triton kernel, QK norm and RoPE another, SDPA with enable_gqa on the KV heads as they are; decode with",
        "  all_reduce_residual_rmsnorm at both all-reduces (after O as gemm_ar's norm epilogue), flash_decode over a",
        "  sequence-split KV cache; head-KV: SDPA with a length mask over a head-split cache). torch: Megatron-style",
        "  TP, NCCL all_reduce, cuBLAS, SDPA (prefill: on copies of the KV heads), torch RMSNorm"
        + (", and torch.compile of its layer (best of the two is the baseline)." if compiled else "."),
        f"- Bar (issue 28): decode >= {BAR['decode']}x and prefill >= {BAR['prefill']}x on every model shape.",
        f"- difference: max |ours - torch| / max |torch| of the stack's output (a case above {AGREEMENT} fails).",
        "",
        "## Prefill",
        "",
    ]
    variants = [name for name in PREFILL_VARIANTS if any(f"ours {name} ms" in r for r in prefill)]
    head = ["model", "tokens", "ours ms/layer"] + [f"ours {name} ms/layer" for name in variants] + ["torch ms/layer"]
    head += (["torch compiled ms/layer"] if compiled else []) + ["ours tok/s", "torch tok/s", "speedup"]
    head += [f"speedup {name}" for name in variants] + ["difference"]
    lines.append(
        markdown_table(
            head,
            [
                [r["model"], r["tokens"], fmt(r["ours ms"])]
                + [fmt(r.get(f"ours {name} ms", float("nan"))) for name in variants]
                + [fmt(r["torch ms"])]
                + ([fmt(r.get("torch compiled ms", float("nan")))] if compiled else [])
                + [f"{r['ours tok/s']:.0f}", f"{r['best torch tok/s']:.0f}", f"{r['speedup']:.2f}x"]
                + [f"{r.get(f'speedup {name}', float('nan')):.2f}x" for name in variants]
                + [fmt(r["difference"], 4)]
                for r in prefill
            ],
        )
    )
    if variants:
        lines += [
            "",
            "Prefill variants of ours (the layers' options; difference: the largest of every variant's): "
            + "; ".join(f"{name}: {PREFILL_VARIANTS[name]}" for name in variants)
            + ". ours: "
            + ", ".join(f"{name}={value}" for name, value in OURS_OPTIONS.items())
            + " (the layers' defaults).",
        ]
    lines += ["", "## Decode", ""]
    decode_variants = [name for name in DECODE_VARIANTS if any(f"ours {name} ms" in r for r in decode)]
    head = ["model", "batch", "context", "ours ms/layer", "ours head-KV ms/layer"]
    head += [f"ours {name} ms/layer" for name in decode_variants] + ["torch ms/layer"]
    head += (["torch compiled ms/layer"] if compiled else []) + ["ours tok/s", "torch tok/s", "speedup"]
    head += ["speedup head-KV"] + [f"speedup {name}" for name in decode_variants] + ["difference"]
    lines.append(
        markdown_table(
            head,
            [
                [r["model"], r["batch"], r["context"], fmt(r["ours ms"]), fmt(r["ours head-KV ms"])]
                + [fmt(r.get(f"ours {name} ms", float("nan"))) for name in decode_variants]
                + [fmt(r["torch ms"])]
                + ([fmt(r.get("torch compiled ms", float("nan")))] if compiled else [])
                + [f"{r['ours tok/s']:.0f}", f"{r['best torch tok/s']:.0f}", f"{r['speedup']:.2f}x"]
                + [f"{r['speedup head-KV']:.2f}x"]
                + [f"{r.get(f'speedup {name}', float('nan')):.2f}x" for name in decode_variants]
                + [fmt(r["difference"], 4)]
                for r in decode
            ],
        )
    )
    if decode_variants:
        lines += [
            "",
            "Decode variants of ours (the layers' decode options, off by default; difference: the largest of every "
            "variant's): "
            + "; ".join(
                f"{name}: {DECODE_VARIANTS[name].layout}-split KV, {DECODE_VARIANTS[name].options}"
                + (", same_position" if DECODE_VARIANTS[name].same_position else "")
                for name in decode_variants
            )
            + ".",
        ]
    if kernels:
        lines += [
            "",
            "## Prefill kernels",
            "",
            "Ours' fused elementwise kernels alone against the torch ops they replace, at one rank's shapes "
            "(bench/decoder.py --kernels): silu_mul on the gate/up output [tokens, 2 I/W], rope_rows (QK norm and "
            "RoPE of q and k) on the QKV output. GB/s: the traffic they cannot avoid (inputs read once, output "
            "written once) / time.",
            "",
            markdown_table(
                [
                    "model",
                    "tokens",
                    "kernel",
                    "ours µs",
                    "torch µs",
                    "ours GB/s",
                    "torch GB/s",
                    "speedup",
                    "difference",
                ],
                [
                    [r["model"], r["tokens"], r["kernel"], f"{r['ours us']:.1f}", f"{r['torch us']:.1f}"]
                    + [
                        f"{r['ours GB/s']:.0f}",
                        f"{r['torch GB/s']:.0f}",
                        f"{r['speedup']:.2f}x",
                        fmt(r["difference"], 4),
                    ]
                    for r in kernels
                ],
            ),
        ]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    charted = prefill + decode
    labels = [f"{r['model']}\n{case_name(r)}" for r in charted]
    series = {"ours (seq-KV decode)": [r["speedup"] for r in charted]}
    series["ours head-KV decode"] = [r.get("speedup head-KV", float("nan")) for r in charted]
    try:
        bar_chart(
            stem.with_suffix(".png"),
            f"Decoder layers vs torch TP, {size} x {torch.cuda.get_device_name()} ({run_date(started)})",
            labels,
            series,
            "speedup over torch TP (x)",
            line=1.0,
        )
    except ImportError as error:
        print(f"INFO no PNG: {error}")
    write_json(stem.with_suffix(".json"), rows, started)
    print(f"wrote {stem}.md, .png, .json")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(CONFIGS), help="comma-separated: " + ", ".join(CONFIGS))
    parser.add_argument("--layers", type=int, default=2, help="decoder layers per stack")
    parser.add_argument("--prefill", default=",".join(map(str, PREFILL)), help="prefill token counts")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)), help="decode batch sizes")
    parser.add_argument("--contexts", default=",".join(map(str, CONTEXTS)), help="decode context lengths")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per measurement (median; >= 20)")
    parser.add_argument("--compile", action="store_true", help="also time the baseline under torch.compile")
    parser.add_argument(
        "--kernels",
        action="store_true",
        help="also time prefill's fused kernels (silu_mul, rope_rows) alone against torch's ops, at each prefill size",
    )
    parser.add_argument(
        "--prefill-variants",
        default="",
        help="comma-separated: also time ours' prefill with some of the layers' default options off ("
        + ", ".join(PREFILL_VARIANTS)
        + ")",
    )
    parser.add_argument(
        "--decode-variants",
        default="",
        help="comma-separated, or all: also time ours' decode with some of the layers' decode options on ("
        + ", ".join(DECODE_VARIANTS)
        + ")",
    )
    parser.add_argument("--out-dir", default=str(RESULTS))
    args = parser.parse_args()
    args.models = [name for name in args.models.split(",") if name]
    unknown = [name for name in args.models if name not in CONFIGS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {list(CONFIGS)}")
    for name in ("prefill", "batches", "contexts"):
        setattr(args, name, [int(text) for text in getattr(args, name).split(",") if text])
    args.prefill_variants = [name for name in args.prefill_variants.split(",") if name]
    unknown = [name for name in args.prefill_variants if name not in PREFILL_VARIANTS]
    if unknown:
        parser.error(f"unknown prefill variants {unknown}; known: {list(PREFILL_VARIANTS)}")
    names = [name for name in args.decode_variants.split(",") if name]
    args.decode_variants = list(DECODE_VARIANTS) if names == ["all"] else names
    unknown = [name for name in args.decode_variants if name not in DECODE_VARIANTS]
    if unknown:
        parser.error(f"unknown decode variants {unknown}; known: {list(DECODE_VARIANTS)} (or all)")
    world = setup_distributed(heap_size="8G")
    started = time.time()
    rows: list[dict] = []
    failures = 0
    for name in args.models:
        began = time.time()
        failures += bench_model(CONFIGS[name], args, rows)
        rank0_print(f"INFO {name}: {time.time() - began:.0f} s")
        if world.rank == 0:  # the results so far, in case a time limit stops the run before the end
            write_results(Path(args.out_dir), rows, args, started)
    for phase, bar in BAR.items():
        speedups = [row["speedup"] for row in rows if row["phase"] == phase]
        if speedups:
            met = "met" if min(speedups) >= bar else "NOT met"
            rank0_print(
                f"RESULT {phase} speedup min {min(speedups):.2f}x, max {max(speedups):.2f}x (bar {bar}x: {met})"
            )
    if failures:
        rank0_print(f"FAIL {failures} cases where ours and torch differ by more than {AGREEMENT} (see DIFFERS)")
    del world
    write_on_rank0_and_finish(lambda: write_results(Path(args.out_dir), rows, args, started))
    return 1 if failures else 0


if __name__ == "__main__":
    main_guard(main)
