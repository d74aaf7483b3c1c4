#!/usr/bin/env bash
# Creates .venv (Python >= 3.10) and installs rnngraph with the extras named in $RNNGRAPH_EXTRAS
# (default "test,plot"). Idempotent: a second run only checks the installation.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$py" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".[${RNNGRAPH_EXTRAS:-test,plot,data}]"
