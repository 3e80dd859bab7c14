#!/usr/bin/env bash
# Set up the virtualenv with test tools, then run the whole test suite (real PostgreSQL, real
# text environments, tiny real models, one end-to-end run through all four services).
# Extra arguments go to pytest (e.g. -m "not e2e", -k replay).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "${DREAMGYM_VENV:-.venv}/bin/python" -m pytest "$@"
