"""Engines that drive the pure rules through time.

- :mod:`cfsim.engine.cfs`: the event-driven host + CFS bandwidth engine (simpy clock, integer ns).
  Threads are given CPU work; the engine shares host CPUs among runnable threads, charges the
  group's runtime per CPU in slices and throttles exactly as ``kernel/sched/fair.c`` does.
"""
