"""The decode-time ops on GPUs: fresh random data, poisoned outputs, torch references; eager, CUDA graph and
torch.compile; bad input raising before launch.

    torchrun --nproc-per-node=N test/gpu/check_decode_ops.py [--only all_reduce,gemm_ar]

Exit code 0 iff every check passed on every rank. Each check logs PASS/FAIL per rank; a failing check does not stop
the others (a hang does: every kernel wait is bounded by the runtime's timeout through ``sync``).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable

import torch
import torch.distributed as dist

from triton_dist import runtime as rt
from triton_dist.ops import all_reduce
from triton_dist.ops.all_reduce import AllReduceConfig, _run
from triton_dist.ops.gemm_ar import GemmARConfig, gemm_ar
from triton_dist.ops.gemm_ar import _run as _run_gemm_ar
from triton_dist.testing import Checks, main_guard, poison_, rank0_print, setup_distributed, sync, teardown

TOLERANCE = {torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3), torch.float32: (1e-5, 1e-5)}
"""(rtol, atol) of a W-term fp32 sum rounded once to the dtype, against torch's fp32 sum of the same inputs."""


def rank_data(owner: int, tag: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Rank ``owner``'s input for check ``tag``; every rank can regenerate it for the reference."""
    generator = torch.Generator(device="cuda").manual_seed(1_000_003 * owner + 7919 * tag + sum(shape))
    return torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32).to(dtype)


def reference_sum(tag: int, shape: tuple[int, ...], dtype: torch.dtype, world_size: int) -> torch.Tensor:
    total = torch.zeros(shape, dtype=torch.float32, device="cuda")
    for owner in range(world_size):
        total += rank_data(owner, tag, shape, dtype).float()
    return total.to(dtype)


def poisoned(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return poison_(torch.empty(shape, dtype=dtype, device="cuda"))


def same_on_all_ranks(tensor: torch.Tensor) -> bool:
    digest = hashlib.sha256(tensor.detach().contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()
    everyone: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, digest)
    return len(set(everyone)) == 1


def close(out: torch.Tensor, ref: torch.Tensor) -> tuple[bool, str]:
    rtol, atol = TOLERANCE[ref.dtype]
    if torch.isnan(out).any():
        return False, f"{int(torch.isnan(out).sum())} NaN (poison) elements left"
    diff = (out.float() - ref.float()).abs()
    bound = atol + rtol * ref.float().abs()
    bad = int((diff > bound).sum())
    return bad == 0, f"max |diff| {float(diff.max()) if diff.numel() else 0:.3g}, {bad} elements out of tolerance"


# ---------------------------------------------------------------------------------------------------------------
# all_reduce


AR_CASES = [  # (numel, dtype, forced config or None)
    (1, torch.bfloat16, None),
    (7, torch.float32, None),
    (4096, torch.bfloat16, None),
    (4096, torch.bfloat16, AllReduceConfig("one_shot", 1, 4)),
    (4096, torch.bfloat16, AllReduceConfig("two_shot", 1, 4)),
    (65_539, torch.float16, AllReduceConfig("one_shot", 8, 4)),
    (65_539, torch.float16, AllReduceConfig("two_shot", 8, 8)),
    (1 << 19, torch.bfloat16, None),
    (1 << 20, torch.float32, AllReduceConfig("one_shot", 2, 8)),  # many flag rounds per program (parity)
    (3_000_017, torch.bfloat16, AllReduceConfig("two_shot", 4, 8)),  # rounds, ragged last chunk
    (1 << 23, torch.bfloat16, None),
    (1 << 24, torch.float32, None),
]


def check_all_reduce_eager(checks: Checks, world: rt.World) -> None:
    for tag, (numel, dtype, config) in enumerate(AR_CASES):
        for on_heap in (False, True):
            shape = (numel,)
            mine = rank_data(world.rank, tag, shape, dtype)
            x = rt.empty(numel, dtype=dtype).copy_(mine) if on_heap else mine.clone()
            out = poisoned(shape, dtype)
            _run(x, out, "sum", config)
            sync("all_reduce")
            ok, detail = close(out, reference_sum(tag, shape, dtype, world.world_size))
            what = f"all_reduce {numel} x {dtype} {config or 'auto'} x {'on' if on_heap else 'off'} heap"
            checks.check(what, ok, detail)
            checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(out))
            checks.check(f"{what}: input untouched", torch.equal(x, mine))


def check_all_reduce_api(checks: Checks, world: rt.World) -> None:
    shape = (8, 1024)
    for tag, dtype in enumerate((torch.bfloat16, torch.float16, torch.float32), start=100):
        x = rank_data(world.rank, tag, shape, dtype)
        ref = reference_sum(tag, shape, dtype, world.world_size)
        ok, detail = close(all_reduce(x), ref)
        checks.check(f"all_reduce(x) {list(shape)} {dtype}", ok, detail)
        out = poisoned(shape, dtype)
        returned = all_reduce(x, out=out)
        ok, detail = close(out, ref)
        checks.check(f"all_reduce(x, out=out) {dtype}", ok and returned is out, detail)
        inplace = x.clone()
        all_reduce(inplace, out=inplace)
        ok, detail = close(inplace, ref)
        checks.check(f"all_reduce(x, out=x) in place {dtype}", ok, detail)
    # Many back-to-back calls of different sizes and algorithms: the epochs and double buffers must keep up.
    last: dict[int, torch.Tensor] = {}
    configs = [None, AllReduceConfig("one_shot", 4, 4), AllReduceConfig("two_shot", 4, 4)]
    for i in range(60):
        numel = (1000, 33_000, 250_000)[i % 3]
        x = rank_data(world.rank, 200 + i % 3, (numel,), torch.bfloat16)
        out = poisoned((numel,), torch.bfloat16)
        _run(x, out, "sum", configs[(i // 3) % 3])
        last[numel] = out
    sync("60 all_reduce calls")
    for j, (numel, out) in enumerate(sorted(last.items())):
        ok, detail = close(out, reference_sum(200 + j, (numel,), torch.bfloat16, world.world_size))
        checks.check(f"60 back-to-back calls: last {numel}-element result", ok, detail)


def check_all_reduce_graph(checks: Checks, world: rt.World) -> None:
    sizes = [(4096,), (4, 8192), (1 << 20,)]
    dtype = torch.bfloat16
    static_in = [torch.empty(s, dtype=dtype, device="cuda") for s in sizes]
    static_out = [torch.empty(s, dtype=dtype, device="cuda") for s in sizes]
    for x, out in zip(static_in, static_out, strict=True):  # warm-up: workspace, compile, rank agreement
        x.normal_()
        all_reduce(x, out=out)
    sync("graph warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for x, out in zip(static_in, static_out, strict=True):
            all_reduce(x, out=out)
            all_reduce(out, out=out)  # twice: sum over ranks of (W * sum)
    for replay in range(5):
        tag = 300 + replay
        for x, out, shape in zip(static_in, static_out, sizes, strict=True):
            x.copy_(rank_data(world.rank, tag, shape, dtype))
            poison_(out)
        graph.replay()
        sync("graph replay")
        for out, shape in zip(static_out, sizes, strict=True):
            ref = sum(rank_data(o, tag, shape, dtype).float() for o in range(world.world_size))
            ref = (ref.to(dtype).float() * world.world_size).to(dtype)
            ok, detail = close(out, ref)
            checks.check(f"CUDA graph replay {replay}: two chained all_reduces of {list(shape)}", ok, detail)


def check_all_reduce_compile(checks: Checks, world: rt.World) -> None:
    def layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return all_reduce(x @ w).relu() + 1.0

    compiled = torch.compile(layer, fullgraph=True)
    dtype = torch.bfloat16
    x = rank_data(world.rank, 400, (16, 256), dtype)
    w = rank_data(0, 401, (256, 512), dtype)  # the same weight everywhere
    partial = x @ w
    gathered = [torch.empty_like(partial) for _ in range(world.world_size)]
    dist.all_gather(gathered, partial)
    ref = (sum(p.float() for p in gathered).to(dtype).relu() + 1.0).to(dtype)
    ok, detail = close(compiled(x, w), ref)
    checks.check("torch.compile(fullgraph=True) of matmul -> all_reduce -> relu", ok, detail)
    cudagraphed = torch.compile(layer, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):  # warm-up runs, then recorded, then replayed
        result = cudagraphed(x, w).clone()
    ok, detail = close(result, ref)
    checks.check("torch.compile(mode='reduce-overhead') replays", ok, detail)


def expect_error(checks: Checks, name: str, error: type[BaseException], call: Callable[[], object], text: str) -> None:
    try:
        call()
    except error as raised:
        checks.check(f"bad input: {name}", text in str(raised), f"{type(raised).__name__}: {raised}")
        return
    except Exception as raised:  # noqa: BLE001
        checks.check(f"bad input: {name}", False, f"raised {type(raised).__name__}: {raised}, not {error.__name__}")
        return
    checks.check(f"bad input: {name}", False, "no error")


def check_all_reduce_bad_input(checks: Checks, world: rt.World) -> None:
    x = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
    expect_error(checks, "int32 tensor", TypeError, lambda: all_reduce(x.int()), "bfloat16, float16 or float32")
    expect_error(checks, "op='max'", ValueError, lambda: all_reduce(x, "max"), "op must be one of")
    expect_error(
        checks, "out of another shape", ValueError, lambda: all_reduce(x, out=torch.empty_like(x)[:10]), "out must be"
    )
    expect_error(checks, "non-contiguous x", ValueError, lambda: all_reduce(x.view(32, 32).t()), "contiguous")
    expect_error(checks, "CPU tensor", ValueError, lambda: all_reduce(x.cpu()), "symmetric heap is on")
    # Ranks calling with different sizes: every rank raises (a collective check on a size's first call).
    mismatched = torch.randn(5000 + world.rank, device="cuda", dtype=torch.bfloat16)
    expect_error(checks, "sizes differ across ranks", RuntimeError, lambda: all_reduce(mismatched), "disagree")


# ---------------------------------------------------------------------------------------------------------------
# gemm_ar


GEMM_AR_CASES = [  # (M, N, K per rank, dtype, forced config or None)
    (1, 512, 256, torch.bfloat16, None),
    (8, 1000, 320, torch.bfloat16, None),  # ragged N
    (5, 64, 48, torch.float16, None),  # K smaller than a block
    (33, 640, 1024, torch.bfloat16, None),
    (128, 2048, 4096, torch.bfloat16, None),
    (256, 1024, 512, torch.float16, None),
    (256, 4096, 256, torch.bfloat16, GemmARConfig(16, 16, 64)),  # 4096 tiles on 256 programs: 16 rounds each
    (64, 768, 512, torch.bfloat16, GemmARConfig(64, 64, 128, 4, 3, exchange=False)),  # GEMM only (own rank)
]


def gemm_ar_operands(owner: int, tag: int, m: int, n: int, k: int, dtype: torch.dtype):
    a = rank_data(owner, tag, (m, k), dtype)
    b = (rank_data(owner, tag + 50_000, (k, n), torch.float32) / k**0.5).to(dtype)
    return a, b


def gemm_ar_reference(
    tag: int, m: int, n: int, k: int, dtype: torch.dtype, owners: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the fp32 sum of the owners' a @ b rounded to dtype, the sum of the partials' magnitudes)."""
    total = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    magnitude = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    for owner in owners:
        a, b = gemm_ar_operands(owner, tag, m, n, k, dtype)
        partial = a.float() @ b.float()
        total += partial
        magnitude += partial.abs()
    return total.to(dtype), magnitude


def close_gemm(out: torch.Tensor, expected: tuple[torch.Tensor, torch.Tensor]) -> tuple[bool, str]:
    """Each partial is rounded to the dtype before the fp32 sum, and the sum once more: allow half an ulp of each
    partial and of the result (x 1.5 for fp32 accumulation-order differences)."""
    ref, magnitude = expected
    if torch.isnan(out).any():
        return False, f"{int(torch.isnan(out).sum())} NaN (poison) elements left"
    diff = (out.float() - ref.float()).abs()
    half_ulp = 2.0**-8 if ref.dtype == torch.bfloat16 else 2.0**-11
    bound = 1.5 * half_ulp * (magnitude + ref.float().abs()) + 1e-6
    bad = int((diff > bound).sum())
    return bad == 0, f"max |diff| {float(diff.max()):.3g}, {bad} elements out of tolerance"


def check_gemm_ar_eager(checks: Checks, world: rt.World) -> None:
    for tag, (m, n, k, dtype, config) in enumerate(GEMM_AR_CASES, start=500):
        a, b = gemm_ar_operands(world.rank, tag, m, n, k, dtype)
        out = poisoned((m, n), dtype)
        _run_gemm_ar(a, b, out, config)
        sync("gemm_ar")
        owners = list(range(world.world_size)) if config is None or config.exchange else [world.rank]
        ok, detail = close_gemm(out, gemm_ar_reference(tag, m, n, k, dtype, owners))
        what = f"gemm_ar M={m} N={n} K/W={k} {dtype} {config or 'default'}"
        checks.check(what, ok, detail)
        if config is None or config.exchange:
            checks.check(f"{what}: bit-identical on every rank", same_on_all_ranks(out))
    a, b = gemm_ar_operands(world.rank, 600, 16, 384, 256, torch.bfloat16)
    ref = gemm_ar_reference(600, 16, 384, 256, torch.bfloat16, list(range(world.world_size)))
    ok, detail = close_gemm(gemm_ar(a, b), ref)
    checks.check("gemm_ar(a, b) through torch.ops", ok, detail)


def check_gemm_ar_graph_and_compile(checks: Checks, world: rt.World) -> None:
    m, n, k, dtype = 8, 1024, 512, torch.bfloat16
    a_in = torch.empty((m, k), dtype=dtype, device="cuda")
    b_in = torch.empty((k, n), dtype=dtype, device="cuda")
    a_in.normal_()
    b_in.normal_()
    gemm_ar(a_in, b_in)  # warm-up: workspace, compile, rank agreement
    sync("gemm_ar graph warm-up")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        first = gemm_ar(a_in, b_in)
        second = gemm_ar(a_in, b_in)
    everyone = list(range(world.world_size))
    for replay in range(4):
        tag = 700 + replay
        a, b = gemm_ar_operands(world.rank, tag, m, n, k, dtype)
        a_in.copy_(a)
        b_in.copy_(b)
        poison_(first)
        poison_(second)
        graph.replay()
        sync("gemm_ar graph replay")
        ref = gemm_ar_reference(tag, m, n, k, dtype, everyone)
        ok1, detail1 = close_gemm(first, ref)
        ok2, _ = close_gemm(second, ref)
        checks.check(
            f"gemm_ar CUDA graph replay {replay} (two calls)", ok1 and ok2 and torch.equal(first, second), detail1
        )

    compiled = torch.compile(lambda a, b: gemm_ar(a, b).float().square(), fullgraph=True)
    a, b = gemm_ar_operands(world.rank, 800, m, n, k, dtype)
    want = gemm_ar_reference(800, m, n, k, dtype, everyone)[0].float().square()
    got = compiled(a, b)
    ok = bool(torch.allclose(got, want, rtol=5e-2, atol=5e-2))
    checks.check("gemm_ar under torch.compile(fullgraph=True)", ok, f"max diff {float((got - want).abs().max()):.3g}")


def check_gemm_ar_bad_input(checks: Checks, world: rt.World) -> None:
    a = torch.randn(4, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    expect_error(checks, "gemm_ar K mismatch", ValueError, lambda: gemm_ar(a, b[:32]), "must equal")
    expect_error(checks, "gemm_ar fp32", TypeError, lambda: gemm_ar(a.float(), b.float()), "bfloat16 or float16")
    expect_error(checks, "gemm_ar mixed dtypes", TypeError, lambda: gemm_ar(a, b.half()), "same dtype")
    expect_error(checks, "gemm_ar column-major b", ValueError, lambda: gemm_ar(a, b.t().contiguous().t()), "row-major")
    expect_error(checks, "gemm_ar 3-D a", ValueError, lambda: gemm_ar(a[None], b), "2-D")
    odd = torch.randn(4 + world.rank, 64, device="cuda", dtype=torch.bfloat16)
    expect_error(checks, "gemm_ar M differs across ranks", RuntimeError, lambda: gemm_ar(odd, b), "disagree")


# ---------------------------------------------------------------------------------------------------------------


GROUPS: dict[str, list[tuple[str, Callable[[Checks, rt.World], None]]]] = {
    "all_reduce": [
        ("all_reduce eager", check_all_reduce_eager),
        ("all_reduce API", check_all_reduce_api),
        ("all_reduce CUDA graph", check_all_reduce_graph),
        ("all_reduce torch.compile", check_all_reduce_compile),
        ("all_reduce bad input", check_all_reduce_bad_input),
    ],
    "gemm_ar": [
        ("gemm_ar eager", check_gemm_ar_eager),
        ("gemm_ar CUDA graph + torch.compile", check_gemm_ar_graph_and_compile),
        ("gemm_ar bad input", check_gemm_ar_bad_input),
    ],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(GROUPS), help="comma-separated groups: " + ", ".join(GROUPS))
    args = parser.parse_args()
    world = setup_distributed(heap_size="1G")
    checks = Checks()
    for group in args.only.split(","):
        for name, check in GROUPS[group]:
            rank0_print(f"--- {name}")
            checks.run(name, lambda check=check: check(checks, world))
            rt.barrier()
    code = checks.exit_code()
    teardown()
    return code


if __name__ == "__main__":
    main_guard(main)
