"""python -m fastglu.bench.quant_fp8: the quantiser of a plain operand (fastglu.fp8.quantize_fp8, the
C library's kernel) against its floor and against the same recipe in torch ops
(fastglu.fp8_mlp.quantize_1x128_torch / quantize_128x128_torch), on the GPU.

The operands of an FP8 MLP block's GEMMs outside the GLU, per (T, H, F):
  x / dO   [T, H] bf16, 1 x 128 blocks, with the transposed copy [H, T] (the weight gradients'
           operand): one kernel; torch ops quantise x and x.t() (two passes and a transposition)
  w1       [2F, H] 128 x 128 blocks, the row-wise copy (fc1's forward)
  w1^T     the transposed codes [H, 2F] (fc1's dgrad), the scales transposed
  w2, w2^T [H, F] likewise
floor: the bytes read (x once) and written (the fp8 copies and their scales) at the device's copy
bandwidth. Each case first checks the kernel's outputs bit for bit against the torch ops'.
rounds: the providers timed in turn, their order rotated each round; the median of the rounds.

    python -m fastglu.bench.quant_fp8 [--shape T,H,F ...] [--rounds 3] [--out quant.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from fastglu import fp8
from fastglu.fp8_mlp import quantize_1x128_torch, quantize_128x128_torch

from .swiglu import copy_bandwidth, make_bench, rotated_rounds

SHAPES = [(8192, 4096, 8192), (8192, 4096, 14336), (16384, 2880, 2880), (4096, 8192, 3584)]


def blocks(n):
    return -(-n // 128)


def cases(T, H, F):
    """(name, input shape, block, rowwise, columnwise)"""
    return [
        ("x [T,H] + x^T", (T, H), "1x128", True, True),
        ("w1 [2F,H]", (2 * F, H), "128x128", True, False),
        ("w1^T", (2 * F, H), "128x128", False, True),
        ("w2 [H,F]", (H, F), "128x128", True, False),
        ("w2^T", (H, F), "128x128", False, True),
    ]


def floor_bytes(shape, block, rowwise, columnwise, in_bytes=2):
    R, C = shape
    copies = int(rowwise) + int(columnwise)
    if block == "1x128":
        scales = (R * blocks(C) if rowwise else 0) + (C * blocks(R) if columnwise else 0)
    else:
        scales = copies * blocks(R) * blocks(C)
    return R * C * in_bytes + copies * R * C + 4 * scales


def torch_ops(x, block, rowwise, columnwise):
    q = quantize_1x128_torch if block == "1x128" else quantize_128x128_torch
    out = []
    if rowwise:
        out += list(q(x))
    if columnwise:
        out += list(q(x.t()))
    return out


def same(a, b):
    if a.dtype == torch.float8_e4m3fn:
        return torch.equal(a.view(torch.uint8), b.contiguous().view(torch.uint8))
    return torch.equal(a, b)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--shape", nargs="+", default=[",".join(map(str, s)) for s in SHAPES])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rep", type=int, default=100, help="do_bench's rep (ms)")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("python -m fastglu.bench.quant_fp8 needs a CUDA GPU")
    bench = make_bench(True, args.rep)
    bw = copy_bandwidth(bench)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e9:.0f} GB/s")
    print(
        f"{'T,H,F':>17s} {'case':>14s} {'fastglu ms':>10s} {'floor ms':>9s} {'x floor':>8s} "
        f"{'torch ms':>9s} {'speedup':>8s} {'spread':>7s} check"
    )
    rows = []
    for spec in args.shape:
        T, H, F = (int(v) for v in spec.split(","))
        done = {}
        for name, shape, block, rowwise, columnwise in cases(T, H, F):
            if shape not in done:
                done[shape] = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 2
            x = done[shape]

            def ours(x=x, block=block, rowwise=rowwise, columnwise=columnwise):
                q = fp8.quantize_fp8(x, block=block, rowwise=rowwise, columnwise=columnwise)
                return [t for t in q if t is not None]

            def ref(x=x, block=block, rowwise=rowwise, columnwise=columnwise):
                return torch_ops(x, block, rowwise, columnwise)

            ok = all(same(a, b) for a, b in zip(ours(), ref()))
            times = rotated_rounds(bench, {"fastglu": ours, "torch": ref}, args.rounds)
            t_f = statistics.median(times["fastglu"])
            t_t = statistics.median(times["torch"])
            spread = (max(times["fastglu"]) - min(times["fastglu"])) / t_f
            floor = floor_bytes(shape, block, rowwise, columnwise) / bw * 1e3
            row = {
                "T": T,
                "H": H,
                "F": F,
                "case": name,
                "shape": list(shape),
                "block": block,
                "fastglu_ms": t_f,
                "fastglu_rounds_ms": times["fastglu"],
                "torch_ms": t_t,
                "torch_rounds_ms": times["torch"],
                "floor_ms": floor,
                "ratio_to_floor": t_f / floor,
                "speedup_vs_torch": t_t / t_f,
                "bitwise_equal_to_torch": ok,
                "copy_bandwidth_Bps": bw,
            }
            rows.append(row)
            print(
                f"{spec:>17s} {name:>14s} {t_f:10.4f} {floor:9.4f} {t_f / floor:8.3f} "
                f"{t_t:9.4f} {t_t / t_f:8.2f} {spread:7.3f} {'ok' if ok else 'MISMATCH'}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
