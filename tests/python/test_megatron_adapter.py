"""fastglu against Megatron-Core itself, and the adapter ``fastglu.megatron.apply()`` / ``undo()``.

- With megatron-core importable (skipped otherwise): each of fastglu's Megatron-signature functions
  against Megatron's own on the same random inputs (forward, input / bias / weights gradients);
  Megatron's ``MLP`` (ColumnParallelLinear / RowParallelLinear on a one-process gloo group, CPU
  initialization) forward + backward with ``apply()`` against the same module unpatched; and
  ``FastGLUActivation`` as the activation module of a hand-built MLP spec against Megatron's unfused
  GLU.
- Always: ``apply()`` / ``undo()`` on a fake ``megatron`` package injected into ``sys.modules``.

Megatron's fused functions are ``torch.compile``d (``megatron.core.jit.jit_fuser``); the comparisons
run them under ``torch.compiler.set_stance("force_eager")`` (the same Python formulas, evaluated op by
op, without minutes of CPU compilation), except ``test_against_megatron_compiled``, which compiles one.

CI (.ci/run) runs this file against the oldest and the newest release of ``fastglu.megatron.SUPPORTED``
with FASTGLU_EXPECT_MEGATRON naming the release, so that a failed import fails instead of skipping.
Locally (from 0.17 on megatron-core's wheels say CPython 3.12, and it needs triton; its modules used
here import on 3.11 too):
    pip install --target /tmp/mc --no-deps --ignore-requires-python --python-version 3.12 \
        --only-binary=:all: megatron-core==0.19.2 && pip install --target /tmp/tri --no-deps triton
    PYTHONPATH=<fastglu>:/tmp/mc:/tmp/tri python3 -m pytest tests/python/test_megatron_adapter.py
"""

import contextlib
import math
import os
import socket
import sys
import types
import warnings

import pytest
import torch
import torch.nn.functional as F_

import fastglu
import fastglu.megatron as fm

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")),
]


def _import_megatron():
    try:
        import megatron.core.fusions.fused_bias_geglu as geglu
        import megatron.core.fusions.fused_bias_swiglu as swiglu

        return swiglu, geglu
    except Exception:  # not installed, or its own imports (triton, ...) fail here
        return None


MEGATRON = _import_megatron()
needs_megatron = pytest.mark.skipif(MEGATRON is None, reason="megatron-core is not importable")
TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-5}


def rel_err(out, ref):
    out, ref = out.double().cpu(), ref.double().cpu()
    assert out.shape == ref.shape, (out.shape, ref.shape)
    err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    return float("inf") if err != err else err


def eager():
    set_stance = getattr(torch.compiler, "set_stance", None)
    return set_stance("force_eager") if set_stance is not None else contextlib.nullcontext()


@pytest.fixture(autouse=True)
def _undo_after_each_test():
    yield
    fm.undo()


# ---- the adapter on a fake megatron --------------------------------------------------------------


def _fake_megatron(monkeypatch, version=None):
    """A fake megatron package: the two fusions modules define the four functions, transformer.mlp
    imports them by name (as the real mlp.py does); with version, core.package_info holds it as
    __version__. Returns (modules by name, original functions)."""

    def make(name):
        def f(*args, **kwargs):
            return ("megatron", name)

        f.__name__ = name
        return f

    originals = {n: make(n) for n in fm.REPLACEMENTS}
    mods = {}
    for name in ("megatron", "megatron.core", "megatron.core.fusions", "megatron.core.transformer"):
        mods[name] = types.ModuleType(name)
        mods[name].__path__ = []  # a package, with no submodules on disk
    mods["megatron.core.fusions.fused_bias_swiglu"] = types.ModuleType(
        "megatron.core.fusions.fused_bias_swiglu"
    )
    mods["megatron.core.fusions.fused_bias_geglu"] = types.ModuleType(
        "megatron.core.fusions.fused_bias_geglu"
    )
    mods["megatron.core.transformer.mlp"] = types.ModuleType("megatron.core.transformer.mlp")
    for n in ("bias_swiglu_impl", "weighted_bias_swiglu_impl"):
        setattr(mods["megatron.core.fusions.fused_bias_swiglu"], n, originals[n])
    for n in ("bias_geglu_impl", "weighted_bias_quick_geglu_impl"):
        setattr(mods["megatron.core.fusions.fused_bias_geglu"], n, originals[n])
    for n in fm.REPLACEMENTS:
        setattr(mods["megatron.core.transformer.mlp"], n, originals[n])
    mods["megatron.core.transformer.mlp"].unrelated = len  # must stay untouched
    if version is not None:
        mods["megatron.core.package_info"] = types.ModuleType("megatron.core.package_info")
        mods["megatron.core.package_info"].__version__ = version
    # whatever real megatron modules this process imported are hidden for the test
    for name in list(sys.modules):
        if name == "megatron" or name.startswith("megatron."):
            monkeypatch.delitem(sys.modules, name)
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return mods, originals


def test_apply_and_undo_on_a_fake_megatron(monkeypatch):
    mods, originals = _fake_megatron(monkeypatch)
    mlp = mods["megatron.core.transformer.mlp"]
    routed = fm.apply()
    assert sorted(routed) == sorted(
        [
            f"megatron.core.fusions.fused_bias_swiglu.{n}"
            for n in ("bias_swiglu_impl", "weighted_bias_swiglu_impl")
        ]
        + [
            f"megatron.core.fusions.fused_bias_geglu.{n}"
            for n in ("bias_geglu_impl", "weighted_bias_quick_geglu_impl")
        ]
        + [f"megatron.core.transformer.mlp.{n}" for n in fm.REPLACEMENTS]
    )
    assert mlp.bias_swiglu_impl is fastglu.bias_swiglu_impl
    assert mlp.weighted_bias_swiglu_impl is fastglu.weighted_bias_swiglu_impl
    assert mlp.bias_geglu_impl is fastglu.bias_geglu_impl
    assert mlp.weighted_bias_quick_geglu_impl is fastglu.weighted_bias_quick_geglu_impl
    assert mods["megatron.core.fusions.fused_bias_geglu"].bias_geglu_impl is fastglu.bias_geglu_impl
    assert mlp.unrelated is len and fm.is_applied()
    # the routed name computes fastglu's result, called the way mlp.py calls it
    x = torch.randn(3, 2, 16)
    b = torch.randn(16)
    assert torch.equal(mlp.bias_swiglu_impl(x, b, False, False), fastglu.glu(x, bias=b))
    # idempotent: a second apply changes nothing and undo still finds the true originals
    assert sorted(fm.apply()) == sorted(routed)
    assert sorted(fm.undo()) == sorted(routed)
    for n, f in originals.items():
        assert getattr(mlp, n) is f
    assert (
        mods["megatron.core.fusions.fused_bias_swiglu"].bias_swiglu_impl
        is originals["bias_swiglu_impl"]
    )
    assert mlp.bias_swiglu_impl(x, b) == ("megatron", "bias_swiglu_impl")
    assert not fm.is_applied()
    assert fm.undo() == []  # idempotent too


def test_undo_leaves_a_name_someone_else_replaced_since(monkeypatch):
    mods, originals = _fake_megatron(monkeypatch)
    mlp = mods["megatron.core.transformer.mlp"]
    fm.apply()

    def theirs(*a):
        return "theirs"

    mlp.bias_geglu_impl = theirs
    fm.undo()
    assert mlp.bias_geglu_impl is theirs
    assert mlp.bias_swiglu_impl is originals["bias_swiglu_impl"]


@pytest.mark.parametrize("version", ["0.16.0", "0.16.1", "0.17.0rc0", "0.19.2"])
def test_apply_is_silent_on_a_supported_megatron(monkeypatch, version):
    _fake_megatron(monkeypatch, version)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fm.apply()
    assert fm.megatron_version() == version


@pytest.mark.parametrize("version", ["0.15.3", "0.20.0", "1.0.0"])
def test_apply_warns_on_an_unsupported_megatron(monkeypatch, version):
    mods, _ = _fake_megatron(monkeypatch, version)
    with pytest.warns(
        UserWarning, match=rf"megatron-core {version} is outside the tested range >=0\.16,<0\.20"
    ):
        routed = fm.apply()
    assert (
        routed
        and mods["megatron.core.transformer.mlp"].bias_swiglu_impl is fastglu.bias_swiglu_impl
    )


def test_apply_without_megatron_raises_import_error(monkeypatch):
    for name in list(sys.modules):
        if name == "megatron" or name.startswith("megatron."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "megatron", None)  # "import megatron" now fails
    with pytest.raises(ImportError, match="megatron-core is not importable"):
        fm.apply()
    assert not fm.is_applied()


EXPECTED_MEGATRON = os.environ.get("FASTGLU_EXPECT_MEGATRON")


@pytest.mark.skipif(not EXPECTED_MEGATRON, reason="FASTGLU_EXPECT_MEGATRON is not set")
def test_expected_megatron_is_imported():
    assert MEGATRON is not None, "megatron-core is not importable"
    # the public part: megatron-core 0.19 appends "+<git revision>" when it sits inside a git checkout
    # (scripts/test_megatron.sh installs it under build/ of this one)
    assert fm.megatron_version().split("+")[0] == EXPECTED_MEGATRON


@needs_megatron
def test_apply_is_silent_on_the_installed_megatron():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fm.apply()
    assert not [w for w in caught if "outside the tested range" in str(w.message)], (
        fm.megatron_version()
    )


# ---- fastglu's functions against Megatron's ---------------------------------------------------------


def _functions(of_megatron):
    """The four functions, Megatron's or fastglu's."""
    if of_megatron:
        swi, geg = MEGATRON
        return {
            "bias_swiglu_impl": swi.bias_swiglu_impl,
            "weighted_bias_swiglu_impl": swi.weighted_bias_swiglu_impl,
            "bias_geglu_impl": geg.bias_geglu_impl,
            "weighted_bias_quick_geglu_impl": geg.weighted_bias_quick_geglu_impl,
        }
    return {n: getattr(fastglu, n) for n in fm.REPLACEMENTS}


def _call(f, which, x, b, w, fp8, clamp):
    """f called the way megatron/core/transformer/mlp.py calls it (positional arguments)."""
    if which == "bias_swiglu_impl":
        return f(x, b, fp8, False)
    if which == "weighted_bias_swiglu_impl":
        return f(x, None, w, fp8)
    if which == "bias_geglu_impl":
        return f(x, b)
    return f(x, b, w, fp8, 1.0, clamp)


CASES = [  # (function, uses bias, uses weights, fp8_input_store, clamp_value)
    ("bias_swiglu_impl", True, False, False, None),
    ("bias_swiglu_impl", False, False, False, None),
    ("bias_swiglu_impl", True, False, True, None),
    ("weighted_bias_swiglu_impl", False, True, False, None),
    ("weighted_bias_swiglu_impl", False, True, True, None),
    ("bias_geglu_impl", True, False, False, None),
    ("bias_geglu_impl", False, False, False, None),
    ("weighted_bias_quick_geglu_impl", True, True, False, 7.0),
    ("weighted_bias_quick_geglu_impl", False, True, False, None),
    ("weighted_bias_quick_geglu_impl", True, True, True, None),
]


def _run(which, of_megatron, x, b, w, dy, fp8, clamp):
    xi = x.clone().requires_grad_()
    bi = b.clone().requires_grad_() if b is not None else None
    wi = w.clone().requires_grad_() if w is not None else None
    y = _call(_functions(of_megatron)[which], which, xi, bi, wi, fp8, clamp)
    y.backward(dy)
    return [
        t
        for t in (
            y.detach(),
            xi.grad,
            None if bi is None else bi.grad,
            None if wi is None else wi.grad,
        )
        if t is not None
    ]


@needs_megatron
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("lead", [(96,), (8, 12)], ids=["2d", "3d"])
@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: f"{c[0]}-bias{int(c[1])}-fp8{int(c[3])}-clamp{c[4]}"
)
def test_against_megatron_functions(case, lead, dtype, device):
    which, with_bias, with_weights, fp8, clamp = case
    F = 384
    tokens = math.prod(lead)
    scale = 4.0 if clamp else 2.0  # with a clamp, some gate / up values lie beyond it
    x = (torch.randn(*lead, 2 * F, device=device) * scale).to(dtype)
    b = (torch.randn(2 * F, device=device) * 0.5).to(dtype) if with_bias else None
    w = torch.rand(tokens, 1, device=device) + 0.25 if with_weights else None  # fp32 probs
    dy = torch.randn(*lead, F, device=device).to(dtype)
    with eager():
        want = _run(which, True, x, b, w, dy, fp8, clamp)
    got = _run(which, False, x, b, w, dy, fp8, clamp)
    assert len(got) == len(want)
    for g, m in zip(got, want):
        assert g.shape == m.shape and g.dtype == m.dtype and g.device == m.device
        assert rel_err(g, m) <= TOL[dtype]


@needs_megatron
def test_against_megatron_compiled():
    """Megatron's real fused path (its torch.compile'd swiglu / swiglu_back), one shape."""
    x = (torch.randn(64, 2 * 256) * 2).to(torch.bfloat16)
    b = (torch.randn(512) * 0.5).to(torch.bfloat16)
    dy = torch.randn(64, 256).to(torch.bfloat16)
    want = _run("bias_swiglu_impl", True, x, b, None, dy, False, None)
    got = _run("bias_swiglu_impl", False, x, b, None, dy, False, None)
    for g, m in zip(got, want):
        assert rel_err(g, m) <= 1e-2


# ---- Megatron's MLP, patched and unpatched ----------------------------------------------------------


@pytest.fixture(scope="module")
def model_parallel():
    """A one-process gloo group and Megatron's model-parallel state (TP = PP = 1)."""
    if MEGATRON is None:
        pytest.skip("megatron-core is not importable")
    import torch.distributed as dist
    from megatron.core import parallel_state

    created = False
    if not dist.is_initialized():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=1, rank=0)
        created = True
    made_state = False
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel()
        made_state = True
    yield
    if made_state:
        parallel_state.destroy_model_parallel()
    if created:
        dist.destroy_process_group()


def _mlp(dtype, **config):
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    activation_module = config.pop("activation_module", None)
    cfg = TransformerConfig(
        num_layers=1,
        hidden_size=64,
        ffn_hidden_size=96,
        num_attention_heads=4,
        gated_linear_unit=True,
        use_cpu_initialization=True,
        params_dtype=dtype,
        **config,
    )
    torch.manual_seed(1234)
    sub = MLPSubmodules(
        linear_fc1=ColumnParallelLinear,
        linear_fc2=RowParallelLinear,
        **({"activation_func": activation_module} if activation_module else {}),
    )
    return MLP(cfg, sub, ffn_hidden_size=96)


def _mlp_step(mlp, x, scale, dy):
    """Forward + backward; returns (output, output bias, x.grad, every parameter's grad) and the
    names of the graph's autograd nodes."""
    mlp.zero_grad(set_to_none=True)
    xi = x.clone().requires_grad_()
    si = None if scale is None else scale.clone().requires_grad_()
    with eager():
        y, y_bias = mlp(xi) if si is None else mlp(xi, per_token_scale=si)
        nodes, stack, seen = set(), [y.grad_fn], set()
        while stack:
            n = stack.pop()
            if n is None or n in seen:
                continue
            seen.add(n)
            nodes.add(type(n).__name__)
            stack.extend(f for f, _ in n.next_functions)
        y.backward(dy)
    out = [
        y.detach(),
        None if y_bias is None else y_bias.detach(),
        xi.grad,
        None if si is None else si.grad,
    ]
    out += [p.grad for _, p in sorted(mlp.named_parameters())]
    return out, nodes


FASTGLU_NODES = {"GLUFunctionBackward"}
MLP_CASES = {
    "swiglu-bias": dict(activation_func=F_.silu, bias_activation_fusion=True, add_bias_linear=True),
    "swiglu-fp8": dict(
        activation_func=F_.silu,
        bias_activation_fusion=True,
        add_bias_linear=True,
        activation_func_fp8_input_store=True,
    ),
    "geglu-bias": dict(activation_func=F_.gelu, bias_activation_fusion=True, add_bias_linear=True),
    "swiglu-probs": dict(
        activation_func=F_.silu, bias_activation_fusion=True, add_bias_linear=False
    ),
    # (no linear bias: with per_token_scale, Megatron 0.19's MLP adds fc2's bias in place into the
    # view RowParallelLinear returns, which autograd refuses; the functions' test covers the bias)
    "quick-geglu-gpt-oss": dict(
        activation_func="quick_gelu",
        bias_activation_fusion=True,
        add_bias_linear=False,
        glu_linear_offset=1.0,
        activation_func_clamp_value=7.0,
    ),
}


@needs_megatron
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(MLP_CASES))
def test_megatron_mlp_with_apply_matches_unpatched(case, dtype, model_parallel):
    config = dict(MLP_CASES[case])
    if config["activation_func"] == "quick_gelu":
        config["activation_func"] = MEGATRON[1].quick_gelu
    mlp = _mlp(dtype, **config)
    weighted = case in ("swiglu-probs", "quick-geglu-gpt-oss")
    torch.manual_seed(7)
    # probs-weighted experts see [tokens, hidden]; the dense MLP [S, B, hidden]
    x = (torch.randn(48, 64) if weighted else torch.randn(8, 6, 64)).to(dtype) * 4
    scale = torch.rand(48) + 0.25 if weighted else None
    dy = torch.randn(x.shape).to(dtype)
    fm.undo()
    want, want_nodes = _mlp_step(mlp, x, scale, dy)
    assert not (want_nodes & FASTGLU_NODES)
    routed = fm.apply()
    assert "megatron.core.transformer.mlp.bias_swiglu_impl" in routed
    got, got_nodes = _mlp_step(mlp, x, scale, dy)
    assert got_nodes & FASTGLU_NODES, got_nodes  # fastglu really ran
    fm.undo()
    again, _ = _mlp_step(mlp, x, scale, dy)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    for g, m, a in zip(got, want, again):
        assert (g is None) == (m is None)
        if m is not None:
            assert g.shape == m.shape and g.dtype == m.dtype
            assert rel_err(g, m) <= tol
            assert torch.equal(a, m)  # undo() restored Megatron's own path


@needs_megatron
@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_fastglu_activation_in_a_hand_built_spec(activation, model_parallel):
    """MLPSubmodules(activation_func=FastGLUActivation) with use_te_activation_func=True, against
    Megatron's unfused GLU (bias added, activation_func(gate) * up) on the same weights."""
    act = {"silu": F_.silu, "gelu": F_.gelu}[activation]
    try:
        ours = _mlp(
            torch.float32,
            activation_func=act,
            add_bias_linear=True,
            bias_activation_fusion=False,
            use_te_activation_func=True,
            activation_module=fastglu.modules.FastGLUActivation,
        )
    except Exception as e:  # a megatron-core whose config refuses use_te_activation_func without TE
        pytest.skip(f"use_te_activation_func unavailable: {e}")
    theirs = _mlp(
        torch.float32, activation_func=act, add_bias_linear=True, bias_activation_fusion=False
    )
    assert isinstance(ours.activation_func, fastglu.modules.FastGLUActivation)
    x = torch.randn(8, 6, 64)
    dy = torch.randn(8, 6, 64)
    got, nodes = _mlp_step(ours, x, None, dy)
    want, _ = _mlp_step(theirs, x, None, dy)
    assert "GLUFunctionBackward" in nodes
    # GeGLU: fastglu uses Megatron's tanh approximation, the unfused path F.gelu's erf form
    tol = 1e-5 if activation == "silu" else 2e-3
    for g, m in zip(got, want):
        if m is not None:
            assert rel_err(g, m) <= tol
