"""The engine's own event loop (``CfsEngine.run_until``) against simpy's ``Environment.run``.

The engine runs its CPU events and timers in a loop of its own instead of simpy's; these tests hold
it to simpy's rules where the two meet: which events at the stop time run, in which order
simultaneous events run, foreign simpy processes on the same environment, and failures.
"""
from __future__ import annotations

import pytest
import simpy

from cfsim.engine.cfs import CfsEngine


def _processes(env: simpy.Environment, log: list) -> None:
    """Foreign simpy processes: timeouts at the stop times, URGENT events (a process's start, an
    event succeeded at once) and NORMAL ones at the same instants."""
    def ticker(name: str, step: int, n: int):
        for _ in range(n):
            yield env.timeout(step)
            log.append((env.now, name))

    def chain():
        yield env.timeout(1_000)
        ev = env.event()
        ev.succeed()          # scheduled URGENT now
        yield ev
        log.append((env.now, "chain-urgent"))
        yield env.timeout(999)
        log.append((env.now, "chain-at-2000"))

    env.process(ticker("a", 500, 6))
    env.process(ticker("b", 1_000, 3))
    env.process(chain())


def test_run_until_steps_foreign_processes_as_simpy_does():
    stops = [1_000, 2_000, 2_500, 3_000, 3_001]
    ref_log: list = []
    ref = simpy.Environment()
    _processes(ref, ref_log)
    ref_marks = []
    for t in stops:
        ref.run(until=t)
        ref_marks.append((ref.now, list(ref_log)))

    log: list = []
    env = simpy.Environment()
    _processes(env, log)
    eng = CfsEngine(cpus=1, env=env)
    marks = []
    for t in stops:
        eng.run_until(t)
        assert eng.now == env.now == t      # the engine's clock is simpy's
        marks.append((eng.now, list(log)))
    assert marks == ref_marks
    # the stop rule decides something: events due exactly at a stop run after it
    assert (1_000, "a") not in marks[0][1] and (1_000, "a") in marks[1][1]


def test_engine_timers_keep_simpy_order_among_simultaneous_events():
    # timers sort as env.timeout would: by time, then by the order they were made
    env = simpy.Environment()
    eng = CfsEngine(cpus=1, env=env)
    order: list[str] = []
    eng.call_at(5_000, order.append, "timer-1")
    env.timeout(5_000).callbacks.append(lambda ev: order.append("timeout"))
    eng.call_later(5_000, order.append, "timer-2")
    cancelled = eng.call_at(5_000, order.append, "cancelled")
    cancelled.cancel()
    eng.call_at(4_000, order.append, "earlier")
    eng.run_until(10_000)
    assert order == ["earlier", "timer-1", "timeout", "timer-2"]
    assert eng.now == 10_000


def test_run_until_rejects_a_time_not_ahead_and_raises_a_failed_event():
    env = simpy.Environment()
    eng = CfsEngine(cpus=1, env=env)
    eng.run_until(100)
    with pytest.raises(ValueError, match="must be greater than the current"):
        eng.run_until(100)
    env.event().fail(RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        eng.run_until(200)


def test_one_engine_per_environment():
    # run_until moves the clock of the engine that runs it: a second engine on the same
    # environment would read a clock standing still, so it is refused
    env = simpy.Environment()
    CfsEngine(cpus=1, env=env)
    with pytest.raises(ValueError, match="one engine per simpy Environment"):
        CfsEngine(cpus=1, env=env)
