#!/bin/bash
# Device run of the sm_90a GEMM: SASS check, correctness, determinism, timing (bench/gemm/sm90_dev.py).
# Uses the library in build-dev/ built from the same sources when it loads, else builds it here.
# Usage: scripts/device_gemm.sh [extra sm90_dev.py args]; logs under $OUT (or ./device-out).
# The fc2 dgrad + dGLU's checks and A/B only: scripts/device_gemm.sh --dglu
set -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}
mkdir -p "$OUT" build-dev
NVCC=${NVCC:-nvcc}
command -v $NVCC >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
# the library is named by a hash of its sources: a stale one (without newer hooks) is never used,
# and an unchanged tree reuses the build of an earlier call (build outputs stay between calls)
SUM=$(cat src/gemm_sm90.cu src/gemm_internal.h src/glu_math.cuh src/cuda_common.cuh src/internal.h \
    src/common.c src/glu_common.c include/fastglu.h 2>/dev/null | sha256sum | cut -c1-16)
LIB=build-dev/libgemm_sm90-$SUM.so
if ! python3 -c "import ctypes; ctypes.CDLL('$LIB')" 2>/dev/null; then
    echo "building $LIB here"
    $NVCC -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -DFASTGLU_GEMM_DEV_HOOKS -Iinclude -Isrc \
        src/gemm_sm90.cu src/common.c src/glu_common.c -o "$LIB" || exit 1
fi
# the standalone activation for the fused fc1's budget (cuBLAS fc1 + 0.2 x fastglu's activation):
# GLU_LIB, any library exporting fastglu_glu_fwd_cuda (the wheel's libfastglu.so does), else
# build-dev/libglu.so; without one the budget takes torch's slower activation (marked "(torch)")
GLU=()
for g in ${GLU_LIB:-} build-dev/libglu.so; do
    if [ -f "$g" ] && python3 -c "import ctypes; ctypes.CDLL('$g').fastglu_glu_fwd_cuda" 2>/dev/null; then
        GLU=(--glu-lib "$g")
        break
    fi
done
CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CUOBJDUMP -sass $LIB > "$OUT/sass.txt" 2>&1
echo "SASS: HGMMA $(grep -c HGMMA "$OUT/sass.txt"), LDL/STL $(grep -cE 'LDL|STL' "$OUT/sass.txt")"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
# a hang (a pipeline bug) must not eat the call: a small problem first, everything under timeouts
timeout 60 python3 bench/gemm/sm90_dev.py --lib $LIB --small || { echo "small run failed or hung"; exit 1; }
PYTHONUNBUFFERED=1 timeout ${GEMM_DEV_TIMEOUT:-240} python3 bench/gemm/sm90_dev.py --lib $LIB "${GLU[@]}" --out "$OUT" "$@" 2>&1 | tee "$OUT/run.log"
rc=$?
if [ -n "$GEMM_SANITIZE" ]; then
    for tool in memcheck racecheck; do
        timeout ${GEMM_SANITIZE_TIMEOUT:-150} compute-sanitizer --tool $tool python3 bench/gemm/sm90_dev.py --lib $LIB --small 2>&1 | tail -4 | tee "$OUT/sanitize_$tool.txt"
    done
fi
echo "SASS: HGMMA $(grep -c HGMMA "$OUT/sass.txt"), LDL/STL $(grep -cE 'LDL|STL' "$OUT/sass.txt")"
sed -n '/=== summary ===/,$p' "$OUT/run.log"
exit $rc
