"""What the wheel declares and how it is tagged, read from the wheel the test command built
(build/wheel, scripts/test.sh): one abi3 wheel for CPython >= 3.10 (the binding uses the limited API),
the CUDA runtime as a dependency (the portable wheel links it dynamically), numpy only in the extras,
and the supported Megatron-Core range in the megatron extra, the same as fastglu.megatron.SUPPORTED."""

import re
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import fastglu.megatron as fm

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel():
    wheels = sorted((ROOT / "build" / "wheel").glob("fastglu-*.whl"))
    if not wheels:
        pytest.skip("no wheel in build/wheel (built by scripts/test.sh)")
    return zipfile.ZipFile(wheels[-1])


def dist_info(wheel, name):
    return wheel.read(
        next(n for n in wheel.namelist() if n.endswith(".dist-info/" + name))
    ).decode()


def test_one_abi3_wheel_for_cpython_3_10_on(wheel):
    tags = [
        line.split(": ", 1)[1]
        for line in dist_info(wheel, "WHEEL").splitlines()
        if line.startswith("Tag: ")
    ]
    assert tags and all(t.startswith("cp310-abi3-") for t in tags), tags
    assert "fastglu/_C.abi3.so" in wheel.namelist(), [n for n in wheel.namelist() if "_C" in n]
    assert Parser().parsestr(dist_info(wheel, "METADATA"))["Requires-Python"] == ">=3.10"


def test_declared_dependencies(wheel):
    requires = Parser().parsestr(dist_info(wheel, "METADATA")).get_all("Requires-Dist")
    base = [r for r in requires if "extra ==" not in r]
    assert any(r.startswith("torch") for r in base), base
    assert any(
        re.match(r"nvidia-cuda-runtime\s*(<14,\s*>=13\.0|>=13\.0,\s*<14)", r) for r in base
    ), base
    assert not any(r.startswith("numpy") for r in base), base
    bench = [r for r in requires if re.search(r"extra\s*==\s*['\"]bench['\"]", r)]
    assert any(r.startswith("numpy") for r in bench), bench
    megatron = [r for r in requires if re.search(r"extra\s*==\s*['\"]megatron['\"]", r)]
    (lo_major, lo_minor), (hi_major, hi_minor) = fm.SUPPORTED
    want = {f">={lo_major}.{lo_minor}", f"<{hi_major}.{hi_minor}"}
    assert len(megatron) == 1 and megatron[0].startswith("megatron-core"), megatron
    assert set(re.findall(r"[<>=]+[\d.]+", megatron[0])) == want, megatron
