"""Ground-truth lab: real Go workloads under real CFS quotas, scraped by a real Prometheus.

The same scenario the simulator reads drives a real run, so every lab run has a simulated twin:

- :mod:`cfsim.lab.cgroup`      create/configure/move/read/remove a v1 or v2 CPU cgroup
- :mod:`cfsim.lab.exporter`    cgroup counters under cAdvisor's metric names
- :mod:`cfsim.lab.prometheus`  a throw-away Prometheus (loopback, temporary TSDB, 1 s scrapes)
- :mod:`cfsim.lab.build`       ``go build`` of the Go module in ``lab/``
- :mod:`cfsim.lab.launch`      scenario -> workload/loadgen command lines, GOMAXPROCS policies
- :mod:`cfsim.lab.kinds`       what the lab knows per workload kind (metric names, done counter, notes)
- :mod:`cfsim.lab.queries`     what is exported (raw series, dashboard rate() queries)
- :mod:`cfsim.lab.summary`     the ``cfsim run --json`` keys from two snapshots
- :mod:`cfsim.lab.runner`      one run
- :mod:`cfsim.lab.grid`        a grid of runs with calibration runs and drift
- :mod:`cfsim.lab.preflight`   clear messages when root, cgroups, Go or Prometheus are missing
- :mod:`cfsim.lab.threads`     per-thread CPU and switch-ins of the workload over the window
- :mod:`cfsim.lab.wakeup`      the host's CPU and latency of a thread's sleep and wake-up (wakebench)
- :mod:`cfsim.lab.tlb`         the host's CPU for returning memory and flushing another CPU's TLB (faultbench)
- :mod:`cfsim.lab.threadswitch` the host's CPU for a switch between two threads of one process (switchbench)
- :mod:`cfsim.lab.wakepack`    up to which utilization a waker and its wakee settle on one CPU (packbench)
- :mod:`cfsim.lab.packcurve`   where a woken thread went, by its previous CPU and recent utilization (scheduler trace)
- :mod:`cfsim.lab.c2c`         a cache line's round trip between the host's CPUs, recorded with every run (c2cbench)
- :mod:`cfsim.lab.chase`       the price of a load that misses every cache, recorded with every run (chasebench)
- :mod:`cfsim.lab.benchout`    the JSON-lines output of those host benchmarks (one reader)
"""
