"""``triton_dist.ops.all_gather`` without GPUs, and the CPU emulation of NVSHMEM's one-sided primitives it uses.

- The op on 4 CPU ranks under the emulation (``TRITON_INTERPRET=1``), laid out as 1 node of 4, 2 nodes of 2 and 4
  nodes of 1 (``runtime.emulation.one_sided.emulate_nodes``: an emulated NVSHMEM heap, other nodes unmapped for
  load/store): the checks of ``test/gpu/check_all_gather.py`` (its ``--emulate`` worker), against gloo's all_gather
  on random data with poisoned buffers, calls of several sizes in a row.
- The world it accepts (by topology) and the inputs it refuses, on worlds built in this process.
- ``dl.put_signal`` / ``dl.get`` / ``dl.signal_wait`` in the emulation, on a world built in this process whose
  other node's heaps lie in this process's memory: the bytes and the signal land in the peer's heap, the wait sees
  them, and what a GPU would fault on (a rank outside the world, an address outside the heap) is an
  ``EmulationError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from dl_compile import need_library
from emulated_ranks import run_script

import triton_dist.language as dl
import triton_dist.ops as ops
from triton_dist.compiler import device_library
from triton_dist.ops.all_gather import AllGatherError, gather_world
from triton_dist.ops.all_gather.kernels import _all_gather_kernel
from triton_dist.runtime.context.wait_timeout import WaitTimeoutError
from triton_dist.runtime.emulation.one_sided import NodeEmulation
from triton_dist.runtime.emulation.state import EmulationError
from triton_dist.runtime.heap.mapping import HeapMapping
from triton_dist.runtime.heap.symmetric_heap import SymmetricHeap
from triton_dist.runtime.world import lifecycle
from triton_dist.runtime.world.topology import NodeLayout
from triton_dist.testing import compile_for

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "test" / "gpu" / "check_all_gather.py"
HEAP_SIZE = 64 * 1024
PAGE = 4096


def test_the_op_gathers_on_one_two_and_four_emulated_nodes() -> None:
    """4 CPU ranks: 1 x 4 (load/store only), 2 x 2 (puts to the other node, forwards within it) and 4 x 1 (puts
    only); every rank checks every call against gloo's all_gather of the same random shards."""
    output = run_script(CHECK, 4, ["--worker", "1,2,4", "nvshmem", "--emulate"]).output
    for nodes, local in ((1, 4), (2, 2), (4, 1)):
        assert f"4 ranks, {nodes} node(s) x {local}" in output, output[-4000:]
    tallies = re.findall(r"(\d+) passed, (\d+) failed here; (\d+) failures over all ranks", output)
    assert len(tallies) == 4 and all(failed == "0" and total == "0" for _, failed, total in tallies), output[-4000:]
    assert all(int(passed) >= 30 for passed, _, _ in tallies), tallies  # 3 layouts x (1 + 6 + 4) checks each
    assert " FAIL " not in output


def test_the_kernel_calls_nvshmem_only_across_nodes_for_sm_90(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 2 x 2 kernel compiles for sm_90 with NVSHMEM's device code linked (its puts and signal waits resolved),
    the 1 x 2 one without any. (The GPU check asserts the same of the kernels it launches.)"""
    need_library("sm_90")
    copies = device_library.converted_nvshmem_copies()
    if not copies:
        pytest.skip("no converted NVSHMEM copy in the device directory: scripts/build.sh makes one (needs PyPI)")
    monkeypatch.setattr(device_library, "installed_nvshmem_version", lambda: copies[-1].version)
    signature = {
        **{name: "*bf16" for name in ("x_ptr", "out_ptr", "data_ptr")},
        **{"flags_ptr": "*i32", "signals_ptr": "*i64", "state_ptr": "*i64", "n": "i32", "chunk": "i32", "half": "i32"},
    }
    ptx = {}
    for nodes, local in ((2, 2), (1, 2)):
        constexprs = {"ELEM_BYTES": 2, "NODES": nodes, "LOCAL": local, "MAX_PROGRAMS": 16, "BLOCK": 2048}
        ptx[nodes] = compile_for(_all_gather_kernel, signature, "sm_90", constexprs=constexprs).asm["ptx"]
    assert "nvshmemi_device_state_d" in ptx[2] and not re.search(r"\.extern \.func[^\n]*nvshmem", ptx[2])
    assert "nvshmem" not in ptx[1]


# --- worlds built in this process ---------------------------------------------------------------------------------


def _world(
    rank: int, nodes: tuple[tuple[int, ...], ...], backend: str = "nvshmem", *, emulate_remote: bool = True
) -> tuple[lifecycle.World, torch.Tensor]:
    """Rank ``rank``'s world over ``nodes`` on one block of this process's memory: the ranks of other nodes have no
    load/store view (as on the NVSHMEM heap), but, with ``emulate_remote``, the one-sided primitives reach their
    heaps (``NodeEmulation``). Returns the world and the whole block (rank ``r``'s heap at ``r * HEAP_SIZE``)."""
    world_size = sum(len(node) for node in nodes)
    memory = torch.zeros((world_size + 1) * HEAP_SIZE + PAGE, dtype=torch.uint8)
    skip = (-memory.data_ptr()) % PAGE
    block = memory[skip : skip + world_size * HEAP_SIZE]
    every = [block[peer * HEAP_SIZE : (peer + 1) * HEAP_SIZE] for peer in range(world_size)]
    layout = NodeLayout(nodes)
    mine = layout.node_of(rank)
    views = tuple(view if layout.node_of(peer) == mine else None for peer, view in enumerate(every))
    keepalive: object = NodeEmulation(tuple(v.data_ptr() for v in every), memory) if emulate_remote else memory
    mapping = HeapMapping(rank, world_size, HEAP_SIZE, torch.device("cpu"), views, keepalive=keepalive)
    heap = SymmetricHeap(mapping)
    flags = heap.empty((world_size,), torch.int32)
    world = lifecycle.World(
        group=None,  # type: ignore[arg-type]  # nothing here reaches a collective
        heap=heap,
        timeout_s=1.0,
        barrier_flags=flags,
        backend=backend,
        layout=layout,
    )
    return world, block


@pytest.fixture
def current(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The CPU emulation on (kernels decorated in a test run in the interpreter); set ``lifecycle._world`` with the
    returned monkeypatch."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    yield monkeypatch


def test_the_world_is_chosen_by_topology(current: pytest.MonkeyPatch) -> None:
    two_by_two, _ = _world(1, ((0, 1), (2, 3)))
    current.setattr(lifecycle, "_world", two_by_two)
    assert gather_world() is two_by_two, "across nodes on the NVSHMEM heap, in torchrun's layout"
    one_node, _ = _world(2, ((0, 1, 2, 3),), backend="cuda_ipc")
    current.setattr(lifecycle, "_world", one_node)
    assert gather_world() is one_node, "one node: load/store, any heap"

    ipc, _ = _world(0, ((0,), (1,)), backend="cuda_ipc")
    current.setattr(lifecycle, "_world", ipc)
    with pytest.raises(AllGatherError, match=r"spans 2 nodes \(ranks by node: \[\[0\], \[1\]\]\) but its heap is "):
        ops.all_gather(torch.randn(4))
    with pytest.raises(AllGatherError, match=r"need the NVSHMEM heap: triton_dist.init\(backend='nvshmem'\)"):
        ops.all_gather(torch.randn(4))

    uneven, _ = _world(3, ((0, 1, 2), (3,)))
    current.setattr(lifecycle, "_world", uneven)
    with pytest.raises(AllGatherError, match=r"nodes hold ranks \[\[0, 1, 2\], \[3\]\]; .* same number L"):
        ops.all_gather(torch.randn(4))

    unmapped, _ = _world(0, ((0, 1, 2),), backend="cuda_ipc")  # one node, but peer 2 has no mapping here:
    broken = HeapMapping(0, 3, HEAP_SIZE, torch.device("cpu"), (*unmapped.heap.mapping.peers[:2], None), None)
    unmapped.heap = SymmetricHeap(broken)
    current.setattr(lifecycle, "_world", unmapped)
    with pytest.raises(AllGatherError, match=r"^all_gather: rank 0 has no load/store mapping of the heaps of ranks"):
        ops.all_gather(torch.randn(4))


def test_bad_input_is_refused_before_any_launch(current: pytest.MonkeyPatch) -> None:
    world, _ = _world(0, ((0, 1),))
    current.setattr(lifecycle, "_world", world)
    for bad, words in (
        (3, "x must be a torch.Tensor, got int"),
        (torch.zeros(4, dtype=torch.complex64), "x has dtype complex64; supported: float32"),
        (torch.tensor(1.0), "x is a 0-d tensor"),
        (torch.zeros(4, 6).t(), "x must be contiguous, got shape [6, 4] with strides (1, 6)"),
    ):
        with pytest.raises(AllGatherError) as raised:
            ops.all_gather(bad)  # type: ignore[arg-type]
        assert str(raised.value).startswith("all_gather: ") and words in str(raised.value), str(raised.value)
    assert issubclass(AllGatherError, ValueError)
    huge = torch.empty(1 << 30, dtype=torch.int8)  # 2 ranks x 2**30 elements: past the kernel's 32-bit offsets
    with pytest.raises(AllGatherError, match=r"2 ranks x 1073741824 elements = 2147483648 gathered elements"):
        ops.all_gather(huge)


def test_the_custom_op_has_a_fake_with_the_gathered_shape(current: pytest.MonkeyPatch) -> None:
    world, _ = _world(1, ((0, 1, 2), (3, 4, 5)))
    current.setattr(lifecycle, "_world", world)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = torch.ops.triton_dist.all_gather(torch.empty(5, 3, 2, dtype=torch.bfloat16))
    assert list(out.shape) == [30, 3, 2] and out.dtype == torch.bfloat16


# --- the one-sided primitives in the emulation --------------------------------------------------------------------


def test_put_signal_get_and_signal_wait_reach_another_nodes_heap(current: pytest.MonkeyPatch) -> None:
    """Rank 1 of [[0, 1], [2, 3]]: a put to rank 3 (another node) lands at the same heap offset there, its signal
    set / added after it; a get from rank 2 reads its heap; signal_wait compares unsigned."""

    @triton.jit
    def put(dest_ptr, src_ptr, nbytes, signal_ptr, value, peer, ADD: tl.constexpr):  # noqa: ANN001, ANN202
        if ADD:
            dl.put_signal(dest_ptr, src_ptr, nbytes, signal_ptr, value, peer, sig_op="add")
        else:
            dl.put_signal(dest_ptr, src_ptr, nbytes, signal_ptr, value, peer)

    @triton.jit
    def get(dest_ptr, src_ptr, nbytes, peer):  # noqa: ANN001, ANN202
        dl.get(dest_ptr, src_ptr, nbytes, peer)

    @triton.jit
    def wait_then_copy(signal_ptr, value, data_ptr, out_ptr, GE: tl.constexpr):  # noqa: ANN001, ANN202
        if GE:
            token = dl.signal_wait(signal_ptr, value, cmp="ge")
        else:
            token = dl.signal_wait(signal_ptr, value)
        offs = tl.arange(0, 8)
        tl.store(out_ptr + offs, tl.load(dl.consume_token(data_ptr, token) + offs))

    world, block = _world(1, ((0, 1), (2, 3)))
    current.setattr(lifecycle, "_world", world)
    heap = world.heap
    dest = heap.empty((8,), torch.float32)
    signal = heap.empty((1,), torch.int64).zero_()
    offset = dest.data_ptr() - heap.bases[1]
    sig_offset = signal.data_ptr() - heap.bases[1]

    def on(rank: int, at: int, count: int, dtype: torch.dtype) -> torch.Tensor:
        raw = block[rank * HEAP_SIZE + at : rank * HEAP_SIZE + at + count * torch.tensor([], dtype=dtype).itemsize]
        return raw.view(dtype)

    dest.fill_(float("nan"))
    on(3, offset, 8, torch.float32).fill_(float("nan"))  # poison the destination, here and on rank 3
    on(3, sig_offset, 1, torch.int64).zero_()
    values = torch.randn(8)
    put[(1,)](dest, values, 32, signal, 7, 3, ADD=False)
    assert torch.equal(on(3, offset, 8, torch.float32), values), "the bytes land in rank 3's heap"
    assert on(3, sig_offset, 1, torch.int64).item() == 7, "the signal is set there"
    put[(1,)](dest, values, 0, signal, 5, 3, ADD=True)
    assert on(3, sig_offset, 1, torch.int64).item() == 12, "sig_op='add' adds; a put of 0 bytes still signals"
    assert torch.isnan(dest).all(), "nothing landed in this rank's own copy"

    on(2, offset, 8, torch.float32).copy_(values * 3)
    fetched = torch.full((8,), float("nan"))
    get[(1,)](fetched, dest, 32, 2)
    assert torch.equal(fetched, values * 3), "get reads rank 2's heap at the same offset"

    dest.copy_(values)
    signal.fill_(-1)  # 2**64 - 1 unsigned: passes "ge" any value
    out = torch.full((8,), float("nan"))
    wait_then_copy[(1,)](signal, 3, dest, out, GE=True)
    assert torch.equal(out, values)

    current.setattr("triton_dist.compiler.watchdog._override_ns", 200_000_000)  # 0.2 s
    signal.fill_(4)
    with pytest.raises(
        WaitTimeoutError, match=r"i64 at heap offset .* never satisfied flag == 5 .* last value seen was 4"
    ):
        wait_then_copy[(1,)](signal, 5, dest, out, GE=False)


def test_the_one_sided_primitives_refuse_what_a_gpu_would_fault_on(current: pytest.MonkeyPatch) -> None:
    @triton.jit
    def put(dest_ptr, src_ptr, nbytes, signal_ptr, peer, SHIFT: tl.constexpr = 0):  # noqa: ANN001, ANN202
        signal = signal_ptr
        if SHIFT:  # a signal address off its 8-byte alignment
            signal = (signal_ptr.to(tl.pointer_type(tl.int8)) + SHIFT).to(tl.pointer_type(tl.int64))
        dl.put_signal(dest_ptr, src_ptr, nbytes, signal, 1, peer)

    world, _ = _world(0, ((0,), (1,)))
    current.setattr(lifecycle, "_world", world)
    dest = world.heap.empty((8,), torch.float32)
    signal = world.heap.empty((1,), torch.int64)
    src = torch.randn(8)
    with pytest.raises(EmulationError, match=r"dl.put_signal on rank 0, kernel 'put', program 0: rank 2 is outside"):
        put[(1,)](dest, src, 32, signal, 2)
    with pytest.raises(EmulationError, match=r"dl.put_signal .*: dest \(32 bytes at heap offset -?\d+\) does not lie"):
        put[(1,)](src, src, 32, signal, 1)
    with pytest.raises(EmulationError, match=rf"dest \({HEAP_SIZE} bytes at heap offset \d+\) does not lie"):
        put[(1,)](dest, src, HEAP_SIZE, signal, 1)
    with pytest.raises(
        EmulationError, match=r"the signal \(8 bytes at heap offset \d+\) does not lie .* multiple of 8"
    ):
        put[(1,)](dest, src, 4, signal, 1, SHIFT=4)


# --- the GPU check's launcher -------------------------------------------------------------------------------------


def test_the_gpu_checks_launcher_kills_every_agents_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage that outlives its timeout, and one whose other agent fails, end with every agent and every process
    an agent started killed (torchrun's workers, which would otherwise hold the GPUs)."""
    import importlib.util
    import os
    import sys
    import uuid

    spec = importlib.util.spec_from_file_location("check_all_gather_launcher", CHECK)
    assert spec is not None and spec.loader is not None
    launcher = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, launcher)
    spec.loader.exec_module(launcher)
    monkeypatch.setattr(launcher, "GRACE_S", 0.5)
    marker = f"agent-child-{uuid.uuid4().hex}"
    hang = [
        sys.executable,
        "-c",
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
        f"'{marker}']); time.sleep(600)",
    ]
    fail = [sys.executable, "-c", "import sys; sys.exit(3)"]
    done = [sys.executable, "-c", "pass"]
    env = dict(os.environ)
    for agents, timeout_s, why in (
        ([hang, hang], 1.0, "timed out after 1 s: every agent's process group killed"),
        ([fail, hang], 60.0, "agent 0 failed; the others were killed 0.5 s later"),
    ):
        stage = launcher.Stage("stuck", True, [(argv, env) for argv in agents])
        assert launcher.run_stage(stage, timeout_s, tmp_path) == (False, why)
        left = [pid for pid in os.listdir("/proc") if pid.isdigit() and marker in _cmdline(pid)]
        assert not left, f"processes left behind: {left}"
    passing = launcher.Stage("fine", True, [(done, env), (done, env)])
    assert launcher.run_stage(passing, 60.0, tmp_path) == (True, "exit codes [0, 0]")


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
