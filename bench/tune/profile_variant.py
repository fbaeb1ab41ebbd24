"""Which kernels one backward of a fastglu variant launches, and their device times (torch.profiler),
beside the backward's do_bench median: tells a slow kernel from a slow measurement.

    python bench/tune/profile_variant.py     # on a CUDA machine; S=2048 B=4 F=8192 bf16, the
                                             # quick-GeGLU and bias-SwiGLU calls of variants.py
"""

import torch
import triton.testing
from torch.profiler import ProfilerActivity, profile

import fastglu

S, B, F = 2048, 4, 8192
T = S * B
dev = "cuda"
x0 = torch.randn(S, B, 2 * F, device=dev, dtype=torch.bfloat16)
dy = torch.randn(S, B, F, device=dev, dtype=torch.bfloat16)
bias = torch.randn(2 * F, device=dev, dtype=torch.bfloat16).requires_grad_()
weights = torch.rand(T, 1, device=dev, dtype=torch.float32).requires_grad_()
cases = {
    "quick(bias, w, off 1, clamp 7)": lambda xx: fastglu.weighted_bias_quick_geglu_impl(
        xx, bias, weights.view(-1, 1), False, 1.0, 7.0
    ),
    "quick(bias, w, off 0, clamp 7)": lambda xx: fastglu.weighted_bias_quick_geglu_impl(
        xx, bias, weights.view(-1, 1), False, 0.0, 7.0
    ),
    "quick(bias, w[T], off 1, clamp 7)": lambda xx: fastglu.glu(
        xx,
        "quick_gelu",
        bias=bias,
        weights=weights.view(-1),
        clamp_value=7.0,
        glu_linear_offset=1.0,
    ),
    "bias_swiglu": lambda xx: fastglu.bias_swiglu_impl(xx, bias),
}
for name, fn in cases.items():
    x = x0.detach().clone().requires_grad_()
    y = fn(x)
    ms = triton.testing.do_bench(
        lambda: y.backward(dy, retain_graph=True),
        grad_to_none=[x, bias, weights],
        quantiles=[0.5, 0.2, 0.8],
    )
    print(f"{name}: bwd median {ms[0]:.4f} ms", flush=True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            x.grad = bias.grad = weights.grad = None
            y.backward(dy, retain_graph=True)
        torch.cuda.synchronize()
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" or getattr(e, "device_time_total", 0):
            print(
                f"   {e.key[:110]:110s} n={e.count} avg {e.device_time_total / max(e.count, 1):.1f} us"
            )
