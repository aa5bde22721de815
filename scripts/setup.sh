#!/usr/bin/env bash
# Prepare a checkout: a virtual environment with Tracemill and the extras asked for, and the default
# model. Safe to run again: it skips what is already done. Usage: scripts/setup.sh [EXTRAS]
# (EXTRAS as for pip, default "gui,node"; the tests use "dev").
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-gui,node}"

py=""
for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
  [ -n "$candidate" ] || continue
  if command -v "$candidate" >/dev/null 2>&1 \
     && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    py="$candidate"; break
  fi
done
[ -n "$py" ] || { echo "setup: Tracemill needs Python 3.11 or newer (none found on PATH)" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating the virtual environment in .venv"
  "$py" -m venv .venv
fi

# Reinstall only when the package list or the extras changed.
stamp=".venv/.tracemill-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Tracemill[$extras] (the first time builds llama-cpp-python: about 6 minutes)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[$extras]"
  echo "$want" > "$stamp"
fi

export TRACEMILL_MODELS_DIR="${TRACEMILL_MODELS_DIR:-$PWD/.models}"
.venv/bin/python -m inference.default_model "$TRACEMILL_MODELS_DIR"
