"""python -m fastglu.bench.fp8_store: the saved input's blockwise FP8 copy (``fp8_input_store=
"blockwise"``, the C library's fastglu_glu_fp8_store_blockwise: one kernel) against its floor and
against the same recipe in torch ops, on the GPU.

The operand is the SwiGLU input h [T, 2F] (bf16, split layout: gate's 1 x 128 blocks, then up's),
as the forward saves it for the backward. Read once; written: the codes [T, 2F] and the scales
[T, 2 ceil(F / 128)] fp32. floor: those bytes at the device's copy bandwidth. torch ops: the recipe
as separate passes (the blocks' amax, the scales, the quotients, the cast), with true divisions, so
that its codes and scales equal the kernel's bit for bit (checked first, each case). rounds: the
providers timed in turn, their order rotated each round; the median of the rounds.

    python -m fastglu.bench.fp8_store [--tokens 8192] [--ffn 2880 8192 14336] [--rounds 3]
                                      [--out store.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from fastglu import ops

from .swiglu import copy_bandwidth, make_bench, rotated_rounds

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


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--ffn", type=int, nargs="+", default=[2880, 8192, 14336])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rep", type=int, default=100, help="do_bench's rep (ms)")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("python -m fastglu.bench.fp8_store needs a CUDA GPU")
    bench = make_bench(True, args.rep)
    bw = copy_bandwidth(bench)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e9:.0f} GB/s")
    print(
        f"{'T':>6s} {'F':>6s} {'fastglu ms':>10s} {'floor ms':>9s} {'x floor':>8s} "
        f"{'torch ms':>9s} {'speedup':>8s} {'spread':>7s} check"
    )
    T, rows = args.tokens, []
    for F in args.ffn:
        h = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16) * 3

        def ours(h=h):
            return ops._fp8_store_blockwise(h, None, None, "bench")

        def ref(h=h, F=F):
            return store_torch(h, F)

        a8, _, a_s = ours()
        b8, b_s = ref()
        ok = torch.equal(a8.view(torch.uint8), b8.view(torch.uint8)) and torch.equal(a_s, b_s)
        times = rotated_rounds(bench, {"fastglu": ours, "torch": ref}, args.rounds)
        t_f, t_t = statistics.median(times["fastglu"]), statistics.median(times["torch"])
        spread = (max(times["fastglu"]) - min(times["fastglu"])) / t_f
        floor = floor_bytes(T, F) / bw * 1e3
        rows.append(
            {
                "T": T,
                "F": F,
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
        )
        print(
            f"{T:6d} {F:6d} {t_f:10.4f} {floor:9.4f} {t_f / floor:8.3f} {t_t:9.4f} "
            f"{t_t / t_f:8.2f} {spread:7.3f} {'ok' if ok else 'MISMATCH'}"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
