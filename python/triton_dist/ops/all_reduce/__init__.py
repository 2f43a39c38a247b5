"""``all_reduce(x)``: sum a tensor over every rank in one kernel launch, for the small messages of decoding.

```python
y = triton_dist.ops.all_reduce(x)              # x: any-shape bf16/fp16/fp32 CUDA tensor, on or off the heap
triton_dist.ops.all_reduce(x, out=x)           # in place (also: all_reduce_in_place(x))
```

- ``kernels.py``: the four algorithms (one-shot, one-shot push, two-shot, LL one-shot) and their ordering arguments.
- ``config.py``: :class:`AllReduceConfig`, the launch shape of a config, and which config a call takes (the tuned
  table for this GPU and world size in ``ops/tuned_configs.json`` or the user's cache, else a size heuristic).
- ``op.py``: the checks, the per-signature plan, ``torch.ops.triton_dist.all_reduce`` (and ``all_reduce_out``),
  the public functions.
- ``nodes_kernel.py`` / ``nodes.py``: a world across nodes (``triton_dist.init(backend="nvshmem")``, torchrun's
  layout): reduce-scatter within the node by load/store, the owned parts' partial sums across nodes with
  ``dl.put_signal``, all-gather within the node; selected by topology, without configs (docs/multi-node.md).

``select_config`` (and ``emulated_config`` under the CPU emulation) is the one place that decides which algorithm a
message of a given size takes; ops that move rows the way ``all_reduce`` moves elements (``ar_rmsnorm``) ask it.

Every rank sums the ranks' values in the same order, so all ranks get bit-identical results. Bad input raises
:class:`AllReduceError` (an ``ops.common.errors.OpInputError``) before any launch.
"""

from __future__ import annotations

from triton_dist.ops.all_reduce.config import AllReduceConfig, AllReduceError, emulated_config, select_config
from triton_dist.ops.all_reduce.op import all_reduce, all_reduce_in_place

__all__ = ["AllReduceConfig", "AllReduceError", "all_reduce", "all_reduce_in_place", "emulated_config", "select_config"]
