"""Timing and reporting shared by bench/matmul.py, bench/ag_gemm.py and bench/tune_overlap.py.

Timing: CUDA events around each call, median of ``reps`` calls after ``warmup``; in a multi-rank run every call is
preceded by a device barrier (so all ranks start each call together) and the result is the maximum over ranks.
"""

from __future__ import annotations

import datetime
import os
import platform
import socket
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.distributed as dist

RESULTS = Path(__file__).resolve().parent / "results"


def time_ms(fn: Callable[[], object], warmup: int = 5, reps: int = 30, distributed: bool = True) -> float:
    """Median milliseconds of ``fn()`` (max over ranks when ``distributed``)."""
    barrier = None
    if distributed:
        from triton_dist import runtime as rt

        barrier = rt.barrier_on_device
    for _ in range(warmup):
        if barrier:
            barrier()
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        if barrier:
            barrier()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    median = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))
    if distributed and dist.is_initialized():
        value = torch.tensor([median], dtype=torch.float64, device="cuda")
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        median = float(value.item())
    return median


def describe_machine() -> list[str]:
    """Lines naming the machine, software and time of a run (for the markdown reports)."""
    import triton

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "unknown"
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    world = dist.get_world_size() if dist.is_initialized() else 1
    return [
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {socket.gethostname()}, {len(gpus)} x {gpus[0] if gpus else 'no GPU'}, ranks: {world}",
        f"- software: python {platform.python_version()}, torch {torch.__version__}, triton {triton.__version__}",
        f"- commit: {commit or 'unknown'}",
        f"- command: `{' '.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])}` (torchrun --nproc-per-node={world})",
    ]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def bar_chart(
    path: Path,
    title: str,
    labels: Sequence[str],
    series: dict[str, Sequence[float]],
    ylabel: str,
    line: float | None = None,
) -> None:
    """A grouped bar chart (one group per label, one bar per series) saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(labels)), 4))
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(labels))]
        bars = ax.bar(xs, values, width, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    if line is not None:
        ax.axhline(line, color="gray", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


SEED_SHAPES = [(8192, 4096, 12288), (8192, 4096, 14336), (8192, 3584, 14336), (8192, 4608, 36864),
               (8192, 8192, 28672), (8192, 8192, 30720)]  # fmt: skip
"""(M, N, K) of the issue, N and K global."""


def parse_shapes(text: str | None) -> list[tuple[int, int, int]]:
    """``"M,N,K;M,N,K"`` -> shapes (the seed shapes when empty)."""
    if not text:
        return list(SEED_SHAPES)
    return [tuple(int(x) for x in part.split(",")) for part in text.split(";") if part]  # type: ignore[misc]


def setup_distributed(heap_size: str) -> None:
    """torchrun glue: bind the GPU, start NCCL and triton_dist."""
    import datetime as _dt

    from triton_dist import runtime as rt

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank), timeout=_dt.timedelta(seconds=300))
    rt.init(heap_size=heap_size)


def log0(message: str) -> None:
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)
