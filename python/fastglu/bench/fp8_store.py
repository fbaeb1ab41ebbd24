"""python -m fastglu.bench.fp8_store: the saved input's blockwise FP8 copy (``fp8_input_store=
"blockwise"``, the C library's fastglu_glu_fp8_store_blockwise: one kernel) against its floor and
against the same recipe in torch ops.

The operand is the SwiGLU input h [T, 2F] (bf16, split layout: gate's 1 x 128 blocks, then up's),
as the forward saves it for the backward. Read once; written: the codes [T, 2F] and the scales
[T, 2 ceil(F / 128)] fp32. floor: those bytes at the device's copy bandwidth. torch ops: the recipe
as separate passes (the blocks' amax, the scales, the quotients, the cast), with true divisions, so
that its codes and scales equal the kernel's bit for bit (checked first, each case; fastglu's
records "failed" otherwise). Providers: fastglu and torch; benchmark fp8_store/blockwise, workload
slugs t<T>-ffn<F>-bf16. Second, benchmark fp8_store/fwd_blockwise: the forward (SwiGLU) with the
copy in one call (fastglu_fused: fastglu_glu_fwd_fp8_store_blockwise, one kernel) against the
forward's call then the copy's (fastglu_two_calls, two kernels), checked bit for bit first; floor:
h read once, y, the codes and the scales written. Third, benchmark fp8_store/bwd_blockwise: the FP8
backward from the copy (dy and the codes in; dh quantised 1 x 128 along 2F and along the tokens,
for fc1's dgrad and wgrad) in one call (fastglu_fused: fastglu_glu_bwd_fp8_saved_blockwise)
against the GLU backward decoding the copy into dh (bf16), then the quantiser on dh with its
transposed copy (fastglu_two_calls), checked bit for bit first; floor: dy, the codes and the
scales read, both quantised copies and their scales written. Fourth, benchmark
fp8_store/fwd_fp8_blockwise: the FP8 forward (y quantised 1 x 128 along F and along the tokens,
fc2's input and its wgrad's) with the copy in one call (fastglu_fused:
fastglu_glu_fwd_fp8_copy_blockwise, one kernel) against the FP8 forward's call then the copy's
(fastglu_two_calls), checked bit for bit first; floor: h read once, both quantised copies of y, the
codes of h and all their scales written. The harness (rounds, records, summary.json, table.txt; the
CPU without a GPU): fastglu.bench.kernels.

    python -m fastglu.bench.fp8_store [--tokens 8192] [--ffn 2880 8192 14336] [--rounds 3]
                                      [--rep 100] [--smoke] [--out DIR]
"""

from __future__ import annotations

import torch

from fastglu import _C, ops
from fastglu import fp8 as _fp8

from . import kernels
from .kernels import Case

FP8 = torch.float8_e4m3fn
F32_MAX = torch.finfo(torch.float32).max


def store_torch(h, F):
    """The blockwise copy of h [T, 2F] (no clamp) in torch ops: (codes [T, 2F], scales [T, nb])."""
    T = h.shape[0]
    nb = -(-F // 128)
    col = torch.arange(F, device=h.device) // 128
    codes, scales = [], []
    for t in (h[:, :F], h[:, F:]):
        tf = t.float()
        a = torch.nn.functional.pad(tf.abs(), (0, nb * 128 - F)).reshape(T, nb, 128).amax(-1)
        scaled = (a >= 2.0**-126) & (a <= F32_MAX)
        s = torch.where(scaled, a / torch.full_like(a, 448.0), torch.ones_like(a))
        codes.append(torch.where(scaled[:, col], tf / s[:, col], tf).to(FP8))
        scales.append(s)
    return torch.cat(codes, -1), torch.cat(scales, -1)


def floor_bytes(T, F, in_bytes=2):
    return T * 2 * F * in_bytes + T * 2 * F + 4 * T * 2 * (-(-F // 128))


def fused_floor_bytes(T, F, in_bytes=2):
    """The forward and the copy in one pass: h read once, y, the codes and the scales written."""
    return floor_bytes(T, F, in_bytes) + T * F * in_bytes


def bwd_floor_bytes(T, F, in_bytes=2):
    """The backward from the copy in one pass: dy, the codes and their scales read; dh's row-wise
    and column-wise codes and scales written."""
    return (
        T * F * in_bytes
        + T * 2 * F
        + 4 * T * 2 * (-(-F // 128))
        + 2 * T * 2 * F
        + 4 * (T * (-(-2 * F // 128)) + 2 * F * (-(-T // 128)))
    )


def fwd_fp8_floor_bytes(T, F, in_bytes=2):
    """The FP8 forward and the copy in one pass: h read once; y's row-wise and column-wise codes
    and scales, h's codes and scales written."""
    return floor_bytes(T, F, in_bytes) + 2 * T * F + 4 * (T * (-(-F // 128)) + F * (-(-T // 128)))


def same_bits(xs, ys):
    """Every pair of tensors of xs and ys equal bit for bit (one object counts as equal)."""
    return all(
        a is b or torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
        for a, b in zip(xs, ys)
    )


def fused_case(benchmark, T, F, label, title, op, one, two, floor, what):
    """A case of one call (provider fastglu_fused) against the two calls it replaces
    (fastglu_two_calls), checked bit for bit on ``what`` first."""
    return Case(
        benchmark=benchmark,
        slug=f"t{T}-ffn{F}-bf16",
        label=label,
        title=title,
        workload={"op": op, "T": T, "F": F, "dtype": "bf16"},
        providers={"fastglu_fused": one, "fastglu_two_calls": two},
        floor_bytes=floor,
        check="ok"
        if same_bits(one(), two())
        else f"MISMATCH: not bit for bit the two calls' {what}",
    )


def cases(T, ffns, device):
    """The benchmark's cases (kernels.Case) for each F of ffns at T tokens: the copy against the
    torch ops, and the forward with the copy in one call against the forward's and the copy's."""
    p = ops.glu_params("silu")
    for F in ffns:
        h = torch.randn(T, 2 * F, device=device, dtype=torch.bfloat16) * 3

        def ours(h=h):
            return ops._fp8_store_blockwise(h, None, None, "bench")

        def ref(h=h, F=F):
            return store_torch(h, F)

        a8, _, a_s = ours()
        b8, b_s = ref()
        ok = torch.equal(a8.view(torch.uint8), b8.view(torch.uint8)) and torch.equal(a_s, b_s)
        yield Case(
            benchmark="fp8_store/blockwise",
            slug=f"t{T}-ffn{F}-bf16",
            label=f"h [{T}, 2x{F}]",
            title=f"The GLU's saved input in FP8 with 1 x 128 scales (T={T}, F={F})",
            workload={"op": "fp8_store_blockwise", "T": T, "F": F, "dtype": "bf16"},
            providers={"fastglu": ours, "torch": ref},
            floor_bytes=floor_bytes(T, F),
            check="ok" if ok else "MISMATCH: not bit for bit the torch ops' codes and scales",
        )

        def one_call(h=h):
            return ops._fwd_fp8_store_blockwise(p, h, None, None, None, "bench")

        def two_calls(h=h):
            y = ops.forward(p, h, fn="bench")
            return (y, *ops._fp8_store_blockwise(h, None, p, "bench"))

        yield fused_case(
            "fp8_store/fwd_blockwise",
            T,
            F,
            f"y + copy of h [{T}, 2x{F}]",
            f"The GLU's forward with its saved input in FP8, 1 x 128 scales (T={T}, F={F})",
            "glu_fwd_fp8_store_blockwise",
            one_call,
            two_calls,
            fused_floor_bytes(T, F),
            "y, codes and scales",
        )
        h8, _, h8s = ours()
        dy = torch.randn(T, F, device=device, dtype=torch.bfloat16)
        block, mn = _C.FP8_SCALING_BLOCK_1X128, _C.FP8_SCALES_MN_MAJOR

        def fp8_one(h=h):
            return _fp8._run(
                None, h, None, None, None, *p, block, mn, False, True, False, copy=True
            )

        def fp8_two(h=h):
            out = _fp8._run(None, h, None, None, None, *p, block, mn, False, True, False)
            x8, _, x8s = ops._fp8_store_blockwise(h, None, p, "bench")
            return (*out, x8, x8s)

        yield fused_case(
            "fp8_store/fwd_fp8_blockwise",
            T,
            F,
            f"y8 + y8^T + copy of h [{T}, 2x{F}]",
            f"The GLU's FP8 forward with its saved input in FP8, 1 x 128 scales (T={T}, F={F})",
            "glu_fwd_fp8_copy_blockwise",
            fp8_one,
            fp8_two,
            fwd_fp8_floor_bytes(T, F),
            "codes and scales",
        )

        def bwd_one(dy=dy, h8=h8, h8s=h8s):
            return _fp8._run(
                dy, h8, None, None, None, *p, block, mn, False, True, False, scale_inv=h8s
            )[:4]

        def bwd_two(dy=dy, h8=h8, h8s=h8s):
            dh = ops.backward(p, dy, h8, input_scale_inv=h8s, fn="bench").dx
            return _fp8._quant_run(dh, block, mn, False, True, True, False)

        yield fused_case(
            "fp8_store/bwd_blockwise",
            T,
            F,
            f"dh8 + dh8^T from the copy, [{T}, 2x{F}]",
            f"The GLU's FP8 backward from its saved input's blockwise copy (T={T}, F={F})",
            "glu_bwd_fp8_saved_blockwise",
            bwd_one,
            bwd_two,
            bwd_floor_bytes(T, F),
            "codes and scales",
        )
        del h, a8, a_s, b8, b_s, h8, h8s, dy


def main(argv=None):
    p = kernels.parser("python -m fastglu.bench.fp8_store", __doc__, "fp8-store")
    kernels.add_tokens_ffn(p)
    args = kernels.parse(p, argv)
    T, ffns = kernels.tokens_ffn(args)
    return kernels.run(
        args,
        harness="fastglu python -m fastglu.bench.fp8_store",
        out_suffix="fp8-store",
        what={
            "fp8_store/blockwise": "the GLU's input h [T, 2F] saved as e4m3 codes with one fp32 "
            "scale per 1 x 128 block (fastglu: fastglu_glu_fp8_store_blockwise, one kernel; "
            "torch: the recipe as separate torch ops)",
            "fp8_store/fwd_blockwise": "the GLU's forward y = silu(gate) * up and its input's "
            "blockwise copy (fastglu_fused: fastglu_glu_fwd_fp8_store_blockwise, one kernel; "
            "fastglu_two_calls: fastglu_glu_fwd's kernel, then the copy's)",
            "fp8_store/fwd_fp8_blockwise": "the GLU's FP8 forward (y quantised 1 x 128 along F "
            "and along the tokens) and its input's blockwise copy (fastglu_fused: "
            "fastglu_glu_fwd_fp8_copy_blockwise, one kernel; fastglu_two_calls: "
            "fastglu_glu_fwd_fp8's kernel, then the copy's)",
            "fp8_store/bwd_blockwise": "the GLU's FP8 backward from its input's blockwise copy: dh "
            "quantised 1 x 128 along 2F and along the tokens (fastglu_fused: "
            "fastglu_glu_bwd_fp8_saved_blockwise, one kernel; fastglu_two_calls: fastglu_glu_bwd "
            "decoding the copy into dh, then fastglu_quantize_fp8)",
        },
        cases=lambda device: cases(T, ffns, device),
    )


if __name__ == "__main__":
    main()
