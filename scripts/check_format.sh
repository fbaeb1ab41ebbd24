#!/usr/bin/env bash
# check_format.sh — the formatters' verdict on the tree, as CI runs it: clang-format (.clang-format)
# over the C and CUDA C sources, ruff's formatter and linter (pyproject.toml's [tool.ruff]) over the
# Python. Installs the pinned versions with pip if missing. --fix rewrites the files instead.
#
#   bash scripts/check_format.sh          # exit status 1 and the offending files if any differ
#   bash scripts/check_format.sh --fix    # format in place
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT_VERSION=21.1.8
RUFF_VERSION=0.17.6
PY=${PYTHON:-python3}
if ! command -v clang-format >/dev/null || [[ "$(clang-format --version)" != *" $CLANG_FORMAT_VERSION"* ]]; then
  "$PY" -m pip install -q "clang-format==$CLANG_FORMAT_VERSION"
fi
if ! "$PY" -m ruff --version 2>/dev/null | grep -q " $RUFF_VERSION"; then
  "$PY" -m pip install -q "ruff==$RUFF_VERSION"
fi
# tracked C / CUDA C sources; the emulation's stand-ins for the CUDA headers are excluded
mapfile -t c_files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' | grep -v '^tests/emu/shim/')
py_paths=(python tests bench scripts examples)
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${c_files[@]}"
  "$PY" -m ruff format -q "${py_paths[@]}"
  "$PY" -m ruff check -q --fix "${py_paths[@]}"
  exit 0
fi
status=0
clang-format --dry-run --Werror "${c_files[@]}" || { echo "C sources differ from .clang-format (bash scripts/check_format.sh --fix)"; status=1; }
"$PY" -m ruff format --check "${py_paths[@]}" || status=1
"$PY" -m ruff check "${py_paths[@]}" || status=1
exit $status
