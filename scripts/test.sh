#!/usr/bin/env bash
# Sets up .venv and runs the test suite (CPU: NumPy reference; GPU tests skip without a GPU).
# torch==2.13.0 (a CPU wheel on these machines) enables the PyTorch peer tests; they skip without it.
# No arguments: every test (what CI runs). --fast first: the fast tier for development, the tests
# not marked slow (pytest -m "not slow"). Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fast" ]; then
  shift
  set -- -m "not slow" "$@"
fi
scripts/setup.sh
.venv/bin/python -m pip install -q torch==2.13.0 2>/dev/null || echo "torch 2.13.0 not installable here: torch peer tests will skip"
exec .venv/bin/python -m pytest -q "$@"
