"""Joint configurations of the overlapped ops, their on-disk cache, and the cost model for untuned shapes.

An :class:`OverlapConfig` fixes everything one call of an overlapped op (``ag_gemm``, ``gemm_rs``) decides:

- ``backend``: ``"fused"`` (our overlapped kernels) or ``"nccl"`` (the plain NCCL collective + cuBLAS baseline,
  chosen where fusion cannot win);
- ``matmul``: the GEMM tile configuration (:class:`triton_dist.ops.matmul.MatmulConfig`);
- ``chunk_tiles``: how many BLOCK_M tile rows one communication chunk (one flag) covers;
- ``producer``: ``"ce"`` (copy engine: ``copy_`` per chunk on a side stream, then a flag kernel) or ``"sm"`` (a
  push kernel on ``push_ctas`` SMs that stores into the peers' buffers and notifies per chunk);
- ``push_ctas``: SMs given to the ``"sm"`` producer (the GEMM gets the rest); the ``"ce"`` producer reserves one
  SM for its flag kernels.
- ``flatten_peers``: whether ``ag_gemm``'s loop over the peers' tiles is one flattened, software-pipelined loop
  (the next tile's loads overlap this tile's last MMAs and its store, as in the own-shard loop) or one pipeline
  per tile (the schedule checked on 2xH200; the default).

Where a configuration comes from (:func:`lookup`): the user's cache (``$TRITON_DIST_CACHE_DIR`` or
``~/.cache/triton_dist``, file ``tuning.json``, written by ``bench/tune_overlap.py``), then the table committed in
the package (``ops/tuned_configs.json``, the seed shapes tuned on 2 x H200), then :func:`cost_model`.
Keys are ``op|M,N,K|dtype|world_size|gpu name`` with the op's global M, N, K (as in the issue's shape list).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
from typing import Any, Protocol

from triton_dist.ops.matmul import HOPPER_CANDIDATES, MatmulConfig

PACKAGE_TABLE = pathlib.Path(__file__).with_name("tuned_configs.json")
PRODUCERS = ("ce", "sm")
BACKENDS = ("fused", "nccl")


@dataclasses.dataclass(frozen=True)
class OverlapConfig:
    """Everything an overlapped op decides per call (see the module docstring)."""

    backend: str = "fused"
    matmul: MatmulConfig = HOPPER_CANDIDATES[0]
    chunk_tiles: int = 4
    producer: str = "ce"
    push_ctas: int = 16
    flatten_peers: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"OverlapConfig.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.producer not in PRODUCERS:
            raise ValueError(f"OverlapConfig.producer must be one of {PRODUCERS}, got {self.producer!r}")
        if self.chunk_tiles < 1 or self.push_ctas < 1:
            raise ValueError("OverlapConfig.chunk_tiles and push_ctas must be >= 1")

    def as_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["matmul"] = self.matmul.as_dict()
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> OverlapConfig:
        values = dict(values)
        values["matmul"] = MatmulConfig.from_dict(values.get("matmul", {}))
        return cls(**values)

    def short(self) -> str:
        if self.backend == "nccl":
            return "nccl+cublas"
        producer = "ce" if self.producer == "ce" else f"sm{self.push_ctas}"
        flat = "/flat" if self.flatten_peers else ""
        return f"{self.matmul.short()}/c{self.chunk_tiles}/{producer}{flat}"


def cache_dir() -> pathlib.Path:
    """Where the ops keep the user's tuning results: ``$TRITON_DIST_CACHE_DIR``, else ``~/.cache/triton_dist``."""
    root = os.environ.get("TRITON_DIST_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "triton_dist")
    return pathlib.Path(root)


def cache_path() -> pathlib.Path:
    """The user's tuning cache file."""
    return cache_dir() / "tuning.json"


def key(op: str, m: int, n: int, k: int, dtype: Any, world_size: int, gpu: str) -> str:
    """The cache key of one tuned problem (global M, N, K as in the op's documentation)."""
    return f"{op}|{m},{n},{k}|{str(dtype).removeprefix('torch.')}|{world_size}|{gpu}"


def _read(path: pathlib.Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as error:
        raise RuntimeError(f"triton_dist tuning table {path} is unreadable ({error}); delete or fix it") from error


def lookup_entry(entry_key: str) -> dict[str, Any] | None:
    """The stored entry (``{"config": ..., "measured": ...}``) for ``entry_key``: user cache first, then the
    package table; None if neither has it."""
    for path in (cache_path(), PACKAGE_TABLE):
        entry = _read(path).get(entry_key)
        if entry is not None:
            return entry
    return None


def lookup(op: str, m: int, n: int, k: int, dtype: Any, world_size: int, gpu: str) -> OverlapConfig | None:
    """The tuned configuration for this problem (user cache first, then the package table), or None."""
    entry = lookup_entry(key(op, m, n, k, dtype, world_size, gpu))
    return None if entry is None else OverlapConfig.from_dict(entry["config"])


class StoredConfig(Protocol):
    """What ``store`` keeps: any op's config that can say its fields."""

    def as_dict(self) -> dict[str, Any]: ...


def store(path: pathlib.Path, entry_key: str, config: StoredConfig, measured: dict[str, Any]) -> None:
    """Write one tuned entry (config + what was measured) into the JSON table at ``path``."""
    table = _read(path)
    table[entry_key] = {"config": config.as_dict(), "measured": measured}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


@dataclasses.dataclass(frozen=True)
class Machine:
    """The rates the cost model uses (defaults: 2 x H200 over NVLink, measured 2026-11-23, bf16)."""

    gemm_tflops: float = 700.0  # cuBLAS on the seed per-rank GEMMs: 0.575 ms for 8192x2048x12288
    ours_vs_cublas: float = 0.93  # our persistent GEMM's speed relative to cuBLAS (bench/matmul.py)
    nccl_allgather_gbps: float = 460.0  # algorithm bandwidth at 128 MiB
    push_gbps: float = 380.0  # per peer link, copy engine or SM push
    launch_overhead_ms: float = 0.03  # barrier, flag kernels, host launches that the overlap cannot hide


def cost_model(
    op: str, m: int, n: int, k: int, itemsize: int, world_size: int, machine: Machine | None = None
) -> tuple[OverlapConfig, dict[str, float]]:
    """Pick a configuration for an untuned problem, and say what it expects (ms).

    ``ag_gemm``: per rank a [m, k] x [k, n / W] GEMM and (W - 1) shards of m / W x k to receive. The fused op
    runs at best at our GEMM's speed, and cannot finish before the last shard lands plus that shard's share of the
    GEMM; the baseline is NCCL all-gather then cuBLAS. ``gemm_rs``: a [m, k / W] x [k / W, n] GEMM, then a
    reduce-scatter of m x n partial sums. Fusion is chosen only where it is expected to be at least 5% faster,
    so an unseen shape never ends up slower than the baseline by the model's own estimate.
    """
    machine = machine or Machine()
    w = world_size
    if op == "ag_gemm":
        flops = 2.0 * m * (n / w) * k
        comm_bytes = (w - 1) * (m / w) * k * itemsize
        nccl_bytes = m * k * itemsize
    elif op == "gemm_rs":
        flops = 2.0 * m * n * (k / w)
        comm_bytes = (w - 1) * (m / w) * n * itemsize
        nccl_bytes = m * n * itemsize
    else:
        raise ValueError(f"cost_model: unknown op {op!r}")
    t_cublas = flops / (machine.gemm_tflops * 1e9)
    t_ours = t_cublas / machine.ours_vs_cublas
    t_comm = comm_bytes / (machine.push_gbps * 1e6) / max(1, w - 1) * (w - 1)
    t_nccl = nccl_bytes / (machine.nccl_allgather_gbps * 1e6) + 0.02
    baseline = t_nccl + t_cublas
    tail = t_ours / (w * 8)  # the GEMM work that can only start after the last chunk
    fused = max(t_ours, t_comm + tail) + machine.launch_overhead_ms
    estimate = {"baseline_ms": baseline, "fused_ms": fused, "cublas_ms": t_cublas, "comm_ms": t_comm}
    local_rows = m // w if op == "ag_gemm" else m
    if w == 1 or local_rows < 128 or fused > 0.95 * baseline:
        return OverlapConfig(backend="nccl"), estimate
    return OverlapConfig(matmul=HOPPER_CANDIDATES[0], chunk_tiles=4, producer="ce"), estimate


def choose(
    op: str, m: int, n: int, k: int, dtype: Any, itemsize: int, world_size: int, gpu: str
) -> tuple[OverlapConfig, str]:
    """The configuration for one call and where it came from (``"tuned"`` or ``"cost model"``)."""
    tuned = lookup(op, m, n, k, dtype, world_size, gpu)
    if tuned is not None:
        return tuned, "tuned"
    config, _ = cost_model(op, m, n, k, itemsize, world_size)
    return config, "cost model"


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
