"""triton_dist.ops.all_reduce without GPUs: the kernels compile for sm_90 and gfx942 with 16-byte vector accesses
and the flag protocol, launch shapes fit the workspace, configs are chosen as documented, bad input raises before
any launch, and the custom op traces with fake tensors (what torch.compile does)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from case_grid import check_each, grid
from dl_compile import assembly, compile_kernel, need_library

import triton_dist.ops  # noqa: F401 (registers torch.ops.triton_dist.*)
from triton_dist.ops import tuning
from triton_dist.ops.all_reduce import AllReduceError
from triton_dist.ops.all_reduce import config as ar_config
from triton_dist.ops.all_reduce import kernels as ar_kernels
from triton_dist.ops.all_reduce import op as ar_op

AllReduceConfig = ar_config.AllReduceConfig

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
COMMON = {"x_ptr": "", "out_ptr": "", "data_ptr": "", "flags_ptr": "*i32", "epochs_ptr": "*i32", "n": "i32"}


def _signature(kernel_name: str, dtype: str) -> dict[str, str]:
    signature = {k: (v or f"*{dtype}") for k, v in COMMON.items()}
    if kernel_name == "two_shot":
        signature["chunk"] = "i32"
    signature["flags_stride"] = "i32"
    return signature


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
@pytest.mark.parametrize(("dtype", "world"), [("bf16", 2), ("fp16", 0), ("fp32", 8)])  # WORLD=0: notify loop
@pytest.mark.parametrize("kernel_name", ["one_shot", "one_shot_push", "two_shot"])
def test_kernels_compile_with_vector_accesses_and_flags(kernel_name, dtype, world, target):
    need_library(target)
    itemsize = torch.empty((), dtype=DTYPES[dtype]).element_size()
    config = AllReduceConfig(kernel_name, 8, 4)
    shape = ar_config.launch_shape(1 << 20, itemsize, 2, config)
    kernel = {"one_shot": ar_kernels._one_shot_kernel, "one_shot_push": ar_kernels._one_shot_push_kernel}.get(
        kernel_name, ar_kernels._two_shot_kernel
    )
    constexprs = {
        "REGION": shape.region_elems,
        "ROUND": shape.round,
        "STRIDE": shape.stride,
        "BLOCK": shape.block,
        "WORLD": world,
    }
    if kernel_name == "one_shot":
        constexprs["STAGE"] = True
    aligned = ("x_ptr", "out_ptr", "data_ptr", "n") + (("chunk",) if kernel_name == "two_shot" else ())
    compiled = compile_kernel(kernel, _signature(kernel_name, dtype), target, constexprs, aligned, num_warps=4)
    asm = assembly(compiled, target)
    if target == "sm_90":
        assert "ld.global.v4.b32" in asm and "st.global.v4.b32" in asm, "16-byte vector accesses expected"
        notifies = re.findall(r"st\.release\.sys|atom\.global\.sys\.release\.exch|fence\.(acq_rel|sc)\.sys", asm)
        assert notifies, "a system-scope release (dl.notify) expected"
        assert "ld.acquire.sys" in asm  # wait
    else:
        assert "global_load_dwordx4" in asm or "buffer_load_dwordx4" in asm
        assert "global_store_dwordx4" in asm or "buffer_store_dwordx4" in asm


def _check_launch_shape(algo: str, itemsize: int, world_size: int, numel: int, programs: int) -> None:
    if programs > ar_config.SLOTS[algo]:
        with pytest.raises(ValueError, match="programs must be in"):
            AllReduceConfig(algo, programs, 8)
        return
    config = AllReduceConfig(algo, programs, 8)
    shape = ar_config.launch_shape(numel, itemsize, world_size, config)
    assert 1 <= shape.programs <= min(programs, ar_config.SLOTS[algo])
    assert shape.round % shape.block == 0 and shape.round & (shape.round - 1) == 0
    # The slot's layout: blocks of `stride` elements, the same bytes for every message and element size (a call
    # must never place a block where the previous call on the slot had another), 16-byte aligned, a round in each.
    stride_bytes = shape.stride * itemsize
    assert shape.round <= shape.stride and stride_bytes % 16 == 0
    if algo == "one_shot":
        assert stride_bytes == ar_config.ONE_SHOT_REGION_BYTES // 2  # two parity halves
        length = numel
    elif algo == "one_shot_push":
        assert stride_bytes == ar_config.PUSH_ROUND_BYTES  # 2 parities x W rows
        assert shape.region_elems * itemsize == ar_config.push_region_bytes(world_size) == 2 * world_size * stride_bytes
        length = numel
    else:
        assert stride_bytes == 1 << ((ar_config.TWO_SHOT_REGION_BYTES // (2 * world_size)).bit_length() - 1)
        assert 2 * world_size * stride_bytes <= ar_config.TWO_SHOT_REGION_BYTES  # inbox + gather buffer
        assert shape.chunk % ar_config.CHUNK_ALIGN == 0 and shape.chunk * world_size >= numel
        length = shape.chunk
    rounds = -(-length // shape.round)
    assert shape.programs == min(programs, rounds)  # programs loop over the rounds: all of the message is covered


def test_launch_shape_fits_workspace_and_covers_message():
    """Every (algorithm, element size, world size, message, programs) of the grid: the launch shape fits the
    algorithm's workspace with a layout of the workspace's (not the message's) blocks, and its programs cover the
    message, or the config is refused (case_grid names a failing case)."""
    cases = grid(
        algo=["one_shot", "one_shot_push", "two_shot"],
        itemsize=[2, 4],
        world_size=[2, 3, 8],
        numel=[1, 7, 4096, 65_539, 1 << 20, 3_000_017, 1 << 25],
        programs=[1, 16, 128, 256],
    )
    assert check_each(_check_launch_shape, cases) == 3 * 2 * 3 * 7 * 4


@pytest.fixture
def tables(monkeypatch, tmp_path):
    """An empty user cache and package table for a "Fake GPU" (what ``select_config`` reads); gives a function that
    stores a table (rows of (bytes, config)) in the package table, or with ``path=`` elsewhere."""
    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", str(tmp_path / "cache"))
    package = tmp_path / "package.json"
    monkeypatch.setattr(tuning.tables, "PACKAGE_TABLE", package)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    ar_config.forget_tables()

    def store(rows: list, world_size: int = 2, path: Path = package) -> None:
        key = ar_config.table_key(world_size, "Fake GPU")
        tuning.store(path, key, ar_config.TableEntry(tuple(rows)), {})
        ar_config.forget_tables()

    yield store
    ar_config.forget_tables()


def test_config_selection_table_then_heuristic(tables):
    device = torch.device("cuda", 0)
    assert ar_config.select_config(8 << 10, device, 2) == ar_config.heuristic_config(8 << 10, 2)
    assert ar_config.heuristic_config(8 << 10, 2).algo == "one_shot_push"
    assert ar_config.heuristic_config(64 << 20, 2).algo == "two_shot"
    table = [(64 << 10, AllReduceConfig("one_shot", 2, 4)), (1 << 20, AllReduceConfig("two_shot", 16, 8))]
    tables(table)
    assert ar_config.select_config(1000, device, 2) == table[0][1]
    assert ar_config.select_config(64 << 10, device, 2) == table[0][1]
    assert ar_config.select_config((64 << 10) + 1, device, 2) == table[1][1]
    assert ar_config.select_config(1 << 30, device, 2) == table[1][1]  # past the last row: the last row
    assert ar_config.select_config(1000, device, 4) == ar_config.heuristic_config(1000, 4)  # no table for 4 ranks
    # The user's tuning cache overrides the committed table.
    tables([(1 << 30, AllReduceConfig("two_shot", 4, 4))], path=tuning.cache_path())
    assert ar_config.select_config(1000, device, 2) == AllReduceConfig("two_shot", 4, 4)


def test_committed_tables_are_in_the_package_table():
    """The 2 x H200 and 2 x H100 tables live in ops/tuned_configs.json, rows ascending, each config valid."""
    ar_config.forget_tables()
    for gpu in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):
        table = ar_config.stored_table(2, gpu)
        assert (
            table and table[0][1].algo == "one_shot_ll" and table[-1] == (64 << 20, AllReduceConfig("two_shot", 128, 8))
        )
    assert ar_config.stored_table(2, "Fake GPU") is None
    ar_config.forget_tables()


@pytest.mark.parametrize(
    "stored",
    [
        {"rows": [[1024, {"algo": "four_shot", "programs": 1}]]},
        {"rows": [[2048, {"algo": "one_shot", "programs": 1}], [1024, {"algo": "one_shot", "programs": 1}]]},
        {"no rows": 1},
    ],
)
def test_a_malformed_stored_table_names_the_problem(tables, stored):
    path = tuning.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({ar_config.table_key(2, "Fake GPU"): {"config": stored, "measured": {}}}))
    with pytest.raises(AllReduceError, match="stored config table"):
        ar_config.select_config(1000, torch.device("cuda", 0), 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"algo": "three_shot", "programs": 1}, ValueError, "algo must be one of"),
        ({"algo": "one_shot", "programs": 0}, ValueError, "programs must be in"),
        ({"algo": "one_shot", "programs": 1, "num_warps": 3}, ValueError, "num_warps"),
    ],
)
def test_bad_config(kwargs, error, text):
    with pytest.raises(error, match=text):
        AllReduceConfig(**kwargs)


@pytest.mark.parametrize(
    ("make", "error", "text"),
    [
        (lambda: (torch.zeros(8, dtype=torch.int32), "sum", None), TypeError, "bfloat16, float16 or float32"),
        (lambda: (torch.zeros(8), "max", None), ValueError, "op must be one of"),
        (lambda: (torch.zeros(8, 8).t(), "sum", None), ValueError, "must be contiguous"),
        (lambda: ("not a tensor", "sum", None), TypeError, "must be a torch.Tensor"),
        (lambda: (torch.zeros(8), "sum", torch.zeros(9)), ValueError, "out must be a contiguous"),
        (lambda: (torch.zeros(8), "sum", torch.zeros(8, dtype=torch.float16)), ValueError, "out must be"),
    ],
)
def test_bad_input_raises_before_launch(make, error, text):
    x, op, out = make()
    with pytest.raises(error, match=text):
        ar_op.check_inputs(x, op, out)
    if isinstance(x, torch.Tensor):  # the public function raises the same, before touching the runtime
        with pytest.raises(error, match=text):
            triton_dist.ops.all_reduce(x, op, out=out)


def test_not_initialized_is_an_error_that_says_so():
    with pytest.raises(RuntimeError, match="triton_dist.init"):
        triton_dist.ops.all_reduce(torch.zeros(8))


def test_custom_op_traces_with_fake_tensors():
    from torch.fx.experimental.proxy_tensor import make_fx

    def layer(x: torch.Tensor) -> torch.Tensor:
        return triton_dist.ops.all_reduce(x * 2).relu()

    graph = make_fx(layer, tracing_mode="fake")(torch.randn(4, 64, dtype=torch.bfloat16))
    calls = [node.target for node in graph.graph.nodes if node.op == "call_function"]
    assert torch.ops.triton_dist.all_reduce.default in calls
    out_graph = make_fx(lambda x, o: triton_dist.ops.all_reduce(x, out=o), tracing_mode="fake")(
        torch.randn(16), torch.empty(16)
    )
    assert any(n.target == torch.ops.triton_dist.all_reduce_out.default for n in out_graph.graph.nodes)


@pytest.mark.parametrize(("world_size", "expected"), [(1, 1), (2, 2), (3, 0), (4, 4), (6, 0), (8, 8)])
def test_notify_world_is_the_power_of_two_world_or_zero(world_size, expected):
    assert ar_op.notify_world(world_size) == expected


def test_all_reduce_is_the_function_not_the_module():
    assert callable(triton_dist.ops.all_reduce)
    assert triton_dist.ops.all_reduce.__module__ == "triton_dist.ops.all_reduce.op"
