"""The ops on CPU ranks: their own host code and fused kernels under the emulation of the dl primitives
(``TRITON_INTERPRET=1``, ``triton_dist.init(device="cpu")``, one process per rank on gloo), at 2 and 3 ranks,
against torch on the CPU.

On N ranks (``emulated_ranks.run_ranks``; the tests below run it once per world size), ``_worker`` builds every
rank's inputs from one seed (fresh random data per case), runs each case through the public op (or the op's
config-forcing entry point), computes the whole reference with torch itself and returns, per case, what differed
on this rank. Outputs given to an op are poisoned (NaN) first, so a kernel that
skips part of its output fails.

Cases, each run twice (the second call relaunches the plan), with the selected config and with forced ones:

- ``all_reduce``: sizes and dtypes, a fresh output, and each algorithm the interpreter runs (one-shot pull,
  one-shot push, two-shot; not "one_shot_ll", inline PTX);
- ``gemm_rs``: the fused kernel, a one-tile fp16 call, the two-kernel variant, the undeferred notify, and the cuBLAS
  path's two producers (the copy engine's a host copy plus the flag kernel);
- ``ag_gemm``: the fused pointer kernel with the copy-engine producer (host copies plus flag writes) and with the
  push kernel, C and the gathered A;
- ``gemm_ar``: the fused kernel, one row in fp16, split-K, and matmul followed by the emulated all-reduce;
- ``flash_decode``: GQA, one head in fp16, three splits with one combiner, a sequence without tokens;
- every op with ``TRITON_INTERPRET`` off on the same CPU world: its OpInputError naming the CPU device.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
from emulated_ranks import run_ranks

HEAP = "160M"
"""Each rank's CPU heap: the ops' workspaces are sized for GPUs (the two-shot all-reduce's alone is 32 MiB)."""


def _close(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> list[str]:
    """What differs between ``got`` and ``want`` (shape, NaNs left from the poison, values beyond tolerance)."""
    if got.shape != want.shape:
        return [f"shape {list(got.shape)} != {list(want.shape)}"]
    if got.dtype != want.dtype:
        return [f"dtype {got.dtype} != {want.dtype}"]
    if torch.isnan(got.float()).any():
        return [f"{int(torch.isnan(got.float()).sum())} NaN elements (left unwritten?)"]
    if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol):
        return [f"max abs error {(got.float() - want.float()).abs().max().item():.4g}"]
    return []


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return (1e-4, 1e-4) if dtype == torch.float32 else (2e-2, 2e-2)


def _all_reduce_cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    import triton_dist
    from triton_dist.ops.all_reduce.config import AllReduceConfig
    from triton_dist.ops.all_reduce.op import _run

    def selected(numel: int, dtype: torch.dtype) -> list[str]:
        xs = [torch.randn(numel, generator=gen).to(dtype) for _ in range(size)]
        out = torch.full_like(xs[rank], float("nan"))
        triton_dist.ops.all_reduce(xs[rank], out=out)
        return _close(out, sum(x.float() for x in xs).to(dtype), *_tolerance(dtype))

    def forced(algo: str) -> list[str]:
        problems = []
        for _ in range(2):  # the second call relaunches the plan
            xs = [torch.randn(3, 333, generator=gen) for _ in range(size)]
            out = torch.full_like(xs[rank], float("nan"))
            _run(xs[rank], out, config=AllReduceConfig(algo, 2, 1))
            problems += _close(out, sum(xs), 1e-4, 1e-4)
        return problems

    def fresh_output() -> list[str]:
        xs = [torch.randn(64, generator=gen, dtype=torch.float16) for _ in range(size)]
        out = triton_dist.ops.all_reduce(xs[rank])
        return _close(out, sum(x.float() for x in xs).half(), 1e-2, 1e-2)

    cases: dict[str, Callable[[], list[str]]] = {
        f"all_reduce/{numel}/{str(dtype)[6:]}": (lambda numel=numel, dtype=dtype: selected(numel, dtype))
        for numel in (1, 3000)
        for dtype in (torch.float32, torch.bfloat16)
    }
    cases["all_reduce/fresh_output"] = fresh_output
    for algo in ("one_shot", "one_shot_push", "two_shot"):
        cases[f"all_reduce/{algo}"] = lambda algo=algo: forced(algo)
    return cases


def _gemm_rs_cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    import triton_dist
    from triton_dist.ops.gemm_rs.op import EMULATED_CONFIG, gemm_rs_with

    def run(config: Any, m: int, n: int, k: int, dtype: torch.dtype = torch.bfloat16) -> list[str]:
        problems = []
        for _ in range(2):  # the second call relaunches the plan (the next epoch, the other scratch half)
            a_s = [torch.randn(m * size, k, generator=gen).to(dtype) for _ in range(size)]
            b_s = [torch.randn(k, n, generator=gen).to(dtype) for _ in range(size)]
            out = (
                triton_dist.ops.gemm_rs(a_s[rank], b_s[rank])
                if config is None
                else gemm_rs_with(a_s[rank], b_s[rank], config)
            )
            want = sum(a.float() @ b.float() for a, b in zip(a_s, b_s, strict=True))[rank * m : (rank + 1) * m]
            problems += _close(out, want.to(dtype), 0.1, 2e-2)
        return problems

    return {
        "gemm_rs/selected": lambda: run(None, 20, 40, 24),
        "gemm_rs/fp16_one_tile": lambda: run(None, 3, 8, 5, torch.float16),
        "gemm_rs/two_kernels": lambda: run(dataclasses.replace(EMULATED_CONFIG, fused=False), 12, 24, 16),
        "gemm_rs/input_partials": lambda: run(dataclasses.replace(EMULATED_CONFIG, partial_dtype="input"), 12, 24, 16),
        "gemm_rs/tma_config_runs_pointers": lambda: run(
            dataclasses.replace(EMULATED_CONFIG, matmul=dataclasses.replace(EMULATED_CONFIG.matmul, use_tma=True)),
            16,
            32,
            16,
        ),
        "gemm_rs/matmul_copy_engine": lambda: run(dataclasses.replace(EMULATED_CONFIG, gemm="cublas"), 4, 8, 16),
        "gemm_rs/matmul_direct": lambda: run(
            dataclasses.replace(EMULATED_CONFIG, gemm="cublas", producer="direct"), 4, 8, 16
        ),
    }


def _ag_gemm_cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    import triton_dist
    from triton_dist.ops.ag_gemm.op import EMULATED_CONFIG, ag_gemm_impl
    from triton_dist.ops.tuning import OverlapConfig

    def run(config: Any, m: int, n: int, k: int, dtype: torch.dtype = torch.bfloat16) -> list[str]:
        problems = []
        for _ in range(2):  # the second call relaunches the plan (the next epoch)
            a_s = [torch.randn(m, k, generator=gen).to(dtype) for _ in range(size)]
            b = torch.randn(k, n, generator=gen).to(dtype)
            if config is None:
                c, gathered = triton_dist.ops.ag_gemm(a_s[rank], b, return_gathered=True)
            else:
                c, gathered = ag_gemm_impl(a_s[rank], b, True, config)
            want = torch.cat(a_s)
            problems += _close(c, (want.float() @ b.float()).to(dtype), 0.1, 2e-2)
            if gathered is None or not torch.equal(gathered, want):
                problems.append("the gathered A differs from torch.cat of every rank's A")
        return problems

    def cublas_path(double: bool, m: int) -> list[str]:
        """The cuBLAS path with the begin barrier (as captured calls run it) or on double buffers (eager calls'
        default), two signatures sharing one problem's buffers: calls alternate them, in any mix."""
        from triton_dist.ops.ag_gemm import op

        default, op.CUBLAS_DOUBLE_BUFFER = op.CUBLAS_DOUBLE_BUFFER, double
        try:
            problems = []
            for n in (8, 12, 12, 8, 8):  # with double buffers: 0, 1, 0, 1, 0 whichever plan runs
                problems += run(OverlapConfig(backend="cublas"), m, n, 16)
            calls = [ws.calls for ws in op.resources.workspaces("ag_gemm.double") if ws.recv.shape[1] == m * size]
            if calls != ([10] if double else []):
                problems.append(f"the double buffers counted {calls} eager calls")
            return problems
        finally:
            op.CUBLAS_DOUBLE_BUFFER = default

    return {
        "ag_gemm/selected": lambda: run(None, 70, 40, 24),
        "ag_gemm/fp16_one_chunk": lambda: run(None, 5, 8, 16, torch.float16),
        "ag_gemm/push_kernel": lambda: run(
            dataclasses.replace(EMULATED_CONFIG, producer="sm", push_ctas=2), 66, 24, 16
        ),
        "ag_gemm/cublas_path_barrier": lambda: cublas_path(False, 5),
        "ag_gemm/cublas_path_double_buffers": lambda: cublas_path(True, 6),
    }


def _gemm_ar_cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    import triton_dist
    from triton_dist.ops.gemm_ar.op import EMULATED_CONFIG, _run

    def run(config: Any, m: int, n: int, k: int, dtype: torch.dtype = torch.bfloat16) -> list[str]:
        problems = []
        for _ in range(2):  # the second call relaunches the plan (the next epoch)
            a_s = [torch.randn(m, k, generator=gen).to(dtype) for _ in range(size)]
            b_s = [torch.randn(k, n, generator=gen).to(dtype) for _ in range(size)]
            if config is None:
                out = triton_dist.ops.gemm_ar(a_s[rank], b_s[rank])
            else:
                out = torch.full((m, n), float("nan"), dtype=dtype)
                _run(a_s[rank], b_s[rank], out, config)
            want = sum(a.float() @ b.float() for a, b in zip(a_s, b_s, strict=True))
            problems += _close(out, want.to(dtype), 0.1, 2e-2)
        return problems

    return {
        "gemm_ar/selected": lambda: run(None, 5, 40, 24),
        "gemm_ar/fp16_one_row": lambda: run(None, 1, 8, 16, torch.float16),
        "gemm_ar/split_k": lambda: run(dataclasses.replace(EMULATED_CONFIG, split_k=2), 3, 24, 48),
        "gemm_ar/matmul_then_all_reduce": lambda: run(dataclasses.replace(EMULATED_CONFIG, gemm="cublas"), 3, 24, 8),
    }


def _attention(
    q: torch.Tensor, ks: list[torch.Tensor], vs: list[torch.Tensor], lens: list[torch.Tensor]
) -> torch.Tensor:
    """softmax(q K^T / sqrt(D)) V over every rank's valid tokens, per sequence and query head (zeros without any)."""
    batch, heads, dim = q.shape
    group = heads // ks[0].shape[1]
    out = torch.zeros(batch, heads, dim)
    for s in range(batch):
        for h in range(heads):
            keys = torch.cat([k[s, h // group, : int(n[s])].float() for k, n in zip(ks, lens, strict=True)])
            values = torch.cat([v[s, h // group, : int(n[s])].float() for v, n in zip(vs, lens, strict=True)])
            if keys.shape[0]:
                out[s, h] = torch.softmax(keys @ q[s, h].float() / dim**0.5, 0) @ values
    return out


def _flash_decode_cases(rank: int, size: int, gen: torch.Generator) -> dict[str, Callable[[], list[str]]]:
    import triton_dist
    from triton_dist.ops.flash_decode.op import EMULATED_CONFIG, _run

    def run(config: Any, batch: int, heads: int, kv_heads: int, length: int, dtype: torch.dtype) -> list[str]:
        problems = []
        for _ in range(2):  # the second call relaunches the plan (the next epoch, the other parity)
            q = torch.randn(batch, heads, 128, generator=gen).to(dtype)
            ks = [torch.randn(batch, kv_heads, length, 128, generator=gen).to(dtype) for _ in range(size)]
            vs = [torch.randn(batch, kv_heads, length, 128, generator=gen).to(dtype) for _ in range(size)]
            lens = [torch.randint(0, length + 1, (batch,), generator=gen, dtype=torch.int32) for _ in range(size)]
            for n in lens:
                n[-1] = 0  # the last sequence has no token on any rank: zeros
            if config is None:
                out = triton_dist.ops.flash_decode(q, ks[rank], vs[rank], lens[rank])
            else:
                out = torch.full_like(q, float("nan"))
                _run(q, ks[rank], vs[rank], lens[rank], out, None, config)
            problems += _close(out, _attention(q, ks, vs, lens).to(dtype), 2e-2, 2e-2)
        return problems

    return {
        "flash_decode/selected": lambda: run(None, 2, 4, 2, 40, torch.bfloat16),
        "flash_decode/fp16_one_head": lambda: run(None, 2, 1, 1, 7, torch.float16),
        "flash_decode/three_splits": lambda: run(
            dataclasses.replace(EMULATED_CONFIG, splits=3, combiners=1), 2, 2, 1, 50, torch.bfloat16
        ),
    }


def _refused_without_the_interpreter(rank: int, size: int) -> dict[str, list[str]]:
    """Each op on this CPU world with ``TRITON_INTERPRET`` off (shapes no case planned): its OpInputError naming
    the CPU device, as before the emulation (the predicate reads the environment at a signature's first call)."""
    import triton_dist
    from triton_dist.ops.common.errors import OpInputError

    bf16 = torch.bfloat16
    q = torch.zeros(1, 2, 128, dtype=bf16)
    kv = torch.zeros(1, 1, 9, 128, dtype=bf16)
    calls: dict[str, Callable[[], Any]] = {
        "all_reduce": lambda: triton_dist.ops.all_reduce(torch.zeros(77)),
        "gemm_rs": lambda: triton_dist.ops.gemm_rs(torch.zeros(7 * size, 8, dtype=bf16), torch.zeros(8, 8, dtype=bf16)),
        "ag_gemm": lambda: triton_dist.ops.ag_gemm(torch.zeros(7, 8, dtype=bf16), torch.zeros(8, 8, dtype=bf16)),
        "gemm_ar": lambda: triton_dist.ops.gemm_ar(torch.zeros(7, 8, dtype=bf16), torch.zeros(8, 8, dtype=bf16)),
        "flash_decode": lambda: triton_dist.ops.flash_decode(q, kv, kv, torch.full((1,), 9, dtype=torch.int32)),
    }
    record: dict[str, list[str]] = {}
    try:  # the standalone GEMM has no emulated path: its GPU-only error, interpreter on or off
        triton_dist.ops.matmul(torch.zeros(8, 8, dtype=bf16), torch.zeros(8, 8, dtype=bf16))
        record["matmul/refused"] = ["no error"]
    except ValueError as error:
        record["matmul/refused"] = [] if "must be on a GPU, got cpu" in str(error) else [str(error)]
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        for op, call in calls.items():
            try:
                call()
                record[f"{op}/refused_without_the_interpreter"] = ["no error"]
            except OpInputError as error:
                named = "cpu" in str(error)
                record[f"{op}/refused_without_the_interpreter"] = [] if named else [f"the error names no CPU: {error}"]
    finally:
        os.environ["TRITON_INTERPRET"] = "1"
    return record


CASE_BUILDERS = (_all_reduce_cases, _gemm_rs_cases, _ag_gemm_cases, _gemm_ar_cases, _flash_decode_cases)


def _worker() -> dict[str, list[str]]:
    """This rank's problems per case (empty: it matched torch), on the world ``run_ranks`` set up."""
    import triton_dist
    import triton_dist.ops  # noqa: F401 (triton_dist.ops.<op> below)

    world = triton_dist.current_world()
    rank, size = world.rank, world.world_size
    gen = torch.Generator().manual_seed(1234)  # every rank draws every rank's inputs alike
    record: dict[str, list[str]] = {}
    for build in CASE_BUILDERS:
        for name, case in build(rank, size, gen).items():
            try:
                record[name] = case()
            except Exception as error:  # noqa: BLE001 (recorded for the test)
                record[name] = [f"{type(error).__name__}: {error}"]
    record.update(_refused_without_the_interpreter(rank, size))
    return record


@pytest.fixture(scope="module", params=[2, 3], ids=lambda n: f"{n}ranks")
def records(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return run_ranks(_worker, request.param, heap_size=HEAP).results


@pytest.mark.parametrize("op", ["all_reduce", "gemm_rs", "ag_gemm", "gemm_ar", "flash_decode", "matmul"])
def test_the_op_matches_torch(records: list[dict[str, list[str]]], op: str) -> None:
    for rank, record in enumerate(records):
        cases = {name: problems for name, problems in record.items() if name.startswith(f"{op}/")}
        assert cases, f"rank {rank} ran no {op} case"
        failed = {name: problems for name, problems in cases.items() if problems}
        assert not failed, f"rank {rank}: {failed}"


def test_the_interpreter_patch_never_installs_tritons_own_index() -> None:
    """Triton re-patches ``tensor.__index__`` at every jit-helper call while other program threads of the emulation
    run: the fixed patch must set only the emulation's ``__index__`` (setting Triton's first, then replacing it,
    failed another program's ``range`` over a run-time value at random: all_reduce's two-shot kernel did)."""
    from triton_dist.runtime.emulation import interpreter_fixes

    class Recording:
        def __init__(self) -> None:
            self.set: list[tuple[str, object]] = []

        def set_attr(self, obj: object, name: str, value: object) -> None:
            self.set.append((name, value))

    scope = Recording()

    class Tensor:  # a stand-in for tl.tensor: the patch sets its attributes
        pass

    interpreter_fixes._patch_lang_tensor(Tensor, scope)
    indexes = [value for name, value in scope.set if name == "__index__"]
    assert indexes == [interpreter_fixes._index]
    assert "__bool__" in {name for name, _ in scope.set}  # the rest of Triton's patch is still applied
