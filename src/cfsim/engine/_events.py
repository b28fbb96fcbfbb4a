"""The engine's simpy events, in a module of their own: they subclass simpy's ``Timeout`` (an
interpreted class that simpy's own code handles), so they stay interpreted while
:mod:`cfsim.engine.cfs` is compiled (:mod:`cfsim._native`). A compiled subclass would give their
attributes native slots that simpy's code cannot set (``callbacks = None`` once processed)."""
from __future__ import annotations

import heapq
from typing import Callable

import simpy


class _CpuEvent(simpy.events.Timeout):
    """A CPU's next completion or refill; stale once the CPU's version moved on.

    CPU events at the same instant (ticks are aligned across CPUs) run in the order of the
    CPU's ``rank`` (which CPU's tick handler wins the race for the pool), after other events,
    so ties resolve identically however the events were scheduled.

    They are the engine's most frequent object, so the engine recycles them: once simpy has
    processed one (and dropped it), ``CfsEngine._schedule_cpu`` puts it back on simpy's queue
    with the entry ``Environment.schedule`` would make, instead of building a new Timeout.
    """

    __slots__ = ("cpu", "ver")

    def __init__(self, env: simpy.Environment) -> None:
        # Not Timeout.__init__: the engine schedules it
        self.env = env
        self._value = None
        self._ok = True
        self._delay = 0


class _Timer(simpy.events.Timeout):
    """A cancellable callback ``fn(*args)`` on the simpy clock (no closure per call: the
    workloads schedule one of these per wake-up, so it is on the hot path)."""

    __slots__ = ("fn", "args")

    def __init__(self, env: simpy.Environment, delay: int, fn: Callable[..., None] | None,
                 args: tuple):
        # Timeout's own initialisation, inlined, at simpy's NORMAL priority
        self.env = env
        self.callbacks = _TIMER_CALLBACKS  # shared: simpy only iterates it
        self._value = None
        self._delay = delay
        self._ok = True
        self.fn = fn
        self.args = args
        # env.schedule(self, NORMAL, delay), inlined (see _CpuEvent)
        heapq.heappush(env._queue, (env._now + delay, simpy.events.NORMAL, next(env._eid), self))

    def cancel(self) -> None:
        self.fn = None


def _fire_timer(ev: _Timer) -> None:
    fn = ev.fn
    if fn is not None:
        fn(*ev.args)


_TIMER_CALLBACKS = [_fire_timer]
