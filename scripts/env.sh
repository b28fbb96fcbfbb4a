# Source me (after scripts/setup.sh): cfsim's virtual environment first on PATH, so `python`,
# `python3`, `pytest`, `jupyter` and the `cfsim` console script are the environment's.
CFSIM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export VIRTUAL_ENV="${CFSIM_VENV:-$CFSIM_ROOT/.venv}"
export PATH="$VIRTUAL_ENV/bin:$PATH"
unset PYTHONHOME PYTHONPATH   # the environment imports this checkout, nothing else
