"""Distributed flash-decode: triton_dist.ops.flash_decode vs single-GPU attention on the whole cache and vs per-rank
attention + NCCL all-gather of the partials + a torch combine, one run.

    torchrun --nproc-per-node=2 bench/flash_decode.py [--out-dir bench/results]

GQA 64 query / 8 KV heads, head dim 128, bf16, one query token per sequence; batch 1 and 8; total context 32k,
128k, 256k (split evenly over the W ranks, all positions valid). Per case, graphed (10 calls per CUDA graph, median
of >= 20 replays) and eager (events around one call after a barrier, median of >= 20), max over ranks:

- ``flash_decode``: this rank's shard, combined in the kernel;
- ``single GPU``: the fastest of ``F.scaled_dot_product_attention(q, K, V, enable_gqa=True)`` and the same with the
  query group laid out as G query positions of each KV head (one pass over K/V per KV head), on the whole cache on
  one GPU (every rank runs it on its own GPU; max over ranks). Which SDPA backend runs is PyTorch's choice (for
  bf16 on H100 normally FlashAttention-2, which splits the keys for a single query);
- ``SDPA + NCCL``: per rank, ``_scaled_dot_product_efficient_attention`` on the shard (query group as positions,
  with log-sum-exp), ``all_gather_into_tensor`` of outputs and log-sum-exps, then the log-sum-exp combine in torch.

Before timing a case, flash_decode's output is compared with SDPA + NCCL's on the same shards (2% of each element
plus 1% of the largest); a case that fails is marked in the table and the run exits 1 after writing the results.
The table gives the split count flash_decode chose; ``--sweep-splits 4,8,16,32`` also times flash_decode with each
of those split counts (graphed; columns ``splits=N``), the data for its split heuristic, and ``--sweep-combiners
1,2,4,8`` with each combiner count (columns ``combiners=N``); the rest of each forced config is the default's.

Writes ``flash_decode.md``, ``flash_decode.png``, ``flash_decode.json`` to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    GRAPHED_AND_EAGER,
    add_decode_arguments,
    describe_machine,
    markdown_table,
    panel_chart,
    run_date,
    time_graphed_and_eager,
    write_json,
    write_on_rank0_and_finish,
)

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import flash_decode  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402
from triton_dist.testing.timing import graphed_us  # noqa: E402

fd = importlib.import_module("triton_dist.ops.flash_decode.config")
fd_op = importlib.import_module("triton_dist.ops.flash_decode.op")

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


def agreement(ours: torch.Tensor, theirs: torch.Tensor) -> tuple[bool, float]:
    """Whether two attention outputs agree (2% of each element plus 1% of the largest, as the GPU check), and the
    largest difference, max over ranks."""
    diff = (ours.float() - theirs.float()).abs()
    bound = 2e-2 * theirs.float().abs() + 1e-2 * float(theirs.float().abs().max()) + 1e-6
    bad = torch.tensor([float((diff > bound).sum() + torch.isnan(ours).sum()), float(diff.max())], device="cuda")
    dist.all_reduce(bad, op=dist.ReduceOp.MAX)
    return bad[0].item() == 0, bad[1].item()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_decode_arguments(parser)
    parser.add_argument("--sweep-splits", default="", help="comma-separated split counts to time besides the chosen")
    parser.add_argument(
        "--sweep-combiners", default="", help="comma-separated combiner counts (1, 2, 4, 8) to time besides the default"
    )
    args = parser.parse_args()
    sweep = [int(text) for text in args.sweep_splits.split(",") if text]
    combiner_sweep = [int(text) for text in args.sweep_combiners.split(",") if text]
    world = setup_distributed(heap_size="1G")
    world_size = world.world_size
    dtype = torch.bfloat16
    started = time.time()
    rows = []
    failures = 0
    nan = float("nan")
    for batch in BATCHES:
        for total in CONTEXTS:
            local = total // world_size
            gen = torch.Generator(device="cuda").manual_seed(batch * 7 + total)
            q = torch.randn(batch, Q_HEADS, DIM, device="cuda", generator=gen).to(dtype)  # same on every rank
            k = torch.randn(batch, KV_HEADS, local, DIM, device="cuda").to(dtype)
            v = torch.randn(batch, KV_HEADS, local, DIM, device="cuda").to(dtype)
            lengths = torch.full((batch,), local, dtype=torch.int32, device="cuda")
            row: dict = {"batch": batch, "context": total}
            ok, worst = agreement(flash_decode(q, k, v, lengths), sdpa_then_nccl(q, k, v, world_size))
            row["matches SDPA + NCCL"], row["max |diff| vs SDPA + NCCL"] = ok, worst
            failures += not ok
            if not ok:
                rank0_print(f"FAIL B={batch} ctx={total}: flash_decode differs from SDPA + NCCL by up to {worst:.3g}")
            impls: dict[str, Callable[[], object]] = {
                "flash_decode": lambda q=q, k=k, v=v, n=lengths: flash_decode(q, k, v, n),
                "SDPA + NCCL": lambda q=q, k=k, v=v: sdpa_then_nccl(q, k, v, world_size),
            }
            time_graphed_and_eager(row, impls, args.iters, f"B={batch} ctx={total}")
            sms = torch.cuda.get_device_properties().multi_processor_count
            row["splits"] = fd.choose_splits(
                batch, KV_HEADS, GROUP, local, world_size, sms, fd.default_config("cuda").block_n
            )
            # Forced split or combiner counts, each with the rest of the default config (its key block).
            default = fd.default_config("cuda")
            variants = [(f"splits={n}", replace(default, splits=n)) for n in sweep]
            variants += [(f"combiners={n}", replace(default, combiners=n)) for n in combiner_sweep]
            for name, config in variants:
                out = torch.empty_like(q)
                try:
                    row[f"{name} graphed"] = graphed_us(
                        lambda q=q, k=k, v=v, n=lengths, out=out, c=config: fd_op._run(q, k, v, n, out, None, c),
                        replays=args.iters,
                    )
                except Exception as error:  # noqa: BLE001 (a split count the workspace refuses is reported)
                    rank0_print(f"INFO {name} B={batch} ctx={total}: {type(error).__name__}: {error}")
            del k, v
            full_k = torch.randn(batch, KV_HEADS, total, DIM, device="cuda").to(dtype)
            full_v = torch.randn(batch, KV_HEADS, total, DIM, device="cuda").to(dtype)
            singles = {
                f"single GPU ({name})": lambda fn=fn, q=q, k=full_k, v=full_v: fn(q, k, v)
                for name, fn in (("sdpa gqa", sdpa_gqa), ("sdpa grouped", sdpa_grouped))
            }
            time_graphed_and_eager(row, singles, args.iters, f"B={batch} ctx={total}")
            for mode in ("graphed", "eager"):  # the faster layout of those that ran
                ran = [row[f"{name} {mode}"] for name in singles if f"{name} {mode}" in row]
                row[f"single GPU {mode}"] = min(ran, default=nan)
            del full_k, full_v, singles, impls
            ours = row.get("flash_decode graphed", nan)
            row["speedup vs single GPU"] = row["single GPU graphed"] / ours
            row["speedup vs SDPA + NCCL"] = row.get("SDPA + NCCL graphed", nan) / ours
            rows.append(row)
            rank0_print(
                f"RESULT B={batch} ctx={total >> 10}k: flash_decode {ours:.1f} us, single GPU "
                f"{row['single GPU graphed']:.1f}, SDPA+NCCL {row.get('SDPA + NCCL graphed', nan):.1f} -> "
                f"{row['speedup vs single GPU']:.2f}x, {row['speedup vs SDPA + NCCL']:.2f}x"
                f"{'' if ok else ' (WRONG RESULT: see FAIL above)'}"
            )
            torch.cuda.empty_cache()
            rt.barrier()
    write_on_rank0_and_finish(lambda: write_results(Path(args.out_dir), rows, world_size, started))
    return 1 if failures else 0


def write_results(out_dir: Path, rows: list[dict], world_size: int, started: float) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name()
    nan = float("nan")
    lines = [
        f"# flash_decode, {world_size} x {gpu}, bf16, GQA {Q_HEADS}/{KV_HEADS} heads, head dim {DIM}",
        "",
        *describe_machine(started),
        *GRAPHED_AND_EAGER,
        "- Context = total tokens, split evenly over the ranks. Single GPU: the whole cache on one GPU.",
        "- Result: flash_decode's output against SDPA + NCCL's on the same shards (largest difference).",
        "- Splits: the split count flash_decode chose per (sequence, KV head) and rank; splits=N: that count forced;",
        f"  combiners=N: N combining programs per (sequence, KV head) forced (default {fd.COMBINERS}).",
        "",
    ]
    forced_keys = (key for r in rows for key in r if key.startswith(("splits=", "combiners=")))
    forced = list(dict.fromkeys(key.removesuffix(" graphed") for key in forced_keys))  # the sweeps, in run order
    headers = ["batch", "context", "flash_decode graphed", "single GPU graphed", "SDPA + NCCL graphed"]
    headers += ["vs single GPU", "vs SDPA + NCCL", "flash_decode eager", "single GPU eager", "SDPA + NCCL eager"]
    headers += ["result", "splits", *(f"{name} graphed" for name in forced)]
    table = []
    for r in rows:
        result = ("ok" if r["matches SDPA + NCCL"] else "WRONG") + f" ({r['max |diff| vs SDPA + NCCL']:.2g})"
        cells = [r["batch"], f"{r['context'] >> 10}k", *(f"{r.get(key, nan):.1f}" for key in headers[2:5])]
        cells += [f"{r['speedup vs single GPU']:.2f}", f"{r['speedup vs SDPA + NCCL']:.2f}"]
        cells += [f"{r.get(key, nan):.1f}" for key in headers[7:10]]
        cells += [result, r["splits"], *(f"{r.get(f'{name} graphed', nan):.1f}" for name in forced)]
        table.append(cells)
    lines.append(markdown_table(headers, table))
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
