"""gemm_ar's GEMM alone against torch.matmul, over tile configs, at the per-rank sizes of a W-rank run, one GPU.

    torchrun --nproc-per-node=1 bench/gemm_ar_tiles.py [--k-ranks 2] [--ms 1 8 32 128 256] [--out-dir bench/results]
    ncu -k regex:. torchrun --nproc-per-node=1 bench/gemm_ar_tiles.py --profile --layers "Qwen3-32B o_proj" --ms 32

The GEMM of ``gemm_ar`` does not depend on the world size except through each rank's K slice, so its tile choice
can be studied on one GPU: each problem is [M, K / k-ranks] @ [K / k-ranks, N] for the layers of bench/gemm_ar.py.
Per problem and config, graphed (10 calls per CUDA graph, median of >= 20 replays): the kernel with the exchange
switched off (``GemmARConfig(exchange=False)``), after checking its output against ``torch.matmul`` (fp32
reference, bf16 tolerance); and ``torch.matmul`` itself. Prints and writes (``gemm_ar_tiles.md`` / ``.json``) the
op's default config, the best config and their ratios to matmul.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, describe_machine, markdown_table, write_json  # noqa: E402
from gemm_ar import LAYERS, MS  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops.gemm_ar.config import MAX_TILE_ELEMS, GemmARConfig, default_config  # noqa: E402
from triton_dist.ops.gemm_ar.op import _launch  # noqa: E402
from triton_dist.ops.matmul import num_sms  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402
from triton_dist.testing.timing import graphed_us  # noqa: E402


def configs(m: int) -> list[GemmARConfig]:
    """Tiles to try for M rows: block_m the smallest power of two >= M (16..128), block_n x block_k x warps x
    stages around the default's (8 warps only from 64 rows), within the slot buffers' tile limit and an H100/H200
    block's shared memory; up to 64 rows also split-K tiles (``k2``..``k8`` in the labels), 64 to 256 columns wide:
    a wider tile reads each row of B in a longer contiguous run (128 bytes at 64 columns), which tests whether the
    short runs, not the number of programs, cap the 64-column tiles' bandwidth (docs/results/2026-11-23-shared-gpu.md).
    """
    block_m = min(128, max(16, 1 << (m - 1).bit_length()))

    def fits(block_n: int, block_k: int, stages: int) -> bool:
        return block_m * block_n <= MAX_TILE_ELEMS and (block_n + block_m) * block_k * 2 * (stages - 1) <= 200 << 10

    found = []
    warps_options = (4, 8) if block_m >= 64 else (4,)
    for block_n, block_k, warps, stages in itertools.product((32, 64, 128), (64, 128, 256), warps_options, (3, 5)):
        if fits(block_n, block_k, stages):
            found.append(GemmARConfig(block_m, block_n, block_k, warps, stages, exchange=False))
    if block_m <= 64:  # split K (opt-in); exchange=False reduces the splits on this rank only. A shape past the
        # split-K buffers raises before launching (reported as INFO).
        # 3 pieces: 80 tiles (N = 5120) make 240 items, 1.8 waves on 132 SMs, where 2 and 4 leave a thin last wave.
        for block_n, block_k, stages, split_k in itertools.product((64, 128, 256), (64, 128), (4, 5), (2, 3, 4, 8)):
            if fits(block_n, block_k, stages):
                found.append(GemmARConfig(block_m, block_n, block_k, 4, stages, exchange=False, split_k=split_k))
    return found


def label(config: GemmARConfig) -> str:
    if config.gemm == "cublas":
        return "cublas"
    split = f" k{config.split_k}" if config.split_k > 1 else ""
    return f"{config.block_m}x{config.block_n}x{config.block_k} w{config.num_warps} s{config.num_stages}{split}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k-ranks", type=int, default=2, help="the world size whose per-rank K slice is timed")
    parser.add_argument("--ms", type=int, nargs="*", default=MS)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--layers", default="", help="only the layers whose name contains this text")
    parser.add_argument(
        "--profile", action="store_true", help="only run the default config and matmul 20 times each, for ncu"
    )
    parser.add_argument("--out-dir", default=str(RESULTS))
    args = parser.parse_args()
    setup_distributed(heap_size="2G")
    started = time.time()
    rows = []
    for layer, n, k in LAYERS:
        if args.layers not in layer:
            continue
        k_local = k // args.k_ranks
        b = (torch.randn(k_local, n, device="cuda") / k_local**0.5).to(torch.bfloat16)
        for m in args.ms:
            a = torch.randn(m, k_local, device="cuda").to(torch.bfloat16)
            reference = (a.float() @ b.float()).to(torch.bfloat16).float()
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            if args.profile:
                default = GemmARConfig(
                    **{
                        **default_config(m, n, k_local, sms=num_sms(torch.cuda.current_device())).__dict__,
                        "exchange": False,
                    }
                )
                for _ in range(20):
                    _launch(a, b, out, default)
                for _ in range(20):
                    torch.matmul(a, b)
                torch.cuda.synchronize()
                rank0_print(f"PROFILED {layer} M={m} K/W={k_local}")
                continue
            row: dict = {"layer": layer, "M": m, "N": n, "K local": k_local}
            row["matmul"] = graphed_us(lambda a=a, b=b: torch.matmul(a, b), replays=args.iters)
            default = GemmARConfig(
                **{
                    **default_config(m, n, k_local, sms=num_sms(torch.cuda.current_device())).__dict__,
                    "exchange": False,
                }
            )
            times = {}
            for config in dict.fromkeys([default, *configs(m)]):
                out.fill_(float("nan"))
                try:
                    _launch(a, b, out, config)
                except Exception as error:  # noqa: BLE001 (a config the GPU refuses is reported, not fatal)
                    rank0_print(f"INFO {layer} M={m} {label(config)}: {type(error).__name__}: {error}")
                    continue
                torch.cuda.synchronize()
                if not torch.allclose(out.float(), reference, rtol=2e-2, atol=2e-2):
                    rank0_print(f"FAIL {layer} M={m} {label(config)}: differs from matmul")
                    continue
                times[config] = graphed_us(
                    lambda c=config, a=a, b=b, out=out: _launch(a, b, out, c), replays=args.iters
                )
                rank0_print(f"TILE {layer} M={m} {label(config)}: {times[config]:.1f} us")
            best = min(times, key=times.__getitem__)
            row.update(default=label(default), best=label(best), tiles={label(c): t for c, t in times.items()})
            row["default us"], row["best us"] = times.get(default, float("nan")), times[best]
            rows.append(row)
            rank0_print(
                f"RESULT {layer} M={m} K/W={k_local}: matmul {row['matmul']:.1f} us, default {label(default)} "
                f"{row['default us']:.1f} ({row['default us'] / row['matmul']:.2f}x), best {label(best)} "
                f"{row['best us']:.1f} ({row['best us'] / row['matmul']:.2f}x)"
            )
    if rows and rt.current_world().rank == 0:
        write_results(Path(args.out_dir), rows, args.k_ranks, started)
    rt.barrier()
    return 0


def write_results(out_dir: Path, rows: list[dict], k_ranks: int, started: float) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        f"# gemm_ar's GEMM alone vs torch.matmul, per-rank sizes of {k_ranks} ranks, one "
        f"{torch.cuda.get_device_name()}, bf16",
        "",
        *describe_machine(started),
        "- µs per call, graphed (10 calls per CUDA graph, median of >= 20 replays); x = time / matmul's time.",
        "",
    ]
    headers = ["layer", "M", "K local", "matmul", "default", "default us", "x", "best", "best us", "x"]
    table = [
        [r["layer"], r["M"], r["K local"], f"{r['matmul']:.1f}", r["default"], f"{r['default us']:.1f}",
         f"{r['default us'] / r['matmul']:.2f}", r["best"], f"{r['best us']:.1f}", f"{r['best us'] / r['matmul']:.2f}"]
        for r in rows
    ]  # fmt: skip
    lines.append(markdown_table(headers, table))
    (out_dir / "gemm_ar_tiles.md").write_text("\n".join(lines) + "\n")
    write_json(out_dir / "gemm_ar_tiles.json", rows, started)


if __name__ == "__main__":
    main_guard(main)
