"""A lab run's manifest: the one place that knows its file names.

A run folder of :mod:`cfsim.lab.runner` records how the run was made and what it measured in its
manifest. The lab writes it gzip-compressed, ``manifest.json.gz``: most of a manifest is
``window_samples`` (the raw /metrics snapshots at the window's ends), which compresses well, and
``data/lab`` is tracked in git, so every clone carries every run's manifest. Folders made before
(and hand-made ones, such as the tests' fixtures) hold a plain ``manifest.json``; every reader
takes either, the compressed one first.

The compressed file is deterministic (no time stamp or file name in the gzip header, keys sorted),
so writing the same manifest again gives the same bytes and git sees no change.

This is the *run*'s manifest only: ``data/lab/manifest.json`` (the index of the grids) and a
sweep's ``manifest.json`` (:mod:`cfsim.sweep.store`) are other files and stay plain JSON.
"""
from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any, Mapping

from cfsim.io.errors import CfsimParseError

__all__ = ["MANIFEST_GZ", "MANIFEST_JSON", "MANIFEST_NAMES", "manifest_path", "has_manifest",
           "read_manifest", "check_manifest", "read_json_file", "write_manifest", "manifest_folders"]

MANIFEST_GZ = "manifest.json.gz"
MANIFEST_JSON = "manifest.json"
#: the names a run's manifest may have, the one a reader prefers first
MANIFEST_NAMES = (MANIFEST_GZ, MANIFEST_JSON)

# the smallest file zlib makes: a manifest is written once and read many times
_COMPRESS_LEVEL = 9


def manifest_path(run_dir: str | os.PathLike[str]) -> Path | None:
    """The run's manifest file: ``manifest.json.gz``, else ``manifest.json``, else None."""
    for name in MANIFEST_NAMES:
        path = Path(run_dir) / name
        if path.is_file():
            return path
    return None


def has_manifest(run_dir: str | os.PathLike[str]) -> bool:
    """Whether ``run_dir`` holds a manifest in either form."""
    return manifest_path(run_dir) is not None


def read_json_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON file (a manifest, a summary, an export body) as parsed JSON; gzip-compressed when its
    name ends in ``.gz``.

    Raises :class:`~cfsim.io.errors.CfsimParseError` (a ``ValueError``) naming the file when it is
    not valid gzip or not valid JSON.
    """
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                return json.load(fh)
        with open(path, "rb") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise CfsimParseError(str(path), f"not valid JSON: {exc.msg}", line=exc.lineno, column=exc.colno) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        # a truncated or damaged download, or plain JSON under a .gz name
        raise CfsimParseError(str(path), f"not a valid gzip file: {exc}") from None
    except UnicodeDecodeError as exc:
        raise CfsimParseError(str(path), f"not UTF-8 text: {exc.reason}") from None


def read_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The run's manifest (``manifest.json.gz`` or ``manifest.json``) as parsed JSON.

    Raises ``FileNotFoundError`` naming the folder when it holds neither, and
    :class:`~cfsim.io.errors.CfsimParseError` naming the file when it cannot be read.
    """
    path = manifest_path(run_dir)
    if path is None:
        raise FileNotFoundError(f"{run_dir}: not a lab run folder (no {MANIFEST_GZ} or {MANIFEST_JSON})")
    doc = read_json_file(path)
    check_manifest(doc, str(path))
    return doc


#: the manifest's sections that are JSON objects (or null) whenever the lab writes them: readers
#: take ``manifest.get(section) or {}`` and look inside
_OBJECT_SECTIONS = ("cgroup", "cgroup_counters", "code", "cpu_watch", "exectrace", "exports", "gctrace", "gomaxprocs",
                    "gomemlimit", "host", "host_c2c", "host_cpu", "host_interrupts", "host_memory_latency",
                    "host_memory_path", "host_quiet",
                    "loadavg", "memory_counters", "oom", "perf", "process_memory", "processes", "profile",
                    "scenario", "scrapes", "snapshot_reads", "summary_notes", "tenant", "threads", "times",
                    "window_samples")
#: ``section.key`` -> the numbers (or null) the readers compute with
_NUMBER_KEYS = {
    "host": ("hz", "host_cpus", "affinity_cpus", "mem_total_bytes", "page_bytes"),
    "times": ("duration_s", "end_unix_s", "launch_unix_s", "setup_s", "start_unix_s", "warmup_s",
              "window_end_unix_s", "window_start_unix_s"),
    "host_cpu": ("harness_cores", "host_busy_cores", "host_cpus", "others_cores", "root_cgroup_cores", "steal_cores",
                 "tenants_cores", "window_s", "workload_cores"),
    "exports": ("start_s", "end_s", "step_s"),
}


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false"}.get(type(value), "a number")


def _check_number(value: Any, source: str, path: str) -> None:
    """A number or null where the readers compute with one (true/false is no number here)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise CfsimParseError(source, f"expected a number or null, got {_json_type(value)} ({value!r:.40})", path=path)


def check_manifest(doc: Any, source: str = "<manifest>") -> None:
    """Refuse a manifest whose shape the readers cannot use, naming the file and the key: the
    whole document and its sections (``host``, ``times``, ...) must be JSON objects, and the
    numbers the validation computes with (``times.start_unix_s``, ``host.hz``, ...) numbers (or
    null). A hand-edited or damaged manifest then fails here, with where, instead of deep inside
    a validation.

    >>> check_manifest({"host": {"hz": 250}, "times": {"start_unix_s": 1.5}})
    >>> check_manifest({"times": {"start_unix_s": "abc"}}, "m.json")
    Traceback (most recent call last):
    ...
    cfsim.io.errors.CfsimParseError: m.json: times.start_unix_s: expected a number or null, got a string ('abc')
    """
    if not isinstance(doc, dict):
        raise CfsimParseError(source, f"expected a JSON object (a run's manifest), got {_json_type(doc)}")
    for section in _OBJECT_SECTIONS:
        value = doc.get(section)
        if value is not None and not isinstance(value, dict):
            raise CfsimParseError(source, f"expected an object or null, got {_json_type(value)} ({value!r:.40})",
                                  path=section)
    for section, keys in _NUMBER_KEYS.items():
        block = doc.get(section) or {}
        for key in keys:
            _check_number(block.get(key), source, f"{section}.{key}")
    counters = doc.get("cgroup_counters") or {}
    for end in ("window_start", "window_end"):
        block = counters.get(end)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise CfsimParseError(source, f"expected an object or null, got {_json_type(block)}",
                                  path=f"cgroup_counters.{end}")
        for key, value in block.items():
            _check_number(value, source, f"cgroup_counters.{end}.{key}")


def _manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """The compressed file: the JSON text the lab always wrote (one-space indent, sorted keys,
    anything else as its ``str``), gzip'd with ``mtime=0`` and no file name in the header."""
    text = json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n"
    return gzip.compress(text.encode(), compresslevel=_COMPRESS_LEVEL, mtime=0)


def write_manifest(run_dir: str | os.PathLike[str], manifest: Mapping[str, Any]) -> Path:
    """Write the run's manifest as ``run_dir/manifest.json.gz`` and return its path.

    A plain ``manifest.json`` left in the folder is removed afterwards: readers prefer the
    compressed file, and two copies could disagree. The file is written beside its final name and
    renamed, so an interrupted write never leaves a truncated ``.gz`` that readers would prefer.
    """
    folder = Path(run_dir)
    path = folder / MANIFEST_GZ
    partial = folder / (MANIFEST_GZ + ".partial")
    partial.write_bytes(_manifest_bytes(manifest))
    os.replace(partial, path)
    (folder / MANIFEST_JSON).unlink(missing_ok=True)
    return path


def manifest_folders(root: str | os.PathLike[str]) -> list[Path]:
    """Every folder at or below ``root`` holding a manifest in either form, sorted (each once).

    This takes ``data/lab/manifest.json``, the grids' index, too when ``root`` is ``data/lab``:
    callers that want run folders keep their own test (``summary.json`` beside it, say).
    """
    base = Path(root)
    return sorted({p.parent for name in MANIFEST_NAMES for p in base.rglob(name) if p.is_file()})
