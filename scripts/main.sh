#!/usr/bin/env bash
# Install, then run the main job: the T0-T3 trap with its fixes and the throughput-vs-allocation
# curves per GOMAXPROCS policy, written to out/ (tables and plots), in cfsim's virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
mkdir -p out
cfsim trap --out out/trap --format json --no-progress > out/trap.json
cfsim sweep grab-sinktos3 --grid cgroup.cpu_limit=0.25:4:0.05 \
    --grid go.gomaxprocs=automaxprocs,go1.25,host,2 --out out/limits --overwrite --no-progress
cfsim sweep --plot out/limits
echo "wrote out/trap.json, out/trap/, out/limits/ (Parquet, PNG, SVG)"
