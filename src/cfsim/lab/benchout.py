"""The JSON-lines output of the lab's host benchmarks (``lab/cmd/wakebench``, ``lab/cmd/faultbench``):
one reader, so every malformed line is named the same way, by its source and line."""
from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


def json_lines(text: str, source: str, error: type[ValueError]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; ``error`` naming ``source`` and the line
    for one that is not JSON.

    >>> list(json_lines('{"a": 1}\\n\\n{"a": 2}', "x", ValueError))
    [(1, {'a': 1}), (3, {'a': 2})]
    >>> list(json_lines('{"a": 1}\\n{oops', "x.jsonl", ValueError))
    Traceback (most recent call last):
    ...
    ValueError: x.jsonl line 2: not JSON (Expecting property name enclosed in double quotes at column 2)
    """
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield i, json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{source} line {i}: not JSON ({exc.msg} at column {exc.colno})") from None


def run_probe(cmd: list[str], read: Callable[[str, str], T], error: type[ValueError],
              timeout_s: float) -> T | dict[str, str]:
    """Run a host benchmark just before a lab run and read its output with ``read(stdout, name)``;
    ``{"error": ...}`` instead when it cannot start, times out, exits non-zero or prints what
    ``read`` rejects (``error``), so a probe never fails the run it precedes.

    >>> run_probe(["/no/such-bench"], lambda text, name: text, ValueError, 5.0)["error"][:15]
    'such-bench: [Er'
    """
    name = Path(cmd[0]).name
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"{name}: {exc}"}
    if res.returncode != 0:
        return {"error": res.stderr.strip() or f"{name} exited {res.returncode}"}
    try:
        return read(res.stdout, name)
    except error as exc:
        return {"error": str(exc)}


def require(obj: dict[str, Any], fields: Iterable[str], source: str, line: int, error: type[ValueError]) -> None:
    """``error`` naming the fields ``obj`` lacks, with its source and line."""
    missing = [k for k in fields if k not in obj]
    if missing:
        raise error(f"{source} line {line}: missing {', '.join(missing)}")


def positive_rows(text: str, source: str, fields: tuple[str, ...], positive: str,
                  error: type[ValueError]) -> list[dict[str, float]]:
    """Every line of a benchmark's output as ``fields`` -> float, its ``positive`` field > 0;
    ``error`` naming the source and line otherwise, and the source when there is no line at all.

    >>> positive_rows('{"round": 0, "ns": 2}', "x", ("round", "ns"), "ns", ValueError)
    [{'round': 0.0, 'ns': 2.0}]
    >>> positive_rows('{"round": 0, "ns": 0}', "x.jsonl", ("round", "ns"), "ns", ValueError)
    Traceback (most recent call last):
    ...
    ValueError: x.jsonl line 1: ns must be > 0 (got 0)
    """
    rows = []
    for i, d in json_lines(text, source, error):
        require(d, fields, source, i, error)
        row = {k: float(d[k]) for k in fields}
        if not row[positive] > 0:
            raise error(f"{source} line {i}: {positive} must be > 0 (got {d[positive]!r})")
        rows.append(row)
    if not rows:
        raise error(f"{source}: no measurements")
    return rows


def params_toml_text(about: Iterable[str], command: str, legend: Iterable[str], rows: Iterable[str],
                     params: dict[str, Any]) -> str:
    """A host benchmark's ``--params`` file: what it measured (``about``, comment lines), the host
    and the command that reproduces it, each round's figures (``legend`` then ``rows``) and the
    ``[params]`` table.

    >>> print(params_toml_text(["# a bench"], "cfsim lab x", ["# round: a"], ["#   0: 1.0"], {"go.k": 1.5}).split("\\n")[3:])
    ['# round: a', '#   0: 1.0', '[params]', '"go.k" = 1.5', '']
    """
    lines = [*about,
             f"# Host: {platform.node()}, kernel {platform.release()}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
             f"# Reproduce: {command}", *legend, *rows, "[params]"]
    lines += [f'"{k}" = {v}' for k, v in params.items()]
    return "\n".join(lines) + "\n"


def number_row(obj: dict[str, Any], fields: Iterable[str], source: str, line: int, error: type[ValueError],
               label: str | None = None) -> dict[str, Any]:
    """``obj``'s ``fields`` as floats (``label``, a word such as a mode, kept as it is) after
    :func:`require`; ``error`` naming the source and line for a field that is not a number.

    >>> number_row({"round": 0, "mode": "alone", "us": "2.5"}, ("round", "mode", "us"), "x", 1, ValueError, "mode")
    {'round': 0.0, 'us': 2.5, 'mode': 'alone'}
    >>> number_row({"round": 0, "us": "slow"}, ("round", "us"), "x.jsonl", 3, ValueError)
    Traceback (most recent call last):
    ...
    ValueError: x.jsonl line 3: a field that is not a number
    """
    fields = tuple(fields)
    require(obj, fields, source, line, error)
    try:
        row: dict[str, Any] = {k: float(obj[k]) for k in fields if k != label}
    except (TypeError, ValueError):
        raise error(f"{source} line {line}: a field that is not a number") from None
    if label is not None:
        row[label] = obj[label]
    return row


def run_bench(binary: Path, args: list[str], timeout_s: float, error: type[ValueError],
              env: dict[str, str] | None = None) -> str:
    """Run a host benchmark (``binary`` with ``args``, ``env`` added to this process's
    environment) and return its standard output; ``error`` names a benchmark that ran out of
    ``timeout_s``, could not start or failed (with the end of what it wrote to standard error).

    >>> run_bench(Path("/bin/echo"), ["a"], 5.0, ValueError)
    'a\\n'
    >>> run_bench(Path("/no/such/bench"), [], 5.0, ValueError)
    Traceback (most recent call last):
    ...
    ValueError: /no/such/bench cannot run: [Errno 2] No such file or directory: '/no/such/bench'
    """
    cmd = [str(binary), *args]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                             env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        raise error(f"{binary} did not finish within {timeout_s:.0f} s: `{' '.join(cmd)}`") from None
    except OSError as exc:
        raise error(f"{binary} cannot run: {exc}") from None
    if res.returncode != 0:
        raise error(f"{binary} failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}")
    return res.stdout
