"""The tuning switches and launch constants of ``moe_dispatch`` / ``moe_combine`` (the host op: ``op.py``), each with
the measurements that chose it, and the setters of the switches.

This module is their one home: ``op.py`` reads each name here as ``switches.NAME`` when a call runs, so a setter (or a
test's assignment) takes effect from the next dispatch or combine. A setter checks its argument, raises
:class:`~triton_dist.ops.moe.config.MoeError` if it is wrong, and returns the previous setting; where a docstring says
so, every rank must set the same (the kernels' flags differ between the two ways). Names in double backquotes that are
not defined here are ``op.py``'s (``_self_push``, ``_Plan.busiest_slots``) or the kernels' constexprs (``SELF``,
``WAVES``: ``kernels.py``).

- Dispatch: the gather layout's block copy (:data:`BULK_COPIERS_PER_SM`), this rank's own rows
  (:data:`SELF_PUSH_MIN_ELEMENTS`, :data:`OWN_ROWS_IN_PUSH`), the expand beside the push (:data:`EXPAND_OVERLAPS_PUSH`,
  :data:`EXPAND_WAVES`), the fp8 push (:data:`FP8_OVERLAPS_PUSH`, :data:`FP8_NARROW_PUSH`, :data:`FP8_RECIPROCAL`,
  :data:`FP8_PREQUANTIZE`), which kernel's programs are placed first (:data:`PUSH_RESIDENT_FIRST`,
  :data:`EXPAND_RESIDENT_FIRST`).
- Combine: the reduce beside the push (:data:`REDUCE_OVERLAPS_PUSH`, :data:`COMBINE_WAVES`,
  :data:`COMBINE_WAVE_MIN_SLOTS`, :data:`COMBINE_WAVES_BY_PROGRAMS`), the own partials in the reduce
  (:data:`OWN_PARTIALS_IN_REDUCE`), the choice by size (:data:`COMBINE_AUTO`).
"""

from __future__ import annotations

from triton_dist.ops.moe.config import MoeError


def _switch(name: str, on: bool) -> bool:
    """Set the module's bool option ``name`` (``set_<name lowercased>``'s body) to ``on``; returns the previous
    setting. Raises :class:`MoeError` if ``on`` is not a bool."""
    if not isinstance(on, bool):
        raise MoeError(f"set_{name.lower()}: on must be True or False, got {on!r}")
    previous = globals()[name]
    globals()[name] = on
    return previous


BULK_COPIERS_PER_SM = 4
"""Copy programs per SM the expand kernel gets on top of its ``EXPAND_PER_SM`` with ``MoeConfig(pipelined=True)`` in
the gather layout on one node (GPUs; none under the CPU emulation, where its programs copy after their meta rows):
they copy the received tokens' payload, slots ``[0, N)`` of the token buffer, into ``recv_x`` as one flat block while
the other programs write the meta. The block copy was a ``copy_`` after the kernel, 90 µs of a 281 µs dispatch on
2 x H200 at 4096 tokens per rank (2026-11-27, expand 32 µs before it); in the kernel it overlaps the meta rows, and
the host launches nothing after the expand kernel. Four per SM with the meta programs' four keep 8 x 128 threads
resident at up to 64 registers each, and 4 x ``BULK_COPY_BLOCK`` payload elements in flight per SM."""
BULK_COPY_BLOCK = 4096
"""Payload elements one copy program moves per step (8 KB of bf16: four 16-byte vectors per thread at 4 warps; 8192
took the kernel to 66 registers per thread with its copy programs, 69 leaving the own rows out, over the 64 at which
its eight programs per SM fit, where 4096 takes 48 and 56 on sm_90). An fp8 payload moves twice as many
(``bulk_copy_block``): the same 8 KB a step."""


def bulk_copy_block(fp8: bool) -> int:
    """Payload elements a copy program of the gather layout's block copy moves per step: ``BULK_COPY_BLOCK`` (8 KB of
    bf16), or with an fp8 payload (``fp8``) twice that, the same 8 KB in 16-byte vectors per thread. (At 4096 fp8
    elements a step its copy took as many steps as bf16's for half the bytes: the fp8 expand on 2 x H200 ran 48-50 µs
    at 4096 tokens per rank, bf16's 47-53. 8192 keep the kernel at 48 registers on sm_90, under bf16's 56.)"""
    return 2 * BULK_COPY_BLOCK if fp8 else BULK_COPY_BLOCK


SELF_PUSH_MIN_ELEMENTS = 1 << 20
"""``T * H`` from which a GPU rank's pipelined gather dispatch without fp8 stores its own tokens' payload straight into
``recv_x`` (``_self_push``; the CPU emulation at any size). The push kernel, launched before the host knows
``recv_x``, leaves them out of the token buffer; a second launch of it (``SELF = 2``), on a side stream once ``recv_x``
is allocated, stores them into ``recv_x`` while the first still pushes to the other ranks over the links (the local
memory has bandwidth to spare there), and the expand kernel's block copy leaves their rows out: at 2 ranks, half of
the copy after the push. Below it the side stream's host calls (a stream switch, two events) would cost about what
the copy of so few rows does."""


OWN_ROWS_IN_PUSH = False
"""An option (default off; :func:`set_own_rows_in_push`; :data:`EXPAND_OVERLAPS_PUSH`, on by default, implies it):
where ``_self_push`` would store this rank's own tokens' payload from a side stream (the pipelined gather dispatch
without fp8), and in the pipelined gather dispatch of fp8 rows kept with their scales, the push kernel's one launch
stores it instead (``SELF = 3``), at any ``T * H``: ``recv_x`` is allocated before the push is launched, with the
plan's token slots as rows (which bound the tokens this rank receives whenever the early push does its work), and
returned as its first ``N`` rows (fp8: the quantized row, its scales in the meta row as for the other ranks). The
side stream's launch waits for the host to read the summary and allocate ``recv_x``, so how long after the push it
ends depends on the host (issue 27: ``own`` 28, 49 and 118 µs in three runs of the same code on 2 x H200 at 4096
tokens per rank); in the push's own launch that payload is stored from the row the push loaded for the other ranks,
beside its stores over the links, and nothing waits for the host but the expand kernel's launch. Same results, bit
for bit. Measured on 2 x H200 (2026-11-27, ``bench/moe.py --only-dispatch``, 4096 tokens per rank, bf16, alone,
without :data:`EXPAND_OVERLAPS_PUSH`): 249.5 / 278.3 µs in two runs against the side stream's 357.1 / 383.6 µs.
Dequantized on receipt (``moe_dispatch(..., dequantize=True)``) the expand copies each row itself and this does not
apply; fp8 rows kept take it only with :data:`FP8_OVERLAPS_PUSH` (on by default)."""


def set_own_rows_in_push(on: bool) -> bool:
    """Turn :data:`OWN_ROWS_IN_PUSH` on or off for every dispatch from now on (the plans are kept: the two ways use
    different push launches and the same expand launch); returns the previous setting. Raises :class:`MoeError` if
    ``on`` is not a bool."""
    return _switch("OWN_ROWS_IN_PUSH", on)


EXPAND_OVERLAPS_PUSH = True
"""On by default (:func:`set_expand_overlaps_push` turns it off): where :data:`OWN_ROWS_IN_PUSH` applies (the pipelined
gather dispatch, bf16 / fp16 / fp32, or fp8 rows kept with their scales with :data:`FP8_OVERLAPS_PUSH`, which it turns
on with it), the expand kernel is launched right after the early push, beside it on a side stream, and copies each part
of the token buffer as soon as it has landed instead of after the whole push (issue 27: route 33, push 172-175, expand
70-75 µs one after the other on 2 x H200 at 4096 tokens per rank, against the 228 µs of the 75% bar). Measured on 2 x
H200 (2026-11-27, ``bench/moe.py --only-dispatch --expand-waves 8,16``, 4096 tokens per rank, H 7168, top-8 of 256,
bf16, two runs of the same code): 228.9 / 230.8 µs at 4 waves, 224.3 / 225.3 at 8 (:data:`EXPAND_WAVES`; 76% of the push
all-gather's bandwidth, the bar's 75% met), 225.5 / 225.8 at 16, against 357.1 / 383.6 µs for the pipelined gather
dispatch without it and 249.5 / 278.3 with :data:`OWN_ROWS_IN_PUSH` alone. fp8 rows kept take it only with
:data:`FP8_OVERLAPS_PUSH` (on by default, with :data:`FP8_NARROW_PUSH`: 196.9 µs against 336.7 for the expand after the
16-warp push, 2 x H200, 2026-11-27; off, their pipelined gather dispatch keeps the expand after the push: 285.8 / 341.5
µs in those two runs); dequantized on receipt the expand copies and widens each row itself, after the push, as before
(the expand beside the push copies the payload only as flat blocks of the token buffer, which a widened row is not).

- The push (``WAVES``) splits its tokens into :data:`EXPAND_WAVES` waves of consecutive tokens (whole route count
  programs' ranges) and each program sets a flag per (wave, every rank) once it has pushed its tokens of that wave;
  its program 0 first writes, per destination, how many of its tokens bound there come before each wave's end (the
  route count programs' prefixes), so a receiver knows the slots of each (source, wave): consecutive, as a source's
  slots are in token order.
- The expand kernel (``WAVES``) waits per (wave, source), wave by wave, for that unit's flags of every push program,
  then writes the meta of its slots (``EXPAND_OVERLAP_PER_SM`` programs per SM; fp8: each slot's scales, from its
  meta row) and copies its payload (``OVERLAP_COPIERS_PER_SM`` copy programs per SM; this rank's own rows are in
  ``recv_x`` already). When the last wave lands, one wave's share of the expand remains.
- The host must know, before the summary, where the outputs go: ``recv_x`` (and fp8's scales) has a row per token
  slot (as with ``OWN_ROWS_IN_PUSH``) and the other outputs a row per (token slot, k) and per token slot, allocated
  before the launch; the returned tensors are their first rows. The expand reads the counts matrix (the route
  kernel's, complete before the launch: the side stream waits for the route kernels' event) and, like the early
  push, does nothing if the buffers must grow (the summary's sizes); then both go again after it, as without the
  option.
- Progress: the expand's programs spin on flags only the pushes set, and the push waits for nothing, so the push needs
  SMs to run on, one program at a time at least. On sm_90 (H = 7168, k = 8) the bf16 push with its waves takes 96
  registers per thread, the expand beside it 56, neither shared memory: two push and four expand programs of 128 threads
  per SM use 53,248 of 65,536 registers and 768 of 2,048 threads, so both launches are resident together whichever the
  GPU starts first; and however it places the expand's programs (4 per SM on average), some SM holds at most 4 of them
  and has room for a push program (``test_ops_moe_kernels.py`` checks the registers, bf16's and fp8's, whose push runs 4
  warps with :data:`FP8_NARROW_PUSH`, ``FP8_PUSH_WARPS`` without). Nothing else may fill the SMs meanwhile (another
  stream's spinning kernels).
- ``MoeConfig.expand_block`` is ignored by the expand beside the push (one token's meta a step).

Same results, bit for bit."""


def set_expand_overlaps_push(on: bool) -> bool:
    """Turn :data:`EXPAND_OVERLAPS_PUSH` on or off for every dispatch from now on; returns the previous setting. Every
    rank sets the same (the pushes' flags differ). Raises :class:`MoeError` if ``on`` is not a bool."""
    return _switch("EXPAND_OVERLAPS_PUSH", on)


EXPAND_WAVES = 8
"""Waves of the push with :data:`EXPAND_OVERLAPS_PUSH` (:func:`set_expand_waves`; at most the route count programs:
fewer under the CPU emulation's route programs, at least 1). More leave a smaller last wave for the expand after
the push, at one more flag round per push program each: on 2 x H200 at 4096 tokens per rank (2026-11-27, bf16, two
runs each) 4 waves took 228.9 / 230.8 µs, 8 took 224.3 / 225.3 and 16 225.5 / 225.8."""
MAX_EXPAND_WAVES = 16
"""The most :data:`EXPAND_WAVES`: the ``waves`` workspace is sized and laid out for it (the kernels' ``WAVE_SLOTS``),
whatever the call's waves, so flags and slot counts keep their places when the waves change between calls (laid out by
the call's waves, a call after one with other waves could find the last call's slot counts where it waited for its
flags: a slot count equal to the epoch read as a landed wave)."""


def set_expand_waves(waves: int) -> int:
    """Set :data:`EXPAND_WAVES` for every dispatch from now on (every rank the same); returns the previous one. Raises
    :class:`MoeError` unless ``waves`` is a power of two in [1, ``MAX_EXPAND_WAVES``]."""
    global EXPAND_WAVES
    if type(waves) is not int or waves < 1 or waves > MAX_EXPAND_WAVES or waves & (waves - 1):
        raise MoeError(f"set_expand_waves: waves must be a power of two in [1, {MAX_EXPAND_WAVES}], got {waves!r}")
    previous, EXPAND_WAVES = EXPAND_WAVES, waves
    return previous


EXPAND_OVERLAP_PER_SM = 2
"""Meta programs per SM of the expand kernel beside the push (:data:`EXPAND_OVERLAPS_PUSH`; GPUs: under the CPU
emulation the push's programs): ``NORMAL_PROGRAMS_PER_SM``, the push's by default (:func:`set_expand_overlap_per_sm`).
Read when the expand is launched: a new value takes effect from the next dispatch (a launch plan of its own)."""
OVERLAP_COPIERS_PER_SM = 2
"""Copy programs per SM of the expand kernel beside the push (:data:`EXPAND_OVERLAPS_PUSH`; GPUs: none under the CPU
emulation), after its meta programs (:func:`set_overlap_copiers_per_sm`). Read when the expand is launched, as
:data:`EXPAND_OVERLAP_PER_SM`."""
MAX_OVERLAP_PER_SM = 4
"""The most programs per SM of the expand kernel beside the push, :data:`EXPAND_OVERLAP_PER_SM` and
:data:`OVERLAP_COPIERS_PER_SM` together (the setters refuse more). With :data:`EXPAND_RESIDENT_FIRST` every program
of the expand is resident before any push program is placed, and the expand's programs spin until the push's waves
land, so an SM must keep room for a push program beside them: on sm_90 at H = 7168 the expand takes 56 registers
(7,168 a program of 4 warps) and 4 of them leave 36,864 of 65,536, enough for a push program at 4, 8 or 16 warps
(16,384, 20,480 or 32,768: :data:`FP8_NARROW_PUSH_WARPS`, :data:`FP8_NARROW_PUSH` off); 5 would leave 29,696, and the
16-warp push would never start (7: 15,360, nor the 4-warp push). (The plan's lookup table has a row per program for 8
per SM.)"""


def _per_sm(name: str, other: str, count: int) -> int:
    """Set the module's programs-per-SM count ``name`` (the two setters' body) to ``count``, ``other`` being the
    other count of the same kernel; returns the previous one. Raises :class:`MoeError` unless ``count`` is an int >= 1
    and the two together are at most :data:`MAX_OVERLAP_PER_SM`."""
    setter = f"set_{name.lower()}"
    if type(count) is not int or count < 1:
        raise MoeError(f"{setter}: count must be an int >= 1, got {count!r}")
    together = count + globals()[other]
    if together > MAX_OVERLAP_PER_SM:
        raise MoeError(
            f"{setter}: {count} with {other} = {globals()[other]} makes {together} expand programs per SM beside the "
            f"push, more than MAX_OVERLAP_PER_SM = {MAX_OVERLAP_PER_SM} (an SM must keep room for a push program); "
            f"lower {other} first"
        )
    previous = globals()[name]
    globals()[name] = count
    return previous


def set_expand_overlap_per_sm(count: int) -> int:
    """Set :data:`EXPAND_OVERLAP_PER_SM`, the meta programs per SM of the expand beside the push, for every dispatch
    from now on (the plans are kept: the expand and its gate with each split are launch plans of their own); returns
    the previous one. Only this rank's launches change (the ranks need not agree). For measurements (docs/design.md,
    "The fp8 push's share of an SM"). Raises :class:`MoeError` unless ``count`` is an int >= 1 and ``count`` +
    :data:`OVERLAP_COPIERS_PER_SM` <= :data:`MAX_OVERLAP_PER_SM`."""
    return _per_sm("EXPAND_OVERLAP_PER_SM", "OVERLAP_COPIERS_PER_SM", count)


def set_overlap_copiers_per_sm(count: int) -> int:
    """Set :data:`OVERLAP_COPIERS_PER_SM`, the copy programs per SM of the expand beside the push, for every dispatch
    from now on; returns the previous one. As :func:`set_expand_overlap_per_sm` (its launch plans, its ranks). At
    least 1: without copy programs the meta programs would copy every wave after their last meta row, after the push.
    Raises :class:`MoeError` unless ``count`` is an int >= 1 and :data:`EXPAND_OVERLAP_PER_SM` + ``count`` <=
    :data:`MAX_OVERLAP_PER_SM`."""
    return _per_sm("OVERLAP_COPIERS_PER_SM", "EXPAND_OVERLAP_PER_SM", count)


FP8_OVERLAPS_PUSH = True
"""On by default (:func:`set_fp8_overlaps_push` turns it off), with :data:`FP8_NARROW_PUSH`: fp8 rows kept with their
scales (``moe_dispatch(..., fp8=True)`` without ``dequantize``) in the pipelined gather dispatch take
:data:`EXPAND_OVERLAPS_PUSH`'s expand beside the push and the own rows stored by the push's one launch that it implies
(``SELF = 3``: this rank's quantized rows into ``recv_x``, their scales via the meta row; the expand beside the push
writes each token slot's scales). Off, fp8 takes the path it took before (the push without this rank's own rows' store,
the expand after it), whatever :data:`EXPAND_OVERLAPS_PUSH` and :data:`OWN_ROWS_IN_PUSH` say; bf16 / fp16 / fp32 keep
those options' defaults. The overlap with the 4-warp push took 196.9 µs at 4096 tokens per rank (H 7168, top-8 of 256)
against 336.7 without either (1.71x; 247.9 with the overlap at 16 warps), 2 x H200, 2026-11-27 ~18:35 UTC,
``bench/moe.py --only-dispatch --tokens 4096`` (docs/results/2026-11-27-session28.md), and the GPU test passed it
(165/165). Same results, bit for bit."""


def set_fp8_overlaps_push(on: bool) -> bool:
    """Turn :data:`FP8_OVERLAPS_PUSH` on or off for every dispatch from now on; returns the previous setting. Every
    rank sets the same (the pushes' flags differ). Raises :class:`MoeError` if ``on`` is not a bool."""
    return _switch("FP8_OVERLAPS_PUSH", on)


FP8_RECIPROCAL = True
"""On by default (:func:`set_fp8_reciprocal` turns it off): the fp8 push quantizes each group of 128 channels with one
IEEE division, ``448 / max(amax, 1e-4)``, and an fp32 multiply per element, as DeepEP's per-token cast does, instead
of a division per element (the scales are the same, ``max(amax, 1e-4) / 448``; a value may round to the next fp8
step, about 3 in 10,000 at random bf16 rows: ``reference.quantize_fp8(x)`` gives the default's bits,
``quantize_fp8(x, reciprocal=False)`` the division's). On sm_90 a ``div.rn.f32`` is a reciprocal, four dependent FMAs
and a branch to a slow path in a convergence region of its own (11 SASS instructions, one division after the other);
at H = 7168 the 16-warp push spends 17 of them per thread and row, the 4-warp push (:data:`FP8_NARROW_PUSH`) 65.
Measured (2 x H200, 2026-11-27, ``bench/moe.py --only-dispatch --heap 12G --tokens 4096``, the expand first beside
the push as by default; docs/results/2026-11-27-session30.md): 169.0 µs against 204.0 with the division, 1.32x bf16
gather's 223.1. Only the sender's quantization changes (the ranks need not agree)."""


def set_fp8_reciprocal(on: bool) -> bool:
    """Turn :data:`FP8_RECIPROCAL` on or off for every fp8 dispatch from now on; returns the previous setting (a
    setting's push is a launch plan of its own). Raises :class:`MoeError` if ``on`` is not a bool."""
    return _switch("FP8_RECIPROCAL", on)


FP8_NARROW_PUSH = True
"""On by default (:func:`set_fp8_narrow_push` turns it off): the pipelined fp8 push runs 4 warps a program, as every
other kernel, instead of ``FP8_PUSH_WARPS`` (16). Beside the expand kernel (:data:`FP8_OVERLAPS_PUSH`) the 16-warp
push cannot keep its two programs per SM: at H = 7168 it takes 62 registers a thread, 32,768 a program (64 rounded
up, 512 threads), and the expand's four programs per SM (56 registers, 128 threads) take 28,672 of the SM's 65,536,
which leaves room for one push program; whichever kernel the GPU places first, the push then runs its 264 programs
at most one per SM, and its time doubles (2 x H200, 2026-11-27: 211.5 µs beside the expand against 110.8 alone). At
4 warps the push with its wave flags takes 121 registers (16,384 a program): two fit beside the expand (61,440).
Its quantization is then four times the work per thread (64 channels), which :data:`FP8_RECIPROCAL` makes 64 fp32
multiplies instead of 64 divisions. Same results, bit for bit. Measured with :data:`FP8_OVERLAPS_PUSH` (see there):
196.9 µs against 247.9 at 16 warps."""


def set_fp8_narrow_push(on: bool) -> bool:
    """Turn :data:`FP8_NARROW_PUSH` on or off for every fp8 dispatch from now on; returns the previous setting (a
    setting's push is a launch plan of its own). Raises :class:`MoeError` if ``on`` is not a bool."""
    return _switch("FP8_NARROW_PUSH", on)


FP8_NARROW_PUSH_WARPS = 4
"""Warps a program of the narrow fp8 push runs (:data:`FP8_NARROW_PUSH`; :func:`set_fp8_narrow_push_warps`): 4 by
default, or 8. On sm_90 at H = 7168 with the overlap's waves, own rows and :data:`FP8_RECIPROCAL` the push takes 121
registers at 4 warps (16,384 a program), 78 at 8 (20,480), 61 at 16 (``FP8_PUSH_WARPS``: 32,768): two 8-warp programs
fit beside at most 3 of the expand's programs (62,464 of 65,536 registers with :data:`EXPAND_OVERLAP_PER_SM` +
:data:`OVERLAP_COPIERS_PER_SM` = 3), not beside its default 4. An option for measurements (docs/design.md, "The fp8
push's share of an SM"); same results, bit for bit (a group's amax is a max, and each value is scaled alone)."""


def set_fp8_narrow_push_warps(warps: int) -> int:
    """Set :data:`FP8_NARROW_PUSH_WARPS` (4 or 8) for every fp8 dispatch from now on; returns the previous one (each
    is a launch plan of its own). Only this rank's launches change. Raises :class:`MoeError` unless ``warps`` is the
    int 4 or 8."""
    global FP8_NARROW_PUSH_WARPS
    if type(warps) is not int or warps not in (4, 8):
        raise MoeError(f"set_fp8_narrow_push_warps: warps must be 4 or 8, got {warps!r}")
    previous, FP8_NARROW_PUSH_WARPS = FP8_NARROW_PUSH_WARPS, warps
    return previous


FP8_PREQUANTIZE = False
"""An option (default off; :func:`set_fp8_prequantize`): normal mode's fp8 rows are quantized by a kernel of their
own (``_quantize_kernel``: the push's operations, the same bits, :data:`FP8_RECIPROCAL` included) on the plan's side
stream beside the route kernels, into the plan's staging buffers (a row of fp8 and its scales per token, grown to a
power of two of tokens), and the push, which waits for it with an event, loads those rows and scales and stores them
as they are: no quantization on the push's path (at 4 warps, as the bf16 push) and half of its loads from HBM. The
route kernels (32 µs on 2 x H200 at 4096 tokens per rank) leave most SMs idle, and reading the bf16 rows and writing
the fp8 ones (88 MB at 4096 x 7168) takes about as long at HBM's rate. Same results, bit for bit; an option until a GPU
measures it (``bench/moe.py --only-dispatch``'s ``... prequantized`` rows)."""


def set_fp8_prequantize(on: bool) -> bool:
    """Turn :data:`FP8_PREQUANTIZE` on or off for every fp8 dispatch from now on; returns the previous setting (a
    setting's push is a launch plan of its own). Raises :class:`MoeError` if ``on`` is not a bool."""
    return _switch("FP8_PREQUANTIZE", on)


PUSH_RESIDENT_FIRST = False
"""An option (default off; :func:`set_push_resident_first`; docs/design.md, "Which kernel the GPU places first"): where
the expand kernel runs beside the push (:data:`EXPAND_OVERLAPS_PUSH`, fp8 with :data:`FP8_OVERLAPS_PUSH`), the push's
programs are all on their SMs before any of the expand's is placed. Without it both launches become ready when the
route kernels end (the push next on the current stream, the expand on the side stream after the route's event), and
which of their programs the GPU places first varies from call to call; the 4-warp fp8 push (two programs of 118-121
registers) and the expand (four of 56) fill 59,392 of an SM's 65,536 registers, so any other split than two and four
leaves programs of one of them without a slot until the push ends: the push stretches (its waves need every program)
or the expand's share of every wave runs after it. With the option each push program first adds 1 to a word of the
plan (``STARTED``), and a one-program kernel on the side stream (``_started_kernel``) waits for all of them,
then resets the word, before the expand is launched. It costs a launch on the side stream and nothing on the push's
path; the push never waits for it (no deadlock: a push program without a slot starts when another ends). Same results,
bit for bit. Only the sender's launches change (the ranks need not agree). Not with :data:`EXPAND_RESIDENT_FIRST`.

Measured (2 x H200, 2026-11-27, 38890c4, docs/results/probes/2026-11-27-moe_fp8_overlap_modes.py, 4096 tokens per
rank, H 7168, top-8 of 256): the fp8 default took the slow mode in every call, 243-245 µs (push 141-143, the expand's
tail after it 68-72 µs), where without the option each call took either mode (~187-200 µs: push ~153, tail ~6; or
~240-255: push ~141, tail ~71): placing the push first is the slow order. With its programs first at 118-121 registers
(15,360-16,384 a program) an SM may take 3 or 4 of them (4 x 15,360 = 61,440), and then none of the expand's."""


def set_push_resident_first(on: bool) -> bool:
    """Turn :data:`PUSH_RESIDENT_FIRST` on or off for every dispatch from now on; returns the previous setting (the
    push with it is a launch plan of its own). Raises :class:`MoeError` if ``on`` is not a bool, or is True while
    :data:`EXPAND_RESIDENT_FIRST` is on."""
    if on is True and EXPAND_RESIDENT_FIRST:
        raise MoeError("set_push_resident_first: EXPAND_RESIDENT_FIRST is on; turn it off first")
    return _switch("PUSH_RESIDENT_FIRST", on)


EXPAND_RESIDENT_FIRST = True
"""On by default since session 29 (:func:`set_expand_resident_first` turns it off; docs/design.md, "Which kernel the GPU
places first"), the mirror of :data:`PUSH_RESIDENT_FIRST` (not with it: the setters refuse both on, a dispatch with
both raises :class:`MoeError`): where the expand kernel runs beside the push with fp8 rows kept
(:data:`FP8_OVERLAPS_PUSH`; bf16's overlap does not take it, see below), every program of the expand is on its SM
before any of the push's is placed, the order of
the fast calls that :data:`PUSH_RESIDENT_FIRST`'s measurement left (the expand keeps pace with each wave; the push runs
two programs per SM). On GPUs the expand is launched first (on the side stream, after the route kernels' event, as
without the option), each of its programs first adding 1 to the plan's ``started`` word (``STARTED``); then, on the
current stream, a one-program kernel (``_started_kernel``, one warp) waits until all of them have, and sets the word
back to 0; then the push (stream order: none of its programs is placed before that kernel ends). It puts a launch and
a kernel boundary on the push's path, after the route kernels. Under the CPU emulation (a kernel runs to its end there)
the order stays push, expand, and that kernel after the expand checks the count. Same results, bit for bit; only
this rank's launches change (the ranks need not agree).

Progress: the expand's programs spin on the push's wave flags and the push is launched only once all of them have
started, so all of them must be resident at once with nothing else on the GPU (a push program then needs one slot
left anywhere; the push waits for nothing). On sm_90 at H = 7168, k = 8, 2 ranks the expand beside the push has
(:data:`EXPAND_OVERLAP_PER_SM` + :data:`OVERLAP_COPIERS_PER_SM`) x SMs = 4 x 132 = 528 programs of 128 threads at 56
registers, with ``STARTED`` as without (its add, by one thread, relaxed, comes before any load; bf16 and fp8 alike),
and no shared memory: 7,168 registers a program, so an SM holds 9 of them (65,536 registers; 16 by threads, 32 by
blocks), the GPU 1,188, and the gate's one warp fits beside. The GPU places a grid's programs while any SM has room:
all 528 start, the gate returns. Spread four per SM (the usual placement of a grid on an idle GPU; an SM with fewer
takes more of the push), they leave 36,864 registers and 1,536 threads per SM: two 4-warp fp8 push programs (118-121
registers: 15,360-16,384 each), not three; three bf16 push programs (96: 12,288), its grid two per SM. A cap on
the gate's count would not make a larger grid safe: were the expand's programs more than fit, those resident would
hold their slots spinning, and the rest and the push would wait for them; that is the overlap's own requirement (the
expand's grid fits with room for a push program), which ``test_ops_moe_kernels.py`` and
``test_ops_moe_push_first.py`` check by registers. Nothing else may fill the SMs meanwhile (another stream's
spinning kernels), as for the overlap.

Measured (2 x H200, session 29 job 6, 31ba2dc, ``docs/results/probes/2026-11-27-moe_fp8_overlap_modes.py``, 4096
tokens, H 7168, top-8 of 256; 5 rounds of 30 calls): the fp8 default without it ran each call in one of two modes
(~187-200 or ~240-245 µs; round medians 194.7-241.8 µs over ranks), with it 195.7-197.5 µs in every round, 0-2 slow
calls of 30, the same bits; the GPU test passed 168/168 per rank with it on. bf16's push leaves 12,288 registers spare
per SM beside the expand and its timing has one mode (221.1-222.4 µs), which the gate's launch and kernel boundary
made 224.9-225.3: so the option applies to fp8 rows kept only."""


def set_expand_resident_first(on: bool) -> bool:
    """Turn :data:`EXPAND_RESIDENT_FIRST` on or off for every dispatch from now on; returns the previous setting (the
    expand with it is a launch plan of its own). Raises :class:`MoeError` if ``on`` is not a bool, or is True while
    :data:`PUSH_RESIDENT_FIRST` is on."""
    if on is True and PUSH_RESIDENT_FIRST:
        raise MoeError("set_expand_resident_first: PUSH_RESIDENT_FIRST is on; turn it off first")
    return _switch("EXPAND_RESIDENT_FIRST", on)


REDUCE_OVERLAPS_PUSH = False
"""An option (default off; :func:`set_reduce_overlaps_push`): a normal-mode combine on one node launches its reduce
kernel beside its push kernel (on the plan's side stream, the current stream waiting for it), and the reduce of each
home token starts as soon as every rank's partial of it has landed, instead of after every rank's whole push (issue
27: at 4096 tokens per rank, H 7168, top-8 of 256 on 2 x H200 the default combine took 331.2 µs against the 227 µs
of 75% of the push all-gather's bandwidth; docs/design.md, "MoE combine at 4096 tokens").

- The push (``WAVES`` = :data:`COMBINE_WAVES`) takes its received tokens' slots in waves: wave ``w`` holds, of each
  home ``s``'s ``n_s`` slots here (consecutive, in the home's token order), the positions ``[w n_s / WAVES, (w + 1)
  n_s / WAVES)``; each program sets its flag ``(me, w, program)`` on every rank (release) once it has pushed its
  share of wave ``w``, and no combine flag.
- The reduce (``WAVES``) takes its tokens as before; for token ``t`` and each rank ``d`` holding it (place ``p =
  tok_pos[t, d]`` of the ``n = N[me, d]`` this rank sent there) the wave is ``((p + 1) W - 1) // n`` (``W``: the
  pair's waves, :data:`COMBINE_WAVE_MIN_SLOTS` or :data:`COMBINE_WAVES_BY_PROGRAMS`; ``WAVES`` where the minimum is
  0), and it waits
  (acquire) for that wave's flags of every push program of ``d``, once per wave and program (the waves of a rank
  complete in order: a program's later flag covers its earlier waves).
- Progress: the reduce's programs spin on flags only the pushes set, and the pushes wait for nothing; on sm_90 (H =
  7168, k = 8, bf16 partials) the push with its waves takes 128 registers per thread and the reduce 64 (at
  :data:`COMBINE_WAVE_MIN_SLOTS`; 132 and 80 without), neither shared memory beyond its reductions: two of each per SM
  (``NORMAL_PROGRAMS_PER_SM``) use at most 55,296 of 65,536 registers, so
  both launches are resident together whichever starts first (``test_ops_moe_kernels.py`` checks it).
- Every rank sets the same (checked at a plan's first combine with each setting, with ``combine_partials``).

Low-latency mode and worlds across nodes ignore it. Same results, bit for bit (each token's partials are added in
rank order, as without it)."""


def set_reduce_overlaps_push(on: bool) -> bool:
    """Turn :data:`REDUCE_OVERLAPS_PUSH` on or off for every combine from now on; returns the previous setting. Every
    rank sets the same (checked at a plan's first combine with it). Raises :class:`MoeError` if ``on`` is not a
    bool."""
    return _switch("REDUCE_OVERLAPS_PUSH", on)


COMBINE_WAVES = 8
"""Waves of the combine push with :data:`REDUCE_OVERLAPS_PUSH` (:func:`set_combine_waves`): more leave a smaller last
wave for the reduce after the push, at one more flag round per push program each."""
MAX_COMBINE_WAVES = 16
"""The most :data:`COMBINE_WAVES`: the ``combine_waves`` workspace is laid out for it (the kernels' ``WAVE_SLOTS``)
whatever the call's waves, so a wave's flags keep their place when the waves change between calls."""


def set_combine_waves(waves: int) -> int:
    """Set :data:`COMBINE_WAVES` for every combine from now on (every rank the same); returns the previous one. Raises
    :class:`MoeError` unless ``waves`` is an int in [1, ``MAX_COMBINE_WAVES``]."""
    global COMBINE_WAVES
    if type(waves) is not int or waves < 1 or waves > MAX_COMBINE_WAVES:
        raise MoeError(f"set_combine_waves: waves must be an int in [1, {MAX_COMBINE_WAVES}], got {waves!r}")
    previous, COMBINE_WAVES = COMBINE_WAVES, waves
    return previous


COMBINE_WAVE_MIN_SLOTS = 256
"""With :data:`REDUCE_OVERLAPS_PUSH`: the partials a wave of one (home, holder) pair holds at least (the kernels'
``WAVE_MIN``; :func:`set_combine_wave_min_slots`; 0: every pair :data:`COMBINE_WAVES` waves). A pair of ``n`` slots
takes ``min(COMBINE_WAVES, max(1, n // COMBINE_WAVE_MIN_SLOTS))`` waves, which the home computes from its row
``N[home, d]`` as the holder's push does from its slots: nothing is exchanged, and every rank sets the same.

Why (issue 27, 2 x H200, cdc0041): at 128 tokens per rank the push with 8 waves took 60.9 µs against the default's
17.5. Each wave ends, in every push program, with a barrier and ``dl.notify`` to every rank: a system-scope release
(it waits until the program's partials stored over NVLink so far are visible) and a remote atomic, a link's round
trip, where the default has one such round per program. At 128 tokens a home holds ~128 slots on each rank, so a wave
has ~32 partials for 264 push programs, and the push gave wave ``w``'s slots to programs 0 .. 31 in every wave: those
32 each loaded k rows, stored one partial over the link and waited for its release, eight times in a row, while the
default spreads the 256 slots over 256 programs at once (~43 µs more: 7 more rounds of ~6 µs). The push now deals
each wave's slots on from where the wave before ended (every program about one slot in all, as in the default), and
a pair of few slots takes fewer waves, so fewer rounds: at 256 a 128-token pair takes one wave (the default's one
round; the reduce then waits for the whole push, as the default's does), 4096 tokens (~4080 a pair) keep the 8
measured at 248.8 µs; 512 / 1024 / 2048 (~510 / ~1020 / ~2040 a pair) take 1 / 3 / 7. To be set from the crossover
measurement (``bench/moe.py --only-combine --tokens 128,512,1024,2048,4096``: its ``all-waves`` row is the dealt push
at 0). At 4096 tokens 256 and 0 launch the same waves, slots and waits, and code of the same residency (the push 128
registers either way, the reduce 94 / 96 with the wait watchdog: 96 allocated), so the ``all-waves`` row's 4.5% there
(255.5 against 267.2 µs on 2 x H200) is the runs' spread, not the setting (docs/design.md, "MoE combine at 4096
tokens"); at 2048 its win is the tail's (:data:`COMBINE_WAVES_BY_PROGRAMS`)."""


def set_combine_wave_min_slots(slots: int) -> int:
    """Set :data:`COMBINE_WAVE_MIN_SLOTS` for every combine from now on (every rank the same; agreed at a plan's first
    combine with it); returns the previous one. Raises :class:`MoeError` unless ``slots`` is an int >= 0."""
    global COMBINE_WAVE_MIN_SLOTS
    if type(slots) is not int or slots < 0:
        raise MoeError(f"set_combine_wave_min_slots: slots must be an int >= 0, got {slots!r}")
    previous, COMBINE_WAVE_MIN_SLOTS = COMBINE_WAVE_MIN_SLOTS, slots
    return previous


COMBINE_WAVES_BY_PROGRAMS = False
"""An option (default off until a GPU run times it; :func:`set_combine_waves_by_programs`), with
:data:`REDUCE_OVERLAPS_PUSH` and :data:`COMBINE_WAVE_MIN_SLOTS` > 0 (0 keeps every pair at all its waves): a (home,
holder) pair of ``n`` slots takes the fewest waves of at most ``P`` slots each, ``min(COMBINE_WAVES, max(1, ceil(n /
P)))``, ``P`` the plan's programs per kernel (264 on 132 SMs; the kernels' ``WAVE_MAX``), instead of one per
:data:`COMBINE_WAVE_MIN_SLOTS`. Computed alike by the holder's push and the home's reduce (nothing exchanged); every
rank sets the same (agreed at a plan's first combine with it). It applies to the pair :data:`COMBINE_AUTO` picks as
well. Same results, bit for bit: only when each partial's flag is set changes.

Why (docs/design.md, "MoE combine at 4096 tokens", the tail): what the reduce does after the push ends is the last
wave's tokens, and its programs take tokens ``pid, pid + P, ...``, so the last wave of ``L = n / W`` tokens gives some
program ``ceil(L / P)`` of them, one after the other. The measured tails (the reduce after the push) follow that count:
one token 7.6-19.0 µs, two 26.0-40.2 µs (2 x H200 ef82cce and 2 x H100 6a44934 / 60aa5e6, 128-4096 tokens). At 2048
tokens (``n`` ~2040) the wave minimum gives 7 waves, 291 tokens in the last (two for some programs): 26.4 µs of tail
on H200 against 12.7 for 8 waves (255 tokens, one each), the push 3.1 µs longer for the eighth flag round: 161.9
against 150.4 µs (H100: 180.7 against 171.1), the ``all-waves`` row's win. This rule gives 8 there, 4 at 1024
tokens (the wave minimum 3: 340 tokens, two for some programs), 1 at 128 and 2 at 512 (~510: 1 there); at 4096
(~4080, ceil 16) it is capped at :data:`COMBINE_WAVES` (8, 510 tokens: two for some programs, as the wave minimum's),
where 16 waves would leave one (``bench/moe.py --only-combine --combine-waves 16`` times it)."""


def set_combine_waves_by_programs(on: bool) -> bool:
    """Turn :data:`COMBINE_WAVES_BY_PROGRAMS` on or off for every combine from now on (every rank the same); returns
    the previous setting. Raises :class:`MoeError` if ``on`` is not a bool."""
    return _switch("COMBINE_WAVES_BY_PROGRAMS", on)


OWN_PARTIALS_IN_REDUCE = False
"""An option (default off; :func:`set_own_partials_in_reduce`), with :data:`REDUCE_OVERLAPS_PUSH` only: this rank's own
tokens' partials skip the combine buffer. The push stores only the partials bound for other ranks (``OWN``: its waves
leave this rank's own slots out, their flags still set), and the reduce sums each own token's rows of ``y`` itself (k
order, fp32, rounded to the partials' dtype as a stored partial is) and adds that partial at its place in rank order:
the same bits. At 4096 tokens per rank on 2 ranks (docs/design.md, "MoE combine at 4096 tokens") that takes half the
partials' local writes and reads off HBM (117 MB of 763) and half the push's rows to the reduce, which runs beside
the push on the other half of ``y``. The reduce then loads k rows of ``y`` a step: it moves a quarter of a row a step
(``SPLIT`` = 4), at 96 registers per thread on sm_90 against the push's 133 (95 and 128 at
:data:`COMBINE_WAVE_MIN_SLOTS`), so two programs of each still fit on an SM together (59,392 of 65,536 registers;
``test_ops_moe_kernels.py``). Every rank sets the same (agreed with the
waves at a plan's first combine with it)."""


def set_own_partials_in_reduce(on: bool) -> bool:
    """Turn :data:`OWN_PARTIALS_IN_REDUCE` on or off for every combine from now on (it applies with
    :data:`REDUCE_OVERLAPS_PUSH` on); returns the previous setting. Every rank sets the same. Raises :class:`MoeError`
    if ``on`` is not a bool."""
    return _switch("OWN_PARTIALS_IN_REDUCE", on)


OWN_SPLIT = 4
"""With :data:`OWN_PARTIALS_IN_REDUCE`: the reduce kernel's steps per whole-row block (``SPLIT``)."""


COMBINE_AUTO = True
"""On by default since session 29 (:func:`set_combine_auto` turns it off; measured in
:data:`COMBINE_AUTO_MIN_SLOTS`): each normal-mode combine on one node takes :data:`REDUCE_OVERLAPS_PUSH` with
:data:`OWN_PARTIALS_IN_REDUCE` (the pair) where it wins, and push-then-reduce elsewhere, whatever those two options
say. The choice must be the
same on every rank (the push with waves sets wave flags and no combine flag: a default reduce would wait forever), and
the ranks' token counts differ, so it is made on a number every rank holds alike: the combine slots the busiest rank
needed at the plan's latest dispatch (the route kernel's exchanged summary, word 3, read by the host in every
normal-mode dispatch; ``_Plan.busiest_slots``). The pair from :data:`COMBINE_AUTO_MIN_SLOTS` on. A combine of an
earlier dispatch than the latest takes the latest's choice: still the same on every rank (every rank makes the same
calls in the same order)."""


def set_combine_auto(on: bool) -> bool:
    """Turn :data:`COMBINE_AUTO` on or off for every combine from now on (every rank the same); returns the previous
    setting. Raises :class:`MoeError` if ``on`` is not a bool."""
    return _switch("COMBINE_AUTO", on)


COMBINE_AUTO_MIN_SLOTS = 1536
"""With :data:`COMBINE_AUTO`: the busiest rank's combine slots (at 2 ranks about twice the tokens per rank) from which
the combine takes the reduce beside the push with the own partials. The crossover (2 x H100, 2026-11-27 20:1x,
6a44934, ``bench/moe.py --only-combine --heap 12G``, H 7168, top-8 of 256; docs/results/2026-11-27-session29/
moe_combine_2xH100_6a44934.log): the pair against push-then-reduce at 128 / 512 / 1024 / 2048 / 4096 tokens per rank
(255 / 1018 / 2040 / 4079 / 8151 slots on the busiest rank) 0.99x / 0.95x / 1.07x / 1.15x / 1.25x (383.2 -> 307.6 µs
at 4096); so from 1536 slots, between the last loss and the first win. (2 x H200, cdc0041, before
:data:`COMBINE_WAVE_MIN_SLOTS`: 0.41x at 128 tokens, 1.36x at 4096.)"""


def set_combine_auto_min_slots(slots: int) -> int:
    """Set :data:`COMBINE_AUTO_MIN_SLOTS` (every rank the same); returns the previous one. Raises :class:`MoeError`
    unless ``slots`` is an int >= 0."""
    global COMBINE_AUTO_MIN_SLOTS
    if type(slots) is not int or slots < 0:
        raise MoeError(f"set_combine_auto_min_slots: slots must be an int >= 0, got {slots!r}")
    previous, COMBINE_AUTO_MIN_SLOTS = COMBINE_AUTO_MIN_SLOTS, slots
    return previous
