#!/usr/bin/env bash
# run.sh — fuzz the C API's CPU entry points under AddressSanitizer and UBSan for a bounded time:
# tests/fuzz/fuzz_swiglu.c (fastglu_swiglu_*_cpu) and tests/fuzz/fuzz_glu.c (fastglu_glu_*_cpu),
# each for half of it.
#
#   bash tests/fuzz/run.sh [SECONDS]      (default 60)
#
# With clang and libFuzzer (Debian: clang, libclang-rt-14-dev): coverage-guided, corpora kept in
# build/fuzz/corpus (swiglu) and build/fuzz/corpus_glu. Without them: the same harnesses driven by
# random inputs, built with cc. Exits non-zero on any crash, sanitizer report or failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
half=$(( secs / 2 > 0 ? secs / 2 : 1 ))
out=build/fuzz
mkdir -p "$out/corpus" "$out/corpus_glu"
lib="src/common.c src/swiglu.c src/glu_common.c src/glu_cpu.c src/cuda_stub.c"
flags="-std=c11 -O1 -g -Iinclude -Isrc -fsanitize=address,undefined -fno-sanitize-recover=all"
if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char*d,long n){return 0;}' \
     | clang -x c - -fsanitize=fuzzer -o "$out/probe" 2>/dev/null; then
  echo "== libFuzzer + ASan/UBSan, $half s for each of fuzz_swiglu and fuzz_glu"
  clang $flags -fsanitize=fuzzer tests/fuzz/fuzz_swiglu.c $lib -lm -o "$out/fuzz_swiglu"
  clang $flags -fsanitize=fuzzer tests/fuzz/fuzz_glu.c $lib -lm -o "$out/fuzz_glu"
  "$out/fuzz_swiglu" -max_total_time="$half" -max_len=4096 -print_final_stats=1 "$out/corpus" 2>&1 | tail -15
  "$out/fuzz_glu" -max_total_time="$half" -max_len=16384 -print_final_stats=1 "$out/corpus_glu" 2>&1 | tail -15
else
  echo "== no clang with libFuzzer here: the harnesses on random inputs (cc + ASan/UBSan), $half s each"
  cc $flags -DFASTGLU_FUZZ_STANDALONE tests/fuzz/fuzz_swiglu.c $lib -lm -o "$out/fuzz_swiglu_standalone"
  cc $flags -DFASTGLU_FUZZ_STANDALONE tests/fuzz/fuzz_glu.c $lib -lm -o "$out/fuzz_glu_standalone"
  "$out/fuzz_swiglu_standalone" "$half"
  "$out/fuzz_glu_standalone" "$half"
fi
