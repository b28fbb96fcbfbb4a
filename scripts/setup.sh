#!/usr/bin/env bash
# Install everything cfsim needs on a fresh Debian machine, idempotently and fast on re-runs:
#   * a virtual environment (.venv, or $CFSIM_VENV): Debian's system Python is "externally managed"
#     (PEP 668) and refuses `pip install` outside one; python3-venv comes from apt when missing;
#   * cfsim with its test extras, editable, in that environment (again only when pyproject.toml
#     changed or the environment does not import this checkout's cfsim);
#   * Debian's prometheus (promtool too) and the lab's Go module.
# Other scripts source scripts/env.sh afterwards to use the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
VENV="${CFSIM_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

apt_install() {  # apt_install PACKAGE...: as root only; says what to run otherwise
    if [ "$(id -u)" != 0 ]; then
        echo "error: missing $*; run: sudo apt-get install $*" >&2
        return 1
    fi
    if [ -z "${CFSIM_APT_UPDATED:-}" ]; then
        apt-get update -qq && CFSIM_APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    apt_install python3
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "error: cfsim needs Python >= 3.11 (tomllib); $PYTHON is $("$PYTHON" -V 2>&1)" >&2
    exit 1
fi

# the environment: (re)created when absent or broken (e.g. its interpreter was removed)
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        # Debian ships venv's pip bootstrap separately
        ver="$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
        apt_install "python${ver}-venv" || apt_install python3-venv
        if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
            echo "error: $PYTHON still cannot create a virtual environment (python3-venv)" >&2
            exit 1
        fi
    fi
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi

# a C compiler for the hot modules mypyc compiles at install (setup.py, src/cfsim/_native.py);
# without one cfsim installs and runs from source, slower
if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
    apt_install gcc || echo "warning: no C compiler: cfsim runs from source (slower)" >&2
fi

# cfsim itself: skipped when this pyproject.toml, setup.py and the compiled modules' sources are
# installed as they are now and the environment imports this checkout (an edited compiled module
# is built again; until then cfsim runs it from source, cfsim._native)
stamp="$VENV/.cfsim-pyproject.sha256"
native="$("$VENV/bin/python" -P src/cfsim/_native.py)"
want="$(cat pyproject.toml setup.py $native | sha256sum | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
where="$("$VENV/bin/python" -c 'import cfsim, os; print(os.path.dirname(cfsim.__file__))' 2>/dev/null || true)"
# a compiled module's source touched after its build with its text unchanged (a git checkout or
# stash and back) leaves the hash as it was, but cfsim's guard goes by the files' times and would
# run everything from source until the next build: build again then too
touched="$("$VENV/bin/python" -c 'from cfsim._native import stale_reason; print(stale_reason(environ={}) or "")' 2>/dev/null | grep -c "changed after it was compiled" || true)"
if [ "$have" != "$want" ] || [ "$where" != "$ROOT/src/cfsim" ] || [ "$touched" != "0" ]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[test]"
    echo "$want" > "$stamp"
    # mypyc refusing a module (an assignment it cannot compile, pip -q hides its message) leaves the
    # old build or none, and cfsim then runs everything from source, about 3x slower: say so
    stale="$("$VENV/bin/python" -c 'from cfsim._native import stale_reason; print(stale_reason(environ={}) or "")' 2>/dev/null || true)"
    if [ -n "$stale" ]; then
        echo "warning: the compiled modules were not built ($stale); see: $VENV/bin/python -m pip install -v -e ." >&2
    fi
fi

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    apt_install prometheus || echo "warning: no prometheus: the lab and live-Prometheus tests will skip" >&2
fi
if command -v go >/dev/null 2>&1 && [ -f lab/go.mod ]; then
    (cd lab && go mod download && go build -o bin/ ./cmd/...) || echo "warning: lab Go build failed" >&2
fi
