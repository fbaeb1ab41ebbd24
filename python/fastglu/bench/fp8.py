"""python -m fastglu.bench.fp8: the GLU quantised to FP8 (fastglu.fp8.glu_fp8) against its floor and
against the unfused path (fastglu.glu's bf16 activation, then the quantisation in torch ops).

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
Each case first checks fused against unfused: scales bit for bit, data within one e4m3 step (the
check: ok, or MISMATCH with the number of scales / codes beyond that bound; fastglu's records
"failed" then). The issue's bar: fused <= 1.10 x floor and >= 1.5 x faster than unfused.
Providers: fastglu (fused) and unfused; benchmarks glu_fp8/forward and glu_fp8/backward, workload
slugs t<T>-ffn<F>-bf16-<scaling>[-colwise][-sums]. The harness (rounds, records, summary.json,
table.txt; the CPU without a GPU): fastglu.bench.kernels.

    python -m fastglu.bench.fp8 [--tokens 8192] [--ffn 2880 8192 14336] [--sums] [--rounds 3]
                                [--rep 100] [--smoke] [--out DIR]
"""

from __future__ import annotations

import torch

import fastglu
from fastglu.fp8 import glu_bwd_fp8, glu_fp8
from fastglu.ops import glu_bwd

from . import kernels
from .kernels import Case

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


def cases(T, ffns, sums, device):
    """The benchmark's cases at T tokens for each F of ffns (kernels.Case, built per F)."""
    for F in ffns:
        x = torch.randn(T, 2 * F, device=device, dtype=torch.bfloat16) * 2
        dy = torch.randn(T, F, device=device, dtype=torch.bfloat16)
        bw_ = (
            torch.randn(2 * F, device=device, dtype=torch.bfloat16),
            torch.rand(T, 1, device=device, dtype=torch.float32),
        )
        specs = [
            (b, s, c, None)
            for b in (False, True)
            for s in ("block", "tensor")
            for c in (False, True)
        ]
        if sums:
            specs += [(True, "block", c, bw_) for c in (False, True)]
        for bwd, scaling, columnwise, sums_ in specs:

            def fused(
                x=x, dy=dy if bwd else None, scaling=scaling, columnwise=columnwise, sums=sums_
            ):
                if dy is not None:
                    b, w = sums if sums is not None else (None, None)
                    return glu_bwd_fp8(
                        dy, x, bias=b, weights=w, scaling=scaling, columnwise=columnwise
                    )
                return glu_fp8(x, scaling=scaling, columnwise=columnwise)

            def unfused_path(
                x=x, dy=dy if bwd else None, scaling=scaling, columnwise=columnwise, sums=sums_
            ):
                return unfused(x, scaling, columnwise, dy, sums)

            pass_ = "backward" if bwd else "forward"
            tags = [scaling] + (["colwise"] if columnwise else []) + (["sums"] if sums_ else [])
            yield Case(
                benchmark=f"glu_fp8/{pass_}",
                slug=f"t{T}-ffn{F}-bf16-" + "-".join(tags),
                label=f"{'bwd' if bwd else 'fwd'} {'+'.join(tags)}",
                title=f"SwiGLU quantised to FP8 ({pass_}, {', '.join(tags)}, T={T}, F={F})",
                workload={
                    "op": "glu_fp8",
                    "pass": pass_,
                    "T": T,
                    "F": F,
                    "dtype": "bf16",
                    "scaling": scaling,
                    "columnwise": columnwise,
                    "bias_and_weights": sums_ is not None,
                },
                providers={"fastglu": fused, "unfused": unfused_path},
                floor_bytes=floor_bytes(T, F, scaling, columnwise, bwd),
                check=compare(fused(), unfused_path(), columnwise),
            )
        del x, dy, bw_


def main(argv=None):
    p = kernels.parser("python -m fastglu.bench.fp8", __doc__, "glu-fp8")
    kernels.add_tokens_ffn(p)
    p.add_argument(
        "--sums",
        action="store_true",
        help="also the backward with bias and per-token weights (dbias, dweights in the pass)",
    )
    args = kernels.parse(p, argv)
    T, ffns = kernels.tokens_ffn(args)
    return kernels.run(
        args,
        harness="fastglu python -m fastglu.bench.fp8",
        out_suffix="glu-fp8",
        what={
            "glu_fp8/forward": "the GLU's output quantised to FP8 from h [T, 2F] (fastglu: "
            "fastglu.fp8.glu_fp8; unfused: fastglu.glu, then the recipe in torch ops)",
            "glu_fp8/backward": "the GLU's input gradient quantised to FP8 from dy [T, F] and h "
            "(fastglu: fastglu.fp8.glu_bwd_fp8; unfused: fastglu's glu_bwd, then the recipe in "
            "torch ops)",
        },
        cases=lambda device: cases(T, ffns, args.sums, device),
    )


if __name__ == "__main__":
    main()
