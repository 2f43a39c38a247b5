"""flash_decode alone at the decoder's large-batch decode shape, over a grid of configs, beside SDPA on the same bytes.

    torchrun --nproc-per-node=2 bench/flash_decode_batch.py [--out-dir bench/results]

The shape of a decode step of bench/decoder.py's sequence-split cache at 4k context (issue 28): 8 KV heads, head
dim 128, bf16, a cache of ``context + 64`` positions split over the W ranks (2080 per rank at W = 2, a view of a
``[B, 8, 2081, 128]`` store as the layers make it), ``context + 1`` valid tokens (rank 0 holds 2080, rank 1 2017).
Cases: batch 64 with query groups of 4 (Llama-3-8B: 32 query heads) and 8 (Qwen3-32B: 64), and batch 8, group 4.

Per case, graphed (10 calls per CUDA graph, median of 20 replays, max over ranks):

- ``flash_decode`` as the layers call it (the default config, or ``$TRITON_DIST_FLASH_DECODE_CONFIG``);
- the config grid (``--configs``; default: splits 1, 2, 4 x key blocks 128 / 64 x warps x stages, see
  ``GRID_BLOCKS``) at batch 64 group 4; the other cases time the default, ``config.MANY_GROUPS_CONFIG`` and the
  four fastest of that grid (at batch 8 with the split count the op would choose for each, as splits 1 leaves
  most SMs idle there);
- SDPA on the same K/V bytes (rank 0's block, contiguous) per backend (cuDNN, FlashAttention, memory-efficient)
  and query layout (``grouped``: the group as query positions of each KV head; ``gqa``: ``enable_gqa=True``).

Each config's row gives its compiled kernel's registers and shared memory, the programs one SM holds at once
(``config.programs_per_sm``), the producer programs and how many rounds of the SMs' slots they take; µs, the K/V
bytes rank 0 reads per µs, and that as a share of this GPU's copy rate (bytes read + written by a 1 GiB copy,
bench/decoder_anatomy.py's ``hbm_bandwidth``) and read rate (a ``torch.sum``). Then, for the default,
``MANY_GROUPS_CONFIG`` and the fastest config at batch 64 group 4, a least-squares line ``time = fixed + bytes /
rate`` over 1040, 2080 and 4160 valid tokens per rank (every position valid): what a call costs beyond streaming
(program starts, pipeline fill and drain, records, flags, the combine) against the rate it streams at.

Every config's output is compared with SDPA's on the whole cache (2% of each element plus 1% of the largest); a
mismatch is marked and the run exits 1 after writing. Kernels compile before anything is timed, each rank
compiling its share of the grid into Triton's cache (the other rank's then load from it). Writes
``flash_decode_batch.md`` and ``.json`` to ``--out-dir``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, describe_machine, markdown_table, write_json, write_on_rank0_and_finish  # noqa: E402
from decoder_anatomy import hbm_bandwidth  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist.ops import flash_decode  # noqa: E402
from triton_dist.testing import main_guard, rank0_print, setup_distributed  # noqa: E402
from triton_dist.testing.timing import graphed_us  # noqa: E402

fd = importlib.import_module("triton_dist.ops.flash_decode.config")
fd_op = importlib.import_module("triton_dist.ops.flash_decode.op")
fd_kernels = importlib.import_module("triton_dist.ops.flash_decode.kernels")

KV_HEADS, DIM = 8, 128
CONTEXT = 4096
SLACK = 64
"""bench/decoder.py's caches hold ``context + 64`` positions."""
CASES = [(64, 4), (64, 8), (8, 4)]
"""(batch, query heads per KV head); the first gets the whole grid."""
GRID_SPLITS = (1, 2, 4)
GRID_BLOCKS = ((128, 4, 3), (128, 8, 3), (128, 4, 2), (128, 8, 2), (64, 4, 3), (64, 4, 4), (64, 4, 2))
"""(block_n, num_warps, num_stages): the default (128, 4, 3) first; block_n 64 with 8 warps at 3 stages spills."""
FIT_TOKENS = (1040, 2080, 4160)
TOP = 4


def parse_configs(text: str) -> list[fd.FlashDecodeConfig]:
    """``--configs``: configs separated by ``;``, each as ``config.config_from_text`` reads it; empty: the grid."""
    if text.strip():
        return [fd.config_from_text(part) for part in text.split(";") if part.strip()]
    return [
        fd.FlashDecodeConfig(splits=s, block_n=b, num_warps=w, num_stages=n)
        for s in GRID_SPLITS
        for b, w, n in GRID_BLOCKS
    ]


def label(config: fd.FlashDecodeConfig) -> str:
    return f"s{config.splits or 'auto'}/b{config.block_n}/w{config.num_warps}/n{config.num_stages}"


class Case:
    """One shape's tensors on this rank: q (the same on every rank), the cache as the layers lay it out, lengths."""

    def __init__(self, batch: int, group: int, local: int, valid: int, seed: int) -> None:
        rank, world = rt.current_world().rank, rt.current_world().world_size
        gen = torch.Generator(device="cuda").manual_seed(seed)
        self.batch, self.group, self.local = batch, group, local
        self.q = torch.randn(batch, KV_HEADS * group, DIM, device="cuda", generator=gen).to(torch.bfloat16)
        gen.manual_seed(seed * 31 + rank + 1)  # each rank its own block of the cache
        store = [torch.randn(batch, KV_HEADS, local + 1, DIM, device="cuda", generator=gen).to(torch.bfloat16)]
        store.append(torch.randn(batch, KV_HEADS, local + 1, DIM, device="cuda", generator=gen).to(torch.bfloat16))
        self.k, self.v = (t[:, :, :local] for t in store)  # a view with a spare position, as KVCache.k
        self.lengths_all = [max(0, min(local, valid - r * local)) for r in range(world)]
        self.lengths = torch.full((batch,), self.lengths_all[rank], dtype=torch.int32, device="cuda")
        self.out = torch.empty_like(self.q)
        # K/V bytes rank 0 reads (the most of any rank), plus q and the output
        self.bytes = 2 * batch * KV_HEADS * self.lengths_all[0] * DIM * 2 + 2 * self.q.numel() * 2

    def run(self, config: fd.FlashDecodeConfig | None) -> None:
        if config is None:
            flash_decode(self.q, self.k, self.v, self.lengths)
        else:
            fd_op._run(self.q, self.k, self.v, self.lengths, self.out, None, config)

    def resolved(self, config: fd.FlashDecodeConfig | None) -> tuple[fd.FlashDecodeConfig, int]:
        """(config with its combiner count, split count) a call with ``config`` launches (None: the default)."""
        world = rt.current_world().world_size
        groups, sms = (
            self.q.shape[0] * self.k.shape[1],
            torch.cuda.get_device_properties(self.q.device).multi_processor_count,
        )
        chosen = fd_op._with_combiners(self.q, self.k, config or fd_op.gpu_default_config(groups, sms))
        return chosen, fd_op._splits_for(self.q, self.k, chosen, world)

    def compile(self, config: fd.FlashDecodeConfig | None) -> dict:
        """Compile (or load from Triton's cache) the kernel a call with ``config`` launches, without launching it;
        its registers, spills, shared memory and residency."""
        chosen, splits = self.resolved(config)
        ws = fd_op._Workspace(  # stand-ins with the real ones' dtypes and alignments: only compiled against
            torch.empty(2, fd.MIN_RECORD_BYTES // 4, device="cuda"),
            torch.zeros(2, fd.MIN_FLAGS, dtype=torch.int32, device="cuda"),
            torch.zeros(1, dtype=torch.int64, device="cuda"),
        )
        prepared = fd_op._Prepared(chosen, splits, fd_op.check_scale(None), ws)
        world = rt.current_world().world_size
        grid, named, options = fd_op.launch_args(self.q, self.k, self.v, self.lengths, self.out, prepared, world)
        kernel = fd_kernels._flash_decode_kernel
        compiled = kernel.warmup(**{name: named[name] for name in kernel.arg_names}, grid=grid, **options)
        compiled._init_handles()
        regs, shared = int(compiled.n_regs), int(compiled.metadata.shared)
        per_sm = fd.programs_per_sm(shared, regs, chosen.num_warps)
        producers = self.batch * KV_HEADS * splits
        sms = torch.cuda.get_device_properties().multi_processor_count
        return {
            "config": label(config) if config else f"default ({label(replace(chosen, splits=splits))})",
            "splits": splits,
            "combiners": chosen.combiner_count,
            "registers": regs,
            "spills": int(compiled.n_spills),
            "shared": shared,
            "per SM": per_sm,
            "producers": producers,
            "rounds": producers / (per_sm * sms),
        }


def agrees(ours: torch.Tensor, reference: torch.Tensor) -> bool:
    diff = (ours.float() - reference.float()).abs()
    bound = 2e-2 * reference.float().abs() + 1e-2 * float(reference.float().abs().max()) + 1e-6
    bad = torch.tensor([float((diff > bound).sum() + torch.isnan(ours).sum())], device="cuda")
    torch.distributed.all_reduce(bad, op=torch.distributed.ReduceOp.MAX)
    return bad.item() == 0


def whole_cache_reference(case: Case) -> torch.Tensor:
    """SDPA over every rank's valid tokens (the blocks all-gathered), fp32."""
    world = rt.current_world().world_size
    parts = []
    for t in (case.k, case.v):
        gathered = [torch.empty_like(t.contiguous()) for _ in range(world)]
        torch.distributed.all_gather(gathered, t.contiguous())
        parts.append(torch.cat([g[:, :, :n] for g, n in zip(gathered, case.lengths_all, strict=True)], dim=2))
    q = case.q.float().view(case.batch, KV_HEADS, case.group, DIM)
    out = F.scaled_dot_product_attention(q, parts[0].float(), parts[1].float())
    return out.reshape(case.q.shape)


def sdpa_variants(case: Case) -> dict[str, Callable[[], object]]:
    """SDPA on rank 0's block (contiguous; rank 1's is as large) per backend and query layout."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    k, v = case.k.contiguous(), case.v.contiguous()
    q_grouped = case.q.view(case.batch, KV_HEADS, case.group, DIM)
    q_gqa = case.q[:, :, None, :]
    backends = {
        "cuDNN": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }
    variants: dict[str, Callable[[], object]] = {}
    for name, backend in backends.items():

        def grouped(backend: SDPBackend = backend) -> object:
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q_grouped, k, v)

        def gqa(backend: SDPBackend = backend) -> object:
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q_gqa, k, v, enable_gqa=True)

        variants[f"SDPA {name} grouped"] = grouped
        variants[f"SDPA {name} gqa"] = gqa
    return variants


def time_config(case: Case, config: fd.FlashDecodeConfig | None, iters: int, reference: torch.Tensor) -> dict:
    """The row of one config: its compiled kernel, whether its output matches, its graphed µs."""
    row = case.compile(config)
    if config is None:
        out = flash_decode(case.q, case.k, case.v, case.lengths)
    else:
        case.out.fill_(float("nan"))  # poisoned: a program that stores nothing leaves NaN
        case.run(config)
        out = case.out
    row["ok"] = agrees(out, reference)
    row["us"] = graphed_us(lambda: case.run(config), replays=iters)
    return row


def rates(row: dict, case: Case, hbm: dict) -> None:
    gbps = case.bytes / row["us"] / 1e3
    row["GB/s"], row["% copy"], row["% read"] = gbps, 100 * gbps / hbm["copy_gbps"], 100 * gbps / hbm["read_gbps"]


def warm(case: Case, configs: list[fd.FlashDecodeConfig | None]) -> None:
    """Compile every config's kernel: each rank its share first (into Triton's cache), then all (cache loads)."""
    world = rt.current_world()
    for config in configs[world.rank :: world.world_size]:
        case.compile(config)
    rt.barrier()


def fit(case_tokens: list[tuple[int, float, int]]) -> tuple[float, float]:
    """(fixed µs, GB/s) of the least-squares line through (tokens, µs, bytes) points."""
    xs, ys = [float(b) for _, _, b in case_tokens], [us for _, us, _ in case_tokens]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, 1e-3 / slope if slope > 0 else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="", help="';'-separated configs (config_from_text); default: the grid")
    parser.add_argument("--context", type=int, default=CONTEXT)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--no-fit", action="store_true", help="skip the fixed-cost / rate fit")
    parser.add_argument("--out-dir", default=str(RESULTS))
    args = parser.parse_args()
    world = setup_distributed(heap_size="1G")
    started = time.time()
    local = (args.context + SLACK) // world.world_size
    valid = args.context + 1
    hbm = hbm_bandwidth()
    rank0_print(f"RESULT copy {hbm['copy_gbps']:.0f} GB/s, read {hbm['read_gbps']:.0f} GB/s")
    grid = parse_configs(args.configs)
    results: dict = {"hbm": hbm, "cases": [], "fits": []}
    failures = 0
    best: list[fd.FlashDecodeConfig] = []
    for index, (batch, group) in enumerate(CASES):
        case = Case(batch, group, local, valid, seed=batch * 17 + group)
        if index == 0:
            configs: list[fd.FlashDecodeConfig | None] = [None, *grid]
        elif batch * KV_HEADS < 2 * torch.cuda.get_device_properties().multi_processor_count:
            configs = [None, *dict.fromkeys(replace(c, splits=0) for c in [fd.MANY_GROUPS_CONFIG, *best])]
        else:
            configs = [None, *dict.fromkeys([fd.MANY_GROUPS_CONFIG, *best])]
        warm(case, configs)
        reference = whole_cache_reference(case)
        rows = []
        for config in configs:
            row = time_config(case, config, args.iters, reference)
            rates(row, case, hbm)
            failures += not row["ok"]
            rank0_print(
                f"RESULT B={batch} G={group} {row['config']}: {row['us']:.1f} us, {row['% copy']:.1f}% of copy, "
                f"{row['per SM']}/SM, {row['rounds']:.2f} rounds{'' if row['ok'] else ' WRONG'}"
            )
            rows.append(row)
        for name, fn in sdpa_variants(case).items():
            try:
                row = {"config": name, "us": graphed_us(fn, replays=args.iters)}
            except Exception as error:  # noqa: BLE001 (a backend that refuses the shape is reported, not fatal)
                rank0_print(f"INFO {name} B={batch} G={group}: {type(error).__name__}: {str(error)[:160]}")
                continue
            rates(row, case, hbm)
            rank0_print(f"RESULT B={batch} G={group} {name}: {row['us']:.1f} us, {row['% copy']:.1f}% of copy")
            rows.append(row)
        if index == 0:
            timed = sorted((r for r in rows[1:] if "per SM" in r and r["ok"]), key=lambda r: r["us"])
            best = [configs[rows.index(r)] for r in timed[:TOP]]  # type: ignore[misc]
        results["cases"].append({"batch": batch, "group": group, "bytes": case.bytes, "rows": rows})
        del case, reference
        torch.cuda.empty_cache()
        if index == 0 and not args.no_fit:
            for config in dict.fromkeys([None, fd.MANY_GROUPS_CONFIG, *best[:1]]):
                points = []
                for tokens in FIT_TOKENS:
                    probe = Case(batch, group, tokens, tokens * world.world_size, seed=tokens)
                    us = graphed_us(lambda p=probe, c=config: p.run(c), replays=args.iters)
                    points.append((tokens, us, probe.bytes))
                    del probe
                    torch.cuda.empty_cache()
                fixed, gbps = fit(points)
                name = label(config) if config else "default"
                results["fits"].append({"config": name, "points": points, "fixed us": fixed, "GB/s": gbps})
                rank0_print(f"RESULT fit B={batch} G={group} {name}: fixed {fixed:.1f} us, {gbps:.0f} GB/s")
    write_on_rank0_and_finish(lambda: write_results(Path(args.out_dir), results, started, local))
    return 1 if failures else 0


def write_results(out_dir: Path, results: dict, started: float, local: int) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    hbm = results["hbm"]
    lines = [
        f"# flash_decode at large decode batches, {rt.current_world().world_size} x {torch.cuda.get_device_name()}, "
        f"bf16, {KV_HEADS} KV heads, head dim {DIM}, {local} positions per rank",
        "",
        *describe_machine(started),
        "- µs per call, graphed (10 calls per CUDA graph, median of 20 replays, max over ranks).",
        f"- copy rate {hbm['copy_gbps']:.0f} GB/s, read rate {hbm['read_gbps']:.0f} GB/s ({hbm['method']}).",
        "- GB/s: the K/V (+ q, out) bytes rank 0 reads over the µs; SDPA rows: the same bytes (rank 0's block).",
        "- config sS/bB/wW/nN: splits, block_n, num_warps, num_stages; per SM: programs one SM holds",
        "  (config.programs_per_sm of the compiled registers and shared memory); rounds: producers / (per SM x SMs).",
        "",
    ]
    headers = ["config", "µs", "GB/s", "% copy", "% read", "vs default", "per SM", "rounds", "producers"]
    headers += ["combiners", "registers", "shared", "spills", "result"]
    for case in results["cases"]:
        rows = case["rows"]
        base = rows[0]["us"]
        lines += [f"## batch {case['batch']}, group {case['group']} ({case['bytes'] / 1e6:.1f} MB)", ""]
        table = []
        for r in sorted(rows, key=lambda r: r["us"]):
            cells = [r["config"], f"{r['us']:.1f}", f"{r['GB/s']:.0f}", f"{r['% copy']:.1f}", f"{r['% read']:.1f}"]
            cells.append(f"{base / r['us']:.3f}")
            if "per SM" in r:
                cells += [r["per SM"], f"{r['rounds']:.2f}", r["producers"], r["combiners"], r["registers"]]
                cells += [r["shared"], r["spills"], "ok" if r["ok"] else "WRONG"]
            else:
                cells += [""] * 8
            table.append(cells)
        lines += [markdown_table(headers, table), ""]
    if results["fits"]:
        lines += [
            "## Fixed cost and streaming rate, batch 64, group 4",
            "",
            "Least-squares line `time = fixed + bytes / rate` over "
            + ", ".join(str(t) for t in FIT_TOKENS)
            + " valid tokens per rank (all positions valid).",
            "",
        ]
        table = [
            [f["config"], *(f"{us:.1f}" for _, us, _ in f["points"]), f"{f['fixed us']:.1f}", f"{f['GB/s']:.0f}"]
            for f in results["fits"]
        ]
        lines.append(markdown_table(["config", *(f"µs at {t}" for t in FIT_TOKENS), "fixed µs", "GB/s"], table))
    (out_dir / "flash_decode_batch.md").write_text("\n".join(lines) + "\n")
    write_json(out_dir / "flash_decode_batch.json", [results], started)


if __name__ == "__main__":
    main_guard(main)
