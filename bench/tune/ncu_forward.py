"""ncu_forward.py — one forward of each provider's SwiGLU at each F, between cudaProfilerStart and
Stop, for Nsight Compute (``ncu --profile-from-start off``) to read each provider's kernel: its
launch configuration (grid, block, registers), duration and DRAM throughput. The providers and the
input are the benchmark's (python -m fastglu.bench: x [S, B, 2F] bf16, S = 2048, B = 4); every
provider runs once untimed first at each width, so torch.compile's compilation is not profiled
(and torch.compile compiles each width on its own: a static-shape kernel per width).

    ncu --profile-from-start off --section LaunchStats --section SpeedOfLight \\
        python bench/tune/ncu_forward.py 1024 8192

With ``--dirty-mib N`` each provider's forward follows a zero_() of an N MiB buffer inside the
profiled range, as in triton's do_bench (256 MiB there), so that ``ncu --cache-control none`` times
the kernel with the L2 full of dirty lines, as the benchmark does (the zero_ kernel is listed too).
"""

import argparse

import torch

from fastglu.bench.swiglu import PROVIDERS, load_provider

p = argparse.ArgumentParser()
p.add_argument("ffn", type=int, nargs="+")
p.add_argument("--providers", nargs="+", default=list(PROVIDERS), choices=PROVIDERS)
p.add_argument("--dirty-mib", type=int, default=0, help="zero_() this many MiB before each forward")
args = p.parse_args()
cache = (
    torch.empty(args.dirty_mib << 18, dtype=torch.int32, device="cuda") if args.dirty_mib else None
)
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
        if cache is not None:
            cache.zero_()
        torch.cuda.nvtx.range_push(f"{name} F={F}")
        fn(x)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("profiled:", ", ".join(f"{n} F={F}" for n in fns))
