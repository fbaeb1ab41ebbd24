"""fastglu under torch.compile: the torch.library ops (``fastglu/library.py``) and a Megatron-style
MLP block (fc1 Linear -> fastglu.swiglu -> fc2 Linear) compiled with ``fullgraph=True``.

CPU in CI (inductor's C++ backend and aot_eager), CUDA on a GPU machine. Every check compares with
eager mode on the same weights and fresh random inputs, or with a float64 reference.
"""

import pytest
import torch
from swiglu_reference import ref_bwd, ref_fwd, rel_err
from torch._dynamo.utils import counters

import fastglu
from fastglu import library

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]
TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}

pytestmark = pytest.mark.skipif(
    not library.SUPPORTED, reason="torch.library's Python registration API is missing"
)


def randn(*shape, dtype=torch.float32, device="cpu"):
    return (torch.randn(*shape, dtype=torch.float32, device=device) * 2).to(dtype)


class MLP(torch.nn.Module):
    """Megatron-Core's MLP with gated_linear_unit (bias-free): fc1 [hidden -> 2F], SwiGLU, fc2 [F -> hidden]."""

    def __init__(self, hidden, ffn_hidden_size, activation=fastglu.swiglu):
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, 2 * ffn_hidden_size, bias=False)
        self.fc2 = torch.nn.Linear(ffn_hidden_size, hidden, bias=False)
        self.activation = activation

    def forward(self, x):
        return self.fc2(self.activation(self.fc1(x)))


def run_block(model, x, probe):
    """Forward and backward of ``(model(x) * probe).sum()``: (output, loss, [grads of params..., x])."""
    for p in model.parameters():
        p.grad = None
    x = x.detach().requires_grad_()
    out = model(x)
    loss = (out.float() * probe).sum()
    loss.backward()
    return out.detach(), loss.detach(), [p.grad for p in model.parameters()] + [x.grad]


# ---- the ops themselves -------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("shape", [(257, 2 * 1408), (5, 3, 2 * 768), (1, 2), (4, 2 * 3420)])
def test_ops_against_float64(shape, dtype, device):
    x = randn(*shape, dtype=dtype, device=device)
    dy = randn(*shape[:-1], shape[-1] // 2, dtype=dtype, device=device)
    y = torch.ops.fastglu.swiglu_fwd(x)
    dx = torch.ops.fastglu.swiglu_bwd(dy, x)
    assert y.shape == shape[:-1] + (shape[-1] // 2,) and y.dtype == dtype and y.is_contiguous()
    assert dx.shape == shape and dx.dtype == dtype and dx.is_contiguous()
    assert rel_err(y, ref_fwd(x)) <= TOL[dtype]
    assert rel_err(dx, ref_bwd(dy, x)) <= TOL[dtype]
    xg = x.clone().requires_grad_()
    torch.ops.fastglu.swiglu_fwd(xg).backward(dy)  # the registered autograd
    assert rel_err(xg.grad, ref_bwd(dy, x)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("kind", ["2d", "3d", "one-element", "column-slice", "3d-permuted"])
def test_opcheck(kind, dtype):
    """torch.library.opcheck: schema, autograd registration, fake tensor (shapes, strides, dtypes
    of the fake implementation against the real kernels) and AOT dispatch with dynamic shapes."""
    x = {
        "2d": lambda: randn(7, 2 * 24, dtype=dtype),
        "3d": lambda: randn(3, 5, 2 * 40, dtype=dtype),
        "one-element": lambda: randn(1, 2, dtype=dtype),
        "column-slice": lambda: randn(9, 2 * 16 + 6, dtype=dtype)[:, 3 : 3 + 2 * 16],
        "3d-permuted": lambda: randn(5, 3, 2 * 8, dtype=dtype).transpose(0, 1),
    }[kind]()
    dy = randn(*x.shape[:-1], x.shape[-1] // 2, dtype=dtype)
    torch.library.opcheck(library.swiglu_fwd, (x.requires_grad_(),))
    torch.library.opcheck(library.swiglu_fwd, (x.detach(),))
    torch.library.opcheck(library.swiglu_bwd, (dy, x.detach()))
    dims = list(range(dy.dim()))[::-1]
    dy_transposed = randn(*dy.shape[::-1], dtype=dtype).permute(*dims)
    dy_expanded = randn(*[1] * (dy.dim() - 1), dy.shape[-1], dtype=dtype).expand(dy.shape)
    torch.library.opcheck(library.swiglu_bwd, (dy_transposed, x.detach()))
    torch.library.opcheck(library.swiglu_bwd, (dy_expanded, x.detach()))
    # swiglu_bwd with inputs requiring grad: everything but the double backward that AOT dispatch
    # tests (it raises by design, test_double_backward_through_the_ops_raises).
    torch.library.opcheck(
        library.swiglu_bwd,
        (dy.requires_grad_(), x.detach().requires_grad_()),
        test_utils=("test_schema", "test_autograd_registration", "test_faketensor"),
    )


@pytest.mark.parametrize("shape", [(6, 2 * 5), (2, 3, 2 * 7), (0, 8), (2, 0, 8)])
def test_fake_and_meta_shapes_strides_dtypes(shape):
    from torch._subclasses.fake_tensor import FakeTensorMode

    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        real = torch.randn(shape).to(dtype)
        y_real = torch.ops.fastglu.swiglu_fwd(real)
        dx_real = torch.ops.fastglu.swiglu_bwd(torch.randn(y_real.shape).to(dtype), real)
        meta = torch.empty(shape, dtype=dtype, device="meta")
        with FakeTensorMode() as mode:
            fake = mode.from_tensor(real)
            outs = [
                (torch.ops.fastglu.swiglu_fwd(fake), y_real),
                (
                    torch.ops.fastglu.swiglu_bwd(torch.empty(y_real.shape, dtype=dtype), fake),
                    dx_real,
                ),
            ]
        outs += [
            (torch.ops.fastglu.swiglu_fwd(meta), y_real),
            (
                torch.ops.fastglu.swiglu_bwd(
                    torch.empty(y_real.shape, dtype=dtype, device="meta"), meta
                ),
                dx_real,
            ),
        ]
        for got, want in outs:
            assert (got.shape, got.stride(), got.dtype) == (want.shape, want.stride(), want.dtype)


def test_public_functions_under_a_fake_tensor_mode_take_the_ops():
    """Under a Python dispatch mode (here FakeTensorMode over real inputs, as tracing tools open
    it) the public functions go through the torch.library ops, whose fakes give the shapes; their
    lean eager paths would hand the kernels tensors without memory."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.randn(4, 16)
    calls = {
        "swiglu": lambda: fastglu.swiglu(x),
        "glu": lambda: fastglu.glu(x, activation="gelu_tanh"),
        "bias_swiglu_impl": lambda: fastglu.bias_swiglu_impl(x, torch.randn(16)),
        "mlp": lambda: fastglu.mlp(x, torch.randn(8, 16), torch.randn(16, 4)),
        "quantize_fp8": lambda: fastglu.fp8.quantize_fp8(x).data,
    }
    for name, call in calls.items():
        with FakeTensorMode(allow_non_fake_inputs=True):
            out = call()
        assert type(out).__name__ == "FakeTensor", name


def test_fake_implementation_rejects_what_the_kernels_reject():
    meta = torch.empty(4, 7, device="meta")
    with pytest.raises(ValueError, match=r"swiglu_fwd: input's last dimension .* even"):
        torch.ops.fastglu.swiglu_fwd(meta)
    with pytest.raises(ValueError, match="2D .* or 3D"):
        torch.ops.fastglu.swiglu_fwd(torch.empty(8, device="meta"))
    with pytest.raises(TypeError, match="dtype torch.float64"):
        torch.ops.fastglu.swiglu_fwd(torch.empty(4, 8, dtype=torch.float64, device="meta"))
    with pytest.raises(ValueError, match="dy has shape"):
        torch.ops.fastglu.swiglu_bwd(
            torch.empty(4, 3, device="meta"), torch.empty(4, 8, device="meta")
        )
    with pytest.raises(TypeError, match="dy has dtype"):
        torch.ops.fastglu.swiglu_bwd(
            torch.empty(4, 4, dtype=torch.float16, device="meta"), torch.empty(4, 8, device="meta")
        )
    # the real kernels, called through the op, raise the same errors as fastglu.ops
    with pytest.raises(ValueError, match="swiglu_fwd: input's last dimension"):
        torch.ops.fastglu.swiglu_fwd(torch.randn(4, 7))


def test_double_backward_through_the_ops_raises():
    x = torch.randn(3, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(torch.ops.fastglu.swiglu_fwd(x).sum(), x, create_graph=True)


def test_eager_plain_tensors_keep_the_lean_path():
    """Outside torch.compile a plain tensor never goes through the dispatcher op (host time). The
    dispatcher's calls are counted by the profiler (a Python dispatch mode would itself send the
    call to the op: every mode must see it)."""
    x = torch.randn(4, 16, requires_grad=True)
    assert type(fastglu.swiglu(x).grad_fn).__name__ == "GLUFunctionBackward"
    assert type(fastglu.swiglu(x * 1.0, in_place=True).grad_fn).__name__ == "GLUFunctionBackward"
    with torch.autograd.profiler.profile() as prof:
        fastglu.swiglu(x)
        torch.ops.fastglu.swiglu_fwd(x)
    names = [e.name for e in prof.function_events]
    assert names.count("fastglu::swiglu_fwd") == 1, names  # only the explicit op call


# ---- torch.compile of the MLP block ----------------------------------------------------------------


def compile_and_compare(model, x, probe, *, backend, dynamic=False, dtype=torch.float32):
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic)
    got = run_block(compiled, x, probe)
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert counters["stats"]["unique_graphs"] == 1
    want = run_block(model, x, probe)
    tol = TOL[dtype]
    assert rel_err(got[0], want[0]) <= tol and rel_err(got[1], want[1]) <= tol
    for g, w in zip(got[2], want[2]):
        assert g is not None and g.shape == w.shape and rel_err(g, w) <= tol
    return compiled


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("in_place", [False, True])
def test_compiled_mlp_block_matches_eager(backend, in_place, device):
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    torch.manual_seed(0)
    act = (lambda h: fastglu.swiglu(h, in_place=True)) if in_place else fastglu.swiglu
    model = MLP(64, 96, act).to(device=device, dtype=dtype)
    x = randn(5, 3, 64, dtype=dtype, device=device)
    probe = torch.randn(5, 3, 64, device=device)
    compile_and_compare(model, x, probe, backend=backend, dtype=dtype)
    # and against the float64 torch formula, through the eager block
    ref = MLP(64, 96, lambda h: ref_fwd(h).to(h.dtype)).to(device=device, dtype=torch.float64)
    ref.load_state_dict(model.state_dict())
    want = run_block(ref, x.double(), probe.double())
    got = run_block(model, x, probe)
    assert rel_err(got[0], want[0]) <= 10 * TOL[dtype]
    for g, w in zip(got[2], want[2]):
        assert rel_err(g, w) <= 10 * TOL[dtype]


def test_graph_break_count_zero_with_explain():
    torch.manual_seed(0)
    model = MLP(32, 48)
    explanation = torch._dynamo.explain(model)(randn(7, 32))
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    # the 2D [tokens, hidden] form and bias_swiglu_impl (Megatron's call) too
    explanation = torch._dynamo.explain(lambda h: fastglu.bias_swiglu_impl(h, None))(
        randn(4, 3, 2 * 48)
    )
    assert explanation.graph_break_count == 0


def test_compiled_graph_calls_the_registered_ops():
    """The FX graphs dynamo and AOTAutograd produce contain the fastglu ops (not a trace of the
    kernels' Python wrapper, which would graph-break on data_ptr)."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs = {"dynamo": [], "forward": [], "backward": []}

    def record(name):
        def compiler(gm, example_inputs):
            graphs[name].append({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
            return make_boxed_func(gm.forward)

        return compiler

    def backend(gm, example_inputs):
        graphs["dynamo"].append({str(n.target) for n in gm.graph.nodes if n.op == "call_function"})
        return aot_module_simplified(
            gm, example_inputs, fw_compiler=record("forward"), bw_compiler=record("backward")
        )

    torch._dynamo.reset()
    model = MLP(16, 24)
    x = randn(6, 16).requires_grad_()
    torch.compile(model, backend=backend, fullgraph=True)(x).sum().backward()
    assert any("fastglu.swiglu_fwd" in t for t in graphs["dynamo"][0])
    assert "fastglu.swiglu_fwd.default" in graphs["forward"][0]
    assert "fastglu.swiglu_bwd.default" in graphs["backward"][0]


def test_dynamic_shapes_compile_once():
    """dynamic=True: the fake implementation handles symbolic token counts (one graph for many)."""
    torch.manual_seed(0)
    model = MLP(16, 40)
    probe = {}
    compiled = None
    for tokens in (3, 7, 257):
        x = randn(tokens, 16)
        probe[tokens] = torch.randn(tokens, 16)
        if compiled is None:
            compiled = compile_and_compare(
                model, x, probe[tokens], backend="aot_eager", dynamic=True
            )
            continue
        got, want = run_block(compiled, x, probe[tokens]), run_block(model, x, probe[tokens])
        assert rel_err(got[0], want[0]) <= 1e-5 and all(
            rel_err(g, w) <= 1e-5 for g, w in zip(got[2], want[2])
        )
    assert counters["stats"]["unique_graphs"] == 1


def test_compiled_errors_name_the_tensor():
    torch._dynamo.reset()
    with pytest.raises(Exception, match="last dimension .* must be even"):
        torch.compile(fastglu.swiglu, backend="aot_eager", fullgraph=True)(torch.randn(4, 7))


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
def test_compiled_mlp_block_reduce_overhead_cuda():
    """mode="reduce-overhead" (inductor's CUDA graphs) around the fastglu kernels: replays match eager."""
    torch.manual_seed(0)
    model = MLP(256, 384).cuda().bfloat16()
    torch._dynamo.reset()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    for step in range(4):  # warmup, recording, replays: each with new data
        torch.compiler.cudagraph_mark_step_begin()
        x = randn(64, 256, dtype=torch.bfloat16, device="cuda")
        probe = torch.randn(64, 256, device="cuda")
        got = run_block(compiled, x, probe)
        got = (got[0].clone(), got[1].clone(), [g.clone() for g in got[2]])
        want = run_block(model, x, probe)
        assert rel_err(got[0], want[0]) <= 1e-2, step
        assert all(rel_err(g, w) <= 1e-2 for g, w in zip(got[2], want[2])), step


def test_torch_export_contains_the_op():
    torch.manual_seed(0)
    model = MLP(16, 24)
    x = randn(5, 16)
    exported = torch.export.export(model, (x,))
    targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
    assert "fastglu.swiglu_fwd.default" in targets
    assert torch.equal(exported.module()(x), model(x))


# ---- the registration helper, as a variant would use it ------------------------------------------


def _register_example_variant():
    """A variant with a scalar argument, registered through library.register_glu_ops exactly as a
    variant of glu.py would be: y = scale * silu(gate) * up (a test-only op)."""
    if hasattr(torch.ops.fastglu, "example_scaled_swiglu_fwd"):
        return
    from fastglu import ops

    def fwd(input, scale):
        return ops.swiglu_fwd(input, fn="example_scaled_swiglu_fwd").mul_(scale)

    def bwd(dy, input, scale):
        return ops.swiglu_bwd(dy, input, fn="example_scaled_swiglu_bwd").mul_(scale)

    def fwd_fake(input, scale):
        return library.glu_output_like(
            input, library.check_glu_meta(input, "example_scaled_swiglu_fwd")
        )

    def bwd_fake(dy, input, scale):
        library.check_glu_meta(input, "example_scaled_swiglu_bwd")
        return library.glu_output_like(input, input.shape[-1])

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.scale = inputs[1]

    def backward(ctx, dy):
        fastglu.ops.refuse_create_graph("example_scaled_swiglu")
        return torch.ops.fastglu.example_scaled_swiglu_bwd(
            dy, ctx.saved_tensors[0], ctx.scale
        ), None

    library.register_glu_ops(
        "example_scaled_swiglu",
        fwd_schema="(Tensor input, float scale) -> Tensor",
        bwd_schema="(Tensor dy, Tensor input, float scale) -> Tensor",
        fwd_impl=fwd,
        bwd_impl=bwd,
        fwd_fake=fwd_fake,
        bwd_fake=bwd_fake,
        setup_context=setup_context,
        backward=backward,
        dtensor_fwd=library.glu_dtensor_rule(
            "example_scaled_swiglu_fwd", input_arg=0, out_width=lambda w: w // 2
        ),
        dtensor_bwd=library.glu_dtensor_rule(
            "example_scaled_swiglu_bwd", input_arg=1, dy_arg=0, out_width=lambda w: w
        ),
    )


def test_registration_helper_serves_a_variant():
    _register_example_variant()
    op_fwd, op_bwd = (
        torch.ops.fastglu.example_scaled_swiglu_fwd.default,
        torch.ops.fastglu.example_scaled_swiglu_bwd.default,
    )
    x = randn(6, 2 * 40)
    dy = randn(6, 40)
    torch.library.opcheck(op_fwd, (x.clone().requires_grad_(), 0.5))
    torch.library.opcheck(op_bwd, (dy, x, 0.5))
    assert rel_err(op_fwd(x, 0.5), 0.5 * ref_fwd(x)) <= 1e-5
    torch._dynamo.reset()
    counters.clear()
    model = MLP(16, 24, lambda h: torch.ops.fastglu.example_scaled_swiglu_fwd(h, 3.0))
    probe = torch.randn(5, 16)
    got = run_block(torch.compile(model, backend="aot_eager", fullgraph=True), randn(5, 16), probe)
    assert sum(counters["graph_break"].values()) == 0
    ref = MLP(16, 24, lambda h: 3.0 * ref_fwd(h).to(h.dtype)).double()
    ref.load_state_dict(model.state_dict())
    x = randn(5, 16)
    got, want = run_block(model, x, probe), run_block(ref, x.double(), probe.double())
    assert rel_err(got[0], want[0]) <= 1e-5 and all(
        rel_err(g, w) <= 1e-5 for g, w in zip(got[2], want[2])
    )


# ---- the lean eager path and the torch.library op: one result, one set of errors ----------------
# Eager calls on plain tensors apply GLUFunction straight to the C binding (host time); torch.compile,
# export and opcheck use the ops. Both must give the same bits, gradients included, and refuse the
# same inputs with the same exception types, naming the same tensor.


def _host_entries(b, w):
    """(name, eager call, the same call through the op, whether b / w take part) of the host-time
    targets' entry points (bench/host_memory.py)."""
    silu = fastglu.ops.SILU
    qg = fastglu.ops.glu_params("quick_gelu", clamp_value=7.0, glu_linear_offset=1.0)
    glu_fwd = torch.ops.fastglu.glu_fwd
    return [
        ("swiglu", fastglu.swiglu, torch.ops.fastglu.swiglu_fwd, False, False),
        ("glu", fastglu.glu, lambda h: glu_fwd(h, None, None, None, *silu), False, False),
        (
            "glu gelu_tanh bias",
            lambda h: fastglu.glu(h, "gelu_tanh", bias=b),
            lambda h: glu_fwd(h, None, b, None, *fastglu.ops.glu_params("gelu_tanh")),
            True,
            False,
        ),
        (
            "bias_swiglu_impl(x, None)",
            lambda h: fastglu.bias_swiglu_impl(h, None),
            lambda h: glu_fwd(h, None, None, None, *silu),
            False,
            False,
        ),
        (
            "bias_swiglu_impl(x, bias)",
            lambda h: fastglu.bias_swiglu_impl(h, b),
            lambda h: glu_fwd(h, None, b, None, *silu),
            True,
            False,
        ),
        (
            "weighted_bias_swiglu_impl",
            lambda h: fastglu.weighted_bias_swiglu_impl(h, None, w),
            lambda h: glu_fwd(h, None, None, w, *silu),
            False,
            True,
        ),
        (
            "weighted_bias_quick_geglu_impl",
            lambda h: fastglu.weighted_bias_quick_geglu_impl(h, b, w, False, 1.0, 7.0),
            lambda h: glu_fwd(h, None, b, w, *qg),
            True,
            True,
        ),
    ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("lead", [(7,), (3, 5)], ids=["2d", "3d"])
def test_lean_eager_path_and_the_op_give_the_same_bits(lead, dtype, device):
    F = 24
    tokens = 1
    for n in lead:
        tokens *= n
    x0 = randn(*lead, 2 * F, dtype=dtype, device=device)
    b0 = randn(2 * F, dtype=dtype, device=device)
    w0 = torch.rand(tokens, 1, device=device)
    dy = randn(*lead, F, dtype=dtype, device=device)
    for entry0 in _host_entries(None, None):
        name, uses_b, uses_w = entry0[0], entry0[3], entry0[4]
        got = {}
        for path in ("eager", "op"):
            x = x0.clone().requires_grad_()
            b = b0.clone().requires_grad_()
            w = w0.clone().requires_grad_()
            entry = dict((e[0], e) for e in _host_entries(b, w))[name]
            y = entry[1 if path == "eager" else 2](x)
            kind = type(y.grad_fn).__name__
            assert (kind == "GLUFunctionBackward") == (path == "eager"), (name, path, kind)
            y.backward(dy)
            got[path] = (y.detach(), x.grad, b.grad, w.grad)
        for e, o, what in zip(got["eager"], got["op"], ("y", "dx", "dbias", "dweights")):
            assert (e is None) == (o is None), (name, what)
            if e is not None:
                assert e.dtype == o.dtype and e.shape == o.shape, (name, what)
                assert torch.equal(e, o), (name, what)
        assert (got["eager"][2] is not None) == uses_b and (got["eager"][3] is not None) == uses_w


def _error(f):
    try:
        f()
    except (TypeError, ValueError) as e:
        return type(e), str(e).split(": ", 1)[1]
    raise AssertionError("no error")


def test_lean_eager_path_and_the_op_raise_the_same_errors():
    """Inputs the kernels refuse: the eager entry points and the op raise the same exception type
    with a message naming the same tensor and the value (each names its own function)."""
    F = 8
    good_x, good_b, good_w = torch.randn(4, 2 * F), torch.randn(2 * F), torch.rand(4, 1)
    bad = {
        "odd width": (torch.randn(4, 2 * F - 1), good_b, good_w, "last dimension"),
        "int input": (torch.ones(4, 2 * F, dtype=torch.int32), good_b, good_w, "dtype"),
        "bias [F]": (good_x, torch.randn(F), good_w, "bias"),
        "bias of another dtype": (good_x, good_b.double(), good_w, "bias"),
        "weights of the wrong length": (good_x, good_b, torch.rand(5, 1), "weights"),
        "bias on meta": (good_x, torch.randn(2 * F, device="meta"), good_w, "bias"),
    }
    for case, (x, b, w, word) in bad.items():
        for name, eager, op, uses_b, uses_w in _host_entries(b, w):
            if (word == "bias" and not uses_b) or (word == "weights" and not uses_w):
                continue
            e_type, e_msg = _error(lambda: eager(x))
            o_type, o_msg = _error(lambda: op(x))
            assert e_type is o_type, (case, name, e_msg, o_msg)
            assert word in e_msg and word in o_msg, (case, name, e_msg, o_msg)


@pytest.mark.parametrize("index", range(7))
def test_compiled_host_entries_trace_the_op(index):
    """Under torch.compile(fullgraph=True) each host-time entry point is the torch.library op (no
    graph break, the op in dynamo's graph, GLUFunction nowhere), with the eager path's bits."""
    x0, b0, w0 = randn(6, 2 * 16), randn(2 * 16), torch.rand(6, 1)
    dy = randn(6, 16)
    name, eager, _, _, _ = _host_entries(None, None)[index]
    targets = []

    def backend(gm, example_inputs):
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    def run(compiled):
        x, b, w = (t.clone().requires_grad_() for t in (x0, b0, w0))
        entry = _host_entries(b, w)[index][1]
        f = torch.compile(entry, backend=backend, fullgraph=True) if compiled else entry
        y = f(x)
        y.backward(dy)
        return y.detach(), x.grad, b.grad, w.grad

    torch._dynamo.reset()
    got = run(True)
    assert any(t.startswith("fastglu.") and "_fwd" in t for t in targets), (name, targets)
    assert not any("GLUFunction" in t for t in targets), (name, targets)
    want = run(False)
    for g, e in zip(got, want):
        assert (g is None) == (e is None), name
        if g is not None:
            assert torch.equal(g, e), name


@pytest.mark.parametrize("which", ["glu", "glu_fp8", "mlp", "linear_glu", "glu_bwd_fp8_saved"])
def test_recompile_with_dynamic_leading_sizes_takes_per_token_weights(which):
    """A compiled function called again with another leading shape recompiles with symbolic
    leading sizes (automatic dynamic shapes); per-token weights in the input's leading shape
    ([3, 11, 1] for a [3, 11, ...] input) are checked with those sizes and accepted, and the result
    is eager's (the checks compared the shape against a list of candidate tuples, which the trace
    refused)."""
    torch._dynamo.reset()
    F, H = 16, 64
    w1 = torch.randn(2 * F, H, dtype=torch.bfloat16) / 8
    w2 = torch.randn(H, F, dtype=torch.bfloat16) / 4
    p = fastglu.ops.glu_params()

    def codes(h):
        c, _, s = fastglu.ops._fp8_store_blockwise(h, None, p, "test")
        return c, s

    def fn(x, w):
        if which == "glu":
            return fastglu.glu(x, weights=w)
        if which == "glu_fp8":
            return fastglu.fp8.glu_fp8(x, weights=w, return_y=True).y
        if which == "mlp":
            return fastglu.mlp(x, w1, w2, weights=w)
        if which == "linear_glu":
            return fastglu.linear_glu(x, w1, weights=w, return_preact=False)
        c, s = x
        dy = torch.ones(*c.shape[:-1], F, dtype=torch.bfloat16)
        return fastglu.fp8.glu_bwd_fp8(dy, c, input_scale_inv=s, weights=w, return_dh=True).y

    def inputs(lead):
        x = torch.randn(*lead, H if which in ("mlp", "linear_glu") else 2 * F, dtype=torch.bfloat16)
        return codes(x) if which == "glu_bwd_fp8_saved" else x

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    a = inputs((33,))
    assert torch.equal(compiled(a, None), fn(a, None))
    b, w = inputs((3, 11)), torch.rand(3, 11, 1)
    assert torch.equal(compiled(b, w), fn(b, w))
