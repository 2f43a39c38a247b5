"""The ctypes declarations of the CUDA and HIP paths against real C functions.

A small C library with the driver functions' exact C signatures stands in for libcuda / libamdhip64, so the
argument and return types (pointers out, 64-bit device addresses, size_t, stream handles) cross a real C ABI.
"""

import ctypes
import shutil
import subprocess

import pytest

from triton_dist.abi import CONTEXT_BYTES, CONTEXT_SYMBOL
from triton_dist.runtime.context.module_globals import CudaModuleGlobals, HipModuleGlobals
from triton_dist.runtime.context.payload import pack_context, unpack_context

COMPILER = shutil.which("cc") or shutil.which("clang") or shutil.which("gcc")

FAKE_DRIVER = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static unsigned char device_memory[4096];
static int copies_on_non_blocking_stream;

#define MODULE ((void *)0x1234)
#define STREAM_BASE 0x7000

static int get_global(uint64_t *address, size_t *bytes, void *module, const char *name) {
  if (module != MODULE || strcmp(name, CONTEXT_SYMBOL) != 0)
    return 500;
  *address = (uint64_t)(uintptr_t)device_memory;
  *bytes = CONTEXT_BYTES;
  return 0;
}
static int create_stream(void **stream, unsigned int flags) {
  *stream = (void *)(uintptr_t)(STREAM_BASE + flags);
  return 0;
}
static int copy_async(uint64_t dst, const void *src, size_t n, void *stream) {
  if ((uintptr_t)stream != STREAM_BASE + 1)
    return 1;
  memcpy((void *)(uintptr_t)dst, src, n);
  ++copies_on_non_blocking_stream;
  return 0;
}
static int no_op(void *stream) { return stream ? 0 : 1; }

int cuModuleGetGlobal_v2(uint64_t *a, size_t *b, void *m, const char *n) { return get_global(a, b, m, n); }
int cuStreamCreate(void **s, unsigned int f) { return create_stream(s, f); }
int cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) { return copy_async(d, s, n, st); }
int cuStreamSynchronize(void *s) { return no_op(s); }
int cuStreamDestroy_v2(void *s) { return no_op(s); }
int cuGetErrorString(int code, const char **message) { *message = "CUDA_ERROR_FAKE"; return 0; }

int hipModuleGetGlobal(void **a, size_t *b, void *m, const char *n) { return get_global((uint64_t *)a, b, m, n); }
int hipStreamCreateWithFlags(void **s, unsigned int f) { return create_stream(s, f); }
int hipMemcpyHtoDAsync(void *d, void *s, size_t n, void *st) { return copy_async((uint64_t)(uintptr_t)d, s, n, st); }
int hipStreamSynchronize(void *s) { return no_op(s); }
int hipStreamDestroy(void *s) { return no_op(s); }
const char *hipGetErrorString(int code) { return "hipErrorFake"; }

uint64_t fake_device_memory(void) { return (uint64_t)(uintptr_t)device_memory; }
int fake_copies(void) { return copies_on_non_blocking_stream; }
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    if COMPILER is None:
        pytest.skip("no C compiler to build the fake driver library")
    directory = tmp_path_factory.mktemp("fake_driver")
    source = directory / "fake_driver.c"
    source.write_text(FAKE_DRIVER)
    library = directory / "libfake_driver.so"
    abi_facts = [f'-DCONTEXT_SYMBOL="{CONTEXT_SYMBOL}"', f"-DCONTEXT_BYTES={CONTEXT_BYTES}"]
    subprocess.run([COMPILER, "-shared", "-fPIC", "-O1", *abi_facts, "-o", str(library), str(source)], check=True)
    lib = ctypes.CDLL(str(library))
    lib.fake_device_memory.restype = ctypes.c_uint64
    return lib


@pytest.mark.parametrize("globals_class", [CudaModuleGlobals, HipModuleGlobals])
def test_lookup_and_write_through_a_c_library(fake_driver, globals_class):
    driver = globals_class(fake_driver)
    before = fake_driver.fake_copies()
    assert driver.lookup(0x1234, "some_other_global") is None
    assert driver.lookup(0x9999, CONTEXT_SYMBOL) is None
    address, size = driver.lookup(0x1234, CONTEXT_SYMBOL)
    assert (address, size) == (fake_driver.fake_device_memory(), CONTEXT_BYTES)
    payload = pack_context(1, 2, 1 << 30, [0x7000_0000_0000, 0x7000_4000_0000])
    driver.write(address, payload)
    assert fake_driver.fake_copies() == before + 1
    assert unpack_context(ctypes.string_at(address, CONTEXT_BYTES)) == (
        1,
        2,
        1 << 30,
        [0x7000_0000_0000, 0x7000_4000_0000],
    )


@pytest.mark.parametrize(
    ("globals_class", "message"), [(CudaModuleGlobals, "CUDA_ERROR_FAKE"), (HipModuleGlobals, "hipErrorFake")]
)
def test_driver_error_text_comes_from_the_library(fake_driver, globals_class, message):
    assert globals_class(fake_driver).error_string(1) == message
