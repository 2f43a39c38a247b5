"""Distributed flash-decode: triton_dist.ops.flash_decode vs single-GPU attention on the whole cache and vs per-rank
attention + NCCL all-gather of the partials + a torch combine, one run.

    torchrun --nproc-per-node=2 bench/flash_decode.py [--out-dir bench/results]

GQA 64 query / 8 KV heads, head dim 128, bf16, one query token per sequence; batch 1 and 8; total context 32k,
128k, 256k (split evenly over the W ranks, all positions valid). Per case, graphed (10 calls per CUDA graph, median
of >= 20 replays) and eager (events around one call after a barrier, median of >= 20), max over ranks:

- ``flash_decode``: this rank's shard, combined in the kernel;
- ``single GPU``: the fastest of ``F.scaled_dot_product_attention(q, K, V, enable_gqa=True)`` and the same with the
  query group laid out as G query positions of each KV head (one pass over K/V per KV head), on the whole cache on
  one GPU (every rank runs it on its own GPU; max over ranks);
- ``SDPA + NCCL``: per rank, ``_scaled_dot_product_efficient_attention`` on the shard (query group as positions,
  with log-sum-exp), ``all_gather_into_tensor`` of outputs and log-sum-exps, then the log-sum-exp combine in torch.

Writes ``flash_decode.md``, ``flash_decode.png``, ``flash_decode.json`` to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    GRAPHED_AND_EAGER,
    add_decode_arguments,
    describe_machine,
    panel_chart,
    run_date,
    time_graphed_and_eager,
    write_json,
    write_on_rank0_and_finish,
)

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import flash_decode  # noqa: E402
from triton_dist.ops.all_reduce import graphed_us  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402

Q_HEADS, KV_HEADS, DIM = 64, 8, 128
GROUP = Q_HEADS // KV_HEADS
BATCHES = [1, 8]
CONTEXTS = [32 << 10, 128 << 10, 256 << 10]


def sdpa_grouped(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention with each KV head's query group as G query positions: [B, Hkv, G, D] over [B, Hkv, S, D]."""
    batch = q.shape[0]
    return F.scaled_dot_product_attention(q.view(batch, KV_HEADS, GROUP, DIM), k, v).view(batch, Q_HEADS, DIM)


def sdpa_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q[:, :, None, :], k, v, enable_gqa=True)[:, :, 0, :]


def sdpa_then_nccl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, world_size: int) -> torch.Tensor:
    batch = q.shape[0]
    out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(
        q.view(batch, KV_HEADS, GROUP, DIM), k, v, None, True
    )[:2]
    lse = lse[..., :GROUP].contiguous()  # [B, Hkv, G] (the kernel pads the positions)
    outs = torch.empty((world_size, *out.shape), dtype=out.dtype, device=out.device)
    lses = torch.empty((world_size, *lse.shape), dtype=lse.dtype, device=lse.device)
    dist.all_gather_into_tensor(outs, out.contiguous())
    dist.all_gather_into_tensor(lses, lse)
    weights = torch.softmax(lses, dim=0)  # e^{lse_r - logsumexp_r lse_r}
    combined = (weights[..., None] * outs.float()).sum(0)
    return combined.to(q.dtype).view(batch, Q_HEADS, DIM)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_decode_arguments(parser)
    args = parser.parse_args()
    world = setup_distributed(heap_size="1G")
    world_size = world.world_size
    dtype = torch.bfloat16
    started = time.time()
    rows = []
    for batch in BATCHES:
        for total in CONTEXTS:
            local = total // world_size
            gen = torch.Generator(device="cuda").manual_seed(batch * 7 + total)
            q = torch.randn(batch, Q_HEADS, DIM, device="cuda", generator=gen).to(dtype)  # same on every rank
            k = torch.randn(batch, KV_HEADS, local, DIM, device="cuda").to(dtype)
            v = torch.randn(batch, KV_HEADS, local, DIM, device="cuda").to(dtype)
            lengths = torch.full((batch,), local, dtype=torch.int32, device="cuda")
            row: dict = {"batch": batch, "context": total}
            impls: dict[str, Callable[[], object]] = {
                "flash_decode": lambda q=q, k=k, v=v, n=lengths: flash_decode(q, k, v, n),
                "SDPA + NCCL": lambda q=q, k=k, v=v: sdpa_then_nccl(q, k, v, world_size),
            }
            time_graphed_and_eager(row, impls, args.iters, f"B={batch} ctx={total}")
            del k, v
            full_k = torch.randn(batch, KV_HEADS, total, DIM, device="cuda").to(dtype)
            full_v = torch.randn(batch, KV_HEADS, total, DIM, device="cuda").to(dtype)
            best = float("inf")
            for name, fn in (("sdpa gqa", sdpa_gqa), ("sdpa grouped", sdpa_grouped)):
                try:
                    us = graphed_us(lambda fn=fn, q=q, k=full_k, v=full_v: fn(q, k, v), replays=args.iters)
                    row[f"single GPU ({name}) graphed"] = us
                    best = min(best, us)
                except Exception as error:  # noqa: BLE001
                    rank0_print(f"INFO single GPU {name} B={batch} ctx={total}: {type(error).__name__}: {error}")
            row["single GPU graphed"] = best
            del full_k, full_v
            ours = row.get("flash_decode graphed", float("nan"))
            row["speedup vs single GPU"] = best / ours
            row["speedup vs SDPA + NCCL"] = row.get("SDPA + NCCL graphed", float("nan")) / ours
            rows.append(row)
            rank0_print(
                f"RESULT B={batch} ctx={total >> 10}k: flash_decode {ours:.1f} us, single GPU {best:.1f}, "
                f"SDPA+NCCL {row.get('SDPA + NCCL graphed', float('nan')):.1f} -> {row['speedup vs single GPU']:.2f}x, "
                f"{row['speedup vs SDPA + NCCL']:.2f}x"
            )
            torch.cuda.empty_cache()
            rt.barrier()
    return write_on_rank0_and_finish(lambda: write_results(Path(args.out_dir), rows, world_size, started))


def write_results(out_dir: Path, rows: list[dict], world_size: int, started: float) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name()
    nan = float("nan")
    lines = [
        f"# flash_decode, {world_size} x {gpu}, bf16, GQA {Q_HEADS}/{KV_HEADS} heads, head dim {DIM}",
        "",
        *describe_machine(started),
        *GRAPHED_AND_EAGER,
        "- Context = total tokens, split evenly over the ranks.",
        "",
        "| batch | context | flash_decode graphed | single GPU graphed | SDPA + NCCL graphed | vs single GPU "
        "| vs SDPA + NCCL | flash_decode eager | SDPA + NCCL eager |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['context'] >> 10}k | {r.get('flash_decode graphed', nan):.1f} | "
            f"{r['single GPU graphed']:.1f} | {r.get('SDPA + NCCL graphed', nan):.1f} | "
            f"{r['speedup vs single GPU']:.2f} | {r['speedup vs SDPA + NCCL']:.2f} | "
            f"{r.get('flash_decode eager', nan):.1f} | {r.get('SDPA + NCCL eager', nan):.1f} |"
        )
    (out_dir / "flash_decode.md").write_text("\n".join(lines) + "\n")
    write_json(out_dir / "flash_decode.json", rows, started)
    keys = ("flash_decode graphed", "single GPU graphed", "SDPA + NCCL graphed")
    panels = []
    for batch in BATCHES:
        sel = [r for r in rows if r["batch"] == batch]
        series = {k.replace(" graphed", ""): [r.get(k, nan) for r in sel] for k in keys}
        panels.append((f"batch {batch}", [r["context"] for r in sel], series))
    panel_chart(
        out_dir / "flash_decode.png",
        panels,
        title=f"flash_decode, {world_size} x {gpu} ({run_date(started)})",
        xlabel="total context (tokens)",
        ylabel="µs per decode step (graphed)",
        logy=True,
    )


if __name__ == "__main__":
    main_guard(main)
