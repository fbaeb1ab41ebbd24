"""fastglu.glu_fp8 (the GLU quantised to float8_e4m3fn for the next GEMM) against a torch float64
implementation of the recipe (docs/fp8.md) applied to fastglu.glu's y on the same device: scales
bit for bit, data within one e4m3 step (the library divides in fp32), y bit for bit; every variant,
odd shapes, both scale layouts, power-of-two scales, per-tensor scaling, NaN / inf / all-zero
blocks, the backward's dh [T, 2F] against fastglu.glu's input gradient and its dbias / dweights
against float64 and fastglu.glu's bias / weights gradients, the ops' fake
implementations (opcheck, torch.compile fullgraph), bad arguments; on CUDA (H200) torch._scaled_mm
reads the scales in the layout written."""

import math
import warnings

import pytest
import torch

import fastglu
from fastglu.fp8 import glu_bwd_fp8, glu_fp8, store_blockwise

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
FP8 = torch.float8_e4m3fn

VARIANTS = {
    "swiglu": dict(),
    "geglu": dict(activation="gelu_tanh"),
    "quick_geglu_bias_weights_clamp_offset": dict(
        activation="quick_gelu", bias=True, weights=True, clamp_value=7.0, glu_linear_offset=1.0
    ),
    "interleaved_bias": dict(interleaved=True, bias=True),
    "multipliers": dict(gate_multiplier=1.25, down_multiplier=0.5, weights=True),
}


def make(variant, T, F, dtype, device):
    opts = dict(VARIANTS[variant])
    x = (torch.randn(T, 2 * F, dtype=torch.float32) * 2).to(dtype).to(device)
    if opts.pop("bias", False):
        opts["bias"] = torch.randn(2 * F, dtype=torch.float32).to(dtype).to(device)
    if opts.pop("weights", False):
        opts["weights"] = torch.rand(T, 1, dtype=torch.float32, device=device)
    return x, opts


def ref_scales(amax, pow2):
    """The recipe's scale from a float64 amax (NaN kept): fp32 amax / 448, 1 for 0, 2^-149 for an
    underflow, optionally rounded up to a power of two."""
    s = (amax / 448.0).float()
    s = torch.where(amax == 0, torch.ones_like(s), s)
    s = torch.where(s == 0, torch.full_like(s, 2.0**-149), s)
    if pow2:
        m, e = torch.frexp(s)
        up = torch.ldexp(torch.ones_like(s), e)
        s = torch.where(torch.isfinite(s) & (m != 0.5), up, s)
    return s


def ref_block(y, pow2):
    """Row-wise 1 x 128 quantisation of y [R, C] in float64: (scales [R, nb], q = y / scale)."""
    R, C = y.shape
    nb = -(-C // 128)
    a = torch.zeros(R, nb * 128, dtype=torch.float64)
    a[:, :C] = y.abs()
    s = ref_scales(a.view(R, nb, 128).amax(-1), pow2)
    return s, y / s.double().repeat_interleave(128, dim=1)[:, :C]


def check_scales(got, want):
    got, want = got.cpu(), want.cpu()
    assert got.shape == want.shape
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    assert bool(same.all()), (
        f"{int((~same).sum())} scales differ: got {got[~same][:5]}, want {want[~same][:5]}"
    )


def check_codes(got, q):
    """got (float8 codes) within one e4m3 step of the float64 quotients q; NaN where q is NaN."""
    g = got.cpu().view(torch.uint8).to(torch.int32)
    nan = torch.isnan(q)
    assert bool(((g[nan] & 0x7F) == 0x7F).all())
    w = q.clamp(-448, 448).to(FP8).view(torch.uint8).to(torch.int32)
    gm, wm = g & 0x7F, w & 0x7F
    ok = (
        nan
        | (g == w)
        | ((gm == 0) & (wm == 0))
        | ((((g ^ w) & 0x80) == 0) & ((gm - wm).abs() <= 1) & (gm != 0x7F))
    )
    assert bool(ok.all()), (
        f"{int((~ok).sum())} codes beyond one e4m3 step: got {g[~ok][:5]}, want {w[~ok][:5]}"
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("T,F", [(1, 1), (257, 3), (257, 200), (130, 1408), (3, 2880)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_block_recipe_against_float64(variant, T, F, dtype, device):
    x, opts = make(variant, T, F, dtype, device)
    pow2 = F % 2 == 1
    layout = "row_major" if T % 2 == 0 else "mn_major"
    out = glu_fp8(x, columnwise=True, return_y=True, pow2_scales=pow2, scale_layout=layout, **opts)
    y = fastglu.glu(x, **opts)
    ints = {torch.float32: torch.int32}.get(dtype, torch.int16)
    assert torch.equal(out.y.cpu().view(ints), y.cpu().view(ints))  # y bit for bit
    yd = y.double().cpu()
    s, q = ref_block(yd, pow2)
    assert out.data.shape == (T, F) and out.data.dtype == FP8
    assert out.scale.shape == (T, -(-F // 128))
    if layout == "mn_major":
        assert out.scale.stride() == (1, T)  # torch._scaled_mm's BlockWise1x128 layout
    check_scales(out.scale, s)
    check_codes(out.data, q)
    st, qt = ref_block(yd.t().contiguous(), pow2)
    assert out.data_t.shape == (F, T) and out.scale_t.shape == (F, -(-T // 128))
    check_scales(out.scale_t, st)
    check_codes(out.data_t, qt)
    # dequantised, the copies agree with y to e4m3's precision (half a step: 2^-4 relative)
    deq = out.data.float().cpu() * s.repeat_interleave(128, dim=1)[:, :F]
    assert torch.allclose(deq.double(), yd, rtol=2.0**-4, atol=float(s.max()) * 2.0**-9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("T,F", [(1, 3), (257, 200), (130, 1408)])
@pytest.mark.parametrize("scaling", ["block", "tensor"])
def test_backward_dh_against_float64(variant, T, F, scaling, device):
    """dh [T, 2F] (x's layout) quantised row-wise and column-wise, against the recipe applied to
    fastglu.glu's own input gradient."""
    x, opts = make(variant, T, F, torch.bfloat16, device)
    dy = torch.randn(T, F, dtype=torch.float32).to(torch.bfloat16).to(device)
    xg = x.clone().requires_grad_()
    fastglu.glu(xg, **opts).backward(dy)
    dh = xg.grad
    out = glu_bwd_fp8(dy, x, columnwise=True, return_dh=True, scaling=scaling, **opts)
    assert torch.equal(out.y.cpu().view(torch.int16), dh.cpu().view(torch.int16))  # dh bit for bit
    d = dh.double().cpu()
    if scaling == "block":
        s, q = ref_block(d, False)
        st, qt = ref_block(d.t().contiguous(), False)
        assert out.data.shape == (T, 2 * F) and out.scale.stride() == (1, T)
        check_scales(out.scale, s)
        check_scales(out.scale_t, st)
    else:
        s = ref_scales(d.abs().max().reshape(1), False)[0]
        check_scales(out.scale, s)
        q, qt = d / float(s), d.t() / float(s)
    check_codes(out.data, q)
    check_codes(out.data_t, qt)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pow2", [False, True])
def test_tensor_scaling(pow2, device):
    x, opts = make("swiglu", 257, 300, torch.bfloat16, device)
    out = glu_fp8(x, scaling="tensor", columnwise=True, pow2_scales=pow2, **opts)
    yd = fastglu.glu(x, **opts).double().cpu()
    s = ref_scales(yd.abs().max().reshape(1), pow2)[0]
    assert out.scale.shape == () and out.scale_t is None
    check_scales(out.scale, s)
    check_codes(out.data, yd / float(s))
    check_codes(out.data_t, yd.t() / float(s))


@pytest.mark.parametrize("device", DEVICES)
def test_nan_inf_and_zero_blocks(device):
    T, F = 5, 260
    x, _ = make("swiglu", T, F, torch.bfloat16, device)
    x[0, 3] = float("nan")  # gate NaN: row 0's first block and column 3's block are NaN
    x[1, F + 130] = float("inf")  # up inf: row 1's second block holds +-inf
    x[2, F:] = 0  # up 0: row 2 is all zeros
    out = glu_fp8(x, columnwise=True)
    s = out.scale.cpu()
    assert torch.isnan(s[0, 0]) and not torch.isnan(s[0, 1])
    assert math.isinf(float(s[1, 1])) and torch.isfinite(s[1, [0, 2]]).all()
    assert (s[2] == 1).all()  # amax 0 -> scale 1
    codes = out.data.cpu().view(torch.uint8)
    assert bool(((codes[0, :128] & 0x7F) == 0x7F).all())
    assert bool(((codes[2] & 0x7F) == 0).all())
    assert torch.isnan(out.scale_t.cpu()[3, 0])
    y = fastglu.glu(x).double().cpu()
    sr, q = ref_block(y, False)
    check_scales(out.scale, sr)
    check_codes(out.data, q)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_and_compile_without_graph_breaks(device):
    x, opts = make("quick_geglu_bias_weights_clamp_offset", 33, 160, torch.bfloat16, device)
    args = (
        x,
        None,
        opts["bias"],
        opts["weights"],
        2,
        0,
        7.0,
        1.0,
        1.0,
        1.0,
        0,
        0,
        False,
        True,
        True,
    )
    torch.library.opcheck(torch.ops.fastglu.glu_fwd_fp8.default, args)

    def f(x, bias, weights):
        o = glu_fp8(
            x,
            bias=bias,
            weights=weights,
            activation="quick_gelu",
            clamp_value=7.0,
            glu_linear_offset=1.0,
            columnwise=True,
            return_y=True,
        )
        return o.data, o.scale, o.data_t, o.scale_t, o.y

    eager = f(x, opts["bias"], opts["weights"])
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(
        x, opts["bias"], opts["weights"]
    )
    for a, b in zip(eager, compiled, strict=True):
        assert a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(
            a.view(torch.uint8) if a.dtype == FP8 else a,
            b.view(torch.uint8) if b.dtype == FP8 else b,
        )
    dy = torch.randn(33, 160, dtype=torch.bfloat16, device=device)
    torch.library.opcheck(torch.ops.fastglu.glu_bwd_fp8.default, (dy,) + args)

    def g(dy, x, bias, weights):
        o = glu_bwd_fp8(
            dy,
            x,
            bias=bias,
            weights=weights,
            activation="quick_gelu",
            columnwise=True,
            return_dh=True,
        )
        return o.data, o.scale, o.data_t, o.scale_t, o.y, o.dbias, o.dweights

    eager = g(dy, x, opts["bias"], opts["weights"])
    compiled = torch.compile(g, fullgraph=True, backend="aot_eager")(
        dy, x, opts["bias"], opts["weights"]
    )
    for a, b in zip(eager, compiled, strict=True):
        assert a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(
            a.view(torch.uint8) if a.dtype == FP8 else a,
            b.view(torch.uint8) if b.dtype == FP8 else b,
        )


def test_bad_arguments_name_the_tensor():
    x = torch.randn(4, 6, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="x.dtype"):
        glu_fp8(x.to(torch.int32))
    with pytest.raises(ValueError, match="even"):
        glu_fp8(torch.randn(4, 5, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="bias"):
        glu_fp8(x, bias=torch.randn(6))
    with pytest.raises(ValueError, match="bias"):
        glu_fp8(x, bias=torch.randn(4, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="scaling"):
        glu_fp8(x, scaling="row")
    with pytest.raises(ValueError, match="scale_layout"):
        glu_fp8(x, scale_layout="col")
    with pytest.raises(ValueError, match="weights"):
        glu_fp8(x, weights=torch.rand(3))
    with pytest.raises(TypeError, match="dy"):
        glu_bwd_fp8(torch.randn(4, 3), x)
    with pytest.raises(ValueError, match="dy"):
        glu_bwd_fp8(torch.randn(4, 2, dtype=torch.bfloat16), x)


BAD_OPTIONS = {
    "clamp_rounds_to_0": dict(clamp_value=1e-50),  # positive, 0 in float32
    "clamp_beyond_fp32": dict(clamp_value=1e39),
    "clamp_str": dict(clamp_value="7"),
    "clamp_huge_int": dict(clamp_value=2**1100),
    "gate_multiplier_inf": dict(gate_multiplier=math.inf),
    "down_multiplier_nan": dict(down_multiplier=math.nan),
    "offset_minus_inf": dict(glu_linear_offset=-math.inf),
    "gate_multiplier_none": dict(gate_multiplier=None),
    "activation": dict(activation="relu"),
    "weights_2x2": dict(weights=torch.rand(2, 2)),  # 4 values for 4 tokens, not per token
    "weights_4x2": dict(weights=torch.rand(4, 2)),
    "weights_1x4": dict(weights=torch.rand(1, 4)),
    "weights_3": dict(weights=torch.rand(3)),
    "weights_float64": dict(weights=torch.rand(4, dtype=torch.float64)),
    "weights_sparse": dict(weights=torch.rand(4).to_sparse()),
    "weights_list": dict(weights=[1.0, 2.0, 3.0, 4.0]),
}


@pytest.mark.parametrize("opts", BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
@pytest.mark.parametrize("fn", ["glu_fp8", "glu_bwd_fp8"])
def test_options_and_weights_are_checked_as_glu_checks_them(fn, opts):
    """clamp_value, the offset, the multipliers, the activation and the per-token weights are
    checked by fastglu.glu's checks: the same error type and message, naming glu_fp8."""
    x = torch.randn(4, 16)
    with pytest.raises((TypeError, ValueError)) as want:
        fastglu.glu(x, **opts)
    expected = str(want.value).replace("fastglu.glu:", f"fastglu.{fn}:", 1)
    call = glu_fp8 if fn == "glu_fp8" else lambda x, **kw: glu_bwd_fp8(torch.randn(4, 8), x, **kw)
    with pytest.raises(want.type) as got:
        call(x, **opts)
    assert str(got.value) == expected


def test_fp8_kernels_launch_through_the_op_layer(monkeypatch):
    """The FP8 ops launch their kernels through ops._launch (the device guard and x's device's
    current stream), the one launch path of the package."""
    from fastglu import ops

    seen = []
    launch = ops._launch

    def spy(kernel, dev, args):
        seen.append(dev)
        return launch(kernel, dev, args)

    monkeypatch.setattr(ops, "_launch", spy)
    x = torch.randn(4, 16)
    glu_fp8(x)
    glu_bwd_fp8(torch.randn(4, 8), x)
    assert seen == [-1, -1]


@pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("scaling", ["block", "tensor"])
def test_fp8_ops_on_a_device_that_is_not_the_current_one(scaling):
    """x on cuda:1 while cuda:0 is current: the kernels run on cuda:1 (its current stream, under a
    device guard) and give what they give with cuda:1 current."""
    torch.cuda.set_device(0)
    x = torch.randn(300, 2 * 200, device="cuda:1").to(torch.bfloat16)
    dy = torch.randn(300, 200, device="cuda:1").to(torch.bfloat16)
    kw = dict(scaling=scaling, columnwise=True)
    got = glu_fp8(x, return_y=True, **kw), glu_bwd_fp8(dy, x, return_dh=True, **kw)
    torch.cuda.synchronize(1)
    assert torch.cuda.current_device() == 0
    with torch.cuda.device(1):
        want = glu_fp8(x, return_y=True, **kw), glu_bwd_fp8(dy, x, return_dh=True, **kw)
        torch.cuda.synchronize(1)
    assert torch.equal(got[0].y, fastglu.glu(x))
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            if a is None:
                assert b is None
                continue
            assert a.device == torch.device("cuda:1")
            if a.dtype == FP8:
                a, b = a.view(torch.uint8), b.view(torch.uint8)
            assert torch.equal(a, b)


@pytest.mark.skipif(
    not HAS_CUDA or torch.cuda.get_device_capability() != (9, 0), reason="needs an sm_90 GPU"
)
def test_scaled_mm_reads_the_layouts():
    """y_fp8 / scale as torch._scaled_mm's mat_a with 1 x 128 scales (fc2's forward, w2 with 128 x
    128 blocks), and y_t.t() / scale_t.t() as mat2 of the weight gradient (1 x 128 on both)."""
    T, F, H = 256, 512, 256
    x, _ = make("swiglu", T, F, torch.bfloat16, "cuda")
    out = glu_fp8(x, columnwise=True, return_y=True)
    y = out.y.float()
    w2 = torch.randn(H, F, device="cuda")
    w2_s = (
        w2.abs().view(H // 128, 128, F // 128, 128).amax((1, 3)) / 448
    )  # [H/128, F/128], row-major
    w2_q = (w2 / w2_s.repeat_interleave(128, 0).repeat_interleave(128, 1)).to(FP8)
    got = torch._scaled_mm(out.data, w2_q.t(), out.scale, w2_s.t(), out_dtype=torch.float32)
    want = y @ (w2_q.float() * w2_s.repeat_interleave(128, 0).repeat_interleave(128, 1)).t()
    assert (got - want).norm() / want.norm() < 0.07
    dy = torch.randn(T, H, device="cuda")
    dyt_s = dy.t().abs().reshape(H, T // 128, 128).amax(-1) / 448  # dY^T [H, T] 1 x 128 blocks
    dyt_q = (dy.t() / dyt_s.repeat_interleave(128, 1)).to(FP8).contiguous()  # row-major mat_a
    a_s = dyt_s.t().contiguous().t()  # strides (1, H)
    dw = torch._scaled_mm(dyt_q, out.data_t.t(), a_s, out.scale_t.t(), out_dtype=torch.float32)
    want = (dyt_q.float() * dyt_s.repeat_interleave(128, 1)) @ y
    assert (dw - want).norm() / want.norm() < 0.07


@pytest.mark.parametrize("device", DEVICES)
def test_bench_unfused_reference_is_the_recipe(device):
    """python -m fastglu.bench.fp8's unfused path (torch ops) is the float64 recipe: scales bit for
    bit (on CUDA a division by the Python scalar 448.0 runs as a multiplication by its fp32
    reciprocal, one ulp off for about half of the blocks), data within one e4m3 step; and its
    check reports a scale one ulp off and a code two steps off."""
    from fastglu.bench import fp8 as bench

    T, F = 257, 1408
    x, _ = make("swiglu", T, F, torch.bfloat16, device)
    y = fastglu.glu(x)
    q, s = bench.quant_rows(y)
    s64, q64 = ref_block(y.double().cpu(), False)
    check_scales(s, s64)
    check_codes(q, q64)
    qt, st = bench.quant_rows(y.t())
    s64t, q64t = ref_block(y.double().cpu().t().contiguous(), False)
    check_scales(st, s64t)
    check_codes(qt, q64t)
    qs, ss = bench.quant_tensor(y)
    check_scales(ss.reshape(1), ref_scales(y.double().cpu().abs().amax().reshape(1), False))

    o = glu_fp8(x, columnwise=True)
    assert bench.compare(o, (q, s, qt, st), True) == "ok"
    s_off = s.clone()
    s_off[3, 1] = torch.nextafter(s_off[3, 1], torch.tensor(1.0, device=device))
    assert bench.compare(o, (q, s_off, qt, st), True) == "MISMATCH: 1 scales"
    q_off = q.view(torch.uint8).clone()
    q_off[5, 7] = q_off[5, 7] ^ 0x02  # two codes away: the mantissa's middle bit
    assert bench.compare(o, (q_off.view(FP8), s, qt, st), True) == "MISMATCH: 1 codes"


def test_outputs_have_no_gradient():
    """The quantised outputs (and y beside them) are not differentiable: a backward through them
    raises instead of leaving x's gradient None."""
    x = torch.randn(4, 256, requires_grad=True)
    out = fastglu.fp8.glu_fp8(x, return_y=True)
    with pytest.raises(RuntimeError, match="no gradient"):
        out.y.float().sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_eager_call_skips_the_dispatcher_with_the_same_bits(device, monkeypatch):
    """In eager mode with nothing for autograd to track, glu_fp8 / glu_bwd_fp8 call the ops'
    implementations directly (no dispatcher, no autograd wrapper: host time), with the op's outputs
    bit for bit; where x requires grad (grad mode on), the op itself runs (its no-gradient
    formula)."""
    x, opts = make("quick_geglu_bias_weights_clamp_offset", 130, 200, torch.bfloat16, device)
    dy = torch.randn(130, 200, dtype=torch.bfloat16, device=device)

    def both():
        return (
            glu_fp8(x, columnwise=True, return_y=True, **opts),
            glu_bwd_fp8(dy, x, columnwise=True, return_dh=True, **opts),
        )

    direct_calls = []
    for name in ("_impl", "_bwd_impl"):
        real = getattr(fastglu.fp8, name)
        monkeypatch.setattr(
            fastglu.fp8, name, lambda *a, _r=real: direct_calls.append(_r) or _r(*a)
        )
    direct = both()
    assert len(direct_calls) == 2
    with torch.no_grad():
        glu_fp8(x.clone().requires_grad_(), **opts)
    assert len(direct_calls) == 3
    out = glu_fp8(x.clone().requires_grad_(), return_y=True, **opts)
    assert len(direct_calls) == 3 and out.y.requires_grad  # the op, with its formula
    monkeypatch.setattr(fastglu.fp8, "_call", lambda op, impl, *a: op(*a))
    via_op = both()
    assert len(direct_calls) == 3
    for a, b in zip(direct, via_op):
        for u, v in zip(a, b):
            assert u is not None and v is not None
            assert u.shape == v.shape and u.stride() == v.stride() and u.dtype == v.dtype
            bits = {FP8: torch.uint8, torch.float32: torch.int32}.get(u.dtype, torch.int16)
            assert torch.equal(u.view(bits), v.view(bits))


def test_trace_and_vmap_take_the_op():
    """Under torch.jit.trace and torch.vmap glu_fp8 runs its op, not the raw kernel call: the trace
    records the kernel (it gives eager's codes on a new input) and vmap maps it."""
    x1, x2 = torch.randn(4, 256), torch.randn(4, 256)

    def codes(x):  # (the tracer takes no dtype view: the codes' values, and the scales)
        out = glu_fp8(x)
        return out.data.float(), out.scale

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(codes, (x1,), check_trace=False)
    for a, b in zip(traced(x2), codes(x2), strict=True):
        assert torch.equal(a, b)
    xs = torch.randn(3, 4, 256)
    mapped = torch.vmap(codes)(xs)
    for i, x in enumerate(xs):
        for a, b in zip(mapped, codes(x), strict=True):
            assert torch.equal(a[i], b)


def test_ffn_zero():
    """F = 0 gives empty outputs, as fastglu.glu does."""
    assert fastglu.fp8.glu_fp8(torch.randn(3, 0)).data.shape == (3, 0)


def ref_sums(x, dy, opts):
    """dbias [2F] (h's layout) and dweights [T] of the family's backward in float64 by autograd
    (include/fastglu.h's formulas), with each sum's sum of |terms| for the tolerance."""
    F = x.shape[-1] // 2
    il = opts.get("interleaved", False)
    xd = x.double().cpu()
    g, u = (xd[:, 0::2], xd[:, 1::2]) if il else (xd[:, :F], xd[:, F:])
    c = opts.get("clamp_value")
    if c:
        c = float(torch.tensor(c).to(x.dtype))  # the bound rounded to x's dtype
        g, u = g.clamp(max=c), u.clamp(-c, c)
    b = opts.get("bias")
    if b is not None:
        bd = b.double().cpu()
        g = g + (bd[0::2] if il else bd[:F])
        u = u + (bd[1::2] if il else bd[F:])
    a = g.clone().requires_grad_()
    v = (u + opts.get("glu_linear_offset", 0.0)).requires_grad_()
    z = opts.get("gate_multiplier", 1.0) * a
    act = opts.get("activation", "silu")
    if act == "gelu_tanh":
        ga = 0.5 * z * (1 + torch.tanh(0.79788456 * z * (1 + 0.044715 * z * z)))
    else:
        ga = z * torch.sigmoid((1.702 if act == "quick_gelu" else 1.0) * z)
    w = opts.get("weights")
    wd = w.double().cpu().reshape(-1, 1) if w is not None else 1.0
    dm = opts.get("down_multiplier", 1.0)
    dyd = dy.double().cpu()
    (dm * wd * ga * v).backward(dyd)
    tw = (dm * ga * v * dyd).detach()  # dweights' terms
    da, dv = a.grad, v.grad
    db = torch.empty(2 * F, dtype=torch.float64)
    mb = torch.empty(2 * F, dtype=torch.float64)
    gi, ui = (slice(0, None, 2), slice(1, None, 2)) if il else (slice(0, F), slice(F, None))
    db[gi], db[ui] = da.sum(0), dv.sum(0)
    mb[gi], mb[ui] = da.abs().sum(0), dv.abs().sum(0)
    return db, mb, tw.sum(1), tw.abs().sum(1)


def check_sum(got, ref, mag, n, u_out):
    """A sum of n terms in fp32, rounded to a dtype of unit roundoff u_out: within u_out |ref| +
    (16 + n) 2^-23 sum|terms| (per-term fp32 rounding, then one rounding per addition)."""
    err = (got.double().cpu() - ref).abs()
    bound = u_out * ref.abs() + (16 + n) * 2.0**-23 * mag
    assert bool((err <= bound).all()), f"max excess {float((err - bound).max())}"


SUM_VARIANTS = ["quick_geglu_bias_weights_clamp_offset", "interleaved_bias", "multipliers"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", SUM_VARIANTS)
@pytest.mark.parametrize("T,F", [(1, 3), (257, 200), (130, 1408)])
@pytest.mark.parametrize("scaling", ["block", "tensor"])
def test_backward_sums(variant, T, F, scaling, device):
    """dbias / dweights of glu_bwd_fp8 against float64 and against fastglu.glu's backward (its bias
    and weights gradients), to fp32 rounding; shapes and dtypes of the bias and the weights; run
    twice, bitwise the same; dh as without them."""
    x, opts = make(variant, T, F, torch.bfloat16, device)
    dy = torch.randn(T, F, dtype=torch.float32).to(torch.bfloat16).to(device)
    out = glu_bwd_fp8(dy, x, columnwise=True, return_dh=True, scaling=scaling, **opts)
    b, w = opts.get("bias"), opts.get("weights")
    assert (out.dbias is None) == (b is None) and (out.dweights is None) == (w is None)
    db, mb, dw, mw = ref_sums(x, dy, opts)
    leaves = {k: opts[k].clone().requires_grad_() for k in ("bias", "weights") if k in opts}
    xg = x.clone().requires_grad_()
    fastglu.glu(xg, **{**opts, **leaves}).backward(dy)
    assert torch.equal(out.y.cpu().view(torch.int16), xg.grad.cpu().view(torch.int16))
    if b is not None:
        assert out.dbias.shape == b.shape and out.dbias.dtype == b.dtype
        assert out.dbias.device == x.device
        check_sum(out.dbias, db, mb, T, 2.0**-8)
        check_sum(out.dbias, leaves["bias"].grad.double().cpu(), mb, T, 2.0**-7)
    if w is not None:
        assert out.dweights.shape == w.shape and out.dweights.dtype == w.dtype
        check_sum(out.dweights.reshape(-1), dw, mw, F, 2.0**-24)
        check_sum(
            out.dweights.reshape(-1),
            leaves["weights"].grad.double().cpu().reshape(-1),
            mw,
            F,
            2.0**-23,
        )
    again = glu_bwd_fp8(dy, x, columnwise=True, return_dh=True, scaling=scaling, **opts)
    for a, c in zip(out, again, strict=True):
        if a is not None:
            assert torch.equal(
                a.view(torch.uint8) if a.dtype == FP8 else a,
                c.view(torch.uint8) if c.dtype == FP8 else c,
            )
    plain = glu_bwd_fp8(dy, x, columnwise=True, scaling=scaling, **opts)
    assert torch.equal(plain.data.view(torch.uint8), out.data.view(torch.uint8))


@pytest.mark.parametrize("device", DEVICES)
def test_backward_sums_empty_and_weight_dtypes(device):
    """tokens == 0: dbias is zeros (the sum over nothing), dweights empty; bf16 weights of shape
    [T] give a bf16 dweights of that shape."""
    x = torch.zeros(0, 16, dtype=torch.bfloat16, device=device)
    bias = torch.randn(16, dtype=torch.bfloat16, device=device)
    out = glu_bwd_fp8(torch.zeros(0, 8, dtype=torch.bfloat16, device=device), x, bias=bias)
    assert out.dbias.shape == (16,) and bool((out.dbias == 0).all())
    x, opts = make("swiglu", 33, 24, torch.bfloat16, device)
    w = torch.rand(33, device=device).to(torch.bfloat16)
    dy = torch.randn(33, 24, device=device).to(torch.bfloat16)
    out = glu_bwd_fp8(dy, x, weights=w)
    assert out.dweights.shape == (33,) and out.dweights.dtype == torch.bfloat16
    db, mb, dw, mw = ref_sums(x, dy, {"weights": w})
    check_sum(out.dweights, dw, mw, 24, 2.0**-8)


def test_negative_bit_weights_read_as_their_values():
    """Per-token weights with the negative bit set (a lazily negated view) give what their values
    give, forward and backward (the kernel reads memory, which holds the values before negation)."""
    from fastglu.fp8 import glu_bwd_fp8, glu_fp8

    T, F = 5, 8
    x, dy, b = torch.randn(T, 2 * F), torch.randn(T, F), torch.randn(2 * F)
    wn = torch.randn(T, dtype=torch.complex64).conj().imag
    assert wn.is_neg()
    w = wn.clone()
    assert torch.equal(
        glu_fp8(x, bias=b, weights=wn, return_y=True).y,
        glu_fp8(x, bias=b, weights=w, return_y=True).y,
    )
    g_neg = glu_bwd_fp8(dy, x, bias=b, weights=wn, return_dh=True)
    g_ref = glu_bwd_fp8(dy, x, bias=b, weights=w, return_dh=True)
    for name in ("y", "dbias", "dweights", "data", "scale"):
        assert torch.equal(getattr(g_neg, name), getattr(g_ref, name)), name


@pytest.mark.parametrize("op", ["glu_fwd_fp8", "glu_bwd_fp8"])
@pytest.mark.parametrize(
    "bad, exc, match",
    [
        ({"bias": torch.randn(2)}, ValueError, "bias has shape"),
        ({"bias": torch.randn(8, dtype=torch.float64)}, TypeError, "bias must be"),
        ({"weights": torch.randn(2)}, ValueError, "weights"),
    ],
    ids=["short-bias", "fp64-bias", "short-weights"],
)
def test_raw_ops_check_their_operands(op, bad, exc, match):
    """The raw torch.library ops check the operands as the public functions do: a short bias or
    weights would be read past its end, a float64 bias misread."""
    from fastglu import _C
    from fastglu import ops as _ops

    T, F = 3, 4
    x, dy = torch.randn(T, 2 * F), torch.randn(T, F)
    bias, weights = bad.get("bias"), bad.get("weights")
    p = _ops.glu_params("silu", fn=op)
    opts = (*p, _C.FP8_SCALING_BLOCK_1X128, _C.FP8_SCALES_MN_MAJOR, False, False, True)
    args = (x, None, bias, weights, *opts)
    with pytest.raises(exc, match=match):
        if op == "glu_bwd_fp8":
            torch.ops.fastglu.glu_bwd_fp8(dy, *args)
        else:
            torch.ops.fastglu.glu_fwd_fp8(*args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "layout,lead,F,general",
    [
        ("split", (33,), 256, False),
        ("split", (3, 11), 136, True),
        ("two", (33,), 200, True),
        ("interleaved", (33,), 136, True),
        ("split", (130,), 192, False),
        ("split", (1,), 3, False),
    ],
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_backward_from_the_blockwise_copy(device, layout, lead, F, general, dtype):
    """glu_bwd_fp8(dy, codes, input_scale_inv=scales): the backward from the operands' blockwise
    copy (store_blockwise: fastglu.glu's fp8_input_store="blockwise"), every output against fastglu.glu's backward
    on that copy (ops.backward decoding it; dh bit for bit) quantised by quantize_fp8 (codes and
    scales bit for bit), the sums within fp32 rounding; the op passes opcheck and compiles without a
    graph break to the same bits. Layouts: split (one [.., 2F] row), two tensors, interleaved;
    2D and 3D; F = 256 (the CUDA paired tiles), 136 / 200 (split tiles), 192 (F % 128 == 64), 3
    (the element path); quick-GeGLU with a clamp, a bias and per-token weights."""
    from fastglu import ops

    torch._dynamo.reset()  # (f below is one code object across the cases)
    il, two = layout == "interleaved", layout == "two"
    h = (torch.randn(*lead, 2 * F) * 3).to(dtype).to(device)
    dy = torch.randn(*lead, F).to(dtype).to(device)
    T = math.prod(lead)
    bias = torch.randn(2 * F).to(dtype).to(device) if general else None
    w = (torch.rand(*lead, 1) + 0.25).to(device) if general else None
    opts = dict(activation="quick_gelu", clamp_value=7.0) if general else {}
    p = ops.glu_params(**opts, interleaved=il)
    clamp = opts.get("clamp_value")
    if two:
        codes, up8, sc = store_blockwise(h[..., :F], up=h[..., F:], clamp_value=clamp)
    else:
        codes, up8, sc = store_blockwise(h, interleaved=il, clamp_value=clamp)
        assert up8 is None
    kw = dict(opts, interleaved=il, bias=bias, weights=w, columnwise=True, return_dh=True)
    got = glu_bwd_fp8(dy, codes, up=up8, input_scale_inv=sc, **kw)
    two_pass = ops.backward(
        p,
        dy,
        codes,
        up8,
        bias,
        w,
        input_scale_inv=sc,
        want_dbias=bias is not None,
        want_dweights=w is not None,
        fn="test",
    )
    dh = two_pass.dx if not two else torch.cat([two_pass.dx, two_pass.d_up], -1)
    assert got.y.dtype == dtype and torch.equal(got.y, dh)
    want = fastglu.fp8.quantize_fp8(dh.reshape(T, 2 * F), columnwise=True)
    for name in ("data", "scale", "data_t", "scale_t"):
        a, b = getattr(got, name), getattr(want, name)
        if name == "data":
            a = a.reshape(T, 2 * F)
        a, b = (t.view(torch.uint8) if t.dtype == FP8 else t for t in (a, b))
        assert torch.equal(a, b), name
    if general:
        torch.testing.assert_close(got.dbias.float(), two_pass.dbias.float(), rtol=2e-2, atol=1e-2)
        torch.testing.assert_close(
            got.dweights, two_pass.dweights.view(w.shape), rtol=1e-4, atol=1e-4
        )

    args = (dy, codes, up8, sc, bias, w, *p, 0, 0, False, True, True)
    torch.library.opcheck(  # (test_schema compares the inputs; it cannot read fp8)
        torch.ops.fastglu.glu_bwd_fp8_saved.default,
        args,
        test_utils=("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"),
    )

    def f(dy, codes, up8, sc, bias, w):
        return tuple(
            glu_bwd_fp8(dy, codes, up=up8, input_scale_inv=sc, **dict(kw, bias=bias, weights=w))
        )

    eager = f(dy, codes, up8, sc, bias, w)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(dy, codes, up8, sc, bias, w)
    for a, b in zip(eager, compiled, strict=True):
        if a is None:
            assert b is None
            continue
        assert a.shape == b.shape and a.stride() == b.stride()
        assert torch.equal(*(t.view(torch.uint8) if t.dtype == FP8 else t for t in (a, b)))


def test_backward_from_the_blockwise_copy_bad_arguments():
    """glu_bwd_fp8 with input_scale_inv: each bad argument named, with its type or shape."""

    h = torch.randn(4, 16, dtype=torch.bfloat16)
    dy = torch.randn(4, 8, dtype=torch.bfloat16)
    codes, _, sc = store_blockwise(h)
    with pytest.raises(TypeError, match=r"x.dtype = torch.bfloat16: with input_scale_inv"):
        glu_bwd_fp8(dy, h, input_scale_inv=sc)
    with pytest.raises(TypeError, match=r"up.dtype"):
        glu_bwd_fp8(dy, codes[:, :8], up=h[:, 8:], input_scale_inv=sc)
    with pytest.raises(TypeError, match=r"input_scale_inv must be a torch.float32"):
        glu_bwd_fp8(dy, codes, input_scale_inv=sc.half())
    with pytest.raises(ValueError, match=r"input_scale_inv has shape \(4, 1\)"):
        glu_bwd_fp8(dy, codes, input_scale_inv=sc[:, :1])
    with pytest.raises(TypeError, match=r"dy must be a bfloat16, float16 or float32"):
        glu_bwd_fp8(codes[:, :8], codes, input_scale_inv=sc)
    with pytest.raises(ValueError, match=r"dy has shape \(4, 16\)"):
        glu_bwd_fp8(h, codes, input_scale_inv=sc)
    with pytest.raises(TypeError, match=r"bias must be a torch.bfloat16 tensor \(dy's dtype\)"):
        glu_bwd_fp8(dy, codes, input_scale_inv=sc, bias=torch.randn(16))
    with pytest.raises(ValueError, match=r"weights"):
        glu_bwd_fp8(dy, codes, input_scale_inv=sc, weights=torch.rand(3))
    with pytest.raises(ValueError, match=r"scaling"):
        glu_bwd_fp8(dy, codes, input_scale_inv=sc, scaling="row")


def test_store_blockwise_arguments_and_requires_grad():
    """store_blockwise: data_up is None without up whatever x is (a tensor that requires grad and
    a Parameter take the op, whose absent up's codes are an empty tensor); bad arguments named by
    store_blockwise itself; a meta or memoryless input refused by name, in both functions."""
    h = torch.randn(6, 320, dtype=torch.bfloat16)
    for x in (h.clone().requires_grad_(True), torch.nn.Parameter(h.clone())):
        s = store_blockwise(x)
        assert s.data_up is None and s.data.shape == (6, 320) and s.scale_inv.shape == (6, 4)
    with pytest.raises(TypeError, match=r"store_blockwise: x must be a tensor"):
        store_blockwise([1.0])
    with pytest.raises(TypeError, match=r"store_blockwise: up must be a tensor"):
        store_blockwise(h[:, :160], up=[1.0])
    with pytest.raises(ValueError, match=r"store_blockwise: x is on meta"):
        store_blockwise(h.to("meta"))
    with pytest.raises(ValueError, match=r"store_blockwise: x's last dimension 5"):
        store_blockwise(torch.randn(2, 5, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"store_blockwise: clamp_value = 500"):
        store_blockwise(h, clamp_value=500.0)
    freed = h.clone()
    freed.untyped_storage().resize_(0)
    with pytest.raises(ValueError, match=r"store_blockwise: x has 1920 elements but no memory"):
        store_blockwise(freed)
    s = store_blockwise(h)
    dy = torch.randn(6, 160, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"glu_bwd_fp8: x is on meta"):
        glu_bwd_fp8(dy.to("meta"), s.data.to("meta"), input_scale_inv=s.scale_inv.to("meta"))
    codes = s.data.clone()
    codes.untyped_storage().resize_(0)
    with pytest.raises(ValueError, match=r"glu_bwd_fp8: x has 1920 elements but no memory"):
        glu_bwd_fp8(dy, codes, input_scale_inv=s.scale_inv)
    with pytest.raises(ValueError, match=r"glu_bwd_fp8: clamp_value = 500"):
        glu_bwd_fp8(dy, s.data, input_scale_inv=s.scale_inv, clamp_value=500.0)
    with pytest.raises(ValueError, match=r"interleaved=True takes one tensor x, not up"):
        glu_bwd_fp8(
            dy, s.data[:, :160], up=s.data[:, 160:], interleaved=True, input_scale_inv=s.scale_inv
        )


def test_backward_from_the_copy_with_ffn_zero_compiles_to_eager_shapes():
    """F = 0 with 5 tokens: the fake's outputs have the kernels' shapes (the tokens counted from the
    leading shape, not from numel / F), so that compile with per-token weights gives eager's."""
    x = torch.randn(5, 0, dtype=torch.bfloat16)
    s = store_blockwise(x)
    dy, w = torch.randn(5, 0, dtype=torch.bfloat16), torch.rand(5, 1)

    def f(dy, c, sc, w):
        return tuple(glu_bwd_fp8(dy, c, input_scale_inv=sc, weights=w, columnwise=True))

    eager = f(dy, s.data, s.scale_inv, w)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(dy, s.data, s.scale_inv, w)
    for a, b in zip(eager, compiled, strict=True):
        assert (a is None) == (b is None) and (a is None or a.shape == b.shape)
    assert eager[-1].shape == (5, 1) and torch.equal(eager[-1], torch.zeros(5, 1))
