"""Answers, not curves: ``cfsim recommend`` (the cheapest CPU limit, GOMAXPROCS and burst that meet
SLOs, next to what the stock VPA and krr would choose) and ``cfsim audit`` (flag containers in
Prometheus exports: trapped by GOMAXPROCS, throttled, over-threaded, with headroom to give back).

Modules: :mod:`~cfsim.advice.slo` (objectives), :mod:`~cfsim.advice.search` (the search),
:mod:`~cfsim.advice.peers` (VPA, krr ``simple``/``simple_limit``), :mod:`~cfsim.advice.audit`
(the audit) and :mod:`~cfsim.advice.exports` (simulated runs written as Prometheus exports).
"""
from cfsim.advice.slo import SLO, SLOError, parse_slo, parse_slos

__all__ = ["SLO", "SLOError", "parse_slo", "parse_slos"]
