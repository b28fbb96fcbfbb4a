"""Label sets as canonical strings, and a parser for every label syntax the readers meet.

The canonical form keeps tidy frames tidy (one hashable string per series)::

    {container="api",pod="api-1"}

keys sorted, no spaces, ``__name__`` excluded (it lives in the ``metric`` column), values escaped
as in the Prometheus exposition format (``\\\\``, ``\\"``, ``\\n``).  :func:`parse_labels` reads
that form back and also the looser forms other tools print: ``promtool tsdb dump`` (Go
``strconv.Quote`` escapes, ``", "`` separators, ``__name__`` inside the braces), Grafana legends
(``{container="api", pod="api-1"}``) and ``name{...}`` selectors.

>>> format_labels({"pod": "api-1", "container": "api"})
'{container="api",pod="api-1"}'
>>> parse_labels('{__name__="m", path="say \\\\"hi\\\\", C:\\\\\\\\tmp"}')
{'__name__': 'm', 'path': 'say "hi", C:\\\\tmp'}
"""
from __future__ import annotations

from typing import Mapping

__all__ = ["format_labels", "parse_labels", "parse_series", "LabelSyntaxError"]

_SIMPLE_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r",
                   "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


class LabelSyntaxError(ValueError):
    """A label set could not be parsed; ``offset`` is the 0-based character position."""

    def __init__(self, message: str, offset: int) -> None:
        self.offset = offset
        super().__init__(message)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _name(name: str) -> str:
    if name and all(_is_name_char(c, k == 0) for k, c in enumerate(name)):
        return name
    return f'"{_escape(name)}"'  # a UTF-8 label name (Prometheus 3 syntax)


def format_labels(labels: Mapping[str, str]) -> str:
    """Canonical label string: sorted keys, ``__name__`` dropped, exposition-format escapes.

    Names that are not ``[a-zA-Z_][a-zA-Z0-9_]*`` are quoted, as Prometheus 3 writes them.

    Parameters
    ----------
    labels : mapping of str to str
        Label names and values.

    Returns
    -------
    str
        ``{k1="v1",k2="v2"}``; ``{}`` for an empty set.
    """
    return "{" + ",".join(f'{_name(k)}="{_escape(str(labels[k]))}"' for k in sorted(labels) if k != "__name__") + "}"


def _is_name_char(ch: str, first: bool) -> bool:
    return ch == "_" or ch.isascii() and (ch.isalpha() or (not first and ch.isdigit()))


def _read_quoted(text: str, i: int) -> tuple[str, int]:
    """Read a double-quoted string starting at ``text[i] == '"'``; return (value, index after)."""
    out: list[str] = []
    pending: bytearray = bytearray()  # \xNN bytes (Go quotes invalid UTF-8 this way)
    j = i + 1
    n = len(text)
    while j < n:
        ch = text[j]
        if ch == '"':
            if pending:
                out.append(pending.decode("utf-8", errors="replace"))
            return "".join(out), j + 1
        if ch != "\\":
            if pending:
                out.append(pending.decode("utf-8", errors="replace"))
                pending = bytearray()
            out.append(ch)
            j += 1
            continue
        if j + 1 >= n:
            break
        esc = text[j + 1]
        if esc == "x" and j + 3 < n:
            try:
                pending.append(int(text[j + 2:j + 4], 16))
            except ValueError:
                raise LabelSyntaxError(f"bad \\x escape {text[j:j + 4]!r}", j) from None
            j += 4
            continue
        if pending:
            out.append(pending.decode("utf-8", errors="replace"))
            pending = bytearray()
        if esc in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[esc])
            j += 2
        elif esc in "uU":
            width = 4 if esc == "u" else 8
            try:
                out.append(chr(int(text[j + 2:j + 2 + width], 16)))
            except ValueError:
                raise LabelSyntaxError(f"bad \\{esc} escape {text[j:j + 2 + width]!r}", j) from None
            j += 2 + width
        elif esc in "01234567":
            try:
                out.append(chr(int(text[j + 1:j + 4], 8)))
            except ValueError:
                raise LabelSyntaxError(f"bad octal escape {text[j:j + 4]!r}", j) from None
            j += 4
        else:
            raise LabelSyntaxError(f"unknown escape \\{esc}", j)
    raise LabelSyntaxError("unterminated quoted label value", i)


def parse_labels(text: str, start: int = 0) -> dict[str, str]:
    """Parse ``{name="value", ...}`` (canonical, promtool, Grafana legend forms).

    Parameters
    ----------
    text : str
        The label block, starting with ``{`` at ``start`` and ending with ``}`` (surrounding
        whitespace allowed).
    start : int
        Offset of the block in ``text``.

    Returns
    -------
    dict of str to str

    Raises
    ------
    LabelSyntaxError
        With ``offset``, the 0-based position of the problem in ``text``.
    """
    labels, end = _parse_block(text, start)
    if text[end:].strip():
        raise LabelSyntaxError("unexpected text after the closing '}'", end)
    return labels


def _parse_block(text: str, start: int) -> tuple[dict[str, str], int]:
    n = len(text)
    i = start
    while i < n and text[i].isspace():
        i += 1
    if i >= n or text[i] != "{":
        raise LabelSyntaxError("expected '{' to start a label set", i)
    i += 1
    labels: dict[str, str] = {}
    expect_sep = False
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            raise LabelSyntaxError("unterminated label set: missing '}'", i)
        ch = text[i]
        if ch == "}":
            return labels, i + 1
        if expect_sep:
            if ch != ",":
                raise LabelSyntaxError(f"expected ',' or '}}' between labels, got {ch!r}", i)
            i += 1
            expect_sep = False
            continue
        if ch == '"':  # quoted label name (UTF-8 names, Prometheus 3)
            name, i = _read_quoted(text, i)
        else:
            j = i
            while j < n and _is_name_char(text[j], j == i):
                j += 1
            if j == i:
                raise LabelSyntaxError(f"expected a label name, got {ch!r}", i)
            name, i = text[i:j], j
        while i < n and text[i].isspace():
            i += 1
        if i >= n or text[i] != "=":
            raise LabelSyntaxError(f"expected '=' after label name {name!r}", i)
        i += 1
        while i < n and text[i].isspace():
            i += 1
        if i >= n or text[i] != '"':
            raise LabelSyntaxError(f"expected '\"' to start the value of label {name!r}", i)
        value, i = _read_quoted(text, i)
        if name in labels:
            raise LabelSyntaxError(f"duplicate label name {name!r}", i)
        labels[name] = value
        expect_sep = True


def parse_series(text: str) -> tuple[str | None, dict[str, str]]:
    """Parse ``name{labels}``, ``{labels}`` or a bare ``name``; return ``(name, labels)``.

    ``__name__`` inside the braces counts as the name.  ``name`` is None when there is none.

    >>> parse_series('up{job="a"}')
    ('up', {'job': 'a'})
    >>> parse_series('{__name__="up", job="a"}')
    ('up', {'job': 'a'})
    """
    s = text.strip()
    brace = s.find("{")
    name: str | None
    if brace < 0:
        if not s or not all(_is_name_char(c, k == 0) or c == ":" for k, c in enumerate(s)):
            raise LabelSyntaxError(f"not a metric name or label set: {text!r}", 0)
        return s, {}
    name = s[:brace].strip() or None
    if name is not None and not all(_is_name_char(c, k == 0) or c == ":" for k, c in enumerate(name)):
        raise LabelSyntaxError(f"not a metric name: {name!r}", 0)
    labels = parse_labels(s, brace)
    inner = labels.pop("__name__", None)
    return name or inner, labels
