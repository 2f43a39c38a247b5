"""The wait watchdog on the CPU: its setting, the library it selects, the records and the error it becomes.

What needs a GPU (a real stuck wait, a dead rank) is test/gpu/check_watchdog.py.
"""

from __future__ import annotations

import ctypes
import re

import pytest
import torch
import triton
import triton.language as tl
from dl_compile import assembly, compile_kernel, need_library
from emulated_ranks import run_ranks

import triton_dist
import triton_dist.language as dl
from triton_dist import abi, compiler
from triton_dist.compiler import device_library, watchdog
from triton_dist.runtime.context import installer as installer_module
from triton_dist.runtime.context.installer import ContextInstaller
from triton_dist.runtime.context.payload import pack_context
from triton_dist.runtime.context.wait_timeout import (
    SLOT_BYTES,
    SLOTS_PER_CHUNK,
    RecordSlots,
    WaitTimeoutError,
    decode_record,
)
from triton_dist.runtime.world import stream_sync

HEAP_SIZE = 1 << 30
BASES = [0x7F00_0000_0000, 0x7F10_0000_0000]


@pytest.fixture(autouse=True)
def _environment_default(monkeypatch):
    """Every test starts from the environment's setting (unset) and leaves no override behind."""
    monkeypatch.delenv(watchdog.WAIT_TIMEOUT_ENV, raising=False)
    watchdog._timeout_ns_from_environment.cache_clear()
    watchdog.set_wait_timeout(None)
    yield
    watchdog.set_wait_timeout(None)
    watchdog._timeout_ns_from_environment.cache_clear()


# --- the setting -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ns"),
    [("", watchdog.DEFAULT_WAIT_TIMEOUT_S * 10**9), ("0", 0), ("1", 10**9), ("0.25", 250_000_000), (" 2e-9 ", 2)],
)
def test_the_environment_sets_the_timeout(monkeypatch, value, ns):
    monkeypatch.setenv(watchdog.WAIT_TIMEOUT_ENV, value)
    watchdog._timeout_ns_from_environment.cache_clear()
    assert compiler.wait_timeout_ns() == ns
    assert compiler.watchdog_enabled() == (ns > 0)


@pytest.mark.parametrize(("value", "message"), [("soon", "must be a number"), ("-1", ">= 0"), ("inf", "finite")])
def test_a_bad_environment_value_names_the_variable(monkeypatch, value, message):
    monkeypatch.setenv(watchdog.WAIT_TIMEOUT_ENV, value)
    watchdog._timeout_ns_from_environment.cache_clear()
    with pytest.raises(ValueError, match=rf"TRITON_DIST_WAIT_TIMEOUT_S.*{re.escape(message)}"):
        compiler.wait_timeout_ns()


def test_init_option_overrides_the_environment_until_reset(monkeypatch):
    monkeypatch.setenv(watchdog.WAIT_TIMEOUT_ENV, "5")
    watchdog._timeout_ns_from_environment.cache_clear()
    compiler.set_wait_timeout(0.5)
    assert compiler.wait_timeout_ns() == 500_000_000
    compiler.set_wait_timeout(0)
    assert not compiler.watchdog_enabled()
    compiler.set_wait_timeout(None)
    assert compiler.wait_timeout_ns() == 5_000_000_000
    with pytest.raises(ValueError, match="wait_timeout_s"):
        compiler.set_wait_timeout(-2)
    with pytest.raises(TypeError, match="wait_timeout_s"):
        compiler.set_wait_timeout("1")  # type: ignore[arg-type]


def test_on_and_off_are_part_of_the_cache_key_but_not_the_value(monkeypatch):
    monkeypatch.delenv(watchdog.WAIT_TIMEOUT_ENV, raising=False)
    watchdog._timeout_ns_from_environment.cache_clear()
    try:
        default = compiler.DEVICE_LIBRARY_KEY.cache_key
        compiler.set_wait_timeout(0)
        off = compiler.DEVICE_LIBRARY_KEY.cache_key
        compiler.set_wait_timeout(1.0)
        one_second = compiler.DEVICE_LIBRARY_KEY.cache_key
        compiler.set_wait_timeout(30.0)
        thirty_seconds = compiler.DEVICE_LIBRARY_KEY.cache_key
    finally:
        compiler.set_wait_timeout(None)
    assert off != one_second == thirty_seconds == default, "on by default"


def test_on_by_default_with_nccls_timeout(monkeypatch):
    monkeypatch.delenv(watchdog.WAIT_TIMEOUT_ENV, raising=False)
    watchdog._timeout_ns_from_environment.cache_clear()
    assert compiler.watchdog_enabled() and compiler.wait_timeout_ns() == 600 * 10**9
    assert compiler.DEFAULT_WAIT_TIMEOUT_S == 600


# --- the library it links ----------------------------------------------------------------------------------------


@triton.jit
def wait_then_store(flag_ptr, out_ptr):
    token = dl.wait(flag_ptr, 1, "sys", "acquire", waitValue=3, cmp="ge")
    tl.store(dl.consume_token(out_ptr, token), 1)


SIGNATURE = {"flag_ptr": "*i32", "out_ptr": "*i32"}
WATCHDOG_GLOBAL = abi.WAIT_WATCHDOG_SYMBOL


def _compile(target_name, timeout_s):
    """A fresh ``JITFunction`` (Triton memoizes cache keys) compiled with the watchdog set to ``timeout_s``."""
    compiler.set_wait_timeout(timeout_s)
    try:
        return assembly(compile_kernel(triton.jit(wait_then_store.fn), SIGNATURE, target_name), target_name)
    finally:
        compiler.set_wait_timeout(None)


def _need_watchdog_library(backend):
    path = compiler.library_path(backend, watchdog=True)
    if not path.is_file():
        pytest.skip(f"{path.name} is not built ({path} is missing: run scripts/build.sh)")


def test_the_unwatched_kernel_has_no_watchdog_and_does_not_change(monkeypatch):
    need_library("sm_90")
    _need_watchdog_library("cuda")
    monkeypatch.delenv(watchdog.WAIT_TIMEOUT_ENV, raising=False)
    watchdog._timeout_ns_from_environment.cache_clear()
    off = _compile("sm_90", 0)
    assert WATCHDOG_GLOBAL not in off and "%globaltimer" not in off  # (its assert may still trap)
    with_watchdog = _compile("sm_90", 1.0)
    assert with_watchdog != off
    assert _compile("sm_90", 0) == off, "the unwatched PTX must not depend on a watchdog compiled before it"
    assert _compile("sm_90", None) == with_watchdog, "the default is the watchdog, its timeout a runtime value"


def test_the_watchdog_kernel_reads_the_runtime_timeout_and_traps_on_sm_90():
    need_library("sm_90")
    _need_watchdog_library("cuda")
    ptx = _compile("sm_90", 2.5)
    assert re.search(rf"\.visible \.global \.align 8 \.b8 {WATCHDOG_GLOBAL}\[{abi.WAIT_WATCHDOG_BYTES}\];", ptx), ptx
    assert "%globaltimer" in ptx
    assert re.search(rf"ld\.global(\.nc)?\.b64\s+%rd\d+, \[{WATCHDOG_GLOBAL}\]", ptx), "the timeout is read"
    assert re.search(rf"\[{WATCHDOG_GLOBAL}\+8\]", ptx), "the record's address is read"
    assert re.search(r"atom\.relaxed\.sys\.global\.cas\.b32", ptx), "the record is claimed at system scope"
    assert re.search(r"st\.release\.sys\.global\.b32\s+\[%rd\d+\], 2;", ptx), "and published at system scope"
    assert ptx.count("trap;") > _compile("sm_90", 0).count("trap;"), "a trap of the watchdog's own"
    assert "2500000000" not in ptx, "the timeout comes from the runtime, not the compiler"


def test_the_watchdog_kernel_uses_s_memrealtime_on_gfx942():
    need_library("gfx942")
    _need_watchdog_library("hip")
    default = _compile("gfx942", 0)
    amdgcn = _compile("gfx942", 1.0)
    assert "s_memrealtime" not in default and WATCHDOG_GLOBAL not in default
    assert "s_memrealtime" in amdgcn and WATCHDOG_GLOBAL in amdgcn and "s_trap 2" in amdgcn


def test_a_missing_watchdog_library_says_which_one(monkeypatch, tmp_path):
    """Only the default library is in the directory: the watchdog variant is reported missing by its name, while the
    default one (a copy of the built library, so it also passes the bitcode check) is the one linked."""
    built = compiler.library_path("cuda")
    if not built.is_file():
        pytest.skip(f"{built.name} is not built ({built} is missing: run scripts/build.sh)")
    copy = tmp_path / compiler.LIBRARY_FILES["cuda"]
    copy.write_bytes(built.read_bytes())
    monkeypatch.setenv(compiler.DEVICE_LIB_DIR_ENV, str(tmp_path))
    with pytest.raises(compiler.DeviceLibraryMissingError, match=r"triton_dist\.watchdog\.nvptx64\.bc.*watchdog"):
        compiler.require_library("cuda", watchdog=True)
    with pytest.raises(compiler.DeviceLibraryMissingError, match=r"triton_dist\.watchdog\.nvptx64\.bc.*watchdog"):
        device_library.linkable_library("cuda", watchdog=True)
    assert compiler.require_library("cuda") == copy
    assert device_library.linkable_library("cuda") == copy


# --- records and the error ---------------------------------------------------------------------------------------


def _record(state=abi.WAIT_TIMEOUT_WRITTEN, rank=1, program=7, index=2, address=0x7F00_0000_1008, expected=3,
            seen=-1, cmp="ge", bits=32, timeout_ns=1_500_000_000):  # fmt: skip
    return abi.WAIT_TIMEOUT_LAYOUT.pack(
        state, rank, program, index, address, expected, seen, abi.COMPARISONS.index(cmp), bits, timeout_ns
    )


def test_a_written_record_decodes_and_its_message_names_everything():
    record = decode_record(_record(), "all_gather_push")
    assert record is not None
    message = str(WaitTimeoutError(record))
    for part in (
        "rank 1",
        "kernel 'all_gather_push'",
        "program 7",
        "flag 2 ",
        "0x7f0000001008",
        "i32",
        "flag >= 3",
        "cmp='ge'",
        "last value seen was -1",
        "1.5 s",
        "TRITON_DIST_WAIT_TIMEOUT_S",
    ):
        assert part in message, (part, message)


@pytest.mark.parametrize("state", [0, 1])
def test_a_record_not_yet_published_is_no_timeout(state):
    assert decode_record(_record(state=state), "k") is None


def test_a_record_of_the_wrong_size_is_rejected():
    with pytest.raises(ValueError, match="56 bytes"):
        decode_record(b"\0" * 48, "k")


class HostMemory:
    """``host_mapped_alloc`` over ctypes buffers: the device address is the host address plus a fixed offset."""

    OFFSET = 0x1_0000_0000

    def __init__(self):
        self.buffers = []

    def allocate(self, size):
        buffer = ctypes.create_string_buffer(size)
        self.buffers.append(buffer)
        host = ctypes.addressof(buffer)
        return host, host + self.OFFSET

    def write_record(self, device_address, payload):
        ctypes.memmove(device_address - self.OFFSET, payload, len(payload))


def test_each_module_gets_its_own_slot_and_the_written_one_names_its_kernel():
    memory = HostMemory()
    slots = RecordSlots(memory.allocate)
    first, second = slots.assign("producer"), slots.assign("consumer")
    assert second - first == SLOT_BYTES and first % 8 == 0
    slots.raise_if_written()  # nothing written: returns
    memory.write_record(second, _record(rank=0, program=3))
    with pytest.raises(WaitTimeoutError, match=r"rank 0 in kernel 'consumer', program 3") as raised:
        slots.raise_if_written()
    assert raised.value.record.kernel == "consumer"
    for i in range(SLOTS_PER_CHUNK):
        slots.assign(f"k{i}")
    assert len(memory.buffers) == 2, "records come in chunks"


# --- the installer writes the settings ---------------------------------------------------------------------------


class WatchdogDriver:
    """A ModuleGlobals with modules holding the context and, optionally, the watchdog's settings."""

    backend = "cuda"

    def __init__(self, memory):
        self.memory = memory
        self.globals = {}
        self.written = {}

    def add_module(self, module, watchdog=True, watchdog_size=abi.WAIT_WATCHDOG_BYTES):
        self.globals[(module, abi.CONTEXT_SYMBOL)] = (0x10_0000 * module, abi.CONTEXT_BYTES)
        if watchdog:
            self.globals[(module, abi.WAIT_WATCHDOG_SYMBOL)] = (0x10_0000 * module + 0x1000, watchdog_size)
            return 0x10_0000 * module + 0x1000
        return None

    def lookup(self, module, name):
        return self.globals.get((module, name))

    def write(self, address, payload):
        self.written[address] = payload

    def host_mapped_alloc(self, size):
        return self.memory.allocate(size)


def _installer(timeout):
    memory = HostMemory()
    driver = WatchdogDriver(memory)
    installer = ContextInstaller(module_globals=lambda: driver, current_device=lambda: 0, timeout_ns=lambda: timeout[0])
    installer.set_context(pack_context(0, 2, HEAP_SIZE, BASES), device_index=0)
    return memory, driver, installer


def test_the_installer_writes_the_timeout_and_a_record_per_module():
    timeout = [1_000_000_000]
    memory, driver, installer = _installer(timeout)
    settings = [driver.add_module(m) for m in (1, 2)]
    driver.add_module(3, watchdog=False)
    for module, name in ((1, "push"), (2, "pull"), (3, "plain")):
        installer(module, 0xF00, name, {}, "hash")
    (t1, record1), (t2, record2) = (abi.WAIT_WATCHDOG_LAYOUT.unpack(driver.written[a]) for a in settings)
    assert t1 == t2 == 1_000_000_000 and record1 != record2 and record1 and record2
    assert len(driver.written) == 2 + 3, "two settings and three contexts"

    timeout[0] = 0
    installer.refresh_wait_timeout()
    assert abi.WAIT_WATCHDOG_LAYOUT.unpack(driver.written[settings[0]]) == (0, record1), "same record, new timeout"

    memory.write_record(record2, _record(rank=0))
    with pytest.raises(WaitTimeoutError, match="kernel 'pull'"):
        installer.raise_if_wait_timed_out()


def test_the_installer_rejects_a_stale_watchdog_library():
    _, driver, installer = _installer([1])
    driver.add_module(4, watchdog_size=8)
    with pytest.raises(RuntimeError, match=r"'old'.*__triton_dist_wait_watchdog is 8 bytes.*rebuild"):
        installer(4, 0xF00, "old", {}, "hash")


def test_host_mapped_alloc_through_the_driver_functions():
    from triton_dist.runtime.context.module_globals import CudaModuleGlobals

    buffer = ctypes.create_string_buffer(b"\xff" * 64, 64)
    calls = []

    class Lib:
        @staticmethod
        def cuMemHostAlloc(p_host, size, flags):
            calls.append(("alloc", size.value, flags))
            p_host.contents.value = ctypes.addressof(buffer)
            return 0

        @staticmethod
        def cuMemHostGetDevicePointer_v2(p_device, host, flags):
            calls.append(("device", host.value, flags))
            p_device.contents.value = host.value + 0x100
            return 0

        def __getattr__(self, name):
            return lambda *args: 0

    host, device = CudaModuleGlobals(Lib()).host_mapped_alloc(64)
    assert host == ctypes.addressof(buffer) and device == host + 0x100
    assert buffer.raw == b"\0" * 64, "the records start zeroed (state 0)"
    assert calls[0] == ("alloc", 64, 3), "portable and device-mapped"


# --- synchronize -------------------------------------------------------------------------------------------------


def test_synchronize_turns_a_trapped_kernel_into_the_named_error(monkeypatch):
    memory = HostMemory()
    slots = RecordSlots(memory.allocate)
    address = slots.assign("stuck_kernel")
    monkeypatch.setattr(installer_module.context_installer, "records", slots)

    def failing_synchronize(device=None):
        raise RuntimeError("CUDA error: unspecified launch failure")

    monkeypatch.setattr(torch.cuda, "synchronize", failing_synchronize)
    with pytest.raises(RuntimeError, match="unspecified launch failure") as raised:
        triton_dist.synchronize()
    assert not isinstance(raised.value, WaitTimeoutError), "no record: the driver's error unchanged"
    triton_dist.check_wait_timeout()

    memory.write_record(address, _record(rank=1, program=0, cmp="eq", expected=1, seen=0))
    with pytest.raises(triton_dist.WaitTimeoutError, match=r"rank 1 in kernel 'stuck_kernel'") as raised:
        triton_dist.synchronize()
    assert "unspecified launch failure" in str(raised.value.__cause__)
    with pytest.raises(WaitTimeoutError):
        triton_dist.check_wait_timeout()
    assert stream_sync.synchronize is triton_dist.synchronize


def test_the_gpu_check_expects_words_the_message_has():
    """test/gpu/check_watchdog.py (not run on CPUs) looks for these words; the message must contain them."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "gpu" / "check_watchdog.py"
    spec = importlib.util.spec_from_file_location("check_watchdog", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stuck = decode_record(_record(rank=0, program=1, index=2, expected=7, seen=5, timeout_ns=10**9), "stuck_wait")
    dead = decode_record(_record(rank=0, program=0, index=0, expected=6, seen=5, timeout_ns=10**9), "wait_for_peer")
    ll = decode_record(
        _record(rank=0, program=3, index=0, cmp="eq", expected=6, seen=4, timeout_ns=10**9), "_one_shot_ll_kernel"
    )
    cases = ((stuck, module.STUCK_WAIT_WORDS), (dead, module.DEAD_RANK_WORDS), (ll, module.DEAD_RANK_LL_WORDS))
    for record, words in cases:
        for word in words:
            assert word in record.message(), (word, record.message())
    assert module.SLACK_S >= 1


def _init_sets_the_timeout():
    from triton_dist import runtime as rt

    with pytest.raises(ValueError, match="wait_timeout_s"):
        rt.init(heap_size="1M", device="cpu", wait_timeout_s=-1)
    assert not rt.is_initialized(), "a bad timeout is refused before anything is set up"
    world = rt.init(heap_size="1M", device="cpu", wait_timeout_s=2.5)
    assert compiler.wait_timeout_ns() == 2_500_000_000 and compiler.watchdog_enabled()
    assert rt.init(heap_size="1M", device="cpu", wait_timeout_s=0) is world
    assert not compiler.watchdog_enabled(), "init() again may change the timeout"
    rt.finalize()


def test_init_wait_timeout_s_sets_the_watchdog():
    """In a process of its own (a world of one on gloo): init() sets this process's watchdog."""
    run_ranks(_init_sets_the_timeout, 1, env={"TRITON_INTERPRET": "0"}, timeout_s=120)
