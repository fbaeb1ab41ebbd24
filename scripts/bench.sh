#!/usr/bin/env bash
# Builds fastglu and runs the main job: the seed benchmark (Megatron-layout SwiGLU, S=2048 B=4
# F=8192 bf16, every available provider, all modes) on the GPU; on a machine without one, the CPU
# backend on a small default shape (it says so). Extra arguments go to python -m fastglu.bench.
source "$(dirname "$0")/env.sh"
build_python_package
"$PY" -m fastglu.bench "$@"
