"""python -m fastglu.bench.fp8: the GLU quantised to FP8 (fastglu.fp8.glu_fp8) against its floor and
against the unfused path (fastglu.glu's bf16 activation, then the quantisation in torch ops), on
the GPU.

For T tokens and F = ffn_hidden_size (bf16 input [T, 2F]), per case:
  fused     glu_fp8 (one kernel; per-tensor scaling: a memset and two kernels); backward:
            glu_bwd_fp8 (dy + h -> dh [T, 2F] quantised)
  unfused   y = fastglu.glu(x) (backward: dh = fastglu.glu.glu_bwd(dy, x).dx), then torch: amax per
            block (or tensor), scale, y / scale -> e4m3 (and the same on y.t() for the column-wise
            copy)
  floor     the bytes the fused design must move at the device's copy bandwidth: read x (twice for
            per-tensor scaling: the amax must be known before any element is quantised), write the
            fp8 data and scales (twice with the column-wise copy)
Each case first checks that fused and unfused give the same scales and data within one e4m3 step.
The issue's bar: fused <= 1.10 x floor and >= 1.5 x faster than unfused.

    python -m fastglu.bench.fp8 [--tokens 8192] [--ffn 2880 8192 14336] [--out fp8.json]
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


def quant_rows(y, pow2=False):
    """The recipe on y [R, C] in torch ops (1 x 128 blocks): (data, scale [R, nb])."""
    R, C = y.shape
    nb = -(-C // 128)
    yf = y.float()
    if C % 128:
        yf = torch.nn.functional.pad(yf, (0, nb * 128 - C))
    amax = yf.view(R, nb, 128).abs().amax(-1)
    s = torch.where(amax == 0, torch.ones_like(amax), amax / 448.0)
    q = (yf.view(R, nb, 128) / s.unsqueeze(-1)).view(R, nb * 128)[:, :C].to(FP8)
    return q, s


def quant_tensor(y):
    yf = y.float()
    amax = yf.abs().amax()
    s = torch.where(amax == 0, torch.ones_like(amax), amax / 448.0)
    return (yf / s).to(FP8), s


def unfused(x, scaling, columnwise, dy=None):
    y = fastglu.glu(x) if dy is None else glu_bwd(dy, x).dx
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


def one_step(a, b):
    ai, bi = a.view(torch.uint8).int(), b.view(torch.uint8).int()
    return bool(
        (
            ((ai ^ bi) & 0x80 == 0) & ((ai & 0x7F) - (bi & 0x7F)).abs().le(1)
            | ((ai & 0x7F) == 0) & ((bi & 0x7F) == 0)
        ).all()
    )


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--ffn", type=int, nargs="+", default=[2880, 8192, 14336])
    p.add_argument("--rep", type=int, default=200, help="do_bench's rep (ms)")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("python -m fastglu.bench.fp8 needs a CUDA GPU")
    bench = make_bench(True, args.rep)
    bw = copy_bandwidth(bench)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e9:.0f} GB/s")
    print(
        f"{'F':>6s} {'case':>18s} {'fused ms':>9s} {'floor ms':>9s} {'x floor':>8s} "
        f"{'unfused ms':>10s} {'speedup':>8s}  check"
    )
    rows = []
    T = args.tokens
    for F in args.ffn:
        x = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16) * 2
        dy = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
        for bwd, scaling, columnwise in [
            (b, s, c) for b in (False, True) for s in ("block", "tensor") for c in (False, True)
        ]:

            def fused(x=x, dy=dy if bwd else None, scaling=scaling, columnwise=columnwise):
                if dy is not None:
                    return glu_bwd_fp8(dy, x, scaling=scaling, columnwise=columnwise)
                return glu_fp8(x, scaling=scaling, columnwise=columnwise)

            def unfused_path(x=x, dy=dy if bwd else None, scaling=scaling, columnwise=columnwise):
                return unfused(x, scaling, columnwise, dy)

            o = fused()
            q, s, qt, st = unfused_path()
            ok = torch.equal(o.scale, s) and one_step(o.data, q)
            if columnwise:
                ok = ok and one_step(o.data_t, qt) and (st is None or torch.equal(o.scale_t, st))
            t_f = bench(fused, None)[0]
            t_u = bench(unfused_path, None)[0]
            floor = floor_bytes(T, F, scaling, columnwise, bwd) / bw * 1e3
            case = f"{'bwd' if bwd else 'fwd'} {scaling}{'+colwise' if columnwise else ''}"
            row = {
                "T": T,
                "F": F,
                "case": case,
                "fused_ms": t_f,
                "floor_ms": floor,
                "ratio_to_floor": t_f / floor,
                "unfused_ms": t_u,
                "speedup": t_u / t_f,
                "check": ok,
            }
            rows.append(row)
            print(
                f"{F:6d} {case:>18s} {t_f:9.4f} {floor:9.4f} {t_f / floor:8.3f} {t_u:10.4f} "
                f"{t_u / t_f:8.2f}  {'ok' if ok else 'MISMATCH'}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {"gpu": torch.cuda.get_device_name(), "copy_bw": bw, "rows": rows}, f, indent=1
            )


if __name__ == "__main__":
    main()
