import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=15, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# One on-disk simulation cache for the whole session (cfsim.sweep.simcache; CFSIM_SIM_CACHE),
# inherited by the process pools and by the notebooks' kernels: the calibration runs' twins that a
# validation test simulates are read back by the notebooks that validate the same grids, instead
# of simulated again (the summaries are identical either way; the folder is keyed by the model's
# source). A CFSIM_SIM_CACHE set by the caller is left as it is.
_SESSION_CACHE: str | None = None


def pytest_configure(config):
    global _SESSION_CACHE
    if not os.environ.get("CFSIM_SIM_CACHE"):
        import tempfile

        _SESSION_CACHE = tempfile.mkdtemp(prefix="cfsim-test-simcache-")
        os.environ["CFSIM_SIM_CACHE"] = _SESSION_CACHE


def pytest_unconfigure(config):
    if _SESSION_CACHE is not None:
        import shutil

        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)
        os.environ.pop("CFSIM_SIM_CACHE", None)


# Tests that watch a method of a compiled class by patching it, or pass a stand-in where compiled
# code expects one of its classes (``@pytest.mark.from_source``):
# compiled code calls its methods directly, past any patch (cfsim._native), so where the compiled
# modules run, such a test runs whole in a fresh pytest process that imports cfsim from source.
def pytest_pyfunc_call(pyfuncitem):
    if pyfuncitem.get_closest_marker("from_source") is None:
        return None
    from cfsim._native import compiled

    if not compiled():   # already from source (CFSIM_PURE_PYTHON, or no build)
        return None
    import subprocess
    import sys

    env = {**os.environ, "CFSIM_PURE_PYTHON": "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", pyfuncitem.nodeid],
                       cwd=pyfuncitem.config.rootpath, env=env, capture_output=True, text=True)
    if r.returncode != 0 or " passed" not in r.stdout:
        raise AssertionError(f"{pyfuncitem.nodeid} from source (CFSIM_PURE_PYTHON=1):\n{r.stdout[-4000:]}{r.stderr[-2000:]}")
    return True
