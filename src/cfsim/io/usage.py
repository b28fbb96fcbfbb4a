"""Container CPU usage histories, as the VPA recommender consumes them (``cfsim vpa replay``).

``read_usage(path) -> (series, meta)``: ``series`` maps a container (or pod) name to its
``[(timestamp_s, cpu_cores), ...]`` readings in time order; ``meta`` says where they came from
(``source``, ``format``, ``containers``, ``samples``). Formats, told apart by content:

* CSV ``timestamp,cpu_cores`` (header optional): one metrics-server reading per row, i.e. the mean
  usage over the window that ENDS at ``timestamp``. ``timestamp`` is Unix seconds or ISO 8601
  (``2026-01-01T00:00:00Z``). An optional third column names the pod when the header calls it
  ``pod``: the pods of one workload container each get their own strictly-later sampler and all
  feed one aggregate histogram, as upstream aggregates a container's usage over the pods of its
  workload. Headed ``container`` (or without a header) it names the container, and a file with
  several containers is refused. A second row for one pod (or container) at a timestamp already
  read is refused as well: one reading per window, and which of the two would be the reading?
* A Prometheus ``/api/v1/query_range`` JSON export of one workload container's CPU usage: either
  the raw counter ``container_cpu_usage_seconds_total`` (turned into per-interval mean cores,
  counter resets skipped) or a saved ``rate()``/``irate()`` of it in cores (series without
  ``__name__``, as PromQL drops it). Any other metric is refused; so are series of more than one
  ``(namespace, container)``. One series per pod; read with :func:`cfsim.io.read_prometheus_json`.

:func:`usage_series` turns any tidy frame of such series (a file's or a live query's) into
``series``. Malformed input raises :class:`UsageParseError` (a :class:`~cfsim.io.CfsimParseError`)
whose message starts with ``file:line:`` (CSV) or ``file: json.path:`` (JSON).
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from cfsim.io.errors import CfsimParseError, PrometheusAPIError
from cfsim.io.labels import parse_labels
from cfsim.io.prometheus_json import MAX_UNIX_S, read_prometheus_json

__all__ = ["Series", "UsageParseError", "read_usage", "usage_series"]

Series = dict[str, list[tuple[float, float]]]  # container -> [(timestamp_s, cpu_cores)]

#: cAdvisor's cumulative CPU usage counter [s], the metric the VPA's own Prometheus history provider
#: reads (kubernetes/autoscaler vertical-pod-autoscaler/pkg/recommender/input/history/
#: history_provider.go) and the only one whose rate is a container's CPU usage in cores.
USAGE = "container_cpu_usage_seconds_total"
#: What a saved export may hold, in words, for the errors.
ACCEPTED = (f"{USAGE} (the raw counter) or a saved rate()/irate() of it (series without __name__, "
            f"e.g. rate({USAGE}{{container=\"NAME\"}}[5m]))")
#: Header names of the CSV's third column that mean "pod of one workload container".
_POD_HEADERS = ("pod", "pod_name", "podname")


class UsageParseError(CfsimParseError):
    """Malformed usage history; the message names the file and the line (or JSON path)."""


def read_usage(path: str | Path) -> tuple[Series, dict[str, Any]]:
    """A usage history file (CSV or Prometheus JSON, by content) -> ``(series, meta)``."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"usage file not found: {p}")
    with open(p, "rb") as fh:
        head = fh.read(256).lstrip()
    if head.startswith(b"{"):
        series, fmt = _read_prometheus(p), "prometheus-api-json"
    else:
        series, fmt = _read_csv(p), "csv"
    meta = {"source": str(p), "format": fmt, "containers": sorted(series),
            "samples": sum(len(v) for v in series.values())}
    return series, meta


def usage_series(frame: pd.DataFrame, source: str = "<frame>") -> Series:
    """A tidy frame (:mod:`cfsim.io.tidy`) of container CPU usage -> series in cores: one per
    ``(metric, labels)``; the counter ``container_cpu_usage_seconds_total`` becomes per-interval mean
    cores, a nameless series (a rate) is taken as cores. Any other metric, series of more than one
    ``(namespace, container)`` or two values of one series at one time raise :class:`UsageParseError`."""
    out: Series = {}
    # Only CPU usage: any other counter would turn into "cores" by the same arithmetic (periods/s,
    # throttled periods/s) and a gauge (a limit, GOMAXPROCS) would be read as usage as it stands.
    # Nameless series are what PromQL's rate()/irate() return and a saved export cannot say of
    # what; they are taken as the documented saved rate of the usage. A live query names them
    # after the query (cfsim.io.tidy.metric_from_query), so those names are checked too.
    for name in sorted({str(m) for m in frame["metric"].unique()}):
        if not _is_usage(name):
            raise UsageParseError(source, f"metric {name!r} is not container CPU usage; vpa replay reads "
                                          f"{ACCEPTED}", path="data.result")
    _one_container(frame, source)
    for (name, labels), grp in frame.groupby(["metric", "labels"], sort=True):
        ts = grp["timestamp"].astype("int64").to_numpy() / 1e9
        if len(set(ts.tolist())) < len(ts):  # as in a CSV: two readings at one time contradict each other
            dup = sorted(t for t in set(ts.tolist()) if (ts == t).sum() > 1)[0]
            raise UsageParseError(source, f"series {name}{labels} has more than one value at timestamp {dup:.15g}",
                                  path="data.result")
        pts = sorted((t, v) for t, v in zip(ts.tolist(), grp["value"].to_numpy().tolist()) if math.isfinite(v))
        if str(name) == USAGE:
            pts = _counter_to_cores(pts)
        else:
            # a saved rate() is usage in cores: never negative (a CSV's cpu_cores is refused the same way)
            bad = next(((t, v) for t, v in pts if v < 0), None)
            if bad is not None:
                raise UsageParseError(source, f"series {name or 'rate'}{labels} is a CPU usage in cores and cannot be "
                                              f"negative (got {bad[1]:g} at timestamp {bad[0]:.15g})",
                                      path="data.result")
        if pts:
            out[str(labels) or "container"] = pts
    if not out:
        raise UsageParseError(source, "no usable CPU usage samples", path="data.result")
    return out


def _is_usage(name: str) -> bool:
    """The raw usage counter, a nameless series (a saved rate), or a live query's name for a
    rate()/irate() of the usage counter."""
    return name in (USAGE, "") or any(name.startswith(f"{fn}({USAGE}") for fn in ("rate", "irate"))


def _one_container(frame: pd.DataFrame, source: str) -> None:
    """Refuse series of more than one ``(namespace, container)``: the VPA keeps one aggregate per
    workload container (upstream ``MakeAggregateStateKey`` keys it by namespace, container name
    and the pods' labels: kubernetes/autoscaler vertical-pod-autoscaler/pkg/recommender/model/
    cluster.go), so pods of one container belong together and different containers never do."""
    groups = sorted({(d.get("namespace", ""), d.get("container", ""))
                     for d in (parse_labels(str(lab)) for lab in frame["labels"].unique())})
    if len(groups) > 1:
        names = ", ".join("/".join(g) for g in groups[:6]) + (" ..." if len(groups) > 6 else "")
        raise UsageParseError(source, f"{len(groups)} containers ({names}); the VPA replays one workload "
                                      f"container: export only its series, e.g. with the matchers "
                                      f"{{namespace=\"NS\", container=\"NAME\"}} in the query",
                              path="data.result")


def _read_prometheus(path: Path) -> Series:
    try:
        frame, meta = read_prometheus_json(path)
    except PrometheusAPIError as exc:
        raise UsageParseError(str(path), f"a saved error response, not usage: {exc.error_type}: "
                                         f"{exc.error}") from None
    if meta.get("result_type") != "matrix":
        raise UsageParseError(str(path), f"expected 'matrix' (a query_range export), "
                                         f"got {meta.get('result_type')!r}", path="data.resultType")
    return usage_series(frame, str(path))


def _parse_time(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _read_csv(path: Path) -> Series:
    """``timestamp,cpu_cores[,pod|container]`` rows -> series, sorted by time."""
    out: Series = {}
    try:
        # utf-8-sig: a spreadsheet's "CSV UTF-8" starts with a byte-order mark, not part of the header
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageParseError(str(path), f"not UTF-8 text at byte {exc.start}") from None
    seen_data = False
    pods = False                      # the third column is headed "pod": several names are pods
    first_line: dict[str, int] = {}   # name -> the line of its first row, in file order
    at: dict[tuple[str, float], int] = {}  # (name, timestamp) -> its line
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if not seen_data and cells[0].lower() in ("timestamp", "time", "t", "t_s", "ts"):
            pods = len(cells) > 2 and cells[2].lower() in _POD_HEADERS
            continue  # header
        if len(cells) < 2:
            raise UsageParseError(str(path), f"expected 'timestamp,cpu_cores' (got {line!r})", line=lineno)
        try:
            ts = _parse_time(cells[0])
        except ValueError:
            raise UsageParseError(str(path), f"timestamp is neither Unix seconds nor ISO 8601: {cells[0]!r}",
                                  line=lineno) from None
        try:
            cores = float(cells[1])
        except ValueError:
            raise UsageParseError(str(path), f"cpu_cores is not a number: {cells[1]!r}", line=lineno) from None
        if not math.isfinite(cores) or cores < 0:
            raise UsageParseError(str(path), f"cpu_cores must be a finite number >= 0 (got {cells[1]})",
                                  line=lineno)
        if not math.isfinite(ts):
            raise UsageParseError(str(path), f"timestamp must be finite (got {cells[0]})", line=lineno)
        if abs(ts) > MAX_UNIX_S:
            raise UsageParseError(str(path), f"timestamp {cells[0]} is not Unix seconds (beyond the year 2262; "
                                             f"milliseconds? divide by 1000, or write ISO 8601)", line=lineno)
        name = cells[2] if len(cells) > 2 and cells[2] else "container"
        first_line.setdefault(name, lineno)
        if (name, ts) in at:
            # One metrics-server reading per pod and window: two at one timestamp contradict each
            # other, and keeping either (upstream's strictly-later rule in model/container.go would
            # keep the first one it read, the replay the last in sorted order) is a silent guess.
            who = "" if name == "container" and len(cells) < 3 else f" for {name!r}"
            raise UsageParseError(str(path), f"duplicate timestamp {cells[0]}{who} (first at line "
                                             f"{at[(name, ts)]}): one reading per timestamp", line=lineno)
        at[(name, ts)] = lineno
        out.setdefault(name, []).append((ts, cores))
        seen_data = True
    if not out:
        raise UsageParseError(str(path), "no usage rows (expected 'timestamp,cpu_cores')")
    if len(first_line) > 1 and not pods:
        # Containers of a workload each get their own VPA recommendation: merging them into one
        # histogram answers for none of them (see _one_container).
        order = sorted(first_line, key=first_line.__getitem__)
        names = ", ".join(repr(n) for n in order[:6]) + (" ..." if len(order) > 6 else "")
        raise UsageParseError(str(path), f"{len(order)} containers ({names}; the second from this line); the VPA "
                                         f"replays one workload container: keep only its rows, or, if the third "
                                         f"column names pods of one container, head it 'pod' "
                                         f"(timestamp,cpu_cores,pod)", line=first_line[order[1]])
    return {k: sorted(v) for k, v in out.items()}


def _counter_to_cores(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out = []
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t1 <= t0 or v1 < v0:  # duplicate or counter reset
            continue
        out.append((t1, (v1 - v0) / (t1 - t0)))
    return out
