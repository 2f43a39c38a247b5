"""flash_decode's kernel code on the CPU, against ``scaled_dot_product_attention`` on the whole cache.

The kernel is made of ``@triton.jit`` helpers (``call_epoch.arrive``, ``_role``, ``_split_attention``,
``_epoch_buffers``, ``_slot``, ``_store_record``, ``_combine_records``, ``_store_output``); only the ``dl`` calls (the
record pushes through ``dl.symm_at``, ``dl.notify``, ``dl.wait``) stay in its body. The two kernels below call
exactly those helpers, in the kernel's order, and run in Triton's interpreter (``TRITON_INTERPRET=1``, in a
subprocess: the interpreter is chosen when a module's kernels are defined):

- ``_emulate_producers``: one launch per emulated rank, every program of the real grid: arrival ticket and epoch,
  role; for producers one split's attention over that rank's cache, the record into slot (group, rank, split) of
  the epoch's parity, the flag of that slot set to the epoch (where the kernel notifies). Every rank's
  copy of the record buffer is the same in the real kernel, so the emulation keeps one.
- ``_emulate_combiners``: what each combiner program does after its wait: its column slice of the group's
  ``W x splits`` records combined in order, that slice of the output stored. One launch of the combiners' tickets,
  after every rank's producers (the order the wait enforces).

The kernels' arguments and grid are the op's own (``flash_decode.launch_args``, as a launch computes them from the
tensors and the chosen split count), so the host's stride, length and geometry arithmetic is exercised too.

What can go wrong shows: cache positions past each rank's length hold huge keys and values (a token read past a
length, or a block mask off by one, ruins the output), the record buffer starts as NaN (a slot never written, or
written by the wrong program, poisons the combine), the flags must all read the epoch afterwards (every slot written
once), the state must hold the call's epoch and no arrivals, and a call must leave the other parity's records alone.

Covered: bf16 and fp16; batch 1, 2, 3, 4; GQA groups 1, 3, 4, 8, 16; 1 to 4 ranks; 1 to 5 splits; key blocks 16 and
64 (``config.MANY_GROUPS_CONFIG``'s, at group 4 with one split as at batch 64); local lengths not a multiple of the
block; per-rank lengths drawn at random, 0 on some ranks, 0 everywhere for a sequence (zeros), beyond the cache or
negative (clamped), on either side of a block boundary; a [B, S, H, D] cache viewed as [B, H, S, D]; the 64-bit
offset variant; a non-default scale; record counts that are not a multiple of the combine's step, and a step of one
record; two calls in a row (both parities, the epoch hand-over).

Two interpreter bugs of Triton 3.6 that this code reaches are patched in the subprocess (``_fix_interpreter``):
``tl.dot`` on bf16 multiplies the raw 16-bit patterns as integers, and ``range()`` over a loaded scalar calls
``int()`` on a one-element array, which numpy 2 refuses.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import sys

import pytest
import torch
import triton
import triton.language as tl

from triton_dist.ops.common import call_epoch

fd_config = importlib.import_module("triton_dist.ops.flash_decode.config")
fd_kernels = importlib.import_module("triton_dist.ops.flash_decode.kernels")
fd_op = importlib.import_module("triton_dist.ops.flash_decode.op")

POISON = 1.0e4
"""Keys and values past each rank's length: any such token in a softmax swamps (or overflows) the result."""


@triton.jit
def _emulate_producers(
    q_ptr, k_ptr, v_ptr, len_ptr, rec_ptr, flags_ptr, state_ptr,
    groups, kv_heads, local_len,
    stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs,
    sm_scale, rec_parity_stride, flag_parity_stride, me, ranks,
    SPLITS: tl.constexpr, GROUP: tl.constexpr, ROWS: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
    WIDE: tl.constexpr, COMBINERS: tl.constexpr,
):  # fmt: skip
    ticket, epoch = call_epoch.arrive(state_ptr, groups * (SPLITS + COMBINERS))
    group, split, producer = fd_kernels._role(ticket, groups, SPLITS, COMBINERS)
    seq = (group // kv_heads).to(tl.int64)
    head = (group % kv_heads).to(tl.int64)
    RECORD: tl.constexpr = GROUP * D + fd_kernels._RECORD_PAD
    records, flags = fd_kernels._epoch_buffers(rec_ptr, flags_ptr, epoch, rec_parity_stride, flag_parity_stride)
    if producer:  # the combiners' part after their wait is _emulate_combiners
        partial, lse = fd_kernels._split_attention(
            q_ptr, k_ptr, v_ptr, len_ptr, seq, head, split, local_len,
            stride_qb, stride_qh, stride_kb, stride_kh, stride_ks, stride_vb, stride_vh, stride_vs, sm_scale,
            SPLITS, GROUP, ROWS, D, BLOCK_N, WIDE,
        )  # fmt: skip
        slot = fd_kernels._slot(group, me, ranks, split, SPLITS)
        fd_kernels._store_record(records + slot * RECORD, partial, lse, GROUP, ROWS, D)
        tl.store(flags + slot, epoch)  # the kernel's dl.notify of this slot (on every rank)


@triton.jit
def _emulate_combiners(
    out_ptr, rec_ptr, flags_ptr, epoch, groups, kv_heads, stride_ob, stride_oh, rec_parity_stride, flag_parity_stride,
    ranks, SPLITS: tl.constexpr, GROUP: tl.constexpr, RG: tl.constexpr, D: tl.constexpr, CHUNK: tl.constexpr,
    COMBINERS: tl.constexpr,
):  # fmt: skip
    ticket = groups * SPLITS + tl.program_id(0)  # the combiners' tickets come after every producer's
    group, part, producer = fd_kernels._role(ticket, groups, SPLITS, COMBINERS)
    seq = (group // kv_heads).to(tl.int64)
    head = (group % kv_heads).to(tl.int64)
    RECORD: tl.constexpr = GROUP * D + fd_kernels._RECORD_PAD
    SLICE: tl.constexpr = D // COMBINERS
    records, flags = fd_kernels._epoch_buffers(rec_ptr, flags_ptr, epoch, rec_parity_stride, flag_parity_stride)
    first = fd_kernels._slot(group, 0, ranks, 0, SPLITS)
    result = fd_kernels._combine_records(
        records + first * RECORD, ranks * SPLITS, part * SLICE, GROUP, RG, D, SLICE, CHUNK
    )
    fd_kernels._store_output(out_ptr, seq, head, stride_ob, stride_oh, result, part * SLICE, GROUP, RG, SLICE)


@triton.jit
def _emulate_roles(out_ptr, groups, SPLITS: tl.constexpr, COMBINERS: tl.constexpr):
    ticket = tl.program_id(0)
    group, index, producer = fd_kernels._role(ticket, groups, SPLITS, COMBINERS)
    tl.store(out_ptr + 3 * ticket, group)
    tl.store(out_ptr + 3 * ticket + 1, index)
    tl.store(out_ptr + 3 * ticket + 2, producer.to(tl.int32))


# ---------------------------------------------------------------------------------------------------------------
# The emulation (runs in the interpreter subprocess)


def _fix_interpreter() -> None:
    import numpy as np
    from triton.runtime import interpreter

    original_dot = interpreter.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):  # noqa: ANN001, ANN202
        if a.dtype == tl.bfloat16 or b.dtype == tl.bfloat16:
            widen = [
                interpreter.TensorHandle(
                    (t.data.astype(np.uint32) << 16).view(np.float32) if t.dtype == tl.bfloat16 else t.data,
                    tl.float32 if t.dtype == tl.bfloat16 else t.dtype.scalar,
                )
                for t in (a, b)
            ]
            a, b = widen
        return original_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    interpreter.InterpreterBuilder.create_dot = create_dot
    original_patch = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):  # noqa: ANN001, ANN202
        original_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch_lang_tensor


def reference(q, ks, vs, lengths, scale):  # noqa: ANN001, ANN201
    """SDPA (fp64) of each sequence's query over the union of every rank's first lengths[r][b] tokens (clamped to
    [0, local_len]); zeros where there are none."""
    batch, q_heads, dim = q.shape
    out = torch.zeros(batch, q_heads, dim, dtype=torch.float64)
    for b in range(batch):
        spans = [max(0, min(int(n[b]), k.shape[2])) for k, n in zip(ks, lengths, strict=True)]
        keys = torch.cat([k[b, :, :s] for k, s in zip(ks, spans, strict=True)], 1).double()
        values = torch.cat([v[b, :, :s] for v, s in zip(vs, spans, strict=True)], 1).double()
        if keys.shape[1] == 0:
            continue
        out[b] = torch.nn.functional.scaled_dot_product_attention(
            q[b].double()[None, :, None, :], keys[None], values[None], scale=scale, enable_gqa=True
        )[0, :, 0, :]
    return out


def make_cache(case: dict, rank: int, lengths: torch.Tensor, gen: torch.Generator):  # noqa: ANN201
    batch, kv_heads, local_len = case["batch"], case["kv_heads"], case["local_len"]
    dtype = getattr(torch, case["dtype"])
    shape = (batch, local_len, kv_heads, 128) if case.get("seq_major") else (batch, kv_heads, local_len, 128)
    k = torch.randn(shape, generator=gen).to(dtype)
    v = torch.randn(shape, generator=gen).to(dtype)
    if case.get("seq_major"):  # the [B, S, H, D] cache layout, viewed as [B, H, S, D]
        k, v = k.transpose(1, 2), v.transpose(1, 2)
    for b in range(batch):
        valid = max(0, min(int(lengths[b]), local_len))
        k[b, :, valid:] = POISON
        v[b, :, valid:] = -POISON
    return k, v


def emulate(case: dict) -> dict:
    """Two flash_decode calls of one shape on ``ranks`` emulated ranks; returns the numbers the test checks."""
    gen = torch.Generator().manual_seed(case["seed"])
    batch, q_heads, kv_heads, local_len = case["batch"], case["q_heads"], case["kv_heads"], case["local_len"]
    ranks, splits, block_n = case["ranks"], case["splits"], case["block_n"]
    dtype = getattr(torch, case["dtype"])
    group = q_heads // kv_heads
    groups = batch * kv_heads
    scale = case.get("scale") or 1.0 / math.sqrt(128)
    floats, flags_needed = fd_config.workspace_need(batch, kv_heads, group, splits, ranks)
    records = torch.full((2, floats + 64), float("nan"), dtype=torch.float32)
    flags = torch.zeros(2, flags_needed + 64, dtype=torch.int32)
    states = [torch.zeros(1, dtype=torch.int64) for _ in range(ranks)]
    config = fd_config.FlashDecodeConfig(splits=splits, block_n=block_n)
    overrides = {name: case[key] for name, key in (("WIDE", "wide"), ("CHUNK", "chunk")) if key in case}
    result: dict = {"calls": []}
    for call in range(2):
        lengths = []
        for rank in range(ranks):
            if case["lengths"] == "random":
                values = torch.randint(0, local_len + 1, (batch,), generator=gen)
            else:
                values = torch.tensor(case["lengths"][rank])
            lengths.append(values.to(torch.int32))
        if case["lengths"] == "random" and batch > 1 and ranks > 1:  # sequence 0 empty on rank 0
            lengths[0][0] = 0
        q = torch.randn(batch, q_heads, 128, generator=gen).to(dtype)
        caches = [make_cache(case, rank, lengths[rank], gen) for rank in range(ranks)]
        other_parity = records[call % 2].clone()  # epoch call + 1 uses parity (call + 1) % 2 only
        out = torch.full((batch, q_heads, 128), float("nan"), dtype=dtype)
        for rank, (k, v) in enumerate(caches):  # the kernel's arguments and grid, as the op computes them
            fd_op.check_inputs(q, k, v, lengths[rank])
            workspace = fd_op._Workspace(records, flags, states[rank])
            prepared = fd_op._Prepared(config, splits, fd_op.check_scale(case.get("scale")), workspace)
            grid, named, _ = fd_op.launch_args(q, k, v, lengths[rank], out, prepared, ranks)
            named.update(overrides)
            assert named["sm_scale"] == scale and grid == (groups * (splits + fd_config.COMBINERS), 1, 1)
            _emulate_producers[grid](**_arguments(_emulate_producers, named), me=rank, ranks=ranks)
        epoch = call + 1
        combiners = (groups * fd_config.COMBINERS,)
        _emulate_combiners[combiners](**_arguments(_emulate_combiners, named), epoch=epoch, ranks=ranks)
        want = reference(q, [c[0] for c in caches], [c[1] for c in caches], lengths, scale)
        got = out.double()
        parity = epoch % 2
        result["calls"].append(
            {
                "nan": int(torch.isnan(got).sum()),
                "max_err": float((got - want).abs().max()),
                "max_ref": float(want.abs().max()),
                "empty_rows_zero": all(
                    bool((got[b] == 0).all())
                    for b in range(batch)
                    if sum(max(0, min(int(n[b]), local_len)) for n in lengths) == 0
                ),
                "flags_set": bool((flags[parity, :flags_needed] == epoch).all()),
                "flags_beyond_untouched": bool((flags[parity, flags_needed:] == 0).all()),
                "states": [s.tolist() for s in states],
                "other_parity_untouched": bool(
                    torch.equal(records[call % 2].nan_to_num(7.0), other_parity.nan_to_num(7.0))
                ),
                "records_beyond_untouched": bool(torch.isnan(records[parity, floats:]).all()),
            }
        )
    return result


def _arguments(kernel, named: dict) -> dict:  # noqa: ANN001
    """The arguments of ``kernel`` that the real kernel also has, from its ``named`` launch arguments."""
    return {name: named[name] for name in inspect.signature(kernel.fn).parameters if name in named}


def roles(groups: int, splits: int) -> list[list[int]]:
    programs = groups * (splits + fd_config.COMBINERS)
    table = torch.full((programs * 3,), -1, dtype=torch.int32)
    _emulate_roles[(programs,)](table, groups, SPLITS=splits, COMBINERS=fd_config.COMBINERS)
    return table.view(-1, 3).tolist()


def _main() -> None:
    _fix_interpreter()
    request = json.loads(sys.argv[1])
    if request["what"] == "roles":
        print(json.dumps([roles(g, s) for g, s in request["cases"]]))
    else:
        print(json.dumps([emulate(case) for case in request["cases"]]))


# ---------------------------------------------------------------------------------------------------------------
# The tests (pytest process)


TOLERANCE = {"bfloat16": 1.5e-2, "float16": 1.5e-3}
"""Max |out - SDPA| / max |SDPA| per call: P @ V with P rounded to the dtype, then one rounding of the output
(the worst measured over these cases: 0.75% for bf16, 0.034% for fp16)."""


def _case(**overrides) -> dict:  # noqa: ANN003
    case = {
        "seed": 0, "dtype": "bfloat16", "batch": 3, "q_heads": 8, "kv_heads": 2, "local_len": 150, "ranks": 2,
        "splits": 3, "block_n": 16, "lengths": "random",
    }  # fmt: skip
    case.update(overrides)
    return case


CASES = {
    "bf16 group 4, 2 ranks, 3 splits": _case(),
    "fp16 group 4": _case(dtype="float16", seed=1),
    "batch 1, group 8, 1 split, 64-token blocks": _case(batch=1, q_heads=8, kv_heads=1, splits=1, block_n=64, seed=2),
    # Shapes are as small as the paths they reach allow: the interpreter runs every program of every emulated rank
    # (batch 8 x 4 KV heads here took 70 of the file's 173 s and reached nothing that batch 3 x 2 does not).
    "batch 3, group 1, 4 ranks, 5 splits": _case(batch=3, q_heads=2, kv_heads=2, ranks=4, splits=5, seed=3),
    "group 16, 3 ranks": _case(batch=2, q_heads=16, kv_heads=1, ranks=3, splits=2, local_len=70, seed=4),
    "group 3 (not a power of two)": _case(batch=2, q_heads=12, kv_heads=4, splits=2, seed=5),
    "1 rank": _case(ranks=1, splits=4, seed=6),
    "combine chunks with a remainder (9 records, 4 per step)": _case(q_heads=16, ranks=3, splits=3, chunk=4, seed=12),
    "combine one record per step": _case(batch=2, ranks=3, splits=2, chunk=1, seed=13),
    "[B, S, H, D] cache viewed as [B, H, S, D]": _case(seq_major=True, seed=7),
    "64-bit offsets, scale 0.3": _case(wide=True, scale=0.3, seed=8),
    "lengths: empty sequence, full, beyond the cache, negative": _case(
        batch=4, ranks=2, splits=2, local_len=90, lengths=[[0, 90, 200, -5], [0, 37, 90, 16]], seed=10
    ),
    "MANY_GROUPS_CONFIG's key block at batch 64's split count (group 4, 1 split, 2 ranks)": _case(
        batch=2,
        splits=1,
        block_n=fd_config.MANY_GROUPS_CONFIG.block_n,
        local_len=130,
        lengths=[[130, 64], [65, 0]],
        seed=14,
    ),
    "lengths: one block boundary each side": _case(
        batch=4, ranks=2, splits=2, local_len=90, lengths=[[15, 16, 17, 32], [1, 31, 33, 64]], seed=11
    ),
}


@pytest.mark.parametrize("part", [0, 1, 2])
def test_kernel_helpers_match_sdpa_on_the_whole_cache(part):
    from dl_compile import run_in_interpreter

    names = list(CASES)[part::3]
    results = run_in_interpreter(__file__, {"what": "emulate", "cases": [CASES[name] for name in names]})
    for name, result in zip(names, results, strict=True):
        case = CASES[name]
        for call, got in enumerate(result["calls"]):
            epoch = call + 1
            where = f"{name}, call {call + 1}"
            assert got["nan"] == 0, f"{where}: {got['nan']} NaN outputs (a record slot read but never written?)"
            assert got["max_err"] <= TOLERANCE[case["dtype"]] * got["max_ref"], f"{where}: {got}"
            assert got["empty_rows_zero"], f"{where}: a sequence without tokens anywhere is not 0"
            assert got["flags_set"], f"{where}: not every slot of parity {epoch % 2} was flagged with epoch {epoch}"
            assert got["flags_beyond_untouched"], f"{where}: a flag beyond the call's slots was written"
            want = [[epoch << 32]] * case["ranks"]  # this call's epoch handed over, no arrivals
            assert got["states"] == want, f"{where}: device state {got['states']}"
            assert got["other_parity_untouched"], f"{where}: the call wrote the other parity's records"
            assert got["records_beyond_untouched"], f"{where}: a record beyond the call's slots was written"


ROLE_CASES = [(1, 1), (5, 1), (1, 6), (4, 3), (7, 128)]
"""(groups, splits) of the role table: one group or split, several of each, and the most splits (``MAX_SPLITS``)."""


def test_roles_cover_every_group_split_and_slice_once_producers_first():
    """Every (group, split) has one producer and every (group, column slice) one combiner; the producers hold the
    first tickets (the combiners wait for them: the deadlock argument of the module docstring). One interpreter
    process for every case (each process start costs seconds)."""
    from dl_compile import run_in_interpreter

    assert max(splits for _, splits in ROLE_CASES) == fd_config.MAX_SPLITS
    tables = run_in_interpreter(__file__, {"what": "roles", "cases": ROLE_CASES})
    for (groups, splits), table in zip(ROLE_CASES, tables, strict=True):
        where = f"groups={groups}, splits={splits}"
        producers = groups * splits
        roles = [row[2] for row in table]
        assert roles == [1] * producers + [0] * (groups * fd_config.COMBINERS), f"{where}: producers first"
        produced = sorted((g, s) for g, s, _ in table[:producers])
        assert produced == [(g, s) for g in range(groups) for s in range(splits)], f"{where}: producers {produced}"
        combined = sorted((g, c) for g, c, _ in table[producers:])
        assert combined == [(g, c) for g in range(groups) for c in range(fd_config.COMBINERS)], f"{where}: {combined}"


if __name__ == "__main__":
    _main()
