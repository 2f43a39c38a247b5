"""Mutations of the lit inputs: the test/**/*.mlir files, split at `// -----`, with their comments dropped.

Each mutation keeps most of a real input and breaks or moves one thing: an attribute value, a type, an integer, a
line (deleted, duplicated, hoisted to the module, spliced in from another input), a region wrapped around some
lines, a module wrapped around everything, or a few bytes of garbage.
"""

from __future__ import annotations

import random
import re
from functools import cache
from pathlib import Path

from .generate import BAD_TYPES, BAD_WORDS, CMPS, COMM_SCOPES, INTERESTING_INTS, SCOPES, SEMANTICS, SIG_OPS, TRIPLES

REPO = Path(__file__).resolve().parents[2]

KEYWORDS = {
    "scope": SCOPES,
    "semantic": SEMANTICS,
    "sig_op": SIG_OPS,
    "comm_scope": COMM_SCOPES,
    "cmp": CMPS,
    "axis": ["world", "local", "node", "mesh", "-1", "0", "2147483648"],
}
TYPES = ["i32", "i64", "!llvm.ptr<1>", "!llvm.ptr", "!distributed.token", "f32", "index"]
TYPE_RE = re.compile(
    r"!llvm\.ptr<\d+>|!llvm\.ptr\b|!distributed\.token|\bi(?:1|8|16|32|64)\b|\bf(?:16|32|64)\b|\bindex\b"
)
INT_RE = re.compile(r"(?<![%#@\w.^])-?\d+\b")
KEYWORD_RE = re.compile(r"\b(" + "|".join(KEYWORDS) + r")\((\w*)\)")


@cache
def lit_inputs(root: str = str(REPO / "test")) -> tuple[str, ...]:
    """Every split of every lit .mlir input (not the fuzz regressions), without comment lines."""
    chunks = []
    for path in sorted(Path(root).rglob("*.mlir")):
        if "fuzz" in path.parts:
            continue
        for chunk in path.read_text(encoding="utf-8", errors="replace").split("// -----"):
            lines = [ln for ln in chunk.splitlines() if ln.strip() and not ln.lstrip().startswith("//")]
            if lines:
                chunks.append("\n".join(lines) + "\n")
    return tuple(chunks)


def _replace_one(rng: random.Random, text: str, regex: re.Pattern, make) -> str:
    matches = list(regex.finditer(text))
    if not matches:
        return text
    m = rng.choice(matches)
    return text[: m.start()] + make(m) + text[m.end() :]


def mutate_keyword(rng: random.Random, text: str) -> str:
    def make(m: re.Match) -> str:
        key = m.group(1)
        value = rng.choice(BAD_WORDS) if rng.random() < 0.3 else rng.choice(KEYWORDS[key])
        return f"{key}({value})"

    return _replace_one(rng, text, KEYWORD_RE, make)


def mutate_type(rng: random.Random, text: str) -> str:
    return _replace_one(rng, text, TYPE_RE, lambda m: rng.choice(TYPES + BAD_TYPES))


def mutate_int(rng: random.Random, text: str) -> str:
    return _replace_one(rng, text, INT_RE, lambda m: str(rng.choice(INTERESTING_INTS)))


def mutate_lines(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    if not lines:
        return text
    i = rng.randrange(len(lines))
    kind = rng.choice(["delete", "duplicate", "swap", "hoist"])
    if kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        # An op moved out of its function to the module (or to the top of the file).
        ops = [k for k, ln in enumerate(lines) if "distributed." in ln and "func.func" not in ln]
        if ops:
            k = rng.choice(ops)
            lines.insert(0, lines.pop(k).strip())
    return "\n".join(lines) + "\n"


def wrap_region(rng: random.Random, text: str) -> str:
    """Wraps a run of lines of a function body in an scf region (breaking dominance now and then: fine)."""
    lines = text.splitlines()
    body = [k for k, ln in enumerate(lines) if ln.startswith("  ") and "func.func" not in ln and "return" not in ln]
    if not body:
        return text
    start = rng.choice(body)
    end = min(len(lines), start + rng.randint(1, 4))
    opener, closer = rng.choice(
        [
            ("scf.execute_region {", "  scf.yield\n}"),
            ("scf.if %cond_fuzz {", "}"),
            ("scf.for %iv_fuzz = %lb_fuzz to %ub_fuzz step %lb_fuzz {", "}"),
        ]
    )
    header = []
    if "%cond_fuzz" in opener:
        header = ["  %cond_fuzz = arith.constant true"]
    if "%lb_fuzz" in opener:
        header = ["  %lb_fuzz = arith.constant 1 : index", "  %ub_fuzz = arith.constant 4 : index"]
    inner = ["  " + ln for ln in lines[start:end]]
    return (
        "\n".join(
            lines[:start] + header + ["  " + opener] + inner + ["  " + c for c in closer.split("\n")] + lines[end:]
        )
        + "\n"
    )


def wrap_module(rng: random.Random, text: str) -> str:
    attrs = rng.choice(
        [
            "",
            f' attributes {{llvm.target_triple = "{rng.choice(TRIPLES)}"}}',
            " attributes {llvm.target_triple = 42 : i32}",
            ' attributes {llvm.data_layout = "e-p:64:64"}',
            " @named",
        ]
    )
    depth = rng.choice([1, 1, 2, 3])
    return "module" + attrs + " {\n" * 1 + ("module {\n" * (depth - 1)) + text + "}\n" * depth


def splice(rng: random.Random, text: str) -> str:
    other = rng.choice(lit_inputs()).splitlines()
    lines = text.splitlines()
    if not other:
        return text
    a = rng.randrange(len(other))
    piece = other[a : a + rng.randint(1, 5)]
    at = rng.randrange(len(lines) + 1)
    return "\n".join(lines[:at] + piece + lines[at:]) + "\n"


def garbage(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text) + 1)
    kind = rng.choice(["truncate", "byte", "brackets", "unicode", "nul"])
    if kind == "truncate":
        return text[:at]
    if kind == "byte":
        return text[:at] + rng.choice("{}()<>[]%@^#:,=\"'\\!") + text[at:]
    if kind == "brackets":
        return text[:at] + rng.choice(["[" * 50, "{" * 30, "(" * 40, "<" * 30]) + text[at:]
    if kind == "unicode":
        return text[:at] + rng.choice(["\u00e9", "\u202e", "\U0001f600", "\ufeff"]) + text[at:]
    return text[:at] + "\x00" + text[at:]


MUTATIONS = [
    mutate_keyword,
    mutate_keyword,
    mutate_type,
    mutate_type,
    mutate_int,
    mutate_int,
    mutate_lines,
    mutate_lines,
    wrap_region,
    wrap_module,
    splice,
    garbage,
]


def mutate_lit_input(rng: random.Random) -> str:
    """A lit input with one to three mutations."""
    text = rng.choice(lit_inputs())
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(rng, text)
    return text
