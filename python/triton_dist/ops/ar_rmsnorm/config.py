"""How a fused all-reduce + residual + RMSNorm runs: the algorithm (one-shot push or two-shot, chosen by message
size with the all-reduce's tables), the programs, and the per-slot workspace a row needs."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from triton_dist.ops import tuning
from triton_dist.ops.common.errors import OpInputError


class ArRmsNormError(OpInputError, TypeError):
    """Bad input to ``all_reduce_residual_rmsnorm`` (shapes, dtypes, devices, layout, a hidden size the norm
    cannot tile, ranks that disagree). An :class:`~triton_dist.ops.common.errors.OpInputError` (a ``ValueError``),
    also a ``TypeError`` for a wrong dtype or a non-tensor argument."""


OP_NAME = "all_reduce_residual_rmsnorm"
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
ALGORITHMS = ("one_shot", "two_shot")
SLOTS = {"one_shot": 256, "two_shot": 128}
"""Program slots per workspace: the most programs of one launch (each moves one row per flag round)."""
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


def region_bytes(algo: str, hidden: int, itemsize: int, world_size: int) -> int:
    """Bytes per slot: one-shot, 2 parities x W inbox rows; two-shot, W inbox rows + W x 2 gathered rows."""
    rows = 2 * world_size if algo == "one_shot" else 3 * world_size
    return rows * block_h(hidden) * itemsize


EMULATED_PROGRAMS = 2
"""The most programs under the CPU emulation (each one a thread of Triton's interpreter), of one warp."""

_algorithms: dict[tuple[int, str], list[tuple[int, str]] | None] = {}
"""Per (world size, GPU): the all-reduce table's rows as (largest message in bytes, algorithm); None: no table."""


def all_reduce_rows(world_size: int, gpu: str) -> list[tuple[int, str]] | None:
    """The rows of ``all_reduce``'s stored table for ``world_size`` ranks of ``gpu`` (the user's tuning cache, else
    the package's ``ops/tuned_configs.json``, entry ``all_reduce|table|<world size>|<gpu>``) as (bytes, algorithm);
    None if neither has one. Read once per process; a malformed table raises ArRmsNormError naming it."""
    memo = (world_size, gpu)
    if memo not in _algorithms:
        entry = tuning.lookup_entry(f"all_reduce|table|{world_size}|{gpu}")
        rows = None
        if entry is not None:
            try:
                rows = [(int(nbytes), str(fields["algo"])) for nbytes, fields in entry["config"]["rows"]]
            except (KeyError, TypeError, ValueError) as error:
                raise ArRmsNormError(f"{OP_NAME}: the stored all_reduce table is malformed ({error})") from error
        _algorithms[memo] = rows
    return _algorithms[memo]


def heuristic_algo(nbytes: int, world_size: int) -> str:
    """Without a table: one-shot up to 512 KiB / W, else two-shot (``all_reduce``'s heuristic's bound)."""
    return "one_shot" if nbytes <= (512 << 10) // max(1, world_size) else "two_shot"


def choose_config(
    nbytes: int, rows: int, device: torch.device, world_size: int, itemsize: int, emulated: bool
) -> ArRmsNormConfig:
    """The config of a call. The algorithm: ``all_reduce``'s stored table for this GPU and world size decides
    two-shot versus one-shot for a message of ``nbytes`` (the first row covering it, the last row past its end;
    every one-shot variant maps to the push one-shot), else ``heuristic_algo`` (always under the CPU emulation).
    Programs: one per row of a flag round, capped by the slots (under the emulation by ``EMULATED_PROGRAMS`` of
    one warp); warps: 4 up to a 4096-element row, then one per 1024 elements (at most 16)."""
    table = None if emulated else all_reduce_rows(world_size, torch.cuda.get_device_name(device))
    if table:
        found = next((algo for bound, algo in table if nbytes <= bound), table[-1][1])
        algo = "two_shot" if found == "two_shot" else "one_shot"
    else:
        algo = heuristic_algo(nbytes, world_size)
    most = EMULATED_PROGRAMS if emulated else SLOTS[algo]
    programs = max(1, min(row_programs(algo, rows, world_size), most, SLOTS[algo]))
    hidden = max(1, nbytes // itemsize // max(1, rows))
    num_warps = 1 if emulated else min(16, max(4, block_h(hidden) // 1024))
    return ArRmsNormConfig(algo, programs, num_warps)
