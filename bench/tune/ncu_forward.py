"""ncu_forward.py — one forward of each provider's SwiGLU at each F, between cudaProfilerStart and
Stop, for Nsight Compute (``ncu --profile-from-start off``) to read each provider's kernel: its
launch configuration (grid, block, registers), duration and DRAM throughput. The providers and the
input are the benchmark's (python -m fastglu.bench: x [S, B, 2F] bf16, S = 2048, B = 4); every
provider runs once untimed first at each width, so torch.compile's compilation is not profiled.
(Run 2026-12-01-11 used a first version that compiled once for all widths: its torch.compile rows
are the dynamic-shape kernel.)

    ncu --profile-from-start off --section LaunchStats --section SpeedOfLight \\
        python bench/tune/ncu_forward.py 1024 8192
"""
import argparse

import torch

from fastglu.bench.swiglu import PROVIDERS, load_provider

p = argparse.ArgumentParser()
p.add_argument("ffn", type=int, nargs="+")
p.add_argument("--providers", nargs="+", default=list(PROVIDERS), choices=PROVIDERS)
args = p.parse_args()
fns = {}
for name in args.providers:
    try:
        fns[name] = load_provider(name, True)[0]
    except Exception as e:  # a peer that does not import here is left out, saying so
        print(f"{name}: not available ({e})")
for F in args.ffn:
    # as the benchmark does: torch.compile's caches dropped per width, so that each width's kernel is
    # the static one a fresh process compiles (not the dynamic-shape one of a second width)
    torch._dynamo.reset()
    x = torch.randn(2048, 4, 2 * F, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    for fn in fns.values():
        fn(x)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name, fn in fns.items():
        torch.cuda.nvtx.range_push(f"{name} F={F}")
        fn(x)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled:", ", ".join(f"{n} F={F}" for n in fns))
