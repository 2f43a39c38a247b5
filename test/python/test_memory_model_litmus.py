"""CPU checks of the GPU litmus and stress kernels (test/gpu/check_memory_model.py, test/gpu/stress.py): they
compile for sm_90 and gfx942, and each litmus control differs from its shape exactly by the missing acquire, so a
control that sees stale reads on a GPU really measures the acquire."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test" / "gpu"))

torch = pytest.importorskip("torch")

import check_memory_model as litmus  # noqa: E402
import stress  # noqa: E402

from triton_dist import testing  # noqa: E402

MP_SIGNATURE = {
    "tile_ptr": "*i32", "flag_ptr": "*i32", "ack_ptr": "*i32", "result_ptr": "*i32",
    "first": "i32", "rounds": "i32", "seed_here": "i32", "seed_left": "i32",
}  # fmt: skip
COUNTER_SIGNATURE = {
    "buf_ptr": "*i32", "counter_ptr": "*i32", "ack_ptr": "*i32", "result_ptr": "*i32",
    "first": "i32", "rounds": "i32", "seed_here": "i32", "seed_left": "i32",
}  # fmt: skip
# The acquiring instructions of each target: PTX acquire loads; gfx942 cache invalidates after the poll.
ACQUIRE = {"sm_90": r"ld\.acquire\.", "gfx942": r"buffer_inv"}


def compile_shape(name: str, semantic: str, target: str) -> str:
    if name == "counter":
        constexprs = {"WAIT_SEMANTIC": semantic, "PRODUCERS": litmus.PRODUCERS, "SLICE": litmus.SLICE}
        compiled = testing.compile_for(litmus.counter_flags, COUNTER_SIGNATURE, target, constexprs=constexprs)
    else:
        push, local, scope, notify_scope = litmus.MESSAGE_PASSING[name]
        constexprs = dict(PUSH=push, LOCAL=local, SCOPE=scope, NOTIFY_SCOPE=notify_scope, WAIT_SEMANTIC=semantic,
                          TILE=litmus.TILE)  # fmt: skip
        compiled = testing.compile_for(litmus.message_passing, MP_SIGNATURE, target, constexprs=constexprs)
    return testing.assembly(compiled)


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
@pytest.mark.parametrize("name", litmus.SHAPES)
def test_control_drops_only_the_consumer_acquire(name, target):
    acquire = compile_shape(name, "acquire", target)
    relaxed = compile_shape(name, "relaxed", target)
    with_acquire = len(re.findall(ACQUIRE[target], acquire))
    without = len(re.findall(ACQUIRE[target], relaxed))
    # The producer's ack wait stays acquire in both; the consumer's data wait loses its acquire in the control.
    assert with_acquire > without > 0, (with_acquire, without)


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
def test_stress_graph_wrappers_compile(target):
    testing.compile_for(stress.advance_epoch, {"epoch_ptr": "*i32", "by": "i32"}, target, num_warps=1)
    testing.compile_for(
        stress.ping_pong_device_epoch,
        {"flag_ptr": "*i32", "epoch_ptr": "*i32", "rounds": "i32"},
        target,
        constexprs={"SERVE": True},
        num_warps=1,
    )
    ag = {"CTAS_PER_PEER": 16, "BLOCK": 4096}
    push = {"shard_ptr": "*bf16", "out_ptr": "*bf16", "flags_ptr": "*i32", "epoch_ptr": "*i32", "shard_elems": "i32"}
    pull = {"shard_ptr": "*bf16", "out_ptr": "*bf16", "ready_ptr": "*i32", "done_ptr": "*i32", "epoch_ptr": "*i32",
            "shard_elems": "i32"}  # fmt: skip
    ptx = testing.assembly(testing.compile_for(stress.allgather_push_device_epoch, push, target, constexprs=ag))
    testing.assembly(testing.compile_for(stress.allgather_pull_device_epoch, pull, target, constexprs=ag))
    assert ptx


def test_stress_attention_reference_matches_a_token_loop():
    """stress.py's flash_decode reference against the definition, one token and one head at a time (CPU)."""
    gen = torch.Generator().manual_seed(0)
    batch, kv_heads, group, local_len, dim, ranks = 3, 2, 2, 5, 8, 2
    q = torch.randn(batch, kv_heads * group, dim, generator=gen)
    ks = [torch.randn(batch, kv_heads, local_len, dim, generator=gen) for _ in range(ranks)]
    vs = [torch.randn(batch, kv_heads, local_len, dim, generator=gen) for _ in range(ranks)]
    lengths = [torch.tensor([0, 3, 5]), torch.tensor([0, 1, 4])]  # sequence 0 has no tokens anywhere
    got = stress.attention_reference(q, ks, vs, lengths)
    for b in range(batch):
        for h in range(kv_heads * group):
            tokens = [
                (k[b, h // group, t], v[b, h // group, t])
                for k, v, n in zip(ks, vs, lengths, strict=True)
                for t in range(n[b])
            ]
            if not tokens:
                assert torch.equal(got[b, h], torch.zeros(dim))
                continue
            weights = torch.tensor([float(q[b, h] @ key) / dim**0.5 for key, _ in tokens]).softmax(0)
            want = sum(w * value for w, (_, value) in zip(weights, tokens, strict=True))
            assert torch.allclose(got[b, h], want, atol=1e-5), (b, h)
