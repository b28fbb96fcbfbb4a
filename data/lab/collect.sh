#!/usr/bin/env bash
# Re-collect the grids in data/lab. Resumable: finished runs are skipped, so run it again after
# an interruption. Needs root, Go and Prometheus. With arguments, only the named grids run:
#   nohup bash data/lab/collect.sh gc-memory overprovisioned > /tmp/cfsim-lab-collect.log 2>&1 &
# Grids and their sizes (runs, including calibration and repeats; about 35-50 s per run):
#   quota-steps 5, closed-menu 23, cpu-stream 48, alloc-stream 48, quota-steps-from-1.2 5,
#   sched-overhead 10, sched-overhead-fanout8 10 (the first collection, about 2.5 h together);
#   gc-memory 82, overprovisioned 20, profiles 8, open-latency 218, gc-trace 12, preempt-profile 14,
#   kernel-switches 12, kernel-switches-stream 10, wakeups 15, tenant-ab 9, gc-memory-tenants 11,
#   gc-memory-near16 19, gc-memory-quiet 82, gc-memory-profile 15, gc-near-limit 7, gc-vector-scan 14,
#   gc-near-limit-256 7, gc-near-limit-256-gmp8 11, gc-faults 8, gc-exectrace 9, open-spread 26, gc-oom-edge 20,
#   loadgen-cost 12, open-latency-quiet 50, open-tail-split 12, open-pacer 14, gc-burst 18, gc-burst-busy 6, gc-burst-load 9,
#   gc-burst-repeat 9, gc-burst-bigreq 7, gc-spiral-state 13, gc-spiral-probe 13,
#   tenant-root 29, idle-cost 32, gc-limiter 10, gc-limiter-quota 22, gc-idle-workers 7, gc-memory-path 13,
#   gc-memory-path-trace 13, gc-scavenge 6, open-latency-interleaved 53, open-latency-interleaved-quiet 53,
#   profiles-low-load 15, sleeps-trace 5, wake-placement 8, gc-page-cycle 14, gc-scan-split 10,
#   gc-mark-split 10, gc-mark-split-limit 6, sleep-causes 7, sleep-causes-service 6, gc-mark-split-256 8,
#   gc-eight-ms-gogc 20, neighbour-wakes 6, neighbour-wakes-open 5, wake-split 12, wake-price 15.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh && source scripts/env.sh   # cfsim's virtual environment
S=data/lab/scenarios
LIMITS=0.25,0.5,0.75,1.0,1.25,1.5,1.75,1.94,2.0
want() { [ $# -eq 0 ] || [[ " $ARGS " == *" $1 "* ]]; }
ARGS="$*"
grid() { python3 -m cfsim lab grid "$@" --resume; }
# gc-memory's stream, every run after waiting for a quiet host (the 256 MiB death-spiral grids)
quiet_stream_grid() { grid $S/gc-memory.toml --design $S/$1.designs.toml --set lab.quiet_host_cores=0.3 \
    --out data/lab/$1; }
# open-latency's service, every run after waiting for a quiet host
quiet_service_grid() { grid $S/open-latency.toml --design $S/$1.designs.toml --set lab.quiet_host_cores=0.3 \
    --out data/lab/$1; }
# open-latency's service under perf: the runtime's gctrace and 25 s of perf's call-chain samples in a
# 30 s window, every run after waiting for a quiet host (the gc-burst-* grids)
perf_grid() { grid $S/open-latency.toml --design $S/$1.designs.toml --set lab.quiet_host_cores=0.3 \
    --set lab.gctrace=true --set lab.perf_s=25 --set run.duration_s=30 --out data/lab/$1; }
if [ -z "$ARGS" ] || want quota-steps; then
  grid $S/quota-steps.toml --grid go.gomaxprocs=automaxprocs,go1.25 --out data/lab/quota-steps; fi
if [ -z "$ARGS" ] || want closed-menu; then
  grid $S/closed-menu.toml --grid cgroup.cpu_limit=0.1,0.25,0.5,1.0 --grid go.gomaxprocs=1,2,3,6,8 \
      --out data/lab/closed-menu; fi
if [ -z "$ARGS" ] || want cpu-stream; then
  grid $S/cpu-stream.toml --grid cgroup.cpu_limit=$LIMITS --grid go.gomaxprocs=1,2,4,8,16 \
      --out data/lab/cpu-stream; fi
if [ -z "$ARGS" ] || want alloc-stream; then
  grid $S/alloc-stream.toml --grid cgroup.cpu_limit=$LIMITS --grid go.gomaxprocs=1,2,4,8,16 \
      --out data/lab/alloc-stream; fi
if [ -z "$ARGS" ] || want quota-steps-from-1.2; then
  grid $S/quota-steps-from-1.2.toml --grid go.gomaxprocs=automaxprocs,go1.25 --out data/lab/quota-steps-from-1.2; fi
if [ -z "$ARGS" ] || want sched-overhead; then
  grid $S/sched-overhead.toml --grid go.gomaxprocs=1,2,4,8,16,32,64 --out data/lab/sched-overhead; fi
if [ -z "$ARGS" ] || want sched-overhead-fanout8; then
  grid $S/sched-overhead-fanout8.toml --grid go.gomaxprocs=1,2,4,8,16,32,64 --out data/lab/sched-overhead-fanout8; fi
# issue 19: GC and memory
if [ -z "$ARGS" ] || want gc-memory; then
  grid $S/gc-memory.toml --design $S/gc-memory.designs.toml --out data/lab/gc-memory; fi
if [ -z "$ARGS" ] || want gc-trace; then
  grid $S/gc-trace.toml --design $S/gc-trace.designs.toml --out data/lab/gc-trace; fi
if [ -z "$ARGS" ] || want gc-exectrace; then
  grid $S/gc-trace.toml --design $S/gc-exectrace.designs.toml --out data/lab/gc-exectrace; fi
# issue 14: the runtime's overheads under a quota
if [ -z "$ARGS" ] || want open-spread; then
  grid $S/open-latency.toml --design $S/open-spread.designs.toml --out data/lab/open-spread; fi
if [ -z "$ARGS" ] || want overprovisioned; then
  grid $S/overprovisioned.toml --design $S/overprovisioned.designs.toml --out data/lab/overprovisioned; fi
if [ -z "$ARGS" ] || want profiles; then
  grid $S/open-latency.toml --design $S/profiles.designs.toml --out data/lab/profiles; fi
if [ -z "$ARGS" ] || want preempt-profile; then
  grid $S/overprovisioned.toml --design $S/preempt-profile.designs.toml --out data/lab/preempt-profile; fi
if [ -z "$ARGS" ] || want kernel-switches; then
  command -v perf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
  grid $S/overprovisioned.toml --design $S/kernel-switches.designs.toml --out data/lab/kernel-switches; fi
if [ -z "$ARGS" ] || want kernel-switches-stream; then
  command -v perf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
  grid $S/cpu-stream.toml --design $S/kernel-switches-stream.designs.toml --out data/lab/kernel-switches-stream; fi
if [ -z "$ARGS" ] || want open-latency; then
  grid $S/open-latency.toml --design $S/open-latency.designs.toml --out data/lab/open-latency; fi
echo "collection finished $(date -u +%FT%TZ)"
if [ -z "$ARGS" ] || want wakeups; then
  grid $S/wakeups.toml --grid go.gomaxprocs=1,2,8 --grid workload.fanout=1,4 --grid workload.rate_per_s=500,2000 \
    --out data/lab/wakeups; fi
if [ -z "$ARGS" ] || want tenant-ab; then
  # the open-latency calibration point without and with a busy tenant on the host (lab.tenant_threads)
  grid $S/open-latency.toml --set cgroup.cpu_limit=null --set go.gomaxprocs=1 --grid run.seed=1,2,3 \
    --grid lab.tenant_threads=0,1 --out data/lab/tenant-ab; fi
if [ -z "$ARGS" ] || want gc-memory-tenants; then
  # gc-memory's GOMEMLIMIT-near-a-16-MiB-heap point (GOGC off, GOMEMLIMIT 32 MiB, 1-core limit)
  # at GOMAXPROCS 1 and 2, without and with two busy tenants on the host (lab.tenant_threads)
  grid $S/gc-memory.toml --set go.gogc=-1 --set go.gomemlimit_mb=32 --set go.live_heap_mb=16 \
    --grid run.seed=1,2 --grid go.gomaxprocs=1,2 --grid lab.tenant_threads=0,2 --out data/lab/gc-memory-tenants; fi
if [ -z "$ARGS" ] || want gc-memory-near16; then
  # gc-memory's points near a 16 MiB heap's GOMEMLIMIT and their GOGC 100 anchors, on a quiet host
  grid $S/gc-memory.toml --design $S/gc-memory-near16.designs.toml --out data/lab/gc-memory-near16; fi
if [ -z "$ARGS" ] || want gc-memory-quiet; then
  # gc-memory's whole design again, with nothing else running on the host
  grid $S/gc-memory.toml --design $S/gc-memory.designs.toml --out data/lab/gc-memory-quiet; fi
if [ -z "$ARGS" ] || want gc-memory-profile; then
  # where the stream's CPU per record goes at GOMAXPROCS 1, 2, 8: pprof split and perf counts
  command -v perf >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
  grid $S/gc-memory.toml --design $S/gc-memory-profile.designs.toml --out data/lab/gc-memory-profile; fi
if [ -z "$ARGS" ] || want gc-vector-scan; then
  # the stream's step from 1 to 2 Ps with Go's AVX-512 span scan and without it (GODEBUG), pprof split
  grid $S/gc-memory.toml --design $S/gc-vector-scan.designs.toml --out data/lab/gc-vector-scan; fi
if [ -z "$ARGS" ] || want gc-near-limit; then
  # the stream near a 16 MiB heap's GOMEMLIMIT at GOMAXPROCS 1 and 2: per-cycle trace and pprof split
  grid $S/gc-memory.toml --design $S/gc-near-limit.designs.toml --out data/lab/gc-near-limit; fi
if [ -z "$ARGS" ] || want gc-limiter; then
  # gc-near-limit's point at GOMAXPROCS 1, 2 and 8 with the trace and the GC CPU limiter read after each cycle
  grid $S/gc-memory.toml --design $S/gc-limiter.designs.toml --out data/lab/gc-limiter; fi
if [ -z "$ARGS" ] || want gc-limiter-quota; then
  # gc-limiter's point with and without the 1-core quota (and at a 10 ms period), pprof beside
  # /cpu/classes: what the throttle does to the runtime's own GC share of P-time
  grid $S/gc-memory.toml --design $S/gc-limiter-quota.designs.toml --set lab.quiet_host_cores=0.3 \
    --out data/lab/gc-limiter-quota; fi
if [ -z "$ARGS" ] || want gc-near-limit-256; then
  # the stream near a 256 MiB heap's GOMEMLIMIT at GOMAXPROCS 1 and 2: per-cycle trace and pprof split
  grid $S/gc-memory.toml --design $S/gc-near-limit-256.designs.toml --out data/lab/gc-near-limit-256; fi
if [ -z "$ARGS" ] || want gc-near-limit-256-gmp8; then
  # the same point at GOMAXPROCS 8 (the death spiral's worst twin): trace and pprof split twice, GOGC 100 beside
  quiet_stream_grid gc-near-limit-256-gmp8; fi
if [ -z "$ARGS" ] || want gc-spiral-state; then
  # the death spiral at a 256 MiB heap (GOMEMLIMIT 1.1 x live) at GOMAXPROCS 8 three times and 1 four times,
  # GOGC 100 beside at both twice, with the cycle trace: how far the spiral's own runs spread
  quiet_stream_grid gc-spiral-state; fi
if [ -z "$ARGS" ] || want gc-spiral-probe; then
  # the spiral at GOMAXPROCS 1 eight times, GOGC 100 three times, each with its probes before the load:
  # does the chase (host_memory_latency) or the heap walk (heap_walk_ns_per_hop) tell the mark's speed?
  quiet_stream_grid gc-spiral-probe; fi
if [ -z "$ARGS" ] || want gc-faults; then
  # the stream's minor page faults per record near a 16 and a 256 MiB heap's GOMEMLIMIT and at GOGC 100
  grid $S/gc-memory.toml --design $S/gc-faults.designs.toml --out data/lab/gc-faults; fi
if [ -z "$ARGS" ] || want gc-oom-edge; then
  # the container memory limits whose OOM kill sat at the edge, three runs each with the cycle trace
  grid $S/gc-memory.toml --design $S/gc-oom-edge.designs.toml --out data/lab/gc-oom-edge; fi
if [ -z "$ARGS" ] || want loadgen-cost; then
  # the load generator's own CPU a request, open loop at the request grids' rates and closed loop
  grid $S/open-latency.toml --design $S/loadgen-cost.designs.toml --out data/lab/loadgen-cost; fi
if [ -z "$ARGS" ] || want open-latency-quiet; then
  # open-latency's points at 1.0 and 1.5 cores and 60 / 85 % of the limit again, each run waiting
  # for a quiet host first (the first recording ran beside another tenant's 1.5-2 cores)
  grid $S/open-latency.toml --design $S/open-latency-quiet.designs.toml --set lab.quiet_host_cores=0.3 \
    --out data/lab/open-latency-quiet; fi
if [ -z "$ARGS" ] || want open-tail-split; then
  # where open-latency's client-side tail lies: its way in, the handler and its way out, quiet host
  grid $S/open-latency.toml --design $S/open-tail-split.designs.toml --set lab.quiet_host_cores=0.3 \
    --out data/lab/open-tail-split; fi
if [ -z "$ARGS" ] || want open-pacer; then
  # when open-latency's service starts its GC cycles: the pacer's trigger and cons/mark per cycle,
  # the start-up's heap build included (gctrace), quiet host
  grid $S/open-latency.toml --design $S/open-pacer.designs.toml --set lab.quiet_host_cores=0.3 \
    --set lab.gctrace=true --out data/lab/open-pacer; fi
if [ -z "$ARGS" ] || want gc-burst; then
  # the GC's real CPU a cycle by GOMAXPROCS (1, 2, 8, 32): open-pacer's points with perf's call-chain
  # samples lined up with the gctrace's marks, quiet host
  grid $S/open-latency.toml --design $S/gc-burst.designs.toml --set lab.quiet_host_cores=0.3 \
    --set lab.gctrace=true --set lab.perf_s=14 --out data/lab/gc-burst; fi
if [ -z "$ARGS" ] || want gc-burst-busy; then
  # the same at a busier service (60 % of 1.5 cores: 2,250 requests/s) at GOMAXPROCS 2, 8 and 32
  perf_grid gc-burst-busy; fi
if [ -z "$ARGS" ] || want gc-burst-load; then
  # the same service at 20 and 40 % of 1.5 cores (750 and 1,500 requests/s) at GOMAXPROCS 2, 8, 32
  perf_grid gc-burst-load; fi
if [ -z "$ARGS" ] || want gc-burst-repeat; then
  # gc-burst-busy's GOMAXPROCS 2 and 8 points three times each, interleaved
  perf_grid gc-burst-repeat; fi
if [ -z "$ARGS" ] || want gc-burst-bigreq; then
  # gc-burst-repeat's CPU and allocation a second in requests ten times as large (225/s)
  perf_grid gc-burst-bigreq; fi
if [ -z "$ARGS" ] || want gc-idle-workers; then
  # idle mark workers at GOMAXPROCS 8-64 on two CPUs: sched-overhead-fanout8's service with the
  # gctrace and a 4 s execution trace, quiet host
  grid $S/sched-overhead-fanout8.toml --design $S/gc-idle-workers.designs.toml --set lab.quiet_host_cores=0.3 \
    --set lab.gctrace=true --out data/lab/gc-idle-workers; fi
if [ -z "$ARGS" ] || want tenant-root; then
  # busy-loop tenants beside the open service at 60 % of 1.5 cores: 2 or 8 of them, in a cgroup of
  # their own or in the root cgroup (1024 a runnable loop), GOMAXPROCS 1/2/8, quiet host otherwise
  grid $S/open-latency.toml --design $S/tenant-root.designs.toml --set lab.quiet_host_cores=0.3 \
    --set cgroup.cpu_limit=1.5 --set lab.load_fraction=0.6 --out data/lab/tenant-root; fi
if [ -z "$ARGS" ] || want idle-cost; then
  # what a request costs as the gap before it grows: the open service at 100-2,400 requests/s
  # under a 1.5-core limit, GOMAXPROCS 1 and 2 twice, 8 once, quiet host
  grid $S/open-latency.toml --design $S/idle-cost.designs.toml --set lab.quiet_host_cores=0.3 \
    --set cgroup.cpu_limit=1.5 --out data/lab/idle-cost; fi
if [ -z "$ARGS" ] || want gc-memory-path; then
  # the stream near GOMEMLIMIT and at GOGC 100 with a calibration run after every three points,
  # each probing the kernel's memory path first (faultbench: lab.memory_probe_rounds)
  grid $S/gc-memory.toml --design $S/gc-memory-path.designs.toml --calibrate-every 3 \
    --out data/lab/gc-memory-path; fi
if [ -z "$ARGS" ] || want gc-memory-path-trace; then
  # the same with the runtime's per-cycle GC trace
  grid $S/gc-memory.toml --design $S/gc-memory-path.designs.toml --calibrate-every 3 \
    --set lab.gctrace=true --out data/lab/gc-memory-path-trace; fi
if [ -z "$ARGS" ] || want gc-scavenge; then
  # the scavenger's releases (GODEBUG scavtrace) and the kernel's counters (perf) at GOMAXPROCS 2 and 8
  grid $S/gc-memory.toml --design $S/gc-scavenge.designs.toml --out data/lab/gc-scavenge; fi
if [ -z "$ARGS" ] || want open-latency-interleaved; then
  # open-latency's points at 0.25 and 0.5 cores, 30 / 60 % load, quiet host, a calibration run after
  # every four points: the twins can take the calibration recorded just before them
  grid $S/open-latency.toml --design $S/open-latency-interleaved.designs.toml --set lab.quiet_host_cores=0.3 \
    --calibrate-every 4 --out data/lab/open-latency-interleaved; fi
if [ -z "$ARGS" ] || want open-latency-interleaved-quiet; then
  # the same points again, each run after a steal probe under load (a run whose window lost more than
  # 0.1 cores to the hypervisor is run once more)
  grid $S/open-latency.toml --design $S/open-latency-interleaved-quiet.designs.toml --set lab.quiet_host_cores=0.3 \
    --set lab.quiet_host_steal_cores=0.1 --set lab.steal_retries=1 \
    --calibrate-every 4 --out data/lab/open-latency-interleaved-quiet; fi
if [ -z "$ARGS" ] || want profiles-low-load; then
  # open-latency's service at 30 % of 0.5 and 1.0 core with pprof profiles: where the CPU that
  # GOMAXPROCS adds at low load goes
  grid $S/open-latency.toml --design $S/profiles-low-load.designs.toml --set lab.quiet_host_cores=0.3 \
    --calibrate-every 4 --out data/lab/profiles-low-load; fi
if [ -z "$ARGS" ] || want sleeps-trace; then
  # the same service at 30 % of 1.0 core, GOMAXPROCS 2 and 8, with an execution trace counted by
  # the scheduler's events (which Ms wake at low load)
  quiet_service_grid sleeps-trace; fi
if [ -z "$ARGS" ] || want wake-placement; then
  quiet_service_grid wake-placement; fi
if [ -z "$ARGS" ] || want gc-page-cycle; then
  # the death spiral's points, each twin with the runtime's give-back-and-fault-again cycle measured
  # by the calibration run just before it (lab/cmd/scavbench in the memory probe)
  grid $S/gc-memory.toml --design $S/gc-page-cycle.designs.toml --set lab.quiet_host_cores=0.3 \
    --calibrate-every 4 --out data/lab/gc-page-cycle; fi
if [ -z "$ARGS" ] || want gc-scan-split; then
  grid $S/gc-memory.toml --design $S/gc-scan-split.designs.toml --out data/lab/gc-scan-split; fi
if [ -z "$ARGS" ] || want gc-mark-split; then
  grid $S/gc-memory.toml --design $S/gc-mark-split.designs.toml --out data/lab/gc-mark-split; fi
if [ -z "$ARGS" ] || want gc-mark-split-limit; then
  grid $S/gc-memory.toml --design $S/gc-mark-split-limit.designs.toml --out data/lab/gc-mark-split-limit; fi
if [ -z "$ARGS" ] || want gc-mark-split-256; then
  # gc-mark-split's question at a 256 MiB heap: GOGC 100, GOMAXPROCS 2 and 8 three times each, perf and gctrace
  quiet_stream_grid gc-mark-split-256; fi
if [ -z "$ARGS" ] || want gc-eight-ms-gogc; then
  # the 16 MiB stream at GOGC 50, 100 and 200 and GOMAXPROCS 2 and 8, three runs each, gctrace
  quiet_stream_grid gc-eight-ms-gogc; fi
if [ -z "$ARGS" ] || want sleep-causes; then
  grid $S/gc-memory.toml --design $S/sleep-causes.designs.toml --out data/lab/sleep-causes; fi
if [ -z "$ARGS" ] || want sleep-causes-service; then
  quiet_service_grid sleep-causes-service; fi
if [ -z "$ARGS" ] || want neighbour-wakes; then
  # the load generator's wake-ups that take the server's CPU: the closed loop at GOMAXPROCS 1, 2, 8, scheduler trace
  grid $S/overprovisioned.toml --design $S/neighbour-wakes.designs.toml --set lab.quiet_host_cores=0.3 \
    --out data/lab/neighbour-wakes; fi
if [ -z "$ARGS" ] || want neighbour-wakes-open; then
  # the same for open-latency's service at 60 % of one core
  quiet_service_grid neighbour-wakes-open; fi
if [ -z "$ARGS" ] || want wake-split; then
  # where a woken thread goes, split by the CPU it last ran on: the service at 30-85 % of one core, scheduler trace
  quiet_service_grid wake-split; fi
if [ -z "$ARGS" ] || want wake-price; then
  # the service at 30 and 60 % of one core and GOMAXPROCS 1-32 under perf: the scheduler's CPU a request
  # against the Ms' sleeps a request, the price of a futile M wake-up on this host
  quiet_service_grid wake-price; fi
