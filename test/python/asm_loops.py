"""The instructions inside loops of a kernel's PTX, AMDGCN or SASS listing, found on its control-flow graph.

Text order is not loop order: LLVM and ptxas place blocks of a loop (a poll's backoff, a rarely taken branch) after
the loop's back edge, so "between a label and the branch back to it" misses some and includes others. Here a
listing is split into basic blocks (a label or a branch target starts one; a branch, ``ret`` / ``exit`` /
``s_endpgm`` ends one), edges are the branches and the fall-throughs, and an instruction is inside a loop when its
block lies on a cycle reachable from the entry (a strongly connected component with more than one block, or a block
that branches to itself).

``loop_instructions(text, kind)`` gives those instructions, ``kind`` one of "ptx" (``triton_dist.testing.assembly``
of an NVIDIA kernel), "amdgcn" (the same for AMD) or "sass" (``cuobjdump -sass`` of the cubin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Block:
    name: str
    lines: list[str] = field(default_factory=list)
    successors: list[str] = field(default_factory=list)
    entry: bool = False
    """The start of a function (besides the listing's first block): loops are searched from every entry."""


_PTX_LABEL = re.compile(r"^\s*(\$L__\w+):")
_PTX_BRANCH = re.compile(r"^\s*(?P<pred>@!?%p\d+\s+)?bra(\.uni)?\s+(?P<target>\$L__\w+);")
_PTX_END = re.compile(r"^\s*(ret|trap|exit);")
_AMD_LABEL = re.compile(r"^(\.LBB\w+):")
_AMD_FUNCTION = re.compile(r"^([A-Za-z_][\w.$]*):")
_AMD_BRANCH = re.compile(r"^\s*(?P<op>s_branch|s_cbranch_\w+)\s+(?P<target>\.LBB\w+)")
_AMD_END = re.compile(r"^\s*(s_endpgm|s_setpc_b64)\b")
_SASS_LINE = re.compile(r"^\s*/\*(?P<address>[0-9a-f]{4,})\*/\s+(?P<instruction>.*?)\s*;?\s*(/\*.*)?$")
_SASS_BRANCH = re.compile(r"^(?P<pred>@!?U?P\w+\s+)?BRA\s+(?P<target>0x[0-9a-f]+)")
_SASS_END = re.compile(r"^(EXIT|RET\b)")


def _target_name(target: str) -> str:
    """SASS branch targets are addresses: one spelling for ``0x1a0`` and ``0x01a0``."""
    return f"0x{int(target, 16):x}" if target.startswith("0x") else target


def _split(
    items: list[tuple[str | None, str]], branch: re.Pattern[str], end: re.Pattern[str], conditional
) -> list[Block]:
    """Basic blocks of ``items`` = (label or None, instruction) in text order; a label with an empty instruction
    only starts a block (PTX, AMDGCN), one with an instruction also holds it (SASS: branch targets are addresses)."""
    blocks: list[Block] = []
    current: Block | None = None
    falls_through = False
    for label, line in items:
        if label is not None or current is None:
            name = label if label is not None else f"<entry {len(blocks)}>"
            block = Block(name)
            if current is not None and falls_through:
                current.successors.append(name)
            blocks.append(block)
            current = block
            falls_through = True
            if label is not None and not line:
                continue
        current.lines.append(line)
        match = branch.match(line)
        if match or end.match(line):
            if match:
                current.successors.append(_target_name(match.group("target")))
            unconditional = (match and not conditional(match)) or (not match and end.match(line))
            block = Block(f"<after {len(blocks)}>")
            if not unconditional:
                current.successors.append(block.name)
            blocks.append(block)
            current = block
            falls_through = True
    return [block for block in blocks if block.lines or block.successors]


def ptx_blocks(text: str) -> list[Block]:
    items: list[tuple[str | None, str]] = []
    for line in text.splitlines():
        label = _PTX_LABEL.match(line)
        items.append((label.group(1), "") if label else (None, line))
    return _split(items, _PTX_BRANCH, _PTX_END, lambda m: m.group("pred"))


def amdgcn_blocks(text: str) -> list[Block]:
    """A module may hold several functions (the kernel and the helpers of its asserts): each starts at its symbol's
    label, and ``s_endpgm`` / ``s_setpc_b64`` (return) end a block without a fall-through."""
    items: list[tuple[str | None, str]] = []
    functions = set()
    for line in text.splitlines():
        label = _AMD_LABEL.match(line) or _AMD_FUNCTION.match(line)
        if label and not label.group(1).startswith(".L"):
            functions.add(label.group(1))
        items.append((label.group(1), "") if label else (None, line))
    blocks = _split(items, _AMD_BRANCH, _AMD_END, lambda m: m.group("op") != "s_branch")
    for block in blocks:
        block.entry = block.name in functions
    return blocks


def sass_blocks(text: str) -> list[Block]:
    instructions = []
    for line in text.splitlines():
        match = _SASS_LINE.match(line)
        if match:
            instructions.append((f"0x{int(match.group('address'), 16):x}", match.group("instruction")))
    targets = {_target_name(m.group("target")) for _, ins in instructions if (m := _SASS_BRANCH.match(ins))}
    items = [(address if address in targets else None, ins) for address, ins in instructions]
    return _split(items, _SASS_BRANCH, _SASS_END, lambda m: m.group("pred"))


def loop_components(blocks: list[Block]) -> list[list[Block]]:
    """The loops of ``blocks`` reachable from the first block or a function entry: each strongly connected
    component with more than one block, or a block that branches to itself; blocks in text order, components in
    order of their first block."""
    by_name = {block.name: block for block in blocks}
    if not blocks:
        return []
    reachable: set[str] = set()
    stack = [blocks[0].name] + [block.name for block in blocks if block.entry]
    while stack:
        name = stack.pop()
        if name in reachable or name not in by_name:
            continue
        reachable.add(name)
        stack.extend(by_name[name].successors)
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    order: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for root in [block.name for block in blocks if block.name in reachable]:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            name, child = work.pop()
            if child == 0:
                index[name] = low[name] = counter
                counter += 1
                order.append(name)
                on_stack.add(name)
            successors = [s for s in by_name[name].successors if s in by_name]
            if child < len(successors):
                work.append((name, child + 1))
                successor = successors[child]
                if successor not in index:
                    work.append((successor, 0))
                elif successor in on_stack:
                    low[name] = min(low[name], index[successor])
                continue
            for successor in successors:
                if successor in on_stack:
                    low[name] = min(low[name], low[successor])
            if low[name] == index[name]:
                component = set()
                while True:
                    member = order.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == name:
                        break
                if len(component) > 1 or name in by_name[name].successors:
                    components.append(component)
    loops = [[block for block in blocks if block.name in component] for component in components]
    return sorted(loops, key=lambda loop: blocks.index(loop[0]))


def cyclic_blocks(blocks: list[Block]) -> list[Block]:
    """The blocks of ``loop_components(blocks)``, in text order."""
    inside = {id(block) for loop in loop_components(blocks) for block in loop}
    return [block for block in blocks if id(block) in inside]


BLOCKS = {"ptx": ptx_blocks, "amdgcn": amdgcn_blocks, "sass": sass_blocks}


def loop_instructions(text: str, kind: str) -> list[str]:
    """The instructions of ``text`` (a ``kind`` listing) that lie inside a loop, in text order."""
    return [line.strip() for block in cyclic_blocks(BLOCKS[kind](text)) for line in block.lines if line.strip()]
