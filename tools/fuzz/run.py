"""The fuzzer's driver: cases from a seed, a process pool, the findings against the allow-list of known ones.

    python3 -m tools.fuzz                          # the CI size: 500 IR cases + 300 binding-garbage cases
    python3 -m tools.fuzz --cases 10000 --garbage 10000 --size large   # the long mode
    python3 -m tools.fuzz --only-ir FILE.mlir      # one input through every stage
    python3 -m tools.fuzz --minimize FILE.mlir     # shrink an input that shows a finding, keeping the finding

Case k of seed s is the same on every machine (its RNG is seeded with "s:k"), so a failing case is reproduced
with `--seed s --first k --cases 1`. Exit status: 0 when every finding is in the allow-list
(test/fuzz/known_open.json), 1 otherwise.
"""

from __future__ import annotations

import argparse
import base64
import json
import pickle
import random
import re
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from . import oracle
from .garbage import garbage_case
from .generate import generate_program
from .mutate import mutate_lit_input

REPO = Path(__file__).resolve().parents[2]
KNOWN_OPEN = REPO / "test" / "fuzz" / "known_open.json"

_worker: oracle.BindingsWorker | None = None
_known: list[dict] = []
INPUT_KEPT = 20_000  # characters of a failing input kept in the summary (the case number reproduces all of it)


def _init_pool(bindings: bool = True, known: list[dict] | None = None) -> None:
    global _worker, _known
    _worker = oracle.BindingsWorker() if bindings else None
    _known = known or []


def _annotate(record: dict) -> dict:
    """Matches each finding against the allow-list on the whole input (in the pool worker), then trims the input."""
    for finding in record["findings"]:
        finding["known"] = match_known(finding, record["input"], _known)
    if record["input"] is not None:
        record["input"] = record["input"][:INPUT_KEPT]
    return record


def make_ir_case(seed: int, index: int, size: str) -> tuple[str, str]:
    """(origin, IR text) of IR case `index`."""
    rng = random.Random(f"{seed}:{index}")
    if rng.random() < 0.5:
        return "generated", generate_program(rng, size)
    return "mutated", mutate_lit_input(rng)


def make_garbage_case(seed: int, index: int) -> list:
    return garbage_case(random.Random(f"{seed}:garbage:{index}"))


def run_ir_cases(args: tuple[int, list[int], str, float]) -> list[dict]:
    """A batch of IR cases (the tools take the batch in one process: --split-input-file)."""
    seed, indices, size, timeout = args
    cases = [make_ir_case(seed, k, size) for k in indices]
    outcomes = oracle.check_batch([text for _, text in cases], _worker, timeout=timeout, options_seed=indices[0])
    return [
        _annotate(
            {
                "kind": "ir",
                "index": index,
                "origin": origin,
                "stages": outcome.stages,
                "findings": [f.to_json() for f in outcome.findings],
                "input": text if outcome.findings else None,
            }
        )
        for index, (origin, text), outcome in zip(indices, cases, outcomes, strict=True)
    ]


def check_calls(calls: list, worker: oracle.BindingsWorker, timeout: float) -> tuple[dict[str, str], list[dict]]:
    """Makes the calls in the bindings worker: (stage results, findings)."""
    reply, symptom, err = worker.call(base64.b64encode(pickle.dumps(calls)), timeout)
    findings = []
    stages: dict[str, str] = {}
    if reply is None:
        called = re.findall(r"^fuzz-stage: (.*)$", err, re.M)
        findings.append(
            {
                "stage": f"bindings.{called[-1].split(':', 1)[1] if called else '?'}",
                "symptom": symptom or "crash",
                "detail": err[-2000:],
            }
        )
    else:
        stages = reply["stages"]
        for name, result in stages.items():
            if result not in ("ok", "diagnostic"):
                findings.append(
                    {"stage": f"bindings.{name.split(':', 1)[1]}", "symptom": result, "detail": reply.get("detail", "")}
                )
    return stages, findings


def run_garbage_case(args: tuple[int, int, float]) -> dict:
    seed, index, timeout = args
    calls = make_garbage_case(seed, index)
    if _worker is None:
        return {"kind": "garbage", "index": index, "origin": "garbage", "stages": {}, "findings": [], "input": None}
    stages, findings = check_calls(calls, _worker, timeout)
    return _annotate(
        {
            "kind": "garbage",
            "index": index,
            "origin": "garbage",
            "stages": stages,
            "findings": findings,
            "input": repr(calls) if findings else None,
        }
    )


# ----------------------------------------------------------------------------------------------------------------
# The allow-list
# ----------------------------------------------------------------------------------------------------------------


def load_known(path: Path = KNOWN_OPEN) -> list[dict]:
    """Known-open findings: {id, summary, stage, symptom, input (regexes), regression (a file under test/fuzz)}."""
    if not path.exists():
        return []
    return json.loads(path.read_text(encoding="utf-8"))


def has_module_level_op(text: str) -> bool:
    """Whether an op other than a function, a module or a global sits directly in a module (or at the top)."""
    openers: list[str] = []
    for raw in text.replace("\\n", "\n").splitlines():
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        in_module = not openers or openers[-1].startswith("module")
        if (
            in_module
            and re.match(r"(%[\w#:]+ = )?(distributed|llvm|arith)\.", line)
            and not line.startswith(("llvm.func", "llvm.mlir.global"))
        ):
            return True
        for _ in range(line.count("}")):
            if openers:
                openers.pop()
        if line.endswith("{"):
            openers.append(re.sub(r"^[%\w#:, ]+= ", "", line))
    return False


def max_nesting(text: str) -> int:
    """The deepest bracket nesting ({, [, () in the text."""
    depth = deepest = 0
    for ch in text:
        if ch in "{[(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}])":
            depth -= 1
    return deepest


SHAPES = {
    "module_level_op": has_module_level_op,
    "deep_nesting": lambda text: max_nesting(text) >= 1000,
}


def match_known(finding: dict, text: str, known: list[dict]) -> str | None:
    """The id of the known-open finding this one is an instance of, if any.

    An entry matches when its `stage` and `symptom` regexes match the finding's, its `input` regex (if any) matches
    the input and its `shape` (if any, a name in SHAPES) holds for the input.
    """
    for entry in known:
        if (
            re.search(entry["stage"], finding["stage"])
            and re.search(entry["symptom"], finding["symptom"])
            and re.search(entry.get("input", ""), text or "", re.M | re.S)
            and (not entry.get("shape") or SHAPES[entry["shape"]](text or ""))
        ):
            return entry["id"]
    return None


# ----------------------------------------------------------------------------------------------------------------
# Running a batch
# ----------------------------------------------------------------------------------------------------------------


def run_batch(
    seed: int,
    cases: int,
    garbage: int,
    first: int = 0,
    size: str = "small",
    jobs: int = 2,
    timeout: float = 20.0,
    known: list[dict] | None = None,
    progress: bool = False,
    batch: int = 16,
    bindings: bool = True,
) -> dict:
    """Runs the cases; returns the summary (counts, stage outcomes, findings known and new)."""
    known = load_known() if known is None else known
    started = time.monotonic()
    results: list[dict] = []
    with ProcessPoolExecutor(max_workers=jobs, initializer=_init_pool, initargs=(bindings, known)) as pool:
        indices = list(range(first, first + cases))
        work = [
            pool.submit(run_ir_cases, (seed, indices[k : k + batch], size, timeout))
            for k in range(0, len(indices), batch)
        ]
        work += [pool.submit(run_garbage_case, (seed, k, timeout)) for k in range(first, first + garbage)]
        for n, fut in enumerate(work, 1):
            result = fut.result()
            results += result if isinstance(result, list) else [result]
            if progress and n % 100 == 0:
                print(
                    f"  {len(results)}/{cases + garbage} cases, {time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    outcomes: Counter = Counter()
    per_stage: dict[str, Counter] = {}
    stage_runs = 0
    new: list[dict] = []
    known_hits: Counter = Counter()
    for r in results:
        stage_runs += len(r["stages"])
        for stage, result in r["stages"].items():
            end = result if result in ("ok", "diagnostic", "done") else "finding"
            outcomes[end] += 1
            if r["kind"] == "ir":
                per_stage.setdefault(stage, Counter())[end] += 1
        for f in r["findings"]:
            kid = f.get("known")
            if kid:
                known_hits[kid] += 1
            else:
                new.append(
                    {"case": f"{r['kind']}:{r['index']}", "origin": r["origin"], **f, "input": r["input"][:20000]}
                )
    return {
        "seed": seed,
        "first": first,
        "ir_cases": cases,
        "garbage_cases": garbage,
        "size": size,
        "bindings": bindings,
        "tool_stages": [stage for stage, _, _ in oracle.tool_runs()],
        "seconds": round(time.monotonic() - started, 1),
        "stage_runs": stage_runs,
        "stage_outcomes": dict(outcomes),
        "ir_stages": {stage: dict(c) for stage, c in sorted(per_stage.items())},
        "known_open_hits": dict(known_hits),
        "new_findings": new,
    }


def minimize(text: str, stage: str, symptom: str, timeout: float = 20.0) -> str:
    """Line-based delta debugging: the smallest set of lines that still shows (stage, symptom)."""
    worker = oracle.BindingsWorker()

    def shows(candidate: str) -> bool:
        out = oracle.check_input(candidate, worker, timeout=timeout)
        return any(f.stage == stage and f.symptom == symptom for f in out.findings)

    lines = text.splitlines()
    chunk = max(1, len(lines) // 2)
    while chunk >= 1:
        k = 0
        changed = False
        while k < len(lines):
            candidate = lines[:k] + lines[k + chunk :]
            if candidate and shows("\n".join(candidate) + "\n"):
                lines = candidate
                changed = True
            else:
                k += chunk
        if not changed:
            chunk //= 2
    worker.stop()
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m tools.fuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=500, help="IR cases (generated and mutated lit inputs)")
    parser.add_argument("--garbage", type=int, default=None, help="binding-garbage cases (default: 300, or --cases)")
    parser.add_argument("--first", type=int, default=0, help="index of the first case")
    parser.add_argument("--size", choices=["small", "large"], default="small")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per tool run (per case in a batch)")
    parser.add_argument(
        "--batch",
        type=int,
        default=16,
        help="IR cases per tool process (--split-input-file; each batch draws its pass options)",
    )
    parser.add_argument("--json", type=Path, help="write the summary here")
    parser.add_argument("--no-bindings", action="store_true", help="leave out the triton_dist.mlir bindings")
    parser.add_argument("--only-ir", type=Path, help="run one input file through every stage and print the stages")
    parser.add_argument("--minimize", type=Path, help="shrink this input, keeping its first finding")
    args = parser.parse_args(argv)

    if args.only_ir or args.minimize:
        path = args.only_ir or args.minimize
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        worker = oracle.BindingsWorker()
        out = oracle.check_input(text, worker, timeout=args.timeout)
        worker.stop()
        for stage, result in out.stages.items():
            print(f"{result:>16}  {stage}")
        if args.minimize and out.findings:
            f = out.findings[0]
            print(f"minimizing for ({f.stage}, {f.symptom})", file=sys.stderr)
            print(minimize(text, f.stage, f.symptom, args.timeout))
        return 1 if out.findings else 0

    garbage = args.garbage if args.garbage is not None else (300 if args.cases <= 500 else args.cases)
    summary = run_batch(
        args.seed,
        args.cases,
        garbage,
        args.first,
        args.size,
        args.jobs,
        args.timeout,
        progress=True,
        batch=args.batch,
        bindings=not args.no_bindings,
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    shown = {k: v for k, v in summary.items() if k != "new_findings"}
    print(json.dumps(shown, indent=1))
    by_key = Counter((f["stage"], f["symptom"]) for f in summary["new_findings"])
    for (stage, symptom), count in by_key.most_common():
        example = next(f for f in summary["new_findings"] if (f["stage"], f["symptom"]) == (stage, symptom))
        print(f"NEW FINDING x{count}: {stage}: {symptom} (e.g. case {example['case']}, {example['origin']})")
    return 1 if summary["new_findings"] else 0
