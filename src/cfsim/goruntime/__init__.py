"""The Go runtime model: GOMAXPROCS policies (:mod:`.gomaxprocs`), the GC pacer's rules
(:mod:`.gcpacer`), the scheduler's rules and costs (:mod:`.sched`), and a Go process driving
threads of the CFS engine (:mod:`.runtime`). Sources: shared/reference/go-runtime.md and §3 of
shared/reference/cfs-bandwidth-and-gomaxprocs.md."""
