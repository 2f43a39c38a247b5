"""The NVSHMEM heap (``triton_dist.init(backend="nvshmem")``): torch symmetric memory's NVSHMEM backend.

torch bootstraps NVSHMEM itself (a unique id exchanged through the default process group's store, on the first
allocation), so triton_dist needs no bootstrap of its own: it switches torch's backend to ``"NVSHMEM"`` before any
symmetric allocation, then allocates and maps the heap exactly as the CUDA-IPC heap does (``symm_mem.py``). Within a
node torch hands out every peer's pointer (``nvshmem_ptr``), so the device context holds every local peer's base and
``dl.symm_at`` stays a plain load/store; a peer on another node has no pointer, its base is 0 and its entry in the
mapping is None, and only NVSHMEM's puts (``dl.put_signal`` / ``dl.get``) reach it.

NVSHMEM allocates collectively over every process of the default group and numbers its PEs by world rank, so the
heap's group must be the whole world. Ranks that share a GPU cannot use it (one PE per GPU).

A kernel that links NVSHMEM's device bitcode (the ``dl.put_signal`` family) holds NVSHMEM's device state
(``NVSHMEM_DEVICE_STATE``); NVSHMEM's host library must initialize it in every loaded module
(``nvshmemx_cumodule_init``, which torch exposes). :class:`NvshmemModuleHook` does that from Triton's
``kernel_load_end_hook`` on the NVSHMEM heap and refuses such a kernel on any other heap.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import torch
import torch.distributed as dist

from triton_dist.abi import HEAP_BASE_ALIGNMENT
from triton_dist.compiler.context_hook import assembly_mentions
from triton_dist.runtime.heap.mapping import HeapMapping, ranks_share_a_gpu
from triton_dist.runtime.heap.symm_mem import map_symmetric_memory_heap
from triton_dist.runtime.world.rank_agreement import raise_if_any_rank_failed
from triton_dist.runtime.world.settings import parse_size

TORCH_BACKEND = "NVSHMEM"
NVSHMEM_WHEELS = "nvidia-nvshmem-cu12 or nvidia-nvshmem-cu13 (matching torch's CUDA)"
SYMMETRIC_SIZE_ENV = "NVSHMEM_SYMMETRIC_SIZE"
NVSHMEM_DEFAULT_SYMMETRIC_SIZE = 1 << 30
"""NVSHMEM's default per-PE symmetric heap (``NVSHMEM_SYMMETRIC_SIZE``)."""
SYMMETRIC_SIZE_SLACK = 64 << 20
"""What the NVSHMEM heap needs beyond triton_dist's heap: the page of alignment slack and torch's signal pads."""
NVSHMEM_DEVICE_STATE = "nvshmemi_device_state_d"
"""The global that NVSHMEM's device bitcode defines and ``nvshmemx_cumodule_init`` fills."""
WHAT = "triton_dist.init(backend='nvshmem')"
TEAM_MANAGER_REFUSAL = "Detected use of TeamManager on multiple devices"
"""torch's error when a rendezvous on the NVSHMEM backend names another device than the first one did: torch keeps
one NVSHMEM team manager per process, bound to the first device a rendezvous or NVSHMEM op names (an allocation
made with ``device="cuda"``, without an index, counts as a device of its own)."""


def nvshmem_problems(device: torch.device, group_size: int, world_size: int, symm_mem: Any = None) -> list[str]:
    """Why this process cannot put a heap on NVSHMEM (empty: it can): a device that is not an NVIDIA GPU, a torch
    without the NVSHMEM backend or without NVSHMEM at run time, a world of one rank, a group that is not the whole
    world.

    ``symm_mem`` stands in for ``torch.distributed._symmetric_memory`` (tests).
    """
    found = []
    if device.type != "cuda":
        found.append(f"the NVSHMEM heap lives on NVIDIA GPUs, not {device} (device='cpu' takes backend='cuda_ipc')")
    elif torch.version.hip:
        found.append(
            "NVSHMEM is NVIDIA only and triton_dist has no rocSHMEM heap (docs/multi-node.md); use backend='cuda_ipc'"
        )
    if world_size < 2:
        found.append(
            "backend='nvshmem' needs at least 2 ranks (torch's NVSHMEM rendezvous refuses a world of one: "
            "'Expected global_ranks.size() > 1'); a single rank has no peers: use backend='cuda_ipc'"
        )
    if group_size != world_size:
        found.append(
            f"backend='nvshmem' needs the whole world as its group (NVSHMEM allocates over every process and numbers "
            f"its PEs by world rank), got a group of {group_size} of {world_size} ranks"
        )
    if symm_mem is None:
        try:
            symm_mem = importlib.import_module("torch.distributed._symmetric_memory")
        except ImportError as error:
            return [*found, f"torch {torch.__version__} has no symmetric memory ({error})"]
    available = getattr(symm_mem, "is_nvshmem_available", None)
    if available is None or getattr(symm_mem, "set_backend", None) is None:
        found.append(
            f"torch {torch.__version__} has no NVSHMEM backend for symmetric memory (torch >= 2.9 has one); "
            "use backend='cuda_ipc'"
        )
        return found
    try:
        usable = bool(available())
    except RuntimeError as error:
        usable, why = False, f": {error}"
    else:
        why = ""
    if not usable:
        found.append(
            f"NVSHMEM is not available to torch {torch.__version__} (CUDA {torch.version.cuda}): "
            f"torch.distributed._symmetric_memory.is_nvshmem_available() is False{why}; install {NVSHMEM_WHEELS} "
            "in this environment on every node, or use backend='cuda_ipc'"
        )
    return found


def symmetric_size_problems(heap_size: int, environ: Mapping[str, str] | None = None) -> list[str]:
    """What is wrong with ``$NVSHMEM_SYMMETRIC_SIZE`` for a ``heap_size``-byte heap (a value NVSHMEM's own
    parser accepts but ``settings.parse_size`` cannot read, such as ``"3.1G"``, is left to NVSHMEM)."""
    environ = os.environ if environ is None else environ
    text = environ.get(SYMMETRIC_SIZE_ENV)
    if text is None:
        return []
    try:
        reserved = parse_size(text)
    except ValueError:
        return []
    needed = heap_size + SYMMETRIC_SIZE_SLACK
    if reserved >= needed:
        return []
    return [
        f"${SYMMETRIC_SIZE_ENV}={text} ({reserved} bytes) is smaller than the heap needs ({heap_size} bytes + "
        f"{SYMMETRIC_SIZE_SLACK} for alignment and torch's signal pads): raise it, or lower heap_size"
    ]


def reserve_symmetric_size(heap_size: int, environ: MutableMapping[str, str] | None = None) -> None:
    """Make NVSHMEM reserve room for the heap: set ``$NVSHMEM_SYMMETRIC_SIZE`` when it is unset and NVSHMEM's
    default (1 GiB) is too small. NVSHMEM reads it when torch initializes it, at the first allocation."""
    environ = os.environ if environ is None else environ
    needed = heap_size + SYMMETRIC_SIZE_SLACK
    if SYMMETRIC_SIZE_ENV not in environ and needed > NVSHMEM_DEFAULT_SYMMETRIC_SIZE:
        environ[SYMMETRIC_SIZE_ENV] = str(-(-needed // HEAP_BASE_ALIGNMENT) * HEAP_BASE_ALIGNMENT)


def map_nvshmem_heap(heap_size: int, group: dist.ProcessGroup, device: torch.device) -> HeapMapping:
    """Allocate this rank's heap on NVSHMEM through torch symmetric memory and map every peer within reach (a
    collective over ``group``, which must be the whole world).

    Raises RuntimeError on every rank, naming each failing rank, when any rank cannot (``nvshmem_problems``,
    ``symmetric_size_problems``) or when ranks share a GPU; a rank that could not would otherwise leave the others
    blocked in NVSHMEM's collective allocation. Also on every rank when torch refused a rank's rendezvous because
    torch symmetric memory's NVSHMEM backend was used on another device before (``team_manager_problem``).
    """
    problems = nvshmem_problems(device, dist.get_world_size(group), dist.get_world_size())
    problems += symmetric_size_problems(heap_size)
    raise_if_any_rank_failed(group, problems, WHAT)
    if ranks_share_a_gpu(group, device):
        raise RuntimeError(
            f"{WHAT}: ranks share a GPU, and NVSHMEM runs one PE per GPU; run one rank per GPU or use "
            "backend='cuda_ipc'"
        )
    reserve_symmetric_size(heap_size)
    refused: RuntimeError | None = None
    try:
        mapping = map_symmetric_memory_heap(heap_size, group, device, backend=TORCH_BACKEND, remote_peers=True)
    except RuntimeError as error:
        if TEAM_MANAGER_REFUSAL not in str(error):
            raise
        # Kept referenced until every rank has heard: dropping it frees the allocation, and NVSHMEM's free is a
        # collective that ranks still in the agreement below would never join.
        refused = error
    raise_if_any_rank_failed(group, [] if refused is None else [team_manager_problem(device)], WHAT)
    return dataclasses.replace(mapping, backend="nvshmem")


def team_manager_problem(device: torch.device) -> str:
    """Why torch refused the heap's rendezvous on ``device`` with :data:`TEAM_MANAGER_REFUSAL`, and what to do."""
    return (
        f"torch symmetric memory's NVSHMEM backend was already used in this process on another device than the "
        f"heap's {device} (torch binds its NVSHMEM teams to the first device a rendezvous or NVSHMEM op names, and "
        f"symm_mem.empty(..., device='cuda') without an index counts as another device: '{TEAM_MANAGER_REFUSAL}'); "
        f"allocate torch symmetric memory on {device} itself, device=torch.device('cuda', "
        "torch.cuda.current_device()), before and after triton_dist.init"
    )


def mentions_nvshmem(metadata_group: Mapping[str, str]) -> bool:
    """Whether a compiled kernel's PTX (in its metadata group) holds NVSHMEM's device state, i.e. whether NVSHMEM's
    bitcode was linked into it. An unreadable file counts as not holding it."""
    return assembly_mentions(metadata_group, NVSHMEM_DEVICE_STATE, (".ptx",))


def _torch_cumodule_init(module: int) -> None:
    from torch._C._distributed_c10d import _nvshmemx_cumodule_init  # type: ignore[attr-defined]

    _nvshmemx_cumodule_init(module)


class NvshmemModuleHook:
    """Triton's ``kernel_load_end_hook`` for kernels that link NVSHMEM's device bitcode: initializes NVSHMEM's device
    state in the loaded module while the heap is NVSHMEM's (``enabled``), and refuses to load the kernel otherwise
    (its NVSHMEM calls would read an uninitialized state). Kernels without NVSHMEM are left alone.

    ``cumodule_init`` stands in for torch's ``_nvshmemx_cumodule_init`` (tests).
    """

    def __init__(self, cumodule_init: Callable[[int], None] = _torch_cumodule_init) -> None:
        self.enabled = False
        self._cumodule_init = cumodule_init
        self.initialized: set[int] = set()

    def __call__(
        self, module: object, function: object, name: str, metadata_group: Mapping[str, str], hash: str
    ) -> None:
        if not isinstance(module, int) or module == 0 or module in self.initialized:
            return
        if not mentions_nvshmem(metadata_group):
            return
        if not self.enabled:
            raise RuntimeError(
                f"kernel {name!r} calls NVSHMEM primitives (dl.put_signal / dl.get / dl.signal_wait), which need the "
                "NVSHMEM heap: call triton_dist.init(backend='nvshmem') (or set TRITON_DIST_BACKEND=nvshmem)"
            )
        self._cumodule_init(module)
        self.initialized.add(module)


nvshmem_module_hook = NvshmemModuleHook()
"""The process's NVSHMEM module hook (one per process, in Triton's ``kernel_load_end_hook`` chain after ``init()``)."""


def install_nvshmem_module_hook(enabled: bool) -> None:
    """Put :data:`nvshmem_module_hook` in Triton's ``kernel_load_end_hook`` chain (idempotent); ``enabled``: the heap
    is NVSHMEM's, so NVSHMEM kernels get their device state initialized instead of refused."""
    from triton import knobs

    nvshmem_module_hook.enabled = enabled
    knobs.runtime.kernel_load_end_hook.add(nvshmem_module_hook)
