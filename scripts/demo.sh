#!/usr/bin/env bash
# The main job: set up the virtualenv, then run DreamGym end to end on embedded defaults.
# Extra arguments go to `dreamgym demo` (e.g. --preset quick, --out runs/my-run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec "${DREAMGYM_VENV:-.venv}/bin/dreamgym" demo "$@"
