"""Garbage for the triton_dist.mlir bindings: wrong types, bad text, bad pipelines, odd call sequences.

A case is a short list of calls `(function, args, kwargs)`; an argument `"$k"` stands for the result of call k (a
Module or IR text). The list is plain data, so the parent can print the case that killed a worker.
"""

from __future__ import annotations

import random

from .mutate import lit_inputs

GOOD_IR = (
    "func.func @f(%flags: !llvm.ptr<1>, %n: i32) -> i32 {\n"
    "  %t = distributed.wait %flags, %n, %n scope(sys) semantic(acquire) : !llvm.ptr<1>, i32\n"
    "  %r = distributed.get_rank\n"
    "  %v = distributed.consume_token %r, %t : i32\n"
    "  distributed.notify %flags, %r, %n sig_op(add) comm_scope(intra_node) : !llvm.ptr<1>, i32\n"
    "  return %v : i32\n"
    "}\n"
)

TEXTS = [
    "",
    " ",
    "module {}",
    "module {",
    "}",
    "\x00",
    "module {\x00}",
    "\ufeffmodule {}",
    "\ud800",
    "module attributes {llvm.target_triple = 42 : i32} {}",
    '"builtin.module"() ({}) : () -> ()',
    '"distributed.wait"() : () -> ()',
    "%r = distributed.get_rank",
    "distributed.get_rank",
    "func.func @f() {\n  %r = distributed.get_rank\n  return\n}\n" * 2,
    GOOD_IR,
]

PIPELINES = [
    "",
    "(",
    ")",
    "builtin.module(",
    "builtin.module()",
    "builtin.module(builtin.module(convert-distributed-to-nvvm))",
    "func.func(convert-distributed-to-nvvm)",
    "convert-distributed-to-nvvm{tight-polls=-1}",
    "convert-distributed-to-nvvm{max-sleep-ns=abc}",
    "convert-distributed-to-nvvm{triple=}",
    "convert-distributed-to-nvvm{bogus=1}",
    'convert-distributed-to-rocdl{data-layout="e-p:64:64" triple=amdgcn-amd-amdhsa}',
    "convert-distributed-to-nvvm,convert-distributed-to-rocdl",
    "convert-distributed-to-nvvm,convert-distributed-to-nvvm",
    "no-such-pass",
    "canonicalize{max-iterations=-5}",
    "convert-scf-to-cf,convert-distributed-to-nvvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,"
    "reconcile-unrealized-casts",
    "convert-distributed-to-nvvm" * 50,
    "convert-distributed-to-nvvm{" + "x" * 5000 + "}",
]

WRONG_TYPES = [None, 0, -1, 2**70, 1.5, b"module {}", bytearray(b"x"), ["module {}"], {"a": 1}, True, object]


def nested(rng: random.Random) -> str:
    depth = rng.choice([100, 1000, 5000, 20000, 100000])
    kind = rng.choice(["brackets", "modules", "ifs", "attr_dict"])
    if kind == "brackets":
        return "module attributes {a = " + "[" * depth + "]" * depth + "} {}"
    if kind == "modules":
        return "module {\n" * depth + "}\n" * depth
    if kind == "attr_dict":
        return "module attributes {a = " + "{b = " * depth + "1" + "}" * depth + "} {}"
    return "func.func @f(%c: i1) {\n" + "scf.if %c {\n" * depth + "}\n" * depth + "  return\n}\n"


def text(rng: random.Random) -> object:
    r = rng.random()
    if r < 0.08:
        return rng.choice(WRONG_TYPES)
    if r < 0.16:
        return nested(rng)
    if r < 0.45:
        return rng.choice(TEXTS)
    if r < 0.6:
        return "".join(
            chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x3000)])) for _ in range(rng.randint(0, 200))
        )
    base = rng.choice(lit_inputs() + (GOOD_IR,))
    at = rng.randrange(len(base) + 1)
    return base[:at] + rng.choice(["", "}", "{", "%", "\x00", "!distributed.token", "<<<"]) + base[at:]


def pipeline(rng: random.Random) -> object:
    r = rng.random()
    if r < 0.08:
        return rng.choice(WRONG_TYPES)
    return rng.choice(PIPELINES)


def garbage_case(rng: random.Random) -> list[tuple[str, tuple, dict]]:
    """Two to five calls into triton_dist.mlir."""
    calls: list[tuple[str, tuple, dict]] = []
    for _ in range(rng.randint(2, 5)):
        have = [f"${k}" for k in range(len(calls))]
        ref = rng.choice(have) if have and rng.random() < 0.6 else text(rng)
        kind = rng.choice(
            [
                "parse",
                "parse",
                "parse_noverify",
                "verify",
                "run_pipeline",
                "run_pipeline",
                "translate_to_llvmir",
                "translate_to_llvmir",
                "parse_file",
                "lowering_pipeline",
                "to_string",
                "native_parse",
            ]
        )
        if kind == "parse":
            calls.append(("parse", (text(rng),), {}))
        elif kind == "parse_noverify":
            calls.append(
                ("parse", (text(rng),), {"verify": False, "source_name": rng.choice(["", "x.mlir", "\x00", "\u00e9"])})
            )
        elif kind == "verify":
            calls.append(("verify", (ref,), {}))
        elif kind == "run_pipeline":
            calls.append(("run_pipeline", (ref, pipeline(rng)), {}))
        elif kind == "translate_to_llvmir":
            calls.append(("translate_to_llvmir", (ref,), {}))
        elif kind == "parse_file":
            calls.append(("parse_file", (rng.choice(["/nonexistent.mlir", "/", "/dev/null", "", None, 3]),), {}))
        elif kind == "lowering_pipeline":
            calls.append(("lowering_pipeline", (rng.choice(["nvvm", "rocdl", "cuda", "", None, 1]),), {}))
        elif kind == "to_string":
            calls.append(("to_string", (ref,), {"generic": rng.choice([True, False, "yes", None])}))
        else:
            calls.append(("native_parse", (text(rng), rng.choice(["s", None, 1]), rng.choice([True, False, "x"])), {}))
    return calls
