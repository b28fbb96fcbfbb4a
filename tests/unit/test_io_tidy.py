"""The tidy frame spec, label strings, missing_metrics and the module doctests of cfsim.io."""
from __future__ import annotations

import doctest
import importlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cfsim.io import (MissingMetricsError, TIDY_COLUMNS, check_tidy, empty_frame, expand_labels, format_labels,
                      make_frame, missing_metrics, parse_labels, parse_series)
from cfsim.io.labels import LabelSyntaxError

MODULES = ["cfsim.io.labels", "cfsim.io.tidy", "cfsim.io.promql"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@given(st.dictionaries(st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,10}", fullmatch=True) | st.text(min_size=1, max_size=8),
                       st.text(max_size=20), max_size=6))
def test_format_then_parse_labels_round_trips(labels):
    labels.pop("__name__", None)
    assert parse_labels(format_labels(labels)) == labels


def test_parse_labels_errors_carry_offsets():
    with pytest.raises(LabelSyntaxError) as info:
        parse_labels('{a="1",,b="2"}')
    assert info.value.offset == 7
    with pytest.raises(LabelSyntaxError):
        parse_labels('{a="1"} trailing')
    with pytest.raises(LabelSyntaxError, match="duplicate"):
        parse_labels('{a="1", a="2"}')
    assert parse_series("up") == ("up", {})
    assert parse_series('{"utf8.name"="x", __name__="m"}') == ("m", {"utf8.name": "x"})


def test_empty_and_made_frames_follow_the_spec():
    for frame in (empty_frame(), make_frame(np.array([2, 1]), ["b", "a"], ["{}", "{}"], np.array([1.0, 2.0]))):
        check_tidy(frame)
        assert tuple(frame.columns) == TIDY_COLUMNS
    frame = make_frame(np.array([2, 1]), ["b", "a"], ["{}", "{}"], np.array([1.0, 2.0]))
    assert frame["metric"].tolist() == ["a", "b"]
    with pytest.raises(ValueError):
        check_tidy(frame.rename(columns={"value": "v"}))
    with pytest.raises(ValueError):
        check_tidy(frame.assign(timestamp=frame["timestamp"].dt.tz_localize(None)))


def test_expand_labels_adds_one_column_per_label():
    frame = make_frame(np.array([0, 0]), ["m", "m"], ['{pod="a",zone="x"}', '{pod="b"}'], np.array([1.0, 2.0]))
    wide = expand_labels(frame)
    assert wide["pod"].tolist() == ["a", "b"]
    assert wide["zone"].iloc[0] == "x" and pd.isna(wide["zone"].iloc[1])


def test_missing_metrics_names_metrics_and_analyses():
    frame = make_frame(np.array([0]), ["container_cpu_cfs_periods_total"], ["{}"], np.array([1.0]))
    missing_metrics(frame, {"throttling": ["container_cpu_cfs_periods_total"]})
    needed = {"throttling ratio": ["container_cpu_cfs_periods_total", "container_cpu_cfs_throttled_periods_total"],
              "GC pressure": ["go_gc_duration_seconds_count"],
              "throttled time": ["container_cpu_cfs_throttled_periods_total"]}
    with pytest.raises(MissingMetricsError) as info:
        missing_metrics(frame, needed)
    msg = str(info.value)
    assert "container_cpu_cfs_throttled_periods_total: needed by throttling ratio, throttled time" in msg
    assert "go_gc_duration_seconds_count: needed by GC pressure" in msg
    assert "available metrics: container_cpu_cfs_periods_total" in msg
    assert set(info.value.missing) == {"container_cpu_cfs_throttled_periods_total", "go_gc_duration_seconds_count"}
    with pytest.raises(MissingMetricsError, match=r"\(none\)"):
        missing_metrics(empty_frame(), {"x": ["y"]})
    missing_metrics({"y": frame}, {"x": ["y"]})
