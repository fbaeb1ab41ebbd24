"""Timing of fc2's dgrad with the dGLU epilogue (fastglu.linear_dglu_bwd) on the GPU against
the unfused path it replaces and against the plain cuBLAS dgrad GEMM.

  python3 bench/gemm/dglu_bench.py [--dtype bf16] [--rounds 3]   (the installed fastglu, CUDA)

Providers, per (T, H, F) workload of bench/gemm (the fc2 dgrad of the MLP, SwiGLU, SPLIT h):
  fused      linear_dglu_bwd(d_out, w2, h): dh and y (the sm_90a kernel where it takes the shape)
  fused+dw   the same with per-token weights and their gradient (on sm_90a the row-owner order:
             a block takes all column tiles of its 128 tokens)
  unfused    dY = d_out @ w2 (cuBLAS), then y = fastglu.glu(h) and its backward (autograd)
  cublas     d_out @ w2 alone (the GEMM the fused kernel extends)
Each: triton.testing.do_bench median (rep=100) when triton is installed, else the median of 50 CUDA
event-timed calls; rounds rotate the providers' order; the report is the median over rounds in ms
and the fused path's ratio to the others. No assertions: a measurement, not a test. The A/B of the
kernel's variants in one process (earlier epilogue, main loop alone): bench/gemm/sm90_dev.py --dglu.
"""

import argparse
import statistics

import torch

import fastglu
from fastglu import linear_dglu_bwd

WORKLOADS = [
    (8192, 4096, 8192),
    (8192, 4096, 14336),
    (16384, 2880, 2880),
    (4096, 8192, 3584),
    (1024, 4096, 14336),
]


def timer():
    try:
        from triton.testing import do_bench

        return lambda f: do_bench(f, rep=100, quantiles=[0.5])
    except ImportError:

        def bench(f):
            f()
            torch.cuda.synchronize()
            times = []
            for _ in range(50):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                f()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b))
            return statistics.median(times)

        return bench


def unfused(d_out, w2, h):
    dy = d_out @ w2
    hh = h.detach().requires_grad_(True)
    y = fastglu.glu(hh)
    (dh,) = torch.autograd.grad(y, hh, dy)
    return dh, y.detach()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    bench = timer()
    print(
        f"{'T':>6} {'H':>6} {'F':>6}  {'fused':>8} {'fused+dw':>9} {'unfused':>8} {'cublas':>8}  "
        f"{'unfused/fused':>13} {'cublas/fused':>12}"
    )
    for T, H, F in WORKLOADS:
        d_out = torch.randn(T, H, device="cuda", dtype=dt)
        w2 = (torch.randn(H, F, device="cuda") / H**0.5).to(dt)
        h = torch.randn(T, 2 * F, device="cuda", dtype=dt)
        wt = torch.rand(T, device="cuda") + 0.1
        providers = {
            "fused": lambda: linear_dglu_bwd(d_out, w2, h),
            "fused+dw": lambda: linear_dglu_bwd(d_out, w2, h, weights=wt, return_dweights=True),
            "unfused": lambda: unfused(d_out, w2, h),
            "cublas": lambda: d_out @ w2,
        }
        names = list(providers)
        res = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                res[n].append(bench(providers[n]))
        med = {n: statistics.median(v) for n, v in res.items()}
        print(
            f"{T:>6} {H:>6} {F:>6}  {med['fused']:8.3f} {med['fused+dw']:9.3f} {med['unfused']:8.3f} "
            f"{med['cublas']:8.3f}  {med['unfused'] / med['fused']:13.2f} {med['cublas'] / med['fused']:12.2f}"
        )


if __name__ == "__main__":
    main()
