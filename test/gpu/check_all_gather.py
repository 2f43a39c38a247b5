"""``triton_dist.ops.all_gather`` on GPUs against NCCL's ``all_gather_into_tensor``: the one-node path on 2 GPUs and
a real 2-node layout on one host (two torchrun agents, one GPU each, on the NVSHMEM heap), so the kernel's
``dl.put_signal`` / ``dl.signal_wait`` path runs.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD/python \
        python3 test/gpu/check_all_gather.py [--timeout 300] [--only one_node two_nodes ...] [--rdzv static|c10d]

Run it with plain ``python3`` (not under torchrun): it starts every torchrun itself, each agent in a session of its
own, and kills every agent's process group (SIGTERM, then SIGKILL) when a stage outlives ``--timeout`` or one agent
failed and the others did not end within a grace period, so a stuck kernel leaves no process on the GPUs. Exit
status 0 iff every required stage passed. The stages:

- ``one_node``: ``torchrun --standalone --nproc-per-node=2``, the CUDA-IPC heap (load/store path only);
- ``one_node_nvshmem``: the same on the NVSHMEM heap (the load/store path over NVSHMEM's memory);
- ``two_nodes``: two agents ``--nnodes=2 --node-rank=<0|1> --nproc-per-node=1`` on this host, both GPUs visible,
  agent ``i`` on GPU ``i``; ``init(backend="nvshmem")`` sees two nodes, so the kernel is compiled with ``NODES=2``
  and moves every shard with NVSHMEM's puts (over P2P on one host: the data path of the inter-node code, not the
  NIC);
- ``two_nodes_own_gpu`` (informational: its result does not change the exit status): the same with each agent
  seeing only its GPU (``CUDA_VISIBLE_DEVICES=i``), which NVSHMEM's P2P transport may not accept;
- ``two_nodes_2x2`` (with 4 or more GPUs): two agents of 2 ranks each, the full hierarchical path (a put, then a
  forward within the node by load/store).

Each worker checks, on random data with poisoned buffers, several dtypes and shapes, calls in a row without host
synchronization between them (epochs and parities), the custom op, CUDA-graph replays, and that the kernel's PTX
holds NVSHMEM's device code only when the world spans nodes; rank 0 prints the op's and NCCL's times (informational).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GPU_ENV = "ALL_GATHER_GPU_OFFSET"
"""Added to ``$LOCAL_RANK`` to pick a worker's GPU (set per agent by the launcher when agents share the visible
GPUs: agent ``i`` of ``L`` ranks starts at GPU ``i L``)."""
GRACE_S = 30.0
"""How long the other agents of a stage may run on after one failed, before they are killed."""


# --- the worker (one rank, under torchrun) ----------------------------------------------------------------------


def worker(layouts: list[int], backend: str, emulate: bool = False) -> int:
    """One rank's checks on worlds of ``layouts[i]`` nodes on the ``backend`` heap, one after the other; returns the
    exit code (0 iff every check passed on every rank). On GPUs, one layout: the world torchrun made.

    ``emulate``: on CPU ranks under ``TRITON_INTERPRET=1`` (gloo; the CPU heap, laid out as ``n`` nodes on an
    emulated NVSHMEM heap by ``runtime.emulation.one_sided.emulate_nodes`` where ``n > 1``, so ``backend`` is
    ``nvshmem`` there and ``cuda_ipc`` on one node), with small shapes and without the CUDA-graph, PTX and timing
    checks: how ``test/python/test_ops_all_gather.py`` runs these checks in CI.
    """
    return run_layouts("all_gather", cases, layouts, backend, emulate, cpu_heap="8M", gpu_heap="512M")


CaseList = Callable[[Any, bool], list[tuple[str, Callable[..., None]]]]
"""``cases(world, emulate)``: one rank's named checks on a world (``Checks.run_each`` cases)."""


def run_layouts(
    op: str, cases: CaseList, layouts: list[int], backend: str, emulate: bool, *, cpu_heap: str, gpu_heap: str
) -> int:
    """The worker of a multi-node GPU check (this file's and check_all_reduce_nodes.py's): for each layout, a world
    of that many nodes (emulated on CPU ranks, else the one torchrun made, on ``gpu_heap`` of the ``backend`` heap),
    a check that the world is what the stage meant, then ``cases``. Returns the exit code (``testing.finish``)."""
    import torch
    import torch.distributed as dist

    import triton_dist
    from triton_dist.testing import Checks, finish, rank0_print

    checks = Checks()
    if emulate:
        dist.init_process_group("gloo")
    else:
        gpu = int(os.environ.get(GPU_ENV, "0")) + int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(gpu)
        dist.init_process_group("nccl", device_id=torch.device("cuda", gpu))
    for index, nodes in enumerate(layouts):
        if emulate:
            from triton_dist.runtime.emulation.one_sided import emulate_nodes

            if index:
                triton_dist.finalize()
            triton_dist.init(device="cpu", heap_size=cpu_heap)
            world = emulate_nodes(nodes) if nodes > 1 else triton_dist.runtime.current_world()
            backend = "nvshmem" if nodes > 1 else "cuda_ipc"
        else:
            world = triton_dist.init(heap_size=gpu_heap, backend=backend)
        rank0_print(
            f"{op}: {world.world_size} ranks, {world.num_nodes} node(s) x {world.local_world_size}, "
            f"{world.backend} heap, {'CPU emulation' if emulate else torch.cuda.get_device_name()}; "
            f"GROUP_RANK={os.environ.get('GROUP_RANK')} "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '-')}"
        )
        layout_ok = checks.check(
            f"the world is {nodes} node(s) on the {backend} heap",
            world.num_nodes == nodes and world.backend == backend,
            f"{world.num_nodes} nodes {[list(n) for n in world.nodes.nodes]}, {world.backend}",
        )
        if layout_ok:
            checks.run_each(cases(world, emulate))
    return finish(checks)


def cases(world: Any, emulate: bool) -> list[tuple[str, Callable[..., None]]]:
    """The checks of one rank of ``world`` (``Checks.run_each`` cases)."""
    import torch
    import torch.distributed as dist

    import triton_dist.ops as ops
    from triton_dist import runtime as rt
    from triton_dist.ops.all_gather import op as gather_op
    from triton_dist.ops.common import resources
    from triton_dist.testing import Checks, rank0_print, sync, time_ms

    rank, size = world.rank, world.world_size
    device = world.device

    def make(owner: int, tag: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        generator = torch.Generator(device=device).manual_seed(1_000_003 * owner + 7919 * tag + sum(shape))
        if dtype.is_floating_point:
            return torch.randn(shape, generator=generator, device=device).to(dtype)
        info = torch.iinfo(dtype)
        low, high = max(info.min, -(1 << 30)), min(info.max, 1 << 30)
        return torch.randint(low, high, shape, generator=generator, device=device, dtype=dtype)

    def expected(tag: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.cat([make(peer, tag, shape, dtype) for peer in range(size)])

    def nccl(x: torch.Tensor) -> torch.Tensor:
        if emulate:  # gloo: a list of shards
            parts = [torch.empty_like(x) for _ in range(size)]
            dist.all_gather(parts, x)
            return torch.cat(parts)
        out = torch.empty([size * x.shape[0], *x.shape[1:]], dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x)
        return out

    def poison_buffers(out_shape: list[int], dtype: torch.dtype) -> None:
        """NaN / min-int into every all_gather buffer here and into a freed block of the output's size (which the
        op's torch.empty is likely to get back), between barriers so no peer is writing them."""
        rt.barrier()
        for ws in resources.workspaces("all_gather"):
            ws.data.fill_(0xFF)  # NaN in every float width, -1 in every integer width
        block = torch.empty(out_shape, dtype=dtype, device=device)
        block.fill_(float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min)
        del block
        rt.barrier()

    shapes: list[tuple[tuple[int, ...], torch.dtype]] = [
        ((1,), torch.float32),
        ((1000,), torch.bfloat16),
        ((257, 129), torch.float16),
        ((3, 4096, 17), torch.int8),
        ((65_537,), torch.int64),
        ((1 << 20,), torch.float32),
        ((4096, 1024), torch.bfloat16),
    ]
    if emulate:  # the interpreter: small shards (one and two programs), every dtype width
        shapes = [((1,), torch.float32), ((7, 33), torch.bfloat16), ((300,), torch.int8)]

    def each_case(checks: Checks) -> None:
        tag = 0
        for shape, dtype in shapes:
            for call in range(2 if emulate else 3):
                tag += 1
                x = make(rank, tag, shape, dtype)
                poison_buffers([size * shape[0], *shape[1:]], dtype)
                got = ops.all_gather(x)
                reference = nccl(x)
                sync("all_gather")
                ok = torch.equal(got, reference) and torch.equal(got, expected(tag, shape, dtype))
                checks.check(f"{list(shape)} {dtype} call {call}: = NCCL's all_gather_into_tensor", ok)

    def in_a_row(checks: Checks) -> None:
        """Calls of alternating sizes back to back, no host synchronization: peers run calls ahead of each other."""
        sizes = [((4096,), torch.float32), ((300_001,), torch.float32), ((17, 33), torch.bfloat16)]
        if emulate:
            sizes = [((40,), torch.float32), ((130,), torch.float32), ((3, 5), torch.bfloat16)]
        calls = 4 if emulate else 12
        results = []
        for call in range(calls):
            shape, dtype = sizes[call % len(sizes)]
            x = make(rank, 500 + call, shape, dtype)
            results.append((call, shape, dtype, ops.all_gather(x)))
        sync("all_gather in a row")
        for call, shape, dtype, got in results:
            ok = torch.equal(got, expected(500 + call, shape, dtype))
            checks.check(f"call {call} of {calls} in a row ({list(shape)} {dtype})", ok)

    def custom_op(checks: Checks) -> None:
        x = make(rank, 900, (333, 7), torch.float32)
        got = torch.ops.triton_dist.all_gather(x)
        sync("torch.ops.triton_dist.all_gather")
        checks.check("torch.ops.triton_dist.all_gather", torch.equal(got, expected(900, (333, 7), torch.float32)))

    def graphs(checks: Checks) -> None:
        shape = (2048, 64)
        static = make(rank, 1000, shape, torch.bfloat16)
        ops.all_gather(static)  # eager first: the plan and buffers
        sync("graph warm-up")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            first = ops.all_gather(static)
            second = ops.all_gather(first[:2048])  # rank 0's shard, from every rank
        for replay in range(3):
            static.copy_(make(rank, 1001 + replay, shape, torch.bfloat16))
            rt.barrier()
            graph.replay()
            sync("graph replay")
            want = expected(1001 + replay, shape, torch.bfloat16)
            ok = torch.equal(first, want) and torch.equal(second, torch.cat([want[:2048]] * size))
            checks.check(f"CUDA-graph replay {replay} (two calls per replay)", ok)

    def ptx(checks: Checks) -> None:
        plans = [plan for plan in gather_op._plans._plans.values() if hasattr(plan, "kernel")]
        holds = ["nvshmemi_device_state_d" in plan.kernel.asm["ptx"] for plan in plans]
        want = world.num_nodes > 1
        checks.check(
            f"every plan's PTX {'holds' if want else 'lacks'} NVSHMEM's device code ({len(plans)} plans)",
            bool(plans) and all(h == want for h in holds),
            f"{holds}",
        )

    def timings(checks: Checks) -> None:
        try:
            timed()
        except (TimeoutError, dist.DistBackendError):
            raise
        except Exception as error:  # noqa: BLE001 (informational: a failure to time is printed, not counted)
            rank0_print(f"TIME not measured: {type(error).__name__}: {error}")

    def timed() -> None:
        for elements in (16 * 1024, 256 * 1024, 4 * 1024 * 1024):
            x = make(rank, 2000, (elements,), torch.float32)
            # barrier_on_device() refuses a world across nodes: a host barrier there (the span then holds the
            # host's launch as well)
            together = rt.barrier if world.num_nodes > 1 else None
            ours = time_ms(lambda x=x: ops.all_gather(x), start_together=together)
            theirs = time_ms(lambda x=x: nccl(x), start_together=together)
            rank0_print(
                f"TIME shard {elements * 4 >> 10} KiB x {size} ranks: all_gather {ours * 1e3:.1f} us, NCCL "
                f"all_gather_into_tensor {theirs * 1e3:.1f} us (informational"
                f"{'; host barrier between runs' if together else ''})"
            )

    found: list[tuple[str, Callable[..., None]]] = [("dtypes and shapes", each_case), ("calls in a row", in_a_row)]
    if not emulate:  # the custom op under the emulation: test/python/test_ops_all_gather.py (in one process)
        found += [("custom op", custom_op), ("CUDA graphs", graphs), ("PTX", ptx), ("timings", timings)]
    return found


# --- the launcher (plain python3) -------------------------------------------------------------------------------


@dataclass
class Stage:
    """One torchrun job: its agents' argument lists and environments."""

    name: str
    required: bool
    agents: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return int(listener.getsockname()[1])


def _base_env() -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("TORCHELASTIC_") and key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK")
    }
    env.pop("TRITON_INTERPRET", None)
    env.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "python"), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _torchrun(rdzv: str, nodes: int, node: int, per_node: int, port: int) -> list[str]:
    run = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={per_node}"]
    if nodes == 1:
        return [*run, "--standalone"]
    if rdzv == "c10d":
        return [
            *run,
            f"--nnodes={nodes}",
            f"--node-rank={node}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}",
        ]
    return [*run, f"--nnodes={nodes}", f"--node-rank={node}", "--master-addr=127.0.0.1", f"--master-port={port}"]


def stages(gpus: int, rdzv: str, script: Path = Path(__file__)) -> list[Stage]:
    """The stages this host can run (see the module docstring), each agent running ``script``'s worker."""
    me = str(script.resolve())
    found = []
    base = _base_env()
    port = _free_port()
    one = Stage("one_node", True)
    one.agents.append(([*_torchrun(rdzv, 1, 0, 2, port), me, "--worker", "1", "cuda_ipc"], dict(base)))
    found.append(one)
    one_nvshmem = Stage("one_node_nvshmem", True)
    one_nvshmem.agents.append(([*_torchrun(rdzv, 1, 0, 2, port), me, "--worker", "1", "nvshmem"], dict(base)))
    found.append(one_nvshmem)
    for name, own_gpu in (("two_nodes", False), ("two_nodes_own_gpu", True)):
        stage = Stage(name, required=not own_gpu)
        port = _free_port()
        for node in range(2):
            env = dict(base)
            if own_gpu:
                env["CUDA_VISIBLE_DEVICES"] = str(node)
            else:
                env[GPU_ENV] = str(node)
            stage.agents.append(([*_torchrun(rdzv, 2, node, 1, port), me, "--worker", "2", "nvshmem"], env))
        found.append(stage)
    if gpus >= 4:
        stage = Stage("two_nodes_2x2", True)
        port = _free_port()
        for node in range(2):
            env = dict(base)
            env[GPU_ENV] = str(2 * node)
            stage.agents.append(([*_torchrun(rdzv, 2, node, 2, port), me, "--worker", "2", "nvshmem"], env))
        found.append(stage)
    return found


_live: list[subprocess.Popen[bytes]] = []
"""The agents of the stage running now (what a SIGTERM / SIGINT / SIGHUP of the launcher kills before it exits)."""


def _on_signal(signum: int, frame: object) -> None:
    """The launcher was told to stop: kill every agent's process group first (they run in sessions of their own, so
    nothing else would), then exit 128 + the signal."""
    _kill(list(_live))
    sys.exit(128 + signum)


def _kill(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every agent's process group, then SIGKILL what is left after 5 s."""
    for sig, pause in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0.0)):
        for process in processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + pause
        while pause and time.monotonic() < deadline and any(p.poll() is None for p in processes):
            time.sleep(0.2)
    for process in processes:
        try:  # the workers of a killed agent are in its group: make sure none is left
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    for process in processes:
        _wait_group_gone(process.pid)


def _live_members(group: int) -> list[int]:
    """The processes of process group ``group`` that are not zombies (from /proc; empty where /proc is absent)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(entry))
    return members


def _wait_group_gone(group: int, timeout_s: float = 10.0) -> None:
    """Wait until every process of a SIGKILLed group has died (delivery is asynchronous: on a loaded machine a
    worker can still hold its GPU a moment after killpg returns). Raises RuntimeError naming the survivors."""
    deadline = time.monotonic() + timeout_s
    while (left := _live_members(group)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if left:
        raise RuntimeError(f"processes {left} of a killed agent's group {group} still run after {timeout_s:g} s")


def run_stage(stage: Stage, timeout_s: float, logs: Path) -> tuple[bool, str]:
    """Run ``stage``'s agents together; (passed, why) after all ended or were killed."""
    files = [open(logs / f"{stage.name}.agent{i}.log", "wb") for i in range(len(stage.agents))]  # noqa: SIM115
    processes = [
        subprocess.Popen(argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        for (argv, env), out in zip(stage.agents, files, strict=True)
    ]
    _live[:] = processes
    start = time.monotonic()
    first_failure: float | None = None
    why = ""
    try:
        while any(p.poll() is None for p in processes):
            now = time.monotonic()
            failed = [i for i, p in enumerate(processes) if p.poll() not in (None, 0)]
            if failed and first_failure is None:
                first_failure = now
            if now - start > timeout_s:
                why = f"timed out after {timeout_s:g} s: every agent's process group killed"
                break
            if first_failure is not None and now - first_failure > GRACE_S:
                why = f"agent {failed[0]} failed; the others were killed {GRACE_S:g} s later"
                break
            time.sleep(0.5)
    finally:
        _kill(processes)
        _live.clear()
        for out in files:
            out.close()
    codes = [p.returncode for p in processes]
    passed = not why and all(code == 0 for code in codes)
    return passed, why or f"exit codes {codes}"


def _tail(path: Path, lines: int, op: str) -> str:
    text = path.read_text(errors="replace").splitlines()
    words = (" PASS ", " FAIL ", " FATAL ", "TIME ", "Error", "failures over all ranks", f"{op}: ")
    keep = [line for line in text if any(word in line for word in words)]
    return "\n".join((keep or text)[-lines:])


def drive(op: str, doc: str, script: Path, worker: Callable[[list[int], str, bool], int]) -> int:
    """The command line of a multi-node GPU check (this file's and check_all_reduce_nodes.py's): ``--worker`` runs
    ``worker`` (one rank, under torchrun); otherwise every stage this host can run, agents running ``script``, each
    under the timeout and the kill rules of ``run_stage``. Returns the exit status (0 iff every required stage
    passed)."""
    name = script.stem
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per stage before its agents are killed")
    parser.add_argument("--only", nargs="*", help="run only these stages")
    parser.add_argument("--rdzv", choices=("static", "c10d"), default="static", help="the two-agent rendezvous")
    parser.add_argument("--logs", type=Path, default=None, help="where the agents' logs go (default: a temp dir)")
    parser.add_argument("--worker", nargs=2, metavar=("NODES", "BACKEND"), help=argparse.SUPPRESS)
    parser.add_argument("--emulate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker([int(n) for n in args.worker[0].split(",")], args.worker[1], args.emulate)
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < 2:
        print(f"{name}: needs 2 GPUs, found {gpus}")
        return 1
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    logs = args.logs or Path(tempfile.mkdtemp(prefix=f"{name}."))
    logs.mkdir(parents=True, exist_ok=True)
    results = []
    for stage in stages(gpus, args.rdzv, script):
        if args.only and stage.name not in args.only:
            continue
        print(f"=== {stage.name} ({len(stage.agents)} agent(s){'' if stage.required else ', informational'})")
        sys.stdout.flush()
        passed, why = run_stage(stage, args.timeout, logs)
        for i in range(len(stage.agents)):
            print(_tail(logs / f"{stage.name}.agent{i}.log", 80 if not passed else 40, op))
        print(f"=== {stage.name}: {'PASS' if passed else 'FAIL'} ({why}); logs in {logs}")
        results.append((stage, passed))
    print("\nstage | required | result")
    for stage, passed in results:
        print(f"{stage.name} | {'yes' if stage.required else 'no'} | {'PASS' if passed else 'FAIL'}")
    failed = [stage.name for stage, passed in results if stage.required and not passed]
    print(f"{name}: {'FAIL ' + ', '.join(failed) if failed else 'every required stage passed'}")
    return 1 if failed or not results else 0


def main() -> int:
    return drive("all_gather", __doc__ or "", Path(__file__), worker)


if __name__ == "__main__":
    sys.exit(main())
