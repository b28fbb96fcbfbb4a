"""What-if sweeps: a grid of scenario overrides x seeds, run on a local process pool or a Dask
cluster, stored as tidy Hive-partitioned Parquet (one row per run), resumable after any kill.

>>> from cfsim.sweep import parse_axis, Grid
>>> Grid([parse_axis("cgroup.cpu_limit=0.25:4:0.05"),
...       parse_axis("go.gomaxprocs=automaxprocs,go1.25,host,2")]).shape
(76, 4)

See :func:`run_sweep` (the library entry point), :class:`SweepResults` (reading a sweep back:
``.frame``, ``.to_xarray()``) and :func:`plot_sweep`.
"""
from cfsim.sweep.executors import (DaskExecutor, Executor, ExecutorUnavailable, LocalExecutor,
                                   SerialExecutor, default_workers, make_executor)
from cfsim.sweep.grid import Axis, Grid, GridError, Study, load_study, parse_axis, parse_values
from cfsim.sweep.results import SweepResults
from cfsim.sweep.runner import RunTask, SweepReport, plan_runs, run_sweep
from cfsim.sweep.seeds import point_id, run_seed
from cfsim.sweep.store import RunStore, StoreError

__all__ = ["Axis", "Grid", "GridError", "Study", "load_study", "parse_axis", "parse_values",
           "Executor", "ExecutorUnavailable", "SerialExecutor", "LocalExecutor", "DaskExecutor",
           "default_workers", "make_executor", "RunTask", "SweepReport", "plan_runs", "run_sweep",
           "point_id", "run_seed", "RunStore", "StoreError", "SweepResults", "plot_sweep"]


def plot_sweep(*args, **kwargs):
    """See :func:`cfsim.sweep.plot.plot_sweep` (imports matplotlib on first use)."""
    from cfsim.sweep.plot import plot_sweep as _plot

    return _plot(*args, **kwargs)
