"""Find in-place updates that race between the warps of a program, in a kernel's TTGIR (compiled on the CPU).

Issue 27: a kernel loaded a location that every warp reads (a scalar such as an epoch counter, or a short row the
layout replicates over the warps), and one thread stored the updated value back with no program barrier in between.
A warp that ran ahead stored before a lagging warp had loaded, and the lagging warp read the updated value. The
interpreter runs a program as one thread, so only GPUs show it. :func:`rewritten_without_barrier` flags such a load
and store; :func:`compiled_ttgir` collects the TTGIR of the kernels a test helper compiles.

What counts as the barrier between the load and the store (in text order, the TTGIR's nesting ignored):

- ``gpu.barrier`` (``tl.debug_barrier()``);
- a call of the device library's ``dl.notify`` / ``dl.wait`` (``__triton_dist_notify_*`` / ``__triton_dist_wait_*``):
  each synchronizes the whole program (a barrier, then one thread's flag access; language/notify.py);
- a ``tt.reduce`` whose axis holds distinct elements in several warps (blocked layouts): Triton combines the warps'
  partial results through shared memory between program barriers, which every warp reaches after its earlier loads
  (a reduction of a few elements that one warp holds, the others copies, is warp-synchronous: no barrier).

Not flagged, because no other warp can read a different value:

- a program of one warp (its lanes run the load and the store as one instruction stream);
- a tensor of at least as many elements as the program has threads: its layout gives each thread its own elements,
  so each thread rewrites only what it loaded itself (e.g. a tile read, accumulated and written back);
- a store of the loaded value itself (unchanged).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from triton_dist import testing

PROGRAM_BARRIER_SYMBOLS = ("__triton_dist_notify_", "__triton_dist_wait_")
"""Device-library functions that start with a program barrier (every notify and wait variant)."""


def _num_warps(ttgir: str) -> int:
    found = re.search(r'"ttg\.num-warps" = (\d+)', ttgir)
    if not found:
        raise ValueError("the TTGIR names no ttg.num-warps: not a Triton GPU module")
    return int(found.group(1))


def _blocked_layouts(ttgir: str) -> dict[str, dict[str, list[int]]]:
    """``#name`` -> its ``sizePerThread``, ``threadsPerWarp`` and ``warpsPerCTA`` for every blocked layout."""
    layouts = {}
    for match in re.finditer(r"^(#\w+) = #ttg\.blocked<\{([^}]*)\}>", ttgir, re.M):
        fields = dict(re.findall(r"(\w+) = \[([\d, ]+)\]", match.group(2)))
        layouts[match.group(1)] = {key: [int(v) for v in value.split(",")] for key, value in fields.items()}
    return layouts


def _cross_warp_reduce(lines: list[str], i: int, layouts: dict[str, dict[str, list[int]]]) -> bool:
    """Whether line ``i`` starts a ``tt.reduce`` whose axis holds distinct elements in more than one warp (Triton
    then combines the warps' partial results through shared memory, between program barriers). A reduction of
    elements that fit one warp's lanes (the other warps hold copies) is warp-synchronous: no barrier."""
    start = re.search(r'"tt\.reduce"\(%[\w.#]+[^)]*\) <\{axis = (\d+)', lines[i])
    if not start:
        return False
    axis = int(start.group(1))
    for line in lines[i + 1 : i + 200]:  # the region ends with the operand types
        typed = re.search(r"^\s*\}\) : \(tensor<([\dx]+)x\w+, (#\w+)>", line)
        if typed:
            shape = [int(size) for size in typed.group(1).split("x")]
            layout = layouts.get(typed.group(2))
            if layout is None or axis >= len(shape):
                return False  # not a blocked layout: not counted (the check stays conservative)
            per_warp = layout["sizePerThread"][axis] * layout["threadsPerWarp"][axis]
            return min(layout["warpsPerCTA"][axis], -(-shape[axis] // per_warp)) > 1
    return False


def _is_barrier(lines: list[str], i: int, layouts: dict[str, dict[str, list[int]]]) -> bool:
    line = lines[i]
    if "gpu.barrier" in line:
        return True
    symbol = re.search(r'symbol = "(\w+)"', line)
    if symbol and symbol.group(1).startswith(PROGRAM_BARRIER_SYMBOLS):
        return True
    return _cross_warp_reduce(lines, i, layouts)


def _elements(pointer_type: str) -> int:
    """Elements of a ``tensor<AxBx!tt.ptr<..>>`` pointer type; 1 for a scalar ``!tt.ptr<..>``."""
    shape = re.match(r"tensor<([\dx]+)x!tt\.ptr", pointer_type)
    if not shape:
        return 1
    count = 1
    for size in shape.group(1).split("x"):
        count *= int(size)
    return count


def rewritten_without_barrier(ttgir: str) -> list[str]:
    """The in-place updates of the TTGIR ``ttgir`` that other warps of the program may see too early: a location
    loaded and then stored to (the same address expression, in text order) with no program barrier in between,
    where the loaded value is shared by several threads (see the module docstring for what is not flagged).

    Returns one line per such pair (the pointer, its address expression, both line numbers); empty if none.
    Raises ``ValueError`` if ``ttgir`` is not a Triton GPU module.
    """
    threads = 32 * _num_warps(ttgir)
    if threads == 32:
        return []
    lines = ttgir.splitlines()
    layouts = _blocked_layouts(ttgir)
    address: dict[str, str] = {}
    for line in lines:
        step = re.match(r"\s*(%[\w.#]+) = tt\.(addptr|splat|broadcast) (%[\w.]+)(?:, (%[\w.]+))?", line)
        if step:
            address[step.group(1)] = step.group(3) + (f" + {step.group(4)}" if step.group(2) == "addptr" else "")

    def expression(value: str, depth: int = 0) -> str:
        if value not in address or depth > 32:
            return value
        base, _, offset = address[value].partition(" + ")
        inner = expression(base, depth + 1)
        return f"({inner} + {offset})" if offset else inner

    loaded: dict[str, list[tuple[int, str]]] = {}
    found = []
    for i, line in enumerate(lines):
        load = re.search(r"(%[\w.#]+) = tt\.load (%[\w.]+)\b[^:]*: (.+?)(?: loc\(|$)", line)
        if load and _elements(load.group(3)) < threads:
            loaded.setdefault(expression(load.group(2)), []).append((i, load.group(1)))
        store = re.search(r"tt\.store (%[\w.]+), (%[\w.#]+)", line)
        if not store:
            continue
        where = expression(store.group(1))
        for j, value in loaded.pop(where, []):
            if value == store.group(2):
                continue
            if not any(_is_barrier(lines, k, layouts) for k in range(j, i)):
                found.append(f"{store.group(1)} = {where} (loaded at line {j + 1}, stored at {i + 1})")
    return found


@contextmanager
def compiled_ttgir() -> Iterator[list[tuple[str, str]]]:
    """Within the block, every ``triton_dist.testing.compile_for`` (which the test helpers' compiles go through)
    appends ``(kernel name, TTGIR)`` to the list it yields."""
    original: Callable[..., Any] = testing.compile_for
    seen: list[tuple[str, str]] = []

    def recording(kernel: Any, *args: Any, **kwargs: Any) -> Any:
        compiled = original(kernel, *args, **kwargs)
        seen.append((kernel.__name__, compiled.asm["ttgir"]))
        return compiled

    testing.compile_for = recording
    try:
        yield seen
    finally:
        testing.compile_for = original
