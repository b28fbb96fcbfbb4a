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


def out_file_error(path: str | None, option: str) -> str | None:
    """The error text when ``path`` (a local file to write, e.g. ``params.toml``) cannot be one:
    it is a folder, or a file stands where one of its folders would be; None when it can be
    written (missing folders are made when it is written).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> out_file_error(d, "--out").endswith("is a folder; give a file name, e.g. " + os.path.join(d, "params.toml"))
    True
    >>> out_file_error(os.path.join(d, "new", "p.toml"), "--out") is None
    True
    """
    if not path:
        return None
    p = Path(path)
    if p.is_dir():
        return f"{option} {path}: is a folder; give a file name, e.g. {p / 'params.toml'}"
    return out_dir_error(str(p.parent), option)


def check_out_file(path: str | None, option: str) -> None:
    """:func:`out_file_error` as a :class:`cfsim.commands.CommandError` (``error: ...``, exit 2)."""
    from cfsim.commands import CommandError

    why = out_file_error(path, option)
    if why:
        raise CommandError(why)


def write_out_file(path: str, text: str) -> None:
    """Write ``text`` to ``path``, making its missing folders first."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
