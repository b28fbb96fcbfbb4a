#!/usr/bin/env bash
# Install, then run the whole test suite (unit, property, kernel, lab smoke, notebooks, doctests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m pytest -q "$@"
