"""Can NVSHMEM on this machine treat two local GPUs as remote? (issue 29, item 4: exercising the inter-node path on one
host.) Prints one table and never hangs: every child process runs under a timeout and is killed with its group.

    python3 test/gpu/probe_nvshmem_transports.py [--timeout 60] [--only ucx ibrc] [--ucx-lib DIR]
    (not under torchrun: it starts its own 2-rank torchruns)

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
2. For the baseline (P2P) and each transport (ucx, libfabric, ibrc, ibgda): a 2-rank torchrun of this script's worker
   with ``NVSHMEM_DISABLE_P2P=1`` and that transport selected. The worker (a) starts torch symmetric memory on NVSHMEM
   and rendezvouses (does NVSHMEM initialize, and does torch still hand out a peer pointer?), then (b) runs a
   ``dl.put_signal`` ring through triton_dist's NVSHMEM heap on random data and checks it (the device-initiated put
   over that transport). The table gives each stage's result and the first NVSHMEM error line.

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
import subprocess
import sys
import time
import zipfile
from pathlib import Path

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


_running: set[int] = set()
"""Process groups of the runs in flight, killed if the probe itself is stopped (``_stop``)."""


def _stop(signum: int, frame: object) -> None:
    """SIGTERM / SIGINT: kill every run's process group first. The runs start their own sessions, so an outer
    ``timeout`` that stops only the probe left them spinning on the GPUs (session 19: a killed probe's NVSHMEM
    ranks kept both GPUs busy and time-sliced the next command's every kernel, ~2.4 ms each)."""
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
    code, output = run(["ldd", str(plugin)], timeout=20, env=env)
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
    _, cache = run(["ldconfig", "-p"], timeout=20)
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


def probe(name: str, extra: dict[str, str], timeout: float, ucx: Path | None) -> tuple[str, str, str, str]:
    """(init, put ring, seconds, note) of a 2-rank run of the worker with ``extra`` NVSHMEM settings; ``ucx``: the
    UCX libraries put on the loader's path for the ucx run."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("NVSHMEM_REMOTE", "NVSHMEM_DISABLE_P2P"))
    }
    env.update(SAFE_ENV)
    env.update(extra)
    env.update(
        {
            "NVSHMEM_DEBUG": "INFO",
            "FI_PROVIDER": env.get("FI_PROVIDER", "tcp"),  # libfabric over TCP (loopback) if it loads at all
            "TRITON_DIST_BACKEND": "nvshmem",
            "TRITON_DIST_TIMEOUT_S": str(int(timeout)),
            "PYTHONPATH": f"{REPO / 'python'}{os.pathsep}{env.get('PYTHONPATH', '')}",
        }
    )
    if ucx is not None and name == "ucx":
        env["LD_LIBRARY_PATH"] = f"{ucx}{os.pathsep}{env.get('LD_LIBRARY_PATH', '')}"
        env.setdefault("UCX_MODULE_DIR", str(ucx / "ucx"))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=2",
        str(Path(__file__).resolve()),
        "--worker",
    ]
    start = time.monotonic()
    code, output = run(command, timeout=timeout, env=env)
    seconds = f"{time.monotonic() - start:.0f}"
    init = "ok" if "PROBE init ok" in output else ("TIMEOUT" if code is None else "fails")
    if "PROBE put ok" in output:
        put = "ok"
    elif "PROBE put wrong" in output:
        put = "WRONG DATA"
    else:
        put = "TIMEOUT" if code is None else ("fails" if init == "ok" else "-")
    peer = re.search(r"PROBE init ok peer_pointer=(\w+)", output)
    note = f"peer pointer: {peer.group(1)}; " if peer else ""
    chosen = transports_chosen(output)
    note += (chosen + "; " if chosen else "") + ("" if put == "ok" else first_nvshmem_error(output))
    log = Path(os.environ.get("PROBE_LOG_DIR", "/tmp")) / f"probe_nvshmem_{name.split()[0]}.log"
    try:
        log.write_text(output)
    except OSError:
        pass
    return init, put, seconds, note


def worker() -> int:
    """One rank: torch symm-mem on NVSHMEM, then a dl.put_signal ring through triton_dist; prints PROBE lines."""
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    from torch.distributed import _symmetric_memory as symm_mem

    symm_mem.set_backend("NVSHMEM")
    stage = "NVSHMEM start (first symmetric allocation)"
    try:
        probe_buffer = symm_mem.empty(1024, device="cuda")
        stage = "torch symm-mem rendezvous"
        handle = symm_mem.rendezvous(probe_buffer, dist.group.WORLD.group_name)
    except Exception as error:  # noqa: BLE001 (reported, then the worker stops)
        print(f"PROBE init error in {stage}: {type(error).__name__}: {error}", flush=True)
        return 1
    peer = 1 - dist.get_rank()
    print(f"PROBE init ok peer_pointer={'yes' if int(handle.buffer_ptrs[peer]) else 'none'}", flush=True)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from check_nvshmem_put import make_data, ring_put  # noqa: PLC0415 (after NVSHMEM is up)

    from triton_dist import runtime as rt

    try:
        world = rt.init(heap_size="64M")
    except Exception as error:  # noqa: BLE001 (reported, then the worker stops)
        print(f"PROBE put error in triton_dist.init: {type(error).__name__}: {error}", flush=True)
        return 1
    signal_buffer = rt.zeros(1, dtype=torch.int64)
    n = 100_003
    shard = make_data(world.rank, 1, n, torch.float32)
    inbox = rt.empty(n, dtype=torch.float32).fill_(-7777.0)
    out = torch.full((n,), -7777.0, device="cuda")
    rt.barrier()
    ring_put[(1,)](shard, inbox, signal_buffer, out, n, 4 * n, 1, BLOCK=1024)
    torch.cuda.synchronize()
    left = (world.rank - 1) % world.world_size
    good = torch.equal(out, make_data(left, 1, n, torch.float32))
    print(f"PROBE put {'ok' if good else 'wrong'} rank {world.rank}", flush=True)
    rt.barrier()
    dist.destroy_process_group()
    return 0 if good else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=60, help="seconds per 2-rank run (default 60)")
    parser.add_argument("--only", nargs="*", help="probe only these (p2p ucx libfabric ibrc ibgda)")
    parser.add_argument("--ucx-lib", type=Path, help="a directory with libucp.so.0 & co. for the ucx run")
    parser.add_argument("--extract-ucx", nargs=2, type=Path, metavar=("WHEEL", "DEST"), help="unpack a libucx wheel")
    args = parser.parse_args()
    if args.worker:
        return worker()
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
    print(f"\n2-rank runs ({args.timeout:.0f} s limit each; logs in {os.environ.get('PROBE_LOG_DIR', '/tmp')}):\n")
    print("| run | environment | NVSHMEM init + rendezvous | dl.put_signal ring | s | note |")
    print("|---|---|---|---|---|---|")
    for name, extra in TRANSPORTS.items():
        if args.only and name.split()[0] not in args.only:
            continue
        init, put, seconds, note = probe(name, extra, args.timeout, ucx)
        settings = " ".join(f"{key}={value}" for key, value in extra.items()) or "(P2P on)"
        print(f"| {name} | {settings} | {init} | {put} | {seconds} | {note.replace('|', '/')} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
