"""The README's Python snippets run as written (on the CPU when there is no GPU), and the wheel the
test command built holds what the README says pip installs."""

import re
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def python_blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_python_snippets():
    assert python_blocks()


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_snippet_runs(index):
    exec(compile(python_blocks()[index], f"README.md python block {index}", "exec"), {})


def test_wheel_contents():
    wheels = sorted((ROOT / "build" / "wheel").glob("fastglu-*.whl"))
    if not wheels:
        pytest.skip("no wheel in build/wheel (built by scripts/test.sh)")
    names = zipfile.ZipFile(wheels[-1]).namelist()
    for want in (r"fastglu/__init__\.py", r"fastglu/_C\..*\.so", r"fastglu/libfastglu\.so", r"fastglu/include/fastglu\.h",
                 r"fastglu/bench/__main__\.py"):
        assert any(re.fullmatch(want, n) for n in names), (want, names)
