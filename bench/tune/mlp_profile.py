"""Where the bf16 MLP block's forward + backward spends its GPU time, per path, at one shape.

    python bench/tune/mlp_profile.py [--shape T,H,F] [--iters N] [--trace DIR]

For each path (fastglu.mlp's default, fastglu.mlp(fused=True), cuBLAS + fastglu.swiglu) it times
the step with CUDA events (median of 20 steps, L2 not flushed), then runs `iters` steps under
torch.profiler and prints each kernel's time per step; --trace also writes a Chrome trace of two
steps per path (host and GPU). The paths run one after another, and the profiler's kernel times
drift from window to window in one process (up to 35 %, not with the SM clock:
bench/results/nvidia-h200/2026-12-04-05-mlp-quack-tuned/kernel-drift.txt, clock-under-load.txt):
compare kernels within a path, and paths only through python -m fastglu.bench.mlp (rounds,
rotated order).
A development tool: it checks nothing and asserts nothing.
"""

import argparse
import statistics

import torch
import torch.nn.functional as F_
from torch.profiler import ProfilerActivity, profile

import fastglu


def paths():
    return {
        "default": lambda x, w1, w2: fastglu.mlp(x, w1, w2),
        "fused": lambda x, w1, w2: fastglu.mlp(x, w1, w2, fused=True),
        "cublas_fastglu": lambda x, w1, w2: F_.linear(fastglu.swiglu(F_.linear(x, w1)), w2),
    }


def step(fn, x, w1, w2, do):
    for t in (x, w1, w2):
        t.grad = None
    fn(x, w1, w2).backward(do)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="8192,4096,14336", help="T,H,F")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument(
        "--trace", help="also write a Chrome trace of 2 steps per path (host and GPU) here"
    )
    p.add_argument(
        "--paths", nargs="+", default=["default", "fused", "cublas_fastglu"], help="in this order"
    )
    a = p.parse_args()
    T, H, F = (int(v) for v in a.shape.split(","))
    torch.manual_seed(0)
    dev, dt = "cuda", torch.bfloat16
    x = torch.randn(T, H, device=dev, dtype=dt, requires_grad=True)
    w1 = (torch.randn(2 * F, H, device=dev, dtype=dt) / H**0.5).requires_grad_()
    w2 = (torch.randn(H, F, device=dev, dtype=dt) / F**0.5).requires_grad_()
    do = torch.randn(T, H, device=dev, dtype=dt)
    for name in a.paths:
        fn = paths()[name]
        for _ in range(3):
            step(fn, x, w1, w2, do)
        ms = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step(fn, x, w1, w2, do)
            e.record()
            torch.cuda.synchronize()
            ms.append(s.elapsed_time(e))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.iters):
                step(fn, x, w1, w2, do)
            torch.cuda.synchronize()
        rows = [
            (ev.device_time_total / a.iters / 1e3, ev.count // a.iters, ev.key)
            for ev in prof.key_averages()
            if ev.device_time_total > 0 and ev.device_type == torch.autograd.DeviceType.CUDA
        ]
        rows.sort(reverse=True)
        if a.trace:
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as tr:
                for _ in range(2):
                    step(fn, x, w1, w2, do)
                torch.cuda.synchronize()
            tr.export_chrome_trace(f"{a.trace}/trace_{name}_f{F}.json")
        print(
            f"\n== {name}  T={T} H={H} F={F}: step {statistics.median(ms):.3f} ms (events), "
            f"kernels {sum(r[0] for r in rows):.3f} ms per step"
        )
        for t, n, key in rows:
            print(f"  {t:8.3f} ms  x{n:<3d} {key[:110]}")


if __name__ == "__main__":
    main()
