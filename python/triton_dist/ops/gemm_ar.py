"""``gemm_ar(a, b)``: the row-parallel linear layer of decoding, ``sum over ranks of a @ b``, in one kernel (or, where
that measured slower, cuBLAS then ``all_reduce``: see "The cuBLAS path" below).

```python
# a: [M, K / W] (this rank's slice of the activations), b: [K / W, N] (this rank's rows of the weight)
y = triton_dist.ops.gemm_ar(a, b)          # [M, N], the same on every rank
```

Each program computes output tiles ``[BLOCK_M, BLOCK_N]`` of ``a @ b`` in fp32 (a K loop over this rank's slice, the
loads software-pipelined by Triton), rounds the partial tile to the output dtype and pushes it into every rank's
copy of its slot buffer (remote 16-byte stores through ``dl.symm_at``, row ``rank``), tells every rank
(``dl.notify`` with the slot's epoch), waits for every rank's partial of the same tile (``dl.wait``) and sums the
``W`` partials from its own memory in rank order, in fp32. So the all-reduce of each tile starts as soon as that
tile is computed on every rank, with no separate launch and no host involvement; every rank sums the same values in
the same order, so the result is bit-identical across ranks.

The partials travel in the output dtype (as with ``torch.matmul`` followed by an all-reduce of its output). The
slot buffers and flags are double-buffered by epoch parity, with the same ordering argument as the one-shot
all-reduce (``ops/all_reduce.py``); the epochs live on the device (``ops/common/slot_workspace.py``), so CUDA graphs
replay correctly.

Meant for decode shapes (M <= 256). Registered as ``torch.ops.triton_dist.gemm_ar``.

The cuBLAS path (``GemmARConfig(gemm="cublas")``): ``torch.matmul`` into the output, then ``ops.all_reduce`` of it in
place, two launches. ``default_config`` takes it on NVIDIA where it measured faster than the fused kernel: above 64
rows, where the fused kernel's GEMM is 1.2-1.7x slower than cuBLAS, and at 17-32 rows with a short split K.

Split K (``GemmARConfig(split_k=2..16)``; ``tile_config`` splits at M <= 32 where N's 64-column tiles leave SMs idle,
see ``split_k_default``): when the output has fewer tiles than the GPU has SMs (e.g. N = 5120 in 64-column tiles: 80
tiles on 132 SMs), each tile's K range is cut into ``split_k`` pieces so more programs stream the weight. A separate
kernel (``_gemm_ar_split_k_kernel``) works in three steps:

1. Work items are (tile, split) pairs. A program computes the fp32 partial of each of its items over that split's
   K range, stores it into this rank's local slot (tile, split) and sets that slot's flag (GPU scope) to the
   call's epoch. No waiting in this phase.
2. Then it takes its tiles (tile t goes to program t mod grid, fixed: not arrival order), waits for the tile's
   ``split_k`` local flags, sums its splits in split order in fp32 and pushes that one sum into every rank's
   exchange slot (tile, this rank), flagged on every rank.
3. Then, for the same tiles, it waits for the ``W`` exchange flags of the tile, sums the ``W`` sums from its own
   memory in rank order in fp32 and stores the output in the dtype.

Unlike ``split_k=1``, the sums travel in fp32 (they are not rounded to the dtype before the final sum); results stay
bit-identical across ranks because every rank sums the same values in the same order. Only the rows < M of a tile travel
(as with ``split_k=1``): each rank pushes ``W x M x N x 4`` bytes, twice what ``split_k=1`` pushes (before step 2
summed the splits locally, every split travelled: ``split_k`` times more). The slot buffers hold every item of a call at
once (nothing waits before producing), so ``M_pad x N_pad x split_k`` is limited (``SPLIT_K_MAX_ELEMS``,
``SPLIT_K_MAX_ITEMS``): a config past them raises ValueError before launching. ``exchange=False`` stops after step 2's
local sum, which it stores (this rank's ``a @ b``, the GEMM alone with its split reduction).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.ops import tuning
from triton_dist.ops.all_reduce import _flag_round, _notify_every_rank, notify_world, plain_eager
from triton_dist.ops.all_reduce import _run_checked as _all_reduce_in_place
from triton_dist.ops.common.call_epoch import arrive
from triton_dist.ops.common.slot_workspace import SlotWorkspace, slot_workspace
from triton_dist.ops.common.launch import LaunchPlan, first_launch
from triton_dist.ops.matmul import check_matrix, num_sms
from triton_dist.runtime.world.rank_agreement import AgreedSignatures, check_ranks_call_alike

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
SPLIT_K_EXCHANGE_DATA = tl.constexpr(SPLIT_K_MAX_ELEMS)
"""Split K: where the exchange area starts in a parity's fp32 buffer (after the local area)."""
SPLIT_K_EXCHANGE_FLAGS = tl.constexpr(SPLIT_K_MAX_ITEMS)
"""Split K: where the exchange flags start in a parity's flags (after the local ones)."""


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
                raise ValueError(f"gemm_ar: {name} must be a power of two >= 16, got {value}")
        if not isinstance(self.split_k, int) or not 1 <= self.split_k <= MAX_SPLIT_K:
            raise ValueError(f"gemm_ar: split_k must be an integer in [1, {MAX_SPLIT_K}], got {self.split_k!r}")
        if self.gemm not in GEMMS:
            raise ValueError(f"gemm_ar: gemm must be one of {GEMMS}, got {self.gemm!r}")
        if self.gemm == "cublas" and self.split_k != 1:
            raise ValueError("gemm_ar: the cuBLAS path does not split K (split_k must be 1)")
        if self.block_m * self.block_n > MAX_TILE_ELEMS:
            raise ValueError(
                f"gemm_ar: block_m * block_n must be <= {MAX_TILE_ELEMS}, got {self.block_m * self.block_n}"
            )

    def as_dict(self) -> dict[str, Any]:
        """The fields, for ``ops.tuning``'s JSON tables."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GemmARConfig:
        """The config a tuning table stored (``as_dict``); raises ValueError for one this version cannot run."""
        try:
            return cls(**values)
        except TypeError as error:
            raise ValueError(f"gemm_ar: a tuned config has fields this version does not know: {values}") from error


AMD_MAX_STAGES = 3
"""gfx942 has 64 KiB of LDS per workgroup: at 3 stages every default tile fits (64x64x128: exactly 65,536 bytes);
at 4 stages the 32-row tile already needs 73,728 and Triton refuses the launch."""


def default_config(m: int, n: int, k: int, backend: str = "cuda", sms: int | None = None) -> GemmARConfig:
    """What a call of ``gemm_ar`` runs: on NVIDIA, cuBLAS and then triton_dist's all-reduce (``gemm="cublas"``)
    above ``CUBLAS_ABOVE_M`` rows, and for 17-32 rows where ``tile_config`` splits a K of at most
    ``CUBLAS_SPLIT_K_MAX_K``; otherwise the fused kernel with ``tile_config``'s tile.

    Measured on 2 x H200 (bench/gemm_ar.py, every candidate graphed in one run, 2026-11-23; docs/results/
    2026-11-23-2xH200-session13.md): at M = 128 and 256 the fused kernel's GEMM alone takes 1.2-1.7x
    ``torch.matmul``'s time, more than the all-reduce it hides, and cuBLAS + all-reduce was faster on all four
    layers but one, a tie (Llama-3-70B o_proj M = 128: 33.2 against 33.1 us); at M <= 32 the fused kernel won on
    every layer (by 1-5 us) except Qwen3-32B o_proj at M = 32 (K/W = 4096, split in 3: 18.4 against 15.9 us), where
    the split-K kernel's two flag rounds and fp32 exchange outweigh a short K loop; its down_proj (K/W = 12800, also
    split) stayed fused (42.9 against 44.7). AMD keeps the fused kernel (not measured there)."""
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

    Measured on one H200 at the per-rank sizes of 2 ranks (bench/gemm_ar_tiles.py, GEMM alone,
    bench/results/gemm_ar_tiles.md): M in (64, 128] with 8 warps and 5 stages took M = 128 from 1.32-1.71x
    matmul's time to 1.16-1.54x; M in (16, 64] uses 5 stages instead of 4 (M = 32: faster on every layer in two
    sessions, by 3-5%; M = 64: faster on 3 of 4 layers by up to 5%, 3.5% slower on Qwen3 o_proj;
    docs/results/2026-11-23-shared-gpu.md); at M <= 16 neither stage count won consistently; at M = 256 the
    4-warp, 4-stage tile stayed the fastest tried.

    ``sms`` (the GPU's SM count; None: not known, no split): at M <= 32 on NVIDIA, an N with fewer 64-column tiles
    than 90% of the SMs leaves SMs idle while the rest stream the weight, so such a call takes 128-column tiles
    split along K into up to 3 pieces, as many as fit one wave (``split_k_default``). Measured on one H200
    (2026-11-23 20:1x UTC, bench/results/gemm_ar_tiles.md): Qwen3-32B o_proj (N = 5120: 80 tiles of 64, 40 of 128)
    went from 17.4 / 13.4 / 17.0 us at M = 1 / 8 / 32 to 10.7 / 10.9 / 13.3 (matmul: 14.2 / 10.4 / 9.8) and its
    down_proj from 39.7 / 40.2 / 47.3 to 35.4 / 35.8 / 37.5; Llama-3-70B (N = 8192: 128 tiles of 64) was fastest
    unsplit, as before."""
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


@triton.jit
def _split_k_partial(
    a_ptr,
    b_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bk,
    tile,
    split,
    chunk,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """fp32 ``a[rows of tile, split's K range] @ b[that range, columns of tile]``; the range is
    ``[split * chunk, min(K, (split + 1) * chunk))`` with ``chunk`` a multiple of ``BLOCK_K``, so only ``K`` needs a
    mask. Rows >= M and columns >= N come out 0."""
    tiles_n = tl.cdiv(N, BLOCK_N)
    rm = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    start = split * chunk
    a_ptrs = a_ptr + rm[:, None] * stride_am + (start + ks)[None, :]
    b_ptrs = b_ptr + (start + ks)[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(start, tl.minimum(K, start + chunk), BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k + ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def _gemm_ar_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    epochs_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bk,
    stride_om,
    flags_stride,
    REGION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EXCHANGE: tl.constexpr,
    WORLD: tl.constexpr,
):
    slot = tl.program_id(0)
    me = dl.rank()
    ranks = dl.num_ranks()
    epoch = tl.load(epochs_ptr + slot)
    slot_data = data_ptr + slot * REGION  # [2 parities][ranks][BLOCK_M * BLOCK_N]
    slot_flags = flags_ptr + slot * flags_stride  # [2 parities][ranks]
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    tiles_n = tl.cdiv(N, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    in_tile = rows[:, None] * BLOCK_N + cols[None, :]
    for tile in range(slot, tl.cdiv(M, BLOCK_M) * tiles_n, tl.num_programs(0)):
        rm = (tile // tiles_n) * BLOCK_M + rows
        rn = (tile % tiles_n) * BLOCK_N + cols
        acc = _split_k_partial(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, tile, 0, K, BLOCK_M, BLOCK_N, BLOCK_K)
        row_ok = rm[:, None] < M
        out_ptrs = out_ptr + rm[:, None] * stride_om + rn[None, :]
        out_mask = row_ok & (rn[None, :] < N)
        if EXCHANGE:
            epoch += 1
            parity = epoch % 2
            partials = slot_data + parity * (ranks * TILE)
            partial = acc.to(out_ptr.dtype.element_ty)
            for peer in range(0, ranks):
                tl.store(dl.symm_at(partials + me * TILE + in_tile, peer), partial, mask=row_ok)
            partials = _flag_round(slot_flags + parity * ranks, me, epoch, ranks, partials, WORLD)
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for peer in range(0, ranks):
                total += tl.load(partials + peer * TILE + in_tile, mask=row_ok, other=0.0).to(tl.float32)
            tl.store(out_ptrs, total.to(out_ptr.dtype.element_ty), mask=out_mask)
        else:
            tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)
    tl.store(epochs_ptr + slot, epoch)


@triton.jit
def _split_k_item(item, tiles):
    """(tile, split) of a phase-1 item: items ``[0, tiles)`` are split 0 of every tile, then split 1, ..."""
    return item % tiles, item // tiles


@triton.jit
def _split_k_local_slot(tile, split, splits):
    """Partial and flag index of (tile, split) in this rank's local area: a tile's splits are consecutive, in the
    order its owner sums them."""
    return tile * splits + split


@triton.jit
def _split_k_exchange_slot(tile, rank, ranks):
    """Sum and flag index of (tile, rank) in the exchange area (after the local one): a tile's ranks are
    consecutive, in the order phase 2 sums them."""
    return tile * ranks + rank


@triton.jit
def _split_k_rows(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``[BLOCK_M, 1]``: which rows of tile ``tile`` are rows of the output (< M). Only those travel and are summed:
    at M = 1 in 16-row tiles that is 1/16 of each partial."""
    rm = (tile // tl.cdiv(N, BLOCK_N)) * BLOCK_M + tl.arange(0, BLOCK_M)
    return rm[:, None] < M


@triton.jit
def _split_k_sum(tile_partials, count, rows, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The fp32 sum of the ``count`` consecutive ``BLOCK_M x BLOCK_N`` partials at ``tile_partials``, in order, over
    the ``rows`` (``_split_k_rows``; the other rows come out 0, never read)."""
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, count):
        total += tl.load(tile_partials + i * TILE + in_tile, mask=rows, other=0.0)
    return total


@triton.jit
def _split_k_store(out_ptr, total, tile, M, N, stride_om, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``total`` rounded to the output dtype into ``out``'s tile ``tile``."""
    tiles_n = tl.cdiv(N, BLOCK_N)
    rm = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], total.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gemm_ar_split_k_kernel(
    a_ptr,
    b_ptr,
    out_ptr,
    data_ptr,
    flags_ptr,
    state_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bk,
    stride_om,
    chunk,
    splits,
    flags_stride,
    REGION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    EXCHANGE: tl.constexpr,
    WORLD: tl.constexpr,
):
    # Deadlock freedom: phase 1 never waits; phase 1b waits only for phase-1 items of this GPU's programs, and the
    # host caps the grid at the SM count, so every program of the grid is resident at once and finishes its phase 1
    # whatever the others do; phase 2 waits for the peers' phase-1b sums, which wait only on their own phase 1.
    # Every rank runs the same grid for the same call, so every flag any wait needs is eventually set. Tiles are
    # fixed by program index (tile t: program t mod grid), not by arrival. (Residency assumes no concurrently
    # running kernel keeps SMs forever, e.g. another spinning collective.)
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    _, epoch = arrive(state_ptr, programs)
    parity = epoch % 2
    # Double-buffered by parity: rank r can be one call ahead of rank q (it finished call c, q is still summing
    # call c's partials), but not two, since call c + 1 on r waits for q's call c + 1 sums of every tile.
    local = data_ptr + parity * REGION  # fp32 [tiles][splits][BLOCK_M * BLOCK_N]: this rank's split partials
    exchange = local + SPLIT_K_EXCHANGE_DATA  # fp32 [tiles][ranks][BLOCK_M * BLOCK_N]: every rank's tile sums
    local_flags = flags_ptr + parity * flags_stride  # int32 [tiles][splits]
    exchange_flags = local_flags + SPLIT_K_EXCHANGE_FLAGS  # int32 [tiles][ranks]
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(M, BLOCK_M) * tiles_n
    # Phase 1: every (tile, split) item's fp32 partial into this rank's local area, flagged at GPU scope.
    for item in range(pid, tiles * splits, programs):
        tile, split = _split_k_item(item, tiles)
        acc = _split_k_partial(
            a_ptr, b_ptr, M, N, K, stride_am, stride_bk, tile, split, chunk, BLOCK_M, BLOCK_N, BLOCK_K
        )
        slot = _split_k_local_slot(tile, split, splits)
        tl.store(local + slot * TILE + in_tile, acc, mask=_split_k_rows(tile, M, N, BLOCK_M, BLOCK_N))
        dl.notify(local_flags + slot, dl.rank(), signal=epoch, sig_op="set", comm_scope="gpu")
    # Phase 1b: each owned tile's splits summed here (in split order), then only that sum travels to every rank:
    # split_k times less NVLink traffic than pushing every split.
    for tile in range(pid, tiles, programs):
        rows = _split_k_rows(tile, M, N, BLOCK_M, BLOCK_N)
        first = _split_k_local_slot(tile, 0, splits)
        token = dl.wait(local_flags + first, splits, "gpu", "acquire", waitValue=epoch)
        total = _split_k_sum(dl.consume_token(local + first * TILE, token), splits, rows, BLOCK_M, BLOCK_N)
        if EXCHANGE:
            me = dl.rank()
            ranks = dl.num_ranks()
            slot = _split_k_exchange_slot(tile, me, ranks)
            for peer in range(0, ranks):
                tl.store(dl.symm_at(exchange + slot * TILE + in_tile, peer), total, mask=rows)
            _notify_every_rank(exchange_flags + slot, epoch, ranks, WORLD)
        else:
            _split_k_store(out_ptr, total, tile, M, N, stride_om, BLOCK_M, BLOCK_N)
    # Phase 2: each owned tile's W sums, in rank order.
    if EXCHANGE:
        ranks = dl.num_ranks()
        for tile in range(pid, tiles, programs):
            first = _split_k_exchange_slot(tile, 0, ranks)
            token = dl.wait(exchange_flags + first, ranks, "sys", "acquire", waitValue=epoch)
            rows = _split_k_rows(tile, M, N, BLOCK_M, BLOCK_N)
            total = _split_k_sum(dl.consume_token(exchange + first * TILE, token), ranks, rows, BLOCK_M, BLOCK_N)
            _split_k_store(out_ptr, total, tile, M, N, stride_om, BLOCK_M, BLOCK_N)


def _workspace_region_bytes(world_size: int) -> int:
    return 2 * world_size * MAX_TILE_ELEMS * 2  # two parities x ranks x the largest tile of 2-byte elements


@dataclass
class CublasPlan:
    """The cuBLAS path's "plan": ``torch.matmul`` into the output, then triton_dist's all-reduce of it in place
    (its own config choice and workspace). Launches like a ``LaunchPlan``."""

    world: rt.World
    exchange: bool

    def launch(self, device: torch.device, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        if device.type == "cuda" and device.index != torch.cuda.current_device():
            with torch.cuda.device(device):
                self.launch(device, a, b, out)
            return
        product = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=device)
        torch.matmul(a, b, out=product)
        if self.exchange:
            _all_reduce_in_place(product, product, None)
        if product is not out:
            out.copy_(product)


Plan = LaunchPlan | CublasPlan
_plans: dict[tuple, Plan] = {}


def _launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig) -> Plan:
    """Enqueue the kernel on the current stream (no checks; ``gemm_ar`` checks); returns the plan that launched it."""
    aligned = tuple(t.data_ptr() % 16 == 0 for t in (a, b, out))
    key = (a.shape, b.shape, a.stride(0), b.stride(0), out.stride(0), a.dtype, a.device, aligned, config)
    plan = _plans.get(key)
    world = rt.current_world()
    if plan is not None and plan.world is world:
        plan.launch(a.device, a, b, out)
        return plan
    if config.gemm == "cublas":
        cublas_plan = CublasPlan(world, config.exchange)
        _plans[key] = cublas_plan
        cublas_plan.launch(a.device, a, b, out)
        return cublas_plan
    if config.split_k > 1:
        return _launch_split_k(a, b, out, config, key)
    m, k = a.shape
    n = b.shape[1]
    region_bytes = _workspace_region_bytes(world.world_size)
    ws = slot_workspace("gemm_ar", SLOTS, 2 * world.world_size, region_bytes)
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    named = {
        "a_ptr": a,
        "b_ptr": b,
        "out_ptr": out,
        "data_ptr": ws.data_as(a.dtype),
        "flags_ptr": ws.flags,
        "epochs_ptr": ws.epochs,
        "M": m,
        "N": n,
        "K": k,
        "stride_am": a.stride(0),
        "stride_bk": b.stride(0),
        "stride_om": out.stride(0),
        "flags_stride": ws.flags.shape[1],
        "REGION": region_bytes // a.element_size(),
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "EXCHANGE": config.exchange,
        "WORLD": notify_world(world.world_size),
    }
    grid = (min(tiles, SLOTS), 1, 1)
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    plan = first_launch(_gemm_ar_kernel, grid, named, 3, **options)
    _plans[key] = plan
    return plan


def split_k_geometry(m: int, n: int, k: int, config: GemmARConfig) -> tuple[int, int, int]:
    """(tiles, splits, chunk) of a split-K call: ``chunk`` (a multiple of ``block_k``) is each split's K range, the
    last one ragged; ``splits`` <= ``config.split_k``, fewer when K has fewer blocks, so no split is empty. Raises
    ValueError when the call's partials would not fit the slot buffers (``SPLIT_K_MAX_ELEMS``,
    ``SPLIT_K_MAX_ITEMS``)."""
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    blocks = max(1, triton.cdiv(k, config.block_k))  # K = 0 never launches; one (empty) split if asked
    chunk = triton.cdiv(blocks, min(config.split_k, blocks)) * config.block_k
    splits = triton.cdiv(k, chunk)
    elems = tiles * config.block_m * config.block_n * splits
    if elems > SPLIT_K_MAX_ELEMS:
        raise ValueError(
            f"gemm_ar: split_k={config.split_k} with {config.block_m}x{config.block_n} tiles needs {elems} fp32 "
            f"partial elements per rank for M={m}, N={n}, K={k} ({tiles} tiles x {splits} splits), more than the "
            f"split-K buffers hold (SPLIT_K_MAX_ELEMS = {SPLIT_K_MAX_ELEMS}): use a smaller split_k or split_k=1"
        )
    if tiles * splits > SPLIT_K_MAX_ITEMS:
        raise ValueError(
            f"gemm_ar: split_k={config.split_k} with {config.block_m}x{config.block_n} tiles makes {tiles * splits} "
            f"(tile, split) items for M={m}, N={n}, K={k}, more than SPLIT_K_MAX_ITEMS = {SPLIT_K_MAX_ITEMS}: use "
            "larger tiles, a smaller split_k or split_k=1"
        )
    return tiles, splits, chunk


def split_k_grid(items: int, sm_count: int) -> int:
    """Programs of a split-K launch: one per item, at most one per SM (the kernel's waits need every program
    resident at once; see ``_gemm_ar_split_k_kernel``)."""
    return max(1, min(items, sm_count))


def _split_k_workspace_sizes(world_size: int) -> tuple[int, int]:
    """(flags per parity, bytes per parity) of the split-K workspace: the local area (every item's flag and fp32
    partial) and after it the exchange area (every tile's flag and fp32 sum from each rank: ``tiles <=
    SPLIT_K_MAX_ITEMS`` and ``tiles x tile elements <= SPLIT_K_MAX_ELEMS``, so ``world_size`` times each bound holds
    it)."""
    return SPLIT_K_MAX_ITEMS * (world_size + 1), SPLIT_K_MAX_ELEMS * (world_size + 1) * 4


def split_k_launch_args(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    config: GemmARConfig,
    world_size: int,
    sms: int,
    ws: SlotWorkspace,
) -> tuple[tuple[int, int, int], dict]:
    """(grid, named arguments) of a split-K launch; ``ws`` has ``data`` (viewed as fp32), ``flags`` [2, ...] and
    ``epochs`` (two int32: the kernel's int64 call state, ``ops/common/call_epoch.py``). Raises ValueError (from
    ``split_k_geometry``) first."""
    m, k = a.shape
    n = b.shape[1]
    tiles, splits, chunk = split_k_geometry(m, n, k, config)
    _, region_bytes = _split_k_workspace_sizes(world_size)
    named = {
        "a_ptr": a,
        "b_ptr": b,
        "out_ptr": out,
        "data_ptr": ws.data_as(torch.float32),
        "flags_ptr": ws.flags,
        "state_ptr": ws.epochs.view(torch.int64),  # the two int32 epochs: one call state (ops/common/call_epoch.py)
        "M": m,
        "N": n,
        "K": k,
        "stride_am": a.stride(0),
        "stride_bk": b.stride(0),
        "stride_om": out.stride(0),
        "chunk": chunk,
        "splits": splits,
        "flags_stride": ws.flags.shape[1],
        "REGION": region_bytes // 4,
        "BLOCK_M": config.block_m,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "EXCHANGE": config.exchange,
        "WORLD": notify_world(world_size),
    }
    return (split_k_grid(tiles * splits, sms), 1, 1), named


def _launch_split_k(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig, key: tuple
) -> LaunchPlan:
    world = rt.current_world()
    m, k = a.shape
    split_k_geometry(m, b.shape[1], k, config)  # refuse before allocating anything
    flags_per_parity, region_bytes = _split_k_workspace_sizes(world.world_size)
    # Two "slots" = the two parities; the epochs tensor's two int32 are the kernel's call state (ops/common/call_epoch.py).
    ws = slot_workspace("gemm_ar_split_k", 2, flags_per_parity, region_bytes)
    grid, named = split_k_launch_args(a, b, out, config, world.world_size, num_sms(a.device.index), ws)
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    plan = first_launch(_gemm_ar_split_k_kernel, grid, named, 3, **options)
    _plans[key] = plan
    return plan


def check_inputs(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> None:
    """Raise a TypeError/ValueError naming the problem (shapes and dtypes only; fake tensors pass through)."""
    for name, t in (("a", a), ("b", b)):
        check_matrix("gemm_ar", name, t, contiguous=False)
    if a.dtype != b.dtype:
        raise TypeError(f"gemm_ar: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"gemm_ar: a is on {a.device} but b is on {b.device}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"gemm_ar: a is {list(a.shape)} and b is {list(b.shape)}: a.shape[1] (this rank's K slice) must equal "
            "b.shape[0]"
        )
    if out is not None:
        shape = (a.shape[0], b.shape[1])
        if tuple(out.shape) != shape or out.dtype != a.dtype or out.device != a.device or out.stride(1) != 1:
            raise ValueError(
                f"gemm_ar: out must be a row-major {a.dtype} tensor of shape {list(shape)} on {a.device}, got "
                f"{out.dtype} {list(out.shape)} with strides {out.stride()} on {out.device}"
            )


_agreed = AgreedSignatures()
"""The (M, N, K/W, dtype, config) signatures the current world's ranks agreed on."""


def _check_device_and_agreement(a: torch.Tensor, b: torch.Tensor, config: GemmARConfig) -> None:
    """On the heap's device; on the first call of a (M, N, K, dtype, config), every rank agrees (a collective)."""
    world = rt.current_world()
    if a.device != world.device:
        raise ValueError(f"gemm_ar: a is on {a.device}, but this rank's symmetric heap is on {world.device}")
    signature = (a.shape[0], b.shape[1], a.shape[1], a.dtype, config)
    if _agreed.known(world, signature):
        return
    check_ranks_call_alike(
        world.group,
        world.rank,
        (a.shape[0], b.shape[1], a.shape[1], str(a.dtype), asdict(config)),
        op="gemm_ar",
        fields="(M, N, K/W, dtype, config)",
        disagreement="ranks disagree on the shapes",
        capture_message=f"gemm_ar: first call with a {list(a.shape)} @ b {list(b.shape)} during CUDA-graph capture; "
        "the ranks' agreement on the shapes is checked (a collective) on the first call: call it once before capturing",
    )
    _agreed.add(world, signature)


_ready: dict[tuple, Plan] = {}
"""The plan each call signature launched after passing the steps that depend on the signature alone (a on the
heap's device, the default config, the ranks' agreement), so a repeated signature goes straight to its launch. The
key is everything those steps and ``_launch``'s key read: the shapes, the row strides, dtype, device, the 16-byte
alignment of a, b and out, and the config argument. An entry counts only while its plan's world is the current
one."""


def _run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig | None = None) -> None:
    check_inputs(a, b, out)
    _run_checked(a, b, out, config)


def _run_checked(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig | None) -> None:
    """``_run`` after ``check_inputs(a, b, out)`` passed."""
    world = rt.current_world()
    device = a.device
    aligned = (a.data_ptr() % 16 == 0, b.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0)
    signature = (a.shape, b.shape, a.stride(0), b.stride(0), out.stride(0), a.dtype, device, aligned, config)
    plan = _ready.get(signature)
    if plan is not None and plan.world is world:
        plan.launch(device, a, b, out)
        return
    plan = _first_call_of_signature(a, b, out, config)
    if plan is not None:
        _ready[signature] = plan


def chosen_config(a: torch.Tensor, b: torch.Tensor) -> GemmARConfig:
    """What a call without a config runs: the tuned config for its shape on this GPU and world size
    (``lookup_tuned``), else ``default_config``."""
    world = rt.current_world()
    m, k_local = a.shape
    n = b.shape[1]
    tuned = lookup_tuned(tuning_key(m, n, k_local, a.dtype, world.world_size, a.device))
    if tuned is not None:
        return tuned
    backend = "hip" if torch.version.hip else "cuda"
    sms = num_sms(a.device.index) if a.device.type == "cuda" else None
    return default_config(m, n, k_local, backend, sms)


def _first_call_of_signature(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: GemmARConfig | None
) -> Plan | None:
    """The steps a repeated signature skips, then the launch; returns the plan (None when nothing is launched: an
    empty output, or K = 0, where the output is zeroed)."""
    if config is None:
        config = chosen_config(a, b)
    _check_device_and_agreement(a, b, config)
    if out.numel() == 0:
        return None
    if a.shape[1] == 0:
        out.zero_()
        return None
    if a.device.index == torch.cuda.current_device():
        return _launch(a, b, out, config)
    with torch.cuda.device(a.device):
        return _launch(a, b, out, config)


def _new_output(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


@torch.library.custom_op("triton_dist::gemm_ar", mutates_args=())
def _gemm_ar_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    check_inputs(a, b)
    out = _new_output(a, b)
    _run_checked(a, b, out, None)  # out is new, row-major [M, N] by construction
    return out


@_gemm_ar_op.register_fake
def _gemm_ar_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    check_inputs(a, b)
    return a.new_empty((a.shape[0], b.shape[1]))


def gemm_ar(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``sum over ranks of a @ b`` on every rank (``torch.ops.triton_dist``): GEMM and all-reduce in one kernel, or,
    where that measured slower on NVIDIA (more than 64 rows; 17-32 rows with a short split K: ``default_config``),
    cuBLAS followed by triton_dist's all-reduce. A shape tuned on this GPU and world size (``bench/gemm_ar.py
    --store``, or the package's table) runs the fastest config measured for it (``chosen_config``).

    ``a``: [M, K_local] row-major, ``b``: [K_local, N] row-major, both bf16 or fp16 on this rank's GPU (anywhere in
    memory). Every rank passes its own K slice with the same M, K_local and N (checked collectively on the first
    call of each shape). Accumulates in fp32; partial tiles are rounded to the dtype before the cross-rank sum (as
    an all-reduce of ``a @ b``'s output would be), the sum itself is fp32. Returns [M, N], bit-identical on every
    rank. Needs ``triton_dist.init()``; CUDA-graph capture works once the shape has been called eagerly. Eager calls
    run the custom op's implementation directly (as ``all_reduce`` does); traced calls use the op.
    """
    if not plain_eager(a):
        return torch.ops.triton_dist.gemm_ar(a, b)
    check_inputs(a, b)
    out = _new_output(a, b)
    _run_checked(a, b, out, None)  # out is new, row-major [M, N] by construction
    return out
