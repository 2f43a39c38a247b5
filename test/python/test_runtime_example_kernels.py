"""The kernels of the examples, GPU checks and runtime compile for sm_90 and gfx942 without a GPU.

They are the code the GPU run executes; compiling them here catches frontend errors early, and the checks below
pin what the runtime relies on: the context global is in every kernel that uses a primitive (so the load hook
finds it), and the push all-gather's remote stores stay 16-byte vectors through ``dl.symm_at``.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from triton_dist.abi import CONTEXT_SYMBOL

REPO = Path(__file__).resolve().parents[2]
DEVICE_LIBS = REPO / "python" / "triton_dist" / "_device"
TARGETS = {
    "sm_90": (GPUTarget("cuda", 90, 32), "triton_dist.nvptx64.bc", "ptx"),
    "gfx942": (GPUTarget("hip", "gfx942", 64), "triton_dist.amdgcn.bc", "amdgcn"),
}
CONTEXT = CONTEXT_SYMBOL


def load(relative_path: str):
    path = REPO / relative_path
    sys.path.insert(0, str(REPO / "examples"))
    spec = importlib.util.spec_from_file_location(f"under_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_kernel(kernel, signature, constexprs, target_name):
    target, library, _ = TARGETS[target_name]
    if not (DEVICE_LIBS / library).exists():
        pytest.skip(f"{library} is not built (scripts/build.sh)")
    # Pointers and the ints the runtime passes are 16-divisible at launch time; specialize the same way.
    attrs = {
        (kernel.arg_names.index(name),): [["tt.divisibility", 16]]
        for name, kind in signature.items()
        if kind.startswith("*") or name in ("shard_elems", "n")
    }
    signature = {**signature, **{name: "constexpr" for name in constexprs}}
    return triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs), target=target)


I32 = "i32"
# (file, kernel, runtime signature, constexprs, uses the context)
KERNELS = [
    ("python/triton_dist/runtime/world/device_barrier.py", "_barrier_kernel", {"flags_ptr": "*i32", "epoch": I32}, {}),
    ("examples/ping_pong.py", "ping_pong", {"flag_ptr": "*i32", "rounds": I32, "first": I32}, {"SERVE": True}),
    (
        "examples/allgather_push.py",
        "allgather_push",
        {"shard_ptr": "*bf16", "out_ptr": "*bf16", "flags_ptr": "*i32", "shard_elems": I32, "epoch": I32},
        {"CTAS_PER_PEER": 32, "BLOCK": 4096},
    ),
    (
        "examples/allgather_pull.py",
        "allgather_pull",
        {
            "shard_ptr": "*bf16",
            "out_ptr": "*bf16",
            "ready_ptr": "*i32",
            "done_ptr": "*i32",
            "shard_elems": I32,
            "epoch": I32,
        },
        {"CTAS_PER_PEER": 32, "BLOCK": 4096},
    ),
    ("test/gpu/check_primitives.py", "probe_context", {"out_ptr": "*i64", "heap_ptr": "*i64"}, {}),
    ("test/gpu/check_primitives.py", "probe_rank_axes", {"out_ptr": "*i32"}, {}),
    (
        "test/gpu/check_primitives.py",
        "read_peer",
        {"src_ptr": "*bf16", "out_ptr": "*bf16", "n": I32, "peer": I32},
        {"SCALAR_FORM": True, "BLOCK": 1024},
    ),
    (
        "test/gpu/check_primitives.py",
        "write_all_peers",
        {"src_ptr": "*i8", "dst_ptr": "*i8", "n": I32},
        {"BLOCK": 1024},
    ),
    (
        "test/gpu/check_primitives.py",
        "set_everywhere_then_wait",
        {"flags_ptr": "*i64", "value": "i64"},
        {"SCOPE": "inter_node"},
    ),
    (
        "test/gpu/check_primitives.py",
        "add_everywhere_then_wait",
        {"counter_ptr": "*i32", "expected": I32},
        {"SCOPE": "intra_node"},
    ),
    ("test/gpu/check_primitives.py", "add_to_self_then_wait", {"counter_ptr": "*i32", "expected": I32}, {}),
    (
        "test/gpu/check_primitives.py",
        "pass_right",
        {"src_ptr": "*fp32", "inbox_ptr": "*fp32", "flag_ptr": "*i32", "out_ptr": "*fp32", "n": I32, "epoch": I32},
        {"BLOCK": 1024},
    ),
    (
        "test/gpu/check_primitives.py",
        "notify_vector",
        {"flags_ptr": "*i32", "signal": I32, "expected": I32},
        {"N": 64, "OP": "add"},
    ),
    ("test/gpu/check_primitives.py", "read_stamps", {"stamps_ptr": "*i64", "out_ptr": "*i64"}, {}),
    (
        "test/gpu/check_litmus.py",
        "litmus",
        {
            "tile_ptr": "*i32",
            "data_flag_ptr": "*i32",
            "ack_ptr": "*i32",
            "result_ptr": "*i32",
            "first": I32,
            "rounds": I32,
            "seed_here": I32,
            "seed_left": I32,
        },
        {
            "PUSH": True,
            "LOCAL": False,
            "WAIT_SCOPE": "sys",
            "WAIT_SEMANTIC": "acquire",
            "NOTIFY_SCOPE": "intra_node",
            "TILE": 4096,
        },
    ),
    ("test/gpu/check_copy_engine.py", "acknowledge", {"ack_ptr": "*i32", "left": I32, "epoch": I32}, {}),
]

# Kernels that only wait on local flags: they need no context (no rank, no heap base), only to compile.
WAIT_ONLY_KERNELS = [
    ("test/gpu/check_copy_engine.py", "wait_for_ack", {"ack_ptr": "*i32", "epoch": I32}, {}),
    (
        "test/gpu/check_copy_engine.py",
        "consume_chunks",
        {
            "dst_ptr": "*i32",
            "flags_ptr": "*i32",
            "seeds_ptr": "*i32",
            "result_ptr": "*i32",
            "left": I32,
            "epoch": I32,
            "chunk_elems": I32,
        },
        {"SEMANTIC": "acquire", "BLOCK": 1024},
    ),
]


@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize(
    ("path", "name", "signature", "constexprs"), WAIT_ONLY_KERNELS, ids=[k[1] for k in WAIT_ONLY_KERNELS]
)
def test_wait_only_kernel_compiles(path, name, signature, constexprs, target_name):
    kernel = getattr(load(path), name)
    assembly = compile_kernel(kernel, signature, constexprs, target_name).asm[TARGETS[target_name][2]]
    # A system-scope acquire poll: ld.acquire.sys on NVIDIA, a system-coherent load + cache invalidate on AMD.
    needle = "ld.acquire.sys.global" if target_name == "sm_90" else "buffer_inv sc0 sc1"
    assert needle in assembly


@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize(("path", "name", "signature", "constexprs"), KERNELS, ids=[k[1] for k in KERNELS])
def test_kernel_compiles_and_references_the_context(path, name, signature, constexprs, target_name):
    kernel = getattr(load(path), name)
    compiled = compile_kernel(kernel, signature, constexprs, target_name)
    assembly = compiled.asm[TARGETS[target_name][2]]
    assert CONTEXT in assembly, "the load hook finds the context by name: it must be in the module"


def test_push_allgather_stores_to_peers_in_16_byte_vectors():
    _, name, signature, constexprs = KERNELS[2]
    kernel = getattr(load("examples/allgather_push.py"), name)
    ptx = compile_kernel(kernel, signature, constexprs, "sm_90").asm["ptx"]
    # Plain data stores (the flag writes are release/atomic operations and look different).
    stores = [line for line in ptx.splitlines() if "st.global" in line and "release" not in line]
    assert stores and all(".v4.b32" in line for line in stores), "\n".join(stores[:8])
    assert any(".visible .global" in line and CONTEXT in line for line in ptx.splitlines())
