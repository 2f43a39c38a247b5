"""Runs one input through every tool and classifies how each run ended.

A run may end in success or in a diagnostic ("error:" on stderr and a non-zero exit). Anything else is a finding:
a signal (segfault, abort), an LLVM assertion / fatal error / stack dump, a timeout, or a failure that says
nothing (a non-zero exit with an empty stderr; a command-line error such as "'-1' value invalid for uint argument"
is a diagnostic). For the Python bindings, the only exceptions allowed are `MLIRError` (with its diagnostics) and
`TypeError` / `ValueError` naming a bad argument; a dead worker process is a crash.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LLVM_BIN = Path(os.environ.get("LLVM_BIN", "/usr/lib/llvm-22/bin"))
CRASH_MARKERS = ("Assertion", "LLVM ERROR", "UNREACHABLE", "PLEASE submit a bug report", "Stack dump:")


def opt_path() -> Path:
    build = Path(os.environ.get("TRITON_DIST_BUILD_DIR", REPO / "build"))
    if not build.is_absolute():
        build = REPO / build
    return build / "bin" / "triton-dist-opt"


@dataclass
class Finding:
    """One run that ended neither in success nor in a diagnostic."""

    stage: str  # e.g. "opt --convert-distributed-to-nvvm", "mlir-translate", "bindings.translate_to_llvmir"
    symptom: str  # "signal SIGSEGV", "assertion", "timeout", "no diagnostic", "exception AttributeError"
    detail: str = ""

    def key(self) -> tuple[str, str]:
        return (self.stage, self.symptom)

    def to_json(self) -> dict:
        return {"stage": self.stage, "symptom": self.symptom, "detail": self.detail[-2000:]}


@dataclass
class Outcome:
    """How one input fared: each stage's end ("ok" / "diagnostic" / a finding) and the findings."""

    stages: dict[str, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)


def classify(returncode: int | None, stderr: str) -> str | None:
    """None for success or a diagnostic; otherwise the symptom."""
    if returncode is None:
        return "timeout"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    if any(marker in stderr for marker in CRASH_MARKERS):
        return "assertion" if "Assertion" in stderr or "UNREACHABLE" in stderr else "fatal error"
    if returncode != 0 and not stderr.strip():
        return "no diagnostic"
    return None


# A crashing LLVM tool symbolizes its stack trace with llvm-symbolizer: seconds per crash, for nothing we read.
TOOL_ENV = {**os.environ, "LLVM_DISABLE_SYMBOLIZATION": "1"}


def run_tool(args: list[str], text: str, timeout: float) -> tuple[int | None, str, str]:
    """Runs a tool with `text` on stdin: (returncode or None on timeout, stdout, stderr)."""
    try:
        proc = subprocess.run(
            args,
            input=text.encode("utf-8", "surrogatepass"),
            capture_output=True,
            timeout=timeout,
            check=False,
            env=TOOL_ENV,
        )
    except subprocess.TimeoutExpired:
        return None, "", ""
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


# ----------------------------------------------------------------------------------------------------------------
# The passes and pipelines of triton-dist-opt
# ----------------------------------------------------------------------------------------------------------------

OUR_NAME = re.compile(r"distributed|triton-dist|triton_dist")


@cache
def _help_entries() -> tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]:
    """(section, name, ((option, kind), ...)) of our passes and pipelines in `triton-dist-opt --help`."""
    proc = subprocess.run([str(opt_path()), "--help"], capture_output=True, text=True, check=False)
    entries: list[tuple[str, str, list[tuple[str, str]]]] = []
    section = None
    for line in proc.stdout.splitlines():
        stripped = line.strip()
        if stripped in ("Passes:", "Pass Pipelines:"):
            section = stripped
            continue
        if section is None:
            continue
        entry = re.match(r"^ {6}--([a-z0-9-]+)\s", line)
        option = re.match(r"^ {8}--([a-z0-9-]+)(=<(\w+)>)?\s", line)
        if entry:
            ours = OUR_NAME.search(entry.group(1)) or OUR_NAME.search(line[entry.end() :].lower())
            entries.append((section, entry.group(1), []) if ours else ("", "", []))
        elif option and entries and entries[-1][1]:
            entries[-1][2].append((option.group(1), option.group(3) or "bool"))
        elif re.match(r"^ {2}--", line):
            section = None
    return tuple((sec, name, tuple(opts)) for sec, name, opts in entries if name)


def discover_passes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(our passes, our named pipelines) as `triton-dist-opt --help` lists them."""
    entries = _help_entries()
    return (
        tuple(name for sec, name, _ in entries if sec == "Passes:"),
        tuple(name for sec, name, _ in entries if sec == "Pass Pipelines:"),
    )


# Values worth trying per option kind: edges and garbage (a bad value must be a diagnostic).
OPTION_VALUES = {
    "uint": ["0", "1", "4294967295", "-1"],
    "long": ["0", "-5", "9223372036854775807"],
    "string": ['""', "garbage", "amdgcn-amd-amdhsa", "nvptx64-nvidia-cuda", '"e-p:64:64"'],
    "bool": ["true", "false", "maybe"],
}


def pass_option_variants(name: str, seed: int) -> list[str]:
    """Option strings for pass or pipeline `name`: none, and (seeded) one or two of its options set to edge values."""
    import random  # noqa: PLC0415

    options = next((opts for _, n, opts in _help_entries() if n == name), ())
    rng = random.Random(f"{name}:{seed}")
    variants = [""]
    if options:
        picked = rng.sample(list(options), k=min(len(options), rng.randint(1, 2)))
        variants.append(" ".join(f"{opt}={rng.choice(OPTION_VALUES.get(kind, ['1']))}" for opt, kind in picked))
    return variants


# ----------------------------------------------------------------------------------------------------------------
# The bindings, in a subprocess
# ----------------------------------------------------------------------------------------------------------------


class BindingsWorker:
    """A child Python process that runs triton_dist.mlir calls; it dying or hanging is the case's finding."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.stderr_file = None

    def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = f"{REPO / 'python'}{os.pathsep}{REPO}" + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
        self.stderr_file = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools.fuzz.bindings_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            cwd=REPO,
            env=env,
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _stderr_tail(self) -> str:
        if self.stderr_file is None:
            return ""
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode("utf-8", "replace")[-3000:]

    def call(self, request: dict | bytes, timeout: float) -> tuple[dict | None, str | None, str]:
        """(reply, symptom, stderr): reply is None when the worker died (symptom says how) or hung.

        `request` is a JSON-able dict (an IR case) or a base64 pickle line (a garbage case)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.stderr_file.seek(0)
        self.stderr_file.truncate()
        try:
            payload = request if isinstance(request, bytes) else json.dumps(request).encode()
            self.proc.stdin.write(payload + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if line:
            return json.loads(line), None, ""
        if not ready:
            self.stop()
            return None, "timeout", self._stderr_tail()
        code = self.proc.wait()
        stderr = self._stderr_tail()
        self.proc = None
        symptom = classify(code, stderr) or f"worker exited ({code})"
        return None, symptom, stderr


# ----------------------------------------------------------------------------------------------------------------
# One input through everything
# ----------------------------------------------------------------------------------------------------------------


def lowering_pipelines() -> dict[str, str]:
    """target -> the full lowering pipeline (the named one when triton-dist-opt registers it)."""
    _, named = discover_passes()
    sys.path.insert(0, str(REPO / "python"))
    from triton_dist import mlir  # noqa: PLC0415  (the wrapper is the Python home of the pipeline)

    result = {}
    for target in ("nvvm", "rocdl"):
        mine = [p for p in named if target in p]
        result[target] = mine[0] if mine else mlir.lowering_pipeline(target)
    return result


SPLIT = "// -----"


def _run_batched(args: list[str], texts: list[str | None], stage: str, outcomes: list[Outcome], timeout: float) -> None:
    """Runs a tool on all texts at once (--split-input-file); on a finding, on each text alone to name the case.

    A batch that ends normally means every chunk ended in success or a diagnostic; the per-case result is then
    "done" (the bindings give each case's own ok / diagnostic).
    """
    live = [k for k, t in enumerate(texts) if t is not None]
    if not live:
        return
    joined = f"\n{SPLIT}\n".join(texts[k] for k in live)
    # The output is not read (each run's end is judged by its exit status and stderr): the tools print it to
    # /dev/null, which still runs the printer, instead of piping it to this process.
    rc, _, err = run_tool([*args, "--split-input-file", "-o", os.devnull, "-"], joined, timeout * len(live))
    # A batch that fails with some diagnostic counts as ending in diagnostics: one chunk failing silently beside a
    # chunk that reports an error is not told apart here (--batch 1 does).
    batch_symptom = classify(rc, err)
    if batch_symptom is None:
        for k in live:
            outcomes[k].stages[stage] = "done"
        return
    batch_err = err
    reproduced = False
    for k in live:
        rc, _, err = run_tool([*args, "-o", os.devnull, "-"], texts[k], timeout)
        symptom = classify(rc, err)
        if symptom:
            reproduced = True
            outcomes[k].findings.append(Finding(stage, symptom, err))
            outcomes[k].stages[stage] = symptom
        else:
            outcomes[k].stages[stage] = "ok" if rc == 0 else "diagnostic"
    if not reproduced:
        # State leaking from one chunk into the next: the batch is the reproducer (see the first case's input).
        only_batched = Finding(stage, f"{batch_symptom} (only as a batch of {len(live)})", batch_err)
        outcomes[live[0]].findings.append(only_batched)


def tool_runs(options_seed: int = 0) -> list[tuple[str, list[str], str]]:
    """(stage, triton-dist-opt arguments, the same as a pipeline for the bindings): plain, each pass and named
    pipeline (without options, or with one or two of its options at edge values, by the seed: each pass draws its
    own, so that every pass gets options for about half the seeds, whatever the seeds' spacing), and the lowering
    pipeline of each target where triton-dist-opt has no named one."""
    import random  # noqa: PLC0415

    passes, named = discover_passes()
    runs: list[tuple[str, list[str], str]] = [("opt", [], "")]
    for p in (*passes, *named):
        variants = pass_option_variants(p, options_seed)
        opts = variants[random.Random(f"{p}:{options_seed}:variant").randrange(len(variants))]
        runs.append((f"opt --{p}", [f"--{p}" + (f"={opts}" if opts else "")], p + (f"{{{opts}}}" if opts else "")))
    for target, pipeline in lowering_pipelines().items():
        if pipeline not in named:
            runs.append((f"opt lowering({target})", [f"--pass-pipeline={pipeline}"], pipeline))
    return runs


def check_batch(
    texts: list[str], worker: BindingsWorker | None, timeout: float = 20.0, options_seed: int = 0
) -> list[Outcome]:
    """Runs each text through triton-dist-opt (plain, each pass, each pipeline), the bindings (parse, each
    pipeline, translate what lowered) and mlir-translate (what the bindings lowered)."""
    outcomes = [Outcome() for _ in texts]
    texts = [t.replace(SPLIT, "// ----") for t in texts]
    opt = str(opt_path())
    runs = tool_runs(options_seed)
    for stage, args, _ in runs:
        _run_batched([opt, *args], texts, stage, outcomes, timeout)

    lowered_texts: list[str] = []
    lowered_owners: list[Outcome] = []
    if worker is not None:
        pipelines = [pipeline for _, _, pipeline in runs if pipeline]
        for k, text in enumerate(texts):
            reply, symptom, err = worker.call({"kind": "ir", "text": text, "pipelines": pipelines}, timeout * 3)
            if reply is None:
                # The worker names each call on stderr before making it: the last name is the one that crashed.
                called = re.findall(r"^fuzz-stage: (.*)$", err, re.M)
                stage = f"bindings.{called[-1]}" if called else "bindings"
                outcomes[k].findings.append(Finding(stage, symptom or "crash", err))
                outcomes[k].stages[stage] = symptom or "crash"
                continue
            for stage, result in reply["stages"].items():
                outcomes[k].stages[f"bindings.{stage}"] = result
                if result not in ("ok", "diagnostic"):
                    outcomes[k].findings.append(Finding(f"bindings.{stage}", result, reply.get("detail", "")))
            for lowered in reply.get("lowered", []):
                lowered_texts.append(lowered)
                lowered_owners.append(outcomes[k])
    _run_batched(
        [str(LLVM_BIN / "mlir-translate"), "--mlir-to-llvmir"], lowered_texts, "mlir-translate", lowered_owners, timeout
    )
    return outcomes


def check_input(text: str, worker: BindingsWorker | None, timeout: float = 20.0, options_seed: int = 0) -> Outcome:
    """One text through every stage (see check_batch)."""
    return check_batch([text], worker, timeout, options_seed)[0]
