"""Build hook: compile the hot modules with mypyc (everything else is in pyproject.toml).

The modules are listed once, in ``src/cfsim/_native.py`` (``NATIVE_MODULES``), loaded here without
importing cfsim. ``CFSIM_PURE_PYTHON=1`` at install time builds nothing; a machine without a C
compiler gets the pure-Python package too (the extensions are optional), which runs the same code
from source, slower. Type errors do not stop the build: mypyc compiles what mypy infers
(``[[tool.mypy.overrides]]`` in pyproject.toml says why).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def _native():
    """src/cfsim/_native.py loaded alone (standard library only), not the cfsim package."""
    spec = importlib.util.spec_from_file_location("_cfsim_native_list", HERE / "src" / "cfsim" / "_native.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def native_modules() -> list[str]:
    return list(_native().NATIVE_MODULES)


#: setuptools commands that build code; the others (egg_info, dist_info, sdist: pip runs them first,
#: for the metadata) need no compiled modules, and mypyc takes most of a minute
_BUILD_COMMANDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def ext_modules() -> list:
    if _native().pure_python_requested():
        return []
    if not _BUILD_COMMANDS & set(sys.argv[1:]):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:   # built without the build requirements (e.g. --no-build-isolation)
        return []
    paths = ["src/" + m.replace(".", "/") + ".py" for m in native_modules()]
    # one shared library for all of them (cfsim_native__mypyc*.so, beside the cfsim package)
    try:
        exts = mypycify(paths, group_name="cfsim_native", opt_level="3")
    except SystemExit as e:   # mypyc refused a module: install from source, and say so
        print(f"warning: mypyc failed ({e}); cfsim runs from source", flush=True)
        return []
    for ext in exts:
        ext.optional = True   # no compiler: install the pure-Python package
    return exts


setup(ext_modules=ext_modules())
