"""Output folders the commands write: refused at once, with the option's name, when a file is in
the way (a folder cannot be made there), instead of after the simulations."""
from __future__ import annotations

from pathlib import Path


def out_dir_error(path: str | None, option: str) -> str | None:
    """The error text when ``path`` (a local folder to write) exists and is not a folder; None
    when it is absent, a folder, or a URL (fsspec's stores check their own).

    >>> import tempfile, os
    >>> f = tempfile.NamedTemporaryFile(delete=False).name
    >>> out_dir_error(f, "--out").endswith("is a file, not a folder")
    True
    >>> out_dir_error(os.path.dirname(f), "--out"), out_dir_error("s3://bucket/x", "--out"), out_dir_error(None, "--out")
    (None, None, None)
    """
    if not path or "://" in str(path):
        return None
    p = Path(path)
    for parent in (p, *p.parents):
        if parent.exists():
            if not parent.is_dir():
                return f"{option} {path}: {parent} is a file, not a folder"
            return None
    return None


def check_out_dir(path: str | None, option: str) -> None:
    """:func:`out_dir_error` as a :class:`cfsim.commands.CommandError` (``error: ...``, exit 2)."""
    from cfsim.commands import CommandError

    why = out_dir_error(path, option)
    if why:
        raise CommandError(why)
