"""The compiled hot modules (cfsim._native): same results as the source, and never stale."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cfsim import _native

# one scenario per engine and workload path the compiled modules hold: fluid and sliced CPUs,
# threads, the request workloads (closed, open with a load generator on the host) and a stream with
# a GC-heavy heap; short, so both sides run in seconds
CASES = [
    ["run.duration_s=3"],
    ["run.duration_s=2", "workload.threads=200", "workload.burn_ms=1", "workload.sleep_ms=50",
     "workload.jitter_ms=50"],
    ["run.duration_s=2", "host.cpu_sharing=slices", "host.context_switch_us=5", "workload.threads=6",
     "host.cpus=2", "cgroup.cpu_limit=1.5"],
    ["run.duration_s=1", "workload.kind=closed", "workload.clients=64", "workload.cpu_ms_per_request=0.045",
     "go.gomaxprocs=8", "host.cpus=24", "cgroup.cpu_limit=2"],
    ["run.duration_s=1", "workload.kind=open", "workload.rate_per_s=2000", "workload.cpu_ms_per_request=0.4",
     "go.gomaxprocs=2", "host.cpus=2", "cgroup.cpu_limit=1", "host.cpu_sharing=slices",
     "workload.client_cpu_us_per_request=200"],
    ["run.duration_s=3", "workload.kind=stream", "go.gomaxprocs=2", "host.cpus=2", "cgroup.cpu_limit=1",
     "workload.alloc_kb_per_item=64", "go.live_heap_mb=64"],
]

# prints, per case, a digest of everything the run reports but its wall time
_DIGESTS = """
import hashlib, json, sys
from cfsim._native import compiled
from cfsim.simulation import simulate
out = {"compiled": compiled(), "digests": []}
for ov in json.loads(sys.argv[1]):
    r = simulate("cpu-bound-threads", ov)
    s = {k: v for k, v in r.summary.items() if "wall" not in k and "speed" not in k}
    text = json.dumps(s, sort_keys=True, default=repr) + r.series.to_csv()
    out["digests"].append(hashlib.sha256(text.encode()).hexdigest())
print(json.dumps(out))
"""


def _digests(pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CFSIM_PURE_PYTHON"}
    if pure:
        env["CFSIM_PURE_PYTHON"] = "1"
    r = subprocess.run([sys.executable, "-c", _DIGESTS, json.dumps(CASES)], env=env, capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout.splitlines()[-1])


def test_compiled_and_source_give_the_same_results_bit_for_bit():
    if not _native.compiled():
        pytest.skip(f"the compiled modules do not run here: {_native.stale_reason()}")
    fast, slow = _digests(pure=False), _digests(pure=True)
    assert fast["compiled"] and not slow["compiled"]
    assert fast["digests"] == slow["digests"]


def _compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(os.environ.get("CFSIM_PURE_PYTHON", "") not in ("", "0"), reason="CFSIM_PURE_PYTHON is set")
def test_the_install_compiled_the_hot_modules():
    # a build that quietly fell back to source would only show as a slower machine
    if _compiler() is None:
        pytest.skip("no C compiler: the install is pure Python")
    assert _native.stale_reason() is None, f"{_native.stale_reason()}: run scripts/setup.sh"
    assert _native.compiled()


def _tree(root: Path, modules: tuple[str, ...], compiled: bool = True) -> None:
    suffix = ".cpython-311-x86_64-linux-gnu.so"
    for m in modules:
        src = root.joinpath(*m.split(".")).with_suffix(".py")
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text("x = 1\n")
        if compiled:
            os.utime(src, (time.time() - 100, time.time() - 100))
            src.with_suffix(suffix).write_bytes(b"")
    if compiled:
        (root / (_native.SHARED_LIBRARY + suffix)).write_bytes(b"")


@pytest.fixture
def so_suffix(monkeypatch):
    # the fake tree's compiled files carry one suffix, whatever this interpreter's are
    import importlib.machinery

    monkeypatch.setattr(importlib.machinery, "EXTENSION_SUFFIXES", [".cpython-311-x86_64-linux-gnu.so"])


def test_a_fresh_build_may_run(tmp_path, so_suffix):
    mods = ("pkg.a", "pkg.sub.b")
    _tree(tmp_path, mods)
    assert _native.stale_reason(tmp_path, mods, environ={}) is None


def test_a_source_edited_after_the_build_sends_everything_to_source(tmp_path, so_suffix):
    mods = ("pkg.a", "pkg.sub.b")
    src = tmp_path / "src"
    _tree(src, mods)
    (src / "pkg" / "sub" / "b.py").write_text("x = 2\n")   # newer than its compiled file
    # an installed wheel writes its files in any order: their times say nothing
    assert not _native.is_checkout(src) and _native.stale_reason(src, mods, environ={}) is None
    (tmp_path / "setup.py").write_text("")                 # a checkout: src/ beside setup.py
    assert _native.is_checkout(src)
    assert "b.py changed after it was compiled" in _native.stale_reason(src, mods, environ={})


def test_a_partial_build_is_not_used(tmp_path, so_suffix):
    mods = ("pkg.a", "pkg.sub.b")
    _tree(tmp_path, mods)
    next((tmp_path / "pkg" / "sub").glob("b.*.so")).unlink()
    assert _native.stale_reason(tmp_path, mods, environ={}) == "pkg.sub.b is not compiled"
    _tree(tmp_path, mods)
    next(tmp_path.glob(_native.SHARED_LIBRARY + ".*")).unlink()
    assert "is missing" in _native.stale_reason(tmp_path, mods, environ={})


def test_the_environment_chooses_the_source(tmp_path, so_suffix):
    mods = ("pkg.a",)
    _tree(tmp_path, mods)
    assert _native.stale_reason(tmp_path, mods, environ={"CFSIM_PURE_PYTHON": "1"}) == "CFSIM_PURE_PYTHON is set"
    assert _native.stale_reason(tmp_path, mods, environ={"CFSIM_PURE_PYTHON": "0"}) is None
    r = subprocess.run([sys.executable, "-c", "from cfsim._native import compiled; print(compiled())"],
                       env={**os.environ, "CFSIM_PURE_PYTHON": "1"}, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


def test_the_build_reads_the_one_module_list():
    # setup.py reads NATIVE_MODULES without importing cfsim
    setup = Path(__file__).resolve().parents[2] / "setup.py"
    ns: dict = {"__name__": "not_main", "__file__": str(setup)}
    code = setup.read_text().replace("setup(ext_modules=ext_modules())", "")
    exec(compile(code, str(setup), "exec"), ns)
    assert tuple(ns["native_modules"]()) == _native.NATIVE_MODULES
    assert all(Path(_native.__file__).parent.parent.joinpath(*m.split(".")).with_suffix(".py").is_file()
               for m in _native.NATIVE_MODULES)


def test_the_compiled_modules_doctests_pass_from_source():
    # pytest collects them from source only where the source runs (conftest.py at the root)
    if not _native.compiled():
        pytest.skip("the doctests of these modules are collected with the others")
    root = Path(__file__).resolve().parents[2]
    paths = sorted(str(p.relative_to(root)) for p in _native.native_sources())
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--doctest-modules", *paths],
                       cwd=root, env={**os.environ, "CFSIM_PURE_PYTHON": "1"}, capture_output=True, text=True)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-4000:]
