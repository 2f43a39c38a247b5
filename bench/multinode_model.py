"""A model, not a measurement: predicted all-gather, all-reduce and MoE-dispatch times on 2-16 nodes for the
hierarchical algorithms of issue 29 (load/store within a node, NVSHMEM puts across nodes), beside NCCL's ring at the
bus bandwidth its own definition implies, and beside DeepEP's published MoE figures. Writes markdown.

    python3 bench/multinode_model.py [--out docs/results/multinode-model.md] [--nic-gbps 45] [--nic-latency-us 3] ...

No GPU and no torch needed. Every parameter is printed with its source; override any of them on the command line.

The model (alpha-beta, per GPU, G GPUs per node, N nodes, n = N x G ranks, message S bytes per rank):

- NVLink: a one-way latency and a per-direction bandwidth per GPU, both measured on 2 x H200 by this project.
- NIC: one NIC per GPU (rail-optimized, as DGX H100 / H800 clusters are built), a one-way put latency and a
  bandwidth.
- Hierarchical all-gather: each GPU puts its shard to the same local rank of every other node (NIC-bound, all
  puts in parallel: (N-1) S bytes in), then pushes the N shards it holds to the G-1 local peers (NVLink: (G-1) N S
  bytes in).
- Hierarchical all-reduce: intra-node reduce-scatter over NVLink, an all-reduce of S/G across nodes over the NICs
  (reduce-scatter + all-gather by direct puts: 2 (N-1)/N S/G bytes per NIC), an intra-node all-gather.
- The stages of a hierarchical algorithm are pipelined over ``chunks`` chunks: stages on one link add up, the
  NVLink and NIC totals overlap (the busier one counts, the other divided by ``chunks`` for fill and drain), and
  every stage's latency is paid once.
- NCCL (ring, G channels, one NIC each): nccl-tests' bus bandwidth (PERFORMANCE.md: busbw = algbw (n-1)/n for
  all-gather, 2 (n-1)/n for all-reduce) is bounded by min(NVLink, G x NIC) per GPU, and a ring step costs one hop's
  latency; 2 (n-1) or (n-1) steps.
- MoE dispatch (T tokens of H elements of b bytes per rank, top-k experts uniform over the ranks): hierarchical sends
  each token once per remote node that holds one of its experts (DeepEP's normal kernels), then forwards over NVLink;
  flat sends one copy per (token, remote rank), as NCCL's all-to-all and DeepEP's low-latency kernels do.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, fields
from pathlib import Path

MiB = 1 << 20


@dataclass(frozen=True)
class Parameters:
    """The machine, per GPU. Bandwidths in GB/s (1e9 bytes/s), latencies in microseconds."""

    gpus_per_node: int = 8
    nvlink_gbps: float = 345.0
    nvlink_latency_us: float = 1.29
    nic_gbps: float = 45.0
    nic_latency_us: float = 3.0
    chunks: int = 8


SOURCES = {
    "gpus_per_node": "DGX/HGX H100 and H800 nodes (DeepEP's EP8 per node)",
    "nvlink_gbps": "measured, 2 x H200: push all-gather, 64 MiB in per GPU in 194.5 us "
    "(docs/results/2026-11-23-2xH200-ops.md)",
    "nvlink_latency_us": "measured, 2 x H200: half the 2.573 us flag round trip "
    "(docs/results/2026-11-23-2xH200-ops.md)",
    "nic_gbps": "DeepEP (github.com/deepseek-ai/DeepEP, docs/legacy.md): CX7 400 Gb/s, '~50 GB/s maximum', 43-58 "
    "GB/s bottleneck RDMA bandwidth measured by its normal kernels at EP16-64",
    "chunks": "the hierarchical algorithms pipeline their stages over this many chunks (a design choice)",
    "nic_latency_us": "assumed: no peer publishes a small-put latency across nodes; a few us for IB NDR NIC + switch "
    "+ NIC (override with --nic-latency-us)",
}


@dataclass(frozen=True)
class Published:
    """A figure a peer published, printed beside the model's prediction for the same configuration."""

    what: str
    ranks: int
    value: str
    source: str


DEEPEP = [
    Published("low-latency dispatch, 128 tokens x 7168, FP8, top-8", 16, "118 us", "DeepEP docs/legacy.md (H800)"),
    Published("low-latency dispatch, 128 tokens x 7168, FP8, top-8", 32, "155 us", "DeepEP docs/legacy.md (H800)"),
    Published("low-latency dispatch, 128 tokens x 7168, FP8, top-8", 64, "173 us", "DeepEP docs/legacy.md (H800)"),
    Published("normal dispatch, 4096 tokens x 7168, FP8, top-8", 16, "43 GB/s RDMA", "DeepEP docs/legacy.md (H800)"),
]


def _transfer_us(nbytes: float, gbps: float) -> float:
    return nbytes / (gbps * 1e3)


def pipelined_us(p: Parameters, stages: list[tuple[str, float, float]]) -> float:
    """Time of stages ``(link, latency_us, transfer_us)`` pipelined over ``p.chunks`` chunks. Stages on the same link
    ("nvlink", "nic") share its bandwidth, so their transfers add; different links overlap, except for the pipeline's
    fill and drain (the other links' transfers divided by ``chunks``)."""
    if not stages:
        return 0.0
    per_link: dict[str, float] = {}
    for link, _, transfer in stages:
        per_link[link] = per_link.get(link, 0.0) + transfer
    slowest = max(per_link.values())
    return sum(latency for _, latency, _ in stages) + slowest + (sum(per_link.values()) - slowest) / p.chunks


def hierarchical_all_gather_us(p: Parameters, nodes: int, shard: int) -> float:
    """Predicted time of the hierarchical all-gather of ``shard`` bytes per rank."""
    g = p.gpus_per_node
    stages: list[tuple[str, float, float]] = []
    if nodes > 1:
        stages.append(("nic", p.nic_latency_us, _transfer_us((nodes - 1) * shard, p.nic_gbps)))
    if g > 1:
        stages.append(("nvlink", p.nvlink_latency_us, _transfer_us((g - 1) * nodes * shard, p.nvlink_gbps)))
    return pipelined_us(p, stages)


def hierarchical_all_reduce_us(p: Parameters, nodes: int, size: int) -> float:
    """Predicted time of the hierarchical all-reduce of ``size`` bytes per rank."""
    g = p.gpus_per_node
    stages: list[tuple[str, float, float]] = []
    intra = ("nvlink", p.nvlink_latency_us, _transfer_us((g - 1) / g * size, p.nvlink_gbps))
    if g > 1:
        stages.append(intra)
    if nodes > 1:
        stages.append(("nic", 2 * p.nic_latency_us, _transfer_us(2 * (nodes - 1) / nodes * size / g, p.nic_gbps)))
    if g > 1:
        stages.append(intra)
    return pipelined_us(p, stages)


def _nccl_busbw(p: Parameters) -> float:
    return min(p.nvlink_gbps, p.gpus_per_node * p.nic_gbps)


def _ring_hop_latency_us(p: Parameters, nodes: int) -> float:
    """Mean latency of a ring step: N of the n hops cross a NIC."""
    n = nodes * p.gpus_per_node
    return (nodes * p.nic_latency_us + (n - nodes) * p.nvlink_latency_us) / n


def nccl_all_gather_us(p: Parameters, nodes: int, shard: int) -> float:
    n = nodes * p.gpus_per_node
    return (n - 1) * _ring_hop_latency_us(p, nodes) + _transfer_us((n - 1) * shard, _nccl_busbw(p))


def nccl_all_reduce_us(p: Parameters, nodes: int, size: int) -> float:
    n = nodes * p.gpus_per_node
    return 2 * (n - 1) * _ring_hop_latency_us(p, nodes) + _transfer_us(2 * (n - 1) / n * size, _nccl_busbw(p))


def _expected_distinct(bins: int, picks: int) -> float:
    """Expected number of distinct bins hit by ``picks`` uniform picks among ``bins``."""
    return bins * (1 - (1 - 1 / bins) ** picks)


def moe_dispatch_us(p: Parameters, nodes: int, tokens: int, token_bytes: int, topk: int) -> tuple[float, float]:
    """(hierarchical, flat) predicted dispatch times of ``tokens`` tokens of ``token_bytes`` bytes per rank."""
    g = p.gpus_per_node
    n = nodes * g
    remote_nodes = _expected_distinct(nodes, topk) * (nodes - 1) / nodes
    hierarchical = pipelined_us(
        p,
        [
            ("nic", p.nic_latency_us, _transfer_us(tokens * token_bytes * remote_nodes, p.nic_gbps)),
            (
                "nvlink",
                p.nvlink_latency_us,
                _transfer_us(tokens * token_bytes * _expected_distinct(n, topk) * (g - 1) / n, p.nvlink_gbps),
            ),
        ],
    )
    remote_ranks = _expected_distinct(n, topk) * (n - g) / n
    local_ranks = _expected_distinct(n, topk) * (g - 1) / n
    flat = max(
        p.nic_latency_us + _transfer_us(tokens * token_bytes * remote_ranks, p.nic_gbps),
        p.nvlink_latency_us + _transfer_us(tokens * token_bytes * local_ranks, p.nvlink_gbps),
    )
    return hierarchical, flat


def _size(nbytes: int) -> str:
    return f"{nbytes // MiB} MiB" if nbytes >= MiB else f"{nbytes // 1024} KiB"


def report(p: Parameters, node_counts: list[int], sizes: list[int]) -> str:
    """The markdown report."""
    out = [
        "# Multi-node model: hierarchical collectives on NVSHMEM vs NCCL's ring (predicted, not measured)",
        "",
        "Generated by `python3 bench/multinode_model.py`. Every number below is a prediction of an alpha-beta model "
        "(bench/multinode_model.py's docstring) from the parameters in the first table; no multi-node run exists yet.",
        "",
        "| parameter | value | source |",
        "|---|---|---|",
    ]
    out += [f"| {f.name} | {getattr(p, f.name)} | {SOURCES[f.name]} |" for f in fields(p)]
    out += [
        "",
        f"NCCL's bus bandwidth in the model: min(NVLink, G x NIC) = {_nccl_busbw(p):.0f} GB/s per GPU. The ring is "
        "NCCL's bandwidth-optimal algorithm, not its latency floor: at many nodes and small sizes NCCL picks trees "
        "(and NVLS / CollNet where present), which this model does not price, so small-size ratios flatter ours.",
        "",
    ]
    for title, ours, theirs in (
        ("All-gather (S bytes per rank in)", hierarchical_all_gather_us, nccl_all_gather_us),
        ("All-reduce (S bytes per rank)", hierarchical_all_reduce_us, nccl_all_reduce_us),
    ):
        out += [
            f"## {title}",
            "",
            "| nodes | ranks | S | hierarchical (us) | NCCL ring (us) | ratio |",
            "|---|---|---|---|---|---|",
        ]
        for nodes in node_counts:
            for size in sizes:
                a, b = ours(p, nodes, size), theirs(p, nodes, size)
                out.append(f"| {nodes} | {nodes * p.gpus_per_node} | {_size(size)} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
        out.append("")
    out += [
        "## MoE dispatch (top-8 of uniform experts; FP8 tokens of 7168 + 56 bytes of scales)",
        "",
        "| nodes | ranks | tokens per rank | hierarchical (us) | flat per-rank puts (us) |",
        "|---|---|---|---|---|",
    ]
    for nodes in node_counts:
        for tokens in (128, 4096):
            h, f = moe_dispatch_us(p, nodes, tokens, 7168 + 56, 8)
            out.append(f"| {nodes} | {nodes * p.gpus_per_node} | {tokens} | {h:.1f} | {f:.1f} |")
    out += [
        "",
        "Published by DeepEP for comparison (H800, one CX7 400 Gb/s NIC per GPU):",
        "",
        "| what | ranks | published | source |",
        "|---|---|---|---|",
    ]
    out += [f"| {d.what} | {d.ranks} | {d.value} | {d.source} |" for d in DEEPEP]
    out.append("")
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    defaults = Parameters()
    for f in fields(Parameters):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(getattr(defaults, f.name)), default=None)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--sizes-mib", type=float, nargs="+", default=[1 / 16, 1, 16, 128])
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here instead of stdout")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    overrides = {f.name: getattr(args, f.name) for f in fields(Parameters) if getattr(args, f.name) is not None}
    params = Parameters(**overrides)
    if any(value <= 0 for value in (params.nvlink_gbps, params.nic_gbps, params.gpus_per_node, params.chunks)):
        print("multinode_model: bandwidths, gpus-per-node and chunks must be positive", file=sys.stderr)
        return 2
    if any(nodes < 1 for nodes in args.nodes):
        print("multinode_model: --nodes must be >= 1", file=sys.stderr)
        return 2
    text = report(params, args.nodes, [max(1, int(size * MiB)) for size in args.sizes_mib])
    if args.out is None:
        print(text)
    else:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
