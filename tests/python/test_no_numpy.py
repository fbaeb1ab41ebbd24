"""fastglu without numpy, which it does not depend on: ``import fastglu`` prints nothing (torch warns
"Failed to initialize NumPy" on import when numpy is absent) and ``python -m fastglu.bench`` runs
(its CPU timer takes medians and quantiles from the statistics module).

Each check runs in a child interpreter that hides numpy with ``sys.modules["numpy"] = None``, which
makes every ``import numpy`` fail as when it is not installed. The child imports fastglu from where
this process does."""

import json
import os
import subprocess
import sys

import pytest
import torch

import fastglu

# The directory that holds the fastglu this process imported, first on the child's path.
SITE = os.path.dirname(os.path.dirname(os.path.abspath(fastglu.__file__)))

HIDE_NUMPY = "import sys; sys.modules['numpy'] = None\n"


def run_without_numpy(code, cwd):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([SITE, *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    return subprocess.run(
        [sys.executable, "-c", HIDE_NUMPY + code],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env=env,
    )


def run_bench(args, cwd):
    code = (
        "import runpy\n"
        f"sys.argv = ['fastglu.bench', *{args!r}]\n"
        "runpy.run_module('fastglu.bench', run_name='__main__', alter_sys=True)\n"
    )
    return run_without_numpy(code, cwd)


def test_numpy_is_hidden(tmp_path):
    r = run_without_numpy(
        "try:\n    import numpy\nexcept ImportError:\n    print('hidden')", tmp_path
    )
    assert r.stdout.strip() == "hidden", r


def test_import_fastglu_is_silent(tmp_path):
    r = run_without_numpy("import fastglu\nprint(fastglu.__version__)", tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", f"import fastglu printed to stderr without numpy:\n{r.stderr}"


def test_bench_help_without_numpy(tmp_path):
    r = run_bench(["--help"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "usage: python -m fastglu.bench" in r.stdout


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="the CPU backend's timer (a GPU times with triton)"
)
def test_bench_runs_without_numpy(tmp_path):
    out = tmp_path / "out"
    r = run_bench(
        [
            "--quick",
            "--providers",
            "fastglu",
            "--modes",
            "forward",
            "--seq",
            "4",
            "--batch",
            "2",
            "--ffn",
            "64",
            "--dtype",
            "fp32",
            "--out",
            str(out),
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary, summary
