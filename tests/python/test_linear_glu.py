"""fastglu.linear and fastglu.linear_glu (fc1 with the GLU in the GEMM's epilogue) against a float64
reference written from include/fastglu.h, on CPU (CI) and CUDA (device): odd shapes, every variant,
dtypes; y bitwise fastglu.glu of the stored h; gradients; torch.compile(fullgraph=True) and fake
tensors; bad input named; the binding's sentinel-filled outputs, misaligned pointers and aliasing.

Tolerance (Frobenius norms). h is the fp32 sum of K products rounded to the dtype: the rounding
contributes at most the unit roundoff u (bf16 2^-8, fp16 2^-11, fp32 2^-24) of |h| per element, and
the fp32 sum, for random signs, an error growing like sqrt(K) * 2^-24 times the sum of the products'
magnitudes. So h is checked as ||h - h_ref|| <= tol * || |x| |w1|^T + |bias| || (the GEMM's own
scale: a norm relative to h itself is unbounded where the sum cancels, as it may at one or two
elements) with tol = 2 u + 2 sqrt(K) 2^-24: 7.8e-3 (bf16), 9.8e-4 (fp16), 6.6e-6 (fp32) at K = 2880,
within the house bounds 1e-2 / 1e-3 / 1e-5 at every K used here. y is checked against the float64
formulas applied to the stored h (y is defined from h rounded to the dtype, the clamp at clamp_value
rounded to the dtype as torch.clamp): its fp32 arithmetic and one rounding, within the house bound
of the dtype, plus the absolute rounding of values stored as subnormals (swiglu_reference.close: a
one-element fp16 y near 1e-5 carries up to 2.4e-3 of its own in the rounding alone).
"""

import math

import pytest
import torch
from swiglu_reference import close

import fastglu
from fastglu import _C

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
UNIT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
HOUSE = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}


def tolerance(dtype, K):
    tol = 2 * UNIT[dtype] + 2 * math.sqrt(max(K, 1)) * 2.0**-24
    assert tol <= HOUSE[dtype]
    return tol


def gemm_err(h, h_ref, x, w1, bias):
    """||h - h_ref|| over the GEMM's scale || |x| |w1|^T + |bias| ||."""
    scale = x.double().abs() @ w1.double().abs().T
    if bias is not None:
        scale = scale + bias.double().abs()
    n = scale.norm()
    return (
        ((h.double() - h_ref.double()).norm() / n).item()
        if n > 0
        else (h.double() - h_ref.double()).norm().item()
    )


def rel_err(got, ref):
    got, ref = got.double().cpu(), ref.double().cpu()
    n = ref.norm()
    return ((got - ref).norm() / n).item() if n > 0 else (got - ref).norm().item()


def act(name, z):
    if name == "silu":
        return z * torch.sigmoid(z)
    if name == "gelu_tanh":
        return 0.5 * z * (1 + torch.tanh(0.79788456 * z * (1 + 0.044715 * z * z)))
    return z * torch.sigmoid(1.702 * z)


def reference(x, w1, bias, weights, v, h_stored=None):
    """(y, h) in float64 from the formulas (include/fastglu.h); y from h_stored (the h the op
    returned) when given: y is defined from h rounded to the dtype, and a y from the unrounded h
    would charge it with h's rounding, amplified where u + o cancels (h is checked on its own)."""
    h = x.double() @ w1.double().T
    if bias is not None:
        h = h + bias.double()
    h_exact = h
    if h_stored is not None:
        h = h_stored.double().cpu().to(h.device)
    F = w1.shape[0] // 2
    g, u = (h[..., 0::2], h[..., 1::2]) if v.get("interleaved") else (h[..., :F], h[..., F:])
    c = v.get("clamp_value")
    if c:  # torch.clamp's bound: clamp_value in the dtype
        c = torch.tensor(c, dtype=torch.float32).to(x.dtype).item()
        g, u = g.clamp(max=c), u.clamp(-c, c)
    y = (
        v.get("down_multiplier", 1.0)
        * act(v.get("activation", "silu"), v.get("gate_multiplier", 1.0) * g)
        * (u + v.get("glu_linear_offset", 0.0))
    )
    if weights is not None:
        y = y * weights.double().reshape(y.shape[:-1] + (1,))
    return y, h_exact


VARIANTS = [
    dict(),
    dict(bias=True),
    dict(activation="gelu_tanh", bias=True, weights=torch.float32),
    dict(
        activation="quick_gelu",
        interleaved=True,
        bias=True,
        weights=torch.bfloat16,
        clamp_value=0.4,
        glu_linear_offset=1.0,
    ),
    dict(
        activation="silu",
        interleaved=True,
        clamp_value=0.3,
        gate_multiplier=1.5,
        down_multiplier=0.5,
        weights=torch.float16,
    ),
    dict(
        activation="gelu_tanh",
        clamp_value=0.5,
        glu_linear_offset=-0.5,
        gate_multiplier=0.75,
        down_multiplier=2.0,
    ),
]
SHAPES = [(1, 8, 1), (3, 37, 130), (257, 64, 3), (3, 2880, 5)]


def make(T, H, F, dtype, device, v, lead=None):
    x = torch.rand((lead or (T,)) + (H,)) * 2 - 1
    w1 = (torch.rand(2 * F, H) * 2 - 1) / math.sqrt(max(H, 1))
    bias = torch.rand(2 * F) - 0.5 if v.get("bias") else None
    weights = (
        (torch.rand(T, 1) * 0.9 + 0.1).to(v["weights"]).to(device) if v.get("weights") else None
    )
    cast = lambda t: None if t is None else t.to(dtype).to(device)  # noqa: E731
    return cast(x), cast(w1), cast(bias), weights


def options(v):
    return {k: val for k, val in v.items() if k not in ("bias", "weights")}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "T%d-H%d-F%d" % s)
@pytest.mark.parametrize("vi", range(len(VARIANTS)))
def test_forward_against_float64(device, dtype, shape, vi):
    T, H, F = shape
    v = VARIANTS[vi]
    x, w1, bias, weights = make(T, H, F, dtype, device, v)
    y, h = fastglu.linear_glu(x, w1, bias, weights=weights, **options(v))
    assert y.shape == (T, F) and h.shape == (T, 2 * F) and y.dtype == dtype and h.dtype == dtype
    y_ref, h_ref = reference(x, w1, bias, weights, v, h)
    assert gemm_err(h, h_ref, x, w1, bias) <= tolerance(dtype, H)
    assert close(y, y_ref, HOUSE[dtype])
    # y is the standalone forward of the stored h, bit for bit (fc1's bias is inside h)
    o = options(v)
    y_glu = fastglu.glu(
        h,
        o.get("activation", "silu"),
        weights=weights,
        clamp_value=o.get("clamp_value"),
        glu_linear_offset=o.get("glu_linear_offset", 0.0),
        gate_multiplier=o.get("gate_multiplier", 1.0),
        down_multiplier=o.get("down_multiplier", 1.0),
        interleaved=o.get("interleaved", False),
    )
    assert torch.equal(y, y_glu)
    # without h stored: the same y
    y2 = fastglu.linear_glu(x, w1, bias, weights=weights, return_preact=False, **o)
    assert torch.equal(y, y2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_3d_strided_and_deterministic(device, dtype):
    S, B, H, F = 3, 5, 48, 70
    x_big = (torch.rand(S, B, H + 7) * 2 - 1).to(dtype).to(device)
    x = x_big[..., 3 : 3 + H]  # rows with a stride, read in place
    w_big = ((torch.rand(2 * F, H + 2) * 2 - 1) / math.sqrt(H)).to(dtype).to(device)
    w1 = w_big[:, 1 : 1 + H]
    bias = (torch.rand(4 * F) - 0.5).to(dtype).to(device)[::2]  # non-contiguous: copied
    y, h = fastglu.linear_glu(x, w1, bias, "quick_gelu", clamp_value=0.7)
    y_ref, h_ref = reference(x, w1, bias, None, dict(activation="quick_gelu", clamp_value=0.7), h)
    assert y.shape == (S, B, F)
    assert gemm_err(h, h_ref, x, w1, bias) <= tolerance(dtype, H) and close(y, y_ref, HOUSE[dtype])
    y2, h2 = fastglu.linear_glu(x, w1, bias, "quick_gelu", clamp_value=0.7)
    assert torch.equal(y, y2) and torch.equal(h, h2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape", [(1, 8, 1), (3, 37, 130), (5, 2880, 3)], ids=lambda s: "T%d-K%d-N%d" % s
)
def test_linear(device, dtype, shape):
    T, K, N = shape
    x = (torch.rand(T, K) * 2 - 1).to(dtype).to(device)
    w = ((torch.rand(N, K) * 2 - 1) / math.sqrt(K)).to(dtype).to(device)
    b = (torch.rand(N) - 0.5).to(dtype).to(device)
    ref = x.double() @ w.double().T + b.double()
    assert gemm_err(fastglu.linear(x, w, b), ref, x, w, b) <= tolerance(dtype, K)
    assert gemm_err(fastglu.linear(x, w), x.double() @ w.double().T, x, w, None) <= tolerance(
        dtype, K
    )


@pytest.mark.parametrize("device", DEVICES)
def test_empty(device):
    x = torch.empty(0, 16, device=device)
    w1 = torch.rand(8, 16, device=device)
    y, h = fastglu.linear_glu(x, w1)
    assert y.shape == (0, 4) and h.shape == (0, 8)
    y, h = fastglu.linear_glu(torch.rand(3, 16, device=device), torch.empty(0, 16, device=device))
    assert y.shape == (3, 0)
    # hidden 0: h = bias
    b = torch.rand(8, device=device)
    y, h = fastglu.linear_glu(torch.empty(3, 0, device=device), torch.empty(8, 0, device=device), b)
    assert torch.equal(h, b.expand(3, 8))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("vi", [1, 3, 4])
def test_gradients(device, vi):
    """fp32 gradients of x, w1, bias, weights (and through h when it is used) against float64
    autograd of the reference."""
    v = VARIANTS[vi]
    T, H, F = 6, 24, 10
    x, w1, bias, weights = make(T, H, F, torch.float32, device, v)
    if weights is not None:
        weights = weights.float()
    leaves = [
        t.detach().clone().requires_grad_() if t is not None else None
        for t in (x, w1, bias, weights)
    ]
    y, h = fastglu.linear_glu(*leaves[:3], weights=leaves[3], **options(v))
    gy, gh = torch.randn_like(y), torch.randn_like(h)
    ((y * gy).sum() + (h * gh).sum()).backward()
    refs = [
        t.detach().double().requires_grad_() if t is not None else None
        for t in (x, w1, bias, weights)
    ]
    y_ref, h_ref = reference(*refs, v)
    ((y_ref * gy.double()).sum() + (h_ref * gh.double()).sum()).backward()
    for got, ref in zip(leaves, refs):
        if got is not None:
            assert rel_err(got.grad, ref.grad) <= 1e-5


def test_plain_linear_gradients():
    x = torch.rand(4, 9, requires_grad=True)
    w = torch.rand(5, 9, requires_grad=True)
    b = torch.rand(5, requires_grad=True)
    g = torch.randn(4, 5)
    (fastglu.linear(x, w, b) * g).sum().backward()
    xr, wr, br = (t.detach().double().requires_grad_() for t in (x, w, b))
    ((xr @ wr.T + br) * g.double()).sum().backward()
    for got, ref in ((x, xr), (w, wr), (b, br)):
        assert rel_err(got.grad, ref.grad) <= 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    torch._dynamo.reset()

    def mlp(x, w1, b1, w2, weights):
        y, h = fastglu.linear_glu(x, w1, b1, "silu", weights=weights, clamp_value=2.0)
        return fastglu.linear(y, w2), h

    x, w1, b1, weights = make(
        7, 32, 24, torch.float32, device, dict(bias=True, weights=torch.float32)
    )
    w2 = torch.rand(32, 24, device=device)
    compiled = torch.compile(mlp, fullgraph=True)
    out, h = compiled(x, w1, b1, w2, weights)
    out_e, h_e = mlp(x, w1, b1, w2, weights)
    assert torch.equal(out, out_e) and torch.equal(h, h_e)


def test_fake_tensors_and_opcheck():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(2, 3, 16, dtype=torch.bfloat16)
        w1 = torch.empty(40, 16, dtype=torch.bfloat16)
        y, h = torch.ops.fastglu.linear_glu_fwd(x, w1, None, None, 0, 0, 0.0, 0.0, 1.0, 1.0, True)
        assert y.shape == (2, 3, 20) and h.shape == (2, 3, 40) and y.dtype == torch.bfloat16
        y, h = torch.ops.fastglu.linear_glu_fwd(x, w1, None, None, 0, 0, 0.0, 0.0, 1.0, 1.0, False)
        assert h.shape == (0,)
        assert torch.ops.fastglu.linear(x, w1, None).shape == (2, 3, 40)
        with pytest.raises(ValueError, match="mismatched K"):
            torch.ops.fastglu.linear_glu_fwd(
                x,
                torch.empty(40, 15, dtype=torch.bfloat16),
                None,
                None,
                0,
                0,
                0.0,
                0.0,
                1.0,
                1.0,
                True,
            )
    x = torch.rand(5, 12)
    w1 = torch.rand(8, 12, requires_grad=True)
    b = torch.rand(8, requires_grad=True)
    torch.library.opcheck(
        torch.ops.fastglu.linear_glu_fwd.default, (x, w1, b, None, 0, 0, 0.0, 0.0, 1.0, 1.0, True)
    )
    torch.library.opcheck(torch.ops.fastglu.linear.default, (x, w1, b))


# ---- bad input ----------------------------------------------------------------------------------


def test_bad_inputs_named():
    x = torch.rand(4, 16, dtype=torch.bfloat16)
    w1 = torch.rand(12, 16, dtype=torch.bfloat16)
    with pytest.raises(
        TypeError, match="w1 has dtype torch.float16 but x has dtype torch.bfloat16"
    ):
        fastglu.linear_glu(x, w1.half())
    with pytest.raises(TypeError, match="x has dtype torch.float64"):
        fastglu.linear_glu(x.double(), w1)
    with pytest.raises(ValueError, match=r"w1 has shape \(12, 15\).*mismatched K"):
        fastglu.linear_glu(x, w1[:, :15])
    with pytest.raises(ValueError, match="rows must be even"):
        fastglu.linear_glu(x, w1[:11])
    with pytest.raises(ValueError, match=r"bias has shape \(6,\)"):
        fastglu.linear_glu(x, w1, torch.rand(6, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="bias has dtype torch.float32"):
        fastglu.linear_glu(x, w1, torch.rand(12))
    with pytest.raises(ValueError, match=r"weights has shape \(3,\)"):
        fastglu.linear_glu(x, w1, weights=torch.rand(3))
    with pytest.raises(ValueError, match="activation must be one of"):
        fastglu.linear_glu(x, w1, activation="relu")
    with pytest.raises(ValueError, match="gate_multiplier must be finite"):
        fastglu.linear_glu(x, w1, gate_multiplier=float("inf"))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        fastglu.linear_glu([1.0], w1)
    with pytest.raises(ValueError, match="w has shape"):
        fastglu.linear(x, torch.rand(5, 3, dtype=torch.bfloat16))


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
def test_bad_device():
    x = torch.rand(4, 16, device="cuda")
    with pytest.raises(ValueError, match="w1 is on cpu but x is on cuda"):
        fastglu.linear_glu(x, torch.rand(12, 16))


def _binding_call(device, x, w1, bias, h, y, x_ptr=None, y_ptr=None, h_ptr=None):
    T, H = x.shape
    F = w1.shape[0] // 2
    on_cuda = device == "cuda"
    stream = torch.cuda.current_stream().cuda_stream if on_cuda else 0
    return _C.linear_glu_fwd(
        int(on_cuda),
        _C.ACT_SILU,
        _C.LAYOUT_SPLIT,
        0.0,
        0.0,
        1.0,
        1.0,
        _C.DTYPE_BF16,
        x.data_ptr() if x_ptr is None else x_ptr,
        H,
        w1.data_ptr(),
        H,
        bias.data_ptr(),
        0,
        _C.DTYPE_FP32,
        0,
        h.data_ptr() if h_ptr is None else h_ptr,
        2 * F + 3,
        y.data_ptr() if y_ptr is None else y_ptr,
        F + 1,
        T,
        H,
        F,
        stream,
    )


@pytest.mark.parametrize("device", DEVICES)
def test_binding_sentinel_misaligned_aliasing(device):
    """The C entry point through the binding: outputs in padded rows pre-filled with NaN get every
    element written and no padding touched; a misaligned pointer and an output aliasing an input
    raise ValueError with the library's message, leaving every byte as it was."""
    T, H, F = 5, 33, 7
    x = (torch.rand(T, H) * 2 - 1).to(torch.bfloat16).to(device)
    w1 = ((torch.rand(2 * F, H) * 2 - 1) / 6).to(torch.bfloat16).to(device)
    bias = (torch.rand(2 * F) - 0.5).to(torch.bfloat16).to(device)
    h = torch.full((T, 2 * F + 3), float("nan"), dtype=torch.bfloat16, device=device)
    y = torch.full((T, F + 1), float("nan"), dtype=torch.bfloat16, device=device)
    _binding_call(device, x, w1, bias, h, y)
    if device == "cuda":
        torch.cuda.synchronize()
    assert not h[:, : 2 * F].isnan().any() and h[:, 2 * F :].isnan().all()
    assert not y[:, :F].isnan().any() and y[:, F:].isnan().all()
    y_ref, h_ref = reference(x, w1, bias, None, {}, h[:, : 2 * F])
    assert gemm_err(h[:, : 2 * F], h_ref, x, w1, bias) <= 1e-2 and rel_err(y[:, :F], y_ref) <= 1e-2

    before = [t.clone() for t in (x, w1, bias, h, y)]
    with pytest.raises(ValueError, match="x = 0x[0-9a-f]+ is not aligned to its 2-byte element"):
        _binding_call(device, x, w1, bias, h, y, x_ptr=x.data_ptr() + 1)
    with pytest.raises(ValueError, match="y overlaps x"):
        _binding_call(device, x, w1, bias, h, y, y_ptr=x.data_ptr())
    with pytest.raises(ValueError, match="y overlaps h"):
        _binding_call(device, x, w1, bias, h, y, y_ptr=h.data_ptr() + 2)
    with pytest.raises(TypeError, match="dtype code 9"):
        _C.linear(0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0)
    for b, a in zip(before, (x, w1, bias, h, y)):
        assert torch.equal(b.view(torch.int16), a.view(torch.int16))


def test_bench_smoke(tmp_path):
    """The benchmark's CPU path on tiny shapes writes seed-format records."""
    from fastglu.bench import mlp

    records = mlp.main(["--smoke", "--out", str(tmp_path)])
    benches = {r["benchmark"] for r in records}
    assert benches == {"mlp_glu/forward", "mlp_glu/fwd_bwd", "gemm/forward"}
    providers = {r["provider"] for r in records}
    assert {"fastglu_fused", "cublas_fastglu", "cublas_gemm_only", "fastglu", "cublas"} <= providers
    assert all(r["ms"] > 0 for r in records if r.get("ms") is not None)
    assert (tmp_path / "mlp.jsonl").exists()


@pytest.mark.parametrize(
    "x_shape, w_shape", [((4, 0), (6, 0)), ((4, 8), (0, 8)), ((2, 3, 0), (6, 0))]
)
def test_empty_hidden_or_width_backward_gives_empty_or_zero_gradients(x_shape, w_shape):
    """hidden = 0 or F = 0: the forward is legal, and so is the backward (as F.linear's)."""
    for fn in (lambda x, w: fastglu.linear_glu(x, w)[0], fastglu.linear):
        x = torch.randn(*x_shape, requires_grad=True)
        w = torch.randn(*w_shape, requires_grad=True)
        xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        fn(x, w).sum().backward()
        torch.nn.functional.linear(xr, wr).sum().backward()
        assert x.grad.shape == x.shape and w.grad.shape == w.shape
        assert torch.count_nonzero(x.grad) == 0 and torch.count_nonzero(w.grad) == 0
        assert torch.count_nonzero(xr.grad) == 0 and torch.count_nonzero(wr.grad) == 0


@pytest.mark.parametrize("which", ["x", "w"])
def test_sparse_operands_get_a_type_error_naming_them(which):
    x, w = torch.randn(4, 8), torch.randn(6, 8)
    args = {"x": x.to_sparse() if which == "x" else x, "w": w.to_sparse() if which == "w" else w}
    with pytest.raises(TypeError, match=rf"fastglu.linear: {which} has layout"):
        fastglu.linear(args["x"], args["w"])
    with pytest.raises(
        TypeError, match=rf"fastglu.linear_glu: {'w1' if which == 'w' else 'x'} has layout"
    ):
        fastglu.linear_glu(args["x"], args["w"])


@pytest.mark.parametrize("return_preact", [True, False])
def test_linear_glu_refuses_create_graph(return_preact):
    """create_graph=True through linear_glu raises at the backward (the GLU backward has no
    derivative of its own), as fastglu.glu and fastglu.mlp do, instead of a gradient whose own
    gradient fails later."""
    x = torch.randn(4, 8, requires_grad=True)
    w1 = torch.randn(12, 8, requires_grad=True)
    out = fastglu.linear_glu(x, w1, return_preact=return_preact)
    y = out[0] if return_preact else out
    with pytest.raises(RuntimeError, match="linear_glu.backward: double backward"):
        torch.autograd.grad(y.sum(), x, create_graph=True)
    (g,) = torch.autograd.grad(fastglu.linear_glu(x, w1, return_preact=False).sum(), x)
    assert g.shape == x.shape
