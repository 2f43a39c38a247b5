"""How a ``flash_decode`` call runs: :class:`FlashDecodeConfig`, its defaults, the split and combiner counts, and
the record workspace a call needs."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import triton

from triton_dist.ops.common.errors import OpInputError


class FlashDecodeError(OpInputError, TypeError):
    """Bad input to ``flash_decode`` (shapes, dtypes, devices, layout, scale, a config that cannot run, ranks that
    disagree).

    An :class:`~triton_dist.ops.common.errors.OpInputError` (so a ``ValueError``); also a ``TypeError``, which a
    wrong dtype, scale type or a non-tensor argument raised before the family existed.
    """


SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
HEAD_DIM = 128
MAX_GROUP = 16
"""Query heads per KV head (a tl.dot needs >= 16 rows: the group is padded to 16)."""
ROWS = 16
"""The query rows of one program's tile: the group, padded to what a tl.dot needs."""
RECORD_PAD = 16
"""Floats after a record's [group, 128] output for its per-head log-sum-exp (16 keeps records 64-byte aligned)."""
MAX_RECORD_BYTES = 64 << 20
"""Per parity, per rank: the most record memory one call may use (batch 64 x 8 KV heads x 16-head groups on 8
ranks needs 33.8 MB with one split per group)."""
MAX_FLAGS = 1 << 16
"""Per parity: the most flags (programs x ranks) one call may use."""
MIN_RECORD_BYTES = 1 << 20
MIN_FLAGS = 1 << 10
MAX_SPLITS = 128
COMBINERS = 4
"""The most combining programs per (sequence, KV head) on each rank (``choose_combiners``), each for ``HEAD_DIM /
COMBINERS`` = 32 of the output's columns (a 128-byte segment of every record row). One combiner per group combines
its records in several dependent steps (a full-width tile holds only a few of them); four combiners over a quarter
of the columns each load every record at once."""
COMBINE_TILE_FLOATS = 8192
"""The most floats a combiner loads per step: an [RG, CHUNK, 32] fp32 tile, 64 registers per thread at 4 warps."""
BLOCK_NS = (16, 32, 64, 128)
INT32_MAX = 2**31 - 1
MAX_LOCAL_LEN = 1 << 30
"""Keeps the kernel's 32-bit token indices (a split's end, a block's last token) below 2^31."""


@dataclass(frozen=True)
class FlashDecodeConfig:
    """``splits`` per (sequence, KV head) on each rank (0: chosen from the shape), key block, warps, stages.

    These defaults (block_n 64) compile without register spills for sm_90 and gfx942 and fit both's shared memory
    (sm_90: 71,680 of 232,448 bytes; gfx942: 65,536 of 65,536); :func:`default_config` picks per target. Other
    combinations may spill (block_n 32 with 8 warps on sm_90) or exceed gfx942's 64 KiB (block_n 128 with 3 or 4
    stages: Triton then refuses the launch)."""

    splits: int = 0
    block_n: int = 64
    num_warps: int = 4
    num_stages: int = 3
    combiners: int = 0
    """Combiner programs per (sequence, KV head), each for ``128 / combiners`` of the head dim: 1, 2, 4 or 8 (0: a
    call takes ``choose_combiners``'s count for its batch and GPU)."""

    def __post_init__(self) -> None:
        if not 0 <= self.splits <= MAX_SPLITS:
            raise FlashDecodeError(f"flash_decode: splits must be in [0, {MAX_SPLITS}], got {self.splits}")
        if self.block_n not in BLOCK_NS:
            raise FlashDecodeError(f"flash_decode: block_n must be one of {list(BLOCK_NS)}, got {self.block_n}")
        if self.num_warps not in (4, 8):  # fewer warps spill registers at block_n >= 64 on sm_90
            raise FlashDecodeError(f"flash_decode: num_warps must be 4 or 8, got {self.num_warps}")
        if not 1 <= self.num_stages <= 4:
            raise FlashDecodeError(f"flash_decode: num_stages must be in [1, 4], got {self.num_stages}")
        if self.combiners not in (0, 1, 2, 4, 8):
            raise FlashDecodeError(
                f"flash_decode: combiners must be 0 (the default), 1, 2, 4 or 8, got {self.combiners}"
            )

    @property
    def combiner_count(self) -> int:
        """The combiner count ``launch_args`` launches: ``combiners``, or ``COMBINERS`` where it is 0 (a call has
        decided it before, with ``choose_combiners``)."""
        return self.combiners or COMBINERS


MANY_GROUPS_ROUNDS = 2
"""NVIDIA: from this many groups per SM (batch x KV heads >= this x SMs: the default's one program per SM would take
at least two rounds), a call without a config uses ``MANY_GROUPS_CONFIG``."""


def default_config(backend: str, groups: int = 0, sms: int = 0) -> FlashDecodeConfig:
    """The config a call without one uses on a Triton backend (``"cuda"`` / ``"hip"``) for ``groups`` (batch x KV
    heads) on ``sms`` SMs (0, 0: a few groups).

    NVIDIA: 128-token key blocks, faster than 64-token blocks at batch 1 and as fast at batch 8
    (bench/flash_decode.py, graphed); ``MANY_GROUPS_CONFIG`` from ``MANY_GROUPS_ROUNDS`` groups per SM. AMD keeps 64
    (128 at 3 stages exceeds its 64 KiB of LDS)."""
    if backend != "cuda":
        return FlashDecodeConfig()
    if sms > 0 and groups >= MANY_GROUPS_ROUNDS * sms:
        return MANY_GROUPS_CONFIG
    return FlashDecodeConfig(block_n=128)


CONFIG_ENV = "TRITON_DIST_FLASH_DECODE_CONFIG"
"""An environment variable: the config a call without one uses on GPUs, as ``config_from_text`` reads it (e.g.
``block_n=64,num_stages=4``), instead of ``default_config``'s; read at each call signature's first call. Unset or
empty: the default. For trying a config in a whole model (bench/decoder.py) before it becomes a default."""

MANY_GROUPS_CONFIG = FlashDecodeConfig(block_n=64, num_warps=4, num_stages=4)
"""NVIDIA's default for many (sequence, KV head) groups (``MANY_GROUPS_ROUNDS``), e.g. batch 64 x 8 KV heads:
bench/flash_decode_batch.py at the decoder's batch-64 shapes (2 x H200, 2026-11-27 17:42, 8ca72c0) gave 138.0 and
139.9 µs against the 128-token default's 150.6 and 152.8 (1.09x; 93% of the copy rate against 85%; cuDNN's SDPA
129.3 / 130.0 on the same bytes). Its programs are all alike and start together, so they end together: each
round of programs over the SMs' slots ends with every SM draining its last blocks, storing records and starting
the next program at once, HBM idle meanwhile. Fewer, fuller rounds: compiled for sm_90 it needs 104,448 bytes of
shared memory and 80 registers a thread, so an SM holds two programs (``programs_per_sm``) where the default's
139,264 bytes allow one, and batch 64's 512 producers take 1.94 rounds of 2 x 132 slots instead of 3.88 of 132
(three stages of 64-token blocks fit three programs, but then 512 take 1.29 rounds: a second round of 116 programs
alone on their SMs). Four stages keep two blocks (64 KB) of each program in flight while it computes; combiners
share an SM instead of taking one. docs/design.md, "flash_decode at batch 64"."""


def config_from_text(text: str) -> FlashDecodeConfig:
    """A config from ``name=value`` pairs separated by commas (the fields of :class:`FlashDecodeConfig`, integers;
    fields left out keep NVIDIA's default), e.g. ``"block_n=64,num_stages=3"`` or ``"splits=2,block_n=128"``.

    Raises FlashDecodeError naming an unknown field, a pair without ``=``, a value that is not an integer, or a
    value the config refuses."""
    names = [field.name for field in fields(FlashDecodeConfig)]
    values: dict[str, int] = {}
    for pair in (part.strip() for part in text.split(",")):
        if not pair:
            continue
        name, sep, value = (piece.strip() for piece in pair.partition("="))
        if not sep or name not in names:
            raise FlashDecodeError(
                f"flash_decode: a config is name=value pairs of {names} separated by commas, got {pair!r} in {text!r}"
            )
        try:
            values[name] = int(value)
        except ValueError:
            raise FlashDecodeError(f"flash_decode: config field {name} must be an integer, got {value!r}") from None
    base = default_config("cuda")
    return FlashDecodeConfig(**{name: values.get(name, getattr(base, name)) for name in names})


def config_text(config: FlashDecodeConfig) -> str:
    """``config`` as ``config_from_text`` reads it (every field)."""
    return ",".join(f"{field.name}={getattr(config, field.name)}" for field in fields(FlashDecodeConfig))


SM90_SHARED_PER_SM = 233_472
"""Shared memory of one sm_90 SM (228 KiB); a program may use at most 227 KiB of it."""
SM90_SHARED_RESERVED = 1024
"""Shared memory the hardware reserves for each resident program on sm_90."""
SM90_REGISTERS_PER_SM = 65_536
SM90_WARPS_PER_SM = 64
SM90_PROGRAMS_PER_SM = 32


def programs_per_sm(shared_bytes: int, registers: int, num_warps: int) -> int:
    """How many programs of a compiled kernel one sm_90 SM runs at once: the fewest that its shared memory allows
    (``shared_bytes`` plus the 1 KiB reserved per program, in 128-byte units, of 228 KiB), its registers
    (``registers`` a thread, allocated per warp in units of 256, of 64K) and its 64 warps (at most 32 programs).

    The default config at batch 64 compiles to 139,264 bytes and 113 registers with 4 warps: 1 program per SM;
    ``MANY_GROUPS_CONFIG``: 104,448 bytes, 80 registers: 2. Raises FlashDecodeError for a negative size, registers
    outside [1, 255] or warps outside [1, 32], or shared memory beyond what one program may have (227 KiB)."""
    if shared_bytes < 0 or not 1 <= registers <= 255 or not 1 <= num_warps <= 32:
        raise FlashDecodeError(
            f"programs_per_sm: needs shared_bytes >= 0, registers in [1, 255] and num_warps in [1, 32], got "
            f"{shared_bytes}, {registers}, {num_warps}"
        )
    if shared_bytes > SM90_SHARED_PER_SM - SM90_SHARED_RESERVED:
        raise FlashDecodeError(f"programs_per_sm: {shared_bytes} bytes of shared memory exceed one sm_90 program's")
    per_program_shared = -(-(shared_bytes + SM90_SHARED_RESERVED) // 128) * 128
    per_warp_registers = -(-(registers * 32) // 256) * 256
    return min(
        SM90_SHARED_PER_SM // per_program_shared,
        SM90_REGISTERS_PER_SM // (per_warp_registers * num_warps),
        SM90_WARPS_PER_SM // num_warps,
        SM90_PROGRAMS_PER_SM,
    )


def record_floats(group: int) -> int:
    """Floats of one record (a group's output rows and log-sum-exps)."""
    return group * HEAD_DIM + RECORD_PAD


def combine_rows(group: int) -> int:
    """The combine's rows (``RG``): the group padded to a power of two (no tl.dot there: no 16-row minimum)."""
    return triton.next_power_of_2(group)


def combine_chunk(group: int, records: int, combiners: int = COMBINERS) -> int:
    """Records a combiner loads per step (``CHUNK``) of the ``records`` (W x splits) it combines: all of them, up
    to an [RG, CHUNK, 128 / combiners] fp32 tile of ``COMBINE_TILE_FLOATS`` (with 4 combiners, the 32 records of an
    8-head group at 2 ranks x 16 splits in one step)."""
    most = max(1, COMBINE_TILE_FLOATS // (combine_rows(group) * (HEAD_DIM // combiners)))
    return min(most, triton.next_power_of_2(max(1, records)))


def workspace_need(batch: int, kv_heads: int, group: int, splits: int, world_size: int) -> tuple[int, int]:
    """(record floats, flags) per parity of one call: a record and a flag per (sequence, KV head, rank, split)."""
    slots = batch * kv_heads * world_size * splits
    return slots * record_floats(group), slots


def fits_workspace(batch: int, kv_heads: int, group: int, splits: int, world_size: int) -> bool:
    floats, flags = workspace_need(batch, kv_heads, group, splits, world_size)
    return floats * 4 <= MAX_RECORD_BYTES and flags <= MAX_FLAGS


def choose_splits(
    batch: int, kv_heads: int, group: int, local_len: int, world_size: int, sms: int, block_n: int
) -> int:
    """Splits per (sequence, KV head), at least two key blocks per split, within the workspace limits (1 when even
    one split does not fit: the call then raises, naming the workspace).

    Whole waves of producers: one per SM when there are few (sequence, KV head) groups (at most a quarter of the
    SMs: every combiner then has many splits to combine, so fewer, longer producers win), else two per SM. With the
    split count forced (bench/flash_decode.py, graphed), these counts were the fastest at batch 1 and batch 8 over
    32k-256k tokens, and more splits per group were slower."""
    groups = batch * kv_heads
    if groups == 0:
        return 1
    per_sm = 1 if 4 * groups <= sms else 2
    splits = max(1, min(MAX_SPLITS, per_sm * sms // groups))
    splits = min(splits, max(1, local_len // (2 * block_n)))
    by_records = MAX_RECORD_BYTES // (groups * world_size * record_floats(group) * 4)
    by_flags = MAX_FLAGS // (groups * world_size)
    return max(1, min(splits, by_records, by_flags))


def choose_combiners(groups: int, sms: int) -> int:
    """Combiner programs per (sequence, KV head): ``COMBINERS`` while the groups' combiners fit one wave of the
    ``sms`` SMs, else the largest power of two that does (at least 1). A combiner takes an SM slot like a producer
    (with the default key block the kernel's shared memory leaves room for one program per SM on sm_90), so with
    many groups more combiners would cost more than the shorter combine saves: with few groups any count from 2 to
    8 beats one, and where the groups fill half the SMs two beat four. With more groups than SMs the rule gives 1,
    not measured."""
    fit = max(1, sms // max(1, groups))
    return min(COMBINERS, 1 << (fit.bit_length() - 1))


def needs_wide_offsets(k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether a token's element offset within a (sequence, KV head) can pass int32 (the kernel's ``WIDE``)."""
    local_len = k.shape[2]
    return any((local_len - 1) * t.stride(2) + HEAD_DIM > INT32_MAX for t in (k, v))
