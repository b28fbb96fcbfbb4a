#!/usr/bin/env bash
# Install everything cfsim needs on a fresh Debian machine, idempotently:
# the Python package with its test extras, Debian's prometheus, and the lab's Go module.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
            || echo "warning: could not install prometheus with apt-get; lab tests will skip" >&2
    else
        echo "warning: prometheus is missing and this is not root; run: sudo apt-get install prometheus" >&2
    fi
fi
python3 -m pip install -q --disable-pip-version-check -e ".[test]"
if command -v go >/dev/null 2>&1 && [ -f lab/go.mod ]; then
    (cd lab && go mod download && go build -o bin/ ./cmd/...) || echo "warning: lab Go build failed" >&2
fi
