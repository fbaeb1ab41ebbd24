"""Where fastglu.swiglu's forward + backward host time goes: autograd.Function variants that add
one piece at a time to an identity Function (a fresh output, the saved input, the forward's checks
and kernel, the backward's checks and allocation, its kernel), then fastglu.swiglu itself, timed in
interleaved rounds (fastglu.bench.host.median_of_rounds). The rows between the identity and the
variant with both kernels are the floor of any Python Function that allocates its output and
launches one kernel per direction, which bench/host_memory.py's targets are read against.

    python bench/tune/host_floor.py [cuda|cpu]      (the installed fastglu; [8, 2048] bf16 on CUDA)
"""

import sys

import torch

import fastglu
from fastglu import ops
from fastglu.bench.host import IdentityFunction, median_of_rounds

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
T, F = (8, 1024) if dev == "cuda" else (1, 1)
x = torch.randn(T, 2 * F, device=dev, dtype=torch.bfloat16, requires_grad=True)
xd = x.detach()
dy = torch.randn(T, F, device=dev, dtype=torch.bfloat16)
dx2 = torch.randn_like(xd)
P = ops.SILU


class NewOut(torch.autograd.Function):  # a fresh [T, F] output (no kernel), empty backward
    @staticmethod
    def forward(ctx, x):
        return x.new_empty((x.shape[0], x.shape[1] // 2))

    @staticmethod
    def backward(ctx, g):
        return torch.empty((g.shape[0], 2 * g.shape[1]), dtype=g.dtype, device=g.device)


class NewOutSave(NewOut):  # + x saved
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.new_empty((x.shape[0], x.shape[1] // 2))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.empty_like(x)


class FwdKernel(torch.autograd.Function):  # the real forward (checks + kernel), empty backward
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ops._fwd_common(P, x, None, None)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.empty_like(x)


class BothKernels(FwdKernel):  # the real forward and backward bodies, a plain Function
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return ops._bwd_common(P, g, x, None, None, False, False)[0]


class BwdNoLaunch(FwdKernel):  # backward: the checks and allocations, no launch
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        ops._fast_case(x, None, None)  # the checks, result unused
        return x.new_empty(x.shape)


def fb(fn, grad):
    def run():
        fn(x).backward(grad)
        x.grad = None

    return run


paths = {
    "identity (view) f+b": fb(IdentityFunction.apply, dx2),
    "new [T,F] output, empty bwd f+b": fb(NewOut.apply, dy),
    "+ x saved f+b": fb(NewOutSave.apply, dy),
    "+ forward kernel (ops._fwd_common) f+b": fb(FwdKernel.apply, dy),
    "+ backward checks/alloc, no launch f+b": fb(BwdNoLaunch.apply, dy),
    "+ backward kernel (ops._bwd_common) f+b": fb(BothKernels.apply, dy),
    "fastglu.swiglu f+b": fb(fastglu.swiglu, dy),
    "identity fwd": lambda: IdentityFunction.apply(x),
    "fastglu.swiglu fwd": lambda: fastglu.swiglu(x),
    "ops._fwd_common (no autograd)": lambda: ops._fwd_common(P, xd, None, None),
    "ops._bwd_common (main thread)": lambda: ops._bwd_common(P, dy, xd, None, None, False, False),
    "torch.empty_like(x)": lambda: torch.empty_like(xd),
}
us = median_of_rounds(paths, rounds=7, n=2000)
for k, v in us.items():
    print(f"{v:9.2f} us  {k}")
