"""Per-kernel instruction counts from `cuobjdump -sass` output (development aid, no GPU needed).

    cuobjdump -sass build/libfastglu.so > sass.txt
    python3 bench/tune/sass_counts.py sass.txt [--match tile_kernel] [--csv out.csv]
    python3 bench/tune/sass_counts.py after.txt --same-as before.txt   # which kernels changed

One row per kernel: its instruction count (NOP padding left out), the special-function-unit work
(MUFU: the activation's EX2 and RCP), the single float -> 16-bit conversions (F2F.BF16.F32 /
F2F.F16.F32, which need a shift and an OR a pair to be packed) against the paired ones
(F2FP.*.PACK_AB, one instruction for two elements; one with RZ as a source would convert a single
element and is counted all the same), 16-byte global loads and stores, and local memory traffic
(spills: LDL / STL), and integer min / max instructions with a predicate output (MNMX_pred: ptxas
of CUDA 13.0 compiles `n == 8` on a clamped n into one of those with the test's sense reversed,
which src/quant_fp8_cuda.cu's whole_chunk avoids; the library has none). Counts are of instructions
in the code, not of instructions executed.
bench/PERF_NOTES.md (tenth version) reads it.
"""

import argparse
import csv
import re
import sys

COLUMNS = {
    "instructions": None,
    "MUFU": re.compile(r"\bMUFU\."),
    "F2F_single_16bit": re.compile(r"\bF2F\.(?:BF16|F16)\.F32\b"),
    "F2FP_pack": re.compile(r"\bF2FP\.\S*PACK_AB\b"),
    "LDG_128": re.compile(r"\bLDG\.E\.128\b"),
    "STG_128": re.compile(r"\bSTG\.E\.128\b"),
    "LDL_STL": re.compile(r"\b(?:LDL|STL)\b"),
    "MNMX_pred": re.compile(r"\b\w*MNMX[.\w]* R\d+, P[0-6]\b"),
}
# one instruction line: its address, then the instruction (up to the ';' before its encoding)
INSTRUCTION = re.compile(r"^\s*(/\*[0-9a-f]{4,}\*/)\s+(.*?)\s*;", re.M)


def kernels(text):
    """[(kernel name, its SASS text)] in the order cuobjdump lists the kernels."""
    return re.findall(r"Function : (\S+)\n(.*?)(?=\n\s+Function :|\Z)", text, re.S)


def kernel_instructions(text):
    """{kernel name: [instruction text, with its address]}: equal lists mean the same code. A name
    listed more than once (a build for several architectures) is refused: compare one cubin each."""
    out = {}
    for name, body in kernels(text):
        if name in out:
            raise ValueError(f"{name} is listed twice: pass the SASS of one architecture")
        out[name] = INSTRUCTION.findall(body)
    return out


def kernel_counts(text):
    """[(kernel name, {column: count})] in the order cuobjdump lists the kernels."""
    rows = []
    for name, body in kernels(text):
        instrs = [i for _, i in INSTRUCTION.findall(body) if not re.match(r"NOP\b", i)]
        counts = {"instructions": len(instrs)}
        for col, pat in COLUMNS.items():
            if pat is not None:
                counts[col] = sum(1 for i in instrs if pat.search(i))
        rows.append((name, counts))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sass", help="cuobjdump -sass output ('-': stdin)")
    ap.add_argument("--match", default="", help="only kernels whose mangled name contains this")
    ap.add_argument("--csv", help="also write the rows to this CSV file")
    ap.add_argument(
        "--same-as",
        metavar="OTHER",
        help="instead: list the kernels whose instructions "
        "differ from OTHER's (another cuobjdump -sass output)",
    )
    args = ap.parse_args(argv)
    text = sys.stdin.read() if args.sass == "-" else open(args.sass).read()
    if args.same_as:
        mine, other = kernel_instructions(text), kernel_instructions(open(args.same_as).read())
        names = [n for n in mine if args.match in n]
        theirs = [n for n in other if args.match in n]
        differ = [n for n in names if n in other and mine[n] != other[n]]
        only_here = [n for n in names if n not in other]
        only_there = [n for n in theirs if n not in mine]
        print(
            f"kernels: {len(names)} in {args.sass}, {len(theirs)} in {args.same_as}; "
            f"the same instructions: {len(names) - len(differ) - len(only_here)}; different: {len(differ)}; "
            f"only in {args.sass}: {len(only_here)}; only in {args.same_as}: {len(only_there)}"
        )
        for n in differ:
            print("differs:", n)
        for n in only_here:
            print(f"only in {args.sass}:", n)
        for n in only_there:
            print(f"only in {args.same_as}:", n)
        return 0 if names else 1
    table = [["kernel"] + list(COLUMNS)]
    table += [[n] + [c[k] for k in COLUMNS] for n, c in kernel_counts(text) if args.match in n]
    csv.writer(sys.stdout, delimiter="\t", lineterminator="\n").writerows(table)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            csv.writer(f).writerows(table)
    return 0 if len(table) > 1 else 1


if __name__ == "__main__":
    sys.exit(main())
