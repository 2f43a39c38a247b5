"""``triton_dist.ops`` exports every op as a function and registers each as a torch custom op.

A package ``__init__`` that several op modules share lost an export once (``ag_gemm``); this keeps the list whole.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

OPS = (
    "ag_gemm",
    "gemm_rs",
    "all_reduce",
    "all_reduce_residual_rmsnorm",
    "gemm_ar",
    "flash_decode",
    "moe_dispatch",
    "moe_combine",
)


def test_every_op_is_exported_as_a_function() -> None:
    import triton_dist.ops as ops

    for name in OPS:
        assert name in ops.__all__, f"triton_dist.ops.__all__ lacks {name}"
        value = getattr(ops, name)
        assert callable(value) and not isinstance(value, type(ops)), f"triton_dist.ops.{name} is {value!r}"


def test_every_op_is_a_torch_custom_op() -> None:
    import triton_dist.ops  # noqa: F401 (registers the ops)

    for name in OPS:
        assert hasattr(torch.ops.triton_dist, name), f"torch.ops.triton_dist.{name} is not registered"
