"""Fresh random inputs every run, repeatable on demand.

Each test starts from torch's generators (CPU and CUDA) and Python's ``random`` seeded with the
session's seed mixed with the test's id, so a test draws the same inputs alone, in any order or
under ``-k``, and different inputs in every new session. The session's seed is FASTGLU_TEST_SEED
when set (the C tests read the same variable), else drawn from the OS; it is printed in pytest's
header and again in its summary (which ``-q`` keeps), so a failure can be repeated with
``FASTGLU_TEST_SEED=<seed> pytest ...``. A test that seeds a generator itself keeps its own inputs.
"""

import os
import random
import zlib

import pytest
import torch


def _session_seed() -> int:
    env = os.environ.get("FASTGLU_TEST_SEED")
    if env:
        try:
            return int(env, 0) & 0xFFFFFFFF
        except ValueError:
            raise pytest.UsageError(f"FASTGLU_TEST_SEED must be an integer, got {env!r}") from None
    return int.from_bytes(os.urandom(4), "little")


SEED = _session_seed()


def pytest_report_header(config):
    return f"fastglu: test inputs from FASTGLU_TEST_SEED={SEED}"


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(
        f"fastglu: test inputs from FASTGLU_TEST_SEED={SEED} (set it to repeat them)"
    )


@pytest.fixture(autouse=True)
def _seed_generators(request):
    seed = (SEED ^ zlib.crc32(request.node.nodeid.encode())) & 0xFFFFFFFF
    random.seed(seed)
    torch.manual_seed(seed)  # every device's default generator
    yield
