"""cfsim: what happens to a Go service on Kubernetes when CFS CPU limits, GOMAXPROCS, the Go GC
and autoscalers meet.

The layout follows the domain: :mod:`cfsim.kernel`, :mod:`cfsim.goruntime` and
:mod:`cfsim.autoscalers` hold the rules as pure functions; :mod:`cfsim.engine` drives them
through time; :mod:`cfsim.io` reads exports; :mod:`cfsim.validation` compares; the CLI is thin.
"""
from cfsim._native import install_guard

install_guard()   # before any compiled module loads: a stale build must not run (cfsim._native)

from cfsim.scenario import Scenario, ScenarioError, load_scenario

__version__ = "0.1.0"
__all__ = ["Scenario", "ScenarioError", "load_scenario", "simulate", "__version__"]


def simulate(scenario, overrides=()):
    """Run a scenario (a :class:`Scenario`, a path or a built-in name) and return its result."""
    from cfsim.simulation import simulate as _simulate

    return _simulate(scenario, overrides)
