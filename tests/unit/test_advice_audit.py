"""Reading and flag rules of the audit on hand-made series (no simulation)."""
import numpy as np

from cfsim.advice.audit import analyse, containers_from_frame
from cfsim.io.labels import format_labels
from cfsim.io.tidy import make_frame

T0_MS = 1_767_225_600_000


def _frame(series):
    """series: list of (metric, labels dict, values per 15 s step)."""
    ts, ms, ls, vs = [], [], [], []
    for metric, labels, values in series:
        n = len(values)
        ts.append(T0_MS + 15_000 * np.arange(n))
        ms += [metric] * n
        ls += [format_labels(labels)] * n
        vs.append(np.asarray(values, dtype=float))
    return make_frame(np.concatenate(ts), ms, ls, np.concatenate(vs))


def _pod(ns, pod, container, usage_cores, limit, gomaxprocs=None, throttled=0.0, n=40, pod_name_labels=False):
    lab = ({"namespace": ns, "pod_name": pod, "container_name": container} if pod_name_labels
           else {"namespace": ns, "pod": pod, "container": container})
    periods = np.arange(n) * 150.0                      # 10 periods/s, 15 s steps
    out = [("container_cpu_usage_seconds_total", {**lab, "id": "/kubepods/x"}, np.arange(n) * 15 * usage_cores),
           ("container_cpu_cfs_periods_total", lab, periods),
           ("container_cpu_cfs_throttled_periods_total", lab, periods * throttled),
           ("container_cpu_cfs_throttled_seconds_total", lab, np.arange(n) * 15 * throttled * 0.5),
           ("kube_pod_container_resource_limits", {"namespace": ns, "pod": pod, "container": container,
                                                   "resource": "cpu", "unit": "core"}, [limit] * n),
           ("kube_pod_container_resource_limits", {"namespace": ns, "pod": pod, "container": container,
                                                   "resource": "memory", "unit": "byte"}, [2 ** 30] * n)]
    if gomaxprocs is not None:
        out.append(("go_sched_gomaxprocs_threads", {"namespace": ns, "pod": pod, "job": "app"}, [gomaxprocs] * n))
    return out


def test_grouping_skips_pod_cgroup_and_pause_and_matches_gomaxprocs():
    series = (_pod("a", "p1", "app", 1.0, 1.5, gomaxprocs=1)
              + _pod("a", "p2", "app", 0.3, 2.0, gomaxprocs=2, pod_name_labels=True)
              + [("container_cpu_usage_seconds_total", {"namespace": "a", "pod": "p1", "container": ""},
                  np.arange(40) * 20.0),
                 ("container_cpu_usage_seconds_total", {"namespace": "a", "pod": "p1", "container": "POD"},
                  np.arange(40) * 0.01)])
    cs = {c.name: c for c in containers_from_frame(_frame(series))}
    assert sorted(cs) == ["a/p1/app", "a/p2/app"]
    c = cs["a/p1/app"]
    assert np.allclose(c.usage, 1.0) and np.allclose(c.limit, 1.5) and np.allclose(c.gomaxprocs, 1)
    assert np.allclose(cs["a/p2/app"].gomaxprocs, 2)   # cAdvisor pod_name/container_name labels, app pod label


def test_flags_from_hand_made_series():
    series = (_pod("a", "trapped", "app", 1.0, 1.5, gomaxprocs=1)
              + _pod("a", "over", "app", 0.5, 0.5, gomaxprocs=8, throttled=0.9)
              + _pod("a", "bursty", "app", 0.6, 1.0, gomaxprocs=1, throttled=0.3)
              + _pod("a", "idle", "app", 0.2, 2.0, gomaxprocs=2)
              + _pod("a", "ok", "app", 1.7, 2.0, gomaxprocs=2))
    got = {}
    for c in containers_from_frame(_frame(series)):
        st, fs = analyse(c)
        got[c.key[1]] = {f.flag: f.detail for f in fs}
    assert set(got["trapped"]) == {"trapped"}
    assert set(got["over"]) == {"throttled", "gomaxprocs_above_limit"}
    assert "at its limit" in got["over"]["throttled"]
    assert got["bursty"] == {"throttled": "throttled below its limit (bursty demand)"}
    assert set(got["idle"]) == {"headroom"}
    assert got["ok"] == {}


def test_saved_rate_export_is_read_as_usage():
    n = 30
    lab = {"namespace": "a", "pod": "p", "container": "app"}
    frame = _frame([("rate(container_cpu_usage_seconds_total[5m])", lab, [0.4] * n),
                    ("kube_pod_container_resource_limits", {**lab, "resource": "cpu"}, [2.0] * n)])
    (c,) = containers_from_frame(frame)
    st, fs = analyse(c)
    assert np.allclose(c.usage, 0.4) and [f.flag for f in fs] == ["headroom"]


def test_memory_flags_from_hand_made_series():
    # cfsim.advice.memory through the audit: an OOM-killed container, one near its limit, one whose
    # GOMEMLIMIT sits on its live heap (the GC's collapse band), and one with room
    GiB, MiB = 2 ** 30, 2 ** 20

    def mem(pod, ws, oom=0, goal=None, live=None, soft=None, n=40):
        lab = {"namespace": "m", "pod": pod, "container": "app"}
        out = _pod("m", pod, "app", 0.5, 1.0, gomaxprocs=1, n=n)
        out += [("container_memory_working_set_bytes", lab, np.full(n, ws)),
                ("container_oom_events_total", lab, np.r_[np.zeros(n - 5), np.full(5, oom)])]
        go = {"namespace": "m", "pod": pod, "job": "app"}
        for name, v in (("go_gc_heap_goal_bytes", goal), ("go_gc_heap_live_bytes", live),
                        ("go_gc_gomemlimit_bytes", soft)):
            if v is not None:
                out.append((name, go, np.full(n, v)))
        return out

    series = (mem("oomed", 0.8 * GiB, oom=1) + mem("near", 0.95 * GiB)
              + mem("spiral", 0.5 * GiB, goal=300 * MiB, live=280 * MiB, soft=330 * MiB)
              + mem("fine", 0.3 * GiB, goal=200 * MiB, live=100 * MiB, soft=900 * MiB))
    got = {}
    for c in containers_from_frame(_frame(series)):
        _, fs = analyse(c)
        got[c.key[1]] = sorted(f.flag for f in fs if f.flag in ("oom_killed", "near_oom", "memory_limit_collapse",
                                                                  "gomemlimit_above_limit"))
    assert got == {"oomed": ["oom_killed"], "near": ["near_oom"], "spiral": ["memory_limit_collapse"], "fine": []}


# ---------------------------------------------------------------------------------------------
# the CFS period, and malformed export files


def _write_export(folder, series):
    """series as for _frame, saved one query_range JSON file per metric (a Prometheus API response)."""
    import json

    by = {}
    for metric, labels, values in series:
        by.setdefault(metric, []).append({"metric": {"__name__": metric, **labels},
                                          "values": [[T0_MS / 1000 + 15 * i, repr(float(v))]
                                                     for i, v in enumerate(values)]})
    folder.mkdir(parents=True, exist_ok=True)
    for metric, result in by.items():
        (folder / f"{metric}.json").write_text(json.dumps({"status": "success",
                                                           "data": {"resultType": "matrix", "result": result}}))
    return folder


def _with_period(pod, period_us, n=40):
    lab = {"namespace": "a", "pod": pod, "container": "app"}
    return [("container_spec_cpu_period", lab, [period_us] * n)]


def test_the_measured_cfs_period_is_the_evidences_and_the_proxys():
    from cfsim.advice.audit.fixes import proxy_scenario

    series = (_pod("a", "slow", "app", 0.5, 0.5, gomaxprocs=8, throttled=0.9) + _with_period("slow", 1_000_000)
              + _pod("a", "plain", "app", 0.5, 0.5, gomaxprocs=8, throttled=0.9)
              + _pod("a", "odd", "app", 0.5, 0.5, gomaxprocs=8, throttled=0.9) + _with_period("odd", 5_000_000))
    got = {}
    for c in containers_from_frame(_frame(series)):
        st, fs = analyse(c)
        (ev,) = [f.evidence for f in fs if f.flag == "gomaxprocs_above_limit"]
        got[c.key[1]] = (c.period_us, ev, proxy_scenario(c, st, 0.9, 2.0)["cgroup.period_us"], c.missing)
    period, ev, proxy, _ = got["slow"]
    assert period == 1_000_000 and proxy == 1_000_000
    assert "8 threads can spend the 500 ms quota of a 1 s period in 62.5 ms;" in ev
    period, ev, proxy, missing = got["plain"]       # not exported: the kubelet's 100 ms, said so
    assert period is None and proxy == 100_000 and "CFS period" not in missing
    assert "the 50 ms quota of a 100 ms period in 6.25 ms (the kubelet's default period" in ev
    period, ev, proxy, missing = got["odd"]         # 5 s: no cgroup has it (the kernel's 1 s maximum)
    assert period is None and proxy == 100_000 and "outside the kernel's" in missing["CFS period"]


def test_a_malformed_export_is_an_error_naming_file_and_position(tmp_path):
    import pytest

    from cfsim.advice.audit import load_containers
    from cfsim.io.errors import CfsimParseError

    folder = _write_export(tmp_path / "exp", _pod("a", "over", "app", 0.5, 0.5, gomaxprocs=8, throttled=0.9))
    bad = folder / "go_sched_gomaxprocs_threads.json"
    bad.write_bytes(bad.read_bytes()[:300])
    with pytest.raises(CfsimParseError, match=r"go_sched_gomaxprocs_threads\.json:1:301: not valid JSON"):
        load_containers(folder)
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "x.json").write_bytes(bad.read_bytes())
    with pytest.raises(CfsimParseError, match=r"x\.json:1:301: not valid JSON"):
        load_containers(alone)
    # an export of the wrong shape is an error too, with its JSON path
    (alone / "x.json").write_text('{"status": "success", "data": {"resultType": "matrix", "result": 3}}')
    with pytest.raises(CfsimParseError, match=r"x\.json: data\.result: expected a list"):
        load_containers(alone)


def test_json_files_that_are_clearly_not_exports_are_skipped(tmp_path):
    import json

    import pytest

    from cfsim.advice.audit import load_containers

    folder = _write_export(tmp_path / "exp", _pod("a", "p", "app", 0.5, 1.0, gomaxprocs=1))
    (folder / "manifest.json").write_text(json.dumps({"scenario": {}, "times": {}}))     # a manifest
    (folder / "vpa.json").write_text(json.dumps({"status": {"recommendation": {}}}))      # --emit vpa-status
    (folder / "list.json").write_text("[1, 2]")
    (folder / "notes.txt").write_text("not JSON, and not read")
    (c,) = load_containers(folder)
    assert c.name == "a/p/app"
    only = tmp_path / "only"
    only.mkdir()
    (only / "q.json").write_text(json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}))
    with pytest.raises(FileNotFoundError, match=r"q\.json: resultType 'vector'"):   # named, not silently dropped
        load_containers(only)
