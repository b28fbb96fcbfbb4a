"""Errors raised by :mod:`cfsim.io`.

Every reader raises exactly one kind of error for malformed input, :class:`CfsimParseError`, and
its message always starts with *where*: ``<file>:<line>:<column>: ...`` for line-oriented formats,
``<file>: <JSON path>: ...`` (for example ``data.result[3].values[17]``) for JSON.
"""
from __future__ import annotations

__all__ = ["CfsimParseError", "PrometheusAPIError", "MissingMetricsError"]


class CfsimParseError(ValueError):
    """Malformed input: the message names the source and the position.

    Parameters
    ----------
    source : str
        File path, URL or ``"<buffer>"``.
    message : str
        What is wrong, in words.
    line, column : int, optional
        1-based position for text formats.
    path : str, optional
        JSON path (``data.result[3].values[17]``) for JSON formats.
    """

    def __init__(self, source: str, message: str, *, line: int | None = None,
                 column: int | None = None, path: str | None = None) -> None:
        self.source = str(source)
        self.message = message
        self.line = line
        self.column = column
        self.path = path
        where = self.source
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        if path:
            where += f": {path}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self):
        # picklable from its own arguments, so a worker process can pass it back (see _rebuild)
        return _rebuild, (type(self), (self.source, self.message),
                          {"line": self.line, "column": self.column, "path": self.path})


class PrometheusAPIError(RuntimeError):
    """A well-formed Prometheus API error response (``"status": "error"``) or an HTTP failure.

    Attributes ``error_type`` (the server's ``bad_data``, ``execution``, ``timeout`` ..., or one
    of :data:`CLIENT_ERRORS` found on the way: ``unauthorized``, ``forbidden``, ``tls``,
    ``unreachable``, ``timeout``, ``bad_url``), ``error`` (the message), ``http_status`` (when
    known) and ``source``.
    """

    #: failures on the way to the server (no Prometheus error body): the message says it alone
    CLIENT_ERRORS = ("unauthorized", "forbidden", "tls", "unreachable", "timeout", "bad_url")

    def __init__(self, source: str, error_type: str, error: str, http_status: int | None = None) -> None:
        self.source = str(source)
        self.error_type = error_type
        self.error = error
        self.http_status = http_status
        if error_type in self.CLIENT_ERRORS:
            super().__init__(f"{self.source}: {error}")
            return
        status = f" (HTTP {http_status})" if http_status else ""
        super().__init__(f"{self.source}: Prometheus returned an error{status}: {error_type}: {error}")

    def __reduce__(self):
        return type(self), (self.source, self.error_type, self.error, self.http_status)


class MissingMetricsError(KeyError):
    """Metrics an analysis needs are not in the data; the message names them and the analyses."""

    def __init__(self, missing: dict[str, list[str]], available: list[str]) -> None:
        self.missing = missing
        self.available = available
        lines = [f"  {metric}: needed by {', '.join(analyses)}" for metric, analyses in missing.items()]
        shown = ", ".join(available[:20]) + (" ..." if len(available) > 20 else "")
        msg = (f"{len(missing)} metric(s) missing from the data:\n" + "\n".join(lines)
               + f"\navailable metrics: {shown or '(none)'}")
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])

    def __reduce__(self):
        return type(self), (self.missing, self.available)


def _rebuild(cls: type, args: tuple, kwargs: dict) -> BaseException:
    """An error from its arguments and keyword arguments (pickle's ``__reduce__`` gives only
    positional ones): errors raised in worker processes keep their class and fields."""
    return cls(*args, **kwargs)
