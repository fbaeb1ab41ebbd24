#!/usr/bin/env bash
# device_verify.sh — one call on the GPU machine after a change to the family's kernels: build the
# working tree and an older revision side by side, then, in order of importance (each step under a
# time limit, so the call ends with what it has):
#   1. fastglu_swiglu_*_cuda of both builds in one process at the sweep's 13 widths (bench/tune/ab_swiglu.c:
#      rotating rounds, B/A ratio and spread, bits compared)        -> ab_swiglu.txt
#   2. CTest's GPU tests (glu_cuda in full, swiglu_cuda quick, gemm_cuda quick) -> tests.log
#   3. fastglu-bench over the variants (forward, bwd_only), both builds, config by config -> ab_variants.txt
#   4. host time per call against an identity autograd.Function (bench/host_memory.py) -> host_memory.txt
#   5. pytest's GPU cases of the family, the layering, the GEMMs, the MLP and FP8    -> pytest.log
#
#   mkdir -p ab-base && git archive <rev> -- . ':!bench/results' | tar -x -C ab-base
#   bash scripts/device_verify.sh            (AB_BASE=folder of the older sources, default ab-base)
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
BASE=${AB_BASE:-ab-base}
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
cuda=$(dirname "$(dirname "$(command -v nvcc)")")

step "builds: the working tree (CMake, pip) and $BASE, with shared-cudart libraries for the A/B"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/build.log"
lib() { cmake -S "$1" -B "$2" -G Ninja -DFASTGLU_CUDA=ON "${@:3}" > "$2.log" 2>&1 && cmake --build "$2" --target fastglu fastglu-bench >> "$2.log" 2>&1; echo "$2: rc $?"; }
( cmake -S . -B build-device -G Ninja -DFASTGLU_CUDA=ON > /tmp/cur.log 2>&1 && cmake --build build-device >> /tmp/cur.log 2>&1; echo "build-device: rc $?" ) &
( python3 -m pip install -q --no-build-isolation --no-deps . > /tmp/pip.log 2>&1; echo "pip: rc $?" ) &
lib "$BASE" /tmp/ab-base -DFASTGLU_CUDART=Shared &
lib "$PWD" /tmp/ab-cur -DFASTGLU_CUDART=Shared &
wait
cat /tmp/cur.log /tmp/pip.log /tmp/ab-base.log /tmp/ab-cur.log >> "$OUT/build.log"
echo "spills: $(grep -c '[1-9][0-9]* bytes spill stores' /tmp/cur.log) kernel reports with spill stores"

step "1. A/B of fastglu_swiglu_*_cuda: $BASE (A) against the working tree (B)"
cc -O2 -std=c11 bench/tune/ab_swiglu.c -Iinclude -I"$cuda/include" -L"$cuda/lib64" -lcudart -ldl -o /tmp/ab-swiglu-bin
LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 150 /tmp/ab-swiglu-bin \
  /tmp/ab-base/libfastglu.so /tmp/ab-cur/libfastglu.so ${AB_ROUNDS:-4} 30 2>&1 | tee "$OUT/ab_swiglu.txt" | tail -45

step "2. CTest on the GPU"
(cd build-device && timeout 200 ctest --output-on-failure -R "^glu_cuda$" \
  && FASTGLU_TEST_QUICK=1 timeout 120 ctest --output-on-failure -j2 -R "^(swiglu_cuda|glu_fp8_cuda)$") 2>&1 | tee "$OUT/tests.log" | tail -8

step "3. fastglu-bench over the variants, $BASE (A) and the working tree (B)"
IFS=';' read -ra configs <<< "${AB_CONFIGS:---bias;--weights fp32;--activation gelu_tanh --bias;--activation quick_gelu --bias --weights fp32 --clamp 7;--fp8-store;--clamp 7;--interleaved;--glu}"
for c in "${configs[@]}"; do
  for side in base cur; do
    echo "-- $side: $c"
    timeout 30 /tmp/ab-$side/bench/c/fastglu-bench --mode forward,bwd_only $c 2>&1 | tail -2
  done
done 2>&1 | tee "$OUT/ab_variants.txt" | tail -40

step "4. host time per call (bench/host_memory.py)"
timeout 120 python3 bench/host_memory.py --out "$OUT/host_memory.json" 2>&1 | grep -v Warning | tee "$OUT/host_memory.txt" | head -40

step "5. pytest, GPU cases"
timeout ${PYTEST_TIMEOUT:-150} python3 -m pytest -q -x -k cuda tests/python/test_swiglu.py tests/python/test_variants.py \
  tests/python/test_layering.py tests/python/test_linear_dglu.py tests/python/test_mlp.py tests/python/test_glu_fp8.py \
  2>&1 | tee "$OUT/pytest.log" | tail -8
step "done"
