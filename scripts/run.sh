#!/usr/bin/env bash
# Start Tracemill from a checkout: sets everything up on first use, then runs the app against the
# configured network (the embedded local node when none is set) with the default model. A window
# where a display exists, headless otherwise. Extra arguments go to `tracemill run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh gui,node
export TRACEMILL_MODELS_DIR="${TRACEMILL_MODELS_DIR:-$PWD/.models}"
exec .venv/bin/tracemill run "$@"
