"""Row-parallel decode linear: triton_dist.ops.gemm_ar vs torch.matmul + NCCL / symm-mem all-reduce, one run.

    torchrun --nproc-per-node=2 bench/gemm_ar.py [--out-dir bench/results]

Layers (N, K) with K split over the W ranks: Llama-3-70B o_proj (8192, 8192) and down_proj (8192, 28672), Qwen3-32B
o_proj (5120, 8192) and down_proj (5120, 25600); M in {1, 8, 32, 128, 256}; bf16. Per problem, graphed (10 calls per
CUDA graph, median of >= 20 replays, max over ranks) and eager (events around one call after a barrier):

- ``matmul`` alone (cuBLAS), ``matmul + NCCL`` (``dist.all_reduce`` of the output), ``matmul + symm-mem``
  (``torch.matmul(out=symm buffer)`` then the faster of ``one_shot_all_reduce`` / ``two_shot_all_reduce_``);
- ``gemm_ar``: the fastest of a few tile configs and of its cuBLAS path (``torch.matmul`` then triton_dist's
  all-reduce; "cublas+AR"), tried here, in this run, graphed; the op's default beside it; and the same config with
  the exchange switched off (its GEMM alone, to separate GEMM quality from communication cost);
- ``--store`` keeps each problem's fastest config in the user's tuning cache (``--write-package-table``: in the
  package's committed table too), where ``gemm_ar`` looks first (``gemm_ar.lookup_tuned``);
- the flag round alone (``bench/_floors.py``), once per run: with it, each row's "floor bound", the most a
  one-launch fused op can gain over matmul + NCCL when its exchange costs at least that.

Writes ``gemm_ar.md``, ``gemm_ar.png``, ``gemm_ar.json`` to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    GRAPHED_AND_EAGER,
    add_decode_arguments,
    describe_machine,
    eager_us,
    panel_chart,
    run_date,
    time_graphed_and_eager,
    write_json,
    write_on_rank0_and_finish,
)
from _floors import flag_round_us  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import tuning  # noqa: E402
from triton_dist.ops.gemm_ar.config import GemmARConfig, tile_config, tuning_key  # noqa: E402
from triton_dist.ops.gemm_ar.op import _launch, chosen_config  # noqa: E402
from triton_dist.ops.matmul import num_sms  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402
from triton_dist.testing.timing import graphed_us  # noqa: E402

LAYERS = [
    ("Llama-3-70B o_proj", 8192, 8192),
    ("Llama-3-70B down_proj", 8192, 28672),
    ("Qwen3-32B o_proj", 5120, 8192),
    ("Qwen3-32B down_proj", 5120, 25600),
]
MS = [1, 8, 32, 128, 256]


def candidates(m: int) -> list[GemmARConfig]:
    block_m = min(128, max(16, 1 << (m - 1).bit_length()))
    if block_m <= 32:
        shapes = [(32, 128), (32, 256), (64, 128), (64, 256)]
    elif block_m == 64:
        shapes = [(32, 128), (64, 64), (64, 128), (128, 64)]
    else:
        shapes = [(32, 64), (64, 64), (64, 128)]
    found = [GemmARConfig(block_m, bn, bk, 4, 4) for bn, bk in shapes]
    # Split K (opt-in; the GEMM alone measured slower than unsplit on Qwen3 o_proj at M = 32, faster on down_proj):
    # within the split-K buffers for N <= 8192 (SPLIT_K_MAX_ELEMS: M_pad x N x splits <= 2^20).
    splits = (2, 3, 4) if block_m <= 32 else (2,) if block_m == 64 else ()
    found += [GemmARConfig(block_m, 64, 128, 4, 4, split_k=s) for s in splits]
    # 128-column tiles split in 2 or 3 (the default's choice where N has few 64-column tiles: gemm_ar.split_k_default).
    found += [GemmARConfig(block_m, 128, 128, 4, 4, split_k=s) for s in ((2, 3) if block_m <= 32 else ())]
    return found


def label(config: GemmARConfig) -> str:
    if config.gemm == "cublas":
        return "cublas+AR"
    split = f" k{config.split_k}" if config.split_k > 1 else ""
    return f"{config.block_m}x{config.block_n}x{config.block_k}{split}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_decode_arguments(parser)
    parser.add_argument("--ms", type=int, nargs="*", default=MS)
    parser.add_argument(
        "--store", action="store_true", help="keep each problem's fastest config in the user's tuning cache"
    )
    parser.add_argument(
        "--write-package-table", action="store_true", help="--store, and into the package's committed table too"
    )
    args = parser.parse_args()
    world = setup_distributed(heap_size="2G")
    world_size = world.world_size
    group_name = dist.group.WORLD.group_name
    dtype = torch.bfloat16
    started = time.time()
    import torch.distributed._symmetric_memory as symm_mem

    floor = flag_round_us(world_size)  # the least any one-launch exchange adds to a call
    rank0_print(f"RESULT flag round alone (graphed): {floor:.2f} us")
    rows = []
    for layer, n, k in LAYERS:
        k_local = k // world_size
        b = (torch.randn(k_local, n, device="cuda") / k_local**0.5).to(dtype)
        for m in args.ms:
            a = torch.randn(m, k_local, device="cuda").to(dtype)
            out = torch.empty(m, n, device="cuda", dtype=dtype)
            row: dict = {"layer": layer, "M": m, "N": n, "K": k}
            best = None
            # cuBLAS, then triton_dist's all-reduce in place (the default above gemm_ar.CUBLAS_ABOVE_M rows).
            cublas = replace(
                tile_config(m, n, k_local, sms=num_sms(torch.cuda.current_device())), gemm="cublas", split_k=1
            )
            for config in [*candidates(m), cublas]:
                us = graphed_us(lambda c=config, a=a, b=b, out=out: _launch(a, b, out, c), replays=args.iters)
                row.setdefault("candidates graphed", {})[label(config)] = us  # every candidate, in the JSON
                if best is None or us < best[0]:
                    best = (us, config)
            assert best is not None
            row["gemm_ar graphed"], config = best
            row["config"] = label(config)
            # What a call gets before this run stores anything: the tuned table's config for the shape, else the
            # default tile (the column above is the best candidate of this run).
            default = chosen_config(a, b)
            if default == config:
                row["gemm_ar default graphed"] = row["gemm_ar graphed"]
            else:
                row["gemm_ar default graphed"] = graphed_us(
                    lambda c=default, a=a, b=b, out=out: _launch(a, b, out, c), replays=args.iters
                )
            if args.store or args.write_package_table:
                entry_key = tuning_key(m, n, k_local, dtype, world_size, a.device)
                measured = {"us": round(row["gemm_ar graphed"], 2), "candidates": len(row["candidates graphed"])}
                paths = [tuning.cache_path()] + ([tuning.PACKAGE_TABLE] if args.write_package_table else [])
                for path in paths if world.rank == 0 else []:
                    tuning.store(path, entry_key, config, measured)
                rank0_print(f"TUNED {entry_key}: {label(config)} {row['gemm_ar graphed']:.1f} us")
            row["gemm_ar eager"] = eager_us(lambda c=config, a=a, b=b, out=out: _launch(a, b, out, c), args.iters)
            gemm_only = replace(config, exchange=False)
            row["gemm_ar GEMM only graphed"] = graphed_us(lambda a=a, b=b, out=out, g=gemm_only: _launch(a, b, out, g))
            buf = symm_mem.empty((m, n), dtype=dtype, device="cuda")
            symm_mem.rendezvous(buf, group_name)
            impls: dict[str, Callable[[], object]] = {
                "matmul": lambda a=a, b=b: torch.matmul(a, b),
                "matmul + NCCL": lambda a=a, b=b: dist.all_reduce(torch.matmul(a, b)),
                "matmul + symm one-shot": lambda a=a, b=b, buf=buf: torch.ops.symm_mem.one_shot_all_reduce(
                    torch.matmul(a, b, out=buf), "sum", group_name
                ),
                "matmul + symm two-shot": lambda a=a, b=b, buf=buf: torch.ops.symm_mem.two_shot_all_reduce_(
                    torch.matmul(a, b, out=buf), "sum", group_name
                ),
            }
            time_graphed_and_eager(row, impls, args.iters, f"{layer} M={m}")
            symm = min(row.get(f"matmul + symm {a} graphed", float("inf")) for a in ("one-shot", "two-shot"))
            row["matmul + symm best graphed"] = symm
            row["speedup vs NCCL graphed"] = row.get("matmul + NCCL graphed", float("nan")) / row["gemm_ar graphed"]
            row["speedup vs symm graphed"] = symm / row["gemm_ar graphed"]
            row["default speedup vs NCCL graphed"] = (
                row.get("matmul + NCCL graphed", float("nan")) / row["gemm_ar default graphed"]
            )
            # The most any fused op can gain: the all-reduce hidden entirely, the GEMM as fast as torch.matmul.
            row["bound vs NCCL graphed"] = row.get("matmul + NCCL graphed", float("nan")) / row.get(
                "matmul graphed", float("nan")
            )
            # ... and with the exchange costing the flag round at least (the GPUs meet once per call).
            row["flag round graphed"] = floor
            row["floor bound vs NCCL graphed"] = row.get("matmul + NCCL graphed", float("nan")) / (
                row.get("matmul graphed", float("nan")) + floor
            )
            rows.append(row)
            rank0_print(
                f"RESULT {layer} M={m}: gemm_ar {row['gemm_ar graphed']:.1f} us ({row['config']}), GEMM only "
                f"{row['gemm_ar GEMM only graphed']:.1f}, matmul {row.get('matmul graphed', 0):.1f}, matmul+NCCL "
                f"{row.get('matmul + NCCL graphed', 0):.1f}, matmul+symm {symm:.1f} -> "
                f"{row['speedup vs NCCL graphed']:.2f}x vs NCCL (bound {row['bound vs NCCL graphed']:.2f}x, "
                f"with the flag round {row['floor bound vs NCCL graphed']:.2f}x)"
            )
            rt.barrier()
    return write_on_rank0_and_finish(lambda: write_results(Path(args.out_dir), rows, world_size, started))


def write_results(out_dir: Path, rows: list[dict], world_size: int, started: float) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name()
    nan = float("nan")
    lines = [
        f"# gemm_ar (row-parallel decode linear), {world_size} x {gpu}, bf16",
        "",
        *describe_machine(started),
        *GRAPHED_AND_EAGER,
        "- Each rank: [M, K/W] @ [K/W, N].",
        "",
        "- bound: (matmul + NCCL) / matmul, both graphed: the speedup an op would reach with the all-reduce entirely",
        "  hidden and its GEMM as fast as torch.matmul. Where it is below the issue's 1.3x, the bar cannot be met.",
        "- floor bound: (matmul + NCCL) / (matmul + the flag round alone), both graphed: the same with the exchange",
        "  costing at least what every rank setting a flag on every rank and waiting for all costs (measured in this",
        "  run: `bench/_floors.py`); one launch whose ranks exchange data cannot do better.",
        "",
        "- gemm_ar graphed: the best tile of this run's candidates (the tile column); default: the op's own tile",
        "  (`gemm_ar.chosen_config`: the tuned table's entry for the shape, else the default tile), what a call gets.",
        "",
        "| layer | M | gemm_ar graphed | GEMM only | matmul | matmul+NCCL graphed | matmul+symm best graphed "
        "| speedup vs NCCL (graphed) | bound | floor bound | vs symm | gemm_ar eager | matmul+NCCL eager | tile "
        "| default graphed | default vs NCCL |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['layer']} | {r['M']} | {r['gemm_ar graphed']:.1f} | {r['gemm_ar GEMM only graphed']:.1f} | "
            f"{r.get('matmul graphed', nan):.1f} | {r.get('matmul + NCCL graphed', nan):.1f} | "
            f"{r['matmul + symm best graphed']:.1f} | {r['speedup vs NCCL graphed']:.2f} | "
            f"{r.get('bound vs NCCL graphed', nan):.2f} | {r.get('floor bound vs NCCL graphed', nan):.2f} | "
            f"{r['speedup vs symm graphed']:.2f} | "
            f"{r['gemm_ar eager']:.1f} | {r.get('matmul + NCCL eager', nan):.1f} | {r['config']} | "
            f"{r.get('gemm_ar default graphed', nan):.1f} | {r.get('default speedup vs NCCL graphed', nan):.2f} |"
        )
    (out_dir / "gemm_ar.md").write_text("\n".join(lines) + "\n")
    write_json(out_dir / "gemm_ar.json", rows, started)
    keys = ("gemm_ar graphed", "matmul + NCCL graphed", "matmul + symm best graphed", "matmul graphed")
    panels = []
    for layer, _, _ in LAYERS:
        sel = [r for r in rows if r["layer"] == layer]
        panels.append(
            (layer, [r["M"] for r in sel], {k.replace(" graphed", ""): [r.get(k, nan) for r in sel] for k in keys})
        )
    panel_chart(
        out_dir / "gemm_ar.png",
        panels,
        title=f"gemm_ar vs matmul + all-reduce, {world_size} x {gpu} ({run_date(started)})",
        xlabel="M (tokens)",
        ylabel="µs per layer (graphed)",
        panel_size=(4.2, 4),
        legend_on_first_only=True,
    )


if __name__ == "__main__":
    main_guard(main)
