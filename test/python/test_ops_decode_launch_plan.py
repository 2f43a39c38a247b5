"""ops/common/launch.py without GPUs: a plan passes the launcher exactly what Triton's own launch path passes (the
grid, the stream, the kernel's handles, then every argument in the kernel's parameter order, constexprs included),
with the per-call leading arguments swapped in."""

from __future__ import annotations

import torch

from triton_dist.ops.common import launch as launch_plan


class FakeCompiled:
    function = "cu-function"
    packed_metadata = "packed"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def launch_metadata(self, grid, stream, *args):
        return ("metadata", grid, stream, len(args))

    def run(self, *args):
        self.calls.append(args)


class FakeKernel:
    arg_names = ["x_ptr", "out_ptr", "flags_ptr", "n", "BLOCK", "WORLD"]

    def __init__(self) -> None:
        self.compiled = FakeCompiled()
        self.first: dict | None = None

    def __getitem__(self, grid):
        def launch(**kwargs):
            self.first = {"grid": grid, **kwargs}
            return self.compiled

        return launch


def test_plan_replays_arguments_in_kernel_order(monkeypatch):
    world = object()
    monkeypatch.setattr(launch_plan.rt, "current_world", lambda: world)
    kernel = FakeKernel()
    flags = torch.zeros(8, dtype=torch.int32)
    named = {"WORLD": 2, "n": 4096, "x_ptr": "x0", "BLOCK": 1024, "out_ptr": "o0", "flags_ptr": flags, "extra": 1}
    plan = launch_plan.first_launch(kernel, (3, 1, 1), named, 2, num_warps=4)
    assert kernel.first == {
        "grid": (3, 1, 1),
        "x_ptr": "x0",
        "out_ptr": "o0",
        "flags_ptr": flags,
        "n": 4096,
        "BLOCK": 1024,
        "WORLD": 2,
        "num_warps": 4,
    }
    assert plan.world is world and plan.args == (flags.data_ptr(), 4096, 1024, 2), "tensors by address"
    assert len(plan.tensors) == 1 and plan.tensors[0] is flags, "and kept alive by the plan"

    monkeypatch.setattr(launch_plan, "current_raw_stream", lambda device_index: 1234 + device_index)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    enter = launch_plan.knobs.runtime.launch_enter_hook
    monkeypatch.setattr(enter, "calls", [])
    monkeypatch.setattr(launch_plan.knobs.runtime.launch_exit_hook, "calls", [])
    plan.launch(torch.device("cuda", 0), "x1", "o1")
    arguments = ("x1", "o1", flags.data_ptr(), 4096, 1024, 2)
    assert kernel.compiled.calls.pop() == (3, 1, 1, 1234, "cu-function", "packed", None, None, None, *arguments), (
        "no hook registered: no launch metadata, no hook calls"
    )

    def hook(metadata):
        return None

    enter.add(hook)  # e.g. a profiler, or the runtime refusing kernels loaded before init()
    plan.launch(torch.device("cuda", 0), "x1", "o1")
    hooks = (enter, launch_plan.knobs.runtime.launch_exit_hook)
    metadata = ("metadata", (3, 1, 1), 1234, 6)
    assert kernel.compiled.calls.pop() == (3, 1, 1, 1234, "cu-function", "packed", metadata, *hooks, *arguments)


def test_plan_launches_with_its_device_current(monkeypatch):
    """The launcher launches in the current device's context: a plan for another device switches to it for the
    launch (and asks for that device's stream), as Triton's own launch path does under ``torch.cuda.device``."""
    monkeypatch.setattr(launch_plan.rt, "current_world", lambda: None)
    kernel = FakeKernel()
    plan = launch_plan.first_launch(
        kernel, (1, 1, 1), {"x_ptr": 0, "out_ptr": 0, "flags_ptr": "f", "n": 8, "BLOCK": 8, "WORLD": 1}, 2
    )
    current = [0]
    switches = []

    class SwitchTo:
        def __init__(self, device):
            self.index = device.index

        def __enter__(self):
            switches.append(self.index)
            self.previous, current[0] = current[0], self.index

        def __exit__(self, *exception):
            current[0] = self.previous

    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "device", SwitchTo)
    monkeypatch.setattr(launch_plan, "current_raw_stream", lambda device_index: (device_index, current[0]))
    monkeypatch.setattr(launch_plan.knobs.runtime.launch_enter_hook, "calls", [])
    monkeypatch.setattr(launch_plan.knobs.runtime.launch_exit_hook, "calls", [])
    plan.launch(torch.device("cuda", 0), "x", "o")
    assert switches == [] and kernel.compiled.calls.pop()[3] == (0, 0), "its device is current: no switch"
    plan.launch(torch.device("cuda", 1), "x", "o")
    assert switches == [1] and current == [0], "switched for the launch only"
    assert kernel.compiled.calls.pop()[3] == (1, 1), "device 1's stream, asked for while device 1 was current"


def test_triton_launches_the_same_way():
    """The plan mirrors JITFunction.run's launch call; if a Triton upgrade changes it, this fails first."""
    import inspect

    from triton.runtime.jit import JITFunction

    source = " ".join(inspect.getsource(JITFunction.run).split())
    assert (
        "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata, "
        "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())" in source
    )


def test_triton_takes_addresses_and_the_raw_stream():
    """A plan passes its fixed tensors as addresses and asks torch for the raw stream; Triton's launchers take an
    integer pointer as it is, and its driver asks for the stream the same way. If a Triton upgrade changes either,
    this fails first."""
    import importlib
    import inspect

    from triton.backends.driver import GPUDriver

    assert "from torch._C import _cuda_getCurrentRawStream" in inspect.getsource(GPUDriver.__init__)
    for backend in ("nvidia", "amd"):
        source = " ".join(inspect.getsource(importlib.import_module(f"triton.backends.{backend}.driver")).split())
        assert "if (PyLong_Check(obj)) {{ ptr_info.dev_ptr = " in source, backend
        assert "PyLong_AsUnsignedLongLong(obj); return ptr_info; }}" in source, backend
