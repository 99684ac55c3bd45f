#!/usr/bin/env bash
# Regenerates tests/golden/data/chat_templates/*.json from Python's jinja2 (see
# tools/make_chat_template_goldens.py). Creates the virtual environment build/venv-chat-templates
# on first use with the pinned jinja2; idempotent.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/build/venv-chat-templates"
python="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "make_chat_template_goldens: creating $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check -q "jinja2==3.1.6" "markupsafe==3.0.4"
fi
exec "$venv/bin/python" "$root/tools/make_chat_template_goldens.py" "$@"
