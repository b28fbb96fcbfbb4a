"""The long-horizon engine: days of simulated time with the VPA (1-min loop) and HPA (15 s).

Why a second engine: the event engine (:mod:`cfsim.simulation`) resolves every CFS period and Go
scheduling event, which is right for seconds to minutes; the VPA acts over hours to days. This
engine steps a fluid model (``vpa.step_s``, 15 s by default) in which each pod's behaviour under its
(CPU limit, GOMAXPROCS, offered demand) comes from a **pod response function**::

    response(limit_cores, gomaxprocs, demand_cores) -> (usage_cores, throughput_per_s, throttled_ratio)

:mod:`cfsim.engine.response` has the response functions (analytic, or measured with the event
engine and cached) and :func:`~cfsim.engine.response.response_for`, which picks one.

Per step, each pod gets its replica share of the arrivals plus its backlog as
offered demand; the response gives usage and completions; the backlog carries the rest (it follows
the slot, i.e. the partitions, across pod re-creations). metrics-server averages each pod's usage
over ``vpa.metrics_window_s`` and stamps the END of the window; a new pod has a point only after a
full window. Every ``vpa.sample_interval_s`` the recommender (:class:`cfsim.autoscalers.vpa_controller.VpaController`) takes each pod's latest point under the
strictly-later rule into the shared aggregate histogram and writes a
recommendation; every ``vpa.updater_interval_s`` the updater applies the candidate rules, the
min-replicas rule and the disruption budget, and either re-creates the pod (admission applies the
target and the proportional limit to the TEMPLATE; the new process picks GOMAXPROCS at start) or
resizes it in place (GOMAXPROCS changes only under the go1.25 policy). The HPA runs every
``hpa.sync_period_s`` on the same metrics-server points. Time resolution is ``vpa.step_s``: a go1.25
GOMAXPROCS re-read (within 1 s of an in-place resize) takes effect from the next step.
Lag is the age of the oldest unconsumed item (FIFO): the ``lag`` with arrivals in (t - lag, t] equal
to the backlog. ``workload.rate_per_s`` is ONE replica's share at the initial replica count (total
arrivals = rate x ``vpa.replicas``), so "the pod needs 1.7 cores" reads directly.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from cfsim.autoscalers.hpa import (HpaState, PodMetric, ScalingPolicy, ScalingRules, Tolerance, reconcile)
from cfsim.autoscalers.vpa_admission import Resources
from cfsim.autoscalers.vpa_controller import PodView, VpaController
from cfsim.autoscalers.vpa_memory import (MemoryAggregate, MemoryContainer, MemoryRecommendation,
                                          MemoryRecommenderConfig, admit_memory, memory_config_from_scenario,
                                          memory_priority, recommend_memory)
from cfsim.autoscalers.vpa_updater import quick_oom
from cfsim.autoscalers.vpa_recommender import (RecommenderConfig, amount_from_float, config_from_scenario,
                                               cores_to_millicores)
from cfsim.engine.response import ResponseFn, response_for, work_shape
from cfsim.goruntime.gomaxprocs import container_aware, gomaxprocs_value
from cfsim.scenario import Scenario, ScenarioError
from cfsim.workloads.arrivals import parse_rate


def nominal_demand_cores(sc: Scenario) -> float:
    """CPU one replica needs: at the nominal arrival rate (analytic: rate x CPU per item), or what
    the workload itself offers (threads, closed-loop clients)."""
    shape = work_shape(sc)
    if not shape.rate_driven:
        return shape.fixed_demand_cores
    return parse_rate(sc["workload.rate_per_s"]).nominal_rate_per_s() * shape.cpu_s_per_item


@dataclass(frozen=True)
class LongrunParams:
    """Everything the engine reads from a scenario, in engine units."""

    duration_s: float
    step_s: float
    start_unix_s: float
    cpus: int
    policy: Any
    round_mode: str
    go_version: str
    period_us: int
    replicas: int
    pod_startup_s: float
    report_interval_s: float
    vpa_enabled: bool
    update_mode: str
    controlled_values: str
    template: Resources
    rec_cfg: RecommenderConfig
    sample_interval_s: float
    updater_interval_s: float
    metrics_window_s: float
    eviction_lifetime_s: float
    update_threshold: float
    eviction_tolerance: float
    min_replicas: int
    hpa_enabled: bool
    hpa_target_pct: int
    hpa_min: int
    hpa_max: int
    hpa_tolerance: float
    hpa_sync_s: float
    hpa_up: ScalingRules | None
    hpa_down: ScalingRules | None
    # memory (issue 19): modelled when the pod has a memory limit or the VPA controls memory
    mem_enabled: bool = False
    mem_control: bool = False
    mem_request_b: int | None = None
    mem_limit_b: int | None = None
    mem_cfg: MemoryRecommenderConfig = MemoryRecommenderConfig()


MiB = 1 << 20
#: kubelet CrashLoopBackOff (pkg/kubelet: backOffPeriod 10 s, doubling, MaxContainerBackOff 300 s),
#: reset once a container has run for 10 minutes
RESTART_BACKOFF_S = 10.0
RESTART_BACKOFF_MAX_S = 300.0
RESTART_BACKOFF_RESET_S = 600.0


def _steps(name: str, interval_s: float, step_s: float) -> int:
    k = interval_s / step_s
    if k < 1 - 1e-9 or abs(k - round(k)) > 1e-6:
        raise ScenarioError(name, f"must be a multiple of vpa.step_s={step_s} (got {interval_s})")
    return int(round(k))


def params_from_scenario(sc: Scenario) -> LongrunParams:
    vpa, hpa = sc.section("vpa"), sc.section("hpa")
    duration = vpa["days"] * 86400.0 if vpa.get("days") else sc["run.duration_s"]
    if vpa["enabled"]:  # the pod template the VPA starts from
        req_m = cores_to_millicores(vpa["initial_request_cores"])
        ratio = vpa["limit_to_request_ratio"]
        lim_m = None if not ratio else int(math.floor(req_m * ratio + 1e-6))
    else:  # no VPA: the pod runs with [cgroup] cpu_limit (request = limit, like the event engine)
        lim = sc["cgroup.cpu_limit"]
        lim_m = None if lim is None else cores_to_millicores(lim)
        req_m = lim_m if lim_m is not None else cores_to_millicores(vpa["initial_request_cores"])
    if vpa.get("min_allowed_cores") and vpa.get("max_allowed_cores") and \
            vpa["min_allowed_cores"] > vpa["max_allowed_cores"]:
        raise ScenarioError("vpa.min_allowed_cores", f"must be <= vpa.max_allowed_cores={vpa['max_allowed_cores']}")
    if hpa["min_replicas"] > hpa["max_replicas"]:
        raise ScenarioError("hpa.min_replicas", f"must be <= hpa.max_replicas={hpa['max_replicas']}")
    if hpa["behavior"]:
        up = ScalingRules(hpa["upscale_stabilization_s"],
                          (ScalingPolicy("Pods", hpa["scale_up_pods"], hpa["policy_period_s"]),
                           ScalingPolicy("Percent", hpa["scale_up_percent"], hpa["policy_period_s"])),
                          hpa["select_policy"])
        down = ScalingRules(hpa["downscale_stabilization_s"],
                            (ScalingPolicy("Percent", hpa["scale_down_percent"], hpa["policy_period_s"]),),
                            hpa["select_policy"])
    else:
        up = down = None
    p = LongrunParams(
        duration_s=duration, step_s=vpa["step_s"], start_unix_s=vpa["start_unix_s"], cpus=sc["host.cpus"],
        policy=sc["go.gomaxprocs"], round_mode=sc["go.round"], go_version=sc["go.version"],
        period_us=sc["cgroup.period_us"], replicas=vpa["replicas"],
        pod_startup_s=vpa["pod_startup_s"], report_interval_s=vpa["report_interval_s"],
        vpa_enabled=vpa["enabled"], update_mode=vpa["update_mode"], controlled_values=vpa["controlled_values"],
        template=Resources(req_m, lim_m), rec_cfg=config_from_scenario(vpa),
        sample_interval_s=vpa["sample_interval_s"], updater_interval_s=vpa["updater_interval_s"],
        metrics_window_s=vpa["metrics_window_s"], eviction_lifetime_s=vpa["eviction_lifetime_s"],
        update_threshold=vpa["update_threshold"], eviction_tolerance=vpa["eviction_tolerance"],
        min_replicas=vpa["min_replicas"], hpa_enabled=hpa["enabled"],
        hpa_target_pct=hpa["target_utilization_pct"], hpa_min=hpa["min_replicas"], hpa_max=hpa["max_replicas"],
        hpa_tolerance=hpa["tolerance"], hpa_sync_s=hpa["sync_period_s"], hpa_up=up, hpa_down=down,
        **_memory_params(sc))
    for name, val in (("vpa.metrics_window_s", p.metrics_window_s), ("vpa.sample_interval_s", p.sample_interval_s),
                      ("vpa.updater_interval_s", p.updater_interval_s), ("hpa.sync_period_s", p.hpa_sync_s)):
        _steps(name, val, p.step_s)
    return p


def _memory_params(sc: Scenario) -> dict[str, Any]:
    """The pod template's memory (``cgroup.memory_request_mb``/``memory_limit_mb``; request =
    limit when only the limit is given) and the VPA's memory path."""
    vpa = sc.section("vpa")
    lim, req = sc["cgroup.memory_limit_mb"], sc["cgroup.memory_request_mb"]
    control = bool(vpa["enabled"] and vpa["control_memory"])
    if req is None:
        req = lim
    return {"mem_enabled": lim is not None or control, "mem_control": control,
            "mem_request_b": None if req is None else int(req * MiB),
            "mem_limit_b": None if lim is None else int(lim * MiB),
            "mem_cfg": memory_config_from_scenario(vpa)}


@dataclass
class Pod:
    """One running pod (one container) as the long-horizon engine tracks it."""

    uid: int
    slot: int
    request_m: int | None
    limit_m: int | None
    gomaxprocs: int
    created_s: float
    ready_s: float
    window: list[float] = field(default_factory=list)  # step usages of the current metrics window
    metric: tuple[float, float] | None = None  # latest metrics-server point (timestamp_s, usage_cores)
    # memory
    mem_request_b: int | None = None
    mem_limit_b: int | None = None
    working_set_b: float | None = None   # the container's working set in the last step (None while down)
    container_start_s: float = 0.0       # start of the current container (restarts after an OOM kill)
    restarts: int = 0
    backoff_s: float = 0.0
    last_oom_ran_s: float | None = None  # how long the last OOM-killed container had run
    metrics_from_s: float = -math.inf    # a restarted container has metrics a full window after it starts
    mem_state: MemoryContainer | None = None

    @property
    def limit_cores(self) -> float | None:
        return None if self.limit_m is None else self.limit_m / 1000.0


@dataclass
class LongrunResult:
    """Per-minute rows, the report timeline, the final state and the autoscaler events."""

    rows: list[dict[str, Any]]
    timeline: list[dict[str, Any]]
    final: dict[str, Any]
    events: list[dict[str, Any]]
    response: str
    wall_s: float


MEMORY_ROW_KEYS = ("memory_request_mb", "memory_limit_mb", "working_set_mb", "oom_kills", "restarts",
                   "vpa_memory_target_mb", "vpa_memory_lower_mb", "vpa_memory_upper_mb")


def _pod_gomaxprocs(p: LongrunParams, limit_m: int | None) -> int:
    """GOMAXPROCS a process picks at (re)start under the scenario's policy (cfsim.goruntime)."""
    return gomaxprocs_value(p.policy, None if limit_m is None else limit_m / 1000.0, p.cpus, p.go_version,
                            p.round_mode, p.period_us)


def _gomaxprocs_after_resize(p: LongrunParams, current: int, limit_m: int | None) -> int:
    """After an in-place resize only the container-aware go1.25 runtime follows (within 1 s)."""
    if container_aware(p.policy, p.go_version):
        return _pod_gomaxprocs(p, limit_m)
    return current


def run_longrun(sc: Scenario, response: ResponseFn | None = None, response_mode: str = "auto",
                interventions: list[tuple[float, str, Any]] | None = None,
                simulate_fn: Callable[[Scenario], Any] | None = None,
                memory_response=None) -> LongrunResult:
    """Simulate ``sc`` for ``vpa.days`` (or ``run.duration_s``) with the VPA/HPA loops.

    ``response``: the pod response function; without it, :func:`~cfsim.engine.response.response_for`
    builds one in ``response_mode``, measuring with ``simulate_fn`` (the event engine,
    :func:`cfsim.simulation.simulate`) unless the mode is ``"analytic"``.

    ``interventions``: ``[(t_s, "vpa.min_allowed_cores" | "vpa.max_allowed_cores" | "vpa.integer_cpu", value)]``
    changes of the VPA policy during the run (e.g. a manual override).

    Memory (when the pod has a memory limit or ``vpa.control_memory``): each pod's working set,
    the effect of its memory limit on throughput and CPU, and OOM kills come from
    ``memory_response(limit_bytes, demand_cores)`` (:mod:`cfsim.engine.memresponse`, measured
    with the event engine under the scenario's GOMEMLIMIT policy, e.g. automemlimit); an
    OOM-killed container restarts after the kubelet's back-off; the recommender adds one
    working-set sample per pod per loop and each OOM kill (``RecordOOM``), and the updater sums the
    memory terms into its priority. Memory changes apply by re-creating the pod (automemlimit
    reads the limit at start-up only).
    """
    import time as _time

    wall0 = _time.perf_counter()
    p = params_from_scenario(sc)
    shape = work_shape(sc)
    demand0 = nominal_demand_cores(sc)
    resp = response if response is not None else response_for(sc, response_mode, demand0,
                                                              simulate_fn=simulate_fn)
    fixed_demand = not shape.rate_driven  # the workload (threads, clients), not an arrival rate, sets it
    arrivals = None if fixed_demand else parse_rate(sc["workload.rate_per_s"])
    cpu_s = shape.cpu_s_per_item
    dt = p.step_s
    n_steps = max(1, int(round(p.duration_s / dt)))
    k_window = _steps("vpa.metrics_window_s", p.metrics_window_s, dt)
    k_rec = _steps("vpa.sample_interval_s", p.sample_interval_s, dt)
    k_upd = _steps("vpa.updater_interval_s", p.updater_interval_s, dt)
    k_hpa = _steps("hpa.sync_period_s", p.hpa_sync_s, dt)
    k_row = max(1, int(round(60.0 / dt)))
    k_report = max(1, int(round(p.report_interval_s / dt)))
    vpa = VpaController(cfg=p.rec_cfg, update_mode=p.update_mode, controlled_values=p.controlled_values,
                        template=p.template, eviction_lifetime_s=p.eviction_lifetime_s,
                        update_threshold=p.update_threshold, eviction_tolerance=p.eviction_tolerance,
                        min_replicas=p.min_replicas, start_unix_s=p.start_unix_s, max_request_m=p.cpus * 1000)
    mresp = None
    if p.mem_enabled:
        if memory_response is None:
            from cfsim.engine.memresponse import memory_response_for
            if simulate_fn is None:
                raise ValueError("a pod with a memory limit (or vpa.control_memory) needs its memory response: pass "
                                 "memory_response, or simulate_fn=cfsim.simulation.simulate to measure it")
            memory_response = memory_response_for(sc, demand0, simulate_fn)
        mresp = memory_response
    mem_agg = MemoryAggregate.new(p.mem_cfg)
    mem_rec: MemoryRecommendation | None = None
    oom_events: list[tuple[float, Pod]] = []   # OOM kills since the last recommender loop
    oom_total = 0
    hpa_state = HpaState()
    pending_iv = sorted(interventions or [], key=lambda x: x[0])

    uid = 0
    pods: list[Pod] = []
    replicas = p.replicas

    def new_pod(slot: int, now: float, first: bool = False) -> Pod:
        nonlocal uid
        uid += 1
        res = vpa.admit() if p.vpa_enabled else p.template
        startup = 0.0 if first else p.pod_startup_s
        created = now - p.metrics_window_s if first else now  # initial pods have run before t=0
        mreq, mlim = p.mem_request_b, p.mem_limit_b
        if p.mem_control and p.update_mode != "Off":
            mreq, mlim = admit_memory(mem_rec, p.controlled_values, mreq, mlim)
        return Pod(uid, slot, res.request_m, res.limit_m, _pod_gomaxprocs(p, res.limit_m), created, now + startup,
                   mem_request_b=mreq, mem_limit_b=mlim, container_start_s=now + startup,
                   mem_state=MemoryContainer(p.mem_cfg))

    for s in range(replicas):
        pods.append(new_pod(s, 0.0, first=True))
    backlog = [float(sc["workload.initial_backlog"]) if not fixed_demand else 0.0 for _ in range(replicas)]

    rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    acc_usage = acc_tput = acc_arr = acc_thr = 0.0
    acc_n = 0
    cum_arrivals = 0.0  # items arrived since t = 0 (all replicas)
    cum_t: list[float] = [0.0]  # history for the lag: (time, cumulative arrivals) at each row
    cum_c: list[float] = [0.0]
    updates = 0
    memo: dict[tuple, tuple[float, float, float]] = {}

    def respond(limit: float | None, gmp: int, dem: float) -> tuple[float, float, float]:
        key = (limit, gmp, dem)
        out = memo.get(key)
        if out is None:
            out = resp(limit, gmp, dem)
            if len(memo) < 100_000:
                memo[key] = out
        return out

    for k in range(1, n_steps + 1):
        t = k * dt
        while pending_iv and pending_iv[0][0] <= t - dt + 1e-9:
            _, key, value = pending_iv.pop(0)
            field_name = {"vpa.min_allowed_cores": "min_allowed_millicores",
                          "vpa.max_allowed_cores": "max_allowed_millicores",
                          "vpa.integer_cpu": "integer_cpu"}[key]
            if field_name.endswith("millicores"):
                value = None if value is None else cores_to_millicores(value)
            vpa.set_policy(**{field_name: value})
            events.append({"t_s": t - dt, "kind": "intervention", "key": key, "value": value})
        # ---- 1. the pods over (t - dt, t]
        n_slots = len(backlog)
        step_usage = step_tput = step_thr = 0.0
        if arrivals is not None:
            rate_slot = arrivals.rate(t - 0.5 * dt) * p.replicas / n_slots
        else:
            rate_slot = 0.0
        for pod in pods:
            active = (t - pod.ready_s) / dt
            active = 0.0 if active <= 0 else (1.0 if active >= 1 else active)
            usage = 0.0
            if fixed_demand:
                if active > 0:
                    u, tp, thr = respond(pod.limit_cores, pod.gomaxprocs, round(demand0, 9))
                    usage, step_tput_pod, thr = u * active, tp * active, thr
                    step_tput += step_tput_pod
                    step_thr += thr
            else:
                work = backlog[pod.slot] + rate_slot * dt
                if active > 0 and work > 0:
                    offered = work * cpu_s / (active * dt)
                    u, tp, thr = respond(pod.limit_cores, pod.gomaxprocs, round(offered, 9))
                    if mresp is not None:
                        mp = mresp(pod.mem_limit_b, offered)
                        pod.working_set_b = mp.working_set_bytes
                        if mp.oom:
                            # the kernel kills the container; the kubelet restarts it after its back-off
                            oom_total += 1
                            oom_events.append((t, pod))
                            ran = t - pod.container_start_s
                            pod.last_oom_ran_s = ran
                            if ran >= RESTART_BACKOFF_RESET_S:
                                pod.backoff_s = 0.0
                            pod.backoff_s = min(RESTART_BACKOFF_MAX_S, max(RESTART_BACKOFF_S, 2 * pod.backoff_s))
                            pod.restarts += 1
                            pod.ready_s = t + pod.backoff_s + p.pod_startup_s
                            pod.container_start_s = pod.ready_s
                            pod.working_set_b = None
                            # the dead container has no metrics; the next point covers the new one
                            pod.metrics_from_s = pod.ready_s
                            pod.metric = None
                            events.append({"t_s": t, "kind": "oom", "pod": pod.uid,
                                           "memory_limit_mb": None if pod.mem_limit_b is None else
                                           pod.mem_limit_b / MiB, "restart_in_s": pod.backoff_s})
                            u = tp = 0.0
                        else:
                            u, tp = u * mp.usage_factor, tp * mp.tput_factor
                    done = min(work, tp * active * dt)
                    usage = u * active
                    step_tput += done / dt
                    step_thr += thr * active
                    rest = work - done
                    backlog[pod.slot] = rest if rest > 1e-6 else 0.0  # no float dust
                else:
                    backlog[pod.slot] = work
            step_usage += usage
            pod.window.append(usage)
        # slots without a pod (scale-down in progress) keep accumulating
        if arrivals is not None:
            covered = {pod.slot for pod in pods}
            for s in range(n_slots):
                if s not in covered:
                    backlog[s] += rate_slot * dt
        npods = max(1, len(pods))
        acc_usage += step_usage / npods
        acc_tput += step_tput
        acc_thr += step_thr / npods
        acc_arr += rate_slot * n_slots
        cum_arrivals += rate_slot * n_slots * dt
        acc_n += 1
        # ---- 2. metrics-server scrape (mean usage over the window, stamped at its end)
        if k % k_window == 0:
            for pod in pods:
                if max(pod.created_s, pod.metrics_from_s) <= t - p.metrics_window_s + 1e-9 and pod.window:
                    pod.metric = (t, sum(pod.window) / len(pod.window))
                pod.window = []
        # ---- 3. recommender loop
        if p.vpa_enabled and k % k_rec == 0:
            vpa.recommender_loop(t, {pod.uid: pod.metric for pod in pods if pod.metric is not None})
            if p.mem_control:
                ts = p.start_unix_s + t
                for pod in pods:
                    if pod.working_set_b is not None and pod.mem_state is not None:
                        pod.mem_state.add_sample(mem_agg, ts, int(pod.working_set_b))
                for t_oom, pod in oom_events:
                    if pod.mem_state is not None:
                        pod.mem_state.record_oom(mem_agg, p.start_unix_s + t_oom, pod.mem_request_b or 0)
                oom_events.clear()
                st = vpa.state
                # no recommendation at all until the container has CPU samples: TotalSamplesCount
                # counts CPU samples only (kubernetes/autoscaler#4981: a pod OOM-killed right after
                # every start never gets one)
                mem_rec = None if not st.total_samples else recommend_memory(
                    mem_agg, p.mem_cfg, st.first_sample_s, st.last_sample_s, st.total_samples)
        # ---- 4. updater loop
        if p.vpa_enabled and k % k_upd == 0:
            views = [PodView(pod.uid, pod.request_m, pod.limit_m, pod.created_s) for pod in pods]
            memory_terms = None
            if p.mem_control and mem_rec is not None:
                by_uid = {pod.uid: pod for pod in pods}

                def pod_memory_terms(view: PodView) -> tuple[bool, bool, float, bool]:
                    pd = by_uid[view.uid]
                    out_, up_, diff_ = memory_priority(pd.mem_request_b, mem_rec)
                    qoom = pd.last_oom_ran_s is not None and quick_oom(True, pd.last_oom_ran_s)
                    return out_, up_, diff_, qoom
                memory_terms = pod_memory_terms
            for act in vpa.updater_loop(t, views, replicas, memory=memory_terms):
                idx = next(i for i, pod in enumerate(pods) if pod.uid == act.uid)
                pod = pods[idx]
                updates += 1
                old = (pod.request_m, pod.limit_m, pod.gomaxprocs)
                if act.kind == "resize":
                    pod.request_m, pod.limit_m = act.resources.request_m, act.resources.limit_m
                    pod.gomaxprocs = _gomaxprocs_after_resize(p, pod.gomaxprocs, pod.limit_m)
                    events.append({"t_s": t, "kind": "resize", "pod": pod.uid, "reason": act.reason,
                                   "from": old, "to": (pod.request_m, pod.limit_m, pod.gomaxprocs)})
                    continue
                fresh = new_pod(pod.slot, t)
                vpa.forget(pod.uid)
                pods[idx] = fresh
                events.append({"t_s": t, "kind": "evict", "pod": pod.uid, "new_pod": fresh.uid, "reason": act.reason,
                               "from": old, "to": (fresh.request_m, fresh.limit_m, fresh.gomaxprocs)})
        # ---- 5. HPA
        if p.hpa_enabled and k % k_hpa == 0:
            metrics = [PodMetric(request_m=pod.request_m or 0,
                                 usage_m=None if pod.metric is None else amount_from_float(pod.metric[1] * 1000.0),
                                 ready=t >= pod.ready_s, start_s=pod.created_s,
                                 ready_transition_s=pod.ready_s if t >= pod.ready_s else pod.created_s,
                                 metric_timestamp_s=pod.metric[0] if pod.metric else 0.0,
                                 metric_window_s=p.metrics_window_s) for pod in pods]
            new_n, _util = reconcile(hpa_state, t, metrics, replicas, p.hpa_target_pct, p.hpa_min, p.hpa_max,
                                     Tolerance(p.hpa_tolerance, p.hpa_tolerance), p.hpa_up, p.hpa_down)
            if new_n != replicas:
                events.append({"t_s": t, "kind": "hpa", "from": replicas, "to": new_n})
                total_backlog = sum(backlog)
                if new_n > replicas:
                    for s in range(replicas, new_n):
                        pods.append(new_pod(s, t))
                else:
                    for pod in pods:
                        if pod.slot >= new_n:
                            vpa.forget(pod.uid)
                    pods = [pod for pod in pods if pod.slot < new_n]
                replicas = new_n
                backlog = [total_backlog / new_n] * new_n
        # ---- 6. rows
        if k % k_row == 0 or k == n_steps:
            total_backlog = sum(backlog)
            arr_now = acc_arr / acc_n
            lag_s = _fifo_lag_s(t, cum_arrivals, total_backlog, cum_t, cum_c, arr_now)
            cum_t.append(t)
            cum_c.append(cum_arrivals)
            live = pods or []
            rec = vpa.recommendation if p.vpa_enabled else None
            row = {
                "t_s": t, "t_h": t / 3600.0, "replicas": replicas,
                "request_cores": _mean([pd.request_m / 1000.0 for pd in live if pd.request_m is not None]),
                "limit_cores": _mean([pd.limit_m / 1000.0 for pd in live if pd.limit_m is not None]),
                "gomaxprocs": min((pd.gomaxprocs for pd in live), default=0),
                "usage_cores": acc_usage / acc_n, "throughput_per_s": acc_tput / acc_n,
                "arrival_per_s": arr_now, "lag_s": lag_s, "backlog_items": total_backlog,
                "throttled_ratio": acc_thr / acc_n,
                "vpa_target_cores": None if rec is None else rec.target / 1000.0,
                "vpa_lower_cores": None if rec is None else rec.lower_bound / 1000.0,
                "vpa_upper_cores": None if rec is None else rec.upper_bound / 1000.0,
                "updates": updates,
            }
            if p.mem_enabled:
                mlim = [pd.mem_limit_b / MiB for pd in live if pd.mem_limit_b is not None]
                mreq = [pd.mem_request_b / MiB for pd in live if pd.mem_request_b is not None]
                wss = [pd.working_set_b / MiB for pd in live if pd.working_set_b is not None]
                row.update({"memory_request_mb": _mean(mreq), "memory_limit_mb": _mean(mlim),
                            "working_set_mb": _mean(wss), "oom_kills": oom_total,
                            "restarts": sum(pd.restarts for pd in live),
                            "vpa_memory_target_mb": None if mem_rec is None else mem_rec.target / MiB,
                            "vpa_memory_lower_mb": None if mem_rec is None else mem_rec.lower_bound / MiB,
                            "vpa_memory_upper_mb": None if mem_rec is None else mem_rec.upper_bound / MiB})
            rows.append(row)
            acc_usage = acc_tput = acc_arr = acc_thr = 0.0
            acc_n = 0
    timeline = _subsample(rows, k_report * dt)
    final = _final(rows)
    if p.mem_enabled and rows:
        final.update({k: rows[-1].get(k) for k in MEMORY_ROW_KEYS})
    describe = getattr(resp, "describe", type(resp).__name__)
    if mresp is not None:
        describe += "; " + getattr(mresp, "describe", "memory response")
    return LongrunResult(rows, timeline, final, events, describe, _time.perf_counter() - wall0)


def _fifo_lag_s(t: float, cum_now: float, backlog: float, cum_t: list[float], cum_c: list[float],
                rate_now: float) -> float:
    """Consumer lag as the age of the oldest unconsumed item (FIFO): the ``lag`` with
    ``arrivals(t - lag, t] = backlog``; items older than t = 0 (``initial_backlog``) extend it at
    the current rate."""
    if backlog <= 0:
        return 0.0
    target = cum_now - backlog  # cumulative count when the oldest waiting item arrived
    if target < 0:
        return t + (-target / rate_now if rate_now > 0 else math.inf)
    if target >= cum_c[-1]:  # within the current row interval
        rate = (cum_now - cum_c[-1]) / (t - cum_t[-1]) if t > cum_t[-1] else 0.0
        return (cum_now - target) / rate if rate > 0 else math.inf
    i = bisect.bisect_right(cum_c, target) - 1
    c0, c1 = cum_c[i], cum_c[i + 1]
    t0, t1 = cum_t[i], cum_t[i + 1]
    t_old = t0 if c1 <= c0 else t0 + (t1 - t0) * (target - c0) / (c1 - c0)
    return t - t_old


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _subsample(rows: list[dict[str, Any]], every_s: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    next_t = 0.0
    for i, r in enumerate(rows):
        if r["t_s"] + 1e-9 >= next_t or i == len(rows) - 1:
            out.append(r)
            next_t = (math.floor(r["t_s"] / every_s + 1e-9) + 1) * every_s
    if rows and out[-1] is not rows[-1]:
        out.append(rows[-1])
    return out


def lag_trend_s_per_h(rows: list[dict[str, Any]], span_s: float | None = None) -> float:
    """Least-squares slope of lag over the last ``span_s`` (default: 24 h or the last quarter)."""
    if len(rows) < 2:
        return 0.0
    t_end = rows[-1]["t_s"]
    span = span_s if span_s is not None else min(86400.0, max(rows[-1]["t_s"] / 4.0, 60.0))
    pts = [(r["t_s"], r["lag_s"]) for r in rows if r["t_s"] >= t_end - span and math.isfinite(r["lag_s"])]
    if len(pts) < 2:
        return 0.0
    n = len(pts)
    mt = sum(x for x, _ in pts) / n
    ml = sum(y for _, y in pts) / n
    var = sum((x - mt) ** 2 for x, _ in pts)
    if var == 0:
        return 0.0
    return sum((x - mt) * (y - ml) for x, y in pts) / var * 3600.0


def _final(rows: list[dict[str, Any]]) -> dict[str, Any]:
    if not rows:
        return {}
    last = rows[-1]
    hour = [r for r in rows if r["t_s"] > last["t_s"] - 3600.0 - 1e-9]
    trend = lag_trend_s_per_h(rows)
    return {
        "t_s": last["t_s"], "replicas": last["replicas"],
        "request_cores": last["request_cores"], "limit_cores": last["limit_cores"],
        "gomaxprocs": last["gomaxprocs"],
        "usage_cores": sum(r["usage_cores"] for r in hour) / len(hour),
        "throughput_per_s": sum(r["throughput_per_s"] for r in hour) / len(hour),
        "arrival_per_s": sum(r["arrival_per_s"] for r in hour) / len(hour),
        "throttled_ratio": sum(r["throttled_ratio"] for r in hour) / len(hour),
        "lag_s": last["lag_s"], "lag_trend_s_per_h": trend,
        # growing: the lag rises by more than 1% of elapsed time (36 s per hour)
        "lag_growing": trend > 36.0,
        "vpa_target_cores": last["vpa_target_cores"], "vpa_lower_cores": last["vpa_lower_cores"],
        "vpa_upper_cores": last["vpa_upper_cores"], "updates": last["updates"],
    }
