"""Tests of bench/tune/sass_counts.py (the per-kernel SASS counts read in bench/PERF_NOTES.md)."""

import importlib.util
import os
import pathlib
import random

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "tune" / "sass_counts.py"
_spec = importlib.util.spec_from_file_location("sass_counts", _PATH)
sass_counts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass_counts)

# one line of each kind, as cuobjdump -sass prints them (address, instruction, encoding; then the
# encoding's second half on a line of its own)
KINDS = {
    "MUFU": "MUFU.EX2 R74, R74",
    "F2F_single_16bit": "F2F.BF16.F32 R120, R120",
    "F2FP_pack": "F2FP.BF16.F32.PACK_AB R76, R76, R75",
    "LDG_128": "@!P0 LDG.E.128 R16, desc[UR22][R6.64]",
    "STG_128": "STG.E.128 desc[UR22][R96.64], R72",
    "LDL_STL": "STL [R1], R3",
    "MNMX_pred": "VIMNMX.RELU R58, P0, P0, R59, 0x8, PT",
    "other": "FMUL R116, R120, R115",
}
NOP = "NOP"


def rng():
    """A fresh generator each run; its seed is in the failure message (SASS_TEST_SEED repeats it)."""
    seed = int(os.environ.get("SASS_TEST_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)
    return random.Random(seed), seed


def sass_text(kernels):
    """cuobjdump-like text of kernels = {name: [instruction, ...]}."""
    out = ["\n\tcode for sm_90"]
    for name, instrs in kernels.items():
        out.append(f"\t\tFunction : {name}")
        out.append('\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"')
        for i, ins in enumerate(instrs):
            out.append(
                f"        /*{16 * i:04x}*/                   {ins} ;   /* 0x000000160610898{i % 10} */"
            )
            out.append(
                "                                                                 /* 0x000fe200078e00ff */"
            )
        out.append("\t\t..........\n")
    return "\n".join(out)


def test_counts_each_kind_per_kernel():
    rnd, seed = rng()
    want, kernels = {}, {}
    for name in ("_Z1aIfEvv", "_Z19glu_bwd_tile_kernelI13__nv_bfloat16S0_Li0ELi183EEv8glu_args"):
        n = {k: rnd.randint(0, 9) for k in KINDS}
        instrs = [KINDS[k] for k, c in n.items() for _ in range(c)]
        rnd.shuffle(instrs)
        kernels[name] = instrs + [NOP] * rnd.randint(0, 7)  # padding: not counted
        want[name] = dict(n, instructions=len(instrs))
    rows = sass_counts.kernel_counts(sass_text(kernels))
    assert [r[0] for r in rows] == list(kernels)
    for name, got in rows:
        for col in sass_counts.COLUMNS:
            assert got[col] == want[name][col], (name, col, f"SASS_TEST_SEED={seed}")


def test_main_filters_and_writes_csv(tmp_path, capsys):
    path = tmp_path / "sass.txt"
    path.write_text(sass_text({"_Z3foov": [KINDS["MUFU"]] * 3, "_Z3barv": [KINDS["F2FP_pack"]]}))
    out_csv = tmp_path / "c.csv"
    assert sass_counts.main([str(path), "--match", "bar", "--csv", str(out_csv)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[1].split("\t")[0] == "_Z3barv"
    assert out_csv.read_text().splitlines()[1].startswith("_Z3barv,1,0,0,1,")
    assert sass_counts.main([str(path), "--match", "nothing"]) == 1


def test_same_as_lists_changed_added_and_removed_kernels(tmp_path, capsys):
    rnd, seed = rng()
    base = {
        f"_Z{i}kv": [rnd.choice(list(KINDS.values())) for _ in range(rnd.randint(1, 8))]
        for i in range(5)
    }
    changed = dict(base)
    victim, gone = rnd.sample(sorted(base), 2)
    changed[victim] = base[victim] + [KINDS["other"]]
    del changed[gone]
    changed["_Z3newv"] = [KINDS["MUFU"]]
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(sass_text(base))
    b.write_text(sass_text(changed))
    assert sass_counts.main([str(b), "--same-as", str(a)]) == 0
    out = capsys.readouterr().out
    assert (
        f"kernels: 5 in {b}, 5 in {a}; the same instructions: 3; different: 1; only in {b}: 1; only in {a}: 1"
        in out
    ), seed
    assert out.strip().splitlines()[1:] == [
        f"differs: {victim}",
        f"only in {b}: _Z3newv",
        f"only in {a}: {gone}",
    ], seed


def test_same_as_refuses_a_kernel_listed_twice(tmp_path):
    text = sass_text({"_Z3foov": [KINDS["MUFU"]]})
    path = tmp_path / "two_archs.txt"
    path.write_text(text + text)
    with pytest.raises(ValueError, match="_Z3foov is listed twice"):
        sass_counts.kernel_instructions(path.read_text())
