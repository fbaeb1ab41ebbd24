"""fastglu.swiglu's autograd.Function against Functions with the same forward and backward bodies
(ops._fwd_common / ops._bwd_common, no option handling): one input (One), the six inputs
GLUFunction takes (Six), GLUFunction itself, each applied without Function.apply's Python layer;
forward + backward and forward alone, interleaved rounds, beside an identity Function. Shows
whether the Function's shape (its inputs, its option handling) costs host time beyond its bodies.

    python bench/tune/host_function_args.py        (the installed fastglu, a CUDA device)
"""

import torch

import fastglu
from fastglu import functional, ops
from fastglu.bench.host import IdentityFunction, median_of_rounds

x = torch.randn(8, 2048, dtype=torch.bfloat16, device="cuda", requires_grad=True)
dy = torch.randn(8, 1024, dtype=torch.bfloat16, device="cuda")
g2 = torch.randn(8, 2048, dtype=torch.bfloat16, device="cuda")
P = ops.SILU


class One(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = ops._fwd_common(P, x, None, None)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return ops._bwd_common(P, g, x, None, None, False, False)[0]


class Six(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, up, bias, weights, params, options):
        y = ops._fwd_common(P, x, None, None)
        ctx.save_for_backward(x, up, bias, weights, None)
        ctx.call = (params, "swiglu", False)
        return y

    @staticmethod
    def backward(ctx, g):
        params, fn, ip = ctx.call
        x, up, bias, weights, s = ctx.saved_tensors
        return ops._bwd_common(P, g, x, None, None, False, False)[0], None, None, None, None, None


capply = torch._C._FunctionBase.__dict__["apply"]
one_c = capply.__get__(None, One)
six_c = capply.__get__(None, Six)
opts = (False, False, False, "swiglu")


def fb(f):
    def r():
        f().backward(dy)
        x.grad = None

    return r


paths = {
    "identity": (lambda: (IdentityFunction.apply(x).backward(g2), setattr(x, "grad", None))),
    "One lean": fb(lambda: one_c(x)),
    "Six lean": fb(lambda: six_c(x, None, None, None, P, opts)),
    "GLUFunction lean": fb(lambda: functional._glu_c_apply(x, None, None, None, P, opts)),
    "fastglu.swiglu": fb(lambda: fastglu.swiglu(x)),
}
for k, v in median_of_rounds(paths, 11, 2000).items():
    print(f"{v:8.2f} {k}")
print("forward only")
paths = {
    "identity": lambda: IdentityFunction.apply(x),
    "One lean": lambda: one_c(x),
    "Six lean": lambda: six_c(x, None, None, None, P, opts),
    "GLUFunction lean": lambda: functional._glu_c_apply(x, None, None, None, P, opts),
    "fastglu.swiglu": lambda: fastglu.swiglu(x),
}
for k, v in median_of_rounds(paths, 11, 2000).items():
    print(f"{v:8.2f} {k}")
