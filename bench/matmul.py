"""Our persistent Triton GEMM against cuBLAS on the per-rank GEMMs of the overlapped ops (one GPU).

    python bench/matmul.py [--world-size 2] [--dtype bfloat16] [--reps 30]

For each seed shape (M, N, K) at world size W: the AG+GEMM GEMM [M, K] x [K, N/W] and the GEMM+RS GEMM
[M, K/W] x [K/W, N]. Every candidate configuration is timed beside ``torch.matmul`` (cuBLAS) in the same run
(median of ``--reps`` after warm-up); the table gives cuBLAS, our best and its configuration, the ratio, and the
geo-mean. Writes bench/results/matmul.md, matmul.png and matmul_best.json (the best configuration per GEMM, which
bench/tune_overlap.py starts from).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, SEED_SHAPES, bar_chart, describe_machine, markdown_table, time_ms  # noqa: E402

from triton_dist.ops.matmul import HOPPER_CANDIDATES, MatmulConfig, matmul  # noqa: E402
from triton_dist.ops.tuning import geomean  # noqa: E402

EXTRA = (
    MatmulConfig(256, 128, 64, 8, 3, 8, False, 1),
    MatmulConfig(128, 256, 128, 8, 2, 8, False, 2),
    MatmulConfig(128, 256, 64, 4, 3, 8, False, 2),
    MatmulConfig(128, 256, 64, 8, 4, 8, False, 1),
)


def local_gemms(world_size: int) -> list[tuple[str, int, int, int]]:
    out = []
    for m, n, k in SEED_SHAPES:
        out.append((f"AG {m},{n},{k}", m, n // world_size, k))
    for m, n, k in SEED_SHAPES:
        out.append((f"RS {m},{n},{k}", m, n, k // world_size))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--tag", default="", help="suffix of the result files")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    candidates = list(dict.fromkeys([c for c in HOPPER_CANDIDATES if c.warp_specialize is False] + list(EXTRA)))
    candidates += [dataclasses.replace(c, warp_specialize=False) for c in HOPPER_CANDIDATES if c.warp_specialize]
    candidates = list(dict.fromkeys(candidates))  # warp_specialize is a no-op on Hopper in Triton 3.6
    rows, best_configs, ratios, labels = [], {}, [], []
    for label, m, n, k in local_gemms(args.world_size):
        a = torch.randn(m, k, dtype=dtype, device="cuda") / k**0.25
        b = torch.randn(k, n, dtype=dtype, device="cuda") / k**0.25
        c = torch.empty(m, n, dtype=dtype, device="cuda")
        t_cublas = time_ms(lambda a=a, b=b: a @ b, reps=args.reps, distributed=False)
        ref = (a.float() @ b.float()).to(dtype)
        timings = []
        for config in candidates:
            try:
                matmul(a, b, out=c, config=config)
                torch.cuda.synchronize()
                err = (c.float() - ref.float()).abs().max().item()
                if not err < 0.05 * ref.float().abs().max().item():
                    print(f"{label} {config.short()}: WRONG (max err {err})", flush=True)
                    continue
                t = time_ms(lambda a=a, b=b, c=c, config=config: matmul(a, b, out=c, config=config),
                            reps=args.reps, distributed=False)  # fmt: skip
                timings.append((t, config))
                print(f"{label} [{m}x{n}x{k}] {config.short()}: {t:.3f} ms (cuBLAS {t_cublas:.3f})", flush=True)
            except Exception as error:  # noqa: BLE001 (a config that does not compile or fit is skipped)
                print(f"{label} {config.short()}: failed: {str(error).splitlines()[-1][:160]}", flush=True)
        t_best, config_best = min(timings, key=lambda x: x[0])
        ratio = t_cublas / t_best
        ratios.append(ratio)
        labels.append(label)
        best_configs[f"{m},{n},{k}"] = {"config": config_best.as_dict(), "ms": t_best, "cublas_ms": t_cublas}
        rows.append([label, f"{m}x{n}x{k}", f"{t_cublas:.3f}", f"{t_best:.3f}", f"{ratio:.3f}", config_best.short()])
        del a, b, c, ref
    suffix = f"_{args.tag}" if args.tag else ""
    RESULTS.mkdir(parents=True, exist_ok=True)
    ag_ratios, rs_ratios = ratios[: len(SEED_SHAPES)], ratios[len(SEED_SHAPES) :]
    text = [
        "# Persistent Triton GEMM vs cuBLAS (per-rank GEMMs of the overlapped ops)",
        "",
        *describe_machine(),
        f"- dtype {args.dtype}, world size {args.world_size}; median of {args.reps} after 5 warm-ups; one GPU",
        "",
        markdown_table(["GEMM", "M x N x K (local)", "cuBLAS ms", "ours ms", "cuBLAS/ours", "best config"], rows),
        "",
        f"Geo-mean cuBLAS/ours: all {geomean(ratios):.3f}, AG GEMMs {geomean(ag_ratios):.3f}, "
        f"RS GEMMs {geomean(rs_ratios):.3f}; worst {min(ratios):.3f}.",
        "",
    ]
    (RESULTS / f"matmul{suffix}.md").write_text("\n".join(text))
    (RESULTS / f"matmul_best{suffix}.json").write_text(json.dumps(best_configs, indent=1) + "\n")
    bar_chart(RESULTS / f"matmul{suffix}.png", "Triton persistent GEMM speed relative to cuBLAS", labels,
              {"cuBLAS time / ours": ratios}, "x cuBLAS", line=1.0)  # fmt: skip
    print("\n".join(text), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
