"""Autograd and the public functions: ``fastglu.swiglu``, ``fastglu.glu``, ``glu_mul``, ``silu_mul`` and
Megatron-Core's signatures (``bias_swiglu_impl``, ``weighted_bias_swiglu_impl``, ``bias_geglu_impl``,
``weighted_bias_quick_geglu_impl``, ``SwiGLUFunction``), all on one autograd Function,
``GLUFunction``, over the op layer (``ops.py``; math, layouts and the fp8 store are documented
there). Semantics follow Megatron-Core ``megatron/core/fusions/fused_bias_swiglu.py`` and
``fused_bias_geglu.py``.

Eager calls on plain tensors apply ``GLUFunction`` through the C++ ``Function.apply`` without its
Python layer (host time matters at small sizes: ``bench/host_memory.py``); ``fastglu.swiglu`` on an
input that records no gradient calls the op layer alone.

torch.compile / torch.export: while they trace, every public function here is the torch.library op
``fastglu::glu_fwd`` with its registered backward ``fastglu::glu_bwd`` (``library.py``:
``glu_traced``), with no graph break; eager calls keep ``GLUFunction`` (one
``torch.compiler.is_compiling()`` check in front). Under compile ``fp8_input_store`` still holds
(the saved input cast by torch ops, the same fp8 values), ``in_place`` is ignored (as
``fastglu.swiglu`` does; the compiled graph owns its buffers; a leaf that requires grad is still
refused, as in eager mode), ``cpu_offload_input=True`` runs the
eager ``GLUFunction`` behind dynamo's ``disable`` (a graph break, so ``fullgraph=True``
raises: the offload marks are for Megatron's eager hooks), and a tensor ``clamp_value`` /
``linear_offset`` is read with ``.item()`` (a graph break). Each distinct value of the float
options compiles its own graph (they are constants of the op).
"""

from __future__ import annotations

import math
import sys

import torch

from . import library, ops
from .ops import (
    SILU,
    _fail,
    _forward_ad,
    _fp8_mode,
    _is_compiling,
    _may_overlap,
    _tracing_state,
    glu_params,
    mark_overwritten,
    ops_only,
)

_grad_enabled = torch.is_grad_enabled
_Tensor = torch.Tensor


# ---- autograd ---------------------------------------------------------------------------------


class GLUFunction(torch.autograd.Function):
    """Autograd of the gated activation: ``GLUFunction.apply(x, up, bias, weights, params, options)``.

    ``params`` is a GLUParams (``glu_params``); ``options`` = (fp8_input_store, cpu_offload_input,
    in_place, fn) with fp8_input_store in FP8_MODES. Differentiable in x, up, bias and weights; the
    bias and weights gradients are computed only when asked for (``needs_input_grad``).

    Saved for the backward: the input (fp8 when fp8_input_store: the operands before the clamp,
    each moved to its side of the bound, so that the backward's clamp of the decoded values cuts
    what the forward's did (module docstring); with True the forward kernel writes it, ``[..., 2F]`` in the operands' layout, and two tensors save its gate and up halves), bias,
    weights, the fp8 scales.
    ``cpu_offload_input`` marks the saved input and the bias with ``activation_offloading = True``
    (Megatron's convention). ``in_place`` writes the input gradient into the saved input's storage:
    one backward per forward (a second raises RuntimeError); ignored with an fp8 store. The forward
    refuses (ValueError) what an in-place backward cannot do: operands of uneven strides, a leaf
    that requires grad (an nn.Parameter) or a view of one (torch refuses in-place operations on
    them), gate and up sharing memory (``silu_mul(t, t)``), bias or weights sharing memory with the
    operands. An upstream gradient that shares memory with them is answered out of place; an
    efficient zero tensor as the upstream gradient gives zero gradients.
    """

    @staticmethod
    def forward(ctx, x, up, bias, weights, params, options):
        fp8, offload, in_place, fn = options
        if not (fp8 or offload or in_place):  # the common case, on every eager call's path: lean
            y = ops._fwd_common(params, x, bias, weights) if up is None else None
            if y is None:
                y = ops._fwd_checked(params, x, up, bias, weights, None, None, fn)[0]
            ctx.save_for_backward(x, up, bias, weights, None)
            ctx.call = (params, fn, False)  # (one attribute: each one costs the hot path)
            return y
        # an fp8 copy has no storage to reuse; an input that takes no gradient is never overwritten
        # (its gradient is not asked for: the bias / weights gradients are computed out of place)
        layout_check = in_place and not fp8
        in_place = (
            layout_check and ctx.needs_input_grad[0] and (up is None or ctx.needs_input_grad[1])
        )
        scale_inv = None
        if fp8 and isinstance(x, torch.Tensor):  # (not a tensor: the forward's TypeError)
            ops._fp8_clamp(
                params, x.dtype, fp8, fn
            )  # a clamp the copy can mark, before anything runs
        if fp8 is True:
            # Megatron's plain cast, written by the forward kernel in the same pass: one [..., 2F]
            # buffer in the operands' layout; two tensors get its gate and up halves
            y, x8 = ops._fwd_checked(params, x, up, bias, weights, None, True, fn)
            F = x8.shape[-1] // 2
            x_s, up_s = (x8, None) if up is None else (x8[..., :F], x8[..., F:])
        elif fp8 == "blockwise" and ops.FUSED_BLOCKWISE_STORE:
            y, x_s, up_s, scale_inv = ops._fwd_fp8_store_blockwise(params, x, up, bias, weights, fn)
        else:
            y = ops.forward(params, x, up, bias, weights, fn=fn)
            if fp8:
                x_s, up_s, scale_inv = ops._fp8_store(fp8, x, up, params, fn)
            else:
                x_s, up_s = x, up
        if layout_check:  # after the forward, which has validated the operands and written only y
            ops.check_in_place(x, fn, "gate" if up is not None else "input")
            if up is not None:
                ops.check_in_place(up, fn, "up")
        if in_place:
            ops.refuse_leaf_in_place(x, fn, "gate" if up is not None else "input")
            if up is not None:
                ops.refuse_leaf_in_place(up, fn, "up")
            ops._refuse_in_place_overlaps(x, up, bias, weights, fn)
        if offload:
            x_s.activation_offloading = True
            if up_s is not None:
                up_s.activation_offloading = True
            if bias is not None:
                bias.activation_offloading = True
        ctx.save_for_backward(x_s, up_s, bias, weights, scale_inv)
        ctx.call = (params, fn, in_place)
        ctx.backward_done = False
        return y

    @staticmethod
    def backward(ctx, dy):
        params, fn, in_place = ctx.call
        if _grad_enabled():  # (create_graph=True: ops.refuse_create_graph raises, unless traced)
            ops.refuse_create_graph(fn + ".backward")
        if in_place and ctx.backward_done:
            _fail(
                RuntimeError,
                fn + ".backward",
                "in_place=True: backward can run only once per forward: the saved "
                "input was overwritten by its gradient. Use in_place=False for "
                "retain_graph=True or a second backward.",
            )
        x, up, bias, weights, scale_inv = ctx.saved_tensors
        if bias is None and weights is None:  # (needs_input_grad read only where it decides)
            want_db = want_dw = False
        else:
            need = ctx.needs_input_grad
            want_db, want_dw = bias is not None and need[2], weights is not None and need[3]
        # dy sharing the operands' memory cannot be read while their gradients are written over
        # them (e.g. grad_outputs given as a view of the input): out of place
        in_place = in_place and not (
            _may_overlap(dy, x) or (up is not None and _may_overlap(dy, up))
        )
        if not in_place and up is None and scale_inv is None:
            g = ops._bwd_common(params, dy, x, bias, weights, want_db, want_dw)
            if g is not None:
                return g[0], None, g[1], g[2], None, None
        out = None
        if in_place:
            out = x if up is None else (x, up)
        g = ops.backward(
            params,
            dy,
            x,
            up,
            bias,
            weights,
            input_scale_inv=scale_inv,
            want_dbias=want_db,
            want_dweights=want_dw,
            out=out,
            fn=fn + ".backward",
        )
        if in_place:
            ctx.backward_done = True  # (after the call: a refused call has written nothing)
            mark_overwritten(x, up)  # other users of the overwritten input now fail loudly
        return g.dx, g.d_up, g.dbias, g.dweights, None, None


# GLUFunction applied as functional.py applies fastglu.swiglu's Function: what Function.apply does
# (with no functorch transform active: unwrap dead functorch wrappers, then the C++ apply) without
# its Python layer; Function.apply itself where a transform is active or torch lacks the helpers.
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", None)
_unwrap_if_dead = getattr(getattr(torch._C, "_functorch", None), "unwrap_if_dead", None)
_c_apply = getattr(torch._C, "_FunctionBase", object).__dict__.get("apply")
_glu_c_apply = (
    _c_apply.__get__(None, GLUFunction)
    if _functorch_active is not None and _unwrap_if_dead is not None and _c_apply is not None
    else None
)


def _apply(x, up, bias, weights, params, fp8_input_store, cpu_offload_input, in_place, fn):
    if (
        fp8_input_store is False
        and cpu_offload_input is False
        and in_place is False
        and type(x) is _Tensor
        and _glu_c_apply is not None
        and not ops_only()
        and not _functorch_active()
    ):  # the common eager call (Megatron's entry points): straight to the lean apply
        options = _PLAIN_OPTIONS.get(fn) or _PLAIN_OPTIONS.setdefault(fn, (False, False, False, fn))
        x = _unwrap_if_dead(x)  # (a dead functorch wrapper: unwrapped as Function.apply does)
        if up is not None and isinstance(up, _Tensor):
            up = _unwrap_if_dead(up)
        if bias is not None and isinstance(bias, _Tensor):
            bias = _unwrap_if_dead(bias)
        if weights is not None and isinstance(weights, _Tensor):
            weights = _unwrap_if_dead(weights)
        return _glu_c_apply(x, up, bias, weights, params, options)
    in_place = (
        in_place is not False and bool(in_place) and _grad_enabled()
    )  # without grad mode no backward runs
    if ops_only():  # compile / export tracing, a dispatch mode: the torch.library ops (glu_traced)
        return glu_traced(
            x,
            up,
            bias,
            weights,
            params,
            _fp8_mode(fp8_input_store, fn),
            bool(cpu_offload_input),
            in_place,
            fn,
        )
    if fp8_input_store is False and cpu_offload_input is False and not in_place:
        options = _PLAIN_OPTIONS.get(fn) or _PLAIN_OPTIONS.setdefault(fn, (False, False, False, fn))
    else:
        options = (_fp8_mode(fp8_input_store, fn), bool(cpu_offload_input), in_place, fn)
    if _glu_c_apply is None or _functorch_active():
        return GLUFunction.apply(x, up, bias, weights, params, options)
    if isinstance(x, _Tensor):  # (a dead functorch wrapper: unwrapped as Function.apply does)
        x = _unwrap_if_dead(x)
    if up is not None and isinstance(up, _Tensor):
        up = _unwrap_if_dead(up)
    if bias is not None and isinstance(bias, _Tensor):
        bias = _unwrap_if_dead(bias)
    if weights is not None and isinstance(weights, _Tensor):
        weights = _unwrap_if_dead(weights)
    return _glu_c_apply(x, up, bias, weights, params, options)


_PLAIN_OPTIONS = {}  # fn -> GLUFunction's options of a call without fp8 store, offload or in_place


def _cpu_offload_input_runs_the_eager_GLUFunction(x, up, bias, weights, params, options):
    """The eager GLUFunction, kept out of dynamo's trace (a graph break; dynamo's message names this
    function): cpu_offload_input marks the saved tensors of the eager Function
    (activation_offloading), which a compiled graph does not keep."""
    return GLUFunction.apply(x, up, bias, weights, params, options)


# torch.compiler.disable imports torch._dynamo (about 1.5 s) at once; torch._disable_dynamo, the
# same wrapper, imports it on the first call (under torch.compile, where it is loaded already).
_disable_dynamo = getattr(torch, "_disable_dynamo", None) or torch.compiler.disable
_cpu_offload_input_runs_the_eager_GLUFunction = _disable_dynamo(
    _cpu_offload_input_runs_the_eager_GLUFunction
)


def glu_traced(x, up, bias, weights, params, fp8, cpu_offload_input, in_place, fn):
    """The functions of this module while torch.compile / torch.export trace them (``_apply`` calls
    this when ``torch.compiler.is_compiling()``); same arguments as ``glu.GLUFunction``'s.

    - no fp8 store, no offload: ``torch.ops.fastglu.glu_fwd`` and its registered autograd (no graph
      break); ``in_place`` is ignored, as ``fastglu.swiglu`` does under compile (the compiled graph
      owns its buffers; its checks of strides and overlaps and the one-backward rule do not apply),
      but a leaf that requires grad (or a view of one) is refused as in eager mode;
    - ``fp8_input_store`` (True, "per_row", "per_tensor", "blockwise"): ``library.GLUSavedFp8`` (no
      graph break): the
      same ops, the saved input cast by torch ops instead of inside the forward kernel;
    - ``cpu_offload_input``: the eager ``GLUFunction`` behind dynamo's ``disable``, i.e. a
      graph break (``fullgraph=True`` then raises), since the ``activation_offloading`` marks are
      for Megatron's eager offloading hooks and a compiled graph saves its own tensors;
    - without torch.library's registration API (``SUPPORTED`` False): the eager Function, which
      dynamo cannot trace through (a graph break).
    """
    if not library.SUPPORTED or cpu_offload_input:
        return _cpu_offload_input_runs_the_eager_GLUFunction(
            x, up, bias, weights, params, (fp8, cpu_offload_input, in_place, fn)
        )
    if in_place and not fp8:  # refused as in eager mode, where the backward would overwrite them
        ops.refuse_leaves_in_place(x, up, fn)
    if fp8:
        if isinstance(x, torch.Tensor):  # (not a tensor: GLUSavedFp8's TypeError)
            ops._fp8_clamp(params, x.dtype, fp8, fn)  # a clamp the copy can mark (ValueError)
        return library.GLUSavedFp8.apply(x, up, bias, weights, tuple(params), fp8)
    return library.glu_fwd(x, up, bias, weights, *params)


_ZERO, _ONE = 0.0, 1.0  # glu's default options, recognised by identity
_DEFAULT_PARAMS = {a: glu_params(a) for a in ops.ACTIVATIONS}  # glu's params with default options


# ---- public functions --------------------------------------------------------------------------


def swiglu(x: torch.Tensor, in_place: bool = False) -> torch.Tensor:
    """SwiGLU on the Megatron layout.

    Args:
        x: ``[tokens, 2F]`` or ``[S, B, 2F]`` tensor, bfloat16 / float16 / float32, on CPU or CUDA;
            gate = ``x[..., :F]``, up = ``x[..., F:]``. May be a strided view (e.g. a column slice).
        in_place: the backward writes the gradient into x's storage instead of a new tensor (saves
            2F elements per token of peak memory; x's values are lost, and a second backward through
            the same graph raises RuntimeError). x's rows must then be evenly strided, unit column
            stride, not overlapping, and x must not be a leaf tensor that requires grad (an
            nn.Parameter) nor a view of one (ValueError at the forward otherwise, as torch refuses
            in-place operations on such leaves). Ignored where grad mode is off (no backward).

    Returns:
        ``silu(gate) * up`` of shape ``[..., F]``, x's dtype and device. Differentiable in x:
        ``d_gate = dy * up * s * (1 + gate * (1 - s))``, ``d_up = dy * silu(gate)``, s = sigmoid(gate).

    Raises:
        TypeError: x is not a dense tensor, or its dtype is not bfloat16/float16/float32.
        ValueError: x is not 2D/3D, its last dimension is odd, or it is on another device type.
        RuntimeError: a backward with create_graph=True (the backward is not differentiable).

    torch.compile / torch.export: traced as the registered op ``torch.ops.fastglu.swiglu_fwd``
    (``library.py``), with no graph break; ``in_place`` is ignored there. A plain tensor in eager
    mode takes ``GLUFunction`` with ``ops.SILU`` (applied without Function.apply's Python layer), or, where no gradient can be recorded (grad mode off or an input that does not require
    grad, no forward-mode AD level open, not under ``torch.jit.trace``), the kernel call alone.
    A DTensor input must be sharded ``Shard(-1)`` in Megatron's tensor-parallel layout (each
    rank's local [..., 2F/tp] holds its own gate and up slices); the result is a DTensor
    ``Shard(-1)`` of global shape [..., F]; other placements raise ValueError (``library.py``).
    """
    if type(x) is _Tensor and not ops_only():
        nd = x.dim()
        if nd != 2 and nd != 3:
            ops.check_input(x, "swiglu")  # Megatron's layout: 2D or 3D (raises naming the call)
        if in_place and _grad_enabled():  # (without grad mode there is no backward to run in place)
            return _apply(x, None, None, None, SILU, False, False, True, "swiglu")
        if (
            _glu_c_apply is None or _functorch_active()
        ):  # vmap / grad / jvp: Function.apply's own path
            return GLUFunction.apply(x, None, None, None, SILU, _SWIGLU_OPTIONS)
        x = _unwrap_if_dead(x)
        if (
            (not x.requires_grad or not _grad_enabled())
            and _forward_ad._current_level < 0
            and _tracing_state() is None
        ):  # (the JIT tracer records the Function, not a raw call)
            return ops.swiglu_fwd(x, fn="swiglu")  # no gradient to record: the op alone
        return _glu_c_apply(x, None, None, None, SILU, _SWIGLU_OPTIONS)
    return _swiglu_dispatched(x, in_place and _grad_enabled())


_SWIGLU_OPTIONS = (
    False,
    False,
    False,
    "swiglu",
)  # GLUFunction's options of a plain fastglu.swiglu call


class SwiGLUFunction:
    """Megatron-Core's ``SwiGLUFunction`` signature: ``SwiGLUFunction.apply(input, fp8_input_store,
    cpu_offload_input, in_place=False)``, i.e. ``GLUFunction`` with ``ops.SILU``: y = silu(gate) * up
    on a [.., 2F] input, with Megatron's and Liger's options (``fp8_input_store``: False, True,
    "per_row", "per_tensor", "blockwise"; ``cpu_offload_input`` marks the saved input; ``in_place`` writes the
    input gradient over the input, one backward per forward, with ``GLUFunction``'s refusals)."""

    @staticmethod
    def apply(input, fp8_input_store=False, cpu_offload_input=False, in_place=False):
        return _apply(
            input, None, None, None, SILU, fp8_input_store, cpu_offload_input, in_place, "swiglu"
        )


def _swiglu_dispatched(x, in_place):
    """``fastglu.swiglu`` for everything but a plain tensor in eager mode: while torch.compile or
    torch.export trace (the registered op; ``in_place`` is ignored there, the compiled graph owns its
    buffers), a DTensor (the op's DTensor rule; with ``in_place`` the lean Function on each rank's
    local tensor), or another tensor subclass (the op, through the dispatcher). Same arguments,
    result and errors as ``fastglu.swiglu``: with ``in_place`` a leaf that requires grad (or a
    view of one) is refused here too, also while traced, where nothing would be overwritten, so
    that eager and compiled code accept the same calls. Without grad mode there is no backward to
    run in place: ``in_place`` is then ignored."""
    in_place = in_place and _grad_enabled()
    if not library.SUPPORTED:
        return _apply(x, None, None, None, SILU, False, False, in_place, "swiglu")
    if in_place and isinstance(x, torch.Tensor):
        ops.refuse_leaf_in_place(x, "swiglu", "input")  # (a DTensor's local tensor is no leaf)
    if ops_only():
        return library.swiglu_fwd(x)
    if not isinstance(x, torch.Tensor) or x.is_nested:
        ops.check_input(x, "swiglu")  # raises TypeError naming the type or the nested layout
    if not library._dtensor_registered and "torch.distributed.tensor" in sys.modules:
        library.register_dtensor_rules()
    if in_place:

        def local(t):
            return _apply(t, None, None, None, SILU, False, False, True, "swiglu")

        if library.is_dtensor(x):
            return library.dtensor_local_call(x, local, "swiglu", lambda w: w // 2)
        return local(x)
    if library.is_dtensor(x):
        library.check_glu_dtensor(x, "swiglu")  # the error names fastglu.swiglu, not the op
    try:
        return library.swiglu_fwd(x)
    except (TypeError, ValueError) as e:  # another subclass: the op's checks name it; name the call
        r = ops.renamed(e, "swiglu", "swiglu_fwd")
        if r is None:
            raise
        raise r from None


def glu(
    x,
    activation="silu",
    *,
    bias=None,
    weights=None,
    clamp_value=None,
    glu_linear_offset=_ZERO,
    gate_multiplier=_ONE,
    down_multiplier=_ONE,
    interleaved=False,
    fp8_input_store=False,
    cpu_offload_input=False,
    in_place=False,
):
    """A gated linear unit on ``x[..., 2F]``, autograd-aware: ``y = m_d * w * act(m_g * a) * (v + o)``.

    Args:
        x: ``[..., 2F]`` bfloat16 / float16 / float32 on CPU or CUDA; gate = ``x[..., :F]``, up =
            ``x[..., F:]`` (``interleaved=True``: gate = ``x[..., 0::2]``, up = ``x[..., 1::2]``).
        activation: ``"silu"``, ``"gelu_tanh"`` or ``"quick_gelu"``.
        bias: None or ``[2F]`` (x's dtype), added after the clamp; its gradient is returned summed
            over tokens.
        weights: None or per-token ``[tokens, 1]`` / ``[tokens]`` (float32 / bf16 / fp16); the
            output stays in x's dtype, the weights' gradient is in the weights' dtype and shape.
        clamp_value: None, <= 0 or NaN: no clamp; c > 0: gate <= c, -c <= up <= c (before the
            bias), c in x's dtype as torch.clamp takes it (see ``glu_params``).
        glu_linear_offset: added to up (after clamp and bias).
        gate_multiplier, down_multiplier: Liger's multipliers (inside the activation / on the output).
        fp8_input_store: False, True (Megatron's plain float8_e4m3fn cast), ``"per_row"``,
            ``"per_tensor"`` or ``"blockwise"`` (scaled per row, tensor or 1 x 128 block; see
            ``fastglu.ops``'s docstring for the measured error).
        cpu_offload_input: mark the saved input and bias with ``activation_offloading = True``.
        in_place: the backward writes the input gradient over x's storage (x's rows must be evenly
            strided, unit column stride, non-overlapping; x must not be a leaf that requires grad,
            e.g. an nn.Parameter, nor a view of one, nor share memory with bias or weights:
            ValueError at the forward otherwise; one backward only). Ignored without grad mode.

    Returns:
        ``[..., F]`` in x's dtype, on x's device.

    Raises:
        TypeError, ValueError: see ``glu_fwd``; RuntimeError: a second in-place backward, or
        create_graph=True.
    """
    p = None
    if (
        clamp_value is None
        and glu_linear_offset is _ZERO
        and gate_multiplier is _ONE
        and down_multiplier is _ONE
        and interleaved is False
        and type(activation) is str
    ):  # the default options (the objects of the signature): their params, checked once
        p = _DEFAULT_PARAMS.get(activation)
    if p is None:
        p = glu_params(
            activation,
            clamp_value=clamp_value,
            glu_linear_offset=glu_linear_offset,
            gate_multiplier=gate_multiplier,
            down_multiplier=down_multiplier,
            interleaved=interleaved,
            fn="glu",
        )
    return _apply(x, None, bias, weights, p, fp8_input_store, cpu_offload_input, in_place, "glu")


def glu_mul(
    gate,
    up,
    activation="silu",
    *,
    bias=None,
    weights=None,
    clamp_value=None,
    glu_linear_offset=0.0,
    gate_multiplier=1.0,
    down_multiplier=1.0,
    fp8_input_store=False,
    in_place=False,
):
    """``act(gate) * up`` on two tensors ``[..., F]`` (Hugging Face's gate_proj / up_proj outputs),
    with gradients for both. Options as ``glu``; bias, if any, is one ``[2F]`` = [b_gate | b_up].
    ``in_place`` writes d_gate over gate and d_up over up: gate and up sharing memory (the same
    tensor, or overlapping views) cannot take both, and are refused with ValueError at the forward
    (as are ``glu``'s other in-place refusals)."""
    p = glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        fn="glu_mul",
    )
    if up is None:
        _fail(TypeError, "glu_mul", "up must be a torch.Tensor, got NoneType")
    return _apply(gate, up, bias, weights, p, fp8_input_store, False, in_place, "glu_mul")


def silu_mul(gate, up, *, gate_multiplier=1.0, down_multiplier=1.0, in_place=False):
    """Liger-Kernel's ``LigerSiLUMulFunction``: ``m_d * silu(m_g * gate) * up`` for two tensors
    ``gate``, ``up`` of the same shape ``[..., F]`` (bf16/fp16/fp32, CPU or CUDA), with gradients
    for both (``d_gate = m_d * dy * up * silu'(m_g * gate) * m_g``, ``d_up = m_d * dy * silu(m_g * gate)``).

    ``in_place=True`` writes d_gate over gate's storage and d_up over up's (one backward only);
    ValueError at the forward where that cannot work: gate and up sharing memory
    (``silu_mul(t, t)``: two gradients for one storage; call it with ``in_place=False``, whose
    gradient of t is the sum of both), or a leaf that requires grad (an nn.Parameter).
    Raises TypeError / ValueError as ``glu_fwd`` (mismatched shapes, dtypes, devices).
    """
    p = glu_params(
        "silu", gate_multiplier=gate_multiplier, down_multiplier=down_multiplier, fn="silu_mul"
    )
    if up is None:
        _fail(TypeError, "silu_mul", "up must be a torch.Tensor, got NoneType")
    return _apply(gate, up, None, None, p, False, False, in_place, "silu_mul")


# ---- Megatron-Core signatures ----------------------------------------------------------------


_PLAIN_NUMBERS = (type(None), int, float)
_copysign = math.copysign
_MEGATRON_PARAMS = {}  # (activation, clamp_value, linear_offset, its sign) -> GLUParams, plain numbers only


def _megatron_params(activation, clamp_value, linear_offset, fn):
    """glu_params of a Megatron entry point, remembered for plain-number options (they are checked
    once; a tensor or any other option type is checked on every call). Not while torch.compile
    traces: dynamo would guard on the dict's contents and compile again once it changed."""
    if (
        type(clamp_value) in _PLAIN_NUMBERS
        and type(linear_offset) in _PLAIN_NUMBERS[1:]
        and clamp_value == clamp_value
        and linear_offset == linear_offset  # (not NaN: never equal)
        and not _is_compiling()
    ):
        # -0.0 == 0.0 as dict keys: the offset's sign goes into the key (v + o keeps it for v = -0.0)
        key = (activation, clamp_value, linear_offset, _copysign(1.0, linear_offset))
        p = _MEGATRON_PARAMS.get(key)
        if p is None:
            p = glu_params(
                activation, clamp_value=clamp_value, glu_linear_offset=linear_offset, fn=fn
            )
            if len(_MEGATRON_PARAMS) < 256:
                _MEGATRON_PARAMS[key] = p
        return p
    return glu_params(activation, clamp_value=clamp_value, glu_linear_offset=linear_offset, fn=fn)


_GELU_TANH = glu_params("gelu_tanh")  # bias_geglu_impl's params (it has no options)


def _megatron_input(input, fn):
    if not isinstance(input, torch.Tensor):
        _fail(TypeError, fn, f"input must be a torch.Tensor, got {type(input).__name__}")
    if input.dim() not in (2, 3):
        _fail(
            ValueError,
            fn,
            f"input must be 2D [tokens, 2F] or 3D [S, B, 2F] (Megatron asserts), got shape "
            f"{tuple(input.shape)}",
        )


def bias_swiglu_impl(input, bias, fp8_input_store=False, cpu_offload_input=False, clamp_value=None):
    """Megatron-Core ``megatron.core.fusions.fused_bias_swiglu.bias_swiglu_impl``, on the
    gated-linear-unit kernels: ``silu(gate + b_gate) * (up + b_up)``.

    Args:
        input: ``[tokens, 2F]`` or ``[S, B, 2F]`` (bf16 / fp16 / fp32).
        bias: None or ``[2F]`` of input's dtype; its gradient is returned as ``[2F]``.
        fp8_input_store: False; True (Megatron: the input saved as ``float8_e4m3fn``, the backward
            reads it as fp8); or ``"per_row"`` / ``"per_tensor"`` / ``"blockwise"`` (scaled, see
            ``fastglu.ops``'s docstring).
        cpu_offload_input: mark the saved input and bias with ``activation_offloading = True``.
        clamp_value: None, 0 or negative: no clamp; c > 0: gate <= c, |up| <= c, before the bias.

    Returns:
        ``[tokens, F]`` or ``[S, B, F]`` in the input's dtype.

    Raises:
        ValueError: input not 2D/3D, odd last dimension, bias not [2F], mixed devices.
        TypeError: dtypes.
    """
    fn = "bias_swiglu_impl"
    if type(input) is not _Tensor or not 2 <= input.dim() <= 3:
        _megatron_input(input, fn)  # raises naming the call (or passes a 2D / 3D subclass)
    p = SILU if clamp_value is None else _megatron_params("silu", clamp_value, 0.0, fn)
    return _apply(input, None, bias, None, p, fp8_input_store, cpu_offload_input, False, fn)


def weighted_bias_swiglu_impl(input, bias, weights, fp8_input_store=False, clamp_value=None):
    """Megatron-Core ``weighted_bias_swiglu_impl``: ``silu(gate) * up * weights`` (MoE probs).

    Args:
        input: ``[tokens, 2F]`` or ``[S, B, 2F]``.
        bias: must be None (NotImplementedError otherwise, as Megatron).
        weights: ``[tokens, 1]`` (or ``[tokens]``), float32 / bf16 / fp16; the output keeps the
            input's dtype; the weights' gradient is ``[tokens, 1]`` in the weights' dtype.
        fp8_input_store: as ``bias_swiglu_impl``.
        clamp_value: as ``bias_swiglu_impl``.

    Raises:
        NotImplementedError: a bias. ValueError / TypeError: as ``bias_swiglu_impl``, and weights
        not per-token.
    """
    fn = "weighted_bias_swiglu_impl"
    if type(input) is not _Tensor or not 2 <= input.dim() <= 3:
        _megatron_input(input, fn)  # raises naming the call (or passes a 2D / 3D subclass)
    if bias is not None:
        raise NotImplementedError(
            "fastglu.weighted_bias_swiglu_impl: Bias is not supported for weighted swiglu "
            "fusion (as Megatron-Core)"
        )
    if weights is None:
        _fail(TypeError, fn, "weights must be a torch.Tensor [tokens, 1], got None")
    p = SILU if clamp_value is None else _megatron_params("silu", clamp_value, 0.0, fn)
    return _apply(input, None, None, weights, p, fp8_input_store, False, False, fn)


def bias_geglu_impl(input, bias):
    """Megatron-Core ``megatron.core.fusions.fused_bias_geglu.bias_geglu_impl``: GeGLU with
    Megatron's tanh approximation, ``gelu_tanh(gate + b_gate) * (up + b_up)``.

    Args: input ``[tokens, 2F]`` or ``[S, B, 2F]``; bias None or ``[2F]`` (gradient ``[2F]``).
    Returns ``[tokens, F]`` / ``[S, B, F]``. Raises ValueError / TypeError as ``bias_swiglu_impl``.
    """
    fn = "bias_geglu_impl"
    if type(input) is not _Tensor or not 2 <= input.dim() <= 3:
        _megatron_input(input, fn)  # raises naming the call (or passes a 2D / 3D subclass)
    return _apply(input, None, bias, None, _GELU_TANH, False, False, False, fn)


def weighted_bias_quick_geglu_impl(
    input, bias, weights, fp8_input_store=False, linear_offset=0.0, clamp_value=None
):
    """Megatron-Core ``weighted_bias_quick_geglu_impl`` (GPT-OSS experts):
    ``quick_gelu(g' + b_gate) * (u' + b_up + linear_offset) * weights`` with g' = min(g, c),
    u' = clamp(u, -c, c) when clamp_value c > 0.

    Args:
        input: ``[tokens, 2F]`` or ``[S, B, 2F]``.
        bias: None or ``[2F]`` (gradient ``[2F]``).
        weights: ``[tokens, 1]`` (or ``[tokens]``), float32 / bf16 / fp16 (gradient in its dtype).
        fp8_input_store: as ``bias_swiglu_impl``; Megatron saves the clamped input (its mask comes
            from torch.clamp on the full-precision input); fastglu saves the operands moved to their
            side of the bound (a cut one just beyond it, which the backward clamps back to c), so
            the backward cuts exactly what the forward's clamp cut (module docstring).
        linear_offset: Megatron's ``glu_linear_offset`` (a float; kept in fp32, where Megatron
            rounds it to the input's dtype).
        clamp_value: None, 0 or negative: no clamp (Megatron 0.19 clamps for any non-None value;
            0 would zero the output); c > 0 as Megatron (torch.clamp on the input's dtype).

    Raises:
        ValueError / TypeError: as ``bias_swiglu_impl``, weights not per-token.
    """
    fn = "weighted_bias_quick_geglu_impl"
    if type(input) is not _Tensor or not 2 <= input.dim() <= 3:
        _megatron_input(input, fn)  # raises naming the call (or passes a 2D / 3D subclass)
    if weights is None:
        _fail(TypeError, fn, "weights must be a torch.Tensor [tokens, 1], got None")
    p = _megatron_params("quick_gelu", clamp_value, linear_offset, fn)
    return _apply(input, None, bias, weights, p, fp8_input_store, False, False, fn)


__all__ = [
    "GLUFunction",
    "SwiGLUFunction",
    "swiglu",
    "glu",
    "glu_mul",
    "silu_mul",
    "bias_swiglu_impl",
    "weighted_bias_swiglu_impl",
    "bias_geglu_impl",
    "weighted_bias_quick_geglu_impl",
    "glu_traced",
]
