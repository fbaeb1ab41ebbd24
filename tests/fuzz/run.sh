#!/usr/bin/env bash
# run.sh — fuzz the C API's CPU entry points under AddressSanitizer and UBSan for a bounded time.
#
#   bash tests/fuzz/run.sh [SECONDS]      (default 60)
#
# With clang and libFuzzer (Debian: clang, libclang-rt-14-dev): coverage-guided, corpus kept in
# build/fuzz/corpus. Without them: the same harness driven by random inputs, built with cc.
# Exits non-zero on any crash, sanitizer report or failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
out=build/fuzz
mkdir -p "$out/corpus"
srcs="tests/fuzz/fuzz_swiglu.c src/common.c src/swiglu_cpu.c src/cuda_stub.c"
flags="-std=c11 -O1 -g -Iinclude -Isrc -fsanitize=address,undefined -fno-sanitize-recover=all"
if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char*d,long n){return 0;}' \
     | clang -x c - -fsanitize=fuzzer -o "$out/probe" 2>/dev/null; then
  echo "== libFuzzer + ASan/UBSan, $secs s"
  clang $flags -fsanitize=fuzzer $srcs -lm -o "$out/fuzz_swiglu"
  "$out/fuzz_swiglu" -max_total_time="$secs" -max_len=4096 -print_final_stats=1 "$out/corpus" 2>&1 | tail -15
else
  echo "== no clang with libFuzzer here: the harness on random inputs (cc + ASan/UBSan), $secs s"
  cc $flags -DFASTGLU_FUZZ_STANDALONE $srcs -lm -o "$out/fuzz_swiglu_standalone"
  "$out/fuzz_swiglu_standalone" "$secs"
fi
