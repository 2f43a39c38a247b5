"""ops/launch_plan.py without GPUs: a plan passes the launcher exactly what Triton's own launch path passes (the
grid, the stream, the kernel's handles, then every argument in the kernel's parameter order, constexprs included),
with the per-call leading arguments swapped in."""

from __future__ import annotations

import torch

from triton_dist.ops import launch_plan


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
    named = {"WORLD": 2, "n": 4096, "x_ptr": "x0", "BLOCK": 1024, "out_ptr": "o0", "flags_ptr": "f", "extra": 1}
    plan = launch_plan.first_launch(kernel, (3, 1, 1), named, 2, num_warps=4)
    assert kernel.first == {
        "grid": (3, 1, 1),
        "x_ptr": "x0",
        "out_ptr": "o0",
        "flags_ptr": "f",
        "n": 4096,
        "BLOCK": 1024,
        "WORLD": 2,
        "num_warps": 4,
    }
    assert plan.world is world and plan.args == ("f", 4096, 1024, 2)

    class Stream:
        cuda_stream = 1234

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    enter = launch_plan.knobs.runtime.launch_enter_hook
    monkeypatch.setattr(enter, "calls", [])
    monkeypatch.setattr(launch_plan.knobs.runtime.launch_exit_hook, "calls", [])
    plan.launch(torch.device("cuda", 0), "x1", "o1")
    arguments = ("x1", "o1", "f", 4096, 1024, 2)
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


def test_triton_launches_the_same_way():
    """The plan mirrors JITFunction.run's launch call; if a Triton upgrade changes it, this fails first."""
    import inspect

    from triton.runtime.jit import JITFunction

    source = " ".join(inspect.getsource(JITFunction.run).split())
    assert (
        "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata, "
        "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())" in source
    )
