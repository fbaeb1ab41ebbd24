#!/usr/bin/env bash
# run.sh — fuzz the C API's CPU entry points under AddressSanitizer and UBSan for a bounded time:
# tests/fuzz/fuzz_glu.c (fastglu_glu_*_cpu, and fastglu_swiglu_*_cpu as the family's SiLU case).
#
#   bash tests/fuzz/run.sh [SECONDS]      (default 60)
#
# With clang and libFuzzer (Debian: clang, libclang-rt-14-dev): coverage-guided, the corpus kept in
# build/fuzz/corpus_glu. Without them: the same harness driven by random inputs, built with cc.
# Exits non-zero on any crash, sanitizer report or failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
out=build/fuzz
mkdir -p "$out/corpus_glu"
lib="src/common.c src/swiglu.c src/glu_common.c src/glu_cpu.c src/cuda_stub.c"
flags="-std=c11 -O1 -g -Iinclude -Isrc -fsanitize=address,undefined -fno-sanitize-recover=all"
if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char*d,long n){return 0;}' \
     | clang -x c - -fsanitize=fuzzer -o "$out/probe" 2>/dev/null; then
  echo "== libFuzzer + ASan/UBSan, $secs s of fuzz_glu"
  clang $flags -fsanitize=fuzzer tests/fuzz/fuzz_glu.c $lib -lm -o "$out/fuzz_glu"
  "$out/fuzz_glu" -max_total_time="$secs" -max_len=16384 -print_final_stats=1 "$out/corpus_glu" 2>&1 | tail -15
else
  echo "== no clang with libFuzzer here: the harness on random inputs (cc + ASan/UBSan), $secs s"
  cc $flags -DFASTGLU_FUZZ_STANDALONE tests/fuzz/fuzz_glu.c $lib -lm -o "$out/fuzz_glu_standalone"
  "$out/fuzz_glu_standalone" "$secs"
fi
