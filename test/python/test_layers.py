"""triton_dist.layers: the tensor-parallel MLP at 2 CPU ranks under the emulation (``TRITON_INTERPRET=1``,
``init(device="cpu")``) against a one-process torch reference with the same full weights, and, without a world,
the layers' sharding, ``from_shard(s)``, ``state_dict`` round trips and bad-input errors; and the script of
docs/layers.md at 2 ranks.

On 2 ranks (``emulated_ranks.run_ranks``; the emulation test runs it), ``_worker`` builds the same full weights and
input from one seed on every rank, runs its rows through ``TensorParallelMLP`` (twice: the second call relaunches the
ops' plans; then once more through a layer loaded from the first one's state dict) and returns what differed from
the reference.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
import torch
from emulated_ranks import run_ranks, run_script
from torch.nn import functional

from triton_dist.layers import ColumnParallelLinear, LayerError, RowParallelLinear, TensorParallelMLP

HEAP = "160M"
"""Each rank's CPU heap (the ops' workspaces are sized for GPUs)."""
ROWS_PER_RANK, HIDDEN, INTER = 8, 32, 64


def _mlp_weights(gen: torch.Generator, dtype: torch.dtype = torch.bfloat16) -> tuple[torch.Tensor, ...]:
    """Full gate [H, I], up [H, I] and down [I, H] weights, scaled to keep activations near 1."""
    gate = torch.randn(HIDDEN, INTER, generator=gen) / HIDDEN**0.5
    up = torch.randn(HIDDEN, INTER, generator=gen) / HIDDEN**0.5
    down = torch.randn(INTER, HIDDEN, generator=gen) / INTER**0.5
    return gate.to(dtype), up.to(dtype), down.to(dtype)


def _reference(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> torch.Tensor:
    """The unsplit MLP in fp32 on one process."""
    x, gate, up, down = x.float(), gate.float(), up.float(), down.float()
    return (functional.silu(x @ gate) * (x @ up)) @ down


def _problems(got: torch.Tensor, want: torch.Tensor) -> list[str]:
    if got.shape != want.shape:
        return [f"shape {list(got.shape)} != {list(want.shape)}"]
    if got.dtype != torch.bfloat16:
        return [f"dtype {got.dtype}, not the weights' bf16"]
    error = (got.float() - want).abs().max().item()
    return [] if torch.allclose(got.float(), want, atol=5e-2, rtol=5e-2) else [f"max abs error {error:.4g}"]


def _worker() -> dict[str, list[str]]:
    """This rank's problems per call (empty: it matched), on the world ``run_ranks`` set up."""
    import triton_dist
    from triton_dist.layers import mlp as mlp_module

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    gen = torch.Generator().manual_seed(28)
    record: dict[str, list[str]] = {}
    try:
        gate, up, down = _mlp_weights(gen)
        mlp = TensorParallelMLP(gate, up, down)  # this rank's shards, from the world
        for call in range(2):
            x = torch.randn(ROWS_PER_RANK * size, HIDDEN, generator=gen).to(torch.bfloat16)
            rows = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK)
            with mock.patch("triton_dist.layers.mlp.silu_mul", wraps=mlp_module.silu_mul) as fused:
                got = mlp(x[rows])
            record[f"mlp/call{call}"] = _problems(got, _reference(x, gate, up, down)[rows])
            if fused.call_count != 1:  # silu(gate) * up as one kernel, here in the interpreter
                record[f"mlp/call{call}"].append(f"silu_mul ran {fused.call_count} times, not once")
        loaded = TensorParallelMLP(*(torch.zeros_like(w) for w in (gate, up, down)))
        loaded.load_state_dict(mlp.state_dict())
        x = torch.randn(ROWS_PER_RANK * size, HIDDEN, generator=gen).to(torch.bfloat16)
        rows = slice(rank * ROWS_PER_RANK, (rank + 1) * ROWS_PER_RANK)
        record["mlp/loaded_state_dict"] = _problems(loaded(x[rows]), _reference(x, gate, up, down)[rows])
    except Exception as error:  # noqa: BLE001 (recorded for the test)
        record["mlp/raised"] = [f"{type(error).__name__}: {error}"]
    return record


def test_the_mlp_at_2_ranks_matches_torch() -> None:
    for rank, record in enumerate(run_ranks(_worker, 2, heap_size=HEAP).results):
        assert set(record) == {"mlp/call0", "mlp/call1", "mlp/loaded_state_dict"}, f"rank {rank}: {record}"
        failed = {name: problems for name, problems in record.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


def test_the_docs_mlp_script_runs_at_2_ranks(tmp_path: Path) -> None:
    """docs/layers.md's script (the Python block after ``<!-- layers-test: file mlp_on_cpu.py -->``) as written."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "layers.md").read_text()
    found = re.search(r"<!-- layers-test: file mlp_on_cpu.py -->\n```python\n(.*?)```", page, re.DOTALL)
    assert found, "docs/layers.md lost its mlp_on_cpu.py block"
    script = tmp_path / "mlp_on_cpu.py"
    script.write_text(found.group(1))
    output = run_script(script, 2).output
    for rank in range(2):
        assert f"rank {rank}: the MLP matches torch on 2 CPU ranks" in output, output[-3000:]


# --------------------------------------------------------------------------------------- without a world


def _full(rows: int, cols: int) -> torch.Tensor:
    return torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols).to(torch.bfloat16)


def test_column_parallel_keeps_this_ranks_columns() -> None:
    weight = _full(4, 6)
    for rank in range(3):
        layer = ColumnParallelLinear(weight, rank=rank, world_size=3)
        assert torch.equal(layer.weight, weight[:, 2 * rank : 2 * rank + 2])
        assert layer.weight.is_contiguous() and not layer.weight.requires_grad
        assert (layer.in_features, layer.out_features) == (4, 6)


def test_row_parallel_keeps_this_ranks_rows() -> None:
    weight = _full(6, 4)
    for rank in range(2):
        layer = RowParallelLinear(weight, rank=rank, world_size=2)
        assert torch.equal(layer.weight, weight[3 * rank : 3 * rank + 3])
        assert (layer.in_features, layer.out_features) == (6, 4)


def test_a_layer_owns_its_shard() -> None:
    weight = _full(4, 4)
    layer = ColumnParallelLinear(weight, rank=0, world_size=1)
    weight.zero_()
    assert layer.weight.abs().sum() > 0, "the layer's weight aliases the caller's tensor"


@pytest.mark.parametrize("cls", [ColumnParallelLinear, RowParallelLinear])
def test_linear_state_dict_round_trips(cls: type[ColumnParallelLinear] | type[RowParallelLinear]) -> None:
    layer = cls(_full(4, 8), rank=1, world_size=2)
    state = layer.state_dict()
    assert list(state) == ["weight"] and torch.equal(state["weight"], layer.weight)  # the shard, not the full weight
    other = cls(torch.zeros(4, 8, dtype=torch.bfloat16), rank=1, world_size=2)
    other.load_state_dict(state)
    assert torch.equal(other.weight, layer.weight)
    assert torch.equal(cls.from_shard(state["weight"], rank=1, world_size=2).weight, layer.weight)


def test_mlp_shards_and_state_dict() -> None:
    gate, up, down = _mlp_weights(torch.Generator().manual_seed(0))
    mlp = TensorParallelMLP(gate, up, down, rank=1, world_size=2)
    half = INTER // 2
    state = mlp.state_dict()
    assert set(state) == {"gate_up.weight", "down.weight"}
    assert torch.equal(state["gate_up.weight"], torch.cat([gate[:, half:], up[:, half:]], dim=1))
    assert torch.equal(state["down.weight"], down[half:])
    assert (mlp.hidden_size, mlp.intermediate_size) == (HIDDEN, INTER)
    again = TensorParallelMLP.from_shards(gate[:, half:], up[:, half:], down[half:], rank=1, world_size=2)
    for key, value in again.state_dict().items():
        assert torch.equal(value, state[key]), key
    unfused = TensorParallelMLP.from_shards(gate, up, down, rank=0, world_size=1, fused_silu_mul=False)
    assert mlp.fused_silu_mul and again.fused_silu_mul and not unfused.fused_silu_mul  # the option is not state
    assert not TensorParallelMLP(gate, up, down, rank=1, world_size=2, fused_silu_mul=False).fused_silu_mul
    assert set(unfused.state_dict()) == set(state)
    loaded = TensorParallelMLP(*(torch.zeros_like(w) for w in (gate, up, down)), rank=1, world_size=2)
    loaded.load_state_dict(state)
    for key, value in loaded.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_load_state_dict_refuses_another_world_sizes_shard() -> None:
    state = ColumnParallelLinear(_full(4, 8), rank=0, world_size=2).state_dict()
    with pytest.raises(RuntimeError, match="size mismatch"):
        ColumnParallelLinear(_full(4, 8), rank=0, world_size=4).load_state_dict(state)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ColumnParallelLinear(_full(4, 6), rank=0, world_size=4), "ColumnParallelLinear: weight has 6 col"),
        (lambda: RowParallelLinear(_full(6, 4), rank=0, world_size=4), "RowParallelLinear: weight has 6 rows"),
        (lambda: ColumnParallelLinear(torch.zeros(4, 4), rank=0, world_size=1), "weight must be bf16 or fp16"),
        (lambda: RowParallelLinear(torch.zeros(4, dtype=torch.half), rank=0, world_size=1), "weight must be 2-D"),
        (lambda: ColumnParallelLinear(_full(4, 4), rank=2, world_size=2), "rank 2 is not in a world of 2"),
        (
            lambda: TensorParallelMLP(_full(4, 6), _full(4, 6), _full(6, 4), rank=0, world_size=4),
            "TensorParallelMLP: gate_weight has 6 columns",
        ),
        (
            lambda: TensorParallelMLP(_full(4, 6), _full(4, 8), _full(6, 4), rank=0, world_size=2),
            "TensorParallelMLP: up_weight has shape",
        ),
        (
            lambda: TensorParallelMLP(_full(4, 6), _full(4, 6), _full(6, 5), rank=0, world_size=2),
            r"TensorParallelMLP: down_shard must be \[3, 4\]",
        ),
        (
            lambda: TensorParallelMLP(_full(4, 6), _full(4, 6), _full(6, 4).half(), rank=0, world_size=2),
            "TensorParallelMLP: mixed weight dtypes",
        ),
    ],
)
def test_bad_weights_name_the_layer_and_tensor(build: Callable[[], object], message: str) -> None:
    with pytest.raises(LayerError, match=message):
        build()


def test_bad_input_names_the_layer() -> None:
    column = ColumnParallelLinear(_full(4, 4), rank=0, world_size=1)
    with pytest.raises(LayerError, match=r"ColumnParallelLinear: input must be \[rows, 4\], got shape \[2, 5\]"):
        column(torch.zeros(2, 5, dtype=torch.bfloat16))
    with pytest.raises(LayerError, match="ColumnParallelLinear: input is torch.float16 but weight is torch.bfloat16"):
        column(torch.zeros(2, 4, dtype=torch.float16))
    row = RowParallelLinear(_full(4, 4), rank=0, world_size=2)
    with pytest.raises(LayerError, match="RowParallelLinear: input has 3 rows, not a multiple of the world size 2"):
        row(torch.zeros(3, 2, dtype=torch.bfloat16))


def test_without_a_world_the_rank_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("triton_dist.runtime.world.lifecycle._world", None)  # whatever other tests initialized
    with pytest.raises(RuntimeError, match="triton_dist.init"):
        ColumnParallelLinear(_full(4, 4))


def test_layers_take_only_the_ops_public_names() -> None:
    """layers -> ops: the layers import ``triton_dist.ops`` itself, never an op's modules (kernels, config, op)."""
    package = Path(__file__).resolve().parents[2] / "python" / "triton_dist" / "layers"
    reaching = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            modules += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            reaching += [f"{path.name}:{node.lineno} {m}" for m in modules if m.startswith("triton_dist.ops.")]
    assert package.is_dir() and not reaching, reaching
