"""Where runs execute: the :class:`Executor` seam.

Every executor maps one picklable function over tasks and yields ``(task, result, exc)`` as
runs complete, in whatever order they complete. Results never depend on the executor: each
run's seed is part of its task (:mod:`cfsim.sweep.seeds`).

- :class:`SerialExecutor`: in this process (debugging, ``--workers 0``).
- :class:`LocalExecutor`: a :class:`concurrent.futures.ProcessPoolExecutor` (the default).
- :class:`DaskExecutor`: an existing ``dask.distributed`` cluster (``--dask tcp://host:8786``)
  or a :class:`distributed.LocalCluster` it starts itself (``--dask local``). Dask is the
  optional extra ``pip install 'cfsim[dask]'``; remote workers need cfsim installed too.

At most a few tasks per worker are in flight at once, so memory stays flat however large the
grid, and a killed sweep loses only the runs that were being computed.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterable, Iterator, Protocol

__all__ = ["Executor", "ExecutorUnavailable", "SerialExecutor", "LocalExecutor", "DaskExecutor",
           "default_workers", "make_executor", "map_in_order", "MIN_POOLED"]

Outcome = tuple[Any, Any, BaseException | None]


class ExecutorUnavailable(RuntimeError):
    """The requested executor cannot run here (missing optional dependency, no cluster)."""


class Executor(Protocol):
    name: str
    workers: int

    def __enter__(self) -> "Executor": ...

    def __exit__(self, *exc: object) -> None: ...

    def imap_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Outcome]:
        """Yield ``(task, fn(task), None)`` or ``(task, None, exception)`` as runs finish."""
        ...


def default_workers() -> int:
    """All the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class SerialExecutor:
    name = "serial"
    workers = 1

    def __enter__(self) -> "SerialExecutor":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def imap_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Outcome]:
        for task in tasks:
            try:
                yield task, fn(task), None
            except Exception as exc:  # noqa: BLE001 - reported per task
                yield task, None, exc


class LocalExecutor:
    """A local process pool; ``workers`` defaults to all cores."""

    name = "local"

    def __init__(self, workers: int | None = None, in_flight_per_worker: int = 4,
                 start_method: str | None = None):
        self.workers = int(workers or default_workers())
        self.start_method = start_method or os.environ.get("CFSIM_SWEEP_START_METHOD") or None
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1 (got {workers})")
        self.in_flight = max(2, self.workers * in_flight_per_worker)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> "LocalExecutor":
        if self._pool is not None:
            return self
        ctx = multiprocessing.get_context(self.start_method)
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _restart(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.__enter__()

    def imap_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Outcome]:
        """A worker process that dies (segfault, OOM kill) breaks the whole pool, failing every
        run in flight. The pool is started again and those runs are retried one at a time, so
        only the run that kills its worker is lost: it is yielded with the exception (the sweep
        stores no row for it, and ``--resume`` tries it again)."""
        assert self._pool is not None, "use the executor as a context manager"
        it = iter(tasks)
        suspects: list[Any] = []   # runs in flight when a worker died: retried alone
        pending: dict[Any, Any] = {}
        isolating = False

        def submit(task: Any) -> None:
            try:
                pending[self._pool.submit(fn, task)] = task
            except BrokenProcessPool:
                self._restart()
                pending[self._pool.submit(fn, task)] = task

        def fill() -> None:
            nonlocal isolating
            while True:
                if isolating and pending:
                    return  # a suspect runs alone
                if suspects:
                    if pending:
                        return
                    isolating = True
                    submit(suspects.pop(0))
                    continue
                isolating = False
                if len(pending) >= self.in_flight:
                    return
                try:
                    submit(next(it))
                except StopIteration:
                    return

        fill()
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            broken = False
            for fut in done:
                task = pending.pop(fut)
                exc = fut.exception()
                if isinstance(exc, BrokenProcessPool):
                    broken = True
                    if isolating:  # it ran alone: this run killed its worker
                        yield task, None, exc
                    else:
                        suspects.append(task)
                    continue
                yield task, (None if exc else fut.result()), exc
            if broken:
                suspects.extend(pending.values())  # they fail with the pool
                pending.clear()
                self._restart()
            fill()


class DaskExecutor:
    """Runs on a ``dask.distributed`` cluster: ``address`` = ``"local"`` or a scheduler address."""

    name = "dask"

    def __init__(self, address: str = "local", workers: int | None = None,
                 processes: bool = True, in_flight_per_worker: int = 4):
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise ExecutorUnavailable(
                "--dask needs the optional Dask extra, which is not installed: "
                "pip install 'cfsim[dask]'  (or run without --dask to use the local process pool)"
            ) from None
        self.address = address
        self.workers = int(workers or default_workers())
        self.processes = processes
        self.per_worker = in_flight_per_worker
        self.client: Any = None
        self.cluster: Any = None

    def __enter__(self) -> "DaskExecutor":
        if self.client is not None:
            return self
        from distributed import Client, LocalCluster

        if self.address == "local":
            import dask

            # the workers' statistical profiler samples every 10 ms: measurable CPU on a
            # busy 2-core machine, and nobody looks at it without a dashboard
            with dask.config.set({"distributed.worker.profile.enabled": False}):
                self.cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1,
                                            processes=self.processes, dashboard_address=None,
                                            silence_logs=40)
            self.client = Client(self.cluster)
        else:
            try:
                self.client = Client(self.address, timeout="20s")
            except OSError as exc:
                raise ExecutorUnavailable(f"cannot reach the Dask scheduler at {self.address}: {exc}") from None
            except (ValueError, TypeError) as exc:   # distributed's parse of the address: 'missing port number'
                raise ExecutorUnavailable(f"--dask {self.address}: not a Dask scheduler address ({exc}); give "
                                          f"tcp://HOST:PORT (the scheduler's default port is 8786) or 'local'") from None
        info = self.client.scheduler_info()
        n = sum(w.get("nthreads", 1) for w in info.get("workers", {}).values())
        self.workers = max(1, n)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    def imap_unordered(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Outcome]:
        """The function (with the base scenario it carries) is sent to every worker once
        (``scatter``). Dask costs a few milliseconds of scheduler time per task, so cheap runs
        are grouped: a task holds as many runs as fit in about ``CHUNK_S`` seconds, judged from
        the runs done so far (one run per task while runs are slow, as simulations are)."""
        from distributed import as_completed

        assert self.client is not None, "use the executor as a context manager"
        it = iter(tasks)
        fn_remote = self.client.scatter(fn, broadcast=True, hash=False)
        owner: dict[str, list[Any]] = {}
        queue = as_completed()
        done_runs, busy_s = 0, 0.0

        def chunk_size() -> int:
            if done_runs < self.workers:
                return 1
            per_run = busy_s / done_runs
            return max(1, min(MAX_CHUNK, int(CHUNK_S / max(per_run, 1e-6))))

        def submit(n_tasks: int) -> None:
            size = chunk_size()
            chunks = []
            for _ in range(n_tasks):
                chunk = []
                for _ in range(size):
                    try:
                        chunk.append(next(it))
                    except StopIteration:
                        break
                if not chunk:
                    break
                chunks.append(chunk)
            if not chunks:
                return
            futures = self.client.map(_call_many, [fn_remote] * len(chunks), chunks, pure=False)
            for fut, chunk in zip(futures, chunks):
                owner[fut.key] = chunk
            queue.update(futures)

        submit(max(2, self.workers * self.per_worker))
        for batch in queue.batches():
            for fut in batch:
                chunk = owner.pop(fut.key)
                try:
                    outcomes, elapsed = fut.result()
                except Exception as exc:  # noqa: BLE001 - a lost worker: every run of the task
                    for task in chunk:
                        yield task, None, exc
                else:
                    done_runs += len(chunk)
                    busy_s += elapsed
                    for task, (result, exc) in zip(chunk, outcomes):
                        yield task, result, exc
                fut.release()
            submit(len(batch))


#: seconds of work a Dask task should hold, and the most runs it may hold
CHUNK_S = 0.2
MAX_CHUNK = 64


def _call_many(fn: Callable[[Any], Any], tasks: list[Any]) -> tuple[list[tuple[Any, Any]], float]:
    import time

    t0 = time.perf_counter()
    outcomes: list[tuple[Any, Any]] = []
    for task in tasks:
        try:
            outcomes.append((fn(task), None))
        except Exception as exc:  # noqa: BLE001 - reported per task
            outcomes.append((None, exc))
    return outcomes, time.perf_counter() - t0


def make_executor(workers: int | None = None, dask: str | None = None) -> Executor:
    """``--dask`` wins; ``--workers 0`` runs in this process; else a local process pool."""
    if dask:
        return DaskExecutor(dask, workers)
    if workers == 0:
        return SerialExecutor()
    return LocalExecutor(workers)


#: fewer independent simulations than this run in the calling process unless ``workers`` asks for
#: a pool: starting spawned workers (each imports numpy, pandas and cfsim) costs about a second
MIN_POOLED = 4


def _call_indexed(task: tuple[int, Callable[..., Any], tuple]) -> Any:
    _, fn, args = task
    return fn(*args)


def map_in_order(fn: Callable[..., Any], args: Iterable[tuple], workers: int | None = None,
                 min_pooled: int = MIN_POOLED) -> Iterator[Any]:
    """``fn(*a)`` for each ``a`` in ``args``, yielded in the order of ``args`` as soon as each
    one and those before it are done; on a :class:`LocalExecutor` (spawned workers: safe in a
    process with threads, e.g. a Jupyter kernel) when ``workers`` allows more than one.

    ``workers=None`` uses every CPU for ``min_pooled`` calls or more and this process below that;
    ``workers=1`` always this process. ``fn`` must be a module-level function and ``args``
    picklable. The first exception is raised (after the pool is shut down)."""
    tasks = list(args)
    n = min(len(tasks), workers if workers is not None else default_workers())
    if n <= 1 or (workers is None and len(tasks) < min_pooled):
        return (fn(*a) for a in tasks)

    def results() -> Iterator[Any]:
        done: dict[int, Any] = {}
        nxt = 0
        with LocalExecutor(n, start_method="spawn") as ex:
            for (i, _, _), result, exc in ex.imap_unordered(_call_indexed, [(i, fn, a) for i, a in enumerate(tasks)]):
                if exc is not None:
                    raise exc
                done[i] = result
                while nxt in done:
                    yield done.pop(nxt)
                    nxt += 1
    return results()
