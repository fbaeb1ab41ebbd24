#!/usr/bin/env bash
# Runs all tests: the C tests under CTest (the CUDA test skips without a GPU) and the Python tests
# under pytest (GPU tests skip without one). Exits non-zero on any failure.
source "$(dirname "$0")/env.sh"

echo "== C library and C tests (CMake + CTest)"
cmake -S . -B build/c -G Ninja >/dev/null
cmake --build build/c 2>&1 | grep -vE "ptxas info|bytes stack frame|^\[" || true
(cd build/c && ctest --output-on-failure)

echo "== Python package and tests (pytest)"
build_python_package
"$PY" -m pytest -q -rs tests/python "$@"
