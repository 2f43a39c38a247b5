"""``moe_dispatch`` / ``moe_combine`` on a world across nodes, without GPUs.

- The op on 4 CPU ranks under the emulation (``TRITON_INTERPRET=1``), laid out as 1 node of 4 (the one-node kernels),
  2 nodes of 2 (load/store within a node, NVSHMEM puts across) and 4 nodes of 1 (puts only): the checks of
  ``test/gpu/check_moe_nodes.py`` (its ``--emulate`` worker) against ``ops/moe/reference.py``, on random routing
  with uneven T (T = 0 on one rank), every token to one rank (the others receive nothing; the buffers grow), fp8
  payloads, ``layout="gather"``, chunked rows and two dispatches in flight, with poisoned buffers; low-latency mode
  refused across nodes.
- The world it accepts across nodes and what it refuses there, on worlds built in this process.
- The kernels of a 2 x 2 world compiled for sm_90: NVSHMEM's device code linked into each one that moves data across
  nodes; the one-node kernels hold none of it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from dl_compile import need_library
from emulated_ranks import run_script
from test_ops_all_gather import _world
from test_ops_moe_kernels import SIGNATURES

import triton_dist.ops as ops
from triton_dist.compiler import device_library
from triton_dist.ops.common.flags import notify_world
from triton_dist.ops.moe import MoeError, kernels
from triton_dist.ops.moe.config import kernel_constexprs
from triton_dist.runtime.world import lifecycle
from triton_dist.testing import compile_for

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "test" / "gpu" / "check_moe_nodes.py"


def test_dispatch_and_combine_on_one_two_and_four_emulated_nodes() -> None:
    """4 CPU ranks: 1 x 4, 2 x 2 and 4 x 1; every rank checks every call against the reference."""
    output = run_script(CHECK, 4, ["--worker", "1,2,4", "nvshmem", "--emulate"]).output
    for nodes, local in ((1, 4), (2, 2), (4, 1)):
        assert f"4 ranks, {nodes} node(s) x {local}" in output, output[-4000:]
    tallies = re.findall(r"(\d+) passed, (\d+) failed here; (\d+) failures over all ranks", output)
    assert len(tallies) == 4 and all(failed == "0" and total == "0" for _, failed, total in tallies), output[-4000:]
    # per rank: 1 x 4: the layout, 1 case; 2 x 2: the layout, 2 cases, fp8, gather, combine's options, 2 in flight,
    # the refusal; 4 x 1: the layout, 2 cases, chunked rows, 2 in flight, the refusal
    assert all(int(passed) == 2 + 9 + 7 for passed, _, _ in tallies), tallies
    assert output.count("PASS every token to rank 0, the others receive nothing") == 8, output[-4000:]
    assert " FAIL " not in output
    assert output.count("PASS low_latency mode refuses a world across nodes") == 8, output[-4000:]


def test_the_world_across_nodes_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Normal mode accepts 2 x 2 on the NVSHMEM heap; low-latency mode, another heap and an uneven layout are
    refused at the first call with what to do."""
    from triton_dist.ops.moe import op as moe_op

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    x, idx, weights = torch.randn(4, 16).to(torch.bfloat16), torch.randint(0, 8, (4, 2)), torch.rand(4, 2)
    two_by_two, _ = _world(1, ((0, 1), (2, 3)))
    monkeypatch.setattr(lifecycle, "_world", two_by_two)
    assert moe_op._world(mode="normal") is two_by_two
    with pytest.raises(MoeError, match=r"^moe_dispatch: low_latency mode runs within one node only, and the world "):
        ops.moe_dispatch(x, idx, weights, 8, "low_latency", 4)

    ipc, _ = _world(0, ((0,), (1,)), backend="cuda_ipc")
    monkeypatch.setattr(lifecycle, "_world", ipc)
    with pytest.raises(MoeError, match=r"spans 2 nodes \(ranks by node: \[\[0\], \[1\]\]\) but its heap is 'cuda_ipc'"):
        ops.moe_dispatch(x, idx, weights, 8)

    uneven, _ = _world(3, ((0, 1, 2), (3,)))
    monkeypatch.setattr(lifecycle, "_world", uneven)
    with pytest.raises(MoeError, match=r"nodes hold ranks \[\[0, 1, 2\], \[3\]\]; .* same number L"):
        ops.moe_dispatch(x, idx, weights, 8)


def _ptx(name: str, nodes: int, local: int) -> str:
    """Kernel ``name``'s PTX for ``nodes`` x ``local`` ranks (normal mode, bf16, 16 experts, k = 2, 64 programs),
    with the arguments of the paths across nodes when ``nodes > 1``."""
    world = nodes * local
    constexprs: dict[str, Any] = dict(kernel_constexprs(world, 16, 2, 64)[name])
    signature = dict(SIGNATURES[name])
    if name == "route":
        constexprs["EXCHANGE"] = True
    if name in ("push", "expand", "combine_reduce"):
        constexprs["LOW_LATENCY"] = False
    if name == "expand":
        constexprs["GATHER"] = False
    if name in ("route", "push", "combine_push"):
        constexprs["WORLD"] = notify_world(world)
    across = {
        "route": {"count_signals_ptr": "*i64"},
        "push": {"send_ptr": "*bf16", "send_meta_ptr": "*i32", "slot_signals_ptr": "*i64"},
        "expand": {"slot_signals_ptr": "*i64"},
        "combine_push": {"send_ptr": "*fp32", "combine_signals_ptr": "*i64"},
        "combine_reduce": {"combine_signals_ptr": "*i64"},
    }[name]
    if nodes > 1:
        signature |= across
        constexprs |= {"NODES": nodes, "LOCAL": local} | ({"ELEM": 2} if name == "push" else {})
    else:
        constexprs |= {arg: None for arg in across} | {"NODES": 1, "LOCAL": 1} | ({"ELEM": 1} if name == "push" else {})
    kernel = getattr(kernels, f"_{name}_kernel")
    return str(compile_for(kernel, signature, "sm_90", constexprs=constexprs).asm["ptx"])


def test_the_kernels_link_nvshmem_across_nodes_only_for_sm_90(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 2 x 2 the kernels that put the rows across nodes (dispatch's push, combine's push) compile for sm_90 with
    NVSHMEM's device code linked: their puts resolved, no external NVSHMEM function left; the one-node push holds
    none of it. (The GPU check asserts the same of the kernels it launches, and the CPU run above runs all five.)"""
    need_library("sm_90")
    copies = device_library.converted_nvshmem_copies()
    if not copies:
        pytest.skip("no converted NVSHMEM copy in the device directory: scripts/build.sh makes one (needs PyPI)")
    monkeypatch.setattr(device_library, "installed_nvshmem_version", lambda: copies[-1].version)
    for name in ("push", "combine_push"):
        ptx = _ptx(name, 2, 2)
        assert "nvshmemi_device_state_d" in ptx and not re.search(r"\.extern \.func[^\n]*nvshmem", ptx), name
        assert re.search(rf"\.entry _{name}_kernel", ptx), name
    assert "nvshmem" not in _ptx("push", 1, 4)
