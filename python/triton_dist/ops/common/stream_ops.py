"""Enqueue copies by address and fork/join streams with as few host calls as the driver allows.

The copy-engine producers issue one copy per chunk and peer plus a 4-byte flag copy after each: through
``Tensor.copy_`` every one costs a tensor view and torch's dispatch (10-20 µs of host time), more than the GPU
spends on a small chunk. Here a plan computes every address once and each call issues the bare driver calls
(``cuMemcpyDtoDAsync``, ``cuEventRecord``, ``cuStreamWaitEvent`` from cuda-bindings), a microsecond or two each.
Where cuda-bindings is missing (or on ROCm) the same calls go through torch, slower but equivalent.

All of it is stream-ordered and is recorded as graph nodes under CUDA-graph capture. With the driver, 32-bit stream
memory operations too (``cuStreamWriteValue32`` / ``cuStreamWaitValue32``): a flag written or awaited by the stream
itself, no kernel and no copy; their values are the host's, so they serve eager calls (a graph would replay the
captured value).
"""

from __future__ import annotations

from typing import Any

import torch


def _driver() -> Any:
    if torch.version.hip is not None:
        return None
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    return driver


class StreamOps:
    """Copies by address and event fork/join on raw stream handles (``torch.cuda.Stream.cuda_stream``)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._driver = _driver()
        if self._driver is not None:
            self._copy = self._driver.cuMemcpyDtoDAsync
            self._record = self._driver.cuEventRecord
            self._wait = self._driver.cuStreamWaitEvent
            self._success = self._driver.CUresult.CUDA_SUCCESS
            self._write_value = self._driver.cuStreamWriteValue32
            self._wait_value = self._driver.cuStreamWaitValue32
            self._query = self._driver.cuStreamQuery
            self._not_ready = self._driver.CUresult.CUDA_ERROR_NOT_READY
            self._events: dict[str, Any] = {}
        else:
            self._torch_events: dict[str, torch.cuda.Event] = {}

    @property
    def uses_driver(self) -> bool:
        """Whether calls go straight to the CUDA driver (else through torch)."""
        return self._driver is not None

    def _check(self, result: Any, what: str) -> None:
        error = result[0] if isinstance(result, tuple) else result
        if error != self._success:
            _, text = self._driver.cuGetErrorString(error)
            raise RuntimeError(f"{what} failed: {error} ({text.decode() if isinstance(text, bytes) else text})")

    def copy(self, destination: int, source: int, nbytes: int, stream: int) -> None:
        """Enqueue ``nbytes`` from device address ``source`` to ``destination`` (a peer's, through its mapping)."""
        if self._driver is not None:
            result = self._copy(destination, source, nbytes, stream)
            if result[0] != self._success:
                self._check(result, "cuMemcpyDtoDAsync")
            return
        src = _bytes_at(source, nbytes, self.device)
        dst = _bytes_at(destination, nbytes, self.device)
        with torch.cuda.stream(torch.cuda.ExternalStream(stream, device=self.device)):
            dst.copy_(src, non_blocking=True)

    def write_value(self, address: int, value: int, stream: int) -> None:
        """Enqueue a 4-byte write of ``value`` to device address ``address`` (a peer's, through its mapping), after a
        memory fence that makes ``stream``'s earlier writes (its copies) visible first. Needs the driver."""
        result = self._write_value(stream, address, value, 0)  # 0: CU_STREAM_WRITE_VALUE_DEFAULT, fenced
        if result[0] != self._success:
            self._check(result, "cuStreamWriteValue32")

    def wait_value(self, address: int, value: int, stream: int) -> None:
        """Work enqueued on ``stream`` after this waits until the int32 at device address ``address`` is at least
        ``value`` (cyclic: ``(int32)(*address - value) >= 0``). Needs the driver."""
        result = self._wait_value(stream, address, value, 0)  # 0: CU_STREAM_WAIT_VALUE_GEQ
        if result[0] != self._success:
            self._check(result, "cuStreamWaitValue32")

    def idle(self, stream: int) -> bool:
        """Whether ``stream`` (a raw handle) has finished all its work: one ``cuStreamQuery`` (through torch without
        the driver). Raises RuntimeError on any other answer than done / not ready."""
        if self._driver is None:
            return torch.cuda.ExternalStream(stream, device=self.device).query()
        result = self._query(stream)
        error = result[0] if isinstance(result, tuple) else result
        if error == self._success:
            return True
        if error == self._not_ready:
            return False
        self._check(result, "cuStreamQuery")
        return False

    def _event(self, name: str) -> Any:
        found = self._events.get(name)
        if found is None:
            with torch.cuda.device(self.device):  # events belong to the current context
                result = self._driver.cuEventCreate(self._driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            self._check(result, "cuEventCreate")
            found = self._events[name] = result[1]
        return found

    def order(self, name: str, first: int, then: int) -> None:
        """Work enqueued on stream ``then`` from now on waits for what stream ``first`` holds now.

        ``name`` picks a reusable event (one per fork or join point of an op): a wait enqueued after a record
        waits for that record, whatever is recorded on the event later.
        """
        if self._driver is not None:
            event = self._events.get(name)
            if event is None:
                event = self._event(name)
            result = self._record(event, first)
            if result[0] != self._success:
                self._check(result, "cuEventRecord")
            result = self._wait(then, event, 0)
            if result[0] != self._success:
                self._check(result, "cuStreamWaitEvent")
            return
        event = self._torch_events.get(name)
        if event is None:
            event = self._torch_events[name] = torch.cuda.Event()
        event.record(torch.cuda.ExternalStream(first, device=self.device))
        torch.cuda.ExternalStream(then, device=self.device).wait_event(event)


def _bytes_at(address: int, nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 tensor over ``nbytes`` of device memory at ``address`` (the torch fallback of a copy)."""

    class _Interface:
        __cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 3,
        }

    return torch.as_tensor(_Interface(), device=device)


_ops: dict[int, StreamOps] = {}


def stream_ops(device: torch.device) -> StreamOps:
    """The :class:`StreamOps` of ``device`` (one per device, kept for the process)."""
    found = _ops.get(device.index)
    if found is None:
        found = _ops[device.index] = StreamOps(device)
    return found
