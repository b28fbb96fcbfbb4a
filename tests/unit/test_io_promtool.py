"""read_promtool_dump on a real dump (promtool 2.42) and on generated edge cases, streamed."""
from __future__ import annotations

import gzip
import io
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cfsim.io import CfsimParseError, check_tidy, read_openmetrics, read_promtool_dump

DATA = Path(__file__).resolve().parents[1] / "data" / "prom"


def test_read_promtool_dump_real_file_equals_its_openmetrics_source():
    dump, meta = read_promtool_dump(DATA / "dump.txt")
    check_tidy(dump)
    source, _ = read_openmetrics(DATA / "input.om")
    pd.testing.assert_frame_equal(dump, source)
    assert meta["format"] == "promtool-tsdb-dump" and meta["series"] == 11 and meta["samples"] == len(dump)
    assert meta["lines"] == len(dump)


def test_read_promtool_dump_real_labels_with_quotes_commas_backslashes():
    dump, _ = read_promtool_dump(DATA / "dump.txt", metrics=["cfsim_requests_total"])
    assert '{container="side,car",path="say \\"hi\\", C:\\\\tmp\\\\x"}' in set(dump["labels"])
    assert set(dump["metric"]) == {"cfsim_requests_total"}


def test_read_promtool_dump_go_escapes_and_values():
    text = ('{__name__="m", a="tab\\there", b="\\u00e9\\xc3\\xa9", c="x\\\\y\\"z"} NaN 1700000000000\n'
            '{__name__="m", a="tab\\there", b="\\u00e9\\xc3\\xa9", c="x\\\\y\\"z"} +Inf 1700000001000\n'
            '\n'
            '{__name__="m", a="tab\\there", b="\\u00e9\\xc3\\xa9", c="x\\\\y\\"z"} 1e+06 1700000002000\n'
            '{__name__="m", a="b c d"} -Inf 1700000003000\n')
    data, meta = read_promtool_dump(io.StringIO(text))
    assert meta["series"] == 2 and meta["samples"] == 4
    labels = sorted(set(data["labels"]))
    assert labels == ['{a="b c d"}', '{a="tab\there",b="éé",c="x\\\\y\\"z"}']
    v = data[data["labels"] == labels[1]]["value"].to_numpy()
    assert np.isnan(v[0]) and v[1] == np.inf and v[2] == 1e6


@pytest.mark.parametrize("line, lineno, column, text", [
    ('{__name__="m"} 1 1700000000000\n{__name__="m", a="x} 2 1700000001000\n', 2, 18, "unterminated"),
    ('{__name__="m"} 1 1700000000000\n{__name__="m"} one 1700000001000\n', 2, 16, "value is not a number"),
    ('{__name__="m"} 1 1700000000000\n{__name__="m"} 1 17000000.5\n', 2, 18, "timestamp is not an integer"),
    ('{__name__="m"} 1\n', 1, 1, "expected"),
    ('{a="1"} 1 1700000000000\n', 1, 1, "no __name__"),
    ('{__name__="m" a="1"} 1 1700000000000\n', 1, 15, "expected ','"),
])
def test_read_promtool_dump_errors_name_line_and_column(line, lineno, column, text):
    with pytest.raises(CfsimParseError, match=text) as info:
        read_promtool_dump(io.StringIO(line))
    assert (info.value.line, info.value.column) == (lineno, column)
    assert str(info.value).startswith(f"<buffer>:{lineno}:{column}: ")


def test_read_promtool_dump_empty_file(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("")
    data, meta = read_promtool_dump(path)
    check_tidy(data)
    assert data.empty and meta["series"] == 0


class _OnePassLines:
    """A file object that can only be iterated once, line by line (no read(), no seek())."""

    def __init__(self, lines):
        self._lines = lines
        self.consumed = 0
        self.name = "<200k-line dump>"

    def read(self, *_):  # pragma: no cover - must not be called
        raise AssertionError("the whole text was requested")

    def __iter__(self):
        assert self.consumed == 0, "iterated twice"
        for line in self._lines:
            self.consumed += 1
            yield line


def _dump_lines(n_series: int, per_series: int):
    for s in range(n_series):
        head = f'{{__name__="cfsim_big_total", container="c,{s % 7}", pod="p\\"{s}"}}'
        for i in range(per_series):
            yield f"{head} {i * 1.5:g} {1_700_000_000_000 + 15_000 * i}\n"


def test_read_promtool_dump_streams_200k_lines_once():
    src = _OnePassLines(_dump_lines(200, 1000))
    t0 = time.perf_counter()
    data, meta = read_promtool_dump(src)
    elapsed = time.perf_counter() - t0
    assert src.consumed == 200_000 and meta["lines"] == 200_000 and len(data) == 200_000
    assert meta["series"] == 200
    one = data[data["labels"] == '{container="c,3",pod="p\\"3"}']
    assert one["value"].iloc[-1] == 999 * 1.5
    assert one["timestamp"].is_monotonic_increasing
    assert elapsed < 20


def test_read_promtool_dump_never_holds_the_text_and_the_frame():
    lines = list(_dump_lines(50, 1000))
    raw_bytes = sum(len(line) for line in lines)
    tracemalloc.start()
    data, _ = read_promtool_dump(_OnePassLines(iter(lines)))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    frame_bytes = data.memory_usage(deep=True).sum()
    # the lines list itself was allocated before tracing started: the reader's own peak is the
    # compact per-series arrays plus the frame under construction
    assert peak < 2.5 * frame_bytes, (peak, raw_bytes, frame_bytes)


def test_read_promtool_dump_gz_and_metric_filter(tmp_path):
    path = tmp_path / "dump.txt.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(_dump_lines(3, 10))
        fh.write('{__name__="other"} 1 1700000000000\n')
    data, meta = read_promtool_dump(path, metrics={"other"})
    assert data["metric"].tolist() == ["other"] and meta["skipped_samples"] == 30


def test_read_promtool_dump_truncated_gz_is_a_parse_error(tmp_path):
    path = tmp_path / "cut.txt.gz"
    blob = gzip.compress("".join(_dump_lines(5, 200)).encode())
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(CfsimParseError, match="cannot read"):
        read_promtool_dump(path)


def test_read_promtool_dump_interleaved_and_unsorted_lines_give_the_sorted_tidy_frame():
    text = ('{__name__="b", x="1"} 1 3\n{__name__="a", x="é"} 1 5\n{__name__="b", x="1"} 2 1\n'
            '{__name__="a", x="Z"} 7 2\n{__name__="a", x="z"} 7 2\n{__name__="a", x="é"} 0 4\n')
    data, _ = read_promtool_dump(io.StringIO(text))
    resorted = data.sort_values(["metric", "labels", "timestamp"], kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(data, resorted)
    assert data["labels"].tolist() == ['{x="Z"}', '{x="z"}', '{x="é"}', '{x="é"}', '{x="1"}', '{x="1"}']
    assert data["value"].tolist() == [7.0, 7.0, 0.0, 1.0, 2.0, 1.0]
