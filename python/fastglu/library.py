"""fastglu's kernels as PyTorch operators (``torch.library``): for torch.compile, torch.export, DTensor.

Registered ops (namespace ``fastglu``; call them as ``torch.ops.fastglu.<name>``):

- ``swiglu_fwd(Tensor input) -> Tensor``: ``input [..., 2F]`` (2D ``[tokens, 2F]`` or 3D
  ``[S, B, 2F]``, bfloat16 / float16 / float32) -> ``y [..., F] = silu(gate) * up``, a new contiguous
  tensor of input's dtype and device (gate = ``input[..., :F]``, up = ``input[..., F:]``).
- ``swiglu_bwd(Tensor dy, Tensor input) -> Tensor``: ``dy [..., F]`` (any strides) and ``input`` ->
  ``dinput [..., 2F]``, a new contiguous tensor (Megatron-Core's ``swiglu_back``:
  ``d_gate = dy * up * s * (1 + gate * (1 - s))``, ``d_up = dy * silu(gate)``, ``s = sigmoid(gate)``).
- ``glu_fwd`` / ``glu_bwd``: the gated-linear-unit family of ``ops.py`` (every activation, bias,
  per-token weights, clamp, offset, multipliers, the interleaved layout, two (gate, up) tensors, an
  fp8 saved input for the backward); schemas and shapes in "the gated-linear-unit family" below.
  ``fastglu.glu``, ``glu_mul``, ``silu_mul`` and the Megatron-Core signatures reach them through
  ``functional.glu_traced`` while torch.compile / torch.export trace, else the eager
  ``functional.GLUFunction``.

Each op has CPU and CUDA kernels (the C library through ``ops.py``), a fake (meta)
implementation that gives torch.compile the outputs' shapes, strides and dtypes without running
anything, autograd (the ``*_fwd`` op's backward is the ``*_bwd`` op, which refuses to be
differentiated, as does a backward under ``create_graph=True``), and for SwiGLU a DTensor rule
(below; the glu ops have none). ``torch.library.opcheck`` passes on all four
(``tests/python/test_compile.py``, ``tests/python/test_compile_variants.py``).

Why two paths. ``fastglu.swiglu(x)`` on a plain tensor in eager mode does not use these ops: a
torch.library op with a Python autograd formula costs several microseconds more per call than the
lean ``autograd.Function`` in ``functional.py`` (``bench/host_memory.py`` prints both). It uses them
only while torch.compile / torch.export trace it (``torch.compiler.is_compiling()``), or for a
tensor subclass (DTensor, FakeTensor, ...); see ``functional.swiglu``. The other functions of
``functional.py`` likewise keep ``GLUFunction`` in eager mode (one ``is_compiling()`` check, about 0.1 us, in
front of it) and use the glu ops only while traced.

DTensor (tensor parallelism). An input sharded on its last dimension, ``Shard(-1)``, is taken in
Megatron-Core's tensor-parallel layout: each rank's local ``[..., 2F/tp]`` holds its own gate and
up slices (fc1 is column-parallel with rank r's weight rows = [gate rows r-th slice ; up rows r-th
slice]), so the op runs on each rank's local tensor with no communication and returns a DTensor
``Shard(-1)`` of global shape ``[..., F]`` (rank r's local is ``y``'s r-th column slice). The
backward likewise; an upstream gradient with other placements is first redistributed to the
output's. Any other input placement -- ``Replicate()``, ``Partial()``, or ``Shard`` on another
dimension without a ``Shard`` on the last one -- raises ValueError naming it: under this layout the
global tensor of a ``Shard(-1)`` input is ``[g_0 u_0 | g_1 u_1 | ...]``, not ``[gate | up]``, so the
same global value would mean two different things. On a multi-dimensional mesh the other mesh
dimensions may be ``Replicate()`` or ``Shard`` on a leading dimension (data parallel) as long as
one shards the last dimension. The rules are registered when ``torch.distributed.tensor`` is
already imported at ``import fastglu``, else on the first call of ``fastglu.swiglu`` with a tensor
subclass, or by ``register_dtensor_rules()``.

Adding a variant (an op family outside ``ops.py``'s; the glu ops below are registered this way):
call ``register_glu_ops`` once at import with the variant's schemas, its kernels, its fake
implementations (``glu_output_like`` builds the usual ones) and its autograd pair;
``glu_dtensor_rule`` gives the DTensor rule of any op whose tensor arguments are one [gate | up]
input and, for a backward, one upstream gradient. Then route the public function to
``torch.ops.fastglu.<name>_fwd`` when ``torch.compiler.is_compiling()`` (or for a non-plain
tensor), as ``functional.swiglu`` does.
"""

from __future__ import annotations

import math
import sys

import torch

from . import _C, ops

NAMESPACE = "fastglu"
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept alive: it owns every registration below
# torch.library's Python registration API (torch >= 2.5); without it the ops are not registered and
# fastglu.swiglu keeps its eager path everywhere (torch.compile then graph-breaks around it).
SUPPORTED = all(
    hasattr(torch.library, n)
    for n in ("register_fake", "register_autograd", "register_torch_dispatch")
)

_TAGS = (
    (torch.Tag.pt2_compliant_tag,)
    if hasattr(torch, "Tag") and hasattr(torch.Tag, "pt2_compliant_tag")
    else ()
)
_DTENSOR_RULES: list = []  # (qualname, rule), registered by register_dtensor_rules()
_dtensor_registered = False


def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1) if isinstance(n, int) else n
    return tuple(reversed(strides))


# ---- the generic registration helper -----------------------------------------------------------


def register_glu_ops(
    name: str,
    *,
    fwd_schema: str,
    bwd_schema: str,
    fwd_impl,
    bwd_impl,
    fwd_fake,
    bwd_fake,
    setup_context,
    backward,
    dtensor_fwd=None,
    dtensor_bwd=None,
):
    """Define ``fastglu::{name}_fwd`` and ``fastglu::{name}_bwd`` with kernels, fakes and autograd.

    Args:
        name: the op family's name, e.g. ``"swiglu"``; the ops are ``torch.ops.fastglu.{name}_fwd``
            and ``torch.ops.fastglu.{name}_bwd``.
        fwd_schema, bwd_schema: the schemas without the name, e.g. ``"(Tensor input) -> Tensor"``.
            Outputs must be new tensors (never a view of an input): the ops are functional.
        fwd_impl, bwd_impl: the CPU and CUDA kernels, ``f(*args) -> Tensor(s)`` on plain tensors.
        fwd_fake, bwd_fake: the same signatures on fake/meta tensors: validate what can be
            validated from metadata and return empty outputs with exactly the real outputs' shapes,
            strides and dtypes.
        setup_context: ``(ctx, inputs, output) -> None``; save what ``backward`` needs.
        backward: ``(ctx, *grads) -> grads`` of every forward input (None for non-tensors); it
            should call ``torch.ops.fastglu.{name}_bwd`` so that compiled graphs contain it.
        dtensor_fwd, dtensor_bwd: optional DTensor rules ``(cls, func, types, args, kwargs)``, e.g.
            from ``glu_dtensor_rule``; registered by ``register_dtensor_rules()``.

    Returns:
        ``(fwd, bwd)``: the two ``torch._ops.OpOverload`` objects.
    """
    fwd_q, bwd_q = f"{NAMESPACE}::{name}_fwd", f"{NAMESPACE}::{name}_bwd"
    for qualname, schema, impl, fake in (
        (fwd_q, fwd_schema, fwd_impl, fwd_fake),
        (bwd_q, bwd_schema, bwd_impl, bwd_fake),
    ):
        torch.library.define(qualname, schema, lib=_LIB, tags=_TAGS)
        torch.library.impl(qualname, ("cpu", "cuda"), impl, lib=_LIB)
        torch.library.register_fake(qualname, fake, lib=_LIB)
    torch.library.register_autograd(fwd_q, backward, setup_context=setup_context, lib=_LIB)

    ops.register_no_gradient(
        bwd_q,
        _LIB,
        f"fastglu.{name}: double backward is not supported; the {name} backward "
        "kernel is not differentiable",
    )
    for qualname, rule in ((fwd_q, dtensor_fwd), (bwd_q, dtensor_bwd)):
        if rule is not None:
            _DTENSOR_RULES.append((qualname, rule))
            if _dtensor_registered:
                _register_rule(qualname, rule)
    ns = getattr(torch.ops, NAMESPACE)
    return getattr(ns, f"{name}_fwd").default, getattr(ns, f"{name}_bwd").default


# ---- fake (meta) implementations ----------------------------------------------------------------


def check_glu_meta(x, fn: str, name: str = "input"):
    """The checks of ``ops.check_input`` that need no data nor device: dtype, rank, even last
    dimension. Raises TypeError / ValueError as the kernels do. Returns F (maybe symbolic)."""
    if x.dtype not in ops._COMPUTE_CODES:
        raise TypeError(
            f"fastglu.{fn}: {name} has dtype {x.dtype}; expected torch.bfloat16, torch.float16 "
            "or torch.float32"
        )
    if x.dim() not in (2, 3):
        raise ValueError(
            f"fastglu.{fn}: {name} must be 2D [tokens, 2F] or 3D [S, B, 2F], got shape {tuple(x.shape)}"
        )
    if x.shape[-1] % 2:
        raise ValueError(
            f"fastglu.{fn}: {name}'s last dimension (gate | up) must be even, got shape {tuple(x.shape)}"
        )
    return x.shape[-1] // 2


def glu_output_like(x: torch.Tensor, width) -> torch.Tensor:
    """An empty contiguous tensor of x's leading shape + (width,), x's dtype and device: what the
    kernels return (``ops.swiglu_fwd``/``swiglu_bwd`` allocate with ``new_empty``)."""
    return x.new_empty((*x.shape[:-1], width))


def _swiglu_fwd_fake(input):
    return glu_output_like(input, check_glu_meta(input, "swiglu_fwd"))


def _swiglu_bwd_fake(dy, input):
    F = check_glu_meta(input, "swiglu_bwd")
    if dy.dtype != input.dtype:
        raise TypeError(
            f"fastglu.swiglu_bwd: dy has dtype {dy.dtype} but input has dtype {input.dtype}"
        )
    if dy.device != input.device:
        raise ValueError(f"fastglu.swiglu_bwd: dy is on {dy.device} but input is on {input.device}")
    if tuple(dy.shape) != (*input.shape[:-1], F):
        raise ValueError(
            f"fastglu.swiglu_bwd: dy has shape {tuple(dy.shape)}; expected "
            f"{(*input.shape[:-1], F)} for input {tuple(input.shape)}"
        )
    return glu_output_like(input, input.shape[-1])


# ---- DTensor --------------------------------------------------------------------------------------


def check_glu_dtensor(x, fn: str, name: str = "input"):
    """Validate a DTensor [gate | up] input in Megatron's tensor-parallel layout (see the module
    docstring). Returns (mesh, placements). Raises ValueError naming any placement it refuses, or a
    last dimension that does not split into an even, equal width per rank."""
    from torch.distributed.tensor import Replicate, Shard

    check_glu_meta(x, fn, name)
    ndim, placements = x.ndim, tuple(x.placements)
    last = [i for i, p in enumerate(placements) if type(p) is Shard and p.dim in (ndim - 1, -1)]
    bad = [p for p in placements if type(p) is not Shard and type(p) is not Replicate]
    if bad or not last:
        if bad:
            why = (
                f"{', '.join(map(repr, bad))} is not supported (a partial sum, or any placement other than "
                "Shard and Replicate, cannot go through the activation)"
            )
        else:
            why = (
                f"{', '.join(map(repr, placements))} does not shard the last dimension, and the [gate | up] "
                "split of such a global tensor is not the tensor-parallel one (redistribute it to Shard(-1) in "
                "that layout, or call fastglu on x.full_tensor())"
            )
        raise ValueError(
            f"fastglu.{fn}: a DTensor {name} must be sharded on its last dimension, Shard(-1) (Megatron's "
            f"tensor-parallel layout: each rank's local [..., 2F/tp] holds its own gate and up slices); got "
            f"placements {placements}: {why}"
        )
    mesh = x.device_mesh
    shards = math.prod(mesh.size(i) for i in last)
    width = x.shape[-1]
    if width % (2 * shards):
        raise ValueError(
            f"fastglu.{fn}: a DTensor {name} of global shape {tuple(x.shape)} is sharded {shards} ways "
            f"on its last dimension; its width {width} must be a multiple of 2 x {shards} so that "
            "every rank holds an even, equal [gate | up] slice"
        )
    return mesh, placements


def _from_local(local, x, mesh, placements, width):
    from torch.distributed.tensor import DTensor

    shape = torch.Size((*x.shape[:-1], width))
    return DTensor.from_local(
        local, mesh, placements, run_check=False, shape=shape, stride=_contiguous_strides(shape)
    )


def glu_dtensor_rule(fn: str, *, input_arg: int, out_width, dy_arg: int | None = None):
    """A DTensor rule for an op whose DTensor arguments are one [gate | up] input (at position
    ``input_arg``, checked by ``check_glu_dtensor``) and, optionally, the upstream gradient (at
    ``dy_arg``, redistributed to the input's placements when they differ). The op runs on the local
    tensors; its single output is a DTensor with the input's placements and global shape
    ``input.shape[:-1] + (out_width(input.shape[-1]),)``. Non-tensor arguments pass through."""

    def rule(cls, func, types, args, kwargs):
        from torch.distributed.tensor import DTensor

        args = list(args)
        x = args[input_arg]
        if not isinstance(x, DTensor):
            raise TypeError(
                f"fastglu.{fn}: input must be a DTensor when other arguments are DTensors "
                f"(got {type(x).__name__})"
            )
        mesh, placements = check_glu_dtensor(x, fn)
        args[input_arg] = x.to_local()
        if dy_arg is not None:
            dy = args[dy_arg]
            if not isinstance(dy, DTensor):
                raise TypeError(
                    f"fastglu.{fn}: dy must be a DTensor when input is one (got {type(dy).__name__})"
                )
            if dy.device_mesh != mesh:
                raise ValueError(
                    f"fastglu.{fn}: dy is on device mesh {dy.device_mesh} but input is on {mesh}"
                )
            if tuple(dy.placements) != placements:
                dy = dy.redistribute(mesh, placements)
            args[dy_arg] = dy.to_local()
        for i, a in enumerate(args):
            if isinstance(a, DTensor):
                raise TypeError(
                    f"fastglu.{fn}: argument {i} is a DTensor; this rule takes only the input and dy"
                )
        return _from_local(func(*args, **kwargs), x, mesh, placements, out_width(x.shape[-1]))

    return rule


def dtensor_local_call(x, local_fn, fn: str, out_width):
    """``local_fn`` (any autograd-aware function of a plain [gate | up] tensor) on each rank's local
    tensor of a DTensor x in Megatron's layout, through DTensor's differentiable ``to_local`` and
    ``from_local`` (whose backward redistributes the upstream gradient to the output's placements)."""
    mesh, placements = check_glu_dtensor(x, fn)
    return _from_local(local_fn(x.to_local()), x, mesh, placements, out_width(x.shape[-1]))


def _register_rule(qualname, rule):
    from torch.distributed.tensor import DTensor

    torch.library.register_torch_dispatch(qualname, DTensor, rule, lib=_LIB)


def register_dtensor_rules():
    """Register the DTensor rules of every fastglu op (importing ``torch.distributed.tensor``, about
    a second the first time, which is why ``import fastglu`` does not do it unless it is loaded).
    Idempotent. Returns False when torch.distributed is not available."""
    global _dtensor_registered
    if _dtensor_registered:
        return True
    if not torch.distributed.is_available():
        return False
    _dtensor_registered = True
    for qualname, rule in _DTENSOR_RULES:
        _register_rule(qualname, rule)
    return True


def is_dtensor(x) -> bool:
    """Whether x is a DTensor, without importing torch.distributed.tensor (it cannot be one unless
    that module is loaded)."""
    mod = sys.modules.get("torch.distributed.tensor")
    return mod is not None and isinstance(x, mod.DTensor)


# ---- SwiGLU ---------------------------------------------------------------------------------------


def _swiglu_fwd_impl(input):
    return ops.swiglu_fwd(input, fn="swiglu_fwd")


def _swiglu_bwd_impl(dy, input):
    return ops.swiglu_bwd(dy, input, fn="swiglu_bwd")


def _swiglu_setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _swiglu_backward(ctx, dy):
    ops.refuse_create_graph("swiglu")
    return torch.ops.fastglu.swiglu_bwd(dy, ctx.saved_tensors[0])


swiglu_fwd = swiglu_bwd = None
if SUPPORTED:
    swiglu_fwd, swiglu_bwd = register_glu_ops(
        "swiglu",
        fwd_schema="(Tensor input) -> Tensor",
        bwd_schema="(Tensor dy, Tensor input) -> Tensor",
        fwd_impl=_swiglu_fwd_impl,
        bwd_impl=_swiglu_bwd_impl,
        fwd_fake=_swiglu_fwd_fake,
        bwd_fake=_swiglu_bwd_fake,
        setup_context=_swiglu_setup_context,
        backward=_swiglu_backward,
        dtensor_fwd=glu_dtensor_rule("swiglu_fwd", input_arg=0, out_width=lambda w: w // 2),
        dtensor_bwd=glu_dtensor_rule("swiglu_bwd", input_arg=1, dy_arg=0, out_width=lambda w: w),
    )


if (
    SUPPORTED and "torch.distributed.tensor" in sys.modules
):  # a DTensor program imported it first: no extra cost
    register_dtensor_rules()


# ---- the gated-linear-unit family (ops.py) ---------------------------------------------------------
#
# One generic pair of ops serves every variant of ops.py (activation, layout, clamp, offset and
# multipliers are schema scalars; the optional tensors say which of bias / weights / two-tensor
# form / fp8 saved input a call uses):
#
#   glu_fwd(input, up?, bias?, weights?, activation, layout, clamp_value, glu_linear_offset,
#           gate_multiplier, down_multiplier) -> y
#   glu_bwd(dy, input, up?, bias?, weights?, input_scale_inv?, <the same six scalars>,
#           want_dbias, want_dweights) -> (d_input, d_up?, dbias?, dweights?)
#
# The scalars are an ops.GLUParams in order (``ops.glu_params`` builds it from the public options):
# activation = 0 silu / 1 gelu_tanh / 2 quick_gelu, layout = 0 split [gate | up] (or two tensors) /
# 1 interleaved. Shapes, dtypes and errors are those of ``ops.forward`` / ``ops.backward``,
# which the CPU and CUDA implementations call: y [..., F] contiguous in the input's dtype; d_input
# of input's shape (the [..., 2F] input, or the gate [..., F] in the two-tensor form) and d_up of
# up's (None without up), contiguous, in dy's dtype; dbias [2F] in dy's dtype (None unless
# want_dbias); dweights of the weights' shape and dtype, contiguous (None unless want_dweights).
# ``input`` / ``up`` of glu_bwd may be the saved input as torch.float8_e4m3fn, then decoded as
# fp8 * input_scale_inv (None: scale 1; one float32 value, or one per token).

GLU_FWD_SCHEMA = (
    "(Tensor input, Tensor? up, Tensor? bias, Tensor? weights, int activation, int layout, "
    "float clamp_value, float glu_linear_offset, float gate_multiplier, float down_multiplier) "
    "-> Tensor"
)
GLU_BWD_SCHEMA = (
    "(Tensor dy, Tensor input, Tensor? up, Tensor? bias, Tensor? weights, Tensor? input_scale_inv, "
    "int activation, int layout, float clamp_value, float glu_linear_offset, float gate_multiplier, "
    "float down_multiplier, bool want_dbias, bool want_dweights) "
    "-> (Tensor d_input, Tensor? d_up, Tensor? dbias, Tensor? dweights)"
)

_GLU_COMPUTE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _glu_fwd_impl(input, up, bias, weights, *scalars):
    return ops.forward(ops.op_params("glu_fwd", *scalars), input, up, bias, weights, fn="glu_fwd")


def _glu_bwd_impl(dy, input, up, bias, weights, input_scale_inv, *rest):
    *scalars, want_dbias, want_dweights = rest
    g = ops.backward(
        ops.op_params("glu_bwd", *scalars),
        dy,
        input,
        up,
        bias,
        weights,
        input_scale_inv=input_scale_inv,
        want_dbias=want_dbias,
        want_dweights=want_dweights,
        fn="glu_bwd",
    )
    return g.dx, g.d_up, g.dbias, g.dweights


def _glu_meta_tensor(t, fn, name, dtypes):
    ops.check_dense(t, fn, name)
    if t.dtype not in dtypes:
        raise TypeError(
            f"fastglu.{fn}: {name} has dtype {t.dtype}; expected "
            f"{' / '.join(str(d) for d in dtypes)}"
        )


def _glu_meta_operands(input, up, layout, fn, dtypes):
    """The checks of ops._operands that need no data: (leading shape, F). Raises as it does."""
    if up is None:
        _glu_meta_tensor(input, fn, "input", dtypes)
        if input.dim() < 1:
            raise ValueError(
                f"fastglu.{fn}: input must have at least one dimension [..., 2F], got a 0-dim tensor"
            )
        if input.shape[-1] % 2:
            raise ValueError(
                f"fastglu.{fn}: input's last dimension (gate | up) must be even, got shape "
                f"{tuple(input.shape)}"
            )
        return tuple(input.shape[:-1]), input.shape[-1] // 2
    if layout == _C.LAYOUT_INTERLEAVED:
        raise ValueError(
            f"fastglu.{fn}: interleaved=True takes one [..., 2F] input, not separate gate and up tensors"
        )
    _glu_meta_tensor(input, fn, "gate", dtypes)
    _glu_meta_tensor(up, fn, "up", dtypes)
    if input.dim() < 1:
        raise ValueError(
            f"fastglu.{fn}: gate must have at least one dimension [..., F], got a 0-dim tensor"
        )
    if up.shape != input.shape:
        raise ValueError(
            f"fastglu.{fn}: up has shape {tuple(up.shape)} but gate has shape {tuple(input.shape)}"
        )
    if up.dtype != input.dtype:
        raise TypeError(f"fastglu.{fn}: up has dtype {up.dtype} but gate has dtype {input.dtype}")
    if up.device != input.device:
        raise ValueError(f"fastglu.{fn}: up is on {up.device} but gate is on {input.device}")
    return tuple(input.shape[:-1]), input.shape[-1]


def _glu_meta_extras(bias, weights, lead, F, dtype, device, fn):
    """ops._check_bias and ops._check_weights on metadata: bias [2F] of dtype, per-token weights."""
    if bias is not None:
        _glu_meta_tensor(bias, fn, "bias", _GLU_COMPUTE_DTYPES)
        if bias.dtype != dtype:
            raise TypeError(
                f"fastglu.{fn}: bias has dtype {bias.dtype} but the input has dtype {dtype}"
            )
        if bias.device != device:
            raise ValueError(f"fastglu.{fn}: bias is on {bias.device} but the input is on {device}")
        if tuple(bias.shape) != (2 * F,):
            raise ValueError(
                f"fastglu.{fn}: bias has shape {tuple(bias.shape)}; expected [2F] = ({2 * F},) "
                f"([b_gate | b_up]) for F = {F}"
            )
    if weights is not None:
        ops.check_weights_meta(weights, lead, device, fn)


def _glu_fwd_fake(input, up, bias, weights, *scalars):
    p = ops.op_params("glu_fwd", *scalars)
    lead, F = _glu_meta_operands(input, up, p.layout, "glu_fwd", _GLU_COMPUTE_DTYPES)
    _glu_meta_extras(bias, weights, lead, F, input.dtype, input.device, "glu_fwd")
    return input.new_empty((*lead, F))


def _glu_bwd_fake(dy, input, up, bias, weights, input_scale_inv, *rest):
    *scalars, want_dbias, want_dweights = rest
    fn = "glu_bwd"
    p = ops.op_params(fn, *scalars)
    lead, F = _glu_meta_operands(
        input, up, p.layout, fn, _GLU_COMPUTE_DTYPES + (torch.float8_e4m3fn,)
    )
    _glu_meta_tensor(dy, fn, "dy", _GLU_COMPUTE_DTYPES)
    if dy.device != input.device:
        raise ValueError(f"fastglu.{fn}: dy is on {dy.device} but the input is on {input.device}")
    if input.dtype != torch.float8_e4m3fn and dy.dtype != input.dtype:
        raise TypeError(
            f"fastglu.{fn}: dy has dtype {dy.dtype} but the input has dtype {input.dtype}"
        )
    if tuple(dy.shape) != (*lead, F):
        raise ValueError(
            f"fastglu.{fn}: dy has shape {tuple(dy.shape)}; expected {(*lead, F)} for the input's shape"
        )
    _glu_meta_extras(bias, weights, lead, F, dy.dtype, input.device, fn)
    if input_scale_inv is not None:
        if input.dtype != torch.float8_e4m3fn:
            raise ValueError(
                f"fastglu.{fn}: input_scale_inv is given but the saved input has dtype {input.dtype}, "
                "not torch.float8_e4m3fn (a scale only applies to an fp8 input)"
            )
        _glu_meta_tensor(input_scale_inv, fn, "input_scale_inv", (torch.float32,))
        if input_scale_inv.device != input.device:
            raise ValueError(
                f"fastglu.{fn}: input_scale_inv is on {input_scale_inv.device} but the input is on "
                f"{input.device}"
            )
        tokens = math.prod(lead)
        nb = ops.scale_blocks(p.layout, F)
        if input_scale_inv.numel() != 1 and not ops.shape_is_one_of(
            input_scale_inv.shape,
            (tokens,),
            (tokens, 1),
            lead,
            lead + (1,),
            (tokens, nb),
            lead + (nb,),
        ):
            raise ValueError(
                f"fastglu.{fn}: input_scale_inv has shape {tuple(input_scale_inv.shape)}; expected one "
                f"value, one per token ({tokens}) or one per 1 x 128 block of each row ({tokens}, "
                f"{nb})"
            )
    if want_dbias and bias is None:
        raise ValueError(f"fastglu.{fn}: want_dbias=True needs a bias")
    if want_dweights and weights is None:
        raise ValueError(f"fastglu.{fn}: want_dweights=True needs weights")
    return (
        dy.new_empty(input.shape),
        None if up is None else dy.new_empty(up.shape),
        dy.new_empty((2 * F,)) if want_dbias else None,
        weights.new_empty(weights.shape) if want_dweights else None,
    )


def _glu_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:4])
    ctx.scalars = tuple(inputs[4:])


def _glu_backward(ctx, dy):
    ops.refuse_create_graph("glu")
    x, up, bias, weights = ctx.saved_tensors
    need = ctx.needs_input_grad
    dx, d_up, dbias, dweights = torch.ops.fastglu.glu_bwd(
        dy,
        x,
        up,
        bias,
        weights,
        None,
        *ctx.scalars,
        bias is not None and need[2],
        weights is not None and need[3],
    )
    return (dx, d_up, dbias, dweights) + (None,) * 6


glu_fwd = glu_bwd = None
if SUPPORTED:
    glu_fwd, glu_bwd = register_glu_ops(
        "glu",
        fwd_schema=GLU_FWD_SCHEMA,
        bwd_schema=GLU_BWD_SCHEMA,
        fwd_impl=_glu_fwd_impl,
        bwd_impl=_glu_bwd_impl,
        fwd_fake=_glu_fwd_fake,
        bwd_fake=_glu_bwd_fake,
        setup_context=_glu_setup_context,
        backward=_glu_backward,
    )


# fastglu::fp8_store_blockwise(x, up?, <the six scalars>) -> (x8, up8, scale_inv): the blockwise
# saved copy (ops._fp8_store_blockwise: one C call, fastglu_glu_fp8_store_blockwise_*) as an op, so
# that a compiled graph calls the kernel (tests/python/test_compile_variants.py,
# test_compiled_blockwise_store_is_the_eager_one). up8 is empty when up is None.
FP8_STORE_BLOCKWISE_SCHEMA = (
    "(Tensor x, Tensor? up, int activation, int layout, float clamp_value, "
    "float glu_linear_offset, float gate_multiplier, float down_multiplier) "
    "-> (Tensor, Tensor, Tensor)"
)


def _fp8_store_blockwise_impl(x, up, *scalars):
    p = ops.op_params("glu", *scalars)
    x8, up8, scale_inv = ops._fp8_store_blockwise(x, up, p, "glu")
    return x8, (x.new_empty(0, dtype=ops._FP8) if up8 is None else up8), scale_inv


def _fp8_store_blockwise_fake(x, up, *scalars):
    p = ops.op_params("glu", *scalars)
    ops._check_fp8_store(x, up, p, "glu")
    F = x.shape[-1] if up is not None else x.shape[-1] // 2
    tokens = math.prod(x.shape[:-1])
    return (
        x.new_empty(x.shape, dtype=ops._FP8),
        x.new_empty(0, dtype=ops._FP8) if up is None else up.new_empty(up.shape, dtype=ops._FP8),
        x.new_empty((tokens, ops.scale_blocks(p.layout, F)), dtype=torch.float32),
    )


if SUPPORTED:
    torch.library.define(
        f"{NAMESPACE}::fp8_store_blockwise", FP8_STORE_BLOCKWISE_SCHEMA, lib=_LIB, tags=_TAGS
    )
    torch.library.impl(
        f"{NAMESPACE}::fp8_store_blockwise", ("cpu", "cuda"), _fp8_store_blockwise_impl, lib=_LIB
    )
    torch.library.register_fake(
        f"{NAMESPACE}::fp8_store_blockwise", _fp8_store_blockwise_fake, lib=_LIB
    )
    ops.register_no_gradient(
        f"{NAMESPACE}::fp8_store_blockwise",
        _LIB,
        "fastglu::fp8_store_blockwise: the saved fp8 copy and its scales have no gradient "
        "(quantisation is not differentiable)",
    )


class GLUSavedFp8(torch.autograd.Function):
    """``fp8_input_store`` under torch.compile: the forward op, the input saved as fp8 with plain
    torch ops (``x.to(torch.float8_e4m3fn)``, the values the eager forward kernel writes; or
    ``ops._fp8_store``'s scaled copy), and the backward op reading it. Dynamo traces it whole."""

    @staticmethod
    def forward(ctx, x, up, bias, weights, scalars, fp8):
        y = torch.ops.fastglu.glu_fwd(x, up, bias, weights, *scalars)
        params = ops.GLUParams(*scalars)
        if (
            fp8 is True
        ):  # the bytes the eager forward kernel writes (with a clamp: ops._fp8_operands)
            (x8, up8), scale_inv = ops._fp8_cast(params, x, up, "glu"), None
        elif fp8 == "blockwise":  # one opaque op (fp8_store_blockwise above)
            x8, up8, scale_inv = torch.ops.fastglu.fp8_store_blockwise(x, up, *scalars)
            up8 = None if up is None else up8
        else:
            x8, up8, scale_inv = ops._fp8_store(fp8, x, up, params, "glu")
        ctx.save_for_backward(x8, up8, bias, weights, scale_inv)
        ctx.scalars = scalars
        return y

    @staticmethod
    def backward(ctx, dy):
        ops.refuse_create_graph("glu")
        x8, up8, bias, weights, scale_inv = ctx.saved_tensors
        need = ctx.needs_input_grad
        dx, d_up, dbias, dweights = torch.ops.fastglu.glu_bwd(
            dy,
            x8,
            up8,
            bias,
            weights,
            scale_inv,
            *ctx.scalars,
            bias is not None and need[2],
            weights is not None and need[3],
        )
        return dx, d_up, dbias, dweights, None, None
