"""AllGather + GEMM on the seed shapes: ours beside NCCL + cuBLAS, PyTorch's fused op, and the overlap bound.

    torchrun --nproc-per-node=2 bench/ag_gemm.py [--shapes "M,N,K;..."] [--dtype bfloat16] [--reps 30]

Per shape (global M, N, K; rank r holds A_r [M/W, K] and B [K, N/W]), all in one run, each the median of
``--reps`` calls after warm-up (device barrier before each call, max over ranks):

- ours: ``triton_dist.ops.ag_gemm`` (the torch custom op; configuration from the tuned table / cost model);
- NCCL + cuBLAS: ``all_gather_into_tensor`` then ``torch.matmul``;
- torch fused: ``torch.ops.symm_mem.fused_all_gather_matmul``;
- matmul alone: cuBLAS on the gathered A, and our GEMM alone with the tuned tile configuration;
- communication alone: NCCL all-gather, and our copy-engine push of the shard to every peer;
- overlap bound = max(cuBLAS matmul alone, fastest communication alone); ours / bound;
- ours again, timed after everything else of the shape: the same code twice, so the spread between the two is this
  run's noise on ours;
- from an idle GPU (host synchronize and barrier, then the call: its host path included) and host µs per call (the
  CPU time to enqueue one call while the GPU is busy), ours and NCCL + cuBLAS.

Writes bench/results/ag_gemm.md and ag_gemm.png (speedup over NCCL + cuBLAS per shape).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    add_shape_arguments,
    bar_chart,
    describe_machine,
    enable_torch_symm_mem,
    log0,
    markdown_table,
    parse_shapes,
    time_ms,
)

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops.ag_gemm import ag_gemm, ag_gemm_impl, choose_config  # noqa: E402
from triton_dist.ops.ag_gemm import workspace as _workspace  # noqa: E402
from triton_dist.ops.matmul import matmul  # noqa: E402
from triton_dist.ops.tuning import geomean  # noqa: E402
from triton_dist.testing import setup_distributed  # noqa: E402
from triton_dist.testing.distributed import max_over_ranks  # noqa: E402
from triton_dist.testing.timing import host_us, idle_ms_samples  # noqa: E402


def torch_fused(group_name: str):  # noqa: ANN201
    if not enable_torch_symm_mem(group_name):
        return None

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.ops.symm_mem.fused_all_gather_matmul(a, [b], gather_dim=0, group_name=group_name)[1][0]

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_shape_arguments(parser, reps=30)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    setup_distributed("6G")
    world = rt.current_world()
    w, me = world.world_size, world.rank
    dtype = getattr(torch, args.dtype)
    group_name = dist.group.WORLD.group_name
    fused = torch_fused(group_name)
    rows, labels, speedups, vs_bound, vs_fused, speedups_again = [], [], [], [], [], []
    for m, n, k in parse_shapes(args.shapes):
        m_local, n_local = m // w, n // w
        a = torch.randn(m_local, k, dtype=dtype, device="cuda") / k**0.25
        b = torch.randn(k, n_local, dtype=dtype, device="cuda") / k**0.25
        gathered = torch.empty(m, k, dtype=dtype, device="cuda")
        config = choose_config(m_local, n_local, k, dtype, w, a.device)

        def baseline(a=a, b=b, gathered=gathered) -> torch.Tensor:
            dist.all_gather_into_tensor(gathered, a)
            return gathered @ b

        ref = baseline().float()
        out = ag_gemm(a, b)
        torch.cuda.synchronize()
        err = (out.float() - ref).abs().max().item()
        ok = err < 0.05 * ref.abs().max().item()
        t_ours = time_ms(lambda a=a, b=b: ag_gemm(a, b), reps=args.reps)
        t_base = time_ms(baseline, reps=args.reps)
        t_cublas = time_ms(lambda g=gathered, b=b: g @ b, reps=args.reps)
        t_nccl = time_ms(lambda g=gathered, a=a: dist.all_gather_into_tensor(g, a), reps=args.reps)
        ws = _workspace(world, a)
        peers = [(me - s) % w for s in range(1, w)]

        def push_alone(a=a, ws=ws, peers=peers, rows=slice(me * m_local, (me + 1) * m_local)) -> None:
            for dst in peers:
                ws.peer_recv[dst][rows].copy_(a)

        t_push = time_ms(push_alone, reps=args.reps)
        t_ours_gemm = float("nan")
        if config.backend == "fused":
            t_ours_gemm = time_ms(lambda g=gathered, b=b, mm=config.matmul: matmul(g, b, config=mm), reps=args.reps)
        t_no_comm = float("nan")
        if config.backend == "fused":
            t_no_comm = time_ms(
                lambda a=a, b=b, config=config: ag_gemm_impl(a, b, config=config, _no_comm=True),
                reps=args.reps,
            )
        t_fused = float("nan")
        if fused is not None:
            try:
                t_fused = time_ms(lambda a=a, b=b: fused(a, b), reps=args.reps)
            except Exception as error:  # noqa: BLE001
                log0(f"torch fused failed on {m},{n},{k}: {error}")
        t_ours_again = time_ms(lambda a=a, b=b: ag_gemm(a, b), reps=args.reps)
        idle_ours = max_over_ranks(statistics.median(idle_ms_samples(lambda a=a, b=b: ag_gemm(a, b), rep=args.reps)))
        idle_base = max_over_ranks(statistics.median(idle_ms_samples(baseline, rep=args.reps)))
        host_ours = host_us(lambda a=a, b=b: ag_gemm(a, b))
        host_base = host_us(baseline)
        bound = max(t_cublas, min(t_nccl, t_push))
        speedup = t_base / t_ours
        speedups_again.append(t_base / t_ours_again)
        labels.append(f"{m},{n},{k}")
        speedups.append(speedup)
        vs_bound.append(t_ours / bound)
        vs_fused.append(t_fused / t_ours)
        rows.append([
            f"{m},{n},{k}", f"{t_ours:.3f}", f"{t_base:.3f}", f"{t_fused:.3f}", f"{t_cublas:.3f}",
            f"{t_ours_gemm:.3f}", f"{t_no_comm:.3f}", f"{t_nccl:.3f}", f"{t_push:.3f}", f"{bound:.3f}",
            f"{speedup:.3f}",
            f"{t_fused / t_ours:.3f}", f"{t_ours / bound:.3f}", f"{t_ours_again:.3f}",
            f"{idle_ours:.3f} / {idle_base:.3f}", f"{host_ours:.0f} / {host_base:.0f}", config.short(),
            "ok" if ok else f"WRONG {err:.3g}",
        ])  # fmt: skip
        log0(" | ".join(rows[-1]))
        del a, b, gathered, ref, out
        torch.cuda.empty_cache()
    headers = [
        "M,N,K", "ours ms", "NCCL+cuBLAS ms", "torch fused ms", "cuBLAS mm alone", "our GEMM alone",
        "fused kernel, no comm", "NCCL AG alone", "CE push alone", "overlap bound", "speedup vs NCCL+cuBLAS",
        "speedup vs torch fused",
        "ours / bound", "ours ms, timed again last", "from idle ms ours / base", "host µs ours / base", "config",
        "check",
    ]  # fmt: skip
    suffix = f"_{args.tag}" if args.tag else ""
    text = [
        "# AllGather + GEMM (triton_dist.ops.ag_gemm)",
        "",
        *describe_machine(),
        f"- dtype {args.dtype}; median of {args.reps} calls after 5 warm-ups, device barrier before each, max over "
        "ranks; times in ms",
        "",
        markdown_table(headers, rows),
        "",
        f"Geo-mean speedup over NCCL+cuBLAS: {geomean(speedups):.3f} (min {min(speedups):.3f}); over torch fused: "
        f"{geomean(vs_fused):.3f} (min {min(vs_fused):.3f}); ours / overlap bound: geo-mean "
        f"{geomean(vs_bound):.3f}, worst {max(vs_bound):.3f}. Ours timed again after the other measurements: "
        f"geo-mean speedup {geomean(speedups_again):.3f} (min {min(speedups_again):.3f}).",
        "",
    ]
    if me == 0:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"ag_gemm{suffix}.md").write_text("\n".join(text))
        bar_chart(RESULTS / f"ag_gemm{suffix}.png", f"AllGather+GEMM on {w} GPUs: speedup over NCCL + cuBLAS",
                  labels, {"ours": speedups, "torch fused": [s / f for s, f in zip(speedups, vs_fused, strict=True)]},
                  "x NCCL+cuBLAS", line=1.0)  # fmt: skip
    log0("\n".join(text))
    rt.finalize()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
