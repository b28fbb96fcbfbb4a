"""The VPA recommender's memory path, as upstream computes it.

Sources (``kubernetes/autoscaler``, ``vertical-pod-autoscaler/pkg/recommender``):

* ``model/container.go`` ``addMemorySample``: each container contributes ONE peak per
  aggregation interval (24 h) to the shared memory histogram, stamped at the interval's end
  (``WindowEnd``) with weight 1.0; a higher sample inside the interval replaces the peak (the old
  peak is subtracted, the new one added); a sample at or after ``WindowEnd`` opens the next
  interval (``WindowEnd`` moves forward by whole intervals) and adds a new peak; samples older
  than the last one are dropped. The first sample sets ``WindowEnd`` to its own time, so it opens
  an interval ending 24 h later.
* ``model/container.go`` ``RecordOOM``: an OOM kill adds a synthetic sample
  ``max(used + 100 MiB, used x 1.2)`` with ``used = max(memory request, the interval's usage
  peak)`` (``DefaultOOMMinBumpUp``, ``DefaultOOMBumpUpRatio``); OOMs older than the current
  interval are dropped.
* ``logic/recommender.go``, ``logic/estimator.go``: target / lower / upper bound are the P90 / P50
  / P95 of the peaks histogram (``--target-memory-percentile`` etc.), plus the 15 % margin
  (``x + trunc(x x 0.15)``), the confidence multipliers on the bounds (the same history-length
  confidence as CPU), and at least ``--pod-recommendation-min-memory-mb`` = 250 MiB per pod,
  split over the containers.
* memory samples are metrics-server's ``memory`` = cAdvisor's working set, one per recommender
  loop per container (``input/metrics``), taken at the scrape instant.

Amounts are int bytes; float -> amount truncates toward zero and clamps to [0, 1e14]
(``MemoryAmountFromBytes``, ``resourceAmountFromFloat``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cfsim.autoscalers.vpa_histogram import MEMORY_HISTOGRAM_OPTIONS, DecayingHistogram, HistogramOptions
from cfsim.autoscalers.vpa_recommender import (Recommendation, amount_from_float, confidence, lower_multiplier,
                                               scale_amount, upper_multiplier, with_margin)

MiB = 1 << 20
DAY_S = 86400.0
MEMORY_SAMPLE_WEIGHT = 1.0
OOM_BUMP_UP_RATIO = 1.2             # DefaultOOMBumpUpRatio
OOM_MIN_BUMP_UP_BYTES = 100 * MiB   # DefaultOOMMinBumpUp (100 * 1024 * 1024)


@dataclass(frozen=True)
class MemoryRecommenderConfig:
    target_percentile: float = 0.9
    lower_percentile: float = 0.5
    upper_percentile: float = 0.95
    margin_fraction: float = 0.15
    pod_min_memory_mb: float = 250.0
    interval_s: float = DAY_S            # MemoryAggregationInterval
    half_life_s: float = DAY_S           # MemoryHistogramDecayHalfLife
    confidence_interval_s: float = DAY_S  # --confidence-interval-memory
    oom_bump_up_ratio: float = OOM_BUMP_UP_RATIO
    oom_min_bump_up_bytes: float = OOM_MIN_BUMP_UP_BYTES
    min_allowed_bytes: int | None = None
    max_allowed_bytes: int | None = None
    histogram: HistogramOptions = MEMORY_HISTOGRAM_OPTIONS


@dataclass
class MemoryAggregate:
    """The memory part of an ``AggregateContainerState``: the decaying histogram of peaks. The
    confidence (history length) comes from the CPU samples, as upstream: pass them in."""

    peaks: DecayingHistogram

    @classmethod
    def new(cls, cfg: MemoryRecommenderConfig = MemoryRecommenderConfig()) -> "MemoryAggregate":
        return cls(DecayingHistogram(cfg.half_life_s, cfg.histogram))


@dataclass
class MemoryContainer:
    """One container's ``ContainerState`` memory bookkeeping (the current interval's peaks)."""

    cfg: MemoryRecommenderConfig = field(default_factory=MemoryRecommenderConfig)
    window_end_s: float | None = None
    memory_peak: int = 0
    oom_peak: int = 0
    last_sample_s: float | None = None

    def max_peak(self) -> int:
        return max(self.memory_peak, self.oom_peak)

    def add_sample(self, agg: MemoryAggregate, t_s: float, usage_bytes: int, is_oom: bool = False) -> bool:
        """``addMemorySample``; returns False for a dropped (outdated or negative) sample."""
        usage = int(usage_bytes)
        if usage < 0 or (not is_oom and self.last_sample_s is not None and t_s < self.last_sample_s):
            return False
        self.last_sample_s = t_s
        if self.window_end_s is None:
            self.window_end_s = t_s
        add_new = False
        if t_s < self.window_end_s:
            old = self.max_peak()
            if old != 0 and usage > old:
                agg.peaks.subtract(float(old), MEMORY_SAMPLE_WEIGHT, self.window_end_s)
                add_new = True
        else:
            step = self.cfg.interval_s
            shift = ((t_s - self.window_end_s) // step) * step + step
            self.window_end_s += shift
            self.memory_peak = 0
            self.oom_peak = 0
            add_new = True
        if add_new:
            agg.peaks.add(float(usage), MEMORY_SAMPLE_WEIGHT, self.window_end_s)
            if is_oom:
                self.oom_peak = usage
            else:
                self.memory_peak = usage
        return True

    def record_oom(self, agg: MemoryAggregate, t_s: float, request_bytes: int,
                   max_memory_bytes: int | None = None) -> bool:
        """``RecordOOM``: the synthetic bumped-up sample (False if the OOM is too old)."""
        if self.window_end_s is not None and t_s < self.window_end_s - self.cfg.interval_s:
            return False
        used = max(int(request_bytes), self.memory_peak)
        if max_memory_bytes and used > max_memory_bytes:
            used = max_memory_bytes
        needed = max(used + int(self.cfg.oom_min_bump_up_bytes), scale_amount(used, self.cfg.oom_bump_up_ratio))
        if max_memory_bytes and needed > max_memory_bytes:
            needed = max_memory_bytes
        return self.add_sample(agg, t_s, needed, is_oom=True)


#: a container's ``status.recommendation`` memory entries [bytes]: the same four amounts as CPU's
MemoryRecommendation = Recommendation


def pod_min_memory_bytes(pod_min_memory_mb: float, n_containers: int = 1) -> int:
    """``ScaleResource(MemoryAmountFromBytes(250 MiB), 1/containers)``."""
    return scale_amount(amount_from_float(pod_min_memory_mb * MiB), 1.0 / max(1, n_containers))


def recommend_memory(agg: MemoryAggregate, cfg: MemoryRecommenderConfig, first_sample_s: float | None,
                     last_sample_s: float | None, total_samples: int,
                     n_containers: int = 1) -> MemoryRecommendation:
    """Target / lower / upper memory [bytes] as written to the VPA status (then capped to the
    policy's minAllowed/maxAllowed).

    >>> cfg = MemoryRecommenderConfig()
    >>> agg, c = MemoryAggregate.new(cfg), MemoryContainer(cfg)
    >>> for day in range(3):
    ...     _ = c.add_sample(agg, day * DAY_S + 60, 400 * MiB)
    >>> r = recommend_memory(agg, cfg, 0.0, 3 * DAY_S, 3 * 1440)
    >>> round(r.target / MiB)        # the end of the 5 %-wide bucket holding 400 MiB, x 1.15
    488
    """
    def base(p: float) -> int:
        return with_margin(amount_from_float(agg.peaks.percentile(p)), cfg.margin_fraction)

    conf = confidence(first_sample_s, last_sample_s, total_samples, cfg.confidence_interval_s)
    lo = pod_min_memory_bytes(cfg.pod_min_memory_mb, n_containers)
    target = max(base(cfg.target_percentile), lo)
    lower = max(scale_amount(base(cfg.lower_percentile), lower_multiplier(conf)), lo)
    upper = max(scale_amount(base(cfg.upper_percentile), upper_multiplier(conf)), lo)
    uncapped = target

    def cap(x: int) -> int:
        if cfg.min_allowed_bytes and x < cfg.min_allowed_bytes:
            x = cfg.min_allowed_bytes
        if cfg.max_allowed_bytes and x > cfg.max_allowed_bytes:
            x = cfg.max_allowed_bytes
        return x

    return MemoryRecommendation(cap(target), cap(lower), cap(upper), uncapped)


def memory_config_from_scenario(vpa: dict) -> MemoryRecommenderConfig:
    """A :class:`MemoryRecommenderConfig` from a validated ``[vpa]`` section."""
    def b(key: str) -> int | None:
        v = vpa.get(key)
        return None if v is None else int(v * MiB)

    return MemoryRecommenderConfig(
        margin_fraction=vpa.get("margin_fraction", 0.15), pod_min_memory_mb=vpa.get("pod_min_memory_mb", 250.0),
        interval_s=vpa.get("memory_interval_s", DAY_S), half_life_s=vpa.get("memory_half_life_s", DAY_S),
        confidence_interval_s=vpa.get("confidence_interval_s", DAY_S),
        oom_bump_up_ratio=vpa.get("oom_bump_up_ratio", OOM_BUMP_UP_RATIO),
        oom_min_bump_up_bytes=vpa.get("oom_min_bump_up_mb", 100.0) * MiB,
        min_allowed_bytes=b("min_allowed_memory_mb"), max_allowed_bytes=b("max_allowed_memory_mb"))


def admit_memory(rec: MemoryRecommendation | None, controlled_values: str, request_b: int | None,
                 limit_b: int | None) -> tuple[int | None, int | None]:
    """Admission for memory: the request becomes the target; under ``RequestsAndLimits`` the limit
    keeps its ratio to the request (``GetProportionalLimit``: ``limit x new / old``, rounded up
    to whole bytes), and stays as it was under ``RequestsOnly``.

    >>> admit_memory(MemoryRecommendation(300, 200, 400, 300), "RequestsAndLimits", 100, 150)
    (300, 450)
    >>> admit_memory(MemoryRecommendation(300, 200, 400, 300), "RequestsOnly", 100, 150)
    (300, 150)
    """
    if rec is None:
        return request_b, limit_b
    new_req = rec.target
    if controlled_values != "RequestsAndLimits" or limit_b is None or not request_b:
        return new_req, limit_b
    return new_req, -(-limit_b * new_req // request_b)


def memory_priority(request_b: int | None, rec: MemoryRecommendation | None) -> tuple[bool, bool, float]:
    """The memory terms of the updater's ``GetUpdatePriority``: (outside [lower, upper], scale
    up, ``|request - target| / request``); summed with CPU's by the caller.

    >>> memory_priority(100, MemoryRecommendation(120, 110, 200, 120))
    (True, True, 0.2)
    """
    if rec is None:
        return False, False, 0.0
    if request_b is None:
        return True, True, float(rec.target)
    outside = request_b < rec.lower_bound or request_b > rec.upper_bound
    denom = max(request_b, 1)
    return outside, rec.target > request_b, abs(denom - rec.target) / denom
