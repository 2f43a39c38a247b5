"""Launching a distributed kernel in Triton's interpreter: every program at once, one thread each.

Triton's interpreter runs a launch in ``GridExecutor.__call__``: it copies the arguments to the host (CPU tensors,
such as the CPU heap's, are used in place), patches ``triton.language`` and calls the kernel once per grid index,
one program after the other. A distributed kernel cannot run that way: a program's ``dl.wait`` may wait for
another program of the launch, on this rank or another. :class:`EmulatedGridExecutor` replaces the interpreter's
``GridExecutor`` (``install``); for a kernel that calls triton_dist primitives (:func:`uses_primitives`) it

- checks that ``triton_dist.init(device="cpu")`` made a CPU world, and describes the launch (``state.Launch``),
  with the stale-read mode's state when ``$TRITON_DIST_EMULATE_VISIBILITY`` asks for it (``visibility``);
- swaps Triton's interpreter builder to ``builder.EmulationBuilder`` for the launch;
- lets Triton's own loop run, with the kernel wrapped so that each call starts the program on a thread of its own
  (grid index and program set for that thread) and the call for the last grid index waits for all of them;
- raises the first error a program raised (the waits of the others stop), unwrapped from Triton's
  ``InterpreterError`` when it is the emulation's (``EmulationError``, ``WaitTimeoutError``) or a primitive's.

Kernels that call no primitive run exactly as Triton runs them.
"""

from __future__ import annotations

import inspect
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import triton.runtime.interpreter as interpreter
from triton.runtime.errors import InterpreterError

from triton_dist.compiler.helper_errors import PRIMITIVE_ERROR
from triton_dist.compiler.watchdog import wait_timeout_ns
from triton_dist.language._primitive import PRIMITIVE_ATTRIBUTE
from triton_dist.runtime.context.wait_timeout import WaitTimeoutError
from triton_dist.runtime.emulation import builder as emulation_builder
from triton_dist.runtime.emulation import one_sided, visibility
from triton_dist.runtime.emulation.state import EmulationError, Launch, Program, ProgramAborted, set_current_program
from triton_dist.runtime.world import lifecycle

_LANGUAGE_MODULES = ("triton_dist", "triton_dist.language")


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _code_names(constant)
    return names


def _refers_to_primitives(value: Any, names: set[str], seen: set[int]) -> bool:
    if getattr(value, PRIMITIVE_ATTRIBUTE, None):
        return True
    if isinstance(value, types.ModuleType):
        if value.__name__ in _LANGUAGE_MODULES or value.__name__.startswith("triton_dist.language."):
            return True
        return any(_refers_to_primitives(value.__dict__.get(name), set(), seen) for name in names)
    inner = getattr(value, "fn", None)  # a @triton.jit helper (InterpretedFunction / JITFunction)
    if callable(inner) and hasattr(inner, "__code__"):
        return uses_primitives(inner, seen)
    return False


def uses_primitives(fn: Callable[..., Any], seen: set[int] | None = None) -> bool:
    """Whether ``fn`` (a kernel's Python function) calls a triton_dist primitive, directly or through the
    ``@triton.jit`` helpers it calls: a global it names is a primitive, ``triton_dist.language`` (or its package),
    or a helper that does; a module it names counts through the attributes the code names."""
    seen = set() if seen is None else seen
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen:
        return False
    seen.add(id(code))
    names = _code_names(code)
    namespace = getattr(fn, "__globals__", {})
    return any(_refers_to_primitives(namespace[name], names, seen) for name in names if name in namespace)


def jit_helpers(fn: Callable[..., Any]) -> list[Any]:
    """The ``@triton.jit`` functions ``fn`` may call, transitively: the globals it names, and the attributes it names
    of the modules it names (``tl.cdiv``)."""
    found: dict[int, Any] = {}
    pending: list[Callable[..., Any]] = [fn]
    seen: set[int] = set()
    while pending:
        function = pending.pop()
        code = getattr(function, "__code__", None)
        if code is None or id(code) in seen:
            continue
        seen.add(id(code))
        names = _code_names(code)
        namespace = getattr(function, "__globals__", {})
        values = [namespace[name] for name in names if name in namespace]
        for module in [value for value in values if isinstance(value, types.ModuleType)]:
            values += [module.__dict__[name] for name in names if name in module.__dict__]
        for value in values:
            inner = getattr(value, "fn", None)
            if callable(inner) and hasattr(inner, "__code__") and id(value) not in found:
                found[id(value)] = value
                pending.append(inner)
    return list(found.values())


def start_launch(kernel: str, grid: tuple[int, int, int]) -> Launch:
    """The launch of ``kernel`` on this rank; ``EmulationError`` unless a CPU world is initialized."""
    world = lifecycle._world
    if world is None:
        raise EmulationError(
            f"kernel {kernel!r} calls triton_dist primitives and runs in Triton's interpreter (TRITON_INTERPRET=1), "
            "which emulates them on a CPU heap: call torch.distributed.init_process_group('gloo') and "
            "triton_dist.init(device='cpu') before launching it (docs/getting-started.md, 'Develop and test without "
            "GPUs')"
        )
    if world.device.type != "cpu":
        raise EmulationError(
            f"kernel {kernel!r} runs in Triton's interpreter (TRITON_INTERPRET=1), which emulates triton_dist on a "
            f"CPU heap, but triton_dist was initialized on {world.device}: use triton_dist.init(device='cpu'), or "
            "run without TRITON_INTERPRET"
        )
    heap = world.heap
    launch = Launch(
        kernel=kernel,
        rank=heap.rank,
        world_size=heap.world_size,
        heap_size=heap.heap_size,
        bases=np.array(heap.bases, dtype=np.uint64),
        grid=grid,
        timeout_ns=wait_timeout_ns(),
        local_rank=world.nodes.local_rank_of(heap.rank),
        local_num_ranks=world.nodes.local_world_size_of(heap.rank),
        remote_bases=one_sided.remote_bases(world),
    )
    if visibility.mode() == "happens-before":
        global _visibility_launches
        _visibility_launches += 1  # every rank launches the same kernels in the same order: the numbers agree
        launch.visibility = visibility.Visibility(
            launch, visibility.logs_for(launch, world.group), _visibility_launches
        )
    return launch


_visibility_launches = 0


def _spawner(kernel: Callable[..., Any], name: str, state: dict[str, Any]) -> Callable[..., None]:
    """What Triton's loop calls per grid index: start that program on a thread; at the last index, join them all."""
    threads: list[threading.Thread] = []

    def run(launch: Launch, index: tuple[int, int, int], kwargs: dict[str, Any]) -> None:
        interpreter.interpreter_builder.grid_idx = index  # EmulationBuilder's grid_idx: this thread's
        set_current_program(Program(launch, index))
        try:
            kernel(**kwargs)
        except BaseException as error:  # noqa: BLE001 (handed to the launching thread)
            launch.fail(error)
        finally:
            set_current_program(None)

    def start(kwargs: dict[str, Any]) -> None:
        builder = interpreter.interpreter_builder
        index = tuple(builder.grid_idx)
        grid = tuple(builder.grid_dim)
        if "launch" not in state:
            state["launch"] = start_launch(name, grid)  # type: ignore[arg-type]
        launch: Launch = state["launch"]
        thread = threading.Thread(
            target=run, args=(launch, index, kwargs), name=f"{name}[{','.join(map(str, index))}]", daemon=True
        )
        threads.append(thread)
        thread.start()
        if index == tuple(dim - 1 for dim in grid):
            for thread in threads:
                thread.join()
            error = launch.first_error()
            if error is not None:
                raise error

    def spawn(**kwargs: Any) -> None:
        start(kwargs)  # only a closure variable: the function is rebuilt over the kernel's globals below

    # Triton's executor reads the kernel's globals (to patch the triton.language it sees) and its signature (to
    # bind the arguments): the spawner has the kernel's.
    rebuilt = types.FunctionType(spawn.__code__, kernel.__globals__, name, None, spawn.__closure__)
    rebuilt.__signature__ = inspect.signature(kernel)  # type: ignore[attr-defined]
    return rebuilt


def _ours(error: BaseException | None) -> bool:
    return isinstance(error, EmulationError | WaitTimeoutError) or bool(getattr(error, PRIMITIVE_ERROR, None))


class EmulatedGridExecutor(interpreter.GridExecutor):
    """Triton's ``GridExecutor`` that runs the programs of a distributed kernel concurrently (see the module)."""

    def __call__(self, *args_dev: Any, **kwargs: Any) -> None:
        kernel: Callable[..., Any] = self.fn  # type: ignore[has-type]  # set by Triton's untyped __init__
        if not uses_primitives(kernel):
            return super().__call__(*args_dev, **kwargs)
        name = getattr(kernel, "__name__", "<kernel>")
        if lifecycle._world is None or lifecycle._world.device.type != "cpu":
            start_launch(name, (1, 1, 1))  # raises the error that says what to do
        # Triton rewrites a @triton.jit helper the first time it is called, adding names to its module's globals;
        # another program iterating those globals (Triton's _patch_lang, at every helper call) would fail with
        # "dictionary changed size during iteration". Rewriting every helper now, before the programs start,
        # leaves nothing to add while they run.
        for helper in jit_helpers(kernel):
            rewrite = getattr(helper, "rewrite", None)
            if callable(rewrite):
                rewrite()
        builder = interpreter.interpreter_builder
        builder_class = builder.__class__
        state: dict[str, Any] = {}
        self.fn = _spawner(kernel, name, state)
        builder.__class__ = emulation_builder.EmulationBuilder
        try:
            super().__call__(*args_dev, **kwargs)
        except InterpreterError as error:
            cause = error.__cause__
            if cause is not None and (_ours(cause) or isinstance(cause, ProgramAborted)):
                raise cause.with_traceback(cause.__traceback__) from None
            raise
        finally:
            builder.__class__ = builder_class
            self.fn = kernel
        return None


_original: type | None = None


def install() -> None:
    """Make Triton's interpreter launch kernels through :class:`EmulatedGridExecutor` (idempotent)."""
    global _original
    if interpreter.GridExecutor is not EmulatedGridExecutor:
        _original = interpreter.GridExecutor
        interpreter.GridExecutor = EmulatedGridExecutor  # type: ignore[misc]


def uninstall() -> None:
    """Give Triton's interpreter its own ``GridExecutor`` back."""
    global _original
    if _original is not None:
        interpreter.GridExecutor = _original  # type: ignore[misc]
        _original = None
