#!/usr/bin/env bash
# Run Tracemill's tests from a checkout, doing all the setup they need: system packages (a real
# Secret Service, bubblewrap for the sandbox, the libraries Qt needs), the virtual environment, the
# default model. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

system_packages=(dbus gnome-keyring bubblewrap xvfb xauth libegl1 libgl1 libfontconfig1 libdbus-1-3
  libxkbcommon0 libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxcb-render-util0
  libxcb-image0 libxcb-shape0 libxcb-randr0 libxcb-xkb1)
missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for pkg in "${system_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test: installing system packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "test: missing system packages (install them, then run again): ${missing[*]}" >&2
    exit 1
  fi
fi

scripts/setup.sh dev
export TRACEMILL_MODELS_DIR="${TRACEMILL_MODELS_DIR:-$PWD/.models}"
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
exec .venv/bin/python -m pytest "$@"
