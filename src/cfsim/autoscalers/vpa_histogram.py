"""The VPA recommender's decaying exponential histogram (``pkg/recommender/util``).

Bucket scheme (CPU): first bucket 0.01 core, each next bucket 5% wider, up to 1000 cores -> 176
buckets. Bucket ``n`` covers ``[start(n), start(n+1))`` with ``start(0) = 0`` and
``start(n) = first * (ratio**n - 1) / (ratio - 1)``. A percentile is the END of the bucket where the
running weight first reaches ``p * total`` (no interpolation), or the start of the last bucket.

Decay: a sample at time ``t`` is stored with weight ``w * 2**((t - ref) / half_life)``. The reference
time starts at Go's zero time; when a sample arrives more than ``100 * half_life`` after it (the
first sample, then about every 100 days), the reference moves to ``t`` rounded to a multiple of the
half-life (halves up) and every weight in ``[min_bucket, max_bucket]`` is multiplied by
``2**round((old_ref - new_ref) / half_life)``. A bucket whose weight is below ``epsilon`` does not
count as non-empty (it stays in the total weight).

Times are seconds on any axis whose zero is a multiple of the half-life (Unix time works: 1970-01-01
is a UTC midnight, as is Go's zero time).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

#: Upstream ``maxDecayExponent``: renormalise when the decay exponent would exceed this.
MAX_DECAY_EXPONENT = 100


@dataclass(frozen=True)
class HistogramOptions:
    """An exponential bucketing scheme (``NewExponentialHistogramOptions``)."""

    max_value: float = 1000.0
    first_bucket_size: float = 0.01
    ratio: float = 1.05
    epsilon: float = 1e-4

    @cached_property
    def num_buckets(self) -> int:
        """``ceil(log_ratio(max * (ratio - 1) / first + 1)) + 1`` (176 for the CPU defaults)."""
        x = self.max_value * (self.ratio - 1.0) / self.first_bucket_size + 1.0
        return int(math.ceil(math.log(x) / math.log(self.ratio))) + 1

    def bucket_start(self, bucket: int) -> float:
        """Lower edge of ``bucket`` (0 for the first)."""
        if bucket == 0:
            return 0.0
        return self.first_bucket_size * (self.ratio ** bucket - 1.0) / (self.ratio - 1.0)

    def find_bucket(self, value: float) -> int:
        """Index of the bucket holding ``value``; values past the range land in the last bucket."""
        if value < self.first_bucket_size:
            return 0
        idx = int(math.log(value * (self.ratio - 1.0) / self.first_bucket_size + 1.0) / math.log(self.ratio))
        return min(idx, self.num_buckets - 1)


#: The recommender's CPU histogram: ``epsilon = 0.001 * minSampleWeight(0.1)``.
CPU_HISTOGRAM_OPTIONS = HistogramOptions(max_value=1000.0, first_bucket_size=0.01, ratio=1.05, epsilon=1e-4)
#: The recommender's memory-peaks histogram [bytes]: first bucket 10 MB, max 1 TB
#: (``model/aggregations_config.go`` ``memoryHistogramOptions``), same epsilon.
MEMORY_HISTOGRAM_OPTIONS = HistogramOptions(max_value=1e12, first_bucket_size=1e7, ratio=1.05, epsilon=1e-4)


def go_round(x: float) -> int:
    """``floor(x + 0.5)``: Go's helper used for the decay exponent (halves round up)."""
    return int(math.floor(x + 0.5))


def round_to_multiple_s(t_s: float, step_s: float) -> float:
    """``time.Time.Round(step)``: nearest multiple of ``step`` since the zero time, halves up."""
    return math.floor(t_s / step_s + 0.5) * step_s


@dataclass
class Histogram:
    """A bucket histogram with the upstream min/max-bucket bookkeeping."""

    options: HistogramOptions = CPU_HISTOGRAM_OPTIONS
    weights: list[float] = field(default_factory=list)
    total_weight: float = 0.0
    min_bucket: int = -1
    max_bucket: int = 0

    def __post_init__(self) -> None:
        n = self.options.num_buckets
        if not self.weights:
            self.weights = [0.0] * n
        if self.min_bucket < 0:
            self.min_bucket = n - 1

    def add(self, value: float, weight: float) -> None:
        if weight < 0:
            raise ValueError("sample weight must be non-negative")
        b = self.options.find_bucket(value)
        self.weights[b] += weight
        self.total_weight += weight
        eps = self.options.epsilon
        if b < self.min_bucket and self.weights[b] >= eps:
            self.min_bucket = b
        if b > self.max_bucket and self.weights[b] >= eps:
            self.max_bucket = b

    def subtract(self, value: float, weight: float) -> None:
        """``SubtractSample``: remove weight from the value's bucket (never below zero: a weight
        within epsilon of the bucket's takes all of it), then tighten min/max."""
        if weight < 0:
            raise ValueError("sample weight must be non-negative")
        b = self.options.find_bucket(value)
        if weight > self.weights[b] - self.options.epsilon:
            weight = self.weights[b]
        self.total_weight -= weight
        self.weights[b] -= weight
        self._update_min_max()

    def _update_min_max(self) -> None:
        eps = self.options.epsilon
        last = self.options.num_buckets - 1
        while self.weights[self.min_bucket] < eps and self.min_bucket < last:
            self.min_bucket += 1
        while self.weights[self.max_bucket] < eps and self.max_bucket > 0:
            self.max_bucket -= 1

    def scale(self, factor: float) -> None:
        """Multiply the weights of buckets ``min..max`` and the total (as upstream does)."""
        if factor < 0:
            raise ValueError("scale factor must be non-negative")
        for b in range(self.min_bucket, self.max_bucket + 1):
            self.weights[b] *= factor
        self.total_weight *= factor
        self._update_min_max()

    def merge(self, other: "Histogram") -> None:
        if other.options != self.options:
            raise ValueError("cannot merge histograms with different options")
        for b in range(other.min_bucket, other.max_bucket + 1):
            self.weights[b] += other.weights[b]
        self.total_weight += other.total_weight
        self.min_bucket = min(self.min_bucket, other.min_bucket)
        self.max_bucket = max(self.max_bucket, other.max_bucket)

    def is_empty(self) -> bool:
        return self.weights[self.min_bucket] < self.options.epsilon

    def percentile(self, p: float) -> float:
        """Upper edge of the bucket where the running weight first reaches ``p * total``; 0 if empty."""
        if self.is_empty():
            return 0.0
        threshold = p * self.total_weight
        acc = 0.0
        b = self.min_bucket
        w = self.weights
        while b < self.max_bucket:
            acc += w[b]
            if acc >= threshold:
                break
            b += 1
        if b < self.options.num_buckets - 1:
            return self.options.bucket_start(b + 1)
        return self.options.bucket_start(b)

    def copy(self) -> "Histogram":
        return Histogram(self.options, list(self.weights), self.total_weight, self.min_bucket, self.max_bucket)


#: Go's zero time on the Unix-seconds axis (0001-01-01T00:00:00Z), a UTC midnight.
GO_ZERO_TIME_S = -62135596800.0


@dataclass
class DecayingHistogram:
    """A histogram whose samples lose half their weight every ``half_life_s``."""

    half_life_s: float = 86400.0
    options: HistogramOptions = CPU_HISTOGRAM_OPTIONS
    reference_s: float = GO_ZERO_TIME_S
    hist: Histogram | None = None

    def __post_init__(self) -> None:
        if self.hist is None:
            self.hist = Histogram(self.options)

    def _shift_reference(self, new_ref_s: float) -> None:
        new_ref_s = round_to_multiple_s(new_ref_s, self.half_life_s)
        exponent = go_round((self.reference_s - new_ref_s) / self.half_life_s)
        assert self.hist is not None
        self.hist.scale(math.ldexp(1.0, exponent) if exponent > -1074 else 0.0)
        self.reference_s = new_ref_s

    def decay_factor(self, t_s: float) -> float:
        """``2**((t - ref) / half_life)``, renormalising first when the exponent would exceed 100."""
        if t_s > self.reference_s + MAX_DECAY_EXPONENT * self.half_life_s:
            self._shift_reference(t_s)
        return 2.0 ** ((t_s - self.reference_s) / self.half_life_s)

    def add(self, value: float, weight: float, t_s: float) -> None:
        assert self.hist is not None
        self.hist.add(value, weight * self.decay_factor(t_s))

    def subtract(self, value: float, weight: float, t_s: float) -> None:
        assert self.hist is not None
        self.hist.subtract(value, weight * self.decay_factor(t_s))

    def percentile(self, p: float) -> float:
        assert self.hist is not None
        return self.hist.percentile(p)

    def is_empty(self) -> bool:
        assert self.hist is not None
        return self.hist.is_empty()

    def merge(self, other: "DecayingHistogram") -> None:
        """Add ``other`` into this one after aligning the older reference time to the younger."""
        if other.half_life_s != self.half_life_s:
            raise ValueError("cannot merge decaying histograms with different half-lives")
        other = other.copy()
        if self.reference_s < other.reference_s:
            self._shift_reference(other.reference_s)
        elif other.reference_s < self.reference_s:
            other._shift_reference(self.reference_s)
        assert self.hist is not None and other.hist is not None
        self.hist.merge(other.hist)

    def copy(self) -> "DecayingHistogram":
        assert self.hist is not None
        return DecayingHistogram(self.half_life_s, self.options, self.reference_s, self.hist.copy())
