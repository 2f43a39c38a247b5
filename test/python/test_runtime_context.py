"""Context installation: the ABI bytes, the CUDA and HIP driver paths (through fake driver libraries), and the
``kernel_load_end_hook`` behaviour for modules with, without, and with a stale context global."""

import ctypes
import json

import pytest

from triton_dist.abi import (
    CONTEXT_BYTES,
    CONTEXT_HEAP_BASES_OFFSET,
    CONTEXT_HEAP_SIZE_OFFSET,
    CONTEXT_LOCAL_NUM_RANKS_OFFSET,
    CONTEXT_LOCAL_RANK_OFFSET,
    CONTEXT_SYMBOL,
    MAX_RANKS,
)
from triton_dist.runtime.context.installer import ContextInstaller
from triton_dist.runtime.context.module_globals import NOT_FOUND, CudaModuleGlobals, HipModuleGlobals
from triton_dist.runtime.context.payload import pack_context, unpack_context, unpack_local

BASES = [0x7F0000000000 + rank * 0x40000000 for rank in range(4)]


HEAP_SIZE = 3 << 30


def test_context_layout_matches_the_abi():
    payload = pack_context(2, 4, HEAP_SIZE, BASES)
    assert len(payload) == CONTEXT_BYTES == 2072
    assert int.from_bytes(payload[0:4], "little") == 2
    assert int.from_bytes(payload[4:8], "little") == 4
    assert CONTEXT_HEAP_SIZE_OFFSET == 8
    assert int.from_bytes(payload[8:16], "little") == HEAP_SIZE
    assert CONTEXT_HEAP_BASES_OFFSET == 16
    for rank, base in enumerate(BASES):
        assert int.from_bytes(payload[16 + 8 * rank : 24 + 8 * rank], "little") == base
    assert payload[16 + 8 * 4 : CONTEXT_LOCAL_RANK_OFFSET] == bytes(8 * (MAX_RANKS - 4))
    assert unpack_context(payload) == (2, 4, HEAP_SIZE, BASES)
    # Without a layout: one node holds the world (local = world).
    assert CONTEXT_LOCAL_RANK_OFFSET == 2064 and CONTEXT_LOCAL_NUM_RANKS_OFFSET == 2068
    assert int.from_bytes(payload[2064:2068], "little") == 2
    assert int.from_bytes(payload[2068:2072], "little") == 4
    assert unpack_local(payload) == (2, 4)


def test_context_carries_the_local_rank_after_the_heap_bases():
    # Rank 3 of 4 on two nodes of two ranks: local rank 1 of 2; the world's fields are unchanged.
    payload = pack_context(3, 4, HEAP_SIZE, BASES, local_rank=1, local_num_ranks=2)
    assert unpack_context(payload) == (3, 4, HEAP_SIZE, BASES)
    assert unpack_local(payload) == (1, 2)
    assert payload[CONTEXT_LOCAL_RANK_OFFSET:] == (1).to_bytes(4, "little") + (2).to_bytes(4, "little")
    assert payload[:CONTEXT_LOCAL_RANK_OFFSET] == pack_context(3, 4, HEAP_SIZE, BASES)[:CONTEXT_LOCAL_RANK_OFFSET]


@pytest.mark.parametrize(
    ("local_rank", "local_num_ranks", "message"),
    [
        (2, 2, "local_rank 2 is out of range for 2 ranks on the node"),
        (-1, 2, "local_rank -1 is out of range"),
        (0, 0, r"local_num_ranks must be in \[1, num_ranks=4\], got 0"),
        (0, 5, r"local_num_ranks must be in \[1, num_ranks=4\], got 5"),
    ],
)
def test_bad_local_values_are_rejected(local_rank, local_num_ranks, message):
    with pytest.raises(ValueError, match=message):
        pack_context(1, 4, HEAP_SIZE, BASES, local_rank=local_rank, local_num_ranks=local_num_ranks)


@pytest.mark.parametrize(
    ("rank", "num_ranks", "heap_size", "bases", "message"),
    [
        (4, 4, HEAP_SIZE, BASES, "out of range"),
        (0, 0, HEAP_SIZE, [], "num_ranks"),
        (0, 300, HEAP_SIZE, [4096] * 300, "num_ranks"),
        (0, 4, HEAP_SIZE, BASES[:3], "expected 4 heap bases"),
        (0, 2, HEAP_SIZE, [4096, 4096 + 64], "rank 1"),
        (0, 1, HEAP_SIZE, [0], "rank 0"),
        (0, 1, 0, [4096], "heap_size"),
        (0, 1, 4096 + 8, [4096], "heap_size"),
    ],
)
def test_bad_context_values_are_rejected(rank, num_ranks, heap_size, bases, message):
    with pytest.raises(ValueError, match=message):
        pack_context(rank, num_ranks, heap_size, bases)


class FakeDevice:
    """Device memory and loaded modules shared by the fake CUDA and HIP libraries."""

    def __init__(self):
        self.globals = {}  # (module, name) -> (address, size)
        self.memory = {}  # address -> bytes written
        self.streams_created = []
        self.copy_streams = []
        self.live_streams = set()

    def add_module(self, module, size=CONTEXT_BYTES, address=None):
        address = address if address is not None else 0x10_0000 * module
        self.globals[(module, CONTEXT_SYMBOL)] = (address, size)
        return address

    def get_global(self, p_address, p_size, module, name):
        found = self.globals.get((module.value, name.decode()))
        if found is None:
            return NOT_FOUND
        p_address.contents.value, p_size.contents.value = found
        return 0

    def create_stream(self, p_stream, flags):
        handle = 0x5000 + len(self.streams_created)
        self.streams_created.append(flags)
        self.live_streams.add(handle)
        p_stream.contents.value = handle
        return 0

    def copy(self, destination, host, size, stream):
        assert stream.value in self.live_streams
        self.copy_streams.append(stream.value)
        self.memory[destination.value] = ctypes.string_at(ctypes.addressof(host), size.value)
        return 0

    def synchronize(self, stream):
        return 0

    def destroy(self, stream):
        self.live_streams.discard(stream.value)
        return 0


class FakeCudaLib:
    def __init__(self, device):
        self.cuModuleGetGlobal_v2 = device.get_global
        self.cuStreamCreate = device.create_stream
        self.cuMemcpyHtoDAsync_v2 = device.copy
        self.cuStreamSynchronize = device.synchronize
        self.cuStreamDestroy_v2 = device.destroy

    @staticmethod
    def cuGetErrorString(code, p_message):
        p_message.contents.value = b"CUDA_ERROR_FAKE"
        return 0


class FakeHipLib:
    def __init__(self, device):
        self.hipModuleGetGlobal = device.get_global
        self.hipStreamCreateWithFlags = device.create_stream
        self.hipMemcpyHtoDAsync = device.copy
        self.hipStreamSynchronize = device.synchronize
        self.hipStreamDestroy = device.destroy

    @staticmethod
    def hipGetErrorString(code):
        return b"hipErrorFake"


DRIVERS = {"cuda": (CudaModuleGlobals, FakeCudaLib), "hip": (HipModuleGlobals, FakeHipLib)}


@pytest.fixture(params=sorted(DRIVERS))
def fake(request):
    device = FakeDevice()
    globals_class, lib_class = DRIVERS[request.param]
    driver = globals_class(lib_class(device))
    installer = ContextInstaller(module_globals=lambda: driver, current_device=lambda: 0)
    return device, driver, installer


def metadata_group(tmp_path, asm_text):
    asm = tmp_path / "kernel.ptx"
    asm.write_text(asm_text)
    meta = tmp_path / "kernel.json"
    meta.write_text(json.dumps({"name": "kernel"}))
    return {"kernel.ptx": str(asm), "kernel.json": str(meta)}


def load(installer, module, group, name="kernel"):
    installer(module, 0xF00, name, group, "hash")


def test_driver_lookup_and_write_use_a_private_non_blocking_stream(fake):
    device, driver, _ = fake
    address = device.add_module(7)
    assert driver.lookup(7, CONTEXT_SYMBOL) == (address, CONTEXT_BYTES)
    assert driver.lookup(8, CONTEXT_SYMBOL) is None
    driver.write(address, b"\x01\x02\x03")
    assert device.memory[address] == b"\x01\x02\x03"
    assert device.streams_created == [1], "the copy must not serialize with the legacy default stream"
    assert not device.live_streams, "the private stream is destroyed"


def test_driver_errors_name_the_call_and_the_error(fake):
    _, driver, _ = fake
    driver._get = lambda *args: 1  # the driver reports a failure other than "not found"
    with pytest.raises(RuntimeError, match=r"(cuModuleGetGlobal_v2|hipModuleGetGlobal).*error 1 \((CUDA_ERROR|hip)"):
        driver.lookup(7, CONTEXT_SYMBOL)


def test_hook_fills_modules_that_have_the_context(fake, tmp_path):
    device, _, installer = fake
    installer.set_context(pack_context(1, 4, HEAP_SIZE, BASES), device_index=0)
    address = device.add_module(11)
    load(installer, 11, metadata_group(tmp_path, f".visible .global .align 8 .b8 {CONTEXT_SYMBOL}[{CONTEXT_BYTES}];"))
    assert unpack_context(device.memory[address]) == (1, 4, HEAP_SIZE, BASES)
    assert 11 in installer.filled


def test_hook_ignores_modules_without_the_context(fake, tmp_path):
    device, _, installer = fake
    installer.set_context(pack_context(0, 2, HEAP_SIZE, BASES[:2]), device_index=0)
    load(installer, 12, metadata_group(tmp_path, ".visible .entry add_kernel()"))
    load(installer, None, {}, "unloaded")
    assert device.memory == {} and installer.filled == {}


def test_hook_rejects_a_module_whose_context_is_not_visible_to_the_driver(fake, tmp_path):
    _, _, installer = fake
    installer.set_context(pack_context(0, 2, HEAP_SIZE, BASES[:2]), device_index=0)
    group = metadata_group(tmp_path, f".global .align 8 .b8 {CONTEXT_SYMBOL}[{CONTEXT_BYTES}]; // internalized")
    with pytest.raises(RuntimeError, match="external linkage"):
        load(installer, 13, group, "uses_dl")


def test_hook_rejects_a_stale_library(fake, tmp_path):
    device, _, installer = fake
    installer.set_context(pack_context(0, 2, HEAP_SIZE, BASES[:2]), device_index=0)
    device.add_module(14, size=CONTEXT_BYTES - 8)
    with pytest.raises(
        RuntimeError,
        match=rf"{CONTEXT_BYTES - 8} bytes in the loaded module but the runtime writes {CONTEXT_BYTES}.*stale",
    ):
        load(installer, 14, metadata_group(tmp_path, CONTEXT_SYMBOL), "old_kernel")


def test_module_loaded_before_init_raises_and_is_filled_by_init(fake, tmp_path):
    device, _, installer = fake
    address = device.add_module(15)
    with pytest.raises(RuntimeError, match=r"'early'.*before triton_dist.init\(\)"):
        load(installer, 15, metadata_group(tmp_path, CONTEXT_SYMBOL), "early")
    assert address not in device.memory
    installer.set_context(pack_context(3, 4, HEAP_SIZE, BASES), device_index=0)
    assert unpack_context(device.memory[address]) == (3, 4, HEAP_SIZE, BASES)
    assert installer.pending == {} and 15 in installer.filled


def test_reinit_refills_every_known_module(fake, tmp_path):
    device, _, installer = fake
    installer.set_context(pack_context(0, 2, HEAP_SIZE, BASES[:2]), device_index=0)
    addresses = [device.add_module(module) for module in (21, 22)]
    for module in (21, 22):
        load(installer, module, metadata_group(tmp_path, CONTEXT_SYMBOL))
    installer.clear_context()
    new_bases = [base + 0x1000 for base in BASES]
    installer.set_context(pack_context(1, 4, HEAP_SIZE, new_bases), device_index=0)
    for address in addresses:
        assert unpack_context(device.memory[address]) == (1, 4, HEAP_SIZE, new_bases)


def test_module_loaded_on_another_device_is_rejected(tmp_path):
    device = FakeDevice()
    driver = CudaModuleGlobals(FakeCudaLib(device))
    installer = ContextInstaller(module_globals=lambda: driver, current_device=lambda: 1)
    installer.set_context(pack_context(0, 2, HEAP_SIZE, BASES[:2]), device_index=0)
    device.add_module(31)
    with pytest.raises(RuntimeError, match="loaded on cuda:1 but the symmetric heap lives on cuda:0"):
        load(installer, 31, metadata_group(tmp_path, CONTEXT_SYMBOL))


def test_importing_the_runtime_registers_the_hook_with_triton():
    from triton import knobs

    import triton_dist.runtime  # noqa: F401
    from triton_dist.runtime.context.installer import context_installer, install_context_hook, remove_context_hook

    chain = knobs.runtime.kernel_load_end_hook
    assert context_installer in chain.calls
    remove_context_hook()
    assert context_installer not in chain.calls
    install_context_hook()
    install_context_hook()
    assert chain.calls.count(context_installer) == 1


class LaunchMetadata:
    """What Triton passes to ``launch_enter_hook``: a LazyDict whose ``data`` holds the launched function handle."""

    def __init__(self, function):
        self.data = {"name": "kernel", "function": function, "stream": 0}


def test_a_second_launch_before_init_is_refused_on_the_host_until_init(fake, tmp_path):
    """Triton keeps a module whose load hook raised and skips the hook next time; the installer must then stop the
    launch itself (the device-side check only traps, without a message, in a kernel with wgmma)."""
    from triton import knobs

    device, _, installer = fake
    device.add_module(16)
    with pytest.raises(RuntimeError, match="before triton_dist.init"):
        load(installer, 16, metadata_group(tmp_path, CONTEXT_SYMBOL), "early")
    try:
        assert installer.refuse_unfilled_launch in knobs.runtime.launch_enter_hook.calls
        with pytest.raises(RuntimeError, match=r"'early'.*before triton_dist.init\(\)"):
            knobs.runtime.launch_enter_hook(LaunchMetadata(0xF00))
        knobs.runtime.launch_enter_hook(LaunchMetadata(0xBEEF))  # other kernels launch as before
        installer.set_context(pack_context(0, 4, HEAP_SIZE, BASES), device_index=0)
        assert installer.refuse_unfilled_launch not in knobs.runtime.launch_enter_hook.calls
        knobs.runtime.launch_enter_hook(LaunchMetadata(0xF00))  # filled now: launches go through
    finally:
        knobs.runtime.launch_enter_hook.remove(installer.refuse_unfilled_launch)
