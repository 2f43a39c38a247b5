"""triton-dist: multi-GPU primitives for plain ``@triton.jit`` kernels.

Kernel authors import :mod:`triton_dist.language` (as ``dl``) inside kernels and use this package's runtime on the
host: ``triton_dist.init()`` after ``torch.distributed.init_process_group``, symmetric tensors from
``triton_dist.empty`` / ``zeros``, ``triton_dist.barrier()``, and ``triton_dist.finalize()``.
"""

from __future__ import annotations

__version__ = "0.1.0"
