#!/usr/bin/env bash
# Builds fastglu and runs the main job: the seed benchmark (Megatron-layout SwiGLU, S=2048 B=4
# F=8192 bf16, every available provider, all modes) on the GPU; on a machine without one, the CPU
# backend on a small default shape (it says so). Extra arguments go to python -m fastglu.bench.
source "$(dirname "$0")/env.sh"
# without a usable CUDA GPU the benchmark runs the CPU backend: compile no CUDA for it (seconds, not
# minutes); FASTGLU_CUDA=AUTO or ON keeps the CUDA build
if [ -z "${FASTGLU_CUDA:-}" ] && ! "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  echo "-- no CUDA GPU: building the CPU backend alone (FASTGLU_CUDA=OFF; FASTGLU_CUDA=AUTO compiles CUDA where nvcc is)"
  export FASTGLU_CUDA=OFF
fi
build_python_package
"$PY" -m fastglu.bench "$@"
