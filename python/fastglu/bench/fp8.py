"""python -m fastglu.bench.fp8: the GLU quantised to FP8 (fastglu.fp8.glu_fp8) against its floor and
against the unfused path (fastglu.glu's bf16 activation, then the quantisation in torch ops), on
the GPU.

For T tokens and F = ffn_hidden_size (bf16 input [T, 2F]), per case:
  fused     glu_fp8 (one kernel; per-tensor scaling: a memset and two kernels); backward:
            glu_bwd_fp8 (dy + h -> dh [T, 2F] quantised); with --sums also the backward with a
            bias [2F] and fp32 per-token weights, dbias and dweights reduced in the same pass
            (cases "+sums": the tile kernel's sums and their reduction kernel)
  unfused   y = fastglu.glu(x) (backward: dh = fastglu.ops.glu_bwd(dy, x).dx, with dbias and
            dweights for "+sums"), then torch: amax per
            block (or tensor), scale, y / scale -> e4m3 (and the same on y.t() for the column-wise
            copy)
  floor     the bytes the fused design must move at the device's copy bandwidth: read x (twice for
            per-tensor scaling: the amax must be known before any element is quantised), write the
            fp8 data and scales (twice with the column-wise copy)
Each case first checks fused against unfused: scales bit for bit, data within one e4m3 step ("check"
column: ok, or MISMATCH with the number of scales / codes beyond that bound).
The issue's bar: fused <= 1.10 x floor and >= 1.5 x faster than unfused.

    python -m fastglu.bench.fp8 [--tokens 8192] [--ffn 2880 8192 14336] [--sums] [--out fp8.json]
"""

from __future__ import annotations

import argparse
import json

import torch

import fastglu
from fastglu.fp8 import glu_bwd_fp8, glu_fp8
from fastglu.ops import glu_bwd

from .swiglu import copy_bandwidth, make_bench

FP8 = torch.float8_e4m3fn


def recipe_scale(amax):
    """amax / 448 correctly rounded to fp32 (1 for amax 0), as the recipe defines the scale. The
    divisor is a tensor on amax's device: on CUDA, ``amax / 448.0`` with a Python scalar is
    computed as ``amax * (1 / 448)`` (aten's BinaryDivTrueKernel.cu turns a division by a CPU
    scalar into a multiplication by its fp32 reciprocal), which is one ulp off for about half of
    the amax values."""
    s = amax / torch.full_like(amax, 448.0)
    return torch.where(amax == 0, torch.ones_like(amax), s)


def quant_rows(y):
    """The recipe on y [R, C] in torch ops (1 x 128 blocks): (data, scale [R, nb])."""
    R, C = y.shape
    nb = -(-C // 128)
    yf = y.float()
    if C % 128:
        yf = torch.nn.functional.pad(yf, (0, nb * 128 - C))
    s = recipe_scale(yf.view(R, nb, 128).abs().amax(-1))
    q = (yf.view(R, nb, 128) / s.unsqueeze(-1)).view(R, nb * 128)[:, :C].to(FP8)
    return q, s


def quant_tensor(y):
    yf = y.float()
    s = recipe_scale(yf.abs().amax())
    return (yf / s).to(FP8), s


def unfused(x, scaling, columnwise, dy=None, sums=None):
    if dy is None:
        y = fastglu.glu(x)
    elif sums is None:
        y = glu_bwd(dy, x).dx
    else:  # bias and weights: dbias and dweights as well
        b, w = sums
        y = glu_bwd(dy, x, bias=b, weights=w, want_dbias=True, want_dweights=True).dx
    if scaling == "block":
        q, s = quant_rows(y)
        qt, st = quant_rows(y.t()) if columnwise else (None, None)
        return q, s, qt, st
    q, s = quant_tensor(y)
    return q, s, (quant_tensor(y.t())[0] if columnwise else None), None


def floor_bytes(T, F, scaling, columnwise, bwd=False):
    """Forward: read h [T, 2F], write y's data [T, F] and scales. Backward: read h and dy [T, F],
    write dh's data [T, 2F] and scales. Per-tensor scaling reads the inputs twice."""
    W = 2 * F if bwd else F
    reads = (2 * T * F + (T * F if bwd else 0)) * 2 * (2 if scaling == "tensor" else 1)
    writes = T * W + (4 * T * (-(-W // 128)) if scaling == "block" else 4)
    if columnwise:
        writes += T * W + (4 * W * (-(-T // 128)) if scaling == "block" else 0)
    return reads + writes


def codes_beyond_one_step(a, b):
    """How many e4m3 codes of a and b are more than one step apart (same sign and magnitudes at
    most one code apart, or both zeros of either sign, count as agreeing)."""
    ai, bi = a.view(torch.uint8).int(), b.view(torch.uint8).int()
    ok = (((ai ^ bi) & 0x80) == 0) & ((ai & 0x7F) - (bi & 0x7F)).abs().le(1) | (
        ((ai & 0x7F) == 0) & ((bi & 0x7F) == 0)
    )
    return int((~ok).sum())


def scales_differing(a, b):
    """How many scales of a and b differ in value (NaN equal to NaN)."""
    if a.shape != b.shape:
        return max(a.numel(), b.numel())
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    return int((~same).sum())


def compare(o, ref, columnwise):
    """The fused output against the unfused one: the check's bound is scales bit for bit and data
    within one e4m3 step (fused divides y by the scale in fp32 on the device as torch does, so the
    codes are expected equal; one step is the recipe's tolerance, docs/fp8.md). Returns a short
    verdict naming what broke the bound."""
    q, s, qt, st = ref
    bad = []
    if n := scales_differing(o.scale, s.reshape(o.scale.shape)):
        bad.append(f"{n} scales")
    if n := codes_beyond_one_step(o.data, q):
        bad.append(f"{n} codes")
    if columnwise:
        if st is not None and (n := scales_differing(o.scale_t, st)):
            bad.append(f"{n} scales_t")
        if n := codes_beyond_one_step(o.data_t, qt):
            bad.append(f"{n} codes_t")
    return "ok" if not bad else "MISMATCH: " + ", ".join(bad)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--ffn", type=int, nargs="+", default=[2880, 8192, 14336])
    p.add_argument("--rep", type=int, default=200, help="do_bench's rep (ms)")
    p.add_argument(
        "--sums",
        action="store_true",
        help="also the backward with bias and per-token weights (dbias, dweights in the pass)",
    )
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("python -m fastglu.bench.fp8 needs a CUDA GPU")
    bench = make_bench(True, args.rep)
    bw = copy_bandwidth(bench)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e9:.0f} GB/s")
    print(
        f"{'F':>6s} {'case':>18s} {'fused ms':>9s} {'floor ms':>9s} {'x floor':>8s} "
        f"{'unfused ms':>10s} {'speedup':>8s}  check (scales exact, data within one e4m3 step)"
    )
    rows = []
    T = args.tokens
    for F in args.ffn:
        x = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16) * 2
        dy = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
        bw_ = (
            torch.randn(2 * F, device="cuda", dtype=torch.bfloat16),
            torch.rand(T, 1, device="cuda", dtype=torch.float32),
        )
        cases = [
            (b, s, c, None)
            for b in (False, True)
            for s in ("block", "tensor")
            for c in (False, True)
        ]
        if args.sums:
            cases += [(True, "block", c, bw_) for c in (False, True)]
        for bwd, scaling, columnwise, sums in cases:

            def fused(
                x=x, dy=dy if bwd else None, scaling=scaling, columnwise=columnwise, sums=sums
            ):
                if dy is not None:
                    b, w = sums if sums is not None else (None, None)
                    return glu_bwd_fp8(
                        dy, x, bias=b, weights=w, scaling=scaling, columnwise=columnwise
                    )
                return glu_fp8(x, scaling=scaling, columnwise=columnwise)

            def unfused_path(
                x=x, dy=dy if bwd else None, scaling=scaling, columnwise=columnwise, sums=sums
            ):
                return unfused(x, scaling, columnwise, dy, sums)

            verdict = compare(fused(), unfused_path(), columnwise)
            t_f = bench(fused, None)[0]
            t_u = bench(unfused_path, None)[0]
            floor = floor_bytes(T, F, scaling, columnwise, bwd) / bw * 1e3
            case = f"{'bwd' if bwd else 'fwd'} {scaling}{'+colwise' if columnwise else ''}"
            case += "+sums" if sums is not None else ""
            row = {
                "T": T,
                "F": F,
                "case": case,
                "fused_ms": t_f,
                "floor_ms": floor,
                "ratio_to_floor": t_f / floor,
                "unfused_ms": t_u,
                "speedup": t_u / t_f,
                "check": verdict,
            }
            rows.append(row)
            print(
                f"{F:6d} {case:>18s} {t_f:9.4f} {floor:9.4f} {t_f / floor:8.3f} {t_u:10.4f} "
                f"{t_u / t_f:8.2f}  {verdict}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {"gpu": torch.cuda.get_device_name(), "copy_bw": bw, "rows": rows}, f, indent=1
            )


if __name__ == "__main__":
    main()
