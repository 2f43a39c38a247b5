"""Configuration dataclasses read from disk: every field checked against the type it declares."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

MAX_FIELD_INT = 1 << 20
"""The largest integer a configuration field may hold (tile sizes, counts); anything larger is not a config."""


def checked_fields(cls: type, values: Any) -> dict[str, Any]:
    """``values`` as keyword arguments of the dataclass ``cls``, each field of the type it declares.

    Raises ValueError naming the field for an unknown field, a bool given as anything but true/false, an integer
    that is not one (1.0, NaN, a string) or lies outside [0, 2**20], and a string field that is not a string.
    Nested dataclass fields are left to the caller.
    """
    if not isinstance(values, dict):
        raise ValueError(f"{cls.__name__}: expected an object of fields, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - fields
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown fields {sorted(map(str, unknown))}")
    for name, value in values.items():
        kind = hints.get(name)
        if kind is bool and not isinstance(value, bool):
            raise ValueError(f"{cls.__name__}.{name} must be true or false, got {value!r}")
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_FIELD_INT:
                raise ValueError(f"{cls.__name__}.{name} must be an integer in [0, {MAX_FIELD_INT}], got {value!r}")
        if kind is float and (
            not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value)
        ):
            raise ValueError(f"{cls.__name__}.{name} must be a finite number, got {value!r}")
        if kind is str and not isinstance(value, str):
            raise ValueError(f"{cls.__name__}.{name} must be a string, got {value!r}")
    return dict(values)
