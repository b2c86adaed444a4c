#!/usr/bin/env bash
# Install everything deltamem needs into ./.venv, on a fresh machine or an existing one.
#
# Idempotent: a stamp records what was installed, so a second run takes seconds.
# What it installs and why:
#   - the package with all its extras (server, mcp, postgres, local-llm), the langchain and
#     openai-agents adapters, dev tools, and the deltamem-bench harness in bench/ (the default
#     embedder's weights ship inside the package: nothing to add for them);
#   - alfworld (the real ALFWorld/TextWorld PDDL engine; compiles fast-downward);
#   - llama-cpp-python, compiled for a portable CPU baseline (GGML_NATIVE=OFF): the native build
#     emits AMX instructions that crash on these VMs ("Illegal instruction"). The wheel is kept in
#     .cache/wheels (not the shared pip cache, which could hand back a native build);
#   - Debian's chromium for the viewer's browser test (only when running as root and missing);
#   - the pinned Claude Code and Codex CLIs from npm into .cache/clients
#     (scripts/setup_clients.sh), which tests/test_realclients.py drives.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=.venv
PIP="$VENV/bin/pip"
LLAMA_VERSION=0.3.36
LLAMA_CMAKE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
STAMP="$VENV/.deltamem-setup"
want=$(cat pyproject.toml bench/pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)

# The pinned real agent CLIs the real-client tests drive (its own stamp: seconds when present).
bash scripts/setup_clients.sh \
  || echo "warning: the real-client CLIs are not installed; tests/test_realclients.py will fail" >&2

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$PIP" install -q --upgrade pip

# llama-cpp-python first, from our portable wheel: the package's `local-llm` extra below would
# otherwise make pip compile a native (crashing) build from the sdist.
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
  mkdir -p .cache/wheels
  if ! ls .cache/wheels/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $LLAMA_VERSION (portable CPU build, about 6-8 minutes)..."
    CMAKE_ARGS="$LLAMA_CMAKE" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$PIP" wheel -q --no-deps --no-cache-dir -w .cache/wheels "llama-cpp-python==$LLAMA_VERSION"
  fi
  "$PIP" install -q .cache/wheels/llama_cpp_python-"$LLAMA_VERSION"-*.whl
fi

"$PIP" install -q -e ".[dev,all,langchain,langgraph,openai-agents,otel]" -e ./bench
"$VENV/bin/python" -c "import alfworld" 2>/dev/null || "$PIP" install -q "alfworld>=0.4"

if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the viewer's browser test will fail" >&2
fi

echo "$want" > "$STAMP"
echo "deltamem set up in $VENV"
