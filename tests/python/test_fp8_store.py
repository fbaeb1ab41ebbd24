"""The forward's fp8 copy of its operands (``saved_fp8``; ``fp8_input_store=True``), against PyTorch.

The copy must be bit for bit ``x.to(torch.float8_e4m3fn)`` (round to nearest even, saturating at
+-448, NaN kept with its sign) -- with a clamp, of the operands first moved to the side of the bound
the clamp puts them on (``expected_copy``; include/fastglu.h, saved_fp8), so that the backward cuts
exactly what the forward's clamp cut: checked over every bf16 and every fp16 bit pattern laid out as a
[tokens, 2F] input, and over random fp32 bit patterns (NaNs with payloads, +-Inf, huge, subnormal)
plus the values where the cast is decided (ties between neighbouring e4m3 values, the saturation
boundary), in the split, interleaved and two-tensor layouts, into padded rows pre-filled with two
different sentinels (an unwritten byte cannot equal both), on CPU and, when present, CUDA.
``fp8_input_store=True`` then saves that copy (no ``.to(float8)`` pass in Python) and the results
keep Megatron's semantics: the output from the full-precision input, the gradients from the input
rounded through float8_e4m3fn, bitwise what the backward gives on Megatron's own cast.
"""

import math

import pytest
import torch
from test_variants import DEVICES, DTYPES, TOL, merge, randn, reference, rel_err, split

import fastglu
from fastglu import _C
from fastglu.ops import glu_bwd, glu_fwd

FP8 = torch.float8_e4m3fn
LAYOUTS = ["split", "interleaved", "two"]


def bits(t):
    """The raw bytes / bit patterns of t (NaN-proof comparison)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]).cpu()


def patterns16(dtype, F, device):
    """Every 16-bit pattern of dtype once, as a [tokens, 2F] tensor (the last row filled by
    repeating from the first pattern)."""
    n = 1 << 16
    tokens = -(-n // (2 * F))
    idx = torch.arange(tokens * 2 * F) % n
    return (idx - (1 << 15)).to(torch.int16).view(dtype).reshape(tokens, 2 * F).to(device)


def e4m3_values():
    """The 127 non-negative finite e4m3fn values, ascending (codes 0x00 .. 0x7e)."""
    return torch.arange(0x7F, dtype=torch.uint8).view(FP8).float()


def patterns32(F, device, seed=0):
    """fp32 values as a [tokens, 2F] tensor: the special values, every tie between neighbouring
    e4m3 values and its two fp32 neighbours (both signs), random bit patterns (every class: NaNs
    with payloads of both signs, +-Inf, huge, normal, subnormal), and random magnitudes
    10^[-12, 40] of both signs."""
    inf = float("inf")
    special = torch.tensor(
        [
            0.0,
            -0.0,
            inf,
            -inf,
            float("nan"),
            -float("nan"),
            448.0,
            -448.0,
            464.0,
            -464.0,
            480.0,
            1e38,
            -3.4e38,
            2.0**-10,
            -(2.0**-10),
            2.0**-9,
            2.0**-6,
            1e-45,
            -1e-40,
            1.1754942e-38,
        ],
        dtype=torch.float32,
    )
    special = torch.cat(
        [
            special,
            torch.nextafter(special, torch.tensor(inf)),
            torch.nextafter(special, torch.tensor(-inf)),
        ]
    )
    v = e4m3_values()
    mids = (v[:-1] + v[1:]) / 2  # exact in fp32
    ties = torch.cat(
        [mids, torch.nextafter(mids, torch.tensor(0.0)), torch.nextafter(mids, torch.tensor(inf))]
    )
    ties = torch.cat([ties, -ties])
    g = torch.Generator().manual_seed(seed)
    rand_bits = torch.randint(-(1 << 31), 1 << 31, (1 << 15,), generator=g, dtype=torch.int64)
    rand_bits = rand_bits.to(torch.int32).view(torch.float32)
    mags = 10.0 ** (torch.rand(1 << 13, generator=g, dtype=torch.float64) * 52 - 12)
    signs = torch.randint(0, 2, (1 << 13,), generator=g) * 2 - 1
    mags = (mags * signs).to(torch.float32)  # beyond fp32's range: +-inf
    x = torch.cat([special, ties, rand_bits, mags])
    tokens = -(-x.numel() // (2 * F))
    x = torch.cat([x, x[: tokens * 2 * F - x.numel()]])
    return x.reshape(tokens, 2 * F).to(device)


def clamp_in(clamp_value, dtype):
    """torch.clamp's bound for a tensor of dtype: the Python float rounded through float32."""
    return torch.tensor(clamp_value, dtype=torch.float32).to(dtype).item()


def expected_copy(x, layout, clamp_value=None, **_):
    """The fp8 copy of x's operands (x in the operands' layout; "two" = [gate | up]):
    ``x.to(float8_e4m3fn)``; with a clamp c (torch.clamp's bound in x's dtype), of the operands moved
    to the clamp's side first: with lo / hi the e4m3 values next to c (lo <= c < hi), a cut operand
    (gate > c; up > c or < -c) becomes +-hi, an uncut one is kept within [-lo, lo] (gate: <= lo)."""
    if clamp_value is None or not clamp_value > 0:
        return x.to(FP8)
    c = clamp_in(clamp_value, x.dtype)
    v = e4m3_values().tolist()
    lo, hi = max(a for a in v if a <= c), min(a for a in v if a > c)
    xf = x.float()
    is_up = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    if layout == "interleaved":
        is_up[..., 1::2] = True
    else:
        is_up[..., x.shape[-1] // 2 :] = True
    gate = torch.where(xf > c, hi, torch.where(xf > lo, lo, xf))  # NaN: every test false, kept
    up = torch.where(
        xf > c,
        hi,
        torch.where(xf < -c, -hi, torch.where(xf > lo, lo, torch.where(xf < -lo, -lo, xf))),
    )
    return torch.where(is_up, up, gate).to(FP8)


def forward_with_copy(x, layout, sentinel, **opts):
    """y and the fp8 copy of x's operands, written into columns [2, 2 + 2F) of rows of 2F + 5
    sentinel bytes; returns (y, copy view, the whole buffer)."""
    T, F = x.shape[0], x.shape[-1] // 2
    buf = torch.full((T, 2 * F + 5), sentinel, dtype=torch.uint8, device=x.device)
    saved = buf.view(FP8)[:, 2 : 2 + 2 * F]
    if layout == "two":
        y = glu_fwd(x[:, :F], x[:, F:], saved_fp8=saved, **opts)
    else:
        y = glu_fwd(x, saved_fp8=saved, interleaved=layout == "interleaved", **opts)
    return y, saved, buf


def check_copy(x, layout, **opts):
    """The copy equals expected_copy (x.to(float8_e4m3fn) without a clamp; x's layout is the
    operands' layout in every case), the pad bytes keep their sentinel, and writing it changes
    nothing else."""
    want = bits(expected_copy(x, layout, **opts))
    ys = []
    for sentinel in (0x5A, 0xA5):
        y, saved, buf = forward_with_copy(x, layout, sentinel, **opts)
        got = bits(saved)
        nan = ((got & 0x7F) == 0x7F) & (
            (want & 0x7F) == 0x7F
        )  # NaN's sign: not kept by fp16 -> fp32 on GPUs
        bad = ((got != want) & ~nan).nonzero()
        assert bad.numel() == 0, (
            f"{bad.shape[0]} bytes differ; first at {tuple(bad[0].tolist())}: "
            f"{got[tuple(bad[0])]:#04x}, want {want[tuple(bad[0])]:#04x} "
            f"(of {x[tuple(bad[0])].item()!r})"
        )
        pad = bits(buf)
        assert (pad[:, :2] == sentinel).all() and (pad[:, 2 + x.shape[-1] :] == sentinel).all()
        ys.append(y)
    F = x.shape[-1] // 2
    y0 = (
        glu_fwd(x[:, :F], x[:, F:], **opts)
        if layout == "two"
        else glu_fwd(x, interleaved=layout == "interleaved", **opts)
    )
    assert torch.equal(bits(ys[0]), bits(y0)) and torch.equal(bits(ys[1]), bits(y0))
    return saved


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("F", [128, 5])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_copy_is_torch_cast_on_every_16_bit_pattern(dtype, layout, F, device):
    x = patterns16(dtype, F, device)
    bias = randn(2 * F, dtype=dtype, device=device, scale=0.5)
    dy = randn(x.shape[0], F, dtype=dtype, device=device)
    il = layout == "interleaved"

    def backward(s, **opts):
        if layout == "two":
            g = glu_bwd(dy, s[:, :F], s[:, F:], bias=bias, **opts)
            return torch.cat((g.dx, g.d_up), -1), g.dbias
        g = glu_bwd(dy, s, bias=bias, interleaved=il, **opts)
        return g.dx, g.dbias

    # a bias (the copy holds the operands before it): the backward reads the copy exactly as
    # Megatron's own cast
    saved = check_copy(x, layout, bias=bias)
    for a, b in zip(backward(saved), backward(x.to(FP8))):
        assert torch.equal(bits(a), bits(b))
    # and a clamp of 1.1 (1.1015625 in bf16, 1.0996094 in fp16; e4m3 has 1.0 and 1.125): the copy
    # differs from the cast only where the cast lands on the wrong side of the bound; the backward
    # through it is zero exactly where torch.clamp's gradient is, and elsewhere it is the backward
    # on Megatron's cast wherever that cast was already on the right side (gate and up of a column)
    saved = check_copy(x, layout, clamp_value=1.1, bias=bias)
    c = clamp_in(1.1, dtype)
    dx, _ = backward(saved, clamp_value=1.1)
    dx_cast, _ = backward(x.to(FP8), clamp_value=1.1)
    g_part, u_part = split(x, il)
    cut = merge(g_part > c, (u_part > c) | (u_part < -c), il) | merge(
        torch.isnan(g_part), torch.isnan(u_part), il
    )
    assert (dx[cut] == 0).all()
    same = bits(saved) == bits(x.to(FP8))
    same_g, same_u = split(same, il)
    col_same = same_g & same_u
    keep = merge(col_same, col_same, il) & ~cut.cpu()  # (bits() is on the CPU)
    assert keep.sum() > x.numel() // 10  # (most 16-bit patterns are beyond the bound)
    assert torch.equal(bits(dx)[keep], bits(dx_cast)[keep])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("F", [64, 3])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_is_torch_cast_on_fp32_specials_ties_and_random_bits(layout, F, device):
    x = patterns32(F, device, seed=F)
    assert torch.isnan(x).any() and torch.isinf(x).any() and (x.abs() > 448).any()
    assert ((x != 0) & (x.abs() < 2.0**-126)).any()  # fp32 subnormals
    check_copy(x, layout)
    check_copy(x, layout, activation="quick_gelu", clamp_value=7.0, glu_linear_offset=1.0)


def test_e4m3_cast_semantics_assumed_by_the_header():
    """The rounding the header documents is torch's (so a future torch changing it fails here), in the
    overflow mode fastglu picked at import to match it (saturating from torch 2.12, NaN before)."""
    x = torch.tensor(
        [
            448.0,
            463.9,
            464.0,
            464.25,
            1e9,
            float("inf"),
            -float("inf"),
            -float("nan"),
            -0.0,
            2.0**-10,
            3 * 2.0**-11,
            3 * 2.0**-10,
            1.0625,
            1.1875,
        ]
    )
    sat = fastglu._C.fp8_saturate()
    big, nbig = (0x7E, 0xFE) if sat else (0x7F, 0xFF)
    # saturation or NaN, 464 a tie (-> 448), NaN's sign, -0, ties to even (subnormal 1.5 * 2^-9 ->
    # 2 * 2^-9; 1.0625 -> 1.0; 1.1875 -> 1.25), below half the smallest subnormal -> 0
    assert bits(x.to(FP8)).tolist() == [
        0x7E,
        0x7E,
        0x7E,
        big,
        big,
        big,
        nbig,
        0xFF,
        0x80,
        0x00,
        0x01,
        0x02,
        0x38,
        0x3A,
    ]
    y = torch.tensor([[1e9, 1.0]]).to(torch.bfloat16)
    saved = torch.empty(1, 2, dtype=FP8)
    from fastglu.ops import glu_fwd

    glu_fwd(y, saved_fp8=saved)
    assert bits(saved).tolist()[0][0] == big


# ---- fp8_input_store=True: the saved copy and Megatron's semantics ------------------------------


def _grad_check(x, dy, bias, weights, opts, y, dx, dbias, dweights, tol):
    """y from the full-precision input, the gradients from the input rounded through fp8; with a
    clamp, Megatron's: from the clamped input rounded through fp8, masked where torch.clamp cut the
    full-precision input."""
    il = opts.get("interleaved", False)
    ry = reference(*split(x, il), dy, bias=bias, weights=weights, **opts)[0]
    c = opts.get("clamp_value")
    if c:
        ce = clamp_in(c, x.dtype)
        g, u = split(x, il)
        x8 = merge(g.clamp(max=ce), u.clamp(-ce, ce), il).to(FP8).to(x.dtype)
        o = {k: v for k, v in opts.items() if k != "clamp_value"}
        _, rdg, rdu, rdb, rdw = reference(*split(x8, il), dy, bias=bias, weights=weights, **o)
        rdg, rdu = rdg * (g <= ce).to(rdg.dtype), rdu * ((u >= -ce) & (u <= ce)).to(rdu.dtype)
    else:
        _, rdg, rdu, rdb, rdw = reference(
            *split(x.to(FP8).to(x.dtype), il), dy, bias=bias, weights=weights, **opts
        )
    assert rel_err(y, ry) <= tol
    assert rel_err(dx, merge(rdg, rdu, il)) <= tol
    if bias is not None:
        assert rel_err(dbias, rdb) <= tol
    if weights is not None:
        assert rel_err(dweights, rdw) <= max(tol, TOL[weights.dtype])


CASES = {
    "swiglu-bias": dict(activation="silu", bias=True),
    "quick-geglu-gpt-oss": dict(
        activation="quick_gelu", bias=True, weights=True, glu_linear_offset=1.0, clamp_value=7.0
    ),
    "geglu-interleaved": dict(activation="gelu_tanh", bias=True, interleaved=True),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lead", [(257,), (9, 7)], ids=["2d", "3d"])
@pytest.mark.parametrize("case", list(CASES))
def test_fp8_input_store_true_saves_the_kernels_copy(case, lead, dtype, device):
    opts = dict(CASES[case])
    F = 768
    with_bias, with_weights = opts.pop("bias", False), opts.pop("weights", False)
    x = randn(*lead, 2 * F, dtype=dtype, device=device, scale=4.0)  # some values beyond the clamp
    dy = randn(*lead, F, dtype=dtype, device=device)
    bias = randn(2 * F, dtype=dtype, device=device, scale=0.5) if with_bias else None
    weights = torch.rand(math.prod(lead), 1, device=device) + 0.25 if with_weights else None
    xi = x.clone().requires_grad_()
    bi = bias.clone().requires_grad_() if bias is not None else None
    wi = weights.clone().requires_grad_() if weights is not None else None
    y = fastglu.glu(xi, bias=bi, weights=wi, fp8_input_store=True, **opts)
    saved = y.grad_fn.saved_tensors[0]
    assert saved.dtype == FP8 and saved.shape == x.shape and saved.is_contiguous()
    # the operands before the bias, cast (with the clamp: moved to its side of the bound first)
    layout = "interleaved" if opts.get("interleaved") else "split"
    assert torch.equal(bits(saved), bits(expected_copy(x, layout, **opts)))
    # the output is the one without an fp8 store, bit for bit
    y0 = fastglu.glu(x, bias=bias, weights=weights, **opts)
    assert torch.equal(bits(y.detach()), bits(y0))
    y.backward(dy)
    # ... and the gradients are the backward on that copy, bit for bit (Megatron's cast without a clamp)
    g = glu_bwd(dy, expected_copy(x, layout, **opts), bias=bias, weights=weights, **opts)
    assert torch.equal(bits(xi.grad), bits(g.dx))
    if bias is not None:
        assert torch.equal(bits(bi.grad), bits(g.dbias))
    if weights is not None:
        assert torch.equal(bits(wi.grad), bits(g.dweights))
    _grad_check(
        x,
        dy,
        bias,
        weights,
        opts,
        y.detach(),
        xi.grad,
        None if bi is None else bi.grad,
        None if wi is None else wi.grad,
        1e-2 if dtype == torch.bfloat16 else 3e-2,
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_megatron_signatures_with_fp8_input_store(dtype, device):
    """bias_swiglu_impl / weighted_bias_swiglu_impl / weighted_bias_quick_geglu_impl with
    fp8_input_store=True against Megatron's semantics written out in torch: forward on the input,
    backward on input.to(float8_e4m3fn).to(input.dtype)."""
    F = 384
    x = randn(8, 12, 2 * F, dtype=dtype, device=device, scale=4.0)
    b = randn(2 * F, dtype=dtype, device=device, scale=0.5)
    w = torch.rand(96, 1, device=device) + 0.25
    dy = randn(8, 12, F, dtype=dtype, device=device)
    calls = [
        (
            lambda i, bb, ww: fastglu.bias_swiglu_impl(i, bb, True, False),
            dict(activation="silu"),
            True,
            False,
        ),
        (
            lambda i, bb, ww: fastglu.weighted_bias_swiglu_impl(i, None, ww, True),
            dict(activation="silu"),
            False,
            True,
        ),
        (
            lambda i, bb, ww: fastglu.weighted_bias_quick_geglu_impl(i, bb, ww, True, 1.0, 7.0),
            dict(activation="quick_gelu", glu_linear_offset=1.0, clamp_value=7.0),
            True,
            True,
        ),
    ]
    for call, opts, with_b, with_w in calls:
        xi = x.clone().requires_grad_()
        bi = b.clone().requires_grad_() if with_b else None
        wi = w.clone().requires_grad_() if with_w else None
        y = call(xi, bi, wi)
        assert torch.equal(
            bits(y.grad_fn.saved_tensors[0]), bits(expected_copy(x, "split", **opts))
        )
        y.backward(dy)
        _grad_check(
            x,
            dy,
            b if with_b else None,
            w if with_w else None,
            opts,
            y.detach(),
            xi.grad,
            bi.grad if with_b else None,
            wi.grad if with_w else None,
            1e-2 if dtype == torch.bfloat16 else 3e-2,
        )


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_input_store_two_tensors_save_halves_of_one_copy(device):
    F = 1408
    gate = randn(33, F, dtype=torch.bfloat16, device=device)
    up = randn(33, F, dtype=torch.bfloat16, device=device)
    dy = randn(33, F, dtype=torch.bfloat16, device=device)
    gi, ui = gate.clone().requires_grad_(), up.clone().requires_grad_()
    y = fastglu.glu_mul(gi, ui, "silu", fp8_input_store=True)
    s_g, s_u = y.grad_fn.saved_tensors[:2]
    assert s_g.shape == s_u.shape == gate.shape and s_u.data_ptr() == s_g.data_ptr() + F
    assert torch.equal(bits(s_g), bits(gate.to(FP8))) and torch.equal(bits(s_u), bits(up.to(FP8)))
    y.backward(dy)
    g = glu_bwd(dy, gate.to(FP8), up.to(FP8))
    assert torch.equal(bits(gi.grad), bits(g.dx)) and torch.equal(bits(ui.grad), bits(g.d_up))
    _, rdg, rdu, _, _ = reference(gate.to(FP8).to(gate.dtype), up.to(FP8).to(up.dtype), dy)
    assert rel_err(gi.grad, rdg) <= 1e-2 and rel_err(ui.grad, rdu) <= 1e-2


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_input_store_true_casts_nothing_in_python(device, monkeypatch):
    """The copy comes from the forward kernel: no Tensor.to(float8) pass over the input."""
    casts = []
    to = torch.Tensor.to

    def spy(self, *args, **kwargs):
        if FP8 in args or kwargs.get("dtype") is FP8:
            casts.append(tuple(self.shape))
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", spy)
    x = randn(64, 2 * 256, dtype=torch.bfloat16, device=device).requires_grad_()
    fastglu.bias_swiglu_impl(x, None, True, False).sum().backward()
    assert casts == []
    x.to(FP8)  # the spy sees a cast
    assert casts == [(64, 512)]


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_input_store_of_strided_and_empty_inputs(device):
    # a column slice of a wider tensor: the copy is contiguous, with x's shape and values
    wide = randn(40, 3 * 256, dtype=torch.float16, device=device, scale=300.0)  # some saturate
    xs = wide[:, 100 : 100 + 512].detach().requires_grad_()  # read in place (row stride 768)
    y = fastglu.glu(xs, fp8_input_store=True)
    saved = y.grad_fn.saved_tensors[0]
    assert saved.is_contiguous() and torch.equal(bits(saved), bits(xs.detach().to(FP8)))
    # 3D [S, B, 2F] transposed (leading dimensions not mergeable): copied, then stored
    t = (
        randn(4, 6, 64, dtype=torch.bfloat16, device=device)
        .transpose(0, 1)
        .detach()
        .requires_grad_()
    )
    y = fastglu.glu(t, fp8_input_store=True)
    assert torch.equal(bits(y.grad_fn.saved_tensors[0]), bits(t.detach().to(FP8)))
    # no tokens
    e = torch.empty(0, 16, dtype=torch.bfloat16, device=device, requires_grad=True)
    y = fastglu.glu(e, fp8_input_store=True)
    assert y.shape == (0, 8) and y.grad_fn.saved_tensors[0].shape == (0, 16)
    y.sum().backward()
    assert e.grad.shape == (0, 16)


# ---- bad saved_fp8 -------------------------------------------------------------------------------


def test_saved_fp8_bad_arguments_write_nothing():
    x = randn(4, 16, dtype=torch.float32, device="cpu")
    x0 = x.clone()
    ok = torch.empty(4, 16, dtype=FP8)
    with pytest.raises(TypeError, match="saved_fp8 must be None or a torch.Tensor"):
        glu_fwd(x, saved_fp8=True)
    with pytest.raises(
        TypeError, match="saved_fp8 has dtype torch.bfloat16; expected torch.float8_e4m3fn"
    ):
        glu_fwd(x, saved_fp8=torch.empty(4, 16, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"saved_fp8 must be a dense tensor of shape \(4, 16\)"):
        glu_fwd(x, saved_fp8=torch.empty(4, 8, dtype=FP8))
    with pytest.raises(ValueError, match=r"saved_fp8 .*unit column"):
        glu_fwd(x, saved_fp8=torch.empty(4, 32, dtype=FP8)[:, ::2])
    # overlapping the input: refused by the C validation, nothing written
    over = x.view(torch.uint8).view(FP8)[:, 16:32]
    y = torch.full((4, 8), float("nan"))
    with pytest.raises(ValueError, match="saved_fp8 overlaps (gate|up)"):
        glu_fwd(x, out=y, saved_fp8=over)
    assert torch.equal(bits(x), bits(x0)) and torch.isnan(y).all()
    # overlapping the output
    out = torch.full((4, 8), float("nan"))
    with pytest.raises(ValueError, match="saved_fp8 overlaps output"):
        glu_fwd(x, out=out, saved_fp8=out.view(torch.uint8).view(FP8)[:, :16])
    assert torch.isnan(out).all()
    # overlapping an input that had to be copied (the C call sees only the copy)
    wide = torch.randn(4, 40)
    xs = wide[:, ::2][:, :16]  # column stride 2: copied
    with pytest.raises(ValueError, match="an output overlaps input"):
        glu_fwd(xs, saved_fp8=wide.view(torch.uint8).view(FP8)[:, :16])
    assert glu_fwd(x, saved_fp8=ok).shape == (4, 8)


# ---- the blockwise copy (fp8_input_store="blockwise": fastglu_glu_fp8_store_blockwise_*) ----------

F32_MAX = torch.finfo(torch.float32).max


def blockwise_reference(parts, interleaved, c):
    """The blockwise copy's recipe (include/fastglu.h) in torch ops, independently of fastglu: per
    1 x 128 block of each operand's row, scale_inv = amax / 448 rounded once to fp32 (a float64
    quotient) where amax is a normal fp32 number, else 1; with a clamp c (0: none) raised one ulp
    where fp32(448 scale_inv) < amax, lo / hi the e4m3 values either side of c in the decoding
    fp32(code * scale_inv); codes = torch's cast of fp32(x / scale_inv) (a float64 quotient rounded
    once: correctly rounded) or of x itself in an unscaled block, a cut element hi, an uncut one
    kept on its side of lo. parts: [gate, up] ([tokens, F] each) or [x] (interleaved [tokens, 2F]).
    Returns ([codes per part], scale_inv [tokens, nb])."""
    vals = e4m3_values().to(parts[0].device)
    codes, scales = [], []
    for k, t in enumerate(parts):
        tf = t.float()
        W = tf.shape[-1]
        nb = (W + 127) // 128
        a = torch.nn.functional.pad(tf.abs(), (0, nb * 128 - W)).reshape(-1, nb, 128).amax(-1)
        scaled = (a >= 2.0**-126) & (a <= F32_MAX)
        s = torch.where(scaled, (a.double() / 448.0).float(), torch.ones_like(a))
        if c:
            raise_ = scaled & ((s.double() * 448.0).float() < a)
            s = torch.where(raise_, torch.nextafter(s, torch.full_like(s, math.inf)), s)
        col = torch.arange(W, device=t.device) // 128
        sc, sd = s[:, col], scaled[:, col]
        v = torch.where(sd, (tf.double() / sc.double()).float(), tf)
        if c:
            dec = (vals.double()[None, None, :] * s.double()[..., None]).float()
            n = (dec <= c).sum(-1)  # the codes decoding to <= c (monotone: a prefix)
            lo, hi = vals[n - 1][:, col], vals[n.clamp(max=126)][:, col]
            up = torch.zeros_like(tf, dtype=torch.bool)
            if interleaved:
                up[:, 1::2] = True
            elif k == 1:
                up[:] = True
            gate_v = torch.where(tf > c, hi, torch.where(v > lo, lo, v))
            up_v = torch.where(
                tf > c,
                hi,
                torch.where(tf < -c, -hi, torch.where(v > lo, lo, torch.where(v < -lo, -lo, v))),
            )
            v = torch.where(up, up_v, gate_v)
        codes.append(v.to(FP8))
        scales.append(s)
    return codes, torch.cat(scales, -1)


def blockwise_inputs(dtype, tokens, width, device, c):
    """[tokens, width] of dtype: N(0, 4) with blocks of zeros, of tiny and subnormal values, of
    very different ranges, NaN, +-inf, the dtype's largest value, and values on and around c."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    x = torch.randn(tokens, width, generator=g) * 4
    col = torch.arange(width)
    x *= torch.pow(2.0, ((col // 128) % 5 * 9 - 18).float())  # block ranges
    x[0::4, col // 128 % 3 == 1] = 0.0  # blocks of zeros
    if tokens > 1:
        x[1] *= 1e-38 if dtype == torch.float32 else 1e-6  # tiny / subnormal amaxes
    if tokens > 2:  # blocks whose amax sits on the scaled blocks' boundary (2^-126) or under it
        edges = torch.tensor([2.0**-126, 2.0**-127, 2.0**-133, 2.0**-120], dtype=torch.float64)
        e = edges[(col // 128) % 4].float()
        x[2] = e * (torch.rand(width, generator=g) - 0.5)
        x[2, col % 128 == 5] = e[col % 128 == 5]
    u = torch.rand(tokens, width, generator=g)
    x = torch.where(u < 0.002, torch.tensor(math.nan), x)
    x = torch.where((u >= 0.002) & (u < 0.003), torch.tensor(math.inf), x)
    x = torch.where((u >= 0.003) & (u < 0.004), torch.tensor(-math.inf), x)
    x = torch.where((u >= 0.004) & (u < 0.005), torch.tensor(torch.finfo(dtype).max), x)
    if c:
        x = torch.where((u >= 0.005) & (u < 0.02), torch.tensor(c), x)
        x = torch.where((u >= 0.02) & (u < 0.03), torch.tensor(-c), x)
        x = torch.where((u >= 0.03) & (u < 0.04), torch.tensor(c * 1.01), x)
    return x.to(dtype).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("clamp", [None, 7.0, 0.3, math.inf], ids=["noclamp", "c7", "c0.3", "cinf"])
@pytest.mark.parametrize("F", [1, 3, 128, 200, 1408, 2880])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_blockwise_copy_is_its_recipe_bit_for_bit(dtype, layout, F, clamp, device):
    """fp8_input_store="blockwise"'s copy and scales against blockwise_reference, every bit (NaN
    codes: any NaN), on inputs with every kind of block."""
    tokens = 5
    c = 0.0 if clamp in (None, math.inf) else torch.tensor(clamp).to(dtype).item()
    il = layout == "interleaved"
    x = blockwise_inputs(dtype, tokens, 2 * F, device, c)
    p = fastglu.ops.glu_params("silu", clamp_value=clamp, interleaved=il)
    if layout == "two":
        g, u = x[:, :F].contiguous(), x[:, F:].contiguous()
        x8, u8, s = fastglu.ops._fp8_store_blockwise(g, u, p, "glu")
        got = [x8, u8]
        want, want_s = blockwise_reference([g, u], False, c)
    else:
        x8, u8, s = fastglu.ops._fp8_store_blockwise(x, None, p, "glu")
        assert u8 is None and x8.shape == x.shape
        got = [x8] if il else [x8[:, :F], x8[:, F:]]
        want, want_s = blockwise_reference([x] if il else [x[:, :F], x[:, F:]], il, c)
    assert s.shape == (
        tokens,
        fastglu.ops.scale_blocks(_C.LAYOUT_INTERLEAVED if il else _C.LAYOUT_SPLIT, F),
    )
    assert torch.equal(bits(s), bits(want_s)), (s, want_s)
    for gk, wk in zip(got, want):
        gb, wb = bits(gk), bits(wk)
        nan = ((gb & 0x7F) == 0x7F) & ((wb & 0x7F) == 0x7F)
        bad = (gb != wb) & ~nan
        assert not bad.any(), (gk[bad.to(gk.device)][:8], wk[bad.to(wk.device)][:8])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_blockwise_copy_is_the_quantisers_codes_on_scaled_blocks(dtype, device):
    """Without a clamp, a block with a normal amax gets fastglu.fp8.quantize_fp8's scale and codes
    (one recipe for the saved input and the FP8 GEMMs' operands)."""
    from fastglu.fp8 import quantize_fp8

    F = 1408
    x = randn(33, 2 * F, dtype=dtype, device=device) * 3
    x8, _, s = fastglu.ops._fp8_store_blockwise(x, None, None, "glu")
    for k, part in enumerate((x[:, :F], x[:, F:])):
        q = quantize_fp8(
            part.contiguous(), block="1x128", scale_layout="row_major", pad_scales=False
        )
        nb = (F + 127) // 128
        assert torch.equal(bits(q.data), bits(x8[:, k * F : (k + 1) * F].contiguous()))
        assert torch.equal(bits(q.scale), bits(s[:, k * nb : (k + 1) * nb].contiguous()))


@pytest.mark.parametrize("device", DEVICES)
def test_blockwise_copy_of_strided_and_3d_inputs(device):
    """A column slice of a wider tensor (read in place) and a transposed 3-D input (copied): the
    same copy as of their contiguous values."""
    F = 200
    wide = randn(6, 3 * F, dtype=torch.bfloat16, device=device)
    xs = wide[:, 50 : 50 + 2 * F]
    t = randn(4, 3, 2 * F, dtype=torch.bfloat16, device=device).transpose(0, 1)
    for v in (xs, t):
        a8, _, sa = fastglu.ops._fp8_store_blockwise(v, None, None, "glu")
        b8, _, sb = fastglu.ops._fp8_store_blockwise(v.contiguous(), None, None, "glu")
        assert a8.shape == v.shape
        assert torch.equal(bits(a8), bits(b8)) and torch.equal(bits(sa), bits(sb))


def test_blockwise_copy_bad_arguments_write_nothing():
    """The C call refuses what the Python layer would never pass (its own checks), writing
    nothing: a clamp e4m3 cannot mark, outputs over the input."""
    x = randn(4, 256, dtype=torch.bfloat16, device="cpu")
    p = fastglu.ops.glu_params("silu", clamp_value=500.0)
    with pytest.raises(ValueError, match="clamp_value"):
        fastglu.ops._fp8_store_blockwise(x, None, p, "glu")
    store = torch.ops.fastglu.fp8_store_blockwise
    scalars = (0, 0, 0.0, 0.0, 1.0, 1.0)  # the op's six GLU parameters: silu, split, no clamp
    with pytest.raises(TypeError, match="up has dtype torch.float16; expected x's"):
        store(x[:, :128], x[:, 128:].half(), *scalars)
    with pytest.raises(ValueError, match=r"must have x's shape \(4, 128\)"):
        store(x[:, :128], x[:, 128:200], *scalars)
    with pytest.raises(ValueError, match="last dimension 255 must be even"):
        store(x[:, :255], None, *scalars)
    with pytest.raises(TypeError, match="x has dtype torch.int32"):
        store(torch.zeros(4, 8, dtype=torch.int32), None, *scalars)
    with pytest.raises(ValueError, match="at least one dimension"):
        store(torch.tensor(1.0), None, *scalars)
    interleaved = (0, 1, 0.0, 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="up must be None with the interleaved layout"):
        store(x[:, :128], x[:, 128:], *interleaved)
    # an empty problem is validated too (by the C call): a clamp that rounds to 0 in fp16
    with pytest.raises(ValueError, match="rounds to 0 in float16"):
        store(torch.empty(0, 256, dtype=torch.float16), None, 0, 0, 1e-30, 0.0, 1.0, 1.0)
    x0 = x.clone()
    s = torch.full((4, 2), -1.0)
    args = (0, _C.ACT_SILU, _C.LAYOUT_SPLIT, 0.0, 0.0, 1.0, 1.0, _C.DTYPE_BF16)
    over = x.data_ptr()  # the codes over the input
    with pytest.raises(ValueError, match="gate_fp8 overlaps"):
        _C.glu_fp8_store_blockwise(
            *args,
            x.data_ptr(),
            256,
            x.data_ptr() + 256,
            256,
            over,
            256,
            over + 128,
            256,
            s.data_ptr(),
            2,
            4,
            128,
            0,
        )
    assert torch.equal(bits(x), bits(x0)) and (s == -1).all()


# ---- the forward and the blockwise copy in one call (fastglu_glu_fwd_fp8_store_blockwise_*) ------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "activation, clamp, extras",
    [
        ("silu", None, ()),
        ("silu", 7.0, ("bias",)),
        ("gelu_tanh", None, ("weights",)),
        ("quick_gelu", 0.3, ("bias", "weights")),
    ],
    ids=["silu", "silu-clamp-bias", "geglu-weights", "quick-clamp-bias-weights"],
)
@pytest.mark.parametrize("F", [1, 3, 200, 1408, 2880])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_fused_forward_and_copy_are_the_two_calls(
    dtype, layout, F, activation, clamp, extras, device, monkeypatch
):
    """fastglu.glu(..., fp8_input_store="blockwise") through the one C call
    (ops.FUSED_BLOCKWISE_STORE: one kernel on CUDA with the split layout) gives y, the saved codes
    and scales, and every gradient bit for bit as through the forward's call and the copy's: every
    activation, a clamp, a bias, per-token weights, odd F, inputs with every kind of block, a 3-D
    and a column-sliced input."""
    il = layout == "interleaved"
    c = 0.0 if clamp is None else torch.tensor(clamp).to(dtype).item()
    tokens = 7
    x = blockwise_inputs(dtype, tokens * 2, 2 * F, device, c)
    x[x.isnan() | x.isinf()] = 1.0  # (finite: the gradients are compared with equal)
    x = x.clamp(-1e3, 1e3).view(2, tokens, 2 * F)
    wide = torch.cat([x, x[..., :5]], -1)[..., : 2 * F]  # the same values, rows of 2F + 5
    dy = randn(2, tokens, F, dtype=dtype, device=device)
    kw = dict(activation=activation, clamp_value=clamp, interleaved=il)
    if "bias" in extras:
        kw["bias"] = randn(2 * F, dtype=dtype, device=device) * 0.5
    if "weights" in extras:
        kw["weights"] = torch.rand(2, tokens, 1, device=device) + 0.25
    calls = []
    real = fastglu.ops._fwd_fp8_store_blockwise
    monkeypatch.setattr(
        fastglu.ops, "_fwd_fp8_store_blockwise", lambda *a: calls.append(1) or real(*a)
    )
    for inp in (x, wide):
        runs = []
        for fused in (False, True):
            monkeypatch.setattr(fastglu.ops, "FUSED_BLOCKWISE_STORE", fused)
            saved = []
            xi = inp.detach().clone().requires_grad_()
            leaves = {k: v.detach().clone().requires_grad_() for k, v in kw.items() if k in extras}

            def pack(t):
                saved.append(t)
                return t

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                if layout == "two":
                    opts = {k: v for k, v in {**kw, **leaves}.items() if k != "interleaved"}
                    y = fastglu.glu_mul(*xi.chunk(2, -1), **opts, fp8_input_store="blockwise")
                else:
                    y = fastglu.glu(xi, **{**kw, **leaves}, fp8_input_store="blockwise")
            y.backward(dy)
            grads = [xi.grad] + [leaves[k].grad for k in sorted(leaves)]
            runs.append((y.detach(), [t for t in saved if t is not None], grads))
        (y0, s0, g0), (y1, s1, g1) = runs
        assert torch.equal(bits(y0), bits(y1))
        assert len(s0) == len(s1)
        for a, b in zip(s0, s1):
            assert a.shape == b.shape and a.dtype == b.dtype
            if a.dtype in (FP8, torch.float32):
                assert torch.equal(bits(a), bits(b))
        for a, b in zip(g0, g1):
            assert torch.equal(a, b)
    assert len(calls) == 2  # the one call, once per input, with the switch on


@pytest.mark.parametrize("fused", [True, False], ids=["one-call", "two-calls"])
@pytest.mark.parametrize("fp8", [True, "per_row", "blockwise"], ids=str)
def test_fp8_store_refuses_what_is_not_a_tensor_by_name(fp8, fused, monkeypatch):
    """With an fp8 copy asked for, a gate, input or up that is not a dense tensor (None, a list, a
    numpy array, a nested tensor) gets the TypeError the call without the copy gives, naming it,
    on the one-call and the two-call blockwise paths alike (the copy's clamp check reads the
    input's dtype, so it runs after the type check)."""
    import numpy as np

    monkeypatch.setattr(fastglu.ops, "FUSED_BLOCKWISE_STORE", fused)
    x = randn(4, 16, dtype=torch.float32, device="cpu")
    for bad in (None, [1.0, 2.0], np.ones((4, 16), np.float32)):
        with pytest.raises(TypeError, match=r"fastglu.glu: input must be a torch.Tensor"):
            fastglu.glu(bad, fp8_input_store=fp8)
        with pytest.raises(TypeError, match=r"fastglu.glu_mul: gate must be a torch.Tensor"):
            fastglu.glu_mul(bad, x[:, :8], fp8_input_store=fp8)
        with pytest.raises(TypeError, match=r"fastglu.glu_mul: up must be a torch.Tensor"):
            fastglu.glu_mul(x[:, :8], bad, fp8_input_store=fp8)
    nested = torch.nested.nested_tensor([torch.randn(2, 16), torch.randn(3, 16)])
    with pytest.raises(TypeError, match=r"fastglu.glu: input is a nested tensor"):
        fastglu.glu(nested, fp8_input_store=fp8)


def test_fused_forward_and_copy_refuse_what_the_two_calls_refuse(monkeypatch):
    """Through the one call, bad input gets the errors the two calls give: a clamp e4m3 cannot
    mark, a bias of the wrong shape, weights of the wrong shape."""
    monkeypatch.setattr(fastglu.ops, "FUSED_BLOCKWISE_STORE", True)
    x = randn(4, 256, dtype=torch.bfloat16, device="cpu")
    with pytest.raises(ValueError, match="clamp_value"):
        fastglu.glu(x, clamp_value=500.0, fp8_input_store="blockwise")
    with pytest.raises(ValueError, match="bias"):
        fastglu.glu(x, bias=torch.zeros(7, dtype=torch.bfloat16), fp8_input_store="blockwise")
    with pytest.raises(ValueError, match="weights"):
        fastglu.glu(x, weights=torch.ones(5), fp8_input_store="blockwise")
    # the C call itself: y over the codes is refused, nothing written
    y = torch.full((4, 128), 7.0, dtype=torch.bfloat16)
    x8 = torch.zeros(4, 256, dtype=torch.uint8)
    s = torch.full((4, 2), -1.0)
    args = (0, _C.ACT_SILU, _C.LAYOUT_SPLIT, 0.0, 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="overlaps"):
        _C.glu_fwd_fp8_store_blockwise(
            *args,
            x.data_ptr(),
            256,
            x.data_ptr() + 256,
            256,
            0,
            0,
            _C.DTYPE_FP32,
            0,
            x8.data_ptr(),  # y over the codes
            128,
            x8.data_ptr(),
            256,
            x8.data_ptr() + 128,
            256,
            s.data_ptr(),
            2,
            4,
            128,
            _C.DTYPE_BF16,
            0,
        )
    assert (x8 == 0).all() and (s == -1.0).all() and (y == 7.0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "activation, clamp, extras",
    [
        ("silu", None, ()),
        ("silu", None, ("bias", "weights")),
        ("gelu_tanh", None, ("weights",)),
        ("quick_gelu", 0.3, ("bias",)),
    ],
    ids=["silu", "silu-bias-weights", "geglu-weights", "quick-clamp-bias"],
)
@pytest.mark.parametrize("columnwise", [False, True], ids=["rowwise", "colwise"])
@pytest.mark.parametrize("F", [3, 136, 1408, 2880])
@pytest.mark.parametrize("layout", ["split", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_fp8_forward_with_the_copy_is_the_two_calls(
    dtype, layout, F, columnwise, activation, clamp, extras, device
):
    """The FP8 GLU forward that also writes the operands' blockwise copy
    (fastglu_glu_fwd_fp8_copy_blockwise: the copy from the forward kernel's own read of h on CUDA
    where its conditions hold, the copy's kernel after it elsewhere) gives the FP8 forward's codes
    and scales (both copies) and fp8_store_blockwise's codes and scales bit for bit: every kind of
    block (zeros, subnormal, inf, NaN), a clamp, a bias, per-token weights, F not a multiple of 8
    and of 128, T = 257 (a partial row tile) and a column-sliced input."""
    from fastglu import fp8 as _fp8
    from fastglu import ops

    il = layout == "interleaved"
    c = 0.0 if clamp is None else torch.tensor(clamp).to(dtype).item()
    tokens = 257
    x = blockwise_inputs(dtype, tokens, 2 * F, device, c)
    wide = torch.cat([x, x[:, :5]], -1)[:, : 2 * F]  # rows of 2F + 5
    bias = randn(2 * F, dtype=dtype, device=device) * 0.5 if "bias" in extras else None
    weights = torch.rand(tokens, device=device) + 0.25 if "weights" in extras else None
    act = {"silu": _C.ACT_SILU, "gelu_tanh": _C.ACT_GELU_TANH, "quick_gelu": _C.ACT_QUICK_GELU}
    lay = _C.LAYOUT_INTERLEAVED if il else _C.LAYOUT_SPLIT
    p = (act[activation], lay, c, 0.0, 1.0, 1.0)
    recipe = (_C.FP8_SCALING_BLOCK_1X128, _C.FP8_SCALES_MN_MAJOR, False)
    for inp in (x, wide):
        one = _fp8._run(None, inp, None, bias, weights, *p, *recipe, columnwise, True, copy=True)
        two = _fp8._run(None, inp, None, bias, weights, *p, *recipe, columnwise, True)
        x8, _, x8s = ops._fp8_store_blockwise(inp, None, ops.GLUParams(*p), "test")
        two = (*two, x8, x8s)
        assert len(one) == len(two) == 7
        for a, b in zip(one, two):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert torch.equal(bits(a), bits(b))
