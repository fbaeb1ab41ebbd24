"""Hazards of the autograd layer (issue 22, items 4-6): ``in_place=True`` on tensors an in-place
backward must not or cannot overwrite, and an efficient zero tensor as the upstream gradient.

- A leaf that requires grad (an ``nn.Parameter``), or a view of one, is refused at the forward by
  every entry point that takes ``in_place`` (torch refuses in-place operations on such leaves); the
  parameter keeps its values.
- Two-tensor forms whose gate and up share memory (``silu_mul(t, t)``), or a bias / weights sharing
  memory with the operands, are refused at the forward (the in-place backward cannot write both
  gradients); an upstream gradient sharing memory with the input is answered out of place; a
  backward that fails leaves the in-place Function able to run again.
- ``torch._efficientzerotensor`` (no memory, data_ptr 0) as dy gives zero gradients on every
  backward entry.

Fresh random inputs every run (never zeros); gradients against a float64 reference.
"""

import pytest
import torch
import torch.nn.functional as F

import fastglu
from fastglu import functional, modules, ops

glu_mod = ops

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}


def randn(*shape, dtype=torch.float32, device="cpu"):
    """N(0, 4) values, none of them zero."""
    t = torch.randn(*shape, dtype=torch.float32, device=device) * 2.0
    return torch.where(t == 0, torch.full_like(t, 0.5), t).to(dtype)


def rel_err(out, ref):
    out, ref = out.double().cpu(), ref.double().cpu()
    assert out.shape == ref.shape, (out.shape, ref.shape)
    return ((out - ref).norm() / ref.norm()).item()


def ref_grads(gate, up, dy):
    """float64 gradients of silu(gate) * up (Megatron's swiglu_back)."""
    g, u = gate.double().detach().requires_grad_(), up.double().detach().requires_grad_()
    torch.autograd.backward(F.silu(g) * u, dy.double())
    return g.grad, u.grad


# ---- item 4: a leaf that requires grad is never overwritten -------------------------------------


def _in_place_calls():
    """name -> f(t) calling an entry point with in_place=True on a [4, 2F] tensor (F = 16)."""
    return {
        "swiglu": lambda t: fastglu.swiglu(t, in_place=True),
        "glu": lambda t: fastglu.glu(t, "gelu_tanh", in_place=True),
        "glu-interleaved": lambda t: fastglu.glu(t, interleaved=True, in_place=True),
        "glu-bias": lambda t: fastglu.glu(t, bias=randn(32, device=t.device), in_place=True),
        "glu_mul-gate": lambda t: fastglu.glu_mul(
            t[:, :16],
            randn(4, 16, device=t.device).requires_grad_() * 1,
            "quick_gelu",
            in_place=True,
        ),
        "silu_mul-up": lambda t: fastglu.silu_mul(
            randn(4, 16, device=t.device).requires_grad_() * 1, t[:, 16:], in_place=True
        ),
        "SwiGLU module": lambda t: modules.SwiGLU(in_place=True)(t),
        "GeGLU module": lambda t: modules.GeGLU(in_place=True)(t),
        "QuickGeGLU module": lambda t: modules.QuickGeGLU(
            clamp_value=7.0, glu_linear_offset=1.0, in_place=True
        )(t),
        "SwiGLUFunction.apply": lambda t: fastglu.SwiGLUFunction.apply(t, False, False, True),
        "GLUFunction.apply": lambda t: fastglu.GLUFunction.apply(
            t, None, None, None, glu_mod.glu_params("silu"), (False, False, True, "glu")
        ),
        "_swiglu_dispatched": lambda t: functional._swiglu_dispatched(t, True),
    }


LEAVES = {
    "Parameter": lambda d: torch.nn.Parameter(randn(4, 32, device=d)),
    "requires_grad leaf": lambda d: randn(4, 32, device=d).requires_grad_(),
    "view of a Parameter": lambda d: torch.nn.Parameter(randn(4, 32, device=d))[:, :],
    "reshaped Parameter": lambda d: torch.nn.Parameter(randn(128, device=d)).view(4, 32),
    "view of a Parameter made under no_grad": "no_grad_view",
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("leaf", list(LEAVES))
@pytest.mark.parametrize("call", list(_in_place_calls()))
def test_in_place_refuses_a_leaf_that_requires_grad(call, leaf, device):
    if LEAVES[leaf] == "no_grad_view":
        p = torch.nn.Parameter(randn(4, 32, device=device))
        with torch.no_grad():
            t = p[:, :]  # a leaf that requires grad, sharing p's memory
    else:
        t = LEAVES[leaf](device)
    base = t if t._base is None else t._base
    before = base.detach().clone()
    with pytest.raises(
        ValueError, match=r"in_place=True: (input|gate|up) .*leaf tensor that requires grad"
    ):
        _in_place_calls()[call](t)
    assert torch.equal(base.detach(), before) and base.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_still_runs_on_non_leaves_and_without_grad_mode(device):
    x0 = randn(4, 32, device=device)
    dy = randn(4, 16, device=device)
    rdg, rdu = ref_grads(x0[:, :16], x0[:, 16:], dy)
    for call in _in_place_calls().values():
        x = x0.clone().requires_grad_()
        h = x * 1.0  # a non-leaf: its memory is fastglu's to overwrite
        y = call(h)
        assert y.shape == (4, 16)
    x = x0.clone().requires_grad_()
    fastglu.swiglu(x * 1.0, in_place=True).backward(dy)
    assert rel_err(x.grad, torch.cat((rdg, rdu), -1)) <= TOL[torch.float32]
    # without grad mode there is no backward: a Parameter is accepted and left as it is
    p = torch.nn.Parameter(x0.clone())
    with torch.no_grad():
        for name, call in _in_place_calls().items():
            if "apply" in name:  # (a Function's forward cannot see the caller's grad mode)
                continue
            call(p)
    assert torch.equal(p.detach(), x0)


def test_compiled_calls_refuse_a_leaf_as_eager_mode_does():
    torch._dynamo.reset()
    p = torch.nn.Parameter(randn(4, 32))
    for f in (lambda t: fastglu.glu(t, in_place=True), lambda t: fastglu.swiglu(t, in_place=True)):
        with pytest.raises(ValueError, match="leaf tensor that requires grad"):
            torch.compile(f, backend="eager")(p)
    x = randn(4, 32).requires_grad_()
    y = torch.compile(lambda t: fastglu.glu(t * 1.0, in_place=True), backend="eager")(x)
    assert y.shape == (4, 16)


@pytest.mark.parametrize("order", ["other op first", "other op last"])
def test_another_ops_saved_input_is_not_read_after_the_in_place_backward(order):
    """x saved by another op (sin) and given to swiglu(in_place=True): the autograd engine runs the
    later node first. sin made first: its backward runs after the in-place one and torch's version
    check raises (the in-place backward bumps x's version); sin made last: it reads x first and the
    gradient is right. Never a silent wrong answer."""
    x0 = randn(4, 32)
    x = x0.clone().requires_grad_()
    h = x * 1.0
    if order == "other op first":
        s = h.sin().sum()
        y = fastglu.swiglu(h, in_place=True).sum()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (y + s).backward()
        return
    y = fastglu.swiglu(h, in_place=True).sum()
    s = h.sin().sum()
    (y + s).backward()
    xr = x0.double().requires_grad_()
    (F.silu(xr[:, :16]) * xr[:, 16:]).sum().add(xr.sin().sum()).backward()
    assert rel_err(x.grad, xr.grad) <= TOL[torch.float32]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "call", ["swiglu_fwd", "swiglu_bwd", "glu_fwd", "glu_bwd", "glu_bwd two tensors"]
)
def test_out_that_requires_grad_is_refused_in_grad_mode(call, device):
    """The same fault through out=: the op layer writes a caller's tensor with no autograd record,
    so a Parameter (or any tensor that requires grad) as out= is refused while grad mode is on, as
    torch refuses out= arguments that require grad; under no_grad it is written."""
    x, dy = randn(4, 32, device=device), randn(4, 16, device=device)
    gate, up = x.chunk(2, -1)
    shape = {"swiglu_fwd": (4, 16), "glu_fwd": (4, 16)}.get(call, (4, 32))
    run = {
        "swiglu_fwd": lambda o: ops.swiglu_fwd(x, out=o),
        "swiglu_bwd": lambda o: ops.swiglu_bwd(dy, x, out=o),
        "glu_fwd": lambda o: glu_mod.glu_fwd(x, out=o),
        "glu_bwd": lambda o: glu_mod.glu_bwd(dy, x, out=o),
        "glu_bwd two tensors": lambda o: glu_mod.glu_bwd(
            dy, gate.contiguous(), up.contiguous(), out=(o[:, :16], o[:, 16:])
        ),
    }[call]
    for out in (
        torch.nn.Parameter(torch.full(shape, float("nan"), device=device)),
        torch.full(shape, float("nan"), device=device, requires_grad=True) * 1.0,
    ):
        before = out.detach().clone()
        with pytest.raises(ValueError, match=r"requires grad .*out= argument"):
            run(out)
        assert torch.equal(out.detach().isnan(), before.isnan())
    p = torch.nn.Parameter(torch.full(shape, float("nan"), device=device))
    with torch.no_grad():
        run(p)
    assert not p.isnan().any()


# ---- item 5: two tensors sharing memory; a backward that fails -----------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", ["silu_mul", "glu_mul"])
def test_in_place_refuses_gate_and_up_sharing_memory(entry, device):
    f = (
        (lambda g, u: fastglu.silu_mul(g, u, in_place=True))
        if entry == "silu_mul"
        else (lambda g, u: fastglu.glu_mul(g, u, "gelu_tanh", in_place=True))
    )
    a = randn(6, 40, device=device).requires_grad_()
    h = a * 1.0
    before = h.detach().clone()
    for gate, up in (
        (h[:, :20], h[:, :20]),  # the same memory
        (h[:, :20], h[:, 1:21]),  # overlapping column windows
        (h[:3, :20], h[1:4, :20]),
    ):  # overlapping rows
        with pytest.raises(ValueError, match=r"in_place=True: gate and up share memory"):
            f(gate, up)
    assert torch.equal(h.detach(), before)


@pytest.mark.parametrize("device", DEVICES)
def test_silu_mul_of_one_tensor_out_of_place_sums_both_gradients(device):
    t0 = randn(5, 24, device=device)
    dy = randn(5, 24, device=device)
    t = t0.clone().requires_grad_()
    fastglu.silu_mul(t * 1.0, t * 1.0).backward(dy)
    rg, ru = ref_grads(t0, t0, dy)
    assert rel_err(t.grad, rg + ru) <= TOL[torch.float32]


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_accepts_the_disjoint_halves_of_one_tensor(device):
    """gate and up as the two column halves of one [T, 2F] tensor share no byte (rows interleave):
    accepted, and the gradients land in place."""
    x0 = randn(7, 48, device=device)
    dy = randn(7, 24, device=device)
    x = x0.clone().requires_grad_()
    h = x * 1.0
    gate, up = h.chunk(2, -1)
    fastglu.silu_mul(gate, up, in_place=True).backward(dy)
    rdg, rdu = ref_grads(x0[:, :24], x0[:, 24:], dy)
    assert rel_err(x.grad, torch.cat((rdg, rdu), -1)) <= TOL[torch.float32]
    assert torch.equal(h, x.grad)  # written over h


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_refuses_bias_or_weights_sharing_memory_with_the_input(device):
    a = randn(4, 32, device=device).requires_grad_()
    h = a * 1.0
    before = h.detach().clone()
    with pytest.raises(ValueError, match="in_place=True: bias shares memory with input"):
        fastglu.glu(h, bias=h[0], in_place=True)
    with pytest.raises(ValueError, match="in_place=True: weights shares memory with input"):
        fastglu.glu(h, weights=h[:, :1], in_place=True)
    g = a[:, :16] * 1.0
    with pytest.raises(ValueError, match="in_place=True: bias shares memory with gate"):
        fastglu.glu_mul(
            g,
            randn(4, 16, device=device).requires_grad_() * 1.0,
            bias=g.reshape(-1)[:32],
            in_place=True,
        )
    assert torch.equal(h.detach(), before)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", ["swiglu", "glu", "silu_mul"])
def test_in_place_with_dy_sharing_the_inputs_memory_runs_out_of_place(entry, device):
    """grad_outputs given as a view of the input: the in-place backward cannot read dy while it
    writes over it; it runs out of place (the C library refused it in the backward before, and a
    second try then said the input was overwritten)."""
    x0 = randn(5, 32, device=device)
    x = x0.clone().requires_grad_()
    h = x * 1.0
    if entry == "swiglu":
        y = fastglu.swiglu(h, in_place=True)
    elif entry == "glu":
        y = fastglu.glu(h, in_place=True)
    else:
        y = fastglu.silu_mul(h[:, :16], h[:, 16:], in_place=True)
    dy = h.detach()[:, 8:24]  # shares h's memory
    dy_values = dy.clone()
    (gx,) = torch.autograd.grad(y, x, dy)
    rdg, rdu = ref_grads(x0[:, :16], x0[:, 16:], dy_values)
    assert rel_err(gx, torch.cat((rdg, rdu), -1)) <= TOL[torch.float32]


@pytest.mark.parametrize("entry", ["swiglu", "glu"])
def test_a_failed_in_place_backward_can_run_again(entry, monkeypatch):
    """A backward whose kernel call is refused has written nothing: running it again must work,
    not claim that the saved input was overwritten."""
    x0 = randn(4, 32)
    dy = randn(4, 16)
    x = x0.clone().requires_grad_()
    h = x * 1.0
    y = fastglu.swiglu(h, in_place=True) if entry == "swiglu" else fastglu.glu(h, in_place=True)
    mod, name = ops, "backward"  # (fastglu.swiglu and fastglu.glu share GLUFunction)
    real = getattr(mod, name)
    calls = []

    def refuse_once(*args, **kwargs):
        if not calls:
            calls.append(1)
            raise ValueError("fastglu: refused (a stand-in for any refused call)")
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, name, refuse_once)
    with pytest.raises(ValueError, match="stand-in"):
        y.backward(dy, retain_graph=True)
    y.backward(dy, retain_graph=True)
    rdg, rdu = ref_grads(x0[:, :16], x0[:, 16:], dy)
    assert rel_err(x.grad, torch.cat((rdg, rdu), -1)) <= TOL[torch.float32]
    with pytest.raises(RuntimeError, match="only once"):
        y.backward(dy)


# ---- item 6: an efficient zero tensor as the upstream gradient ---------------------------------


def _zero_like(y):
    z = torch._efficientzerotensor(tuple(y.shape), dtype=y.dtype, device=y.device)
    assert z._is_zerotensor() and z.data_ptr() == 0
    return z


ZERO_DY_CALLS = {
    # name -> (f(x, bias, weights) -> y, uses bias, uses weights)
    "swiglu": (lambda x, b, w: fastglu.swiglu(x), False, False),
    "swiglu in_place": (lambda x, b, w: fastglu.swiglu(x * 1.0, in_place=True), False, False),
    "swiglu fp8 store": (
        lambda x, b, w: fastglu.SwiGLUFunction.apply(x, True, False, False),
        False,
        False,
    ),
    "bias_swiglu_impl no bias": (lambda x, b, w: fastglu.bias_swiglu_impl(x, None), False, False),
    "bias_swiglu_impl": (lambda x, b, w: fastglu.bias_swiglu_impl(x, b), True, False),
    "weighted_bias_swiglu_impl": (
        lambda x, b, w: fastglu.weighted_bias_swiglu_impl(x, None, w),
        False,
        True,
    ),
    "bias_geglu_impl": (lambda x, b, w: fastglu.bias_geglu_impl(x, b), True, False),
    "weighted_bias_quick_geglu_impl": (
        lambda x, b, w: fastglu.weighted_bias_quick_geglu_impl(
            x, b, w, linear_offset=1.0, clamp_value=7.0
        ),
        True,
        True,
    ),
    "glu": (lambda x, b, w: fastglu.glu(x, "gelu_tanh", bias=b, weights=w), True, True),
    "glu interleaved in_place": (
        lambda x, b, w: fastglu.glu(x * 1.0, bias=b, weights=w, interleaved=True, in_place=True),
        True,
        True,
    ),
    "glu fp8 True": (lambda x, b, w: fastglu.glu(x, bias=b, fp8_input_store=True), True, False),
    "glu fp8 per_row": (
        lambda x, b, w: fastglu.glu(x, weights=w, fp8_input_store="per_row"),
        False,
        True,
    ),
    "silu_mul": (lambda x, b, w: fastglu.silu_mul(*x.chunk(2, -1)), False, False),
    "silu_mul in_place": (
        lambda x, b, w: fastglu.silu_mul(*(x * 1.0).chunk(2, -1), in_place=True),
        False,
        False,
    ),
    "glu_mul": (
        lambda x, b, w: fastglu.glu_mul(*x.chunk(2, -1), "quick_gelu", bias=b, weights=w),
        True,
        True,
    ),
    "SwiGLU module": (lambda x, b, w: modules.SwiGLU()(x, b, w), True, True),
    "swiglu_fwd op": (lambda x, b, w: torch.ops.fastglu.swiglu_fwd(x), False, False),
    "glu_fwd op": (
        lambda x, b, w: torch.ops.fastglu.glu_fwd(x, None, b, w, 0, 0, 0.0, 0.0, 1.0, 1.0),
        True,
        True,
    ),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("call", list(ZERO_DY_CALLS))
def test_efficient_zero_dy_gives_zero_gradients(call, dtype, device):
    f, use_b, use_w = ZERO_DY_CALLS[call]
    x = randn(3, 5, 64, dtype=dtype, device=device).requires_grad_()
    b = randn(64, dtype=dtype, device=device).requires_grad_() if use_b else None
    w = torch.rand(15, 1, device=device).add_(0.5).requires_grad_() if use_w else None
    y = f(x, b, w)
    inputs = [t for t in (x, b, w) if t is not None]
    grads = torch.autograd.grad(y, inputs, _zero_like(y))
    for t, g in zip(inputs, grads):
        assert g is not None and g.shape == t.shape and g.dtype == t.dtype
        assert torch.equal(g, torch.zeros_like(t)), call


@pytest.mark.parametrize("device", DEVICES)
def test_efficient_zero_dy_in_the_op_layer(device):
    """ops.swiglu_bwd and glu.glu_bwd (also with out=, pre-filled with a sentinel) give zeros."""
    x = randn(6, 32, device=device)
    z = torch._efficientzerotensor((6, 16), dtype=torch.float32, device=device)
    assert torch.equal(ops.swiglu_bwd(z, x), torch.zeros(6, 32, device=device))
    out = torch.full((6, 32), float("nan"), device=device)
    assert ops.swiglu_bwd(z, x, out=out) is out and torch.equal(out, torch.zeros_like(out))
    b, w = randn(32, device=device), torch.rand(6, 1, device=device)
    g = glu_mod.glu_bwd(z, x, bias=b, weights=w, activation="quick_gelu")
    assert torch.equal(g.dx, torch.zeros_like(x)) and torch.equal(g.dbias, torch.zeros_like(b))
    assert torch.equal(g.dweights, torch.zeros_like(w))
    gate, up = x.chunk(2, -1)
    outs = (
        torch.full((6, 16), float("nan"), device=device),
        torch.full((6, 16), float("nan"), device=device),
    )
    g = glu_mod.glu_bwd(z, gate, up, out=outs)
    assert g.dx is outs[0] and g.d_up is outs[1]
    assert torch.equal(outs[0], torch.zeros(6, 16, device=device)) and torch.equal(outs[1], outs[0])
    # the dtype, shape and device checks still apply
    with pytest.raises(TypeError, match="dy has dtype"):
        ops.swiglu_bwd(torch._efficientzerotensor((6, 16), dtype=torch.float16, device=device), x)
    with pytest.raises(ValueError, match="dy has shape"):
        glu_mod.glu_bwd(torch._efficientzerotensor((6, 15), device=device), x)
