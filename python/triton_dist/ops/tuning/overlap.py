"""The joint configuration of the overlapped AllGather + GEMM: tile, chunking, producer, loop shape, or NCCL."""

from __future__ import annotations

import dataclasses
from typing import Any

from triton_dist.ops.common.config_fields import checked_fields
from triton_dist.ops.matmul import HOPPER_CANDIDATES, MatmulConfig

PRODUCERS = ("ce", "sm")
BACKENDS = ("fused", "nccl", "cublas")
MAX_CUBLAS_CHUNKS = 16
"""The most chunks per peer shard the cuBLAS path takes (``OverlapConfig.cublas_chunks``): its flags have room for
this many per shard, at fixed places, so plans of different chunk counts can share them."""


@dataclasses.dataclass(frozen=True)
class OverlapConfig:
    """Everything one call of ``ag_gemm`` decides.

    - ``backend``: ``"fused"`` (our overlapped kernels), ``"nccl"`` (NCCL all-gather + cuBLAS, where fusion cannot
      win) or ``"cublas"`` (the copy-engine producer with one chunk per shard, and one cuBLAS GEMM per shard as it
      lands; ``matmul``, ``chunk_tiles`` and ``push_ctas`` do not apply, the producer must be ``"ce"``);
    - ``cublas_chunks``: the cuBLAS path only: into how many row ranges each peer's shard is split (one copy, one
      flag, one wait and one cuBLAS GEMM each, so the GEMM of a chunk starts once that chunk has landed), 1 to
      ``MAX_CUBLAS_CHUNKS``; 1 (the default) is one chunk per shard. A shard of fewer rows gets fewer chunks (chunks
      are whole multiples of 8 rows, never empty: ``ops.ag_gemm.op.cublas_chunk_rows``);
    - ``matmul``: the GEMM tile configuration (:class:`triton_dist.ops.matmul.MatmulConfig`);
    - ``chunk_tiles``: how many BLOCK_M tile rows one communication chunk (one flag) covers;
    - ``producer``: ``"ce"`` (copy engine: one copy per chunk and peer on a side stream, then a flag copy) or
      ``"sm"`` (a push kernel on ``push_ctas`` SMs that stores into the peers' buffers and notifies per chunk);
    - ``push_ctas``: SMs given to the ``"sm"`` producer (the GEMM gets the rest); ``"ce"`` reserves one SM;
    - ``flatten_peers``: whether the loop over the peers' tiles is one flattened, software-pipelined loop.
    """

    backend: str = "fused"
    matmul: MatmulConfig = HOPPER_CANDIDATES[0]
    chunk_tiles: int = 4
    producer: str = "ce"
    push_ctas: int = 16
    flatten_peers: bool = False
    cublas_chunks: int = 1

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"OverlapConfig.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.producer not in PRODUCERS:
            raise ValueError(f"OverlapConfig.producer must be one of {PRODUCERS}, got {self.producer!r}")
        if self.backend == "cublas" and self.producer != "ce":
            raise ValueError(
                f"OverlapConfig(backend='cublas') pushes with the copy engine: producer must be 'ce', "
                f"got {self.producer!r}"
            )
        if self.chunk_tiles < 1 or self.push_ctas < 1:
            raise ValueError("OverlapConfig.chunk_tiles and push_ctas must be >= 1")
        if not 1 <= self.cublas_chunks <= MAX_CUBLAS_CHUNKS:
            raise ValueError(
                f"OverlapConfig.cublas_chunks must be in [1, {MAX_CUBLAS_CHUNKS}], got {self.cublas_chunks!r}"
            )
        if self.cublas_chunks != 1 and self.backend != "cublas":
            raise ValueError(
                f"OverlapConfig.cublas_chunks applies to backend='cublas' only; got {self.cublas_chunks} chunks "
                f"with backend={self.backend!r}"
            )

    def as_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["matmul"] = self.matmul.as_dict()
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> OverlapConfig:
        """The configuration stored as ``values``; ValueError naming a bad field."""
        if not isinstance(values, dict):
            raise ValueError(f"OverlapConfig: expected an object of fields, got {type(values).__name__}")
        values = dict(values)
        matmul = MatmulConfig.from_dict(values.pop("matmul", {}))
        return cls(matmul=matmul, **checked_fields(cls, values))

    def short(self) -> str:
        if self.backend == "nccl":
            return "nccl+cublas"
        if self.backend == "cublas":
            return "cublas-ce" if self.cublas_chunks == 1 else f"cublas-ce/{self.cublas_chunks}"
        producer = "ce" if self.producer == "ce" else f"sm{self.push_ctas}"
        flat = "/flat" if self.flatten_peers else ""
        return f"{self.matmul.short()}/c{self.chunk_tiles}/{producer}{flat}"
