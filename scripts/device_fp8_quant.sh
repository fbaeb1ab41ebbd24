#!/usr/bin/env bash
# device_fp8_quant.sh — one call on the GPU machine for the FP8 quantiser of a plain operand
# (fastglu.fp8.quantize_fp8) and the FP8 MLP block that uses it, from builds made on a CPU host with
# nvcc (the machine then compiles nothing):
#   WHEEL   the Python package's wheel (pip wheel ... -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90)
#   CT      (optional) a tar.xz of one folder holding a folder per build of the CUDA C test programs
#           (test_quant_fp8_cuda, test_glu_fp8_cuda, those present), each with the libfastglu.so.0
#           they link, or without one: then the wheel's library (the same sources)
#   GAB     (stage glu_ab) a tar.xz of one folder of fp8_prof_<name> binaries (bench/tune/fp8_prof.cu
#           built against versions of src/glu_fp8_cuda.cu), GAB_NAMES the versions, the base first
#   QAB     (stage ab) a folder, or a tar.xz of one, of quant_prof_<name> binaries
#           (bench/tune/quant_prof.cu) and
#           QAB_NAMES, the versions to A/B (bench/tune/quant_ab.sh)
# Writes under $OUT: machine.txt (with the SASS check of the FP8 kernels: no local memory),
# ctest.log (the C programs), pytest.log (test_quantize_fp8.py, test_fp8_mlp.py, test_glu_fp8.py),
# ab.txt, quant.tar.gz (python -m fastglu.bench.quant_fp8: its records, summary, table and log),
# fp8.tar.gz (python -m fastglu.bench.fp8, the GLU kernels against the unfused path: the same), fp8mlp.tar.gz
# (python -m fastglu.bench.fp8_mlp's records, summary, table and log; stage profile: its --profile
# tables at PROFILE_SHAPES, default 1024,4096,14336), llama.tar.gz
# (examples/llama/train.py --fp8 on the GPU: results.json, train.log, loss.png).
#   WHEEL=.dev/fin/fastglu-*.whl CT=.dev/ct.tar.xz bash scripts/device_fp8_quant.sh
#   STAGES="tests ab glu_ab quant fp8 fp8mlp profile llama" (default: tests quant fp8mlp)
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
STAGES=${STAGES:-tests quant fp8mlp}
mkdir -p /tmp/fp8mlp /tmp/quant /tmp/fp8
want() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} 2>&1 | tee "$OUT/machine.txt"
python3 -m pip install -q --no-deps --force-reinstall ${WHEEL:?the wheel to install} >> "$OUT/machine.txt" 2>&1 \
  || { echo "the wheel did not install"; tail -5 "$OUT/machine.txt"; exit 1; }
# OVERLAY=1: the working tree's Python files over the installed package's (a wheel built before a
# Python-only change; its compiled library stays)
if [ -n "${OVERLAY:-}" ]; then
  SITE=$(python3 -c 'import fastglu, os; print(os.path.dirname(fastglu.__file__))')
  cp python/fastglu/*.py "$SITE"/ && cp python/fastglu/bench/*.py "$SITE"/bench/ \
    && echo "Python files overlaid from the working tree" | tee -a "$OUT/machine.txt"
fi
python3 -c 'import fastglu; print("fastglu", fastglu.__version__, "GPU usable:", fastglu.cuda_available())' | tee -a "$OUT/machine.txt"

if want tests; then
  step "C tests (prebuilt), pytest"
  SITE=$(python3 -c 'import fastglu, os; print(os.path.dirname(fastglu.__file__))')
  mkdir -p /tmp/ct /tmp/wheel-lib
  [ -n "${CT:-}" ] && tar -xJf "$CT" -C /tmp/ct --strip-components=1
  ln -sf "$SITE/libfastglu.so" /tmp/wheel-lib/libfastglu.so.0
  for d in $(ls -d /tmp/ct/*/ 2>/dev/null); do
    lib=$d; [ -e "$d/libfastglu.so.0" ] || lib=/tmp/wheel-lib
    for t in test_quant_fp8_cuda test_glu_fp8_cuda; do
      [ -x "$d/$t" ] || continue
      echo "--- $(basename "$d")/$t (library: $lib)" >> "$OUT/ctest.log"
      (cd "$d" && LD_LIBRARY_PATH=$lib FASTGLU_TEST_QUICK=1 timeout 240 "./$t") >> "$OUT/ctest.log" 2>&1
      rc=$? # (before the echo: its command substitution would set $? to basename's)
      echo "$(basename "$d")/$t exit status $rc" | tee -a "$OUT/ctest.log"
    done
  done
  {
    echo "--- SASS of the FP8 kernels (quant_fp8_kernel, glu_fp8_*) in $SITE (local memory: LDL / STL)"
    lib=$(ls "$SITE"/../fastglu*/libfastglu.so* "$SITE"/libfastglu.so* 2>/dev/null | head -1)
    cuobjdump -sass "$lib" 2>/dev/null | awk '
      /Function :/ { f = ($3 ~ /quant_fp8_kernel|glu_fp8_/) ? $3 : ""; if (f != "") k[f] = 1 }
      f != "" && /LDL|STL/ { n[f]++ }
      END { c = 0; s = 0; for (x in k) { c++; if (n[x]) { s++; print x, n[x], "LDL/STL" } }
            print c, "FP8 kernel functions,", s, "with local memory" }'
  } > /tmp/sass.txt 2>&1
  cat /tmp/sass.txt >> "$OUT/machine.txt"; tail -3 /tmp/sass.txt
  timeout 420 python3 -m pytest -q -rs tests/python/test_quantize_fp8.py tests/python/test_fp8_mlp.py \
    tests/python/test_glu_fp8.py > "$OUT/pytest.log" 2>&1
  echo "pytest exit status $?"; tail -4 "$OUT/pytest.log"
fi
if want ab && [ -n "${QAB:-}" ]; then
  step "A/B of the quantiser's versions: ${QAB_NAMES:?}"
  if [ -f "$QAB" ]; then mkdir -p /tmp/qab && tar -xJf "$QAB" -C /tmp/qab --strip-components=1 && QAB=/tmp/qab; fi
  OUT=/tmp bash bench/tune/quant_ab.sh "$QAB" $QAB_NAMES 2>&1 | tee "$OUT/ab.txt"
  cat /tmp/quant_ab_raw.txt >> "$OUT/ab.txt"
fi
if want quant; then
  step "python -m fastglu.bench.quant_fp8"
  timeout 240 python3 -m fastglu.bench.quant_fp8 --out /tmp/quant 2>&1 | tee /tmp/quant/bench.log
  tar -czf "$OUT/quant.tar.gz" -C /tmp quant
fi
if want fp8; then
  step "python -m fastglu.bench.fp8 (the GLU kernels against the unfused path)"
  timeout 240 python3 -m fastglu.bench.fp8 --out /tmp/fp8 2>&1 | tee /tmp/fp8/bench.log
  tar -czf "$OUT/fp8.tar.gz" -C /tmp fp8
fi
if want fp8mlp; then
  step "python -m fastglu.bench.fp8_mlp"
  timeout "${BENCH_TIMEOUT:-300}" python3 -m fastglu.bench.fp8_mlp --rounds 2 --out /tmp/fp8mlp 2>&1 \
    | tee /tmp/fp8mlp/bench.log | tail -12
  tar -czf "$OUT/fp8mlp.tar.gz" -C /tmp fp8mlp
fi
if want llama; then
  step "examples/llama/train.py --fp8 (bf16 autocast; the torch, fastglu, rounding and FP8 runs)"
  CUBLAS_WORKSPACE_CONFIG=:4096:8 timeout "${LLAMA_TIMEOUT:-240}" python3 examples/llama/train.py \
    --device cuda --dtype bfloat16 --fp8 --no-control --out /tmp/llama 2>&1 | tail -8
  echo "train.py exit status ${PIPESTATUS[0]} (0: every check passed, the fp8 band included)"
  tar -czf "$OUT/llama.tar.gz" -C /tmp llama
fi
if want glu_ab && [ -n "${GAB:-}" ]; then
  step "A/B of the FP8 GLU kernels' versions: ${GAB_NAMES:?}"
  mkdir -p /tmp/gab && tar -xJf "$GAB" -C /tmp/gab --strip-components=1
  OUT=/tmp bash bench/tune/fp8_ab.sh /tmp/gab $GAB_NAMES 2>&1 | tee -a "$OUT/ab.txt" | tail -30
  cat /tmp/fp8ab_raw.txt >> "$OUT/ab.txt"
fi
if want profile; then
  step "python -m fastglu.bench.fp8_mlp --profile"
  for sh in ${PROFILE_SHAPES:-1024,4096,14336}; do
    timeout 180 python3 -m fastglu.bench.fp8_mlp --profile --shape "$sh" --out /tmp/fp8mlp 2>&1 | tail -2
  done
  tar -czf "$OUT/fp8mlp.tar.gz" -C /tmp fp8mlp
fi
