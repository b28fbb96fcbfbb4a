"""Reading a sweep back: ``SweepResults.open(path)``.

``.frame`` is the tidy table (one row per grid point and seed, grid order); ``.to_xarray()``
is an :class:`xarray.Dataset` with one dimension per grid axis plus ``seed`` (the replicate
index; each run's own seed is the ``run.seed`` variable), for N-dimensional analysis::

    res = SweepResults.open("out/limits")
    ds = res.to_xarray()
    ds["throughput_per_s"].mean("seed").sel({"go.gomaxprocs": "automaxprocs"})
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cfsim.sweep.grid import Grid
from cfsim.sweep.store import META_COLUMNS, RunStore

__all__ = ["SweepResults"]


@dataclass
class SweepResults:
    """A finished (or partly finished) sweep on disk."""

    path: str
    manifest: dict[str, Any]
    store: RunStore = field(repr=False)
    _frame: Any = field(default=None, repr=False)

    @classmethod
    def open(cls, path: str | Path) -> "SweepResults":
        from cfsim.sweep.store import rows_schema

        store = RunStore(str(path))
        manifest = store.read_manifest()
        store.configure(rows_schema(manifest["scenario_columns"], manifest.get("any_kinds", {})))
        return cls(str(path), manifest, store)

    @property
    def grid(self) -> Grid:
        return Grid.from_json(self.manifest["grid"])

    @property
    def axes(self) -> list[str]:
        return [a["key"] for a in self.manifest["grid"]]

    @property
    def scenario_columns(self) -> list[str]:
        return list(self.manifest["scenario_columns"])

    @property
    def frame(self):
        """All rows as a :class:`pandas.DataFrame`, in grid order then seed."""
        if self._frame is None:
            df = self.store.read_table().to_pandas(use_threads=False)
            if len(df):
                df = df.sort_values(["point_index", "seed"], kind="stable").reset_index(drop=True)
            self._frame = df
        return self._frame

    @property
    def result_columns(self) -> list[str]:
        known = set(META_COLUMNS) | set(self.scenario_columns)
        return [c for c in self.frame.columns if c not in known]

    @property
    def errors(self):
        """The rows of runs that failed, with the error and the scenario that caused it."""
        df = self.frame
        return df[df["status"] != "ok"] if len(df) else df

    def coords(self) -> dict[str, list[Any]]:
        """Axis values as they appear in the table (e.g. GOMAXPROCS 2 as the text "2")."""
        from cfsim.sweep.runner import _cell

        kinds = self.manifest.get("any_kinds", {})
        return {a["key"]: [_cell(a["key"], v, kinds) for v in a["values"]] for a in self.manifest["grid"]}

    def to_xarray(self):
        """An :class:`xarray.Dataset` with dims = grid axes + ``seed``; missing runs are NaN."""
        import xarray as xr

        coords = self.coords()
        axes = list(coords)
        seeds = int(self.manifest["seeds"])
        shape = tuple(len(v) for v in coords.values()) + (seeds,)
        df = self.frame
        variables = self.result_columns + ["status", "error", "run.seed", "wall_s"]
        data_vars = {}
        if len(df):
            flat_index = df["point_index"].to_numpy(dtype=np.int64) * seeds + df["seed"].to_numpy(dtype=np.int64)
        else:
            flat_index = np.zeros(0, dtype=np.int64)
        size = int(np.prod(shape))
        complete = len(df) == size  # rows are unique per run, so every cell is filled
        for name in variables:
            if name not in df.columns:
                continue
            col = df[name]
            kind = col.dtype.kind
            if kind in "iub" and complete:
                arr = np.empty(size, dtype=col.dtype)
                arr[flat_index] = col.to_numpy()
            elif kind in "iubf":
                arr = np.full(size, np.nan)
                arr[flat_index] = col.to_numpy(dtype=np.float64, na_value=np.nan)
            else:
                arr = np.full(size, None, dtype=object)
                arr[flat_index] = col.to_numpy(dtype=object)
            data_vars[name] = (axes + ["seed"], arr.reshape(shape))
        ds = xr.Dataset(data_vars, coords={**coords, "seed": np.arange(seeds)})
        ds.attrs.update({
            "cfsim_sweep": self.manifest.get("format", ""),
            "root_seed": str(self.manifest.get("root_seed")),
            "scenario_source": self.manifest["scenario"]["source"],
            "scenario_toml": self.manifest["scenario"]["toml"],
        })
        return ds
