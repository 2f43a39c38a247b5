"""The fuzzer in CI (tools/fuzz): triton-dist-opt, its passes and pipelines, mlir-translate and the triton_dist.mlir
bindings must end every case in success or a diagnostic, never a signal, an assertion, a timeout or a failure
without a diagnostic.

- the saved regression inputs (test/fuzz/regressions/) and the generated ones (GENERATED: too large to commit)
  through every stage, all IR inputs in one batch (one tool process per stage, one bindings worker);
- 500 IR cases (generated programs and mutated lit inputs) and 300 garbage cases for the bindings, seed 1.

Known-open findings (test/fuzz/known_open.json; test/fuzz/README.md says how an entry is written) are reported as
xfail with their reason; any other finding fails. The long mode is `python3 -m tools.fuzz --cases 10000 --size large`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tools.fuzz import oracle, run  # noqa: E402

from triton_dist import mlir  # noqa: E402

REGRESSIONS = REPO / "test" / "fuzz" / "regressions"
KNOWN = run.load_known()
KNOWN_BY_FILE = {name: entry for entry in KNOWN for name in entry.get("regressions", [])}

needs_opt = pytest.mark.skipif(
    not oracle.opt_path().exists(), reason=f"{oracle.opt_path()} is not built (run scripts/build.sh)"
)


def deep_scf_if(levels: int) -> str:
    """A function with `levels` nested scf.if regions. 5,000 levels overflowed the 8 MiB stack of the tool and of
    the bindings (upstream mlir-opt overflows from about 4,000) before both ran MLIR on a large-stack thread."""
    return "func.func @deep(%c: i1) {\n" + "scf.if %c {\n" * levels + "}\n" * levels + "  return\n}\n"


GENERATED: dict[str, Callable[[], str]] = {"deep-scf-if.mlir": lambda: deep_scf_if(5000)}
"""Regression inputs written at test time: name -> text (as if the file were in test/fuzz/regressions/)."""


def _ir_inputs() -> dict[str, Callable[[], str]]:
    inputs: dict[str, Callable[[], str]] = {path.name: path.read_text for path in sorted(REGRESSIONS.glob("*.mlir"))}
    assert not set(inputs) & set(GENERATED), "a generated input shadows a committed one"
    return {**inputs, **GENERATED}


def _params(names: list[str]):
    for name in names:
        entry = KNOWN_BY_FILE.get(name)
        marks = (
            [pytest.mark.xfail(reason=f"known open ({entry['id']}): {entry['summary']}", strict=False)] if entry else []
        )
        yield pytest.param(name, marks=marks, id=name)


@pytest.fixture(scope="module")
def bindings_worker():
    worker = oracle.BindingsWorker() if mlir.is_available() else None
    yield worker
    if worker is not None:
        worker.stop()


@pytest.fixture(scope="module")
def ir_outcomes(bindings_worker) -> dict[str, oracle.Outcome]:
    """Every IR regression input through every stage, as one batch: a finding reruns each input alone to name it."""
    inputs = _ir_inputs()
    outcomes = oracle.check_batch([make() for make in inputs.values()], bindings_worker, timeout=60)
    return dict(zip(inputs, outcomes, strict=True))


@needs_opt
@pytest.mark.parametrize("name", list(_params(list(_ir_inputs()))))
def test_regression_input(name: str, ir_outcomes: dict[str, oracle.Outcome]):
    outcome = ir_outcomes[name]
    problems = [f"{f.stage}: {f.symptom}: {f.detail[-300:]}" for f in outcome.findings]
    assert not problems, "\n".join(problems)
    assert outcome.stages.get("opt") in ("ok", "diagnostic", "done")
    if mlir.is_available():
        assert "bindings.parse" in outcome.stages, "the input went through the bindings"


@needs_opt
@pytest.mark.parametrize("name", list(_params([path.name for path in sorted(REGRESSIONS.glob("*.calls.json"))])))
def test_regression_calls(name: str, bindings_worker):
    if bindings_worker is None:
        pytest.skip("triton_dist._C._mlir is not built")
    calls = [tuple(call) for call in json.loads((REGRESSIONS / name).read_text())]
    _, findings = run.check_calls(calls, bindings_worker, timeout=60)
    problems = [f"{f['stage']}: {f['symptom']}: {f['detail'][-300:]}" for f in findings]
    assert not problems, "\n".join(problems)


def test_generated_inputs_are_what_they_stand_for():
    text = GENERATED["deep-scf-if.mlir"]()
    assert text.count("scf.if %c {") == 5000 and run.max_nesting(text) == 5001
    assert len(text.splitlines()) == 10_003


@needs_opt
def test_fuzz_cases(tmp_path: Path):
    summary_path = tmp_path / "fuzz.json"
    cmd = [
        sys.executable,
        "-m",
        "tools.fuzz",
        "--seed",
        "1",
        "--cases",
        "500",
        "--garbage",
        "300",
        "--jobs",
        "2",
        "--json",
        str(summary_path),
    ]
    if not mlir.is_available():
        cmd.append("--no-bindings")
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert summary_path.exists(), f"the fuzzer did not finish:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    summary = json.loads(summary_path.read_text())
    assert summary["ir_cases"] >= 500
    # Every case went through the tool: plain, each of our passes and the lowering pipelines.
    assert {"opt", "opt --convert-distributed-to-nvvm", "opt --convert-distributed-to-rocdl"} <= set(
        summary["tool_stages"]
    )
    assert sum(summary["ir_stages"]["opt"].values()) == summary["ir_cases"]
    new = summary["new_findings"]
    assert not new, "new fuzz findings (reproduce with --seed 1 --first <index> --cases 1):\n" + "\n\n".join(
        f"{f['case']} ({f['origin']}) {f['stage']}: {f['symptom']}\n{f['detail'][-600:]}\ninput:\n{f['input'][:1500]}"
        for f in new[:5]
    )
    if summary["known_open_hits"]:
        pytest.xfail(f"known-open findings hit (test/fuzz/known_open.json): {summary['known_open_hits']}")


# ----------------------------------------------------------------------------------------------------------------
# The oracle itself: what counts as a finding, and what the allow-list matches
# ----------------------------------------------------------------------------------------------------------------


def test_classify_tells_findings_from_diagnostics():
    assert oracle.classify(0, "") is None
    assert oracle.classify(1, "<stdin>:1:1: error: expected operation name") is None
    assert oracle.classify(-11, "") == "signal SIGSEGV"
    assert oracle.classify(-6, "") == "signal SIGABRT"
    assert oracle.classify(None, "") == "timeout"
    assert oracle.classify(1, "") == "no diagnostic"
    option_error = "triton-dist-opt: for the --tight-polls option: '-1' value invalid for uint argument!"
    assert oracle.classify(1, option_error) is None
    assert oracle.classify(1, "error: x\nLLVM ERROR: out of memory") == "fatal error"
    assert oracle.classify(1, "triton-dist-opt: Foo.cpp:12: Assertion `x' failed.") == "assertion"


def test_allow_list_matches_only_its_shape():
    known = [{"id": "k", "stage": "translate", "symptom": "SIGSEGV", "shape": "module_level_op"}]
    finding = {"stage": "bindings.translate_to_llvmir(after x)", "symptom": "signal SIGSEGV"}
    assert run.match_known(finding, "%r = distributed.get_rank\n", known) == "k"
    assert run.match_known(finding, "module {\n  %r = distributed.get_rank\n}\n", known) == "k"
    in_function = "func.func @f() -> i32 {\n  %r = distributed.get_rank\n  return %r : i32\n}\n"
    assert run.match_known(finding, in_function, known) is None
    assert run.match_known({**finding, "symptom": "timeout"}, "%r = distributed.get_rank\n", known) is None
    assert run.max_nesting("[" * 1200 + "]" * 1200) == 1200


def test_a_crash_is_a_finding():
    """A process killed by a signal is reported as such (not as a diagnostic)."""
    rc, _, err = oracle.run_tool(["python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], "", 10)
    assert oracle.classify(rc, err) == "signal SIGSEGV"


def test_a_binding_that_prints_is_a_finding():
    """The bindings worker captures fd 2 around each call: printing instead of raising is reported."""
    import os

    from tools.fuzz import bindings_worker

    stages: dict[str, str] = {}
    bindings_worker.attempt(stages, "quiet", lambda: 1)
    bindings_worker.attempt(stages, "prints", lambda: os.write(2, b"error: this belongs in the exception\n"))
    assert stages == {"quiet": "ok", "prints": "wrote to stderr"}
