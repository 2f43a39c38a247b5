"""Our persistent Triton GEMM against cuBLAS on the per-rank GEMMs of the overlapped ops (one GPU); ``--decode``:
the skinny GEMM (``skinny_matmul``) against cuBLAS on the decode step's GEMMs instead.

    python bench/matmul.py [--world-size 2] [--dtype bfloat16] [--reps 30]
    python bench/matmul.py --decode [--world-size 2] [--rows 1,8,64] [--sweep]

For each seed shape (M, N, K) at world size W: the AG+GEMM GEMM [M, K] x [K, N/W] and the GEMM+RS GEMM
[M, K/W] x [K/W, N]. Every candidate configuration is timed beside ``torch.matmul`` (cuBLAS) in the same run
(median of ``--reps`` after warm-up); the table gives cuBLAS, our best and its configuration, the ratio, and the
geo-mean. Writes bench/results/matmul.md, matmul.png and matmul_best.json (the best configuration per GEMM, which
bench/tune_overlap.py starts from).

``--decode`` (``decode_rows``): the per-rank GEMMs of one decode step of Llama-3-8B and Qwen3-32B at world size W
(``decode_gemms``: QKV, O, gate/up, down, x [M, K] @ W [K, N]) at M = ``--rows``, ``torch.matmul`` (cuBLAS) against
``skinny_matmul`` with the cost model's configuration and (``--sweep``) the best of its neighbours
(``sweep_configs``). Each is timed under CUDA-graph replay over enough copies of the weight that they do not fit in
L2 (as in a decoder step, where each GEMM's weight comes from HBM), median of ``--reps`` replays; the table gives
µs, GB/s of the weight read, and that as a % of this GPU's HBM copy rate measured in the same run
(``hbm_copy_gbps``). Writes bench/results/matmul_decode[_tag].md and .json.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, SEED_SHAPES, bar_chart, describe_machine, markdown_table, time_ms  # noqa: E402

from triton_dist.ops.matmul import HOPPER_CANDIDATES, MatmulConfig, matmul  # noqa: E402
from triton_dist.ops.matmul.skinny_config import SkinnyConfig, skinny_candidates  # noqa: E402
from triton_dist.ops.matmul.skinny_op import default_skinny_config, skinny_matmul  # noqa: E402
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


DECODE_MODELS = {
    "Llama-3-8B": (4096, 32, 8, 128, 14336),
    "Qwen3-32B": (5120, 64, 8, 128, 25600),
}
"""hidden, query heads, KV heads, head dim, intermediate size (the published configs, as ``layers.CONFIGS``)."""
SWEEP_SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
"""The split-K counts ``--sweep`` tries with each tile."""
L2_FLUSH_BYTES = 256 << 20
"""The weight copies a timed graph cycles through add up to at least this: five times an H100's / H200's L2."""


def decode_gemms(world_size: int) -> list[tuple[str, int, int]]:
    """(label, K, N) of each per-rank decode GEMM of ``DECODE_MODELS`` at ``world_size``."""
    out = []
    for model, (hidden, heads, kv_heads, head_dim, inter) in DECODE_MODELS.items():
        w = world_size
        out += [
            (f"{model} QKV", hidden, (heads + 2 * kv_heads) * head_dim // w),
            (f"{model} O", heads * head_dim // w, hidden),
            (f"{model} gate/up", hidden, 2 * inter // w),
            (f"{model} down", inter // w, hidden),
        ]
    return out


def graph_us(calls: list, reps: int) -> float:
    """Median µs per call of the ``calls`` (callables run in order) under CUDA-graph replay, after an eager warm-up
    (which makes any workspace before the capture), median of ``reps`` replays by CUDA events."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in calls:
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in calls:
            fn()
    for _ in range(3):
        graph.replay()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    samples = sorted(start.elapsed_time(end) for start, end in events)
    return samples[len(samples) // 2] * 1000 / len(calls)


def hbm_copy_gbps(reps: int, size_bytes: int = 1 << 30) -> float:
    """This GPU's HBM copy rate: 2 x ``size_bytes`` (read + written) / the median copy of a bf16 tensor."""
    source = torch.ones(size_bytes // 2, dtype=torch.bfloat16, device="cuda")
    target = torch.empty_like(source)
    us = graph_us([functools.partial(target.copy_, source)], reps)
    del source, target
    torch.cuda.empty_cache()
    return 2 * size_bytes / us / 1e3


def sweep_configs(m: int, k: int, n: int, chosen: SkinnyConfig) -> list[SkinnyConfig]:
    """The chosen configuration's neighbours: each tile of ``skinny_config.TILES`` at each of ``SWEEP_SPLITS`` (the
    candidates' pipeline depth and warps), without configurations that launch the same splits as another; for
    M <= 16 also the chosen one with ``block_m`` 16."""
    from triton_dist.ops.matmul.skinny_config import split_blocks

    seen, out = set(), []
    for config in skinny_candidates(m):
        splits = split_blocks(k, config)[1]
        key = (config.block_n, config.block_k, splits)
        if config.split_k in SWEEP_SPLITS and key not in seen and config != chosen:
            seen.add(key)
            out.append(dataclasses.replace(config, split_k=splits))
    if m <= 16:  # the chosen configuration with 16-row tiles: mma.sync in place of 64-row wgmma on sm_90
        out.append(dataclasses.replace(chosen, block_m=16))
    return out


def decode_rows(args: argparse.Namespace) -> int:
    """The ``--decode`` table (module docstring); returns 1 where a result differs from cuBLAS's by more than a
    few bf16 roundings, or the chosen configuration's differs between calls (split-K must be deterministic)."""
    dtype = getattr(torch, args.dtype)
    copy_gbps = hbm_copy_gbps(args.reps)
    print(f"RESULT HBM copy rate {copy_gbps:.0f} GB/s", flush=True)
    rows, records, failures = [], [], 0
    for label, k, n in decode_gemms(args.world_size):
        weight_bytes = k * n * torch.finfo(dtype).bits // 8
        copies = max(10, -(-L2_FLUSH_BYTES // weight_bytes))
        weights = [torch.randn(k, n, dtype=dtype, device="cuda") / k**0.5 for _ in range(copies)]
        for m in args.rows:
            x = torch.randn(m, k, dtype=dtype, device="cuda")
            out = torch.empty(m, n, dtype=dtype, device="cuda")
            want = torch.matmul(x, weights[0])
            cublas = graph_us([functools.partial(torch.matmul, x, w, out=out) for w in weights], args.reps)
            chosen = default_skinny_config(x, weights[0])
            got = skinny_matmul(x, weights[0], config=chosen)
            error = float((got.float() - want.float()).abs().max() / want.float().abs().max())
            repeatable = all(torch.equal(got, skinny_matmul(x, weights[0], config=chosen)) for _ in range(5))
            failures += not error < 2**-6 or not repeatable
            ours = graph_us(
                [functools.partial(skinny_matmul, x, w, out=out, config=chosen) for w in weights], args.reps
            )
            best, best_config = ours, chosen
            if args.sweep:
                for config in sweep_configs(m, k, n, chosen):
                    try:
                        check = skinny_matmul(x, weights[0], config=config).float() - want.float()
                        if not float(check.abs().max() / want.float().abs().max()) < 2**-6:
                            print(f"{label} M={m} {config.short()}: WRONG", flush=True)
                            failures += 1
                            continue
                        us = graph_us(
                            [functools.partial(skinny_matmul, x, w, out=out, config=config) for w in weights], args.reps
                        )
                    except Exception as error_:  # noqa: BLE001 (a configuration that does not fit is skipped)
                        print(f"{label} M={m} {config.short()}: failed: {str(error_).splitlines()[-1][:120]}")
                        continue
                    print(f"{label} M={m} {config.short()}: {us:.2f} us", flush=True)
                    if us < best:
                        best, best_config = us, config
            gbps = {name: weight_bytes / us / 1e3 for name, us in (("cublas", cublas), ("ours", ours), ("best", best))}
            record = {
                "gemm": label, "m": m, "k": k, "n": n, "cublas_us": cublas, "ours_us": ours, "ours_config":
                chosen.as_dict(), "best_us": best, "best_config": best_config.as_dict(), "error": error,
                "repeatable": repeatable, "copy_gbps": copy_gbps,
            }  # fmt: skip
            records.append(record)
            share = {name: f"{value:.0f} ({100 * value / copy_gbps:.0f}%)" for name, value in gbps.items()}
            rows.append(
                [
                    label, m, f"{k}x{n}", f"{cublas:.2f}", share["cublas"], f"{ours:.2f}", share["ours"],
                    chosen.short(), f"{cublas / ours:.3f}", f"{best:.2f} {best_config.short()}", f"{error:.1e}",
                ]
            )  # fmt: skip
            print(
                f"RESULT {label} M={m}: cuBLAS {cublas:.2f} us ({gbps['cublas']:.0f} GB/s), ours {ours:.2f} us "
                f"({gbps['ours']:.0f} GB/s, {chosen.short()}), cuBLAS/ours {cublas / ours:.3f}; best "
                f"{best:.2f} us {best_config.short()}; error {error:.1e}{'' if repeatable else ' NOT REPEATABLE'}",
                flush=True,
            )
        del weights
        torch.cuda.empty_cache()
    suffix = f"_{args.tag}" if args.tag else ""
    RESULTS.mkdir(parents=True, exist_ok=True)
    headers = ["GEMM", "M", "K x N", "cuBLAS us", "cuBLAS GB/s (% copy)", "ours us", "ours GB/s (% copy)"]
    headers += ["ours config", "cuBLAS/ours", "best of sweep", "max rel err"]
    text = [
        "# Skinny Triton GEMM vs cuBLAS on the decode step's per-rank GEMMs",
        "",
        *describe_machine(),
        f"- dtype {args.dtype}, world size {args.world_size}; CUDA-graph replay over {L2_FLUSH_BYTES >> 20} MiB of "
        f"weight copies (not L2-resident), median of {args.reps}; HBM copy rate {copy_gbps:.0f} GB/s (same run)",
        "",
        markdown_table(headers, rows),
        "",
    ]
    (RESULTS / f"matmul_decode{suffix}.md").write_text("\n".join(text))
    (RESULTS / f"matmul_decode{suffix}.json").write_text(json.dumps(records, indent=1) + "\n")
    print("\n".join(text), flush=True)
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--tag", default="", help="suffix of the result files")
    parser.add_argument("--decode", action="store_true", help="the skinny GEMM on the decode GEMMs (docstring)")
    parser.add_argument("--rows", default="1,8,64", help="--decode: the M values, comma-separated")
    parser.add_argument("--sweep", action="store_true", help="--decode: also time the chosen config's neighbours")
    args = parser.parse_args()
    args.rows = [int(value) for value in args.rows.split(",") if value]
    if args.decode:
        return decode_rows(args)
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
