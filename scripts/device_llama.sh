#!/usr/bin/env bash
# device_llama.sh — on the GPU machine: examples/llama/train.py in bf16 (autocast, fp32 master weights),
# a small Llama-style decoder trained with PyTorch's SwiGLU, with fastglu's CUDA kernels, with PyTorch's
# again (the run-to-run control) and with PyTorch's in fp32 math (the rounding reference), same init and
# batches. Estimated at about a minute on an H200 (4 x 600 steps of a 25.7M-parameter model; bounded by
# LLAMA_TIMEOUT, default 300 s). Writes at most 3 files under $OUT/llama (default ./device-out/llama):
# results.json, train.log and loss.png (the plot only when matplotlib is installed there; otherwise
# `python examples/llama/plot.py results.json` draws it from the JSON on any machine).
#
#   bash scripts/device_llama.sh [train.py args...]     e.g. bash scripts/device_llama.sh --steps 300
#
# Run it as its own call after scripts/device_run.sh (which pip-installs fastglu into the image's Python
# and the peers into /tmp/site; the two together would bring back more than the device tool's 8 files);
# on a fresh machine it installs fastglu itself the same way first.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT/llama"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
# Deterministic cuBLAS, so that the runs differ only in the MLP activation (train.py sets it too, but
# it must be in place before anything starts cuBLAS).
export CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8}

if ! (cd / && python3 -c 'import sys, fastglu; sys.exit(0 if fastglu.cuda_available() else 1)' 2>/dev/null); then
  echo "-- fastglu with a usable CUDA backend is not installed: pip install --no-build-isolation --no-deps ."
  python3 -m pip install -q --no-build-isolation --no-deps . > /tmp/llama-install.log 2>&1 \
    || { tail -40 /tmp/llama-install.log; exit 1; }
fi

timeout "${LLAMA_TIMEOUT:-300}" python3 examples/llama/train.py --device cuda --dtype bfloat16 \
  --out "$OUT/llama" "$@"
rc=$?
echo "train.py exit status: $rc (0: every check passed; 1: see FAILED in the log; 124: timed out)"
ls -la "$OUT/llama"
exit $rc
