"""fastglu.linear_dglu_bwd (fc2's dgrad with the GLU backward in the GEMM's epilogue) against a
float64 reference on CPU (CI) and CUDA (device): dY = d_out @ w2 exactly, rounded to the dtype as
the contract says (a separate GEMM's output), then the gradient of sum(y(h) * dY) with respect to
h and the per-token weights by float64 autograd through the family's formulas (include/fastglu.h;
the clamp bound rounded to the dtype as torch.clamp rounds it, whose gradient passes at the bound),
and y itself. Tolerance: the house bound of the dtype on relative Frobenius norms, plus the fp32
sum's error carried through (gemm_bound). Also: y bitwise fastglu.glu(h) on the same device, 3D
inputs, the torch.library op's fake implementation (opcheck), bad input named.
"""

import pytest
import torch
from swiglu_reference import close

import fastglu
from fastglu import linear_dglu_bwd

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
HOUSE = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}

# (activation, options): every variant the forward's epilogue supports
VARIANTS = [
    ("silu", {}),
    ("gelu_tanh", {"weights": torch.float32}),
    (
        "quick_gelu",
        {
            "interleaved": True,
            "weights": torch.bfloat16,
            "clamp_value": 0.4,
            "glu_linear_offset": 1.0,
        },
    ),
    (
        "silu",
        {
            "interleaved": True,
            "clamp_value": 0.3,
            "gate_multiplier": 1.5,
            "down_multiplier": 0.5,
            "weights": torch.float16,
        },
    ),
    ("silu", {"clamp_value": 0.5, "glu_linear_offset": -0.5, "weights": torch.float32}),
    (
        "gelu_tanh",
        {
            "interleaved": True,
            "clamp_value": 0.5,
            "glu_linear_offset": 0.25,
            "gate_multiplier": 0.75,
            "down_multiplier": 2.0,
        },
    ),
]


def act(name, z):
    if name == "silu":
        return z * torch.sigmoid(z)
    if name == "gelu_tanh":
        return 0.5 * z * (1.0 + torch.tanh(0.79788456 * z * (1.0 + 0.044715 * z * z)))
    return z * torch.sigmoid(1.702 * z)


def reference(d_out, w2, h, weights, activation, opts, dtype, dy=None):
    """float64 (dh, y, dweights) of the contract, by autograd through the forward formulas, on dY =
    d_out @ w2 rounded to the dtype (through fp32, as the library rounds its fp32 sum); dy: fc2's
    data gradient to take instead (gemm_bound's)."""
    F = w2.shape[1]
    if dy is None:
        dy = (d_out.double().reshape(-1, d_out.shape[-1]) @ w2.double()).float().to(dtype).double()
    h64 = h.double().reshape(-1, 2 * F).clone().requires_grad_(True)
    w64 = (
        weights.double().reshape(-1, 1)
        if weights is not None
        else torch.ones(h64.shape[0], 1, dtype=torch.float64, device=h.device)
    )
    w64.requires_grad_(True)
    if opts.get("interleaved"):
        g, u = h64[:, 0::2], h64[:, 1::2]
    else:
        g, u = h64[:, :F], h64[:, F:]
    c = opts.get("clamp_value")
    if c:
        c = torch.tensor(c, dtype=dtype).double().item()  # the bound in the dtype, as torch.clamp's
        g, u = torch.clamp(g, max=c), torch.clamp(u, min=-c, max=c)
    y = (
        opts.get("down_multiplier", 1.0)
        * w64
        * act(activation, opts.get("gate_multiplier", 1.0) * g)
        * (u + opts.get("glu_linear_offset", 0.0))
    )
    dh, dw = torch.autograd.grad((y * dy).sum(), (h64, w64))
    return dh.reshape(h.shape), y.detach().reshape(h.shape[:-1] + (F,)), dw.reshape(-1)


def gemm_bound(d_out, w2, h, weights, activation, opts, dtype):
    """How far dh and dweights may lie from the float64 reference because dY = dO @ w2 is a K-long
    GEMM accumulated in fp32: the fp32 sum lies within e = (K + 2) u (|dO| @ |w2|) of the exact one
    (u: fp32's unit roundoff), so the dY the library reads (that sum rounded to the dtype) lies
    within the rounding's spread over [dY - e, dY + e] of the reference's (0 where both ends round
    alike). dh depends on each dY element through one factor, so the same reference run on that
    spread gives dh's bound (its absolute value); dweights sums such terms, so their absolute values
    bound it. Returns the norms of (dh bound, dweights bound), added to the relative tolerance: with
    cancellation in dO @ w2 (a small dY from terms of size 1) the relative error of dh is not
    bounded by the dtype alone (T = 1, F = 1, fp32 failed about once in 100 draws without it)."""
    K = d_out.shape[-1]
    u = torch.finfo(torch.float32).eps / 2
    exact = d_out.double().reshape(-1, K) @ w2.double()
    e = (K + 2) * u * (d_out.double().abs().reshape(-1, K) @ w2.double().abs())
    err = (exact + e).float().to(dtype).double() - (exact - e).float().to(dtype).double()
    dh_b, _, _ = reference(d_out, w2, h, weights, activation, opts, dtype, dy=err)
    _, y_b, _ = reference(d_out, w2, h, None, activation, opts, dtype, dy=err)
    dw_b = (y_b.abs().reshape(err.shape) * err).sum(-1)
    return dh_b.abs().norm().item(), dw_b.norm().item()


def rel(a, b):
    a, b = a.double().cpu().reshape(-1), b.double().cpu().reshape(-1)
    n = b.norm()
    return ((a - b).norm() / n).item() if n > 0 else (a - b).norm().item()


def make(lead, H, F, dtype, device, wdt=None):
    d_out = torch.empty(lead + (H,), dtype=dtype).uniform_(-1, 1).to(device)
    w2 = (
        (torch.empty(H, F, dtype=torch.float64).uniform_(-1, 1) / max(H, 1) ** 0.5)
        .to(dtype)
        .to(device)
    )
    h = torch.empty(lead + (2 * F,), dtype=dtype).uniform_(-1.5, 1.5).to(device)
    weights = None if wdt is None else torch.empty(lead, dtype=wdt).uniform_(0.1, 1.0).to(device)
    return d_out, w2, h, weights


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", range(len(VARIANTS)))
@pytest.mark.parametrize(
    "shape", [((1,), 7, 1), ((3,), 37, 3), ((257,), 33, 130), ((2, 3), 16, 24)]
)
def test_against_float64(device, dtype, variant, shape):
    activation, opts = VARIANTS[variant]
    lead, H, F = shape
    opts = dict(opts)
    wdt = opts.pop("weights", None)
    d_out, w2, h, weights = make(lead, H, F, dtype, device, wdt)
    if weights is not None:
        dh, y, dw = linear_dglu_bwd(
            d_out, w2, h, activation, weights=weights, return_dweights=True, **opts
        )
    else:
        dh, y = linear_dglu_bwd(d_out, w2, h, activation, **opts)
    assert dh.shape == h.shape and dh.dtype == dtype and y.shape == lead + (F,)
    dh_ref, y_ref, dw_ref = reference(d_out, w2, h, weights, activation, opts, dtype)
    tol = HOUSE[dtype]
    dh_gemm, dw_gemm = gemm_bound(d_out, w2, h, weights, activation, opts, dtype)
    assert close(dh, dh_ref, tol, extra=dh_gemm)
    assert close(y, y_ref, tol)
    if weights is not None:
        assert dw.shape == weights.shape and dw.dtype == weights.dtype
        assert close(dw, dw_ref, max(tol, HOUSE[weights.dtype]), extra=dw_gemm)
    # y is the forward's value of h, bit for bit
    y_fwd = fastglu.glu(h, activation, weights=weights, **opts)
    assert torch.equal(y, y_fwd)


@pytest.mark.parametrize("device", DEVICES)
def test_without_y_same_dh(device):
    d_out, w2, h, weights = make((5,), 24, 16, torch.bfloat16, device, torch.float32)
    dh, y, dw = linear_dglu_bwd(d_out, w2, h, "silu", weights=weights, return_dweights=True)
    dh2, y2 = linear_dglu_bwd(d_out, w2, h, "silu", weights=weights, return_y=False)
    assert y2 is None and torch.equal(dh, dh2)
    dh3, y3, dw3 = linear_dglu_bwd(d_out, w2, h, "silu", weights=weights, return_dweights=True)
    assert torch.equal(dh, dh3) and torch.equal(y, y3) and torch.equal(dw, dw3)  # deterministic


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("variant", [0, 1, 4])
def test_cuda_aligned_shapes(dtype, variant):
    """Shapes the sm_90a kernel takes (SPLIT, multiples of 8, no dweights), on an H200 its path."""
    activation, opts = VARIANTS[variant]
    opts = dict(opts)
    wdt = opts.pop("weights", None)
    d_out, w2, h, weights = make((1024,), 2880, 1408, dtype, "cuda", wdt)
    dh, y = linear_dglu_bwd(d_out, w2, h, activation, weights=weights, **opts)
    dh_ref, y_ref, _ = reference(d_out, w2, h, weights, activation, opts, dtype)
    assert rel(dh, dh_ref) <= HOUSE[dtype]
    assert rel(y, y_ref) <= HOUSE[dtype]
    dh_cpu, y_cpu = linear_dglu_bwd(
        d_out.cpu(),
        w2.cpu(),
        h.cpu(),
        activation,
        weights=None if weights is None else weights.cpu(),
        **opts,
    )
    assert rel(dh, dh_cpu.double()) <= HOUSE[dtype]


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("wdt", [torch.float32, torch.bfloat16])
def test_cuda_aligned_dweights(wdt):
    """dweights at a shape the sm_90a kernel takes (on an H200 its row-owner path): against float64,
    dh bitwise the call without dweights, deterministic."""
    d_out, w2, h, weights = make((1000,), 1408, 1416, torch.bfloat16, "cuda", wdt)
    dh, y, dw = linear_dglu_bwd(d_out, w2, h, "silu", weights=weights, return_dweights=True)
    dh_ref, y_ref, dw_ref = reference(d_out, w2, h, weights, "silu", {}, torch.bfloat16)
    assert rel(dh, dh_ref) <= HOUSE[torch.bfloat16]
    assert rel(y, y_ref) <= HOUSE[torch.bfloat16]
    assert dw.dtype == wdt and rel(dw, dw_ref) <= max(HOUSE[torch.bfloat16], HOUSE[wdt])
    dh2, y2 = linear_dglu_bwd(d_out, w2, h, "silu", weights=weights)
    assert torch.equal(dh, dh2) and torch.equal(y, y2)
    _, _, dw2 = linear_dglu_bwd(d_out, w2, h, "silu", weights=weights, return_dweights=True)
    assert torch.equal(dw, dw2)


def test_opcheck_fake():
    d_out, w2, h, weights = make((3,), 8, 5, torch.float32, "cpu", torch.float32)
    args = (d_out, w2, h, weights, 0, 0, 0.0, 0.0, 1.0, 1.0, True, True)
    torch.library.opcheck(torch.ops.fastglu.linear_dglu_bwd.default, args)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fargs = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
        dh, y, dw = torch.ops.fastglu.linear_dglu_bwd(*fargs)
    assert dh.shape == (3, 10) and y.shape == (3, 5) and dw.shape == (3,)


def test_bad_input_named():
    d_out, w2, h, weights = make((4,), 8, 6, torch.bfloat16, "cpu", torch.float32)
    with pytest.raises(TypeError, match="w2 has dtype torch.float16"):
        linear_dglu_bwd(d_out, w2.half(), h)
    with pytest.raises(ValueError, match="w2 has shape \\(7, 6\\)"):
        linear_dglu_bwd(d_out, w2[:7], h)
    with pytest.raises(ValueError, match="h has shape \\(4, 10\\)"):
        linear_dglu_bwd(d_out, w2, h[:, :10])
    with pytest.raises(ValueError, match="return_dweights=True needs weights"):
        linear_dglu_bwd(d_out, w2, h, return_dweights=True)
    with pytest.raises(ValueError, match="weights has shape \\(3,\\)"):
        linear_dglu_bwd(d_out, w2, h, weights=weights[:3])
    with pytest.raises(ValueError, match="activation"):
        linear_dglu_bwd(d_out, w2, h, "relu")
    with pytest.raises(TypeError, match="h must be a torch.Tensor"):
        linear_dglu_bwd(d_out, w2, [1.0])


def test_strided_operands_match_contiguous():
    """w2 as a transposed view and h as a column slice are taken as they are (or copied) with the
    same result as their contiguous copies."""
    d_out, w2, h, _ = make((9,), 12, 10, torch.float32, "cpu")
    w2t = w2.t().contiguous().t()  # column stride != 1
    big = torch.empty(9, 40).uniform_(-1.5, 1.5)
    big[:, 3:23] = h
    dh1, y1 = linear_dglu_bwd(d_out, w2t, big[:, 3:23])
    dh2, y2 = linear_dglu_bwd(d_out, w2, h)
    assert torch.equal(dh1, dh2) and torch.equal(y1, y2)


def test_outputs_have_no_gradient():
    """dh and y come from a backward kernel: a backward through them raises instead of leaving the
    inputs' gradients None."""
    do = torch.randn(4, 8, requires_grad=True)
    w2, h = torch.randn(8, 3, requires_grad=True), torch.randn(4, 6, requires_grad=True)
    dh, _ = fastglu.linear_dglu_bwd(do, w2, h)
    with pytest.raises(RuntimeError, match="no gradient"):
        dh.sum().backward()
