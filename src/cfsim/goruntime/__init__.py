"""The Go runtime model: GOMAXPROCS policies (:mod:`.gomaxprocs`), the GC pacer's rules
(:mod:`.gcpacer`), the scheduler's rules and costs (:mod:`.sched`), and a Go process driving
threads of the CFS engine (:mod:`.runtime`) with its run accounting (:mod:`.run_accounting`).

References
----------
golang/go ``src/runtime/`` (``proc.go``, ``mgc.go``, ``mgcpacer.go``, ``mgclimit.go``,
``cgroup_linux.go``), https://github.com/golang/go/tree/master/src/runtime; uber-go/automaxprocs,
https://github.com/uber-go/automaxprocs. Cost priors: ``docs/model-notes.md``. All sources:
``docs/references.md``.
"""
