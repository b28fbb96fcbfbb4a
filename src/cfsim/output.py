"""Answers in the formats people pipe into other tools: ``table|json|yaml|csv|markdown|html``.

A command builds one :class:`Answer`: ``data`` (the whole answer, plain JSON values: ``json`` and
``yaml`` print it), ``rows`` (its main table: ``csv``, ``markdown`` and ``html`` print it) and
``text`` (what a person reads on a terminal: ``table``, the default). ``--json`` stays as the
alias of ``--format json``.

>>> a = Answer({"limit": 1.5, "ok": True}, [{"pod": "api-0", "limit": 1.5}], "api-0: limit 1.5")
>>> print(render(a, "yaml"), end="")
limit: 1.5
ok: true
>>> print(render(a, "csv"), end="")
pod,limit
api-0,1.5
>>> print(render(a, "markdown"), end="")
| pod | limit |
|---|---|
| api-0 | 1.5 |
"""
from __future__ import annotations

import argparse
import csv
import html
import io
import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, TextIO

__all__ = ["FORMATS", "Answer", "json_safe", "render", "emit", "add_format_argument", "chosen_format",
           "markdown_table", "dump_yaml", "dump_yaml_all"]

FORMATS = ("table", "json", "yaml", "csv", "markdown", "html")


def json_safe(x: Any) -> Any:
    """``x`` as plain JSON values: non-finite floats become None, numpy scalars and arrays Python
    numbers and lists, tuples lists, paths and other objects their ``str``; through dicts and lists.

    >>> json_safe({"a": float("inf"), "b": [1.5, float("nan")], "c": (1, 2)})
    {'a': None, 'b': [1.5, None], 'c': [1, 2]}
    """
    if x is None or isinstance(x, (bool, str, int)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist") and callable(x.tolist):  # numpy scalars and arrays
        return json_safe(x.tolist())
    if hasattr(x, "item") and callable(x.item):
        return json_safe(x.item())
    return str(x)


@dataclass
class Answer:
    """What a command answers: ``data`` (json, yaml), ``rows`` (csv, markdown, html), ``text`` (table)."""

    data: Any
    rows: Sequence[dict[str, Any]] | None = None
    text: str | Callable[[], str] = ""
    title: str = "cfsim"
    columns: Sequence[str] | None = None
    extra_docs: list[Any] = field(default_factory=list)

    def table_text(self) -> str:
        return self.text() if callable(self.text) else self.text

    def table_rows(self) -> tuple[list[str], list[dict[str, Any]]]:
        rows = list(self.rows) if self.rows is not None else _rows_of(self.data)
        cols = list(self.columns) if self.columns else _columns(rows)
        return cols, rows


def _rows_of(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        return data
    if isinstance(data, dict):
        return [{"key": k, "value": v} for k, v in data.items()]
    return [{"value": data}]


def _columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    return cols


def _cell(v: Any) -> str:
    v = json_safe(v)
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured markdown table (``|`` escaped in cells)."""
    cols = list(columns) if columns else _columns(rows)
    esc = (lambda v: _cell(v).replace("|", "\\|").replace("\n", " "))
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(esc(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _html(title: str, cols: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in cols) + "</tr>\n"
                   for r in rows)
    style = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;font-size:13px}"
             "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}")
    return (f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
            f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>\n</body></html>\n")


def dump_yaml(data: Any) -> str:
    """Block-style YAML of ``data`` (key order kept; strings that look like numbers quoted, so
    Kubernetes quantities such as ``"2"`` stay strings)."""
    import yaml

    return yaml.safe_dump(json_safe(data), sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)


def dump_yaml_all(docs: Iterable[Any], comments: Sequence[str] | None = None) -> str:
    """Several YAML documents separated by ``---``; ``comments[i]`` (lines) heads document i."""
    import yaml

    out = []
    for i, doc in enumerate(docs):
        head = "".join(f"# {line}\n" for c in ([comments[i]] if comments and i < len(comments) and comments[i]
                                               else []) for line in c.splitlines())
        out.append("---\n" + head + yaml.safe_dump(json_safe(doc), sort_keys=False, default_flow_style=False,
                                                    allow_unicode=True, width=120))
    return "".join(out)


def render(answer: Answer, fmt: str) -> str:
    """The answer as text in ``fmt`` (one of :data:`FORMATS`), ending in a newline."""
    if fmt == "table":
        text = answer.table_text()
        return text if text.endswith("\n") or not text else text + "\n"
    if fmt == "json":
        return json.dumps(json_safe(answer.data)) + "\n"
    if fmt == "yaml":
        return dump_yaml(answer.data)
    cols, rows = answer.table_rows()
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in cols])
        return buf.getvalue()
    if fmt == "markdown":
        return markdown_table(rows, cols)
    if fmt == "html":
        return _html(answer.title, cols, rows)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def emit(answer: Answer, args_or_fmt: Any, stream: TextIO | None = None) -> None:
    """Write the answer to stdout in the format the command line chose."""
    fmt = args_or_fmt if isinstance(args_or_fmt, str) else chosen_format(args_or_fmt)
    (stream or sys.stdout).write(render(answer, fmt))


def add_format_argument(parser: argparse.ArgumentParser, what: str = "the answer") -> None:
    """``--format table|json|yaml|csv|markdown|html`` and ``--json`` (= ``--format json``)."""
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help=f"print {what} as a table (default), json, yaml, or its main table as csv, "
                             f"markdown or html")
    parser.add_argument("--json", action="store_true", help="the same as --format json")


def chosen_format(args: Any) -> str:
    """The format asked for: ``--format``, else ``json`` for ``--json``, else ``table``."""
    fmt = getattr(args, "format", None)
    if fmt:
        if getattr(args, "json", False) and fmt != "json":
            print(f"error: --json and --format {fmt} disagree; give one", file=sys.stderr)
            raise SystemExit(2)
        return fmt
    return "json" if getattr(args, "json", False) else "table"
