"""Arrival-rate specifications shared by the stream, open and single-thread workloads.

``rate_per_s`` is a number (constant), ``[[t_s, rate], ...]`` steps (each rate holds from its
``t_s``; before the first step the rate is 0 unless a step starts at 0), the string
``'diurnal:<mean>:<amplitude>:<period_s>'`` (``mean + amplitude * sin(2 pi t / period)``,
clipped at 0), or a CSV path with columns ``t_s,rate_per_s`` read as steps.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np


class RateFn:
    """Cumulative expected arrivals ``cum(t)`` and its inverse, tabulated on a grid."""

    def __init__(self, spec, duration_s: float):
        self.duration_s = float(duration_s)
        self.kind, self._steps, self._diurnal = _parse(spec)
        n = int(min(max(self.duration_s / 1e-3, 2), 2_000_000))
        self.grid_t = np.linspace(0.0, self.duration_s, n + 1)
        self.grid_c = self._cum_exact(self.grid_t)

    def rate(self, t_s: float) -> float:
        if self._diurnal is not None:
            mean, amp, period = self._diurnal
            return max(0.0, mean + amp * math.sin(2 * math.pi * t_s / period))
        r = 0.0
        for t, v in self._steps:
            if t <= t_s:
                r = v
            else:
                break
        return r

    def _cum_exact(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        if self._diurnal is not None:
            mean, amp, period = self._diurnal
            if amp <= mean:  # never clipped: closed form
                return mean * t + amp * period / (2 * math.pi) * (1 - np.cos(2 * math.pi * t / period))
            fine = np.linspace(0, max(t.max(), 1e-9), max(len(t), 100_000) + 1)
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
        t = np.interp(n, self.grid_c, self.grid_t, right=np.inf)
        return t


def _parse(spec):
    if isinstance(spec, bool):
        raise ValueError("workload.rate_per_s: bad value")
    if isinstance(spec, (int, float)):
        return "constant", [(0.0, float(spec))], None
    if isinstance(spec, list):
        steps = sorted((float(t), float(r)) for t, r in spec)
        return "steps", steps, None
    if isinstance(spec, str):
        if spec.startswith("diurnal:"):
            parts = spec.split(":")
            if len(parts) != 4:
                raise ValueError("workload.rate_per_s: diurnal must be 'diurnal:<mean>:<amplitude>:<period_s>'")
            mean, amp, period = (float(x) for x in parts[1:])
            if period <= 0 or mean < 0:
                raise ValueError("workload.rate_per_s: diurnal needs mean >= 0 and period > 0")
            return "diurnal", [], (mean, amp, period)
        path = Path(spec)
        if not path.exists():
            raise FileNotFoundError(f"workload.rate_per_s: CSV file not found: {spec}")
        steps = []
        with path.open() as fh:
            for row in csv.DictReader(fh):
                steps.append((float(row["t_s"]), float(row["rate_per_s"])))
        return "csv", sorted(steps), None
    raise ValueError(f"workload.rate_per_s: bad value {spec!r}")
