"""bench/moe.py's pure-Python parts on the CPU: the arguments, the all-to-all dispatcher the benchmark holds ours
against (its permutation, grouping and weighted combine, every rank a thread exchanging through shared memory)
checked against ``ops/moe/reference.py``, the check itself, and the results writer; the EP MoE layer's NCCL baseline
(the dispatcher with two grouped GEMMs in torch) against the dense fp32 reference, and the layer bar's arithmetic."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from bench_scripts import load_bench

moe = load_bench("moe.py")


class ThreadComm:
    """``A2ADispatcher``'s transport for ranks that are threads of one process: each rank posts its chunks, all
    wait, each takes what was addressed to it, all wait again."""

    def __init__(self, rank: int, world_size: int, board: dict[str, Any]) -> None:
        self.rank, self.world_size, self.board = rank, world_size, board

    def buffer(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.full((rows, cols), -7, dtype=dtype, device=device)  # poisoned: unwritten rows show

    def exchange_counts(self, out: torch.Tensor, inp: torch.Tensor) -> None:
        ones = [1] * self.world_size
        self.all_to_all(out, inp, ones, ones)

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> None:
        self.board["posted"][self.rank] = [chunk.clone() for chunk in inp.split(in_splits)]
        self.board["barrier"].wait()
        received = [self.board["posted"][source][self.rank] for source in range(self.world_size)]
        assert [chunk.shape[0] for chunk in received] == out_splits
        out.copy_(torch.cat(received))
        self.board["barrier"].wait()


def _run_ranks(world: int, tokens: list[int], hidden: int, topk: int) -> tuple[list[Any], list[Any], list[Any]]:
    """Every rank's dispatch and combine through ``A2ADispatcher`` (threads), and the reference's."""
    experts = 4 * world
    xs, idxs, ws = [], [], []
    for rank, count in enumerate(tokens):
        gen = torch.Generator().manual_seed(50 + rank)
        x, idx, w = moe.make_inputs(count, hidden, experts, topk, gen, none_rate=0.2)
        xs.append(x)
        idxs.append(idx)
        ws.append(w)
    refs, exact = moe.reference_results(xs, idxs, ws, experts)
    board = {"posted": [None] * world, "barrier": threading.Barrier(world, timeout=30)}
    results: list[Any] = [None] * world
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            comm = ThreadComm(rank, world, board)
            disp = moe.A2ADispatcher(comm, experts, hidden, topk, max(tokens), torch.bfloat16, torch.device("cpu"))
            results[rank] = moe.run_a2a(disp, xs[rank], idxs[rank], ws[rank])
        except BaseException as error:  # surfaced below
            errors.append(error)
            board["barrier"].abort()

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return results, refs, exact


@pytest.mark.parametrize("world,tokens", [(2, [9, 6]), (3, [5, 0, 8])], ids=["2ranks", "3ranks-T0"])
def test_the_all_to_all_dispatcher_matches_the_reference(world: int, tokens: list[int]) -> None:
    results, refs, exact = _run_ranks(world, tokens, hidden=16, topk=3)
    for rank in range(world):
        assert moe.compare(results[rank], refs[rank][0], refs[rank][1], exact[rank], 2e-2) == "", rank
        assert results[rank].combined.shape == (tokens[rank], 16)


def test_compare_names_a_wrong_row_and_a_wrong_combine() -> None:
    results, refs, exact = _run_ranks(2, [7, 7], hidden=8, topk=2)
    got = results[0]
    assert got.rows.shape[0] > 0
    got.rows[0] += 1
    assert "received rows differ" in moe.compare(got, refs[0][0], refs[0][1], exact[0], 2e-2)
    got.rows[0] -= 1
    got.combined[0, 0] += 100
    assert "combine: 1 of" in moe.compare(got, refs[0][0], refs[0][1], exact[0], 2e-2)


def test_arguments() -> None:
    args = moe.parse_args([])
    assert args.tokens == [1, 128, 512, 2048, 4096, 16384]
    assert (args.hidden, args.experts, args.topk, args.ll_tokens, args.reps) == (7168, 256, 8, 128, 20)
    assert moe.parse_args(["--tokens", "4096,1,4096"]).tokens == [1, 4096]
    assert (args.skip_layer, args.layer_tokens, args.layer_intermediate) == (False, [128, 4096], 2048)
    layer = moe.parse_args(["--skip-layer", "--layer-tokens", "64,8,64", "--layer-intermediate", "512"])
    assert (layer.skip_layer, layer.layer_tokens, layer.layer_intermediate) == (True, [8, 64], 512)
    only = moe.parse_args(["--only-layer", "--layer-tokens", "128"])
    assert only.only_layer and only.tokens == [128] and not args.only_layer  # the NCCL buffers: the layer's sizes
    for bad in (["--reps", "5"], ["--tokens", "0"], ["--tokens", "a"], ["--topk", "300"], ["--layer-tokens", "0"],
                ["--layer-intermediate", "0"], ["--only-layer", "--skip-layer"],
                ["--only-layer", "--only-dispatch"]):  # fmt: skip
        with pytest.raises(SystemExit):
            moe.parse_args(bad)


def _row(path: str, mode: str, tokens: int, dispatch: float, combine: float) -> dict[str, Any]:
    row = {"path": path, "mode": mode, "tokens": tokens, "verified": "ok", "bytes per rank": 1e6}
    row |= {"dispatch device": dispatch, "combine device": combine, "dispatch idle": 2 * dispatch}
    row |= {"combine idle": 2 * combine, "dispatch host": None, "combine host": 5.0}
    row |= {"dispatch GB/s": 1e3 / dispatch, "combine GB/s": 1e3 / combine}
    return row


def test_the_results_writer(tmp_path: Path) -> None:
    rows = [
        _row(moe.OURS, "normal", 128, 50.0, 60.0),
        _row(moe.NCCL, "normal", 128, 500.0, 300.0),
        _row(moe.OURS, "normal", 4096, 400.0, 900.0),
        _row(moe.NCCL, "normal", 4096, 300.0, 4000.0),
        _row(moe.OURS, "low_latency graphed", 128, 30.0, 45.0),
    ]
    extras = {"title": "2 x test GPU", "allgather_gbps": 10.0, "notes": ["a note"], "fp8": "no fp8 option"}
    path = moe.write_results(tmp_path, "2xTEST", rows, extras, ["- date: now"], 0.0)
    text = path.read_text()
    assert "# MoE dispatch / combine (2 x test GPU)" in text and "- a note" in text
    assert "dispatch 30.0 µs (≤ 40), combine 45.0 µs (≤ 50): PASS" in text
    assert "16.7x, 16.7x, 6.7x, 6.7x: PASS" in text  # NCCL / ours, device and from idle
    assert "normal never slower than NCCL (1..16384 tokens): FAIL — slower: dispatch device at 4096" in text
    assert "vs 75% of the push all-gather's 10.0 GB/s = 7.5: FAIL" in text  # 2.5 and 1.1 GB/s
    assert "| ours | normal | 128 | 50.0 / 100.0 / — | 60.0 / 120.0 / 5.0 |" in text
    assert "| 10.00 / 10.00 / 5.00 / 5.00 | ok |" in text
    data = json.loads((tmp_path / "moe_2xTEST.json").read_text())
    assert len(data["rows"]) == 5 and data["extras"]["allgather_gbps"] == 10.0


def test_combine_option_rows_get_their_bars_and_tolerance() -> None:
    """``combine_bars``: ours and each combine option with rows, at 4096 tokens against 75% of the all-gather and in
    low-latency mode graphed (<= 50 µs, >= 5x NCCL's combine device and from idle); a path without rows gets none.
    The bf16 partials (the default's) are checked with the NCCL dispatcher's 2e-2, fp32 partials with 8e-3."""
    from triton_dist.ops.moe import MoeConfig

    rows = [
        _row(moe.OURS, "normal", 4096, 400.0, 900.0),
        _row(moe.COMBINE_FP32, "normal", 4096, 400.0, 100.0),  # 10 GB/s of the 1e6 bytes
        _row(moe.NCCL, "normal", 128, 500.0, 300.0),
        _row(moe.COMBINE_FP32, "low_latency graphed", 128, 30.0, 29.0),  # 300 / 29 = 10.3x, idle 600 / 58
        _row(moe.OURS, "low_latency graphed", 128, 30.0, 38.0) | {"combine idle": 150.0},  # 7.9x device, 4.0x idle
    ]
    lines = moe.combine_bars(rows, {"allgather_gbps": 12.0}, 128)
    assert lines == [
        f"{moe.OURS} combine normal T=4096: 900.0 µs device, 1.1 GB/s per rank vs 75% of the push all-gather's "
        "12.0 GB/s = 9.0: FAIL",
        f"{moe.OURS} combine low-latency T=128 graphed: 38.0 µs device (≤ 50), 7.9x, 4.0x the NCCL dispatcher's "
        "combine (device, idle; ≥ 5x): FAIL",
        f"{moe.COMBINE_FP32} combine normal T=4096: 100.0 µs device, 10.0 GB/s per rank vs 75% of the push "
        "all-gather's 12.0 GB/s = 9.0: PASS",
        f"{moe.COMBINE_FP32} combine low-latency T=128 graphed: 29.0 µs device (≤ 50), 10.3x, 10.3x the NCCL "
        "dispatcher's combine (device, idle; ≥ 5x): PASS",
    ]
    assert moe.combine_bars(rows[:1], {}, 128) == [], "no all-gather, no low-latency rows: no bars"
    assert [moe.combine_rtol(o) for o in (None, {}, {"config": MoeConfig(combine_spread=False)})] == [2e-2] * 3
    fp32 = [MoeConfig(combine_partials="fp32"), MoeConfig(combine_partials="fp32", combine_spread=False)]
    assert [moe.combine_rtol({"config": config}) for config in fp32] == [8e-3] * 2
    assert [moe.COMBINE_FP32, moe.COMBINE_FP32_NO_SPREAD] == ["ours combine-partials=fp32",
                                                              "ours combine-partials=fp32, no spread"]  # fmt: skip
    args = moe.parse_args(["--skip-combine-options"])
    assert args.skip_combine_options and not moe.parse_args([]).skip_combine_options


def test_the_identity_expert_check() -> None:
    x, idx, w = moe.make_inputs(6, 32, 8, 2, torch.Generator().manual_seed(3), none_rate=0.3)
    out = (x.float() * (w * (idx >= 0)).sum(1, keepdim=True)).to(x.dtype)
    assert moe.closed_form_problem(out, x, idx, w, 8e-3) == ""
    out[2, 5] = out[2, 5] * 1.5 + 1
    assert moe.closed_form_problem(out, x, idx, w, 8e-3) == "identity-expert combine: 1 of 192 elements off"


def _grouped_gemm(x: torch.Tensor, w: torch.Tensor, counts: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """``ops.grouped_gemm``'s normal layout in torch (fp32 accumulation, x's dtype out); rows outside every
    expert's range stay poisoned."""
    assert counts.dtype == offsets.dtype == torch.int32 and counts.shape == offsets.shape == (w.shape[0],)
    y = torch.full((x.shape[0], w.shape[2]), float("nan"), dtype=x.dtype)
    for e, (count, offset) in enumerate(zip(counts.tolist(), offsets.tolist(), strict=True)):
        y[offset : offset + count] = (x[offset : offset + count].float() @ w[e].float()).to(x.dtype)
    return y


def test_the_nccl_layer_path_matches_the_dense_reference() -> None:
    """The layer's NCCL baseline (A2ADispatcher, two grouped GEMMs, combine) on 2 thread ranks against the dense
    fp32 reference of every rank's experts, summed over the ranks, with some ids -1."""
    world, tokens, hidden, inter, experts, topk = 2, [6, 9], 16, 8, 8, 3
    local = experts // world
    inputs = [moe.make_inputs(t, hidden, experts, topk, torch.Generator().manual_seed(70 + r), none_rate=0.2)
              for r, t in enumerate(tokens)]  # fmt: skip
    gen = torch.Generator().manual_seed(7)
    gate_up = [(torch.randn(local, hidden, 2 * inter, generator=gen) / 4).bfloat16() for _ in range(world)]
    down = [(torch.randn(local, inter, hidden, generator=gen) / 3).bfloat16() for _ in range(world)]
    board = {"posted": [None] * world, "barrier": threading.Barrier(world, timeout=30)}
    outs: list[Any] = [None] * world
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            comm = ThreadComm(rank, world, board)
            disp = moe.A2ADispatcher(comm, experts, hidden, topk, max(tokens), torch.bfloat16, torch.device("cpu"))
            outs[rank] = moe.nccl_layer_forward(disp, gate_up[rank], down[rank], *inputs[rank], _grouped_gemm)
        except BaseException as error:  # surfaced below
            errors.append(error)
            board["barrier"].abort()

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    every = [torch.cat([inp[i] for inp in inputs]) for i in range(3)]
    want = sum(moe.dense_moe_partial(*every, gate_up[r], down[r], r * local) for r in range(world))
    assert isinstance(want, torch.Tensor) and float(want.abs().max()) > 0.1
    for rank, mine in enumerate(want.split(tokens)):
        assert outs[rank].shape == (tokens[rank], hidden) and outs[rank].dtype == torch.bfloat16
        assert moe.layer_problem(outs[rank], mine, "nccl") == "", rank
    wrong = [down[1], down[0]]  # the other rank's experts: the check must see it
    assert moe.layer_problem(sum(moe.dense_moe_partial(*every, gate_up[r], wrong[r], r * local) for r in range(2)),
                             want, "swapped") != ""  # fmt: skip


def test_the_dense_reference_and_the_layer_check() -> None:
    x = torch.randn(3, 4)
    idx = torch.tensor([[0, 2], [1, -1], [2, 3]], dtype=torch.int32)
    w = torch.rand(3, 2)
    gate_up, down = torch.randn(2, 4, 6), torch.randn(2, 3, 4)  # this rank: experts 2 and 3
    got = moe.dense_moe_partial(x, idx, w, gate_up, down, 2)

    def expert(e: int, row: torch.Tensor) -> torch.Tensor:
        h = row @ gate_up[e]
        return (torch.nn.functional.silu(h[:3]) * h[3:]) @ down[e]

    want = torch.stack(
        [w[0, 1] * expert(0, x[0]), torch.zeros(4), w[2, 0] * expert(0, x[2]) + w[2, 1] * expert(1, x[2])]
    )
    torch.testing.assert_close(got, want)
    assert moe.layer_problem(got, want, "same") == ""
    off = got.clone()
    off[2, 1] += float(want.abs().max())
    assert moe.layer_problem(off, want, "off").startswith("off: 1 of 12 elements off (at (2, 1)")
    off[2, 1] = float("nan")
    assert moe.layer_problem(off, want, "nan").startswith("nan: 1 of 12")
    assert moe.layer_problem(got[:2], want, "short") == "short: shape [2, 4] != [3, 4]"


def _layer(path: str, tokens: int, device: float, idle: float, verified: str = "ok") -> dict[str, Any]:
    return {"path": path, "mode": "layer", "tokens": tokens, "forward device": device, "forward idle": idle,
            "forward host": None, "verified": verified}  # fmt: skip


def test_the_layer_bar_and_its_table(tmp_path: Path) -> None:
    rows = [
        _row(moe.OURS, "normal", 128, 50.0, 60.0),
        _row(moe.NCCL, "normal", 128, 500.0, 300.0),
        _layer(moe.LAYER_OURS, 128, 100.0, 200.0),
        _layer(moe.LAYER_GATHER, 128, 80.0, 160.0),
        _layer(moe.LAYER_NCCL, 128, 200.0, 300.0),
        _layer(moe.LAYER_OURS, 4096, 1000.0, 1100.0),
        _layer(moe.LAYER_GATHER, 4096, 900.0, 1000.0, "FAILED: vs layer: ours: 3 of 9 elements off"),
        _layer(moe.LAYER_NCCL, 4096, 1200.0, 1300.0),
        _layer(moe.LAYER_OURS, 16, 10.0, 20.0),
    ]
    assert moe.layer_bar(rows, 128) == (
        "layer: ours / NCCL dispatcher + same GEMM: 2.00x (>= 1.5: PASS) at 128 tokens/rank "
        "(device 100.0 vs 200.0 µs; from idle 1.50x; gather layout 2.50x)"
    )
    assert moe.layer_bar(rows, 4096).startswith("layer: ours / NCCL dispatcher + same GEMM: 1.20x (>= 1.5: FAIL)")
    assert moe.layer_bar(rows, 4096).endswith("gather layout 1.33x; a row failed its check)")
    slow = [dict(r, verified="FAILED: vs the dense fp32 reference") if r["tokens"] == 128 else r for r in rows]
    assert "2.00x (>= 1.5: FAIL)" in moe.layer_bar(slow, 128)  # fast but wrong is no pass
    assert moe.layer_bar(rows, 16).endswith("at 16 tokens/rank: not measured")
    assert moe.layer_bound(rows, 128) is None  # no GEMMs-only row yet
    # the GEMMs-only rows (the bound: NCCL's µs / theirs) and a low-latency layer row
    rows += [
        dict(_layer(moe.LAYER_GEMMS, 128, 80.0, 90.0), **{"forward host": 12.0}),
        _layer(moe.LAYER_LL, 128, 50.0, 60.0),
        _layer(moe.LAYER_GEMMS, 4096, 900.0, 1000.0),
    ]
    assert moe.layer_bound(rows, 128) == 2.5 and moe.layer_bound(rows, 16) is None
    assert moe.layer_bar(rows, 128) == (
        "layer: ours / NCCL dispatcher + same GEMM: 2.00x (>= 1.5: PASS; bound 2.50x: the grouped GEMMs take 80 of "
        "100 µs) at 128 tokens/rank (device 100.0 vs 200.0 µs; from idle 1.50x; gather layout 2.50x; low-latency "
        "graphed 4.00x)"
    )
    assert moe.layer_bar(rows, 4096).startswith(
        "layer: ours / NCCL dispatcher + same GEMM: 1.20x (>= 1.5: FAIL; bound 1.33x, below the bar: the grouped "
        "GEMMs take 900 of 1000 µs) at 4096 tokens/rank"
    )
    wrong_ll = [dict(r, verified="FAILED: replayed vs layer: ours") if r["path"] == moe.LAYER_LL else r for r in rows]
    assert moe.layer_bar(wrong_ll, 128).endswith("low-latency graphed 4.00x; layer: ours low-latency (graphed) "
                                                 "failed its check)")  # fmt: skip
    extras = {"title": "2 x test GPU", "notes": [], "layer_intermediate": 256, "ll_tokens": 64}
    text = moe.write_results(tmp_path, "2xTEST", rows, extras, [], 0.0).read_text()
    assert "- layer: ours / NCCL dispatcher + same GEMM: 2.00x (>= 1.5: PASS; bound 2.50x" in text
    assert "intermediate size 256 per expert" in text
    assert "| layer: ours | 128 | 100.0 / 200.0 / — | 2.00 / 1.50 | ok |" in text
    assert "| layer: ours gather | 4096 | 900.0 / 1000.0 / — | 1.33 / 1.30 | FAILED: vs layer: ours" in text
    assert "| layer: NCCL dispatcher + same GEMM | 128 | 200.0 / 300.0 / — | — | ok |" in text
    assert "| ours | normal | 128 |" in text and "| layer: ours | layer |" not in text  # not in the main table
    assert "| layer: grouped GEMMs only | 128 | 80.0 / 90.0 / 12.0 | 2.50 / 3.33 | ok |" in text
    assert "| layer: ours low-latency (graphed) | 128 | 50.0 / 60.0 / — | 4.00 / 5.00 | ok |" in text
    assert "(max_tokens_per_rank 64)" in text
    assert "1.20x (>= 1.5: FAIL; bound 1.33x, below the bar: the grouped GEMMs take 900 of 1000 µs)" in text
    data = json.loads((tmp_path / "moe_2xTEST.json").read_text())
    assert sum(r["mode"] == "layer" for r in data["rows"]) == 10
    alone = [r for r in rows if r["mode"] == "layer"]  # --only-layer: no dispatch rows
    text = moe.write_results(tmp_path, "2xONLY", alone, extras, [], 0.0).read_text()
    assert "- layer: ours / NCCL dispatcher + same GEMM: 2.00x (>= 1.5: PASS; bound 2.50x" in text
    assert "| layer: grouped GEMMs only | 4096 | 900.0 / 1000.0 / — | 1.33 / 1.30 | ok |" in text
    assert "| dispatch µs device" not in text  # no empty dispatch table


def test_the_expert_gemms_are_the_layers_expert_compute() -> None:
    """``expert_gemms`` (the GEMMs-only row's compute) on rows grouped by expert, one expert with none, against each
    row through its expert's weights in fp32."""
    gen = torch.Generator().manual_seed(11)
    hidden, inter, counts = 8, 4, [2, 0, 3]
    rows = torch.randn(sum(counts), hidden, generator=gen).bfloat16()
    gate_up = (torch.randn(len(counts), hidden, 2 * inter, generator=gen) / 3).bfloat16()
    down = (torch.randn(len(counts), inter, hidden, generator=gen) / 2).bfloat16()
    count = torch.tensor(counts, dtype=torch.int32)
    offsets = (torch.cumsum(count, 0) - count).to(torch.int32)
    got = moe.expert_gemms(rows, gate_up, down, count, offsets, _grouped_gemm)
    expert = torch.repeat_interleave(torch.arange(len(counts)), count)
    h = torch.einsum("rh,rhn->rn", rows.float(), gate_up[expert].float())
    want = torch.einsum("ri,rih->rh", torch.nn.functional.silu(h[:, :inter]) * h[:, inter:], down[expert].float())
    assert got.shape == want.shape and got.dtype == torch.bfloat16
    assert moe.layer_problem(got, want, "gemms") == ""
    swapped = moe.expert_gemms(rows, gate_up.flip(0), down, count, offsets, _grouped_gemm)  # the check must see it
    assert moe.layer_problem(swapped, want, "swapped") != ""


def _graphed(path: str, one_call: tuple[float, float], per_call: tuple[float, float]) -> dict[str, Any]:
    """A low-latency graphed row as ``Bench.graphed_row`` makes it: ``timed_row``'s on one-call graphs, then the
    device µs per call in graphs of ``GRAPHED_CALLS`` (a step = dispatch + combine)."""
    row = _row(path, "low_latency graphed", 128, *one_call)
    return moe.with_graphed_calls(row, moe.graphed_per_call(per_call[0], per_call[0] + per_call[1]))


def test_graphed_rows_keep_both_timings_and_the_bars_read_the_per_call_one(tmp_path: Path) -> None:
    """The low-latency graphed rows' device µs are per call in graphs of ``GRAPHED_CALLS`` (combine = the steps'
    µs - the dispatches'), the one-call graphs' kept beside them; the bars (<= 40 / 50 µs, >= 5x NCCL) read the
    per-call µs (here they pass where the one-call ones fail), and the results name both."""
    assert moe.GRAPHED_CALLS == 10
    assert moe.graphed_per_call(20.0, 45.5) == {"dispatch": 20.0, "combine": 25.5, "step": 45.5}
    assert moe.graphed_per_call(20.0, 19.0)["combine"] is None  # noise above the combine: no number, no bar pass
    one = _row(moe.OURS, "low_latency graphed", 128, 42.0, 55.0)
    row = moe.with_graphed_calls(one, moe.graphed_per_call(22.0, 46.0))
    assert one["dispatch device"] == 42.0 and "step device" not in one  # the input row is left as it was
    assert (row["dispatch device"], row["combine device"], row["step device"]) == (22.0, 24.0, 46.0)
    assert (row["dispatch device 1-call graph"], row["combine device 1-call graph"]) == (42.0, 55.0)
    assert (row["dispatch idle"], row["combine idle"], row["combine host"]) == (84.0, 110.0, 5.0)  # one call's, kept
    assert row["dispatch GB/s"] == pytest.approx(1e6 / 22.0 / 1e3) and row["combine GB/s"] == pytest.approx(1e3 / 24)
    noisy = moe.with_graphed_calls(one, moe.graphed_per_call(22.0, 21.0))
    assert noisy["combine device"] is None and noisy["combine GB/s"] is None
    rows = [_row(moe.NCCL, "normal", 128, 500.0, 300.0), row, _graphed(moe.COMBINE_FP32, (40.0, 60.0), (21.0, 70.0))]
    lines = moe.bars(rows, {}, 128)
    assert lines[0] == (
        "- low-latency, 128 tokens, graphed (per call, 10 calls per graph): dispatch 22.0 µs (≤ 40), combine 24.0 µs "
        "(≤ 50): PASS (one call per graph: dispatch 42.0, combine 55.0 µs)"
    )
    assert lines[1].endswith("(device and from idle, dispatch and combine): 22.7x, 11.9x, 12.5x, 5.5x: PASS")
    assert lines[1].startswith("- low-latency (per call, 10 calls per graph) ≥ 5x the NCCL dispatcher")
    combine = moe.combine_bars(rows, {}, 128)
    assert combine == [
        f"{moe.OURS} combine low-latency T=128 graphed (per call, 10 calls per graph): 24.0 µs device (≤ 50), 12.5x, "
        "5.5x the NCCL dispatcher's combine (device, idle; ≥ 5x): PASS (one call per graph: 55.0 µs)",
        f"{moe.COMBINE_FP32} combine low-latency T=128 graphed (per call, 10 calls per graph): 70.0 µs device (≤ 50), "
        "4.3x, 5.0x the NCCL dispatcher's combine (device, idle; ≥ 5x): FAIL (one call per graph: 60.0 µs)",
    ]
    assert moe.graphed_table_rows(rows) == [
        [moe.OURS, "128", "22.0 / 42.0", "24.0 / 55.0", "46.0 / 97.0"],
        [moe.COMBINE_FP32, "128", "21.0 / 40.0", "70.0 / 60.0", "91.0 / 100.0"],
    ]
    text = moe.write_results(tmp_path, "2xTEST", rows, {"title": "t", "notes": []}, [], 0.0).read_text()
    assert "## Low-latency graphed: 10 calls per graph against one" in text
    assert "| ours | 128 | 22.0 / 42.0 | 24.0 / 55.0 | 46.0 / 97.0 |" in text
    assert "| ours | low_latency graphed | 128 | 22.0 / 84.0 / — | 24.0 / 110.0 / 5.0 |" in text  # the main table
    assert "µs per call in CUDA graphs of 10 calls" in text
    plain = moe.write_results(tmp_path, "2xOLD", rows[:1], {"title": "t", "notes": []}, [], 0.0).read_text()
    assert "## Low-latency graphed" not in plain  # no graphed rows: no such table


class _FakeOps:
    """``triton_dist.ops``' MoE calls for ``Bench.graphed_calls`` on the CPU: each dispatch returns a fresh
    ``recv_x`` and handle; a combine checks it got a dispatch's own ``recv_x`` (the identity experts, never a zeros
    stand-in) and handle, at most once per handle."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.kwargs: list[dict[str, Any]] = []
        self.combined: set[int] = set()

    def moe_dispatch(self, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor, experts: int, **kwargs: Any) -> Any:
        self.log.append("d")
        self.kwargs.append(kwargs)
        return x.repeat(2, 1), {"id": len(self.log), "x": x}

    def moe_combine(self, y: torch.Tensor, handle: dict[str, Any]) -> torch.Tensor:
        assert torch.equal(y, handle["x"].repeat(2, 1)), "combine's y is not its dispatch's recv_x"
        assert handle["id"] not in self.combined, "a handle combined twice"
        self.combined.add(handle["id"])
        self.log.append("c")
        return y[: handle["x"].shape[0]]


def test_graphed_calls_time_dispatches_and_steps_in_graphs_of_ten(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Bench.graphed_calls`` through ``testing.timing.graphed_us`` (a fake that runs ``fn`` ``calls`` times and
    returns µs per call from what it ran: 20 per dispatch, 25 per combine): a graph of 10 dispatches and one of 10
    dispatch + combine steps, each combine of its own dispatch's recv_x and handle, lead=True, ``--reps`` replays,
    the variant's options passed to every dispatch; combine = steps - dispatches."""
    import triton_dist
    import triton_dist.testing.timing as timing

    fake = _FakeOps()
    seen: list[dict[str, Any]] = []

    def graphed_us(fn: Any, calls: int = 10, replays: int = 20, warmup: int = 3, *, lead: bool = False) -> float:
        seen.append({"calls": calls, "replays": replays, "lead": lead})
        start = len(fake.log)
        for _ in range(calls):
            fn()
        ran = fake.log[start:]
        return (20.0 * ran.count("d") + 25.0 * ran.count("c")) / calls

    monkeypatch.setattr(timing, "graphed_us", graphed_us)
    monkeypatch.setattr(triton_dist.ops, "moe_dispatch", fake.moe_dispatch)
    monkeypatch.setattr(triton_dist.ops, "moe_combine", fake.moe_combine)
    bench = object.__new__(moe.Bench)
    bench.args = moe.parse_args(["--ll-tokens", "4", "--reps", "30", "--experts", "8"])
    x, idx, w = moe.make_inputs(4, 8, 8, 2, torch.Generator().manual_seed(5))
    got = bench.graphed_calls(x, idx, w, {"config": "variant"})
    assert got == {"dispatch": 20.0, "combine": 25.0, "step": 45.0}
    assert seen == [{"calls": 10, "replays": 30, "lead": True}] * 2
    assert "".join(fake.log) == "d" * 10 + "dc" * 10
    want = {"mode": "low_latency", "max_tokens_per_rank": 4, "config": "variant"}
    assert fake.kwargs == [want] * 20


def test_graphed_row_keeps_the_one_call_graph_timing_and_both_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Bench.graphed_row``: ``timed_row`` on the one-call graphs (its device µs kept as the 1-call columns), the
    per-call µs of ``graphed_calls`` as the device columns, and the verification of the one-call graphs with the
    10-step graph's check (``check_steps_graph``) in ``verified``."""
    bench = object.__new__(moe.Bench)
    bench.args = moe.parse_args(["--ll-tokens", "128"])
    replays: list[str] = []
    graphs = {"dispatch": type("G", (), {"replay": lambda self: replays.append("d")})(),
              "combine": type("G", (), {"replay": lambda self: replays.append("c")})()}  # fmt: skip

    def timed_row(path: str, mode: str, tokens: int, dispatch: Any, combine: Any, nbytes: float, **_: Any) -> Any:
        dispatch()
        combine()
        return _row(path, mode, tokens, 31.0, 29.0)

    monkeypatch.setattr(bench, "timed_row", timed_row, raising=False)
    monkeypatch.setattr(bench, "graphed_calls", lambda *a: moe.graphed_per_call(18.0, 40.0), raising=False)
    monkeypatch.setattr(bench, "check_steps_graph", lambda *a: "FAILED on another rank", raising=False)
    inputs = (torch.zeros(1), torch.zeros(1), torch.zeros(1))
    verified = {f"{moe.OURS}/low_latency graphed": "ok"}
    row = bench.graphed_row(moe.OURS, graphs, inputs, 1e6, (print, print), verified)
    assert replays == ["d", "c"], "timed_row times the one-call graphs' replays"
    assert (row["dispatch device"], row["combine device"], row["step device"]) == (18.0, 22.0, 40.0)
    assert (row["dispatch device 1-call graph"], row["combine device 1-call graph"]) == (31.0, 29.0)
    assert row["verified"] == "ok; 10 steps in one graph: FAILED on another rank"
    assert moe.combine_bars([row], {}, 128)[0].endswith("FAIL (one call per graph: 29.0 µs)")  # no NCCL row: FAIL


def test_the_bench_sets_up_under_every_skip_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Bench.__init__`` (its world and GPU name faked) under each ``--skip-*`` flag alone and all together: every
    variant it registers has its options and its size. (``--skip-programs`` once left ``MoeConfig`` unbound: a local
    import in one branch shadowed the module's.)"""
    import triton_dist.testing as testing

    class World:
        rank, world_size, device = 0, 2, torch.device("cpu")

    monkeypatch.setattr(testing, "setup_distributed", lambda heap_size=None: World())
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA Fake GPU")
    monkeypatch.setattr(moe, "TorchComm", lambda: ThreadComm(0, 2, {}))
    skips = ["--skip-nvshmem", "--skip-layer", "--skip-gather", "--skip-pipelined", "--skip-programs",
             "--skip-combine-options"]  # fmt: skip
    for argv in [[], *([flag] for flag in skips), skips]:
        bench = moe.Bench(moe.parse_args([*argv, "--tokens", "4", "--ll-tokens", "4", "--layer-tokens", "4"]))
        assert set(bench.variants) <= set(bench.variant_sizes), argv
        assert bench.slug == "2xFake", argv


def test_low_latency_rows_for_the_default_and_each_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Bench.low_latency``: the default's rows (no options) and each variant's with a low-latency mode (its options
    in every dispatch: graphs, graphed row, eager calls), graphed then eager, each eager row with its verification;
    a normal-only variant gets none."""
    import triton_dist

    fake = _FakeOps()
    monkeypatch.setattr(triton_dist.ops, "moe_dispatch", fake.moe_dispatch)
    monkeypatch.setattr(triton_dist.ops, "moe_combine", fake.moe_combine)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(moe, "sent_bytes", lambda *args: 1000.0)  # its all_reduce wants a process group
    bench = object.__new__(moe.Bench)
    bench.args = moe.parse_args(["--ll-tokens", "4", "--experts", "8"])
    bench.local, bench.rank, bench.size, bench.rows = 4, 0, 2, []
    bench.variants = {"ours chunked": {"config": "chunks"}, "ours gather": {"layout": "gather"}}
    bench.normal_only = {"ours gather"}
    x, idx, w = moe.make_inputs(4, 8, 8, 2, torch.Generator().manual_seed(5))
    bench.inputs = lambda tokens: (x, idx, w)  # type: ignore[method-assign]
    graphs_of: list[Any] = []
    bench.ll_graphs = lambda x, idx, w, options=None: graphs_of.append(options) or {"of": options}  # type: ignore
    bench.save = lambda: None  # type: ignore[method-assign]

    def graphed_row(label: str, graphs: Any, inputs: Any, nbytes: float, host: Any, verified: Any,
                    options: Any = None) -> dict[str, Any]:  # fmt: skip
        host[0]()
        host[1]()
        return {"path": label, "mode": "graphed", "graphs": graphs, "options": options}

    def timed_row(label: str, mode: str, tokens: int, dispatch: Any, combine: Any, nbytes: float,
                  host: Any = None) -> dict[str, Any]:  # fmt: skip
        dispatch()
        combine()
        return {"path": label, "mode": mode, "tokens": tokens}

    bench.graphed_row = graphed_row  # type: ignore[method-assign]
    bench.timed_row = timed_row  # type: ignore[method-assign]
    bench.low_latency({f"{moe.OURS}/low_latency": "ok", "ours chunked/low_latency": "ok chunked"})
    assert [(r["path"], r["mode"]) for r in bench.rows] == [
        (moe.OURS, "graphed"), (moe.OURS, "low_latency eager"),
        ("ours chunked", "graphed"), ("ours chunked", "low_latency eager"),
    ]  # fmt: skip
    assert graphs_of == [{}, {"config": "chunks"}]
    assert [r.get("options") for r in bench.rows[::2]] == [{}, {"config": "chunks"}]
    assert [r.get("verified") for r in bench.rows[1::2]] == ["ok", "ok chunked"]
    want = {"mode": "low_latency", "max_tokens_per_rank": 4}
    assert fake.kwargs == [want] * 3 + [{**want, "config": "chunks"}] * 3  # the eager dispatch first, then 2 calls


def test_phase_samples_are_the_gaps_between_the_hooks_events() -> None:
    """``add_phase_samples``: each phase the µs since the event before it, ``total`` first to last (events stand in
    with ``elapsed_time`` in ms, as CUDA events)."""

    class Event:
        def __init__(self, ms: float) -> None:
            self.ms = ms

        def elapsed_time(self, end: Event) -> float:
            return end.ms - self.ms

    samples: dict[str, list[float]] = {"push": [1.0]}
    moe.add_phase_samples(samples, [("start", Event(0.0)), ("push", Event(0.25)), ("expand", Event(0.5))])
    assert samples == {"push": [1.0, 250.0], "expand": [250.0], "total": [500.0]}
