"""The clamp at its edges (include/fastglu.h, "The gated-linear-unit family"): ``clamp_value`` behaves as
``torch.clamp`` on a tensor of the input's dtype, and the saved precision (``fp8_input_store``) never
changes which elements the clamp cut.

- The bound is clamp_value rounded to the input's dtype, as torch.clamp rounds its Python bound: with
  clamp_value 1.1, a bf16 gate equal to bf16(1.1) = 1.1015625 passes its gradient (Megatron clamps the
  bf16 input with torch.clamp), in every entry point: ``glu``, ``glu_mul``, Megatron's signatures
  (their short path too), ``glu_fwd`` / ``glu_bwd``, the torch.library ops.
- With the fp8 saved input (True, "per_row", "per_tensor", "blockwise") the gradient is zero exactly where
  torch.clamp's is: gates 7.125 and 7.2 under clamp 7 (e4m3 rounds both onto 7.0) are cut, 6.9 under
  clamp 6.9 (e4m3 rounds it beyond, to 7.0) is not; the torch-op copy of the compile path has the
  forward kernel's bytes.
- A clamp the dtype cannot hold raises ValueError naming clamp_value: a positive value that rounds to
  0, a finite one beyond the dtype's range, one >= 448 with an fp8 store.

Each check compares with torch.clamp's own gradient (autograd on the input tensor) and with the float64
reference of test_variants.
"""

import math

import pytest
import torch
from test_variants import DEVICES, DTYPES, TOL, merge, randn, reference, rel_err, split

import fastglu
from fastglu import ops as G  # noqa: E402
from fastglu.ops import glu_bwd, glu_fwd

FP8 = torch.float8_e4m3fn
FP8_MODES = [True, "per_row", "per_tensor", "blockwise"]


def torch_mask(x, c, interleaved=False):
    """Where torch.clamp's gradient passes, from autograd on x itself: gate.clamp(max=c),
    up.clamp(-c, c) (Megatron's weighted_bias_quick_geglu_impl), c a Python float."""
    xr = x.detach().clone().requires_grad_()
    g, u = split(xr, interleaved)
    (g.clamp(max=c).sum() + u.clamp(-c, c).sum()).backward()
    return xr.grad != 0


def planted(dtype, device, c, rows=64, F=48, interleaved=False, extra=()):
    """Random N(0, 2) rows with the bound's edges planted in every row: gate and up equal to
    torch.clamp's bound in dtype (both signs for up), its neighbours in dtype, and `extra` values."""
    x = randn(rows, 2 * F, dtype=dtype, device=device)
    ce = torch.tensor([c], dtype=torch.float32).to(dtype)
    ib = {2: torch.int16, 4: torch.int32}[ce.element_size()]
    up, down = (
        (ce.view(ib) + 1).view(dtype),
        (ce.view(ib) - 1).view(dtype),
    )  # the neighbours in dtype (c > 0)
    edges = torch.cat([ce, up, down, -ce, -up, -down])
    vals = torch.cat([edges, torch.tensor(extra, dtype=torch.float32).to(dtype)]).to(device)
    g, u = split(x, interleaved)
    g[:, : vals.numel()] = vals
    u[:, : vals.numel()] = vals
    u[:, vals.numel() : 2 * vals.numel()] = vals.flip(0)
    return x


def assert_mask(dx, mask, ref):
    """dx is 0 wherever torch.clamp's gradient is (exactly), and nonzero wherever it passes and the
    reference is not (near) 0 (an uncut element's gradient can vanish by itself: up + offset = 0)."""
    cut = ~mask
    assert (dx[cut] == 0).all(), (
        f"{int((dx[cut] != 0).sum())} gradients pass where torch.clamp's are 0"
    )
    live = mask & (ref.abs() > 1e-3 * ref.abs().max()).to(mask.device)
    assert (dx[live] != 0).all(), (
        f"{int((dx[live] == 0).sum())} gradients are 0 where torch.clamp's pass"
    )
    assert live.sum() > mask.sum() // 2


def grads(fn, x, dy):
    xi = x.detach().clone().requires_grad_()
    y = fn(xi)
    y.backward(dy)
    return y.detach(), xi.grad


# ---- 1. the bound in the input's dtype ------------------------------------------------------------


ENTRIES = {
    "glu": lambda x, c: fastglu.glu(x, "quick_gelu", clamp_value=c, glu_linear_offset=1.0),
    "glu-interleaved": lambda x, c: fastglu.glu(x, "silu", clamp_value=c, interleaved=True),
    "glu_mul": lambda x, c: fastglu.glu_mul(*x.chunk(2, -1), "gelu_tanh", clamp_value=c),
    "weighted_bias_quick_geglu_impl": lambda x, c: fastglu.weighted_bias_quick_geglu_impl(
        x, None, torch.ones(x.shape[0], 1, device=x.device), False, 1.0, c
    ),
    "bias_swiglu_impl": lambda x, c: fastglu.bias_swiglu_impl(x, None, False, False, c),
}
OPTS = {
    "glu": dict(activation="quick_gelu", glu_linear_offset=1.0),
    "glu-interleaved": dict(activation="silu", interleaved=True),
    "glu_mul": dict(activation="gelu_tanh"),
    "weighted_bias_quick_geglu_impl": dict(activation="quick_gelu", glu_linear_offset=1.0),
    "bias_swiglu_impl": dict(activation="silu"),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_clamp_bound_is_torch_clamps_in_the_input_dtype(entry, dtype, device):
    """clamp_value 1.1 (in no dtype; 1.1015625 in bf16): the gradient is zero exactly where
    torch.clamp's is, the bound's own value passing; output and gradients match the float64
    reference at torch.clamp's bound."""
    c = 1.1
    il = entry == "glu-interleaved"
    x = planted(dtype, device, c, interleaved=il)
    dy = randn(x.shape[0], x.shape[-1] // 2, dtype=dtype, device=device)
    y, dx = grads(lambda t: ENTRIES[entry](t, c), x, dy)
    ry, rdg, rdu, _, _ = reference(
        *split(x, il),
        dy,
        clamp_value=c,
        **{k: v for k, v in OPTS[entry].items() if k != "interleaved"},
    )
    assert_mask(dx, torch_mask(x, c, il), merge(rdg, rdu, il))
    assert rel_err(y, ry) <= TOL[dtype]
    assert rel_err(dx, merge(rdg, rdu, il)) <= TOL[dtype]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_clamp_bound_in_the_op_layer_and_the_library_ops(dtype, device):
    """glu_fwd / glu_bwd (the op layer, fc1 and two-tensor forms) and torch.ops.fastglu.glu_fwd /
    glu_bwd (the compile path's ops) clamp at torch.clamp's bound too."""
    c = 1.1
    x = planted(dtype, device, c)
    F = x.shape[-1] // 2
    dy = randn(x.shape[0], F, dtype=dtype, device=device)
    mask = torch_mask(x, c)
    ref = reference(*split(x, False), dy, clamp_value=c)
    g = glu_bwd(dy, x, clamp_value=c)
    assert_mask(g.dx, mask, merge(ref[1], ref[2], False))
    g2 = glu_bwd(dy, x[:, :F], x[:, F:], clamp_value=c)
    assert torch.equal(torch.cat((g2.dx, g2.d_up), -1), g.dx)
    assert rel_err(glu_fwd(x, clamp_value=c), ref[0]) <= TOL[dtype]
    if fastglu.library.SUPPORTED:
        scalars = tuple(G.glu_params("silu", clamp_value=c))
        y = torch.ops.fastglu.glu_fwd(x, None, None, None, *scalars)
        dx = torch.ops.fastglu.glu_bwd(dy, x, None, None, None, None, *scalars, False, False)[0]
        assert torch.equal(y, glu_fwd(x, clamp_value=c)) and torch.equal(dx, g.dx)


# ---- 2. the fp8 saved input knows which elements the clamp cut --------------------------------------


def fp8_call(layout, mode, c):
    # no offset: an uncut up stored as -lo (-1.0 under clamp 1.1) would zero up + 1 where Megatron's
    # cast does not, and the mask check below could not tell that from a cut
    if layout == "split":  # Megatron's GPT-OSS entry point
        return lambda t: fastglu.weighted_bias_quick_geglu_impl(
            t, None, torch.ones(t.shape[0], 1, device=t.device), mode, 0.0, c
        )
    if layout == "interleaved":
        return lambda t: fastglu.glu(
            t, "quick_gelu", clamp_value=c, interleaved=True, fp8_input_store=mode
        )
    return lambda t: fastglu.glu_mul(
        *t.chunk(2, -1), "quick_gelu", clamp_value=c, fp8_input_store=mode
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["split", "interleaved", "two"])
@pytest.mark.parametrize("mode", FP8_MODES, ids=str)
@pytest.mark.parametrize(
    "c, extra",
    [(7.0, (7.125, 7.2, 6.9, 7.0)), (6.9, (6.95, 6.9, 6.8)), (1.1, (1.07, 1.12))],
    ids=["c=7", "c=6.9", "c=1.1"],
)
def test_fp8_store_cuts_exactly_where_the_clamp_did(c, extra, mode, layout, dtype, device):
    """The gradient through the fp8 saved input is zero exactly where torch.clamp's is on the
    full-precision input (e4m3 rounds 7.125 and 7.2 onto 7.0, and 6.9 beyond 6.9), and near
    Megatron's (the clamped input rounded through fp8, torch.clamp's mask; the scaled modes against
    the clamped input itself)."""
    il = layout == "interleaved"
    x = planted(dtype, device, c, interleaved=il, extra=extra)
    dy = randn(x.shape[0], x.shape[-1] // 2, dtype=dtype, device=device)
    y, dx = grads(fp8_call(layout, mode, c), x, dy)
    mask = torch_mask(x, c, il)
    ce = torch.tensor(c, dtype=torch.float32).to(dtype).item()
    g, u = split(x, il)
    _, rdg, rdu, _, _ = reference(
        g.clamp(max=ce).to(FP8).to(dtype) if mode is True else g.clamp(max=ce),
        u.clamp(-ce, ce).to(FP8).to(dtype) if mode is True else u.clamp(-ce, ce),
        dy,
        activation="quick_gelu",
    )
    ref = merge(rdg, rdu, il) * mask.to(torch.float64)
    assert_mask(dx, mask, ref)
    # every row has its edges planted, which the copy keeps one e4m3 step inside the bound where
    # Megatron's cast may round them onto or beyond it (<= 1/8 of such an element): a loose bound
    assert rel_err(dx, ref) <= 0.1


@pytest.mark.parametrize("mode", ["per_row", "per_tensor", "blockwise"])
def test_scaled_fp8_store_marks_a_cut_just_above_the_bound(mode):
    """fp32 rows whose largest value is the float just above the clamp: 448 * (amax / 448) can round
    to the bound itself, leaving no e4m3 value that decodes beyond it; scale_inv is then rounded up,
    and the element is still cut."""
    hits = 0
    for c in (7.0, 1.1, 31.36040687561035, 59.47096633911133, 127.65042114257812):  # fp32 values
        c32 = torch.tensor(c, dtype=torch.float32)
        above = torch.nextafter(c32, torch.tensor(math.inf))
        hits += bool(((above / 448) * 448) <= c32)  # the case the rounding up is for
        x = torch.full((2, 8), 0.5)
        x[0, 0] = above  # gate just beyond: cut
        x[1, 0] = c32  # gate on the bound: passes
        x[1, 4] = -above  # up just beyond: cut
        dy = torch.ones(2, 4)
        _, dx = grads(lambda t: fastglu.glu(t, "silu", clamp_value=c, fp8_input_store=mode), x, dy)
        assert torch.equal(dx != 0, torch_mask(x, c)), c  # (no gradient here vanishes by itself)
    assert hits > 0  # the test can fail without the rounding up


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("layout", ["split", "interleaved", "two"])
@pytest.mark.parametrize("c", [7.0, 1.1, 0.001])
def test_compile_paths_fp8_copy_is_the_kernels(c, layout, dtype, device):
    """fp8_input_store=True under torch.compile saves the copy cast by torch ops (glu._fp8_cast):
    byte for byte what the forward kernel writes, on every 16-bit pattern, with a clamp."""
    n = 1 << 16
    F = 128
    x = (torch.arange(n) - (1 << 15)).to(torch.int16).view(dtype).reshape(-1, 2 * F).to(device)
    il = layout == "interleaved"
    p = G.glu_params("quick_gelu", clamp_value=c, glu_linear_offset=1.0, interleaved=il)
    saved = torch.empty(x.shape, dtype=FP8, device=device)
    if layout == "two":
        glu_fwd(
            x[:, :F],
            x[:, F:],
            activation="quick_gelu",
            clamp_value=c,
            glu_linear_offset=1.0,
            saved_fp8=saved,
        )
        a, b = G._fp8_cast(p, x[:, :F], x[:, F:], "glu")
        ops = torch.cat((a, b), -1)
    else:
        glu_fwd(
            x,
            activation="quick_gelu",
            clamp_value=c,
            glu_linear_offset=1.0,
            interleaved=il,
            saved_fp8=saved,
        )
        ops = G._fp8_cast(p, x, None, "glu")[0]
    got, want = saved.view(torch.uint8).cpu(), ops.view(torch.uint8).cpu()
    nan = ((got & 0x7F) == 0x7F) & ((want & 0x7F) == 0x7F)
    assert ((got == want) | nan).all()
    assert (got != x.to(FP8).view(torch.uint8).cpu()).any()  # the clamp moved some


# ---- 3. clamps the dtype cannot hold ------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda x, c: fastglu.glu(x, clamp_value=c),
        lambda x, c: fastglu.glu_mul(*x.chunk(2, -1), clamp_value=c),
        lambda x, c: fastglu.bias_swiglu_impl(x, None, False, False, c),
        lambda x, c: fastglu.weighted_bias_quick_geglu_impl(
            x, None, torch.ones(x.shape[0], 1), False, 1.0, c
        ),
        lambda x, c: glu_fwd(x, clamp_value=c),
        lambda x, c: glu_bwd(x[:, :2], x, clamp_value=c),
        pytest.param(
            lambda x, c: torch.ops.fastglu.glu_fwd(x, None, None, None, 0, 0, c, 0.0, 1.0, 1.0),
            marks=pytest.mark.skipif(not fastglu.library.SUPPORTED, reason="no torch.library ops"),
        ),
    ],
    ids=[
        "glu",
        "glu_mul",
        "bias_swiglu_impl",
        "weighted_bias_quick_geglu_impl",
        "glu_fwd",
        "glu_bwd",
        "torch.ops.fastglu.glu_fwd",
    ],
)
def test_clamp_that_rounds_to_zero_or_overflows_is_refused(call):
    x = randn(3, 4, dtype=torch.float32, device="cpu")
    with pytest.raises(
        ValueError, match=r"clamp_value = 1e-46 is positive but rounds to 0 in float32"
    ):
        call(x, 1e-46)
    with pytest.raises(ValueError, match=r"clamp_value = 1e\+300 is beyond the float32 range"):
        call(x, 1e300)
    h = x.to(torch.float16)
    with pytest.raises(ValueError, match=r"clamp_value = 1e-10 rounds to 0 in float16"):
        call(h, 1e-10)
    with pytest.raises(
        ValueError, match=r"clamp_value = 70000 is beyond the largest finite float16"
    ):
        call(h, 70000.0)
    b = x.to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"clamp_value = 1\.4013e-45 rounds to 0 in bfloat16"):
        call(b, 1e-45)
    call(h, 65504.0), call(h, 6e-8), call(x, 1e-45)  # the neighbours the dtype holds


@pytest.mark.parametrize("mode", FP8_MODES, ids=str)
def test_fp8_store_with_a_clamp_of_448_or_more_is_refused(mode):
    x = randn(3, 8, dtype=torch.bfloat16, device="cpu", scale=100.0).requires_grad_()
    for c in (448.0, 1000.0, 447.0):  # 447 is 448 in bf16
        with pytest.raises(
            ValueError,
            match=rf"clamp_value = {c} \([0-9.]+ in torch\.bfloat16\) with "
            rf"fp8_input_store={mode!r}: .*below 448",
        ):
            fastglu.glu(x, clamp_value=c, fp8_input_store=mode)
    fastglu.glu(x.float(), clamp_value=447.0, fp8_input_store=mode).sum().backward()  # 447 in fp32
    fastglu.glu(
        x, clamp_value=math.inf, fp8_input_store=mode
    ).sum().backward()  # cuts nothing: the plain cast


@pytest.mark.parametrize(
    "dtype, c",
    [
        (torch.float32, 3.4028235e38 * (1 + 1e-8)),
        (torch.float16, 65510.0),
        (torch.bfloat16, 3.39e38),
    ],
)
def test_a_clamp_above_the_dtypes_largest_value_is_refused_where_it_would_round_down(dtype, c):
    """torch.clamp refuses a bound above the dtype's largest finite value, even one that rounds
    down to it; so does fastglu."""
    x = torch.randn(4, 8).to(dtype)
    with pytest.raises(RuntimeError):
        torch.clamp(x, max=c)
    with pytest.raises(ValueError, match="clamp_value"):
        fastglu.glu(x, clamp_value=c)
