"""The decode epilogue: triton_dist's fused all-reduce + residual add + RMSNorm against the unfused paths, one run.

    torchrun --nproc-per-node=2 bench/ar_rmsnorm.py [--hidden 8192] [--iters 20] [--out-dir bench/results]

Per M in (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096, 8192), hidden 8192, bf16, each implementation timed graphed
(10 calls per CUDA graph, median of >= 20 replays) and eager (events around one call after a barrier), max over ranks:

- ``fused``: ``triton_dist.ops.all_reduce_residual_rmsnorm(x, residual, weight)`` (one kernel);
- ``fused fp8``: ``all_reduce_residual_rmsnorm_fp8`` (the same with an e4m3 output and per-token scales);
- ``fused LL (forced)``: the fused op with its low-latency one-shot forced (``ArRmsNormConfig("one_shot_ll", ...)``:
  the epoch inside the data words, no flag round, each row split over up to 16 programs at small M (``LL grid``
  in the table: groups x slices); never chosen by default yet), at M <= 256 (``LL_ROWS``);
- ``fused LL unsplit (forced)``: the same with one program per row (``ll_slices=1``), what the split is measured
  against;
- ``fused LL 1 reader (forced)``: the same with ``ll_single_reader=True``: the row's pushes split over up to 16
  programs (the launch within 128), but only the row's first program polls the row, norms it and writes both
  outputs (``LL reader grid``: groups x slices);
- ``fused LL atomic (forced)``: the same with ``ll_reduce="atomic"``: each of a row's programs polls only its
  slice, writes its slice of the new residual and its partial sum of squares, and counts its arrival with an
  atomic; the last to arrive norms the row (``LL atomic grid``: groups x slices);
- ``fused LL spin (forced)``: the same with ``ll_reduce="spin"``: as the atomic one up to the arrival, then every
  program of the row waits for the others' partials and norms its own slice (its warps follow the slice: 4 warps,
  a row over up to 16 programs, the launch within 128; ``LL spin grid``: groups x slices);
- ``fused LL spin words (forced)``: the same with ``ll_reduce="spin_words"``: the partial sums of squares travel as
  epoch-tagged words the row's programs poll, no counter (its grid: the spin one's);
- ``our AR``: ``triton_dist.ops.all_reduce(x, out=)`` alone (what the fused op must not cost much more than);
- ``our AR + add + RMSNorm``: our all-reduce, then ``torch.add`` of the residual and
  ``torch.nn.functional.rms_norm`` (our unfused path);
- ``NCCL + add + RMSNorm``: ``dist.all_reduce`` (in place, of a buffer) then the same;
- ``symm-mem one-shot + add + RMSNorm``: ``torch.ops.symm_mem.one_shot_all_reduce`` of a symmetric buffer (where
  this torch has it) then the same.

At the ``--sweep-rows`` M values, the fused op is also timed (graphed) with each algorithm at 4, 8 and 16 warps
(``SWEEP``), beside the config a call chooses and the all-reduce's own config for the size: what the choice leaves.

Before timing, each M's fused result (and the forced LL variant's) is compared with the unfused torch path's (an
``INFO`` line if they differ).
The bar (issue 28), graphed: fused / our AR <= 1.2 and fused / (NCCL + add + RMSNorm) <= 0.45 at M <= 128; the fused
op never slower than our unfused path at any M (graphed and eager). Each line names the M (and mode) of its worst
ratio. Writes ``ar_rmsnorm_<W>x<GPU>.md``, ``.png`` and
``.json`` to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    GRAPHED_AND_EAGER,
    add_decode_arguments,
    describe_machine,
    panel_chart,
    run_date,
    time_graphed_and_eager,
    write_json,
    write_on_rank0_and_finish,
)

from triton_dist.ops import all_reduce, all_reduce_residual_rmsnorm, all_reduce_residual_rmsnorm_fp8  # noqa: E402
from triton_dist.ops.all_reduce import select_config  # noqa: E402
from triton_dist.ops.ar_rmsnorm import ArRmsNormConfig, ArRmsNormError  # noqa: E402
from triton_dist.ops.ar_rmsnorm.config import ALGORITHMS, SLOTS, choose_config, ll_launch  # noqa: E402
from triton_dist.ops.ar_rmsnorm.op import _run  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402
from triton_dist.testing.timing import graphed_us  # noqa: E402

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096, 8192)
EPS = 1e-6
FUSED = "fused"
FP8 = "fused fp8"
FUSED_LL = "fused LL (forced)"
FUSED_LL_UNSPLIT = "fused LL unsplit (forced)"
FUSED_LL_READER = "fused LL 1 reader (forced)"
FUSED_LL_ATOMIC = "fused LL atomic (forced)"
FUSED_LL_SPIN = "fused LL spin (forced)"
FUSED_LL_SPIN_WORDS = "fused LL spin words (forced)"
OURS = "our AR"
UNFUSED = "our AR + add + RMSNorm"
NCCL = "NCCL + add + RMSNorm"
SYMM = "symm-mem one-shot + add + RMSNorm"
NAMES = (
    FUSED,
    FP8,
    FUSED_LL,
    FUSED_LL_UNSPLIT,
    FUSED_LL_READER,
    FUSED_LL_ATOMIC,
    FUSED_LL_SPIN,
    FUSED_LL_SPIN_WORDS,
    OURS,
    UNFUSED,
    NCCL,
    SYMM,
)
LL_NAMES = (FUSED_LL, FUSED_LL_UNSPLIT, FUSED_LL_READER, FUSED_LL_ATOMIC, FUSED_LL_SPIN, FUSED_LL_SPIN_WORDS)
"""The forced LL variants (timed at M <= ``LL_ROWS``)."""
LL_ROWS = 256
"""The forced LL variant is timed at M <= 256 (the most rows its 256 programs hold at hidden 8192)."""
LL_CONFIG = ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], 4)
"""The forced LL variant's config: up to 256 programs, a row split over up to 16 of them while the launch stays
within 32 (``ar_rmsnorm.config.ll_launch``), warps raised to the row's words as needed (``ll_num_warps``: 8 at
hidden 8192 bf16)."""
LL_UNSPLIT = ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], 4, ll_slices=1)
"""The LL variant with one program per row (as before the split), timed beside it."""
LL_READER = ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], 4, ll_single_reader=True)
"""The LL variant with one reader per row (its other programs only push), timed beside both."""
LL_ATOMIC = ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], 4, ll_reduce="atomic")
"""The LL variant whose programs poll only their slice and the last of a row's to arrive norms it, timed beside."""
LL_SPIN = ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], 4, ll_reduce="spin")
"""The LL variant whose programs poll only their slice, wait for the row's others and each norm their slice: at 4
warps a program (``ll_launch_warps``: a spinning program holds only its slice), as all_reduce's LL spreads a small
message over many programs of few warps."""
LL_SPIN_WORDS = ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], 4, ll_reduce="spin_words")
"""The spin variant with its partials exchanged as epoch-tagged words (no counter), timed beside it."""
BAR_ROWS = 128
"""The bar's ratios against our all-reduce and NCCL's path hold at M <= 128 (issue 28)."""
SWEEP = (
    [ArRmsNormConfig(algo, SLOTS[algo], warps) for algo in ALGORITHMS for warps in (4, 8, 16)]
    + [ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], 8, ll_slices=slices) for slices in (1, 4, 16)]
    + [ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], warps, ll_single_reader=True) for warps in (8, 16)]
    + [
        ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], warps, ll_reduce=reduce)
        for reduce in ("spin", "spin_words")
        for warps in (1, 2, 8)
    ]
    + [
        ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], 2, ll_reduce="spin_words", ll_slices=slices)
        for slices in (4, 8)
    ]
)
"""The fused op's configs also timed (graphed) at the ``--sweep-rows`` M values: what the chosen config (the
all-reduce's algorithm for the size, warps by row length) leaves on the table; and the LL variant with its rows
split into 1, 4 and 16 slices whatever the programs (``ll_slices``: up to 16 x M programs), what its own bound on
the split (``LL_SPLIT_PROGRAMS``) leaves; and the single reader at 8 and 16 warps (16: half the reader's words per
thread, a row split into at most 8 slices); and the spin variants at 1, 2 and 8 warps a program (their columns:
4), and spin_words at 2 warps (the default) with each row split into 4 or 8 slices rather than 16: fewer programs
to exchange the partial sums of squares between (issue 28's M <= 4 gap)."""
SWEEP_ROWS = (1, 4, 16, 64, 128, 256, 1024, 8192)


def gpu_tag(world_size: int) -> str:
    """``2xH100``, ``2xH200``, ... (the GPU's model from its name; ``GPU`` where none is recognised)."""
    name = torch.cuda.get_device_name()
    model = next((word for word in name.replace("-", " ").split() if word[:1] in "HABL" and word[1:2].isdigit()), "")
    return f"{world_size}x{model or 'GPU'}"


def add_rms_norm(reduced: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """torch's epilogue: the residual add, then RMSNorm of the sum (returns normed, new residual)."""
    h = torch.add(reduced, residual)
    return torch.nn.functional.rms_norm(h, (h.shape[-1],), weight, EPS), h


def implementations(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, group_name: str, symm_mem: Any
) -> dict[str, Callable[[], object]]:
    """What is timed at one M (see the module docstring); symm-mem only where it can run (an INFO line if not)."""
    reduced = torch.empty_like(x)
    nccl_buffer = torch.zeros_like(x)  # summed in place every call: zeros stay zeros (no overflow over the reps)
    impls: dict[str, Callable[[], object]] = {
        FUSED: lambda: all_reduce_residual_rmsnorm(x, residual, weight, EPS),
        FP8: lambda: all_reduce_residual_rmsnorm_fp8(x, residual, weight, EPS),
        FUSED_LL: lambda: _run(x, residual, weight, EPS, LL_CONFIG),
        FUSED_LL_UNSPLIT: lambda: _run(x, residual, weight, EPS, LL_UNSPLIT),
        FUSED_LL_READER: lambda: _run(x, residual, weight, EPS, LL_READER),
        FUSED_LL_ATOMIC: lambda: _run(x, residual, weight, EPS, LL_ATOMIC),
        FUSED_LL_SPIN: lambda: _run(x, residual, weight, EPS, LL_SPIN),
        FUSED_LL_SPIN_WORDS: lambda: _run(x, residual, weight, EPS, LL_SPIN_WORDS),
        OURS: lambda: all_reduce(x, out=reduced),
        UNFUSED: lambda: add_rms_norm(all_reduce(x, out=reduced), residual, weight),
        NCCL: lambda: (dist.all_reduce(nccl_buffer), add_rms_norm(nccl_buffer, residual, weight)),
    }
    if x.shape[0] > LL_ROWS:
        for name in LL_NAMES:
            del impls[name]
    if symm_mem is not None and hasattr(torch.ops.symm_mem, "one_shot_all_reduce"):
        try:
            buffer = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)
            symm_mem.rendezvous(buffer, group_name)
            buffer.copy_(x)
            one_shot = torch.ops.symm_mem.one_shot_all_reduce
            impls[SYMM] = lambda: add_rms_norm(one_shot(buffer, "sum", group_name), residual, weight)
        except Exception as error:  # noqa: BLE001 (a baseline that cannot run is reported, not fatal)
            rank0_print(f"INFO symm-mem at {list(x.shape)}: {type(error).__name__}: {error}")
    return impls


def fused_matches_torch(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, config: ArRmsNormConfig | None = None
) -> str:
    """'' if the fused op's outputs (with ``config``; None: the chosen one) match the unfused torch path's (NCCL's
    sum of the same x) on this rank, else what differs."""
    if config is None:
        normed, new_residual = all_reduce_residual_rmsnorm(x, residual, weight, EPS)
    else:
        normed, new_residual = _run(x, residual, weight, EPS, config)
    total = x.float()
    dist.all_reduce(total)
    want_normed, want_residual = add_rms_norm(total, residual.float(), weight.float())
    problems = []
    for name, got, want in (("normed", normed, want_normed), ("new_residual", new_residual, want_residual)):
        if not torch.allclose(got.float(), want, rtol=2e-2, atol=2e-2):
            problems.append(f"{name}: max |diff| {float((got.float() - want).abs().max()):.3g}")
    return "; ".join(problems)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--rows", default=",".join(map(str, ROWS)), help="comma-separated M values")
    parser.add_argument(
        "--sweep-rows", default=",".join(map(str, SWEEP_ROWS)), help="M values where every SWEEP config is timed too"
    )
    add_decode_arguments(parser)
    args = parser.parse_args()
    world = setup_distributed(heap_size="2G")
    group_name = dist.group.WORLD.group_name
    dtype = torch.bfloat16
    started = time.time()
    symm_mem = None
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError as error:
        rank0_print(f"INFO symm_mem unavailable: {error}")

    rows = []
    for m in (int(value) for value in args.rows.split(",")):
        shape = (m, args.hidden)
        generator = torch.Generator(device="cuda").manual_seed(1000 * world.rank + m)
        x = torch.randn(shape, generator=generator, device="cuda").to(dtype)
        shared = torch.Generator(device="cuda").manual_seed(m)  # the residual and weight alike on every rank
        residual = torch.randn(shape, generator=shared, device="cuda").to(dtype)
        weight = (torch.rand(args.hidden, generator=shared, device="cuda") + 0.5).to(dtype)
        problem = fused_matches_torch(x, residual, weight)
        if problem:
            print(f"INFO rank {world.rank} M={m}: the fused op differs from torch: {problem}", flush=True)
        for forced, what in (
            (LL_CONFIG, "LL variant"),
            (LL_READER, "LL single-reader variant"),
            (LL_ATOMIC, "LL atomic variant"),
            (LL_SPIN, "LL spin variant"),
            (LL_SPIN_WORDS, "LL spin words variant"),
        ):
            if m > LL_ROWS:
                break
            try:
                problem = fused_matches_torch(x, residual, weight, forced)
            except Exception as error:  # noqa: BLE001 (reported, not fatal: its timing reports it too)
                problem = f"{type(error).__name__}: {error}"
            if problem:
                print(f"INFO rank {world.rank} M={m}: the forced {what} differs from torch: {problem}", flush=True)
        nbytes = x.numel() * x.element_size()
        config = choose_config(nbytes, m, x.device, world.world_size, x.element_size(), emulated=False)
        ours = select_config(nbytes, x.device, world.world_size, x.element_size())
        row: dict[str, object] = {
            "M": float(m),
            "config": f"{config.algo} {config.programs}x{config.num_warps}w",
            "AR config": f"{ours.algo} {ours.programs}x{ours.num_warps}w",
            "LL grid": ll_grid(m, args.hidden, x.element_size()),
            "LL reader grid": ll_grid(m, args.hidden, x.element_size(), LL_READER),
            "LL atomic grid": ll_grid(m, args.hidden, x.element_size(), LL_ATOMIC),
            "LL spin grid": ll_grid(m, args.hidden, x.element_size(), LL_SPIN),
        }
        impls = implementations(x, residual, weight, group_name, symm_mem)
        time_graphed_and_eager(row, impls, args.iters, f"at M={m} failed")
        if str(m) in args.sweep_rows.split(","):
            for forced in SWEEP:
                if forced.algo == "one_shot_ll" and m > LL_ROWS:
                    continue  # one round per program: past its rows (an error that says so, not a time)
                try:
                    row[f"sweep {sweep_name(forced)}"] = graphed_us(
                        lambda c=forced, x=x, r=residual, w=weight: _run(x, r, w, EPS, c), replays=args.iters
                    )
                except Exception as error:  # noqa: BLE001 (a config that cannot run is reported, not fatal)
                    rank0_print(f"INFO {forced} at M={m}: {type(error).__name__}: {error}")
        rows.append(row)
        graphed = ", ".join(f"{name} {row[f'{name} graphed']:.1f}" for name in NAMES if f"{name} graphed" in row)
        rank0_print(f"RESULT M={m} graphed µs: {graphed}")
        del x, residual, weight, impls
        torch.cuda.empty_cache()
        dist.barrier()

    rank0_print(f"RESULT bar: {'; '.join(bar_summary(rows))}")
    return write_on_rank0_and_finish(lambda: write_results(Path(args.out_dir), rows, world.world_size, args, started))


def ll_grid(rows: int, hidden: int, itemsize: int, config: ArRmsNormConfig = LL_CONFIG) -> str:
    """A forced LL variant's grid at M = ``rows`` (``config``: the split one unless said): "groups x slices" ("-"
    where it cannot run)."""
    try:
        launch = ll_launch(rows, hidden, itemsize, config, emulated=False)
    except ArRmsNormError:
        return "-"
    return f"{launch.groups}x{launch.slices}"


def sweep_name(config: ArRmsNormConfig) -> str:
    """A swept config's column: "one_shot 8w", "one_shot_ll 8w 16 slices", "one_shot_ll 16w 1 reader",
    "one_shot_ll 1w spin"."""
    name = f"{config.algo} {config.num_warps}w" + (f" {config.ll_slices} slices" if config.ll_slices else "")
    name += " 1 reader" if config.ll_single_reader else ""
    return name + (f" {config.ll_reduce}" if config.ll_reduce != "row" else "")


def us(row: dict[str, object], key: str) -> float:
    """The µs measured under ``key`` ("<name> graphed" / "<name> eager"), NaN where it was not."""
    value = row.get(key)
    return value if isinstance(value, float) else float("nan")


def ratio(row: dict[str, object], numerator: str, denominator: str, mode: str = "graphed") -> float:
    """``numerator``'s time over ``denominator``'s in ``mode`` (NaN where either is missing)."""
    return us(row, f"{numerator} {mode}") / us(row, f"{denominator} {mode}")


def worst_ratio(rows: list[dict[str, object]], numerator: str, denominator: str, modes: tuple[str, ...]) -> str:
    """The largest ``numerator`` / ``denominator`` ratio over ``rows`` and ``modes``, with where it was: "1.13 at
    M=4 eager" ("nan" where a ratio is missing)."""
    found = [(ratio(r, numerator, denominator, mode), us(r, "M"), mode) for r in rows for mode in modes]
    if not found or any(value != value for value, _, _ in found):
        return "nan"
    value, m, mode = max(found)
    return f"{value:.2f} at M={m:.0f}" + (f" {mode}" if len(modes) > 1 else "")


def bar_summary(rows: list[dict[str, object]]) -> list[str]:
    """The bar's three parts and the forced LL variant's ratio, each with the worst ratio measured, the M (and
    mode) where it was, and PASS / FAIL."""
    small = [r for r in rows if us(r, "M") <= BAR_ROWS]
    verdict = {True: "PASS", False: "FAIL"}

    graphed, both = ("graphed",), ("graphed", "eager")
    specs = [
        (f"fused / our AR at M <= {BAR_ROWS}", small, FUSED, OURS, 1.2, graphed),
        (f"fused / NCCL + add + RMSNorm at M <= {BAR_ROWS}", small, FUSED, NCCL, 0.45, graphed),
        ("fused / our unfused path, every M, graphed and eager", rows, FUSED, UNFUSED, 1, both),
        (f"(not the default) fused LL (forced) / our AR at M <= {BAR_ROWS}", small, FUSED_LL, OURS, 1.2, graphed),
        (
            f"(not the default) {FUSED_LL_UNSPLIT} / our AR at M <= {BAR_ROWS}",
            small,
            FUSED_LL_UNSPLIT,
            OURS,
            1.2,
            graphed,
        ),
        (
            f"(not the default) {FUSED_LL_READER} / our AR at M <= {BAR_ROWS}",
            small,
            FUSED_LL_READER,
            OURS,
            1.2,
            graphed,
        ),
        (
            f"(not the default) {FUSED_LL_ATOMIC} / our AR at M <= {BAR_ROWS}",
            small,
            FUSED_LL_ATOMIC,
            OURS,
            1.2,
            graphed,
        ),
        (f"(not the default) {FUSED_LL_SPIN} / our AR at M <= {BAR_ROWS}", small, FUSED_LL_SPIN, OURS, 1.2, graphed),
        (
            f"(not the default) {FUSED_LL_SPIN_WORDS} / our AR at M <= {BAR_ROWS}",
            small,
            FUSED_LL_SPIN_WORDS,
            OURS,
            1.2,
            graphed,
        ),
    ]
    lines = []
    for what, subset, numerator, denominator, bar, modes in specs:
        worst = worst_ratio(subset, numerator, denominator, modes)
        lines.append(f"{what}: worst {worst} (<= {bar:g}: {verdict[float(worst.split()[0]) <= bar]})")
    return lines


def write_results(
    out_dir: Path, rows: list[dict[str, object]], world_size: int, args: argparse.Namespace, started: float
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name()
    stem = out_dir / f"ar_rmsnorm_{gpu_tag(world_size)}"

    def cell(row: dict[str, object], key: str) -> str:
        value = us(row, key)
        return f"{value:.1f}" if value == value else "-"

    lines = [
        f"# all-reduce + residual add + RMSNorm (decode epilogue), {world_size} x {gpu}, hidden {args.hidden}, bf16",
        "",
        *describe_machine(started),
        *GRAPHED_AND_EAGER,
        "- fused: `all_reduce_residual_rmsnorm` (one kernel); fused fp8: its e4m3 variant; fused LL (forced): the",
        f"  fused op with algo {LL_CONFIG.algo} forced ({LL_CONFIG.programs} programs, M <= {LL_ROWS}; not the",
        "  default), each row split over the programs of the LL grid's slices (groups x slices); fused LL unsplit",
        "  (forced): the same, one program per row; fused LL 1 reader (forced): the same with ll_single_reader (the",
        "  row's first program alone receives, norms and writes it; the others only push; LL reader grid); fused",
        "  LL atomic (forced): the same with ll_reduce=atomic (each program polls only its slice, the last of a",
        "  row's programs to arrive norms it from the slices' partial sums of squares; LL atomic grid); fused LL",
        "  spin (forced): the same with ll_reduce=spin (each program polls only its slice, waits for the row's",
        "  other programs' partial sums of squares and norms its own slice; LL spin grid); fused LL spin words",
        "  (forced): the same with ll_reduce=spin_words (the partial sums of squares as epoch-tagged words, no",
        "  counter);",
        "  our AR: `all_reduce` alone; the `+ add + RMSNorm` paths:",
        "  `torch.add` of the residual, then `torch.nn.functional.rms_norm`.",
        "",
        "Bar (issue 28), graphed unless said:",
        "",
        *[f"- {line}" for line in bar_summary(rows)],
        "",
        "| M | " + " | ".join(f"{name} graphed" for name in NAMES) + " | fused / our AR | fused / NCCL+ | "
        "fused / unfused | fused / unfused eager | LL / our AR | LL reader / our AR | LL atomic / our AR | "
        "LL spin / our AR | LL spin words / our AR | LL grid | LL reader grid | LL atomic grid | LL spin grid | "
        "config |",
        "|---" * (len(NAMES) + 15) + "|",
    ]
    for row in rows:
        cells = [f"{us(row, 'M'):.0f}"] + [cell(row, f"{name} graphed") for name in NAMES]
        cells += [f"{ratio(row, FUSED, den):.2f}" for den in (OURS, NCCL, UNFUSED)]
        cells += [f"{ratio(row, FUSED, UNFUSED, 'eager'):.2f}", f"{ratio(row, FUSED_LL, OURS):.2f}"]
        cells += [f"{ratio(row, FUSED_LL_READER, OURS):.2f}", f"{ratio(row, FUSED_LL_ATOMIC, OURS):.2f}"]
        cells += [f"{ratio(row, FUSED_LL_SPIN, OURS):.2f}", f"{ratio(row, FUSED_LL_SPIN_WORDS, OURS):.2f}"]
        cells += [str(row["LL grid"]), str(row.get("LL reader grid", "-")), str(row.get("LL atomic grid", "-"))]
        cells += [str(row.get("LL spin grid", "-"))]
        cells += [str(row["config"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Eager, µs:", "", "| M | " + " | ".join(f"{name} eager" for name in NAMES) + " |"]
    lines.append("|---" * (len(NAMES) + 1) + "|")
    for row in rows:
        lines.append("| " + " | ".join([f"{us(row, 'M'):.0f}"] + [cell(row, f"{name} eager") for name in NAMES]) + " |")
    swept = [r for r in rows if any(str(key).startswith("sweep ") for key in r)]
    if swept:
        names = [sweep_name(config) for config in SWEEP]
        lines += ["", "The fused op's configs (all programs; graphed µs) beside the chosen one:", ""]
        lines += ["| M | fused (chosen) | " + " | ".join(names) + " | chosen | all_reduce's |"]
        lines += ["|---" * (len(names) + 4) + "|"]
        for row in swept:
            cells = [f"{us(row, 'M'):.0f}", cell(row, f"{FUSED} graphed")]
            cells += [cell(row, f"sweep {name}") for name in names] + [str(row["config"]), str(row["AR config"])]
            lines.append("| " + " | ".join(cells) + " |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    write_json(stem.with_suffix(".json"), rows, started)
    ms = [us(r, "M") for r in rows]
    panels: list[tuple[str, list[float], dict[str, list[float]]]] = [
        (
            f"{mode}, µs per call",
            ms,
            {name: [us(r, f"{name} {mode}") for r in rows] for name in NAMES},
        )
        for mode in ("graphed", "eager")
    ]
    panels.append(
        (
            "graphed ratios (bar: 1.2, 0.45 at M <= 128; 1)",
            ms,
            {f"fused / {den}": [ratio(r, FUSED, den) for r in rows] for den in (OURS, NCCL, UNFUSED)}
            | {f"{name} / our AR": [ratio(r, name, OURS) for r in rows] for name in LL_NAMES},
        )
    )
    panel_chart(
        stem.with_suffix(".png"),
        panels,
        title=f"all-reduce + residual + RMSNorm, {world_size} x {gpu}, hidden {args.hidden} ({run_date(started)})",
        xlabel="M (tokens)",
        ylabel="µs / ratio",
        panel_size=(6.5, 4.5),
        logy=True,
        legend_on_first_only=False,
    )


if __name__ == "__main__":
    main_guard(main)
