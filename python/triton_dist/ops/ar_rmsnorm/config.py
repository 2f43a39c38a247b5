"""How a fused all-reduce + residual + RMSNorm runs: the algorithm (one-shot push or two-shot, as ``all_reduce``
chooses for the message size: ``all_reduce.select_config``; the LL one-shot only where a config forces it), the
programs, the per-slot workspace a row needs, the LL one-shot's launch shape, and the fp8 output's per-token
scale."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton

from triton_dist.ops.all_reduce import AllReduceError, emulated_config, select_config
from triton_dist.ops.common.errors import OpInputError
from triton_dist.ops.common.ll_words import LL_PER_THREAD, ll_elements_per_word, ll_supported


class ArRmsNormError(OpInputError, TypeError):
    """Bad input to ``all_reduce_residual_rmsnorm`` (shapes, dtypes, devices, layout, a hidden size the norm
    cannot tile, ranks that disagree). An :class:`~triton_dist.ops.common.errors.OpInputError` (a ``ValueError``),
    also a ``TypeError`` for a wrong dtype or a non-tensor argument."""


OP_NAME = "all_reduce_residual_rmsnorm"
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
ALGORITHMS = ("one_shot", "two_shot", "one_shot_ll")
SLOTS = {"one_shot": 256, "two_shot": 128, "one_shot_ll": 256}
"""Program slots per workspace: the most programs of one launch (each moves ``round_rows`` rows per flag round;
"one_shot_ll": its slice of a group's rows in its one round, ``ll_launch``)."""
LL_REDUCTIONS = ("row", "atomic", "spin", "spin_words")
"""``ArRmsNormConfig.ll_reduce``'s values."""
LL_SPINS = ("spin", "spin_words")
"""The ``ll_reduce`` values whose programs wait for each other (``kernels._ar_rmsnorm_ll_spin_kernel``)."""
MAX_HIDDEN = 32768
"""The largest hidden size: a program holds one row (``next_power_of_2(hidden)`` fp32 values) in registers."""


@dataclass(frozen=True)
class ArRmsNormConfig:
    """``algo`` "one_shot" (the push one-shot: every rank sums every row), "two_shot" (each rank sums and norms
    its chunk of rows, then gathers the others') or "one_shot_ll" (the low-latency one-shot: every rank sums every
    row, the call's epoch travels inside the data words, no flag round; NVIDIA only, never chosen by
    ``choose_config``: force it with a config), at most ``programs`` programs of ``num_warps`` warps
    ("one_shot_ll": ``ll_num_warps`` bounds the warps by the row's words; a row may be split over up to
    ``ll_slices`` programs; ``ll_single_reader``: only one of them reads and norms it; ``ll_reduce="atomic"``:
    each reads only its slice and the last to arrive norms the row; ``ll_reduce="spin"``: each reads only its slice,
    waits for the row's other slices' sums of squares and norms its slice; "spin_words": the same, the sums of
    squares exchanged as epoch-tagged words)."""

    algo: str
    programs: int
    num_warps: int = 4
    ll_slices: int = 0
    """"one_shot_ll" only: the most programs that share one row (a power of two; each pushes its slice of the row
    and writes its slice of the outputs, ``ll_launch``); 0: as many as ``ll_launch`` chooses."""
    ll_single_reader: bool = False
    """"one_shot_ll" only: the first program of a row's slices receives the whole row, adds the residual, norms it
    in registers and writes the whole of both outputs; the row's other programs only push their slice of x and
    exit. No program reads a row another program of this rank also reads, and no step passes between programs
    (``kernels._ar_rmsnorm_ll_reader_kernel``). Not the default: an option until measured."""
    ll_reduce: str = "row"
    """"one_shot_ll" only: how the programs of a row split over slices get its sum of squares. "row": each polls
    and sums the whole row and norms it itself (``kernels._ar_rmsnorm_ll_kernel``); "atomic": each polls only its
    slice's words, writes its slice of the new residual and its slice's partial sum of squares, and counts its
    arrival with an atomic; the last of the row's programs to arrive sums the partials in slice order and norms the
    whole row (``kernels._ar_rmsnorm_ll_atomic_kernel``); "spin": as "atomic" up to the arrival, then every program
    waits until all of the row's programs have arrived, sums their partials in slice order and norms its own slice
    from the values it holds (``kernels._ar_rmsnorm_ll_spin_kernel``; a program holds only its slice, so its warps
    follow the slice, ``ll_launch_warps``; a row is split over at most ``LL_SPIN_MAX_SLICES`` programs and the
    launch stays within ``LL_READER_PROGRAMS``, so that a row's programs are resident together; the e4m3 output
    takes "atomic"'s kernel, ``ll_spin_fp8_config``); "spin_words": "spin" without the counter: each program
    stores its partial as an LL word (the call's epoch in its high half) and polls the row's other programs' words
    until each carries the epoch, one local round trip where the counter takes three (the atomic, its poll, the
    partials' loads). Not with ``ll_single_reader``. Not the default: an option until measured."""

    def __post_init__(self) -> None:
        if self.algo not in ALGORITHMS:
            raise ArRmsNormError(
                f"all_reduce_residual_rmsnorm: algo must be one of {list(ALGORITHMS)}, got {self.algo!r}"
            )
        if not 1 <= self.programs <= SLOTS[self.algo]:
            most = SLOTS[self.algo]
            raise ArRmsNormError(
                f"all_reduce_residual_rmsnorm: {self.algo} programs must be in [1, {most}], got {self.programs}"
            )
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ArRmsNormError(
                f"all_reduce_residual_rmsnorm: num_warps must be a power of two <= 16, got {self.num_warps}"
            )
        if self.ll_single_reader and self.algo != "one_shot_ll":
            raise ArRmsNormError(
                f"all_reduce_residual_rmsnorm: ll_single_reader is an option of one_shot_ll only, got {self.algo}"
            )
        if self.ll_reduce not in LL_REDUCTIONS:
            raise ArRmsNormError(
                f"all_reduce_residual_rmsnorm: ll_reduce must be one of {list(LL_REDUCTIONS)}, got {self.ll_reduce!r}"
            )
        if self.ll_reduce != "row" and (self.algo != "one_shot_ll" or self.ll_single_reader):
            raise ArRmsNormError(
                f"all_reduce_residual_rmsnorm: ll_reduce={self.ll_reduce!r} is an option of one_shot_ll without "
                f"ll_single_reader, got {self.algo} with ll_single_reader={self.ll_single_reader}"
            )
        if self.ll_slices and (self.algo != "one_shot_ll" or self.ll_slices & (self.ll_slices - 1)):
            raise ArRmsNormError(
                "all_reduce_residual_rmsnorm: ll_slices must be 0 or a power of two, and only with one_shot_ll; got "
                f"{self.ll_slices} with {self.algo}"
            )


def block_h(hidden: int) -> int:
    """The row block: the hidden size rounded up to a power of two (at least 16 elements)."""
    return max(16, triton.next_power_of_2(hidden))


def row_programs(algo: str, rows: int, world_size: int) -> int:
    """The rows one flag round of all programs covers: every row (one-shot, LL one-shot), one chunk of
    ``cdiv(rows, W)`` (two-shot)."""
    return triton.cdiv(rows, world_size) if algo == "two_shot" else rows


ROUND_BYTES = {"one_shot": 16 << 10, "two_shot": 128 << 10}
"""What one program moves per flag round, at most (unless one row is more): one-shot, 16 KiB of rows it pushes to
each peer (as ``all_reduce``'s push one-shot); two-shot, 128 KiB of rows from all ranks into its inbox (as
``all_reduce``'s two-shot)."""


def _pow2_floor(value: int) -> int:
    return 1 << (max(1, value).bit_length() - 1)


def max_round_rows(algo: str, hidden: int, itemsize: int, world_size: int) -> int:
    """The most rows a program moves per flag round (a power of two): ``ROUND_BYTES`` of rows (two-shot: from
    each of the ``world_size`` ranks), at least one. The workspace is sized for it."""
    row = block_h(hidden) * itemsize
    budget = ROUND_BYTES[algo] // (1 if algo == "one_shot" else world_size)
    return _pow2_floor(budget // row)


def round_rows(algo: str, rows: int, hidden: int, itemsize: int, world_size: int, programs: int) -> int:
    """The rows each program moves per flag round for a call of ``rows`` rows on at most ``programs`` programs:
    one while the programs cover a round's rows (more programs in parallel beat fewer flag rounds), else the next
    power of two of the rows per program, at most ``max_round_rows`` (fewer flag rounds per program)."""
    wanted = triton.next_power_of_2(triton.cdiv(row_programs(algo, rows, world_size), programs))
    return min(wanted, max_round_rows(algo, hidden, itemsize, world_size))


def region_bytes(algo: str, hidden: int, itemsize: int, world_size: int) -> int:
    """Bytes per slot: ``max_round_rows`` rows from each of the W ranks, twice (one-shot: 2 epoch parities of the
    inbox; two-shot: the inbox and the gather buffer of new residual rows)."""
    return 2 * world_size * max_round_rows(algo, hidden, itemsize, world_size) * block_h(hidden) * itemsize


FP8_DTYPE = torch.float8_e4m3fn
"""The fp8 output's dtype (OCP e4m3, NVIDIA's ``float8e4nv``)."""
FP8_MAX = 448.0
"""The largest finite e4m3 value: a row's largest magnitude maps to it."""
FP8_MIN_SCALE = 1.0 / (FP8_MAX * 512.0)
"""The smallest per-token scale: a row of zeros (or nearly) gets this one, never 0 (no division by zero)."""


EMULATED_PROGRAMS = 2
"""The most programs under the CPU emulation (each one a thread of Triton's interpreter), of one warp."""


def choose_algo(nbytes: int, device: torch.device, world_size: int, itemsize: int, emulated: bool) -> str:
    """ "two_shot" where ``all_reduce`` would take its two-shot for a message of ``nbytes``, else "one_shot" (every
    one-shot variant of the all-reduce maps to the push one-shot). ``all_reduce.select_config`` decides (its tuned
    table for this GPU and world size, else its heuristic); under the CPU emulation ``all_reduce.emulated_config``."""
    if emulated:
        found = emulated_config(nbytes, world_size)
    else:
        try:
            found = select_config(nbytes, device, world_size, itemsize)
        except AllReduceError as error:  # a malformed stored table
            raise ArRmsNormError(f"{OP_NAME}: {error}") from error
    return "two_shot" if found.algo == "two_shot" else "one_shot"


SPIN_WORDS_ROWS = 8
"""Calls of at most this many rows take the LL one-shot with ``ll_reduce="spin_words"`` by default (bf16 / fp16 /
fp32 output, NVIDIA, on GPUs). On 2 x H200, hidden 8192 bf16, graphed, against the flag one-shot, in three runs of
2026-11-27: 5.0 / 5.5 / 6.3 µs against 6.3 / 6.5 / 6.5 at M = 1 / 2 / 4 and equal at M = 8
(docs/results/2026-11-27-session24.md); 6.1 against 6.4 at M = 4 and 6.4 against 6.6 at M = 8
(docs/results/2026-11-27-session25/ar_rmsnorm_rows_2xH200_c626918.md); 6.5 against 6.7 at M = 8
(docs/results/2026-11-27-session26.md). Above M = 8 it was slower."""
SPIN_WORDS_WARPS = 2
"""The warps of a program of that default (each holds a slice of a row: 16 slices of a hidden-8192 bf16 row, 4 words
per thread at 2 warps). On 2 x H200 (hidden 8192 bf16, graphed, one run of the bench's config sweep, 2026-11-27
11:37, bench/results/ar_rmsnorm_2xH200.md) 1 / 2 / 4 / 8 warps ran 5.0 / 5.0 / 5.1 / 7.0 µs at M = 1, 5.4 / 5.5 /
6.1 / 8.6 at M = 4 and 7.3 / 7.0 / 11.9 / 8.6 at M = 16: fewer warps wait less in the exchange of the partial sums
of squares; 2 was never slower than 4."""
SPIN_WORDS_MIN_HIDDEN = 2048
"""...and rows of at least this many elements: the measured regime (hidden 8192), where the spin's workspace is a
few MiB of symmetric heap; short rows get one slice each and a workspace up to 128 MiB at 8 ranks."""


def choose_config(
    nbytes: int, rows: int, device: torch.device, world_size: int, itemsize: int, emulated: bool, fp8: bool = False
) -> ArRmsNormConfig:
    """The config of a call. The algorithm: ``choose_algo`` (``all_reduce``'s choice for a message of ``nbytes``),
    except that a call of at most ``SPIN_WORDS_ROWS`` rows of at least ``SPIN_WORDS_MIN_HIDDEN`` elements on GPUs
    without the e4m3 output (``fp8``) takes the LL one-shot with ``ll_reduce="spin_words"`` at ``SPIN_WORDS_WARPS``
    where its launch can run. Programs: one per row of a flag round, capped by the slots (under the emulation by
    ``EMULATED_PROGRAMS`` of one warp; with more rows than programs, each moves ``round_rows`` per flag round); warps:
    4 up to a 4096-element row, then one per 1024 elements (at most 16)."""
    algo = choose_algo(nbytes, device, world_size, itemsize, emulated)
    hidden = max(1, nbytes // itemsize // max(1, rows))
    spin_sized = 0 < rows <= SPIN_WORDS_ROWS and hidden >= SPIN_WORDS_MIN_HIDDEN
    if algo == "one_shot" and not emulated and not fp8 and spin_sized:
        spin = ArRmsNormConfig("one_shot_ll", SLOTS["one_shot_ll"], SPIN_WORDS_WARPS, ll_reduce="spin_words")
        try:
            ll_launch(rows, hidden, itemsize, spin, emulated)
            return spin
        except ArRmsNormError:  # a row too long for the LL words, or no LL on this build: the flag one-shot
            pass
    most = EMULATED_PROGRAMS if emulated else SLOTS[algo]
    programs = max(1, min(row_programs(algo, rows, world_size), most, SLOTS[algo]))
    num_warps = 1 if emulated else min(16, max(4, block_h(hidden) // 1024))
    return ArRmsNormConfig(algo, programs, num_warps)


# ---------------------------------------------------------------------------------------------------------------
# The LL one-shot ("one_shot_ll"): all_reduce's LL words (ops/all_reduce/kernels.py), one round per program, a row
# shared by up to ``ll_max_slices`` programs.

LL_ROUND_WORDS = 4096
"""LL one-shot: the words one group of programs moves per peer in its one round (32 KiB), unless one row is more:
rows of hidden 8192 bf16 (4096 words) go one per group, shorter rows several."""
LL_MAX_ROW_WORDS = 8192
"""LL one-shot: the most words of one row (``LL_PER_THREAD`` per thread at 16 warps): hidden 16384 in bf16 /
fp16, 8192 in fp32."""
LL_SPLIT_PROGRAMS = 32
"""LL one-shot: rows are split over programs only while the launch stays within this many programs. Every program
of a row reads the whole row (the peers' words, x, the residual, the weight: 80 KiB at hidden 8192 bf16 on 2 ranks)
to norm it, so S slices multiply those local reads by S: worth it while few rows leave most SMs idle (M = 1: 16
programs push 1/16 of the row each instead of one pushing all of it), not once the rows alone fill the GPU."""
LL_READER_PROGRAMS = 128
"""LL one-shot with ``ll_single_reader`` (or ``ll_reduce="atomic"``, whose programs poll only their slice and
one per row norms it): rows are split over pushers while the launch stays within this many programs. A pusher
reads only its slice, so the split no longer multiplies the local reads (``LL_SPLIT_PROGRAMS``);
the bound keeps the launch within one wave of the SMs (132 on H100 / H200) at one program per SM (the row's
registers: 167 per thread at 8 warps on sm_90), so no pusher waits for an SM behind a reader."""
LL_SPIN_MAX_SLICES = 16
"""LL one-shot with ``ll_reduce`` in ``LL_SPINS``: the most programs one row is split over. Each of a row's programs
waits for all of them (``kernels._ar_rmsnorm_ll_spin_kernel``), so they must be resident together: a group of at
most 16 consecutive programs, in a launch of at most ``LL_READER_PROGRAMS`` (one wave of the SMs) wherever a row is
split (past it, one program a row: its own arrival completes its count, nothing waits for another program)."""
EMULATED_LL_SLOTS = 8
"""LL one-shot under the CPU emulation: slots of its workspaces, so the most programs of a launch (each a thread
of the interpreter; the GPU's 256 slots of rows from every rank would crowd a small CPU heap). More than the flag
kernels' ``EMULATED_PROGRAMS``, so that the emulation runs rows split over programs next to several rows."""


@dataclass(frozen=True)
class LLLaunch:
    """An LL one-shot call's grid: ``groups`` x ``slices`` programs, program ``p`` the slice ``p % slices`` of
    group ``p // slices``'s ``rows`` rows (each group one round of one slot workspace's region)."""

    groups: int
    slices: int
    rows: int

    @property
    def programs(self) -> int:
        return self.groups * self.slices


def ll_row_words(hidden: int, itemsize: int) -> int:
    """The LL words of one row: the hidden size in words of ``ll_elements_per_word(itemsize)`` elements, rounded up
    to a power of two (the kernel's block)."""
    return triton.next_power_of_2(triton.cdiv(hidden, ll_elements_per_word(itemsize)))


def ll_max_round_rows(hidden: int, itemsize: int) -> int:
    """The most rows one LL group moves in its round: ``LL_ROUND_WORDS`` of row words, at least one."""
    return max(1, LL_ROUND_WORDS // ll_row_words(hidden, itemsize))


def ll_group_words(hidden: int, itemsize: int, world_size: int) -> int:
    """LL words of one group's region: 2 epoch parities x ``world_size`` senders x one round's words
    (``LL_ROUND_WORDS``, or one longer row): 128 KiB at 2 ranks (32 MiB of symmetric heap for 256 groups)."""
    return 2 * world_size * max(LL_ROUND_WORDS, ll_row_words(hidden, itemsize))


def ll_region_bytes(hidden: int, itemsize: int, world_size: int, slices: int = 1) -> int:
    """LL bytes per slot of the workspace of ``slices`` slices per row: a group's region over its ``slices`` slots
    (group ``g``'s region spans slots ``g * slices`` to ``g * slices + slices - 1``, those of its programs)."""
    return ll_group_words(hidden, itemsize, world_size) * 8 // slices


def ll_num_warps(hidden: int, itemsize: int, num_warps: int) -> int:
    """The LL kernel's warps for a config's ``num_warps``: at least enough for ``LL_PER_THREAD`` words per thread,
    at most one word per thread (fewer words than threads would have threads store a word twice; one warp where a
    row has fewer than 32 words)."""
    words = ll_row_words(hidden, itemsize)
    least = max(1, words // (32 * LL_PER_THREAD))
    most = max(1, words // 32)
    return min(max(num_warps, least), most)


def ll_max_slices(hidden: int, itemsize: int, num_warps: int) -> int:
    """The most programs one row is split over at the config's ``num_warps``: one word of the row per thread and
    slice (a slice narrower than the program's threads would have threads push a word twice); at most 16, as
    ``ll_num_warps`` keeps at most ``LL_PER_THREAD`` words per thread."""
    threads = 32 * ll_num_warps(hidden, itemsize, num_warps)
    return max(1, ll_row_words(hidden, itemsize) // threads)


def ll_spin_max_slices(hidden: int, itemsize: int, num_warps: int) -> int:
    """``ll_reduce`` in ``LL_SPINS``: the most programs one row is split over at ``num_warps``: one word of the row
    per thread and slice, at most ``LL_SPIN_MAX_SLICES``. A spinning program holds only its slice (never the whole
    row, as the other LL kernels do), so the row's length does not raise its warps (``ll_launch_warps``)."""
    return min(LL_SPIN_MAX_SLICES, max(1, ll_row_words(hidden, itemsize) // (32 * num_warps)))


def ll_launch_warps(hidden: int, itemsize: int, config: ArRmsNormConfig, slices: int) -> int:
    """The LL kernel's warps for ``config`` with rows split into ``slices``: ``ll_num_warps`` (a program holds whole
    rows), but for ``ll_reduce`` in ``LL_SPINS``, whose programs hold only a slice of ``ll_row_words / slices``
    words: the config's warps, raised to at most ``LL_PER_THREAD`` words per thread, lowered to at least one word
    per thread."""
    if config.ll_reduce not in LL_SPINS:
        return ll_num_warps(hidden, itemsize, config.num_warps)
    words = ll_row_words(hidden, itemsize) // slices
    least = max(1, words // (32 * LL_PER_THREAD))
    return min(max(config.num_warps, least), max(1, words // 32))


def ll_spin_fp8_config(config: ArRmsNormConfig) -> ArRmsNormConfig:
    """The config an e4m3 call of ``config`` runs: ``ll_reduce`` in ``LL_SPINS`` becomes "atomic" (its kernel, its
    launch and its workspace), whose last arriver holds the whole normed row for the per-token scale; a spinning
    program holds only its slice, and the row's largest magnitude would need a second exchange between the row's
    programs. Any other config is returned as it is."""
    return replace(config, ll_reduce="atomic") if config.ll_reduce in LL_SPINS else config


def ll_launch(rows: int, hidden: int, itemsize: int, config: ArRmsNormConfig, emulated: bool) -> LLLaunch:
    """The grid of an LL one-shot call of ``rows`` rows with ``config`` (at most ``config.programs`` programs, under
    the emulation at most ``EMULATED_LL_SLOTS``): rows in groups of a power of two per round (one while the programs
    outnumber the rows), then each group's rows split into ``slices`` (a power of two, at most ``ll_max_slices``)
    while the launch stays within ``LL_SPLIT_PROGRAMS`` programs (``ll_single_reader`` or ``ll_reduce`` "atomic" /
    "spin" / "spin_words", whose programs read only their slice: ``LL_READER_PROGRAMS``),
    or (``config.ll_slices``) into that many while the launch stays within the programs. ``LL_SPINS``: at most
    ``ll_spin_max_slices``, and within ``LL_READER_PROGRAMS`` programs even where ``ll_slices`` asks for more (a
    row's programs wait for each other: they must be resident together). Raises ArRmsNormError
    where this cannot run: not NVIDIA (its PTX 8-byte system-scope accesses; the emulation runs it anywhere), a row
    past ``LL_MAX_ROW_WORDS`` words, more rows than the programs' rounds hold."""
    if not emulated and not ll_supported():
        raise ArRmsNormError(
            f"{OP_NAME}: one_shot_ll needs an NVIDIA GPU (8-byte relaxed system-scope PTX loads and stores): use "
            "one_shot or two_shot"
        )
    per_word = ll_elements_per_word(itemsize)
    if ll_row_words(hidden, itemsize) > LL_MAX_ROW_WORDS:
        raise ArRmsNormError(
            f"{OP_NAME}: one_shot_ll moves rows of at most {LL_MAX_ROW_WORDS * per_word} elements of {itemsize} "
            f"bytes, got hidden {hidden}: use one_shot or two_shot"
        )
    most = min(config.programs, EMULATED_LL_SLOTS if emulated else SLOTS["one_shot_ll"])
    together = triton.next_power_of_2(triton.cdiv(max(rows, 1), most))
    limit = ll_max_round_rows(hidden, itemsize)
    if together > limit:
        raise ArRmsNormError(
            f"{OP_NAME}: one_shot_ll with {most} programs moves at most {most * limit} rows of hidden {hidden} "
            f"({limit} per program, one round), got {rows}: use more programs (up to {SLOTS['one_shot_ll']}) or "
            "one_shot / two_shot"
        )
    groups = triton.cdiv(max(rows, 1), together)
    whole_rows = not config.ll_single_reader and config.ll_reduce == "row"  # every program reads whole rows
    split = LL_SPLIT_PROGRAMS if whole_rows else LL_READER_PROGRAMS
    budget = min(most, split) if config.ll_slices == 0 else min(most, config.ll_slices * groups)
    if config.ll_reduce in LL_SPINS:
        budget = min(budget, LL_READER_PROGRAMS)
        widest = ll_spin_max_slices(hidden, itemsize, config.num_warps)
    else:
        widest = ll_max_slices(hidden, itemsize, config.num_warps)
    slices = min(widest, _pow2_floor(budget // groups))
    return LLLaunch(groups, slices, together)
