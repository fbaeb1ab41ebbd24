#!/usr/bin/env bash
# device_run.sh — one call on the GPU machine: build, check the compiler's resource report and the
# SASS, run the C (CTest) and Python (pytest) tests, and time every provider in one process.
# Everything lands under $OUT (default ./device-out), at most 8 files (the device tool's limit):
# build.log, kernels.txt (ptxas resources + SASS access widths), tests.log (CTest, pytest,
# compute-sanitizer), tune.log, host_memory.json (+ .txt, or its table appended to bench.log),
# bench.log and records.tar.gz.
#
#   bash scripts/device_run.sh [bench args...]     e.g. bash scripts/device_run.sh --ffn 8192
#   STAGES="tune host" bash scripts/device_run.sh    only some stages (default: all of
#                                                    build ctest pytest tune host bench;
#                                                    also: variants cbench ab abswiglu ncu ncufwd llama sanitize fp8 fp8mlp
#                                                    gemmab ($GEMM_AB_ARGS: scripts/device_gemm.sh's)
#                                                    ctestbin (C test programs built elsewhere: $CTEST_BIN)
#                                                    mlpbench ($MLP_ARGS: python -m fastglu.bench.mlp's);
#                                                    sweep (the 13 widths in 4 rounds + the variants);
#                                                    (fp8: STAGES=fp8 alone builds and runs the FP8
#                                                    kernels' C and Python tests and benchmark);
#                                                    "sanitize" runs compute-sanitizer too, over
#                                                    $SANITIZE_TESTS: default both CUDA C tests,
#                                                    with $SANITIZE_TOOLS: default all four)
#
# Peers (megatron-core, liger-kernel) are installed from wheels in .whl/ when present
# (`pip download --no-deps` for Python 3.12, manylinux_2_28); the image's torch/triton are used as they are.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1

STAGES=${STAGES:-build ctest pytest tune host bench}
want() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -1
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
} 2>&1 | tee "$OUT/build.log"

# Peers: wheels in .whl/ go into a folder named site-packages (quack fingerprints functions outside
# one) that every python3 of this script adds as a site directory (its .pth files processed:
# cutlass-dsl needs its own), through a sitecustomize on PYTHONPATH. nvidia-cutlass-dsl-libs-cu13 is
# over one call's carry: its files, as one tar.xz split in parts (.peerA/, .peerB/, ... in order,
# carried in calls in a row while the machine stays warm), are unpacked into the same folder once
# the parts put together make a whole xz stream.
SITE=/tmp/py/site-packages
if ls .whl/*.whl >/dev/null 2>&1; then
  step "peers from .whl/"
  mkdir -p "$SITE"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    >> "$OUT/build.log" 2>&1 || echo "note: some peer wheels did not install (see build.log)"
fi
# A carried path is gone in the next call unless carried again: the parts wait in /tmp/peerparts.
if ls .peer?/* >/dev/null 2>&1; then mkdir -p /tmp/peerparts && cp .peer?/* /tmp/peerparts/; fi
if ls /tmp/peerparts/* >/dev/null 2>&1 && [ -d "$SITE" ] && [ ! -d "$SITE/nvidia_cutlass_dsl/cu13" ]; then
  if cat /tmp/peerparts/* | xz -t 2>/dev/null; then
    cat /tmp/peerparts/* | xz -d | tar -x -C "$SITE" && echo "cutlass-dsl libs-cu13 unpacked"
  else
    echo "cutlass-dsl libs-cu13: parts $(ls /tmp/peerparts | tr '\n' ' ')here, not yet whole"
  fi
fi
if [ -d "$SITE" ]; then
  mkdir -p /tmp/py/boot
  printf 'import site\nsite.addsitedir("%s")\n' "$SITE" > /tmp/py/boot/sitecustomize.py
  export PYTHONPATH=/tmp/py/boot${PYTHONPATH:+:$PYTHONPATH}
  python3 -c 'import importlib.metadata as m
for d in ("liger-kernel", "megatron-core", "quack-kernels", "nvidia-cutlass-dsl"):
    try: print(d, m.version(d))
    except Exception as e: print(d, "missing", e)'
fi

PY_STAGES="pytest ctestbin variants host bench sweep mlpbench llama ncufwd fp8 fp8mlp"
want_py() { for s_ in $PY_STAGES; do want "$s_" && return 0; done; return 1; }
# NOBUILD=1: a later call on the same warm machine uses the builds already there (build-device/
# and the installed package) and skips both builds.
# WHEEL=<path>: install that wheel (built elsewhere, e.g. on a CPU host with nvcc) instead of
# building the Python package here.
if want_py && [ -n "${WHEEL:-}" ]; then
  step "Python package from $WHEEL"
  python3 -m pip install -q --no-deps --force-reinstall $WHEEL >> "$OUT/build.log" 2>&1 \
    || { echo "the wheel did not install"; exit 1; }
  NOPYBUILD=1
fi
if want_py && [ -z "${NOBUILD:-}" ] && [ -z "${NOPYBUILD:-}" ]; then
  # The Python package builds beside the C build (its own CMake tree): the two take about as long
  # as the longest kernel file on the machine's cores, instead of one after the other.
  step "Python package (pip install --no-build-isolation), in the background"
  (python3 -m pip install -q --no-build-isolation --no-deps . > /tmp/pip-build.log 2>&1; echo $? > /tmp/pip-build.rc) &
  PIP_PID=$!
fi

# NOCBUILD=1: the Python package only (stages that need no C test program)
if [ -z "${NOBUILD:-}" ] && [ -z "${NOCBUILD:-}" ]; then
step "C build (CMake) with the ptxas resource report"
rm -rf build-device
cmake -S . -B build-device -G Ninja -DFASTGLU_CUDA=ON >> "$OUT/build.log" 2>&1 \
  && cmake --build build-device >> "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
grep -E "Compiling entry|registers|stack frame" "$OUT/build.log" | paste - - - \
  | sed -E 's/ptxas info *: //g; s/Compiling entry function//; s/for .sm_90.//' > "$OUT/kernels.txt"
echo "kernels: $(wc -l < "$OUT/kernels.txt"); any spills: $(grep -c '[1-9][0-9]* bytes spill' "$OUT/kernels.txt")"

step "SASS: global load/store widths in the bf16 kernels"
cuobjdump --dump-sass build-device/libfastglu.so > /tmp/sass.txt 2>&1
python3 - "$OUT/kernels.txt" <<'EOF'
import re, sys
text = open("/tmp/sass.txt").read()
out = []
for name, body in re.findall(r"Function : (\S+)\n(.*?)(?=\n\s+Function :|\Z)", text, re.S):
    ld = sorted(set(re.findall(r"\b(LDG\.E[\w.]*)", body)))
    st = sorted(set(re.findall(r"\b(STG\.E[\w.]*)", body)))
    out.append(f"{name}\n  loads: {' '.join(ld)}\n  stores: {' '.join(st)}")
open(sys.argv[1], "a").write("\nSASS global accesses per kernel\n" + "\n".join(out) + "\n")
for block in out:
    if "bfloat16" in block:
        print(block)
EOF
python3 bench/tune/sass_counts.py /tmp/sass.txt > /tmp/sass_counts.tsv
{ echo; echo "SASS instruction counts per kernel (bench/tune/sass_counts.py)"; cat /tmp/sass_counts.tsv; } >> "$OUT/kernels.txt"
echo "kernels with single 16-bit conversions (F2F): $(awk -F'\t' 'NR > 1 && $4 > 0' /tmp/sass_counts.tsv | wc -l)"
echo "kernels with a min/max predicate output (MNMX_pred, want 0): $(awk -F'\t' 'NR > 1 && $9 > 0' /tmp/sass_counts.tsv | wc -l)"
fi

if want ctest; then
  step "C tests (CTest)"
  # Only the tests that need the GPU: the CPU-only ones (CPU backend, sweeps, host emulation) run in
  # CI and would take about 5 minutes of device time here.
  # swiglu_cuda runs its quick suite (its full sentinel sweep is CPU-checkable); glu_cuda in full.
  # CTEST_QUICK=1: gemm_cuda and glu_cuda without T = 8193 too. With the pytest stage the CTests run
  # in the background, beside pytest (correctness only: the two share the GPU), and tests.log holds
  # both.
  ( (cd build-device && ${CTEST_QUICK:+env FASTGLU_TEST_QUICK=1} ctest --output-on-failure -j 4 \
       -R "^glu_cuda$|^gemm_cuda$|^glu_fp8_cuda$|^fp8_store_cuda$|bench" \
     && FASTGLU_TEST_QUICK=1 ctest --output-on-failure -R "^swiglu_cuda$") > /tmp/ctest.log 2>&1
    echo "ctest exit status $?" >> /tmp/ctest.log ) &
  CTEST_PID=$!
  want pytest || { wait "$CTEST_PID"; cat /tmp/ctest.log | tee "$OUT/tests.log" | tail -25; }
fi

if want_py && [ -z "${NOBUILD:-}" ] && [ -z "${NOPYBUILD:-}" ]; then
  step "Python package: waiting for the background build"
  wait "$PIP_PID"; cat /tmp/pip-build.log >> "$OUT/build.log"
  [ "$(cat /tmp/pip-build.rc)" = 0 ] || { tail -40 /tmp/pip-build.log; exit 1; }
fi

if want ctestbin; then
  # The CUDA C test programs built on a CPU host (CMake, sm_90) and carried in $CTEST_BIN (default
  # .dev/ctests): test_glu_cuda in full and its --swiglu suite quick, test_gemm_cuda,
  # test_glu_fp8_cuda, test_quant_fp8_cuda, test_fp8_store_cuda, those present, all at once
  # (CTEST_QUICK=1: without T = 8193), against the installed wheel's libfastglu.so (their soname
  # through LD_LIBRARY_PATH). In the background
  # beside pytest, as the ctest stage, whose place it takes (the two share /tmp/ctest.log).
  if want ctest; then echo "ctestbin and ctest: ask for one of them"; exit 1; fi
  step "C test programs from ${CTEST_BIN:-.dev/ctests} against the wheel's library, in the background"
  lib=$(python3 -c 'import fastglu, os; print(os.path.join(os.path.dirname(fastglu.__file__), "libfastglu.so"))')
  mkdir -p /tmp/wl && ln -sf "$lib" /tmp/wl/libfastglu.so.0
  rm -f /tmp/ctb-*.log
  ( i=0
    if cd "${CTEST_BIN:-.dev/ctests}"; then
      for t in "test_glu_cuda" "test_glu_cuda --swiglu" "test_gemm_cuda" "test_glu_fp8_cuda" "test_quant_fp8_cuda" "test_fp8_store_cuda"; do
        [ -x "${t%% *}" ] || continue
        i=$((i + 1))
        if [ "$t" = "test_glu_cuda --swiglu" ]; then q=1; else q=${CTEST_QUICK:-}; fi
        ( LD_LIBRARY_PATH=/tmp/wl ${q:+env FASTGLU_TEST_QUICK=1} timeout "${CTEST_TIMEOUT:-400}" ./$t > /tmp/ctb-$i.log 2>&1
          echo "$t exit status $? (124: ran past CTEST_TIMEOUT)" >> /tmp/ctb-$i.log ) &
      done
      wait
    fi
    rc=0
    [ "$i" -gt 0 ] || { echo "no C test program in ${CTEST_BIN:-.dev/ctests}"; rc=1; }
    for f in $(ls /tmp/ctb-*.log 2>/dev/null); do
      echo "-- $(tail -1 "$f")"; cat "$f"; tail -1 "$f" | grep -q "exit status 0 " || rc=1
    done
    echo "ctest exit status $rc" ) > /tmp/ctest.log 2>&1 &
  CTEST_PID=$!
  want pytest || { wait "$CTEST_PID"; cat /tmp/ctest.log | tee "$OUT/tests.log" | tail -25; }
fi

if want pytest; then
  step "Python tests (pytest)"
  # PYTEST_ARGS, e.g. "-k cuda": the GPU cases only (CI runs the CPU ones); PYTEST_PATHS: the test
  # files or folders (default tests/python)
  timeout "${PYTEST_TIMEOUT:-420}" python3 -m pytest -q -rs ${PYTEST_ARGS:-} ${PYTEST_PATHS:-tests/python} > /tmp/pytest.log 2>&1
  echo "pytest exit status $?" >> /tmp/pytest.log
  if [ -n "${CTEST_PID:-}" ]; then
    wait "$CTEST_PID"; { echo "=== CTest"; cat /tmp/ctest.log; echo "=== pytest"; } > "$OUT/tests.log"
    grep -E "tests passed|tests failed|Failed|\*\*\*|exit status|Passed|Total Test" /tmp/ctest.log | tail -15
  fi
  cat /tmp/pytest.log >> "$OUT/tests.log"; tail -15 /tmp/pytest.log
fi

if want sanitize; then
  step "compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over the CUDA C test"
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
    echo "-- $tool"
    # executable[:argument]: test_glu_cuda --swiglu is SwiGLU's entry points (CTest swiglu_cuda)
    for t in ${SANITIZE_TESTS:-build-device/test_glu_cuda:--swiglu build-device/test_glu_cuda}; do
      exe=${t%%:*} arg=
      [[ "$t" == *:* ]] && arg=${t#*:}
      [ -x "$exe" ] || continue
      echo "   $(basename "$exe") $arg"
      FASTGLU_TEST_QUICK=1 FASTGLU_TEST_SANITIZE=1 timeout "${SANITIZE_TIMEOUT:-120}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$exe" $arg 2>&1 | tail -3
      echo "   exit status ${PIPESTATUS[0]} (124: ran past SANITIZE_TIMEOUT)"
    done
  done 2>&1 | tee -a "$OUT/tests.log"
fi

# Extra outputs travel in one tarball (extra.tar.gz), to stay under the device tool's file limit.
mkdir -p "$OUT/extra"
if want variants; then
  step "variants beside Megatron-Core (python -m fastglu.bench.variants)"
  python3 -m fastglu.bench.variants --out "$OUT/extra/variants" 2>&1 | tail -20
fi
if want fp8; then
  # STAGES=fp8 alone is the FP8 kernels' whole check: the C test on the GPU (codes and scales
  # against the float64 recipe and the fp32 recipe bit for bit), the Python tests, their ptxas
  # report, then the three kernel benchmarks at the issue's shapes (fused vs floor vs unfused, with
  # the check; records, summary.json and table.txt under extra/fp8/{glu,quant,store})
  step "the GLU quantised to FP8: CTest glu_fp8_cuda, fp8_store_cuda, their pytest files, benchmarks"
  { grep "glu_fp8_kernel" "$OUT/kernels.txt" | head -40
    if ! want ctest; then (cd build-device && ctest --output-on-failure -R "^(glu_fp8|fp8_store)_cuda$"); fi
    if ! want pytest; then
      python3 -m pytest -q -rs tests/python/test_glu_fp8.py tests/python/test_fp8_store.py 2>&1 | tail -8
    fi
    python3 -m fastglu.bench.fp8 --sums --out "$OUT/extra/fp8/glu"
    python3 -m fastglu.bench.quant_fp8 --out "$OUT/extra/fp8/quant"
    python3 -m fastglu.bench.fp8_store --out "$OUT/extra/fp8/store"
  } 2>&1 | tee "$OUT/fp8.log" | tail -45
fi
if want fp8mlp; then
  # The MLP block with FP8 GEMMs (fastglu.mlp_fp8): its GPU tests (torch._scaled_mm's blockwise path
  # against the reference path), the block against the bf16 block at issue 26's shapes, and the
  # Llama example trained in bf16 and with the FP8 block (same seed; the rounding run stays: it
  # sets the bf16 bound of the fastglu run): extra/fp8mlp/ holds
  # pytest.log, bench/ (records, summary.json, table.txt), llama/ (results.json, train.log, loss.png).
  step "the FP8 MLP block: GPU tests, benchmark, Llama bf16 vs fp8 (fastglu.mlp_fp8)"
  mkdir -p "$OUT/extra/fp8mlp"
  # its GPU tests are left out where an earlier call ran pytest's GPU cases (SKIP_STAGE_TESTS=1)
  if [ -z "${SKIP_STAGE_TESTS:-}" ]; then
    timeout "${PYTEST_TIMEOUT:-420}" python3 -m pytest -q -rs tests/python/test_fp8_mlp.py \
      "tests/python/test_example_llama.py::test_fp8_run_trains_within_the_band" \
      > "$OUT/extra/fp8mlp/pytest.log" 2>&1
    echo "pytest exit status $?"; tail -6 "$OUT/extra/fp8mlp/pytest.log"
  fi
  timeout "${BENCH_TIMEOUT:-480}" python3 -m fastglu.bench.fp8_mlp --out "$OUT/extra/fp8mlp/bench" 2>&1 \
    | tee "$OUT/extra/fp8mlp/bench.log" | tail -14
  # SKIP_LLAMA=1: the block's tests and benchmark only
  if [ -z "${SKIP_LLAMA:-}" ]; then
    CUBLAS_WORKSPACE_CONFIG=${CUBLAS_WORKSPACE_CONFIG:-:4096:8} timeout "${LLAMA_TIMEOUT:-300}" \
      python3 examples/llama/train.py --device cuda --dtype bfloat16 --fp8 --no-control \
      --out "$OUT/extra/fp8mlp/llama" 2>&1 | tail -6
    echo "train.py exit status ${PIPESTATUS[0]} (0: every check passed, the fp8 band included)"
  fi
fi
if want gemmab; then
  # The sm_90a GEMM's development check and A/B (scripts/device_gemm.sh: bench/gemm/sm90_dev.py
  # through ctypes, the library built here from the tree or carried as build-dev/libgemm_sm90-<hash>.so)
  # with $GEMM_AB_ARGS (e.g. "--fused-only --rounds 8 --alt-lib base=build-dev/libbase.so", another
  # build carried in build-dev/); the standalone activation for its budget from the installed
  # package when there is one. Logs and sm90_dev.json in extra/gemm/ (the SASS dump left out).
  step "sm_90a GEMM check and A/B (scripts/device_gemm.sh ${GEMM_AB_ARGS:-})"
  mkdir -p "$OUT/extra/gemm"
  glu=$(python3 -c 'import fastglu, os; print(os.path.join(os.path.dirname(fastglu.__file__), "libfastglu.so"))' 2>/dev/null)
  # shellcheck disable=SC2086
  OUT="$OUT/extra/gemm" GLU_LIB="$glu" timeout "${GEMM_AB_TIMEOUT:-400}" bash scripts/device_gemm.sh \
    ${GEMM_AB_ARGS:-} 2>&1 | tail -16
  rm -f "$OUT/extra/gemm/sass.txt"
fi
if want cbench; then
  step "the C benchmark program (fastglu-bench) at the seed shape"
  build-device/bench/c/fastglu-bench --mode all --json "$OUT/extra/cbench.json" 2>&1 | tee "$OUT/extra/cbench.txt" | tail -12
  build-device/bench/c/fastglu-bench --mode forward,bwd_only --activation quick_gelu --bias --weights fp32 --clamp 7 \
    --json "$OUT/extra/cbench_quick_geglu.json" 2>&1 | tee "$OUT/extra/cbench_quick_geglu.txt" | tail -6
fi
if want ab; then
  # A/B of kernel versions in one process's conditions: each bench/tune/ab/<name>/ holds replacement
  # files for src/ (an experiment's files: not committed); the library and fastglu-bench are built with them
  # and timed, config by config, beside the working tree's build ("current").
  step "A/B: fastglu-bench over the variant configs, current vs bench/tune/ab/*/"
  names=(current); dirs=(build-device)
  for d in bench/tune/ab/*/; do
    [ -d "$d" ] || continue
    n=$(basename "$d"); t=/tmp/ab-src-$n
    rm -rf "$t" && mkdir -p "$t" && cp -r CMakeLists.txt include src bench cmake tests "$t"/; cp "$d"/* "$t"/src/
    (cmake -S "$t" -B "$t/build" -G Ninja -DFASTGLU_CUDA=ON > "$OUT/extra/ab-build-$n.log" 2>&1 \
      && cmake --build "$t/build" --target fastglu-bench >> "$OUT/extra/ab-build-$n.log" 2>&1) &
    names+=("$n"); dirs+=("$t/build")
  done
  wait
  IFS=';' read -ra configs <<< "${AB_CONFIGS:---bias;--weights fp32;--activation gelu_tanh --bias;--activation quick_gelu --bias --weights fp32 --clamp 7;--fp8-store;--clamp 7;--interleaved;--glu;--fp8-store --bias --weights fp32}"
  mkdir -p "$OUT/extra/ab"
  for ci in "${!configs[@]}"; do
    for bi in "${!names[@]}"; do
      echo "-- ${names[$bi]}: ${configs[$ci]}"
      ${dirs[$bi]}/bench/c/fastglu-bench --mode forward,bwd_only ${configs[$ci]} \
        --json "$OUT/extra/ab/${names[$bi]}-$ci.json" 2>&1 | tail -2
    done
  done 2>&1 | tee "$OUT/extra/ab.txt"
fi
if want abswiglu; then
  # fastglu_swiglu_*_cuda of an older build (AB_BASE: a git revision or a folder of its sources,
  # default ab-base/) against the working tree's: scripts/ab_swiglu.sh
  step "A/B of fastglu_swiglu_*_cuda: ${AB_BASE:-ab-base} against the working tree"
  bash scripts/ab_swiglu.sh "${AB_BASE:-ab-base}" 2>&1 | tee "$OUT/extra/ab_swiglu.txt"
fi
if want ncu; then
  # Hardware counters (ncu works on the Firecracker runtime; clocks left alone, as METHOD.md asks)
  # of the variant backward kernels (and the reduction kernel after a tile kernel) at the seed
  # shape, one fastglu-bench config per report.
  step "Nsight Compute over the variant backward kernels (fastglu-bench, bwd_only)"
  # fastglu-bench checks its outputs first (a backward with dy in full, then broadcast: two
  # launches each with a reduction), so --launch-skip 4 lands on the timed loop's launches.
  # NCU_BUILDS: build folders to profile (default build-device; A/B builds are /tmp/ab-src-<name>/build).
  IFS=';' read -ra configs <<< "${NCU_CONFIGS:---bias;--glu}"
  for b in ${NCU_BUILDS:-build-device}; do
    for ci in "${!configs[@]}"; do
      tag=$(basename "$(dirname "$b")")-$ci; [ "$b" = build-device ] && tag=current-$ci
      echo "-- $b: ${configs[$ci]}"
      ncu --clock-control none --kernel-name regex:'glu_(bwd|reduce)' --launch-skip 4 --launch-count 2 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section Occupancy --section LaunchStats --section SchedulerStats \
        "$b"/bench/c/fastglu-bench --mode bwd_only ${configs[$ci]} --warmup-ms 1 --rep-ms 1 \
        > "$OUT/extra/ncu-$tag.txt" 2>&1
      echo "   exit status $?"; grep -E "^  void|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Dynamic Shared" "$OUT/extra/ncu-$tag.txt" | head -16
    done
  done
fi
if want ncufwd; then
  # Every provider's forward kernel under Nsight Compute at $NCU_FFN: first with clean caches (ncu's
  # default) and the full sections, then with the L2 dirtied by a 256 MiB zero_ before each forward,
  # as in the benchmark (--cache-control none, duration and DRAM bytes only). The Triton kernels'
  # sources and PTX (fresh Inductor and Triton caches) come back in extra/codegen/, to read: other
  # projects' generated code, never committed.
  step "Nsight Compute over every provider's forward (bench/tune/ncu_forward.py)"
  export TORCHINDUCTOR_CACHE_DIR=/tmp/ncu-inductor TRITON_CACHE_DIR=/tmp/ncu-triton
  rm -rf "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR"
  timeout "${NCU_TIMEOUT:-200}" ncu --profile-from-start off --clock-control none --section LaunchStats --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section SchedulerStats \
    python3 bench/tune/ncu_forward.py ${NCU_FFN:-2048 3420 5632 8192} > "$OUT/extra/ncu-forward.txt" 2>&1
  echo "   exit status $?"
  timeout "${NCU_TIMEOUT:-200}" ncu --profile-from-start off --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    python3 bench/tune/ncu_forward.py ${NCU_FFN:-2048 3420 5632 8192} --dirty-mib 256 \
    > "$OUT/extra/ncu-forward-dirty.txt" 2>&1
  echo "   exit status $?"
  grep -E "^  [a-z_]|Duration|gpu__time_duration|DRAM Throughput|Registers Per|Block Size|Grid Size|profiled" \
    "$OUT/extra/ncu-forward.txt" | cut -c1-150 | head -120
  grep -E "^  [a-z_]|gpu__time|dram__bytes" "$OUT/extra/ncu-forward-dirty.txt" | cut -c1-150 | head -120
  mkdir -p "$OUT/extra/codegen"
  find "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR" -type f \( -name "*.py" -o -name "*.ptx" -o -name "*.ttgir" -o -name "*.json" \) \
    | while read -r f; do cp "$f" "$OUT/extra/codegen/$(echo "${f#/tmp/}" | tr / _)"; done
  echo "   codegen files: $(ls "$OUT/extra/codegen" | wc -l)"
  unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR
fi
if want mlpbench; then
  # the MLP block (issue tables): MLP_ARGS, e.g. "--mode fwd_bwd --rounds 3 --shape 8192,4096,8192".
  # quack's autotuning (--quack-tuned) is kept on disk (QUACK_CACHE_AUTOTUNING) with its compiled
  # kernels, so a call that only tunes (e.g. MLP_ARGS="--providers quack --quack-tuned --rounds 1")
  # leaves the next call on the same warm machine the tuned configurations, at no tuning time.
  # Writes mlp.log and mlp.tar.gz (the records, table.txt, summary.json).
  step "the MLP block and the GEMM against their peers (python -m fastglu.bench.mlp $MLP_ARGS)"
  rm -rf /tmp/mlp
  QUACK_CACHE_AUTOTUNING=1 QUACK_COMPILE_WORKERS=${QUACK_COMPILE_WORKERS:-16} \
    timeout "${MLP_TIMEOUT:-400}" python3 -m fastglu.bench.mlp --out /tmp/mlp ${MLP_ARGS:-} 2>&1 \
    | grep -v Warning | tee "$OUT/mlp.log" | tail -60
  [ -d /tmp/mlp ] && tar -czf "$OUT/mlp.tar.gz" -C /tmp mlp
fi
if want llama; then
  step "examples/llama on the GPU (bf16)"
  OUT="$OUT/extra" bash scripts/device_llama.sh 2>&1 | tail -8
fi

if want tune; then
  step "launch-configuration tuning (bench/tune/tune_swiglu.cu)"
  nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Iinclude -Isrc bench/tune/tune_swiglu.cu src/common.c \
    -o build-device/tune_swiglu > /dev/null 2>&1 && build-device/tune_swiglu 8192 1024 1408 3420 5632 8192 32768 2>&1 | tee "$OUT/tune.log"
fi

if want host; then
  step "host time per call and peak memory (bench/host_memory.py)"
  python3 bench/host_memory.py --out "$OUT/host_memory.json" 2>&1 | grep -v Warning | tee "$OUT/host_memory.txt"
fi

if want sweep; then
  # The 13-width sweep that README.md, docs/benchmark.md and PERF_NOTES cite: every mode and provider
  # in one process, then three more rounds of $ROUND_MODES (default forward and backward, the
  # seed's mode) with the providers in other orders (each round a process of its own), the report
  # (plots, cells.md, rounds.md) and the variants beside Megatron-Core (docs/variants.md's table);
  # records and report in extra/sweep/.
  step "the 13-width sweep in rounds, and the variants beside Megatron-Core"
  FFN="1024 1408 2048 3420 3584 4096 5632 8192 11008 14336 16384 28672 32768"
  S=$OUT/extra/sweep
  timeout "${BENCH_TIMEOUT:-480}" python3 -m fastglu.bench --ffn $FFN --out "$S/records" 2>&1 \
    | grep -v Warning > "$S.log"; echo "round 1 (every mode) rc ${PIPESTATUS[0]}"
  orders=("liger megatron compile torch fastglu" "torch fastglu liger compile megatron"
          "compile liger fastglu megatron torch")
  for i in 0 1 2; do
    timeout "${BENCH_TIMEOUT:-480}" python3 -m fastglu.bench --ffn $FFN --modes ${ROUND_MODES:-forward backward} \
      --providers ${orders[$i]} --out "$S/rounds/r$((i + 2))" 2>&1 | grep -v Warning >> "$S.log"
    echo "round $((i + 2)) (${orders[$i]}) rc ${PIPESTATUS[0]}"
  done
  python3 -m fastglu.bench.report "$S/records/summary.json" --out "$S/report" \
    --rounds "$S"/rounds/r*/summary.json 2>&1 | tail -3
  python3 -m fastglu.bench.variants --out "$S/variants" 2>&1 | tail -20
fi
if want bench; then
  step "benchmark (all providers, one process)"
  # bounded, so that the records written so far are packed even if the sweep runs long
  timeout "${BENCH_TIMEOUT:-480}" python3 -m fastglu.bench --out "$OUT/records" "$@" 2>&1 | tee "$OUT/bench.log"
  tar -C "$OUT" -czf "$OUT/records.tar.gz" records && rm -rf "$OUT/records"
fi
if [ -n "$(ls -A "$OUT/extra")" ]; then tar -C "$OUT" -czf "$OUT/extra.tar.gz" extra; fi
rm -rf "$OUT/extra"
# At most 8 files come back: the host-time table travels inside the records tarball when there is one.
if [ -f "$OUT/host_memory.txt" ] && [ -f "$OUT/records.tar.gz" ]; then
  cat "$OUT/host_memory.txt" >> "$OUT/bench.log" && rm "$OUT/host_memory.txt"
fi
ls -la "$OUT"
