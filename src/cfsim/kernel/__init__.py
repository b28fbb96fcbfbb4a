"""Pure Linux kernel rules: CFS bandwidth control (``kernel/sched/fair.c``, ``core.c``)."""
