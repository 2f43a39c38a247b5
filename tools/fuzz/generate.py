"""Random `distributed` programs: every op inside func bodies, scf regions, cf blocks and nested modules.

The programs are mostly well-typed (values are drawn from what is in scope, by type), so that they reach the passes
and the translation; with a small probability an op gets a bad attribute, a bad type or a value from the wrong
place, so that the verifier and the parser are exercised too. Tokens flow through block arguments, loop-carried
values (`scf.for` iter_args, `scf.while`), `scf.if` results and function calls, as kernels produce them after
Triton's own lowering.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

TOKEN = "!distributed.token"
GLOBAL_PTR = "!llvm.ptr<1>"
GENERIC_PTR = "!llvm.ptr"

# Integers that sit on the edges: of i32/i64, of the heap-base table (256 entries), of "every rank".
INTERESTING_INTS = [0, 1, -1, 2, 255, 256, 257, 300, 2**31 - 1, 2**31, -(2**31), 2**32 - 1, 2**32, 2**63 - 1, -(2**63)]
SCOPES = ["cta", "gpu", "sys"]
SEMANTICS = ["acquire", "relaxed"]
CMPS = ["eq", "ne", "ge", "gt", "le", "lt"]
SIG_OPS = ["set", "add"]
COMM_SCOPES = ["gpu", "intra_node", "inter_node"]
BAD_WORDS = ["", "release", "acq_rel", "seq_cst", "xor", "cluster", "system", "EQ", "0", "sys sys", "\u00e9"]
BAD_TYPES = ["i1", "i8", "i16", "f32", "index", "!llvm.ptr<3>", "!llvm.ptr<5>", "vector<2xi32>", TOKEN, "none"]
TRIPLES = ["nvptx64-nvidia-cuda", "amdgcn-amd-amdhsa", "x86_64-unknown-linux-gnu", "", "not a triple"]
TARGET_ATTRS = [
    "llvm.target_triple = 42 : i32",
    "llvm.target_triple = unit",
    'llvm.data_layout = "e-p:64:64"',
    'llvm.data_layout = "garbage"',
    "llvm.data_layout = [1, 2]",
]


@dataclass
class Scope:
    """The SSA values visible at a point, by type."""

    values: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, type_: str) -> None:
        self.values.setdefault(type_, []).append(name)

    def child(self) -> Scope:
        return Scope({t: list(v) for t, v in self.values.items()})


class ProgramGenerator:
    """Builds one module from a seeded RNG; `max_depth` bounds the region nesting, `bad` the chance of a bad op."""

    def __init__(self, rng: random.Random, max_depth: int = 4, max_ops: int = 6, bad: float = 0.08):
        self.rng = rng
        self.max_depth = max_depth
        self.max_ops = max_ops
        self.bad = bad
        self.counter = 0
        self.functions: list[tuple[str, list[str], list[str]]] = []  # (name, argument types, result types)

    # -- helpers -----------------------------------------------------------------------------------------------

    def fresh(self, hint: str = "v") -> str:
        self.counter += 1
        return f"%{hint}{self.counter}"

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, scope: Scope, type_: str, lines: list[str], indent: str) -> str:
        """A value of `type_` from scope, or a new one defined in `lines` (a constant, a wait, a query)."""
        pool = scope.values.get(type_, [])
        if pool and self.chance(0.75):
            return self.rng.choice(pool)
        name = self.fresh()
        if type_ == "i1":
            lines.append(f"{indent}{name} = arith.constant {self.rng.choice(['true', 'false'])}")
        elif type_ in ("i32", "i64", "index"):
            bits = 32 if type_ == "i32" else 64
            edges = [v for v in INTERESTING_INTS if -(2 ** (bits - 1)) <= v < 2 ** (bits - 1)]
            if self.chance(self.bad):
                edges = INTERESTING_INTS
            value = self.rng.choice(edges) if self.chance(0.3) and type_ != "index" else self.rng.randint(1, 4)
            lines.append(f"{indent}{name} = arith.constant {value} : {type_}")
        elif type_ == TOKEN:
            return self.op_wait(scope, lines, indent)
        elif type_ in (GLOBAL_PTR, GENERIC_PTR):
            if pool:
                return self.rng.choice(pool)
            lines.append(f"{indent}{name} = llvm.mlir.zero : {type_}")
        elif type_ in ("f32", "f64"):
            lines.append(f"{indent}{name} = arith.constant 1.5 : {type_}")
        else:
            lines.append(f"{indent}{name} = llvm.mlir.zero : {type_}")
        scope.add(name, type_)
        return name

    def small_constant(self, lines: list[str], indent: str, type_: str = "i32") -> str:
        name = self.fresh()
        lines.append(f"{indent}{name} = arith.constant {self.rng.randint(1, 4)} : {type_}")
        return name

    def word(self, good: list[str]) -> str:
        return self.rng.choice(BAD_WORDS) if self.chance(self.bad) else self.rng.choice(good)

    def flag_type(self) -> str:
        if self.chance(self.bad):
            return self.rng.choice(BAD_TYPES)
        return self.rng.choice(["i32", "i32", "i64"])

    def ptr_type(self) -> str:
        if self.chance(self.bad):
            return self.rng.choice(BAD_TYPES)
        return self.rng.choice([GLOBAL_PTR, GLOBAL_PTR, GENERIC_PTR])

    # -- the ops -----------------------------------------------------------------------------------------------

    def op_query(self, scope: Scope, lines: list[str], indent: str) -> str:
        name = self.fresh("r")
        op = self.rng.choice(["get_rank", "get_num_ranks", "get_heap_size"])
        axis = ""
        if op != "get_heap_size" and self.chance(self.bad * 3):
            axis = f" axis({self.rng.choice(['world', 'local', 'node', 'local', 'node', 'mesh', -1])})"
        lines.append(f"{indent}{name} = distributed.{op}{axis}")
        scope.add(name, "i64" if op == "get_heap_size" else "i32")
        return name

    def op_symm_at(self, scope: Scope, lines: list[str], indent: str) -> str:
        ptr_t = self.ptr_type()
        ptr = self.pick(scope, ptr_t, lines, indent)
        rank = self.pick(scope, "i32" if not self.chance(self.bad) else "i64", lines, indent)
        name = self.fresh("p")
        lines.append(f"{indent}{name} = distributed.symm_at {ptr}, {rank} : {ptr_t}")
        scope.add(name, ptr_t)
        return name

    def op_heap_offset(self, scope: Scope, lines: list[str], indent: str) -> str:
        ptr_t = self.ptr_type()
        ptr = self.pick(scope, ptr_t, lines, indent)
        name = self.fresh("o")
        lines.append(f"{indent}{name} = distributed.heap_offset {ptr} : {ptr_t}")
        scope.add(name, "i64")
        return name

    def op_wait(self, scope: Scope, lines: list[str], indent: str) -> str:
        ptr_t = self.ptr_type()
        flag_t = self.flag_type()
        ptr = self.pick(scope, ptr_t, lines, indent)
        count = (
            self.pick(scope, "i32", lines, indent) if self.chance(self.bad * 5) else self.small_constant(lines, indent)
        )
        value = self.pick(scope, flag_t, lines, indent)
        cmp = ""
        if self.chance(0.4):
            cmp = f" cmp({self.word(CMPS)})"
        name = self.fresh("t")
        lines.append(
            f"{indent}{name} = distributed.wait {ptr}, {count}, {value} scope({self.word(SCOPES)}) "
            f"semantic({self.word(SEMANTICS)}){cmp} : {ptr_t}, {flag_t}"
        )
        scope.add(name, TOKEN)
        return name

    def op_consume(self, scope: Scope, lines: list[str], indent: str) -> str:
        type_ = self.rng.choice(
            ["i32", "i64", "f32", GLOBAL_PTR, GENERIC_PTR] + (BAD_TYPES if self.chance(self.bad) else [])
        )
        value = self.pick(scope, type_, lines, indent)
        token = self.pick(scope, TOKEN if not self.chance(self.bad) else "i32", lines, indent)
        name = self.fresh("c")
        lines.append(f"{indent}{name} = distributed.consume_token {value}, {token} : {type_}")
        scope.add(name, type_)
        return name

    def op_notify(self, scope: Scope, lines: list[str], indent: str) -> None:
        ptr_t = self.ptr_type()
        flag_t = self.flag_type()
        ptr = self.pick(scope, ptr_t, lines, indent)
        rank = self.pick(scope, "i32", lines, indent)
        signal = self.pick(scope, flag_t, lines, indent)
        lines.append(
            f"{indent}distributed.notify {ptr}, {rank}, {signal} sig_op({self.word(SIG_OPS)}) "
            f"comm_scope({self.word(COMM_SCOPES)}) : {ptr_t}, {flag_t}"
        )

    def op_arith(self, scope: Scope, lines: list[str], indent: str) -> None:
        a = self.pick(scope, "i32", lines, indent)
        b = self.pick(scope, "i32", lines, indent)
        name = self.fresh("a")
        lines.append(f"{indent}{name} = arith.{self.rng.choice(['addi', 'muli', 'subi'])} {a}, {b} : i32")
        scope.add(name, "i32")

    def op_load(self, scope: Scope, lines: list[str], indent: str) -> None:
        ptr = self.pick(scope, GLOBAL_PTR, lines, indent)
        name = self.fresh("l")
        lines.append(f"{indent}{name} = llvm.load {ptr} : {GLOBAL_PTR} -> i32")
        scope.add(name, "i32")

    def op_call(self, scope: Scope, lines: list[str], indent: str) -> None:
        if not self.functions:
            return
        fname, args, results = self.rng.choice(self.functions)
        operands = [self.pick(scope, t, lines, indent) for t in args]
        names = [self.fresh("k") for _ in results]
        lhs = f"{', '.join(names)} = " if names else ""
        lines.append(
            f"{indent}{lhs}func.call @{fname}({', '.join(operands)}) : ({', '.join(args)}) -> ({', '.join(results)})"
        )
        for n, t in zip(names, results, strict=True):
            scope.add(n, t)

    # -- regions -----------------------------------------------------------------------------------------------

    def carried_types(self) -> list[str]:
        return [self.rng.choice([TOKEN, TOKEN, "i32", GLOBAL_PTR]) for _ in range(self.rng.randint(0, 2))]

    def region_body(self, scope: Scope, lines: list[str], indent: str, depth: int) -> None:
        for _ in range(self.rng.randint(0 if depth else 1, self.max_ops)):
            self.statement(scope, lines, indent, depth)

    def scf_for(self, scope: Scope, lines: list[str], indent: str, depth: int) -> None:
        lb, ub, step = (self.pick(scope, "index", lines, indent) for _ in range(3))
        types = self.carried_types()
        inits = [self.pick(scope, t, lines, indent) for t in types]
        iv = self.fresh("i")
        args = [self.fresh("it") for _ in types]
        results = self.fresh("f")
        iter_args = ""
        if types:
            pairs = ", ".join(f"{a} = {i}" for a, i in zip(args, inits, strict=True))
            iter_args = f" iter_args({pairs}) -> ({', '.join(types)})"
        lhs = f"{results}:{len(types)} = " if types else ""
        lines.append(f"{indent}{lhs}scf.for {iv} = {lb} to {ub} step {step}{iter_args} {{")
        inner = scope.child()
        inner.add(iv, "index")
        for a, t in zip(args, types, strict=True):
            inner.add(a, t)
        self.region_body(inner, lines, indent + "  ", depth + 1)
        if types:
            ys = [self.pick(inner, t, lines, indent + "  ") for t in types]
            lines.append(f"{indent}  scf.yield {', '.join(ys)} : {', '.join(types)}")
        lines.append(f"{indent}}}")
        for k, t in enumerate(types):
            scope.add(f"{results}#{k}", t)

    def scf_if(self, scope: Scope, lines: list[str], indent: str, depth: int) -> None:
        cond = self.pick(scope, "i1", lines, indent)
        types = self.carried_types()
        result = self.fresh("q")
        lhs = f"{result}:{len(types)} = " if types else ""
        ret = f" -> ({', '.join(types)})" if types else ""
        lines.append(f"{indent}{lhs}scf.if {cond}{ret} {{")
        for branch in range(2 if types or self.chance(0.5) else 1):
            if branch:
                lines.append(f"{indent}}} else {{")
            inner = scope.child()
            self.region_body(inner, lines, indent + "  ", depth + 1)
            if types:
                ys = [self.pick(inner, t, lines, indent + "  ") for t in types]
                lines.append(f"{indent}  scf.yield {', '.join(ys)} : {', '.join(types)}")
        lines.append(f"{indent}}}")
        for k, t in enumerate(types):
            scope.add(f"{result}#{k}", t)

    def scf_while(self, scope: Scope, lines: list[str], indent: str, depth: int) -> None:
        types = self.carried_types() or [TOKEN]
        inits = [self.pick(scope, t, lines, indent) for t in types]
        before = [self.fresh("b") for _ in types]
        after = [self.fresh("d") for _ in types]
        result = self.fresh("w")
        sig = ", ".join(types)
        init_list = ", ".join(f"{b} = {i}" for b, i in zip(before, inits, strict=True))
        lines.append(f"{indent}{result}:{len(types)} = scf.while ({init_list}) : ({sig}) -> ({sig}) {{")
        inner = scope.child()
        for b, t in zip(before, types, strict=True):
            inner.add(b, t)
        self.region_body(inner, lines, indent + "  ", depth + 1)
        cond = self.pick(inner, "i1", lines, indent + "  ")
        lines.append(f"{indent}  scf.condition({cond}) {', '.join(before)} : {sig}")
        lines.append(f"{indent}}} do {{")
        lines.append(f"{indent}^bb0({', '.join(f'{a}: {t}' for a, t in zip(after, types, strict=True))}):")
        inner = scope.child()
        for a, t in zip(after, types, strict=True):
            inner.add(a, t)
        self.region_body(inner, lines, indent + "  ", depth + 1)
        ys = [self.pick(inner, t, lines, indent + "  ") for t in types]
        lines.append(f"{indent}  scf.yield {', '.join(ys)} : {sig}")
        lines.append(f"{indent}}}")
        for k, t in enumerate(types):
            scope.add(f"{result}#{k}", t)

    def scf_execute_region(self, scope: Scope, lines: list[str], indent: str, depth: int) -> None:
        result = self.fresh("x")
        lines.append(f"{indent}{result} = scf.execute_region -> {TOKEN} {{")
        inner = scope.child()
        self.region_body(inner, lines, indent + "  ", depth + 1)
        token = self.pick(inner, TOKEN, lines, indent + "  ")
        lines.append(f"{indent}  scf.yield {token} : {TOKEN}")
        lines.append(f"{indent}}}")
        scope.add(result, TOKEN)

    def scf_parallel(self, scope: Scope, lines: list[str], indent: str, depth: int) -> None:
        lb, ub, step = (self.pick(scope, "index", lines, indent) for _ in range(3))
        init = self.pick(scope, "i32", lines, indent)
        iv = self.fresh("j")
        result = self.fresh("s")
        lines.append(f"{indent}{result} = scf.parallel ({iv}) = ({lb}) to ({ub}) step ({step}) init ({init}) -> i32 {{")
        inner = scope.child()
        inner.add(iv, "index")
        self.region_body(inner, lines, indent + "  ", depth + 1)
        part = self.pick(inner, "i32", lines, indent + "  ")
        lhs, rhs = self.fresh("lhs"), self.fresh("rhs")
        lines.append(f"{indent}  scf.reduce({part} : i32) {{")
        lines.append(f"{indent}  ^bb0({lhs}: i32, {rhs}: i32):")
        red = Scope()
        red.add(lhs, "i32")
        red.add(rhs, "i32")
        if self.chance(0.6):
            # An op that becomes control flow where only one block may live (issue 9's scf.reduce finding).
            self.rng.choice([self.op_wait, self.op_notify, self.op_query])(red, lines, indent + "    ")
        out = self.fresh("sum")
        lines.append(f"{indent}    {out} = arith.addi {lhs}, {rhs} : i32")
        lines.append(f"{indent}    scf.reduce.return {out} : i32")
        lines.append(f"{indent}  }}")
        lines.append(f"{indent}}}")
        scope.add(result, "i32")

    def statement(self, scope: Scope, lines: list[str], indent: str, depth: int) -> None:
        simple = [
            self.op_query,
            self.op_symm_at,
            self.op_wait,
            self.op_wait,
            self.op_consume,
            self.op_notify,
            self.op_notify,
            self.op_arith,
            self.op_heap_offset,
            self.op_load,
            self.op_call,
        ]
        regions = [self.scf_for, self.scf_if, self.scf_while, self.scf_execute_region, self.scf_parallel]
        if depth < self.max_depth and self.chance(0.35):
            self.rng.choice(regions)(scope, lines, indent, depth)
        else:
            self.rng.choice(simple)(scope, lines, indent)

    # -- functions and modules ---------------------------------------------------------------------------------

    def function(self, indent: str) -> list[str]:
        name = f"f{len(self.functions)}"
        arg_types = [GLOBAL_PTR, GENERIC_PTR, "i32", "i32", "i64", "i1", "index", "index", "index", "f32"]
        if self.chance(0.4):
            arg_types.append(TOKEN)
        result_types = self.rng.choice([[], [TOKEN], ["i32"], [TOKEN, GLOBAL_PTR]])
        scope = Scope()
        args = []
        for t in arg_types:
            a = self.fresh("arg")
            args.append(f"{a}: {t}")
            scope.add(a, t)
        out = [f"{indent}func.func @{name}({', '.join(args)}) -> ({', '.join(result_types)}) {{"]
        body: list[str] = []
        inner = indent + "  "
        self.region_body(scope, body, inner, 0)
        if self.chance(0.25):
            # Split the body with a branch that carries a token (and maybe a pointer) through a block argument.
            token = self.pick(scope, TOKEN, body, inner)
            carried = self.fresh("bt")
            body.append(f"{inner}cf.br ^bb1({token} : {TOKEN})")
            body.append(f"{indent}^bb1({carried}: {TOKEN}):")
            scope = Scope({t: list(v) for t, v in scope.values.items() if t in (GLOBAL_PTR, GENERIC_PTR)})
            for a in args:
                n, t = a.split(": ")
                scope.add(n, t)
            scope.add(carried, TOKEN)
            self.region_body(scope, body, inner, 0)
        rets = [self.pick(scope, t, body, inner) for t in result_types]
        body.append(f"{inner}return {', '.join(rets)}{' : ' + ', '.join(result_types) if rets else ''}")
        self.functions.append((name, arg_types, result_types))
        return out + body + [f"{indent}}}"]

    def module(self, indent: str = "", depth: int = 0) -> list[str]:
        attrs = ""
        if self.chance(0.15):
            choices = [f'llvm.target_triple = "{self.rng.choice(TRIPLES)}"'] + (TARGET_ATTRS if self.bad else [])
            attrs = f" attributes {{{self.rng.choice(choices)}}}"
        name = f" @m{depth}_{self.counter}" if depth and self.chance(0.5) else ""
        lines = [f"{indent}module{name}{attrs} {{"]
        inner = indent + "  "
        if self.chance(0.1):
            lines.append(f"{inner}func.func private @decl({GLOBAL_PTR}, i32) -> {TOKEN}")
            self.functions.append(("decl", [GLOBAL_PTR, "i32"], [TOKEN]))
        for _ in range(self.rng.randint(1, 3)):
            lines += self.function(inner)
        if self.chance(0.08):
            # Ops directly in a module: no function to lower them into.
            scope = Scope()
            self.rng.choice([self.op_query, self.op_symm_at, self.op_wait, self.op_notify])(scope, lines, inner)
        if depth < 2 and self.chance(0.15):
            saved = self.functions
            self.functions = []
            lines += self.module(inner, depth + 1)
            self.functions = saved
        lines.append(f"{indent}}}")
        return lines


def deep_nesting(rng: random.Random, depth: int) -> str:
    """A function whose body nests `depth` regions (scf.if / scf.for / scf.execute_region), with a wait inside."""
    lines = [
        "func.func @deep(%flags: !llvm.ptr<1>, %c: i1, %lb: index, %ub: index, %st: index) {",
        "  %one = arith.constant 1 : i32",
    ]
    closers = []
    for level in range(depth):
        pad = "  " * (level + 1)
        kind = rng.choice(["if", "for", "exec"])
        if kind == "if":
            lines.append(f"{pad}scf.if %c {{")
            closers.append(f"{pad}}}")
        elif kind == "for":
            lines.append(f"{pad}scf.for %i{level} = %lb to %ub step %st {{")
            closers.append(f"{pad}}}")
        else:
            lines.append(f"{pad}scf.execute_region {{")
            closers.append(f"{pad}  scf.yield\n{pad}}}")
    pad = "  " * (depth + 1)
    lines.append(f"{pad}%t = distributed.wait %flags, %one, %one scope(sys) semantic(acquire) : !llvm.ptr<1>, i32")
    lines += reversed(closers)
    lines += ["  return", "}"]
    return "\n".join(lines) + "\n"


def generate_program(rng: random.Random, size: str = "small") -> str:
    """One random module; `size` is "small" (CI) or "large" (the long mode: more ops, deeper regions)."""
    if rng.random() < 0.04:
        return deep_nesting(rng, rng.choice([16, 64, 200] if size == "small" else [64, 500, 2000, 5000]))
    depth, ops = (3, 4) if size == "small" else (6, 8)
    # Most programs are well-formed (they reach the passes and the translation); the rest break a few things.
    bad = 0.0 if rng.random() < 0.7 else 0.04
    gen = ProgramGenerator(rng, max_depth=rng.randint(1, depth), max_ops=ops, bad=bad)
    return "\n".join(gen.module()) + "\n"
