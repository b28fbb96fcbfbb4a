"""The hot modules compiled to C by mypyc from their own Python source, and the guard that keeps a
stale build from running.

The install (``setup.py``, ``pip install -e .``) compiles :data:`NATIVE_MODULES` with mypyc
(https://mypyc.readthedocs.io, the mypy project's compiler for typed Python modules): the same
``.py`` files, no second implementation, the same results (``tests/unit/test_native.py`` runs
scenarios both ways and compares them bit for bit). Python imports an extension module before
a source file of the same name, so an editable checkout whose sources changed after the build
would silently run the old code. :func:`install_guard` (called by ``import cfsim``) therefore
sends every one of these modules to its source file when

* ``CFSIM_PURE_PYTHON`` is set (to anything but ``0`` or the empty string), or
* any of them has no compiled file, or, in a checkout (an editable install: ``setup.py`` beside
  the ``src`` folder), a source file newer than its compiled file (``scripts/setup.sh`` rebuilds
  then; until it does, everything runs from source). An installed wheel's files are written
  together, in no particular order, so their times say nothing there.

All or none: the compiled modules share one library and refer to each other's classes
directly, so a compiled module cannot run beside a source copy of another.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import Mapping

__all__ = ["NATIVE_MODULES", "compiled", "install_guard", "is_checkout", "native_sources", "pure_python_requested",
           "stale_reason"]

#: the modules the install compiles: the engines' and the Go runtime's event paths (where the
#: profiles of ``benchmarks/`` spend their time); setup.py and scripts/setup.sh load this file alone,
#: without importing cfsim
NATIVE_MODULES = (
    "cfsim.engine.cfs",
    "cfsim.engine.slices",
    "cfsim.kernel.bandwidth",
    "cfsim.kernel.eevdf",
    "cfsim.goruntime.gcpacer",
    "cfsim.goruntime.memory",
    "cfsim.goruntime.run_accounting",
    "cfsim.goruntime.runq",
    "cfsim.goruntime.runtime",
    "cfsim.goruntime.sched",
    "cfsim.goruntime.syncpool",
    "cfsim.workloads._go",
    "cfsim.workloads._request_source",
    "cfsim.workloads._request_workload",
    "cfsim.workloads.arrivals",
    "cfsim.workloads.closed",
    "cfsim.workloads.open",
    "cfsim.workloads.stream",
    "cfsim.workloads.threads",
)

#: the library holding all of their code (setup.py's ``group_name``), beside the cfsim package; each
#: module's own compiled file only loads its part of it
SHARED_LIBRARY = "cfsim_native__mypyc"

_ROOT = Path(__file__).resolve().parent.parent   # the folder holding the cfsim package
_state = {"installed": False}


def _source(module: str, root: Path = _ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def native_sources(root: Path = _ROOT) -> set[Path]:
    """The source files of :data:`NATIVE_MODULES`."""
    return {_source(m, root) for m in NATIVE_MODULES}


def _compiled_file(module: str, root: Path = _ROOT) -> Path | None:
    src = _source(module, root)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = src.with_suffix(suffix)
        if p.is_file():
            return p
    return None


def pure_python_requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``CFSIM_PURE_PYTHON`` asks for the source (set to anything but ``0`` or nothing); the
    install (setup.py) and the tests ask it too."""
    return environ.get("CFSIM_PURE_PYTHON", "") not in ("", "0")


def is_checkout(root: Path = _ROOT) -> bool:
    """Whether ``root`` (the folder holding the cfsim package) is a checkout's ``src`` folder."""
    return (root.parent / "setup.py").is_file()


def stale_reason(root: Path = _ROOT, modules: tuple[str, ...] = NATIVE_MODULES,
                 environ: Mapping[str, str] = os.environ,
                 checkout: bool | None = None) -> str | None:
    """Why the compiled modules under ``root`` must not run (None: they may); ``checkout``: compare
    the files' times (default: :func:`is_checkout`).

    >>> stale_reason(Path("/nonexistent"), environ={})
    'cfsim_native__mypyc (the compiled code) is missing'
    >>> stale_reason(Path("/nonexistent"), environ={"CFSIM_PURE_PYTHON": "1"})
    'CFSIM_PURE_PYTHON is set'
    """
    if pure_python_requested(environ):
        return "CFSIM_PURE_PYTHON is set"
    if modules and _compiled_file(SHARED_LIBRARY, root) is None:
        return f"{SHARED_LIBRARY} (the compiled code) is missing"
    if checkout is None:
        checkout = is_checkout(root)
    for module in modules:
        so = _compiled_file(module, root)
        if so is None:
            return f"{module} is not compiled"
        src = _source(module, root)
        if checkout and src.is_file() and src.stat().st_mtime > so.stat().st_mtime:
            return f"{src.name} changed after it was compiled (run scripts/setup.sh to rebuild)"
    return None


class _SourceFinder:
    """Finds the compiled modules' source files, ahead of the compiled ones."""

    @staticmethod
    def find_spec(fullname: str, path: object = None, target: object = None):
        if fullname not in NATIVE_MODULES:
            return None
        src = _source(fullname)
        return importlib.util.spec_from_file_location(fullname, src)


def install_guard() -> None:
    """Run every compiled module from source when :func:`stale_reason` says so (once a process;
    before any of them is imported)."""
    if _state["installed"]:
        return
    _state["installed"] = True
    reason = stale_reason()
    if reason is None:
        return
    if any(m in sys.modules for m in NATIVE_MODULES):   # too late to choose: compiled() says which runs
        return
    sys.meta_path.insert(0, _SourceFinder())
    if "changed after" in reason:
        print(f"cfsim: running from source, slower: {reason}", file=sys.stderr)


def compiled() -> bool:
    """True when the compiled modules run in this process."""
    mod = sys.modules.get(NATIVE_MODULES[0])
    if mod is None:
        __import__(NATIVE_MODULES[0])
        mod = sys.modules[NATIVE_MODULES[0]]
    return not str(getattr(mod, "__file__", "")).endswith(".py")


if __name__ == "__main__":   # scripts/setup.sh: the compiled modules' sources, to know when to rebuild
    for _path in sorted(native_sources()):
        print(_path.relative_to(_ROOT.parent))
