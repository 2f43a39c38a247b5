"""``gemm_ar(a, b)``: the row-parallel linear layer of decoding, ``sum over ranks of a @ b``, in one kernel (or, where
that measured slower, cuBLAS then ``all_reduce``: see "The cuBLAS path" below).

```python
# a: [M, K / W] (this rank's slice of the activations), b: [K / W, N] (this rank's rows of the weight)
y = triton_dist.ops.gemm_ar(a, b)          # [M, N], the same on every rank
# with a decoder layer's epilogue: residual + the sum, then RMSNorm (all_reduce_residual_rmsnorm's definition)
normed, residual = triton_dist.ops.gemm_ar(a, b, residual=residual, norm_weight=w, eps=1e-6)
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
all-reduce (``ops/all_reduce/kernels.py``); the epochs live on the device (``ops/common/slot_workspace.py``), so
CUDA graphs replay correctly.

Meant for decode shapes (M <= 256). Registered as ``torch.ops.triton_dist.gemm_ar``.

The norm epilogue (``residual=``, ``norm_weight=``; ``torch.ops.triton_dist.gemm_ar_rmsnorm``): the norm needs whole
rows, which the tiles above split across programs, so it is two launches: this rank's ``a @ b`` with the GEMM the
plain call would run (the chosen config with its exchange off), then ``all_reduce_residual_rmsnorm`` of the product,
whose one kernel all-reduces, adds the residual and norms.

The cuBLAS path (``GemmARConfig(gemm="cublas")``): ``torch.matmul`` into the output, then ``ops.all_reduce`` of it in
place, two launches. ``default_config`` takes it on NVIDIA where it measured faster than the fused kernel: above 64
rows, where the fused kernel's GEMM is slower than cuBLAS's, and at 17-32 rows with a short split K.

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
``SPLIT_K_MAX_ITEMS``): a config past them raises GemmArError before launching. ``exchange=False`` stops after step 2's
local sum, which it stores (this rank's ``a @ b``, the GEMM alone with its split reduction).

- ``kernels.py``: the fused kernel and the split-K kernel.
- ``config.py``: :class:`GemmARConfig`, the measured defaults, the tuned table's entries, the split-K geometry.
- ``op.py``: the checks, the per-signature plan, ``torch.ops.triton_dist.gemm_ar``, the public function.

Bad input raises :class:`GemmArError` (an ``ops.common.errors.OpInputError``) before any launch.
"""

from __future__ import annotations

from triton_dist.ops.gemm_ar.config import GemmARConfig, GemmArError
from triton_dist.ops.gemm_ar.op import gemm_ar

__all__ = ["GemmARConfig", "GemmArError", "gemm_ar"]
