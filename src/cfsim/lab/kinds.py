"""What the lab knows about each ``[workload] kind``: the one table of the lab's per-kind facts.

The kinds themselves are declared by the workload models (:mod:`cfsim.workloads.kinds`); this is
what the lab's Go binaries (``lab/cmd/workload``, ``lab/cmd/loadgen``) export and need for each:
the metric family it counts and times, its own metrics, its latency histograms, the counter of
finished work, whether the load generator drives it, and the note on what its latency means.
The exported queries (:mod:`cfsim.lab.queries`), the launch (:mod:`cfsim.lab.launch`), the
summary and the run's manifest (:mod:`cfsim.lab.runner`) ask here instead of switching on kind
names. A new workload kind needs its row in :data:`LAB_KINDS` (a unit test checks that the table
covers exactly :func:`cfsim.workloads.kinds.kind_names`).

>>> lab_kind("open").family
'requests'
>>> lab_kind("single-thread").done_metric
'cfsim_records_consumed_total'
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping


@dataclass(frozen=True)
class LabKind:
    """The lab's facts about one ``[workload] kind``."""

    #: ``items`` (consumed records with lag), ``requests`` (measured by the load generator) or
    #: ``bursts`` (of the threads workload): what the kind's Go workload counts and times
    family: str
    #: the kind's own metrics, exported raw (in this order)
    app_metrics: tuple[str, ...]
    #: its latency histograms (exported raw with buckets, and as quantiles)
    latency_histograms: tuple[str, ...]
    #: the counter of finished work (throughput)
    done_metric: str
    #: what ``latency_*`` of its summary measures (the manifest's ``summary_notes.latency``)
    latency_note: str
    #: further histograms exported as quantiles only (no raw buckets)
    quantile_histograms: tuple[str, ...] = ()
    #: gauges its workload always exposes: a missing one in a snapshot reads 0
    always_exposed: tuple[str, ...] = ()
    #: the load generator (``lab/cmd/loadgen``) drives it; its latency is the client's
    loadgen: bool = False
    #: ``lab.load_fraction`` may set its arrival rate (from the CPU limit and its CPU per item)
    load_fraction: bool = False


_STREAM = LabKind(
    family="items",
    app_metrics=("cfsim_records_consumed_total", "cfsim_records_produced_total", "cfsim_backlog_records",
                 "cfsim_lag_seconds"),
    latency_histograms=("cfsim_item_latency_seconds",),
    done_metric="cfsim_records_consumed_total",
    latency_note="record arrival to end of processing",
    always_exposed=("cfsim_backlog_records", "cfsim_lag_seconds"),
)

_CLOSED = LabKind(
    family="requests",
    app_metrics=("cfsim_requests_total", "cfsim_loadgen_requests_total", "cfsim_loadgen_errors_total",
                 "cfsim_loadgen_in_flight_requests"),
    latency_histograms=("cfsim_loadgen_request_duration_seconds", "cfsim_request_duration_seconds"),
    done_metric="cfsim_loadgen_requests_total",
    latency_note="client side (loadgen)",
    loadgen=True,
)

#: kind name -> its lab facts (in this order the errors list the kinds)
LAB_KINDS: Mapping[str, LabKind] = {
    "stream": _STREAM,
    "single-thread": replace(_STREAM, latency_note="same as stream"),
    "closed": _CLOSED,
    "open": replace(_CLOSED, app_metrics=_CLOSED.app_metrics + ("cfsim_loadgen_dropped_total",),
                    quantile_histograms=("cfsim_loadgen_send_lag_seconds",), load_fraction=True),
    "threads": LabKind(
        family="bursts",
        app_metrics=("cfsim_burns_total", "cfsim_burn_max_seconds"),
        latency_histograms=("cfsim_burn_duration_seconds",),
        done_metric="cfsim_burns_total",
        latency_note="none; see burn_*",
    ),
}


def lab_kind(name: str) -> LabKind:
    """The lab's facts about a kind; a clear error for a kind the lab has no Go workload for."""
    try:
        return LAB_KINDS[name]
    except KeyError:
        raise ValueError(f"workload.kind: the lab has no Go workload for kind {name!r}; "
                         f"it runs {', '.join(LAB_KINDS)}") from None


def kinds_with(**facts: object) -> tuple[str, ...]:
    """The kinds whose facts have these values, e.g. ``kinds_with(load_fraction=True)``."""
    return tuple(n for n, k in LAB_KINDS.items() if all(getattr(k, f) == v for f, v in facts.items()))
