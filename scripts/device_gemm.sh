#!/bin/bash
# Device run of the sm_90a GEMM: SASS check, correctness, determinism, timing (bench/gemm/sm90_dev.py).
# Uses the libraries in build-dev/ when they load on this machine, else builds them here.
# Usage: scripts/device_gemm.sh [extra sm90_dev.py args]; logs under $OUT (or ./device-out).
# The fc2 dgrad + dGLU's checks and A/B only: scripts/device_gemm.sh --dglu
set -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}
mkdir -p "$OUT" build-dev
NVCC=${NVCC:-nvcc}
command -v $NVCC >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
# rebuilt when it does not load or a source is newer (a stale library lacks newer hooks)
if ! python3 -c "import ctypes; ctypes.CDLL('build-dev/libgemm_sm90.so')" 2>/dev/null ||
    [ -n "$(find src/gemm_sm90.cu src/gemm_internal.h src/glu_math.cuh -newer build-dev/libgemm_sm90.so 2>/dev/null)" ]; then
    echo "building libgemm_sm90.so here"
    $NVCC -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -DFASTGLU_GEMM_DEV_HOOKS -Iinclude -Isrc \
        src/gemm_sm90.cu src/common.c src/glu_common.c -o build-dev/libgemm_sm90.so || exit 1
fi
GLU=()
if [ -f build-dev/libglu.so ] && python3 -c "import ctypes; ctypes.CDLL('build-dev/libglu.so')" 2>/dev/null; then
    GLU=(--glu-lib build-dev/libglu.so)
fi
CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CUOBJDUMP -sass build-dev/libgemm_sm90.so > "$OUT/sass.txt" 2>&1
echo "SASS: HGMMA $(grep -c HGMMA "$OUT/sass.txt"), LDL/STL $(grep -cE 'LDL|STL' "$OUT/sass.txt")"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
# a hang (a pipeline bug) must not eat the call: a small problem first, everything under timeouts
timeout 60 python3 bench/gemm/sm90_dev.py --lib build-dev/libgemm_sm90.so --small || { echo "small run failed or hung"; exit 1; }
PYTHONUNBUFFERED=1 timeout ${GEMM_DEV_TIMEOUT:-240} python3 bench/gemm/sm90_dev.py --lib build-dev/libgemm_sm90.so "${GLU[@]}" --out "$OUT" "$@" 2>&1 | tee "$OUT/run.log"
rc=$?
if [ -n "$GEMM_SANITIZE" ]; then
    for tool in memcheck racecheck; do
        timeout ${GEMM_SANITIZE_TIMEOUT:-150} compute-sanitizer --tool $tool python3 bench/gemm/sm90_dev.py --lib build-dev/libgemm_sm90.so --small 2>&1 | tail -4 | tee "$OUT/sanitize_$tool.txt"
    done
fi
echo "SASS: HGMMA $(grep -c HGMMA "$OUT/sass.txt"), LDL/STL $(grep -cE 'LDL|STL' "$OUT/sass.txt")"
sed -n '/=== summary ===/,$p' "$OUT/run.log"
exit $rc
