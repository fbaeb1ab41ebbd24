"""The Python snippets of the README and of the docs pages that teach the API run as written (on the
CPU when there is no GPU), and the wheel the test command built holds what the README says pip
installs."""

import re
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


PAGES = ["README.md", "docs/variants.md", "docs/integrations.md", "docs/mlp.md"]


def python_blocks(page):
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)


@pytest.mark.parametrize("page", PAGES)
def test_page_has_python_snippets(page):
    assert python_blocks(page)


SNIPPETS = [(page, i) for page in PAGES for i in range(len(python_blocks(page)))]


@pytest.mark.parametrize("page, index", SNIPPETS)
def test_readme_python_snippet_runs(page, index):
    exec(compile(python_blocks(page)[index], f"{page} python block {index}", "exec"), {})


def test_quick_start_prints_what_the_readme_shows(capsys):
    """The quick start prints a line of the form the README shows, with an error below 1e-5."""
    readme = (ROOT / "README.md").read_text()
    shown = re.search(r"```text\n(.*?)\n```", readme, re.S).group(1)
    exec(compile(python_blocks("README.md")[0], "README.md quick start", "exec"), {})
    printed = capsys.readouterr().out.strip()
    pattern = r"(cpu|cuda) \(4096, 1024\) relative error (\d(?:\.\d+)?e[-+]\d+)"
    assert re.fullmatch(pattern, shown), shown
    m = re.fullmatch(pattern, printed)
    assert m, printed
    assert float(m.group(2)) < 1e-5, printed


def test_wheel_contents():
    wheels = sorted((ROOT / "build" / "wheel").glob("fastglu-*.whl"))
    if not wheels:
        pytest.skip("no wheel in build/wheel (built by scripts/test.sh)")
    names = zipfile.ZipFile(wheels[-1]).namelist()
    for want in (
        r"fastglu/__init__\.py",
        r"fastglu/_C\..*\.so",
        r"fastglu/libfastglu\.so",
        r"fastglu/include/fastglu\.h",
        r"fastglu/bench/__main__\.py",
    ):
        assert any(re.fullmatch(want, n) for n in names), (want, names)
