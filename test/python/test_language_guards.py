"""The device-side checks (docs/language.md, "Guards") and the context hook registered at compile time.

- every primitive that reads the context emits Triton's ``tt.assert`` of ``num_ranks() > 0`` without ``debug``, with
  a message naming the primitive and the kernel; scalar pointers given to symm_at / notify / wait are checked to lie
  in the symmetric heap; tensors of pointers only with ``TRITON_DIST_DEBUG=1``;
- the level is part of the kernel's cache key, read from ``TRITON_DIST_DEBUG``;
- the checks stay out of loops (ping-pong) and leave the data path's 16-byte vectors alone;
- hashing a kernel that uses a primitive puts a context hook into Triton's chain: the runtime's, or the compiler's
  stand-in where the runtime is not imported (the compiler never imports it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import triton
import triton.language as tl
from dl_compile import assembly, compile_kernel, load_gpu_check_kernels, need_library

import triton_dist.language as dl
from triton_dist import abi, compiler
from triton_dist.compiler import Checks, override_checks

REPO = Path(__file__).resolve().parents[2]
TARGET_NAMES = ["sm_90", "gfx942"]


@triton.jit
def every_primitive(flag_ptr, data_ptr, out_ptr):
    me = dl.rank()
    world = dl.num_ranks()
    peer_data = dl.symm_at(data_ptr, (me + 1) % world)
    dl.notify(flag_ptr, (me + 1) % world)
    token = dl.wait(flag_ptr, 1, "sys", "acquire")
    tl.store(out_ptr, tl.load(dl.consume_token(peer_data, token)))


@triton.jit
def tensor_symm_at(data_ptr, out_ptr, peer):
    offsets = tl.arange(0, 512)  # 4 x fp32 per thread of 4 warps: one 16-byte vector each
    tl.store(out_ptr + offsets, tl.load(dl.symm_at(data_ptr + offsets, peer)))


SIGNATURE = {"flag_ptr": "*i32", "data_ptr": "*fp32", "out_ptr": "*fp32"}
TENSOR_SIGNATURE = {"data_ptr": "*fp32", "out_ptr": "*fp32", "peer": "i32"}


def _assert_messages(ttir: str) -> list[str]:
    return re.findall(r'tt\.assert [^"]*"([^"]*)"', ttir)


def context_message(primitive: str, kernel: str) -> str:
    return f"triton_dist: dl.{primitive} in kernel {kernel}: the device context is not initialized"


def heap_message(primitive: str, kernel: str, name: str) -> str:
    return f"triton_dist: dl.{primitive} in kernel {kernel}: {name} does not point into this rank's symmetric heap"


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_every_primitive_checks_the_context_and_scalar_pointers(target_name):
    need_library(target_name)
    compiled = compile_kernel(every_primitive, SIGNATURE, target_name, checks=Checks.DEFAULT)
    assert not compiled.metadata.debug, "the checks must not need Triton's debug mode"
    messages = _assert_messages(compiled.asm["ttir"])
    for primitive in ("rank", "num_ranks", "symm_at", "notify", "wait"):
        assert any(m.startswith(context_message(primitive, "every_primitive")) for m in messages), messages
    for primitive, name in (("symm_at", "ptr"), ("notify", "ptr"), ("wait", "barrierPtrs")):
        assert any(m.startswith(heap_message(primitive, "every_primitive", name)) for m in messages), messages
    asm = assembly(compiled, target_name)
    if target_name == "sm_90":
        assert "call.uni __assertfail" in asm or "__assertfail," in asm, "the assert must reach the assembly"
    assert abi.HEAP_OFFSET not in asm and abi.HEAP_SIZE not in asm, "the library's check functions are inlined"


@pytest.mark.parametrize("target_name", TARGET_NAMES)
def test_no_checks_at_level_none(target_name):
    need_library(target_name)
    compiled = compile_kernel(every_primitive, SIGNATURE, target_name, checks=Checks.NONE)
    assert _assert_messages(compiled.asm["ttir"]) == []


@pytest.mark.parametrize(
    ("level", "heap_checked"), [(Checks.CONTEXT, False), (Checks.DEFAULT, False), (Checks.DEBUG, True)]
)
def test_tensors_of_pointers_are_checked_only_in_debug(level, heap_checked):
    need_library("sm_90")
    compiled = compile_kernel(tensor_symm_at, TENSOR_SIGNATURE, "sm_90", checks=level)
    messages = _assert_messages(compiled.asm["ttir"])
    assert any(m.startswith(context_message("symm_at", "tensor_symm_at")) for m in messages), messages
    heap = [m for m in messages if m.startswith(heap_message("symm_at", "tensor_symm_at", "ptr"))]
    assert bool(heap) == heap_checked, messages


def test_the_level_is_part_of_the_cache_key():
    keys = set()
    for level in Checks:
        with override_checks(level):
            keys.add(compiler.DEVICE_LIBRARY_KEY.cache_key)
    assert len(keys) == len(Checks)


@pytest.mark.parametrize(
    ("value", "level"), [("", Checks.DEFAULT), ("0", Checks.DEFAULT), ("1", Checks.DEBUG), ("true", Checks.DEBUG)]
)
def test_triton_dist_debug_sets_the_level(monkeypatch, value, level):
    from triton_dist.compiler import checks

    monkeypatch.setenv(compiler.DEBUG_ENV, value)
    checks._level_from_environment.cache_clear()
    try:
        assert compiler.check_level() is level
    finally:
        monkeypatch.undo()
        checks._level_from_environment.cache_clear()


def test_a_bad_triton_dist_debug_value_is_an_error(monkeypatch):
    from triton_dist.compiler import checks

    monkeypatch.setenv(compiler.DEBUG_ENV, "verbose")
    checks._level_from_environment.cache_clear()
    try:
        with pytest.raises(ValueError, match="TRITON_DIST_DEBUG must be 0 or 1"):
            compiler.check_level()
    finally:
        monkeypatch.undo()
        checks._level_from_environment.cache_clear()


def _loop_regions(lines: list[str]) -> list[tuple[int, int]]:
    """(label line, last back-edge line) of each PTX loop: a label that a later branch jumps back to."""
    labels = {match.group(1): i for i, line in enumerate(lines) if (match := re.match(r"\s*(\$L__\w+):", line))}
    regions = []
    for i, line in enumerate(lines):
        match = re.search(r"\bbra(\.uni)?\s+(\$L__\w+);", line)
        if match and labels.get(match.group(2), len(lines)) < i:
            regions.append((labels[match.group(2)], i))
    return regions


def test_the_checks_stay_out_of_the_ping_pong_loop():
    """The condition of each check reads the context (num_ranks at +4, heap_size at +8): none of those reads, and no
    call of __assertfail, is inside a loop of the ping-pong kernel (they are hoisted: the cost is per launch)."""
    need_library("sm_90")
    sys.path.insert(0, str(REPO / "examples"))
    try:
        from ping_pong import ping_pong
    finally:
        sys.path.remove(str(REPO / "examples"))
    signature = {"flag_ptr": "*i32", "rounds": "i32", "first": "i32"}
    compiled = compile_kernel(ping_pong, signature, "sm_90", {"SERVE": True}, num_warps=1, checks=Checks.DEFAULT)
    lines = assembly(compiled, "sm_90").splitlines()
    regions = _loop_regions(lines)
    assert regions, "\n".join(lines)
    check_reads = [i for i, line in enumerate(lines) if re.search(rf"\[{abi.CONTEXT_SYMBOL}\+(4|8)\]", line)]
    assert len(check_reads) >= 2, "\n".join(lines)
    for start, end in regions:
        inside = [i for i in check_reads if start <= i <= end]
        assert not inside, f"check reads at {inside} in the loop {start}..{end}:\n" + "\n".join(lines)
        assert not any("__assertfail" in line for line in lines[start : end + 1]), "\n".join(lines)


def test_the_checks_keep_16_byte_vectors_on_sm_90():
    need_library("sm_90")
    vector = r"\bld\.global(\.\w+)*\.v4\.b32\b"
    counts = {}
    for level in (Checks.NONE, Checks.DEBUG):
        compiled = compile_kernel(tensor_symm_at, TENSOR_SIGNATURE, "sm_90", aligned=("data_ptr",), checks=level)
        counts[level] = len(re.findall(vector, assembly(compiled, "sm_90")))
    assert counts[Checks.DEBUG] == counts[Checks.NONE] >= 1, counts


HOOK_SCRIPT = """
import sys
sys.path.insert(0, {test_dir!r})
import torch  # a process that launches kernels has torch
import triton, triton.language as tl
from triton import knobs
import triton_dist.language as dl

@triton.jit
def uses_rank(out_ptr):
    tl.store(out_ptr, dl.rank())

@triton.jit
def plain(out_ptr):
    tl.store(out_ptr, 1)

def hooks():
    return [type(hook).__name__ for hook in knobs.runtime.kernel_load_end_hook.calls]

print("runtime imported at start:", "triton_dist.runtime" in sys.modules)
plain.cache_key
print("after hashing a plain kernel:", hooks())
uses_rank.cache_key
print("after hashing a kernel that uses a primitive:", hooks(), "triton_dist.runtime" in sys.modules)
import triton_dist.runtime
print("after importing the runtime:", hooks())
"""


def test_hashing_a_kernel_that_uses_a_primitive_puts_a_context_hook_in_place(tmp_path):
    """A script that imports only triton_dist.language gets a load hook once it compiles (or looks up in the cache)
    a kernel that uses a primitive, so that kernel cannot run on the zeroed context unnoticed: the compiler's
    stand-in, since the compiler never imports the runtime; importing the runtime replaces it by the runtime's."""
    script = tmp_path / "hook.py"  # Triton reads @jit source from a file
    script.write_text(HOOK_SCRIPT.format(test_dir=str(Path(__file__).resolve().parent)))
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "runtime imported at start: False",
        "after hashing a plain kernel: []",
        "after hashing a kernel that uses a primitive: ['MissingRuntimeGuard'] False",
        "after importing the runtime: ['ContextInstaller']",
    ], result.stdout + result.stderr


class FakeChain:
    """A stand-in for Triton's ``kernel_load_end_hook`` chain."""

    def __init__(self) -> None:
        self.calls: list = []

    def add(self, func) -> None:
        if func not in self.calls:
            self.calls.append(func)

    def remove(self, func) -> None:
        if func in self.calls:
            self.calls.remove(func)


def _metadata_group(tmp_path: Path, ptx: str) -> dict[str, str]:
    path = tmp_path / "kernel.ptx"
    path.write_text(ptx)
    return {"kernel.ptx": str(path), "kernel.json": str(tmp_path / "absent.json")}


def test_without_a_runtime_the_stand_in_refuses_kernels_that_need_a_context(tmp_path):
    from triton_dist.compiler.context_hook import ContextHookRegistry

    chain = FakeChain()
    registry = ContextHookRegistry(hooks=lambda: chain)
    assert registry.ensure() is False and chain.calls == [registry.guard]
    assert registry.ensure() is False and chain.calls == [registry.guard], "idempotent"
    guard = chain.calls[0]
    (tmp_path / "plain").mkdir()
    guard(7, "function", "plain", _metadata_group(tmp_path / "plain", "ld.global.u32"), "h1")  # no context: loads
    needs = _metadata_group(tmp_path, f"ld.global.u32 %r1, [{abi.CONTEXT_SYMBOL}];")
    with pytest.raises(RuntimeError, match=r"kernel 'uses_rank' uses triton_dist primitives.*triton_dist.init\(\)"):
        guard(8, "function", "uses_rank", needs, "h2")
    assert [loaded[2] for loaded in guard.refused] == ["uses_rank"], "only the kernel that needs a context"


def test_the_stand_in_refuses_later_launches_until_a_runtime_registers(tmp_path):
    """Triton skips the load hook once a module is loaded: the stand-in refuses the refused kernel's later launches
    from the launch hook (seen on 2 x H200: without it the second launch ran on the zeroed context), only that
    kernel's, and leaves the launch hook chain when the runtime registers (which then refuses them itself)."""
    from triton_dist.compiler.context_hook import ContextHookRegistry

    loads, launches = FakeChain(), FakeChain()
    registry = ContextHookRegistry(hooks=lambda: loads, launch_hooks=lambda: launches)
    registry.ensure()
    with pytest.raises(RuntimeError):
        loads.calls[0](8, "uses_rank_fn", "uses_rank", _metadata_group(tmp_path, abi.CONTEXT_SYMBOL), "h2")
    assert launches.calls == [registry.guard.refuse_launch]

    class Launch:
        def __init__(self, function: object) -> None:
            self.data = {"function": function}

    with pytest.raises(RuntimeError, match=r"'uses_rank'.*loaded before triton_dist\.init\(\)"):
        launches.calls[0](Launch("uses_rank_fn"))
    launches.calls[0](Launch("another_fn"))  # another kernel launches
    registry.register(lambda: None, lambda *loaded: None)
    assert launches.calls == [], "the runtime refuses the adopted kernels' launches from now on"


def test_a_runtime_registering_replaces_the_stand_in_and_adopts_what_it_refused(tmp_path):
    from triton_dist.compiler.context_hook import ContextHookRegistry

    chain = FakeChain()
    registry = ContextHookRegistry(hooks=lambda: chain)
    registry.ensure()
    needs = _metadata_group(tmp_path, abi.CONTEXT_SYMBOL)
    with pytest.raises(RuntimeError):
        chain.calls[0](8, "function", "uses_rank", needs, "h2")

    def runtime_hook(*loaded):
        pass

    adopted = []
    registry.register(lambda: chain.add(runtime_hook), lambda *loaded: adopted.append(loaded))
    assert chain.calls == [runtime_hook], "the stand-in leaves the chain, the runtime's hook joins it"
    assert adopted == [(8, "function", "uses_rank", needs, "h2")], "the refused module goes to the runtime"
    chain.calls.clear()  # finalize() removes the runtime's hook; the next hash puts it back
    assert registry.ensure() is True and chain.calls == [runtime_hook]


def test_the_runtime_adopts_a_refused_module_as_pending_until_init():
    """ContextInstaller.adopt: a module refused by the stand-in joins the modules init() fills, launches refused."""
    from triton_dist.runtime.context.installer import ContextInstaller

    class Globals:
        backend = "cuda"

        def lookup(self, module, symbol):
            return (0x1000, abi.CONTEXT_BYTES) if symbol == abi.CONTEXT_SYMBOL else None

    installer = ContextInstaller(module_globals=Globals, current_device=lambda: 0, timeout_ns=lambda: 0)
    try:
        installer.adopt(5, "function", "uses_rank", {}, "h")
        assert 5 in installer.pending and "function" in installer.refused
    finally:
        installer._stop_refusing()


def test_linking_a_kernel_from_ir_registers_the_context_hook(monkeypatch):
    """The llir stage of the linking hook registers it too (kernels compiled from IR are not hashed by Triton)."""
    from triton import knobs

    from triton_dist.compiler import stages_hook

    calls = []
    monkeypatch.setattr(stages_hook, "ensure_context_hook", lambda: calls.append(True) or True)
    monkeypatch.setattr(knobs.compilation, "always_compile", True)  # a cache hit would skip the stages
    need_library("sm_90")

    @triton.jit
    def fresh_kernel(out_ptr):
        tl.store(out_ptr, dl.num_ranks())

    compile_kernel(fresh_kernel, {"out_ptr": "*i32"}, "sm_90")
    assert calls, "the llir stage did not register the context hook"


INTERPRETER_SCRIPT = textwrap.dedent(
    """
    import torch, triton, triton.language as tl
    import triton_dist.language as dl

    @triton.jit
    def who(out_ptr):
        tl.store(out_ptr, dl.rank())

    out = torch.zeros(1, dtype=torch.int32)
    try:
        who[(1,)](out)
        print("NO ERROR")
    except Exception as error:
        print(type(error).__name__, error)
    """
)


def test_the_interpreter_says_distributed_kernels_are_not_supported(tmp_path):
    script = tmp_path / "interpret.py"
    script.write_text(INTERPRETER_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    output = result.stdout + result.stderr
    assert "dl.rank: distributed kernels are not supported by Triton's interpreter (TRITON_INTERPRET=1)" in output
    assert "Did you forget" not in output, output


def test_the_gpu_guard_check_expects_the_messages_its_kernels_carry(tmp_path):
    """test/gpu/check_guards.py looks for exact messages in the GPU's output: its kernels, compiled here for
    sm_90, carry each of them (so the GPU check cannot fail, or pass, on a stale spelling)."""
    need_library("sm_90")
    kernels = load_gpu_check_kernels("check_guards.py", tmp_path)
    checker = (REPO / "test" / "gpu" / "check_guards.py").read_text()
    pull_scalar = compile_kernel(kernels.pull, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, "sm_90", {"TENSOR": False})
    pull_tensor = compile_kernel(
        kernels.pull, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, "sm_90", {"TENSOR": True}, checks=Checks.DEBUG
    )
    wait_on = compile_kernel(kernels.wait_on, {"flag_ptr": "*i32"}, "sm_90")
    expected = [
        (pull_scalar, context_message("rank", "pull")),
        (pull_scalar, heap_message("symm_at", "pull", "ptr").removeprefix("triton_dist: ")),
        (pull_tensor, heap_message("symm_at", "pull", "ptr").removeprefix("triton_dist: ")),
        (wait_on, heap_message("wait", "wait_on", "barrierPtrs").removeprefix("triton_dist: ")),
    ]
    for compiled, message in expected:
        assert any(message in m for m in _assert_messages(compiled.asm["ttir"])), message
        assert message.removeprefix("triton_dist: ") in checker, message
