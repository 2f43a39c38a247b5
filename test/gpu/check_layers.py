"""The tensor-parallel decoder layer on GPUs against a one-GPU fp32 torch reference of the same full weights:
prefill (sequence-parallel) into a head-split and a sequence-split KV cache, decode steps eager and under CUDA-graph
replay, the attention block's ``gemm_ar`` decode, and decode outputs bit-identical on every rank.

    torchrun --nproc-per-node=N test/gpu/check_layers.py

N must divide the KV heads (4). Every rank draws the same weights and tokens from one seed and computes the reference
on its own GPU (the whole layer, unsplit, fp32). Exit code 0 iff every check passed on every rank.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from test_layers_decoder import reference  # noqa: E402  (the fp32 one-process reference of the CPU test)

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.layers import DecoderConfig, TensorParallelDecoderLayer, random_weights  # noqa: E402
from triton_dist.layers.attention import rms_norm  # noqa: E402
from triton_dist.testing import Checks, finish, main_guard, setup_distributed  # noqa: E402

CONFIGS = [
    DecoderConfig("gpu-llama-like", 1024, 8, 4, 128, 2816, 500000.0, 1e-5),
    DecoderConfig("gpu-qwen3-like", 1536, 16, 4, 128, 4096, 1000000.0, 1e-6, qk_norm=True),
]
"""Small layers of both kinds (without and with QK norm), GQA, head dim 128 (flash_decode's)."""
BATCH, PROMPT, MAX_LEN = 2, 384, 512
"""2 sequences of 384 prompt tokens, then 3 decoded tokens each; caches of 512 positions (split by sequence at 2
ranks: 256 each, so decode reaches rank 1's block and the prompt spans both)."""
ATOL = RTOL = 5e-2
"""bf16 weights and activations through a layer against the fp32 reference."""


def _close(got: torch.Tensor, want: torch.Tensor) -> tuple[bool, str]:
    if got.shape != want.shape:
        return False, f"shape {list(got.shape)} != {list(want.shape)}"
    diff = (got.float() - want).abs()
    bad = int((diff > ATOL + RTOL * want.abs()).sum()) + int(torch.isnan(got).sum())
    return bad == 0, f"max |diff| {float(diff.max()):.3g}, {bad} elements out of tolerance"


def _same_on_all_ranks(tensor: torch.Tensor) -> bool:
    digest = hashlib.sha256(tensor.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()
    everyone: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, digest)
    return len(set(everyone)) == 1


def check_config(checks: Checks, world: rt.World, config: DecoderConfig) -> None:
    """Prefill, the attention block's decode, and 3 decode steps (the last one graphed) of both cache layouts."""
    rank, size = world.rank, world.world_size
    gen = torch.Generator(device="cuda").manual_seed(28)
    weights = random_weights(config, device="cuda", generator=gen)
    tokens = torch.randn(BATCH, PROMPT + 3, config.hidden_size, generator=gen, device="cuda").to(torch.bfloat16)
    attn_ref, want = reference(config, weights, tokens)
    layer = TensorParallelDecoderLayer(config, weights)
    rows = BATCH * PROMPT // size
    mine = slice(rank * rows, (rank + 1) * rows)
    prompt = tokens[:, :PROMPT].reshape(BATCH * PROMPT, -1)
    for layout in ("heads", "sequence"):
        name = f"{config.name} {layout}"
        cache = layer.new_cache(BATCH, MAX_LEN, layout)
        got = layer.prefill(prompt[mine], batch=BATCH, cache=cache)
        checks.check(f"{name} prefill", *_close(got, want[:, :PROMPT].reshape(BATCH * PROMPT, -1)[mine]))
        positions = torch.full((BATCH,), PROMPT, device="cuda")
        normed = rms_norm(tokens[:, PROMPT], layer.input_norm_weight, config.rms_eps)
        attn = layer.attention.decode(normed, positions, cache.clone())
        checks.check(f"{name} attention decode (gemm_ar)", *_close(attn, attn_ref[:, PROMPT]))
        for step in (PROMPT, PROMPT + 1):
            positions = torch.full((BATCH,), step, device="cuda", dtype=torch.int32)
            got = layer.decode_hidden(tokens[:, step], positions, cache)
            ok, detail = _close(got, want[:, step])
            checks.check(f"{name} decode @{step}", ok and _same_on_all_ranks(got), detail)
        # The third token through a CUDA graph captured from the same call (warmed up on a copy of the cache).
        step = PROMPT + 2
        positions = torch.full((BATCH,), step, device="cuda", dtype=torch.int32)
        hidden = tokens[:, step].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            layer.decode_hidden(hidden, positions, cache.clone())
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            out = layer.decode_hidden(hidden, positions, cache)
        out.fill_(float("nan"))  # poison: the replay must write every element
        graph.replay()
        rt.synchronize()
        ok, detail = _close(out, want[:, step])
        checks.check(f"{name} decode @{step} CUDA graph", ok and _same_on_all_ranks(out), detail)


def main() -> int:
    world = setup_distributed(heap_size="2G")
    checks = Checks()
    for config in CONFIGS:
        checks.run(config.name, lambda config=config: check_config(checks, world, config))
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
