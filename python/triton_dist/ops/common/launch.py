"""Launching a compiled Triton kernel again without Triton's generic launch path, for latency-bound decode ops.

``kernel[grid](...)`` binds and specializes every argument and looks the kernel up on every call: tens of µs of
host time, more than a decode-size all-reduce takes on the GPU. A :class:`LaunchPlan` keeps the compiled kernel
from the first call and, per call, passes the arguments straight to its launcher. The caller keys plans by
everything Triton specializes on (integer values, the 16-byte alignment of pointers), so a plan is only reused for
arguments that would have compiled to the same kernel.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from triton import knobs
from triton.tools.tensor_descriptor import TensorDescriptor

from triton_dist import runtime as rt


def _current_stream_handle(device_index: int) -> int:
    """The current CUDA stream of device ``device_index``, as the integer handle a launcher takes."""
    return torch.cuda.current_stream(device_index).cuda_stream


current_raw_stream: Callable[[int], int]
"""The current CUDA stream of a device (by index), as the integer handle a launcher takes."""
try:  # what Triton's own launch path asks for the stream (torch.cuda.current_stream builds a Stream object first)
    from torch._C import _cuda_getCurrentRawStream

    current_raw_stream = _cuda_getCurrentRawStream
except ImportError:  # a torch without CUDA: there is nothing to launch on, and the fallback says so when called
    current_raw_stream = _current_stream_handle

current_device_index: Callable[[], int]
"""The current CUDA device's index: ``torch.cuda.current_device()`` without its Python wrapper (a plan's call, which
runs after CUDA is initialized, asks it to decide whether to switch devices)."""
try:
    from torch._C import _cuda_getDevice

    current_device_index = _cuda_getDevice
except ImportError:  # a torch without CUDA: torch.cuda's own function says so when called

    def current_device_index() -> int:
        return torch.cuda.current_device()


@dataclass
class LaunchPlan:
    """A compiled kernel, its grid, and every argument after the first ``leading`` ones (which change per call)."""

    world: rt.World
    kernel: Any
    grid: tuple[int, int, int]
    args: tuple[Any, ...]
    """The kernel's remaining arguments in its parameter order, constexprs included (the launcher skips them), tensors
    as their addresses."""
    tensors: tuple[torch.Tensor, ...] = ()
    """The tensors whose addresses ``args`` holds, kept alive with the plan."""

    def __post_init__(self) -> None:
        kernel = self.kernel  # its launcher and handles, read once (``CompiledKernel.run`` is a property)
        self._run = kernel.run
        self._function = kernel.function
        self._packed_metadata = kernel.packed_metadata
        self._direct = DriverLaunch.of(kernel, self.grid, self.args) if DIRECT_LAUNCH else None

    def launch(self, device: torch.device, *leading: Any) -> None:
        """Enqueue the kernel on ``device``'s current stream, ``leading`` its first arguments."""
        if device.index != torch.cuda.current_device():  # the launcher launches in the current device's context
            with torch.cuda.device(device):
                self.launch(device, *leading)
            return
        self.launch_on(current_raw_stream(device.index), *leading)

    def launch_on(self, stream: int, *leading: Any) -> None:
        """Enqueue the kernel on the raw stream handle ``stream`` (of the current device), ``leading`` first."""
        runtime = knobs.runtime
        enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
        # Whether a hook would run (Triton 3.6: a ``HookChain``, empty unless someone registered a hook).
        if (enter is not None and getattr(enter, "calls", True)) or (
            leave is not None and getattr(leave, "calls", True)
        ):
            metadata = self.kernel.launch_metadata(self.grid, stream, *leading, *self.args)
        else:  # nobody listens: skip building the launch metadata and the launcher's two empty hook calls
            direct = self._direct
            if direct is not None:
                direct.launch(stream, leading)
                return
            metadata = enter = leave = None
        x, y, z = self.grid
        self._run(x, y, z, stream, self._function, self._packed_metadata, metadata, enter, leave, *leading, *self.args)


DIRECT_LAUNCH = True
"""Whether plans built from now on launch eligible kernels by one driver call (:class:`DriverLaunch`)."""

_PARAMETER_CTYPES: dict[str, type[ctypes._SimpleCData]] = {  # type: ignore[type-arg]
    "i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32, "i64": ctypes.c_int64,
    "u1": ctypes.c_uint8, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32,
    "u64": ctypes.c_uint64, "fp32": ctypes.c_float, "f32": ctypes.c_float, "fp64": ctypes.c_double,
}  # fmt: skip
"""The C type of each scalar kernel parameter, as Triton's launcher passes it (a pointer is a ``c_uint64``)."""


def parameter_ctypes(signature: Mapping[str, Any]) -> list[type[ctypes._SimpleCData]] | None:  # type: ignore[type-arg]
    """The C type of each parameter a compiled kernel's entry takes, in order: one per argument of ``signature``
    (``CompiledKernel.src.signature``, name to Triton type) that is not a constexpr, then Triton's two scratch
    pointers. None if an argument has a type this packing does not handle (tensor descriptors, tuples, 16-bit
    floats): such a kernel keeps Triton's launcher."""
    types: list[type[ctypes._SimpleCData]] = []  # type: ignore[type-arg]
    for kind in signature.values():
        if kind == "constexpr":
            continue
        if isinstance(kind, str) and kind.startswith("*"):
            types.append(ctypes.c_uint64)
        elif isinstance(kind, str) and kind in _PARAMETER_CTYPES:
            types.append(_PARAMETER_CTYPES[kind])
        else:
            return None
    return [*types, ctypes.c_uint64, ctypes.c_uint64]  # global_scratch, profile_scratch: 0 (none allocated)


class PackedParameters:
    """A kernel's parameters in C memory, as the array of pointers ``cuLaunchKernel`` takes (its address).

    The fixed values are stored once; each launch stores only its leading ones (``set_leading``). The driver copies
    the values when the launch is enqueued, so the next launch may overwrite them (one thread at a time: a plan is
    not shared between threads)."""

    def __init__(
        self,
        types: Sequence[type[ctypes._SimpleCData]],
        kinds: Sequence[str],
        values: Sequence[Any],
        leading: int,  # type: ignore[type-arg]
    ) -> None:
        self.slots = [kind() for kind in types]
        self._pointers = (ctypes.c_void_p * len(self.slots))(*(ctypes.addressof(slot) for slot in self.slots))
        self.address = ctypes.addressof(self._pointers)
        self._leading = self.slots[:leading]
        self._leading_pointers = tuple(kind.startswith("*") for kind in kinds[:leading])
        for slot, kind, value in zip(self.slots[leading:], kinds[leading:], values, strict=False):
            slot.value = _scalar(value, kind.startswith("*"))

    def set_leading(self, values: Sequence[Any]) -> None:
        """Store this launch's leading values (tensors as their addresses)."""
        for slot, pointer, value in zip(self._leading, self._leading_pointers, values, strict=True):
            slot.value = value.data_ptr() if pointer and isinstance(value, torch.Tensor) else value


def _scalar(value: Any, pointer: bool) -> Any:
    if pointer:
        return value.data_ptr() if isinstance(value, torch.Tensor) else int(value)
    return value


class DriverLaunch:
    """Launching a compiled kernel by one ``cuLaunchKernel`` through cuda-bindings, its parameters packed once.

    Triton's launcher is a Python ``__call__`` (two scratch allocations, closures) around a C function that parses
    every argument again; on the GPU machines' hosts one launch of a one-program flag kernel costs 10-12 µs of host
    time (docs/results/2026-11-27-session24/host_steps_2xH200_df5dfed.txt), where a driver call through
    cuda-bindings costs about 3. Eligible: a kernel of one CTA per program without cooperative or programmatic
    launch, no scratch memory, and parameters of pointer, integer or 32/64-bit float type (what ``parameter_ctypes``
    packs); anything else keeps Triton's launcher."""

    def __init__(self, kernel: Any, grid: tuple[int, int, int], packed: PackedParameters) -> None:
        from cuda.bindings import driver

        metadata = kernel.metadata
        self._launch = driver.cuLaunchKernel
        self._success = driver.CUresult.CUDA_SUCCESS
        self._function = driver.CUfunction(kernel.function)
        self._grid = grid
        self._block = 32 * metadata.num_warps
        self._shared = metadata.shared
        self._packed = packed
        self._empty = grid[0] * grid[1] * grid[2] == 0

    def _make_primary_context_current(self) -> None:
        """Make the primary context of torch's current device current on this thread."""
        from cuda.bindings import driver

        result, device = driver.cuDeviceGet(torch.cuda.current_device())
        if result == self._success:
            result, context = driver.cuDevicePrimaryCtxRetain(device)
            if result == self._success:
                driver.cuCtxSetCurrent(context)

    @staticmethod
    def of(kernel: Any, grid: tuple[int, int, int], fixed: Sequence[Any]) -> DriverLaunch | None:
        """The direct launch of ``kernel`` with the plan's ``fixed`` arguments (those after the leading ones), or
        None where it is not eligible or cuda-bindings is missing."""
        if torch.version.hip is not None:
            return None
        try:
            from cuda.bindings import driver  # noqa: F401
        except ImportError:
            return None
        metadata = kernel.metadata
        if (
            getattr(metadata, "num_ctas", 1) != 1
            or getattr(metadata, "launch_cooperative_grid", False)
            or getattr(metadata, "launch_pdl", False)
            or getattr(metadata, "global_scratch_size", 0)
            or getattr(metadata, "profile_scratch_size", 0)
            or getattr(metadata, "tensordesc_meta", None)
        ):
            return None
        signature = kernel.src.signature
        types = parameter_ctypes(signature)
        if types is None:
            return None
        names = list(signature)
        leading = len(names) - len(fixed)
        if any(signature[name] == "constexpr" for name in names[:leading]):
            return None  # a per-call value compiled in as a constant: the plan's caller keys plans by such values
        kinds = [kind for kind in signature.values() if kind != "constexpr"]
        fixed_values = [
            value for name, value in zip(names[leading:], fixed, strict=True) if signature[name] != "constexpr"
        ]
        return DriverLaunch(kernel, grid, PackedParameters(types, kinds, fixed_values, leading))

    def launch(self, stream: int, leading: Sequence[Any]) -> None:
        """Enqueue the kernel on the raw stream handle ``stream`` of the current device, ``leading`` first."""
        if self._empty:
            return
        packed = self._packed
        packed.set_leading(leading)
        x, y, z = self._grid
        result = self._launch(self._function, x, y, z, self._block, 1, 1, self._shared, stream, packed.address, 0)
        if result[0] != self._success:
            # A thread that has run no CUDA runtime call has no current context, which Triton's launcher would
            # make current: make the current device's primary context current and retry once. (Through the driver:
            # torch.cuda.set_device skips cudaSetDevice when torch believes the device is current already.)
            self._make_primary_context_current()
            result = self._launch(self._function, x, y, z, self._block, 1, 1, self._shared, stream, packed.address, 0)
            if result[0] != self._success:
                raise RuntimeError(f"cuLaunchKernel failed: {result[0]}")


class _Address:
    """A device address with its dtype, standing in for a tensor as a TMA descriptor's base: what
    ``TensorDescriptor`` and Triton's launcher read of it (``data_ptr()``, ``dtype``), without keeping the tensor or
    its memory alive."""

    __slots__ = ("_address", "dtype")

    def __init__(self, address: int, dtype: torch.dtype) -> None:
        self._address = address
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self._address


class DescriptorCache:
    """The host TMA descriptors of one operand of one plan, by the operand's address.

    A plan serves one signature, so its operand in one position always has the same shape, strides and dtype; the
    descriptor then depends only on the address, which repeats across calls (the same weights, and activations and
    outputs that the caching allocator hands out again). A hit saves building and validating a ``TensorDescriptor``
    (a few µs of host time per operand and call). The descriptors hold addresses, not tensors, so the cache never
    keeps memory alive; it holds at most ``MAX_ENTRIES`` addresses (then starts over).
    """

    MAX_ENTRIES = 16

    def __init__(self, block: list[int]) -> None:
        self.block = block
        self._by_address: dict[int, TensorDescriptor] = {}

    def __call__(self, tensor: torch.Tensor) -> TensorDescriptor:
        """The descriptor of ``tensor`` (of this plan's operand's shape, strides and dtype) with this block.

        Raises ``AssertionError`` as ``TensorDescriptor`` does for an address off a 16-byte boundary."""
        address = tensor.data_ptr()
        found = self._by_address.get(address)
        if found is None:
            if len(self._by_address) >= self.MAX_ENTRIES:
                self._by_address.clear()
            base = _Address(address, tensor.dtype)
            found = TensorDescriptor(base, tensor.shape, tensor.stride(), self.block)
            self._by_address[address] = found
        return found


@dataclass
class EmulatedLaunch:
    """The plan of a kernel under the CPU emulation (``ops.common.errors.emulated``): every call goes through
    ``kernel[grid](...)``, which Triton routes to its interpreter (a compiled kernel cannot run there). Launches
    run on the host, one after the other: the stream arguments of :class:`LaunchPlan` are accepted and ignored."""

    world: rt.World
    kernel: Any
    grid: tuple[int, int, int]
    named: dict[str, Any]
    """Every parameter of the kernel by name, in its parameter order (constexprs included)."""
    leading: tuple[str, ...]
    """The names of the parameters each call passes (the first ``len(leading)`` of the kernel)."""

    def launch(self, device: torch.device, *leading: Any) -> None:
        """Run the kernel now, ``leading`` its first arguments (``device``: the CPU, unused)."""
        self.launch_on(0, *leading)

    def launch_on(self, stream: int, *leading: Any) -> None:
        """Run the kernel now, ``leading`` its first arguments (there is no stream: ``stream`` is unused). Pass
        tensors, not addresses: the interpreter reads a tensor parameter through the tensor."""
        named = dict(self.named)
        for name, value in zip(self.leading, leading, strict=True):
            if isinstance(named[name], torch.Tensor) and not isinstance(value, torch.Tensor):
                raise TypeError(f"{self.kernel.__name__}: {name} needs a tensor under the emulation, got {value!r}")
            named[name] = value
        self.kernel[self.grid](**named)


def _emulated_plan(
    kernel: Any, grid: tuple[int, int, int], named: Mapping[str, Any], leading: int
) -> EmulatedLaunch | None:
    """The :class:`EmulatedLaunch` of ``kernel`` when the current world is emulated, else None."""
    from triton_dist.ops.common.errors import emulated

    world = rt.current_world() if rt.is_initialized() else None
    if world is None or not emulated(world):
        return None
    ordered = {name: named[name] for name in kernel.arg_names}
    return EmulatedLaunch(world, kernel, grid, ordered, tuple(kernel.arg_names[:leading]))


def first_launch(
    kernel: Any, grid: tuple[int, int, int], named: Mapping[str, Any], leading: int, **options: Any
) -> LaunchPlan | EmulatedLaunch:
    """Launch ``kernel[grid]`` the ordinary way (compiling it if needed) and return the plan for the next calls.

    ``named`` holds every parameter of the kernel by name (extra names are ignored); the first ``leading``
    parameters are the ones each call passes to :meth:`LaunchPlan.launch`. Tensors among the others (the ops'
    workspaces) must keep their storage while the plan lives: the plan passes their addresses. Under the CPU
    emulation the launch runs in Triton's interpreter and the plan is an :class:`EmulatedLaunch`.
    """
    emulated_plan = _emulated_plan(kernel, grid, named, leading)
    if emulated_plan is not None:
        emulated_plan.launch(torch.device("cpu"), *(emulated_plan.named[name] for name in emulated_plan.leading))
        return emulated_plan
    ordered = {name: named[name] for name in kernel.arg_names}
    compiled = kernel[grid](**ordered, **options)
    fixed = tuple(ordered.values())[leading:]
    # The launcher turns a tensor argument into an address with a data_ptr() call and a driver query of the pointer
    # on every launch; an integer it takes as it is. This launch passed the tensors themselves (Triton checked them),
    # and their addresses do not change, so later launches pass the addresses.
    addresses = tuple(value.data_ptr() if isinstance(value, torch.Tensor) else value for value in fixed)
    tensors = tuple(value for value in fixed if isinstance(value, torch.Tensor))
    return LaunchPlan(rt.current_world(), compiled, grid, addresses, tensors)


def compile_plan(
    kernel: Any, grid: tuple[int, int, int], named: Mapping[str, Any], leading: int, **options: Any
) -> LaunchPlan | EmulatedLaunch:
    """Compile ``kernel`` for these arguments, load it, and return its plan, without launching anything.

    As :func:`first_launch`, for callers whose first call must itself go through the plan (an op whose launches
    are ordered with copies and events on other streams). Loading the module here, not at the first launch, also
    keeps a lazy module load from waiting behind kernels that spin on a peer. Under the CPU emulation nothing is
    compiled: the plan is an :class:`EmulatedLaunch`.
    """
    emulated_plan = _emulated_plan(kernel, grid, named, leading)
    if emulated_plan is not None:
        return emulated_plan
    ordered = {name: named[name] for name in kernel.arg_names}
    compiled = kernel.warmup(**ordered, grid=grid, **options)
    compiled._init_handles()
    fixed = tuple(ordered.values())[leading:]
    addresses = tuple(value.data_ptr() if isinstance(value, torch.Tensor) else value for value in fixed)
    tensors = tuple(value for value in fixed if isinstance(value, torch.Tensor))
    return LaunchPlan(rt.current_world(), compiled, grid, addresses, tensors)
