"""How a ``gemm_ar`` call runs: :class:`GemmARConfig`, the defaults measured per shape, the tuned table's entry,
and the split-K geometry and workspace sizes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import triton

from triton_dist.ops import tuning
from triton_dist.ops.common.errors import OpInputError


class GemmArError(OpInputError, TypeError):
    """Bad input to ``gemm_ar`` (shapes, dtypes, devices, layout, a config that cannot run, ranks that disagree).

    An :class:`~triton_dist.ops.common.errors.OpInputError` (so a ``ValueError``); also a ``TypeError``, which a
    wrong dtype or a non-tensor argument raised before the family existed.
    """


SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
SLOTS = 256
"""The most programs one launch uses; more tiles are taken in turns (one flag round per tile)."""
MAX_TILE_ELEMS = 128 * 64
"""The largest BLOCK_M x BLOCK_N a config may use (the slot buffers are sized for it)."""
MAX_SPLIT_K = 16
"""The most K pieces per tile a config may ask for."""
SPLIT_K_MAX_ELEMS = 1 << 20
"""Split K: the most fp32 partial elements per rank and call, ``tiles x block_m x block_n x splits`` (the slot
buffers take ``2 parities x (W + 1) x 4 MiB`` of the symmetric heap, allocated on the first split-K call)."""
SPLIT_K_MAX_ITEMS = 2048
"""Split K: the most (tile, split) items per call (``2 x (W + 1) x 2048`` int32 flags)."""
GEMMS = ("triton", "cublas")
"""What computes the product: the fused kernel, or cuBLAS followed by triton_dist's all-reduce."""
CUBLAS_ABOVE_M = 64
"""``default_config`` takes the cuBLAS path for more rows than this on NVIDIA (measured there, see its docstring)."""
CUBLAS_SPLIT_K_MAX_K = 4096
"""... and at 17-32 rows where the fused tile splits a K slice this short (see ``default_config``)."""


@dataclass(frozen=True)
class GemmARConfig:
    """Tile shape and launch parameters. ``exchange=False`` skips the all-reduce (the GEMM alone, for measuring)."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 4
    exchange: bool = True
    split_k: int = 1
    """K pieces per output tile (1..``MAX_SPLIT_K``; 3 puts 80 tiles on 132 SMs in 1.8 waves); > 1 runs the split-K
    kernel (see the module docstring: fp32 partials, every program of the grid resident at once). Fewer pieces are
    used when K has fewer ``block_k`` blocks."""
    gemm: str = "triton"
    """``"triton"``: the fused kernel with this tile. ``"cublas"``: ``torch.matmul`` into the output, then
    ``triton_dist.ops.all_reduce`` of it in place (two launches; the tile fields are unused). ``default_config``
    takes it where the fused kernel's GEMM is the slower part (see there)."""

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k"):
            value = getattr(self, name)
            if value < 16 or value & (value - 1):
                raise GemmArError(f"gemm_ar: {name} must be a power of two >= 16, got {value}")
        if not isinstance(self.split_k, int) or not 1 <= self.split_k <= MAX_SPLIT_K:
            raise GemmArError(f"gemm_ar: split_k must be an integer in [1, {MAX_SPLIT_K}], got {self.split_k!r}")
        if self.gemm not in GEMMS:
            raise GemmArError(f"gemm_ar: gemm must be one of {GEMMS}, got {self.gemm!r}")
        if self.gemm == "cublas" and self.split_k != 1:
            raise GemmArError("gemm_ar: the cuBLAS path does not split K (split_k must be 1)")
        if self.block_m * self.block_n > MAX_TILE_ELEMS:
            raise GemmArError(
                f"gemm_ar: block_m * block_n must be <= {MAX_TILE_ELEMS}, got {self.block_m * self.block_n}"
            )

    def as_dict(self) -> dict[str, Any]:
        """The fields, for ``ops.tuning``'s JSON tables."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GemmARConfig:
        """The config a tuning table stored (``as_dict``); raises GemmArError for one this version cannot run."""
        try:
            return cls(**values)
        except GemmArError:
            raise
        except TypeError as error:
            raise GemmArError(f"gemm_ar: a tuned config has fields this version does not know: {values}") from error


AMD_MAX_STAGES = 3
"""gfx942 has 64 KiB of LDS per workgroup: at 3 stages every default tile fits (64x64x128: exactly 65,536 bytes);
at 4 stages the 32-row tile already needs 73,728 and Triton refuses the launch."""


def default_config(m: int, n: int, k: int, backend: str = "cuda", sms: int | None = None) -> GemmARConfig:
    """What a call of ``gemm_ar`` runs: on NVIDIA, cuBLAS and then triton_dist's all-reduce (``gemm="cublas"``)
    above ``CUBLAS_ABOVE_M`` rows, and for 17-32 rows where ``tile_config`` splits a K of at most
    ``CUBLAS_SPLIT_K_MAX_K``; otherwise the fused kernel with ``tile_config``'s tile.

    Why (bench/gemm_ar.py, every candidate graphed): above 64 rows the fused kernel's GEMM alone is slower than
    ``torch.matmul`` by more than the all-reduce it hides, so cuBLAS + all-reduce is at least as fast. At 32 rows
    and fewer the fused kernel wins, except where its tile splits a short K: the split-K kernel's two flag rounds
    and fp32 exchange then outweigh the short K loop (a long K, split too, stays fused). AMD keeps the fused kernel
    (the cuBLAS path was not measured there)."""
    tile = tile_config(m, n, k, backend, sms)
    short_split = 16 < m <= 32 and tile.split_k > 1 and k <= CUBLAS_SPLIT_K_MAX_K
    if backend == "cuda" and (m > CUBLAS_ABOVE_M or short_split):
        return replace(tile, gemm="cublas", split_k=1)
    return tile


def rows_bucket(m: int) -> int:
    """The M a call's tuned entry is stored under: its row count rounded up to a power of two (the benchmark tunes
    M = 1, 8, 32, 128, 256, so a call of 100 rows takes M = 128's config; 3 rows has no entry and takes the
    default)."""
    return 1 << max(0, (m - 1).bit_length())


def tuning_key(m: int, n: int, k_local: int, dtype: torch.dtype, world_size: int, device: torch.device) -> str:
    """The key of this problem in ``ops.tuning``'s tables: ``rows_bucket(M)``, N and the global K (as the
    benchmark's layer list), dtype, world size, GPU name."""
    gpu = torch.cuda.get_device_name(device)
    return tuning.key("gemm_ar", rows_bucket(m), n, k_local * world_size, dtype, world_size, gpu)


def lookup_tuned(key: str) -> GemmARConfig | None:
    """The config ``bench/gemm_ar.py --store`` (or ``--write-package-table``) kept for ``key``, the fastest of its
    candidates graphed: the user's cache first, then the package table. None where neither has the key."""
    entry = tuning.lookup_entry(key)
    return None if entry is None else GemmARConfig.from_dict(entry["config"])


def tile_config(m: int, n: int, k: int, backend: str = "cuda", sms: int | None = None) -> GemmARConfig:
    """The fused kernel's tile for this problem. Small tiles for small M (enough programs to stream the weight at
    full bandwidth), larger ones for larger M; ``backend`` is Triton's (``"cuda"`` / ``"hip"``: AMD gets at most
    ``AMD_MAX_STAGES``).

    The tiles are the fastest of those tried on the benchmark's layers at the per-rank sizes of 2 ranks
    (bench/gemm_ar_tiles.py, GEMM alone): 8 warps and 5 stages in (64, 128] rows, 5 stages rather than 4 in
    (16, 64]; at 16 rows and fewer neither stage count wins consistently, and above 128 rows the 4-warp, 4-stage
    tile is the fastest tried.

    ``sms`` (the GPU's SM count; None: not known, no split): at M <= 32 on NVIDIA, an N with fewer 64-column tiles
    than 90% of the SMs leaves SMs idle while the rest stream the weight, so such a call takes 128-column tiles
    split along K into up to 3 pieces, as many as fit one wave (``split_k_default``): every SM then streams a part
    of the weight. An N whose 64-column tiles fill the SMs runs fastest unsplit."""
    split = split_k_default(m, n, k, sms) if backend == "cuda" else 1
    if split > 1:
        return GemmARConfig(16 if m <= 16 else 32, 128, 128, 4, 4, split_k=split)
    if m <= 16:
        config = GemmARConfig(16, 64, 128, 4, 4)
    elif m <= 32:
        config = GemmARConfig(32, 64, 128, 4, 5)
    elif m <= 64:
        config = GemmARConfig(64, 64, 128, 4, 5)
    elif m <= 128:
        config = GemmARConfig(128, 64, 64, 8, 5)
    else:
        config = GemmARConfig(128, 64, 64, 4, 4)
    if backend == "hip":
        config = replace(config, num_stages=min(config.num_stages, AMD_MAX_STAGES))
    return config


def split_k_default(m: int, n: int, k: int, sms: int | None) -> int:
    """The pieces ``tile_config`` splits K into (1: no split): at M <= 32, when N's 64-column tiles would leave
    more than 10% of the ``sms`` SMs idle, as many pieces of 128-column tiles as fit one wave, at most 3 (4 measured
    slower: a second wave), each at least two 128-deep blocks of K."""
    if not sms or m > 32 or triton.cdiv(n, 64) >= 0.9 * sms:
        return 1
    wide_tiles = triton.cdiv(n, 128)
    return max(1, min(3, sms // wide_tiles, k // 256))


def workspace_region_bytes(world_size: int) -> int:
    """Bytes per slot of the ``split_k=1`` workspace: two parities x ranks x the largest tile of 2-byte elements."""
    return 2 * world_size * MAX_TILE_ELEMS * 2


def split_k_geometry(m: int, n: int, k: int, config: GemmARConfig) -> tuple[int, int, int]:
    """(tiles, splits, chunk) of a split-K call: ``chunk`` (a multiple of ``block_k``) is each split's K range, the
    last one ragged; ``splits`` <= ``config.split_k``, fewer when K has fewer blocks, so no split is empty. Raises
    GemmArError when the call's partials would not fit the slot buffers (``SPLIT_K_MAX_ELEMS``,
    ``SPLIT_K_MAX_ITEMS``)."""
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    blocks = max(1, triton.cdiv(k, config.block_k))  # K = 0 never launches; one (empty) split if asked
    chunk = triton.cdiv(blocks, min(config.split_k, blocks)) * config.block_k
    splits = triton.cdiv(k, chunk)
    elems = tiles * config.block_m * config.block_n * splits
    if elems > SPLIT_K_MAX_ELEMS:
        raise GemmArError(
            f"gemm_ar: split_k={config.split_k} with {config.block_m}x{config.block_n} tiles needs {elems} fp32 "
            f"partial elements per rank for M={m}, N={n}, K={k} ({tiles} tiles x {splits} splits), more than the "
            f"split-K buffers hold (SPLIT_K_MAX_ELEMS = {SPLIT_K_MAX_ELEMS}): use a smaller split_k or split_k=1"
        )
    if tiles * splits > SPLIT_K_MAX_ITEMS:
        raise GemmArError(
            f"gemm_ar: split_k={config.split_k} with {config.block_m}x{config.block_n} tiles makes {tiles * splits} "
            f"(tile, split) items for M={m}, N={n}, K={k}, more than SPLIT_K_MAX_ITEMS = {SPLIT_K_MAX_ITEMS}: use "
            "larger tiles, a smaller split_k or split_k=1"
        )
    return tiles, splits, chunk


def split_k_grid(items: int, sm_count: int) -> int:
    """Programs of a split-K launch: one per item, at most one per SM (the kernel's waits need every program
    resident at once; see ``_gemm_ar_split_k_kernel``)."""
    return max(1, min(items, sm_count))


def split_k_workspace_sizes(world_size: int) -> tuple[int, int]:
    """(flags per parity, bytes per parity) of the split-K workspace: the local area (every item's flag and fp32
    partial) and after it the exchange area (every tile's flag and fp32 sum from each rank: ``tiles <=
    SPLIT_K_MAX_ITEMS`` and ``tiles x tile elements <= SPLIT_K_MAX_ELEMS``, so ``world_size`` times each bound holds
    it)."""
    return SPLIT_K_MAX_ITEMS * (world_size + 1), SPLIT_K_MAX_ELEMS * (world_size + 1) * 4
