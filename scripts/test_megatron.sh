#!/usr/bin/env bash
# The Megatron-Core adapter's tests (tests/python/test_megatron_adapter.py) against the oldest and the
# newest release of the supported range (fastglu.megatron.SUPPORTED, pyproject.toml's megatron extra),
# each installed on its own into build/megatron/<version> with --no-deps: the modules the tests use
# need only torch and triton, which is installed beside them when missing. From 0.17 on megatron-core's
# wheels say CPython >= 3.12; the pure-Python modules used here import on 3.11 as well, hence
# --ignore-requires-python. FASTGLU_EXPECT_MEGATRON makes a failed import fail instead of skip.
#   bash scripts/test_megatron.sh [pytest args]     (MEGATRON_VERSIONS="0.16.0 0.19.2" by default)
source "$(dirname "$0")/env.sh"
[ -d build/py/fastglu ] || build_python_package
export PYTHONPATH="$PWD/build/py"
pip_target() { "$PY" -m pip install -q --no-deps --target "$@" 2>&1 | grep -v "^WARNING" || true; }

if ! need triton; then
  [ -d build/megatron/triton/triton ] || pip_target build/megatron/triton triton==3.9.0
  PYTHONPATH="$PYTHONPATH:$PWD/build/megatron/triton"
fi
for v in ${MEGATRON_VERSIONS:-0.16.0 0.19.2}; do
  dir=build/megatron/$v
  [ -d "$dir/megatron" ] || pip_target "$dir" --ignore-requires-python --python-version 3.12 \
    --only-binary=:all: "megatron-core==$v"
  echo "== the Megatron-Core adapter against megatron-core $v"
  FASTGLU_EXPECT_MEGATRON=$v PYTHONPATH="$PYTHONPATH:$PWD/$dir" \
    "$PY" -m pytest -q -rs -p no:cacheprovider tests/python/test_megatron_adapter.py \
    tests/python/test_megatron_mlp.py "$@"
done
