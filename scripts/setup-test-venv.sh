#!/usr/bin/env bash
# Best effort: a Python virtual environment at .venv with the reference
# packages some tests compare against live (Hugging Face tokenizers,
# safetensors, transformers' config classes, TensorBoard's event reader; no
# PyTorch). The tests that need it skip with a message when it is missing, so
# a machine without network access still passes. Idempotent and quiet when
# everything is there.
set -u
cd "$(dirname "$0")/.."
want=(tokenizers==0.23.3 safetensors==0.8.0 numpy transformers==5.24.0 tensorboard==2.21.0)
if [ -x .venv/bin/python ] && .venv/bin/python -c "import tokenizers, safetensors, numpy, transformers, tensorboard" 2>/dev/null; then
  exit 0
fi
command -v python3 >/dev/null || { echo "setup-test-venv: no python3; live reference tests will skip"; exit 0; }
python3 -m venv .venv 2>/dev/null || { echo "setup-test-venv: python3 -m venv failed; live reference tests will skip"; exit 0; }
echo "setup-test-venv: installing ${want[*]} into .venv"
.venv/bin/pip install -q --disable-pip-version-check "${want[@]}" 2>&1 | tail -2 ||
  echo "setup-test-venv: pip install failed; live reference tests will skip"
exit 0
