"""What the benchmarks under bench/ share: arguments, timing, the header of a results file, tables and charts.

Timing lives in ``triton_dist.testing.timing``: ``time_ms`` (CUDA events, median of ``reps`` calls, each after a
device barrier, max over ranks), ``eager_us`` (one call from an idle GPU, the host's launch cost included) and
``graphed_us`` (CUDA-graph replays). ``time_ms`` and ``eager_us`` are re-exported here for the benchmarks that
import them from this module.

Results: ``describe_machine`` gives the header every results file starts with (date, machine, software, commit,
command); ``markdown_table``, ``bar_chart`` and ``panel_chart`` write the table and the PNG; ``write_json`` the raw
rows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch
import torch.distributed as dist

from triton_dist.testing.timing import eager_us, graphed_us, time_ms

__all__ = ["eager_us", "graphed_us", "time_ms"]  # re-exported (see the module docstring); the rest is defined here

RESULTS = Path(__file__).resolve().parent / "results"
MULTICAST_SWITCHES = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")
"""The environment variables that turn NVLink multicast off (results name their values)."""

SEED_SHAPES = [(8192, 4096, 12288), (8192, 4096, 14336), (8192, 3584, 14336), (8192, 4608, 36864),
               (8192, 8192, 28672), (8192, 8192, 30720)]  # fmt: skip
"""(M, N, K) of the issue, N and K global."""


def add_shape_arguments(parser: argparse.ArgumentParser, *, reps: int) -> None:
    """``--shapes "M,N,K;..."`` (global N and K; default the seed shapes), ``--dtype`` and ``--reps``."""
    parser.add_argument("--shapes", default="", help='"M,N,K;..." (global N and K); default: the seed shapes')
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--reps", type=int, default=reps, help="timed calls per measurement (median; >= 20)")


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """``--iters`` (timed runs per measurement) and ``--out-dir`` (default bench/results) of the decode benchmarks."""
    parser.add_argument("--iters", type=int, default=20, help="timed runs per measurement (median; >= 20)")
    parser.add_argument("--out-dir", default=str(RESULTS))


def parse_shapes(text: str | None) -> list[tuple[int, int, int]]:
    """``"M,N,K;M,N,K"`` -> shapes (the seed shapes when empty)."""
    if not text:
        return list(SEED_SHAPES)
    return [tuple(int(x) for x in part.split(",")) for part in text.split(";") if part]  # type: ignore[misc]


def time_graphed_and_eager(
    row: dict[str, object],
    impls: Mapping[str, Callable[[], object]],
    iters: int,
    where: str,
    *,
    eager_first: bool = False,
) -> None:
    """Store ``row["<name> graphed"]`` (``graphed_us``) and ``row["<name> eager"]`` (``eager_us``) of every
    implementation; one that cannot run is reported (``INFO <name> <where>: ...`` on rank 0), not fatal."""
    from triton_dist.testing import rank0_print

    for name, fn in impls.items():
        try:
            if eager_first:
                row[f"{name} eager"] = eager_us(fn, iters)
            row[f"{name} graphed"] = graphed_us(fn, replays=iters)
            if not eager_first:
                row[f"{name} eager"] = eager_us(fn, iters)
        except Exception as error:  # noqa: BLE001 (a baseline that cannot run is reported, not fatal)
            rank0_print(f"INFO {name} {where}: {type(error).__name__}: {error}")


GRAPHED_AND_EAGER = (
    "- µs per call; graphed: 10 calls per CUDA graph, median of >= 20 replays; eager: events around one call",
    "  after a barrier, median of >= 20; max over ranks.",
)
"""How ``time_graphed_and_eager`` measures, for a results file's header."""


def write_on_rank0_and_finish(write: Callable[[], None]) -> int:
    """The end of a multi-rank benchmark: rank 0 writes the results, every rank waits for it and tears down."""
    from triton_dist import runtime as rt
    from triton_dist.testing import teardown

    if rt.current_world().rank == 0:
        write()
    rt.barrier()
    teardown()
    return 0


def run_date(started: float | None = None) -> str:
    """``started`` (seconds since the epoch; default now) as ``YYYY-MM-DD HH:MM UTC``."""
    when = datetime.datetime.fromtimestamp(time.time() if started is None else started, datetime.UTC)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def run_command() -> str:
    """The command line of this run, as typed under torchrun."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    return f"{' '.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])} (torchrun --nproc-per-node={world})"


def describe_machine(started: float | None = None) -> list[str]:
    """Markdown bullets naming the date, machine, software, commit and command of a run (a results file's header)."""
    import triton

    commit = os.environ.get("TRITON_DIST_COMMIT", "")  # a copy of the tree without .git (the GPU machines) is told
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
        except OSError:
            commit = "unknown"
    commit = commit.strip()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    world = dist.get_world_size() if dist.is_initialized() else 1
    switches = " ".join(f"{name}={os.environ.get(name, 'unset')}" for name in MULTICAST_SWITCHES)
    return [
        f"- date: {run_date(started)}",
        f"- machine: {socket.gethostname()}, {len(gpus)} x {gpus[0] if gpus else 'no GPU'}, ranks: {world}",
        f"- software: python {platform.python_version()}, torch {torch.__version__}, triton {triton.__version__}",
        f"- commit: {commit or 'unknown'}",
        f"- command: `{run_command()}` ({switches})",
    ]


def write_json(path: Path, rows: Sequence[Mapping[str, object]], started: float | None = None) -> None:
    """The raw rows with the date and command of the run."""
    path.write_text(json.dumps({"rows": rows, "date": run_date(started), "command": run_command()}, indent=1))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _pyplot():  # noqa: ANN202
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bar_chart(
    path: Path,
    title: str,
    labels: Sequence[str],
    series: dict[str, Sequence[float]],
    ylabel: str,
    line: float | None = None,
) -> None:
    """A grouped bar chart (one group per label, one bar per series) saved as PNG."""
    plt = _pyplot()
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


def panel_chart(
    path: Path,
    panels: Sequence[tuple[str, Sequence[float], Mapping[str, Sequence[float]]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    panel_size: tuple[float, float] = (6, 4),
    logy: bool = False,
    legend_on_first_only: bool = False,
) -> None:
    """Side-by-side line charts (log2 x axis), one per ``(panel title, x, {line label: y})``, saved as PNG.

    Prints an INFO line instead when matplotlib is missing (the table is the result; the chart a view of it).
    """
    try:
        plt = _pyplot()
    except ImportError as error:
        print(f"INFO no PNG: {error}")
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(panel_size[0] * len(panels), panel_size[1]), squeeze=False)
    for index, (ax, (panel_title, xs, series)) in enumerate(zip(axes[0], panels, strict=True)):
        for label, ys in series.items():
            ax.plot(list(xs), list(ys), marker="o", label=label)
        ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(panel_title)
        ax.grid(True, which="both" if logy else "major", alpha=0.3)
        if index == 0 or not legend_on_first_only:
            ax.legend(fontsize=8 if legend_on_first_only else None)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def enable_torch_symm_mem(group_name: str) -> bool:
    """Turn on PyTorch symmetric memory for ``group_name`` (its fused ops' baseline); False, said on rank 0, if not."""
    try:
        import torch.distributed._symmetric_memory as symm_mem

        symm_mem.enable_symm_mem_for_group(group_name)
    except Exception as error:  # noqa: BLE001 (a baseline that cannot run is reported, not fatal)
        log0(f"torch symmetric memory unavailable: {error}")
        return False
    return True


def log0(message: str) -> None:
    """Print on rank 0 only (or without a process group)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)
