"""NVSHMEM's device calls in Triton kernels (dl.put_signal, dl.get, dl.signal_wait) on GPUs, against torch on random
data with poisoned outputs: a put-with-signal ring, an all-gather by puts from several programs, and gets.

    TRITON_DIST_BACKEND=nvshmem torchrun --nproc-per-node=2 test/gpu/check_nvshmem_put.py   (exit 0 iff all pass)

The kernels link NVSHMEM's device code: the build's converted copy of the installed NVSHMEM version
(python/triton_dist/_device/nvshmem_device.<version>.nvptx64.ll, scripts/nvshmem_device.py), else the wheel's
bitcode; rank 0 prints which. On one host NVSHMEM reaches the peer GPU over P2P (NVLink); with NVSHMEM_DISABLE_P2P=1
and a remote transport it would go through the NIC path (see test/gpu/probe_nvshmem_transports.py).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist import runtime as rt
from triton_dist.compiler import device_library
from triton_dist.testing import Checks, finish, main_guard, rank0_print, setup_distributed, sync

POISON = -7777
SIZES = (1, 1000, 65_537, 1 << 20)
DTYPES = (torch.float32, torch.bfloat16, torch.int8)


def make_data(owner: int, round_index: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Rank ``owner``'s random data for a round; every rank regenerates it to check what it received."""
    generator = torch.Generator(device="cuda").manual_seed(1_000_003 * owner + 7919 * round_index + n)
    if dtype.is_floating_point:
        return torch.randn(n, generator=generator, device="cuda").to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=generator, device="cuda", dtype=dtype)


def poisoned(n: int, dtype: torch.dtype, on_heap: bool) -> torch.Tensor:
    tensor = rt.empty(n, dtype=dtype) if on_heap else torch.empty(n, dtype=dtype, device="cuda")
    return tensor.fill_(float(POISON) if dtype.is_floating_point else max(POISON, torch.iinfo(dtype).min + 1))


@triton.jit(do_not_specialize=["epoch"])
def ring_put(shard_ptr, inbox_ptr, signal_ptr, out_ptr, n, nbytes, epoch, BLOCK: tl.constexpr):
    """Put my shard into my right neighbour's inbox and set its signal to ``epoch``; wait for my left neighbour's
    put, then copy my inbox to ``out`` (through the wait's token)."""
    me = dl.rank()
    right = (me + 1) % dl.num_ranks()
    dl.put_signal(inbox_ptr, shard_ptr, nbytes, signal_ptr, epoch, right, sig_op="set")
    token = dl.signal_wait(signal_ptr, epoch, cmp="eq")
    inbox = dl.consume_token(inbox_ptr, token)
    for start in range(0, n, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(inbox + offsets, mask=mask), mask=mask)


@triton.jit(do_not_specialize=["epoch"])
def allgather_put(shard_ptr, out_ptr, signal_ptr, n, elem_bytes, epoch, CHUNK: tl.constexpr):
    """Program p puts chunk p of my shard into slot ``rank`` of every rank's ``out`` (me included) and adds 1 to
    that rank's signal; then waits until every program of every rank has added (``epoch`` rounds since the signal
    was zeroed)."""
    me = dl.rank()
    world = dl.num_ranks()
    chunk = tl.program_id(0)
    programs = tl.num_programs(0)
    start = chunk * CHUNK
    count = tl.minimum(CHUNK, n - start)
    count = tl.maximum(count, 0)
    for step in range(0, world):
        peer = (me + step) % world
        dl.put_signal(
            out_ptr + me * n + start, shard_ptr + start, count * elem_bytes, signal_ptr, 1, peer, sig_op="add"
        )
    dl.signal_wait(signal_ptr, epoch * world * programs, cmp="ge")


@triton.jit
def get_from(dest_ptr, src_ptr, nbytes, peer):
    dl.get(dest_ptr, src_ptr, nbytes, peer)


def check_ring(checks: Checks, world: rt.World) -> None:
    left = (world.rank - 1) % world.world_size
    signal = rt.zeros(1, dtype=torch.int64)
    rt.barrier()
    epoch = 0
    for dtype in DTYPES:
        for n in SIZES:
            epoch += 1
            shard = make_data(world.rank, epoch, n, dtype)  # ordinary device memory: put's source may be any
            inbox = poisoned(n, dtype, on_heap=True)
            out = poisoned(n, dtype, on_heap=False)
            rt.barrier()  # every rank's inbox is poisoned, and the last round's copied out, before any put
            compiled = ring_put[(1,)](shard, inbox, signal, out, n, n * shard.element_size(), epoch, BLOCK=1024)
            sync("ring_put")
            expected = make_data(left, epoch, n, dtype)
            checks.check(f"ring put_signal {n} x {dtype} from rank {left}", torch.equal(out, expected))
            checks.check(f"ring: the inbox itself holds rank {left}'s {n} x {dtype}", torch.equal(inbox, expected))
            if epoch == 1:
                ptx = compiled.asm["ptx"]
                checks.check(
                    "the ring kernel's PTX holds NVSHMEM's device state and no unresolved nvshmem call",
                    "nvshmemi_device_state_d" in ptx and ".extern .func nvshmem" not in ptx,
                )
    rt.barrier()
    checks.check(f"the ring's signal ends at the last epoch {epoch}", signal.item() == epoch, f"{signal.item()}")


def check_allgather(checks: Checks, world: rt.World) -> None:
    signal = rt.zeros(1, dtype=torch.int64)
    round_index = 0
    for dtype in DTYPES:
        for n in SIZES:
            for chunk in (1 << 16, 4096):
                round_index += 1
                programs = triton.cdiv(n, chunk)
                shard = make_data(world.rank, 1000 + round_index, n, dtype)
                out = poisoned(world.world_size * n, dtype, on_heap=True)
                signal.zero_()
                rt.barrier()  # every rank's output is poisoned and its signal zeroed before any put
                allgather_put[(programs,)](shard, out, signal, n, shard.element_size(), 1, CHUNK=chunk, num_warps=4)
                sync("allgather_put")
                expected = torch.cat(
                    [make_data(peer, 1000 + round_index, n, dtype) for peer in range(world.world_size)]
                )
                reference = torch.empty_like(expected)
                dist.all_gather_into_tensor(reference, shard)  # NCCL's all-gather of the same shards
                checks.check(
                    f"all-gather by put_signal: {n} x {dtype}, {programs} program(s), = regenerated and NCCL's",
                    torch.equal(out, expected) and torch.equal(out, reference),
                )
                got = signal.item()
                checks.check(
                    f"all-gather: {world.world_size * programs} signal adds arrived, no more",
                    got == world.world_size * programs,
                    f"{got}",
                )
                rt.barrier()


def check_get(checks: Checks, world: rt.World) -> None:
    for dtype in DTYPES:
        for n in SIZES:
            src = rt.empty(n, dtype=dtype)
            src.copy_(make_data(world.rank, 500, n, dtype))
            rt.barrier()
            for peer in range(world.world_size):
                dest = poisoned(n, dtype, on_heap=False)
                get_from[(1,)](dest, src, n * src.element_size(), peer)
                sync("get_from")
                checks.check(f"get {n} x {dtype} from rank {peer}", torch.equal(dest, make_data(peer, 500, n, dtype)))
            rt.barrier()


def main() -> int:
    world = setup_distributed(heap_size="256M")
    checks = Checks()
    installed = device_library.installed_nvshmem_version()
    code = device_library.nvshmem_libraries(torch.cuda.get_device_capability()[0] * 10)[1][1]
    rank0_print(
        f"NVSHMEM device calls on {world.world_size} ranks, {world.backend} heap; nvidia-nvshmem {installed}; "
        f"linking {code}; NVSHMEM_DISABLE_P2P={os.environ.get('NVSHMEM_DISABLE_P2P', '(unset)')} "
        f"NVSHMEM_REMOTE_TRANSPORT={os.environ.get('NVSHMEM_REMOTE_TRANSPORT', '(unset)')}"
    )
    if not checks.check("the heap is NVSHMEM's (TRITON_DIST_BACKEND=nvshmem)", world.backend == "nvshmem"):
        return finish(checks)
    cases = (("put_signal ring", check_ring), ("all-gather by put_signal", check_allgather), ("get", check_get))
    checks.run_each(cases, world)
    return finish(checks)


if __name__ == "__main__":
    main_guard(main)
