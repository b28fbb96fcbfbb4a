"""The sweep store: one tidy row per run (grid point x seed) as Hive-partitioned Parquet.

Layout of an output directory::

    OUT/manifest.json                          grid, root seed, base scenario, versions
    OUT/runs/bucket=007/part-<token>.parquet   finished runs (one row each)
    OUT/runs/bucket=007/run-<run_id>.json      a run finished since the last part (journal)

The moment a run finishes, its row is written to a hidden temporary file and renamed into
place (``os.replace``), so a sweep killed at any instant -- ``kill -9`` included -- leaves only
whole files, and ``--resume`` computes only the runs that have no row. A one-row Parquet file
costs ~10 ms to write, so a finished run first lands as a small JSON journal file (~0.1 ms);
every 64 journal rows of a bucket are folded into one Parquet part, and when the sweep ends
each bucket becomes a single part. Folding writes the part first and deletes its inputs after:
a kill in between can leave a run twice on disk, so readers keep one row per ``run_id`` and
the next fold removes the leftovers. Runs are bucketed by a hash of their grid point (all the
seeds of a point share a bucket), which works for any value type of any axis;
``pandas.read_parquet(OUT/"runs")`` reads a finished sweep (with a ``bucket`` column).
"""
from __future__ import annotations

import io
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from cfsim.scenario.schema import SCHEMA

__all__ = ["StoreError", "RunStore", "META_COLUMNS", "column_type", "n_buckets_for",
           "bucket_of", "dependency_versions", "rows_schema", "rows_to_table"]

MANIFEST = "manifest.json"
RUNS = "runs"
JOURNAL = ".json"
#: journal rows of a bucket folded into one Parquet part
FLUSH_EVERY = 64

#: columns every row has, before the scenario (``section.key``) and result columns
META_COLUMNS: dict[str, pa.DataType] = {
    "run_id": pa.string(),
    "point_id": pa.string(),
    "point_index": pa.int64(),
    "seed": pa.int64(),          # replicate index 0..N-1 (the run's own seed is run.seed)
    "status": pa.string(),       # "ok" | "error"
    "error": pa.string(),
    "scenario_toml": pa.string(),  # the resolved scenario, for failed runs only
    "wall_s": pa.float64(),
}


class StoreError(RuntimeError):
    """The output location cannot be used (exists without --resume, unsupported URL, ...)."""


_ARROW_KINDS = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(),
                "bool": pa.bool_(), "list": pa.string()}


def column_type(key: str, any_kinds: Mapping[str, str]) -> pa.DataType:
    """Arrow type of the scenario column ``section.key`` (kind ``any`` decided per sweep)."""
    section, name = key.split(".", 1)
    kind = SCHEMA[section][name].kind
    if kind == "any":
        kind = any_kinds.get(key, "str")
    return _ARROW_KINDS.get(kind, pa.string())


def n_buckets_for(n_runs: int) -> int:
    """About 256 runs per bucket, between 1 and 256 buckets."""
    return max(1, min(256, -(-n_runs // 256)))


def bucket_of(point_id: str, n_buckets: int) -> int:
    return int(point_id[:8], 16) % n_buckets


def dependency_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in ("cfsim", "numpy", "pandas", "pyarrow", "simpy", "scipy", "xarray", "tqdm",
                 "matplotlib", "dask", "distributed", "fsspec"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    import platform

    out["python"] = platform.python_version()
    return out


# ---------------------------------------------------------------------------------------------
# Filesystems: a local directory (atomic rename) or, when fsspec is installed, a URL.


class _LocalFS:
    def __init__(self, root: str):
        self.root = str(Path(root).expanduser())

    def join(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def child(self, directory: str, name: str) -> str:
        return os.path.join(directory, name)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def write_atomic(self, path: str, data: bytes) -> None:
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as fh:
            return fh.read()

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def clean_tmp(self, path: str) -> None:
        for name in self.listdir(path):
            if name.startswith(".") and name.endswith(".tmp"):
                self.remove(os.path.join(path, name))


class _FsspecFS(_LocalFS):
    """Object stores write an object whole or not at all, so a plain put is atomic there."""

    def __init__(self, url: str):
        try:
            import fsspec
        except ImportError:
            raise StoreError(f"output to {url!r} needs fsspec (pip install fsspec s3fs), which is not "
                             f"installed here; give a local directory instead") from None
        try:
            self.fs, root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise StoreError(f"output to {url!r} is not supported here: {exc}") from None
        self.root = root.rstrip("/")
        self.url = url

    def join(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def child(self, directory: str, name: str) -> str:
        return f"{directory}/{name}"

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    def write_atomic(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data)

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False))
        except FileNotFoundError:
            return []

    def remove(self, path: str) -> None:
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass


def _filesystem(location: str) -> _LocalFS:
    if "://" in location and not location.startswith("file://"):
        return _FsspecFS(location)
    if location.startswith("file://"):
        location = location[len("file://"):]
    return _LocalFS(location)


# ---------------------------------------------------------------------------------------------


# Arrow's thread pools are left unused (use_threads=False): a run is one row, and a process that
# has started them may abort at exit ("terminate called without an active exception",
# apache/arrow#34314), which would turn a finished sweep into exit status 134.


def _table_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


@dataclass
class RunStore:
    """Reads and writes one sweep's output location (a directory or, with fsspec, a URL)."""

    location: str

    def __post_init__(self) -> None:
        self.fs = _filesystem(self.location)
        self._manifest: dict[str, Any] | None = None
        self.configure(META_COLUMNS)

    # manifest -----------------------------------------------------------------------------
    @property
    def manifest_path(self) -> str:
        return self.fs.join(MANIFEST)

    def has_manifest(self) -> bool:
        return self.fs.exists(self.manifest_path)

    def read_manifest(self) -> dict[str, Any]:
        if not self.has_manifest():
            raise StoreError(f"{self.location}: no {MANIFEST} here; is this a sweep output directory?")
        self._manifest = json.loads(self.fs.read(self.manifest_path))
        return self._manifest

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        self.fs.makedirs(self.fs.root)
        self.fs.write_atomic(self.manifest_path, (json.dumps(manifest, indent=2) + "\n").encode())
        self._manifest = dict(manifest)

    def delete(self) -> None:
        """Remove this sweep (its runs and manifest; nothing else in the directory)."""
        runs = self.fs.join(RUNS)
        if isinstance(self.fs, _FsspecFS):
            if self.fs.exists(runs):
                self.fs.fs.rm(runs, recursive=True)
        else:
            import shutil

            shutil.rmtree(runs, ignore_errors=True)
        self.fs.remove(self.manifest_path)

    # rows ------------------------------------------------------------------------------------
    def _bucket_dir(self, bucket: int) -> str:
        return self.fs.join(RUNS, f"bucket={bucket:03d}")

    def bucket_dirs(self) -> list[str]:
        runs = self.fs.join(RUNS)
        return [self.fs.child(runs, name) for name in self.fs.listdir(runs)
                if name.startswith("bucket=")]

    def prepare(self, n_buckets: int) -> None:
        for b in range(n_buckets):
            self.fs.makedirs(self._bucket_dir(b))

    def configure(self, schema: Mapping[str, pa.DataType], flush_every: int = FLUSH_EVERY) -> None:
        """The fixed columns' types (meta + scenario) and how many journal rows make a part."""
        self.schema = dict(schema)
        self.flush_every = flush_every
        self._pending: dict[int, int] = {}

    def write_run(self, row: Mapping[str, Any], bucket: int) -> None:
        """Write one finished run atomically (a journal file), then fold the bucket's journal into
        a Parquet part once it holds ``flush_every`` runs."""
        path = self.fs.child(self._bucket_dir(bucket), f"run-{row['run_id']}{JOURNAL}")
        self.fs.write_atomic(path, json.dumps(row, separators=(",", ":")).encode())
        self._pending[bucket] = self._pending.get(bucket, 0) + 1
        if self._pending[bucket] >= self.flush_every:
            self.flush(bucket)

    def _names(self, bdir: str) -> list[str]:
        return [n for n in self.fs.listdir(bdir)
                if n.endswith((".parquet", JOURNAL)) and not n.startswith((".", "_"))]

    def _journal(self, bdir: str) -> list[str]:
        return [self.fs.child(bdir, n) for n in self._names(bdir) if n.endswith(JOURNAL)]

    def _parts(self, bdir: str) -> list[str]:
        return [self.fs.child(bdir, n) for n in self._names(bdir) if n.endswith(".parquet")]

    def flush(self, bucket: int) -> None:
        """Journal rows of one bucket -> one Parquet part (written first, journal removed after)."""
        bdir = self._bucket_dir(bucket)
        journal = self._journal(bdir)
        if journal:
            table = self._journal_table(journal)
            self.fs.write_atomic(self.fs.child(bdir, f"part-{uuid.uuid4().hex[:12]}.parquet"),
                                 _table_bytes(table))
            for path in journal:
                self.fs.remove(path)
        self._pending[bucket] = 0

    def _journal_table(self, paths: list[str]) -> pa.Table:
        return rows_to_table([json.loads(self.fs.read(p)) for p in paths], self.schema)

    def done_run_ids(self) -> set[str]:
        """Every run id that has a row on disk (journal file names and Parquet parts)."""
        done: set[str] = set()
        for bdir in self.bucket_dirs():
            for name in self._names(bdir):
                if name.endswith(JOURNAL):
                    done.add(name[len("run-"):-len(JOURNAL)])
                else:
                    path = self.fs.child(bdir, name)
                    done.update(self._read(path, columns=["run_id"]).column("run_id").to_pylist())
        return done

    def _read(self, path: str, columns: list[str] | None = None) -> pa.Table:
        return pq.read_table(io.BytesIO(self.fs.read(path)), columns=columns, use_threads=False)

    def read_table(self) -> pa.Table:
        """All rows, one per run id (duplicates a killed compaction may leave are dropped)."""
        tables = []
        for bdir in self.bucket_dirs():
            tables += [self._read(p) for p in self._parts(bdir)]
            journal = self._journal(bdir)
            if journal:
                tables.append(self._journal_table(journal))
        if not tables:
            return pa.table({name: pa.array([], type=t) for name, t in META_COLUMNS.items()})
        table = pa.concat_tables(tables, promote_options="permissive")
        return _dedupe(table)

    def clean(self) -> None:
        """Remove temporary files a killed writer left behind."""
        if isinstance(self.fs, _FsspecFS):
            return
        for bdir in self.bucket_dirs():
            self.fs.clean_tmp(bdir)
        self.fs.clean_tmp(self.fs.root)

    def compact(self) -> int:
        """Fold every bucket's journal and parts into one Parquet file; returns files merged."""
        merged = 0
        for bdir in self.bucket_dirs():
            parts, journal = self._parts(bdir), self._journal(bdir)
            if len(parts) + len(journal) <= 1 and not journal:
                continue
            tables = [self._read(p) for p in parts]
            if journal:
                tables.append(self._journal_table(journal))
            table = _dedupe(pa.concat_tables(tables, promote_options="permissive"))
            table = table.sort_by([("point_index", "ascending"), ("seed", "ascending")])
            target = self.fs.child(bdir, f"part-{uuid.uuid4().hex[:12]}.parquet")
            self.fs.write_atomic(target, _table_bytes(table))
            for p in parts + journal:
                self.fs.remove(p)
            merged += len(parts) + len(journal)
        self._pending = {}
        return merged


def rows_to_table(rows: list[Mapping[str, Any]], schema: Mapping[str, pa.DataType]) -> pa.Table:
    """Rows (dicts) -> a table: fixed types for meta and scenario columns, inferred for results."""
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    fields, arrays = [], []
    for name in names:
        values = [row.get(name) for row in rows]
        typ = schema.get(name)
        try:
            arr = pa.array(values, type=typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arr = pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v))
                            for v in values], type=pa.string())
        fields.append(pa.field(name, arr.type))
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _dedupe(table: pa.Table) -> pa.Table:
    ids = table.column("run_id").to_pylist()
    if len(set(ids)) == len(ids):
        return table
    keep: dict[str, int] = {}
    for i, rid in enumerate(ids):
        keep.setdefault(rid, i)
    return table.take(pa.array(sorted(keep.values()), type=pa.int64()))


def rows_schema(scenario_keys: Iterable[str], any_kinds: Mapping[str, str]) -> dict[str, pa.DataType]:
    """The fixed part of a row's schema: meta columns and every scenario column."""
    schema = dict(META_COLUMNS)
    for key in scenario_keys:
        schema[key] = column_type(key, any_kinds)
    return schema
