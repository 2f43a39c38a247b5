"""Joint tuning of ag_gemm: GEMM tile configuration x chunk size x producer x tile order, per shape.

    torchrun --nproc-per-node=2 bench/tune_overlap.py [--shapes "M,N,K;..."] [--dtype bfloat16]
        [--write-package-table] [--quick]

For each shape (global M, N, K): the GEMM candidates are the best configurations of bench/matmul.py
(bench/results/matmul_best.json, when present) and the defaults; for each, every chunk size (``chunk_tiles``
tile rows per flag), producer (copy engine, or SM push on 8/16/32 SMs), group size of the tile order and whether
the peers' tiles form one flattened pipeline is timed (median of >= 20 calls after warm-up, max over ranks) beside
NCCL all-gather + torch.matmul. The fastest is
stored in the user's cache (``triton_dist.ops.tuning.cache_path()``); ``--write-package-table`` also stores it in
the package's committed table (python/triton_dist/ops/tuned_configs.json). Where no fused variant beats the
baseline, the stored choice is ``backend="nccl"``. The full log of every variant goes to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, add_shape_arguments, log0, parse_shapes, time_ms  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import tuning  # noqa: E402
from triton_dist.ops.ag_gemm import ag_gemm_impl  # noqa: E402
from triton_dist.ops.matmul import HOPPER_CANDIDATES, MatmulConfig  # noqa: E402
from triton_dist.ops.tuning import OverlapConfig  # noqa: E402
from triton_dist.testing import setup_distributed  # noqa: E402


def gemm_candidates(m: int, n_local: int, k: int, tag: str) -> list[MatmulConfig]:
    found: list[MatmulConfig] = []
    best = RESULTS / f"matmul_best{tag}.json"
    if best.exists():
        entry = json.loads(best.read_text()).get(f"{m},{n_local},{k}")
        if entry:
            found.append(MatmulConfig.from_dict(entry["config"]))
    found.append(dataclasses.replace(HOPPER_CANDIDATES[0], warp_specialize=False))
    return list(dict.fromkeys(found))


def variants(gemms: list[MatmulConfig], quick: bool) -> list[OverlapConfig]:
    chunks = (2, 4) if quick else (2, 4, 8)
    producers = [("ce", 1), ("sm", 16)] if quick else [("ce", 1), ("sm", 8), ("sm", 16), ("sm", 32)]
    out = []
    for gemm, chunk, (producer, ctas) in itertools.product(gemms, chunks, producers):
        out.append(OverlapConfig(matmul=gemm, chunk_tiles=chunk, producer=producer, push_ctas=ctas))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_shape_arguments(parser, reps=20)
    parser.add_argument("--quick", action="store_true", help="fewer chunk sizes and producers")
    parser.add_argument("--write-package-table", action="store_true")
    parser.add_argument("--matmul-tag", default="", help="suffix of bench/results/matmul_best*.json to start from")
    args = parser.parse_args()
    setup_distributed("6G")
    world = rt.current_world()
    w = world.world_size
    dtype = getattr(torch, args.dtype)
    gpu = torch.cuda.get_device_name()
    for m, n, k in parse_shapes(args.shapes):
        m_local, n_local = m // w, n // w
        a = torch.randn(m_local, k, dtype=dtype, device="cuda") / k**0.25
        b = torch.randn(k, n_local, dtype=dtype, device="cuda") / k**0.25
        gathered = torch.empty(m, k, dtype=dtype, device="cuda")

        def baseline(a=a, b=b, gathered=gathered) -> torch.Tensor:
            dist.all_gather_into_tensor(gathered, a)
            return gathered @ b

        t_base = time_ms(baseline, reps=args.reps)
        ref = baseline().float()
        results = []
        # The tile order's group size is searched for the best GEMM/chunk/producer found first (a second pass).
        candidates = variants(gemm_candidates(m, n_local, k, args.matmul_tag), args.quick)

        def correct_everywhere(config: OverlapConfig, a=a, b=b, ref=ref, shape=f"{m},{n},{k}") -> bool:
            """Whether ``config`` gives the right C on every rank (a wrong variant is logged and never chosen)."""
            c, _ = ag_gemm_impl(a, b, config=config)
            torch.cuda.synchronize()
            err = (c.float() - ref).abs().max().item()
            ok = torch.tensor([1.0 if err < 0.05 * ref.abs().max().item() else 0.0], device="cuda")
            dist.all_reduce(ok, op=dist.ReduceOp.MIN)
            if ok.item() < 1:
                log0(f"{shape} {config.short()}: WRONG (max err {err:.3g}); skipped")
            return ok.item() >= 1

        for config in candidates:
            try:
                if not correct_everywhere(config):
                    continue
                t = time_ms(lambda config=config, a=a, b=b: ag_gemm_impl(a, b, config=config), reps=args.reps)
                results.append((t, config))
                log0(f"{m},{n},{k} {config.short()}: {t:.3f} ms (NCCL+cuBLAS {t_base:.3f}, x{t_base / t:.3f})")
            except Exception as error:  # noqa: BLE001 (report and go on; a variant that fails is not chosen)
                log0(f"{m},{n},{k} {config.short()}: failed: {type(error).__name__}: {str(error)[:200]}")
        if results:
            t_best, best = min(results, key=lambda x: x[0])
            for group in (4, 16):
                config = dataclasses.replace(best, matmul=dataclasses.replace(best.matmul, group_m=group))
                t = time_ms(lambda config=config, a=a, b=b: ag_gemm_impl(a, b, config=config), reps=args.reps)
                log0(f"{m},{n},{k} {config.short()} (tile order group {group}): {t:.3f} ms")
                if t < t_best:
                    t_best, best = t, config
            # Third pass: the peers' tiles in one flattened pipeline (correctness checked like every variant).
            config = dataclasses.replace(best, flatten_peers=True)
            if correct_everywhere(config):
                t = time_ms(lambda config=config, a=a, b=b: ag_gemm_impl(a, b, config=config), reps=args.reps)
                log0(f"{m},{n},{k} {config.short()} (peer tiles flattened): {t:.3f} ms")
                if t < t_best:
                    t_best, best = t, config
        else:
            t_best, best = float("inf"), OverlapConfig(backend="nccl")
        if t_best >= t_base:
            best, t_best = OverlapConfig(backend="nccl"), t_base
        measured = {"ms": round(t_best, 4), "nccl_cublas_ms": round(t_base, 4), "variants": len(results)}
        log0(f"BEST {m},{n},{k}: {best.short()} {t_best:.3f} ms vs NCCL+cuBLAS {t_base:.3f} ({t_base / t_best:.3f}x)")
        entry_key = tuning.key("ag_gemm", m, n, k, dtype, w, gpu)
        if world.rank == 0:
            tuning.store(tuning.cache_path(), entry_key, best, measured)
            if args.write_package_table:
                tuning.store(tuning.PACKAGE_TABLE, entry_key, best, measured)
        del a, b, gathered, ref
        torch.cuda.empty_cache()
    rt.finalize()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
