#!/usr/bin/env bash
# device_gemm_bench.sh — one call on the GPU machine for the linear layers (fc1 GEMM with the GLU
# epilogue): build, the C tests (CTest gemm_cuda, gemm_cpu), the Python tests
# (tests/python/test_linear_glu.py), and the MLP / GEMM benchmark (python -m fastglu.bench.mlp: the
# five workloads of the issue, 3 rounds, rotating provider order). Everything lands under $OUT
# (default ./device-out), four files: build.log, tests.log, bench.log, records.tar.gz (the seed-format
# records, mlp.jsonl, table.txt, summary.json; unpack under bench/results/nvidia-h200/).
#
#   bash scripts/device_gemm_bench.sh [mlp bench args...]   e.g. --shape 8192,4096,8192 --rounds 3
#   STAGES="build ctest pytest bench" (default: all four). Within one 10-minute call the four may not
#   fit (two builds of the library: CMake's and pip's); split them: STAGES="build ctest", then
#   STAGES="pytest bench". --quack-tuned autotunes quack per shape (minutes): one --shape per call.
#
# Peers: wheels in .whl/ (liger-kernel, quack-kernels with nvidia-cutlass-dsl 4.7.1 and its
# dependencies; see ../shared/peers/README.md) are installed into /tmp/py/site-packages and added
# with site.addsitedir (cutlass-dsl needs its .pth file; quack needs a site-packages path).
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
STAGES=${STAGES:-build ctest pytest bench}
want() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
SITE=/tmp/py/site-packages

step "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -1
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
} 2>&1 | tee "$OUT/build.log"

if ls .whl/*.whl >/dev/null 2>&1; then
  step "peers from .whl/"
  mkdir -p "$SITE"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    >> "$OUT/build.log" 2>&1 || echo "note: some peer wheels did not install (see build.log)"
fi
# python3 with the peers' folder added as a site directory (its .pth files processed)
py() { python3 -c "import runpy, site, sys; site.addsitedir('$SITE'); sys.argv = sys.argv[1:]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)" "$@"; }

if want build || want ctest; then
  step "C build (CMake): the library, test_gemm_cuda, test_gemm_cpu"
  rm -rf build-device
  { cmake -S . -B build-device -G Ninja -DFASTGLU_CUDA=ON \
      && cmake --build build-device --target test_gemm_cuda test_gemm_cpu test_mlp_cpu; } >> "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
  grep -E "gemm_general_kernel|gemm_sm90|sm90" -A2 "$OUT/build.log" | grep -E "registers|spill" | head -20
fi

if want ctest; then
  step "C tests (CTest): gemm_cuda (both kernels, T = 8193 included), gemm_cpu, mlp_cpu"
  (cd build-device && ctest --output-on-failure -R "^(gemm_(cuda|cpu)|mlp_cpu)$") 2>&1 | tee "$OUT/tests.log"
fi

if want pytest || want bench; then
  step "Python package (pip install --no-build-isolation)"
  python3 -m pip install -q --no-build-isolation --no-deps . >> "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
fi

if want pytest; then
  step "pytest tests/python/test_linear_glu.py tests/python/test_mlp.py (CPU and CUDA)"
  py pytest -q tests/python/test_linear_glu.py tests/python/test_mlp.py 2>&1 | tail -30 | tee -a "$OUT/tests.log"
fi

if want bench; then
  step "benchmark: python -m fastglu.bench.mlp $*"
  rm -rf /tmp/mlp-records
  py fastglu.bench.mlp --out /tmp/mlp-records "$@" 2>&1 | tee "$OUT/bench.log"
  tar czf "$OUT/records.tar.gz" -C /tmp mlp-records
fi
step "done"
