"""How an all-reduce runs: its config, the launch shape a config gives a message, and which config a call takes.

A config (:class:`AllReduceConfig`) names the algorithm (``kernels.py``), the most programs and their warps. A call
without one takes the row of a table of (message bytes -> config) for its GPU and world size: the user's tuning
cache (``$TRITON_DIST_CACHE_DIR/tuning.json``, written by ``bench/all_reduce.py --tune``), else the table committed
in ``ops/tuned_configs.json`` (entries ``all_reduce|table|<world size>|<GPU name>``), else a size heuristic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import triton

from triton_dist.ops import tuning
from triton_dist.ops.common.errors import OpInputError
from triton_dist.ops.common.ll_words import LL_PER_THREAD, ll_elements_per_word, ll_supported


class AllReduceError(OpInputError, TypeError):
    """Bad input to ``all_reduce`` (shape, dtype, device, layout, a config that cannot run, ranks that disagree).

    An :class:`~triton_dist.ops.common.errors.OpInputError` (so a ``ValueError``); also a ``TypeError``, which a
    wrong dtype or a non-tensor argument raised before the family existed.
    """


SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SUPPORTED_OPS = ("sum",)
ALGORITHMS = ("one_shot", "one_shot_push", "two_shot", "one_shot_ll")

SLOTS = {"one_shot": 256, "one_shot_push": 256, "two_shot": 128, "one_shot_ll": 128}
"""Program slots per workspace, per algorithm: the most programs one launch uses (one-shot: two per SM, so one
program's loads overlap another's flag wait)."""
ONE_SHOT_REGION_BYTES = 64 << 10
"""Per slot: two staging halves (epoch parity) of 32 KiB; a program moves up to 32 KiB per flag round."""
PUSH_ROUND_BYTES = 16 << 10
"""One-shot push: a program moves up to 16 KiB per flag round; its slot holds 2 parities x W rows of that (64 KiB
per slot at 2 ranks, 256 KiB at 8; x 256 slots: 16 MiB of the symmetric heap at 2 ranks, 64 MiB at 8, allocated on
the first push call)."""
TWO_SHOT_REGION_BYTES = 256 << 10
"""Per slot: an inbox and a gather buffer of W slices each; up to 128 KiB of input per program per flag round."""
CHUNK_ALIGN = 16
"""Two-shot chunks start at multiples of 16 elements, so every chunk's slices stay 16-byte aligned."""
LL_LANES = 1024
"""LL one-shot: the most 8-byte words one program moves per call (one round)."""


def ll_words_per_program(config: AllReduceConfig) -> int:
    """The most words one LL program moves: min(``LL_LANES``, ``LL_PER_THREAD`` per thread)."""
    return min(LL_LANES, LL_PER_THREAD * 32 * config.num_warps)


def ll_capacity(config: AllReduceConfig, itemsize: int) -> int:
    """The most elements of ``itemsize`` bytes an LL one-shot ``config`` moves: ``programs`` x
    ``ll_words_per_program`` words of ``ll_elements_per_word(itemsize)`` elements."""
    return config.programs * ll_words_per_program(config) * ll_elements_per_word(itemsize)


def ll_max_numel(itemsize: int) -> int:
    """The largest LL one-shot message in elements (every program one round, all slots): 256K elements of bf16 /
    fp16 (512 KiB), 128K of fp32 (512 KiB)."""
    return SLOTS["one_shot_ll"] * LL_LANES * ll_elements_per_word(itemsize)


def ll_region_bytes(world_size: int) -> int:
    """LL one-shot bytes per slot: 2 parities x ``world_size`` senders x ``LL_LANES`` words of 8 bytes (x 128
    slots: 4 MiB of symmetric heap at 2 ranks, 16 MiB at 8, allocated on the first LL call)."""
    return 2 * world_size * LL_LANES * 8


def push_region_bytes(world_size: int) -> int:
    """One-shot push bytes per slot: 2 parities x ``world_size`` rows of ``PUSH_ROUND_BYTES``."""
    return 2 * world_size * PUSH_ROUND_BYTES


@dataclass(frozen=True)
class AllReduceConfig:
    """How one all-reduce runs: ``algo`` ("one_shot" / "one_shot_push" / "two_shot" / "one_shot_ll"), at most
    ``programs`` programs (each moving up to its slot's capacity per flag round, in as many rounds as needed;
    "one_shot_ll": one round only, so at most ``ll_capacity(config, itemsize)`` elements), ``num_warps`` warps
    each."""

    algo: str
    programs: int
    num_warps: int = 4

    def __post_init__(self) -> None:
        if self.algo not in ALGORITHMS:
            raise AllReduceError(f"all_reduce: algo must be one of {list(ALGORITHMS)}, got {self.algo!r}")
        if not 1 <= self.programs <= SLOTS[self.algo]:
            most = SLOTS[self.algo]
            raise AllReduceError(f"all_reduce: {self.algo} programs must be in [1, {most}], got {self.programs}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise AllReduceError(f"all_reduce: num_warps must be a power of two <= 16, got {self.num_warps}")


# Launch shapes


@dataclass(frozen=True)
class LaunchShape:
    """What a config means for one message: elements per program per flag round, block, grid, workspace.

    ``stride``: the elements from one block of a slot to the next (the one-shot's parity halves, the push's and the
    two-shot's per-sender rows; LL: words per sender). Fixed by the workspace and the element size, never by the
    message: a round's elements fill the start of a block (``kernels.py``: the layout is fixed)."""

    round: int
    block: int
    programs: int
    region_elems: int
    chunk: int
    stride: int


def _pow2_floor(value: int) -> int:
    return 1 << (max(1, value).bit_length() - 1)


def launch_shape(numel: int, itemsize: int, world_size: int, config: AllReduceConfig) -> LaunchShape:
    """The grid and per-program sizes ``config`` gives a message of ``numel`` elements of ``itemsize`` bytes.

    Raises AllReduceError for a "one_shot_ll" config that cannot move the message in one round (more than
    ``ll_capacity(config, itemsize)`` elements) or on a build without NVIDIA support (``ll_supported``).
    """
    if config.algo == "one_shot_ll":
        return _ll_launch_shape(numel, itemsize, world_size, config)
    if config.algo == "one_shot":
        region_bytes = ONE_SHOT_REGION_BYTES
        capacity = region_bytes // (2 * itemsize)
        chunk = numel
        length = numel
    elif config.algo == "one_shot_push":
        region_bytes = push_region_bytes(world_size)
        capacity = PUSH_ROUND_BYTES // itemsize
        chunk = numel
        length = numel
    else:
        region_bytes = TWO_SHOT_REGION_BYTES
        capacity = _pow2_floor(region_bytes // (2 * world_size * itemsize))
        chunk = triton.cdiv(triton.cdiv(numel, world_size), CHUNK_ALIGN) * CHUNK_ALIGN
        length = chunk
    block = min(config.num_warps * 32 * (32 // itemsize), capacity)  # two 16-byte vectors per thread
    round_ = min(max(triton.next_power_of_2(triton.cdiv(length, config.programs)), block), capacity)
    programs = max(1, min(triton.cdiv(length, round_), config.programs))  # the rest in more flag rounds
    # The stride is the capacity, whatever the message: the same bytes (a power of two) for every element size.
    return LaunchShape(round_, block, programs, region_bytes // itemsize, chunk, capacity)


def _ll_launch_shape(numel: int, itemsize: int, world_size: int, config: AllReduceConfig) -> LaunchShape:
    """LL one-shot: one block of ``round`` words per program, a power of two from one word per thread (fewer would
    make threads store the same word twice) to ``ll_capacity / programs`` elements' worth; one round, so a grid of
    ``cdiv(words, round)`` <= ``config.programs`` programs. ``round`` and ``block`` count words (of
    ``ll_elements_per_word(itemsize)`` elements)."""
    if not ll_supported():
        raise AllReduceError(
            "all_reduce: one_shot_ll needs an NVIDIA GPU (8-byte relaxed system-scope PTX loads and stores); "
            "this is a ROCm build: use one_shot or two_shot"
        )
    capacity = ll_capacity(config, itemsize)
    if numel > capacity:
        raise AllReduceError(
            f"all_reduce: one_shot_ll with {config.programs} programs of {config.num_warps} warps moves at most "
            f"{capacity} elements of {itemsize} bytes (one round of min({LL_LANES}, {LL_PER_THREAD} per thread) "
            f"words of {ll_elements_per_word(itemsize)} per program), got {numel}: use more programs (up to "
            f"{SLOTS['one_shot_ll']}: {ll_max_numel(itemsize)} elements at >= 2 warps) or one_shot / two_shot"
        )
    words = triton.cdiv(max(numel, 1), ll_elements_per_word(itemsize))
    threads = config.num_warps * 32
    most = ll_words_per_program(config)
    round_ = min(max(triton.next_power_of_2(triton.cdiv(words, config.programs)), threads), most)
    programs = max(1, triton.cdiv(words, round_))
    return LaunchShape(round_, round_, programs, ll_region_bytes(world_size) // 8, numel, LL_LANES)


def fits(config: AllReduceConfig, numel: int, itemsize: int) -> bool:
    """Whether ``config`` can run a message of ``numel`` elements of ``itemsize`` bytes here (only "one_shot_ll"
    has limits)."""
    if config.algo != "one_shot_ll":
        return True
    return ll_supported() and numel <= ll_capacity(config, itemsize)


# ---------------------------------------------------------------------------------------------------------------
# Choosing a config: the user's tuning cache -> the committed table -> the heuristic

Table = list[tuple[int, AllReduceConfig]]
"""(largest message in bytes, config) rows, ascending; the first row whose bound covers the message applies."""


@dataclass(frozen=True)
class TableEntry:
    """A table as ``ops.tuning`` stores it: ``{"rows": [[bytes, config fields], ...]}``."""

    rows: tuple[tuple[int, AllReduceConfig], ...]

    def as_dict(self) -> dict[str, Any]:
        """The fields, for ``ops.tuning``'s JSON tables."""
        return {"rows": [[nbytes, asdict(config)] for nbytes, config in self.rows]}

    @classmethod
    def from_dict(cls, values: Any) -> TableEntry:
        """The table an entry holds; raises AllReduceError naming what is malformed."""
        try:
            rows = tuple((int(nbytes), AllReduceConfig(**fields)) for nbytes, fields in values["rows"])
        except (KeyError, TypeError, ValueError) as error:
            raise AllReduceError(f"all_reduce: a stored config table is malformed ({error}): {values!r}") from error
        if list(rows) != sorted(rows, key=lambda row: row[0]):
            raise AllReduceError(f"all_reduce: a stored config table's rows are not in ascending size: {values!r}")
        return cls(rows)


def table_key(world_size: int, gpu: str) -> str:
    """The key of the config table for ``world_size`` ranks of GPU ``gpu`` in ``ops.tuning``'s tables."""
    return f"all_reduce|table|{world_size}|{gpu}"


def heuristic_config(nbytes: int, world_size: int) -> AllReduceConfig:
    """A config without measurements for this GPU and world size: the one-shot push up to 256 KiB (less for many
    ranks), else two-shot. The push, not the pull one-shot: it was the faster of the two at every size compared."""
    if nbytes <= (512 << 10) // max(1, world_size):
        return AllReduceConfig("one_shot_push", max(1, min(32, nbytes // (8 << 10))), 4)
    return AllReduceConfig("two_shot", max(8, min(SLOTS["two_shot"], nbytes // (64 << 10))), 8)


EMULATED_PROGRAMS = 2
"""The most programs of an all-reduce under the CPU emulation (each one a thread of Triton's interpreter)."""


def emulated_config(nbytes: int, world_size: int) -> AllReduceConfig:
    """The config under the CPU emulation: the heuristic's algorithm with at most ``EMULATED_PROGRAMS`` programs
    of one warp (small blocks, which the interpreter runs quickly)."""
    found = heuristic_config(nbytes, world_size)
    return AllReduceConfig(found.algo, min(found.programs, EMULATED_PROGRAMS), 1)


_tables: dict[str, Table | None] = {}
"""The tables read so far, by ``table_key`` (None: neither the cache nor the package has one)."""
_selected: dict[tuple[int, torch.device, int, int], AllReduceConfig] = {}
"""The config chosen per (bytes, device, world size, itemsize)."""


def stored_table(world_size: int, gpu: str) -> Table | None:
    """The table for ``world_size`` ranks of ``gpu``: the user's cache first, then the package's; None if neither
    has one (read once per process; :func:`forget_tables` reads again)."""
    entry_key = table_key(world_size, gpu)
    if entry_key not in _tables:
        entry = tuning.lookup_entry(entry_key)
        _tables[entry_key] = None if entry is None else list(TableEntry.from_dict(entry.get("config")).rows)
    return _tables[entry_key]


def forget_tables() -> None:
    """Drop what :func:`stored_table` and :func:`select_config` remember (after a tuner stored a new table)."""
    _tables.clear()
    _selected.clear()


def select_config(nbytes: int, device: torch.device, world_size: int, itemsize: int = 2) -> AllReduceConfig:
    """The config for a message of ``nbytes`` (elements of ``itemsize`` bytes): the stored table's first row that
    covers it (the last row past its end), else the heuristic. A table's "one_shot_ll" row that cannot move the
    message (past the last row, or on a build without it) gives way to the heuristic."""
    memo = (nbytes, device, world_size, itemsize)
    found = _selected.get(memo)
    if found is None:
        table = stored_table(world_size, torch.cuda.get_device_name(device))
        if table:
            found = next((config for bound, config in table if nbytes <= bound), table[-1][1])
        else:
            found = heuristic_config(nbytes, world_size)
        if not fits(found, nbytes // itemsize, itemsize):
            found = heuristic_config(nbytes, world_size)
        _selected[memo] = found
    return found


def candidate_configs(nbytes: int, itemsize: int, world_size: int) -> list[AllReduceConfig]:
    """The configs a tuner tries (``bench/all_reduce.py --tune``) for one message size (distinct launch shapes
    only): one-shot up to 8 MiB, two-shot always, LL one-shot on NVIDIA up to ``ll_max_numel`` elements with
    enough programs for one round."""
    numel = nbytes // itemsize
    found: dict[tuple[str, LaunchShape, int], AllReduceConfig] = {}
    for algo in ALGORITHMS:
        if algo in ("one_shot", "one_shot_push") and nbytes > (8 << 20):
            continue  # many flag rounds per program; two-shot wins by far
        if algo == "one_shot_ll" and not (ll_supported() and numel <= ll_max_numel(itemsize)):
            continue  # NVIDIA only; one round per program
        for num_warps in (1, 2, 4, 8) if algo == "one_shot_ll" else (4, 8):
            for programs in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                if programs > SLOTS[algo]:
                    continue
                config = AllReduceConfig(algo, programs, num_warps)
                if not fits(config, numel, itemsize):
                    continue
                shape = launch_shape(numel, itemsize, world_size, config)
                found.setdefault((algo, shape, num_warps), config)
    return list(found.values())
