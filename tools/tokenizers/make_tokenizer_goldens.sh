#!/usr/bin/env bash
# Regenerates the tokenizer assets (assets/tokenizers) and goldens (tests/golden/data/tokenizers)
# with Hugging Face tokenizers, in the virtual environment tools/tokenizers/.venv (created on
# first use; re-installed when requirements.txt changed). Idempotent.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "make_tokenizer_goldens: creating $venv" >&2
  "$python" -m venv "$venv"
fi
stamp="$venv/.requirements.installed"
if ! cmp -s "$here/requirements.txt" "$stamp"; then
  echo "make_tokenizer_goldens: installing $here/requirements.txt into $venv" >&2
  "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$stamp"
fi
export PYTHONHASHSEED=0 RAYON_NUM_THREADS=1
exec "$venv/bin/python" "$here/make_tokenizer_goldens.py" "$@"
