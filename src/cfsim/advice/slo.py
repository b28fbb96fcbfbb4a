"""Service-level objectives over a simulation summary: ``'lag_final_s<=60'``, ``'latency_p99_s<=0.05'``.

An SLO is one comparison of a ``run --json`` summary key with a number. A summary that lacks
the key's value (``None``: no record completed, so no latency) fails the SLO: nothing measured
is nothing met.

>>> slo = parse_slo("latency_p99_s <= 0.05")
>>> slo.key, slo.op, slo.threshold
('latency_p99_s', '<=', 0.05)
>>> slo.met({"latency_p99_s": 0.031}), slo.met({"latency_p99_s": 0.2}), slo.met({"latency_p99_s": None})
(True, False, False)
>>> parse_slo("throughput>=4000")
Traceback (most recent call last):
...
cfsim.advice.slo.SLOError: SLO 'throughput>=4000': unknown key 'throughput'; known keys: ...
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

__all__ = ["SLO", "SLOError", "KNOWN_KEYS", "parse_slo", "parse_slos", "all_met", "tighter", "StopOnceFailed",
           "stop_rule"]

#: Summary keys an SLO may name, with their unit (from ``cfsim run --json``).
KNOWN_KEYS: dict[str, str] = {
    "throughput_per_s": "1/s",
    "latency_p50_s": "s",
    "latency_p99_s": "s",
    "latency_p999_s": "s",
    "latency_max_s": "s",
    "latency_mean_s": "s",
    "lag_final_s": "s",
    "backlog_final": "records",
    "throttled_ratio": "-",
    "throttled_time_s": "s",
    "cpu_usage_cores": "cores",
    "gc_cpu_fraction": "-",
    "sched_cpu_fraction": "-",
    "burn_p50_s": "s",
    "burn_p99_s": "s",
    "gc_pause_p99_s": "s",
}

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
}
_FORM = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>|==|=|!=)?\s*(.*?)\s*$")


class SLOError(ValueError):
    """An SLO could not be read; the message quotes the SLO and says what is allowed."""


@dataclass(frozen=True)
class SLO:
    """``key op threshold`` over a summary, e.g. ``lag_final_s <= 60``."""

    key: str
    op: str
    threshold: float

    @property
    def text(self) -> str:
        return f"{self.key}{self.op}{self.threshold:g}"

    @property
    def upper_bound(self) -> bool:
        """True for ``<=``/``<`` (smaller is better), False for ``>=``/``>``."""
        return self.op in ("<=", "<")

    def value(self, summary: Mapping[str, Any]) -> float | None:
        v = summary.get(self.key)
        if v is None or isinstance(v, bool):
            return None
        v = float(v)
        return v if math.isfinite(v) else None

    def met(self, summary: Mapping[str, Any]) -> bool:
        """Whether ``summary`` meets the objective (a missing or non-finite value does not)."""
        v = self.value(summary)
        return v is not None and _OPS[self.op](v, self.threshold)

    def slack(self, summary: Mapping[str, Any]) -> float | None:
        """How far inside the objective the value is, relative to the threshold (< 0: violated)."""
        v = self.value(summary)
        if v is None:
            return None
        scale = abs(self.threshold) or 1.0
        return (self.threshold - v) / scale if self.upper_bound else (v - self.threshold) / scale

    def cannot_be_met(self, bounds: Mapping[str, tuple[float, float]]) -> bool:
        """Whether no value a run can still end at meets the objective: ``bounds[key]`` is the
        (lowest, highest) reachable (:func:`cfsim.simulation.window_bounds`); False for a key the
        bounds do not cover.

        >>> parse_slo("throttled_ratio<=0.1").cannot_be_met({"throttled_ratio": (0.12, 1.0)})
        True
        >>> parse_slo("throttled_ratio<=0.1").cannot_be_met({"throttled_ratio": (0.1, 1.0)})
        False
        """
        if self.key not in bounds:
            return False
        lowest, highest = bounds[self.key]
        return not _OPS[self.op](lowest if self.upper_bound else highest, self.threshold)

    def __str__(self) -> str:
        return self.text


def parse_slo(text: str, known: Iterable[str] | None = None) -> SLO:
    """Read ``'key<=number'`` (operators ``<=``, ``<``, ``>=``, ``>``).

    Raises :class:`SLOError` naming the SLO, and the known keys for an unknown key.
    """
    keys = list(known) if known is not None else list(KNOWN_KEYS)
    if not isinstance(text, str) or not text.strip():
        raise SLOError(f"SLO {text!r}: empty; write e.g. 'lag_final_s<=60' or 'throughput_per_s>=4000'")
    m = _FORM.match(text)
    if not m:
        raise SLOError(f"SLO {text!r}: cannot read it; write KEY<=NUMBER or KEY>=NUMBER, "
                       f"e.g. 'latency_p99_s<=0.05'")
    key, op, raw = m.groups()
    if key not in keys:
        raise SLOError(f"SLO {text!r}: unknown key {key!r}; known keys: {', '.join(keys)}")
    if op is None:
        raise SLOError(f"SLO {text!r}: no comparison; use one of <=, <, >=, > (e.g. '{key}<=1')")
    if op not in _OPS:
        raise SLOError(f"SLO {text!r}: operator {op!r} is not allowed; use one of <=, <, >=, >")
    try:
        threshold = float(raw)
    except ValueError:
        raise SLOError(f"SLO {text!r}: threshold {raw!r} is not a number") from None
    if not math.isfinite(threshold):
        raise SLOError(f"SLO {text!r}: threshold must be a finite number (got {raw!r})")
    lo, hi = (0.0, 1.0) if KNOWN_KEYS.get(key) == "-" else (0.0, math.inf)
    never = (op == "<" and threshold <= lo) or (op in ("<=", "<") and threshold < lo) \
        or (op == ">" and threshold >= hi) or (op in (">=", ">") and threshold > hi)
    always = (op in (">=", ">") and threshold < lo) or (op == ">=" and threshold == lo) \
        or (op in ("<=", "<") and threshold > hi) or (op == "<=" and threshold == hi)
    if never or always:
        span = "a fraction in [0, 1]" if hi == 1.0 else "never negative"
        raise SLOError(f"SLO {text!r}: {key} is {span}, so {'no' if never else 'every'} run "
                       f"{'can meet' if never else 'meets'} it")
    return SLO(key, op, threshold)


def parse_slos(texts: Sequence[str]) -> list[SLO]:
    """Parse several SLOs; at least one is required."""
    if not texts:
        raise SLOError("no SLO given; add e.g. --slo 'lag_final_s<=60'")
    return [parse_slo(t) for t in texts]


def all_met(slos: Sequence[SLO], summary: Mapping[str, Any]) -> bool:
    return all(s.met(summary) for s in slos)


@dataclass(frozen=True)
class StopOnceFailed:
    """A stop rule for :func:`cfsim.simulation.simulate`: end the run as soon as one of ``slos``
    can no longer be met, whatever the rest of the window does (:meth:`SLO.cannot_be_met`), and
    say which. A run it stops fails that SLO exactly as the whole run would have; a run it does
    not stop is the whole run. Picklable (it travels to a sweep's workers)."""

    slos: tuple[SLO, ...]

    def __call__(self, bounds: Mapping[str, tuple[float, float]]) -> str | None:
        for s in self.slos:
            if s.cannot_be_met(bounds):
                return s.text
        return None

    @property
    def key(self) -> str:
        """What the rule is, for caching the verdicts it stopped on."""
        return "stop-once-failed:" + "|".join(sorted(s.text for s in self.slos))


def stop_rule(slos: Iterable[SLO]) -> StopOnceFailed | None:
    """The rule that stops a run once one of ``slos`` is decided failed, over the SLOs on keys a
    run bounds while it goes on (:data:`cfsim.simulation.WINDOW_BOUND_KEYS`); None when there
    are none (nothing to stop on).

    >>> stop_rule(parse_slos(["throttled_ratio<=0.1", "throughput_per_s>=100"])).key
    'stop-once-failed:throttled_ratio<=0.1'
    >>> stop_rule(parse_slos(["latency_p99_s<=0.05"])) is None
    True
    """
    from cfsim.simulation import WINDOW_BOUND_KEYS

    kept = tuple(s for s in slos if s.key in WINDOW_BOUND_KEYS)
    return StopOnceFailed(kept) if kept else None


def tighter(slo: SLO, factor: float) -> SLO:
    """The same SLO with its threshold moved by ``factor`` in the strict direction
    (``<=``: threshold / factor; ``>=``: threshold x factor), for ``factor >= 1``."""
    if slo.upper_bound:
        return SLO(slo.key, slo.op, slo.threshold / factor)
    return SLO(slo.key, slo.op, slo.threshold * factor)
