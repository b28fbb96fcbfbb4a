"""Sweep grids: ``--grid key=a,b,c`` and ``--grid key=start:stop:step`` axes, their cartesian
product, and the sweep file (TOML) that holds a whole repeatable study.

Ranges are computed in :class:`decimal.Decimal` from the literal text, so ``0.25:4:0.05``
gives exactly 76 points (0.25, 0.3, ..., 4.0) with no float drift, stop included.

>>> axis = parse_axis("cgroup.cpu_limit=0.25:4:0.05")
>>> len(axis.values), axis.values[:3], axis.values[-1]
(76, (0.25, 0.3, 0.35), 4.0)
>>> parse_axis("go.gomaxprocs=automaxprocs,go1.25,host,2").values
('automaxprocs', 'go1.25', 'host', 2)
>>> Grid([parse_axis("cgroup.cpu_limit=1:2:1"), parse_axis("go.gomaxprocs=host,2")]).points()
[{'cgroup.cpu_limit': 1, 'go.gomaxprocs': 'host'}, {'cgroup.cpu_limit': 1, 'go.gomaxprocs': 2}, \
{'cgroup.cpu_limit': 2, 'go.gomaxprocs': 'host'}, {'cgroup.cpu_limit': 2, 'go.gomaxprocs': 2}]
"""
from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from cfsim.scenario import Scenario, ScenarioError, parse_value
from cfsim.scenario.schema import SCHEMA

__all__ = ["GridError", "Axis", "Grid", "parse_axis", "parse_values", "Study", "load_study",
           "MAX_POINTS"]

#: a grid larger than this is almost certainly a typo (e.g. a step of 0.0001)
MAX_POINTS = 1_000_000

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


class GridError(ScenarioError):
    """A grid axis or a sweep file is invalid; the message names the key."""


@dataclass(frozen=True)
class Axis:
    """One sweep axis: a scenario key (``section.key``) and the values it takes, in order."""

    key: str
    values: tuple[Any, ...]

    def __len__(self) -> int:
        return len(self.values)


def _check_key(key: str) -> str:
    key = key.strip()
    if key.count(".") != 1:
        raise GridError(key or "<empty>", "a grid key must look like section.key "
                                          "(e.g. cgroup.cpu_limit)")
    section, name = key.split(".")
    if section not in SCHEMA:
        raise GridError(key, f"unknown section {section!r}; known sections: {', '.join(SCHEMA)}")
    if name not in SCHEMA[section]:
        raise GridError(key, f"unknown key; known keys of [{section}]: {', '.join(SCHEMA[section])}")
    return key


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets, braces or quotes."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _decimal_range(key: str, start_s: str, stop_s: str, step_s: str) -> tuple[Any, ...]:
    try:
        start, stop, step = Decimal(start_s), Decimal(stop_s), Decimal(step_s)
    except InvalidOperation:  # pragma: no cover - guarded by _NUMBER
        raise GridError(key, f"bad range {start_s}:{stop_s}:{step_s}") from None
    if step == 0:
        raise GridError(key, f"range step must not be 0 (got {start_s}:{stop_s}:{step_s})")
    if (stop - start) * step < 0:
        raise GridError(key, f"range {start_s}:{stop_s}:{step_s} is empty: the step goes away from stop")
    count = int((stop - start) / step) + 1  # int() truncates toward zero: stop included if hit
    if count > MAX_POINTS:
        raise GridError(key, f"range {start_s}:{stop_s}:{step_s} has {count} points (max {MAX_POINTS})")
    integral = all(re.fullmatch(r"[+-]?\d+", s) for s in (start_s, step_s))
    values = [start + i * step for i in range(count)]
    return tuple(int(v) if integral else float(v) for v in values)


def parse_values(key: str, text: str) -> tuple[Any, ...]:
    """The values of one axis from ``a,b,c`` (TOML literals or bare strings) or ``start:stop:step``."""
    text = text.strip()
    if not text:
        raise GridError(key, "no values given (use key=a,b,c or key=start:stop:step)")
    pieces = text.split(":")
    if len(pieces) == 3 and all(_NUMBER.match(p.strip()) for p in pieces):
        return _decimal_range(key, *(p.strip() for p in pieces))
    if len(pieces) == 3 and _NUMBER.match(pieces[0].strip()) and "," not in text:
        raise GridError(key, f"bad range {text!r}: start, stop and step must all be numbers")
    values = []
    for item in _split_top_level(text):
        if not item:
            raise GridError(key, f"empty value in {text!r}")
        values.append(parse_value(item, key))
    return tuple(values)


def parse_axis(spec: str) -> Axis:
    """One ``--grid`` argument: ``section.key=a,b,c`` or ``section.key=start:stop:step``."""
    if "=" not in spec:
        raise GridError(spec.strip() or "<empty>",
                        "a grid axis must look like section.key=a,b,c or section.key=start:stop:step")
    key, text = spec.split("=", 1)
    key = _check_key(key)
    return Axis(key, parse_values(key, text))


def _axis_from_toml(key: str, value: Any) -> Axis:
    key = _check_key(key)
    if isinstance(value, str):
        return Axis(key, parse_values(key, value))
    if isinstance(value, list):
        if not value:
            raise GridError(key, "no values given")
        return Axis(key, tuple(value))
    return Axis(key, (value,))


@dataclass(frozen=True)
class Grid:
    """The cartesian product of axes (first axis slowest)."""

    axes: tuple[Axis, ...] = ()

    def __init__(self, axes: Iterable[Axis] = ()):
        axes = tuple(axes)
        seen: set[str] = set()
        for axis in axes:
            if axis.key in seen:
                raise GridError(axis.key, "given twice as a grid axis; put all its values in one --grid")
            seen.add(axis.key)
            if not axis.values:
                raise GridError(axis.key, "no values given")
            if len(set(map(repr, axis.values))) != len(axis.values):
                raise GridError(axis.key, f"repeated values in {list(axis.values)!r}")
        size = 1
        for axis in axes:
            size *= len(axis)
        if size > MAX_POINTS:
            raise GridError(axes[0].key, f"the grid has {size} points (max {MAX_POINTS})")
        object.__setattr__(self, "axes", axes)

    @property
    def keys(self) -> list[str]:
        return [a.key for a in self.axes]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(a) for a in self.axes)

    def __len__(self) -> int:
        size = 1
        for axis in self.axes:
            size *= len(axis)
        return size

    def points(self) -> list[dict[str, Any]]:
        """Every grid point as ``{"section.key": value}``, in row-major (first axis slowest) order."""
        return [dict(zip(self.keys, combo)) for combo in itertools.product(*(a.values for a in self.axes))]

    def validate_against(self, base: Scenario) -> None:
        """Check each axis value alone on the base scenario (combinations are checked per point,
        and an invalid combination becomes an error row, not a failed sweep)."""
        for axis in self.axes:
            for value in axis.values:
                try:
                    base.with_overrides([(axis.key, value)])
                except ScenarioError as exc:
                    raise GridError(axis.key, f"value {value!r} is invalid: {exc}") from None

    def to_json(self) -> list[dict[str, Any]]:
        return [{"key": a.key, "values": list(a.values)} for a in self.axes]

    @classmethod
    def from_json(cls, items: Sequence[Mapping[str, Any]]) -> "Grid":
        return cls(Axis(item["key"], tuple(item["values"])) for item in items)


@dataclass
class Study:
    """Everything that defines a sweep: what a sweep file holds, and what the CLI builds."""

    scenario: str | None = None
    grid: Grid = field(default_factory=Grid)
    overrides: list[str] = field(default_factory=list)
    seeds: int = 1
    root_seed: int | None = None
    out: str | None = None
    workers: int | None = None
    dask: str | None = None


_STUDY_KEYS = {"scenario", "grid", "set", "seeds", "root_seed", "out", "workers", "dask"}


def _flatten(table: Mapping[str, Any]) -> dict[str, Any]:
    """``{"cgroup": {"cpu_limit": ...}}`` or ``{"cgroup.cpu_limit": ...}`` -> dotted keys."""
    out: dict[str, Any] = {}
    for name, value in table.items():
        if "." not in name and isinstance(value, Mapping):
            for key, inner in value.items():
                out[f"{name}.{key}"] = inner
        else:
            out[name] = value
    for key in out:
        _check_key(key)
    return out


def load_study(path: str | Path) -> Study:
    """Read a sweep file::

        scenario = "cpu-bound-threads"    # a built-in name or a path relative to this file
        seeds = 3
        root_seed = 20260101
        out = "out/limits"                # optional; relative to the current directory
        [set]                             # fixed overrides for every point
        "run.duration_s" = 60
        [grid]                            # one axis per key: a list, or the --grid text
        "cgroup.cpu_limit" = "0.25:4:0.05"
        "go.gomaxprocs" = ["automaxprocs", "go1.25", "host", 2]
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"sweep file not found: {path}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise GridError(str(path), f"not valid TOML: {exc}") from None
    unknown = set(raw) - _STUDY_KEYS
    if unknown:
        raise GridError(str(path), f"unknown sweep-file keys {sorted(unknown)}; known: {sorted(_STUDY_KEYS)}")
    study = Study()
    scenario = raw.get("scenario")
    if scenario is not None:
        if not isinstance(scenario, str):
            raise GridError("scenario", "must be a built-in name or a path")
        rel = path.parent / scenario
        study.scenario = str(rel) if (scenario.endswith(".toml") and rel.exists()) else scenario
    grid = raw.get("grid", {})
    if not isinstance(grid, Mapping):
        raise GridError("grid", "must be a table of section.key = values")
    study.grid = Grid(_axis_from_toml(k, v) for k, v in _flatten(grid).items())
    fixed = raw.get("set", {})
    if not isinstance(fixed, Mapping):
        raise GridError("set", "must be a table of section.key = value")
    study.overrides = [f"{k}={_toml_literal(v)}" for k, v in _flatten(fixed).items()]
    for name, least in (("seeds", 1), ("root_seed", 0), ("workers", 0)):   # workers 0: in this process
        if name in raw:
            value = raw[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise GridError(name, f"must be an integer >= {least} (got {value!r})")
            setattr(study, name, value)
    for name in ("out", "dask"):
        if name in raw:
            if not isinstance(raw[name], str):
                raise GridError(name, f"must be a string (got {raw[name]!r})")
            setattr(study, name, raw[name])
    return study


def _toml_literal(value: Any) -> str:
    import tomli_w

    return tomli_w.dumps({"v": value})[4:].strip()
