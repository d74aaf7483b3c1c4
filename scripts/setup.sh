#!/usr/bin/env bash
# Creates .venv (Python >= 3.10) and installs rnngraph with the extras named in $RNNGRAPH_EXTRAS
# (default "test,plot,data"). Idempotent: a later run with the same pyproject.toml and extras, whose
# .venv still imports rnngraph from this checkout and passes `pip check`, installs nothing
# (.venv/.rnngraph-installed records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
extras=${RNNGRAPH_EXTRAS:-test,plot,data}
stamp=.venv/.rnngraph-installed
here=$(pwd -P)
want="$(cksum < pyproject.toml) [$extras] $here"
[ -x .venv/bin/python ] || "$py" -m venv .venv
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] \
   && [ "$(.venv/bin/python -I -c 'import rnngraph, os; print(os.path.realpath(os.path.dirname(os.path.dirname(rnngraph.__file__))))' 2>/dev/null)" = "$here" ] \
   && .venv/bin/python -m pip check -q > /dev/null 2>&1; then
  exit 0
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".[$extras]"
echo "$want" > "$stamp"
