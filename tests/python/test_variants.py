"""fastglu's gated-linear-unit family (``fastglu.glu``, ``silu_mul``, Megatron's signatures) against a
float64 reference written from the formulas in include/fastglu.h, on CPU (CI) and CUDA (device).

Fresh random inputs every run (never zeros); outputs given through ``out=`` are pre-filled with NaN
so an element the kernel did not write fails the relative-norm check. The bias and weights
gradients (allocated by fastglu with torch.empty) are checked element-wise through the same norm.
"""

import math

import pytest
import torch

import fastglu
from fastglu.ops import glu_bwd, glu_bwd_workspace_bytes, glu_fwd

WIDTHS = [1, 3, 768, 1408, 3420]
ROWS = [1, 257]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")


# ---- the float64 reference (include/fastglu.h, "The gated-linear-unit family") ------------------


def act_and_grad(name, z):
    """act(z), act'(z) as the header writes them (float64)."""
    if name == "silu":
        s = torch.sigmoid(z)
        return z * s, s * (1 + z * (1 - s))
    if name == "gelu_tanh":
        th = torch.tanh(0.79788456 * z * (1 + 0.044715 * z * z))
        return 0.5 * z * (1 + th), 0.5 * z * (1 - th * th) * (
            0.79788456 + 0.1070322243 * z * z
        ) + 0.5 * (1 + th)
    s = torch.sigmoid(1.702 * z)
    return z * s, s * (1 + 1.702 * z * (1 - s))


def split(x, interleaved):
    if interleaved:
        return x[..., 0::2], x[..., 1::2]
    return x.chunk(2, -1)


def with_scale(t, scale):
    """t carrying `scale`: an elementwise bound on the magnitudes of the terms t is computed from,
    used by rel_err for values that cancel to ~0."""
    t.scale = scale
    return t


def merge(a, b, interleaved):
    cat = (
        (lambda p, q: torch.stack((p, q), -1).flatten(-2))
        if interleaved
        else (lambda p, q: torch.cat((p, q), -1))
    )
    out = cat(a, b)
    if getattr(a, "scale", None) is not None and getattr(b, "scale", None) is not None:
        with_scale(out, cat(a.scale, b.scale))
    return out


def reference(
    g,
    u,
    dy,
    *,
    activation="silu",
    bias=None,
    weights=None,
    clamp_value=None,
    glu_linear_offset=0.0,
    gate_multiplier=1.0,
    down_multiplier=1.0,
    interleaved=False,
):
    """(y, d_gate, d_up, dbias, dweights) in float64 from the stored values g, u ([..., F] each).
    The clamp bound is torch.clamp's on a tensor of g's dtype: clamp_value rounded through float32
    to that dtype. Each result carries `.scale` (see rel_err)."""
    dtype = g.dtype
    g, u, dy = g.double(), u.double(), dy.double()
    lead = g.shape[:-1]
    if clamp_value is not None and clamp_value > 0:
        c = torch.tensor(float(clamp_value), dtype=torch.float32).to(dtype).item()
        g2, u2 = torch.clamp(g, max=c), torch.clamp(u, -c, c)
        pass_g, pass_u = g <= c, (u >= -c) & (u <= c)
    else:
        g2, u2 = g, u
        pass_g = pass_u = torch.ones_like(g, dtype=torch.bool)
    if bias is not None:
        bg, bu = split(bias.double(), interleaved)
    else:
        bg = bu = torch.zeros((), dtype=torch.float64)
    w = (
        torch.ones(lead + (1,), dtype=torch.float64, device=g.device)
        if weights is None
        else weights.double().reshape(lead + (1,))
    )
    a, v = g2 + bg, u2 + bu
    z = gate_multiplier * a
    act, dact = act_and_grad(activation, z)
    y = down_multiplier * w * act * (v + glu_linear_offset)
    e = down_multiplier * w * dy
    d_a = e * (v + glu_linear_offset) * dact * gate_multiplier
    d_v = e * act
    zero = torch.zeros((), dtype=torch.float64)
    d_gate, d_up = torch.where(pass_g, d_a, zero), torch.where(pass_u, d_v, zero)
    F = g.shape[-1]
    dbias = merge(d_a.reshape(-1, F).sum(0), d_v.reshape(-1, F).sum(0), interleaved)
    dweights = (down_multiplier * act * (v + glu_linear_offset) * dy).sum(-1)
    # magnitudes of the terms (fp32 rounding of the sums a, v and of 1 + tanh -> 0 in gelu's tail):
    # |act(z)| and its rounding error scale with A = |m_g| (|g'| + |b_gate|), act'(z) with 1 + A,
    # v + o with V = |u'| + |b_up| + |o|
    V = u2.abs() + bu.abs() + abs(glu_linear_offset)
    A = abs(gate_multiplier) * (g2.abs() + bg.abs())
    s_da, s_dv = (e * gate_multiplier).abs() * V * (1 + A), e.abs() * A
    with_scale(y, (down_multiplier * w).abs() * A * V)
    with_scale(d_gate, s_da)
    with_scale(d_up, s_dv)
    with_scale(dbias, merge(s_da.reshape(-1, F).sum(0), s_dv.reshape(-1, F).sum(0), interleaved))
    with_scale(dweights, (abs(down_multiplier) * A * V * dy.abs()).sum(-1))
    if weights is not None:
        dweights = with_scale(
            dweights.reshape(weights.shape), dweights.scale.reshape(weights.shape)
        )
    return y, d_gate, d_up, dbias, dweights


def rel_err(out, ref):
    """||out - ref|| / ||ref||, the denominator no less than a tenth of ||ref.scale|| when the
    reference carries one: a value whose terms cancel to ~0 (gelu_tanh's left tail, up + b_up +
    offset ~ 0) is held to an accuracy relative to its terms' size, not to itself. On random data
    of many elements ||ref|| is the larger: the test is then the plain relative norm."""
    scale = getattr(ref, "scale", None)
    tiny = torch.finfo(out.dtype).tiny if out.dtype.is_floating_point else 0.0
    out, ref = out.double().cpu(), ref.double().cpu()
    assert out.shape == ref.shape, (out.shape, ref.shape)
    # (nor less than the dtype's smallest normal per element: a subnormal result is stored with
    # the subnormal spacing, e.g. 6e-8 for fp16)
    denom = torch.maximum(
        ref.norm(), torch.tensor(tiny * max(out.numel(), 1) ** 0.5, dtype=torch.float64)
    )
    if scale is not None:
        denom = torch.maximum(denom, 0.1 * scale.double().cpu().norm())
    err = ((out - ref).norm() / denom.clamp_min(1e-30)).item()
    return float("inf") if err != err else err  # NaN (an unwritten sentinel) never passes


def randn(*shape, dtype, device, scale=2.0):
    return (torch.randn(*shape, dtype=torch.float32, device=device) * scale).to(dtype)


def sentinel(shape, dtype, device):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


# The variants: options of fastglu.glu; "bias" / "weights" name the dtype of those tensors
# ("input": the input's dtype).
VARIANTS = {
    "swiglu": dict(activation="silu"),
    "swiglu-bias": dict(activation="silu", bias=True),
    "swiglu-weights-fp32": dict(activation="silu", weights=torch.float32),
    "swiglu-clamp": dict(activation="silu", clamp_value=1.5),
    "geglu-bias": dict(activation="gelu_tanh", bias=True),
    "quick-geglu-gpt-oss": dict(
        activation="quick_gelu",
        bias=True,
        weights=torch.float32,
        glu_linear_offset=1.0,
        clamp_value=2.5,
    ),
    "swiglu-interleaved-bias": dict(activation="silu", bias=True, interleaved=True),
    "liger-multipliers": dict(activation="silu", gate_multiplier=0.7, down_multiplier=1.3),
    "geglu-everything": dict(
        activation="gelu_tanh",
        bias=True,
        weights="input",
        clamp_value=3.0,
        glu_linear_offset=-0.5,
        gate_multiplier=1.1,
        down_multiplier=0.8,
        interleaved=True,
    ),
}


def make_case(variant, rows, F, dtype, device, lead=None):
    """Inputs of a variant: x [lead, 2F], dy, bias [2F] or None, weights [tokens, 1] or None, options."""
    opts = dict(VARIANTS[variant])
    lead = (rows,) if lead is None else lead
    x = randn(*lead, 2 * F, dtype=dtype, device=device)
    dy = randn(*lead, F, dtype=dtype, device=device)
    bias = randn(2 * F, dtype=dtype, device=device, scale=0.5) if opts.pop("bias", None) else None
    wd = opts.pop("weights", None)
    weights = None
    if wd is not None:
        wd = dtype if wd == "input" else wd
        tokens = math.prod(lead)
        weights = (torch.rand(tokens, 1, device=device) + 0.25).to(wd)
    return x, dy, bias, weights, opts


def check_against_reference(x, dy, bias, weights, opts, y, dx, dbias, dweights, tol):
    g, u = split(x, opts.get("interleaved", False))
    ry, rdg, rdu, rdb, rdw = reference(g, u, dy, bias=bias, weights=weights, **opts)
    assert rel_err(y, ry) <= tol
    assert rel_err(dx, merge(rdg, rdu, opts.get("interleaved", False))) <= tol
    if bias is not None:
        assert dbias.shape == bias.shape and dbias.dtype == bias.dtype
        assert rel_err(dbias, rdb) <= tol
    if weights is not None:
        assert dweights.shape == weights.shape and dweights.dtype == weights.dtype
        # dweights are summed over F columns in fp32 and rounded once to the weights' dtype
        assert rel_err(dweights, rdw) <= max(tol, TOL[weights.dtype])


# ---- every variant, forward and backward, through the op layer with sentinel outputs ----------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("F", WIDTHS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_against_float64(variant, F, rows, dtype, device):
    x, dy, bias, weights, opts = make_case(variant, rows, F, dtype, device)
    y = sentinel((rows, F), dtype, device)
    dx = sentinel((rows, 2 * F), dtype, device)
    assert glu_fwd(x, bias=bias, weights=weights, out=y, **opts) is y
    grads = glu_bwd(dy, x, bias=bias, weights=weights, out=dx, **opts)
    assert grads.dx is dx and grads.d_up is None
    assert (grads.dbias is None) == (bias is None) and (grads.dweights is None) == (weights is None)
    check_against_reference(
        x, dy, bias, weights, opts, y, dx, grads.dbias, grads.dweights, TOL[dtype]
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(257, 2 * 1408), (5, 3, 2 * 768), (1, 1, 2), (2, 4, 2 * 3420)])
@pytest.mark.parametrize("variant", ["swiglu-bias", "quick-geglu-gpt-oss", "geglu-everything"])
def test_autograd_2d_and_3d(variant, shape, dtype, device):
    x, dy, bias, weights, opts = make_case(
        variant, None, shape[-1] // 2, dtype, device, lead=shape[:-1]
    )
    leaves = [t.requires_grad_() for t in (x, bias, weights) if t is not None]
    y = fastglu.glu(x, bias=bias, weights=weights, **opts)
    assert y.shape == shape[:-1] + (shape[-1] // 2,) and y.dtype == dtype and y.device == x.device
    y.backward(dy)
    assert all(t.grad is not None for t in leaves)
    check_against_reference(
        x.detach(),
        dy,
        None if bias is None else bias.detach(),
        None if weights is None else weights.detach(),
        opts,
        y.detach(),
        x.grad,
        None if bias is None else bias.grad,
        None if weights is None else weights.grad,
        TOL[dtype],
    )


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_reduces_the_bias_gradient_in_the_kernel(device):
    """The bias gradient arrives as [2F] from the backward itself (no input-sized tensor for
    autograd to sum): the Function's backward returns it already reduced."""
    x = randn(64, 2 * 96, dtype=torch.bfloat16, device=device).requires_grad_()
    b = randn(2 * 96, dtype=torch.bfloat16, device=device).requires_grad_()
    y = fastglu.glu(x, bias=b)
    with torch.no_grad():
        grads = y.grad_fn.apply(torch.ones_like(y))
    assert grads[0].shape == x.shape and grads[2].shape == (2 * 96,)


# ---- Liger: two tensors ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("F", WIDTHS)
@pytest.mark.parametrize("mult", [(1.0, 1.0), (0.5, 2.0)], ids=["plain", "multipliers"])
def test_silu_mul_two_tensors(mult, F, dtype, device):
    mg, md = mult
    gate = randn(3, 257, F, dtype=dtype, device=device).requires_grad_()
    up = randn(3, 257, F, dtype=dtype, device=device).requires_grad_()
    dy = randn(3, 257, F, dtype=dtype, device=device)
    y = fastglu.silu_mul(gate, up, gate_multiplier=mg, down_multiplier=md)
    y.backward(dy)
    ry, rdg, rdu, _, _ = reference(
        gate.detach(), up.detach(), dy, gate_multiplier=mg, down_multiplier=md
    )
    assert rel_err(y, ry) <= TOL[dtype]
    assert rel_err(gate.grad, rdg) <= TOL[dtype]
    assert rel_err(up.grad, rdu) <= TOL[dtype]


@pytest.mark.parametrize("device", DEVICES)
def test_two_tensor_op_layer_with_sentinels_and_bias(device):
    """gate and up as column slices of one fused gate_up_proj output, read in place; out=(d_gate,
    d_up) pre-filled with NaN; a [2F] bias [b_gate | b_up] and fp32 weights."""
    F, T = 1408, 257
    fused = randn(T, 2 * F + 16, dtype=torch.bfloat16, device=device)
    gate, up = fused[:, :F], fused[:, F + 16 :]
    dy = randn(T, F, dtype=torch.bfloat16, device=device)
    bias = randn(2 * F, dtype=torch.bfloat16, device=device)
    w = torch.rand(T, 1, device=device) + 0.5
    opts = dict(activation="quick_gelu", clamp_value=2.0, glu_linear_offset=1.0)
    y = sentinel((T, F), torch.bfloat16, device)
    dg, du = sentinel((T, F), torch.bfloat16, device), sentinel((T, F), torch.bfloat16, device)
    glu_fwd(gate, up, bias=bias, weights=w, out=y, **opts)
    g = glu_bwd(dy, gate, up, bias=bias, weights=w, out=(dg, du), **opts)
    assert g.dx is dg and g.d_up is du
    ry, rdg, rdu, rdb, rdw = reference(gate, up, dy, bias=bias, weights=w, **opts)
    for got, want in ((y, ry), (dg, rdg), (du, rdu), (g.dbias, rdb), (g.dweights, rdw)):
        assert rel_err(got, want) <= 1e-2


@pytest.mark.parametrize("device", DEVICES)
def test_glu_mul_matches_glu_on_the_concatenated_input(device):
    gate = randn(33, 100, dtype=torch.float32, device=device)
    up = randn(33, 100, dtype=torch.float32, device=device)
    bias = randn(200, dtype=torch.float32, device=device)
    a = fastglu.glu_mul(gate, up, "gelu_tanh", bias=bias, clamp_value=2.0)
    b = fastglu.glu(torch.cat((gate, up), -1), "gelu_tanh", bias=bias, clamp_value=2.0)
    assert torch.equal(a, b)


# ---- clamp boundaries, special values -----------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "quick_gelu"])
def test_clamp_boundaries_pass_the_gradient(activation, dtype, device):
    """g == c and u == +-c pass their gradient (torch.clamp's rule); g > c and |u| > c give 0."""
    c = 7.0  # exact in every dtype
    above = {torch.bfloat16: 7.0625, torch.float16: 7.00390625, torch.float32: 7.0000005}[dtype]
    g = torch.tensor([c, c, c, above, 1.0, -3.0, 1.0, 1.0, above], dtype=dtype)
    u = torch.tensor([c, -c, 0.5, 0.5, above, -above, c, -c, above], dtype=dtype)
    x = torch.cat((g, u)).reshape(1, -1).to(device)
    dy = randn(1, g.numel(), dtype=dtype, device=device)
    bias = randn(2 * g.numel(), dtype=dtype, device=device, scale=0.25)
    opts = dict(activation=activation, clamp_value=c, glu_linear_offset=1.0)
    y = glu_fwd(x, bias=bias, **opts)
    grads = glu_bwd(dy, x, bias=bias, **opts)
    ry, rdg, rdu, rdb, _ = reference(
        g.reshape(1, -1).to(device), u.reshape(1, -1).to(device), dy, bias=bias, **opts
    )
    assert rel_err(y, ry) <= TOL[dtype]
    dg, du = grads.dx.chunk(2, -1)
    assert rel_err(dg, rdg) <= TOL[dtype] and rel_err(du, rdu) <= TOL[dtype]
    assert rel_err(grads.dbias, rdb) <= TOL[dtype]
    dg, du = dg.cpu().float()[0], du.cpu().float()[0]
    assert (dg[:3] != 0).all() and (du[[0, 1, 6, 7]] != 0).all()  # on the boundary: passed
    assert dg[3] == 0 and dg[8] == 0 and du[4] == 0 and du[5] == 0 and du[8] == 0  # beyond: cut
    # the bias gradient still receives the cut elements' d_a / d_v (the bias enters after the clamp)
    assert grads.dbias.cpu().float()[3] != 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("no_clamp", [None, 0, 0.0, -1.0, float("nan")])
def test_clamp_none_zero_negative_mean_no_clamp(no_clamp, device):
    x = randn(17, 2 * 40, dtype=torch.float32, device=device) * 5
    want = glu_fwd(x, activation="quick_gelu")
    assert torch.equal(glu_fwd(x, activation="quick_gelu", clamp_value=no_clamp), want)
    # bias_swiglu_impl without a clamp runs the SwiGLU kernels, glu_fwd the family's: each against
    # itself bitwise, and the two within fp32 rounding
    want = fastglu.bias_swiglu_impl(x, None)
    assert torch.equal(fastglu.bias_swiglu_impl(x, None, clamp_value=no_clamp), want)
    assert rel_err(want, glu_fwd(x)) <= 1e-6


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "quick_gelu"])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_clamp_keeps_nan_and_bounds_inf_like_torch_clamp(activation, dtype, device, bias):
    """With clamp_value, NaN in gate or up stays NaN (torch.clamp), infinities are clamped to the
    bounds, and the clamp gradients pass exactly where torch.clamp's do (not at NaN): the formulas
    of Megatron's weighted_bias_quick_geglu_impl, evaluated by torch on the same stored values."""
    c, n = 7.0, 12
    specials = torch.tensor(
        [
            float("nan"),
            float("inf"),
            -float("inf"),
            7.0,
            -7.0,
            7.5,
            -7.5,
            0.0,
            -0.0,
            1.5,
            -2.0,
            30.0,
        ]
    )
    g = specials.repeat_interleave(n)
    u = specials.repeat(n)
    x = torch.cat([g, u]).reshape(1, 2 * n * n).to(dtype).to(device)
    dy = torch.linspace(-1, 1, n * n).reshape(1, n * n).to(dtype).to(device)
    b = (torch.linspace(-0.5, 0.5, 2 * n * n).to(dtype).to(device)) if bias else None
    gf, uf = x.double().chunk(2, -1)
    gc, uc = gf.clamp(max=c), uf.clamp(-c, c)
    if bias:
        bg, bu = b.double().chunk(2)
        gc, uc = gc + bg, uc + bu
    act, dact = act_and_grad(activation, gc)
    want_y = act * (uc + 1.0)
    d = dy.double()
    zero = torch.zeros_like(d)
    want_dx = torch.cat(
        (
            torch.where(gf <= c, d * (uc + 1.0) * dact, zero),
            torch.where((uf >= -c) & (uf <= c), d * act, zero),
        ),
        -1,
    )
    opts = dict(activation=activation, clamp_value=c, glu_linear_offset=1.0)
    got_y = glu_fwd(x, bias=b, **opts).double()
    got_dx = glu_bwd(dy, x, bias=b, **opts).dx.double()
    for got, want in ((got_y, want_y), (got_dx, want_dx)):
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        assert not torch.isinf(want).any()
        finite = torch.isfinite(want)
        assert torch.allclose(got[finite], want[finite], rtol=TOL[dtype] * 4, atol=1e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "quick_gelu"])
def test_nan_and_inf_propagate_like_the_torch_formulas(activation, dtype, device):
    """NaN and infinities in gate, up and dy come out where the header's formulas, evaluated by
    torch in fp32 on the same stored values, put them (NaN where NaN, the same infinities). -88 is
    where torch's fp32 sigmoid is subnormal: SiLU's act(-88) * inf is then -inf, not NaN."""
    specials = torch.tensor(
        [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 30.0, -30.0, 1e4, -1e4, 1.5, -88.0]
    )
    n = len(specials)
    g = specials.repeat_interleave(n * n)
    u = specials.repeat(n).repeat_interleave(n)
    d = specials.repeat(n * n)
    x = torch.cat([g, u]).reshape(1, 2 * n**3).to(dtype).to(device)
    dy = d.reshape(1, n**3).to(dtype).to(device)
    gf, uf = x.float().chunk(2, -1)
    act, dact = act_and_grad(activation, gf)
    want_y = (act * uf).to(dtype).float()
    want_dx = torch.cat((dy.float() * uf * dact, dy.float() * act), -1).to(dtype).float()
    got_y = glu_fwd(x, activation=activation).float()
    got_dx = glu_bwd(dy, x, activation=activation).dx.float()
    for got, want in ((got_y, want_y), (got_dx, want_dx)):
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        inf = torch.isinf(want)
        assert torch.equal(got[inf], want[inf])
        finite = torch.isfinite(want)
        assert torch.allclose(got[finite], want[finite], rtol=TOL[dtype] * 4, atol=1e-3)


# ---- strided inputs and dy ----------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("F", [1, 3, 768, 3420])
def test_column_slice_input_bias_and_weights_views(F, device):
    """x a column slice of a wider tensor, bias a strided view, weights a column of a [T, 2] tensor
    (stride 2): all read in place, the answer right."""
    T = 257
    wide = randn(T, 2 * F + 24, dtype=torch.bfloat16, device=device)
    x = wide[:, 8 : 8 + 2 * F]
    bias = randn(4 * F, dtype=torch.bfloat16, device=device)[::2]
    w2 = torch.rand(T, 2, device=device) + 0.5
    weights = w2[:, 1:]
    dy = randn(T, F, dtype=torch.bfloat16, device=device)
    opts = dict(activation="silu", clamp_value=3.0)
    y = glu_fwd(x, bias=bias, weights=weights, **opts)
    g = glu_bwd(dy, x, bias=bias, weights=weights, **opts)
    check_against_reference(x, dy, bias, weights, opts, y, g.dx, g.dbias, g.dweights, 1e-2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "kind", ["transposed", "column-step-2", "row-broadcast", "3d-permuted", "scalar-broadcast"]
)
def test_strided_dy(kind, device):
    T, F = 256, 1408
    x = randn(T, 2 * F, dtype=torch.float32, device=device)
    if kind == "transposed":
        dy = randn(F, T, dtype=torch.float32, device=device).t()
    elif kind == "column-step-2":
        dy = randn(T, 2 * F, dtype=torch.float32, device=device)[:, ::2]
    elif kind == "row-broadcast":
        dy = randn(1, F, dtype=torch.float32, device=device).expand(T, F)
    elif kind == "scalar-broadcast":
        dy = torch.tensor(0.75, device=device).expand(T, F)
    else:
        x = x.reshape(16, 16, 2 * F)
        dy = randn(16, 16, F, dtype=torch.float32, device=device).permute(1, 0, 2)
    bias = randn(2 * F, dtype=torch.float32, device=device)
    weights = torch.rand(x.shape[:-1] + (1,), device=device) + 0.5
    opts = dict(activation="gelu_tanh")
    g = glu_bwd(dy, x, bias=bias, weights=weights, **opts)
    check_against_reference(
        x,
        dy,
        bias,
        weights,
        opts,
        glu_fwd(x, bias=bias, weights=weights, **opts),
        g.dx,
        g.dbias,
        g.dweights,
        1e-5,
    )


@pytest.mark.parametrize("device", DEVICES)
def test_non_mergeable_3d_input_is_copied_and_right(device):
    base = randn(6, 4, 2 * 100, dtype=torch.float32, device=device)
    x = base.transpose(0, 1)  # (4, 6, 200): no single row stride
    dy = randn(4, 6, 100, dtype=torch.float32, device=device)
    w = torch.rand(4, 6, 1, device=device)
    y = glu_fwd(x, weights=w, activation="quick_gelu")
    g = glu_bwd(dy, x, weights=w, activation="quick_gelu")
    check_against_reference(
        x, dy, None, w, dict(activation="quick_gelu"), y, g.dx, None, g.dweights, 1e-5
    )


# ---- in place -------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_in_place_gives_the_same_gradients(interleaved, device):
    fc1 = randn(3, 5, 2 * 768, dtype=torch.float32, device=device)
    dy = randn(3, 5, 768, dtype=torch.float32, device=device)
    bias = randn(2 * 768, dtype=torch.float32, device=device)
    w = torch.rand(15, 1, device=device)
    opts = dict(
        activation="quick_gelu", clamp_value=2.0, glu_linear_offset=1.0, interleaved=interleaved
    )
    grads = []
    for in_place in (False, True):
        x = fc1.clone().requires_grad_()
        b, ww = bias.clone().requires_grad_(), w.clone().requires_grad_()
        h = x * 1.0  # a non-leaf, like fc1's output
        fastglu.glu(h, bias=b, weights=ww, in_place=in_place, **opts).backward(dy)
        grads.append((x.grad, b.grad, ww.grad))
        if in_place:
            assert torch.equal(h, x.grad)  # the saved input now holds its gradient
    for a, b in zip(*grads):
        assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_second_backward_raises(device):
    x = randn(4, 2 * 64, dtype=torch.bfloat16, device=device).requires_grad_()
    y = fastglu.glu(x * 1.0, "gelu_tanh", in_place=True)
    y.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="only once"):
        y.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_silu_mul_in_place(device):
    gate0 = randn(2, 9, 300, dtype=torch.float32, device=device)
    up0 = randn(2, 9, 300, dtype=torch.float32, device=device)
    dy = randn(2, 9, 300, dtype=torch.float32, device=device)
    _, rdg, rdu, _, _ = reference(gate0, up0, dy, gate_multiplier=0.5)
    g, u = gate0.clone().requires_grad_(), up0.clone().requires_grad_()
    gh, uh = g * 1.0, u * 1.0
    y = fastglu.silu_mul(gh, uh, gate_multiplier=0.5, in_place=True)
    y.backward(dy, retain_graph=True)
    assert rel_err(g.grad, rdg) <= 1e-5 and rel_err(u.grad, rdu) <= 1e-5
    assert torch.equal(gh, g.grad) and torch.equal(uh, u.grad)
    with pytest.raises(RuntimeError, match="only once"):
        y.backward(dy)


def test_in_place_rejects_inputs_it_cannot_overwrite():
    with pytest.raises(ValueError, match="in_place=True needs"):
        fastglu.glu(torch.randn(1, 8, requires_grad=True).expand(6, 8), in_place=True)
    with pytest.raises(ValueError, match="in_place=True needs"):
        fastglu.silu_mul(
            torch.randn(4, 6, requires_grad=True),
            torch.randn(6, 4, requires_grad=True).t(),
            in_place=True,
        )


@pytest.mark.parametrize("in_place", [False, True])
def test_double_backward_raises(in_place):
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(
            fastglu.glu(x * 1.0, "silu", in_place=in_place).sum(), x, create_graph=True
        )


# ---- fp8 saved input --------------------------------------------------------------------------------


def block_columns(v, F, interleaved=False):
    """Per-block values v [..., nb] (fp8_input_store="blockwise": the split layout's gate blocks,
    then up's; the interleaved operand's blocks) as one value per column of the [..., 2F] input."""
    cols = torch.arange(2 * F, device=v.device)
    if interleaved:
        blk = cols // 128
    else:
        nbf = (F + 127) // 128
        blk = torch.where(cols < F, cols // 128, nbf + (cols - F) // 128)
    return v[..., blk]


def block_amax_columns(xf, interleaved=False):
    """amax of |x| over each 1 x 128 block of each operand, as one fp32 value per column."""
    F = xf.shape[-1] // 2
    parts = [xf] if interleaved else [xf[..., :F], xf[..., F:]]
    amax = [
        t[..., b0 : b0 + 128].abs().amax(-1) for t in parts for b0 in range(0, t.shape[-1], 128)
    ]
    return block_columns(torch.stack(amax, -1), F, interleaved)


def decode_reference(x, mode, interleaved=False):
    """The operand the backward sees, computed independently of fastglu: fp8(x * s) / s."""
    if mode is True:
        return x.to(torch.float8_e4m3fn).double()
    xf = x.float()
    if mode == "blockwise":  # s per 1 x 128 block of each operand (split: gate's, then up's)
        amax = block_amax_columns(xf, interleaved)
        s = torch.where(amax > 0, 448.0 / amax, torch.ones_like(amax))
        return (xf * s).to(torch.float8_e4m3fn).double() * torch.where(
            amax > 0, amax.double() / 448.0, torch.ones_like(amax, dtype=torch.float64)
        )
    amax = xf.abs().amax(-1, keepdim=True) if mode == "per_row" else xf.abs().amax()
    s = torch.where(amax > 0, 448.0 / amax, torch.ones_like(amax))
    return (xf * s).to(torch.float8_e4m3fn).double() * (amax.double() / 448.0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", [True, "per_row", "per_tensor", "blockwise"])
@pytest.mark.parametrize("variant", ["swiglu-bias", "quick-geglu-gpt-oss"])
def test_fp8_input_store_backward_reads_the_saved_fp8(variant, mode, device):
    x, dy, bias, weights, opts = make_case(variant, None, 768, torch.bfloat16, device, lead=(9, 7))
    x.requires_grad_()
    if bias is not None:
        bias.requires_grad_()
    y = fastglu.glu(x, bias=bias, weights=weights, fp8_input_store=mode, **opts)
    saved = y.grad_fn.saved_tensors[0]
    assert saved.dtype == torch.float8_e4m3fn and saved.shape == x.shape
    scale_inv = y.grad_fn.saved_tensors[4]
    y.backward(dy)
    # The copy is the independent cast within one e4m3 step (with a clamp, an operand the cast would
    # put on the wrong side of the bound moves one step); the backward's math is checked on the copy
    # itself, decoded as it reads it.
    xd = decode_reference(x.detach(), mode)
    if scale_inv is None:
        s = torch.ones((), dtype=torch.float64, device=x.device)
    elif scale_inv.numel() == 1:
        s = scale_inv.double().reshape(())
    elif mode == "blockwise":
        assert scale_inv.shape == (63, 2 * 6)  # [tokens, 2 ceil(768 / 128)]
        s = block_columns(scale_inv.double(), 768).reshape(x.shape)
    else:
        s = scale_inv.double().reshape(*x.shape[:-1], 1)
    xs = saved.double() * s
    g, u = split(xs, False)
    gd, ud = split(xd, False)
    o = {k: v for k, v in opts.items() if k != "clamp_value"}
    c = opts.get("clamp_value")
    if c:  # the clamp of the decoded operand, torch.clamp's mask of the full-precision one (Megatron's)
        c = torch.tensor(c, dtype=torch.float32).to(x.dtype).item()
        g, u = g.clamp(max=c), u.clamp(-c, c)
        gd, ud = gd.clamp(max=c), ud.clamp(-c, c)
    step = merge(gd, ud, False).abs() / 8 + 2.0**-9 * s
    assert ((merge(g, u, False) - merge(gd, ud, False)).abs() <= step).all()
    _, rdg, rdu, rdb, _ = reference(
        g, u, dy, bias=bias.detach() if bias is not None else None, weights=weights, **o
    )
    if c:
        graw, uraw = split(x.detach(), False)
        rdg, rdu = rdg * (graw <= c).to(rdg.dtype), rdu * ((uraw >= -c) & (uraw <= c)).to(rdu.dtype)
    assert rel_err(x.grad, merge(rdg, rdu, False)) <= 1e-2
    if bias is not None:
        assert rel_err(bias.grad, rdb) <= 1e-2
    # the forward used the full-precision input
    ry = reference(
        *split(x.detach(), False),
        dy,
        bias=None if bias is None else bias.detach(),
        weights=weights,
        **opts,
    )[0]
    assert rel_err(y, ry) <= 1e-2


@pytest.mark.parametrize("device", DEVICES)
def test_scaled_fp8_store_keeps_small_values(device):
    """On inputs of magnitude ~1e-3, Megatron's plain fp8 cast quantizes to multiples of 2^-9 and
    flushes the smallest values to 0 (input-gradient error ~50%); the per-row scaled store keeps
    e4m3's relative precision (~3%, the same as on inputs of magnitude 1)."""
    x = randn(257, 2 * 768, dtype=torch.bfloat16, device=device, scale=1e-3)
    dy = randn(257, 768, dtype=torch.bfloat16, device=device)
    _, rdg, rdu, _, _ = reference(*split(x, False), dy)
    want = merge(rdg, rdu, False)
    err = {}
    for mode in (False, True, "per_row", "per_tensor", "blockwise"):
        xr = x.clone().requires_grad_()
        fastglu.glu(xr, fp8_input_store=mode).backward(dy)
        err[mode] = rel_err(xr.grad, want)
    assert err[False] <= 1e-2
    assert err[True] > 0.3  # the plain cast loses most of it
    assert err["per_row"] < 0.05 and err["per_tensor"] < 0.05 and err["blockwise"] < 0.05
    # the plain cast flushes values below 2^-10 to zero; per_row keeps them
    tiny = torch.full((1, 8), 3e-4, dtype=torch.bfloat16, device=device)
    assert (tiny.to(torch.float8_e4m3fn).float() == 0).all()
    assert (decode_reference(tiny, "per_row") != 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved", [False, True], ids=["split", "interleaved"])
def test_blockwise_fp8_store_keeps_channels_beside_an_outlier(interleaved, device):
    """One outlier channel per row (100 among values ~1e-3): a per-row scale spends e4m3's range on it
    and flushes the rest of the row (input-gradient error ~ the plain cast's), where 1 x 128 blocks
    lose only the outlier's own block (DeepSeek-V3's reason to cache the SwiGLU input this way)."""
    F = 640
    x = randn(65, 2 * F, dtype=torch.bfloat16, device=device, scale=1e-3)
    x[:, 3] = 100.0
    dy = randn(65, F, dtype=torch.bfloat16, device=device)
    _, rdg, rdu, _, _ = reference(*split(x, interleaved), dy)
    want = merge(rdg, rdu, interleaved)
    err = {}
    for mode in ("per_row", "blockwise"):
        xr = x.clone().requires_grad_()
        fastglu.glu(xr, fp8_input_store=mode, interleaved=interleaved).backward(dy)
        # the columns outside the blocks of the outlier and its partner, whose gradients dominate
        # any norm
        keep = torch.ones(2 * F, dtype=torch.bool, device=device)
        keep[:128] = False
        if not interleaved:
            keep[F : F + 128] = False
        err[mode] = rel_err(xr.grad[:, keep], want[:, keep])
    assert err["blockwise"] < 0.05 < err["per_row"], err


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("F", [1, 3, 64, 128, 200, 1408])
@pytest.mark.parametrize("interleaved", [False, True], ids=["split", "interleaved"])
@pytest.mark.parametrize("two", [False, True], ids=["one", "gate-up"])
def test_blockwise_fp8_store_is_the_reference_recipe(two, interleaved, F, device):
    """The blockwise copy and its scales against an independent float64 recipe (fp8 within one e4m3
    step, scales exact), and glu_bwd on them against the float64 backward of the decoded operand."""
    if two and interleaved:
        pytest.skip("two tensors are the split layout")
    x = randn(3, 5, 2 * F, dtype=torch.bfloat16, device=device)
    x[..., :: max(1, F // 3)] *= 50  # blocks of different magnitudes
    dy = randn(3, 5, F, dtype=torch.bfloat16, device=device)
    if two:
        g, u = x[..., :F].contiguous(), x[..., F:].contiguous()
        x8, u8, sinv = fastglu.ops._fp8_store_blockwise(g, u, None, "glu")
        got = torch.cat([x8, u8], -1)
    else:
        p = fastglu.ops.glu_params("silu", interleaved=interleaved)
        got, _, sinv = fastglu.ops._fp8_store_blockwise(x, None, p, "glu")
    nb = fastglu.ops.scale_blocks(_il_code(interleaved), F)
    assert sinv.shape == (15, nb) and sinv.dtype == torch.float32
    want = decode_reference(x, "blockwise", interleaved)
    s = block_columns(sinv.double(), F, interleaved).reshape(x.shape)
    dec = got.double() * s
    assert ((dec - want).abs() <= want.abs() / 8 + 2.0**-9 * s).all()
    amax = block_amax_columns(x.float(), interleaved)  # scales exact: amax / 448 rounded to fp32
    normal = (amax >= 2.0**-126) & (amax <= torch.finfo(torch.float32).max)
    want_s = torch.where(normal, (amax.double() / 448.0).float(), torch.ones_like(amax))
    assert torch.equal(s, want_s.double())
    # the backward reads the blockwise copy: d_gate / d_up of the decoded operand
    ops = fastglu.ops
    if two:
        r = ops.glu_bwd(dy, x8, u8, input_scale_inv=sinv)
        dx = torch.cat([r.dx, r.d_up], -1)
    else:
        r = ops.glu_bwd(dy, got, input_scale_inv=sinv, interleaved=interleaved)
        dx = r.dx
    _, rdg, rdu, _, _ = reference(*split(dec, interleaved), dy)
    assert rel_err(dx, merge(rdg, rdu, interleaved)) <= 1e-2


def _il_code(interleaved):
    return fastglu._C.LAYOUT_INTERLEAVED if interleaved else fastglu._C.LAYOUT_SPLIT


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_store_of_zero_rows_is_guarded(device):
    x = randn(4, 2 * 16, dtype=torch.float32, device=device)
    x[1] = 0
    xr = x.clone().requires_grad_()
    fastglu.glu(xr, fp8_input_store="per_row").sum().backward()
    assert torch.isfinite(xr.grad).all()
    assert (xr.grad[1, 16:] == 0).all()  # d_up = silu(0) = 0


def test_fp8_input_store_rejects_unknown_modes():
    with pytest.raises(ValueError, match="fp8_input_store"):
        fastglu.glu(torch.randn(2, 8), fp8_input_store="per_col")


# ---- Megatron signatures ------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lead", [(64,), (8, 4)], ids=["2d", "3d"])
def test_megatron_signatures_shapes_values_and_grads(lead, dtype, device):
    F = 384
    tokens = math.prod(lead)
    x = randn(*lead, 2 * F, dtype=dtype, device=device)
    bias = randn(2 * F, dtype=dtype, device=device, scale=0.5)
    probs = torch.rand(tokens, 1, device=device) + 0.25  # fp32 probs, as Megatron's router gives
    dy = randn(*lead, F, dtype=dtype, device=device)
    cases = [
        (lambda i, b, w: fastglu.bias_swiglu_impl(i, b), dict(activation="silu"), True, False),
        (
            lambda i, b, w: fastglu.bias_swiglu_impl(i, b, False, False, 2.0),
            dict(activation="silu", clamp_value=2.0),
            True,
            False,
        ),
        (lambda i, b, w: fastglu.bias_swiglu_impl(i, None), dict(activation="silu"), False, False),
        (
            lambda i, b, w: fastglu.weighted_bias_swiglu_impl(i, None, w),
            dict(activation="silu"),
            False,
            True,
        ),
        (lambda i, b, w: fastglu.bias_geglu_impl(i, b), dict(activation="gelu_tanh"), True, False),
        (
            lambda i, b, w: fastglu.bias_geglu_impl(i, None),
            dict(activation="gelu_tanh"),
            False,
            False,
        ),
        (
            lambda i, b, w: fastglu.weighted_bias_quick_geglu_impl(i, b, w, False, 1.0, 3.0),
            dict(activation="quick_gelu", glu_linear_offset=1.0, clamp_value=3.0),
            True,
            True,
        ),
        (
            lambda i, b, w: fastglu.weighted_bias_quick_geglu_impl(i, None, w),
            dict(activation="quick_gelu"),
            False,
            True,
        ),
    ]
    for call, opts, with_bias, with_weights in cases:
        xi = x.clone().requires_grad_()
        bi = bias.clone().requires_grad_() if with_bias else None
        wi = probs.clone().requires_grad_() if with_weights else None
        y = call(xi, bi, wi)
        assert y.shape == lead + (F,) and y.dtype == dtype
        y.backward(dy)
        check_against_reference(
            x,
            dy,
            bias if with_bias else None,
            probs if with_weights else None,
            opts,
            y.detach(),
            xi.grad,
            bi.grad if with_bias else None,
            wi.grad if with_weights else None,
            TOL[dtype],
        )


def test_weighted_bias_swiglu_impl_rejects_a_bias_like_megatron():
    x = torch.randn(4, 8)
    with pytest.raises(NotImplementedError, match="Bias is not supported"):
        fastglu.weighted_bias_swiglu_impl(x, torch.zeros(8), torch.ones(4, 1))


def test_megatron_signatures_want_2d_or_3d():
    for f in (
        lambda x: fastglu.bias_swiglu_impl(x, torch.zeros(8)),
        lambda x: fastglu.weighted_bias_swiglu_impl(x, None, torch.ones(2, 1)),
        lambda x: fastglu.bias_geglu_impl(x, None),
        lambda x: fastglu.weighted_bias_quick_geglu_impl(x, None, torch.ones(2, 1)),
    ):
        with pytest.raises(ValueError, match="2D.*3D"):
            f(torch.randn(2, 1, 1, 8))
        with pytest.raises(ValueError, match="2D.*3D"):
            f(torch.randn(8))


def test_cpu_offload_marks_the_saved_input_and_bias():
    x = randn(32, 2 * 64, dtype=torch.bfloat16, device="cpu").requires_grad_()
    b = randn(2 * 64, dtype=torch.bfloat16, device="cpu").requires_grad_()
    y = fastglu.bias_swiglu_impl(x, b, False, True)
    saved_x, _, saved_b, _, _ = y.grad_fn.saved_tensors
    assert saved_x.activation_offloading is True and saved_b.activation_offloading is True
    assert b.activation_offloading is True
    y8 = fastglu.bias_swiglu_impl(x, b, True, True)
    assert y8.grad_fn.saved_tensors[0].dtype == torch.float8_e4m3fn
    assert y8.grad_fn.saved_tensors[0].activation_offloading is True
    y8.sum().backward()
    assert b.grad.shape == (128,)


def test_weights_grad_keeps_the_weights_dtype_and_shape():
    x = randn(10, 2 * 32, dtype=torch.bfloat16, device="cpu").requires_grad_()
    for w in (
        torch.rand(10, 1),
        torch.rand(10, 1, dtype=torch.bfloat16),
        torch.rand(10),
        torch.rand(10, 1, dtype=torch.float16),
    ):
        w.requires_grad_()
        y = fastglu.weighted_bias_swiglu_impl(x, None, w)
        assert y.dtype == torch.bfloat16
        y.sum().backward()
        assert w.grad.dtype == w.dtype and w.grad.shape == w.shape


# ---- modules ---------------------------------------------------------------------------------------


def test_modules_match_the_functions():
    x = randn(6, 2 * 50, dtype=torch.float32, device="cpu")
    b = randn(100, dtype=torch.float32, device="cpu")
    w = torch.rand(6, 1)
    m = fastglu.modules.QuickGeGLU(glu_linear_offset=1.0, clamp_value=7.0)
    assert torch.equal(m(x, b, w), fastglu.weighted_bias_quick_geglu_impl(x, b, w, False, 1.0, 7.0))
    assert torch.equal(fastglu.modules.SwiGLU()(x), fastglu.glu(x))
    assert torch.equal(
        fastglu.modules.GeGLU(interleaved=True)(x), fastglu.glu(x, "gelu_tanh", interleaved=True)
    )
    assert "quick_gelu" in repr(m) and "clamp_value=7.0" in repr(m)
    assert list(m.parameters()) == []
    with pytest.raises(ValueError, match="activation"):
        fastglu.modules.GLU("relu")
    with pytest.raises(ValueError, match="gate_multiplier"):
        fastglu.modules.SwiGLU(gate_multiplier=float("inf"))


def test_fastglu_activation_reads_a_megatron_config():
    from types import SimpleNamespace

    import torch.nn.functional as F_

    x = randn(5, 2 * 24, dtype=torch.float32, device="cpu")
    cfg = SimpleNamespace(
        gated_linear_unit=True,
        activation_func=F_.silu,
        glu_linear_offset=0.0,
        activation_func_clamp_value=None,
        activation_func_fp8_input_store=False,
    )
    assert torch.equal(fastglu.modules.FastGLUActivation(config=cfg)(x), fastglu.glu(x))
    cfg.activation_func = F_.gelu
    assert torch.equal(
        fastglu.modules.FastGLUActivation(config=cfg)(x), fastglu.glu(x, "gelu_tanh")
    )

    def quick_gelu(z):  # stands for megatron.core.fusions.fused_bias_geglu.quick_gelu
        return z * torch.sigmoid(1.702 * z)

    quick_gelu.__module__ = "megatron.core.fusions.fused_bias_geglu"
    cfg = SimpleNamespace(
        gated_linear_unit=True,
        activation_func=quick_gelu,
        glu_linear_offset=1.0,
        activation_func_clamp_value=7.0,
        activation_func_fp8_input_store=True,
    )
    m = fastglu.modules.FastGLUActivation(config=cfg)
    assert (m.activation, m.glu_linear_offset, m.clamp_value, m.fp8_input_store) == (
        "quick_gelu",
        1.0,
        7.0,
        True,
    )
    cfg.gated_linear_unit = False
    with pytest.raises(ValueError, match="gated_linear_unit"):
        fastglu.modules.FastGLUActivation(config=cfg)
    with pytest.raises(ValueError, match="activation_func"):
        fastglu.modules.FastGLUActivation(
            config=SimpleNamespace(gated_linear_unit=True, activation_func=torch.relu)
        )


# ---- bad input: clear errors, nothing written ---------------------------------------------------


def test_bad_inputs_raise_before_anything_is_written():
    x = torch.randn(4, 16)
    out = torch.full((4, 8), 7.0)
    dx = torch.full((4, 16), 7.0)
    dy = torch.randn(4, 8)
    cases = [
        (
            ValueError,
            r"bias has shape \(8,\); expected \[2F\] = \(16,\)",
            dict(bias=torch.zeros(8)),
        ),
        (ValueError, r"bias has shape \(4, 16\)", dict(bias=torch.zeros(4, 16))),
        (
            TypeError,
            "bias has dtype torch.float16",
            dict(bias=torch.zeros(16, dtype=torch.float16)),
        ),
        (ValueError, r"weights has shape \(4, 8\)", dict(weights=torch.ones(4, 8))),
        (ValueError, r"weights has shape \(5, 1\)", dict(weights=torch.ones(5, 1))),
        (
            TypeError,
            "weights has dtype torch.int64",
            dict(weights=torch.ones(4, 1, dtype=torch.int64)),
        ),
        (ValueError, "weights is on device meta", dict(weights=torch.ones(4, 1, device="meta"))),
        (ValueError, "bias is on device meta", dict(bias=torch.ones(16, device="meta"))),
        (ValueError, "activation must be one of", dict(activation="relu")),
        (ValueError, "glu_linear_offset must be finite", dict(glu_linear_offset=float("nan"))),
        (
            ValueError,
            r"glu_linear_offset must be finite in float32, got 3\.5e\+38",
            dict(glu_linear_offset=3.5e38),
        ),
        (
            ValueError,
            r"down_multiplier must be finite in float32, got -1e\+300",
            dict(down_multiplier=-1e300),
        ),
        (TypeError, "interleaved must be a bool, got 'no'", dict(interleaved="no")),
        (TypeError, "interleaved must be a bool, got None", dict(interleaved=None)),
        (TypeError, "clamp_value must be a real number", dict(clamp_value="7")),
    ]
    for exc, msg, kw in cases:
        with pytest.raises(exc, match=msg):
            glu_fwd(x, out=out, **kw)
        with pytest.raises(exc, match=msg):
            glu_bwd(dy, x, out=dx, **kw)
    with pytest.raises(ValueError, match="last dimension.*even"):
        glu_fwd(torch.randn(4, 7))
    with pytest.raises(TypeError, match="dtype torch.float64"):
        fastglu.glu(torch.randn(4, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        fastglu.glu([1.0, 2.0])
    with pytest.raises(ValueError, match="input is on device meta"):
        fastglu.glu(torch.empty(4, 8, device="meta"))
    with pytest.raises(ValueError, match="dy is on device meta"):
        glu_bwd(torch.empty(4, 8, device="meta"), x, out=dx)
    with pytest.raises(ValueError, match=r"dy has shape \(4, 9\)"):
        glu_bwd(torch.randn(4, 9), x, out=dx)
    with pytest.raises(TypeError, match="dy has dtype torch.float16"):
        glu_bwd(dy.half(), x, out=dx)
    with pytest.raises(ValueError, match="out must be a dense tensor of shape"):
        glu_fwd(x, out=torch.empty(4, 9))
    with pytest.raises(TypeError, match="out has dtype"):
        glu_fwd(x, out=torch.empty(4, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match="up has shape"):
        fastglu.silu_mul(torch.randn(4, 8), torch.randn(4, 9))
    with pytest.raises(TypeError, match="up has dtype"):
        fastglu.silu_mul(torch.randn(4, 8), torch.randn(4, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match="up is on device meta"):
        fastglu.silu_mul(torch.randn(4, 8), torch.randn(4, 8, device="meta"))
    with pytest.raises(ValueError, match="interleaved=True takes one"):
        glu_fwd(torch.randn(4, 8), torch.randn(4, 8), interleaved=True)
    with pytest.raises(ValueError, match="input_scale_inv is given"):
        glu_bwd(dy, x, input_scale_inv=torch.ones(1))
    with pytest.raises(ValueError, match="want_dbias=True needs a bias"):
        glu_bwd(dy, x, want_dbias=True)
    with pytest.raises(ValueError, match="overlaps"):  # from the C library's own check
        big = torch.full((4, 16), 7.0)
        glu_fwd(big, out=big[:, 4:12])
    assert torch.equal(out, torch.full((4, 8), 7.0)) and torch.equal(dx, torch.full((4, 16), 7.0))
    assert torch.equal(big, torch.full((4, 16), 7.0))


@cuda_only
def test_mixed_cpu_cuda_raise_value_error():
    x = torch.randn(4, 8, device="cuda")
    with pytest.raises(ValueError, match="bias is on cpu"):
        fastglu.glu(x, bias=torch.zeros(8))
    with pytest.raises(ValueError, match="weights is on cpu"):
        fastglu.glu(x, weights=torch.ones(4, 1))
    with pytest.raises(ValueError, match="dy is on cpu"):
        glu_bwd(torch.randn(4, 4), x)


def test_overlap_with_a_copied_input_is_still_refused():
    base = torch.randn(4, 3, 8)
    x = base.transpose(0, 1)  # copied before the C call
    before = base.clone()
    with pytest.raises(ValueError, match="overlaps input"):
        glu_fwd(x, out=base.view(-1)[:48].view(3, 4, 4))
    assert torch.equal(base, before)


# ---- empty problems, workspace, binding --------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_empty_problems(device):
    for shape in [(0, 16), (3, 0), (0, 4, 8)]:
        x = torch.randn(shape, device=device).requires_grad_()
        b = torch.randn(shape[-1], device=device).requires_grad_()
        w = torch.rand(math.prod(shape[:-1]), 1, device=device).requires_grad_()
        y = fastglu.glu(x, bias=b, weights=w)
        assert y.shape == shape[:-1] + (shape[-1] // 2,)
        y.sum().backward()
        assert x.grad.shape == x.shape
        assert torch.equal(b.grad, torch.zeros_like(b)) and torch.equal(w.grad, torch.zeros_like(w))


def test_workspace_bytes():
    assert glu_bwd_workspace_bytes(257, 3420, False, False) == 0
    assert glu_bwd_workspace_bytes(0, 3420, True, True) == 0
    a = glu_bwd_workspace_bytes(257, 3420, True, False)
    b = glu_bwd_workspace_bytes(257, 3420, False, True)
    assert a > 0 and b > 0 and a % 16 == 0 and b % 16 == 0
    assert glu_bwd_workspace_bytes(257, 3420, True, True) >= a + b


def test_binding_rejects_unknown_codes():
    x, y = torch.randn(1, 2), torch.empty(1, 1)
    # gate, its row stride, up, its row stride, bias, weights, weights dtype and stride, output, its row
    # stride, saved_fp8, its row stride, tokens, F, dtype, stream
    args = [x.data_ptr(), 2, 0, 0, 0, 0, 0, 0, y.data_ptr(), 1, 0, 0, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="activation code"):
        fastglu._C.glu_fwd(0, 7, 0, 0.0, 0.0, 1.0, 1.0, *args)
    with pytest.raises(ValueError, match="layout code"):
        fastglu._C.glu_fwd(0, 0, 2**32, 0.0, 0.0, 1.0, 1.0, *args)
    with pytest.raises(TypeError, match="dtype code"):
        fastglu._C.glu_fwd(0, 0, 0, 0.0, 0.0, 1.0, 1.0, *args[:-2], 2**32, 0)
    with pytest.raises(TypeError, match="takes 23 arguments"):
        fastglu._C.glu_fwd(0)


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_are_bitwise_deterministic(device):
    x = randn(1000, 2 * 768, dtype=torch.bfloat16, device=device)
    dy = randn(1000, 768, dtype=torch.bfloat16, device=device)
    b = randn(2 * 768, dtype=torch.bfloat16, device=device)
    w = torch.rand(1000, 1, device=device)
    g0 = glu_bwd(dy, x, bias=b, weights=w)
    for _ in range(3):
        g = glu_bwd(dy, x, bias=b, weights=w)
        assert (
            torch.equal(g.dx, g0.dx)
            and torch.equal(g.dbias, g0.dbias)
            and torch.equal(g.dweights, g0.dweights)
        )


# ---- CUDA specifics -----------------------------------------------------------------------------


@cuda_only
def test_runs_on_the_current_stream():
    s = torch.cuda.Stream()
    x = randn(4096, 2 * 4096, dtype=torch.bfloat16, device="cuda")
    dy = randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    b = randn(2 * 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.rand(4096, 1, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        y = glu_fwd(x, bias=b, weights=w)
        g = glu_bwd(dy, x, bias=b, weights=w)
    s.synchronize()
    check_against_reference(x, dy, b, w, {}, y, g.dx, g.dbias, g.dweights, 1e-2)


@cuda_only
def test_cuda_matches_cpu_backend():
    x = randn(257, 2 * 1408, dtype=torch.bfloat16, device="cuda")
    dy = randn(257, 1408, dtype=torch.bfloat16, device="cuda")
    b = randn(2 * 1408, dtype=torch.bfloat16, device="cuda")
    w = torch.rand(257, 1, device="cuda")
    opts = dict(activation="quick_gelu", clamp_value=2.0, glu_linear_offset=1.0)
    gc = glu_bwd(dy, x, bias=b, weights=w, **opts)
    gh = glu_bwd(dy.cpu(), x.cpu(), bias=b.cpu(), weights=w.cpu(), **opts)
    assert rel_err(gc.dx, gh.dx) <= 1e-2 and rel_err(gc.dbias, gh.dbias) <= 1e-2
    assert rel_err(gc.dweights, gh.dweights) <= 1e-5


# ---- regressions from the adversarial pass --------------------------------------------------


@pytest.mark.parametrize("mode", ["per_row", "per_tensor", "blockwise"])
def test_scaled_fp8_store_of_tiny_values_stays_finite(mode):
    """448 / amax overflows for amax below ~1.3e-36: the scale falls back to 1, never inf * 0."""
    x = torch.zeros(2, 8)
    x[0, 0] = 1e-38
    x[1] = torch.randn(8)
    x.requires_grad_(True)
    b = torch.zeros(8, requires_grad=True)
    fastglu.bias_swiglu_impl(x, b, fp8_input_store=mode).sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(b.grad).all()


@pytest.mark.parametrize("mode", ["per_row", "per_tensor", "blockwise", True])
@pytest.mark.parametrize("shape", [(0, 8), (4, 0), (2, 0, 6)])
def test_scaled_fp8_store_of_empty_inputs(mode, shape):
    x = torch.randn(*shape, requires_grad=True)
    bias = torch.randn(shape[-1], requires_grad=True)
    y = fastglu.bias_swiglu_impl(x, bias, fp8_input_store=mode) if len(shape) in (2, 3) else None
    assert y.shape == (*shape[:-1], shape[-1] // 2)
    y.sum().backward()
    assert x.grad.shape == x.shape and torch.equal(bias.grad, torch.zeros_like(bias))


def test_in_place_never_overwrites_an_input_that_takes_no_gradient():
    """Only the bias needs a gradient: the input must come back unchanged."""
    x = torch.randn(5, 16)
    before = x.clone()
    bias = torch.randn(16, requires_grad=True)
    fastglu.glu(x, bias=bias, in_place=True).sum().backward()
    assert torch.equal(x, before) and bias.grad is not None
    gate, up = torch.randn(5, 8), torch.randn(5, 8, requires_grad=True)
    g0 = gate.clone()
    fastglu.silu_mul(gate, up, in_place=True).sum().backward()
    assert torch.equal(gate, g0) and up.grad is not None


@pytest.mark.parametrize("lean", [True, False], ids=["lean-apply", "Function.apply"])
def test_entry_points_refuse_transforms_they_cannot_follow(lean, monkeypatch):
    # The Megatron entry points apply their Function through the C++ apply (glu._glu_c_apply) unless
    # a functorch transform is active: either way vmap and forward-mode AD are refused as
    # Function.apply refuses them (no vmap rule, no jvp), never run with a dropped tangent or batch.
    import torch.autograd.forward_ad as fwAD

    glu_module = fastglu.functional
    if not lean:
        monkeypatch.setattr(glu_module, "_glu_c_apply", None)
    b = torch.randn(6)
    with pytest.raises(RuntimeError, match="functorch transforms"):
        torch.func.vmap(lambda t: fastglu.bias_swiglu_impl(t, b))(torch.randn(3, 4, 6))
    with fwAD.dual_level():
        dual = fwAD.make_dual(torch.randn(4, 6), torch.randn(4, 6))
        with pytest.raises(NotImplementedError, match="jvp"):
            fastglu.bias_swiglu_impl(dual, b)
        with pytest.raises(NotImplementedError, match="jvp"):
            fastglu.weighted_bias_quick_geglu_impl(dual, None, torch.rand(4, 1), False, 1.0, 7.0)


# ---- the common case's short path (glu._glu_fwd_fast / _glu_bwd_fast) ----------------------------


def _fast_path_cases(device):
    """(name, x, bias, weights, params, dy) that the short path takes."""
    G = fastglu.ops
    bf, f32 = torch.bfloat16, torch.float32
    wide = randn(7, 3 * 40, dtype=bf, device=device)
    cases = []
    for act, clamp, off in [
        ("silu", None, 0.0),
        ("gelu_tanh", None, 0.0),
        ("quick_gelu", 7.0, 1.0),
    ]:
        for il in (False, True):
            p = G.glu_params(act, clamp_value=clamp, glu_linear_offset=off, interleaved=il)
            for lead in [(9,), (3, 5), (1, 4), (4, 1)]:
                T = math.prod(lead)
                x = randn(*lead, 2 * 24, dtype=bf, device=device)
                dy = randn(*lead, 24, dtype=bf, device=device)
                cases.append((f"{act}-{il}-{lead}", x, None, None, p, dy))
                cases.append(
                    (
                        f"{act}-{il}-{lead}-bias",
                        x,
                        torch.nn.Parameter(randn(48, dtype=bf, device=device)),
                        None,
                        p,
                        dy,
                    )
                )
                w = (torch.rand(T, 1, device=device) + 0.25).to(f32)
                cases.append(
                    (f"{act}-{il}-{lead}-bias-w", x, randn(48, dtype=bf, device=device), w, p, dy)
                )
                cases.append(
                    (
                        f"{act}-{il}-{lead}-w1d-expanded-dy",
                        x,
                        None,
                        w.view(T).to(bf),
                        p,
                        randn(24, dtype=bf, device=device).expand(*lead, 24),
                    )
                )
            # a column slice of a wider tensor (rows strided), dy transposed
            cases.append(
                (
                    f"{act}-{il}-slice",
                    wide[:, 8 : 8 + 80],
                    randn(80, dtype=bf, device=device),
                    torch.rand(7, 1, device=device),
                    p,
                    randn(40, 7, dtype=bf, device=device).t(),
                )
            )
    return G, cases


@pytest.mark.parametrize("device", DEVICES)
def test_short_path_gives_the_checked_paths_bits(device):
    # The common case skips the op layer's checks and messages; it must make the same C call: the
    # forward and every gradient bit for bit those of the checked path (glu._glu_fwd / glu_bwd_p).
    G, cases = _fast_path_cases(device)
    for name, x, b, w, p, dy in cases:
        y = G._fwd_common(p, x, b, w)
        assert y is not None, name
        y_ref = G._fwd_checked(p, x, None, b, w, None, None, "t")[0]
        assert y.shape == y_ref.shape and torch.equal(y, y_ref), name
        for want_db, want_dw in [(b is not None, w is not None), (False, False)]:
            g = G._bwd_common(p, dy, x, b, w, want_db, want_dw)
            assert g is not None, name
            r = G.backward(p, dy, x, None, b, w, want_dbias=want_db, want_dweights=want_dw, fn="t")
            assert torch.equal(g[0], r.dx), name
            for got, ref in ((g[1], r.dbias), (g[2], r.dweights)):
                assert (got is None) == (ref is None), name
                if got is not None:
                    assert (
                        got.shape == ref.shape and got.dtype == ref.dtype and torch.equal(got, ref)
                    ), name


@pytest.mark.parametrize("device", DEVICES)
def test_short_path_declines_what_it_does_not_check(device):
    # Anything outside the common case goes to the checked path (None here), which copies what it
    # must or raises the precise error: the public entry points give the same results as before.
    G = fastglu.ops
    p = G.glu_params("silu")
    x = randn(6, 16, dtype=torch.float32, device=device)
    b = randn(16, dtype=torch.float32, device=device)
    declined = {
        "bias on meta": (x, torch.ones(16, device="meta"), None),
        "weights on meta": (x, None, torch.ones(6, 1, device="meta")),
        "negated bias view": (x, b._neg_view(), None),
        "negated input view": (x._neg_view(), None, None),
        "strided weights": (x, None, torch.rand(6, 2, device=device)[:, :1]),
        "weights [S, B, 1]": (
            randn(2, 3, 16, dtype=torch.float32, device=device),
            None,
            torch.rand(2, 3, 1, device=device),
        ),
        "strided bias": (x, randn(32, dtype=torch.float32, device=device)[::2], None),
        "4D input": (randn(1, 2, 3, 16, dtype=torch.float32, device=device), None, None),
        "float64 input": (x.double(), None, None),
        "bias of another dtype": (x, b.half(), None),
        "weights of the wrong length": (x, None, torch.rand(5, 1, device=device)),
        "column-strided input": (randn(16, 6, dtype=torch.float32, device=device).t(), None, None),
        "odd width": (x[:, :15], None, None),
        "no tokens": (x[:0], None, None),
    }
    for name, (xx, bb, ww) in declined.items():
        assert G._fwd_common(p, xx, bb, ww) is None, name
    # where the checked path accepts them, the results are right (against the reference)
    for name in (
        "negated bias view",
        "negated input view",
        "strided weights",
        "weights [S, B, 1]",
        "strided bias",
    ):
        xx, bb, ww = declined[name]
        y = G.forward(p, xx, None, bb, ww)
        g, u = split(xx.resolve_neg(), False)
        ry = reference(
            g,
            u,
            torch.ones(y.shape, dtype=torch.float64, device=device),
            bias=None if bb is None else bb.resolve_neg(),
            weights=ww,
        )[0]
        assert rel_err(y, ry) <= TOL[torch.float32], name
    # and where it refuses them, the public calls raise its message and write nothing
    with pytest.raises(ValueError, match="bias is on device meta"):
        fastglu.bias_swiglu_impl(x, torch.ones(16, device="meta"))
    with pytest.raises(ValueError, match="weights is on device meta"):
        fastglu.weighted_bias_swiglu_impl(x, None, torch.ones(6, 1, device="meta"))
    with pytest.raises(TypeError, match="bias has dtype torch.float16"):
        fastglu.bias_geglu_impl(x, b.half())
    with pytest.raises(ValueError, match=r"weights has shape \(5, 1\)"):
        fastglu.weighted_bias_quick_geglu_impl(
            x, b, torch.rand(5, 1, device=device), False, 1.0, 7.0
        )
    # the backward of a call whose dy is not the common case (another dtype) raises the checked message
    xr = x.clone().requires_grad_()
    y = fastglu.bias_swiglu_impl(xr, b)
    with torch.no_grad(), pytest.raises(TypeError, match="dy has dtype torch.float16"):
        fastglu.GLUFunction.backward(
            y.grad_fn, torch.ones(y.shape, dtype=torch.float16, device=device)
        )


def test_the_precomputed_params_are_the_checked_ones():
    # fastglu.swiglu and the Megatron entry points without options skip glu_params: same values
    assert fastglu.ops.SILU == fastglu.ops.glu_params("silu")
    assert fastglu.functional._GELU_TANH == fastglu.ops.glu_params("gelu_tanh")


def test_megatron_params_are_remembered_only_for_plain_numbers():
    G = fastglu.functional
    p1 = G._megatron_params("quick_gelu", 7.0, 1.0, "t")
    assert G._megatron_params("quick_gelu", 7, 1, "t") is p1  # the same options, the same params
    assert p1 == G.glu_params("quick_gelu", clamp_value=7.0, glu_linear_offset=1.0)
    t = torch.tensor(7.0)
    assert (
        G._megatron_params("quick_gelu", t, 1.0, "t") == p1
    )  # a tensor: checked (and read) every call
    with pytest.raises(ValueError, match="glu_linear_offset must be finite"):
        G._megatron_params("quick_gelu", 7.0, float("inf"), "t")
    with pytest.raises(TypeError, match="clamp_value must be a real number"):
        fastglu.bias_swiglu_impl(torch.randn(4, 8), None, clamp_value=True)


def test_megatron_params_keep_the_sign_of_a_zero_offset_and_skip_nan():
    # -0.0 == 0.0 as dict keys: the cache must not hand one call's offset to the other (v + o
    # keeps the sign of o for v = -0.0), and NaN options (never equal to themselves) are not stored.
    G = fastglu.functional
    G._MEGATRON_PARAMS.clear()
    neg = G._megatron_params("quick_gelu", None, -0.0, "t")
    pos = G._megatron_params("quick_gelu", None, 0.0, "t")
    assert (
        math.copysign(1.0, neg.glu_linear_offset) == -1.0
        and math.copysign(1.0, pos.glu_linear_offset) == 1.0
    )
    x, w = torch.tensor([[1.0, 2.0, -0.0, -0.0]]), torch.ones(1, 1)
    fastglu.weighted_bias_quick_geglu_impl(x, None, w, linear_offset=-0.0)
    y = fastglu.weighted_bias_quick_geglu_impl(x, None, w)
    checked = fastglu.ops._fwd_checked(
        fastglu.ops.glu_params("quick_gelu"), x, None, None, w, None, None, "t"
    )[0]
    assert torch.equal(y.view(torch.int32), checked.view(torch.int32))  # the sign bits too
    n = len(G._MEGATRON_PARAMS)
    for _ in range(3):
        G._megatron_params("silu", float("nan"), 0.0, "t")
    assert len(G._MEGATRON_PARAMS) == n


def test_bias_and_weights_without_memory_are_refused():
    # A tensor with elements but data_ptr() 0 (its storage resized to 0, as FSDP does to sharded
    # parameters) would reach the C library as "no bias" / "no weights": refused by name on both paths.
    x = torch.randn(4, 16)
    b, w = torch.randn(16), torch.rand(4, 1)
    b.untyped_storage().resize_(0)
    w.untyped_storage().resize_(0)
    with pytest.raises(ValueError, match="bias has 16 elements but no memory"):
        fastglu.bias_swiglu_impl(x, b)
    with pytest.raises(ValueError, match="bias has 16 elements but no memory"):
        glu_fwd(x, bias=b, out=torch.empty(4, 8))
    with pytest.raises(ValueError, match="weights has 4 elements but no memory"):
        fastglu.weighted_bias_swiglu_impl(x, None, w)


def test_options_beyond_the_float_range_raise_value_error():
    # float(10**400) raises OverflowError: named, as every other bad option
    with pytest.raises(ValueError, match=r"clamp_value must be within the float range"):
        fastglu.weighted_bias_swiglu_impl(
            torch.randn(4, 8), None, torch.rand(4, 1), clamp_value=10**400
        )
    with pytest.raises(ValueError, match=r"glu_linear_offset must be within the float range"):
        fastglu.glu(torch.randn(4, 8), glu_linear_offset=-(10**400))
