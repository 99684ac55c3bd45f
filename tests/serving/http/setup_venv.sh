#!/bin/sh
# Makes a virtual environment with the `openai` Python package (a client nobody here wrote) for
# the HTTP API tests. When PyPI cannot be reached the environment stays unmade and the tests
# that need it skip themselves: this set-up never fails a build.
venv="$1"
[ -n "$venv" ] || { echo "usage: setup_venv.sh VENV_DIR" >&2; exit 2; }
if "$venv/bin/python" -c "import openai" 2>/dev/null; then
  exit 0
fi
rm -rf "$venv"
if ! python3 -m venv "$venv"; then
  echo "setup_venv.sh: cannot make a virtual environment; the openai client tests will skip" >&2
  rm -rf "$venv"
  exit 0
fi
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 30 "openai>=1.0,<3"; then
  echo "setup_venv.sh: pip could not install openai (is PyPI reachable?); the openai client tests will skip" >&2
  rm -rf "$venv"
fi
exit 0
