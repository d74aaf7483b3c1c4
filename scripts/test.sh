#!/usr/bin/env bash
# Sets up .venv and runs the test suite (CPU: NumPy reference; GPU tests skip without a GPU).
# torch==2.13.0 (a CPU wheel on these machines) enables the PyTorch peer tests; they skip without it.
# No arguments: every test (what CI runs). --fast first: the fast tier for development, the tests
# not marked slow (pytest -m "not slow"). Other arguments go to pytest.
# Tests run in parallel with pytest-xdist, one worker a core (at most 8), idle workers taking queued
# tests from busy ones (--dist worksteal: on 2 loaded shared cores, the suite of that day took 3.6 and
# 4.6 minutes with it, 4.4 to 5.1 with xdist's default --dist load, 5.1 with --dist loadfile; README.md
# gives the suite's current time); a -n/--numprocesses or -p no:xdist of your own replaces that
# (-n 0: one process).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fast" ]; then
  shift
  set -- -m "not slow" "$@"
fi
workers=$(nproc 2>/dev/null || echo 1)
[ "$workers" -le 8 ] || workers=8
prev=""
for arg in "$@"; do
  case "$arg" in
    -n*|--numprocesses|--numprocesses=*|-pno:xdist) workers=0 ;;
    no:xdist) [ "$prev" = "-p" ] && workers=0 ;;
  esac
  prev=$arg
done
[ "$workers" -ge 2 ] && set -- -n "$workers" --dist worksteal "$@"
scripts/setup.sh
have=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('torch'))" 2>/dev/null || true)
case "$have" in
  2.13.0|2.13.0+*) ;;
  *) [ -z "$have" ] || echo "scripts/test.sh: replacing torch $have in .venv with torch 2.13.0, the version CI tests with"
     .venv/bin/python -m pip install -q torch==2.13.0 2>/dev/null \
       || echo "torch 2.13.0 not installable here: the torch tests $([ -n "$have" ] && echo "run with torch $have" || echo "will skip")" ;;
esac
exec .venv/bin/python -m pytest -q "$@"
