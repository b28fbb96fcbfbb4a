"""read_grafana_csv on exports written like Grafana's toCSV and on generated edge cases."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cfsim.io import CfsimParseError, check_tidy, read_grafana_csv

DATA = Path(__file__).resolve().parents[1] / "data" / "prom"


def test_read_grafana_csv_joined_epoch_ms():
    data, meta = read_grafana_csv(DATA / "grafana_joined.csv", metric="cpu_usage_cores")
    check_tidy(data)
    assert meta["tables"] == 1 and meta["series"] == 3 and not meta["warnings"]
    api2 = data[data["labels"] == '{container="api",pod="api-2"}']
    assert len(api2) == 4  # two empty cells: no rows
    assert set(data["metric"]) == {"cpu_usage_cores", "container_memory_working_set_bytes"}
    assert data["timestamp"].min() == pd.Timestamp("2023-11-14T22:13:20Z")


def test_read_grafana_csv_formatted_local_time_units_and_excel_header():
    data, meta = read_grafana_csv(DATA / "grafana_formatted.csv", tz="Europe/Berlin", metric="m")
    assert data["timestamp"].min() == pd.Timestamp("2023-11-14T22:13:20Z")  # 23:13:20 CET
    p99 = data[data["metric"] == "p99"]
    assert p99["labels"].iloc[0] == '{code="200",route="/a,b"}'
    assert p99["value"].tolist() == pytest.approx([0.0125, 1.03, 980e-6])
    pct = data[data["labels"] == '{pod="api-1"}']["value"].to_numpy()
    assert pct[:2] == pytest.approx([0.85, 0.905]) and np.isnan(pct[2]) and pct[3] == 1.0
    legend = data[data["labels"] == '{legend="Value #A"}']["value"].tolist()
    assert legend == [1.2 * 1024, 3 * 1024 ** 2, 512, 0]
    assert meta["units"]['{pod="api-1"}'] == "%"
    raw, meta = read_grafana_csv(DATA / "grafana_formatted.csv", tz="Europe/Berlin", convert_units=False)
    assert raw[raw["metric"] == "p99"]["value"].tolist() == [12.5, 1.03, 980]
    assert sum("mixes units" in w for w in meta["warnings"]) == 2  # p99 and Value #A, once each


def test_read_grafana_csv_one_table_per_series():
    data, meta = read_grafana_csv(DATA / "grafana_tables.csv")
    assert meta["tables"] == 2
    assert set(data["metric"]) == {"rate(cfsim_requests_total[1m])", ""}
    assert "without a metric name" in meta["warnings"][0]


def test_read_grafana_csv_iso_times_with_offsets_and_seconds():
    text = ('"Time","up"\n2023-11-14T22:13:20Z,1\n2023-11-14T23:13:35+01:00,1\n1700000050,0\n')
    data, _ = read_grafana_csv(io.StringIO(text), tz="America/New_York")
    assert data["timestamp"].tolist() == list(pd.to_datetime([1700000000, 1700000015, 1700000050], unit="s", utc=True))


@pytest.mark.parametrize("text, line, column, what", [
    ('"Time","a"\n1700000000000,1\n1700000015000,abc\n', 3, 2, "not a number"),
    ('"Time","a"\n1700000000000,1\nyesterday,2\n', 3, 1, "bad time"),
    ('"Time","a"\n1700000000000,1,2\n', 2, 3, "fields but the header"),
    ('"Time","a"\n1700000000000,3 parsecs\n', 2, 2, "unknown unit"),
    ('"Time"\n1\n', 1, 1, "at least one series"),
])
def test_read_grafana_csv_errors_name_line_and_column(text, line, column, what):
    with pytest.raises(CfsimParseError, match=what) as info:
        read_grafana_csv(io.StringIO(text))
    assert (info.value.line, info.value.column) == (line, column)


def test_read_grafana_csv_empty_table():
    data, meta = read_grafana_csv(io.StringIO('"Time","a"\r\n\r\n'))
    check_tidy(data)
    assert data.empty and meta["tables"] == 1
