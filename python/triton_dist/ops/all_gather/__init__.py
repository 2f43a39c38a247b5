"""``all_gather(x)``: every rank's ``x`` concatenated along dimension 0, on every rank, in one kernel launch.

```python
y = triton_dist.ops.all_gather(x)   # x: [n, ...] on every rank -> y: [world_size * n, ...], rank r's x at rows r n
```

- ``kernels.py``: the kernel (load/store within a node, ``dl.put_signal`` to the same local rank of every other node
  and a forward within the node) and its ordering argument.
- ``config.py``: the dtypes, :class:`AllGatherError`, programs and buffer sizes per call.
- ``op.py``: the checks, the world it runs on (by topology), the per-signature plan, ``torch.ops.triton_dist.
  all_gather`` and the public function.

A one-node world runs only the load/store path and needs no NVSHMEM; a world across nodes needs the NVSHMEM heap
(``triton_dist.init(backend="nvshmem")``, docs/multi-node.md). Bad input raises :class:`AllGatherError` before any
launch.
"""

from __future__ import annotations

from triton_dist.ops.all_gather.config import AllGatherError
from triton_dist.ops.all_gather.op import all_gather, gather_world

__all__ = ["AllGatherError", "all_gather", "gather_world"]
