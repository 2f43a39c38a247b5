"""The prefill RoPE tables of ``TensorParallelAttention``: made once per sequence length and shared by every block
of the same geometry, equal to the tables made from the positions, bounded in number, and not kept under
``torch.compile`` (the prefill itself is checked against torch in test_layers_decoder.py)."""

from __future__ import annotations

from collections.abc import Iterator
from unittest import mock

import pytest
import torch

from triton_dist.layers import TensorParallelAttention
from triton_dist.layers import attention as attention_module
from triton_dist.layers.attention import PREFILL_ROPE_KEPT, rope_cos_sin

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 32, 4, 2, 8


def _block(theta: float = 10000.0, seed: int = 0) -> TensorParallelAttention:
    gen = torch.Generator().manual_seed(seed)

    def weight(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, generator=gen).to(torch.bfloat16)

    q, k, v = weight(HIDDEN, HEADS * HEAD_DIM), weight(HIDDEN, KV_HEADS * HEAD_DIM), weight(HIDDEN, KV_HEADS * HEAD_DIM)
    return TensorParallelAttention(
        q, k, v, weight(HEADS * HEAD_DIM, HIDDEN), num_heads=HEADS, num_kv_heads=KV_HEADS, head_dim=HEAD_DIM,
        rope_theta=theta, rank=0, world_size=1,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _no_kept_tables() -> Iterator[None]:
    attention_module._prefill_rope.clear()
    yield
    attention_module._prefill_rope.clear()


def _made() -> mock._patch:
    """Counts the blocks' ``rope_tables`` calls (what making the tables launches)."""
    return mock.patch.object(
        TensorParallelAttention, "rope_tables", autospec=True, side_effect=TensorParallelAttention.rope_tables
    )


def test_the_tables_are_the_positions_rotation_made_once_and_shared() -> None:
    first, second = _block(seed=1), _block(seed=2)  # other weights, the same geometry
    cpu = torch.device("cpu")
    with _made() as made:
        cos, signed_sin = first.prefill_rope(7, cpu)
        again = first.prefill_rope(7, cpu)
        shared = second.prefill_rope(7, cpu)
    assert made.call_count == 1
    assert again[0] is cos and again[1] is signed_sin and shared[0] is cos and shared[1] is signed_sin
    want_cos, want_sin = rope_cos_sin(torch.arange(7), first.inv_freq)
    half = HEAD_DIM // 2
    assert cos.shape == (7, HEAD_DIM) and cos.dtype == torch.float32
    torch.testing.assert_close(cos, want_cos)
    torch.testing.assert_close(signed_sin, torch.cat([-want_sin[:, :half], want_sin[:, half:]], dim=1))


def test_another_length_or_theta_gets_its_own_tables() -> None:
    block, other = _block(), _block(theta=500000.0)
    cpu = torch.device("cpu")
    with _made() as made:
        short, long = block.prefill_rope(5, cpu), block.prefill_rope(6, cpu)
        theirs = other.prefill_rope(5, cpu)
    assert made.call_count == 3
    assert short[0].shape[0] == 5 and long[0].shape[0] == 6
    assert not torch.equal(theirs[1], short[1])  # theta changes the angles
    torch.testing.assert_close(long[0][:5], short[0])


def test_only_the_most_recently_used_tables_are_kept() -> None:
    block = _block()
    cpu = torch.device("cpu")
    oldest = block.prefill_rope(1, cpu)
    for seq in range(2, PREFILL_ROPE_KEPT + 1):
        block.prefill_rope(seq, cpu)
    assert block.prefill_rope(1, cpu)[0] is oldest[0]  # a use makes it the most recent again
    block.prefill_rope(PREFILL_ROPE_KEPT + 1, cpu)  # evicts length 2, the least recently used
    assert len(attention_module._prefill_rope) == PREFILL_ROPE_KEPT
    assert sorted(key[0] for key in attention_module._prefill_rope) == [1, *range(3, PREFILL_ROPE_KEPT + 2)]
    assert block.prefill_rope(1, cpu)[0] is oldest[0]


def test_nothing_is_kept_while_compiling() -> None:
    block = _block()
    with mock.patch.object(torch.compiler, "is_compiling", return_value=True), _made() as made:
        block.prefill_rope(3, torch.device("cpu"))
        block.prefill_rope(3, torch.device("cpu"))
    assert made.call_count == 2 and not attention_module._prefill_rope
