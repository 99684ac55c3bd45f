#!/usr/bin/env bash
# Regenerates the golden reference files in tests/golden/data from Hugging Face transformers.
#
#   tools/goldens/make_goldens.sh [make_goldens.py options, e.g. --only mixtral-f32]
#
# Creates the virtual environment tools/goldens/.venv on first use (python3 >= 3.10; the pinned
# torch wheel from PyPI is several GB) and re-installs only when requirements.txt changed.
# Idempotent: running it again rewrites the same files.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "make_goldens: creating $venv" >&2
  "$python" -m venv "$venv"
fi

# Install when the requirements differ from those of the last successful install.
stamp="$venv/.requirements.installed"
if ! cmp -s "$here/requirements.txt" "$stamp"; then
  echo "make_goldens: installing $here/requirements.txt into $venv" >&2
  "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$stamp"
fi

# Deterministic run: no hub access, no telemetry, one thread.
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TRANSFORMERS_VERBOSITY=error
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONHASHSEED=0
exec "$venv/bin/python" "$here/make_goldens.py" "$@"
