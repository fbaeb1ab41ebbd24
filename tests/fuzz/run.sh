#!/usr/bin/env bash
# run.sh — fuzz the C API's CPU entry points under AddressSanitizer and UBSan for a bounded time:
# tests/fuzz/fuzz_glu.c (fastglu_glu_*_cpu, and fastglu_swiglu_*_cpu as the family's SiLU case;
# half the time), tests/fuzz/fuzz_quant_fp8.c (fastglu_quantize_fp8_cpu; a sixth),
# tests/fuzz/fuzz_fp8_store.c (fastglu_glu_fwd_fp8_store_blockwise_cpu against its two calls; a
# sixth) and tests/fuzz/fuzz_glu_fp8_saved.c (fastglu_glu_bwd_fp8_saved_blockwise_cpu against the
# two passes it replaces; the rest).
#
#   bash tests/fuzz/run.sh [SECONDS]      (default 60, the harnesses together)
#
# With clang and libFuzzer (Debian: clang, libclang-rt-14-dev): coverage-guided, the corpora kept in
# build/fuzz/corpus_<harness>. Without them: the same harnesses driven by random inputs, built
# with cc. Exits non-zero on any crash, sanitizer report or failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
out=build/fuzz
mkdir -p "$out"
common="src/common.c src/glu_common.c src/cuda_stub.c"
declare -A libs=(
  [glu]="$common src/swiglu.c src/glu_cpu.c"
  [quant_fp8]="$common src/glu_fp8_common.c src/quant_fp8_cpu.c src/glu_fp8_cpu.c src/glu_cpu.c"
  [fp8_store]="$common src/glu_fp8_common.c src/quant_fp8_cpu.c src/glu_fp8_cpu.c src/glu_cpu.c"
  [glu_fp8_saved]="$common src/glu_fp8_common.c src/glu_fp8_cpu.c src/glu_cpu.c"
)
declare -A share=([glu]=$((secs / 2)) [quant_fp8]=$((secs / 6)) [fp8_store]=$((secs / 6))
  [glu_fp8_saved]=$((secs - secs / 2 - 2 * (secs / 6))))
flags="-std=c11 -O1 -g -Iinclude -Isrc -fsanitize=address,undefined -fno-sanitize-recover=all"
if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char*d,long n){return 0;}' \
     | clang -x c - -fsanitize=fuzzer -o "$out/probe" 2>/dev/null; then
  for h in glu quant_fp8 fp8_store glu_fp8_saved; do
    echo "== libFuzzer + ASan/UBSan, ${share[$h]} s of fuzz_$h"
    mkdir -p "$out/corpus_$h"
    clang $flags -fsanitize=fuzzer "tests/fuzz/fuzz_$h.c" ${libs[$h]} -lm -o "$out/fuzz_$h"
    "$out/fuzz_$h" -max_total_time="${share[$h]}" -max_len=16384 -print_final_stats=1 \
      "$out/corpus_$h" 2>&1 | tail -15
  done
else
  for h in glu quant_fp8 fp8_store glu_fp8_saved; do
    echo "== no clang with libFuzzer here: fuzz_$h on random inputs (cc + ASan/UBSan)," \
      "${share[$h]} s"
    cc $flags -DFASTGLU_FUZZ_STANDALONE "tests/fuzz/fuzz_$h.c" ${libs[$h]} -lm \
      -o "$out/fuzz_${h}_standalone"
    "$out/fuzz_${h}_standalone" "${share[$h]}"
  done
fi
