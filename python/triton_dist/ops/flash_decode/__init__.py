"""``flash_decode(q, k, v, lengths)``: decode attention over a KV cache split across ranks along the sequence,
in one kernel launch: split-KV flash-decode on each rank, the partial results combined inside the kernel.

```python
# q: [B, Hq, 128] (the same on every rank); k, v: [B, Hkv, S_local, 128] (this rank's part of the cache);
# lengths: [B] int32 on the GPU (valid tokens per sequence in this rank's part; may differ per rank and be 0)
out = triton_dist.ops.flash_decode(q, k, v, lengths)      # [B, Hq, 128], attention over every rank's tokens
```

Each producer program takes one (sequence, KV head, split) of this rank's cache, runs flash attention for the
``Hq / Hkv`` query heads of that KV head (grouped-query attention: one pass over K and V serves the whole group) and
produces a partial result: the normalized output and its log-sum-exp per query head. It pushes that record into
every rank's record buffer (stores through ``dl.symm_at``) and sets its flag on every rank (``dl.notify``, a release
after a program barrier). On every rank, ``COMBINERS`` combiner programs per (sequence, KV head), one per quarter of
the head dim, wait for the ``W x splits`` records of their group (``dl.wait``, acquire) and combine their columns
(``out = sum_i e^{lse_i - M} out_i / sum_i e^{lse_i - M}``, ``M`` the maximum, records without tokens weigh 0) in
rank-and-split order, so every rank computes bit-identical outputs and no host-side collective runs.

No deadlock although programs wait for each other: a program's role comes from an arrival ticket (an atomic counter)
rather than its program id. Producers take the first tickets and never wait; combiners take the last ones and wait
only for producers: on their own GPU those hold earlier tickets, so they are already running or done, and on the
others producers run to completion without waiting for anything.

Epochs: one device-side epoch per call, read by every program with its arrival ticket (one atomic add) and advanced,
with the arrivals reset, by the last program to arrive, so CUDA-graph replays advance it like eager calls. Records and
flags are double-buffered by epoch parity: a rank rewrites parity ``p`` at epoch ``e + 2`` only after its kernel of
``e + 1`` finished, which needed every rank's epoch ``e + 1`` records, which each rank produced after its kernel of
``e`` (and its reads of parity ``p``) had ended. Flags hold epochs; a word is only ever set to the current epoch, so
``eq`` cannot match a stale word even when the record layout changes between calls.

The KV cache may live anywhere on this rank's GPU (only the partial records travel); the record buffers are on the
symmetric heap, sized on the first call of each shape to what it needs (at most ``MAX_RECORD_BYTES`` per parity).
Registered as ``torch.ops.triton_dist.flash_decode``.

- ``kernels.py``: the kernel and its ``@triton.jit`` helpers (arrival and role, one split's attention, the record
  layout, the combine), which the CPU tests run in Triton's interpreter against SDPA.
- ``config.py``: :class:`FlashDecodeConfig`, the split and combiner counts, the workspace a call needs.
- ``op.py``: the checks, the per-signature plan and workspace, the custom op, the public function.

Bad input raises :class:`FlashDecodeError` (an ``ops.common.errors.OpInputError``) before any launch.
"""

from __future__ import annotations

from triton_dist.ops.flash_decode.config import FlashDecodeConfig, FlashDecodeError
from triton_dist.ops.flash_decode.op import flash_decode

__all__ = ["FlashDecodeConfig", "FlashDecodeError", "flash_decode"]
