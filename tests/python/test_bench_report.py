"""Tests of fastglu.bench.report's tables (no GPU, no matplotlib needed)."""

import json
import random

from fastglu.bench import report


def summary(tmp_path, name, ms):
    """A summary.json with forward rows; ms = {(provider, F): median ms}."""
    rows = [
        {
            "provider": p,
            "mode": "forward",
            "ffn": F,
            "seq": 2,
            "batch": 1,
            "dtype": "bf16",
            "ms": [m, m * 0.99, m * 1.01],
            "floor_ms": 1.0,
            "ratio_to_floor": m,
            "ratio_to_fastglu": None,
        }
        for (p, F), m in ms.items()
    ]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"gpu": "test", "rows": rows, "rep_ms": 100, "copy_TBps": 4.0}))
    return path


def test_rounds_table_counts_wins_and_takes_medians_over_rounds(tmp_path):
    rnd = random.Random()
    a, b = rnd.uniform(1.0, 2.0), rnd.uniform(1.0, 2.0)
    c = a * rnd.uniform(
        1.1, 2.0
    )  # compile's round-3 time at F = 64: slower than fastglu's and liger's
    # F = 64: fastglu ahead in rounds 1 and 3, behind liger in round 2; median of rounds fastglu 1.0 x a
    # against liger's 1.01 x a. F = 128: compile ahead in every round.
    r1 = summary(
        tmp_path,
        "r1",
        {
            ("fastglu", 64): a,
            ("liger", 64): 1.01 * a,
            ("compile", 64): 1.5 * a,
            ("fastglu", 128): b,
            ("compile", 128): 0.99 * b,
        },
    )
    r2 = summary(
        tmp_path,
        "r2",
        {
            ("fastglu", 64): 1.02 * a,
            ("liger", 64): 1.01 * a,
            ("compile", 64): 1.5 * a,
            ("fastglu", 128): b,
            ("compile", 128): 0.98 * b,
        },
    )
    r3 = summary(
        tmp_path,
        "r3",
        {
            ("fastglu", 64): 0.99 * a,
            ("liger", 64): 1.03 * a,
            ("compile", 64): c,
            ("fastglu", 128): 1.01 * b,
            ("compile", 128): 0.97 * b,
        },
    )
    text = report.rounds_table([r1, r2, r3])
    rows = {
        int(line.split("|")[2]): [f.strip() for f in line.split("|")[1:-1]]
        for line in text.splitlines()
        if line.startswith("| forward")
    }
    assert set(rows) == {64, 128}
    assert rows[64][4] == "2 of 3" and rows[128][4] == "0 of 3"
    assert rows[64][5] == f"{a:.4f}" and rows[64][6] == f"{1.01 * a:.4f} liger"
    assert rows[64][7] == f"{a / (1.01 * a):.4f}"
    assert rows[128][6] == f"{0.98 * b:.4f} compile"
    assert rows[128][2] == f"{b:.4f} {b:.4f} {1.01 * b:.4f}"


def test_rounds_table_skips_cells_missing_from_a_round(tmp_path):
    r1 = summary(
        tmp_path,
        "r1",
        {("fastglu", 64): 1.0, ("liger", 64): 1.1, ("fastglu", 256): 1.0, ("liger", 256): 0.9},
    )
    r2 = summary(tmp_path, "r2", {("fastglu", 64): 1.0, ("liger", 64): 1.2})
    text = report.rounds_table([r1, r2])
    assert "| forward | 64 |" in text and "| forward | 256 |" not in text


def test_rounds_table_skips_cells_without_a_peer_in_every_round(tmp_path):
    r1 = summary(tmp_path, "r1", {("fastglu", 64): 1.0, ("liger", 64): 1.1})
    r2 = summary(tmp_path, "r2", {("fastglu", 64): 1.0, ("compile", 64): 1.2})
    assert "| forward | 64 |" not in report.rounds_table([r1, r2])
