#!/usr/bin/env bash
# Runs all tests: the C tests under CTest (the CUDA test skips without a GPU), a bounded fuzzing run
# of the C API (FASTGLU_FUZZ_SECONDS, default 30), and the Python tests under pytest (GPU tests
# skip without one). Exits non-zero on any failure.
source "$(dirname "$0")/env.sh"

# The C tests run twice: as configured here (CUDA backend when nvcc is found) and CPU-only, so that
# the build a machine without nvcc gets is tested too. FASTGLU_CUDA=OFF: once, CPU-only, with no CUDA
# compile anywhere (the Python package too), for a machine without a GPU.
configs=("build/c" "build/c-cpu-only -DFASTGLU_CUDA=OFF")
[ "${FASTGLU_CUDA:-}" = OFF ] && configs=("build/c -DFASTGLU_CUDA=OFF")
for cfg in "${configs[@]}"; do
  read -r dir opts <<< "$cfg"
  echo "== C library and C tests (CMake + CTest): $dir"
  cmake -S . -B "$dir" $opts -G Ninja >/dev/null
  cmake --build "$dir" > "$dir/build.log" 2>&1 || { tail -50 "$dir/build.log"; exit 1; }
  (cd "$dir" && ctest --output-on-failure -j 2)
done

echo "== C users: cmake --install, then examples/c through find_package(fastglu) and through pkg-config"
rm -rf build/example build/prefix && cmake --install build/c --prefix build/prefix > /dev/null
cmake -S examples/c -B build/example -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/prefix" > /dev/null
cmake --build build/example > /dev/null
build/example/swiglu_example
if command -v pkg-config > /dev/null; then
  cc examples/c/swiglu_example.c $(PKG_CONFIG_PATH=build/prefix/lib/pkgconfig pkg-config --cflags --libs fastglu) \
    -lm -Wl,-rpath,"$PWD/build/prefix/lib" -o build/example/swiglu_example_pc
  build/example/swiglu_example_pc
fi

echo "== fuzzing the C API (CPU backend, ASan + UBSan), ${FASTGLU_FUZZ_SECONDS:-30} s"
bash tests/fuzz/run.sh "${FASTGLU_FUZZ_SECONDS:-30}"

echo "== Python package and tests (pytest)"
build_python_package
"$PY" -m pytest -q -rs tests/python "$@"
echo "== every stage passed (the C tests, the C example, fuzzing, pytest)"
