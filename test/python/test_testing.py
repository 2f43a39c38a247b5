"""triton_dist.testing without GPUs: poison and tolerances, assert_close's verdicts and messages, agreement across
real gloo ranks, the torchrun glue on a CPU heap, markdown/PNG writers, compile_for, and bench's argument rules."""

import os
import struct
import zlib

import pytest
import torch
import triton
import triton.language as tl
from emulated_ranks import run_ranks

from triton_dist import testing

TIMEOUT_S = 120


@pytest.mark.parametrize(
    ("dtype", "check"),
    [
        (torch.float32, lambda t: bool(torch.isnan(t).all())),
        (torch.bfloat16, lambda t: bool(torch.isnan(t.float()).all())),
        (torch.float16, lambda t: bool(torch.isnan(t.float()).all())),
        (torch.int32, lambda t: bool((t == -(2**31)).all())),
        (torch.int64, lambda t: bool((t == -(2**63)).all())),
        (torch.uint8, lambda t: bool((t == 0).all())),
        (torch.bool, lambda t: bool(t.all())),
    ],
)
def test_poison_fills_a_value_no_result_has(dtype, check):
    tensor = torch.ones(7, 3).to(dtype) if dtype != torch.uint8 else torch.full((7, 3), 9, dtype=dtype)
    assert testing.poison_(tensor) is tensor
    assert check(tensor)


def test_tolerances_are_per_dtype_and_exact_for_integers():
    assert testing.tolerances(torch.bfloat16) == (1.6e-2, 1e-5)
    assert testing.tolerances(torch.float16)[0] < testing.tolerances(torch.bfloat16)[0]
    assert testing.tolerances(torch.float32)[0] < testing.tolerances(torch.float16)[0]
    assert testing.tolerances(torch.int32) == (0.0, 0.0)


def test_assert_close_accepts_rounding_of_the_dtype_and_rejects_more():
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn(256, 64, generator=generator)
    testing.assert_close(ref.to(torch.bfloat16), ref)  # bf16 rounding of the reference passes
    with pytest.raises(AssertionError, match="differ from the reference"):
        testing.assert_close(ref.to(torch.bfloat16), ref, torch.float32)  # but not at fp32 tolerances
    wrong = ref.clone()
    wrong[3, 5] += 0.5
    with pytest.raises(AssertionError, match=r"1 of 16384 elements .* worst at \[3, 5\]"):
        testing.assert_close(wrong, ref)


def test_assert_close_reports_unwritten_poison():
    ref = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    out = testing.poison_(torch.empty_like(ref))
    out[:2] = ref[:2]
    with pytest.raises(AssertionError, match="4 of 12 elements .* 4 elements still hold the poison value nan"):
        testing.assert_close(out, ref)


def test_assert_close_compares_integers_exactly_beyond_float64():
    big = torch.tensor([2**62 + 1], dtype=torch.int64)
    with pytest.raises(AssertionError, match="1 of 1 elements"):
        testing.assert_close(big, big - 1)
    testing.assert_close(big, big.clone())


def test_assert_close_rejects_shape_mismatch():
    with pytest.raises(AssertionError, match=r"shape \[2\] != reference shape \[3\]"):
        testing.assert_close(torch.zeros(2), torch.zeros(3))


def _glue_and_agreement():
    """On a rank that torchrun's variables describe (``run_ranks``); returns its checks' tally."""
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    world = testing.setup_distributed(heap_size="1M", device="cpu")
    assert (world.rank, world.world_size) == (rank, world_size)
    same = torch.arange(10, dtype=torch.float32)
    assert testing.allclose_across_ranks(same)
    differs = same.clone()
    differs[rank] += 1e-3  # a different element on each rank
    assert not testing.allclose_across_ranks(differs)
    assert testing.allclose_across_ranks(differs, atol=1e-2)
    assert testing.max_over_ranks(float(rank)) == world_size - 1
    assert testing.all_ranks_true(True) and not testing.all_ranks_true(rank != 1)
    checks = testing.Checks()
    checks.check("always", True)
    checks.check("fails on rank 1 only", rank != 1)
    checks.run("raises on rank 0 only", lambda: (_ for _ in ()).throw(ValueError("boom")) if rank == 0 else None)
    code = checks.exit_code()
    testing.teardown()
    return f"{code} {checks.passed} {','.join(checks.failed)}"


def test_setup_checks_and_agreement_across_real_ranks():
    run = run_ranks(_glue_and_agreement, 2, process_group=False, env={"TRITON_INTERPRET": "0"}, timeout_s=TIMEOUT_S)
    results = run.results
    # Each rank failed one check, so both exit non-zero; the tallies are per rank.
    assert results == ["1 2 raises on rank 0 only", "1 1 fails on rank 1 only"], results


def test_markdown_table_and_file(tmp_path):
    table = testing.markdown_table(["size", "ms", "note"], [[1024, 0.123456, "a|b"], [2048, 12345.6, "x"]])
    assert table.splitlines() == [
        "| size | ms | note |",
        "|---|---|---|",
        "| 1024 | 0.1235 | a\\|b |",
        "| 2048 | 12346 | x |",
    ]
    with pytest.raises(ValueError, match="row 0 has 2 cells for 3 headers"):
        testing.markdown_table(["a", "b", "c"], [[1, 2]])
    path = testing.write_markdown(tmp_path / "out" / "r.md", "Title", ["a"], [[1]], notes=["command: `x`"])
    text = path.read_text()
    assert text.startswith("# Title\n\n- command: `x`\n- date: ") and text.endswith("| a |\n|---|\n| 1 |\n")


def test_chart_is_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="write_chart needs matplotlib")
    path = testing.write_chart(
        tmp_path / "c.png", [1, 2, 4], {"ours": [1.0, 2.0, 3.0], "nccl": [2.0, 3.0, 4.0]},
        title="t", xlabel="MiB", ylabel="GB/s", logx=True,
    )  # fmt: skip
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (840, 540)
    assert zlib.crc32(data[12:29]) == struct.unpack(">I", data[29:33])[0]  # a well-formed IHDR chunk


def test_chart_rejects_ragged_series(tmp_path):
    with pytest.raises(ValueError, match="series 'a' has 2 values for 3 x values"):
        testing.write_chart(tmp_path / "c.png", [1, 2, 3], {"a": [1, 2]}, title="t", xlabel="x", ylabel="y")


@triton.jit
def _scale(x_ptr, y_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


SCALE_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "factor": "fp32"}


@pytest.mark.parametrize(("target", "needle"), [("sm_90", ".target sm_90a"), ("gfx942", "gfx942")])
def test_compile_for_targets_without_a_gpu(target, needle):
    compiled = testing.compile_for(_scale, SCALE_SIGNATURE, target, constexprs={"BLOCK": 256})
    text = testing.assembly(compiled)
    assert needle in (compiled.asm.get("ptx") or compiled.asm["amdgcn"])
    lines = [line.strip() for line in text.splitlines()]
    assert any("_scale" in line for line in lines)
    assert not any(line.startswith((".loc", ".file")) or ".debug_" in line for line in lines)


def test_compile_for_specializes_the_aligned_arguments():
    def loads(aligned):
        compiled = testing.compile_for(_scale, SCALE_SIGNATURE, "sm_90", constexprs={"BLOCK": 256}, aligned=aligned)
        return [line.split()[1] for line in testing.assembly(compiled).splitlines() if "ld.global" in line]

    # 256 elements over 128 threads: 2 per thread, one 8-byte load once the masked bound is 16-divisible too.
    assert loads(["x_ptr", "y_ptr", "n"]) == ["ld.global.v2.b32"]
    assert loads([]) == ["ld.global.b32", "ld.global.b32"]


def test_compile_for_names_bad_arguments():
    with pytest.raises(ValueError, match=r"give a type in signature .* \['factor'\]"):
        testing.compile_for(_scale, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 256})
    with pytest.raises(ValueError, match=r"no argument\(s\) \['z'\]"):
        testing.compile_for(_scale, {"z": "i32"})
    with pytest.raises(ValueError, match="target must be"):
        testing.compile_for(_scale, {}, target="h100")


def test_bench_insists_on_enough_runs():
    with pytest.raises(ValueError, match="at least 20 timed runs"):
        testing.bench(lambda: None, rep=5)
    with pytest.raises(ValueError, match="at least one untimed call"):
        testing.bench(lambda: None, warmup=0)


def test_expect_error_wants_the_named_exception_and_words(capsys):
    def raises(error: BaseException):
        def call():
            raise error

        return call

    checks = testing.Checks()
    assert checks.expect_error("right", ValueError, raises(ValueError("a.shape[1] must equal b")), "a.shape", "b")
    assert not checks.expect_error("word missing", ValueError, raises(ValueError("bad shape")), "contiguous")
    assert not checks.expect_error("other type", ValueError, raises(TypeError("contiguous")), "contiguous")
    assert not checks.expect_error("no error", ValueError, lambda: None)
    assert (checks.passed, checks.failed) == (1, ["word missing", "other type", "no error"])
    output = capsys.readouterr().out
    assert "missing ['contiguous']" in output and "raised TypeError instead of ValueError" in output
    assert "no ValueError raised" in output


def test_run_each_passes_the_tally_and_arguments_and_survives_a_raise():
    seen = []

    def good(checks, world):
        seen.append(world)
        checks.check("good", True)

    def bad(checks, world):
        raise RuntimeError("boom")

    checks = testing.Checks()
    checks.run_each([("good", good), ("bad", bad)], "the world")
    assert seen == ["the world"]
    assert (checks.passed, checks.failed) == (1, ["bad"])


def test_env_without_launcher_drops_torchrun_variables_only():
    env = {"RANK": "1", "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True", "PATH": "/bin", "PORT": "7"}
    assert testing.env_without_launcher(env) == {"PATH": "/bin", "PORT": "7"}
    assert "PATH" in testing.env_without_launcher()


def test_setup_without_torchrun_starts_a_world_of_one(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "alone.py"
    script.write_text(
        "from triton_dist import testing\n"
        "world = testing.setup_distributed(heap_size='1M', device='cpu')\n"
        "print('WORLD', world.world_size, world.rank)\n"
        "testing.teardown()\n"
    )
    python_dir = Path(__file__).resolve().parents[2] / "python"
    env = dict(testing.env_without_launcher(), PYTHONPATH=str(python_dir))
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WORLD 1 0" in result.stdout


_TEARDOWN_CHILD = """
import os, sys, warnings
from triton_dist import testing

def threads():
    return set(os.listdir("/proc/self/task"))

before = threads()
world = testing.setup_distributed(heap_size="1M", device="cpu")
started = threads() - before
assert started, "setup_distributed started no thread: nothing for this test to check"
kept = world.group  # a reference teardown() cannot drop: the group's threads must outlive it, with a warning
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    testing.teardown()
assert [str(w.category.__name__) for w in caught] == ["RuntimeWarning"], caught
assert "still referenced" in str(caught[0].message), caught[0].message
assert world.group is None
del kept  # the last reference: the group and its threads end here, not at interpreter exit

before = threads()
world = testing.setup_distributed(heap_size="1M", device="cpu")
# The main thread keeps the GIL from here on unless it blocks: a gloo worker that still had to free the last
# collective's tensors when the interpreter shut down (the old teardown) waited for it there and aborted.
sys.setswitchinterval(100)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    testing.teardown()
assert caught == [], [str(w.message) for w in caught]
left = threads() - before
assert not left, f"threads setup_distributed started are still alive after teardown(): {left}"

# A group held only by garbage in a reference cycle (as the frames of a caught exception's traceback hold the
# arguments of torch.distributed's calls) is collected by teardown(), not left to the collector or to exit.
import gc
gc.disable()
before = threads()
world = testing.setup_distributed(heap_size="1M", device="cpu")
cycle = [world.group]
cycle.append(cycle)
del cycle
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    testing.teardown()
assert caught == [], [str(w.message) for w in caught]
left = threads() - before
assert not left, f"a group held by a garbage cycle kept its threads after teardown(): {left}"
gc.enable()
print("TEARDOWN OK", flush=True)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="lists the process's threads through /proc")
def test_teardown_joins_the_process_groups_threads_before_exit(tmp_path):
    """teardown() frees the process group, so every thread setup_distributed started (gloo's workers and TCP loop,
    the store's server) is joined before the script ends, not while the interpreter shuts down, where a gloo worker
    freeing the last collective's tensors aborted the process about once in twenty runs ("terminate called without
    an active exception"). A group the script still references is reported; one held only by a garbage cycle is
    collected."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "teardown.py"
    script.write_text(_TEARDOWN_CHILD)
    python_dir = Path(__file__).resolve().parents[2] / "python"
    env = dict(testing.env_without_launcher(), PYTHONPATH=str(python_dir))
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TEARDOWN OK" in result.stdout
    assert "terminate called" not in result.stderr


def test_shared_gpus_reads_its_variable(monkeypatch):
    monkeypatch.setenv("TRITON_DIST_SHARED_GPUS", "1")
    assert testing.shared_gpus()
    monkeypatch.setenv("TRITON_DIST_SHARED_GPUS", "0")
    assert not testing.shared_gpus()
