"""Scenarios: a TOML file (or a built-in name) describing host, cgroup, Go runtime, workload and run.

>>> from cfsim.scenario import load_scenario
>>> sc = load_scenario("cpu-bound-threads", overrides=["cgroup.cpu_limit=1.5"])
>>> sc["cgroup.cpu_limit"], sc["cgroup.period_us"]
(1.5, 100000)
>>> load_scenario("cpu-bound-threads", overrides=["cgroup.period_us=500"])
Traceback (most recent call last):
...
cfsim.scenario.schema.ScenarioError: cgroup.period_us: must be in [1000, 1000000] (got 500)
"""
from __future__ import annotations

import copy
import json
import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

import tomli_w

from cfsim.kernel import limits
from cfsim.scenario.schema import RETIRED, SCHEMA, Key, ScenarioError

__all__ = ["Scenario", "ScenarioError", "load_scenario", "builtin_names", "parse_value", "is_null"]


def builtin_names() -> list[str]:
    """Names of the built-in scenarios (``src/cfsim/scenario/builtins/*.toml``)."""
    root = resources.files("cfsim.scenario") / "builtins"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml"))


def _read_source(source: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), "<dict>"
    text_path = Path(source)
    if text_path.suffix == ".toml" or text_path.exists():
        if not text_path.exists():
            raise FileNotFoundError(f"scenario file not found: {text_path}")
        if text_path.is_dir():
            raise ScenarioError(str(text_path), "is a directory, not a scenario file")
        try:
            return tomllib.loads(text_path.read_text()), str(text_path)
        except UnicodeDecodeError as exc:
            raise ScenarioError(str(text_path), f"not a TOML text file (not UTF-8 at byte {exc.start})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ScenarioError(str(text_path), f"not valid TOML: {exc}") from None
    name = str(source)
    root = resources.files("cfsim.scenario") / "builtins" / f"{name}.toml"
    if not root.is_file():
        raise ScenarioError("scenario", f"no file and no built-in scenario named {name!r}; "
                                        f"built-ins: {', '.join(builtin_names())}")
    return tomllib.loads(root.read_text()), f"builtin:{name}"


def is_null(text: str) -> bool:
    """Whether a written value unsets an optional key: ``null`` or ``none``, any case (TOML has no
    null, so ``--set`` values and lab design files spell it as a word).

    >>> is_null(" None"), is_null("0")
    (True, False)
    """
    return text.strip().lower() in ("null", "none")


def parse_value(text: str, key: str | None = None) -> Any:
    """Parse a ``--set`` value: TOML literal if it parses, else a bare string.

    ``null`` (or ``none``) unsets an optional key, e.g. ``cgroup.cpu_limit=null`` for no limit.
    Given the ``section.key`` it is for, a string key takes the text as written, so
    ``go.version=1.20`` is the release "1.20", not the number 1.2 (quotes are still removed).

    >>> parse_value("1.94"), parse_value("automaxprocs"), parse_value("[[0, 2.0], [60, 1.94]]")
    (1.94, 'automaxprocs', [[0, 2.0], [60, 1.94]])
    >>> parse_value("1.20", "go.version"), parse_value('"1.26"', "go.version")
    ('1.20', '1.26')
    >>> parse_value("null") is None
    True
    """
    if is_null(text):
        return None
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    if key is not None and not isinstance(value, (str, list, dict)) and _is_string_key(key):
        return text.strip()
    return value


def _is_string_key(dotted: str) -> bool:
    section, _, key = dotted.partition(".")
    spec = SCHEMA.get(section, {}).get(key)
    return spec is not None and spec.kind == "str"


def _split_override(item: str | tuple[str, Any]) -> tuple[str, str, Any]:
    if isinstance(item, tuple):
        dotted, value = item
    else:
        if "=" not in item:
            raise ScenarioError(item, "an override must look like section.key=value")
        dotted, raw = item.split("=", 1)
        value = parse_value(raw.strip(), dotted.strip())
    dotted = dotted.strip()
    if dotted.count(".") != 1:
        raise ScenarioError(dotted, "an override key must look like section.key")
    if dotted in RETIRED:
        raise ScenarioError(dotted, RETIRED[dotted])
    section, key = dotted.split(".")
    return section, key, value


def _coerce(section: str, key: str, spec: Key, value: Any) -> Any:
    name = f"{section}.{key}"
    if value is None:
        if spec.optional or spec.default is None:
            return None
        raise ScenarioError(name, "may not be empty")
    if spec.kind in ("int", "float") and isinstance(value, float) and not math.isfinite(value):
        raise ScenarioError(name, f"must be a finite number (got {value!r})")
    if spec.kind == "int":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float)
                                                                           and value != int(value)):
            raise ScenarioError(name, f"must be an integer (got {value!r})")
        value = int(value)
    elif spec.kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(name, f"must be a number (got {value!r})")
        value = float(value)
    elif spec.kind == "str":
        if not isinstance(value, str):
            # a TOML file's bare 1.20 is the float 1.2 by the time it gets here: say how to write it
            hint = f'; in a TOML file quote it: {key} = "{value}"' if isinstance(value, (int, float)) else ""
            raise ScenarioError(name, f"must be a string (got {value!r}){hint}")
    elif spec.kind == "bool":
        if not isinstance(value, bool):
            raise ScenarioError(name, f"must be true or false (got {value!r})")
    if spec.choices is not None and value not in spec.choices:
        raise ScenarioError(name, f"must be one of {', '.join(map(repr, spec.choices))} (got {value!r})")
    if spec.check is not None:
        msg = spec.check(value)
        if msg:
            raise ScenarioError(name, msg)
    return value


@dataclass
class Scenario:
    """A validated scenario: nested sections of keys, addressable as ``sc["section.key"]``."""

    data: dict[str, dict[str, Any]]
    source: str = "<dict>"
    overrides: list[str] = field(default_factory=list)

    def __getitem__(self, dotted: str) -> Any:
        section, key = dotted.split(".")
        return self.data[section][key]

    def get(self, dotted: str, default: Any = None) -> Any:
        section, key = dotted.split(".")
        return self.data.get(section, {}).get(key, default)

    def section(self, name: str) -> dict[str, Any]:
        return dict(self.data.get(name, {}))

    def with_overrides(self, overrides: Iterable[str | tuple[str, Any]]) -> "Scenario":
        """A new validated scenario with ``section.key=value`` overrides applied."""
        raw = copy.deepcopy(self.data)
        applied = list(self.overrides)
        for item in overrides:
            section, key, value = _split_override(item)
            raw.setdefault(section, {})[key] = value
            applied.append(f"{section}.{key}={json.dumps(value)}")
        return validate(raw, self.source, applied)

    def flat(self) -> dict[str, Any]:
        """``{"section.key": value}`` for every key (lists as JSON text), e.g. for sweep columns."""
        out: dict[str, Any] = {}
        for section, keys in self.data.items():
            for key, value in keys.items():
                out[f"{section}.{key}"] = json.dumps(value) if isinstance(value, (list, dict)) else value
        return out

    # Derived quantities used everywhere -------------------------------------------------
    @property
    def quota_us(self) -> int | None:
        """CFS quota [us] = ``cgroup.cpu_limit`` x period, None when unlimited."""
        lim = self["cgroup.cpu_limit"]
        return None if lim is None else limits.quota_us_exact(lim, self["cgroup.period_us"])

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict; absent optional keys are dropped (TOML has no null)."""
        return {s: {k: v for k, v in keys.items() if v is not None} for s, keys in self.data.items()}

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())


def validate(raw: Mapping[str, Any], source: str = "<dict>", overrides: list[str] | None = None) -> Scenario:
    """Check every section and key against :data:`cfsim.scenario.schema.SCHEMA`, fill defaults."""
    data: dict[str, dict[str, Any]] = {}
    for section, keys in raw.items():
        if section not in SCHEMA:
            raise ScenarioError(section, f"unknown section; known sections: {', '.join(SCHEMA)}")
        if not isinstance(keys, Mapping):
            raise ScenarioError(section, "must be a table of keys")
        for key in keys:
            if key not in SCHEMA[section] and f"{section}.{key}" not in RETIRED:
                raise ScenarioError(f"{section}.{key}",
                                    f"unknown key; known keys of [{section}]: {', '.join(SCHEMA[section])}")
    for section, spec_keys in SCHEMA.items():
        given = raw.get(section, {})
        data[section] = {}
        for key, spec in spec_keys.items():
            value = given.get(key, spec.default)
            data[section][key] = _coerce(section, key, spec, copy.deepcopy(value))
    sc = Scenario(data, source, list(overrides or []))
    _cross_checks(sc)
    return sc


def _cross_checks(sc: Scenario) -> None:
    for key, msg in limits.check_bandwidth(sc.quota_us, sc["cgroup.period_us"], sc["cgroup.burst_us"]):
        raise ScenarioError(key, msg)
    sched = sc["cgroup.limit_schedule"]
    if sched:
        for i, (t, lim) in enumerate(sched):
            if lim is None:
                continue
            q = limits.quota_us_exact(lim, sc["cgroup.period_us"])
            for key, msg in limits.check_bandwidth(q, sc["cgroup.period_us"], sc["cgroup.burst_us"]):
                raise ScenarioError(f"cgroup.limit_schedule[{i}]", msg)
    if sc["lab.gctrace_scan"] and not sc["lab.gctrace"]:
        raise ScenarioError("lab.gctrace_scan", "the scan split is part of the GC trace: needs lab.gctrace = true")
    if sc["workload.client_cpu_us_per_request"] > 0 and sc["host.cpu_sharing"] != "slices":
        raise ScenarioError("workload.client_cpu_us_per_request",
                            "a client on the host needs host.cpu_sharing = 'slices' (got 'fluid')")
    if sc["host.background_cores"] >= sc["host.cpus"]:
        raise ScenarioError("host.background_cores", f"must be < host.cpus={sc['host.cpus']} "
                                                     f"(got {sc['host.background_cores']})")
    mem_lim, mem_req = sc["cgroup.memory_limit_mb"], sc["cgroup.memory_request_mb"]
    if mem_lim is not None and mem_req is not None and mem_req > mem_lim:
        # the API server's rule (pkg/apis/core/validation: "must be less than or equal to memory limit")
        raise ScenarioError("cgroup.memory_request_mb", f"must be <= cgroup.memory_limit_mb={mem_lim:g} "
                                                        f"(got {mem_req:g})")
    if sc["run.warmup_s"] >= sc["run.duration_s"]:
        raise ScenarioError("run.warmup_s", f"must be < run.duration_s={sc['run.duration_s']} "
                                            f"(got {sc['run.warmup_s']})")
    for median_key in ("client_rtt_ms", "client_send_late_ms"):
        p99_key = median_key.replace("_ms", "_p99_ms")
        median, p99 = sc.get(f"workload.{median_key}"), sc.get(f"workload.{p99_key}")
        if p99 and (not median or p99 < median):
            # a log-normal spread needs a positive median at or below the 99th percentile
            raise ScenarioError(f"workload.{p99_key}", f"must be 0, or >= workload.{median_key} > 0 "
                                                       f"(got {p99:g} with {median_key}={median or 0:g})")
    for hook in CROSS_CHECKS:
        hook(sc)


# Extra cross-key checks registered by the Go model, workloads and autoscalers.
CROSS_CHECKS: list = []


def load_scenario(source: str | Path | Mapping[str, Any],
                  overrides: Iterable[str | tuple[str, Any]] = ()) -> Scenario:
    """Read a scenario file, a built-in name or a dict; apply ``section.key=value`` overrides.

    Raises :class:`ScenarioError` naming the key and the allowed range for any invalid value.
    """
    raw, origin = _read_source(source)
    base_overrides: list[str] = []
    for item in overrides:
        section, key, value = _split_override(item)
        raw.setdefault(section, {})[key] = value
        base_overrides.append(f"{section}.{key}={json.dumps(value)}")
    return validate(raw, origin, base_overrides)
