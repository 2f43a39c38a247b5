"""Can NVSHMEM on this machine treat two local GPUs as remote? (issue 29, item 4: exercising the inter-node path on one
host.) Prints one table and never hangs: every child process runs under a time limit and is killed with its process
group, and the whole probe ends within ``--budget`` seconds (default 300).

    python3 test/gpu/probe_nvshmem_transports.py [--timeout 55] [--budget 300] [--only ucx ibrc] [--ucx-lib DIR]
    (not under torchrun: it starts its own 2-rank runs)

Time: five 2-rank runs of at most ``--timeout`` seconds each (default 55: 275 s), plus the first table (``ldd`` and
``ldconfig``, 10 s each at most, normally about a second in all) fit in the 300 s budget; a run is given less than
``--timeout`` where less of the budget is left, and is skipped (its row says so) where under 10 s are.

UCX is not a system package on the GPU image, but PyPI's libucx-cu13 wheel carries it: extract its libraries on a
machine with PyPI, carry the directory, and point ``--ucx-lib`` at it (a ``libucx`` package installed in this Python
is found by itself):

    python3 -m pip download --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.12 \
        libucx-cu13==1.22.0 -d /tmp/ucx
    python3 test/gpu/probe_nvshmem_transports.py --extract-ucx /tmp/ucx/libucx_cu13-1.22.0-*.whl .whl/ucx
    # on the GPU machine (.whl/ucx carried):
    python3 test/gpu/probe_nvshmem_transports.py --ucx-lib .whl/ucx/libucx/lib

1. What the installed nvidia-nvshmem wheel ships: its remote-transport plugins (``nvshmem_transport_<name>.so.N``)
   and, for each, the system libraries ``ldd`` cannot find and whether ``dlopen`` succeeds; the RDMA devices
   (/dev/infiniband, /sys/class/infiniband) and the UCX / libfabric / verbs libraries ``ldconfig`` knows.
2. For the baseline (P2P) and each transport (ucx, libfabric, ibrc, ibgda): two ranks of this script's worker with
   ``NVSHMEM_DISABLE_P2P=1`` and that transport selected. The worker starts the way a user does: an NCCL process
   group, then ``triton_dist.init(backend="nvshmem")`` (torch symmetric memory on NVSHMEM underneath; does NVSHMEM
   initialize, and does the heap triton_dist made hold a pointer to the peer's heap, i.e. did torch's rendezvous
   hand one out?), then a ``dl.put_signal`` ring on that heap on random data, checked on both ranks (the
   device-initiated put over that transport). The table gives each stage's result and the first error line.

The ranks are started directly (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` as torchrun
sets them), both in one process group of their own, with their output in files: torchrun would start each worker in a
session of its own, out of reach of a kill of torchrun's group, and a killed run's leftover ranks would keep the pipe
of its output open. A run ends at its limit, or 5 s after a rank failed (the other is then waiting for it).

Exit status 0 when the probe itself ran (whatever it found), 1 when it could not (no GPUs, no NVSHMEM).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.metadata
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[2]
TRANSPORTS: dict[str, dict[str, str]] = {
    "p2p (baseline)": {},
    "ucx": {"NVSHMEM_DISABLE_P2P": "1", "NVSHMEM_REMOTE_TRANSPORT": "ucx"},
    "libfabric": {"NVSHMEM_DISABLE_P2P": "1", "NVSHMEM_REMOTE_TRANSPORT": "libfabric"},
    "ibrc": {"NVSHMEM_DISABLE_P2P": "1", "NVSHMEM_REMOTE_TRANSPORT": "ibrc"},
    "ibgda": {"NVSHMEM_DISABLE_P2P": "1", "NVSHMEM_REMOTE_TRANSPORT": "ibrc", "NVSHMEM_IB_ENABLE_IBGDA": "1"},
}
"""Probe name -> the NVSHMEM environment it runs with (UCX over TCP loopback is allowed explicitly below)."""
SYSTEM_LIBRARIES = (
    "libucp.so",
    "libucs.so",
    "libuct.so",
    "libfabric.so",
    "libibverbs.so",
    "libmlx5.so",
    "librdmacm.so",
)
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ERROR_LINE = re.compile(r"(error|fail|abort|not found|unable|cannot|could not|WARN)", re.I)
STATIC_TIMEOUT_S = 10.0
"""The limit of each ``ldd`` / ``ldconfig`` of the first table."""
MIN_RUN_S = 10.0
"""A run given less than this is skipped: the worker's imports and NVSHMEM's start alone take several seconds."""
TABLE_RESERVE_S = 5.0
"""Seconds of the budget kept for the end of the last run (its killed ranks let go of their GPUs) and the table."""
REAP_S = 3.0
"""How long a run waits for its killed ranks to be gone before it reports anyway."""


_running: set[int] = set()
"""Process groups of the runs in flight, killed if the probe itself is stopped (``_stop``)."""


def _stop(signum: int, frame: object) -> None:
    """SIGTERM / SIGINT: kill every run's process group first. The runs lead process groups of their own, so an
    outer ``timeout`` that stops only the probe would leave them spinning on the GPUs (session 19: a killed probe's
    NVSHMEM ranks kept both GPUs busy and time-sliced the next command's every kernel, ~2.4 ms each)."""
    for group in list(_running):
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    raise SystemExit(128 + signum)


def run(command: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """(exit status or None on timeout, stdout + stderr) of ``command``; on timeout, or if the probe is stopped, its
    whole process group is killed, so no child outlives the probe."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
        cwd=REPO,
    )
    _running.add(process.pid)
    try:
        output, _ = process.communicate(timeout=timeout)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return None, output or ""
    finally:
        _running.discard(process.pid)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for the ranks' rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_ranks(
    command: list[str], ranks: int, timeout: float, env: dict[str, str], grace: float = 5.0
) -> tuple[int | None, list[str]]:
    """Run ``command`` as ``ranks`` ranks of one host, with the variables torchrun would set, all in one new process
    group; returns (None if the run reached ``timeout``, else the first non-zero exit status or 0; each rank's
    output). The group is killed at ``timeout``, ``grace`` seconds after a rank failed, when the probe is stopped,
    and once more when the ranks are done, so that no process of a run outlives it. Output goes to files, not pipes:
    nothing left holding a pipe open can keep this waiting."""
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    group = 0
    with tempfile.TemporaryDirectory(prefix="probe-nvshmem-") as directory:
        logs = [Path(directory) / f"rank{rank}.log" for rank in range(ranks)]
        deadline = time.monotonic() + timeout
        timed_out = False
        try:
            for rank in range(ranks):
                rank_env = dict(env)
                rank_env.update(
                    RANK=str(rank),
                    LOCAL_RANK=str(rank),
                    WORLD_SIZE=str(ranks),
                    LOCAL_WORLD_SIZE=str(ranks),
                    GROUP_RANK="0",
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                )
                with logs[rank].open("wb") as log:
                    # Rank 0 leads a new process group (in this session: a process may only join a group of
                    # its own session), the other ranks join it.
                    process = subprocess.Popen(
                        command, stdout=log, stderr=subprocess.STDOUT, env=rank_env, cwd=REPO, process_group=group
                    )
                processes.append(process)
                if not group:
                    group = process.pid
                    _running.add(group)
            failed_at: float | None = None
            while any(process.poll() is None for process in processes):
                now = time.monotonic()
                if now >= deadline:
                    timed_out = True
                    break
                if failed_at is None and any(process.returncode not in (None, 0) for process in processes):
                    failed_at = now
                if failed_at is not None and now - failed_at >= grace:
                    break
                time.sleep(0.1)
        finally:
            if group:
                _kill_group(group)
                _running.discard(group)
            reaped_by = time.monotonic() + REAP_S
            for process in processes:
                if process.poll() is None:
                    process.kill()
                try:  # a killed rank still in the GPU driver ends when the driver lets go; never wait forever
                    process.wait(timeout=max(0.1, reaped_by - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        outputs = [log.read_text(errors="replace") if log.exists() else "" for log in logs]
    if timed_out:
        return None, outputs
    codes = [process.returncode for process in processes]
    return next((code for code in codes if code not in (0, None)), 0), outputs


def nvshmem_lib_dir() -> tuple[str | None, Path | None]:
    """(version, lib directory) of the installed nvidia-nvshmem wheel, or (None, None)."""
    version = None
    for package in ("nvidia-nvshmem-cu13", "nvidia-nvshmem-cu12"):
        try:
            version = f"{package} {importlib.metadata.version(package)}"
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    spec = importlib.util.find_spec("nvidia.nvshmem") if importlib.util.find_spec("nvidia") else None
    for location in list(spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "lib").is_dir():
            return version, Path(location) / "lib"
    return version, None


def plugin_report(lib: Path, name: str, extra_path: Path | None = None) -> tuple[str, str, str]:
    """(plugin file or 'not shipped', libraries ldd cannot find, dlopen result) for transport ``name``, with
    ``extra_path`` on the loader's path for ldd (dlopen in this process sees only the system's)."""
    found = sorted(lib.glob(f"nvshmem_transport_{name}.so*"))
    if not found:
        return "not shipped", "-", "-"
    plugin = found[0]
    env = dict(os.environ)
    if extra_path is not None:
        env["LD_LIBRARY_PATH"] = f"{extra_path}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
    code, output = run(["ldd", str(plugin)], timeout=STATIC_TIMEOUT_S, env=env)
    missing = sorted({line.split()[0] for line in output.splitlines() if "not found" in line})
    ldd = ", ".join(missing) if missing else ("none" if code == 0 else f"ldd failed: {output.strip()[:80]}")
    try:
        if extra_path is not None:
            for dependency in ("libucs.so.0", "libuct.so.0", "libucp.so.0"):
                ctypes.CDLL(str(extra_path / dependency), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(plugin))
        loads = "loads" + (f" (with {extra_path})" if extra_path is not None else "")
    except OSError as error:
        loads = f"dlopen fails: {str(error)[:100]}"
    return plugin.name, ldd, loads


def system_report() -> list[tuple[str, str]]:
    """(what, found) for the RDMA devices and the transport libraries the dynamic loader knows."""
    rows = []
    devices = sorted(p.name for p in Path("/dev/infiniband").glob("*")) if Path("/dev/infiniband").is_dir() else []
    rows.append(("/dev/infiniband", ", ".join(devices) or "absent"))
    hcas = (
        sorted(p.name for p in Path("/sys/class/infiniband").glob("*"))
        if Path("/sys/class/infiniband").is_dir()
        else []
    )
    rows.append(("RDMA devices (/sys/class/infiniband)", ", ".join(hcas) or "none"))
    _, cache = run(["ldconfig", "-p"], timeout=STATIC_TIMEOUT_S)
    for library in SYSTEM_LIBRARIES:
        hits = sorted({line.split(" => ")[-1].strip() for line in cache.splitlines() if library in line})
        rows.append((library, ", ".join(hits) or "not installed"))
    packages = sorted(
        f"{dist.metadata['Name']} {dist.version}"
        for dist in importlib.metadata.distributions()
        if re.search(r"ucx|fabric|rdma|verbs", dist.metadata["Name"] or "", re.I)
    )
    rows.append(("Python packages (ucx / fabric / rdma / verbs)", ", ".join(packages) or "none"))
    return rows


def extract_ucx(wheel: Path, dest: Path) -> Path:
    """Unpacks the shared libraries of a libucx wheel into ``dest`` (its layout kept, so the libraries' run paths still
    find each other; the tools, headers and perftest module left out); returns the ``libucx/lib`` directory."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            name = Path(member).name
            if "perftest" in member or ".so" not in name:
                continue
            # The wheel stores each symbolic link as a copy: keep the names the loaders ask for (libucp.so.0; the
            # modules of lib/ucx also by .so), not the .so.0.0.0 / development copies.
            library = member.startswith("libucx/lib/") and (name.endswith(".so.0") or "/ucx/" in member)
            if (library and not name.endswith(".0.0")) or ".libs/" in member:
                archive.extract(member, dest)
    lib = dest / "libucx" / "lib"
    if not (lib / "libucp.so.0").is_file():
        raise SystemExit(f"{wheel} holds no libucx/lib/libucp.so.0: not a libucx wheel")
    return lib


def ucx_lib_dir(given: Path | None) -> Path | None:
    """The directory holding libucp.so.0 for the UCX run: ``given``, else an installed ``libucx`` package's."""
    if given is not None:
        if not (given / "libucp.so.0").is_file():
            raise SystemExit(f"--ucx-lib {given} holds no libucp.so.0")
        return given.resolve()
    spec = importlib.util.find_spec("libucx")
    for location in list(spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "lib" / "libucp.so.0").is_file():
            return Path(location) / "lib"
    return None


def first_nvshmem_error(output: str) -> str:
    for line in output.splitlines():
        if "PROBE" in line and "error" in line:
            return re.sub(r"\s+", " ", line.strip())[:200]
    for line in output.splitlines():
        if ("NVSHMEM" in line or "nvshmem" in line or "PROBE" in line) and ERROR_LINE.search(line):
            return re.sub(r"\s+", " ", line.strip())[:160]
    tail = [line for line in output.splitlines() if line.strip()]
    return re.sub(r"\s+", " ", tail[-1].strip())[:160] if tail else "(no output)"


def transports_chosen(output: str) -> str:
    """NVSHMEM's INFO lines that name a transport for a peer, shortened."""
    found = sorted(
        {
            match.group(0)
            for match in re.finditer(
                r"(?i)(transport[^\n]{0,60}(p2p|ibrc|ucx|libfabric|ibgda|ibdevx)[^\n]{0,20})", output
            )
        }
    )
    return "; ".join(item.strip() for item in found[:2])[:120]


def probe(name: str, extra: dict[str, str], timeout: float, ucx: Path | None) -> tuple[str, str, str, str, str]:
    """(init, peer pointer, put ring, seconds, note) of a 2-rank run of the worker with ``extra`` NVSHMEM settings,
    limited to ``timeout`` seconds; ``ucx``: the UCX libraries put on the loader's path for the ucx run."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("NVSHMEM_REMOTE", "NVSHMEM_DISABLE_P2P", "TRITON_DIST_BACKEND"))
    }
    env.update(SAFE_ENV)
    env.update(extra)
    env.update(
        {
            "NVSHMEM_DEBUG": "INFO",
            "FI_PROVIDER": env.get("FI_PROVIDER", "tcp"),  # libfabric over TCP (loopback) if it loads at all
            "TRITON_DIST_TIMEOUT_S": str(max(5, int(timeout) - 5)),
            "PYTHONPATH": f"{REPO / 'python'}{os.pathsep}{env.get('PYTHONPATH', '')}",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if ucx is not None and name == "ucx":
        env["LD_LIBRARY_PATH"] = f"{ucx}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
        env.setdefault("UCX_MODULE_DIR", str(ucx / "ucx"))
    start = time.monotonic()
    code, outputs = run_ranks([sys.executable, str(Path(__file__).resolve()), "--worker"], 2, timeout, env)
    seconds = f"{time.monotonic() - start:.0f}"
    output = "\n".join(f"## rank {rank}\n{text}" for rank, text in enumerate(outputs))
    timed_out = code is None

    def on_every_rank(marker: str) -> bool:
        return all(marker in text for text in outputs)

    init = "ok" if on_every_rank("PROBE init ok") else ("TIMEOUT" if timed_out else "fails")
    peers = sorted({match.group(1) for match in re.finditer(r"PROBE init ok peer_pointer=(\w+)", output)})
    peer = "/".join(peers) if peers else "-"
    if on_every_rank("PROBE put ok"):
        put = "ok"
    elif "PROBE put wrong" in output:
        put = "WRONG DATA"
    elif init != "ok":
        put = "-"
    else:
        put = "TIMEOUT" if timed_out else "fails"
    chosen = transports_chosen(output)
    note = (chosen + "; " if chosen else "") + ("" if put == "ok" else first_nvshmem_error(output))
    log = Path(os.environ.get("PROBE_LOG_DIR", "/tmp")) / f"probe_nvshmem_{name.split()[0]}.log"
    try:
        log.write_text(output)
    except OSError:
        pass
    return init, peer, put, seconds, note


def _finish(code: int) -> NoReturn:
    """Leave without NVSHMEM's teardown, which can hang or crash after the results are out (the run's limit then
    decides, not the result)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def worker() -> NoReturn:
    """One rank, started as a user starts triton_dist on NVSHMEM: an NCCL process group on this rank's GPU, then
    ``triton_dist.init(backend="nvshmem")``; then a dl.put_signal ring on the heap it made. Prints PROBE lines."""
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    stage = "NCCL process group"
    try:
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        stage = "triton_dist.init(backend='nvshmem')"
        import triton_dist

        world = triton_dist.init(heap_size="64M", backend="nvshmem")
    except Exception as error:  # noqa: BLE001 (reported, then the worker stops)
        print(f"PROBE init error in {stage} on rank {rank}: {type(error).__name__}: {error}", flush=True)
        _finish(1)
    # The heap's view of each peer: torch's rendezvous handle.buffer_ptrs, None where it gave no pointer.
    reachable = world.heap.mapping.reachable
    peers = [peer for peer in range(world.world_size) if peer != world.rank]
    found = [reachable[peer] for peer in peers]
    pointer = "yes" if all(found) else ("none" if not any(found) else "some")
    print(f"PROBE init ok peer_pointer={pointer} rank {world.rank} on {world.device}", flush=True)

    stage = "dl.put_signal ring"
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from check_nvshmem_put import make_data, ring_put  # noqa: PLC0415 (after NVSHMEM is up)

        signal_buffer = triton_dist.zeros(1, dtype=torch.int64)
        n = 100_003
        shard = make_data(world.rank, 1, n, torch.float32)
        inbox = triton_dist.empty(n, dtype=torch.float32).fill_(-7777.0)
        out = torch.full((n,), -7777.0, device="cuda")
        triton_dist.barrier()
        print(f"PROBE put launched rank {world.rank}", flush=True)
        ring_put[(1,)](shard, inbox, signal_buffer, out, n, 4 * n, 1, BLOCK=1024)
        torch.cuda.synchronize()
        left = (world.rank - 1) % world.world_size
        good = torch.equal(out, make_data(left, 1, n, torch.float32))
        print(f"PROBE put {'ok' if good else 'wrong'} rank {world.rank}", flush=True)
        triton_dist.barrier()
    except Exception as error:  # noqa: BLE001 (reported, then the worker stops)
        print(f"PROBE put error in {stage} on rank {rank}: {type(error).__name__}: {error}", flush=True)
        _finish(1)
    _finish(0 if good else 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=55, help="seconds per 2-rank run at most (default 55)")
    parser.add_argument("--budget", type=float, default=300, help="seconds for the whole probe (default 300)")
    parser.add_argument("--only", nargs="*", help="probe only these (p2p ucx libfabric ibrc ibgda)")
    parser.add_argument("--ucx-lib", type=Path, help="a directory with libucp.so.0 & co. for the ucx run")
    parser.add_argument("--extract-ucx", nargs=2, type=Path, metavar=("WHEEL", "DEST"), help="unpack a libucx wheel")
    args = parser.parse_args()
    if args.worker:
        worker()
    if not args.timeout > 0 or not args.budget > 0:
        parser.error(f"--timeout and --budget must be positive, got {args.timeout} and {args.budget}")
    deadline = time.monotonic() + args.budget - TABLE_RESERVE_S
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.extract_ucx:
        print(f"UCX libraries in {extract_ucx(*args.extract_ucx)}: --ucx-lib that directory")
        return 0
    ucx = ucx_lib_dir(args.ucx_lib)
    version, lib = nvshmem_lib_dir()
    print(f"# NVSHMEM transports on this host: {version or 'nvidia-nvshmem not installed'} ({lib})\n")
    print(f"UCX libraries for the ucx run: {ucx or 'none (neither --ucx-lib nor a libucx package)'}\n")
    if lib is None:
        print("nvidia-nvshmem is not installed: nothing to probe")
        return 1
    print("| transport | plugin shipped | system libraries ldd cannot find | dlopen |")
    print("|---|---|---|---|")
    for name in ("ucx", "libfabric", "ibrc", "ibgda", "ibdevx", "gpunetio"):
        plugin, missing, loads = plugin_report(lib, name, ucx if name == "ucx" else None)
        print(f"| {name} | {plugin} | {missing} | {loads} |")
    print("\n| system | found |\n|---|---|")
    for what, found in system_report():
        print(f"| {what} | {found} |")
    try:
        import torch

        gpus = torch.cuda.device_count()
    except ImportError:
        gpus = 0
    if gpus < 2:
        print(f"\n{gpus} GPU(s): the 2-rank runs need 2 GPUs")
        return 1
    selected = [(name, extra) for name, extra in TRANSPORTS.items() if not args.only or name.split()[0] in args.only]
    print(
        f"\n2-rank runs ({args.timeout:.0f} s limit each, {args.budget:.0f} s for the whole probe; logs in "
        f"{os.environ.get('PROBE_LOG_DIR', '/tmp')}):\n"
    )
    print("| run | environment | triton_dist.init(backend='nvshmem') | peer pointer | dl.put_signal ring | s | note |")
    print("|---|---|---|---|---|---|---|")
    for index, (name, extra) in enumerate(selected):
        settings = " ".join(f"{key}={value}" for key, value in extra.items()) or "(P2P on)"
        limit = run_limit(args.timeout, deadline - time.monotonic(), len(selected) - index)
        if limit is None:
            print(
                f"| {name} | {settings} | skipped | - | - | 0 | the {args.budget:.0f} s budget is spent |", flush=True
            )
            continue
        init, peer, put, seconds, note = probe(name, extra, limit, ucx)
        row = f"| {name} | {settings} | {init} | {peer} | {put} | {seconds} | {note.replace('|', '/')} |"
        print(row, flush=True)
    return 0


def run_limit(timeout: float, remaining: float, runs_left: int) -> float | None:
    """Seconds the next run may take: ``timeout``, or an equal share of the ``remaining`` budget among the
    ``runs_left`` runs where that is less; None (skip it) where the share is under ``MIN_RUN_S``."""
    share = remaining / max(runs_left, 1)
    limit = min(timeout, share)
    return limit if limit >= MIN_RUN_S else None


if __name__ == "__main__":
    sys.exit(main())
