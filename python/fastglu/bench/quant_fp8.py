"""python -m fastglu.bench.quant_fp8: the quantiser of a plain operand (fastglu.fp8.quantize_fp8, the
C library's kernel) against its floor and against the same recipe in torch ops
(fastglu.fp8_mlp.quantize_1x128_torch / quantize_128x128_torch).

The operands of an FP8 MLP block's GEMMs outside the GLU, per (T, H, F):
  x / dO   [T, H] bf16, 1 x 128 blocks, with the transposed copy [H, T] (the weight gradients'
           operand): one kernel; torch ops quantise x and x.t() (two passes and a transposition)
  w1       [2F, H] 128 x 128 blocks, the row-wise copy (fc1's forward)
  w1^T     the transposed codes [H, 2F] (fc1's dgrad), the scales transposed
  w2, w2^T [H, F] likewise
floor: the bytes read (x once) and written (the fp8 copies and their scales) at the device's copy
bandwidth. Each case first checks the kernel's outputs bit for bit against the torch ops' (fastglu's
records "failed" otherwise). Providers: fastglu and torch; benchmark quantize_fp8/forward, workload
slugs r<rows>-c<cols>-bf16-<block>-<copies>. The harness (rounds, records, summary.json,
table.txt; the CPU without a GPU): fastglu.bench.kernels.

    python -m fastglu.bench.quant_fp8 [--shape T,H,F ...] [--rounds 3] [--rep 100] [--smoke]
                                      [--out DIR]
"""

from __future__ import annotations

import torch

from fastglu import fp8
from fastglu.fp8_mlp import quantize_1x128_torch, quantize_128x128_torch

from . import kernels
from .kernels import Case

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


def case_list(shapes, device):
    """The benchmark's cases (kernels.Case) for each (T, H, F) of shapes."""
    for T, H, F in shapes:
        done = {}
        for name, shape, block, rowwise, columnwise in cases(T, H, F):
            if shape not in done:
                done[shape] = torch.randn(shape, device=device, dtype=torch.bfloat16) * 2
            x = done[shape]

            def ours(x=x, block=block, rowwise=rowwise, columnwise=columnwise):
                q = fp8.quantize_fp8(x, block=block, rowwise=rowwise, columnwise=columnwise)
                return [t for t in q if t is not None]

            def ref(x=x, block=block, rowwise=rowwise, columnwise=columnwise):
                return torch_ops(x, block, rowwise, columnwise)

            ok = all(same(a, b) for a, b in zip(ours(), ref()))
            copies = "-".join(c for c, on in (("rowwise", rowwise), ("colwise", columnwise)) if on)
            R, C = shape
            yield Case(
                benchmark="quantize_fp8/forward",
                slug=f"r{R}-c{C}-bf16-{block}-{copies}",
                label=f"{name} (T,H,F={T},{H},{F})",
                title=f"An operand quantised to FP8 ({block}, {copies.replace('-', ' + ')}, "
                f"[{R}, {C}])",
                workload={
                    "op": "quantize_fp8",
                    "rows": R,
                    "cols": C,
                    "dtype": "bf16",
                    "block": block,
                    "rowwise": rowwise,
                    "columnwise": columnwise,
                },
                providers={"fastglu": ours, "torch": ref},
                floor_bytes=floor_bytes(shape, block, rowwise, columnwise),
                check="ok" if ok else "MISMATCH: not bit for bit the torch ops' outputs",
            )
        del done


def main(argv=None):
    p = kernels.parser("python -m fastglu.bench.quant_fp8", __doc__, "quant-fp8")
    p.add_argument(
        "--shape",
        nargs="+",
        metavar="T,H,F",
        help="MLP workloads whose operands are quantised (default: issue 26's four; 64,96,80 on "
        "the CPU)",
    )
    args = kernels.parse(p, argv)
    try:
        shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape or ()]
    except ValueError:
        p.error(f"--shape takes T,H,F (three integers), got {args.shape}")
    if any(len(s) != 3 or min(s) < 1 for s in shapes):
        p.error(f"--shape takes T,H,F (three positive integers), got {args.shape}")
    shapes = shapes or (SHAPES if args.on_gpu else [(64, 96, 80)])
    return kernels.run(
        args,
        harness="fastglu python -m fastglu.bench.quant_fp8",
        out_suffix="quant-fp8",
        what={
            "quantize_fp8/forward": "an MLP operand quantised to FP8 with its scales, the row-wise "
            "and / or the transposed copy (fastglu: fastglu.fp8.quantize_fp8; torch: the recipe in "
            "torch ops, one pass a copy and a transposition)"
        },
        cases=lambda device: case_list(shapes, device),
    )


if __name__ == "__main__":
    main()
