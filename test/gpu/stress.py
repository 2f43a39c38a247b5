"""Stress: 10,000 back-to-back iterations of the ping-pong, the all-gather examples and every op in triton_dist.ops,
eagerly and as 10,000 replays of a CUDA graph, with flags reused across iterations (epochs, never reset).

    torchrun --nproc-per-node=2 test/gpu/stress.py [--iters 10000] [--check-every 500] [--only NAME ...]
    bash scripts/stress.sh                      # the same under a timeout, log and results table in $OUT

Every ``--check-every`` iterations the run stops (device sync under the runtime's timeout, so a deadlock raises
TimeoutError naming the item instead of hanging), compares the latest result with a torch reference (all-gather:
NCCL; ops: torch in fp32, per-dtype tolerances), then puts fresh random inputs in place and poisons the outputs
(NaN) before the next segment. The ping-pong has no data: its check is that every round trip happened (the final
flag equals the last epoch).

Eager mode runs the examples' own kernels (examples/ping_pong.py, allgather_push.py, allgather_pull.py), which take
the epoch as a launch argument. A CUDA graph would freeze that argument, so graph mode runs the same kernels through
a wrapper that reads the epoch from device memory, followed by a one-thread kernel that advances it: each replay
is a new epoch. The ops keep their epochs on the device themselves and are captured as they are (after one eager
call per shape, as their docs ask).

Ops are discovered at run time (``triton_dist.ops.__all__`` and each ``triton_dist.ops.<name>.<name>``); an op with
no driver here is reported as a failure, so a new op cannot silently go unstressed.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import triton
import triton.language as tl

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))

import allgather_pull  # noqa: E402
import allgather_push  # noqa: E402
import ping_pong  # noqa: E402

from triton_dist import runtime as rt  # noqa: E402
from triton_dist import testing  # noqa: E402

PING_PONG_ROUNDS = 8  # round trips per launch
AG_CTAS_PER_PEER = 16
AG_SHARD_ELEMS = 256 * 1024  # bf16: 512 KiB per rank


# ------------------------------------------------------------------------------------------ graph-safe wrappers


@triton.jit
def advance_epoch(epoch_ptr, by):
    """epoch += by (one program): the next launch in the stream (or the next graph replay) reads the new value."""
    tl.store(epoch_ptr, tl.load(epoch_ptr) + by)


@triton.jit
def ping_pong_device_epoch(flag_ptr, epoch_ptr, rounds, SERVE: tl.constexpr):
    ping_pong.ping_pong(flag_ptr, rounds, tl.load(epoch_ptr), SERVE)


@triton.jit
def allgather_push_device_epoch(shard_ptr, out_ptr, flags_ptr, epoch_ptr, shard_elems, CTAS_PER_PEER: tl.constexpr,
                                BLOCK: tl.constexpr):  # fmt: skip
    allgather_push.allgather_push(shard_ptr, out_ptr, flags_ptr, shard_elems, tl.load(epoch_ptr), CTAS_PER_PEER, BLOCK)


@triton.jit
def allgather_pull_device_epoch(shard_ptr, out_ptr, ready_ptr, done_ptr, epoch_ptr, shard_elems,
                                CTAS_PER_PEER: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    allgather_pull.allgather_pull(
        shard_ptr, out_ptr, ready_ptr, done_ptr, shard_elems, tl.load(epoch_ptr), CTAS_PER_PEER, BLOCK
    )


# ------------------------------------------------------------------------------------------------------ items


@dataclass
class Item:
    """One thing to stress: ``step`` runs one iteration (and must be capturable when ``graph`` is asked for);
    ``refresh`` puts fresh inputs and poisoned outputs in place and computes the reference; ``check`` compares
    (raising AssertionError naming the difference)."""

    name: str
    step: Callable[[], None]
    refresh: Callable[[int], None]
    check: Callable[[], None]
    fallback: str = ""
    """Non-empty when the op's own choice at this shape is its NCCL + cuBLAS fallback (what it runs instead)."""


def fresh(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32).to(dtype)


def ping_pong_item(world: rt.World, graph: bool) -> Item:
    flag = rt.zeros(1, dtype=torch.int32)
    epoch = torch.ones(1, dtype=torch.int32, device="cuda")  # the next value to write (device copy for graphs)
    state = {"next": 1, "launches": 0}
    serve = world.rank == 0
    playing = world.rank < 2
    rt.barrier()

    def step() -> None:
        if playing:
            if graph:
                ping_pong_device_epoch[(1,)](flag, epoch, PING_PONG_ROUNDS, SERVE=serve, num_warps=1)
                advance_epoch[(1,)](epoch, PING_PONG_ROUNDS, num_warps=1)
            else:
                ping_pong.ping_pong[(1,)](flag, PING_PONG_ROUNDS, state["next"], SERVE=serve, num_warps=1)
        state["next"] += PING_PONG_ROUNDS
        state["launches"] += 1

    def refresh(seed: int) -> None:
        pass

    def check() -> None:
        if not playing:
            return
        # In graph mode a replay does not go through step(): the device epoch says how far the rounds got.
        last = int(epoch.item()) - 1 if graph else state["next"] - 1
        got = int(flag.item())
        assert got == last, f"ping-pong flag {got}, expected the last round's value {last}"

    return Item("ping_pong", step, refresh, check)


def allgather_item(world: rt.World, graph: bool, push: bool) -> Item:
    w = world.world_size
    name = "allgather_push" if push else "allgather_pull"
    # As in the examples: push stores into the peers' outputs (out on the heap), pull loads the peers' shards.
    if push:
        shard = torch.empty(AG_SHARD_ELEMS, dtype=torch.bfloat16, device="cuda")
        out = rt.empty(AG_SHARD_ELEMS * w, dtype=torch.bfloat16)
    else:
        shard = rt.empty(AG_SHARD_ELEMS, dtype=torch.bfloat16)
        out = torch.empty(AG_SHARD_ELEMS * w, dtype=torch.bfloat16, device="cuda")
    reference = torch.empty_like(out)
    epoch = torch.ones(1, dtype=torch.int32, device="cuda")
    state = {"epoch": 1}
    args = argparse.Namespace(block=4096, num_warps=8)
    grid = (AG_CTAS_PER_PEER, w)
    example = allgather_push if push else allgather_pull
    # Eager: the example's own launcher (its flags, host epochs). Graph: the device-epoch wrapper, flags of its own.
    launch = example.make_launch(args, shard, out, AG_CTAS_PER_PEER) if not graph else None
    if graph and push:
        flags = rt.zeros(w * AG_CTAS_PER_PEER, dtype=torch.int32)
    elif graph:
        ready = rt.zeros(w, dtype=torch.int32)
        done = rt.zeros(w * AG_CTAS_PER_PEER, dtype=torch.int32)
    rt.barrier()

    def step() -> None:
        if launch is not None:
            launch(state["epoch"])
            state["epoch"] += 1
            return
        if push:
            allgather_push_device_epoch[grid](shard, out, flags, epoch, shard.numel(), CTAS_PER_PEER=AG_CTAS_PER_PEER,
                                              BLOCK=args.block, num_warps=args.num_warps)  # fmt: skip
        else:
            allgather_pull_device_epoch[grid](shard, out, ready, done, epoch, shard.numel(),
                                              CTAS_PER_PEER=AG_CTAS_PER_PEER, BLOCK=args.block,
                                              num_warps=args.num_warps)  # fmt: skip
        advance_epoch[(1,)](epoch, 1, num_warps=1)

    def refresh(seed: int) -> None:
        shard.copy_(fresh(shard.shape, shard.dtype, seed * 131 + world.rank))
        testing.poison_(out)
        dist.all_gather_into_tensor(reference, shard)
        rt.barrier_on_device()  # every rank's fresh shard and poison are in place before any kernel touches them

    def check() -> None:
        assert torch.equal(out, reference), (
            f"{name}: {int((out.view(torch.int16) != reference.view(torch.int16)).sum())} of {out.numel()} elements "
            f"differ from NCCL's all-gather ({int(out.isnan().sum())} still poisoned)"
        )

    return Item(name, step, refresh, check)


def op_item(world: rt.World, graph: bool, name: str, fn: Callable, label: str | None = None) -> Item | None:
    """A driver for each op of triton_dist.ops; None when this script has none for ``name``.

    ``fn`` is called as the op is (``fn(a, b)``, ...); ``label`` (default ``name``) names the item, for variants
    that call the op with a fixed configuration.
    """
    w = world.world_size
    dtype = torch.bfloat16
    inputs: dict[str, torch.Tensor] = {}
    fillers: dict[str, Callable[[int], torch.Tensor]] = {}  # inputs that are not standard normal
    result: dict[str, torch.Tensor] = {}
    if name == "all_reduce":
        inputs["x"] = torch.empty(64 * 1024, dtype=dtype, device="cuda")
        out = torch.empty_like(inputs["x"])

        def call() -> None:
            fn(inputs["x"], out=out)
            result["out"] = out

        def make_reference() -> torch.Tensor:
            ref = inputs["x"].float()
            dist.all_reduce(ref)
            return ref

    elif name == "gemm_rs":
        m, k_local, n = 256 * w, 256, 256
        inputs["a"] = torch.empty(m, k_local, dtype=dtype, device="cuda")
        inputs["b"] = torch.empty(k_local, n, dtype=dtype, device="cuda")

        def call() -> None:
            result["out"] = fn(inputs["a"], inputs["b"])

        def make_reference() -> torch.Tensor:
            full = inputs["a"].float() @ inputs["b"].float()
            dist.all_reduce(full)
            return full[world.rank * (m // w) : (world.rank + 1) * (m // w)]

    elif name == "gemm_ar":
        m, k_local, n = 128, 256, 256
        inputs["a"] = torch.empty(m, k_local, dtype=dtype, device="cuda")
        inputs["b"] = torch.empty(k_local, n, dtype=dtype, device="cuda")

        def call() -> None:
            result["out"] = fn(inputs["a"], inputs["b"])

        def make_reference() -> torch.Tensor:
            partial = (inputs["a"].float() @ inputs["b"].float()).to(dtype).float()  # rounded like the op's tiles
            dist.all_reduce(partial)
            return partial

    elif name == "ag_gemm":
        m_local, k, n = 256, 256, 256
        inputs["a"] = torch.empty(m_local, k, dtype=dtype, device="cuda")
        inputs["b"] = torch.empty(k, n, dtype=dtype, device="cuda")

        def call() -> None:
            result["out"] = fn(inputs["a"], inputs["b"])

        def make_reference() -> torch.Tensor:
            gathered = torch.empty(m_local * w, k, dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(gathered, inputs["a"])
            return gathered.float() @ inputs["b"].float()

    elif name == "flash_decode":
        batch, kv_heads, group, local_len = 4, 2, 4, 256
        inputs["q"] = torch.empty(batch, kv_heads * group, HEAD_DIM, dtype=dtype, device="cuda")
        inputs["k"] = torch.empty(batch, kv_heads, local_len, HEAD_DIM, dtype=dtype, device="cuda")
        inputs["v"] = torch.empty(batch, kv_heads, local_len, HEAD_DIM, dtype=dtype, device="cuda")
        inputs["lengths"] = torch.empty(batch, dtype=torch.int32, device="cuda")

        def fresh_q(seed: int) -> torch.Tensor:  # the same query on every rank
            return fresh(inputs["q"].shape, dtype, seed)

        def fresh_lengths(seed: int) -> torch.Tensor:  # 0 .. local_len valid positions per sequence and rank
            generator = torch.Generator(device="cuda").manual_seed(seed * 7 + world.rank)
            return torch.randint(0, local_len + 1, (batch,), generator=generator, device="cuda", dtype=torch.int32)

        fillers.update(q=fresh_q, lengths=fresh_lengths)

        def call() -> None:
            result["out"] = fn(inputs["q"], inputs["k"], inputs["v"], inputs["lengths"])

        def make_reference() -> torch.Tensor:
            gathered = {}
            for key in ("k", "v", "lengths"):
                gathered[key] = [torch.empty_like(inputs[key]) for _ in range(w)]
                dist.all_gather(gathered[key], inputs[key])
            return attention_reference(inputs["q"], gathered["k"], gathered["v"], gathered["lengths"])

    elif name == "matmul":
        inputs["a"] = torch.empty(256, 256, dtype=dtype, device="cuda")
        inputs["b"] = torch.empty(256, 256, dtype=dtype, device="cuda")

        def call() -> None:
            result["out"] = fn(inputs["a"], inputs["b"])

        def make_reference() -> torch.Tensor:
            return inputs["a"].float() @ inputs["b"].float()

    else:
        return None
    expected: dict[str, torch.Tensor] = {}

    def refresh(seed: int) -> None:
        for k, (key, tensor) in enumerate(sorted(inputs.items())):
            if key in fillers:
                tensor.copy_(fillers[key](seed))
            else:
                tensor.copy_(fresh(tensor.shape, tensor.dtype, seed * 1009 + 17 * k + world.rank))
        if "out" in result:
            testing.poison_(result["out"])
        expected["ref"] = make_reference()
        torch.cuda.synchronize()
        rt.barrier()

    def check() -> None:
        if name == "flash_decode":
            # Attention outputs are weighted means of V, many near zero: bf16 probabilities and rounding err relative
            # to the largest output, not to each element (the bound test/gpu/check_decode_ops.py's close_flash uses).
            largest = float(expected["ref"].abs().max())
            testing.assert_close(result["out"], expected["ref"], dtype, rtol=2e-2, atol=1e-2 * largest, name=name)
        elif name in GEMM_OPS:
            # bf16 partial sums are rounded (gemm_rs's default input-dtype partials, gemm_ar's tiles) and summed in a
            # different order than torch's: where ranks' partials cancel, the error is relative to the partials'
            # scale, not to the small result. The bound of test/gpu/check_gemm_rs.py (3% of a unit-scale output).
            scale = float(expected["ref"].float().pow(2).mean().sqrt())
            testing.assert_close(result["out"], expected["ref"], dtype, atol=3e-2 * scale, name=label or name)
        else:
            testing.assert_close(result["out"], expected["ref"], dtype, name=name)

    fallback = ""
    if label is None and name == "ag_gemm":
        from triton_dist.ops.ag_gemm import choose_config as choose_ag_gemm

        if choose_ag_gemm(m_local, n, k, dtype, w, inputs["a"].device).backend == "nccl":
            fallback = "NCCL all_gather_into_tensor + torch.matmul"
    elif label is None and name == "gemm_rs":
        from triton_dist.ops.gemm_rs import choose_config as choose_gemm_rs

        if choose_gemm_rs(m, n, k_local, dtype, w, inputs["a"].device).fallback:
            fallback = "torch.matmul + NCCL reduce_scatter_tensor"
    return Item(label or name, call, refresh, check, fallback)


GEMM_OPS = ("ag_gemm", "gemm_rs", "gemm_ar", "matmul")


def fixed_config_variants() -> list[tuple[str, str, Callable]]:
    """(label, op, fn): the overlapped ops with their fused kernels forced, beside the ops as users call them.

    At the stress shapes the ops' own choice may be the NCCL + cuBLAS fallback (the cost model's pick for small
    problems), which would leave the fused kernels unstressed; these items run each producer and GEMM path.
    """
    from triton_dist.ops.ag_gemm import ag_gemm_impl
    from triton_dist.ops.gemm_rs import CUBLAS_CE, GemmRSConfig, gemm_rs_with
    from triton_dist.ops.matmul import HOPPER_CANDIDATES
    from triton_dist.ops.tuning import OverlapConfig

    small = HOPPER_CANDIDATES[2]
    ag_ce = OverlapConfig(matmul=small, chunk_tiles=1, producer="ce")
    ag_sm = OverlapConfig(matmul=small, chunk_tiles=1, producer="sm", push_ctas=4)
    return [
        ("ag_gemm[ce]", "ag_gemm", lambda a, b: ag_gemm_impl(a, b, config=ag_ce)[0]),
        ("ag_gemm[sm]", "ag_gemm", lambda a, b: ag_gemm_impl(a, b, config=ag_sm)[0]),
        ("gemm_rs[triton]", "gemm_rs", lambda a, b: gemm_rs_with(a, b, GemmRSConfig())),
        ("gemm_rs[cublas]", "gemm_rs", lambda a, b: gemm_rs_with(a, b, CUBLAS_CE)),
    ]


HEAD_DIM = 128


def attention_reference(
    q: torch.Tensor, ks: list[torch.Tensor], vs: list[torch.Tensor], lengths: list[torch.Tensor]
) -> torch.Tensor:
    """flash_decode's result in fp32: for each sequence, softmax(q K^T / sqrt(d)) V over every rank's first
    lengths[rank][b] cache positions; grouped query heads share a KV head; no tokens anywhere gives zeros."""
    batch, q_heads, dim = q.shape
    group = q_heads // ks[0].shape[1]
    out = torch.zeros(batch, q_heads, dim, dtype=torch.float32, device=q.device)
    for b in range(batch):
        keys = torch.cat([k[b, :, : int(n[b])] for k, n in zip(ks, lengths, strict=True)], dim=1).float()
        values = torch.cat([v[b, :, : int(n[b])] for v, n in zip(vs, lengths, strict=True)], dim=1).float()
        if keys.shape[1] == 0:
            continue
        keys = keys.repeat_interleave(group, dim=0)  # [q_heads, tokens, dim]
        values = values.repeat_interleave(group, dim=0)
        scores = torch.einsum("hd,htd->ht", q[b].float(), keys) / dim**0.5
        out[b] = torch.einsum("ht,htd->hd", scores.softmax(dim=-1), values)
    return out


def discover_ops() -> dict[str, Callable]:
    """The ops of triton_dist.ops that exist here: its __all__ functions and each ops.<name>.<name> function."""
    import triton_dist.ops as ops

    found: dict[str, Callable] = {}
    for name in getattr(ops, "__all__", []):
        value = getattr(ops, name, None)
        if callable(value) and not isinstance(value, type) and name[:1].islower():
            found[name] = value
    for module in pkgutil.iter_modules(ops.__path__):
        if module.name.startswith("_"):
            continue
        try:
            loaded = importlib.import_module(f"triton_dist.ops.{module.name}")
        except Exception as error:  # noqa: BLE001 (an op that does not import is reported, not fatal)
            testing.rank0_print(f"INFO triton_dist.ops.{module.name} does not import: {error}")
            continue
        value = getattr(loaded, module.name, None)
        if callable(value) and not isinstance(value, type):
            found.setdefault(module.name, value)
    return found


# --------------------------------------------------------------------------------------------------- the runner


def run_item(item: Item, iters: int, every: int, graph: bool, timeout_what: str) -> dict:
    """Runs ``iters`` iterations in segments of ``every``; returns the counts and the time per iteration."""
    segments = max(1, iters // every)
    item.refresh(0)
    item.step()  # compiles the kernels and, for the ops, allocates workspaces collectively
    testing.sync(f"{timeout_what} warm-up")
    rt.barrier()
    replay = item.step
    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            item.step()
        torch.cuda.current_stream().wait_stream(side)
        testing.sync(f"{timeout_what} warm-up on the capture stream")
        rt.barrier()
        cuda_graph = torch.cuda.CUDAGraph()
        # thread_local: NCCL's watchdog thread may query events while this thread captures.
        with torch.cuda.graph(cuda_graph, capture_error_mode="thread_local"):
            item.step()
        replay = cuda_graph.replay
        rt.barrier()
    done = 0
    elapsed = 0.0
    for segment in range(segments):
        item.refresh(segment + 1)
        started = time.monotonic()
        for _ in range(every):
            replay()
        testing.sync(f"{timeout_what} segment {segment + 1}/{segments}")
        elapsed += time.monotonic() - started
        rt.barrier()
        done += every
        failure: Exception | None = None
        try:
            item.check()
        except Exception as error:  # noqa: BLE001 (re-raised below, on every rank alike)
            failure = error
        # A collective after the check: no rank starts the next segment (whose first notify lands in a peer's flag)
        # before every rank has read its results, and a failure on one rank stops the item on all of them instead of
        # leaving the others waiting for it.
        if not testing.all_ranks_true(failure is None):
            if failure is not None:
                raise failure
            raise AssertionError(f"{timeout_what}: segment {segment + 1}/{segments}'s check failed on another rank")
    return {"iterations": done, "us_per_iter": elapsed / max(done, 1) * 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=10_000, help="iterations (eager) and replays (graph) per item")
    parser.add_argument("--check-every", type=int, default=500, help="iterations between checks with fresh data")
    parser.add_argument("--only", nargs="*", default=None, help="item names to run (default: all)")
    parser.add_argument("--modes", nargs="*", default=["eager", "graph"], choices=["eager", "graph"])
    parser.add_argument("--results-md", default=None, help="write the results table here (rank 0)")
    args = parser.parse_args()

    world = testing.setup_distributed(heap_size="512M")
    checks = testing.Checks()
    ops = discover_ops()
    testing.rank0_print(f"ops found in triton_dist.ops: {sorted(ops)}")
    rows = []
    makers: list[tuple[str, Callable[[bool], Item | None]]] = [
        ("ping_pong", lambda graph: ping_pong_item(world, graph)),
        ("allgather_push", lambda graph: allgather_item(world, graph, push=True)),
        ("allgather_pull", lambda graph: allgather_item(world, graph, push=False)),
    ]
    makers += [
        (name, lambda graph, name=name, fn=fn: op_item(world, graph, name, fn)) for name, fn in sorted(ops.items())
    ]
    makers += [
        (label, lambda graph, op=op, fn=fn, label=label: op_item(world, graph, op, fn, label))
        for label, op, fn in fixed_config_variants()
    ]
    for name, make in makers:
        if args.only and name not in args.only:
            continue
        for mode in args.modes:
            graph = mode == "graph"
            label = f"{name} ({mode}, {args.iters} {'replays' if graph else 'iterations'})"
            testing.rank0_print(f"--- {label}")

            def body(make: Callable = make, graph: bool = graph, label: str = label, name: str = name,
                     mode: str = mode) -> None:  # fmt: skip
                item = make(graph)
                if item is None:
                    checks.check(f"{name}: a stress driver exists", False, "add one to test/gpu/stress.py")
                    return
                if item.fallback:
                    testing.rank0_print(f"INFO {name}: at this shape the op runs {item.fallback}")
                if item.fallback and graph and testing.shared_gpus():
                    # gloo stands in for NCCL when ranks share a GPU, and gloo collectives cannot be captured.
                    testing.rank0_print(f"SKIP {label}: gloo (shared GPUs) cannot be captured (not counted as passed)")
                    rows.append((name, mode, "-", "-", "SKIP: gloo fallback not capturable"))
                    return
                got = run_item(item, args.iters, args.check_every, graph, label)
                slowest = testing.max_over_ranks(got["us_per_iter"])
                checks.check(label, got["iterations"] >= args.iters, f"{slowest:.1f} us per iteration (max over ranks)")
                testing.rank0_print(f"RESULT stress {name} {mode}: {got['iterations']} iterations, "
                                    f"{slowest:.1f} us each, every result checked against torch")  # fmt: skip
                rows.append((name, mode, got["iterations"], f"{slowest:.1f}", "PASS"))

            before = len(checks.failed)
            checks.run(label, body)
            if len(checks.failed) > before:
                rows.append((name, mode, "-", "-", "FAIL: " + checks.failed[-1]))
    if args.results_md and world.rank == 0:
        notes = [
            f"command: `bash scripts/stress.sh --iters {args.iters} --check-every {args.check_every}`",
            f"machine: {world.world_size} x {torch.cuda.get_device_name()}, torch {torch.__version__}",
            f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
            "every segment of --check-every iterations ends with a check against torch on fresh random inputs",
        ]
        testing.write_markdown(args.results_md, "Stress: back-to-back iterations and CUDA-graph replays",
                               ["item", "mode", "iterations", "us / iteration", "result"], rows, notes)  # fmt: skip
    code = checks.exit_code()
    testing.teardown()
    return code


if __name__ == "__main__":
    testing.main_guard(main)
