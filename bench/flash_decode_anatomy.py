"""Where flash_decode's time goes on one GPU: a context sweep split into a fixed cost and a streaming rate.

    torchrun --nproc-per-node=1 bench/flash_decode_anatomy.py [--batches 1 8] [--contexts-k 1 4 16 32 64 128]
        [--sweep 8,16,32/64/3] [--out-dir bench/results]
    torchrun --nproc-per-node=1 bench/flash_decode_anatomy.py --profile --batches 1 --contexts-k 32   # under ncu

Per (batch, context) on this rank's GPU, graphed (10 calls per CUDA graph, median of >= 20 replays): flash_decode
on a cache of ``context`` tokens (at world size W, each rank holds ``context`` tokens: the per-rank part of a
``W x context`` cache) and the single-GPU baseline of bench/flash_decode.py (the faster SDPA layout) on the same
cache. A least-squares line ``time = fixed + context / rate`` over the sweep gives each implementation's fixed cost
(what a call costs beyond streaming K and V: launch, ramp-up, partial records, flags, combine) and its streaming rate
(bytes of K and V per second). At world size 2 the issue's bar (1.8x over the single GPU on the whole cache) needs
``fixed_ours + C / rate_ours <= (fixed_base + 2C / rate_base) / 1.8`` at per-rank context C: the table prints what
the line predicts for that ratio (the cross-GPU flag and record latency not included: that needs 2 GPUs).

``--profile`` only runs flash_decode, then the baseline's GQA layout, 23 times each per shape (eagerly, no timing,
no graphs), for a profiler such as ``ncu -k regex:_flash_decode_kernel`` (scripts/profile_flash_decode.sh).
Writes ``flash_decode_anatomy.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, describe_machine, markdown_table, write_json  # noqa: E402
from _floors import flag_round_us  # noqa: E402
from flash_decode import DIM, KV_HEADS, Q_HEADS, sdpa_gqa, sdpa_grouped  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402
from triton_dist.testing.timing import graphed_us  # noqa: E402

fd = importlib.import_module("triton_dist.ops.flash_decode.config")  # COMBINE_TILE_FLOATS: read by combine_chunk
fd_op = importlib.import_module("triton_dist.ops.flash_decode.op")

BAR = 1.8
"""The issue's ratio over the single-GPU kernel on the whole cache, at world size 2."""


def kv_bytes(batch: int, context: int) -> int:
    return 2 * batch * KV_HEADS * context * DIM * 2  # K and V, bf16


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through the points."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    var = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    return mean_y - slope * mean_x, slope


def sweep_config(text: str) -> fd.FlashDecodeConfig:
    """``SPLITS`` or ``SPLITS/BLOCK_N/STAGES`` as a config (NVIDIA's default key block, 3 stages)."""
    fields = [int(part) for part in text.split("/")]
    splits, block_n, stages = (fields + [fd.default_config("cuda").block_n, 3])[:3] if len(fields) == 1 else fields
    return fd.FlashDecodeConfig(splits=splits, block_n=block_n, num_stages=stages)


def measure(batch: int, context: int, iters: int, sweep: list[str], profile: bool) -> dict | None:
    """The graphed times of one (batch, context), or None after only running flash_decode (``profile``)."""
    gen = torch.Generator(device="cuda").manual_seed(batch * 13 + context)
    q = torch.randn(batch, Q_HEADS, DIM, device="cuda", generator=gen).to(torch.bfloat16)
    k = torch.randn(batch, KV_HEADS, context, DIM, device="cuda", generator=gen).to(torch.bfloat16)
    v = torch.randn(batch, KV_HEADS, context, DIM, device="cuda", generator=gen).to(torch.bfloat16)
    lengths = torch.full((batch,), context, dtype=torch.int32, device="cuda")
    if profile:
        for _ in range(23):
            fd_op.flash_decode(q, k, v, lengths)
        for _ in range(23):
            sdpa_gqa(q, k, v)
        torch.cuda.synchronize()
        rank0_print(f"PROFILED B={batch} ctx={context >> 10}k")
        return None
    row: dict = {"batch": batch, "context": context}
    row["flash_decode"] = graphed_us(lambda: fd_op.flash_decode(q, k, v, lengths), replays=iters)
    out = torch.empty_like(q)
    for text in sweep:
        config = sweep_config(text)
        row[f"config {text}"] = graphed_us(lambda c=config: fd_op._run(q, k, v, lengths, out, None, c), replays=iters)
    row["single GPU"] = min(graphed_us(lambda f=f: f(q, k, v), replays=iters) for f in (sdpa_gqa, sdpa_grouped))
    rank0_print(
        f"RESULT B={batch} ctx={context >> 10}k: flash_decode {row['flash_decode']:.1f} us, single GPU "
        f"{row['single GPU']:.1f} us" + "".join(f", config {t} {row[f'config {t}']:.1f}" for t in sweep)
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--contexts-k", type=int, nargs="+", default=[1, 4, 16, 32, 64, 128])
    parser.add_argument(
        "--sweep",
        default="",
        help="comma-separated configs also timed (graphed): SPLITS or SPLITS/BLOCK_N/STAGES (default key block, "
        "3 stages)",
    )
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument(
        "--combine-floats", type=int, default=0, help="floats a combiner loads per step (0: the op's own)"
    )
    parser.add_argument("--profile", action="store_true", help="only run flash_decode eagerly, for a profiler")
    parser.add_argument("--out-dir", default=str(RESULTS))
    args = parser.parse_args()
    sweep = [text for text in args.sweep.split(",") if text]
    if args.combine_floats:
        fd.COMBINE_TILE_FLOATS = args.combine_floats  # read by combine_chunk() at each call's first launch
    world = setup_distributed(heap_size="1G")
    started = time.time()
    # At several ranks, the synchronization floor beside the fit: what one flag round between the GPUs costs alone.
    floor = flag_round_us(world.world_size) if world.world_size > 1 and not args.profile else None
    if floor is not None:
        rank0_print(f"RESULT flag round alone (graphed): {floor:.2f} us")
    rows = []
    for batch in args.batches:
        for context in (c << 10 for c in args.contexts_k):
            row = measure(batch, context, args.iters, sweep, args.profile)
            if row:
                rows.append(row)
            torch.cuda.empty_cache()
    if not args.profile and rt.current_world().rank == 0:
        write_results(Path(args.out_dir), rows, sweep, started, floor)
    rt.barrier()
    return 0


def write_results(out_dir: Path, rows: list[dict], sweep: list[str], started: float, floor: float | None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    ranks = rt.current_world().world_size
    where = f"{ranks} x" if ranks > 1 else "one"
    lines = [
        f"# flash_decode's fixed cost and streaming rate on {where} {torch.cuda.get_device_name()} (GQA "
        f"{Q_HEADS}/{KV_HEADS} heads, head dim {DIM}, bf16)",
        "",
        *describe_machine(started),
        "- µs per call, graphed (10 calls per CUDA graph, median of >= 20 replays).",
        "- Context: the tokens of each sequence in this GPU's cache.",
        "",
    ]
    headers = ["batch", "context", "flash_decode", "single GPU", *(f"config {t}" for t in sweep)]
    table = [[r["batch"], f"{r['context'] >> 10}k", *(f"{r[h]:.1f}" for h in headers[2:])] for r in rows]
    lines += [markdown_table(headers, table), ""]
    fit_headers = ["batch", "impl", "fixed µs", "TB/s", "predicted 2-GPU ratio at 128k total", "at 256k total"]
    fits = []
    for batch in sorted({r["batch"] for r in rows}):
        sel = [r for r in rows if r["batch"] == batch]
        lines_of = {}
        for impl in ("flash_decode", "single GPU"):
            fixed, slope = fit_line([kv_bytes(batch, r["context"]) for r in sel], [r[impl] for r in sel])
            lines_of[impl] = (fixed, slope)
        for impl, (fixed, slope) in lines_of.items():
            cells = [batch, impl, f"{fixed:.1f}", f"{1e-6 / slope:.2f}" if slope > 0 else "-"]
            if impl == "flash_decode":
                base_fixed, base_slope = lines_of["single GPU"]
                for total in (128 << 10, 256 << 10):
                    ours = fixed + slope * kv_bytes(batch, total // 2)
                    cells.append(f"{(base_fixed + base_slope * kv_bytes(batch, total)) / ours:.2f}")
            else:
                cells += ["", ""]
            fits.append(cells)
    lines += [
        "Least-squares line `time = fixed + bytes / rate` over the contexts above (bytes: K and V read). The "
        f"prediction is the single-GPU line on the whole cache over flash_decode's line on half of it (the issue's "
        f"bar: {BAR}x), without the cross-GPU latency of the records and flags.",
        "",
        markdown_table(fit_headers, fits),
    ]
    if floor is not None:
        lines += [
            "",
            f"At {ranks} ranks flash_decode's line includes the cross-GPU records and flags. The flag round alone "
            f"(every rank sets a flag on every rank, then waits for all; `bench/_floors.py`), same run: {floor:.2f} "
            "µs graphed.",
        ]
    (out_dir / "flash_decode_anatomy.md").write_text("\n".join(lines) + "\n")
    write_json(out_dir / "flash_decode_anatomy.json", rows, started)


if __name__ == "__main__":
    main_guard(main)
