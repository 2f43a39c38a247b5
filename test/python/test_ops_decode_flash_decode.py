"""triton_dist.ops.flash_decode without GPUs: the one-launch kernel compiles for sm_90 and gfx942 over the shapes the
op launches (group sizes, split counts, world sizes, 64-bit offsets, dtypes, Triton's specializations) without
register spills and within shared memory, with the flag protocol's instructions in the right order; split counts
and workspaces fit; bad input raises before any launch; the custom op traces with fake tensors and under
torch.compile(fullgraph=True).

The kernel's arithmetic is checked against SDPA in test_ops_decode_flash_decode_emulation.py (Triton's interpreter),
the ranks' agreement and the workspaces across gloo ranks in test_ops_decode_flash_decode_ranks.py.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest
import torch
import triton
from asm_loops import loop_instructions
from case_grid import check_each, grid
from dl_compile import assembly, index_of, need_real_library
from triton import knobs

import triton_dist.ops  # noqa: F401 (registers torch.ops.triton_dist.*)
from triton_dist import testing
from triton_dist.compiler import Checks, override_checks
from triton_dist.ops import flash_decode as flash_decode_fn
from triton_dist.ops.common import gpu
from triton_dist.ops.flash_decode import FlashDecodeError

fd_config = importlib.import_module("triton_dist.ops.flash_decode.config")
fd_kernels = importlib.import_module("triton_dist.ops.flash_decode.kernels")
fd_op = importlib.import_module("triton_dist.ops.flash_decode.op")

SM90_SHARED_BYTES = 232_448
"""The most shared memory one program may use on sm_90 (227 KiB, opt-in)."""
GFX942_LDS_BYTES = 65_536

SIGNATURE = {
    "q_ptr": "*bf16",
    "k_ptr": "*bf16",
    "v_ptr": "*bf16",
    "len_ptr": "*i32",
    "out_ptr": "*bf16",
    "rec_ptr": "*fp32",
    "flags_ptr": "*i32",
    "state_ptr": "*i64",
    "groups": "i32",
    "kv_heads": "i32",
    "local_len": "i32",
    "stride_qb": "i32",
    "stride_qh": "i32",
    "stride_kb": "i32",
    "stride_kh": "i32",
    "stride_ks": "i32",
    "stride_vb": "i32",
    "stride_vh": "i32",
    "stride_vs": "i32",
    "stride_ob": "i32",
    "stride_oh": "i32",
    "sm_scale": "fp32",
    "rec_parity_stride": "i32",
    "flag_parity_stride": "i32",
}
ALIGNED = ("q_ptr", "k_ptr", "v_ptr", "len_ptr", "out_ptr", "rec_ptr", "flags_ptr", "state_ptr", "local_len")
ALIGNED += tuple(name for name in SIGNATURE if name.startswith("stride") or name.endswith("parity_stride"))
"""As a launch specializes them: heap and torch tensors are 16-byte aligned, every stride of a head-dim-128 tensor
is a multiple of 16 (and so are the parity strides and, at the spec's lengths, local_len)."""


def signature(dtype: str = "bf16", wide_strides: bool = False, ones: bool = False) -> tuple[dict, dict]:
    """(signature, constant arguments) of a launch: ``wide_strides``: the batch strides passed as i64 (a
    [B, 32, 512k, 128] cache: 2^31 elements per sequence); ``ones``: batch 1 with one KV head, the values Triton
    specializes to the constant 1."""
    sig = {name: (f"*{dtype}" if kind == "*bf16" else kind) for name, kind in SIGNATURE.items()}
    if wide_strides:
        sig.update(stride_kb="i64", stride_vb="i64")
    constants = {}
    if ones:
        for name in ("groups", "kv_heads"):
            del sig[name]
            constants[name] = 1
    return sig, constants


def compile_flash(
    target: str,
    *,
    group: int,
    splits: int,
    world: int,
    wide: bool = False,
    dtype: str = "bf16",
    wide_strides: bool = False,
    ones: bool = False,
    config: fd_config.FlashDecodeConfig | None = None,
    checks: Checks | None = None,
):  # noqa: ANN201
    config = config or fd_config.default_config("cuda" if target.startswith("sm_") else "hip")
    sig, constants = signature(dtype, wide_strides, ones)
    constexprs = dict(
        SPLITS=splits, GROUP=group, ROWS=fd_config.ROWS, D=fd_config.HEAD_DIM, BLOCK_N=config.block_n, WIDE=wide
    )
    chunk = fd_config.combine_chunk(group, max(1, world) * splits, fd_config.COMBINERS)
    constexprs.update(
        RG=fd_config.combine_rows(group), CHUNK=chunk, WORLD=world, COMBINERS=fd_config.COMBINERS, **constants
    )
    aligned = tuple(name for name in ALIGNED if name in sig)
    options = dict(constexprs=constexprs, aligned=aligned, num_warps=config.num_warps, num_stages=config.num_stages)
    if checks is None:
        return testing.compile_for(fd_kernels._flash_decode_kernel, sig, target, **options)
    with override_checks(checks):  # a fresh JITFunction: Triton memoizes a kernel's key, which holds the level
        return testing.compile_for(triton.jit(fd_kernels._flash_decode_kernel.fn), sig, target, **options)


def ptxas(ptx: str, tmp_path: Path) -> tuple[str, str]:
    """(``ptxas -v`` report, ``cuobjdump -sass`` listing) of ``ptx`` built by Triton's ptxas for sm_90a."""
    tools = Path(knobs.nvidia.ptxas.path or "").parent
    if not (tools / "ptxas").is_file() or not (tools / "cuobjdump").is_file():
        pytest.skip("Triton's ptxas / cuobjdump are not available")
    source, cubin = tmp_path / "kernel.ptx", tmp_path / "kernel.cubin"
    source.write_text(ptx)
    done = subprocess.run(
        [str(tools / "ptxas"), "-arch=sm_90a", "-v", str(source), "-o", str(cubin)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    sass = subprocess.run([str(tools / "cuobjdump"), "-sass", str(cubin)], check=True, capture_output=True, text=True)
    return done.stderr, sass.stdout


def ptxas_resources(ptx: str, tmp_path: Path) -> tuple[tuple[int, int, int], str]:
    """((stack frame, spill stores, spill loads) in bytes, ``cuobjdump -sass`` listing) of ``ptx`` built by Triton's
    ptxas for sm_90a."""
    report, sass = ptxas(ptx, tmp_path)
    found = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert found, report
    return (int(found[1]), int(found[2]), int(found[3])), sass


def assert_no_local_memory_in_loops(compiled, tmp_path: Path) -> None:  # noqa: ANN001
    """At most 32 bytes spilled, and no local-memory access inside any loop of the SASS. ptxas keeps a few
    long-lived values (e.g. the ticket's group, needed again after the K/V loop) on the stack in some variants,
    with or without the device-side checks, at 64 to 96 registers: stores at the start and loads after the loop,
    once per program; what matters for speed is that no loop touches local memory. (The cap was 16 bytes until
    the wait's lowering changed shape: gemm_ar's 32x64 split-2 kernel, unwatched, then got 24 bytes of spill
    stores, all outside its loops, as ptxas chose 64 registers instead of 72 for the same program.)"""
    (frame, stores, loads), sass = ptxas_resources(compiled.asm["ptx"], tmp_path)
    assert frame <= 32 and stores <= 32 and loads <= 32, f"ptxas: {frame} bytes stack, {stores}/{loads} spilled"
    in_loops = [line for line in loop_instructions(sass, "sass") if re.search(r"\b(LDL|STL)\b", line)]
    assert not in_loops, f"local memory inside a loop: {in_loops}"


def amdgcn_metadata(compiled, key: str) -> list[int]:  # noqa: ANN001
    """Every value of ``key`` (e.g. ``.vgpr_spill_count``) in the code object's metadata of the raw AMDGCN."""
    return [int(v) for v in re.findall(rf"{re.escape(key)}:?\s+(\d+)", compiled.asm["amdgcn"])]


# What the op launches with its default config: (name, keyword arguments of compile_flash).
DEFAULT_LAUNCHES = [
    ("batch 1, group 8, 33 splits, 8 ranks", dict(group=8, splits=33, world=8)),
    ("batch 64, group 8, 1 split, 2 ranks, i64 batch strides", dict(group=8, splits=1, world=2, wide_strides=True)),
    ("group 16, 4 splits, 3 ranks, 64-bit offsets", dict(group=16, splits=4, world=0, wide=True)),
    ("fp16, group 1, 128 splits, 1 rank, 1 x 1 KV head", dict(group=1, splits=128, world=1, dtype="fp16", ones=True)),
    ("group 3, 7 splits, 4 ranks", dict(group=3, splits=7, world=4)),
    (
        "fp16, group 4, 2 splits, 8 ranks, 64-bit",
        dict(group=4, splits=2, world=8, wide=True, dtype="fp16", wide_strides=True),
    ),
]


@pytest.mark.parametrize(("name", "launch"), DEFAULT_LAUNCHES, ids=[name for name, _ in DEFAULT_LAUNCHES])
def test_default_config_compiles_for_sm90_without_spills(name, launch, tmp_path):
    need_real_library("sm_90")
    compiled = compile_flash("sm_90", **launch)
    asm = assembly(compiled, "sm_90")
    assert ".local" not in asm, "the PTX uses local memory"
    assert_no_local_memory_in_loops(compiled, tmp_path)
    assert compiled.metadata.shared <= SM90_SHARED_BYTES
    dtype = "f16" if launch.get("dtype") == "fp16" else "bf16"
    assert re.search(rf"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.{dtype}\.{dtype}\.f32", asm)  # tensor cores
    assert "cp.async.cg.shared.global" in asm and "cp.async.commit_group" in asm  # pipelined 16-byte K/V loads
    assert "ld.acquire.sys.global.b32" in asm  # the combiner's dl.wait
    release = "atom.global.sys.release.exch.b32" if launch["world"] else "st.release.sys.global.b32"
    assert release in asm  # dl.notify: a tensor of ranks (power-of-two world) or one rank at a time
    assert "atom.global.gpu.relaxed.add.u64" in asm  # the arrival: ticket and epoch in one atomic
    assert "acq_rel.add" not in asm, "no departure atomic: the last program to arrive hands the epoch over"


@pytest.mark.parametrize(("name", "launch"), DEFAULT_LAUNCHES, ids=[name for name, _ in DEFAULT_LAUNCHES])
def test_default_config_compiles_for_gfx942_without_scratch(name, launch):
    need_real_library("gfx942")
    compiled = compile_flash("gfx942", **launch)
    assert "v_mfma" in assembly(compiled, "gfx942")
    assert compiled.metadata.shared <= GFX942_LDS_BYTES
    assert amdgcn_metadata(compiled, ".vgpr_spill_count") == [0]
    assert amdgcn_metadata(compiled, ".sgpr_spill_count") == [0]
    assert set(amdgcn_metadata(compiled, "; ScratchSize")) == {0}


@pytest.mark.parametrize(
    "config",
    [
        fd_config.FlashDecodeConfig(block_n=16),
        fd_config.FlashDecodeConfig(block_n=32, num_stages=2),
        fd_config.FlashDecodeConfig(block_n=128, num_stages=2),
        fd_config.FlashDecodeConfig(block_n=128, num_warps=8, num_stages=4),
        fd_config.FlashDecodeConfig(block_n=64, num_warps=8, num_stages=1),
    ],
    ids=str,
)
def test_other_configs_compile_for_sm90_without_spills(config, tmp_path):
    need_real_library("sm_90")
    compiled = compile_flash("sm_90", group=8, splits=4, world=2, config=config)
    assert_no_local_memory_in_loops(compiled, tmp_path)
    assert compiled.metadata.shared <= SM90_SHARED_BYTES


@pytest.mark.parametrize(
    ("config", "fits"),
    [
        (fd_config.FlashDecodeConfig(block_n=16), True),
        (fd_config.FlashDecodeConfig(block_n=32, num_stages=2), True),
        (fd_config.FlashDecodeConfig(block_n=128, num_stages=2), True),
        (fd_config.FlashDecodeConfig(block_n=128, num_stages=3), False),  # as FlashDecodeConfig's docstring says
    ],
    ids=str,
)
def test_other_configs_on_gfx942(config, fits):
    need_real_library("gfx942")
    compiled = compile_flash("gfx942", group=8, splits=4, world=2, config=config)
    assert (compiled.metadata.shared <= GFX942_LDS_BYTES) is fits
    if fits:
        assert set(amdgcn_metadata(compiled, "; ScratchSize")) == {0}


@pytest.mark.parametrize("world", [2, 0])
@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
def test_records_are_released_before_the_flag_and_acquired_before_the_combine(world, target):
    """In the final assembly (device-side checks off, so only the kernel's own code is there): in the producers'
    code, the record stores, then a program barrier and the flag's release (L2 write-back first on gfx942); in the
    combiners' code (another branch: the two may come in either order), the acquire poll (cache invalidate on
    gfx942), then a program barrier, then the record loads."""
    need_real_library(target)
    compiled = compile_flash(target, group=8, splits=4, world=world, checks=Checks.NONE)
    lines = assembly(compiled, target).splitlines()
    if target == "sm_90":
        release = index_of(lines, r"atom\.global\.sys\.release\.exch|st\.release\.sys\.global")
        acquire = index_of(lines, r"ld\.acquire\.sys\.global")
        barrier, store, load = r"\bbar\.sync\b", r"\bst\.global\.", r"\bld\.global\.(?!nc)"
    else:
        release = index_of(lines, r"global_atomic_swap .*\bsc1$" if world else r"global_store_dword .*\bsc0 sc1$")
        acquire = index_of(lines, r"global_load_dword .*sc0 sc1")
        barrier, store, load = (
            r"\bs_barrier\b",
            r"\bglobal_store_dword",
            r"\bglobal_load_dword(x[24])? [^,]+, v\[\d+:\d+\], off$",
        )
        assert 0 <= index_of(lines[:release], r"buffer_wbl2 sc0 sc1", last=True), "no L2 write-back before the flag"
        assert index_of(lines[acquire:], r"buffer_inv sc0 sc1") >= 0, "no cache invalidate after the poll"
    assert release >= 0 and acquire >= 0, "a producer's flag release and a combiner's poll expected"
    last_store = index_of(lines[:release], store, last=True)
    assert last_store >= 0 and index_of(lines[last_store:release], barrier) >= 0, "records, barrier, then the flag"
    first_load = index_of(lines[acquire:], load)
    assert first_load > 0 and index_of(lines[acquire : acquire + first_load], barrier) >= 0, "poll, barrier, records"


# ---------------------------------------------------------------------------------------------------------------
# Split counts and workspaces


def _check_choose_splits(batch: int, heads: tuple[int, int], local_len: int, world_size: int) -> None:
    kv_heads, group = heads
    splits = fd_config.choose_splits(batch, kv_heads, group, local_len, world_size, 132, 64)
    assert 1 <= splits <= fd_config.MAX_SPLITS
    if batch == 0:
        return
    groups = batch * kv_heads
    if not fd_config.fits_workspace(batch, kv_heads, group, 1, world_size):
        assert splits == 1  # even one split per group does not fit: flash_decode raises, naming the workspace
        return
    assert fd_config.fits_workspace(batch, kv_heads, group, splits, world_size)
    if local_len >= 128 * fd_config.MAX_SPLITS and fd_config.fits_workspace(
        batch, kv_heads, group, fd_config.MAX_SPLITS, world_size
    ):
        assert groups * splits >= min(
            132 - groups + 1, groups * fd_config.MAX_SPLITS
        )  # small batches still fill the GPU
        assert groups * splits <= max(groups, 2 * 132), "never more than two waves of producers"
    assert splits <= max(1, local_len // 128)  # at least two 64-token blocks per split


def test_choose_splits_fits_workspace():
    """Every (batch, (KV heads, group), local length, world size) of the grid: the split count fits the workspace,
    fills the GPU without more than two waves, and keeps two key blocks per split (case_grid names a failing case)."""
    cases = grid(
        batch=[0, 1, 8, 64],
        heads=[(1, 1), (8, 1), (8, 8), (8, 16), (32, 4)],
        local_len=[64, 4096, 524_288],
        world_size=[2, 8],
    )
    assert check_each(_check_choose_splits, cases) == 4 * 5 * 3 * 2


def test_choose_splits_makes_whole_waves_as_measured():
    """The split counts the one-H200 sweep found fastest (bench/results/flash_decode_1gpu.md): batch 1 x 8 KV heads
    at 16 splits (128 producers, one per SM), batch 8 x 8 KV heads at 4 (256 producers, two per SM)."""
    assert fd_config.choose_splits(1, 8, 8, 32768, 2, 132, 64) == 16
    assert fd_config.choose_splits(1, 8, 8, 131072, 2, 132, 64) == 16
    assert fd_config.choose_splits(8, 8, 8, 32768, 2, 132, 64) == 4


def test_the_spec_shapes_fit_the_workspace():
    """Batch 64 with 8 KV heads of 16 query heads each, on 8 ranks, one split: 33.8 MB of records per call."""
    assert fd_config.fits_workspace(64, 8, 16, 1, 8)
    floats, flags = fd_config.workspace_need(64, 8, 16, 1, 8)
    assert (floats * 4, flags) == (64 * 8 * 8 * (16 * 128 + 16) * 4, 64 * 8 * 8)
    assert not fd_config.fits_workspace(64, 32, 16, 1, 8)  # 135 MB: refused (the call raises, naming the workspace)


@pytest.mark.parametrize(
    ("make", "wide"),
    [
        (lambda: torch.empty(1, 8, 524_288, 128, device="meta"), False),  # [B, H, S, D] at 512k: 2^26 per head
        (lambda: torch.empty(2, 524_288, 32, 128, device="meta").transpose(1, 2), False),  # [B, S, H, D]: < 2^31
        (lambda: torch.empty(2, 524_288, 64, 128, device="meta").transpose(1, 2), True),  # 2^19 x 8192 > 2^31
        (lambda: torch.empty(1, 1, 16_777_215, 128, device="meta"), False),  # last token's last element: 2^31 - 129
        (lambda: torch.empty(1, 1, 16_777_216, 128, device="meta"), True),  # ... 2^31 - 1 + 1
    ],
)
def test_needs_wide_offsets(make, wide):
    """The 64-bit offset variant exactly when a valid token's element offset within its (sequence, head) passes
    int32; the batch and head offsets are 64-bit in both variants."""
    cache = make()
    assert fd_config.needs_wide_offsets(cache, cache) is wide
    compact = torch.empty(cache.shape, device="meta")  # the same shape, contiguous: never wide at these lengths
    assert fd_config.needs_wide_offsets(compact, cache) is wide and fd_config.needs_wide_offsets(cache, compact) is wide


def test_launch_args_give_every_kernel_argument_one_producer_per_split_and_the_combiners():
    q, k, v, n = _inputs(batch=3, q_heads=12, kv_heads=4, local_len=100)
    k, v = k.transpose(1, 2).contiguous().transpose(1, 2), v  # k as a [B, S, H, D] cache, v contiguous
    workspace = fd_op._Workspace(torch.empty(2, 4096), torch.zeros(2, 256, dtype=torch.int32), torch.zeros(3))
    prepared = fd_op._Prepared(fd_config.FlashDecodeConfig(splits=5, block_n=32, num_warps=8), 5, 0.1, workspace)
    grid, named, options = fd_op.launch_args(q, k, v, n, torch.empty_like(q), prepared, 6)
    assert list(named) == list(fd_kernels._flash_decode_kernel.arg_names)
    assert grid == (3 * 4 * (5 + fd_config.COMBINERS), 1, 1) and options == {"num_warps": 8, "num_stages": 3}
    expected = dict(groups=12, kv_heads=4, local_len=100, stride_ks=4 * 128, stride_vs=128, stride_kh=128)
    expected.update(stride_vh=100 * 128, sm_scale=0.1, rec_parity_stride=4096, flag_parity_stride=256)
    expected.update(SPLITS=5, GROUP=3, ROWS=16, D=128, BLOCK_N=32, WIDE=False, RG=4, CHUNK=32, WORLD=0)
    expected.update(COMBINERS=fd_config.COMBINERS)
    assert {name: named[name] for name in expected} == expected
    assert fd_op.launch_args(q, k, v, n, torch.empty_like(q), prepared, 8)[1]["WORLD"] == 8  # one tensor notify
    with pytest.raises(ValueError, match="out must be like q"):
        fd_op.launch_args(q, k, v, n, torch.empty_like(q)[:, :6], prepared, 6)


# ---------------------------------------------------------------------------------------------------------------
# Bad input


def _inputs(batch=2, q_heads=8, kv_heads=2, local_len=64, dim=128, dtype=torch.bfloat16):  # noqa: ANN001, ANN202
    q = torch.zeros(batch, q_heads, dim, dtype=dtype)
    k = torch.zeros(batch, kv_heads, local_len, dim, dtype=dtype)
    return q, k, k.clone(), torch.zeros(batch, dtype=torch.int32)


def _twice_as_wide(q, k, v, n):  # noqa: ANN001, ANN202
    return q, k.repeat(1, 1, 1, 2), v.repeat(1, 1, 1, 2), n


def _strided_last_dim(q, k, v, n):  # noqa: ANN001, ANN202
    return q, k.repeat(1, 1, 1, 2)[..., ::2], v.repeat(1, 1, 1, 2)[..., ::2], n


def _group_of_17(q, k, v, n):  # noqa: ANN001, ANN202
    return q.repeat(1, 9, 1)[:, :68], k[:, :1].repeat(1, 4, 1, 1), v[:, :1].repeat(1, 4, 1, 1), n


def _strided_lengths(q, k, v, n):  # noqa: ANN001, ANN202
    return q, k, v, torch.zeros(2, 2, dtype=torch.int32)[:, 0]


BAD_INPUTS = [
    ("head dim 64", lambda q, k, v, n: (q[..., :64], k[..., :64], v[..., :64], n), ValueError, "only head_dim 128"),
    ("head dim 256 in k/v", _twice_as_wide, ValueError, "head_dim"),
    ("q heads not a multiple", lambda q, k, v, n: (q[:, :7], k, v, n), ValueError, "multiple of kv_heads"),
    ("no q heads", lambda q, k, v, n: (q[:, :0], k, v, n), ValueError, "positive multiple"),
    ("no kv heads", lambda q, k, v, n: (q, k[:, :0], v[:, :0], n), ValueError, "positive multiple"),
    ("int64 lengths", lambda q, k, v, n: (q, k, v, n.long()), ValueError, "int32"),
    ("lengths of another batch", lambda q, k, v, n: (q, k, v, n[:1]), ValueError, r"shape \[2\]"),
    ("strided lengths", _strided_lengths, ValueError, "contiguous"),
    ("k and v differ", lambda q, k, v, n: (q, k, v[:, :, :32], n), ValueError, "same shape"),
    ("fp32", lambda q, k, v, n: (q.float(), k.float(), v.float(), n), TypeError, "bfloat16"),
    ("mixed dtypes", lambda q, k, v, n: (q, k.half(), v, n), TypeError, "bfloat16"),
    ("batch mismatch", lambda q, k, v, n: (q[:1], k, v, n[:1]), ValueError, "batch"),
    ("2-D q", lambda q, k, v, n: (q[0], k, v, n), ValueError, "q must be"),
    ("3-D k/v", lambda q, k, v, n: (q, k[0], v[0], n), ValueError, "k and v must be"),
    ("17 query heads per KV head", _group_of_17, ValueError, "at most 16"),
    ("transposed k/v", lambda q, k, v, n: (q, k.transpose(2, 3), v.transpose(2, 3), n), ValueError, "head_dim"),
    ("strided last dim", _strided_last_dim, ValueError, "contiguous last dim"),
    ("q not a tensor", lambda q, k, v, n: (q.tolist(), k, v, n), TypeError, "q must be a torch.Tensor"),
]


@pytest.mark.parametrize(("change", "error", "text"), [case[1:] for case in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_raises_before_launch(change, error, text):
    """Each problem raises FlashDecodeError (the op's family), also the TypeError or ValueError it always was."""
    args = change(*_inputs())
    with pytest.raises(FlashDecodeError, match=text) as raised:
        fd_op.check_inputs(*args)
    assert isinstance(raised.value, error)
    with pytest.raises(error, match=text):  # the op's own entry raises before it needs a world or a GPU
        flash_decode_fn(*args)


def test_lengths_on_another_device_raise():
    q, k, v, n = _inputs()
    with pytest.raises(FlashDecodeError, match="one device"):
        fd_op.check_inputs(q, k, v, n.to("meta"))


def test_the_device_is_checked_before_the_dtype():
    """A call on the wrong device with a wrong dtype too is named for its device (the first thing to fix)."""
    q, k, v, n = _inputs()
    with pytest.raises(FlashDecodeError, match="q is on cpu, but this rank's triton_dist device is cuda:0"):
        fd_op.check_inputs(q.float(), k, v, n, torch.device("cuda", 0))
    with pytest.raises(FlashDecodeError, match="one device"):
        fd_op.check_inputs(q.float(), k, v, n.to("meta"))


@pytest.mark.parametrize(
    ("scale", "error", "text"),
    [(float("nan"), ValueError, "finite"), (float("inf"), ValueError, "finite"), ("0.1", TypeError, "float or None")],
)
def test_bad_scale_raises(scale, error, text):
    with pytest.raises(error, match=text):
        fd_op.check_scale(scale)
    with pytest.raises(error, match=text):
        fd_op._flash_decode_fake(*_inputs(), scale)  # what torch.compile's tracing runs


def test_scale_defaults_to_one_over_sqrt_head_dim():
    assert fd_op.check_scale(None) == pytest.approx(128**-0.5)
    assert fd_op.check_scale(2) == 2.0


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        (dict(splits=fd_config.MAX_SPLITS + 1), "splits"),
        (dict(splits=-1), "splits"),
        (dict(block_n=48), "block_n"),
        (dict(block_n=256), "block_n"),
        (dict(num_warps=2), "num_warps"),
        (dict(num_stages=0), "num_stages"),
    ],
)
def test_bad_config(kwargs, text):
    with pytest.raises(ValueError, match=text):
        fd_config.FlashDecodeConfig(**kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Tracing


def test_custom_op_traces_with_fake_tensors():
    from torch.fx.experimental.proxy_tensor import make_fx

    graph = make_fx(lambda q, k, v, n: flash_decode_fn(q, k, v, n) + 1, tracing_mode="fake")(*_inputs())
    assert any(node.target == torch.ops.triton_dist.flash_decode.default for node in graph.graph.nodes)


def test_torch_compile_fullgraph_captures_one_op_node():
    """Dynamo traces flash_decode (scale included) into one node of the custom op, without a graph break; the
    backend below only records the graph (running it would need GPUs)."""
    graphs = []

    def record(gm, example_inputs):  # noqa: ANN001, ANN202
        graphs.append(gm)
        return lambda *args: (torch.zeros(2, 8, 128, dtype=torch.bfloat16),)

    torch._dynamo.reset()
    compiled = torch.compile(
        lambda q, k, v, n: flash_decode_fn(q, k, v, n, scale=0.5) * 2, backend=record, fullgraph=True
    )
    compiled(*_inputs())
    (graph,) = graphs
    calls = [node for node in graph.graph.nodes if node.op == "call_function" and "flash_decode" in str(node.target)]
    assert len(calls) == 1
    assert calls[0].target in (torch.ops.triton_dist.flash_decode, torch.ops.triton_dist.flash_decode.default)
    assert 0.5 in calls[0].args or calls[0].kwargs.get("scale") == 0.5


def combine_loop(ttgir: str) -> str:
    """The TTGIR of the combine's loop: the ``scf.for`` around the rank-3 load of records (fp32 pointers)."""
    lines = ttgir.splitlines()
    load = next(i for i, line in enumerate(lines) if re.search(r"tt\.load .*tensor<\d+x\d+x\d+x!tt\.ptr<f32>", line))
    start = max(i for i in range(load) if "scf.for" in lines[i])
    end = next(i for i in range(load, len(lines)) if "scf.yield" in lines[i])
    return "\n".join(lines[start : end + 1])


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
@pytest.mark.parametrize(("group", "world"), [(8, 2), (8, 1), (4, 8), (1, 2), (16, 4)])
def test_combine_steps_convert_at_most_the_weights(target, group, world):
    """A combine step reduces over its records with at most two layout conversions on sm_90 (the per-record weights
    into the tile's layout) and allocates no shared memory of its own (with the warps on the record axis of a full-width
    tile, each step took eight barriers, about 2.9 us on one H200: bench/results/flash_decode_anatomy.md)."""
    need_real_library(target)
    loop = combine_loop(compile_flash(target, group=group, splits=16, world=world).asm["ttgir"])
    assert "tt.reduce" in loop, loop  # the sums and maxima over records are in the loop
    most = 2 if target == "sm_90" else 3  # gfx942's 64-lane waves: one more for 16 records of an 8-head group
    assert loop.count("ttg.convert_layout") <= most, f"more layout conversions in the combine loop:\n{loop}"
    for op in ("ttg.local_alloc", "ttg.local_store"):
        assert op not in loop, f"{op} in the combine loop:\n{loop}"


@pytest.mark.parametrize(("group", "world", "splits", "steps"), [(8, 2, 16, 1), (8, 1, 16, 1), (16, 2, 16, 2)])
def test_combiners_take_the_records_in_few_steps(group, world, splits, steps):
    """The default combiners (a quarter of the head dim each) load every record of 2 ranks x 16 splits at once for
    an 8-head group (one dependent step instead of eight)."""
    records = world * splits
    assert -(-records // fd_config.combine_chunk(group, records)) == steps


@pytest.mark.parametrize(
    ("groups", "sms", "want"),
    [(8, 132, 4), (33, 132, 4), (34, 132, 2), (64, 132, 2), (66, 132, 2), (67, 132, 1), (512, 132, 1), (1, 8, 4)],
)
def test_choose_combiners_fits_one_wave(groups, sms, want):
    """Four combiners per group while they fit one wave of the SMs, else fewer (a power of two), at least one."""
    chosen = fd_config.choose_combiners(groups, sms)
    assert chosen == want and chosen & (chosen - 1) == 0
    assert chosen == 1 or groups * chosen <= sms


def test_a_call_resolves_its_combiner_count_before_the_agreement(monkeypatch):
    """The chosen count is part of the config the ranks agree on (a rank on a GPU with another SM count would choose
    another and be caught by the agreement); a forced count is kept."""
    q, k, _, _ = _inputs(batch=8, q_heads=64, kv_heads=8, local_len=256)
    monkeypatch.setitem(gpu._sms, q.device.index, 132)
    assert fd_op._with_combiners(q, k, fd_config.FlashDecodeConfig()).combiners == 2  # 64 groups on 132 SMs
    assert fd_op._with_combiners(q, k, fd_config.FlashDecodeConfig(combiners=8)).combiners == 8


# ---------------------------------------------------------------------------------------------------------------
# Residency at batch 64 and the config override (docs/design.md, "flash_decode at batch 64")


@pytest.mark.parametrize(
    ("shared", "registers", "warps", "want"),
    [
        (139_264, 113, 4, 1),  # the default config at batch 64, group 4 (compiled below)
        (71_680, 80, 4, 3),  # block_n 64, 3 stages
        (104_448, 80, 4, 2),  # MANY_GROUPS_CONFIG (block_n 64, 4 stages)
        (73_728, 126, 4, 3),  # block_n 128, 2 stages
        (76_800, 80, 4, 3),  # the most for 3: (76,800 + 1,024) x 3 = 233,472
        (76_801, 80, 4, 2),  # a byte more rounds up to the next 128
        (0, 255, 8, 1),  # registers: 8,192 a warp x 8 warps
        (0, 129, 4, 3),  # 129 registers round up to 4,352 a warp: 3 programs of 4 warps, not 4
        (0, 32, 32, 2),  # warps
        (0, 16, 1, 32),  # the most programs an SM holds
    ],
)
def test_programs_per_sm(shared, registers, warps, want):
    assert fd_config.programs_per_sm(shared, registers, warps) == want


@pytest.mark.parametrize(("args", "text"), [((-1, 80, 4), "shared_bytes"), ((0, 0, 4), "registers"),
    ((0, 256, 4), "registers"), ((0, 80, 0), "num_warps"), ((232_449, 80, 4), "exceed")])  # fmt: skip
def test_programs_per_sm_refuses_what_no_sm90_program_has(args, text):
    with pytest.raises(FlashDecodeError, match=text):
        fd_config.programs_per_sm(*args)


def test_many_groups_config_holds_two_programs_per_sm_where_the_default_holds_one(tmp_path):
    """At batch 64 (group 4, 1 split, 2 ranks) the default's two 128-token K/V buffers (139,264 bytes) leave room
    for one program per SM; MANY_GROUPS_CONFIG's three 64-token ones for two, without spills in its loops. While a
    block is computed, the default keeps the next block's K and V in flight (``cp.async.wait_group 2`` leaves their
    two copy groups outstanding), the candidate the next two blocks' (4 groups). Both load them as 16-byte copies
    into shared memory (LDGSTS.128): 2 x block_n x 256 bytes over 128 threads, 32 (block_n 128) or 16 (64) per
    thread and block."""
    need_real_library("sm_90")
    for config, want in ((fd_config.default_config("cuda"), 1), (fd_config.MANY_GROUPS_CONFIG, 2)):
        compiled = compile_flash("sm_90", group=4, splits=1, world=2, config=config)
        report, sass = ptxas(compiled.asm["ptx"], tmp_path)
        registers = int(re.search(r"Used (\d+) registers", report)[1])
        resident = fd_config.programs_per_sm(compiled.metadata.shared, registers, config.num_warps)
        assert resident == want, f"{config}: {compiled.metadata.shared} bytes, {registers} registers"
        loops = loop_instructions(sass, "sass")
        assert not [line for line in loops if re.search(r"\b(LDL|STL)\b", line)], f"{config}: spills in a loop"
        copies = [re.search(r"LDGSTS\S*", line)[0] for line in loops if "LDGSTS" in line]
        per_thread = 2 * config.block_n * fd_config.HEAD_DIM * 2 // 16 // (32 * config.num_warps)
        assert copies == ["LDGSTS.E.BYPASS.128"] * per_thread, f"{config}: {copies}"
        waits = sorted(re.findall(r"cp\.async\.wait_group\s+(\d+);", compiled.asm["ptx"]))
        ahead = 2 * (config.num_stages - 2)  # K and V groups of the num_stages - 2 blocks issued ahead
        assert waits == sorted(["0", str(ahead)]), f"{config}: {waits}"  # in the loop, then 0 after it


def test_config_text_round_trips_and_names_what_it_refuses():
    config = fd_config.FlashDecodeConfig(splits=2, block_n=64, num_warps=8, num_stages=2, combiners=4)
    assert fd_config.config_from_text(fd_config.config_text(config)) == config
    assert fd_config.config_from_text(" block_n=64 , num_stages=4 ") == fd_config.MANY_GROUPS_CONFIG
    assert fd_config.config_from_text("") == fd_config.default_config("cuda")
    for text, match in (("block=64", "name=value"), ("block_n", "name=value"), ("block_n=6x", "integer"),
                        ("block_n=48", "block_n must be one of")):  # fmt: skip
        with pytest.raises(FlashDecodeError, match=match):
            fd_config.config_from_text(text)


def test_the_environment_overrides_the_gpu_default(monkeypatch):
    monkeypatch.delenv(fd_config.CONFIG_ENV, raising=False)
    assert fd_op.gpu_default_config() == fd_config.default_config("hip" if torch.version.hip else "cuda")
    monkeypatch.setenv(fd_config.CONFIG_ENV, "block_n=64,num_stages=4")
    assert fd_op.gpu_default_config() == fd_config.MANY_GROUPS_CONFIG
    monkeypatch.setenv(fd_config.CONFIG_ENV, "num_warps=2")
    with pytest.raises(FlashDecodeError, match=f"\\${fd_config.CONFIG_ENV}: .*num_warps"):
        fd_op.gpu_default_config()


def test_many_groups_take_the_many_groups_config_on_nvidia_only(monkeypatch):
    """Batch x KV heads of at least MANY_GROUPS_ROUNDS rounds of the SMs take MANY_GROUPS_CONFIG on NVIDIA (batch 64
    x 8 KV heads on 132 SMs: 512 groups); fewer keep the 128-token default; AMD keeps its own; the environment's
    config wins over both."""
    monkeypatch.delenv(fd_config.CONFIG_ENV, raising=False)
    sms = 132
    edge = fd_config.MANY_GROUPS_ROUNDS * sms
    assert fd_config.default_config("cuda", 64 * 8, sms) == fd_config.MANY_GROUPS_CONFIG
    assert fd_config.default_config("cuda", edge, sms) == fd_config.MANY_GROUPS_CONFIG
    assert fd_config.default_config("cuda", edge - 1, sms) == fd_config.default_config("cuda")
    assert fd_config.default_config("cuda", 8 * 8, sms).block_n == 128
    assert fd_config.default_config("hip", 64 * 8, sms) == fd_config.default_config("hip")
    monkeypatch.setenv(fd_config.CONFIG_ENV, "block_n=128,num_stages=3")
    assert fd_op.gpu_default_config(64 * 8, sms) == fd_config.default_config("cuda")
