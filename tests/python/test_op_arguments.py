"""Arguments of the raw torch.library ops and of the public functions that the kernels never see:
every integer code argument of a ``torch.ops.fastglu`` op (activation, layout, scaling, scale
layout, path, gemm) out of range raises ValueError naming the op, the argument and the value, in
the eager kernel (before any kernel launches) and in the fake implementation alike; nested tensors
passed to the public functions raise TypeError naming the tensor."""

import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import fastglu
from fastglu import _C

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
BF16 = torch.bfloat16
F32 = (0.0, 0.0, 1.0, 1.0)  # clamp_value, glu_linear_offset, gate_multiplier, down_multiplier
KERNELS = ("glu_fwd", "glu_bwd", "glu_fwd_fp8", "glu_bwd_fp8", "linear", "linear_glu_fwd")
KERNELS += ("linear_dglu_bwd",)


def t(*shape, dtype=BF16):
    return torch.randn(*shape).to(dtype)


def mlp_fp8_bwd_args():
    x, w1, w2 = t(4, 16), t(16, 16), t(16, 8)
    _, h, *saved, _, _ = torch.ops.fastglu.mlp_fp8_fwd(x, w1, w2, 0, 0, *F32, 2, True)
    return (t(4, 16), h, *saved, w1, w2, 0, 0, *F32, 2)


# op name -> (valid arguments, {position of an integer code: its name})
OPS = {
    "glu_fwd": (lambda: (t(4, 16), None, None, None, 0, 0, *F32), {4: "activation", 5: "layout"}),
    "glu_bwd": (
        lambda: (t(4, 8), t(4, 16), None, None, None, None, 0, 0, *F32, False, False),
        {6: "activation", 7: "layout"},
    ),
    "glu_fwd_fp8": (
        lambda: (t(4, 16), None, None, None, 0, 0, *F32, 0, 0, False, True, True),
        {4: "activation", 5: "layout", 10: "scaling", 11: "scale_layout"},
    ),
    "glu_bwd_fp8": (
        lambda: (t(4, 8), t(4, 16), None, None, None, 0, 0, *F32, 0, 0, False, True, True),
        {5: "activation", 6: "layout", 11: "scaling", 12: "scale_layout"},
    ),
    "linear_glu_fwd": (
        lambda: (t(4, 16), t(16, 16), None, None, 0, 0, *F32, True),
        {4: "activation", 5: "layout"},
    ),
    "linear_dglu_bwd": (
        lambda: (t(4, 16), t(16, 8), t(4, 16), None, 0, 0, *F32, True, False),
        {4: "activation", 5: "layout"},
    ),
    "mlp_fwd": (
        lambda: (t(4, 16), t(16, 16), t(16, 8), None, None, None, 0, 0, *F32, 0, True),
        {6: "activation", 7: "layout", 12: "path"},
    ),
    "mlp_fp8_fwd": (
        lambda: (t(4, 16), t(16, 16), t(16, 8), 0, 0, *F32, 2, True),
        {3: "activation", 4: "layout", 9: "gemm"},
    ),
    "mlp_fp8_bwd": (mlp_fp8_bwd_args, {8: "activation", 9: "layout", 14: "gemm"}),
}
CASES = [(op, i, name) for op, (_, codes) in OPS.items() for i, name in codes.items()]


def refuse_kernels(monkeypatch):
    """The C kernels raise AssertionError if called: a refused call launches nothing."""

    def refuse(*args):
        raise AssertionError("a kernel ran")

    for k in KERNELS:
        monkeypatch.setattr(_C, k, refuse)


@pytest.mark.parametrize("op,index,name", CASES)
def test_the_valid_arguments_run(op, index, name):
    """The arguments the test starts from are accepted (so the refusals below are the codes')."""
    make, _ = OPS[op]
    getattr(torch.ops.fastglu, op)(*make())


@pytest.mark.parametrize("bad", [7, -1, 2**40])
@pytest.mark.parametrize("op,index,name", CASES)
def test_out_of_range_codes_are_refused(op, index, name, bad, monkeypatch):
    make, _ = OPS[op]
    args = list(make())
    args[index] = bad
    refuse_kernels(monkeypatch)
    want = rf"^fastglu\.\w+: {name} code {re.escape(repr(bad))} is not one of \{{"
    with pytest.raises(ValueError, match=want):
        getattr(torch.ops.fastglu, op)(*args)
    with FakeTensorMode() as mode:  # the fake implementation (torch.compile's view of the op)
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(ValueError, match=want):
            getattr(torch.ops.fastglu, op)(*fake)


@pytest.mark.parametrize("value", [3.5e38, -1e300, float("inf"), float("nan")])
@pytest.mark.parametrize("op,index", [("glu_fwd", 7), ("glu_bwd", 9), ("linear_glu_fwd", 7)])
def test_scalars_beyond_float32_are_refused(op, index, value, monkeypatch):
    """A glu_linear_offset that float32 (the kernels' type) cannot hold raises ValueError naming it
    and the value the caller gave, in the eager kernel and the fake, before any kernel runs."""
    make, _ = OPS[op]
    args = list(make())
    args[index] = value
    refuse_kernels(monkeypatch)
    want = (
        rf"^fastglu\.\w+: glu_linear_offset must be finite in float32, got {re.escape(str(value))}"
    )
    with pytest.raises(ValueError, match=want):
        getattr(torch.ops.fastglu, op)(*args)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(ValueError, match=want):
            getattr(torch.ops.fastglu, op)(*fake)


# ---- nested tensors ------------------------------------------------------------------------------


def nested(*shapes):
    return torch.nested.nested_tensor([torch.randn(*s) for s in shapes])


X, W1, W2 = torch.randn(4, 16), torch.randn(32, 16), torch.randn(16, 16)
NESTED = [
    ("glu", "input", lambda n: fastglu.glu(n(16))),
    ("glu", "bias", lambda n: fastglu.glu(X, bias=n(16))),
    ("glu", "weights", lambda n: fastglu.glu(X, weights=n(1))),
    ("swiglu", "input", lambda n: fastglu.swiglu(n(16))),
    ("glu_mul", "gate", lambda n: fastglu.glu_mul(n(8), n(8))),
    ("silu_mul", "gate", lambda n: fastglu.silu_mul(n(8), X[:, :8])),
    ("bias_swiglu_impl", "input", lambda n: fastglu.bias_swiglu_impl(n(16), None)),
    ("glu_fp8", "x", lambda n: fastglu.fp8.glu_fp8(n(16))),
    ("glu_fp8", "up", lambda n: fastglu.fp8.glu_fp8(X[:, :8], up=n(8))),
    ("glu_fp8", "bias", lambda n: fastglu.fp8.glu_fp8(X, bias=n(16))),
    ("glu_fp8", "weights", lambda n: fastglu.fp8.glu_fp8(X, weights=n(1))),
    ("glu_bwd_fp8", "x", lambda n: fastglu.fp8.glu_bwd_fp8(X[:, :8], n(16))),
    ("glu_bwd_fp8", "dy", lambda n: fastglu.fp8.glu_bwd_fp8(n(8), X)),
    ("linear", "x", lambda n: fastglu.linear(n(16), W1)),
    ("linear_glu", "x", lambda n: fastglu.linear_glu(n(16), W1)),
    ("linear_glu", "w1", lambda n: fastglu.linear_glu(X, n(16))),
    ("linear_dglu_bwd", "h", lambda n: fastglu.linear_dglu_bwd(X, W2[:, :8], n(16))),
    ("mlp", "x", lambda n: fastglu.mlp(n(16), W1, W2)),
    ("mlp", "w1", lambda n: fastglu.mlp(X, n(16), W2)),
    ("mlp", "w2", lambda n: fastglu.mlp(X, W1, n(16))),
    ("mlp", "bias1", lambda n: fastglu.mlp(X, W1, W2, bias1=n(32))),
    ("mlp", "weights", lambda n: fastglu.mlp(X, W1, W2, weights=n(1))),
    ("mlp_fp8", "x", lambda n: fastglu.mlp_fp8(n(16), W1, W2)),
    ("mlp_fp8", "w1", lambda n: fastglu.mlp_fp8(X, n(16), W2)),
    ("mlp_fp8", "w2", lambda n: fastglu.mlp_fp8(X, W1, n(16))),
]


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
@pytest.mark.parametrize("fn,name,call", NESTED, ids=[f"{f}-{n}" for f, n, _ in NESTED])
def test_nested_tensors_are_refused_by_name(fn, name, call, layout):
    def n(width):  # a nested tensor of two ragged [rows, width] components
        return torch.nested.nested_tensor(
            [torch.randn(3, width), torch.randn(2, width)], layout=layout
        )

    with pytest.raises(TypeError, match=rf"^fastglu\.{fn}: {name} is a nested tensor"):
        call(n)
