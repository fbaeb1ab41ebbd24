#!/usr/bin/env bash
# ab_swiglu.sh — A/B of fastglu_swiglu_{fwd,bwd}_cuda between an older libfastglu and the working
# tree's, in one process (bench/tune/ab_swiglu.c: both libraries dlopen'ed, every (mode, F) timed
# on both in rotating rounds, their bits compared). BASE is a git revision (where .git exists) or
# a folder with that revision's sources (e.g. made beside the checkout by
# `git archive <rev> | tar -x -C ab-base`, so that it travels to the GPU machine untracked).
#
#   bash scripts/ab_swiglu.sh BASE [rounds] [iters] [F ...]     (default 5 rounds x 30 launches,
#                                                                the 13 widths of the sweep)
# Needs nvcc and a GPU; builds the two libraries under /tmp (the CUDA runtime shared, so that both
# and the timing program use one).
set -euo pipefail
BASE=${1:?usage: scripts/ab_swiglu.sh BASE [rounds] [iters] [F ...]}
shift
cd "$(dirname "$0")/.."
cuda=$(dirname "$(dirname "$(command -v nvcc)")")
src=/tmp/ab-swiglu-base
rm -rf "$src" && mkdir -p "$src"
if [ -d "$BASE" ]; then
  cp -r "$BASE"/. "$src"/
else
  git archive "$BASE" | tar -x -C "$src"
fi
build() { # $1 source folder, $2 build folder
  cmake -S "$1" -B "$2" -G Ninja -DFASTGLU_CUDA=ON -DFASTGLU_CUDART=Shared > "$2.log" 2>&1 \
    && cmake --build "$2" --target fastglu >> "$2.log" 2>&1 || { tail -30 "$2.log"; exit 1; }
}
build "$src" /tmp/ab-swiglu-build-base &
build "$PWD" /tmp/ab-swiglu-build-cur &
wait
cc -O2 -std=c11 bench/tune/ab_swiglu.c -Iinclude -I"$cuda/include" -L"$cuda/lib64" -lcudart -ldl \
  -o /tmp/ab-swiglu-bin
LD_LIBRARY_PATH="$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" /tmp/ab-swiglu-bin \
  /tmp/ab-swiglu-build-base/libfastglu.so /tmp/ab-swiglu-build-cur/libfastglu.so "$@"
