"""Copy-engine producer litmus test: a flag written by ``copy_chunks_with_flags`` is never visible before its chunk.

    torchrun --nproc-per-node=2 test/gpu/check_copy_engine.py [--rounds 2000] [--measure] [--results-md PATH]

Each rank produces for its right neighbour and consumes from its left one, every round r (an epoch):

  producer stream  fill the local source with this round's values; wait until the right rank acknowledged round
                   r-1; ``copy_chunks_with_flags`` copies chunk i into the right rank's destination (through its
                   peer view) and then sets the right rank's flag i to r
  consumer stream  one program per chunk: ``dl.wait(flags + i, 1, "sys", "acquire", r, cmp="ge")``, then read
                   chunk i and count the elements that are not this round's values (stale reads); then acknowledge
                   round r to the left rank

The values depend on a seed kept in device memory, the round and the element, so a chunk left over from an
earlier round or run never passes for this one. Every flag writer runs over several chunk sizes, eagerly and
replayed from CUDA graphs (the producer's and consumer's rounds captured, seeds and flags reset between replays),
and must see 0 stale reads. Controls show that the test can fail: the flag written *before* its copy must produce
stale reads (a check), and a relaxed wait is reported for information.

``--measure`` times each flag writer: the GPU time of N chunk copies with flags against the same copies without,
eager (the host enqueues ahead behind a sleep kernel, so it is GPU time) and graph-replayed; the host's enqueue
time per chunk; and whether the writer can be captured into a CUDA graph.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton
import triton.language as tl

import triton_dist.language as dl  # noqa: E402
from triton_dist import runtime as rt  # noqa: E402
from triton_dist.runtime.copy_engine import copy_chunks_with_flags, flag_writer_for, stream_memop_available  # noqa: E402
from triton_dist.testing import (
    Checks,
    finish,
    main_guard,
    max_over_ranks,
    rank0_print,
    rank_print,
    setup_distributed,
    write_markdown,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _epoch_values, also when loaded by path

from _epoch_values import epoch_values  # noqa: E402

BLOCK = 1024
NUM_CHUNKS = 16
CHUNK_BYTES = (4 << 10, 64 << 10, 1 << 20)
CAPTURE_MODE = "thread_local"
"""Only this thread's CUDA calls may break a capture: NCCL's watchdog thread may query events meanwhile."""


@triton.jit(do_not_specialize=["me", "epoch", "n"])
def fill_source(src_ptr, seeds_ptr, me, epoch, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    seed = tl.load(seeds_ptr + me)
    tl.store(src_ptr + offsets, epoch_values(seed, epoch, offsets), mask=offsets < n)


@triton.jit(do_not_specialize=["epoch"])
def wait_for_ack(ack_ptr, epoch):
    """The right rank has read round epoch - 1 from our copies: its destination may be overwritten."""
    dl.wait(ack_ptr, 1, "sys", "acquire", waitValue=epoch - 1, cmp="ge")


@triton.jit(do_not_specialize=["left", "epoch", "chunk_elems"])
def consume_chunks(
    dst_ptr, flags_ptr, seeds_ptr, result_ptr, left, epoch, chunk_elems, SEMANTIC: tl.constexpr, BLOCK: tl.constexpr
):
    chunk = tl.program_id(0)
    token = dl.wait(flags_ptr + chunk, 1, "sys", SEMANTIC, waitValue=epoch, cmp="ge")
    base = dl.consume_token(dst_ptr + chunk * chunk_elems, token)
    seed = tl.load(seeds_ptr + left)
    stale = 0
    for start in range(0, chunk_elems, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < chunk_elems
        got = tl.load(base + offsets, mask=mask)
        want = epoch_values(seed, epoch, chunk * chunk_elems + offsets)
        stale += tl.sum(((got != want) & mask).to(tl.int32), axis=0)
    tl.atomic_add(result_ptr + 0, stale)
    tl.atomic_add(result_ptr + 1, 1)


@triton.jit(do_not_specialize=["left", "epoch"])
def acknowledge(ack_ptr, left, epoch):
    dl.notify(ack_ptr, left, signal=epoch, sig_op="set", comm_scope="intra_node")


class Ring:
    """The buffers of one configuration: this rank's destination and flags, the source, the peer views."""

    def __init__(self, world: rt.World, chunk_bytes: int) -> None:
        self.world = world
        self.chunk_elems = chunk_bytes // 4
        total = self.chunk_elems * NUM_CHUNKS
        self.right = (world.rank + 1) % world.world_size
        self.left = (world.rank - 1) % world.world_size
        self.dst = rt.zeros(total, dtype=torch.int32)
        self.flags = rt.zeros(NUM_CHUNKS, dtype=torch.int32)
        self.ack = rt.zeros(1, dtype=torch.int32)
        self.src = torch.empty(total, dtype=torch.int32, device="cuda")
        self.seeds = torch.zeros(world.world_size, dtype=torch.int32, device="cuda")
        self.result = torch.zeros(2, dtype=torch.int32, device="cuda")
        peer_dst = rt.peer_tensor(self.dst, self.right)
        self.peer_flags = rt.peer_tensor(self.flags, self.right)
        self.copies = [
            (peer_dst[i * self.chunk_elems : (i + 1) * self.chunk_elems],
             self.src[i * self.chunk_elems : (i + 1) * self.chunk_elems])
            for i in range(NUM_CHUNKS)
        ]  # fmt: skip
        self.producer = torch.cuda.Stream()
        self.consumer = torch.cuda.Stream()

    def reset(self, generation: int) -> None:
        """New seeds, flags and acknowledgements back to 0, the destination poisoned; all ranks in step."""
        torch.cuda.synchronize()
        rt.barrier()
        self.dst.fill_(-1)
        self.flags.zero_()
        self.ack.zero_()
        self.result.zero_()
        self.seeds.copy_(
            torch.arange(self.world.world_size, dtype=torch.int32, device="cuda") * 7919 + generation * 104729 + 1
        )
        torch.cuda.synchronize()
        rt.barrier()

    def produce(self, epoch: int, writer: str, flag_first: bool) -> None:
        with torch.cuda.stream(self.producer):
            n = self.src.numel()
            fill_source[(triton.cdiv(n, BLOCK),)](self.src, self.seeds, self.world.rank, epoch, n, BLOCK=BLOCK)
            wait_for_ack[(1,)](self.ack, epoch, num_warps=1)
            if flag_first:  # the control: the flag goes out before the data it should guard
                write = flag_writer_for(writer)
                for index, (destination, source) in enumerate(self.copies):
                    write(self.producer, self.peer_flags, index, epoch)
                    destination.copy_(source, non_blocking=True)
            else:
                copy_chunks_with_flags(
                    self.copies, self.peer_flags, [epoch] * NUM_CHUNKS, stream=self.producer, flag_writer=writer
                )

    def consume(self, epoch: int, semantic: str) -> None:
        with torch.cuda.stream(self.consumer):
            consume_chunks[(NUM_CHUNKS,)](
                self.dst, self.flags, self.seeds, self.result, self.left, epoch, self.chunk_elems,
                SEMANTIC=semantic, BLOCK=BLOCK, num_warps=4,
            )  # fmt: skip
            acknowledge[(1,)](self.ack, self.left, epoch, num_warps=1)

    def run_eager(self, rounds: int, writer: str, semantic: str = "acquire", flag_first: bool = False) -> tuple:
        self.reset(generation=1)
        for epoch in range(1, rounds + 1):
            self.produce(epoch, writer, flag_first)
            self.consume(epoch, semantic)
        torch.cuda.synchronize()
        rt.barrier()
        stale, chunks = self.result.tolist()
        return stale, chunks

    def run_graph(self, rounds_per_graph: int, replays: int, writer: str) -> tuple:
        self.reset(generation=2)
        producer_graph, consumer_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(producer_graph, stream=self.producer, capture_error_mode=CAPTURE_MODE):
            for epoch in range(1, rounds_per_graph + 1):
                self.produce(epoch, writer, flag_first=False)
        with torch.cuda.graph(consumer_graph, stream=self.consumer, capture_error_mode=CAPTURE_MODE):
            for epoch in range(1, rounds_per_graph + 1):
                self.consume(epoch, "acquire")
        stale = chunks = 0
        for replay in range(replays):
            self.reset(generation=3 + replay)
            with torch.cuda.stream(self.consumer):
                consumer_graph.replay()
            with torch.cuda.stream(self.producer):
                producer_graph.replay()
            torch.cuda.synchronize()
            got_stale, got_chunks = self.result.tolist()
            stale, chunks = stale + got_stale, chunks + got_chunks
        rt.barrier()
        return stale, chunks


def writers() -> list[str]:
    return ["stream_memop", "kernel"] if stream_memop_available() else ["kernel"]


def litmus(world: rt.World, checks: Checks, rounds: int, chunk_bytes: int) -> None:
    """Every flag writer, eager and graph-replayed, then the controls, for chunks of ``chunk_bytes``."""
    graph_rounds = 50
    replays = max(1, rounds // graph_rounds)
    ring = Ring(world, chunk_bytes)
    for writer in writers():
        label = f"{writer}, {NUM_CHUNKS} x {chunk_bytes >> 10} KiB"

        def eager(label: str = label, writer: str = writer) -> None:
            started = time.monotonic()
            stale, chunks = ring.run_eager(rounds, writer)
            took = time.monotonic() - started
            checks.check(
                f"copy-engine eager ({label}): {chunks}/{rounds * NUM_CHUNKS} chunks, {stale} stale reads",
                stale == 0 and chunks == rounds * NUM_CHUNKS,
                f"{took:.2f} s",
            )

        def graph(label: str = label, writer: str = writer) -> None:
            stale, chunks = ring.run_graph(graph_rounds, replays, writer)
            expected = graph_rounds * replays * NUM_CHUNKS
            checks.check(
                f"copy-engine graph ({label}): {chunks}/{expected} chunks, {stale} stale reads",
                stale == 0 and chunks == expected,
            )

        checks.run(f"copy-engine eager ({label})", eager)
        checks.run(f"copy-engine graph ({label})", graph)
    writer = writers()[0]
    control_rounds = min(rounds, 200)
    stale, chunks = ring.run_eager(control_rounds, writer, flag_first=True)
    total = int(max_over_ranks(stale))
    name = f"control, flag before copy ({writer}, {chunk_bytes >> 10} KiB chunks)"
    # A long copy behind the flag, over NVLink: the consumer must catch it unfinished. (With one rank the copy is
    # local and finishes before the consumer reads: on one H200 it never did, so the control is information there.)
    if chunk_bytes == max(CHUNK_BYTES) and world.world_size >= 2:
        checks.check(
            f"{name}: stale reads detected",
            total > 0,
            f"{total} stale elements (max over ranks) in {chunks} chunks; 0 would mean the test cannot fail",
        )
    else:
        rank_print(f"INFO {name}: {total} stale elements (max over ranks) in {chunks} chunks")
    stale, chunks = ring.run_eager(control_rounds, writer, semantic="relaxed")
    rank_print(
        f"INFO relaxed-wait control ({writer}, {chunk_bytes >> 10} KiB chunks): {stale} stale in {chunks} chunks"
    )


class Timer:
    """Times one launch function on ``stream``: GPU time (host ahead), graph replay, host enqueue; in µs."""

    def __init__(self, stream: torch.cuda.Stream, reps: int, warmup: int = 3) -> None:
        self.stream, self.reps, self.warmup = stream, reps, warmup

    def gpu(self, launch: Callable[[], None]) -> float:
        samples = []
        for index in range(self.warmup + self.reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(self.stream):
                torch.cuda._sleep(4_000_000)  # ~2 ms: the host enqueues everything before the GPU starts
                start.record()
            launch()
            with torch.cuda.stream(self.stream):
                end.record()
            self.stream.synchronize()
            if index >= self.warmup:
                samples.append(start.elapsed_time(end) * 1000.0)
        return statistics.median(samples)

    def host(self, launch: Callable[[], None]) -> float:
        samples = []
        for index in range(self.warmup + self.reps):
            self.stream.synchronize()
            began = time.perf_counter()
            launch()
            took = time.perf_counter() - began
            if index >= self.warmup:
                samples.append(took * 1e6)
        self.stream.synchronize()
        return statistics.median(samples)

    def graph(self, launch: Callable[[], None]) -> tuple[float | None, str]:
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.stream, capture_error_mode=CAPTURE_MODE):
                launch()
        except Exception as error:  # noqa: BLE001 (reported: the writer cannot be captured)
            torch.cuda.synchronize()
            return None, f"no ({type(error).__name__}: {str(error)[:120]})"
        samples = []
        for index in range(self.warmup + self.reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(self.stream):
                start.record()
                graph.replay()
                end.record()
            self.stream.synchronize()
            if index >= self.warmup:
                samples.append(start.elapsed_time(end) * 1000.0)
        return statistics.median(samples), "yes"


def measure_chunk_size(world: rt.World, timer: Timer, chunk_bytes: int, num_chunks: int) -> list[dict]:
    """One row per flag writer: per-chunk µs of copies with flags against the same copies without."""
    elems = chunk_bytes // 4
    right = (world.rank + 1) % world.world_size
    dst = rt.empty(elems * num_chunks, dtype=torch.int32)
    flags = rt.zeros(num_chunks, dtype=torch.int32)
    src = torch.randint(0, 1 << 30, (elems * num_chunks,), dtype=torch.int32, device="cuda")
    peer_dst, peer_flags = rt.peer_tensor(dst, right), rt.peer_tensor(flags, right)
    copies = [(peer_dst[i * elems : (i + 1) * elems], src[i * elems : (i + 1) * elems]) for i in range(num_chunks)]
    epoch = [0]

    def copies_only() -> None:
        with torch.cuda.stream(timer.stream):
            for destination, source in copies:
                destination.copy_(source, non_blocking=True)

    def with_flags(writer: str) -> None:
        epoch[0] += 1
        copy_chunks_with_flags(copies, peer_flags, [epoch[0]] * num_chunks, stream=timer.stream, flag_writer=writer)

    rt.barrier()
    base_gpu, (base_graph, _), base_host = timer.gpu(copies_only), timer.graph(copies_only), timer.host(copies_only)
    rows = []
    for writer in writers():
        with_flags(writer)  # compiles the kernel writer outside the timing
        timer.stream.synchronize()
        rt.barrier()
        eager = timer.gpu(lambda writer=writer: with_flags(writer))
        graph, capturable = timer.graph(lambda writer=writer: with_flags(writer))
        host = timer.host(lambda writer=writer: with_flags(writer))
        row = {
            "writer": writer,
            "chunk": f"{chunk_bytes >> 10} KiB",
            "copies_gpu": max_over_ranks(base_gpu) / num_chunks,
            "eager_gpu": max_over_ranks(eager) / num_chunks,
            "copies_graph": max_over_ranks(base_graph or 0.0) / num_chunks,
            "graph_gpu": max_over_ranks(graph if graph is not None else float("nan")) / num_chunks,
            "copies_host": max_over_ranks(base_host) / num_chunks,
            "host": max_over_ranks(host) / num_chunks,
            "capturable": capturable,
        }
        rows.append(row)
        rank0_print(
            f"RESULT copy_engine writer={writer} chunk={row['chunk']} us/chunk: eager GPU {row['eager_gpu']:.2f} "
            f"(copies alone {row['copies_gpu']:.2f}), graph {row['graph_gpu']:.2f} (copies alone "
            f"{row['copies_graph']:.2f}), host enqueue {row['host']:.2f} (copies alone {row['copies_host']:.2f}), "
            f"capturable {capturable}"
        )
    return rows


def measure(world: rt.World, results_md: str | None, reps: int = 20, num_chunks: int = 32) -> None:
    """Per-chunk cost of each flag writer (see the module docstring), as RESULT lines and a markdown table."""
    timer = Timer(torch.cuda.Stream(), reps)
    rows = []
    for chunk_bytes in (4 << 10, 64 << 10, 1 << 20):
        rows += measure_chunk_size(world, timer, chunk_bytes, num_chunks)
    if not results_md or world.rank != 0:
        return
    notes = [
        f"command: `torchrun --nproc-per-node={world.world_size} test/gpu/check_copy_engine.py --measure`",
        f"machine: {world.world_size} x {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"triton {triton.__version__}",
        f"method: CUDA events, median of {reps} runs after 3 warm-ups, max over ranks, divided by the chunk count; "
        "eager GPU time with the host enqueued ahead (behind a sleep kernel); host = CPU enqueue time",
    ]
    headers = [
        "writer", "chunk", "eager GPU µs/chunk", "copies alone", "graph GPU µs/chunk", "copies alone (graph)",
        "host enqueue µs/chunk", "copies alone (host)", "capturable",
    ]  # fmt: skip
    keys = ["writer", "chunk", "eager_gpu", "copies_gpu", "graph_gpu", "copies_graph", "host", "copies_host"]
    table = [[row[key] for key in keys] + [row["capturable"]] for row in rows]
    title = f"copy_chunks_with_flags: flag writers, {num_chunks} chunks per call into the right peer's memory"
    write_markdown(results_md, title, headers, table, notes)
    rank0_print(f"wrote {results_md}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2000, help="rounds per configuration (eager and graph)")
    parser.add_argument("--measure", action="store_true", help="also time the flag writers")
    parser.add_argument("--results-md", default=None, help="write the measurement table here (rank 0)")
    args = parser.parse_args()

    world = setup_distributed(heap_size="256M")
    checks = Checks()
    rank0_print(
        f"flag writers: {', '.join(writers())} (stream memory operations available: {stream_memop_available()})"
    )
    for chunk_bytes in CHUNK_BYTES:
        litmus(world, checks, args.rounds, chunk_bytes)
    if args.measure:
        checks.run("copy-engine measurement", lambda: measure(world, args.results_md))
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
