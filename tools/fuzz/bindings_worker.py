"""The child process that makes triton_dist.mlir calls for the fuzzer (so a segfault kills it, not the fuzzer).

Reads one request per line on stdin (JSON for IR cases, base64 pickle for garbage cases), writes one JSON reply
per line on stdout, and names each call on the worker's stderr (`fuzz-stage: ...`) before making it, so that the
parent can say which call crashed (faulthandler's traceback goes there too). While a call runs, file descriptor 2
points to a capture file instead: a binding that prints (a diagnostic that should have been in the exception) is a
finding, "wrote to stderr". Exits at end of input.
"""

from __future__ import annotations

import base64
import faulthandler
import fcntl
import json
import os
import pickle
import sys
import tempfile
import warnings

from triton_dist import mlir

ALLOWED = (mlir.MLIRError, TypeError, ValueError, OSError)

# The worker's own stderr (the parent reads it), kept apart from fd 2, which each call's capture takes over. Both
# live at high descriptor numbers, so that garbage which opens a small integer as a descriptor (parse_file(3) did, F6)
# cannot close them.
_REPORT = os.fdopen(fcntl.fcntl(2, fcntl.F_DUPFD, 200), "w", buffering=1)
_CAPTURE_FILE = tempfile.TemporaryFile()
_CAPTURE = os.fdopen(fcntl.fcntl(_CAPTURE_FILE.fileno(), fcntl.F_DUPFD, 201), "w+b")
_CAPTURE_FILE.close()


def stage(name: str) -> None:
    _REPORT.write(f"fuzz-stage: {name}\n")
    _REPORT.flush()


class Captured:
    """Points fd 2 at the capture file during a call; `text` is what the call wrote there."""

    def __enter__(self) -> Captured:
        sys.stderr.flush()
        _CAPTURE.seek(0)
        _CAPTURE.truncate()
        self.saved = fcntl.fcntl(2, fcntl.F_DUPFD, 202)
        os.dup2(_CAPTURE.fileno(), 2)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        _CAPTURE.seek(0)
        self.text = _CAPTURE.read().decode("utf-8", "replace")


def judge_output(result: str, captured: Captured) -> str:
    """A call that ended well but printed something is a finding."""
    if result in ("ok", "diagnostic") and captured.text.strip():
        return "wrote to stderr"
    return result


def judge(exc: BaseException) -> str:
    """ "diagnostic" for an exception that explains the problem, the finding otherwise."""
    if isinstance(exc, mlir.MLIRError):
        if not exc.diagnostics or any(not d.message.strip() for d in exc.diagnostics):
            return "no diagnostic"
        return "diagnostic"
    if isinstance(exc, ALLOWED):
        return "diagnostic"
    return f"exception {type(exc).__name__}"


def attempt(stages: dict[str, str], name: str, fn) -> tuple[object, str]:
    """Makes one call under its stage name with fd 2 captured: (its value or None, the detail of a bad end)."""
    stage(name)
    value, detail = None, ""
    with Captured() as captured:
        try:
            value = fn()
            result = "ok"
        except BaseException as exc:  # noqa: BLE001 (every exception is judged)
            result = judge(exc)
            detail = f"{type(exc).__name__}: {str(exc)[:500]}"
    stages[name] = judge_output(result, captured)
    if stages[name] == "wrote to stderr":
        detail = f"printed: {captured.text[:500]}"
    return value, detail if stages[name] not in ("ok", "diagnostic") else ""


def run_ir(request: dict) -> dict:
    """parse (+ verify), each pipeline, and the translation of what the lowering pipelines produced."""
    stages: dict[str, str] = {}
    details: list[str] = []
    lowered_for_translation: list[str] = []
    text = request["text"]
    module, detail = attempt(stages, "parse", lambda: mlir.parse(text, "fuzz.mlir"))
    details.append(detail)
    if module is not None:
        for pipeline in request["pipelines"]:
            lowered, detail = attempt(
                stages, f"run_pipeline({pipeline[:60]})", lambda p=pipeline: mlir.run_pipeline(module, p)
            )
            details.append(detail)
            if lowered is None or "distributed." not in text or "distributed." in lowered or "func.func" in lowered:
                continue
            name = f"translate_to_llvmir(after {pipeline[:40]})"
            translated, detail = attempt(stages, name, lambda lowered=lowered: mlir.translate_to_llvmir(lowered))
            details.append(detail)
            if translated is not None:
                lowered_for_translation.append(lowered)
    return {"stages": stages, "detail": "\n".join(d for d in details if d), "lowered": lowered_for_translation}


def run_garbage(calls: list) -> dict:
    results: list = []
    stages: dict[str, str] = {}
    details: list[str] = []

    def make(func: str, args: tuple, kwargs: dict) -> object:
        if func == "to_string":
            target = args[0]
            module = target if isinstance(target, mlir.Module) else mlir.parse(target)
            return module.to_string(**kwargs)
        if func == "native_parse":
            return mlir._native().parse(*args)
        return getattr(mlir, func)(*args, **kwargs)

    for k, (func, args, kwargs) in enumerate(calls):
        args = tuple(
            results[int(a[1:])] if isinstance(a, str) and a[:1] == "$" and a[1:].isdigit() else a for a in args
        )
        value, detail = attempt(stages, f"{k}:{func}", lambda f=func, a=args, kw=kwargs: make(f, a, kw))
        details.append(detail)
        results.append(value)
    return {"stages": stages, "detail": "\n".join(d for d in details if d)}


def main() -> None:
    sys.setrecursionlimit(10000)
    faulthandler.enable(file=_REPORT)  # a crash's traceback goes to the parent, not to the capture file
    warnings.simplefilter("ignore")  # MLIRWarning is the bindings' documented channel for warnings
    for line in sys.stdin.buffer:
        line = line.strip()
        if not line:
            continue
        if line.startswith(b"{"):
            reply = run_ir(json.loads(line))
        else:
            reply = run_garbage(pickle.loads(base64.b64decode(line)))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
