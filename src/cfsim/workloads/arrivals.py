"""Arrival-rate specifications (``workload.rate_per_s``): the one parser and the rate it describes.

:func:`parse_rate` is the only reader of the key: the scenario schema checks values with it, the
event engine's workloads (``stream``, ``open``, ``single-thread``) tabulate it with
:class:`RateFn`, the long-horizon engine steps :meth:`RateSpec.rate` and the lab turns it into
the load generator's steps (:meth:`RateSpec.as_steps`). A value is one of:

* a number >= 0: a constant rate [1/s];
* ``[[t_s, rate], ...]``: steps, each rate holding from its ``t_s`` (before the first step the rate
  is 0 unless a step starts at 0); times >= 0 and distinct, rates >= 0, in any order;
* ``'diurnal:<mean>:<amplitude>:<period_s>'``: ``mean + amplitude * sin(2 pi t / period)``
  clipped at 0, with mean >= 0 and period >= :data:`MIN_DIURNAL_PERIOD_S` (1 ms);
* any other string: the path of a CSV file of steps, one ``t_s,rate_per_s`` row a line. A first
  row naming the columns (``t_s`` and ``rate_per_s``, in either order) is a header; blank lines
  and lines starting with ``#`` are skipped; errors name the file and the line.

Every rate is at most :data:`MAX_RATE_PER_S` (10^9 a second: beyond what one process serves, and
where arrival counts over a run stop being exact in floating point). Anything else raises
:class:`~cfsim.scenario.ScenarioError` naming ``workload.rate_per_s``.

>>> parse_rate("diurnal:100:50:60").rate(15.0)
150.0
>>> parse_rate([[10, 5.0], [0, 1.0]]).steps
((0.0, 1.0), (10.0, 5.0))
>>> parse_rate(-1)
Traceback (most recent call last):
...
cfsim.scenario.schema.ScenarioError: workload.rate_per_s: must be >= 0 (got -1)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cfsim.scenario.schema import ScenarioError

KEY = "workload.rate_per_s"
_FORMS = "a number >= 0, a list of [t_s, rate_per_s] steps, 'diurnal:<mean>:<amplitude>:<period_s>' or a CSV path"


@dataclass(frozen=True)
class RateSpec:
    """A parsed ``workload.rate_per_s``: ``kind`` is ``constant``, ``steps``, ``diurnal`` or ``csv``;
    a constant is the one step ``(0, rate)``, a CSV file its steps."""

    kind: str
    steps: tuple[tuple[float, float], ...] = ()
    diurnal: tuple[float, float, float] | None = None  # mean, amplitude, period_s

    def rate(self, t_s: float) -> float:
        """The arrival rate [1/s] at ``t_s``."""
        if self.diurnal is not None:
            mean, amp, period = self.diurnal
            return max(0.0, mean + amp * math.sin(2 * math.pi * t_s / period))
        rate = 0.0
        for t0, r in self.steps:
            if t0 <= t_s:
                rate = r
            else:
                break
        return rate

    def nominal_rate_per_s(self) -> float:
        """The rate a replica is sized for: the constant, the diurnal mean, or the highest step."""
        if self.diurnal is not None:
            return self.diurnal[0]
        return max(r for _, r in self.steps)

    def as_steps(self, duration_s: float) -> float | list[list[float]]:
        """The constant as a number; steps as ``[[t_s, rate], ...]``; a diurnal rate sampled every
        second over ``[0, duration_s]`` (for a load generator that plays steps)."""
        if self.kind == "constant":
            return self.steps[0][1]
        if self.diurnal is not None:
            return [[float(t), self.rate(float(t))] for t in range(int(math.ceil(duration_s)) + 1)]
        return [[t, r] for t, r in self.steps]


#: the largest rate a value may give [1/s]
MAX_RATE_PER_S = 1e9


def _bounded(key: str, where: str, rate: float) -> None:
    if rate > MAX_RATE_PER_S:
        raise ScenarioError(key, f"{where}must be at most {MAX_RATE_PER_S:g} per second (got {rate:g})")


def parse_rate(value: Any, key: str = KEY) -> RateSpec:
    """Parse a ``workload.rate_per_s`` value (see the module doc); errors name ``key``."""
    if isinstance(value, bool) or value is None:
        raise ScenarioError(key, f"must be {_FORMS} (got {value!r})")
    if isinstance(value, (int, float)):
        if not (math.isfinite(value) and value >= 0):
            raise ScenarioError(key, f"must be >= 0 (got {value})")
        _bounded(key, "", float(value))
        return RateSpec("constant", ((0.0, float(value)),))
    if isinstance(value, (list, tuple)):
        return RateSpec("steps", _checked_steps([_step(key, f"step {i}", s) for i, s in enumerate(value)], key, ""))
    if isinstance(value, str):
        if value.startswith("diurnal:"):
            return RateSpec("diurnal", diurnal=_diurnal(value, key))
        return RateSpec("csv", _read_csv(Path(value), key))
    raise ScenarioError(key, f"must be {_FORMS} (got {value!r})")


def _finite(x: Any) -> float:
    """A finite float from a number (not a bool) or, for CSV cells, a numeric text."""
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise ValueError(x)
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(x)
    return v


def _step(key: str, where: str, step: Any, text: bool = False) -> tuple[float, float]:
    """One ``[t_s, rate_per_s]`` step; ``text`` allows numeric strings (CSV cells)."""
    try:
        if isinstance(step, str) or len(step) != 2 or (not text and any(isinstance(x, str) for x in step)):
            raise ValueError(step)
        t, r = _finite(step[0]), _finite(step[1])
    except (TypeError, ValueError, KeyError, IndexError):
        raise ScenarioError(key, f"{where} must be [t_s, rate_per_s] of finite numbers (got {step!r})") from None
    if t < 0 or r < 0:
        raise ScenarioError(key, f"{where} must have t_s >= 0 and rate_per_s >= 0 (got {list(step)!r})")
    _bounded(key, f"{where.rstrip(':')}: rate_per_s ", r)
    return t, r


def _checked_steps(steps: list[tuple[float, float]], key: str, source: str) -> tuple[tuple[float, float], ...]:
    if not steps:
        raise ScenarioError(key, f"{source}needs at least one [t_s, rate_per_s] step")
    steps = sorted(steps)
    for (t0, _), (t1, _) in zip(steps, steps[1:]):
        if t0 == t1:
            raise ScenarioError(key, f"{source}two steps start at t_s = {t0:g}")
    return tuple(steps)


#: the shortest diurnal period: a millisecond (below it the rate swings faster than the engine's
#: arrival tables resolve, and a subnormal period overflows 2 pi t / period to infinity)
MIN_DIURNAL_PERIOD_S = 1e-3


def _diurnal(value: str, key: str) -> tuple[float, float, float]:
    parts = value.split(":")
    try:
        if len(parts) != 4:
            raise ValueError(value)
        mean, amp, period = (_finite(p) for p in parts[1:])
    except ValueError:
        raise ScenarioError(key, f"expected 'diurnal:<mean>:<amplitude>:<period_s>' of finite numbers "
                                 f"(got {value!r})") from None
    if mean < 0 or period < MIN_DIURNAL_PERIOD_S:
        raise ScenarioError(key, f"diurnal needs mean >= 0 and period_s >= {MIN_DIURNAL_PERIOD_S:g} "
                                 f"(got {value!r})")
    _bounded(key, "diurnal: mean + |amplitude| ", mean + abs(amp))
    return mean, amp, period


def _read_csv(path: Path, key: str) -> tuple[tuple[float, float], ...]:
    if not path.is_file():
        raise ScenarioError(key, f"no CSV file {str(path)!r} (a value must be {_FORMS})")
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise ScenarioError(key, f"{path}: not a text CSV file (not UTF-8 at byte {exc.start})") from None
    steps: list[tuple[float, float]] = []
    columns = (0, 1)
    first = True
    for lineno, line in enumerate(text.splitlines(), 1):
        cells = [c.strip() for c in line.split(",")]
        if not line.strip() or cells[0].startswith("#"):
            continue
        if first and {"t_s", "rate_per_s"} <= set(cells):
            columns = (cells.index("t_s"), cells.index("rate_per_s"))
            first = False
            continue
        first = False
        try:
            step = [cells[columns[0]], cells[columns[1]]]
        except IndexError:
            step = cells
        steps.append(_step(key, f"{path}:{lineno}:", step, text=True))
    return _checked_steps(steps, key, f"{path}: ")


#: the standard normal's 99th percentile (scipy.stats.norm.ppf(0.99))
Z_99 = 2.3263478740408408


def lognormal_sigma(median: float, p99: float) -> float:
    """Sigma of a log-normal with this median and 99th percentile (ln p99 - ln median =
    z_0.99 sigma); 0 when there is no spread (no median, or a p99 not above it).

    >>> round(lognormal_sigma(1.0, math.e ** Z_99), 12), lognormal_sigma(1.0, 0.0)
    (1.0, 0.0)
    """
    return math.log(p99 / median) / Z_99 if median > 0 and p99 > median else 0.0


def lognormal_median_from_mean(mean: float, p99: float | None) -> float:
    """The median of a log-normal with this mean and 99th percentile: with ``y = ln(p99 / median)
    = z_0.99 sigma``, ``ln mean = ln median + sigma^2 / 2`` is a quadratic in ``y``; its smaller
    root (``sigma <= z_0.99``). The mean alone (no spread) if the p99 is missing or not above
    the mean; if no log-normal has both (a mean too small for that p99), the one with that mean
    and ``sigma = z_0.99``, the widest the root allows.

    >>> m = 0.2 * math.exp(0.5 ** 2 / 2)
    >>> round(lognormal_median_from_mean(m, 0.2 * math.exp(0.5 * Z_99)), 12)
    0.2
    >>> lognormal_median_from_mean(0.3, None), lognormal_median_from_mean(0.3, 0.2)
    (0.3, 0.3)
    >>> round(lognormal_median_from_mean(1e-3, 5.0) / 1e-3, 4)   # no fit: sigma = z_0.99
    0.0668
    """
    if mean <= 0 or not p99 or p99 <= mean:
        return max(0.0, mean)
    z2 = Z_99 * Z_99
    disc = 1.0 - 2.0 * (math.log(p99) - math.log(mean)) / z2
    if disc < 0:
        return mean * math.exp(-z2 / 2)
    return p99 * math.exp(-z2 * (1.0 - math.sqrt(disc)))


def late_sender(due_s: np.ndarray, late_s: float, late_p99_s: float, rng: np.random.Generator) -> np.ndarray:
    """When requests due at ``due_s`` (sorted) leave a client whose one sending loop sleeps until
    the next due time and wakes late (log-normal, median ``late_s``, 99th percentile
    ``late_p99_s``; 0 = always ``late_s``): every request already due when it wakes goes at once,
    so the requests leave in bunches (``lab/cmd/loadgen``'s ``openLoop``: ``time.Sleep(time.Until(due))``
    then a goroutine per request).

    >>> late_sender(np.array([0.0, 0.0002, 0.001, 0.0011]), 0.0005, 0.0, np.random.default_rng(0)).tolist()
    [0.0005, 0.0005, 0.0015, 0.0015]
    """
    if late_s <= 0 or due_s.size == 0:
        return due_s
    sigma = lognormal_sigma(late_s, late_p99_s)
    lateness = late_s * np.exp(sigma * rng.standard_normal(due_s.size)) if sigma else np.full(due_s.size, late_s)
    out = np.empty_like(due_s)
    sent = -math.inf
    for k, (due, late) in enumerate(zip(due_s.tolist(), lateness.tolist())):
        if due > sent:            # the loop sleeps until this request is due, and wakes late
            sent = due + late
        out[k] = sent             # else it is overdue: sent in the same bunch
    return out


class RateFn:
    """Cumulative expected arrivals ``cum(t)`` of a rate and its inverse, tabulated on a grid over
    ``[0, duration_s]`` (the event engine's view of :class:`RateSpec`)."""

    def __init__(self, spec: RateSpec | Any, duration_s: float):
        self.spec = spec if isinstance(spec, RateSpec) else parse_rate(spec)
        self.kind = self.spec.kind
        self.duration_s = float(duration_s)
        self._steps = self.spec.steps
        self._diurnal = self.spec.diurnal
        n = int(min(max(self.duration_s / 1e-3, 2), 2_000_000))
        self.grid_t = np.linspace(0.0, self.duration_s, n + 1)
        self.grid_c = self._cum_exact(self.grid_t)

    def rate(self, t_s: float) -> float:
        return self.spec.rate(t_s)

    def _cum_exact(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        if self._diurnal is not None:
            mean, amp, period = self._diurnal
            if amp <= mean:  # never clipped: closed form
                return mean * t + amp * period / (2 * math.pi) * (1 - np.cos(2 * math.pi * t / period))
            fine = np.linspace(0, max(t.max(), 1e-9), max(t.size, 100_000) + 1)
            r = np.maximum(0.0, mean + amp * np.sin(2 * np.pi * fine / period))
            c = np.concatenate([[0.0], np.cumsum((r[1:] + r[:-1]) / 2 * np.diff(fine))])
            return np.interp(t, fine, c)
        out = np.zeros_like(t)
        steps = self._steps
        for i, (t0, v) in enumerate(steps):
            t1 = steps[i + 1][0] if i + 1 < len(steps) else math.inf
            out += v * np.clip(np.minimum(t, t1) - t0, 0, None)
        return out

    def cum_scalar(self, t_s: float) -> float:
        """``cum`` for one time, without numpy overhead."""
        if self._diurnal is not None:
            mean, amp, period = self._diurnal
            if amp <= mean:
                return mean * t_s + amp * period / (2 * math.pi) * (1 - math.cos(2 * math.pi * t_s / period))
            return float(self._cum_exact(np.array([t_s]))[0])
        total = 0.0
        steps = self._steps
        for i, (t0, v) in enumerate(steps):
            if t0 >= t_s:
                break
            t1 = steps[i + 1][0] if i + 1 < len(steps) else math.inf
            total += v * (min(t_s, t1) - t0)
        return total

    def cum(self, t_s):
        """Expected arrivals in ``[0, t_s]`` (exact for steps; closed form for diurnal)."""
        return self._cum_exact(np.asarray(t_s, dtype=float))

    def inverse(self, n):
        """The time at which ``cum`` reaches ``n`` (vectorised; ``inf`` past the run)."""
        n = np.asarray(n, dtype=float)
        return np.interp(n, self.grid_c, self.grid_t, right=np.inf)
