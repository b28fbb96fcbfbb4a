#!/usr/bin/env bash
# Re-collect every grid in data/lab (149 runs, about 110 minutes). Resumable: finished runs are
# skipped, so run it again after an interruption. Needs root, Go and Prometheus.
#   nohup bash data/lab/collect.sh > /tmp/cfsim-lab-collect.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh && source scripts/env.sh   # cfsim's virtual environment
S=data/lab/scenarios
LIMITS=0.25,0.5,0.75,1.0,1.25,1.5,1.75,1.94,2.0
python3 -m cfsim lab grid $S/quota-steps.toml --grid go.gomaxprocs=automaxprocs,go1.25 \
    --out data/lab/quota-steps --resume
python3 -m cfsim lab grid $S/closed-menu.toml --grid cgroup.cpu_limit=0.1,0.25,0.5,1.0 \
    --grid go.gomaxprocs=1,2,3,6,8 --out data/lab/closed-menu --resume
python3 -m cfsim lab grid $S/cpu-stream.toml --grid cgroup.cpu_limit=$LIMITS \
    --grid go.gomaxprocs=1,2,4,8,16 --out data/lab/cpu-stream --resume
python3 -m cfsim lab grid $S/alloc-stream.toml --grid cgroup.cpu_limit=$LIMITS \
    --grid go.gomaxprocs=1,2,4,8,16 --out data/lab/alloc-stream --resume
python3 -m cfsim lab grid $S/quota-steps-from-1.2.toml --grid go.gomaxprocs=automaxprocs,go1.25 \
    --out data/lab/quota-steps-from-1.2 --resume
python3 -m cfsim lab grid $S/sched-overhead.toml --grid go.gomaxprocs=1,2,4,8,16,32,64 \
    --out data/lab/sched-overhead --resume
python3 -m cfsim lab grid $S/sched-overhead-fanout8.toml --grid go.gomaxprocs=1,2,4,8,16,32,64 \
    --out data/lab/sched-overhead-fanout8 --resume
echo "collection finished $(date -u +%FT%TZ)"
