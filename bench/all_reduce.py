"""All-reduce latency and bandwidth: triton_dist.ops.all_reduce vs NCCL and PyTorch symmetric memory, one run.

    torchrun --nproc-per-node=2 bench/all_reduce.py [--tune] [--out-dir bench/results]

For each message size (bf16, 8 KiB .. 64 MiB) and each implementation, two timings, both the median of >= 20
timed runs after warm-up and the max over ranks:

- eager: CUDA events around one call, after ``torch.cuda.synchronize()`` + ``dist.barrier()`` (includes the host
  launch cost, as the issue's baseline table);
- graphed: ``calls`` calls captured in one CUDA graph, replayed; per-call time = replay time / calls.

Implementations: ``dist.all_reduce`` (NCCL), ``torch.ops.symm_mem.one_shot_all_reduce`` /
``two_shot_all_reduce_`` (input already in a symm-mem buffer), ``triton_dist.ops.all_reduce`` (input off the heap:
the kernel stages it), and at <= 1 MiB the one-shot kernel reading a heap input in place (no staging; a benchmark
variant, valid here because the input never changes) to show what the fused staging copy costs, and up to its
largest message (512 KiB of bf16) the LL one-shot (``one_shot_ll``: epoch-tagged words, no flags; forced config:
the selected one if it is LL, else ``ll_config``), input off the heap.

Floors, measured in the same run (graphed): an empty kernel (what one CUDA-graph kernel node costs), and a kernel
that does only the synchronization of a one-launch all-reduce (device epoch, set this rank's flag on every rank,
wait for every rank's): no one-launch all-reduce can beat the latter, whatever it does with the data. Eager: the
empty kernel launched as the op launches (a ``LaunchPlan``) and a one-element torch op, timed as the eager columns.

``--tune`` first runs :func:`tune` over the sizes: every candidate config per size, checked against NCCL's sum, then
graphed; the fastest becomes this GPU's table (``all_reduce|table|<world size>|<GPU>`` in the user's
``tuning.json``; ``--write-package-table`` stores it in ``ops/tuned_configs.json`` instead, the committed table).
Writes ``all_reduce.md``, ``all_reduce.png`` and ``all_reduce.json`` to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    add_decode_arguments,
    describe_machine,
    eager_us,
    panel_chart,
    run_date,
    time_graphed_and_eager,
    write_json,
    write_on_rank0_and_finish,
)
from _floors import flag_round_us  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import tuning  # noqa: E402
from triton_dist.ops.all_reduce import AllReduceConfig, all_reduce  # noqa: E402
from triton_dist.ops.all_reduce import config as ar_config  # noqa: E402
from triton_dist.ops.all_reduce import op as ar_op  # noqa: E402
from triton_dist.ops.common import dispatch  # noqa: E402
from triton_dist.ops.common.launch import first_launch  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402
from triton_dist.testing.correctness import tolerances  # noqa: E402
from triton_dist.testing.timing import graphed_us  # noqa: E402

candidate_configs = ar_config.candidate_configs
SYMM_OPS = torch.ops.symm_mem

SIZES = [8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20]
SIZES += [2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20]


@triton.jit
def _empty_kernel(x_ptr):
    pass


def measure_floors(world_size: int, iters: int) -> dict[str, float]:
    """Graphed µs of the empty kernel and of the flag round (max over ranks, median of replays); eager µs (as the
    eager columns measure) of the empty kernel launched through a ``LaunchPlan`` (how the op launches) and of a
    one-element torch op (how a torch C++ op launches): what any eager call costs before its kernel does work."""
    probe = torch.zeros(1, device="cuda")
    rt.barrier()
    plan = first_launch(_empty_kernel, (1, 1, 1), {"x_ptr": probe}, 0, num_warps=1)
    floors = {
        "empty kernel": graphed_us(lambda: _empty_kernel[(1,)](probe, num_warps=1)),
        "flag round": flag_round_us(world_size),
        "empty kernel eager": eager_us(lambda: plan.launch(probe.device), iters),
        "torch op eager": eager_us(lambda: probe.add_(1.0), iters),
    }
    rt.barrier()
    return floors


def ll_config(nbytes: int, itemsize: int, world_size: int, device: torch.device) -> object | None:
    """The LL one-shot config timed at ``nbytes``: the selected config if it is LL, else 512 elements per program at
    4 warps, up to 128 programs; None past the LL one-shot's size or off NVIDIA. (With the wait watchdog on, the
    kernel is the watched one, as the op's.)"""
    numel = nbytes // itemsize
    if numel > ar_config.ll_max_numel(itemsize) or not ar_config.ll_supported():
        return None
    selected = ar_config.select_config(nbytes, device, world_size, itemsize)
    if selected.algo == "one_shot_ll":
        return selected
    return AllReduceConfig("one_shot_ll", min(ar_config.SLOTS["one_shot_ll"], triton.cdiv(numel, 512)), 4)


def agreed_correct(out: torch.Tensor, reference: torch.Tensor, world: rt.World, what: str) -> bool:
    """Whether ``out`` matches ``reference`` within ``tolerances(out.dtype)`` on every rank (a collective; a rank
    that sees a mismatch prints it)."""
    rtol, atol = tolerances(out.dtype)
    got, want = out.double(), reference.double()
    bad = ~((got - want).abs() <= atol + rtol * want.abs())  # NaN (an element never written) is bad too
    mismatches = int(bad.sum().item())
    if mismatches:
        first = int(bad.nonzero()[0, 0].item())
        print(
            f"{what}: rank {world.rank} skips it: wrong result, {mismatches} of {out.numel()} elements out of "
            f"tolerance (element {first}: {got[first].item()!r}, dist.all_reduce gives {want[first].item()!r})",
            flush=True,
        )
    everyone = torch.tensor([mismatches], dtype=torch.int64, device=out.device)
    torch.distributed.all_reduce(everyone, op=torch.distributed.ReduceOp.MAX, group=world.group)
    return int(everyone.item()) == 0


def run_config(x: torch.Tensor, out: torch.Tensor, config: AllReduceConfig) -> None:
    """The op with a forced config (its plan: the first call of each config agrees with the ranks, then relaunches)."""
    ar_op._run(x, out, "sum", config)


def tune(
    sizes: list[int], dtype: torch.dtype = torch.bfloat16, *, write_cache: bool = True, package_table: bool = False
) -> list[tuple[int, AllReduceConfig, float]]:
    """Measure every candidate config per message size (graphed, max over ranks) and keep the fastest.

    Each candidate first runs once on the message and its result is compared with ``dist.all_reduce`` of the
    same input (fp32, rounded to ``dtype``; ``triton_dist.testing.tolerances``): a candidate wrong on any rank is
    skipped on every rank (and printed), so a broken algorithm can never be chosen by its speed.

    A collective: call it on every rank with the same arguments. Returns (bytes, best config, µs) rows. With
    ``write_cache``, rank 0 stores them as this GPU's table (``ops.tuning``: the user's cache, or with
    ``package_table`` the package's ``tuned_configs.json``) and every rank's op uses it from its next call.
    """
    world = rt.current_world()
    itemsize = torch.empty((), dtype=dtype).element_size()
    rows: list[tuple[int, AllReduceConfig, float]] = []
    for nbytes in sorted(sizes):
        x = torch.randn(nbytes // itemsize, device=world.device).to(dtype)
        out = torch.empty_like(x)
        reference = x.float()
        torch.distributed.all_reduce(reference, group=world.group)
        reference = reference.to(dtype)
        best: tuple[float, AllReduceConfig] | None = None
        for config in candidate_configs(nbytes, itemsize, world.world_size):
            out.fill_(float("nan"))
            run_config(x, out, config)
            if not agreed_correct(out, reference, world, f"all_reduce tune: {config} at {nbytes} bytes"):
                continue
            us = graphed_us(lambda x=x, out=out, config=config: run_config(x, out, config))
            if best is None or us < best[0]:
                best = (us, config)
        if best is None:
            raise RuntimeError(f"all_reduce tune: no candidate config gave the right sum at {nbytes} bytes")
        rows.append((nbytes, best[1], best[0]))
    if write_cache:
        if world.rank == 0:
            gpu = torch.cuda.get_device_name(world.device)
            table = ar_config.TableEntry(tuple((nbytes, config) for nbytes, config, _ in rows))
            measured = {"us": [round(us, 2) for _, _, us in rows], "dtype": str(dtype).removeprefix("torch.")}
            path = tuning.PACKAGE_TABLE if package_table else tuning.cache_path()
            tuning.store(path, ar_config.table_key(world.world_size, gpu), table, measured)
        rt.barrier()  # the table is on disk before any rank reads it again
        ar_config.forget_tables()
        dispatch.clear_all()  # a call without a config chooses again
    return rows


def human(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="tune the config table first")
    parser.add_argument(
        "--write-package-table", action="store_true", help="with --tune: store the table in ops/tuned_configs.json"
    )
    add_decode_arguments(parser)
    args = parser.parse_args()
    world = setup_distributed(heap_size="1G")
    world_size = world.world_size
    group_name = dist.group.WORLD.group_name
    dtype = torch.bfloat16
    started = time.time()

    tuned = []
    if args.tune:
        tuned = tune(SIZES, dtype, package_table=args.write_package_table)
        rank0_print("tuned table (bytes, config, graphed us):")
        for nbytes, config, us in tuned:
            c = config
            rank0_print(f"  TUNED ({nbytes}, AllReduceConfig({c.algo!r}, {c.programs}, {c.num_warps})), {us:.2f}")

    symm_mem = None
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError as error:
        rank0_print(f"INFO symm_mem unavailable: {error}")

    floors = measure_floors(world_size, args.iters)
    rank0_print("RESULT floors (graphed): " + ", ".join(f"{k} {v:.2f} us" for k, v in floors.items()))
    rows = []
    for nbytes in SIZES:
        n = nbytes // 2
        x = torch.randn(n, device="cuda").to(dtype)
        out = torch.empty_like(x)
        impls: dict[str, Callable[[], object]] = {
            "NCCL": lambda x=x: dist.all_reduce(x),
            "triton_dist": lambda x=x, out=out: all_reduce(x, out=out),
        }
        if symm_mem is not None:
            try:
                buf = symm_mem.empty(n, dtype=dtype, device="cuda")
                symm_mem.rendezvous(buf, group_name)
                buf.copy_(x)
                impls["symm-mem one-shot"] = lambda buf=buf: SYMM_OPS.one_shot_all_reduce(buf, "sum", group_name)
                impls["symm-mem two-shot"] = lambda buf=buf: SYMM_OPS.two_shot_all_reduce_(buf, "sum", group_name)
            except Exception as error:  # noqa: BLE001 (a baseline that cannot run is reported, not fatal)
                rank0_print(f"INFO symm_mem at {nbytes}: {type(error).__name__}: {error}")
        if nbytes <= 1 << 20:
            heap_x = rt.empty(n, dtype=dtype).copy_(x)
            config = ar_config.select_config(nbytes, x.device, world_size)
            one_shot = AllReduceConfig("one_shot", config.programs, config.num_warps)
            impls["one-shot staged"] = lambda x=x, out=out, c=one_shot: ar_op._launch(x, out, c)
            impls["one-shot in place (no staging)"] = lambda h=heap_x, out=out, c=one_shot: ar_op._launch(
                h, out, c, stage=False
            )
        ll = ll_config(nbytes, 2, world_size, x.device)
        if ll is not None:
            impls["LL one-shot"] = lambda x=x, out=out, c=ll: ar_op._launch(x, out, c)
        row = {"bytes": nbytes, "config": str(ar_config.select_config(nbytes, x.device, world_size))}
        if ll is not None:
            row["LL config"] = str(ll)
        time_graphed_and_eager(row, impls, args.iters, f"at {nbytes} failed", eager_first=True)
        rows.append(row)
        rank0_print(
            f"RESULT {human(nbytes)}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items() if isinstance(v, float))
        )
        rt.barrier()

    return write_on_rank0_and_finish(
        lambda: write_results(Path(args.out_dir), rows, tuned, world_size, started, floors)
    )


def write_results(
    out_dir: Path, rows: list[dict], tuned: list, world_size: int, started: float, floors: dict[str, float]
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name()
    names = ["NCCL", "symm-mem one-shot", "symm-mem two-shot", "triton_dist", "LL one-shot"]
    lines = [
        f"# all_reduce, {world_size} x {gpu}, bf16",
        "",
        *describe_machine(started),
        "- µs per call, median of >= 20 timed runs after warm-up, max over ranks. eager: events around one call after",
        "  a barrier; graphed: 10 calls per CUDA graph, replayed. bus bw = 2 (W-1)/W x bytes / time (graphed).",
        "",
        "| bytes | " + " | ".join(f"{n} eager | {n} graphed" for n in names) + " | ours/NCCL graphed | ours/best"
        " symm graphed | ours bus GB/s | NCCL bus GB/s | config |",
        "|---" * (2 * len(names) + 6) + "|",
    ]
    for row in rows:
        cells = [human(row["bytes"])]
        for name in names:
            for mode in ("eager", "graphed"):
                cells.append(f"{row.get(f'{name} {mode}', float('nan')):.1f}")
        ours = row.get("triton_dist graphed", float("nan"))
        nccl = row.get("NCCL graphed", float("nan"))
        symm = min(row.get(f"symm-mem {a} graphed", float("inf")) for a in ("one-shot", "two-shot"))
        factor = 2 * (world_size - 1) / world_size * row["bytes"] / 1e3
        cells += [f"{ours / nccl:.2f}", f"{ours / symm:.2f}", f"{factor / ours:.0f}", f"{factor / nccl:.0f}"]
        cells.append(row["config"])
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Floors, graphed, same run: an empty kernel {floors['empty kernel']:.2f} µs per call; the flag round alone "
        f"(every rank sets its flag on every rank, then waits for all; what any one-launch all-reduce must do) "
        f"{floors['flag round']:.2f} µs. Eager, same run: the empty kernel through a launch plan (how the op "
        f"launches) {floors['empty kernel eager']:.1f} µs; a one-element torch op {floors['torch op eager']:.1f} µs "
        "(what an eager call costs before its kernel does any work).",
    ]
    ll_rows = [r for r in rows if "LL config" in r]
    if ll_rows:
        lines += ["", "LL one-shot (forced config, input off the heap), µs graphed:", ""]
        lines += ["| bytes | LL one-shot | triton_dist | LL/NCCL | LL/best symm | LL config |", "|---" * 6 + "|"]
        for r in ll_rows:
            ll_us = r.get("LL one-shot graphed", float("nan"))
            symm = min(r.get(f"symm-mem {a} graphed", float("inf")) for a in ("one-shot", "two-shot"))
            lines.append(
                f"| {human(r['bytes'])} | {ll_us:.1f} | {r.get('triton_dist graphed', float('nan')):.1f} | "
                f"{ll_us / r.get('NCCL graphed', float('nan')):.2f} | {ll_us / symm:.2f} | {r['LL config']} |"
            )
    staged = [r for r in rows if "one-shot in place (no staging) graphed" in r]
    if staged:
        lines += ["", "Cost of staging an off-heap input (one-shot, same launch shape), µs graphed:", ""]
        lines += ["| bytes | staged in-kernel | heap input read in place | difference |", "|---|---|---|---|"]
        for r in staged:
            a, b = r.get("one-shot staged graphed", float("nan")), r["one-shot in place (no staging) graphed"]
            lines.append(f"| {human(r['bytes'])} | {a:.1f} | {b:.1f} | {a - b:+.1f} |")
    if tuned:
        lines += ["", "Tuned table (`--tune`): bytes -> config, graphed µs", ""]
        lines += [f"- {human(b)}: {c}, {us:.1f}" for b, c, us in tuned]
    (out_dir / "all_reduce.md").write_text("\n".join(lines) + "\n")
    write_json(out_dir / "all_reduce.json", rows, started)
    sizes = [r["bytes"] for r in rows]
    panels = [
        (f"{mode}, {world_size} x {gpu}", sizes, {n: [r.get(f"{n} {mode}", float("nan")) for r in rows] for n in names})
        for mode in ("eager", "graphed")
    ]
    panel_chart(
        out_dir / "all_reduce.png",
        panels,
        title=f"all_reduce ({run_date(started)})",
        xlabel="message bytes (bf16)",
        ylabel="µs per all-reduce",
        panel_size=(6.5, 4.5),
        logy=True,
    )


if __name__ == "__main__":
    main_guard(main)
