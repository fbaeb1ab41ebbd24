# env.sh — sourced by scripts/test.sh and scripts/bench.sh: installs what they need when it is
# missing, and builds the Python package (libfastglu + its binding) into build/py.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
case "${FASTGLU_CUDA:-}" in
  "" | OFF | AUTO | ON) ;;
  *) echo "FASTGLU_CUDA=${FASTGLU_CUDA}: use OFF, AUTO or ON (unset: AUTO)" >&2; exit 2 ;;
esac

need() { (cd / && "$PY" -c "import $1" 2>/dev/null); }  # from /, so that ./cmake is not taken for a module
install() { echo "-- installing $* (missing)"; "$PY" -m pip install -q "$@"; }
# torch 2.13.0 when none is installed (a GPU machine brings its own)
need torch || install torch==2.13.0 || install torch
for mod in pytest numpy scikit_build_core; do
  need "$mod" || install "$(echo "$mod" | tr _ -)"
done
for tool in cmake ninja; do
  command -v "$tool" > /dev/null || install "$tool"
done

# Build the wheel (build/wheel) and install it into build/py (not into site-packages), then use it
# from there. FASTGLU_CUDA=OFF: the CPU backend alone, also where nvcc is found (no CUDA compile).
build_python_package() {
  rm -rf build/py build/wheel
  echo "-- building the wheel (libfastglu and the Python package) and installing it into build/py"
  local cuda_opt=()
  [ -n "${FASTGLU_CUDA:-}" ] && cuda_opt=(-C "cmake.define.FASTGLU_CUDA=${FASTGLU_CUDA}")
  # a build folder kept between runs (one per FASTGLU_CUDA setting): a second build recompiles
  # only what changed
  "$PY" -m pip wheel -q --no-build-isolation --no-deps ${cuda_opt[@]+"${cuda_opt[@]}"} \
    -C build-dir="build/skbuild-${FASTGLU_CUDA:-auto}" -w build/wheel . >/dev/null
  "$PY" -m pip install -q --no-deps --target build/py build/wheel/fastglu-*.whl >/dev/null
  export PYTHONPATH="$PWD/build/py${PYTHONPATH:+:$PYTHONPATH}"
  local why="CMake found no CUDA compiler"
  [ "${FASTGLU_CUDA:-}" = OFF ] && why="FASTGLU_CUDA=OFF"
  "$PY" -c "import fastglu as f, sys; print('-- fastglu', f.__version__, 'built with', 'CUDA;' if f.cuda_built() else f'the CPU backend only ({sys.argv[1]});', 'GPU usable:', f.cuda_available())" "$why"
}
