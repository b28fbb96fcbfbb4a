#!/usr/bin/env bash
# Install, then run the whole test suite (unit, property, kernel, lab smoke, live Prometheus,
# notebooks, doctests) in cfsim's virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
python -m pytest -q "$@"
