"""The VPA recommender's CPU path, as upstream computes it (kubernetes/autoscaler
``vertical-pod-autoscaler/pkg/recommender/``: ``routines/recommender.go``, ``model/container.go``,
``model/aggregations_config.go``, ``logic/recommender.go``, ``logic/estimator.go``,
``routines/cpu_integer_post_processor.go``; https://github.com/kubernetes/autoscaler).

Pipeline, in this order (amounts are int millicores, every float -> amount truncates toward zero
and clamps to [0, 1e14]):

1. samples: metrics-server reports the mean usage over its last window (15 s with the standard
   manifests, 60 s with the binary default), timestamped at the END of the window. Once per loop
   (1 min) the recommender takes each container's latest point and keeps it only if its timestamp
   is strictly later than the container's last accepted CPU sample. Each kept sample goes into the
   shared aggregate histogram with the constant weight 0.1 (kubernetes/autoscaler#7818).
2. ``P(p) = trunc(percentile(p) * 1000)`` with target/lower/upper at P90/P50/P95;
3. margin: ``x + trunc(x * 0.15)``;
4. confidence (lower/upper only): ``conf = min(lifespan / 24 h, samples / 1440)``;
   upper ``x (1 + 1/conf)``, lower ``x (1 + 0.001/conf)**-2``;
5. ``max(., 25m / number of containers)``;
6. ``--round-cpu-millicores=R``: ``ceil(m / R) * R`` on target, lower, upper and uncapped target;
7. integer-CPU post-processor: ceil to whole cores on all four;
8. capping: raise to ``minAllowed``, then lower to ``maxAllowed`` (target, lower, upper only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from cfsim.autoscalers.vpa_histogram import CPU_HISTOGRAM_OPTIONS, DecayingHistogram, HistogramOptions

#: Upstream ``MaxResourceAmount``.
MAX_RESOURCE_AMOUNT = 10 ** 14
#: Upstream ``minSampleWeight``: the weight of every CPU sample, in every released version.
CPU_SAMPLE_WEIGHT = 0.1


@dataclass(frozen=True)
class RecommenderConfig:
    """Recommender flags and per-VPA policy that shape the CPU recommendation."""

    target_percentile: float = 0.9
    lower_percentile: float = 0.5
    upper_percentile: float = 0.95
    margin_fraction: float = 0.15
    pod_min_cpu_millicores: float = 25.0
    half_life_s: float = 86400.0
    confidence_interval_s: float = 86400.0
    round_cpu_millicores: int = 1
    integer_cpu: bool = False  # flag --cpu-integer-post-processor-enabled AND the VPA annotation
    min_allowed_millicores: int | None = None
    max_allowed_millicores: int | None = None
    histogram: HistogramOptions = CPU_HISTOGRAM_OPTIONS


@dataclass(frozen=True)
class Recommendation:
    """One container's ``status.recommendation`` entries: CPU [millicores] or memory [bytes]."""

    target: int
    lower_bound: int
    upper_bound: int
    uncapped_target: int

    def as_dict(self) -> dict[str, int]:
        return {"target": self.target, "lower_bound": self.lower_bound, "upper_bound": self.upper_bound,
                "uncapped_target": self.uncapped_target}


def amount_from_float(x: float) -> int:
    """``model/types.go: resourceAmountFromFloat``: truncate toward zero, clamp to [0, 1e14]; NaN -> 0."""
    if x != x:  # NaN: Go's conversion is implementation-defined; only minCPU survives the max()
        return 0
    if x < 0:
        return 0
    if x > MAX_RESOURCE_AMOUNT:
        return MAX_RESOURCE_AMOUNT
    return int(x)


def cores_to_millicores(cores: float) -> int:
    """A ``Quantity`` written in cores, as ``MilliValue()`` reads it (sub-milli fractions round up)."""
    return int(math.ceil(round(cores * 1000.0, 6)))


def cpu_quantity(amount_m: int) -> str:
    """A CPU amount [millicores] as the VPA writes it to its status: ``resource.NewMilliQuantity(m,
    resource.DecimalSI).String()``, the canonical form of k8s.io/apimachinery ``pkg/api/resource/
    quantity.go`` (the largest SI suffix whose mantissa stays an integer).

    >>> cpu_quantity(1168), cpu_quantity(2000), cpu_quantity(1500), cpu_quantity(0), cpu_quantity(10 ** 14)
    ('1168m', '2', '1500m', '0', '100G')
    """
    m = int(amount_m)
    if m == 0:
        return "0"
    sign, m = ("-", -m) if m < 0 else ("", m)
    exp = -3
    while m % 1000 == 0 and exp < 18:
        m //= 1000
        exp += 3
    return f"{sign}{m}{ {-3: 'm', 0: '', 3: 'k', 6: 'M', 9: 'G', 12: 'T', 15: 'P', 18: 'E'}[exp]}"


def scale_amount(amount_m: int, factor: float) -> int:
    """``ScaleResource``: ``amount_from_float(amount * factor)``."""
    return amount_from_float(amount_m * factor)


def with_margin(amount_m: int, margin_fraction: float) -> int:
    """``x + trunc(x * margin)``."""
    return amount_m + scale_amount(amount_m, margin_fraction)


def confidence(first_sample_s: float | None, last_sample_s: float | None, total_samples: int,
               confidence_interval_s: float = 86400.0) -> float:
    """``min(lifespan / interval, samples / (interval in minutes))``; 0 without samples."""
    if first_sample_s is None or last_sample_s is None:
        return 0.0
    lifespan = (last_sample_s - first_sample_s) / confidence_interval_s
    samples = total_samples / (confidence_interval_s / 60.0)
    return min(lifespan, samples)


def upper_multiplier(conf: float) -> float:
    """``(1 + 1/conf)**1``; +inf at conf 0."""
    return math.inf if conf <= 0 else 1.0 + 1.0 / conf


def lower_multiplier(conf: float) -> float:
    """``(1 + 0.001/conf)**-2``; 0 at conf 0."""
    return 0.0 if conf <= 0 else (1.0 + 0.001 / conf) ** -2.0


def pod_min_cpu_m(pod_min_cpu_millicores: float, n_containers: int) -> int:
    """The per-container minimum: 25m split evenly over the VPA's containers, truncated."""
    return scale_amount(amount_from_float(pod_min_cpu_millicores * 0.001 * 1000.0), 1.0 / max(1, n_containers))


def round_up_to_scale(amount_m: int, step_m: int) -> int:
    """``--round-cpu-millicores``: ``ceil(m / step) * step``; step 1 (or less) = off."""
    if step_m <= 1:
        return amount_m
    return -(-amount_m // step_m) * step_m


def integer_cpu(amount_m: int) -> int:
    """The integer-CPU post-processor: ``Quantity.RoundUp(Scale(0))``, i.e. ceil to whole cores."""
    return -(-amount_m // 1000) * 1000


def cap_to_policy(amount_m: int, min_allowed_m: int | None, max_allowed_m: int | None) -> int:
    """Raise to ``minAllowed`` then lower to ``maxAllowed`` (zero/None = no cap)."""
    if min_allowed_m and amount_m < min_allowed_m:
        amount_m = min_allowed_m
    if max_allowed_m and amount_m > max_allowed_m:
        amount_m = max_allowed_m
    return amount_m


@dataclass
class AggregateState:
    """``AggregateContainerState`` (CPU part): the history shared by pods with the same labels."""

    cpu: DecayingHistogram = field(default_factory=DecayingHistogram)
    first_sample_s: float | None = None
    last_sample_s: float | None = None
    total_samples: int = 0

    @classmethod
    def new(cls, half_life_s: float = 86400.0, options: HistogramOptions = CPU_HISTOGRAM_OPTIONS) -> "AggregateState":
        return cls(DecayingHistogram(half_life_s, options))

    def add_cpu_sample(self, usage_cores: float, t_s: float, weight: float = CPU_SAMPLE_WEIGHT) -> None:
        self.cpu.add(usage_cores, weight, t_s)
        self.first_sample_s = t_s if self.first_sample_s is None else min(self.first_sample_s, t_s)
        self.last_sample_s = t_s if self.last_sample_s is None else max(self.last_sample_s, t_s)
        self.total_samples += 1

    def merged(self, other: "AggregateState") -> "AggregateState":
        """A new state: histograms added after aligning references, counts summed, min/max times."""
        out = AggregateState(self.cpu.copy(), self.first_sample_s, self.last_sample_s, self.total_samples)
        out.cpu.merge(other.cpu)
        firsts = [t for t in (self.first_sample_s, other.first_sample_s) if t is not None]
        lasts = [t for t in (self.last_sample_s, other.last_sample_s) if t is not None]
        out.first_sample_s = min(firsts) if firsts else None
        out.last_sample_s = max(lasts) if lasts else None
        out.total_samples = self.total_samples + other.total_samples
        return out


@dataclass
class ContainerSampler:
    """Per-container ``ContainerState``: the strictly-later timestamp rule for CPU samples."""

    last_cpu_sample_s: float | None = None

    def accept(self, timestamp_s: float) -> bool:
        """True (and remember it) iff ``timestamp_s`` is strictly after the last accepted sample."""
        if self.last_cpu_sample_s is not None and not timestamp_s > self.last_cpu_sample_s:
            return False
        self.last_cpu_sample_s = timestamp_s
        return True


def raw_estimate(state: AggregateState, cfg: RecommenderConfig, n_containers: int = 1) -> tuple[int, int, int]:
    """(target, lower, upper) in millicores before rounding, post-processing and capping."""
    def base(p: float) -> int:
        return with_margin(amount_from_float(state.cpu.percentile(p) * 1000.0), cfg.margin_fraction)

    conf = confidence(state.first_sample_s, state.last_sample_s, state.total_samples, cfg.confidence_interval_s)
    min_m = pod_min_cpu_m(cfg.pod_min_cpu_millicores, n_containers)
    target = max(base(cfg.target_percentile), min_m)
    lower = max(scale_amount(base(cfg.lower_percentile), lower_multiplier(conf)), min_m)
    upper = max(scale_amount(base(cfg.upper_percentile), upper_multiplier(conf)), min_m)
    return target, lower, upper


def post_process(target_m: int, lower_m: int, upper_m: int, cfg: RecommenderConfig) -> Recommendation:
    """Round (``--round-cpu-millicores``), integer-CPU, then cap: the order upstream applies them."""
    step = cfg.round_cpu_millicores
    target_m, lower_m, upper_m = (round_up_to_scale(x, step) for x in (target_m, lower_m, upper_m))
    uncapped = target_m
    if cfg.integer_cpu:
        target_m, lower_m, upper_m, uncapped = (integer_cpu(x) for x in (target_m, lower_m, upper_m, uncapped))
    lo, hi = cfg.min_allowed_millicores, cfg.max_allowed_millicores
    return Recommendation(cap_to_policy(target_m, lo, hi), cap_to_policy(lower_m, lo, hi),
                          cap_to_policy(upper_m, lo, hi), uncapped)


def recommend(state: AggregateState, cfg: RecommenderConfig, n_containers: int = 1) -> Recommendation:
    """The CPU recommendation written to the VPA status for one container."""
    return post_process(*raw_estimate(state, cfg, n_containers), cfg)


def config_from_scenario(vpa: dict) -> RecommenderConfig:
    """Build a :class:`RecommenderConfig` from a validated ``[vpa]`` section."""
    def m(key: str) -> int | None:
        v = vpa.get(key)
        return None if v is None else cores_to_millicores(v)

    return RecommenderConfig(
        target_percentile=vpa.get("target_percentile", 0.9),
        lower_percentile=vpa.get("lower_percentile", 0.5),
        upper_percentile=vpa.get("upper_percentile", 0.95),
        margin_fraction=vpa.get("margin_fraction", 0.15),
        pod_min_cpu_millicores=vpa.get("pod_min_cpu_millicores", 25.0),
        half_life_s=vpa.get("half_life_s", 86400.0),
        confidence_interval_s=vpa.get("confidence_interval_s", 86400.0),
        round_cpu_millicores=vpa.get("round_cpu_millicores", 1),
        integer_cpu=vpa.get("integer_cpu", False),
        min_allowed_millicores=m("min_allowed_cores"),
        max_allowed_millicores=m("max_allowed_cores"),
    )


def metrics_server_points(points: list[tuple[float, float]], window_s: float,
                          offset_s: float = 0.0) -> list[tuple[float, float]]:
    """Emulate metrics-server over a finer usage trace: the mean of the readings whose timestamps fall
    in each window ``(offset + k W, offset + (k+1) W]``, stamped at the window's END (as
    ``PodMetrics.timestamp``). Windows without readings produce no point."""
    if window_s <= 0:
        raise ValueError("window_s must be > 0")
    out: list[tuple[float, float]] = []
    cur_k: int | None = None
    acc = 0.0
    n = 0
    for ts, v in sorted(points):
        k = math.ceil((ts - offset_s) / window_s - 1e-9)
        if cur_k is not None and k != cur_k:
            out.append((offset_s + cur_k * window_s, acc / n))
            acc, n = 0.0, 0
        cur_k = k
        acc += v
        n += 1
    if cur_k is not None and n:
        out.append((offset_s + cur_k * window_s, acc / n))
    return out


def replay(series: dict[str, list[tuple[float, float]]], cfg: RecommenderConfig | None = None,
           loop_interval_s: float = 60.0) -> list[dict]:
    """Run the recommender loop over usage histories ``{container: [(timestamp_s, cores), ...]}``.

    Each point is a metrics-server reading stamped at the end of its window. The loop fires every
    ``loop_interval_s`` from the earliest timestamp until one firing at or after the latest; at each
    firing it takes every container's latest point at or before that time, keeps it only if its
    timestamp is strictly later than that container's last kept one (all containers feed one
    aggregate histogram), and writes one recommendation (millicores).
    """
    cfg = cfg or RecommenderConfig()
    series = {k: sorted(v) for k, v in series.items() if v}
    if not series:
        return []
    state = AggregateState.new(cfg.half_life_s, cfg.histogram)
    samplers = {k: ContainerSampler() for k in series}
    pos = {k: 0 for k in series}
    latest: dict[str, tuple[float, float]] = {}
    t_loop = min(v[0][0] for v in series.values())
    t_end = max(v[-1][0] for v in series.values())
    out: list[dict] = []
    while True:
        for name, pts in series.items():
            i = pos[name]
            while i < len(pts) and pts[i][0] <= t_loop + 1e-9:
                latest[name] = pts[i]
                i += 1
            pos[name] = i
            if name in latest and samplers[name].accept(latest[name][0]):
                state.add_cpu_sample(latest[name][1], latest[name][0])
        rec = recommend(state, cfg)
        out.append({"timestamp_s": t_loop, "samples": state.total_samples, **rec.as_dict()})
        if t_loop >= t_end - 1e-9:
            break
        t_loop += loop_interval_s
    return out


def replay_points(points: list[tuple[float, float]], cfg: RecommenderConfig | None = None,
                  loop_interval_s: float = 60.0) -> list[dict]:
    """:func:`replay` for one container's ``(timestamp_s, usage_cores)`` points."""
    return replay({"container": list(points)}, cfg, loop_interval_s)
