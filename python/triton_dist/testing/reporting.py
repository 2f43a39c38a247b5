"""Benchmark output: markdown tables and PNG charts (matplotlib, imported on first use) for bench/results/.

A result file says what was run and where: pass the command, machine and date as ``notes`` (``write_markdown``
adds the date when the notes do not mention one).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def _cell(value: object) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; floats get 4 significant digits, ``|`` in cells is escaped."""
    for index, row in enumerate(rows):
        if len(row) != len(headers):
            raise ValueError(f"row {index} has {len(row)} cells for {len(headers)} headers: {row!r}")
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_markdown(
    path: str | Path,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    notes: Sequence[str] = (),
) -> Path:
    """Write ``# title``, the ``notes`` as a bullet list (command, machine, date, method) and the table."""
    notes = list(notes)
    if not any("date" in note.lower() for note in notes):
        notes.append(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    text = f"# {title}\n\n" + "".join(f"- {note}\n" for note in notes) + "\n" + markdown_table(headers, rows)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_chart(
    path: str | Path,
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    logx: bool = False,
    logy: bool = False,
) -> Path:
    """A PNG line chart: one line (with markers) per entry of ``series`` over ``x``.

    Needs matplotlib (``pip install matplotlib``); it is imported here, so the rest of the package works without.
    """
    for name, values in series.items():
        if len(values) != len(x):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(x)} x values")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise RuntimeError("write_chart needs matplotlib: pip install matplotlib") from error
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    try:
        for name, values in series.items():
            axes.plot(list(x), list(values), marker="o", label=name)
        axes.set_title(title)
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        if logx:
            axes.set_xscale("log", base=2)
        if logy:
            axes.set_yscale("log")
        axes.grid(True, alpha=0.3)
        axes.legend()
        figure.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
    return path
