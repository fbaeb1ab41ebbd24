"""The gated MLP block as one autograd op: ``fastglu.mlp(x, w1, w2, ...)``.

    h   = x @ w1.T (+ bias1)                [..., 2F]   (x [..., H], w1 [2F, H]: gate rows | up rows)
    y   = glu(h) (* weights)                [..., F]    (fastglu.glu's math on h)
    out = y @ w2.T (+ bias2)                [..., H]    (w2 [H, F])

Forward paths (same results within rounding; chosen from metadata alone, no host synchronisation,
so the op is CUDA-graph capturable):

- fused: fc1 with the GLU in its GEMM epilogue (``torch.ops.fastglu.linear_glu_fwd``), then fc2
  (``F.linear``);
- unfused: fc1 by ``F.linear`` (cuBLAS on CUDA), the standalone GLU kernel
  (``torch.ops.fastglu.glu_fwd``), fc2 by ``F.linear``.

``fused=None`` picks the fused path where the H200 measurements put the block's forward ahead or even
(``docs/mlp.md``: the sm_90a kernel, F >= 2880), the unfused one
elsewhere (other GPUs run a general fused kernel, the CPU a reference loop: cuBLAS / MKL win there).

Memory: the forward saves x, w1, w2 and h (not y: the backward recomputes y from h for fc2's weight
gradient), so the block's activation memory is x + h. ``recompute=True`` saves x only and
recomputes h (and y) in the backward: one more fc1 GEMM for 2F fewer values per token (quack's and
DeepSeek-V3's trade). In eager mode the backward (the unfused one, and the fused dgrad GEMM, which
takes dh = h) writes dh over h where nothing else reads h
(``fastglu.mlp`` drops the op's h; a recomputed h): the saved h stays referenced until the op's
backward returns, so without that its peak would hold h and dh at once. The saved h is then gone: a
second backward (``retain_graph=True``) raises, except with ``recompute=True``.

Backward: ``dY = dO @ w2`` and the GLU backward on h (``_fc2_dgrad_dglu``: on the fused path the
fc2 dgrad GEMM with the GLU backward in its epilogue, else cuBLAS + the standalone
``torch.ops.fastglu.glu_bwd``), then
``dw2 = dO^T y``, ``dbias2 = sum dO``, ``dx = dh @ w1``, ``dw1 = dh^T x``, ``dbias1 = sum dh``
(the sums in fp32), and ``dweights`` from the GLU backward.

The op is ``torch.ops.fastglu.mlp_fwd`` (torch.library, with a fake implementation and autograd), so
``torch.compile(fullgraph=True)`` traces it without a graph break; its backward is made of ops that
have fake implementations too.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F_
import torch.utils._python_dispatch

from . import gemm as _gemm  # noqa: F401  (registers fastglu::linear_glu_fwd, linear_dglu_bwd)
from . import library as _library  # noqa: F401  (registers fastglu::glu_fwd / glu_bwd)
from . import ops
from .gemm import check_like, linear_dglu_bwd_over_h
from .ops import (
    GLUParams,
    _fail,
    check_code,
    check_dense,
    glu_params,
    op_params,
    refuse_create_graph,
    shape_is_one_of,
)

__all__ = [
    "mlp",
    "check_mlp",
    "check_bias_weights",
    "mlp_fused_default",
    "PATH_AUTO",
    "PATH_FUSED",
    "PATH_UNFUSED",
]

_dispatch_mode = getattr(torch.utils._python_dispatch, "_get_current_dispatch_mode", lambda: None)

PATH_AUTO, PATH_FUSED, PATH_UNFUSED = 0, 1, 2
_PATH_CODES = {PATH_AUTO: "auto", PATH_FUSED: "fused", PATH_UNFUSED: "unfused"}
_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_WEIGHT_DTYPES = _DTYPES
# The smallest F at which the MLP forward with the sm_90a fused fc1 + GLU was measured ahead of
# cuBLAS fc1 + the standalone GLU on the H200 (docs/mlp.md has the measurements); a smaller F is
# unmeasured and stays on the unfused path.
FUSED_MIN_F = 2880
# The fused fc2 dgrad + dGLU (fastglu::linear_dglu_bwd) in the backward wherever the fused forward
# runs: 0.90-0.97x the time of cuBLAS + the standalone backward at the five MLP shapes on an H100
# (docs/mlp.md). False keeps the unfused backward under fused=None; fused=True forces the fused one.
FUSED_DGRAD = True


# ---- validation on metadata (the eager op and the fake implementation share it) ---------------


def check_tensor(t, name, dims, fn="mlp", dtypes=_DTYPES):
    """A block operand from its metadata (also ``fastglu.mlp_fp8``'s, fn its name): a dense tensor
    of one of dtypes on the CPU, a CUDA device or meta, with one of dims dimensions."""
    if not isinstance(t, torch.Tensor):
        _fail(TypeError, fn, f"{name} must be a torch.Tensor, got {type(t).__name__}")
    check_dense(t, fn, name)  # (a nested tensor, which has no shape, included)
    if t.dtype not in dtypes:
        _fail(
            TypeError,
            fn,
            f"{name} has dtype {t.dtype}; expected {' / '.join(str(d) for d in dtypes)}",
        )
    if t.device.type not in ("cpu", "cuda", "meta"):
        _fail(
            ValueError,
            fn,
            f"{name} is on device {t.device}; fastglu runs on 'cpu' and 'cuda' tensors",
        )
    if t.dim() not in dims:
        _fail(
            ValueError,
            fn,
            f"{name} must have {' or '.join(map(str, dims))} dimensions, got shape {tuple(t.shape)}",
        )


def check_block_shapes(x, w1, w2, fn="mlp", positive=False):
    """x [..., H], w1 [2F, H], w2 [H, F] fitting together (positive: H > 0 and F > 0 too); returns
    (leading shape, H, F). The tensors themselves are check_tensor's."""
    lead, H = tuple(x.shape[:-1]), x.shape[-1]
    if w1.shape[1] != H:
        _fail(
            ValueError,
            fn,
            f"w1 has shape {tuple(w1.shape)}: its in_features {w1.shape[1]} does not match x's "
            f"last dimension (hidden) {H}",
        )
    if w1.shape[0] % 2 or (positive and w1.shape[0] == 0):
        _fail(
            ValueError,
            fn,
            f"w1 has shape {tuple(w1.shape)}: its {w1.shape[0]} rows must be even"
            + (" and positive" if positive else "")
            + " ([2F, hidden]: gate rows and up rows)",
        )
    F = w1.shape[0] // 2
    if tuple(w2.shape) != (H, F):
        _fail(
            ValueError,
            fn,
            f"w2 has shape {tuple(w2.shape)}; expected [hidden, F] = ({H}, {F}) for x "
            f"{tuple(x.shape)} and w1 {tuple(w1.shape)}",
        )
    if positive and H == 0:
        _fail(ValueError, fn, f"x has shape {tuple(x.shape)}: hidden must be positive")
    return lead, H, F


def check_bias_weights(x, lead, H, F, bias1=None, bias2=None, weights=None, fn="mlp"):
    """The block's optional operands from their metadata (also ``fastglu.mlp_fp8``'s, fn its name):
    bias1 ``[2F]`` and bias2 ``[hidden]`` of x's dtype on x's device; per-token weights of a dtype
    of their own (bf16 / fp16 / fp32) on x's device, ``[tokens]`` / ``[tokens, 1]`` or x's leading
    shape ``lead`` with or without a trailing 1. Each is named in the error."""
    for name, b, n in (("bias1", bias1, 2 * F), ("bias2", bias2, H)):
        if b is not None:
            check_tensor(b, name, (1,), fn)
            check_like(b, x, fn, name)
            if tuple(b.shape) != (n,):
                _fail(ValueError, fn, f"{name} has shape {tuple(b.shape)}; expected ({n},)")
    if weights is not None:
        tokens = math.prod(lead)
        check_tensor(weights, "weights", (1, 2, 3, 4), fn, dtypes=_WEIGHT_DTYPES)
        check_like(weights, x, fn, "weights", dtype=False)
        if not shape_is_one_of(weights.shape, (tokens,), (tokens, 1), lead, lead + (1,)):
            _fail(
                ValueError,
                fn,
                f"weights has shape {tuple(weights.shape)}; expected per-token weights [tokens] or "
                f"[tokens, 1] with tokens = {tokens} (x's leading shape {lead})",
            )


def check_mlp(x, w1, w2, bias1=None, bias2=None, weights=None):
    """Validate the operands from their metadata; returns (leading shape, tokens, H, F).

    Raises:
        TypeError: a non-tensor, a non-dense tensor, a dtype other than bf16 / fp16 / fp32, mixed dtypes.
        ValueError: shapes that do not fit together (each named with its shape), mixed devices.
    """
    check_tensor(x, "x", (2, 3))
    check_tensor(w1, "w1", (2,))
    check_tensor(w2, "w2", (2,))
    check_like(w1, x, "mlp", "w1")
    check_like(w2, x, "mlp", "w2")
    lead, H, F = check_block_shapes(x, w1, w2)
    check_bias_weights(x, lead, H, F, bias1, bias2, weights)
    return lead, math.prod(lead), H, F


def _path_code(fused):
    if fused is None:
        return PATH_AUTO
    if not isinstance(fused, bool):
        _fail(TypeError, "mlp", f"fused must be None, True or False, got {fused!r}")
    return PATH_FUSED if fused else PATH_UNFUSED


# ---- the two forward paths ------------------------------------------------------------------------


def mlp_fused_default(x, w1) -> bool:
    """Whether ``fused=None`` takes the fused fc1 + GLU for these operands (metadata only: device,
    compute capability, shapes, alignment; never a host synchronisation)."""
    if x.device.type != "cuda":
        return False
    if torch.cuda.get_device_capability(x.device) != (9, 0):
        return False
    H, F = w1.shape[1], w1.shape[0] // 2
    # the offset into the storage, not data_ptr(): fake tensors (torch.compile traces the backward
    # with them) have no data pointer, and PyTorch's allocations start 16-byte aligned
    aligned = (
        all(t.storage_offset() * t.element_size() % 16 == 0 for t in (x, w1))
        and H % 8 == 0
        and F % 8 == 0
    )
    return aligned and F >= FUSED_MIN_F


def _use_fused(path, x, w1):
    return path == PATH_FUSED or (path == PATH_AUTO and mlp_fused_default(x, w1))


def _fc1_glu(x, w1, bias1, weights, p, fused, store_h):
    """(y, h) of fc1 + GLU; h is an empty (0,) tensor unless store_h."""
    if fused:
        return torch.ops.fastglu.linear_glu_fwd(x, w1, bias1, weights, *p, store_h)
    h = F_.linear(x, w1, bias1)
    y = torch.ops.fastglu.glu_fwd(h, None, None, weights, *p)
    return y, (h if store_h else h.new_empty((0,)))


def _fc2_dgrad_dglu(do, w2, h, weights, p, want_dweights, y=None, fused=False, in_place=False):
    """fc2's data gradient and the GLU backward: ``dY = dO @ w2``, then ``dh = glu'(h) dY`` and the
    fc2 input ``y = glu(h)`` (for fc2's weight gradient; taken as is when given) and the per-token
    weights' gradient. Returns (dh, y, dweights or None), dh and y of h's / y's leading shape.

    Fused (``fastglu::linear_dglu_bwd``: the GEMM with the GLU backward in its epilogue, dY never
    stored) where the fused forward runs and no weights' gradient is asked (the Hopper kernel does
    not reduce dweights across its tiles); else cuBLAS (torch.matmul) + the standalone GLU backward
    and forward on the saved h. in_place (the caller owns h and reads it no more): dh is written
    over h (the fused GEMM's epilogue and the GLU backward read each element before writing it), y
    computed from h before that, and h's version counter bumped: a reader of h that autograd knows
    of (a saved h.detach(), a raw-op caller that kept h against reuse_h's contract) then fails
    loudly instead of reading dh.
    """
    if fused and not want_dweights:
        if in_place:
            dh, y_new, _ = linear_dglu_bwd_over_h(do, w2, h, weights, p, y is None, False)
        else:
            dh, y_new, _ = torch.ops.fastglu.linear_dglu_bwd(
                do, w2, h, weights, *p, y is None, False
            )
        return dh, (y_new if y is None else y), None
    if y is None:
        y = torch.ops.fastglu.glu_fwd(h, None, None, weights, *p)
    dy = torch.matmul(do, w2)
    if in_place:
        g = ops.backward(
            GLUParams(*p),
            dy,
            h,
            None,
            None,
            weights,
            want_dbias=False,
            want_dweights=want_dweights,
            out=h,
            fn="mlp.backward",
        )
        ops.mark_overwritten(h)  # as linear_dglu_bwd_over_h does on the fused path
        return h, y, g.dweights
    dh, _, _, dweights = torch.ops.fastglu.glu_bwd(
        dy, h, None, None, weights, None, *p, False, want_dweights
    )
    return dh, y, dweights


# ---- the op -----------------------------------------------------------------------------------------


def _check_op(x, w1, w2, bias1, bias2, weights, p, path):
    """The op's checks (its kernel and its fake): the operands, the GLU scalars p, the path code;
    returns check_mlp's (leading shape, tokens, H, F)."""
    op_params("mlp", *p)
    check_code(path, _PATH_CODES, "mlp", "path")
    return check_mlp(x, w1, w2, bias1, bias2, weights)


def _mlp_impl(
    x,
    w1,
    w2,
    bias1,
    bias2,
    weights,
    activation,
    layout,
    clamp_value,
    glu_linear_offset,
    gate_multiplier,
    down_multiplier,
    path,
    save_h,
    reuse_h=False,
):
    p = (activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier)
    _check_op(x, w1, w2, bias1, bias2, weights, p, path)
    y, h = _fc1_glu(x, w1, bias1, weights, p, _use_fused(path, x, w1), save_h)
    out = F_.linear(y, w2, bias2)
    return out, h


def _mlp_fake(
    x,
    w1,
    w2,
    bias1,
    bias2,
    weights,
    activation,
    layout,
    clamp_value,
    glu_linear_offset,
    gate_multiplier,
    down_multiplier,
    path,
    save_h,
    reuse_h=False,
):
    p = (activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier)
    lead, _, H, F = _check_op(x, w1, w2, bias1, bias2, weights, p, path)
    return x.new_empty(lead + (H,)), x.new_empty(lead + (2 * F,) if save_h else (0,))


def _mlp_setup(ctx, inputs, output):
    # the gradient of an output nobody used stays None: materialised, h's would be a [T, 2F] zero
    # tensor, filled and then added to dh (two more passes over dh and two more dh-sized buffers
    # at the backward's peak)
    ctx.set_materialize_grads(False)
    x, w1, w2, bias1, bias2, weights = inputs[:6]
    ctx.scalars = tuple(inputs[6:12])
    ctx.path = inputs[12]
    ctx.recompute = not inputs[13]
    # the caller drops the op's h (fastglu.mlp): the backward may write dh over the saved h, once
    ctx.reuse_h = len(inputs) > 14 and bool(inputs[14])
    ctx.h_overwritten = False
    ctx.has_bias = (bias1 is not None, bias2 is not None)
    ctx.save_for_backward(x, w1, w2, bias1, weights, None if ctx.recompute else output[1])


def _rows(t):
    return t.flatten(0, -2)  # [tokens, width], also for width 0 (F = 0), where reshape(-1, 0) fails


def _mlp_backward(ctx, dout, dh_out):
    # the fused dgrad and the GLU kernels have no derivative of their own: a second-order gradient
    # would silently drop their dependence on the inputs
    refuse_create_graph("mlp")
    if ctx.h_overwritten:
        _fail(
            RuntimeError,
            "mlp.backward",
            "backward can run only once per forward: the saved h was overwritten by its gradient "
            "(retain_graph=True needs fastglu.mlp(..., recompute=True) or the op with reuse_h=False)",
        )
    x, w1, w2, bias1, weights, h = ctx.saved_tensors
    if dout is None:  # only h was used (grads are not materialised: _mlp_setup)
        dout = x.new_zeros(x.shape[:-1] + (w2.shape[0],))
    need = ctx.needs_input_grad
    p = ctx.scalars
    want_dw = weights is not None and need[5]
    y = None
    fused = _use_fused(ctx.path, x, w1)
    if ctx.recompute:
        y, h = _fc1_glu(x, w1, bias1, weights, p, fused, True)
    fused_dgrad = fused and (FUSED_DGRAD or ctx.path == PATH_FUSED) and not want_dw
    # dh over h where nothing else reads h: a recomputed h, or the saved one that fastglu.mlp
    # dropped (then the chain's peak no longer holds h and dh at once); eager only, since a
    # traced backward must stay functional
    in_place = (
        (ctx.recompute or (ctx.reuse_h and dh_out is None))
        and h.is_contiguous()
        and ops.untraced_eager()
        and _dispatch_mode() is None  # (a mode such as FakeTensorMode sees the op, not raw calls)
    )
    dh, y, dweights = _fc2_dgrad_dglu(dout, w2, h, weights, p, want_dw, y, fused_dgrad, in_place)
    if in_place and not ctx.recompute:
        ctx.h_overwritten = True
    del h
    # h is an output of the op (not of fastglu.mlp): its gradient, if any, adds to dh
    if dh_out is not None and dh_out.shape == dh.shape:
        dh = dh + dh_out
    do2, dh2, x2 = _rows(dout), _rows(dh), _rows(x)
    dw2 = do2.t() @ _rows(y) if need[2] else None
    del y  # before fc1's gradients: y is not needed past dw2
    db2 = do2.sum(0, dtype=torch.float32).to(dout.dtype) if ctx.has_bias[1] and need[4] else None
    dx = (dh2 @ w1).reshape(x.shape) if need[0] else None
    dw1 = dh2.t() @ x2 if need[1] else None
    db1 = dh2.sum(0, dtype=torch.float32).to(dh.dtype) if ctx.has_bias[0] and need[3] else None
    return (dx, dw1, dw2, db1, db2, dweights if want_dw else None) + (None,) * 9


MLP_SCHEMA = (
    "(Tensor x, Tensor w1, Tensor w2, Tensor? bias1, Tensor? bias2, Tensor? weights, int activation, "
    "int layout, float clamp_value, float glu_linear_offset, float gate_multiplier, "
    "float down_multiplier, int path, bool save_h, bool reuse_h=False) -> (Tensor out, Tensor h)"
)

_LIB = torch.library.Library("fastglu", "FRAGMENT")  # kept alive: it owns the registrations below
_TAGS = (torch.Tag.pt2_compliant_tag,) if hasattr(torch.Tag, "pt2_compliant_tag") else ()
torch.library.define("fastglu::mlp_fwd", MLP_SCHEMA, lib=_LIB, tags=_TAGS)
torch.library.impl("fastglu::mlp_fwd", ("cpu", "cuda"), _mlp_impl, lib=_LIB)
torch.library.register_fake("fastglu::mlp_fwd", _mlp_fake, lib=_LIB)
torch.library.register_autograd(
    "fastglu::mlp_fwd", _mlp_backward, setup_context=_mlp_setup, lib=_LIB
)


# ---- the public function ------------------------------------------------------------------------------


def mlp(
    x,
    w1,
    w2,
    *,
    activation="silu",
    bias1=None,
    bias2=None,
    weights=None,
    clamp_value=None,
    glu_linear_offset=0.0,
    gate_multiplier=1.0,
    down_multiplier=1.0,
    interleaved=False,
    recompute=False,
    fused=None,
):
    """The gated MLP block ``fc2(glu(fc1(x)))`` as one differentiable op.

    Args:
        x: ``[tokens, hidden]`` or ``[S, B, hidden]``; bfloat16 / float16 / float32; CPU or CUDA.
        w1: fc1's weight ``[2F, hidden]``: gate rows then up rows (Megatron's concatenated fc1;
            ``interleaved=True``: gate row 2j, up row 2j+1).
        w2: fc2's weight ``[hidden, F]``.
        activation: ``"silu"`` (SwiGLU), ``"gelu_tanh"`` (GeGLU) or ``"quick_gelu"``.
        bias1: None or ``[2F]``, added to h before the activation (so before the clamp).
        bias2: None or ``[hidden]``.
        weights: None or per-token weights (router probs) ``[tokens]`` / ``[tokens, 1]``, multiplied
            into y before fc2; bf16 / fp16 / fp32; differentiable.
        clamp_value, glu_linear_offset, gate_multiplier, down_multiplier, interleaved: as
            ``fastglu.glu`` (the clamp acts on h, bias1 included).
        recompute: save x only and recompute h in the backward (one more fc1 GEMM, 2F fewer
            saved values per token).
        fused: None (the faster path for the device and shape; see the module docstring), True
            (fc1 + GLU in one GEMM), False (F.linear + the standalone GLU kernel).

    Returns:
        ``out`` ``[..., hidden]`` in x's dtype.

    Raises:
        TypeError: a non-tensor or a wrong dtype (named), mixed dtypes, an option of the wrong type.
        ValueError: shapes that do not fit together (named, with the shapes), mixed devices, an
            unknown activation, a non-finite offset or multiplier.
        RuntimeError: a second backward through the same forward (``retain_graph=True``) without
            ``recompute=True``: the first one wrote dh over the saved h (eager mode), so the
            second has no h to read.
    """
    p = glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        interleaved=interleaved,
        fn="mlp",
    )
    if not isinstance(recompute, bool):
        _fail(TypeError, "mlp", f"recompute must be True or False, got {recompute!r}")
    path = _path_code(fused)
    check_mlp(x, w1, w2, bias1, bias2, weights)
    grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, w1, w2, bias1, bias2, weights)
    )
    out, _ = torch.ops.fastglu.mlp_fwd(
        x, w1, w2, bias1, bias2, weights, *p, path, grad and not recompute, True
    )
    return out
