"""pytest entry to the GPU checks and examples, and CPU tests of ``scripts/gpu_check.sh`` and of the scripts' shared
helpers.

``scripts/gpu_check.sh`` is the one GPU entry point (checks on 2 and 4 GPUs, the ops benchmarks and tuning, logs,
results table); the GPU tests here run the same check scripts once under torchrun on up to 4 local GPUs and skip
visibly on machines with fewer than 2 GPUs. The CPU tests run the shell script in its dry-run mode
(``GPU_CHECK_DRY_RUN=1``), which prints and tabulates the steps it would run, and test what the GPU scripts share
that needs no GPU: ``test/gpu/_cases.py`` (fresh-process cases and their tally), ``test/gpu/_epoch_values.py`` (the
litmus checks' values), ``bench/_variant_cost.py`` (the guard and watchdog cost benchmarks) and
``scripts/ab_libraries.sh`` (one command under two device-library builds in turn).
"""

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
RANKS = min(GPUS, 4)


SCRIPTS = [
    ("test/gpu/check_primitives.py", [], 300),
    ("test/gpu/check_litmus.py", ["--rounds", "100000"], 240),
    ("test/gpu/check_copy_engine.py", ["--rounds", "2000"], 300),
    ("examples/ping_pong.py", [], 180),
    ("examples/allgather_push.py", ["--sizes-mib", "1", "128"], 240),
    ("examples/allgather_pull.py", ["--sizes-mib", "1", "128"], 240),
]


@pytest.mark.parametrize(("script", "args", "timeout_s"), SCRIPTS, ids=[Path(s).stem for s, _, _ in SCRIPTS])
@pytest.mark.gpu
@pytest.mark.skipif(GPUS < 2, reason=f"needs at least 2 GPUs, found {GPUS}")
def test_script_passes_under_torchrun(script, args, timeout_s):
    env = dict(
        os.environ,
        PYTHONPATH=f"{REPO / 'python'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        PYTHONUNBUFFERED="1",
        NCCL_NVLS_ENABLE="0",
        TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
        NVSHMEM_DISABLE_NVLS="1",
    )
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}", script]
    result = subprocess.run(command + args, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert " 0 failures over all ranks" in output, output[-6000:]


CHECK_STEPS = [
    "primitives",
    "litmus",
    "copy_engine",
    "ping_pong",
    "allgather_push",
    "allgather_pull",
    "ag_gemm",
    "memory_model",
    "decode_ops",
    "ar_rmsnorm",
    "gemm_rs",
    "layers",
]
MORE_RANKS_STEPS = ["moe_ranks"]
"""Check steps of each size above 2 (the MoE GPU test's worker at every rank; its 2-rank run is the ``moe`` step)."""
ONCE_STEPS = ["guards", "guard_cost", "watchdog", "watchdog_cost", "round_trip_variants"]
ONCE_STEPS += ["primitives_nvshmem", "ping_pong_nvshmem", "allgather_push_nvshmem", "nvshmem_put"]
ONCE_STEPS += [
    "litmus_nvshmem", "memory_model_nvshmem", "ag_gemm_nvshmem", "gemm_rs_nvshmem", "decode_ops_nvshmem",
    "ar_rmsnorm_nvshmem", "layers_nvshmem",
]  # fmt: skip
ONE_GPU_STEPS = ["all_gather", "all_reduce_nodes", "moe_nodes", "moe", "round_trip_one_gpu"]
"""Check steps started as one process (ranks 1), after the once-steps: they launch their own ranks or use one GPU."""
BENCH_STEPS = [
    "bench_matmul",
    "bench_ag_gemm",
    "bench_gemm_rs",
    "bench_sweep",
    "bench_host_path",
    "bench_all_reduce",
    "bench_gemm_ar",
    "bench_flash_decode",
    "bench_flash_decode_anatomy",
    "bench_gemm_ar_tiles",
    "bench_heap_backends",
    "bench_decoder",
    "bench_decoder_anatomy",
    "bench_moe",
    "bench_moe_dispatch",
    "bench_prefill",
    "bench_ar_rmsnorm",
]
TUNE_STEPS = ["allgather_tune", "calibrate", "tune_ag_gemm", "tune_gemm_rs"]
ROW = re.compile(r"^\| (\d+) \| (\w+) \| (\w+) \| \d+ \| (.*) \|$")


def dry_run(tmp_path: Path, **env: str) -> tuple[int, str, list[tuple[str, str, str, str]]]:
    """Runs ``scripts/gpu_check.sh`` dry with OUT=tmp_path; returns (exit code, stdout, table rows)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_")}
    environment.update(GPU_CHECK_DRY_RUN="1", OUT=str(tmp_path), **env)
    result = subprocess.run(
        ["bash", "scripts/gpu_check.sh"], cwd=REPO, env=environment, capture_output=True, text=True, timeout=60
    )
    table = (tmp_path / "gpu_check.md").read_text()
    rows = [m.groups() for line in table.splitlines() if (m := ROW.match(line))]
    return result.returncode, result.stdout + result.stderr, rows


def test_dry_run_lists_the_checks_on_each_size(tmp_path):
    code, output, rows = dry_run(tmp_path, GPU_CHECK_SIZES="2 4")
    assert code == 0, output
    expected = [(n, s) for n in ("2", "4") for s in CHECK_STEPS + MORE_RANKS_STEPS * (n != "2")]
    expected += [("2", s) for s in ONCE_STEPS]
    expected += [("1", s) for s in ONE_GPU_STEPS]
    assert [(r[0], r[1]) for r in rows] == expected
    assert all(r[2] == "DRY" for r in rows)
    assert "Overall: PASS" in (tmp_path / "gpu_check.md").read_text()
    moe_ranks = [r for r in rows if r[1] == "moe_ranks"]  # at 4 ranks the defaults' paths only (its 2 ranks: moe)
    assert len(moe_ranks) == 1 and "--quick`" in moe_ranks[0][3], moe_ranks


def test_bench_and_tune_modes_add_their_steps_once(tmp_path):
    code, output, rows = dry_run(tmp_path, GPU_CHECK_SIZES="2 4", GPU_CHECK_BENCH="1", GPU_CHECK_TUNE="1")
    assert code == 0, output
    names = [r[1] for r in rows]
    for name in BENCH_STEPS + TUNE_STEPS:
        assert names.count(name) == 1, name
    by_name = {r[1]: r for r in rows}
    assert by_name["bench_matmul"][0] == "1"  # one process, no torchrun
    assert by_name["tune_ag_gemm"][0] == "2" and by_name["allgather_tune"][0] == "4"
    assert "--tune" in by_name["bench_all_reduce"][3] and "--tune" in by_name["tune_gemm_rs"][3]
    # the GEMM tiles come before the AG+GEMM sweep that starts from them, the sweep before its benchmark
    assert names.index("bench_matmul") < names.index("tune_ag_gemm") < names.index("bench_ag_gemm")
    # the calibration comes before every step whose ops select through the cost model
    assert names.index("calibrate") < min(names.index(n) for n in ("tune_ag_gemm", "bench_ag_gemm", "bench_sweep"))


def test_every_step_names_a_script_in_the_tree(tmp_path):
    _, _, rows = dry_run(tmp_path, GPU_CHECK_SIZES="2", GPU_CHECK_BENCH="1", GPU_CHECK_TUNE="1")
    for _, name, _, command in rows:
        script = command.strip("` ").split()[0]
        assert (REPO / script).is_file(), f"step {name} runs {script}, which is missing"


def test_only_runs_the_named_steps_and_passes_the_shapes(tmp_path):
    code, output, rows = dry_run(
        tmp_path,
        GPU_CHECK_SIZES="2",
        GPU_CHECK_ONLY="gemm_rs bench_gemm_rs",
        GPU_CHECK_SHAPES="8192,4096,12288",
        GPU_CHECK_QUICK="1",
    )
    assert code == 0, output
    assert [r[1] for r in rows] == ["gemm_rs", "bench_gemm_rs"]
    assert "--quick" in rows[0][3]
    assert "--shapes 8192,4096,12288" in rows[1][3]


def test_the_nvshmem_steps_run_on_the_nvshmem_heap(tmp_path):
    steps = ["primitives", "primitives_nvshmem", "ping_pong_nvshmem", "allgather_push_nvshmem", "nvshmem_put"]
    code, output, rows = dry_run(tmp_path, GPU_CHECK_SIZES="2", GPU_CHECK_ONLY=" ".join(steps))
    assert code == 0, output
    assert [r[1] for r in rows] == steps
    said = {line.split()[3]: line for line in output.splitlines() if line.startswith("[gpu_check") and " DRY " in line}
    assert "TRITON_DIST_BACKEND" not in said["primitives"]
    for name in steps[1:]:
        assert "TRITON_DIST_BACKEND=nvshmem python3 -m torch.distributed.run" in said[name], said[name]


def test_budget_skips_steps_and_fails_the_run(tmp_path):
    code, _, rows = dry_run(tmp_path, GPU_CHECK_SIZES="2", GPU_CHECK_ONLY="primitives litmus", GPU_CHECK_BUDGET_S="35")
    assert code == 1
    assert [(r[1], r[2]) for r in rows] == [("primitives", "SKIP"), ("litmus", "SKIP")]


def test_output_is_few_files(tmp_path):
    # The device machine returns at most 8 files from $OUT: the table and one archive.
    dry_run(tmp_path, GPU_CHECK_SIZES="2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_check.md", "gpu_check.tgz"]


def test_too_few_gpus_fails_visibly(tmp_path):
    code, output, _ = dry_run(tmp_path, GPU_CHECK_SIZES=" ")
    assert code == 1
    assert "need at least 2" in (tmp_path / "gpu_check.md").read_text()


def test_shared_gpu_mode_says_so_and_runs_only_checks_unless_told(tmp_path):
    code, output, rows = dry_run(tmp_path, GPU_CHECK_SIZES="2", GPU_CHECK_SHARED_GPU="1", GPU_CHECK_BENCH="1")
    assert code == 0, output
    assert "correctness only, timings mean nothing" in (tmp_path / "gpu_check.md").read_text()
    names = [r[1] for r in rows]
    assert "decode_ops" in names and not set(names) & set(BENCH_STEPS + TUNE_STEPS)
    _, _, rows = dry_run(tmp_path, GPU_CHECK_SIZES="2", GPU_CHECK_SHARED_GPU="1", GPU_CHECK_ONLY="bench_gemm_ar")
    assert [r[1] for r in rows] == ["bench_gemm_ar"]


def _ab(tmp_path, a: Path, b: Path, *command: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "AB_A": str(a), "AB_B": str(b), "OUT": str(tmp_path / "out"), **env}
    return subprocess.run(
        ["bash", "scripts/ab_libraries.sh", *command], cwd=REPO, env=environment, capture_output=True, text=True
    )


def test_ab_libraries_alternates_the_two_libraries(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for directory in (a, b):
        directory.mkdir()
        (directory / "triton_dist.nvptx64.bc").write_bytes(b"BC")
    show = "import os; print('RESULT', os.path.basename(os.environ['TRITON_DIST_DEVICE_LIB_DIR']))"
    result = _ab(tmp_path, a, b, sys.executable, "-c", show, AB_ROUNDS="2")
    assert result.returncode == 0, result.stderr
    printed = [line for line in result.stdout.splitlines() if line.startswith("[run")]
    assert printed == ["[run 1 A] RESULT a", "[run 2 B] RESULT b", "[run 3 A] RESULT a", "[run 4 B] RESULT b"]
    assert len(list((tmp_path / "out" / "ab_libraries").glob("run*.log"))) == 4
    failing = _ab(tmp_path, a, b, sys.executable, "-c", "raise SystemExit(3)", AB_ROUNDS="1")
    assert failing.returncode == 1 and "run 2 (B) exited 3" in failing.stdout


def test_ab_libraries_refuses_a_directory_without_a_library(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "triton_dist.nvptx64.bc").write_bytes(b"BC")
    result = _ab(tmp_path, tmp_path / "a", tmp_path / "missing", "true")
    assert result.returncode == 2 and "no triton_dist.*.bc in" in result.stderr


# bench/_variant_cost.py and the two benchmarks built on it (guard_cost.py, watchdog_cost.py).
sys.path.insert(0, str(REPO / "bench"))
import _variant_cost  # noqa: E402
import guard_cost  # noqa: E402
import watchdog_cost  # noqa: E402

from triton_dist import compiler  # noqa: E402


def test_variants_are_timed_in_order_then_in_reverse():
    calls = []
    launchers = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    clock = iter(range(1, 7))

    def bench(fn, *, warmup, rep):
        assert (warmup, rep) == (3, 25)
        fn()
        return float(next(clock))

    times = _variant_cost.time_both_orders(launchers, 25, bench=bench)
    assert calls == ["a", "b", "c", "c", "b", "a"]
    assert times == {"a": [1.0, 6.0], "b": [2.0, 5.0], "c": [3.0, 4.0]}


def test_costs_are_best_passes_over_the_first_variants_best():
    times = {level: [2.0, 1.0] for level in guard_cost.LEVELS}
    times[compiler.Checks.DEBUG] = [1.5, 1.25]
    rows = _variant_cost.cost_rows(guard_cost.STUDY, "ping_pong x10", times, "us/round", 100.0)
    assert [row for row, _ in rows][-1] == ("ping_pong x10", "DEBUG", "150.000 / 125.000", "125.000", "+25.00%")
    assert rows[0][0][-1] == "+0.00%"
    assert rows[-1][1] == (
        "RESULT guard_cost ping_pong x10 checks=DEBUG us/round per pass: 150.000 / 125.000 best 125.000 cost +25.00%"
    )
    off_on = _variant_cost.cost_rows(
        watchdog_cost.study(60.0), "allgather_push 1 MiB", {"off": [4.0], "on": [3.0]}, "us", 1.0
    )
    assert (
        off_on[1][1]
        == "RESULT watchdog_cost allgather_push 1 MiB watchdog=on us per pass: 3.000 best 3.000 cost -25.00%"
    )


def test_cost_benchmarks_keep_their_arguments():
    defaults = {"rounds": 10_000, "sizes_mib": [1, 128], "iters": 20, "block": 4096, "num_warps": 8, "results": None}
    assert vars(guard_cost.parse_args([])) == defaults
    assert vars(watchdog_cost.parse_args([])) == {**defaults, "timeout_s": 60.0}
    watchdog = watchdog_cost.parse_args(["--sizes-mib", "8", "16", "--timeout-s", "5", "--results", "out/w"])
    assert (watchdog.sizes_mib, watchdog.timeout_s, watchdog.results) == ([8, 16], 5.0, "out/w")
    with pytest.raises(SystemExit):
        guard_cost.parse_args(["--timeout-s", "5"])  # the guard benchmark has no watchdog setting


def test_each_variant_compiles_under_its_own_setting(monkeypatch):
    """The first launch, which compiles, runs with the variant's check level / watchdog timeout; both are restored."""
    from ping_pong import ping_pong

    seen = []
    before = compiler.check_level()
    for level in guard_cost.LEVELS:
        fresh = guard_cost.STUDY.compile(level, ping_pong, lambda kernel: seen.append(compiler.check_level()))
        assert fresh is not ping_pong and fresh.fn is ping_pong.fn
    assert seen == list(guard_cost.LEVELS)
    assert compiler.check_level() == before

    monkeypatch.setattr(watchdog_cost.rt, "synchronize", lambda: None)  # no GPU work was queued
    monkeypatch.delenv("TRITON_DIST_WAIT_TIMEOUT_S", raising=False)
    from triton_dist.compiler import watchdog

    watchdog._timeout_ns_from_environment.cache_clear()
    try:
        timeouts = []
        study = watchdog_cost.study(5.0)
        for variant in study.variants:
            study.compile(variant, ping_pong, lambda kernel: timeouts.append(compiler.wait_timeout_ns()))
        assert timeouts == [0, 5_000_000_000]
        assert compiler.wait_timeout_ns() == compiler.DEFAULT_WAIT_TIMEOUT_S * 10**9, "back to the default"
    finally:
        watchdog._timeout_ns_from_environment.cache_clear()


@pytest.mark.parametrize("script", ["bench/guard_cost.py", "bench/watchdog_cost.py", "bench/round_trip_variants.py"])
def test_cost_benchmark_starts_without_a_gpu(script):
    """Imports (the examples, the shared module) resolve when run as torchrun runs it; --help needs no GPU."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    result = subprocess.run(
        [sys.executable, script, "--help"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--sizes-mib" in result.stdout and "(median, >= 20)" in result.stdout


# test/gpu/_cases.py: the runner and tally of check_guards.py and check_watchdog.py.
sys.path.insert(0, str(REPO / "test" / "gpu"))
import _cases  # noqa: E402

CASE_REPORT = """
import importlib.util, os, sys
print("rank", os.environ["CASE_RANK"], "port", os.environ["PORT"], "extra", os.environ.get("EXTRA"))
print("launcher variables:", [k for k in os.environ if k in ("RANK", "MASTER_PORT") or k.startswith("TORCHELASTIC")])
print("triton_dist from", importlib.util.find_spec("triton_dist").origin)
print("stderr of rank", os.environ["CASE_RANK"], file=sys.stderr)
"""


def test_case_processes_get_a_rank_a_port_and_no_launcher_variables(monkeypatch):
    # As under torchrun: these would make the case's init_process_group join torchrun's store.
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    output = _cases.run_case(CASE_REPORT, ranks=2, extra_env={"EXTRA": "yes"})
    port = output.split()[3]
    origin = REPO / "python" / "triton_dist" / "__init__.py"

    def rank(n: int) -> str:  # its stdout, then its stderr
        return (
            f"rank {n} port {port} extra yes\nlauncher variables: []\ntriton_dist from {origin}\nstderr of rank {n}\n"
        )

    assert output == rank(0) + "\n" + rank(1)
    assert int(port) > 0


def test_a_case_past_its_timeout_is_killed_and_says_so():
    started = time.monotonic()
    output = _cases.run_case('print("started", flush=True)\nimport time\ntime.sleep(120)\n', timeout_s=2)
    assert time.monotonic() - started < 60
    assert output.startswith("TIMEOUT after 2 s\nstarted\n"), output


def test_tally_counts_and_shows_the_end_of_a_failures_output(capsys):
    tally = _cases.Tally()
    tally.check("first", True, "not shown")
    tally.check("second", False, "x" * 10_000 + "LAST LINE")
    printed = capsys.readouterr().out
    assert printed.startswith("PASS first\nFAIL second\n    | x")
    assert "not shown" not in printed and printed.rstrip().endswith("LAST LINE")
    assert printed.count("x") == _cases.Tally.TAIL_CHARS - len("LAST LINE")
    assert tally.exit_code() == 1
    assert capsys.readouterr().out == "1 passed, 1 failed here; 1 failures over all ranks\n"
    passing = _cases.Tally()
    passing.check("only", True, "")
    assert passing.exit_code() == 0


def test_only_local_rank_0_runs_the_cases(monkeypatch, capsys):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert not _cases.other_local_rank("check_x")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert not _cases.other_local_rank("check_x")
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert _cases.other_local_rank("check_x")
    assert capsys.readouterr().out.startswith(
        "check_x runs its cases on local rank 0 only; 0 passed, 0 failed here; 0 failures over all ranks"
    )


# test/gpu/_epoch_values.py: what the litmus checks write and expect.
EPOCH_VALUES = """
import sys
sys.path.insert(0, sys.argv[1])
import torch, triton, triton.language as tl
from _epoch_values import epoch_values

@triton.jit
def fill(out_ptr, seed, epoch, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, epoch_values(seed, epoch, offsets))

def values(seed, epoch):
    out = torch.empty(1024, dtype=torch.int32)
    fill[(1,)](out, seed, epoch, N=1024)
    return out

def reference(seed, epoch, i):  # the same hash on Python integers
    m = 0xFFFFFFFF
    x = (i * 0x9E3779B1) & m ^ (epoch * 0x85EBCA77) & m ^ seed & m
    x ^= x >> 15
    x = x * 0x2C1B3C6D & m
    x ^= x >> 12
    x = x * 0x297A2D39 & m
    x ^= x >> 15
    return x - (1 << 32) if x >= 1 << 31 else x

here = values(1_000_010, 41)
print("distinct elements", len(set(here.tolist())))
print("every element differs from the next epoch", bool((here != values(1_000_010, 42)).all()))
print("every element differs for the next seed", bool((here != values(1_000_011, 41)).all()))
print("as the reference", [here[i].item() == reference(1_000_010, 41, i) for i in (0, 1, 511, 1023)])
"""


def test_epoch_values_tell_epochs_seeds_and_elements_apart(tmp_path):
    """What the litmus checks rely on to count stale reads, run in Triton's interpreter (no GPU)."""
    script = tmp_path / "epoch_values.py"  # Triton reads @jit source from a file
    script.write_text(EPOCH_VALUES)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), TRITON_INTERPRET="1")
    result = subprocess.run(
        [sys.executable, str(script), str(REPO / "test" / "gpu")], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.stdout.splitlines() == [
        "distinct elements 1024",
        "every element differs from the next epoch True",
        "every element differs for the next seed True",
        "as the reference [True, True, True, True]",
    ], result.stdout + result.stderr


@pytest.mark.parametrize("target", ["sm_90", "gfx942"])
def test_copy_engine_kernels_compile_with_the_shared_values(target):
    """The copy-engine check's producer and consumer kernels compile with the shared ``epoch_values`` inlined.

    (test/python/test_runtime_example_kernels.py loads check_litmus.py and check_copy_engine.py by path, without
    test/gpu on ``sys.path``: there the scripts must find _epoch_values by themselves.)"""
    from triton_dist import testing

    library = {"sm_90": "triton_dist.nvptx64.bc", "gfx942": "triton_dist.amdgcn.bc"}[target]
    if not (REPO / "python" / "triton_dist" / "_device" / library).exists():
        pytest.skip(f"{library} is not built (scripts/build.sh)")
    spec = importlib.util.spec_from_file_location("copy_engine_by_path", REPO / "test" / "gpu" / "check_copy_engine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fill = {"src_ptr": "*i32", "seeds_ptr": "*i32", "me": "i32", "epoch": "i32", "n": "i32"}
    testing.compile_for(module.fill_source, fill, target, constexprs={"BLOCK": module.BLOCK})
    consume = {
        "dst_ptr": "*i32", "flags_ptr": "*i32", "seeds_ptr": "*i32", "result_ptr": "*i32",
        "left": "i32", "epoch": "i32", "chunk_elems": "i32",
    }  # fmt: skip
    compiled = testing.compile_for(
        module.consume_chunks, consume, target, constexprs={"SEMANTIC": "acquire", "BLOCK": module.BLOCK}
    )
    assert "consume_chunks" in testing.assembly(compiled)


def test_all_reduce_floor_kernels_compile():
    """bench/all_reduce.py measures two floors on the GPU (the flag round from bench/_floors.py, which
    bench/gemm_ar.py measures too); their kernels compile for sm_90 here, and the flag round waits with an acquire
    at system scope after its release stores to the peers."""
    from triton_dist import testing

    if not (REPO / "python" / "triton_dist" / "_device" / "triton_dist.nvptx64.bc").exists():
        pytest.skip("triton_dist.nvptx64.bc is not built (scripts/build.sh)")
    import _floors
    import all_reduce as bench_all_reduce

    testing.compile_for(bench_all_reduce._empty_kernel, {"x_ptr": "*fp32"}, "sm_90", num_warps=1)
    compiled = testing.compile_for(
        _floors._flag_round_kernel, {"flags_ptr": "*i32", "epoch_ptr": "*i32"}, "sm_90", num_warps=1
    )
    ptx = testing.assembly(compiled)
    assert "st.release.sys" in ptx and "ld.acquire.sys" in ptx, ptx


# --- the GPU scripts' imports (the ops became packages: ops/<op>/{kernels,config,op}.py and ops/common/) -----------

IMPORT_CHECKED = sorted(
    str(path.relative_to(REPO))
    for pattern in ("test/gpu/*.py", "scripts/*.py", "bench/*.py", "examples/*.py")
    for path in REPO.glob(pattern)
)


def _fragments(source: str) -> list[tuple[str, ast.Module]]:
    """The module's syntax tree, then that of every string constant in it that is Python source itself (the case
    processes' preludes and their setup and round statements), each with where it is ("" or " in the string at line
    N", to follow a line number)."""
    tree = ast.parse(source)
    trees = [("", tree)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
            try:
                trees.append((f" of the string at line {node.lineno}", ast.parse(textwrap.dedent(node.value))))
            except SyntaxError:
                continue
    return trees


def _import_problems(path: Path) -> list[str]:
    """What ``path`` (with the Python source in its strings) imports from triton_dist that does not exist:
    ``import a.b as c`` (resolved as Python does, by attributes: ``triton_dist.ops.all_reduce`` is the function),
    ``from a.b import c``, ``importlib.import_module("a.b")``, and attributes read from a module bound by the last."""

    def module(name: str) -> object | str:
        try:
            return importlib.import_module(name)
        except ImportError as error:
            return f"{name} does not import ({error})"

    problems: list[str] = []
    handles: dict[str, object] = {}  # name -> module bound by importlib.import_module("triton_dist...")
    trees = _fragments(path.read_text())
    for inside, tree in trees:
        for node in ast.walk(tree):
            where = f"{path.relative_to(REPO)}: line {getattr(node, 'lineno', '?')}{inside}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] != "triton_dist":
                        continue
                    found = module(alias.name)
                    if isinstance(found, str):
                        problems.append(f"{where}: {found}")
                    elif alias.asname:
                        value = importlib.import_module("triton_dist")
                        for part in alias.name.split(".")[1:]:
                            value = getattr(value, part, None)
                        if value is not found:
                            problems.append(f"{where}: 'import {alias.name} as {alias.asname}' binds {value!r}")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("triton_dist"):
                found = module(node.module)
                if isinstance(found, str):
                    problems.append(f"{where}: {found}")
                    continue
                for alias in node.names:
                    if alias.name != "*" and not hasattr(found, alias.name):
                        if isinstance(module(f"{node.module}.{alias.name}"), str):
                            problems.append(f"{where}: {node.module} has no {alias.name}")
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value
                named = isinstance(call.func, ast.Attribute) and call.func.attr == "import_module"
                if named and call.args and isinstance(call.args[0], ast.Constant):
                    name = str(call.args[0].value)
                    if name.startswith("triton_dist"):
                        found = module(name)
                        if isinstance(found, str):
                            problems.append(f"{where}: {found}")
                        else:
                            handles.update({t.id: found for t in node.targets if isinstance(t, ast.Name)})
    for inside, tree in trees:  # a handle bound in one fragment (a case's setup) is used in another (its rounds)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in handles:
                found = handles[node.value.id]
                if not hasattr(found, node.attr):
                    where = f"{path.relative_to(REPO)}: line {node.lineno}{inside}"
                    problems.append(
                        f"{where}: {node.value.id} ({getattr(found, '__name__', found)}) has no {node.attr}"
                    )
    return problems


def test_the_scripts_import_only_names_that_exist():
    """The GPU checks, benchmarks, scripts and examples run only on GPU machines, so a name that moved when the ops
    became packages is found here, not after a GPU run (check_watchdog.py's LL case read ``_run`` from the
    all_reduce package, which has it only in ``op.py``)."""
    assert "test/gpu/check_watchdog.py" in IMPORT_CHECKED and "bench/all_reduce.py" in IMPORT_CHECKED
    problems = [problem for script in IMPORT_CHECKED for problem in _import_problems(REPO / script)]
    assert problems == []
