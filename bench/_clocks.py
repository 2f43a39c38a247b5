"""The GPU's SM clock, power draw, temperature and clock-limit reasons while a timing pass runs, read through NVML.

A ``ClockSampler`` wraps one timing pass (``measure``): a thread reads the GPU every ``interval_s`` (10 ms) from
the pass's start to its end, plus one reading at each end, and the pass gets a ``PassClocks`` (mean and min SM MHz,
mean and max W, max °C, the union of NVML's clock-limit reasons, the sample count). ``combine`` folds the ranks'
passes into one (the slowest GPU's clocks, the hungriest GPU's power). Without NVML (``pynvml`` from nvidia-ml-py
missing, no driver, an NVML error) the sampler measures nothing and says why in ``note``; a timing pass never fails
because of it.

NVML's power reading is the driver's own running average (about 1 s on recent GPUs), so a short pass's watts lag;
the SM clock and the reasons are instantaneous.
"""

from __future__ import annotations

import math
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

REASONS = {
    0x1: "idle",
    0x2: "app-clocks",
    0x4: "sw-power",
    0x8: "hw-slowdown",
    0x10: "sync-boost",
    0x20: "sw-thermal",
    0x40: "hw-thermal",
    0x80: "power-brake",
    0x100: "display",
}
"""NVML's clocks-event (throttle) reason bits, by the short names the results use."""
SLOWDOWNS = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
"""The reasons that lower the clock under load: power cap, hardware slowdown, thermal, power brake."""
MEAN_DIFFERS = 0.01
"""Two passes' clocks differ where their mean SM clocks differ by more than this share of the higher one."""
MIN_DIFFERS = 0.03
"""... or their lowest SM clocks by more than this share (one 10 ms sample can dip on its own)."""


def reason_names(bits: int) -> list[str]:
    """The names of NVML's clock-limit reason ``bits`` (unknown bits as hex)."""
    names = [name for bit, name in REASONS.items() if bits & bit]
    rest = bits & ~sum(REASONS)
    return names + ([hex(rest)] if rest else [])


@dataclass(frozen=True)
class Sample:
    """One reading of the GPU."""

    mhz: float  # SM clock
    watts: float
    celsius: float
    reasons: int  # NVML clock-limit reason bits


class Reader(Protocol):
    """Something that reads the GPU now (``NvmlReader``, or a fake in tests)."""

    def read(self) -> Sample:
        """One reading; raises on an NVML error."""
        ...


class NvmlReader:
    """Reads one GPU through an NVML module (``pynvml``, or an object with its functions)."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml, self.handle = nvml, handle
        events = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons: Callable[[Any], int] = events or nvml.nvmlDeviceGetCurrentClocksThrottleReasons

    def read(self) -> Sample:
        """SM MHz, W (NVML's milliwatts), GPU °C and the clock-limit reasons of the GPU now; raises NVML's error."""
        nvml, handle = self.nvml, self.handle
        return Sample(
            mhz=float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            watts=nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            celsius=float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            reasons=int(self._reasons(handle)),
        )


def open_nvml(index: int, uuid: str | None = None, *, nvml: Any = None) -> tuple[NvmlReader | None, str]:
    """An ``NvmlReader`` of the GPU with ``uuid`` (CUDA's device UUID; NVML's indices can differ from CUDA's under
    ``CUDA_VISIBLE_DEVICES``), else (no UUID, or none matched) of NVML's GPU ``index``; one test reading is taken.
    Returns (reader, "") or (reader, how a UUID that matched no GPU was replaced by the index), or (None, why) where
    ``pynvml`` is missing or NVML fails: a benchmark then runs without clocks and says why. ``nvml``: the module to
    use (default: ``import pynvml``)."""
    note = ""
    try:
        if nvml is None:
            import pynvml as nvml  # type: ignore[import-not-found,no-redef]  # nvidia-ml-py, on the GPU image
        nvml.nvmlInit()
        handle = None
        if uuid:
            text = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(text)
            except Exception as error:  # a UUID NVML spells differently: the index, said so
                note = f"NVML GPU {index} by index (UUID {text}: {type(error).__name__}: {error})"[:200]
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        reader = NvmlReader(nvml, handle)
        reader.read()
    except Exception as error:  # any NVML or import failure: no clocks, and why
        return None, f"no GPU clocks: {type(error).__name__}: {error}"[:200]
    return reader, note


SMI_FIELDS = "clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"
"""What ``SmiReader`` asks nvidia-smi for: SM MHz, W, °C, the clock-limit reason bits (hex)."""


def _run_smi(args: list[str]) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True, timeout=10).stdout


class SmiReader:
    """Reads one GPU by running ``nvidia-smi --query-gpu`` (tens of ms a reading): the fallback where ``pynvml``
    is missing. ``slow``: the sampler takes no extra reading at a pass's end (it would lengthen the pass)."""

    slow = True

    def __init__(self, device: str, run: Callable[[list[str]], str] = _run_smi) -> None:
        self.args = ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits", "-i", device]
        self.run = run

    def read(self) -> Sample:
        """One reading; raises ValueError for output it cannot parse, and nvidia-smi's own failures."""
        text = self.run(self.args).strip()
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 4:
            raise ValueError(f"nvidia-smi gave {text!r}; expected 4 fields ({SMI_FIELDS})")
        try:
            return Sample(float(parts[0]), float(parts[1]), float(parts[2]), int(parts[3], 16))
        except ValueError:
            raise ValueError(f"nvidia-smi gave {text!r}; expected numbers ({SMI_FIELDS})") from None


def open_clocks(
    index: int, uuid: str | None = None, *, nvml: Any = None, run: Callable[[list[str]], str] = _run_smi
) -> tuple[Reader | None, str]:
    """A reader of this rank's GPU: NVML (``open_nvml``), else nvidia-smi (``SmiReader``, by UUID or index), else
    none. Returns (reader, note): the note says which fallback was taken and why ("" for NVML by UUID), or why
    there are no clocks."""
    reader, why = open_nvml(index, uuid, nvml=nvml)
    if reader is not None:
        return reader, why
    device = (uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}") if uuid else str(index)
    smi = SmiReader(device, run)
    try:
        smi.read()
    except Exception as error:  # no nvidia-smi either
        return None, f"{why}; nvidia-smi: {type(error).__name__}: {error}"[:300]
    return smi, f"clocks from nvidia-smi (a reading every ~50 ms, not 10), as NVML failed: {why}"[:300]


@dataclass(frozen=True)
class PassClocks:
    """What the GPU ran at during one timing pass."""

    mhz_mean: float
    mhz_min: float
    watts_mean: float
    watts_max: float
    celsius_max: float
    reasons: int  # union over the samples
    samples: int

    FIELDS = ("mhz_mean", "mhz_min", "watts_mean", "watts_max", "celsius_max", "reasons", "samples")

    def values(self) -> list[float]:
        """The fields as floats, in ``FIELDS`` order (to gather over ranks in one tensor)."""
        return [float(getattr(self, name)) for name in self.FIELDS]

    @classmethod
    def from_values(cls, values: Sequence[float]) -> PassClocks | None:
        """The inverse of ``values``; None where they are NaN (a rank without clocks). Raises ValueError for a
        wrong count."""
        if len(values) != len(cls.FIELDS):
            raise ValueError(f"PassClocks.from_values: {len(values)} values; expected {len(cls.FIELDS)}")
        if any(math.isnan(v) for v in values):
            return None
        v = [float(x) for x in values]
        return cls(v[0], v[1], v[2], v[3], v[4], int(v[5]), int(v[6]))

    def to_json(self) -> dict[str, object]:
        """The fields, rounded, with the reasons by name (``throttle``)."""
        return {
            "mhz_mean": round(self.mhz_mean, 1),
            "mhz_min": round(self.mhz_min, 1),
            "watts_mean": round(self.watts_mean, 1),
            "watts_max": round(self.watts_max, 1),
            "celsius_max": round(self.celsius_max, 1),
            "throttle": reason_names(self.reasons),
            "samples": self.samples,
        }

    @classmethod
    def from_json(cls, data: object) -> PassClocks | None:
        """The inverse of ``to_json`` (None for None, a pass without clocks). Raises ValueError for a malformed
        dict or an unknown reason name."""
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ValueError(f"PassClocks.from_json: expected a dict or None, got {type(data).__name__}")
        bits = {name: bit for bit, name in REASONS.items()}
        reasons = 0
        for name in data.get("throttle", []):
            if name not in bits and not str(name).startswith("0x"):
                raise ValueError(f"PassClocks.from_json: unknown clock-limit reason {name!r}")
            reasons |= bits[name] if name in bits else int(name, 16)
        try:
            return cls(
                float(data["mhz_mean"]), float(data["mhz_min"]), float(data["watts_mean"]), float(data["watts_max"]),
                float(data["celsius_max"]), reasons, int(data["samples"]),
            )  # fmt: skip
        except KeyError as error:
            raise ValueError(f"PassClocks.from_json: missing field {error}") from None


def summarize(samples: Sequence[Sample]) -> PassClocks:
    """One pass's ``PassClocks`` from its readings. Raises ValueError where there are none."""
    if not samples:
        raise ValueError("summarize: no clock samples")
    mhz = [s.mhz for s in samples]
    watts = [s.watts for s in samples]
    reasons = 0
    for s in samples:
        reasons |= s.reasons
    return PassClocks(
        sum(mhz) / len(mhz), min(mhz), sum(watts) / len(watts), max(watts), max(s.celsius for s in samples),
        reasons, len(samples),
    )  # fmt: skip


def combine(passes: Sequence[PassClocks | None]) -> PassClocks | None:
    """One pass over the ranks: the lowest mean and min SM clock (the slowest GPU sets a collective op's time), the
    highest power and temperature, the union of the reasons, the fewest samples. None where any rank has none."""
    if not passes or any(p is None for p in passes):
        return None
    ps = [p for p in passes if p is not None]
    reasons = 0
    for p in ps:
        reasons |= p.reasons
    return PassClocks(
        min(p.mhz_mean for p in ps), min(p.mhz_min for p in ps), max(p.watts_mean for p in ps),
        max(p.watts_max for p in ps), max(p.celsius_max for p in ps), reasons, min(p.samples for p in ps),
    )  # fmt: skip


def clocks_differ(first: PassClocks, second: PassClocks) -> bool:
    """Whether two passes ran at different clocks: mean SM clocks apart by more than ``MEAN_DIFFERS``, lowest SM
    clocks by more than ``MIN_DIFFERS``, or a different set of slowdown reasons (``SLOWDOWNS``)."""
    if abs(first.mhz_mean - second.mhz_mean) > MEAN_DIFFERS * max(first.mhz_mean, second.mhz_mean):
        return True
    if abs(first.mhz_min - second.mhz_min) > MIN_DIFFERS * max(first.mhz_min, second.mhz_min):
        return True
    return (first.reasons & SLOWDOWNS) != (second.reasons & SLOWDOWNS)


def compare_line(first: PassClocks | None, second: PassClocks | None) -> str:
    """``SM 1980 / 1755 MHz (min 1980 / 1410), 610 / 690 W, 61 / 66 °C: clocks differed (2nd: sw-power)``; or
    ``clocks same``; or ``clocks not sampled`` where a pass has none."""
    if first is None or second is None:
        return "clocks not sampled"
    verdict = "clocks differed" if clocks_differ(first, second) else "clocks same"
    slow = [
        f"{label}: {', '.join(reason_names(p.reasons & SLOWDOWNS))}"
        for label, p in (("1st", first), ("2nd", second))
        if p.reasons & SLOWDOWNS
    ]
    return (
        f"SM {first.mhz_mean:.0f} / {second.mhz_mean:.0f} MHz (min {first.mhz_min:.0f} / {second.mhz_min:.0f}), "
        f"{first.watts_mean:.0f} / {second.watts_mean:.0f} W, {first.celsius_max:.0f} / {second.celsius_max:.0f} °C: "
        f"{verdict}" + (f" ({'; '.join(slow)})" if slow else "")
    )


class ClockSampler:
    """Samples a ``Reader`` from a thread while a timing pass runs (``measure``); without a reader it measures
    nothing (``note`` says why)."""

    def __init__(self, reader: Reader | None, *, interval_s: float = 0.01, note: str = "") -> None:
        if not interval_s > 0:
            raise ValueError(f"ClockSampler: interval_s={interval_s}; it must be positive")
        self.reader, self.interval_s, self.note = reader, interval_s, note

    def measure(self, fn: Callable[[], T]) -> tuple[T, PassClocks | None]:
        """``fn()``'s result and the clocks while it ran (None without a reader, or where a reading failed: then
        the reader is dropped and ``note`` names the error). ``fn``'s own exceptions propagate."""
        reader = self.reader
        if reader is None:
            return fn(), None
        samples: list[Sample] = []
        failures: list[BaseException] = []
        stop = threading.Event()

        def loop() -> None:
            while True:
                try:
                    samples.append(reader.read())
                except Exception as error:  # an NVML error: this pass has no clocks
                    failures.append(error)
                    return
                if stop.wait(self.interval_s):
                    return

        slow = bool(getattr(reader, "slow", False))
        thread = threading.Thread(target=loop, name="clock-sampler", daemon=True)
        thread.start()  # its first reading is the pass's start
        try:
            result = fn()
        finally:
            stop.set()
            # a slow reader's reading in flight is not waited for unless the pass has none yet (it ends by itself)
            thread.join(timeout=0.0 if slow and samples else None)
        taken = list(samples)
        if not failures and not slow:
            try:
                taken.append(reader.read())  # the pass's end
            except Exception as error:
                failures.append(error)
        if failures:
            self.reader = None
            self.note = f"no GPU clocks after a failed reading: {type(failures[0]).__name__}: {failures[0]}"[:200]
            return result, None
        return result, summarize(taken)
