"""The child process that makes triton_dist.mlir calls for the fuzzer (so a segfault kills it, not the fuzzer).

Reads one request per line on stdin (JSON for IR cases, base64 pickle for garbage cases), writes one JSON reply
per line on stdout, and names each call on stderr (`fuzz-stage: ...`) before making it, so that the parent can
say which call crashed. Exits at end of input.
"""

from __future__ import annotations

import base64
import json
import pickle
import sys

from triton_dist import mlir

ALLOWED = (mlir.MLIRError, TypeError, ValueError, OSError)


def stage(name: str) -> None:
    sys.stderr.write(f"fuzz-stage: {name}\n")
    sys.stderr.flush()


def judge(exc: BaseException) -> str:
    """ "diagnostic" for an exception that explains the problem, the finding otherwise."""
    if isinstance(exc, mlir.MLIRError):
        if not exc.diagnostics or any(not d.message.strip() for d in exc.diagnostics):
            return "no diagnostic"
        return "diagnostic"
    if isinstance(exc, ALLOWED):
        return "diagnostic"
    return f"exception {type(exc).__name__}"


def run_ir(request: dict) -> dict:
    """parse (+ verify), each pipeline, and the translation of what the lowering pipelines produced."""
    stages: dict[str, str] = {}
    detail = ""
    lowered_for_translation: list[str] = []
    text = request["text"]
    try:
        stage("parse")
        module = mlir.parse(text, "fuzz.mlir")
        stages["parse"] = "ok"
    except BaseException as exc:  # noqa: BLE001
        stages["parse"] = judge(exc)
        return {"stages": stages, "detail": f"{type(exc).__name__}: {str(exc)[:500]}"}
    for pipeline in request["pipelines"]:
        name = f"run_pipeline({pipeline[:60]})"
        try:
            stage(name)
            lowered = mlir.run_pipeline(module, pipeline)
            stages[name] = "ok"
        except BaseException as exc:  # noqa: BLE001
            stages[name] = judge(exc)
            detail = f"{type(exc).__name__}: {str(exc)[:500]}"
            continue
        if "distributed." in text and "distributed." not in lowered and "func.func" not in lowered:
            tname = f"translate_to_llvmir(after {pipeline[:40]})"
            try:
                stage(tname)
                mlir.translate_to_llvmir(lowered)
                stages[tname] = "ok"
                lowered_for_translation.append(lowered)
            except BaseException as exc:  # noqa: BLE001
                stages[tname] = judge(exc)
                detail = f"{type(exc).__name__}: {str(exc)[:500]}"
    return {"stages": stages, "detail": detail, "lowered": lowered_for_translation}


def run_garbage(calls: list) -> dict:
    results: list = []
    stages: dict[str, str] = {}
    detail = ""
    for k, (func, args, kwargs) in enumerate(calls):
        args = tuple(
            results[int(a[1:])] if isinstance(a, str) and a[:1] == "$" and a[1:].isdigit() else a for a in args
        )
        name = f"{k}:{func}"
        try:
            stage(name)
            if func == "to_string":
                target = args[0]
                result = (
                    target.to_string(**kwargs)
                    if isinstance(target, mlir.Module)
                    else mlir.parse(target).to_string(**kwargs)
                )
            elif func == "native_parse":
                result = mlir._native().parse(*args)
            else:
                result = getattr(mlir, func)(*args, **kwargs)
            stages[name] = "ok"
        except BaseException as exc:  # noqa: BLE001
            result = None
            stages[name] = judge(exc)
            if stages[name] != "diagnostic":
                detail = f"{type(exc).__name__}: {str(exc)[:500]}"
        results.append(result)
    return {"stages": stages, "detail": detail}


def main() -> None:
    sys.setrecursionlimit(10000)
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
