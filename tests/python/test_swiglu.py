"""fastglu's SwiGLU from PyTorch against a float64 torch reference, on CPU (CI) and CUDA (device).

Fresh random inputs every run (never zeros); outputs given through ``out=`` are pre-filled with NaN,
so an element the kernel did not write fails the relative-norm check.
"""

import pytest
import torch
import torch.nn.functional as F_
from swiglu_reference import ref_bwd, ref_fwd, rel_err

import fastglu
from fastglu import ops

WIDTHS = [1, 3, 768, 1408, 3420, 5632, 8192]
ROWS = [1, 257]
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")


def randn(*shape, dtype, device):
    return (torch.randn(*shape, dtype=torch.float32, device=device) * 2).to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("F", WIDTHS)
def test_kernels_against_float64(F, rows, dtype, device):
    x = randn(rows, 2 * F, dtype=dtype, device=device)
    dy = randn(rows, F, dtype=dtype, device=device)
    y = torch.full((rows, F), float("nan"), dtype=dtype, device=device)
    dx = torch.full((rows, 2 * F), float("nan"), dtype=dtype, device=device)
    assert ops.swiglu_fwd(x, out=y) is y
    assert ops.swiglu_bwd(dy, x, out=dx) is dx
    assert rel_err(y, ref_fwd(x)) <= TOL[dtype]
    assert rel_err(dx, ref_bwd(dy, x)) <= TOL[dtype]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(257, 2 * 1408), (5, 3, 2 * 768), (1, 1, 2), (2, 4, 2 * 3420)])
def test_autograd_2d_and_3d(shape, dtype, device):
    x = randn(*shape, dtype=dtype, device=device).requires_grad_()
    y = fastglu.swiglu(x)
    assert y.shape == shape[:-1] + (shape[-1] // 2,) and y.dtype == dtype and y.device == x.device
    assert rel_err(y, ref_fwd(x.detach())) <= TOL[dtype]
    dy = randn(*y.shape, dtype=dtype, device=device)
    y.backward(dy)
    assert rel_err(x.grad, ref_bwd(dy, x.detach())) <= TOL[dtype]


@pytest.mark.parametrize("device", DEVICES)
def test_sum_backward_reads_expanded_scalar_dy(device):
    """The seed's backward mode: y.sum().backward() hands the kernel an all-zero-stride dy."""
    x = randn(3, 7, 2 * 1408, dtype=torch.bfloat16, device=device).requires_grad_()
    fastglu.swiglu(x).sum().backward()
    assert rel_err(x.grad, ref_bwd(torch.ones(3, 7, 1408, device=device), x.detach())) <= 1e-2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("F", [1, 3, 768, 3420])
def test_column_slice_input_is_read_in_place(F, device):
    """x = a column slice of a wider tensor (fc1 output sharing storage): no copy, right answer."""
    wide = randn(257, 2 * F + 40, dtype=torch.bfloat16, device=device)
    x = wide[:, 8 : 8 + 2 * F]
    assert ops._rows(x)[0] is x  # read in place, not copied
    x3 = randn(4, 6, 2 * F + 10, dtype=torch.bfloat16, device=device)[..., 3 : 3 + 2 * F]
    for inp in (x, x3):
        inp = inp.detach().requires_grad_()
        y = fastglu.swiglu(inp)
        dy = randn(*y.shape, dtype=torch.bfloat16, device=device)
        y.backward(dy)
        assert rel_err(y, ref_fwd(inp.detach())) <= 1e-2
        assert rel_err(inp.grad, ref_bwd(dy, inp.detach())) <= 1e-2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["transposed", "column-step-2", "row-broadcast", "3d-permuted"])
def test_strided_dy(kind, device):
    T, F = 257, 1408
    x = randn(T, 2 * F, dtype=torch.float32, device=device)
    if kind == "transposed":
        dy = randn(F, T, dtype=torch.float32, device=device).t()
    elif kind == "column-step-2":
        dy = randn(T, 2 * F, dtype=torch.float32, device=device)[:, ::2]
    elif kind == "row-broadcast":
        dy = randn(1, F, dtype=torch.float32, device=device).expand(T, F)
    else:
        x = x[:256].reshape(16, 16, 2 * F)
        dy = randn(16, 16, F, dtype=torch.float32, device=device).permute(1, 0, 2)
    dx = ops.swiglu_bwd(dy, x)
    assert rel_err(dx, ref_bwd(dy, x)) <= 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_backward_writes_into_input(device):
    x = randn(257, 2 * 768, dtype=torch.float32, device=device)
    dy = randn(257, 768, dtype=torch.float32, device=device)
    expected = ref_bwd(dy, x)
    assert ops.swiglu_bwd(dy, x, out=x) is x
    assert rel_err(x, expected) <= 1e-5


@pytest.mark.parametrize("device", DEVICES)
def test_empty_inputs(device):
    for shape in [(0, 16), (3, 0), (0, 4, 8)]:
        x = torch.randn(shape, device=device).requires_grad_()
        y = fastglu.swiglu(x)
        assert y.shape == shape[:-1] + (shape[-1] // 2,)
        y.sum().backward()
        assert x.grad.shape == x.shape


# ---- bad input --------------------------------------------------------------------------------


def test_odd_last_dim_raises_value_error():
    with pytest.raises(ValueError, match=r"last dimension.*even.*\(4, 7\)"):
        fastglu.swiglu(torch.randn(4, 7))


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float8_e4m3fn])
def test_wrong_dtype_raises_type_error(dtype):
    with pytest.raises(TypeError, match="dtype"):
        fastglu.swiglu(torch.ones(4, 8).to(dtype))


def test_not_a_tensor_and_wrong_rank():
    with pytest.raises(TypeError, match="torch.Tensor"):
        fastglu.swiglu([1.0, 2.0])
    with pytest.raises(ValueError, match="2D.*3D"):
        fastglu.swiglu(torch.randn(8))
    with pytest.raises(ValueError, match="2D.*3D"):
        fastglu.swiglu(torch.randn(2, 2, 2, 8))


def test_mixed_devices_raise_value_error():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="dy is on meta"):
        ops.swiglu_bwd(torch.empty(4, 4, device="meta"), x)
    with pytest.raises(ValueError, match="device meta"):
        fastglu.swiglu(torch.empty(4, 8, device="meta"))
    with pytest.raises(ValueError, match="on device cpu; got shape .* on device meta"):
        ops.swiglu_fwd(x, out=torch.empty(4, 4, device="meta"))


@cuda_only
def test_mixed_cpu_cuda_raise_value_error():
    x = torch.randn(4, 8, device="cuda")
    with pytest.raises(ValueError, match="dy is on cpu"):
        ops.swiglu_bwd(torch.randn(4, 4), x)
    with pytest.raises(ValueError, match="on device cuda:0; got shape .* on device cpu"):
        ops.swiglu_fwd(x, out=torch.empty(4, 4))


def test_bad_dy_and_out_leave_outputs_untouched():
    x = torch.randn(4, 8)
    out = torch.full((4, 4), 7.0)
    with pytest.raises(ValueError, match="dy has shape"):
        ops.swiglu_bwd(torch.randn(4, 5), x)
    with pytest.raises(TypeError, match="dy has dtype"):
        ops.swiglu_bwd(torch.randn(4, 4, dtype=torch.float64), x)
    with pytest.raises(ValueError, match="out must be a dense tensor of shape"):
        ops.swiglu_fwd(x, out=torch.empty(4, 5))
    with pytest.raises(TypeError, match="out has dtype"):
        ops.swiglu_fwd(x, out=torch.empty(4, 4, dtype=torch.float16))
    big = torch.full((4, 8), 7.0)
    with pytest.raises(ValueError, match="overlaps"):  # from the C library's own check
        ops.swiglu_fwd(big, out=big[:, :4])
    assert torch.equal(big, torch.full((4, 8), 7.0)) and torch.equal(out, torch.full((4, 4), 7.0))


# ---- Megatron-Core signature -------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_bias_swiglu_impl_shapes_and_values(device):
    x2 = randn(64, 2 * 768, dtype=torch.bfloat16, device=device).requires_grad_()
    y2 = fastglu.bias_swiglu_impl(x2, None)
    assert y2.shape == (64, 768)
    x3 = randn(8, 4, 2 * 768, dtype=torch.bfloat16, device=device).requires_grad_()
    y3 = fastglu.bias_swiglu_impl(x3, None)
    assert y3.shape == (8, 4, 768)
    y3.sum().backward()
    assert rel_err(y3, ref_fwd(x3.detach())) <= 1e-2
    assert rel_err(x3.grad, ref_bwd(torch.ones(8, 4, 768, device=device), x3.detach())) <= 1e-2


def test_bias_swiglu_impl_rejects_bad_shapes():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match=r"^fastglu\.bias_swiglu_impl: input must be 2D .* or 3D"):
        fastglu.bias_swiglu_impl(torch.randn(2, 2, 2, 8), None)
    with pytest.raises(ValueError, match="bias has shape"):
        fastglu.bias_swiglu_impl(x, torch.zeros(4))
    for no_clamp in (None, 0, -1.0):  # "no clamp" (include/fastglu.h)
        assert fastglu.bias_swiglu_impl(x, None, clamp_value=no_clamp).shape == (4, 4)


def test_fp8_input_store_and_cpu_offload_flags():
    x = randn(32, 2 * 64, dtype=torch.bfloat16, device="cpu").requires_grad_()
    y = fastglu.bias_swiglu_impl(x, None, fp8_input_store=True, cpu_offload_input=True)
    saved = y.grad_fn.saved_tensors[0]
    assert saved.dtype == torch.float8_e4m3fn and saved.activation_offloading is True
    y.sum().backward()
    # Megatron's semantics: the backward sees the input rounded through float8_e4m3fn.
    x8 = x.detach().to(torch.float8_e4m3fn).to(torch.bfloat16)
    assert rel_err(x.grad, ref_bwd(torch.ones(32, 64), x8)) <= 1e-2


# ---- CUDA specifics ----------------------------------------------------------------------------


@cuda_only
def test_runs_on_the_current_stream():
    s = torch.cuda.Stream()
    x = randn(4096, 2 * 4096, dtype=torch.bfloat16, device="cuda")
    dy = randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        y = ops.swiglu_fwd(x)
        dx = ops.swiglu_bwd(dy, x)
    s.synchronize()
    assert rel_err(y, ref_fwd(x)) <= 1e-2 and rel_err(dx, ref_bwd(dy, x)) <= 1e-2


@cuda_only
@pytest.mark.parametrize("offset", range(1, 8))
def test_misaligned_views_on_cuda(offset):
    F = 1408
    flat = randn(257 * 2 * F + 16, dtype=torch.bfloat16, device="cuda")
    x = flat[offset : offset + 257 * 2 * F].view(257, 2 * F)
    dy = randn(257, F, dtype=torch.bfloat16, device="cuda")
    assert rel_err(ops.swiglu_fwd(x), ref_fwd(x)) <= 1e-2
    assert rel_err(ops.swiglu_bwd(dy, x), ref_bwd(dy, x)) <= 1e-2


# ---- in-place backward ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_option_gives_the_same_gradient(device):
    fc1 = randn(3, 5, 2 * 768, dtype=torch.float32, device=device)
    dy = randn(3, 5, 768, dtype=torch.float32, device=device)
    expected = ref_bwd(dy, fc1)
    x = fc1.clone().requires_grad_()
    h = x * 1.0  # a non-leaf, like fc1's output
    fastglu.swiglu(h, in_place=True).backward(dy)
    assert rel_err(x.grad, expected) <= 1e-5
    assert rel_err(h, expected) <= 1e-5  # the saved input now holds its gradient


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_second_backward_raises(device):
    x = randn(4, 2 * 64, dtype=torch.bfloat16, device=device).requires_grad_()
    y = fastglu.swiglu(x * 1.0, in_place=True)
    y.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="only once"):
        y.sum().backward()


# ---- unusual tensors ----------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_negated_views_are_read_as_their_values(device):
    """torch's lazy negation (e.g. complex.conj().imag) keeps -t in memory; it must not leak."""
    x = randn(8, 2 * 16, dtype=torch.float32, device=device)
    dy = torch.randn(8, 16, dtype=torch.complex64, device=device).conj().imag
    assert dy.is_neg()
    xn = torch._neg_view(-x)
    assert xn.is_neg()
    assert rel_err(ops.swiglu_fwd(xn), ref_fwd(x)) <= 1e-5
    assert rel_err(ops.swiglu_bwd(dy, x), ref_bwd(dy.resolve_neg(), x)) <= 1e-5
    with pytest.raises(ValueError, match="negation"):
        ops.swiglu_fwd(x, out=torch._neg_view(torch.zeros(8, 16, device=device)))


def test_out_and_fn_are_keyword_only():
    x, y = torch.randn(4, 8), torch.empty(4, 4)
    with pytest.raises(TypeError):
        ops.swiglu_fwd(x, y)
    with pytest.raises(TypeError):
        ops.swiglu_bwd(torch.randn(4, 4), x, torch.empty(4, 8))


def test_empty_3d_outputs_are_legal():
    x = torch.randn(2, 0, 8)
    assert ops.swiglu_fwd(x, out=torch.empty(2, 0, 4)).shape == (2, 0, 4)
    assert ops.swiglu_bwd(torch.empty(2, 0, 4), x, out=torch.empty(2, 0, 8)).shape == (2, 0, 8)
    xr = x.clone().requires_grad_()
    fastglu.swiglu(xr * 1.0, in_place=True).sum().backward()
    assert xr.grad.shape == (2, 0, 8)


@pytest.mark.parametrize("kind", ["transposed", "expanded"])
def test_in_place_rejects_inputs_it_cannot_overwrite_at_the_forward(kind):
    if kind == "transposed":
        x = torch.randn(8, 6).t() * 1.0  # elementwise ops keep the transposed strides: (1, 6)
    else:
        x = torch.randn(1, 8).expand(6, 8)  # every row is the same memory
    with pytest.raises(ValueError, match="in_place=True needs"):
        fastglu.swiglu(x, in_place=True)


def test_sparse_inputs_raise_type_error():
    with pytest.raises(TypeError, match="layout"):
        fastglu.swiglu(torch.randn(4, 8).to_sparse())
    with pytest.raises(TypeError, match="layout"):
        ops.swiglu_bwd(torch.randn(4, 4).to_sparse(), torch.randn(4, 8))


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("layout", [torch.jagged, torch.strided], ids=["jagged", "strided"])
def test_nested_inputs_raise_type_error(layout):
    """A nested tensor (either layout) is refused by name before any op or size query sees it (a
    jagged one reached the library op, which raised NotImplementedError; a strided one made
    x.shape raise a RuntimeError from PyTorch)."""
    nt = torch.nested.nested_tensor([torch.randn(3, 8), torch.randn(5, 8)], layout=layout)
    x, bias = torch.randn(3, 8), torch.randn(8)
    calls = {
        "swiglu": lambda: fastglu.swiglu(nt),
        "swiglu in_place": lambda: fastglu.swiglu(nt, in_place=True),
        "swiglu_fwd": lambda: ops.swiglu_fwd(nt),
        "swiglu_bwd input": lambda: ops.swiglu_bwd(torch.randn(3, 4), nt),
        "swiglu_bwd dy": lambda: ops.swiglu_bwd(nt, x),
        "bias_swiglu_impl": lambda: fastglu.bias_swiglu_impl(nt, None),
        "bias_swiglu_impl bias": lambda: fastglu.bias_swiglu_impl(nt, bias),
        "nested bias": lambda: fastglu.bias_swiglu_impl(x, nt),
        "glu": lambda: fastglu.glu(nt),
        "silu_mul up": lambda: fastglu.silu_mul(torch.randn(3, 4), nt),
        "weights": lambda: fastglu.weighted_bias_swiglu_impl(x, None, nt),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match="nested tensor"):
            call()
            pytest.fail(f"{name}: no error")


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_odd_inputs_get_errors_naming_the_call():
    """Inputs an adversarial review found slipping past the checks (each raised PyTorch's own
    error, was silently ignored, or named another function before the fix)."""
    two_tensor = pytest.importorskip("torch.testing._internal.two_tensor")
    x, b, w = torch.randn(4, 8), torch.randn(8), torch.rand(4, 1)
    # a tensor subclass with no storage of its own (data_ptr() 0) was read as "no bias / weights"
    for call in (
        lambda: fastglu.glu(x, bias=two_tensor.TwoTensor(b, b)),
        lambda: fastglu.glu(x, weights=two_tensor.TwoTensor(w, w)),
        lambda: fastglu.bias_swiglu_impl(x, two_tensor.TwoTensor(b, b)),
    ):
        with pytest.raises(TypeError, match="no storage of its own"):
            call()
    # a ragged jagged tensor: its last size is symbolic
    ragged = torch.nested.nested_tensor([torch.randn(4), torch.randn(6)], layout=torch.jagged)
    with pytest.raises(TypeError, match=r"^fastglu\.swiglu_fwd: input is a nested tensor"):
        ops.swiglu_fwd(ragged)
    # in_place was checked before the operands: a 0-dim or sparse input raised IndexError / RuntimeError
    with pytest.raises(ValueError, match=r"^fastglu\.glu: input must have at least one dimension"):
        fastglu.glu(torch.tensor(1.0, requires_grad=True), in_place=True)
    with pytest.raises(TypeError, match=r"^fastglu\.glu: input has layout torch\.sparse_csr"):
        fastglu.glu(torch.randn(4, 8).to_sparse_csr().requires_grad_(), in_place=True)
    # out= of another layout: TypeError as for every other argument (was ValueError / RuntimeError)
    for out in (torch.empty(4, 4).to_sparse(), torch.nested.nested_tensor([torch.empty(4, 4)])):
        with pytest.raises(TypeError, match=r"^fastglu\.swiglu_fwd: out "):
            ops.swiglu_fwd(x, out=out)
    # bias_swiglu_impl's no-bias path named fastglu.swiglu; nonsense options reached `if tensor:`
    with pytest.raises(ValueError, match=r"^fastglu\.bias_swiglu_impl: input's last dimension"):
        fastglu.bias_swiglu_impl(torch.randn(4, 7), None)
    with pytest.raises(ValueError, match=r"^fastglu\.bias_swiglu_impl: fp8_input_store must be"):
        fastglu.bias_swiglu_impl(x, None, torch.ones(2))
    with pytest.raises(
        TypeError, match=r"^fastglu\.bias_swiglu_impl: clamp_value must be a real number"
    ):
        fastglu.bias_swiglu_impl(x, None, clamp_value="1")
    # a tensor subclass goes through the registered op, whose errors named fastglu.swiglu_fwd
    with pytest.raises(ValueError, match=r"^fastglu\.swiglu: input's last dimension"):
        fastglu.swiglu(torch.nn.Parameter(torch.randn(4, 7)))
    # the modules check fp8_input_store at construction, as their docstring says
    with pytest.raises(ValueError, match=r"^fastglu\.SwiGLU: fp8_input_store must be"):
        fastglu.modules.SwiGLU(fp8_input_store="bogus")


@pytest.mark.parametrize("in_place", [False, True])
def test_double_backward_raises_instead_of_a_wrong_answer(in_place):
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(fastglu.swiglu(x * 1.0, in_place=in_place).sum(), x, create_graph=True)


def test_binding_rejects_unknown_dtype_codes():
    x, y = torch.randn(1, 2), torch.empty(1, 1)
    with pytest.raises(TypeError, match="dtype code"):
        fastglu._C.swiglu_fwd(0, 2**32 + 2, x.data_ptr(), 2, y.data_ptr(), 1, 1, 1, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_deterministic(device, dtype):
    """The same inputs give bitwise-identical outputs and gradients, run after run (no reductions,
    no atomics: each element is computed by one thread from its own inputs)."""
    x = randn(257, 2 * 3420, dtype=dtype, device=device)
    dy = randn(257, 3420, dtype=dtype, device=device)
    y0, dx0 = ops.swiglu_fwd(x), ops.swiglu_bwd(dy, x)
    for _ in range(3):
        assert torch.equal(ops.swiglu_fwd(x), y0)
        assert torch.equal(ops.swiglu_bwd(dy, x), dx0)


@cuda_only
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("ffn", [3, 1408, 3420])
def test_cuda_same_bits_as_the_family_silu(dtype, ffn):
    """On the GPU, fastglu.swiglu is the family's plain-SwiGLU case (src/swiglu.c, src/glu_swiglu.cuh):
    fastglu.swiglu and fastglu.glu (SiLU, no bias) give the same bits, output and gradient."""
    x = (torch.rand(257, 2 * ffn, device="cuda") * 32 - 16).to(dtype)
    dy = randn(257, ffn, dtype=dtype, device="cuda")
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = fastglu.swiglu(xa), fastglu.glu(xb)
    assert torch.equal(ya, yb)
    ya.backward(dy)
    yb.backward(dy)
    assert torch.equal(xa.grad, xb.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_and_inf_propagate_like_the_torch_formulas(device, dtype):
    """Special values in gate, up and dy come out where Megatron's formulas, evaluated by torch in
    fp32 on the same stored values, put them (NaN where NaN, the same infinities, the rest close)."""
    specials = torch.tensor(
        [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 88.0, -88.0, 1e4, -1e4, 1.5],
        dtype=torch.float32,
    )
    n = len(specials)
    g = specials.repeat_interleave(n * n)
    u = specials.repeat(n).repeat_interleave(n)
    d = specials.repeat(n * n)
    x = torch.cat([g, u]).reshape(1, 2 * n**3).to(dtype).to(device)
    dy = d.reshape(1, n**3).to(dtype).to(device)
    gf, uf = x.float().chunk(2, -1)
    s = torch.sigmoid(gf)
    want_y = (F_.silu(gf) * uf).to(dtype).float()
    want_dx = (
        torch.cat((dy.float() * s * (1 + gf * (1 - s)) * uf, dy.float() * F_.silu(gf)), -1)
        .to(dtype)
        .float()
    )
    for got, want in (
        (ops.swiglu_fwd(x).float(), want_y),
        (ops.swiglu_bwd(dy, x).float(), want_dx),
    ):
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        inf = torch.isinf(want)
        assert torch.equal(got[inf], want[inf])
        finite = torch.isfinite(want)
        assert torch.allclose(got[finite], want[finite], rtol=TOL[dtype] * 4, atol=1e-3)


@cuda_only
@pytest.mark.parametrize(
    "input_elements", [2**31 + 2**21, 2**32 - 2**14], ids=["just-above-2^31", "near-2^32"]
)
def test_more_than_2_31_elements(input_elements):
    """64-bit offsets: an input of more than 2^31 elements (and near 2^32), forward and backward, the
    first and last rows checked against the CPU backend."""
    F = 8192
    T = -(-input_elements // (2 * F))
    x = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    assert x.numel() > 2**31
    y = ops.swiglu_fwd(x)
    dy = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
    dx = ops.swiglu_bwd(dy, x)
    for rows in (slice(0, 2), slice(T // 2, T // 2 + 1), slice(T - 3, T)):
        xc, dyc = x[rows].cpu(), dy[rows].cpu()
        assert rel_err(y[rows].cpu(), ops.swiglu_fwd(xc)) <= 1e-2
        assert rel_err(dx[rows].cpu(), ops.swiglu_bwd(dyc, xc)) <= 1e-2


def test_overlap_with_an_input_that_had_to_be_copied_is_still_refused():
    """A non-mergeable or negated input is copied before the C call, whose overlap check then sees
    only the copy: the Python layer checks the original."""
    base = torch.randn(4, 3, 4)
    x = base.transpose(0, 1)  # (3, 4, 4), strides (4, 12, 1): no single row stride
    before = base.clone()
    with pytest.raises(ValueError, match="overlaps"):
        ops.swiglu_fwd(x, out=base.view(-1)[:24].view(3, 4, 2))
    assert torch.equal(base, before)
    b = torch.randn(3, 4)
    with pytest.raises(ValueError, match="overlaps"):
        ops.swiglu_fwd(torch._neg_view(b), out=b[:, :2])
    xo, o = torch.randn(3, 4, 4), torch.zeros(3, 4, 4)
    dy = o.view(-1)[:24].view(4, 3, 2).transpose(0, 1)  # a non-mergeable dy inside out
    with pytest.raises(ValueError, match="overlaps dy"):
        ops.swiglu_bwd(dy, xo, out=o)
    with pytest.raises(ValueError, match="overlaps input"):
        ops.swiglu_bwd(
            torch.randn(3, 4, 2), base.transpose(0, 1), out=base.view(-1)[:48].view(3, 4, 4)
        )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("context", ["no_grad", "inference_mode", "input_without_grad"])
def test_paths_that_record_no_gradient_give_the_same_bits(context, device):
    # swiglu skips its autograd.Function where nothing can be recorded; the result must be the one the
    # Function gives, and carry no graph.
    x = randn(257, 2 * 3420, dtype=torch.bfloat16, device=device).requires_grad_()
    with_graph = fastglu.swiglu(x)
    assert with_graph.grad_fn is not None
    if context == "no_grad":
        with torch.no_grad():
            y = fastglu.swiglu(x)
    elif context == "inference_mode":
        with torch.inference_mode():
            y = fastglu.swiglu(x)
    else:
        y = fastglu.swiglu(x.detach())
    assert y.grad_fn is None and not y.requires_grad
    assert torch.equal(y, with_graph.detach())


@pytest.mark.parametrize("requires_grad", [False, True])
def test_forward_mode_ad_is_refused_not_dropped(requires_grad):
    # A dual input must not take the kernel-only path (its tangent would be silently lost): the
    # Function, which defines no jvp, refuses it.
    import torch.autograd.forward_ad as fwAD

    x = torch.randn(4, 6).requires_grad_(requires_grad)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.randn(4, 6))
        with pytest.raises(NotImplementedError, match="jvp"):
            fastglu.swiglu(dual)


def test_functorch_transforms_are_refused():
    with pytest.raises(RuntimeError, match="functorch transforms"):
        torch.func.vmap(fastglu.swiglu)(torch.randn(3, 4, 6))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("F", [5, 9, 10, 12, 13, 1001, 4100])
@pytest.mark.parametrize("rows", [2, 3, 257])
@pytest.mark.parametrize("layout", ["contiguous", "column-slice", "offset-view"])
def test_forward_chunks_across_rows(layout, rows, F, dtype, device):
    # F not a multiple of the 16-byte chunk's elements: on CUDA a contiguous output is written in
    # chunks of the flat output that cross row ends (the flat forward kernel); the input's rows may
    # be padded (column slice) or start off 16-byte alignment (offset view).
    if layout == "contiguous":
        x = randn(rows, 2 * F, dtype=dtype, device=device)
    elif layout == "column-slice":
        x = randn(rows, 2 * F + 3, dtype=dtype, device=device)[:, 1 : 2 * F + 1]
    else:
        x = randn(rows * 2 * F + 1, dtype=dtype, device=device)[1:].view(rows, 2 * F)
    y = torch.full((rows, F), float("nan"), dtype=dtype, device=device)
    ops.swiglu_fwd(x, out=y)
    assert rel_err(y, ref_fwd(x)) <= TOL[dtype]
    assert torch.equal(fastglu.swiglu(x), y)


@pytest.mark.parametrize("grad", [False, True])
def test_jit_trace_records_the_kernel(grad):
    # Under torch.jit.trace a raw kernel call would be invisible to the tracer (the trace would keep
    # only the output's allocation): swiglu records its Function there, also without grad.
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 12)

        def forward(self, x):
            return fastglu.swiglu(self.fc1(x))

    block = Block()
    with torch.set_grad_enabled(grad):
        traced = torch.jit.trace(block, torch.randn(5, 8), check_trace=False)
        x2 = torch.randn(5, 8)
        assert torch.equal(traced(x2), block(x2))
