"""``triton_dist.ops.all_reduce`` on a world across nodes, without GPUs.

- The op on 4 CPU ranks under the emulation (``TRITON_INTERPRET=1``), laid out as 1 node of 4 (the one-node kernels,
  unchanged), 2 nodes of 2 (reduce-scatter within the node, puts of the partial sums across, all-gather within) and
  4 nodes of 1 (puts only): the checks of ``test/gpu/check_all_reduce_nodes.py`` (its ``--emulate`` worker) against
  the float64 sum of every rank's random tensor, poisoned buffers and outputs, the same bits on every rank, in place,
  calls of several sizes in a row, and which path ran.
- The world it accepts across nodes and what it refuses there, on worlds built in this process.
- The hierarchical kernel compiled for sm_90 at 2 x 2 and 2 x 1: NVSHMEM's device code linked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from dl_compile import need_library
from emulated_ranks import run_script
from test_ops_all_gather import _world

import triton_dist.ops as ops
from triton_dist.compiler import device_library
from triton_dist.ops.all_reduce import AllReduceConfig, AllReduceError
from triton_dist.ops.all_reduce.nodes import across_nodes_world, nodes_shape
from triton_dist.ops.all_reduce.nodes_kernel import _all_reduce_nodes_kernel
from triton_dist.runtime.world import lifecycle
from triton_dist.testing import compile_for

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "test" / "gpu" / "check_all_reduce_nodes.py"


def test_the_op_reduces_on_one_two_and_four_emulated_nodes() -> None:
    """4 CPU ranks: 1 x 4, 2 x 2 and 4 x 1; every rank checks every call against the float64 sum."""
    output = run_script(CHECK, 4, ["--worker", "1,2,4", "nvshmem", "--emulate"]).output
    for nodes, local in ((1, 4), (2, 2), (4, 1)):
        assert f"4 ranks, {nodes} node(s) x {local}" in output, output[-4000:]
    tallies = re.findall(r"(\d+) passed, (\d+) failed here; (\d+) failures over all ranks", output)
    assert len(tallies) == 4 and all(failed == "0" and total == "0" for _, failed, total in tallies), output[-4000:]
    assert all(int(passed) >= 60 for passed, _, _ in tallies), tallies  # 3 layouts x (1 + 12 + 2 + 4 + 1) checks
    assert output.count("PASS the hierarchical path ran") == 8 and " FAIL " not in output, output[-4000:]


def test_a_message_is_cut_into_aligned_parts_and_chunks() -> None:
    """Parts and chunks are multiples of 16 elements that cover the message; rows hold a part in fp32."""
    for numel, itemsize, local in ((1, 2, 4), (185, 2, 2), (1 << 20, 2, 8), (300_001, 4, 3), (7, 4, 1)):
        for is_emulated in (False, True):
            shape = nodes_shape(numel, itemsize, local, is_emulated)
            assert shape.part % 16 == 0 and shape.chunk % 16 == 0
            assert shape.part * local >= numel > shape.part * (local - 1) - 16 * local
            assert shape.programs * shape.chunk >= shape.part > (shape.programs - 1) * shape.chunk
            assert 1 <= shape.programs <= (2 if is_emulated else 16)
            assert shape.row_bytes >= max(4096, 4 * shape.part) and shape.row_bytes & (shape.row_bytes - 1) == 0
    assert nodes_shape(1 << 20, 2, 8, False).programs == 8  # 256 KiB parts: 8 programs of 32 KiB
    assert nodes_shape(1 << 23, 2, 8, False).programs == 16  # 2 MiB parts: at most 16 programs


def test_the_world_across_nodes_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    two_by_two, _ = _world(1, ((0, 1), (2, 3)))
    monkeypatch.setattr(lifecycle, "_world", two_by_two)
    assert across_nodes_world(AllReduceError("refused")) is two_by_two
    with pytest.raises(AllReduceError, match=r"config=.* names a one-node algorithm, but the world spans 2 nodes"):
        _with_config(torch.randn(8))

    one_node, _ = _world(0, ((0, 1),))
    monkeypatch.setattr(lifecycle, "_world", one_node)
    with pytest.raises(AllReduceError, match="^the one-node check's reason$"):
        across_nodes_world(AllReduceError("the one-node check's reason"))

    ipc, _ = _world(0, ((0,), (1,)), backend="cuda_ipc")
    monkeypatch.setattr(lifecycle, "_world", ipc)
    with pytest.raises(AllReduceError, match=r"spans 2 nodes \(ranks by node: \[\[0\], \[1\]\]\) but its heap is "):
        ops.all_reduce(torch.randn(4))

    uneven, _ = _world(3, ((0, 1, 2), (3,)))
    monkeypatch.setattr(lifecycle, "_world", uneven)
    with pytest.raises(AllReduceError, match=r"nodes hold ranks \[\[0, 1, 2\], \[3\]\]; .* same number L"):
        ops.all_reduce(torch.randn(4))

    huge = torch.empty(1 << 28, dtype=torch.bfloat16)  # 2 x 1 nodes: 4 rows of 2**30 bytes = 2**31 bf16 elements
    monkeypatch.setattr(lifecycle, "_world", _world(0, ((0,), (1,)))[0])
    with pytest.raises(AllReduceError, match=r"past the kernel's 32-bit offsets"):
        ops.all_reduce(huge)


def _with_config(x: torch.Tensor) -> None:
    from triton_dist.ops.all_reduce.op import _run

    _run(x, torch.empty_like(x), config=AllReduceConfig("two_shot", 2, 4))


def test_the_kernel_links_nvshmem_for_sm_90(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 2 x 2 kernel and the 2 x 1 one (the GPU check's two agents) compile for sm_90 with NVSHMEM's device code
    linked: its puts and signal waits resolved, no external NVSHMEM function left."""
    need_library("sm_90")
    copies = device_library.converted_nvshmem_copies()
    if not copies:
        pytest.skip("no converted NVSHMEM copy in the device directory: scripts/build.sh makes one (needs PyPI)")
    monkeypatch.setattr(device_library, "installed_nvshmem_version", lambda: copies[-1].version)
    signature = {
        **{"x_ptr": "*bf16", "out_ptr": "*bf16", "data_ptr": "*bf16", "partials_ptr": "*fp32"},
        **{"flags_ptr": "*i32", "signals_ptr": "*i64", "state_ptr": "*i64"},
        **{name: "i32" for name in ("n", "part", "chunk", "row", "row_f32")},
    }
    for local in (2, 1):
        constexprs = {"NODES": 2, "LOCAL": local, "MAX_PROGRAMS": 16, "BLOCK": 2048}
        ptx = compile_for(_all_reduce_nodes_kernel, signature, "sm_90", constexprs=constexprs).asm["ptx"]
        assert "nvshmemi_device_state_d" in ptx and not re.search(r"\.extern \.func[^\n]*nvshmem", ptx), local
        assert re.search(r"\.entry _all_reduce_nodes_kernel", ptx), local
        assert ("ld.acquire.sys" in ptx) == (local > 1), local  # the intra-node flag waits, only with local peers
