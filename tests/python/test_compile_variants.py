"""The gated-linear-unit family (``glu.py``) under torch.compile: the torch.library ops
``fastglu::glu_fwd`` / ``glu_bwd`` (``library.py``) and Megatron-style blocks (fc1 Linear -> variant
-> fc2 Linear, with the bias and the router's per-token probs as parameters of the block) compiled
with ``fullgraph=True``.

Every compiled result is compared with eager mode on the same parameters and fresh random inputs,
and the eager block with a float64 block whose activation is the formula of include/fastglu.h
("The gated-linear-unit family") written with torch ops, differentiated by autograd.
CPU in CI (inductor's C++ backend and aot_eager); CUDA on a GPU machine (skipped without one).
"""

import pytest
import torch
import torch.nn.functional as F_
from swiglu_reference import rel_err
from torch._dynamo.utils import counters

import fastglu
from fastglu import library

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}
ACT = {"silu": 0, "gelu_tanh": 1, "quick_gelu": 2}
SPLIT, INTERLEAVED = 0, 1

pytestmark = pytest.mark.skipif(
    not library.SUPPORTED, reason="torch.library's Python registration API is missing"
)


# ---- the float64 reference ----------------------------------------------------------------------


def act64(name, z):
    if name == "silu":
        return F_.silu(z)
    if name == "gelu_tanh":
        return 0.5 * z * (1 + torch.tanh(0.79788456 * z * (1 + 0.044715 * z * z)))
    return z * torch.sigmoid(1.702 * z)


def ref_glu(
    x,
    up=None,
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
    """include/fastglu.h's forward with torch ops in x's dtype (float64 in the tests), differentiable:
    y = m_d * w * act(m_g * (g' + b_gate)) * (u' + b_up + o), g' = min(g, c), u' = clamp(u, -c, c)."""
    if up is not None:
        g, u = x, up
    elif interleaved:
        g, u = x[..., 0::2], x[..., 1::2]
    else:
        g, u = x.chunk(2, -1)
    if clamp_value is not None and clamp_value > 0:
        g, u = torch.clamp(g, max=clamp_value), torch.clamp(u, -clamp_value, clamp_value)
    if bias is not None:
        bg, bu = (bias[0::2], bias[1::2]) if interleaved else bias.chunk(2)
        g, u = g + bg, u + bu
    y = down_multiplier * act64(activation, gate_multiplier * g) * (u + glu_linear_offset)
    if weights is not None:
        y = y * weights.reshape(*y.shape[:-1], 1).to(y.dtype)
    return y


def randn(*shape, dtype=torch.float32, device="cpu", scale=2.0):
    return (torch.randn(*shape, dtype=torch.float32, device=device) * scale).to(dtype)


# ---- the blocks ---------------------------------------------------------------------------------

CLAMP = 0.75  # below the fc1 outputs' spread, so the clamp cuts a fair share of gate and up values


class Block(torch.nn.Module):
    """Megatron-Core's MLP with a gated linear unit and bias_activation_fusion: fc1 [hidden -> 2F]
    without its own bias (the activation adds it), the variant, fc2 [F -> hidden]. ``router``: a
    [hidden -> 1] Linear whose sigmoid gives the per-token probs (weights) in float32, as an MoE
    expert receives them. ``two``: Hugging Face's gate_proj / up_proj Linears instead of fc1."""

    def __init__(self, hidden, F, act, *, bias=False, router=False, two=False):
        super().__init__()
        if two:
            self.gate_proj = torch.nn.Linear(hidden, F, bias=False)
            self.up_proj = torch.nn.Linear(hidden, F, bias=False)
        else:
            self.fc1 = torch.nn.Linear(hidden, 2 * F, bias=False)
        self.fc2 = torch.nn.Linear(F, hidden, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(2 * F) * 0.5) if bias else None
        self.router = torch.nn.Linear(hidden, 1) if router else None
        self.act, self.two = act, two

    def forward(self, x):
        h = (self.gate_proj(x), self.up_proj(x)) if self.two else self.fc1(x)
        probs = (
            torch.sigmoid(self.router(x.to(self.router.weight.dtype)))
            if self.router is not None
            else None
        )
        return self.fc2(self.act(h, self.bias, probs))


def _ref(**opts):
    def act(h, b, w):
        if isinstance(h, tuple):
            return ref_glu(h[0], h[1], bias=b, weights=w, **opts).to(h[0].dtype)
        return ref_glu(h, bias=b, weights=w, **opts).to(h.dtype)

    return act


# name: (fastglu activation, float64 reference, Block options, 3D input, compare with float64)
CASES = {
    "bias_swiglu_impl-bias-clamp": (
        lambda h, b, w: fastglu.bias_swiglu_impl(h, b, clamp_value=CLAMP),
        _ref(clamp_value=CLAMP),
        dict(bias=True),
        True,
        True,
    ),
    "weighted_bias_swiglu_impl-fp32-weights": (
        lambda h, b, w: fastglu.weighted_bias_swiglu_impl(h, None, w),
        _ref(),
        dict(router=True),
        False,
        True,
    ),
    "bias_geglu_impl": (
        lambda h, b, w: fastglu.bias_geglu_impl(h, b),
        _ref(activation="gelu_tanh"),
        dict(bias=True),
        True,
        True,
    ),
    "weighted_bias_quick_geglu_impl-bias-weights-offset-clamp": (
        lambda h, b, w: fastglu.weighted_bias_quick_geglu_impl(
            h, b, w, linear_offset=1.0, clamp_value=CLAMP
        ),
        _ref(activation="quick_gelu", glu_linear_offset=1.0, clamp_value=CLAMP),
        dict(bias=True, router=True),
        False,
        True,
    ),
    "glu-interleaved": (
        lambda h, b, w: fastglu.glu(h, interleaved=True, bias=b),
        _ref(interleaved=True),
        dict(bias=True),
        True,
        True,
    ),
    "silu_mul-multipliers": (
        lambda h, b, w: fastglu.silu_mul(h[0], h[1], gate_multiplier=0.8, down_multiplier=1.25),
        _ref(gate_multiplier=0.8, down_multiplier=1.25),
        dict(two=True),
        True,
        True,
    ),
    # beyond the plain options: compiled without a graph break too
    "glu_mul-gelu_tanh-bias-weights": (
        lambda h, b, w: fastglu.glu_mul(h[0], h[1], "gelu_tanh", bias=b, weights=w),
        _ref(activation="gelu_tanh"),
        dict(two=True, bias=True, router=True),
        False,
        True,
    ),
    "glu-in_place-ignored": (
        lambda h, b, w: fastglu.glu(h, "quick_gelu", bias=b, in_place=True),
        _ref(activation="quick_gelu"),
        dict(bias=True),
        True,
        True,
    ),
    "bias_swiglu_impl-fp8_input_store": (
        lambda h, b, w: fastglu.bias_swiglu_impl(h, b, fp8_input_store=True),
        None,
        dict(bias=True),
        True,
        False,
    ),
    "weighted_bias_quick_geglu_impl-fp8-blockwise": (
        lambda h, b, w: fastglu.weighted_bias_quick_geglu_impl(
            h, b, w, fp8_input_store="blockwise", clamp_value=CLAMP
        ),
        None,
        dict(bias=True, router=True),
        False,
        False,
    ),
    "weighted_bias_quick_geglu_impl-fp8-per_row": (
        lambda h, b, w: fastglu.weighted_bias_quick_geglu_impl(
            h, b, w, fp8_input_store="per_row", clamp_value=CLAMP
        ),
        None,
        dict(bias=True, router=True),
        False,
        False,
    ),
    "silu_mul-two-tensor-fp8-per_tensor": (
        lambda h, b, w: fastglu.glu_mul(h[0], h[1], fp8_input_store="per_tensor"),
        None,
        dict(two=True),
        True,
        False,
    ),
}
REQUIRED = list(CASES)[:6]  # the six of the task; the rest cover in_place and the fp8 store


def run_block(model, x, probe):
    """Forward and backward of ``(model(x) * probe).sum()``: (output, [grads of every parameter, x])."""
    for p in model.parameters():
        p.grad = None
    x = x.detach().requires_grad_()
    out = model(x)
    (out.float() * probe).sum().backward()
    return out.detach(), [p.grad for p in model.parameters()] + [x.grad]


def make_block(case, dtype, device, hidden=32, F=48, seed=0):
    act, ref, opts, three_d, _ = CASES[case]
    torch.manual_seed(seed)
    model = Block(hidden, F, act, **opts)
    model.to(device=device, dtype=dtype)
    if model.router is not None:
        model.router.float()  # the router (and the probs) stay float32 on a bf16 block
    shape = (5, 3, hidden) if three_d else (13, hidden)
    x = randn(*shape, dtype=dtype, device=device, scale=1.0)
    probe = torch.randn(*shape, device=device)
    return model, ref, x, probe


def compile_block(model, backend, dynamic=False):
    torch._dynamo.reset()
    counters.clear()
    return torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic)


def assert_no_graph_break():
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1


def assert_close(got, want, tol, same_dtype=True):
    assert rel_err(got[0], want[0]) <= tol, rel_err(got[0], want[0])
    assert len(got[1]) == len(want[1])
    for i, (g, w) in enumerate(zip(got[1], want[1])):
        assert g is not None and w is not None, i
        assert g.shape == w.shape and (g.dtype == w.dtype or not same_dtype), (
            i,
            g.shape,
            w.shape,
            g.dtype,
            w.dtype,
        )
        assert rel_err(g, w) <= tol, (i, rel_err(g, w))


# ---- the compiled blocks ------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("case", list(CASES))
def test_compiled_variant_block_matches_eager(case, backend, device):
    """fullgraph=True, zero graph breaks, one graph; output and every gradient (x, fc1/fc2 or
    gate/up projections, the bias, the router through the probs) as eager. The weighted cases run
    a bf16 block with float32 probs (Megatron's MoE), the others float32 on CPU, bf16 on CUDA."""
    weighted = CASES[case][2].get("router", False)
    dtype = torch.bfloat16 if (device == "cuda" or weighted) else torch.float32
    model, _, x, probe = make_block(case, dtype, device)
    compiled = compile_block(model, backend)
    got = run_block(compiled, x, probe)
    assert_no_graph_break()
    want = run_block(model, x, probe)
    assert_close(got, want, TOL[dtype])
    # a second call with new data runs the same graph
    x2, probe2 = torch.randn_like(x), torch.randn_like(probe)
    assert_close(run_block(compiled, x2, probe2), run_block(model, x2, probe2), TOL[dtype])
    assert counters["stats"]["unique_graphs"] == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][4]])
def test_eager_variant_block_against_float64(case, dtype, device):
    """What the compiled blocks are compared with is itself right: the eager block against the
    float64 block (same parameters, the activation written with torch ops)."""
    model, ref, x, probe = make_block(case, dtype, device)
    act, _, opts, _, _ = CASES[case]
    ref_model = Block(32, 48, ref, **opts).to(device=device, dtype=torch.float64)
    ref_model.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    got = run_block(model, x, probe)
    want = run_block(ref_model, x.double(), probe.double())
    assert_close(got, want, 10 * TOL[dtype], same_dtype=False)


@pytest.mark.parametrize("case", list(CASES))
def test_explain_counts_no_graph_break(case):
    model, _, x, _ = make_block(case, torch.float32, "cpu")
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_compiled_graphs_call_the_glu_ops():
    """The dynamo, forward and backward graphs contain fastglu::glu_fwd / glu_bwd (not a trace of
    the kernels' Python wrapper, which would graph-break on data_ptr)."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs = {"dynamo": [], "forward": [], "backward": []}

    def record(name):
        def compiler(gm, example_inputs):
            graphs[name].append(
                [(str(n.target), n.args) for n in gm.graph.nodes if n.op == "call_function"]
            )
            return make_boxed_func(gm.forward)

        return compiler

    def backend(gm, example_inputs):
        graphs["dynamo"].append(
            [(str(n.target), n.args) for n in gm.graph.nodes if n.op == "call_function"]
        )
        return aot_module_simplified(
            gm, example_inputs, fw_compiler=record("forward"), bw_compiler=record("backward")
        )

    case = "weighted_bias_quick_geglu_impl-bias-weights-offset-clamp"
    model, _, x, probe = make_block(case, torch.float32, "cpu")
    torch._dynamo.reset()
    run_block(torch.compile(model, backend=backend, fullgraph=True), x, probe)
    assert any("fastglu.glu_fwd" in t for t, _ in graphs["dynamo"][0])
    fwd = [a for t, a in graphs["forward"][0] if t == "fastglu.glu_fwd.default"]
    bwd = [a for t, a in graphs["backward"][0] if t == "fastglu.glu_bwd.default"]
    assert len(fwd) == 1 and len(bwd) == 1
    # the scalars: quick_gelu, split layout, the clamp, the offset, multipliers 1; dbias and dweights wanted
    assert tuple(fwd[0][4:]) == (ACT["quick_gelu"], SPLIT, CLAMP, 1.0, 1.0, 1.0)
    assert tuple(bwd[0][6:]) == (ACT["quick_gelu"], SPLIT, CLAMP, 1.0, 1.0, 1.0, True, True)


def test_dynamic_shapes_compile_once():
    """dynamic=True: the fake implementations handle a symbolic token count, also in the
    weights' per-token shape check (one graph for many token counts)."""
    case = "weighted_bias_quick_geglu_impl-bias-weights-offset-clamp"
    model, _, _, _ = make_block(case, torch.float32, "cpu")
    compiled = compile_block(model, "aot_eager", dynamic=True)
    for tokens in (3, 7, 257):
        x, probe = randn(tokens, 32, scale=1.0), torch.randn(tokens, 32)
        assert_close(run_block(compiled, x, probe), run_block(model, x, probe), 1e-5)
    assert_no_graph_break()


def test_torch_export_contains_the_glu_op():
    case = "weighted_bias_quick_geglu_impl-bias-weights-offset-clamp"
    model, _, x, _ = make_block(case, torch.float32, "cpu")
    exported = torch.export.export(model, (x,))
    targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    assert "fastglu.glu_fwd.default" in targets
    assert torch.equal(exported.module()(x), model(x))


def test_cpu_offload_input_falls_back_to_eager_with_one_graph_break():
    """cpu_offload_input=True is the documented fallback: the eager GLUFunction behind
    torch.compiler.disable (its activation_offloading marks are for Megatron's eager hooks):
    fullgraph=False gives a graph break and eager's numbers; fullgraph=True refuses to compile."""
    torch.manual_seed(0)

    def act(h, b, w):
        return fastglu.bias_swiglu_impl(h, b, cpu_offload_input=True)

    model = Block(32, 48, act, bias=True)
    x, probe = randn(5, 3, 32, scale=1.0), torch.randn(5, 3, 32)
    torch._dynamo.reset()
    counters.clear()
    got = run_block(torch.compile(model, backend="aot_eager"), x, probe)
    assert sum(counters["graph_break"].values()) >= 1
    assert_close(got, run_block(model, x, probe), 1e-5)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="(?i)disable|skip|graph break"):
        run_block(torch.compile(model, backend="aot_eager", fullgraph=True), x, probe)


def test_compiled_errors_name_the_tensor():
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"bias has shape \(10,\)"):
        torch.compile(
            lambda h, b: fastglu.bias_geglu_impl(h, b), backend="aot_eager", fullgraph=True
        )(torch.randn(4, 16), torch.randn(10))
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"weights has shape \(5, 1\)"):
        torch.compile(
            lambda h, w: fastglu.weighted_bias_swiglu_impl(h, None, w),
            backend="aot_eager",
            fullgraph=True,
        )(torch.randn(4, 16), torch.rand(5, 1))


@pytest.mark.parametrize("device", DEVICES)
def test_eager_calls_keep_the_autograd_function(device):
    """Outside torch.compile the public functions never go through the dispatcher ops (host time):
    the eager path is GLUFunction, as before the ops existed. The dispatcher's calls are counted by
    the profiler (a Python dispatch mode would itself send the calls to the ops)."""
    x = randn(4, 16, device=device).requires_grad_()
    b = randn(16, device=device)
    w = torch.rand(4, 1, device=device)
    g, u = randn(4, 8, device=device), randn(4, 8, device=device)
    with torch.autograd.profiler.profile() as prof:
        outs = [
            fastglu.glu(x, "gelu_tanh", bias=b),
            fastglu.glu_mul(g, u),
            fastglu.silu_mul(g, u),
            fastglu.bias_swiglu_impl(x, b),
            fastglu.weighted_bias_swiglu_impl(x, None, w),
            fastglu.bias_geglu_impl(x, b),
            fastglu.weighted_bias_quick_geglu_impl(x, b, w),
        ]
    calls = [e.name for e in prof.function_events]
    assert not any(c.startswith("fastglu::") for c in calls), calls
    assert type(outs[0].grad_fn).__name__ == "GLUFunctionBackward"


# ---- the ops themselves -------------------------------------------------------------------------


def op_case(kind, dtype, device):
    """(forward args, float64 reference options) of one op call: fresh random tensors."""

    def r(*s):
        return randn(*s, dtype=dtype, device=device)

    def scalars(act="silu", layout=SPLIT, clamp=0.0, off=0.0, mg=1.0, md=1.0):
        return ACT[act], layout, clamp, off, mg, md

    if kind == "2d-plain":
        return (r(7, 2 * 24), None, None, None, *scalars()), {}
    if kind == "3d-bias-fp32-weights":
        return (
            (
                r(3, 5, 2 * 40),
                None,
                r(80),
                torch.rand(3, 5, 1, device=device),
                *scalars("gelu_tanh"),
            ),
            dict(activation="gelu_tanh"),
        )
    if kind == "2d-weights-[T]":
        return (
            (
                r(9, 2 * 16),
                None,
                None,
                torch.rand(9, device=device).to(dtype),
                *scalars("quick_gelu"),
            ),
            dict(activation="quick_gelu"),
        )
    if kind == "two-tensor-bias-weights-multipliers":
        return (
            (r(6, 24), r(6, 24), r(48), torch.rand(6, 1, device=device), *scalars(mg=0.5, md=2.0)),
            dict(gate_multiplier=0.5, down_multiplier=2.0),
        )
    if kind == "interleaved-bias-clamp-offset":
        return (
            (r(8, 2 * 12), None, r(24), None, *scalars("quick_gelu", INTERLEAVED, 1.5, 1.0)),
            dict(activation="quick_gelu", interleaved=True, clamp_value=1.5, glu_linear_offset=1.0),
        )
    if kind == "column-slice-3d-permuted":
        x = r(9, 2 * 16 + 6)[:, 3 : 3 + 2 * 16]
        return (x, None, r(32), None, *scalars(clamp=2.0)), dict(clamp_value=2.0)
    if kind == "one-element":
        return (r(1, 2), None, r(2), torch.rand(1, 1, device=device), *scalars()), {}
    raise KeyError(kind)


OP_KINDS = [
    "2d-plain",
    "3d-bias-fp32-weights",
    "2d-weights-[T]",
    "two-tensor-bias-weights-multipliers",
    "interleaved-bias-clamp-offset",
    "column-slice-3d-permuted",
    "one-element",
]


def _ref_opts(args):
    x, up, bias, weights, act, layout, clamp, off, mg, md = args
    return dict(
        activation={v: k for k, v in ACT.items()}[act],
        interleaved=layout == INTERLEAVED,
        clamp_value=clamp,
        glu_linear_offset=off,
        gate_multiplier=mg,
        down_multiplier=md,
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("kind", OP_KINDS)
def test_ops_against_float64(kind, dtype, device):
    """The ops' outputs and the registered autograd's gradients (input, up, bias, weights) against
    autograd through the float64 formula."""
    args, _ = op_case(kind, dtype, device)
    x, up, bias, weights = args[:4]
    leaves = [t.detach().requires_grad_() if t is not None else None for t in args[:4]]
    y = torch.ops.fastglu.glu_fwd(*leaves, *args[4:])
    assert y.dtype == dtype and y.is_contiguous()
    refs = [t.detach().double().requires_grad_() if t is not None else None for t in args[:4]]
    y64 = ref_glu(refs[0], refs[1], bias=refs[2], weights=refs[3], **_ref_opts(args))
    assert y.shape == y64.shape and rel_err(y, y64) <= TOL[dtype]
    dy = randn(*y.shape, dtype=dtype, device=device)
    y.backward(dy)
    y64.backward(dy.double())
    for got, want in zip(leaves, refs):
        if got is None:
            continue
        assert got.grad.shape == got.shape and got.grad.dtype == got.dtype
        assert rel_err(got.grad, want.grad) <= TOL[dtype] * (2 if got.grad.dim() <= 1 else 1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("kind", OP_KINDS)
def test_opcheck(kind, dtype, device):
    """torch.library.opcheck on both ops: schema, autograd registration, fake tensors (the fake
    implementation's shapes, strides and dtypes against the real kernels) and AOT dispatch with
    dynamic shapes."""
    args, _ = op_case(kind, dtype, device)
    grad_args = (
        tuple(t.detach().requires_grad_() if t is not None else None for t in args[:4]) + args[4:]
    )
    torch.library.opcheck(library.glu_fwd, grad_args)
    torch.library.opcheck(library.glu_fwd, args)
    x, up, bias, weights = args[:4]
    y = torch.ops.fastglu.glu_fwd(*args)
    dy = randn(*y.shape, dtype=dtype, device=device)
    for want_db in {False, bias is not None}:
        for want_dw in {False, weights is not None}:
            torch.library.opcheck(
                library.glu_bwd, (dy, x, up, bias, weights, None, *args[4:], want_db, want_dw)
            )
    dy_t = randn(*dy.shape[::-1], dtype=dtype, device=device).permute(*range(dy.dim() - 1, -1, -1))
    torch.library.opcheck(
        library.glu_bwd,
        (dy_t, x, up, bias, weights, None, *args[4:], bias is not None, weights is not None),
    )
    # glu_bwd with inputs requiring grad: all but the double backward AOT dispatch would run (it
    # raises by design, test_double_backward_raises)
    torch.library.opcheck(
        library.glu_bwd,
        (
            dy.requires_grad_(),
            *grad_args[:4],
            None,
            *args[4:],
            bias is not None,
            weights is not None,
        ),
        test_utils=("test_schema", "test_autograd_registration", "test_faketensor"),
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", ["none", "per_row", "per_tensor", "blockwise"])
@pytest.mark.parametrize("two", [False, True], ids=["one-tensor", "two-tensor"])
def test_opcheck_bwd_fp8_input(two, scale, device):
    """glu_bwd on the saved input as float8_e4m3fn with input_scale_inv (fp8_input_store): opcheck
    and the decoded gradient against the float64 formula on the decoded values."""
    T, F = 11, 200  # blockwise: gate's blocks [0, 128), [128, 200), then up's
    x = randn(T, 2 * F, dtype=torch.bfloat16, device=device)
    s = {
        "none": None,
        "per_row": torch.rand(T, device=device) + 0.5,
        "per_tensor": torch.rand(1, device=device) + 0.5,
        "blockwise": torch.rand(T, 4, device=device) + 0.5,
    }[scale]
    x8 = x.to(torch.float8_e4m3fn)
    g8, u8 = (x8[:, :F], x8[:, F:]) if two else (x8, None)
    bias, w = randn(2 * F, dtype=torch.bfloat16, device=device), torch.rand(T, 1, device=device)
    dy = randn(T, F, dtype=torch.bfloat16, device=device)
    scalars = (ACT["silu"], SPLIT, 1.0, 0.5, 1.0, 1.0)
    args = (dy, g8, u8, bias, w, s, *scalars, True, True)
    # test_schema's mutation check does arithmetic that float8 tensors lack in torch (NotImplementedError);
    # the other three run, and the fp8 input's bytes are checked unchanged here instead
    x8_bytes = x8.view(torch.uint8).clone()
    torch.library.opcheck(
        library.glu_bwd,
        args,
        test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"),
    )
    dx, d_up, dbias, dw = torch.ops.fastglu.glu_bwd(*args)
    if scale == "blockwise":  # column j of gate: block j // 128; of up: 2 + j // 128
        cols = torch.arange(2 * F, device=device)
        sd = s.double()[:, torch.where(cols < F, cols // 128, 2 + (cols - F) // 128)]
    else:
        sd = 1.0 if s is None else (s.double().unsqueeze(-1) if scale == "per_row" else s.double())
    xd = x8.double() * sd
    xr = xd.clone().requires_grad_()
    br, wr = bias.double().requires_grad_(), w.double().requires_grad_()
    ref_glu(xr, bias=br, weights=wr, clamp_value=1.0, glu_linear_offset=0.5).backward(dy.double())
    assert torch.equal(x8.view(torch.uint8), x8_bytes)
    got_dx = torch.cat((dx, d_up), -1) if two else dx
    assert dx.dtype == torch.bfloat16 and (d_up is not None) == two and dw.dtype == torch.float32
    assert (
        rel_err(got_dx, xr.grad) <= 1e-2
        and rel_err(dbias, br.grad) <= 1e-2
        and rel_err(dw, wr.grad) <= 1e-2
    )


@pytest.mark.parametrize("lead", [(6,), (2, 3), (0,), (2, 0)])
@pytest.mark.parametrize("wshape", ["[T,1]", "[T]", "lead", "lead+1"])
def test_fake_and_meta_outputs_match_the_kernels(lead, wshape):
    """Shapes, strides and dtypes of every output, real vs FakeTensor vs meta: y [..., F] in the
    input's dtype; d_input of the input's shape; dbias [2F]; dweights in the weights' dtype and
    shape (float32 weights on a bf16 input here); zero tokens included."""
    import math

    from torch._subclasses.fake_tensor import FakeTensorMode

    F = 5
    T = math.prod(lead)
    wsh = {"[T,1]": (T, 1), "[T]": (T,), "lead": lead, "lead+1": lead + (1,)}[wshape]
    real = [
        torch.randn(*lead, 2 * F).bfloat16(),
        None,
        torch.randn(2 * F).bfloat16(),
        torch.rand(wsh),
    ]
    scalars = (ACT["gelu_tanh"], SPLIT, 0.0, 0.0, 1.0, 1.0)
    y = torch.ops.fastglu.glu_fwd(*real, *scalars)
    dy = torch.randn(y.shape).bfloat16()
    bwd_real = torch.ops.fastglu.glu_bwd(dy, *real, None, *scalars, True, True)
    want = [y, *bwd_real]
    assert bwd_real[1] is None and bwd_real[2].shape == (2 * F,) and bwd_real[3].shape == wsh
    assert bwd_real[3].dtype == torch.float32 and bwd_real[2].dtype == torch.bfloat16

    def outputs(conv):
        t = [None if a is None else conv(a) for a in real]
        return [
            torch.ops.fastglu.glu_fwd(*t, *scalars),
            *torch.ops.fastglu.glu_bwd(conv(dy), *t, None, *scalars, True, True),
        ]

    with FakeTensorMode() as mode:
        fake = outputs(mode.from_tensor)
    meta = outputs(lambda a: torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta"))
    for got in (fake, meta):
        for g, w in zip(got, want):
            if w is None:
                assert g is None
            else:
                assert (g.shape, g.stride(), g.dtype) == (w.shape, w.stride(), w.dtype)


def test_fake_implementation_rejects_what_the_kernels_reject():
    m = lambda *s, dtype=torch.float32: torch.empty(*s, dtype=dtype, device="meta")  # noqa: E731
    sc = (0, SPLIT, 0.0, 0.0, 1.0, 1.0)
    for _device, make in (
        ("meta", m),
        ("cpu", lambda *s, dtype=torch.float32: torch.randn(*s).to(dtype)),
    ):
        with pytest.raises(ValueError, match="glu_fwd: input's last dimension .* even"):
            torch.ops.fastglu.glu_fwd(make(4, 7), None, None, None, *sc)
        with pytest.raises(ValueError, match=r"glu_fwd: bias has shape \(6,\)"):
            torch.ops.fastglu.glu_fwd(make(4, 8), None, make(6), None, *sc)
        with pytest.raises(TypeError, match="glu_fwd: bias has dtype torch.float16"):
            torch.ops.fastglu.glu_fwd(make(4, 8), None, make(8, dtype=torch.float16), None, *sc)
        with pytest.raises(ValueError, match=r"glu_fwd: weights has shape \(3, 1\)"):
            torch.ops.fastglu.glu_fwd(make(4, 8), None, None, make(3, 1), *sc)
        with pytest.raises(TypeError, match="glu_fwd: input has dtype torch.float64"):
            torch.ops.fastglu.glu_fwd(make(4, 8, dtype=torch.float64), None, None, None, *sc)
        with pytest.raises(ValueError, match=r"glu_fwd: up has shape \(4, 3\)"):
            torch.ops.fastglu.glu_fwd(make(4, 4), make(4, 3), None, None, *sc)
        with pytest.raises(ValueError, match="interleaved=True takes one"):
            torch.ops.fastglu.glu_fwd(
                make(4, 4), make(4, 4), None, None, 0, INTERLEAVED, 0.0, 0.0, 1.0, 1.0
            )
        with pytest.raises(ValueError, match="activation code 7"):
            torch.ops.fastglu.glu_fwd(make(4, 8), None, None, None, 7, SPLIT, 0.0, 0.0, 1.0, 1.0)
        with pytest.raises(ValueError, match="gate_multiplier must be finite"):
            torch.ops.fastglu.glu_fwd(
                make(4, 8), None, None, None, 0, SPLIT, 0.0, 0.0, float("inf"), 1.0
            )
        with pytest.raises(ValueError, match=r"glu_bwd: dy has shape \(4, 3\)"):
            torch.ops.fastglu.glu_bwd(
                make(4, 3), make(4, 8), None, None, None, None, *sc, False, False
            )
        with pytest.raises(TypeError, match="glu_bwd: dy has dtype torch.float16"):
            torch.ops.fastglu.glu_bwd(
                make(4, 4, dtype=torch.float16),
                make(4, 8),
                None,
                None,
                None,
                None,
                *sc,
                False,
                False,
            )
        with pytest.raises(ValueError, match="want_dbias=True needs a bias"):
            torch.ops.fastglu.glu_bwd(
                make(4, 4), make(4, 8), None, None, None, None, *sc, True, False
            )
        with pytest.raises(
            ValueError, match="input_scale_inv is given but the saved input has dtype"
        ):
            torch.ops.fastglu.glu_bwd(
                make(4, 4), make(4, 8), None, None, None, make(1), *sc, False, False
            )


def test_double_backward_raises():
    x = torch.randn(3, 8, requires_grad=True)
    b = torch.randn(8, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(
            torch.ops.fastglu.glu_fwd(x, None, b, None, 0, SPLIT, 0.0, 0.0, 1.0, 1.0).sum(),
            x,
            create_graph=True,
        )
    y = torch.ops.fastglu.glu_fwd(x, None, b, None, 0, SPLIT, 0.0, 0.0, 1.0, 1.0)
    (gx,) = torch.autograd.grad(y.sum(), x)  # a plain backward still works
    assert gx.shape == x.shape


def test_the_backward_computes_only_the_gradients_asked_for():
    """The registered autograd asks glu_bwd for dbias / dweights only when bias / weights require
    grad (ctx.needs_input_grad): the reductions cost a second kernel on CUDA."""
    seen = []

    class Spy(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if str(func) == "fastglu.glu_bwd.default":
                seen.append(tuple(args[-2:]))
            return func(*args, **(kwargs or {}))

    x = torch.randn(5, 8, requires_grad=True)
    for b_grad, w_grad in ((False, False), (True, False), (False, True), (True, True)):
        b = torch.randn(8, requires_grad=b_grad)
        w = torch.rand(5, 1, requires_grad=w_grad)
        with Spy():
            torch.ops.fastglu.glu_fwd(x, None, b, w, 0, SPLIT, 0.0, 0.0, 1.0, 1.0).sum().backward()
        assert seen.pop() == (b_grad, w_grad)
        assert (b.grad is not None) == b_grad and (w.grad is not None) == w_grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("two", [False, True], ids=["one-tensor", "gate-up"])
def test_opcheck_fp8_store_blockwise(two, device):
    """The blockwise store's op: its fake against its kernel (shapes, dtypes, devices), and up8
    empty where there is no up."""
    x = randn(3, 5, 2 * 200, dtype=torch.bfloat16, device=device)
    args = (*x.chunk(2, -1), *(ACT["silu"], SPLIT, 3.0, 0.0, 1.0, 1.0)) if two else None
    if not two:
        args = (x, None, ACT["silu"], SPLIT, 3.0, 0.0, 1.0, 1.0)
    torch.library.opcheck(
        torch.ops.fastglu.fp8_store_blockwise, args, test_utils=("test_faketensor",)
    )
    x8, up8, s = torch.ops.fastglu.fp8_store_blockwise(*args)
    assert s.shape == (15, 4) and up8.numel() == (15 * 200 if two else 0)


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_store_blockwise_outputs_have_no_gradient(device):
    """Called as the raw op on an input that requires grad, the copy and its scales are not
    differentiable: a backward through them raises instead of leaving x's gradient None, and in
    no_grad mode nothing is tracked."""
    x = randn(4, 2 * 200, dtype=torch.bfloat16, device=device).requires_grad_()
    p = (ACT["silu"], SPLIT, 0.0, 0.0, 1.0, 1.0)
    x8, _, s = torch.ops.fastglu.fp8_store_blockwise(x, None, *p)
    with pytest.raises(RuntimeError, match="no gradient"):
        s.sum().backward()
    with pytest.raises(RuntimeError, match="no gradient"):
        x8.float().sum().backward()
    assert x.grad is None
    with torch.no_grad():
        assert not any(t.requires_grad for t in torch.ops.fastglu.fp8_store_blockwise(x, None, *p))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("clamp", [None, 3.0], ids=["no-clamp", "clamp"])
@pytest.mark.parametrize(
    "layout, lead",
    [
        ("split", (3, 5)),
        ("interleaved", (3, 5)),
        ("two", (3, 5)),
        ("split", (1,)),
    ],
    ids=["split", "interleaved", "two", "split-one-row"],
)
def test_compiled_blockwise_store_is_the_eager_one(layout, lead, clamp, device):
    """fp8_input_store="blockwise" under inductor (fullgraph) with F not a multiple of 128: the saved
    copy, its scales and the gradients bit for bit the eager ones. (Inductor's C++ backend in torch
    2.13 miscompiles the spreading of block scales over such columns, ``x *
    s.repeat_interleave(128, -1)[..., :W]`` and, for a single row, every other form tried: the
    compiled path runs the store as one opaque op, torch.ops.fastglu.fp8_store_blockwise.)"""
    torch._dynamo.reset()  # a fresh compile per case (no recompile limit, no dynamic shapes)
    F = 200  # gate's blocks [0, 128), [128, 200), then up's
    x = (torch.randn(*lead, 2 * F, device=device) * 3).to(torch.bfloat16)
    dy = torch.randn(*lead, F, device=device).to(torch.bfloat16)
    il = layout == "interleaved"

    def call(t):
        if layout == "two":
            return fastglu.glu_mul(*t.chunk(2, -1), clamp_value=clamp, fp8_input_store="blockwise")
        return fastglu.glu(t, clamp_value=clamp, interleaved=il, fp8_input_store="blockwise")

    def store(t):  # as library.GLUSavedFp8 calls it
        p = tuple(fastglu.ops.glu_params("silu", clamp_value=clamp, interleaved=il))
        if layout == "two":
            return torch.ops.fastglu.fp8_store_blockwise(*t.chunk(2, -1), *p)
        return torch.ops.fastglu.fp8_store_blockwise(t, None, *p)

    want = store(x)
    got = torch.compile(store, backend="inductor", fullgraph=True)(x)
    for w, g in zip(want, got):
        assert w.shape == g.shape and torch.equal(w.view(torch.uint8), g.view(torch.uint8))
    grads = []
    for fn in (call, torch.compile(call, backend="inductor", fullgraph=True)):
        xi = x.clone().requires_grad_()
        y = fn(xi)
        y.backward(dy)
        grads.append((y, xi.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
    assert torch.isfinite(grads[1][1]).all()
