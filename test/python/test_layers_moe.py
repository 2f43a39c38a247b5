"""triton_dist.layers.ExpertParallelMoE: at 2 CPU ranks under the emulation (``TRITON_INTERPRET=1``,
``init(device="cpu")``) against a dense one-process torch reference with the same full weights (normal and
low-latency mode, bf16 and fp8, a rank without tokens and a rank receiving none, a layer built from zeros that
loaded the first one's state dict, an expert id out of range in low-latency mode; ``dispatch_layout="gather"``
in bf16, fp8 and with a rank receiving none); and, without a world, the
sharding, ``from_shards``, ``state_dict`` round trips and the errors.

On 2 ranks (``emulated_ranks.run_ranks``; the emulation test runs it), ``_worker`` builds the same full weights and
every rank's tokens and routing from one seed on every rank, runs its own tokens through the layer and returns what
differed from the reference.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from emulated_ranks import run_ranks
from torch.nn import functional

from triton_dist.layers import ExpertParallelMoE, LayerError

EXPERTS, HIDDEN, INTER, TOPK = 4, 32, 48, 2
TOKENS = (6, 3)
"""Tokens per rank at 2 ranks (uneven)."""


def _weights(gen: torch.Generator, experts: int = EXPERTS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Full gate [E, H, I], up [E, H, I] and down [E, I, H] in bf16, scaled to keep activations near 1."""
    gate = torch.randn(experts, HIDDEN, INTER, generator=gen) / HIDDEN**0.5
    up = torch.randn(experts, HIDDEN, INTER, generator=gen) / HIDDEN**0.5
    down = torch.randn(experts, INTER, HIDDEN, generator=gen) / INTER**0.5
    return gate.bfloat16(), up.bfloat16(), down.bfloat16()


def _routing(gen: torch.Generator, tokens: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [T, H] bf16, distinct expert ids per token with some -1, and weights."""
    x = torch.randn(tokens, HIDDEN, generator=gen).bfloat16()
    rows = [torch.randperm(EXPERTS, generator=gen)[:TOPK] for _ in range(tokens)]
    idx = (torch.stack(rows) if rows else torch.zeros(0, TOPK)).to(torch.int32)
    idx[torch.rand(tokens, TOPK, generator=gen) < 0.2] = -1
    return x, idx, torch.rand(tokens, TOPK, generator=gen)


def _reference(
    x: torch.Tensor, idx: torch.Tensor, weights: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor
) -> torch.Tensor:
    """The dense MoE in fp32 on one process: per token, sum_k w_k * down_e(silu(x @ gate_e) * (x @ up_e))."""
    out = torch.zeros(x.shape[0], HIDDEN)
    for t in range(x.shape[0]):
        for k in range(idx.shape[1]):
            e = int(idx[t, k])
            if e >= 0:
                h = functional.silu(x[t].float() @ gate[e].float()) * (x[t].float() @ up[e].float())
                out[t] += weights[t, k] * (h @ down[e].float())
    return out


def _problems(got: torch.Tensor, want: torch.Tensor, fp8: bool = False) -> list[str]:
    if got.shape != want.shape or got.dtype != torch.bfloat16:
        return [f"got {got.dtype} {list(got.shape)}, want bf16 {list(want.shape)}"]
    if want.numel() == 0:
        return []
    if fp8:  # e4m3 keeps 3 mantissa bits: a relative error of a few percent
        error = ((got.float() - want).norm() / want.norm()).item()
        return [] if error < 0.08 else [f"relative error {error:.4g}"]
    error = (got.float() - want).abs().max().item()
    return [] if torch.allclose(got.float(), want, atol=5e-2, rtol=5e-2) else [f"max abs error {error:.4g}"]


def _worker() -> dict[str, list[str]]:
    """This rank's problems per case (empty: it matched), on the world ``run_ranks`` set up (a 64M CPU heap)."""
    import triton_dist
    from triton_dist.ops.moe import MoeStatusError

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    gen = torch.Generator().manual_seed(27)
    gate, up, down = _weights(gen)
    record: dict[str, list[str]] = {}

    def run(key: str, layer: ExpertParallelMoE, fp8: bool = False) -> None:
        inputs = [_routing(gen, TOKENS[r % len(TOKENS)]) for r in range(size)]  # any world size
        try:
            got = layer(*inputs[rank])
            record[key] = _problems(got, _reference(*inputs[rank], gate, up, down), fp8)
        except Exception as error:  # noqa: BLE001 (recorded for the test)
            record[key] = [f"{type(error).__name__}: {error}"]

    normal = ExpertParallelMoE(gate, up, down)
    run("normal", normal)
    low_latency = ExpertParallelMoE(gate, up, down, mode="low_latency", max_tokens_per_rank=max(TOKENS))
    run("low_latency", low_latency)
    run("fp8/normal", ExpertParallelMoE(gate, up, down, fp8=True), fp8=True)
    gathered = ExpertParallelMoE(gate, up, down, dispatch_layout="gather")  # each token once, GEMM reads through
    run("gather/normal", gathered)
    run("gather/fp8/normal", ExpertParallelMoE(gate, up, down, fp8=True, dispatch_layout="gather"), fp8=True)
    # Rank 1 has no tokens and rank 0 sends every token to rank 1's experts: rank 0's GEMMs get no rows.
    x, idx, weights = _routing(torch.Generator().manual_seed(rank), 5 if rank == 0 else 0)
    idx = torch.where(idx >= 0, EXPERTS - 1 - idx % 2, idx)
    try:
        record["empty"] = _problems(normal(x, idx, weights), _reference(x, idx, weights, gate, up, down))
    except Exception as error:  # noqa: BLE001 (recorded for the test)
        record["empty"] = [f"{type(error).__name__}: {error}"]
    try:
        record["gather/empty"] = _problems(gathered(x, idx, weights), _reference(x, idx, weights, gate, up, down))
    except Exception as error:  # noqa: BLE001 (recorded for the test)
        record["gather/empty"] = [f"{type(error).__name__}: {error}"]
    loaded = ExpertParallelMoE(*(torch.zeros_like(w) for w in (gate, up, down)))
    loaded.load_state_dict(normal.state_dict())
    run("loaded_state_dict", loaded)  # the same plans again, fresh routing
    # An expert id out of range on rank 0, low-latency mode: the forward completes, check_status raises there only.
    x, idx, weights = _routing(gen, 4)
    if rank == 0:
        idx[1, 0] = EXPERTS + 1
    low_latency(x, idx, weights)
    try:
        low_latency.check_status()
        raised = ""
    except MoeStatusError as error:
        raised = str(error)
    record["bad_id/check_status"] = [] if bool(raised) == (rank == 0) else [f"check_status: {raised!r}"]
    return record


def test_the_moe_layer_at_2_ranks_matches_a_dense_reference() -> None:
    records = run_ranks(_worker, 2, heap_size="64M").results
    keys = {"normal", "low_latency", "empty", "fp8/normal", "loaded_state_dict", "bad_id/check_status"}
    keys |= {"gather/normal", "gather/fp8/normal", "gather/empty"}
    for rank, record in enumerate(records):
        assert set(record) == keys, f"rank {rank}: {record}"
        failed = {name: problems for name, problems in record.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


# --------------------------------------------------------------------------------------- without a world


def test_keeps_this_ranks_experts_and_state_dict_round_trips() -> None:
    gate, up, down = _weights(torch.Generator().manual_seed(0), experts=6)
    layer = ExpertParallelMoE(gate, up, down, rank=1, world_size=3)
    state = layer.state_dict()
    assert set(state) == {"gate_up_weight", "down_weight"}
    assert torch.equal(state["gate_up_weight"], torch.cat([gate[2:4], up[2:4]], dim=2))
    assert torch.equal(state["down_weight"], down[2:4]) and not layer.down_weight.requires_grad
    assert (layer.local_experts, layer.hidden_size, layer.intermediate_size) == (2, HIDDEN, INTER)
    again = ExpertParallelMoE.from_shards(gate[2:4], up[2:4], down[2:4], num_experts=6, rank=1, world_size=3)
    loaded = ExpertParallelMoE(*(torch.zeros_like(w) for w in (gate, up, down)), rank=1, world_size=3)
    loaded.load_state_dict(state)
    for other in (again, loaded):
        for key, value in other.state_dict().items():
            assert torch.equal(value, state[key]), key
    gate.zero_()
    assert layer.gate_up_weight.abs().sum() > 0, "the layer's weights alias the caller's"


def test_fp8_layer_keeps_block_scaled_weights() -> None:
    from triton_dist.ops import quantize_weights_fp8

    gate, up, down = _weights(torch.Generator().manual_seed(1))
    layer = ExpertParallelMoE(gate, up, down, fp8=True, rank=0, world_size=2)
    state = layer.state_dict()
    assert set(state) == {"gate_up_weight", "down_weight", "gate_up_scale", "down_scale"}
    assert state["gate_up_weight"].dtype == torch.float8_e4m3fn and state["gate_up_scale"].shape == (2, 1, 1)
    q, scales = quantize_weights_fp8(down[:2])
    assert torch.equal(state["down_weight"].view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(state["down_scale"], scales)
    loaded = ExpertParallelMoE(*(torch.zeros_like(w) for w in (gate, up, down)), fp8=True, rank=0, world_size=2)
    loaded.load_state_dict(state)
    assert torch.equal(loaded.gate_up_scale, layer.gate_up_scale)


def _layer(**options: object) -> ExpertParallelMoE:
    gate, up, down = _weights(torch.Generator().manual_seed(2))
    return ExpertParallelMoE(gate, up, down, rank=0, world_size=2, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ExpertParallelMoE(*_weights(torch.Generator(), experts=3), rank=0, world_size=2),
            "ExpertParallelMoE: gate_weight has 3 experts, not a multiple of the world size 2",
        ),
        (
            lambda: ExpertParallelMoE(torch.zeros(4, 32, 48), *_weights(torch.Generator())[1:], rank=0, world_size=2),
            "ExpertParallelMoE: gate_weight must be bf16 or fp16",
        ),
        (
            lambda: ExpertParallelMoE(*_weights(torch.Generator())[:2], torch.zeros(4, 48), rank=0, world_size=2),
            r"ExpertParallelMoE: down_weight must be 3-D \[experts, in_features, out_features\]",
        ),
        (
            lambda: ExpertParallelMoE.from_shards(*_weights(torch.Generator()), num_experts=4, rank=0, world_size=2),
            "ExpertParallelMoE: gate_shard holds 4 experts, but 4 experts over 2 ranks give 2 per rank",
        ),
        (
            lambda: ExpertParallelMoE(
                *_weights(torch.Generator())[:2], _weights(torch.Generator())[2][:, :, :16], rank=0, world_size=2
            ),
            r"ExpertParallelMoE: down_shard must be \[2, 48, 32\]",
        ),
        (lambda: _layer(mode="fast"), "ExpertParallelMoE: mode must be one of"),
        (lambda: _layer(mode="low_latency"), "ExpertParallelMoE: low_latency mode needs max_tokens_per_rank"),
        (lambda: _layer(max_tokens_per_rank=8), "max_tokens_per_rank is for low_latency mode"),
        (lambda: _layer(dispatch_layout="once"), "ExpertParallelMoE: dispatch_layout must be 'expanded' or 'gather'"),
        (
            lambda: _layer(mode="low_latency", max_tokens_per_rank=8, dispatch_layout="gather"),
            "dispatch_layout='gather' is for normal mode",
        ),
    ],
)
def test_bad_weights_name_the_layer_and_tensor(build: Callable[[], object], message: str) -> None:
    with pytest.raises(LayerError, match=message):
        build()


def test_bad_input_names_the_layer_and_tensor() -> None:
    layer = _layer(mode="low_latency", max_tokens_per_rank=2)
    idx, weights = torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, 2)
    with pytest.raises(LayerError, match=r"ExpertParallelMoE: x must be \[tokens, 32\], got shape \[2, 16\]"):
        layer(torch.zeros(2, 16, dtype=torch.bfloat16), idx, weights)
    with pytest.raises(LayerError, match="ExpertParallelMoE: x is torch.float16 but the layer's weights are"):
        layer(torch.zeros(2, 32, dtype=torch.float16), idx, weights)
    with pytest.raises(LayerError, match=r"ExpertParallelMoE: topk_idx must be \[2, k\]"):
        layer(torch.zeros(2, 32, dtype=torch.bfloat16), idx[:1], weights)
    with pytest.raises(LayerError, match="ExpertParallelMoE: topk_weights must have topk_idx's shape"):
        layer(torch.zeros(2, 32, dtype=torch.bfloat16), idx, weights[:, :1])
    with pytest.raises(LayerError, match="ExpertParallelMoE: x has 3 tokens, more than max_tokens_per_rank=2"):
        layer(torch.zeros(3, 32, dtype=torch.bfloat16), torch.zeros(3, 2, dtype=torch.int32), torch.ones(3, 2))
