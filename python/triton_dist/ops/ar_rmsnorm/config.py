"""How a fused all-reduce + residual + RMSNorm runs: the algorithm (one-shot push or two-shot, as ``all_reduce``
chooses for the message size: ``all_reduce.select_config``), the programs, the per-slot workspace a row needs, and
the fp8 output's per-token scale."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from triton_dist.ops.all_reduce import AllReduceError, emulated_config, select_config
from triton_dist.ops.common.errors import OpInputError


class ArRmsNormError(OpInputError, TypeError):
    """Bad input to ``all_reduce_residual_rmsnorm`` (shapes, dtypes, devices, layout, a hidden size the norm
    cannot tile, ranks that disagree). An :class:`~triton_dist.ops.common.errors.OpInputError` (a ``ValueError``),
    also a ``TypeError`` for a wrong dtype or a non-tensor argument."""


OP_NAME = "all_reduce_residual_rmsnorm"
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
ALGORITHMS = ("one_shot", "two_shot")
SLOTS = {"one_shot": 256, "two_shot": 128}
"""Program slots per workspace: the most programs of one launch (each moves ``round_rows`` rows per flag round)."""
MAX_HIDDEN = 32768
"""The largest hidden size: a program holds one row (``next_power_of_2(hidden)`` fp32 values) in registers."""


@dataclass(frozen=True)
class ArRmsNormConfig:
    """``algo`` "one_shot" (the push one-shot: every rank sums every row) or "two_shot" (each rank sums and norms
    its chunk of rows, then gathers the others'), at most ``programs`` programs of ``num_warps`` warps."""

    algo: str
    programs: int
    num_warps: int = 4

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


def block_h(hidden: int) -> int:
    """The row block: the hidden size rounded up to a power of two (at least 16 elements)."""
    return max(16, triton.next_power_of_2(hidden))


def row_programs(algo: str, rows: int, world_size: int) -> int:
    """The rows one flag round of all programs covers: every row (one-shot), one chunk of ``cdiv(rows, W)``
    (two-shot)."""
    return rows if algo == "one_shot" else triton.cdiv(rows, world_size)


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


def choose_config(
    nbytes: int, rows: int, device: torch.device, world_size: int, itemsize: int, emulated: bool
) -> ArRmsNormConfig:
    """The config of a call. The algorithm: ``choose_algo`` (``all_reduce``'s choice for a message of ``nbytes``).
    Programs: one per row of a flag round, capped by the slots (under the emulation by ``EMULATED_PROGRAMS`` of
    one warp; with more rows than programs, each moves ``round_rows`` per flag round); warps: 4 up to a
    4096-element row, then one per 1024 elements (at most 16)."""
    algo = choose_algo(nbytes, device, world_size, itemsize, emulated)
    most = EMULATED_PROGRAMS if emulated else SLOTS[algo]
    programs = max(1, min(row_programs(algo, rows, world_size), most, SLOTS[algo]))
    hidden = max(1, nbytes // itemsize // max(1, rows))
    num_warps = 1 if emulated else min(16, max(4, block_h(hidden) // 1024))
    return ArRmsNormConfig(algo, programs, num_warps)
