"""Linear layers on torch tensors through libfastglu: ``fastglu.linear`` (``F.linear``) and
``fastglu.linear_glu`` (fc1 with the gated activation in the GEMM's epilogue).

    h = x @ w1.T (+ bias)           [..., 2F]   (x [..., hidden], w1 [2F, hidden])
    y = glu(h)                      [..., F]    (fastglu.glu's math on h, h rounded to x's dtype)

CPU tensors run the C CPU reference (plain loops), CUDA tensors the CUDA backend on the current
stream (the sm_90a TMA + wgmma kernel where it takes the problem, else a general tiled kernel).
Math, dtypes and the C API: ``include/fastglu.h`` ("Linear layers") and ``docs/gemm.md``.

Both are ``torch.library`` ops (``torch.ops.fastglu.linear``, ``torch.ops.fastglu.linear_glu_fwd``)
with fake implementations, so they trace under ``torch.compile(fullgraph=True)`` and
``torch.export``, and with autograd: ``linear_glu``'s backward runs the standalone GLU backward
(``fastglu::glu_bwd``) on the stored h, then ``dh @ w1``, ``dh^T @ x`` and ``dh.sum(0)`` (torch
matmuls). h is stored whenever a gradient is needed or ``return_preact=True``.

``linear_dglu_bwd`` (``torch.ops.fastglu.linear_dglu_bwd``, a fake implementation, no autograd:
it is a backward) is fc2's dgrad with the GLU backward in the GEMM's epilogue: from the upstream
gradient dO ``[..., hidden]``, fc2's weight w2 ``[hidden, F]`` and the saved h ``[..., 2F]``, it
returns dh ``[..., 2F]`` (and the recomputed y ``[..., F]`` that fc2's weight gradient needs, and
the per-token weights' gradient), so that a forward keeps h only. fc1's bias gradient is
``dh.sum(0)``; fc1's dgrad and both weight gradients are plain matmuls.
"""

from __future__ import annotations

import torch

from . import (
    _C,
    library,  # noqa: F401  (fastglu::glu_bwd, which linear_glu's backward calls)
)
from .ops import (
    _COMPUTE_CODES,
    _COMPUTE_WHAT,
    _check_tensor,
    _fail,
    _flat_stride,
    _launch,
    _row_stride,
    check_dense,
    check_storages,
    glu_params,
    mark_overwritten,
    op_params,
    refuse_create_graph,
    register_no_gradient,
    shape_is_one_of,
)

# ---- validation on metadata (shared by the kernels and the fake implementations) -------------


def _check_meta(t, fn, name, dims):
    # the family's tensor check without the storage check (fake tensors have none; the eager
    # kernels' wrapper checks storage itself)
    _check_tensor(t, fn, name, _COMPUTE_CODES, _COMPUTE_WHAT, zero_ok=True)
    if t.dim() not in dims:
        _fail(
            ValueError,
            fn,
            f"{name} must have {' or '.join(str(d) for d in dims)} dimensions, "
            f"got shape {tuple(t.shape)}",
        )


def check_like(t, x, fn, name, dtype=True):
    """t on x's device (and, with dtype, of x's dtype), named in the error (also the MLP blocks')."""
    if dtype and t.dtype != x.dtype:
        _fail(TypeError, fn, f"{name} has dtype {t.dtype} but x has dtype {x.dtype}")
    if t.device != x.device:
        _fail(ValueError, fn, f"{name} is on {t.device} but x is on {x.device}")


def _check_linear(x, w, bias, weights, fn, glu):
    """Validate the operands from their metadata; returns (leading shape, tokens, K, N) with N = F
    for the GLU (w has 2N rows) and out_features for the plain linear."""
    wname = "w1" if glu else "w"
    _check_meta(x, fn, "x", (2, 3) if glu else (1, 2, 3))
    _check_meta(w, fn, wname, (2,))
    check_like(w, x, fn, wname)
    lead, K = tuple(x.shape[:-1]), x.shape[-1]
    if w.shape[1] != K:
        _fail(
            ValueError,
            fn,
            f"{wname} has shape {tuple(w.shape)}: its in_features {w.shape[1]} does not match "
            f"x's last dimension (hidden) {K} (mismatched K)",
        )
    rows = w.shape[0]
    if glu and rows % 2:
        _fail(
            ValueError,
            fn,
            f"w1 has shape {tuple(w.shape)}: its {rows} rows must be even ([2F, hidden]: "
            "gate and up rows)",
        )
    N = rows // 2 if glu else rows
    tokens = 1
    for n in lead:
        tokens *= n
    if bias is not None:
        _check_meta(bias, fn, "bias", (1,))
        check_like(bias, x, fn, "bias")
        if tuple(bias.shape) != (rows,):
            _fail(
                ValueError,
                fn,
                f"bias has shape {tuple(bias.shape)}; expected ({rows},) "
                f"({'[2F]' if glu else '[out_features]'})",
            )
    if weights is not None:
        _check_meta(weights, fn, "weights", (1, 2, 3, 4))
        if weights.device != x.device:
            _fail(ValueError, fn, f"weights is on {weights.device} but x is on {x.device}")
        if not shape_is_one_of(weights.shape, (tokens,), (tokens, 1), lead, lead + (1,)):
            _fail(
                ValueError,
                fn,
                f"weights has shape {tuple(weights.shape)}; expected per-token weights [tokens] "
                f"or [tokens, 1] with tokens = {tokens} (x's leading shape {lead})",
            )
    return lead, tokens, K, N


# ---- the kernels -------------------------------------------------------------------------------


def _x_rows(x, fn):
    """x as [tokens, K] rows with unit column stride: (tensor, row stride), copied only if needed."""
    shape, stride = tuple(x.shape), tuple(x.stride())
    if x.dim() == 1:
        shape, stride = (1,) + shape, (shape[0],) + stride
    _, rs = _row_stride(shape, stride)
    if rs is None or (shape[-1] > 1 and stride[-1] != 1) or x.is_neg():
        x = x.resolve_neg().contiguous()
        return x, shape[-1]
    return x, rs


def _w_rows(w):
    if (w.shape[1] > 1 and w.stride(1) != 1) or w.is_neg():
        w = w.resolve_neg().contiguous()
    return w, (w.stride(0) if w.shape[0] > 1 else w.shape[1])


def _vector(b):
    if b is None:
        return None
    if (b.numel() > 1 and b.stride(0) != 1) or b.is_neg():
        b = b.resolve_neg().contiguous()
    return b


def _ptr(t):
    return 0 if t is None else t.data_ptr()


def _linear_impl(x, w, bias):
    fn = "linear"
    lead, T, K, N = _check_linear(x, w, bias, None, fn, glu=False)
    check_storages(fn, (("x", x), ("w", w), ("bias", bias)))
    xr, x_rs = _x_rows(x, fn)
    wr, w_rs = _w_rows(w)
    b = _vector(bias)
    out = torch.empty(lead + (N,), dtype=x.dtype, device=x.device)
    _launch(
        _C.linear,
        x.get_device(),
        (
            _COMPUTE_CODES[x.dtype],
            _ptr(xr),
            x_rs,
            wr.data_ptr(),
            w_rs,
            _ptr(b),
            out.data_ptr(),
            N,
            T,
            K,
            N,
        ),
    )
    return out


def _linear_fake(x, w, bias):
    lead, T, K, N = _check_linear(x, w, bias, None, "linear", glu=False)
    return x.new_empty(lead + (N,))


def _linear_glu_impl(
    x,
    w1,
    bias,
    weights,
    activation,
    layout,
    clamp_value,
    glu_linear_offset,
    gate_multiplier,
    down_multiplier,
    store_h,
):
    fn = "linear_glu"
    lead, T, K, F = _check_linear(x, w1, bias, weights, fn, glu=True)
    p = op_params(
        fn, activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier
    )
    check_storages(fn, (("x", x), ("w1", w1), ("bias", bias), ("weights", weights)))
    xr, x_rs = _x_rows(x, fn)
    wr, w_rs = _w_rows(w1)
    b = _vector(bias)
    wt, w_code, w_stride = None, _C.DTYPE_FP32, 0
    if weights is not None:
        s = _flat_stride(weights)
        wt = (
            weights
            if s is not None and not weights.is_neg()
            else weights.resolve_neg().contiguous()
        )
        w_stride = s if wt is weights else 1
        w_code = _COMPUTE_CODES[wt.dtype]
    y = torch.empty(lead + (F,), dtype=x.dtype, device=x.device)
    h = torch.empty(lead + (2 * F,) if store_h else (0,), dtype=x.dtype, device=x.device)
    _launch(
        _C.linear_glu_fwd,
        x.get_device(),
        (
            *p,
            _COMPUTE_CODES[x.dtype],
            _ptr(xr),
            x_rs,
            wr.data_ptr(),
            w_rs,
            _ptr(b),
            _ptr(wt),
            w_code,
            w_stride,
            h.data_ptr() if store_h else 0,
            2 * F,
            y.data_ptr(),
            F,
            T,
            K,
            F,
        ),
    )
    return y, h


def _linear_glu_fake(
    x,
    w1,
    bias,
    weights,
    activation,
    layout,
    clamp_value,
    glu_linear_offset,
    gate_multiplier,
    down_multiplier,
    store_h,
):
    lead, T, K, F = _check_linear(x, w1, bias, weights, "linear_glu", glu=True)
    op_params(
        "linear_glu",
        activation,
        layout,
        clamp_value,
        glu_linear_offset,
        gate_multiplier,
        down_multiplier,
    )
    return x.new_empty(lead + (F,)), x.new_empty(lead + (2 * F,) if store_h else (0,))


def _check_dglu(d_out, w2, h, weights, fn):
    """Validate fc2's dgrad operands from their metadata; returns (leading shape, tokens, H, F)."""
    _check_meta(d_out, fn, "d_out", (2, 3))
    _check_meta(w2, fn, "w2", (2,))
    _check_meta(h, fn, "h", (2, 3))
    for name, t in (("w2", w2), ("h", h)):
        if t.dtype != d_out.dtype:
            _fail(TypeError, fn, f"{name} has dtype {t.dtype} but d_out has dtype {d_out.dtype}")
        if t.device != d_out.device:
            _fail(ValueError, fn, f"{name} is on {t.device} but d_out is on {d_out.device}")
    lead, H = tuple(d_out.shape[:-1]), d_out.shape[-1]
    if w2.shape[0] != H:
        _fail(
            ValueError,
            fn,
            f"w2 has shape {tuple(w2.shape)}: its {w2.shape[0]} rows do not match d_out's last "
            f"dimension (hidden) {H} (w2 is fc2's weight [hidden, F])",
        )
    F = w2.shape[1]
    if tuple(h.shape) != lead + (2 * F,):
        _fail(
            ValueError,
            fn,
            f"h has shape {tuple(h.shape)}; expected {lead + (2 * F,)} (d_out's leading shape, "
            f"2F with F = {F} from w2)",
        )
    tokens = 1
    for n in lead:
        tokens *= n
    if weights is not None:
        _check_meta(weights, fn, "weights", (1, 2, 3, 4))
        if weights.device != d_out.device:
            _fail(ValueError, fn, f"weights is on {weights.device} but d_out is on {d_out.device}")
        if not shape_is_one_of(weights.shape, (tokens,), (tokens, 1), lead, lead + (1,)):
            _fail(
                ValueError,
                fn,
                f"weights has shape {tuple(weights.shape)}; expected per-token weights [tokens] "
                f"or [tokens, 1] with tokens = {tokens} (d_out's leading shape {lead})",
            )
    return lead, tokens, H, F


def _linear_dglu_impl(
    d_out,
    w2,
    h,
    weights,
    activation,
    layout,
    clamp_value,
    glu_linear_offset,
    gate_multiplier,
    down_multiplier,
    want_y,
    want_dweights,
):
    return _linear_dglu_run(
        d_out,
        w2,
        h,
        weights,
        (activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier),
        want_y,
        want_dweights,
    )


def linear_dglu_bwd_over_h(d_out, w2, h, weights, p, want_y, want_dweights):
    """``fastglu::linear_dglu_bwd`` with dh written over h (the C call takes dh = h: each element is
    read before it is written), for an eager caller that owns h and reads it no more, as the MLP
    block's backward: one [tokens, 2F] buffer less at the backward's peak. p: the six GLU scalars.
    Returns (dh, which is h, y, dweights). Not an op: a traced backward stays functional. h's
    version counter is bumped, so an autograd node that saved h fails loudly instead of reading dh.
    """
    out = _linear_dglu_run(d_out, w2, h, weights, p, want_y, want_dweights, over_h=True)
    mark_overwritten(h)
    return out


def _linear_dglu_run(d_out, w2, h, weights, scalars, want_y, want_dweights, over_h=False):
    fn = "linear_dglu_bwd"
    activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier = scalars
    lead, T, H, F = _check_dglu(d_out, w2, h, weights, fn)
    if over_h and not (h.is_contiguous() and not h.is_neg()):
        _fail(
            ValueError,
            fn,
            f"dh over h needs a contiguous h without a negation flag; h has strides "
            f"{tuple(h.stride())}{' and is negated' if h.is_neg() else ''}",
        )
    p = op_params(
        fn, activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier
    )
    if want_dweights and weights is None:
        _fail(ValueError, fn, "the weights' gradient (return_dweights) needs weights")
    check_storages(fn, (("d_out", d_out), ("w2", w2), ("h", h), ("weights", weights)))
    dr, d_rs = _x_rows(d_out, fn)
    wr, w_rs = _w_rows(w2)
    hr, h_rs = _x_rows(h, fn)
    wt, w_code, w_stride = None, _C.DTYPE_FP32, 0
    if weights is not None:
        s = _flat_stride(weights)
        wt = (
            weights
            if s is not None and not weights.is_neg()
            else weights.resolve_neg().contiguous()
        )
        w_stride = s if wt is weights else 1
        w_code = _COMPUTE_CODES[wt.dtype]
    dev = d_out.device
    dh = h if over_h else torch.empty(lead + (2 * F,), dtype=d_out.dtype, device=dev)
    y = torch.empty(lead + (F,) if want_y else (0,), dtype=d_out.dtype, device=dev)
    dw = torch.empty(
        tuple(weights.shape) if want_dweights else (0,),
        dtype=weights.dtype if weights is not None else d_out.dtype,
        device=dev,
    )
    _launch(
        _C.linear_dglu_bwd,
        d_out.get_device(),
        (
            *p,
            _COMPUTE_CODES[d_out.dtype],
            _ptr(dr),
            d_rs,
            wr.data_ptr(),
            w_rs,
            _ptr(hr),
            h_rs,
            _ptr(wt),
            w_code,
            w_stride,
            dh.data_ptr(),
            h_rs if over_h else 2 * F,  # dh over h: h's own row stride, so the C call sees dh = h
            y.data_ptr() if want_y else 0,
            F,
            dw.data_ptr() if want_dweights else 0,
            1,
            T,
            H,
            F,
        ),
    )
    return dh, y, dw


def _linear_dglu_fake(
    d_out,
    w2,
    h,
    weights,
    activation,
    layout,
    clamp_value,
    glu_linear_offset,
    gate_multiplier,
    down_multiplier,
    want_y,
    want_dweights,
):
    fn = "linear_dglu_bwd"
    lead, T, H, F = _check_dglu(d_out, w2, h, weights, fn)
    op_params(
        fn, activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier
    )
    if want_dweights and weights is None:
        _fail(ValueError, fn, "the weights' gradient (return_dweights) needs weights")
    return (
        d_out.new_empty(lead + (2 * F,)),
        d_out.new_empty(lead + (F,) if want_y else (0,)),
        (weights.new_empty(tuple(weights.shape)) if want_dweights else d_out.new_empty((0,))),
    )


# ---- autograd -----------------------------------------------------------------------------------


def _linear_setup(ctx, inputs, output):
    x, w, bias = inputs
    ctx.save_for_backward(x, w)
    ctx.has_bias = bias is not None


def _linear_backward(ctx, dout):
    x, w = ctx.saved_tensors
    need = ctx.needs_input_grad
    d2 = dout.flatten(0, -2) if dout.dim() > 1 else dout.reshape(1, -1)
    dx = (d2 @ w).reshape(x.shape) if need[0] else None
    dw = d2.t() @ (x.flatten(0, -2) if x.dim() > 1 else x.reshape(1, -1)) if need[1] else None
    db = d2.sum(0) if ctx.has_bias and need[2] else None
    return dx, dw, db


def _linear_glu_setup(ctx, inputs, output):
    x, w1, bias, weights = inputs[:4]
    ctx.scalars = tuple(inputs[4:10])
    ctx.stored = inputs[10]
    ctx.has_bias = bias is not None
    ctx.save_for_backward(x, w1, weights, output[1])


def _linear_glu_backward(ctx, dy, dh_out):
    refuse_create_graph("linear_glu.backward")  # (the GLU backward has no derivative)
    x, w1, weights, h = ctx.saved_tensors
    if not ctx.stored:
        raise RuntimeError(
            "fastglu.linear_glu: the backward needs h; call the op with store_h=True "
            "(fastglu.linear_glu stores it whenever a gradient is required)"
        )
    need = ctx.needs_input_grad
    want_dw = weights is not None and need[3]
    dh, _, _, dweights = torch.ops.fastglu.glu_bwd(
        dy, h, None, None, weights, None, *ctx.scalars, False, want_dw
    )
    if dh_out is not None:
        dh = dh + dh_out
    d2 = dh.flatten(0, -2) if dh.dim() > 1 else dh.reshape(1, -1)
    dx = (d2 @ w1).reshape(x.shape) if need[0] else None
    dw1 = d2.t() @ (x.flatten(0, -2) if x.dim() > 1 else x.reshape(1, -1)) if need[1] else None
    db = d2.sum(0, dtype=torch.float32).to(dh.dtype) if ctx.has_bias and need[2] else None
    return (dx, dw1, db, dweights if want_dw else None) + (None,) * 7


# ---- registration -------------------------------------------------------------------------------

_LIB = torch.library.Library("fastglu", "FRAGMENT")  # kept alive: it owns the registrations below
LINEAR_SCHEMA = "(Tensor x, Tensor w, Tensor? bias) -> Tensor"
LINEAR_GLU_SCHEMA = (
    "(Tensor x, Tensor w1, Tensor? bias, Tensor? weights, int activation, int layout, "
    "float clamp_value, float glu_linear_offset, float gate_multiplier, float down_multiplier, "
    "bool store_h) -> (Tensor y, Tensor h)"
)
for _name, _schema, _impl, _fake, _setup, _bwd in (
    ("linear", LINEAR_SCHEMA, _linear_impl, _linear_fake, _linear_setup, _linear_backward),
    (
        "linear_glu_fwd",
        LINEAR_GLU_SCHEMA,
        _linear_glu_impl,
        _linear_glu_fake,
        _linear_glu_setup,
        _linear_glu_backward,
    ),
):
    torch.library.define(f"fastglu::{_name}", _schema, lib=_LIB)
    torch.library.impl(f"fastglu::{_name}", ("cpu", "cuda"), _impl, lib=_LIB)
    torch.library.register_fake(f"fastglu::{_name}", _fake, lib=_LIB)
    torch.library.register_autograd(f"fastglu::{_name}", _bwd, setup_context=_setup, lib=_LIB)
LINEAR_DGLU_SCHEMA = (
    "(Tensor d_out, Tensor w2, Tensor h, Tensor? weights, int activation, int layout, "
    "float clamp_value, float glu_linear_offset, float gate_multiplier, float down_multiplier, "
    "bool want_y, bool want_dweights) -> (Tensor dh, Tensor y, Tensor dweights)"
)
torch.library.define("fastglu::linear_dglu_bwd", LINEAR_DGLU_SCHEMA, lib=_LIB)
torch.library.impl("fastglu::linear_dglu_bwd", ("cpu", "cuda"), _linear_dglu_impl, lib=_LIB)
torch.library.register_fake("fastglu::linear_dglu_bwd", _linear_dglu_fake, lib=_LIB)


# a backward through dh or y raises instead of leaving the inputs' gradients silently None
register_no_gradient(
    "fastglu::linear_dglu_bwd",
    _LIB,
    "fastglu.linear_dglu_bwd: its outputs have no gradient (a backward kernel, not differentiable)",
)


# ---- the public functions -------------------------------------------------------------------------


def _check_types(fn, **tensors):
    """TypeError for an argument that is not a tensor (the dispatcher would raise a RuntimeError)."""
    for name, t in tensors.items():
        if t is not None and not isinstance(t, torch.Tensor):
            _fail(TypeError, fn, f"{name} must be a torch.Tensor, got {type(t).__name__}")


def linear(x, w, bias=None):
    """``x @ w.T (+ bias)`` as ``torch.nn.functional.linear``: x ``[..., in_features]`` (1D to 3D),
    w ``[out_features, in_features]``, bias None or ``[out_features]``, one dtype (bfloat16, float16
    or float32); fp32 accumulation. Differentiable. Raises TypeError / ValueError naming the tensor."""
    _check_types("linear", x=x, w=w, bias=bias)
    for name, t in (("x", x), ("w", w), ("bias", bias)):
        if t is not None:
            check_dense(t, "linear", name)  # before the dispatcher, which knows no sparse kernel
    return torch.ops.fastglu.linear(x, w, bias)


def linear_glu(
    x,
    w1,
    bias=None,
    activation="silu",
    *,
    weights=None,
    clamp_value=None,
    glu_linear_offset=0.0,
    gate_multiplier=1.0,
    down_multiplier=1.0,
    interleaved=False,
    return_preact=True,
):
    """fc1 with the gated activation in its epilogue.

    Args:
        x: ``[tokens, hidden]`` or ``[S, B, hidden]``, bfloat16 / float16 / float32, CPU or CUDA.
        w1: ``[2F, hidden]`` (gate rows then up rows; ``interleaved=True``: gate row 2j, up row 2j+1).
        bias: None or ``[2F]``, added to h in fp32 before it is rounded.
        activation, weights, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier:
            as ``fastglu.glu`` (the clamp acts on h, bias included; weights are per token).
        return_preact: also return h.

    Returns:
        ``(y, h)`` with y ``[..., F]`` and h ``[..., 2F]`` in x's dtype, or y alone. y is bitwise
        ``fastglu.glu(h, ...)`` on the same device (without a bias argument: h includes fc1's).

    Raises:
        TypeError: a tensor of the wrong type or dtype (named), an option that is not a number.
        ValueError: mismatched shapes (e.g. w1's in_features against x's hidden), devices, an
            unknown activation, a non-finite offset or multiplier.
    """
    p = glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        interleaved=interleaved,
        fn="linear_glu",
    )
    _check_types("linear_glu", x=x, w1=w1, bias=bias, weights=weights)
    for name, t in (("x", x), ("w1", w1), ("bias", bias), ("weights", weights)):
        if t is not None:
            check_dense(
                t, "linear_glu", name
            )  # before the dispatcher, which knows no sparse kernel
    grad = torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in (x, w1, bias, weights)
    )
    y, h = torch.ops.fastglu.linear_glu_fwd(x, w1, bias, weights, *p, bool(return_preact or grad))
    return (y, h) if return_preact else y


def linear_dglu_bwd(
    d_out,
    w2,
    h,
    activation="silu",
    *,
    weights=None,
    clamp_value=None,
    glu_linear_offset=0.0,
    gate_multiplier=1.0,
    down_multiplier=1.0,
    interleaved=False,
    return_y=True,
    return_dweights=False,
):
    """fc2's dgrad with the GLU backward in the GEMM's epilogue: ``dY = d_out @ w2`` (fp32 sums,
    rounded to the dtype as a separate GEMM's output is) and the family's backward of dY with
    respect to h.

    Args:
        d_out: fc2's upstream gradient ``[tokens, hidden]`` or ``[S, B, hidden]``, bfloat16 / float16 /
            float32, CPU or CUDA.
        w2: fc2's weight ``[hidden, F]`` as ``F.linear`` holds it (fc2 out = y @ w2.T).
        h: the saved fc1 output ``[..., 2F]`` (fc1's bias included, as ``linear_glu`` returns it).
        activation, weights, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier,
            interleaved: as in the forward (``linear_glu``); weights per token.
        return_y: also compute y = glu(h), fc2's input for its weight gradient (else None).
        return_dweights: also return the weights' gradient (needs weights), shaped and typed as
            weights.

    Returns:
        ``(dh, y)``, or ``(dh, y, dweights)`` with return_dweights: dh ``[..., 2F]`` in h's layout,
        y ``[..., F]`` (bitwise ``fastglu.glu(h, ...)`` on the same device's backends' math).
        fc1's bias gradient is ``dh.sum(0)`` (the caller takes it).

    Raises:
        TypeError: a tensor of the wrong type or dtype (named), an option that is not a number.
        ValueError: mismatched shapes (w2's rows against d_out's hidden, h against 2F), devices, an
            unknown activation, return_dweights without weights.
    """
    fn = "linear_dglu_bwd"
    p = glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        interleaved=interleaved,
        fn=fn,
    )
    _check_types(fn, d_out=d_out, w2=w2, h=h, weights=weights)
    for name, t in (("d_out", d_out), ("w2", w2), ("h", h), ("weights", weights)):
        if t is not None:
            check_dense(t, fn, name)
    if return_dweights and weights is None:
        _fail(ValueError, fn, "return_dweights=True needs weights")
    dh, y, dw = torch.ops.fastglu.linear_dglu_bwd(
        d_out, w2, h, weights, *p, bool(return_y), bool(return_dweights)
    )
    y = y if return_y else None
    return (dh, y, dw) if return_dweights else (dh, y)


__all__ = ["linear", "linear_glu", "linear_dglu_bwd"]
