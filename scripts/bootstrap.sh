#!/usr/bin/env bash
# Install what Handrail needs where it is missing, then run the command given.
#
#   bash scripts/bootstrap.sh handrail demo          # set up and run the demo
#   bash scripts/bootstrap.sh python -m pytest       # set up and run the test suite
#
# System packages (Debian, as root, no input): chromium for the browser backend; xvfb,
# xdotool and openbox for the desktop backend's tests; postgresql (its server binaries) for
# the tests of sidecar replicas and ledgers on PostgreSQL. Python packages: this project
# with its dev extras, installed editable from this checkout, each package at the version
# constraints.txt pins (the set the suite last passed with; see scripts/pin.py).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
command -v xdotool >/dev/null 2>&1 || need+=(xdotool)
command -v openbox >/dev/null 2>&1 || need+=(openbox)
# The desktop fixtures are Tk programs: Python's _tkinter needs the Tk library.
"${PYTHON:-python3}" -c "import tkinter" >/dev/null 2>&1 || need+=(libtk8.6)
# The PostgreSQL tests start a private server: initdb, pg_ctl and postgres, on PATH or
# where Debian puts them (/usr/lib/postgresql/<version>/bin).
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need+=(postgresql)
fi
if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
    echo "bootstrap: missing ${need[*]} and not root: install them with apt-get" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "bootstrap: installing ${need[*]} with apt-get" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Chromium's managed policy: no preloading. A page's speculation rules would otherwise
# make the browser fetch and run pages where the gate's routes never apply; no switch turns
# it off (executor/browser/_policy.py). The browser backend will not start without it.
policy_dir=/etc/chromium/policies/managed
policy='{"NetworkPredictionOptions": 2}'
if [ "$(cat "$policy_dir/handrail.json" 2>/dev/null)" != "$policy" ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1; then
    echo "bootstrap: not root: write $policy to $policy_dir/handrail.json as root" >&2
    exit 1
  fi
  echo "bootstrap: writing Chromium's policy $policy_dir/handrail.json (no preloading)" >&2
  $sudo mkdir -p "$policy_dir"
  echo "$policy" | $sudo tee "$policy_dir/handrail.json" >/dev/null
fi

PY=${PYTHON:-python3}
# Reinstall only when this checkout is not the one installed, or the metadata or the pins changed.
stamp=".bootstrap-stamp"
want="$(pwd) $(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
# The import runs from / so that this directory itself does not make it pass: the installed
# package must be this checkout's (an editable install elsewhere would run other code).
installed="$(cd / && "$PY" -c "import os, handrail.cli as c; print(os.path.dirname(os.path.dirname(c.__file__)))" 2>/dev/null || true)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ "$installed" != "$(pwd)" ]; then
  echo "bootstrap: installing handrail and its Python dependencies with pip" >&2
  "$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --constraint constraints.txt -e ".[dev]"
  echo "$want" > "$stamp"
fi

command -v pyenv >/dev/null 2>&1 && pyenv rehash 2>/dev/null || true

if (($#)); then
  exec "$@"
fi
