"""Reading exports: Prometheus API JSON, ``promtool tsdb dump``, OpenMetrics / text exposition,
Grafana CSV, lab run folders, a live Prometheus — all into one tidy frame — and PromQL's counter
functions.

Conventions (pvlib ``iotools`` style): ``read_*`` parse a local file or text buffer, ``get_*``
fetch from a server; every one returns ``(data, meta)`` where ``data`` is the tidy frame
described in :mod:`cfsim.io.tidy` (``timestamp`` UTC, ``metric``, ``labels``, ``value``) and
``meta`` a dict saying where it came from (``source``, ``format``, query and step where known,
``series``, ``samples``, ``warnings``).  Malformed input raises :class:`CfsimParseError` (a
``ValueError``) naming the file and the position; a saved or live Prometheus error response raises
:class:`PrometheusAPIError`.  Counters become rates only in :mod:`cfsim.io.promql`.

=======================  ===================================================================
read_prometheus_json     a saved ``/api/v1/query_range`` or ``/api/v1/query`` response
read_promtool_dump       ``promtool tsdb dump`` output, streamed line by line
read_openmetrics         a scrape: Prometheus text exposition format or OpenMetrics
read_grafana_csv         a Grafana panel "Download CSV" (legends back to labels, units)
read_lab_run             a ``cfsim lab`` run folder as frames (:func:`load_lab_run`: as parsed JSON);
                         :func:`check_lab_rates` compares rates
read_usage               a container CPU usage history (CSV or query_range JSON) for the VPA
                         recommender: ``(series, meta)``; :func:`usage_series` for any tidy frame
get_prometheus_range     a live range query, chunked under 11,000 points per series
get_prometheus_samples   live raw samples with their scrape times (``m[range]`` queries)
get_prometheus_series    live series matching selectors (``/api/v1/series``)
get_container_metrics    a live server's cAdvisor, kube-state-metrics and Go runtime metrics
                         of the selected containers, batched (:mod:`cfsim.io.live`)
connect                  auth (headers, bearer token, basic), TLS (CA file) and retries
rate, increase, irate,   PromQL semantics on tidy frames; ``compat`` picks the Prometheus
delta, counter_to_rate   version rules (default 3.x; ``"2.42"`` matches Debian's server)
missing_metrics          raise naming the metrics missing and the analyses that need them
=======================  ===================================================================
"""
from cfsim.io.errors import CfsimParseError, MissingMetricsError, PrometheusAPIError
from cfsim.io.grafana import read_grafana_csv
from cfsim.io.http import (Connection, connect, get_prometheus_label_values, get_prometheus_range,
                           get_prometheus_samples, get_prometheus_series)
from cfsim.io.live import LiveQueryError, Selection, get_container_metrics
from cfsim.io.lab import check_lab_rates, load_lab_run, read_lab_run
from cfsim.io.labels import format_labels, parse_labels, parse_series
from cfsim.io.openmetrics import read_openmetrics
from cfsim.io.prometheus_json import parse_prometheus_response, read_prometheus_json
from cfsim.io.promql import counter_to_rate, delta, increase, irate, rate
from cfsim.io.promtool import read_promtool_dump
from cfsim.io.tidy import (TIDY_COLUMNS, check_tidy, empty_frame, expand_labels, make_frame,
                           metric_from_query, missing_metrics)
from cfsim.io.usage import UsageParseError, read_usage, usage_series
from cfsim.io import promql, tidy  # noqa: E402  (submodules: the frame spec and PromQL functions)

__all__ = [
    "read_prometheus_json", "parse_prometheus_response", "read_promtool_dump", "read_openmetrics",
    "read_grafana_csv", "get_prometheus_range", "get_prometheus_samples", "get_prometheus_series",
    "get_prometheus_label_values", "get_container_metrics", "Connection", "connect", "Selection",
    "LiveQueryError", "read_lab_run", "load_lab_run", "check_lab_rates",
    "rate", "increase", "delta", "irate", "counter_to_rate",
    "missing_metrics", "CfsimParseError", "PrometheusAPIError", "MissingMetricsError",
    "TIDY_COLUMNS", "tidy", "promql", "check_tidy", "empty_frame", "make_frame", "expand_labels",
    "metric_from_query", "format_labels", "parse_labels", "parse_series",
    "read_usage", "usage_series", "UsageParseError",
]
