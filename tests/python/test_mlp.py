"""fastglu.mlp (fc1 -> GLU -> fc2 as one autograd op) and fastglu.modules.GLUMLP against a float64
reference (plain torch math in float64 on the same inputs), on CPU (CI) and CUDA (device): odd
shapes, bf16 / fp16 / fp32, both forward paths, recompute, every option; torch.compile(fullgraph=True)
without a graph break; fake tensors; 3D x; CUDA-graph capture; bad inputs named; checkpoint loading.

Tolerance. Every checked tensor comes out of a chain of contractions (fc1, fc2, dY = dO @ w2, the
weight and data gradients, the sums over tokens / F) whose operands went through at most n = 4
roundings to the dtype (h, y or dY, dh, the result), each at most the unit roundoff u (bf16 2^-8,
fp16 2^-11, fp32 2^-24) relative to the operand, independent roundings adding in quadrature; the fp32
accumulation of K products adds, for random signs, about sqrt(K) 2^-24 of the sum of the products'
magnitudes. A rounding error is relative to the magnitudes that went into a value, not to the value,
which is unbounded where a sum cancels (T = 1, F = 1 or 3, a gate near 0). So each tensor is checked as
    || got - ref || <= (sqrt(n) u + 2 sqrt(K) 2^-24) * || ref_mag ||
where ref_mag is the same float64 computation on the inputs' magnitudes (|x|, |w1|, |w2|, |bias|,
|weights|, |dO|, |offset|: every contraction then adds magnitudes, as the error bound does) and K
the longest contraction (max(hidden, 2F, tokens)). The bound is 7.8e-3 (bf16), 9.8e-4 (fp16),
6.4e-6 (fp32) at K = 2816, within the house bounds 1e-2 / 1e-3 / 1e-5 (asserted).
"""

import math

import pytest
import torch
import torch.nn.functional as F_

import fastglu
from fastglu.mlp_block import FUSED_MIN_F, mlp_fused_default
from fastglu.modules import GLUMLP

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
UNIT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
HOUSE = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}
ROUNDINGS = 4


def tolerance(dtype, K):
    tol = math.sqrt(ROUNDINGS) * UNIT[dtype] + 2 * math.sqrt(max(K, 1)) * 2.0**-24
    assert tol <= HOUSE[dtype]
    return tol


def act(name, z):
    if name == "silu":
        return z * torch.sigmoid(z)
    if name == "gelu_tanh":
        return 0.5 * z * (1 + torch.tanh(0.7978845608028654 * z * (1 + 0.044715 * z * z)))
    return z * torch.sigmoid(1.702 * z)


def reference(x, w1, w2, b1, b2, wt, dout, v):
    """float64 (out, {name: grad}) by autograd of the plain formulas."""
    leaves = {
        k: (t.detach().double().requires_grad_() if t is not None else None)
        for k, t in (
            ("x", x),
            ("w1", w1),
            ("w2", w2),
            ("bias1", b1),
            ("bias2", b2),
            ("weights", wt),
        )
    }
    xd, w1d, w2d = leaves["x"], leaves["w1"], leaves["w2"]
    F = w1.shape[0] // 2
    h = xd @ w1d.T
    if b1 is not None:
        h = h + leaves["bias1"]
    g, u = (h[..., 0::2], h[..., 1::2]) if v.get("interleaved") else (h[..., :F], h[..., F:])
    c = v.get("clamp_value")
    if c:  # torch.clamp's bound: clamp_value in the dtype
        c = torch.tensor(c, dtype=torch.float32).to(x.dtype).item()
        # fastglu clamps h as stored (rounded to the dtype): which elements are cut is decided on
        # the rounded h, else an h within one rounding of c cuts in one and passes in the other
        # and its gradient differs by the whole element's (seen on the H200 at T = 3)
        hr = h.detach().to(x.dtype).double()
        gr, ur = (
            (hr[..., 0::2], hr[..., 1::2]) if v.get("interleaved") else (hr[..., :F], hr[..., F:])
        )
        g = torch.where(gr > c, torch.full_like(g, c), g)
        u = torch.where(
            ur > c, torch.full_like(u, c), torch.where(ur < -c, torch.full_like(u, -c), u)
        )
    yu = (
        v.get("down_multiplier", 1.0)
        * act(v.get("activation", "silu"), v.get("gate_multiplier", 1.0) * g)
        * (u + v.get("glu_linear_offset", 0.0))
    )
    y = yu if wt is None else yu * leaves["weights"].reshape(yu.shape[:-1] + (1,))
    out = y @ w2d.T
    if b2 is not None:
        out = out + leaves["bias2"]
    out.backward(dout.double())
    return out.detach(), {k: t.grad for k, t in leaves.items() if t is not None}


def reference_and_scale(x, w1, w2, b1, b2, wt, dout, v):
    """(out, grads, {name: (magnitude reference, K)}): see the module docstring."""
    out, grads = reference(x, w1, w2, b1, b2, wt, dout, v)
    a = lambda t: None if t is None else t.abs()  # noqa: E731
    vm = dict(v, glu_linear_offset=abs(v.get("glu_linear_offset", 0.0)), clamp_value=None)
    out_m, grads_m = reference(a(x), a(w1), a(w2), a(b1), a(b2), a(wt), a(dout), vm)
    K = max(x.shape[-1], w1.shape[0], x.numel() // x.shape[-1])
    scales = {k: (g.abs(), K) for k, g in grads_m.items()}
    scales["out"] = (out_m.abs(), K)
    return out, grads, scales


def check(name, got, ref, scale_k, dtype):
    scale, K = scale_k
    err = (got.detach().double().cpu().reshape(-1) - ref.cpu().reshape(-1)).norm().item()
    n = scale.norm().item()
    assert err <= tolerance(dtype, K) * n + 1e-300, (
        f"{name}: error {err:.3e} over scale {n:.3e} (K = {K})"
    )


VARIANTS = {
    "swiglu": {},
    "bias-weights": {"bias": True, "weights": True},
    "geglu-clamp-offset": {
        "activation": "gelu_tanh",
        "clamp_value": 1.5,
        "glu_linear_offset": 1.0,
        "bias": True,
    },
    "quick-interleaved-multipliers": {
        "activation": "quick_gelu",
        "interleaved": True,
        "gate_multiplier": 0.5,
        "down_multiplier": 2.0,
        "weights": True,
    },
}
SHAPES = [(1, 5, 1), (3, 7, 3), (257, 67, 1408)]


def make(T, H, F, dtype, device, v, lead=None):
    x = torch.randn(*(lead or (T,)), H, dtype=dtype, device=device)
    w1 = (torch.randn(2 * F, H, device=device) / math.sqrt(H)).to(dtype)
    w2 = (torch.randn(H, F, device=device) / math.sqrt(F)).to(dtype)
    b1 = torch.randn(2 * F, device=device).to(dtype) * 0.5 if v.get("bias") else None
    b2 = torch.randn(H, device=device).to(dtype) if v.get("bias") else None
    wt = (torch.rand(T, 1, device=device) + 0.25) if v.get("weights") else None
    return x, w1, w2, b1, b2, wt


def options(v):
    return {
        k: v[k]
        for k in (
            "activation",
            "clamp_value",
            "glu_linear_offset",
            "gate_multiplier",
            "down_multiplier",
            "interleaved",
        )
        if k in v
    }


def run(x, w1, w2, b1, b2, wt, dout, v, **kw):
    leaves = [
        t.detach().clone().requires_grad_() if t is not None else None
        for t in (x, w1, w2, b1, b2, wt)
    ]
    out = fastglu.mlp(
        leaves[0],
        leaves[1],
        leaves[2],
        bias1=leaves[3],
        bias2=leaves[4],
        weights=leaves[5],
        **options(v),
        **kw,
    )
    out.backward(dout)
    names = ("x", "w1", "w2", "bias1", "bias2", "weights")
    return out.detach(), {n: t.grad for n, t in zip(names, leaves, strict=True) if t is not None}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("vi", list(VARIANTS))
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("recompute", [False, True], ids=["save-h", "recompute"])
def test_against_float64(device, dtype, shape, vi, fused, recompute):
    if shape[0] == 257 and vi not in ("swiglu", "bias-weights") and dtype != torch.bfloat16:
        pytest.skip("the large shape runs two variants in every dtype, all four in bf16")
    v = VARIANTS[vi]
    T, H, F = shape
    x, w1, w2, b1, b2, wt = make(T, H, F, dtype, device, v)
    dout = torch.randn(T, H, dtype=dtype, device=device)
    out, grads = run(x, w1, w2, b1, b2, wt, dout, v, fused=fused, recompute=recompute)
    ref, ref_grads, scales = reference_and_scale(x, w1, w2, b1, b2, wt, dout, v)
    assert out.shape == (T, H) and out.dtype == dtype
    check("out", out, ref, scales["out"], dtype)
    assert set(grads) == set(ref_grads)
    for name, g in grads.items():
        assert g.shape == ref_grads[name].shape, name
        check(name, g, ref_grads[name], scales[name], dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_paths_agree_and_3d(device, dtype):
    """fused, unfused and recompute give the same results within rounding; 3D x [S, B, H] equals
    the flattened 2D call."""
    v = {"bias": True, "weights": True}
    S, B, H, F = 5, 3, 24, 40
    x, w1, w2, b1, b2, wt = make(S * B, H, F, dtype, device, v, lead=(S, B))
    dout = torch.randn(S, B, H, dtype=dtype, device=device)
    runs = [
        run(x, w1, w2, b1, b2, wt, dout, v, fused=f, recompute=r)
        for f in (True, False)
        for r in (False, True)
    ]
    ref, ref_grads, scales = reference_and_scale(x, w1, w2, b1, b2, wt, dout, v)
    for out, grads in runs:
        assert out.shape == (S, B, H)
        check("out", out, ref, scales["out"], dtype)
        for name, g in grads.items():
            check(name, g, ref_grads[name], scales[name], dtype)
    # recompute changes what is saved, not what is computed: bitwise on one path
    for a, b in ((runs[0], runs[1]), (runs[2], runs[3])):
        assert torch.equal(a[0], b[0])
        for name in a[1]:
            assert torch.equal(a[1][name], b[1][name]), name
    flat = run(x.reshape(S * B, H), w1, w2, b1, b2, wt, dout.reshape(S * B, H), v, fused=True)
    assert torch.equal(flat[0].reshape(S, B, H), runs[0][0])


def test_saved_tensors_are_x_and_h_or_x_only():
    """The forward saves h (not y); recompute saves x and the weights only."""
    T, H, F = 6, 8, 10
    x = torch.randn(T, H, requires_grad=True)
    w1 = torch.randn(2 * F, H, requires_grad=True)
    w2 = torch.randn(H, F, requires_grad=True)
    for recompute, widths in ((False, {H, 2 * F}), (True, {H})):
        shapes = []

        def pack(t, shapes=shapes):
            shapes.append(tuple(t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fastglu.mlp(x, w1, w2, recompute=recompute)
        activations = {s[-1] for s in shapes if s[0] == T}
        assert activations == widths, shapes
        assert (T, F) not in shapes


def test_no_grad_stores_no_h():
    x, w1, w2 = torch.randn(4, 8), torch.randn(12, 8), torch.randn(8, 6)
    out, h = torch.ops.fastglu.mlp_fwd(
        x, w1, w2, None, None, None, 0, 0, 0.0, 0.0, 1.0, 1.0, 1, False
    )
    assert h.numel() == 0
    out2, h2 = torch.ops.fastglu.mlp_fwd(
        x, w1, w2, None, None, None, 0, 0, 0.0, 0.0, 1.0, 1.0, 1, True
    )
    assert torch.equal(out, out2) and h2.shape == (4, 12)
    assert torch.equal(h2, fastglu.linear_glu(x, w1)[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("recompute", [False, True])
def test_compile_fullgraph(device, recompute):
    torch._dynamo.reset()
    x = torch.randn(3, 4, 16, device=device, requires_grad=True)
    w1 = torch.randn(24, 16, device=device, requires_grad=True)
    w2 = torch.randn(16, 12, device=device, requires_grad=True)
    wt = torch.rand(12, device=device, requires_grad=True)

    def f(x, w1, w2, wt):
        return fastglu.mlp(x, w1, w2, weights=wt, activation="gelu_tanh", recompute=recompute)

    compiled = torch.compile(f, fullgraph=True)
    dout = torch.randn(3, 4, 16, device=device)
    out = compiled(x, w1, w2, wt)
    out.backward(dout)
    got = [out.detach()] + [t.grad.clone() for t in (x, w1, w2, wt)]
    for t in (x, w1, w2, wt):
        t.grad = None
    out = f(x, w1, w2, wt)
    out.backward(dout)
    want = [out.detach()] + [t.grad for t in (x, w1, w2, wt)]
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-5)


def test_fake_tensors_and_opcheck():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x, w1, w2 = torch.empty(2, 5, 16), torch.empty(48, 16), torch.empty(16, 24)
        out = fastglu.mlp(x, w1, w2)
        assert out.shape == (2, 5, 16)
        with pytest.raises(ValueError, match="w2 has shape"):
            fastglu.mlp(x, w1, torch.empty(16, 23))
    x = torch.randn(5, 16, requires_grad=True)
    w1 = torch.randn(48, 16, requires_grad=True)
    w2 = torch.randn(16, 24, requires_grad=True)
    b1 = torch.randn(48, requires_grad=True)
    for save_h in (True, False):
        torch.library.opcheck(
            torch.ops.fastglu.mlp_fwd.default,
            (x, w1, w2, b1, None, None, 0, 0, 0.0, 0.0, 1.0, 1.0, 1, save_h),
        )


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("fused", [True, False])
def test_cuda_graph_capture(fused):
    T, H, F = 64, 128, 256
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w1 = (torch.randn(2 * F, H, device="cuda") / H**0.5).to(torch.bfloat16).requires_grad_()
    w2 = (torch.randn(H, F, device="cuda") / F**0.5).to(torch.bfloat16).requires_grad_()
    dout = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm up outside the capture
            for t in (x, w1, w2):
                t.grad = None
            fastglu.mlp(x, w1, w2, fused=fused).backward(dout)
    torch.cuda.current_stream().wait_stream(s)
    for t in (x, w1, w2):
        t.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fastglu.mlp(x, w1, w2, fused=fused)
        out.backward(dout)
    x.data.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    ref, ref_grads, scales = reference_and_scale(x, w1, w2, None, None, None, dout, {})
    check("out", out, ref, scales["out"], torch.bfloat16)
    check("x", x.grad, ref_grads["x"], scales["x"], torch.bfloat16)


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
def test_auto_path_rule_on_this_gpu():
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    w1 = torch.randn(2 * 8192, 4096, device="cuda", dtype=torch.bfloat16)
    at_min = torch.randn(2 * FUSED_MIN_F, 4096, device="cuda", dtype=torch.bfloat16)
    small = torch.randn(2 * (FUSED_MIN_F - 8), 4096, device="cuda", dtype=torch.bfloat16)
    sm90 = torch.cuda.get_device_capability() == (9, 0)
    assert mlp_fused_default(x, w1) == sm90
    assert mlp_fused_default(x, at_min) == sm90
    assert not mlp_fused_default(x, small)


def test_cpu_takes_the_unfused_path_by_default():
    assert not mlp_fused_default(torch.randn(4, 8), torch.randn(8192, 8))


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda x, w1, w2: fastglu.mlp(x.double(), w1, w2), TypeError, "x has dtype torch.float64"),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1.half(), w2),
            TypeError,
            "w1 has dtype torch.float16 but x",
        ),
        (lambda x, w1, w2: fastglu.mlp(x, w1[:, :7], w2), ValueError, r"w1 has shape \(12, 7\)"),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1[:11], w2),
            ValueError,
            r"w1 has shape \(11, 8\).*even",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1, w2[:, :5]),
            ValueError,
            r"w2 has shape \(8, 5\); expected .*\(8, 6\)",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1, w2, bias1=torch.zeros(6)),
            ValueError,
            r"bias1 has shape \(6,\)",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1, w2, bias2=torch.zeros(9)),
            ValueError,
            r"bias2 has shape \(9,\)",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1, w2, weights=torch.ones(3)),
            ValueError,
            r"weights has shape \(3,\)",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, "w1", w2),
            TypeError,
            "w1 must be a torch.Tensor, got str",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x[0], w1, w2),
            ValueError,
            r"x must have 2 or 3 dimensions, got shape \(8,\)",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1, w2, activation="relu"),
            ValueError,
            "activation must be one of",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1, w2, fused="yes"),
            TypeError,
            "fused must be None, True or False, got 'yes'",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1, w2, recompute=1),
            TypeError,
            "recompute must be True or False, got 1",
        ),
        (
            lambda x, w1, w2: fastglu.mlp(x, w1, w2, glu_linear_offset=float("nan")),
            ValueError,
            "glu_linear_offset",
        ),
    ],
)
def test_bad_inputs_named(call, exc, match):
    x, w1, w2 = torch.randn(4, 8), torch.randn(12, 8), torch.randn(8, 6)
    with pytest.raises(exc, match=match):
        call(x, w1, w2)


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
def test_bad_device_named():
    x, w1, w2 = torch.randn(4, 8), torch.randn(12, 8), torch.randn(8, 6, device="cuda")
    with pytest.raises(ValueError, match="w2 is on cuda"):
        fastglu.mlp(x, w1, w2)


# ---- the module -----------------------------------------------------------------------------------


class HFMLP(torch.nn.Module):
    """Hugging Face's LlamaMLP layout."""

    def __init__(self, H, F, bias):
        super().__init__()
        self.gate_proj = torch.nn.Linear(H, F, bias=bias)
        self.up_proj = torch.nn.Linear(H, F, bias=bias)
        self.down_proj = torch.nn.Linear(F, H, bias=bias)

    def forward(self, x):
        return self.down_proj(F_.silu(self.gate_proj(x)) * self.up_proj(x))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("interleaved", [False, True])
def test_glumlp_loads_hugging_face_and_megatron_checkpoints(bias, interleaved):
    H, F = 12, 20
    hf = HFMLP(H, F, bias).double()
    x = torch.randn(2, 7, H, dtype=torch.float64)
    want = hf(x)
    m = GLUMLP.from_hf(hf, interleaved=interleaved).double()
    assert m.w1.shape == (2 * F, H) and m.w2.shape == (H, F)
    m2 = GLUMLP(H, F, bias=bias, interleaved=interleaved).double()
    m2.load_state_dict(hf.state_dict())
    fc1 = torch.cat((hf.gate_proj.weight, hf.up_proj.weight))
    sd = {"linear_fc1.weight": fc1, "linear_fc2.weight": hf.down_proj.weight}
    if bias:
        sd.update(
            {
                "linear_fc1.bias": torch.cat((hf.gate_proj.bias, hf.up_proj.bias)),
                "linear_fc2.bias": hf.down_proj.bias,
                "linear_fc1._extra_state": None,
            }
        )
    m3 = GLUMLP(H, F, bias=bias, interleaved=interleaved).double()
    m3.load_state_dict(sd)
    outer = torch.nn.Sequential(GLUMLP(H, F, bias=bias, interleaved=interleaved).double())
    outer.load_state_dict({f"0.{k}": v for k, v in hf.state_dict().items()})
    # fastglu has no float64 kernels: the modules run in fp32 against the float64 Hugging Face module
    xf = x.float()
    for mod in (m, m2, m3, outer):
        got = mod.float()(xf)
        assert (got.double() - want).norm() <= 1e-5 * want.norm()


def test_glumlp_module_options_and_bad_options():
    m = GLUMLP(
        8,
        6,
        activation="quick_gelu",
        clamp_value=7.0,
        glu_linear_offset=1.0,
        bias=True,
        recompute=True,
    )
    assert "quick_gelu" in repr(m) and "recompute=True" in repr(m)
    x = torch.randn(5, 8, requires_grad=True)
    wt = torch.rand(5, requires_grad=True)
    m(x, wt).sum().backward()
    assert all(p.grad is not None for p in m.parameters()) and wt.grad is not None
    with pytest.raises(ValueError, match="ffn_hidden_size must be a positive int, got 0"):
        GLUMLP(8, 0)
    with pytest.raises(ValueError, match="activation must be one of"):
        GLUMLP(8, 6, activation="tanh")
    with pytest.raises(ValueError, match="up_proj.weight without the other"):
        GLUMLP(8, 6).load_state_dict(
            {"gate_proj.weight": torch.zeros(6, 8), "down_proj.weight": torch.zeros(8, 6)}
        )
    with pytest.raises(TypeError, match="bias must be True or False, got 'yes'"):
        GLUMLP(8, 6, bias="yes")
    with pytest.raises(TypeError, match="recompute must be True or False, got None"):
        GLUMLP(8, 6, recompute=None)
    with pytest.raises(TypeError, match="interleaved must be a bool, got 'no'"):
        GLUMLP(8, 6, interleaved="no")
    with pytest.raises(TypeError, match="dtype must be None or a floating dtype, got torch.int32"):
        GLUMLP(8, 6, dtype=torch.int32)


def test_glumlp_refuses_a_checkpoint_with_two_forms_of_a_weight():
    """A checkpoint that holds fc1's (or fc2's) weight twice, in two of the key sets the module
    reads (its own, Hugging Face's, Megatron's), is refused naming both keys, the module left as
    it was; one form loads."""
    g, u, w1, w2 = torch.randn(6, 8), torch.randn(6, 8), torch.randn(12, 8), torch.randn(8, 6)
    hf = {"gate_proj.weight": g, "up_proj.weight": u, "down_proj.weight": w2}
    for sd, keys in (
        ({**hf, "w1": w1}, ("w1", "gate_proj.weight")),
        ({**hf, "w2": w2}, ("w2", "down_proj.weight")),
        (
            {"linear_fc1.weight": w1, "fc1.weight": w1, "w2": w2},
            ("linear_fc1.weight", "fc1.weight"),
        ),
        ({"w1": w1, "linear_fc2.weight": w2, "down_proj.weight": w2}, ("down_proj", "linear_fc2")),
    ):
        m = GLUMLP(8, 6)
        before = [p.detach().clone() for p in m.parameters()]
        with pytest.raises(ValueError, match=f"{keys[0]}.* and .*{keys[1]}.*keep one"):
            m.load_state_dict(sd)
        assert all(torch.equal(a, b) for a, b in zip(before, m.parameters()))
    m = GLUMLP(8, 6)
    m.load_state_dict(hf)
    assert torch.equal(m.w1, torch.cat((g, u))) and torch.equal(m.w2, w2)


@pytest.mark.parametrize("module", ["mlp", "fp8_mlp"])
@pytest.mark.parametrize(
    "argv", [["--shape", "8,16"], ["--shape", "8,x,16"], ["--shape", "0,16,8"], ["--rounds", "0"]]
)
def test_bench_block_arguments_refused(module, argv, capsys):
    """Both MLP-block benchmarks parse through one parser: a malformed --shape or a non-positive
    --rounds is argparse's error (exit status 2, the flag named), never a crash later."""
    import importlib

    bench = importlib.import_module(f"fastglu.bench.{module}")
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2 and argv[0] in capsys.readouterr().err


def test_bench_fwd_bwd_smoke(tmp_path):
    """python -m fastglu.bench.mlp --mode fwd_bwd on the CPU: seed-format records for every provider
    that runs here, each output and dx checked against the fp32 reference (status passed)."""
    import json

    from fastglu.bench import mlp as bench

    rows = bench.main(["--smoke", "--mode", "fwd_bwd", "--no-gemm", "--out", str(tmp_path)])
    assert {r["benchmark"] for r in rows} == {"mlp_glu/fwd_bwd"}
    assert {r["provider"] for r in rows} == {
        "fastglu",
        "fastglu_fused",
        "fastglu_recompute",
        "cublas_fastglu",
        "cublas_compile",
        "cublas_gemm_only",
    }
    assert all(r["status"] == "passed" for r in rows)
    rec = json.loads((tmp_path / rows[0]["record"]).read_text())
    assert rec["run"]["spec"]["sourceNative"]["benchmark"] == "mlp_glu/fwd_bwd"
    assert rec["run"]["apiVersion"] == "kernelindex.dev/v1alpha1"
    ratios = (tmp_path / "ratios.txt").read_text().splitlines()
    assert ratios[0].split()[:5] == ["benchmark", "pass", "workload", "provider", "over"]
    pairs = {tuple(line.split()[3:5]) for line in ratios[1:]}
    assert ("fastglu_fused", "cublas_fastglu") in pairs and ("fastglu", "cublas_gemm_only") in pairs
    assert all(line.split()[8] == "2" for line in ratios[1:])  # --smoke: 2 rounds


def _timed(provider, rnd, ms, status="passed", workload="t8-h4-ffn4-bf16"):
    return {
        "benchmark": "mlp_glu/fwd_bwd",
        "pass": "mlp",
        "workload": workload,
        "provider": provider,
        "round": rnd,
        "ms": ms,
        "status": status,
    }


def test_round_ratios_pair_the_providers_of_a_round():
    """fastglu's ms over each peer's in the same round; a failed round of either is left out."""
    from fastglu.bench import mlp as bench

    rows = [
        _timed("fastglu_fused", 0, 1.0),
        _timed("fastglu_fused", 1, 3.0),
        _timed("fastglu_fused", 2, 2.0),
        _timed("quack", 0, 2.0),
        _timed("quack", 1, 2.0),
        _timed("quack", 2, 9.0, status="failed"),
        _timed("cublas_fastglu", 1, 4.0, workload="t16-h4-ffn4-bf16"),
    ]
    got = bench.round_ratios(rows)
    assert got == {
        ("mlp_glu/fwd_bwd", "mlp", "t8-h4-ffn4-bf16", "fastglu_fused", "quack"): [0.5, 1.5]
    }
    line = bench.ratio_table(rows).splitlines()[1].split()
    assert line[3:] == ["fastglu_fused", "quack", "1.000", "0.500", "1.500", "2"]


def test_bench_ratios_of_a_finished_run(tmp_path):
    """--ratios DIR times nothing and writes DIR/ratios.txt from DIR/mlp.jsonl."""
    import json

    from fastglu.bench import mlp as bench

    rows = [_timed("fastglu", r, 1.0 + r) for r in range(3)]
    rows += [_timed("cublas_fastglu", r, 2.0) for r in range(3)]
    (tmp_path / "mlp.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert bench.main(["--ratios", str(tmp_path)]) == []
    assert (tmp_path / "ratios.txt").read_text() == bench.ratio_table(rows)
    line = (tmp_path / "ratios.txt").read_text().splitlines()[1].split()
    assert line[3:] == ["fastglu", "cublas_fastglu", "1.000", "0.500", "1.500", "3"]


def test_bench_ratios_without_a_run_is_refused(tmp_path, capsys):
    """--ratios on a folder without mlp.jsonl: argparse's error naming it, nothing written."""
    from fastglu.bench import mlp as bench

    with pytest.raises(SystemExit) as e:
        bench.main(["--ratios", str(tmp_path)])
    assert e.value.code == 2 and f"--ratios {tmp_path}: no mlp.jsonl" in capsys.readouterr().err
    assert not (tmp_path / "ratios.txt").exists()
    with pytest.raises(SystemExit) as e:
        bench.main(["--ratios", str(tmp_path / "absent")])
    assert e.value.code == 2 and "absent: not a directory" in capsys.readouterr().err


# ---- the C entry point (include/fastglu.h: fastglu_mlp_fwd_*), through ctypes ----------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_c_api_mlp_fwd_is_fc1_then_fc2(device, dtype):
    """fastglu_mlp_fwd_{cpu,cuda} gives bitwise fastglu.linear_glu then fastglu.linear (the C GEMMs
    the op's fused path runs for fc1; fc2 there is F.linear, checked within rounding), h included;
    bad input leaves out untouched."""
    import ctypes
    from pathlib import Path

    from fastglu import _C

    # the library beside the binding (an editable install keeps both out of the source tree)
    lib = ctypes.CDLL(str(Path(_C.__file__).parent / "libfastglu.so"))

    class Tensor(ctypes.Structure):
        _fields_ = [
            ("data", ctypes.c_void_p),
            ("dtype", ctypes.c_int),
            ("row_stride", ctypes.c_int64),
        ]

    class Params(ctypes.Structure):
        _fields_ = [
            ("activation", ctypes.c_int),
            ("layout", ctypes.c_int),
            ("clamp_value", ctypes.c_float),
            ("glu_linear_offset", ctypes.c_float),
            ("gate_multiplier", ctypes.c_float),
            ("down_multiplier", ctypes.c_float),
        ]

    T, H, F = 37, 24, 40
    v = {"bias": True, "weights": True}
    x, w1, w2, b1, b2, wt = make(T, H, F, dtype, device, v)
    wt = wt.reshape(T)

    def tensor(t, stride):
        return Tensor(
            None if t is None else t.data_ptr(),
            _C.DTYPE_FP32
            if t is None
            else {torch.bfloat16: _C.DTYPE_BF16, torch.float32: _C.DTYPE_FP32}[t.dtype],
            stride,
        )

    h = torch.full((T, 2 * F), -7.0, dtype=dtype, device=device)
    y = torch.full((T, F), -7.0, dtype=dtype, device=device)
    out = torch.full((T, H), -7.0, dtype=dtype, device=device)
    p = Params(_C.ACT_QUICK_GELU, _C.LAYOUT_SPLIT, 2.0, 1.0, 1.0, 1.0)
    args = [
        ctypes.byref(p),
        tensor(x, H),
        tensor(w1, H),
        tensor(b1, 1),
        tensor(wt, 1),
        tensor(w2, F),
        tensor(b2, 1),
        tensor(h, 2 * F),
        tensor(y, F),
        tensor(out, H),
        ctypes.c_int64(T),
        ctypes.c_int64(H),
        ctypes.c_int64(F),
    ]
    fn = lib.fastglu_mlp_fwd_cpu if device == "cpu" else lib.fastglu_mlp_fwd_cuda
    if device == "cuda":
        args.append(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    bad = list(args)
    bad[10] = ctypes.c_int64(-1)
    assert fn(*bad) != 0 and torch.all(out == -7.0)
    lib.fastglu_last_error_message.restype = ctypes.c_char_p
    assert b"(fc1): tokens = -1" in lib.fastglu_last_error_message()
    assert fn(*args) == 0
    opts = dict(activation="quick_gelu", clamp_value=2.0, glu_linear_offset=1.0)
    y_ref, h_ref = fastglu.linear_glu(x, w1, b1, weights=wt, **opts)
    assert torch.equal(h, h_ref) and torch.equal(y, y_ref)
    assert torch.equal(out, fastglu.linear(y_ref, w2, b2))
    ref, _, scales = reference_and_scale(
        x, w1, w2, b1, b2, wt, torch.ones(T, H, dtype=dtype, device=device), dict(v, **opts)
    )
    check("out", out, ref, scales["out"], dtype)
    got = fastglu.mlp(x, w1, w2, bias1=b1, bias2=b2, weights=wt, fused=True, **opts)
    check("out", got, ref, scales["out"], dtype)


def test_backward_materialises_no_h_gradient():
    """fastglu.mlp uses only the op's first output: the backward gets None for h's gradient, not a
    [T, 2F] zero tensor that it would fill and add to dh (two passes and two dh-sized buffers)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                self.ops.append((str(func), tuple(out.shape)))
            return out

    x = torch.randn(5, 8, requires_grad=True)
    w1, w2 = torch.randn(12, 8, requires_grad=True), torch.randn(8, 6, requires_grad=True)
    out = fastglu.mlp(x, w1, w2)
    with Record() as rec:
        out.backward(torch.randn(5, 8))
    made = [op for op, shape in rec.ops if shape == (5, 12)]
    assert not any("zeros" in op or "add" in op for op in made), made


@pytest.mark.parametrize("used", ["out", "h", "both"])
def test_op_outputs_gradients(used):
    """torch.ops.fastglu.mlp_fwd's gradients with either output or both in the loss, against float64
    autograd of out = fc2(swiglu(h)), h = fc1(x)."""
    x, w1, w2 = torch.randn(4, 8), torch.randn(12, 8) / 3, torch.randn(8, 6) / 3
    dout, dh = torch.randn(4, 8), torch.randn(4, 12)

    def loss(out, h):
        return (
            {"out": (out * dout).sum(), "h": (h * dh).sum()}[used]
            if used != "both"
            else ((out * dout).sum() + (h * dh).sum())
        )

    leaves = [t.clone().requires_grad_() for t in (x, w1, w2)]
    out, h = torch.ops.fastglu.mlp_fwd(*leaves, None, None, None, 0, 0, 0.0, 0.0, 1.0, 1.0, 1, True)
    loss(out, h).backward()
    ref = [t.double().requires_grad_() for t in (x, w1, w2)]
    hr = ref[0] @ ref[1].T
    outr = (F_.silu(hr[:, :6]) * hr[:, 6:]) @ ref[2].T
    loss(outr, hr).backward()
    for got, want in zip(
        leaves, ref, strict=True
    ):  # w2 has no float64 gradient when only h is used
        want = torch.zeros_like(want) if want.grad is None else want.grad
        assert torch.allclose(got.grad.double(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fused", [True, False])
def test_double_backward_refused(fused):
    """create_graph=True through the block raises (the fused dgrad and the GLU kernels have no
    derivative of their own) instead of returning second-order gradients that drop them."""
    x = torch.randn(4, 8, requires_grad=True)
    w1, w2 = torch.randn(6, 8, requires_grad=True), torch.randn(8, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(fastglu.mlp(x, w1, w2, fused=fused).sum(), x, create_graph=True)


@pytest.mark.parametrize("fused", [True, False])
def test_ffn_zero_backward(fused):
    """F = 0: the forward gives zeros (no activation columns), the backward zero dx and empty
    weight gradients."""
    x = torch.randn(4, 8, requires_grad=True)
    w1, w2 = torch.randn(0, 8, requires_grad=True), torch.randn(8, 0, requires_grad=True)
    out = fastglu.mlp(x, w1, w2, fused=fused)
    out.sum().backward()
    assert torch.equal(out, torch.zeros(4, 8))
    assert torch.equal(x.grad, torch.zeros(4, 8))
    assert w1.grad.shape == (0, 8) and w2.grad.shape == (8, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("path", [2, 1], ids=["unfused", "fused"])
def test_backward_writes_dh_over_the_saved_h(device, weights, path):
    """fastglu.mlp drops the op's h, so its backward writes dh over the saved h (the peak holds one
    of the two), on the unfused backward and through the fused dgrad GEMM (dh = h in the C call):
    the same gradients, bit for bit, as the op told to keep h (reuse_h=False)."""
    T, H, F = 9, 16, 24
    x = torch.randn(T, H, device=device)
    w1, w2 = torch.randn(2 * F, H, device=device) / 4, torch.randn(H, F, device=device) / 4
    wt = torch.rand(T, 1, device=device) if weights else None
    dout = torch.randn(T, H, device=device)
    grads = []
    for reuse in (True, False):
        leaves = [t.clone().requires_grad_() for t in (x, w1, w2)]
        wl = wt.clone().requires_grad_() if weights else None
        out, _ = torch.ops.fastglu.mlp_fwd(
            *leaves, None, None, wl, 0, 0, 0.0, 0.0, 1.0, 1.0, path, True, reuse
        )
        out.backward(dout)
        grads.append([t.grad for t in leaves] + ([wl.grad] if weights else []))
    for a, b in zip(*grads, strict=True):
        assert torch.equal(a, b)
    ref = reference(x, w1, w2, None, None, wt, dout, {"weights": weights})
    assert torch.allclose(grads[0][0].double(), ref[1]["x"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_dgrad_writes_dh_over_h(device):
    """linear_dglu_bwd_over_h returns h itself holding dh: the bits of the op that writes a new dh,
    and y and dweights the same too."""
    from fastglu.gemm import linear_dglu_bwd_over_h

    T, H, F = 7, 16, 40
    do = torch.randn(T, H, device=device)
    w2 = torch.randn(H, F, device=device) / 4
    h = torch.randn(T, 2 * F, device=device)
    wt = torch.rand(T, device=device)
    p = (0, 0, 7.0, 1.0, 1.0, 1.0)  # SiLU, split layout, clamp 7, offset 1
    dh, y, dw = torch.ops.fastglu.linear_dglu_bwd(do, w2, h, wt, *p, True, True)
    h2 = h.clone()
    dh2, y2, dw2 = linear_dglu_bwd_over_h(do, w2, h2, wt, p, True, True)
    assert dh2.data_ptr() == h2.data_ptr()
    assert torch.equal(dh2, dh) and torch.equal(y2, y) and torch.equal(dw2, dw)
    assert not torch.equal(h2, h)
    with pytest.raises(ValueError, match="contiguous"):
        linear_dglu_bwd_over_h(do, w2, h.t().contiguous().t(), wt, p, True, True)
    # an autograd node that saved h now fails loudly instead of reading dh
    a = torch.randn(T, 2 * F, device=device, requires_grad=True)
    e = a.exp()  # saves its output
    linear_dglu_bwd_over_h(do, w2, e.detach(), None, p, False, False)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        e.sum().backward()


def test_second_backward_after_dh_over_h_refused():
    """retain_graph=True and a second backward: refused once dh was written over the saved h (its
    values are gone), where the recompute mode, which keeps no h, runs both."""
    x = torch.randn(4, 8, requires_grad=True)
    w1, w2 = torch.randn(12, 8, requires_grad=True), torch.randn(8, 6, requires_grad=True)
    out = fastglu.mlp(x, w1, w2)
    out.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="only once per forward"):
        out.sum().backward()
    out = fastglu.mlp(x, w1, w2, recompute=True)
    g1 = torch.autograd.grad(out.sum(), x, retain_graph=True)[0]
    g2 = torch.autograd.grad(out.sum(), x)[0]
    assert torch.equal(g1, g2)


def test_dh_over_h_bumps_h_version():
    """A reader of the op's h that autograd tracks (here a saved h.detach(), against reuse_h's
    contract) fails loudly after the backward wrote dh over h, instead of reading dh."""
    x = torch.randn(4, 8, requires_grad=True)
    w1, w2 = torch.randn(12, 8, requires_grad=True), torch.randn(8, 6, requires_grad=True)
    out, h = torch.ops.fastglu.mlp_fwd(
        x, w1, w2, None, None, None, 0, 0, 0.0, 0.0, 1.0, 1.0, 2, True, True
    )
    a = torch.randn(4, 12, requires_grad=True)
    z = (h.detach() * a).sum()
    out.sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


# ---- GLUMLP with FP8 GEMMs (fp8="blockwise": fastglu.mlp_fp8) -------------------------------------


@pytest.mark.parametrize("store", [False, "blockwise"])
def test_glumlp_fp8_is_mlp_fp8_and_caches_per_step(store, monkeypatch):
    """GLUMLP(fp8="blockwise") runs fastglu.mlp_fp8 on its parameters (the same bits, bias and
    fp8_input_store included); is_first_microbatch=True quantises the weights once for the calls
    with False after it, None quantises in the call; an optimizer step makes the kept weights
    stale (ValueError), .to() drops them."""
    from fastglu import fp8_mlp

    torch.manual_seed(60)
    m = GLUMLP(96, 80, bias=True, fp8="blockwise", fp8_input_store=store)
    x, dout = torch.randn(24, 96), torch.randn(24, 96)
    want = fastglu.mlp_fp8(x, m.w1, m.w2, bias1=m.bias1, bias2=m.bias2, fp8_input_store=store)
    calls = []
    real = fp8_mlp.quantize_mlp_weights
    monkeypatch.setattr(fp8_mlp, "quantize_mlp_weights", lambda *a: calls.append(1) or real(*a))
    assert torch.equal(m(x), want) and calls == [] and m._fp8_weights is None
    outs = [m(x, is_first_microbatch=True)] + [m(x, is_first_microbatch=False) for _ in range(2)]
    assert calls == [1] and all(torch.equal(o, want) for o in outs)
    sum(o.float().mul(dout).sum() for o in outs).backward()
    torch.optim.SGD(m.parameters(), lr=0.1).step()
    with pytest.raises(ValueError, match="changed in place|torch.optim step"):
        m(x, is_first_microbatch=False)
    m(x, is_first_microbatch=True)
    m.to(torch.float32)
    assert m._fp8_weights is None
    with pytest.raises(RuntimeError, match="is_first_microbatch=False with no weights kept"):
        m(x, is_first_microbatch=False)
    assert "fp8='blockwise'" in repr(m)
    assert set(m.state_dict()) == {"w1", "w2", "bias1", "bias2"}


def test_glumlp_fp8_bad_options():
    """fp8 and fp8_input_store take their values only, fp8_input_store needs fp8, recompute and
    fused are refused beside fp8, is_first_microbatch needs fp8: each by name."""
    for kw, err, match in (
        ({"fp8": "per_tensor"}, ValueError, "fp8 must be None or 'blockwise'"),
        ({"fp8": "blockwise", "fp8_input_store": True}, ValueError, "fp8_input_store must be"),
        ({"fp8_input_store": "blockwise"}, ValueError, "needs fp8='blockwise'"),
        ({"fp8": "blockwise", "recompute": True}, ValueError, "recompute and fused"),
        ({"fp8": "blockwise", "fused": True}, ValueError, "recompute and fused"),
    ):
        with pytest.raises(err, match=match):
            GLUMLP(32, 16, **kw)
    with pytest.raises(ValueError, match="is_first_microbatch caches the FP8 weights"):
        GLUMLP(32, 16)(torch.randn(4, 32), is_first_microbatch=True)
    with pytest.raises(TypeError, match="is_first_microbatch must be None, True or False"):
        GLUMLP(32, 16, fp8="blockwise")(torch.randn(4, 32), is_first_microbatch=1)
