#!/usr/bin/env bash
# device_tp.sh — one call on a 2-GPU machine: build and install fastglu (as scripts/device_run.sh
# does), run the torch.compile / CUDA-graph / DTensor tests on the GPU, the host time of the lean
# eager path beside the torch.library op (bench/host_memory.py), and the 2-rank tensor-parallel MLP
# (bench/tp/tp_mlp.py under torchrun: Megatron-Core's tensor-parallel layers when the wheel in .whl/
# imports, and PyTorch DTensor TP; fastglu vs torch eager SwiGLU; loss and every gradient against
# one GPU; per-rank step time).
# Everything lands under $OUT (default ./device-out), 3 files: build_tests.log (build, pytest,
# host time), tp.log (the tensor-parallel run's output) and tp_mlp.json (its numbers).
#
#   bash scripts/device_tp.sh [tp_mlp.py args...]      e.g. bash scripts/device_tp.sh --ffn 8192
#   STAGES="build tp" bash scripts/device_tp.sh         only some stages (default: build pytest tp host)
#
# NVLink multicast stays off (NCCL NVLS, symmetric-memory multicast, NVSHMEM NVLS).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=1  # as Megatron-Core's training scripts set it (orders its async all-reduce)
LOG="$OUT/build_tests.log"

STAGES=${STAGES:-build pytest tp host}
want() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine" | tee "$LOG"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
} 2>&1 | tee -a "$LOG"

if ls .whl/*.whl >/dev/null 2>&1; then
  step "peers from .whl/ (megatron-core, liger-kernel)" | tee -a "$LOG"
  SITE=${SITE:-/tmp/site}
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    >> "$LOG" 2>&1 && export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi

if want build; then
  step "Python package (pip install --no-build-isolation; CUDA backend)" | tee -a "$LOG"
  python3 -m pip install -q --no-build-isolation --no-deps . >> "$LOG" 2>&1 || { tail -40 "$LOG"; exit 1; }
  (cd / && python3 -c 'import fastglu as f; print("fastglu", f.__version__, "cuda built", f.cuda_built(), "usable", f.cuda_available())') 2>&1 | tee -a "$LOG"
fi

if want pytest; then
  step "pytest: torch.compile, CUDA graphs, DTensor (and the SwiGLU suite)" | tee -a "$LOG"
  timeout 300 python3 -m pytest -q -rs tests/python/test_compile.py tests/python/test_cuda_graph.py \
    tests/python/test_dtensor.py tests/python/test_swiglu.py 2>&1 | tee -a "$LOG" | tail -30
fi

if want tp; then
  step "tensor-parallel MLP, 2 ranks (torchrun; bench/tp/tp_mlp.py)" | tee "$OUT/tp.log"
  timeout 300 torchrun --standalone --nproc_per_node=2 bench/tp/tp_mlp.py --out "$OUT" "$@" 2>&1 | tee -a "$OUT/tp.log"
  echo "tp_mlp.py exit status: ${PIPESTATUS[0]}" | tee -a "$OUT/tp.log"
fi

if want host; then
  step "host time per call: fastglu.swiglu (lean eager path) vs torch.ops.fastglu.swiglu_fwd (bench/host_memory.py)" | tee -a "$LOG"
  timeout 150 python3 bench/host_memory.py 2>&1 | grep -v -i warn | tee -a "$LOG"
fi

ls -la "$OUT"
