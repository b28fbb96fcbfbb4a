#!/usr/bin/env bash
# Install, then run the whole test suite (unit, property, kernel, lab smoke, live Prometheus,
# notebooks, doctests) in cfsim's virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
# the 20 slowest tests at the end: where the suite's time goes (the guide's budget is ~15 min)
python -m pytest -q --durations=20 "$@"
