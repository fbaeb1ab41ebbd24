#!/usr/bin/env bash
# Installs a built wheel (scripts/build_wheel.sh) with no compiler in reach and tests it, from outside
# the source tree, so that the installed package is the one tested.
#
#   bash scripts/test_wheel.sh dist/fastglu-*.whl           # CI: a fresh venv with a CPU torch
#   bash scripts/test_wheel.sh --system dist/fastglu-*.whl  # a GPU machine: its python3's torch
#
# Default: a fresh venv; torch 2.13.0 (FASTGLU_WHEEL_TORCH overrides the requirement: a machine that
# would download the large CUDA build can pass "torch --index-url https://download.pytorch.org/whl/cpu");
# the wheel and its dependencies, binaries only; then, before numpy is there, `import fastglu` must
# print nothing and `python -m fastglu.bench --help` must work; then pytest, numpy and the CPU tests.
# --system: python3's own torch (with CUDA) and packages, the wheel installed beside them with
# --no-deps and nothing from the network (whether its dependencies are all there is reported); the
# whole Python test suite runs (its GPU cases included) and the CUDA backend must be usable where
# torch sees a GPU.
set -euo pipefail
mode=venv
if [ "${1:-}" = "--system" ]; then mode=system; shift; fi
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 [--system] WHEEL" >&2; exit 2; }
wheel=$(realpath "$1")
case $(basename "$wheel") in
  fastglu-*-cp310-abi3-manylinux_2_28_x86_64.whl) ;;
  *) echo "$(basename "$wheel") is not tagged cp310-abi3-manylinux_2_28_x86_64 (scripts/build_wheel.sh)" >&2; exit 1 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/fastglu-wheel-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"  # nothing of the source tree on sys.path

# No CUDA compiler in reach: every PATH entry that holds an nvcc dropped, the CUDA variables unset
# (and pip below installs binaries only).
unset CUDACXX CUDA_HOME CUDA_PATH CUDA_ROOT
keep=()
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do [ -x "$d/nvcc" ] || keep+=("$d"); done
PATH=$(IFS=:; printf '%s' "${keep[*]}")
export PATH
if command -v nvcc > /dev/null; then echo "nvcc is still on PATH: $(command -v nvcc)" >&2; exit 1; fi

if [ "$mode" = venv ]; then
  python3 -m venv venv
  PY=$PWD/venv/bin/python
  echo "-- installing ${FASTGLU_WHEEL_TORCH:-torch==2.13.0} and $(basename "$wheel") into a fresh venv"
  # shellcheck disable=SC2086  # the requirement may carry pip options
  "$PY" -m pip install -q ${FASTGLU_WHEEL_TORCH:-torch==2.13.0}
  # Binaries only: pip may build nothing, so no compiler is needed.
  "$PY" -m pip install -q --only-binary=:all: "$wheel"
else
  # Into a directory of its own on PYTHONPATH, over python3's packages (a venv over them would not see
  # them where python3 is itself a venv's, as the GPU machine's torch is).
  PY=python3
  echo "-- installing $(basename "$wheel") into $work/site, over $(python3 -c 'import sys; print(sys.prefix)')"
  if python3 -m pip install -q --dry-run --no-index --only-binary=:all: "$wheel" > /dev/null 2>&1; then
    echo "-- its dependencies are all installed here"
  else
    echo "-- note: not all of its dependencies are installed here (pip install --dry-run --no-index failed)"
  fi
  python3 -m pip install -q --no-index --no-deps --target "$work/site" "$wheel"
  export PYTHONPATH="$work/site"
fi

echo "-- the installed package"
"$PY" - "$mode" "$work" <<'EOF'
import os, sys
import fastglu, torch
where = os.path.dirname(fastglu.__file__)
print(f"fastglu {fastglu.__version__} from {where}; torch {torch.__version__}; CUDA built: "
      f"{fastglu.cuda_built()}, usable: {fastglu.cuda_available()}")
assert where.startswith(sys.argv[2]), f"fastglu imported from {where}, not from the install in {sys.argv[2]}"
assert fastglu.cuda_built(), "the wheel has no CUDA backend"
if sys.argv[1] == "system" and torch.cuda.is_available():
    assert fastglu.cuda_available(), "torch sees a GPU but fastglu's CUDA backend is not usable"
EOF

tests=(test_swiglu.py test_variants.py test_no_numpy.py)
if [ "$mode" = venv ]; then
  if "$PY" -c "import numpy" 2> /dev/null; then
    echo "-- numpy is installed: the import and --help checks without it are left to test_no_numpy.py"
  else
    echo "-- without numpy: import fastglu prints nothing; python -m fastglu.bench --help works"
    err=$("$PY" -c "import fastglu" 2>&1 > /dev/null)
    [ -z "$err" ] || { echo "import fastglu printed: $err" >&2; exit 1; }
    "$PY" -m fastglu.bench --help > /dev/null
  fi
  "$PY" -m pip install -q pytest numpy
else
  tests=($(cd "$root/tests/python" && ls test_*.py))  # every test file: the GPU cases run here
fi

echo "-- pytest against the installed wheel: ${tests[*]}"
# FASTGLU_PYTEST_ARGS: more pytest options (e.g. -k cuda: the GPU cases alone, where CI runs the rest).
# shellcheck disable=SC2086
"$PY" -m pytest -q -rs -p no:cacheprovider ${FASTGLU_PYTEST_ARGS:-} "${tests[@]/#/$root/tests/python/}"
