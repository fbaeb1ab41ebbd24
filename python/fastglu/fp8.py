"""The gated-linear-unit activation quantised to FP8 for the next GEMM, in the pass computing it.

``glu_fp8(x, ...)`` computes the family's forward (``fastglu.glu``'s math and options) and writes y
as ``torch.float8_e4m3fn`` with fp32 scales in the layouts ``torch._scaled_mm`` takes (docs/fp8.md,
include/fastglu.h "The activation quantised to FP8"):

- ``scaling="block"`` (DeepSeek-V3's fine-grained recipe): ``y_fp8 [T, F]`` with one scale per 1 x
  128 block along the channels, ``scale [T, ceil(F/128)]``; with ``columnwise=True`` also the
  transposed copy ``y_t [F, T]`` (for the weight gradient) with one scale per 128 tokens, ``scale_t
  [F, ceil(T/128)]``, written by the same kernel.
- ``scaling="tensor"``: one scale for the tensor (current scaling; two kernels: the amax, then the
  quantisation), a 0-dim fp32 ``scale``; ``y_t`` then shares it (``scale_t`` is empty).

The recipe: y rounded to x's dtype (the value ``fastglu.glu`` returns) is quantised; scale =
amax(|y| over the block) / 448 in fp32 (1 for an all-zero block; NaN for a block holding a NaN,
+inf for one holding +-inf), rounded up to a power of two with ``pow2_scales=True``; data = e4m3
cast of y / scale (fp32 division, round to nearest even, saturating). ``y ~ data.float() * scale``.

Scale layouts: ``scale_layout="mn_major"`` (default) gives ``scale`` strides (1, T): what
``torch._scaled_mm`` takes for 1 x 128 blocks (``y_fp8`` as mat_a: ``_scaled_mm(y_fp8, w2_fp8.t(),
scale, w2_scale.t(), ...)``), and ``scale_t`` strides (1, F) (``y_t.t()`` as mat2 of the weight
gradient takes ``scale_t.t()``); ``"row_major"`` gives contiguous scales.

``glu_bwd_fp8(dy, x, ...)`` quantises the input's gradient dh [T, 2F] the same way (row-wise for
fc1's dgrad, column-wise for its weight gradient), in the pass that computes it, and with ``bias``
/ ``weights`` reduces their gradients in the same pass (``dbias [2F]`` in x's dtype and h's layout,
``dweights`` of the weights' shape and dtype: ``fastglu.glu``'s backward's values to fp32 rounding,
a fixed summation order, bitwise reproducible, the CPU's equal to the kernel's).

The ops are ``torch.ops.fastglu.glu_fwd_fp8`` and ``glu_bwd_fp8`` (torch.library, with a fake
implementation: compiles without graph breaks). The quantised outputs carry no gradient.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from . import _C
from . import ops as _ops

__all__ = [
    "FP8GradOutput",
    "FP8Output",
    "FP8Quantized",
    "FP8Blockwise",
    "glu_bwd_fp8",
    "glu_fp8",
    "quantize_fp8",
    "store_blockwise",
]

_SCALINGS = {"block": _C.FP8_SCALING_BLOCK_1X128, "tensor": _C.FP8_SCALING_TENSOR}
_SCALE_LAYOUTS = {"mn_major": _C.FP8_SCALES_MN_MAJOR, "row_major": _C.FP8_SCALES_ROW_MAJOR}
_SCALING_CODES = {code: name for name, code in _SCALINGS.items()}
_SCALE_LAYOUT_CODES = {code: name for name, code in _SCALE_LAYOUTS.items()}
FP8 = torch.float8_e4m3fn


class FP8Output(NamedTuple):
    data: torch.Tensor  # y_fp8 [..., F] float8_e4m3fn
    scale: torch.Tensor  # [T, ceil(F/128)] fp32 (block) or 0-dim (tensor)
    data_t: torch.Tensor | None  # y_t [F, T] or None
    scale_t: torch.Tensor | None  # [F, ceil(T/128)] or None
    y: torch.Tensor | None  # y [..., F] in x's dtype, when asked


class FP8GradOutput(NamedTuple):
    """glu_bwd_fp8's result: FP8Output's fields for dh (y: dh itself), then the reductions."""

    data: torch.Tensor  # dh_fp8 [..., 2F] float8_e4m3fn
    scale: torch.Tensor  # [T, ceil(2F/128)] fp32 (block) or 0-dim (tensor)
    data_t: torch.Tensor | None  # dh_t [2F, T] or None
    scale_t: torch.Tensor | None  # [2F, ceil(T/128)] or None
    y: torch.Tensor | None  # dh [..., 2F] in x's dtype, when asked (return_dh)
    dbias: torch.Tensor | None  # [2F] in x's dtype (h's layout), when bias is given
    dweights: torch.Tensor | None  # the weights' shape and dtype, when weights are given


class FP8Blockwise(NamedTuple):
    """store_blockwise's result: the operands' blockwise FP8 copy, glu_bwd_fp8's input_scale_inv
    operands."""

    data: torch.Tensor  # x's codes, x's shape, float8_e4m3fn
    data_up: torch.Tensor | None  # up's codes (up given), up's shape
    scale_inv: torch.Tensor  # [T, blocks] fp32, one per 1 x 128 block of each row


def _blocks(n: int) -> int:
    return (n + 127) // 128


def _round4(n: int) -> int:
    return (n + 3) // 4 * 4


def _scales(rows: int, nb: int, layout: int, device, pad: bool = False) -> torch.Tensor:
    """[rows, nb] fp32 scales in the layout: MN-major (strides (1, rows)), or row-major, its row
    stride padded to a multiple of 4 with ``pad`` (torch._scaled_mm's 128 x 128 layout)."""
    if layout == _C.FP8_SCALES_MN_MAJOR:
        return torch.empty((nb, rows), dtype=torch.float32, device=device).t()
    ld = _round4(nb) if pad else nb
    return torch.empty((rows, ld), dtype=torch.float32, device=device)[:, :nb]


def _scale_ld(s: torch.Tensor, layout: int) -> int:
    """The scales' leading dimension in the C sense (fastglu_fp8_scale_layout)."""
    return s.stride(1) if layout == _C.FP8_SCALES_MN_MAJOR else s.stride(0)


def _check_x(x, fn: str, name: str = "x", any_dtype: bool = False) -> None:
    """x: a dense tensor on the CPU or CUDA (the kernels' operand) of a compute dtype (bf16 /
    fp16 / fp32); with ``any_dtype`` the caller checks the dtype."""
    if not isinstance(x, torch.Tensor):
        _ops._fail(TypeError, fn, f"{name} must be a tensor, got {type(x).__name__}")
    _ops.check_dense(x, fn, name)
    if not any_dtype and x.dtype not in _ops._COMPUTE_CODES:
        _ops._fail(TypeError, fn, f"{name}.dtype = {x.dtype} is not bfloat16, float16 or float32")
    if x.device.type not in ("cpu", "cuda"):
        _ops._fail(ValueError, fn, f"{name} is on {x.device}; CPU or CUDA tensors only")


def _outputs(T, F, device, dtype, scaling, layout, columnwise, want_y):
    data = torch.empty((T, F), dtype=FP8, device=device)
    block = scaling == _C.FP8_SCALING_BLOCK_1X128
    scale = (
        _scales(T, _blocks(F), layout, device)
        if block
        else torch.empty((), dtype=torch.float32, device=device)
    )
    data_t = torch.empty((F, T) if columnwise else (0,), dtype=FP8, device=device)
    scale_t = (
        _scales(F, _blocks(T), layout, device)
        if columnwise and block
        else torch.empty((0,), dtype=torch.float32, device=device)
    )
    y = torch.empty((T, F) if want_y else (0,), dtype=dtype, device=device)
    return data, scale, data_t, scale_t, y


def _as_rows(t: torch.Tensor, width: int, name: str) -> torch.Tensor:
    """t as a [T, width] view with unit column stride (a copy only when no such view exists, or
    where t has the negative bit set: its memory holds the values before the negation)."""
    t = t.resolve_neg()
    r = t.reshape(-1, width) if width else t.flatten(0, -2)  # reshape(-1, 0) fails
    if r.stride(-1) != 1 or (r.shape[0] > 1 and r.stride(0) < width):
        r = r.contiguous()
    return r


def _run(
    dy,
    x,
    up,
    bias,
    weights,
    activation,
    layout,
    clamp_value,
    glu_linear_offset,
    gate_multiplier,
    down_multiplier,
    scaling,
    scale_layout,
    pow2_scales,
    columnwise,
    want_y,
    scale_inv=None,
    copy=False,
):
    """The kernels on checked operands. scale_inv (the backward): x (and up) are the blockwise copy
    of the operands (float8_e4m3fn codes, fastglu.ops' fp8_store_blockwise) with these [T, blocks]
    fp32 scales, decoded in the kernel's pass (fastglu_glu_bwd_fp8_saved_blockwise); dy's dtype is
    then the call's. copy (the forward, x holding gate and up, no up given): the call also writes
    that blockwise copy of x (fastglu_glu_fwd_fp8_copy_blockwise: in the forward's kernel where
    its conditions hold, else the copy's own after it), returned after the outputs as (x8,
    scale_inv), fp8_store_blockwise's."""
    il = layout == _C.LAYOUT_INTERLEAVED
    cdt = dy.dtype if scale_inv is not None else x.dtype  # the call's dtype
    F = x.shape[-1] // 2 if (up is None) else x.shape[-1]
    g = _as_rows(x, x.shape[-1], "input")
    T = g.shape[0]
    u_ptr, u_rs = 0, 0
    if up is not None:
        u = _as_rows(up, F, "up")
        u_ptr, u_rs = u.data_ptr(), u.stride(0)
    elif not il:
        u_ptr, u_rs = g.data_ptr() + F * g.element_size(), g.stride(0)
    b = bias.resolve_neg().contiguous() if bias is not None else None
    # (resolve_neg: a tensor with the negative bit set is negated lazily, its memory holding the
    # values before the negation, which is what the kernel would read)
    w = weights.resolve_neg().reshape(-1) if weights is not None else None
    X = 2 * F if dy is not None else F  # the quantised operand's width: y [T, F] or dh [T, 2F]
    data, scale, data_t, scale_t, y = _outputs(
        T, X, x.device, cdt, scaling, scale_layout, columnwise, want_y
    )
    on_cuda = x.device.type == "cuda"
    ws = None
    # the backward's sums: dbias with bias, dweights with weights (empty tensors otherwise)
    db, dw = _sums(dy is not None, bias, weights, T, F, y)
    want_db, want_dw = db.numel() > 0, dw.numel() > 0
    if want_db or want_dw:  # the partials: a workspace on both backends
        n = _C.glu_bwd_fp8_workspace_bytes(scaling, T, F, int(want_db), int(want_dw))
        ws = torch.empty((n,), dtype=torch.uint8, device=x.device)
    elif on_cuda and scaling == _C.FP8_SCALING_TENSOR:
        ws = torch.empty((_C.FP8_WORKSPACE_BYTES_TENSOR,), dtype=torch.uint8, device=x.device)
    block = scaling == _C.FP8_SCALING_BLOCK_1X128

    def ld(s):
        return _scale_ld(s, scale_layout)

    kernel = _C.glu_fwd_fp8
    if copy:
        x8, _, x8s, g8_ptr, u8_ptr, g8_rs = _ops._store_outputs(
            (T, 2 * F), False, layout, F, T, x.device
        )
        kernel = functools.partial(
            _C.glu_fwd_fp8_copy_blockwise,
            g8_ptr,
            g8_rs,
            u8_ptr,
            g8_rs,
            x8s.data_ptr(),
            x8s.stride(0),
        )
    if dy is not None:
        # glu_bwd_fp8 takes dy's pointer and row stride, dbias and dweights (0: not asked) before
        # glu_fwd_fp8's arguments
        d = _as_rows(dy, F, "dy")
        bwd = (d.data_ptr(), d.stride(0), db.data_ptr() if want_db else 0)
        bwd += (dw.data_ptr() if want_dw else 0,)
        if scale_inv is None:
            kernel = functools.partial(_C.glu_bwd_fp8, *bwd)
        else:  # glu_bwd_fp8_saved_blockwise takes the scales' pointer and row stride first
            saved = (scale_inv.data_ptr(), scale_inv.stride(0))
            kernel = functools.partial(_C.glu_bwd_fp8_saved_blockwise, *saved, *bwd)
    args = (
        activation,
        layout,
        clamp_value,
        glu_linear_offset,
        gate_multiplier,
        down_multiplier,
        scaling,
        scale_layout,
        int(pow2_scales),
        _ops._COMPUTE_CODES[cdt],
        g.data_ptr(),
        g.stride(0),
        u_ptr,
        u_rs,
        b.data_ptr() if b is not None else 0,
        w.data_ptr() if w is not None else 0,
        _ops._COMPUTE_CODES[w.dtype] if w is not None else _C.DTYPE_FP32,
        w.stride(0) if w is not None else 0,
        y.data_ptr() if want_y else 0,
        X,
        data.data_ptr(),
        X,
        scale.data_ptr(),
        ld(scale) if block else 0,
        data_t.data_ptr() if columnwise else 0,
        T,
        scale_t.data_ptr() if (columnwise and block) else 0,
        ld(scale_t) if (columnwise and block) else 0,
        ws.data_ptr() if ws is not None else 0,
        ws.numel() if ws is not None else 0,
        T,
        F,
    )
    # on x's device and its current stream, under a device guard where x's device is not the
    # current one (the op layer's launch)
    _ops._launch(kernel, x.get_device(), args)
    if copy:
        return data, scale, data_t, scale_t, y, x8, x8s
    if dy is None:
        return data, scale, data_t, scale_t, y
    return data, scale, data_t, scale_t, y, db, dw


def _sums(bwd, bias, weights, T, F, x):
    """The backward's dbias ([2F], x's dtype: the call's) and dweights ([T], the weights' dtype),
    each empty where not computed (no bias / weights, or the forward)."""
    db = torch.empty((2 * F if bwd and bias is not None else 0,), dtype=x.dtype, device=x.device)
    wdt = weights.dtype if weights is not None else torch.float32
    dw = torch.empty((T if bwd and weights is not None else 0,), dtype=wdt, device=x.device)
    return db, dw


def _check_options(
    fn, activation, layout, clamp, offset, gate_mult, down_mult, scaling, scale_layout
):
    """The ops' scalars (kernels and fakes, before anything is allocated): the GLU's (ops.op_params)
    and the recipe's scaling and scale-layout codes."""
    _ops.op_params(fn, activation, layout, clamp, offset, gate_mult, down_mult)
    _ops.check_code(scaling, _SCALING_CODES, fn, "scaling")
    _ops.check_code(scale_layout, _SCALE_LAYOUT_CODES, fn, "scale_layout")


def _impl(x, up, bias, weights, *options):
    _check_options("glu_fwd_fp8", *options[:8])
    # the operands too: the raw op is callable without the public function's checks, and the kernel
    # trusts every shape and dtype it is given
    _check(x, up, bias, weights, None, None, "glu_fwd_fp8")
    return _run(None, x, up, bias, weights, *options)


def _bwd_impl(dy, x, up, bias, weights, *options):
    _check_options("glu_bwd_fp8", *options[:8])
    _check_dy(dy, x, _check(x, up, bias, weights, None, None, "glu_bwd_fp8"), "glu_bwd_fp8")
    _ops.check_storages(
        "glu_bwd_fp8", zip(("dy", "x", "up", "bias", "weights"), (dy, x, up, bias, weights))
    )
    return _run(dy, x, up, bias, weights, *options)


def _saved_impl(dy, x, up, scale_inv, bias, weights, *options):
    fn = "glu_bwd_fp8"
    _check_options(fn, *options[:8])
    _, nb = _check_saved(dy, x, up, scale_inv, bias, weights, _ops.GLUParams(*options[:6]), fn)
    names = ("dy", "x", "up", "input_scale_inv", "bias", "weights")
    _ops.check_storages(fn, zip(names, (dy, x, up, scale_inv, bias, weights)))
    return _run(
        dy, x, up, bias, weights, *options, scale_inv=_as_rows(scale_inv, nb, "input_scale_inv")
    )


def _saved_fake(dy, x, up, scale_inv, bias, weights, *options):
    return _fake(x, up, bias, weights, *options, width=2, like=dy)


def _fake(
    x,
    up,
    bias,
    weights,
    activation,
    layout,
    clamp_value,
    glu_linear_offset,
    gate_multiplier,
    down_multiplier,
    scaling,
    scale_layout,
    pow2_scales,
    columnwise,
    want_y,
    *,
    width=1,
    like=None,
):
    """The outputs' metadata: y's width F (the forward, width 1) or dh's 2F (the backward, width
    2) and the sums; in the dtype of ``like`` (the backward from the copy: dy's), else x's."""
    _check_options(
        "glu_fwd_fp8" if width == 1 else "glu_bwd_fp8",
        activation,
        layout,
        clamp_value,
        glu_linear_offset,
        gate_multiplier,
        down_multiplier,
        scaling,
        scale_layout,
    )
    F = x.shape[-1] // 2 if up is None else x.shape[-1]
    T = math.prod(x.shape[:-1])
    like = x if like is None else like
    outs = _outputs(T, width * F, x.device, like.dtype, scaling, scale_layout, columnwise, want_y)
    if width == 1:
        return outs
    return (*outs, *_sums(True, bias, weights, T, F, like))


def _bwd_fake(dy, x, *rest):
    return _fake(x, *rest, width=2)


_SCHEMA = (
    "(Tensor input, Tensor? up, Tensor? bias, Tensor? weights, int activation, int layout, "
    "float clamp_value, float glu_linear_offset, float gate_multiplier, float down_multiplier, "
    "int scaling, int scale_layout, bool pow2_scales, bool columnwise, bool want_y) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)"
)
_LIB = torch.library.Library("fastglu", "FRAGMENT")  # kept alive: it owns the registrations
torch.library.define("fastglu::glu_fwd_fp8", _SCHEMA, lib=_LIB)
torch.library.impl("fastglu::glu_fwd_fp8", ("cpu", "cuda"), _impl, lib=_LIB)
torch.library.register_fake("fastglu::glu_fwd_fp8", _fake, lib=_LIB)
# the backward: dy first; dbias and dweights after the five (empty where bias / weights are None)
_BWD_SCHEMA = (
    "(Tensor dy, " + _SCHEMA[1 : _SCHEMA.index("->")] + "-> (" + ", ".join(["Tensor"] * 7) + ")"
)
torch.library.define("fastglu::glu_bwd_fp8", _BWD_SCHEMA, lib=_LIB)
torch.library.impl("fastglu::glu_bwd_fp8", ("cpu", "cuda"), _bwd_impl, lib=_LIB)
torch.library.register_fake("fastglu::glu_bwd_fp8", _bwd_fake, lib=_LIB)
# the backward from the operands' blockwise copy: input (and up) its float8_e4m3fn codes,
# scale_inv its [tokens, blocks] fp32 scales; the outputs in dy's dtype
_SAVED_SCHEMA = _BWD_SCHEMA.replace("Tensor? up, ", "Tensor? up, Tensor scale_inv, ")
torch.library.define("fastglu::glu_bwd_fp8_saved", _SAVED_SCHEMA, lib=_LIB)
torch.library.impl("fastglu::glu_bwd_fp8_saved", ("cpu", "cuda"), _saved_impl, lib=_LIB)
torch.library.register_fake("fastglu::glu_bwd_fp8_saved", _saved_fake, lib=_LIB)


# a backward through the outputs raises instead of leaving the inputs' gradients silently None
for _op in ("fastglu::glu_fwd_fp8", "fastglu::glu_bwd_fp8", "fastglu::glu_bwd_fp8_saved"):
    _ops.register_no_gradient(
        _op,
        _LIB,
        "fastglu.fp8: the quantised outputs (and y beside them) have no gradient: quantisation "
        "is not differentiable; use fastglu.glu for a differentiable y",
    )


def _call(op, impl, *args):
    """``op(*args)``, or the op's implementation ``impl(*args)`` directly where the op adds nothing:
    in untraced eager mode (``ops.untraced_eager``), every tensor a plain ``torch.Tensor`` (no
    subclass, no fake tensor) and none that autograd would track (the op's no-gradient formula only
    raises on a backward). In the FP8 MLP block's autograd Functions (grad mode off) that is every
    call. The dispatcher and the autograd wrapper cost more host time than the op's checks and
    allocations together (cProfile on the CPU); ``impl`` runs the op's own checks either way."""
    if not _ops.untraced_eager():
        return op(*args)
    grad = torch.is_grad_enabled()
    for a in args:
        if isinstance(a, torch.Tensor) and (
            type(a) is not torch.Tensor or (grad and a.requires_grad)
        ):
            return op(*args)
    return impl(*args)


def _check(x, up, bias, weights, scaling, scale_layout, fn):
    """The public functions' checks of the operands and the recipe's options, on metadata (they
    run under torch.compile too); the per-token weights are checked as fastglu.glu checks them
    (ops.check_weights_meta). Returns F."""
    _check_x(x, fn)
    if x.dim() < 1:
        _ops._fail(
            ValueError, fn, f"x must have at least one dimension, got shape {tuple(x.shape)}"
        )
    if up is None and x.shape[-1] % 2:
        _ops._fail(ValueError, fn, f"x's last dimension {x.shape[-1]} must be even (gate | up)")
    F = x.shape[-1] if up is not None else x.shape[-1] // 2
    for name, t, shape in (("up", up, tuple(x.shape)), ("bias", bias, (2 * F,))):
        if t is not None:
            _check_operand(t, fn, name, x.dtype, shape, x.device)
    if weights is not None:
        _ops.check_weights_meta(weights, tuple(x.shape[:-1]), x.device, fn)
    if scaling is None:  # the ops' kernels: their codes are checked by _check_options
        return F
    _check_recipe(scaling, scale_layout, fn)
    return F


def _check_recipe(scaling, scale_layout, fn):
    """The public functions' recipe options (names)."""
    if scaling not in _SCALINGS:
        _ops._fail(ValueError, fn, f"scaling = {scaling!r} is not one of {sorted(_SCALINGS)}")
    if scale_layout not in _SCALE_LAYOUTS:
        _ops._fail(
            ValueError,
            fn,
            f"scale_layout = {scale_layout!r} is not one of {sorted(_SCALE_LAYOUTS)}",
        )


def _check_operand(t, fn, name, dtype, shape, device, note=""):
    """t: a dense tensor of dtype (``note`` follows it in the message), shape and device."""
    if isinstance(t, torch.Tensor):
        _ops.check_dense(t, fn, name)
    if not isinstance(t, torch.Tensor) or t.dtype != dtype:
        _ops._fail(
            TypeError,
            fn,
            f"{name} must be a {dtype} tensor{note}, got {getattr(t, 'dtype', type(t).__name__)}",
        )
    if tuple(t.shape) != shape or t.device != device:
        _ops._fail(
            ValueError,
            fn,
            f"{name} has shape {tuple(t.shape)} on {t.device}; expected {shape} on {device}",
        )


def _check_dy(dy, x, F, fn):
    """dy: a dense tensor of x's dtype and device, of shape x's leading shape + (F,)."""
    _check_operand(dy, fn, "dy", x.dtype, tuple(x.shape[:-1]) + (F,), x.device)


def _check_saved(dy, x, up, scale_inv, bias, weights, p, fn):
    """glu_bwd_fp8 from the blockwise copy (input_scale_inv), on metadata: x (and up) its
    float8_e4m3fn codes, scale_inv fp32 [*lead, blocks] or [tokens, blocks], dy of a compute dtype
    (the call's) and x's leading shape + (F,), bias in dy's dtype, a clamp the copy could have
    marked (below 448). Returns (F, blocks)."""
    for name, t in (("x", x), ("up", up)):
        if t is None and name == "up":
            continue
        _check_x(t, fn, name, any_dtype=True)
        if t.dtype != FP8:
            _ops._fail(
                TypeError,
                fn,
                f"{name}.dtype = {t.dtype}: with input_scale_inv, {name} holds the blockwise "
                "copy's codes (torch.float8_e4m3fn)",
            )
    if x.dim() < 1 or (up is None and x.shape[-1] % 2):
        _ops._fail(ValueError, fn, f"x has shape {tuple(x.shape)}: the last dimension must be even")
    F = x.shape[-1] if up is not None else x.shape[-1] // 2
    lead = tuple(x.shape[:-1])
    T = math.prod(lead)
    if up is not None:
        _check_operand(up, fn, "up", FP8, tuple(x.shape), x.device)
    if not isinstance(dy, torch.Tensor) or dy.dtype not in _ops._COMPUTE_CODES:
        _ops._fail(
            TypeError,
            fn,
            f"dy must be a bfloat16, float16 or float32 tensor (the call's dtype), got "
            f"{getattr(dy, 'dtype', type(dy).__name__)}",
        )
    _check_operand(dy, fn, "dy", dy.dtype, lead + (F,), x.device)
    _ops._fp8_clamp(p, dy.dtype, "blockwise", fn)
    nb = _ops.scale_blocks(p.layout, F)
    if not isinstance(scale_inv, torch.Tensor) or scale_inv.dtype != torch.float32:
        _ops._fail(
            TypeError,
            fn,
            "input_scale_inv must be a torch.float32 tensor, got "
            f"{getattr(scale_inv, 'dtype', type(scale_inv).__name__)}",
        )
    _ops.check_dense(scale_inv, fn, "input_scale_inv")
    shape = tuple(scale_inv.shape)
    if (shape != (T, nb) and shape != lead + (nb,)) or scale_inv.device != x.device:
        _ops._fail(
            ValueError,
            fn,
            f"input_scale_inv has shape {shape} on {scale_inv.device}; expected "
            f"({T}, {nb}) on {x.device} (one scale per 1 x 128 block of each row)",
        )
    if bias is not None:
        _check_operand(bias, fn, "bias", dy.dtype, (2 * F,), x.device, " (dy's dtype)")
    if weights is not None:
        _ops.check_weights_meta(weights, lead, x.device, fn)
    return F, nb


def glu_fp8(
    x: torch.Tensor,
    *,
    up: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
    activation: str = "silu",
    interleaved: bool = False,
    clamp_value: float | None = None,
    glu_linear_offset: float = 0.0,
    gate_multiplier: float = 1.0,
    down_multiplier: float = 1.0,
    scaling: str = "block",
    scale_layout: str = "mn_major",
    pow2_scales: bool = False,
    columnwise: bool = False,
    return_y: bool = False,
) -> FP8Output:
    """The GLU activation of x ([..., 2F], or gate x and ``up`` [..., F]) quantised to e4m3.

    Returns ``FP8Output(data, scale, data_t, scale_t, y)``: data ``[..., F]``; data_t ``[F, T]`` and
    scale_t when ``columnwise``; y (x's dtype) when ``return_y``. See the module's docstring."""
    fn = "glu_fp8"
    p = _ops.glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        interleaved=interleaved,
        fn=fn,
    )
    F = _check(x, up, bias, weights, scaling, scale_layout, fn)
    if up is not None and interleaved:
        _ops._fail(ValueError, fn, "interleaved=True takes one tensor x, not up")
    data, scale, data_t, scale_t, y = _call(
        torch.ops.fastglu.glu_fwd_fp8,
        _impl,
        x,
        up,
        bias,
        weights,
        *p,
        _SCALINGS[scaling],
        _SCALE_LAYOUTS[scale_layout],
        bool(pow2_scales),
        bool(columnwise),
        bool(return_y),
    )
    lead = tuple(x.shape[:-1])
    return FP8Output(
        data.view(*lead, F),
        scale,
        data_t if columnwise else None,
        scale_t if columnwise and scaling == "block" else None,
        y.view(*lead, F) if return_y else None,
    )


def glu_bwd_fp8(
    dy: torch.Tensor,
    x: torch.Tensor,
    *,
    up: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    weights: torch.Tensor | None = None,
    activation: str = "silu",
    interleaved: bool = False,
    clamp_value: float | None = None,
    glu_linear_offset: float = 0.0,
    gate_multiplier: float = 1.0,
    down_multiplier: float = 1.0,
    scaling: str = "block",
    scale_layout: str = "mn_major",
    pow2_scales: bool = False,
    columnwise: bool = False,
    return_dh: bool = False,
    input_scale_inv: torch.Tensor | None = None,
) -> FP8GradOutput:
    """The gradient dh of the GLU's input ([..., 2F] in x's layout: gate | up, or interleaved) from
    dy ([..., F], fc2's dgrad) quantised to float8_e4m3fn with the recipe of glu_fp8: ``data
    [..., 2F]`` (1 x 128 blocks along the 2F channels, for fc1's dgrad) and with
    ``columnwise`` ``data_t [2F, T]`` (128 x 1 blocks along the tokens, for fc1's weight
    gradient); ``y`` holds dh in x's dtype when ``return_dh`` (the values ``fastglu.glu``'s
    backward gives). With ``bias``, ``dbias`` ([2F], x's dtype, the bias's layout) and with
    ``weights``, ``dweights`` (the weights' shape and dtype) are reduced in the same pass
    (``fastglu.glu``'s backward's gradients to fp32 rounding; a fixed order, bitwise reproducible);
    None without them. Returns ``FP8GradOutput(data, scale, data_t, scale_t, y, dbias,
    dweights)``.

    ``input_scale_inv``: x (and up) are the operands' blockwise FP8 copy (``fastglu.glu``'s
    ``fp8_input_store="blockwise"``: float8_e4m3fn codes) and this its fp32 scales, one per
    1 x 128 block of each row ([..., blocks] or [tokens, blocks]; split layout: gate's
    ceil(F / 128) blocks, then up's). Each code is decoded in the same pass (code * scale, fp32:
    fastglu.glu's backward on that copy, bit for bit); dy's dtype is then the call's (dh, bias,
    dbias). Saves the pass that would write dh and the quantiser's read of it."""
    fn = "glu_bwd_fp8"
    p = _ops.glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        interleaved=interleaved,
        fn=fn,
    )
    if up is not None and interleaved:
        _ops._fail(ValueError, fn, "interleaved=True takes one tensor x, not up")
    if input_scale_inv is None:
        F = _check(x, up, bias, weights, scaling, scale_layout, fn)
        _check_dy(dy, x, F, fn)
        op, impl, lead_args = torch.ops.fastglu.glu_bwd_fp8, _bwd_impl, (dy, x, up)
    else:
        _check_recipe(scaling, scale_layout, fn)
        F, _ = _check_saved(dy, x, up, input_scale_inv, bias, weights, p, fn)
        op, impl = torch.ops.fastglu.glu_bwd_fp8_saved, _saved_impl
        lead_args = (dy, x, up, input_scale_inv)
    data, scale, data_t, scale_t, dh, dbias, dweights = _call(
        op,
        impl,
        *lead_args,
        bias,
        weights,
        *p,
        _SCALINGS[scaling],
        _SCALE_LAYOUTS[scale_layout],
        bool(pow2_scales),
        bool(columnwise),
        bool(return_dh),
    )
    lead = tuple(x.shape[:-1])
    return FP8GradOutput(
        data.view(*lead, 2 * F),
        scale,
        data_t if columnwise else None,
        scale_t if columnwise and scaling == "block" else None,
        dh.view(*lead, 2 * F) if return_dh else None,
        dbias if bias is not None else None,
        dweights.view(weights.shape) if weights is not None else None,
    )


def _store_impl(x, up, *p):
    _ops.check_storages("store_blockwise", (("x", x), ("up", up)))
    return _ops._fp8_store_blockwise(x, up, _ops.GLUParams(*p), "store_blockwise")


def store_blockwise(
    x: torch.Tensor,
    *,
    up: torch.Tensor | None = None,
    interleaved: bool = False,
    clamp_value: float | None = None,
) -> FP8Blockwise:
    """The GLU's operands (x [..., 2F]: gate | up, or interleaved; or gate x and ``up``) saved as
    float8_e4m3fn codes with one fp32 scale per 1 x 128 block of each operand's row, DeepSeek-V3's
    cache of the SwiGLU input (fastglu_glu_fp8_store_blockwise: one kernel; the recipe and the
    clamp marking in docs/fp8.md): what ``fastglu.glu(..., fp8_input_store="blockwise")`` keeps, and
    what ``glu_bwd_fp8(dy, data, up=data_up, input_scale_inv=scale_inv)`` reads. With a clamp, the
    copy marks the elements the clamp cuts (pass the backward the same clamp_value). Returns
    ``FP8Blockwise(data, data_up, scale_inv)``; no gradient."""
    fn = "store_blockwise"
    p = _ops.glu_params(clamp_value=clamp_value, interleaved=interleaved, fn=fn)
    if up is not None and interleaved:
        _ops._fail(ValueError, fn, "interleaved=True takes one tensor x, not up")
    _check_x(x, fn)
    if up is not None:
        _check_x(up, fn, "up")
    _ops._check_fp8_store(x, up, p, fn)
    data, data_up, scale_inv = _call(torch.ops.fastglu.fp8_store_blockwise, _store_impl, x, up, *p)
    # (the op gives an empty tensor for the absent up's codes)
    return FP8Blockwise(data, data_up if up is not None else None, scale_inv)


# ---- a plain operand quantised (fastglu_quantize_fp8_*) -----------------------------------------

_BLOCKS = {"1x128": _C.FP8_SCALING_BLOCK_1X128, "128x128": _C.FP8_SCALING_BLOCK_128X128}
_BLOCK_CODES = {code: name for name, code in _BLOCKS.items()}


class FP8Quantized(NamedTuple):
    """quantize_fp8's result."""

    data: torch.Tensor | None  # [R, C] float8_e4m3fn (rowwise)
    scale: torch.Tensor | None  # its scales
    data_t: torch.Tensor | None  # [C, R] float8_e4m3fn (columnwise: x transposed)
    scale_t: torch.Tensor | None  # its scales


def _quant_outputs(R, C, device, scaling, layout, rowwise, columnwise, pad, empty=True):
    """The quantiser's outputs; a copy not asked is an empty tensor (the op's outputs), or None
    with ``empty=False`` (_quant_run's callers inside the package)."""
    w128 = scaling == _C.FP8_SCALING_BLOCK_128X128
    rb, cb = _blocks(R), _blocks(C)
    data = scale = data_t = scale_t = None
    if empty:
        data = data_t = torch.empty((0,), dtype=FP8, device=device)
        scale = scale_t = torch.empty((0,), dtype=torch.float32, device=device)
    if rowwise:
        data = torch.empty((R, C), dtype=FP8, device=device)
        scale = _scales(rb if w128 else R, cb, layout, device, pad)
    if columnwise:
        data_t = torch.empty((C, R), dtype=FP8, device=device)
        scale_t = _scales(cb if w128 else C, rb, layout, device, pad)
    return data, scale, data_t, scale_t


def _quant_check(x, scaling, scale_layout, rowwise, columnwise, fn):
    _check_x(x, fn)
    if x.dim() != 2:
        _ops._fail(ValueError, fn, f"x must be 2-D [rows, cols], got shape {tuple(x.shape)}")
    _ops.check_code(scaling, _BLOCK_CODES, fn, "block")
    _ops.check_code(scale_layout, _SCALE_LAYOUT_CODES, fn, "scale_layout")
    if not rowwise and not columnwise:
        _ops._fail(ValueError, fn, "rowwise=False and columnwise=False: nothing to compute")


def _quant_impl(x, scaling, scale_layout, pow2_scales, rowwise, columnwise, pad_scales):
    _quant_check(x, scaling, scale_layout, rowwise, columnwise, "quantize_fp8")
    return _quant_run(x, scaling, scale_layout, pow2_scales, rowwise, columnwise, pad_scales, True)


def _quant_run(x, scaling, scale_layout, pow2_scales, rowwise, columnwise, pad_scales, empty=False):
    """The quantiser's allocation and launch without the checks, for callers that checked x and
    the codes (the op's implementation above; the FP8 MLP block, whose operands are checked once
    per call): (data, scale, data_t, scale_t), None for a copy not asked unless ``empty``."""
    # (resolve_neg: a tensor with the negative bit set holds the values before the negation)
    x = x.resolve_neg()
    if x.stride(1) != 1 and x.numel():
        x = x.contiguous()
    R, C = x.shape
    data, scale, data_t, scale_t = _quant_outputs(
        R, C, x.device, scaling, scale_layout, rowwise, columnwise, pad_scales, empty
    )
    if R == 0 or C == 0:
        return data, scale, data_t, scale_t

    def ld(s):
        return _scale_ld(s, scale_layout)

    args = (
        scaling,
        scale_layout,
        int(pow2_scales),
        _ops._COMPUTE_CODES[x.dtype],
        x.data_ptr(),
        x.stride(0),
        data.data_ptr() if rowwise else 0,
        C,
        scale.data_ptr() if rowwise else 0,
        ld(scale) if rowwise else 0,
        data_t.data_ptr() if columnwise else 0,
        R,
        scale_t.data_ptr() if columnwise else 0,
        ld(scale_t) if columnwise else 0,
        R,
        C,
    )
    _ops._launch(_C.quantize_fp8, x.get_device(), args)
    return data, scale, data_t, scale_t


def _quant_fake(x, scaling, scale_layout, pow2_scales, rowwise, columnwise, pad_scales):
    _quant_check(x, scaling, scale_layout, rowwise, columnwise, "quantize_fp8")
    R, C = x.shape
    return _quant_outputs(R, C, x.device, scaling, scale_layout, rowwise, columnwise, pad_scales)


torch.library.define(
    "fastglu::quantize_fp8",
    "(Tensor x, int scaling, int scale_layout, bool pow2_scales, bool rowwise, bool columnwise, "
    "bool pad_scales) -> (Tensor, Tensor, Tensor, Tensor)",
    lib=_LIB,
)
torch.library.impl("fastglu::quantize_fp8", ("cpu", "cuda"), _quant_impl, lib=_LIB)
torch.library.register_fake("fastglu::quantize_fp8", _quant_fake, lib=_LIB)
_ops.register_no_gradient(
    "fastglu::quantize_fp8",
    _LIB,
    "fastglu.fp8.quantize_fp8: the quantised outputs have no gradient (quantisation is not "
    "differentiable)",
)


def quantize_fp8(
    x: torch.Tensor,
    *,
    block: str = "1x128",
    rowwise: bool = True,
    columnwise: bool = False,
    scale_layout: str | None = None,
    pow2_scales: bool = False,
    pad_scales: bool = True,
) -> FP8Quantized:
    """A plain operand ``x [R, C]`` (bf16 / fp16 / fp32) quantised to float8_e4m3fn with the
    recipe of ``glu_fp8`` (the same amax, scale and code), in one pass for both copies:

    - ``block="1x128"`` (activations and gradients: fc1's input x, fc2's output gradient dO):
      ``data [R, C]`` with one scale per 1 x 128 block of a row (``scale [R, ceil(C/128)]``), and
      with ``columnwise=True`` the transposed copy ``data_t [C, R]`` with one scale per 128 rows of
      x (``scale_t [C, ceil(R/128)]``), the weight gradient's operand.
    - ``block="128x128"`` (weights): one scale per 128 x 128 block (``scale [ceil(R/128),
      ceil(C/128)]``); ``data_t`` is the codes transposed (the dgrad's weight ``w.t()``) with
      the same scales transposed.

    ``scale_layout`` defaults to what ``torch._scaled_mm`` takes: "mn_major" (strides (1, rows))
    for 1 x 128, "row_major" for 128 x 128. Row-major scales (either block) have their row stride
    padded to a multiple of 4 with ``pad_scales`` (the layout cuBLAS reads for 128 x 128; PyTorch
    checks it since pytorch/pytorch#166752); ``pad_scales=False`` gives contiguous scales.
    ``x`` itself is not differentiated through (quantisation has no gradient): a backward through
    the outputs raises in eager mode.
    ``x ~ data.float() * scale`` block by block. Returns ``FP8Quantized(data, scale, data_t,
    scale_t)``, None for a copy not asked. Op: ``torch.ops.fastglu.quantize_fp8`` (fake
    implementation: compiles without graph breaks)."""
    fn = "quantize_fp8"
    if block not in _BLOCKS:
        _ops._fail(ValueError, fn, f"block = {block!r} is not one of {sorted(_BLOCKS)}")
    if scale_layout is None:
        scale_layout = "mn_major" if block == "1x128" else "row_major"
    if scale_layout not in _SCALE_LAYOUTS:
        _ops._fail(
            ValueError,
            fn,
            f"scale_layout = {scale_layout!r} is not one of {sorted(_SCALE_LAYOUTS)}",
        )
    args = (
        x,
        _BLOCKS[block],
        _SCALE_LAYOUTS[scale_layout],
        bool(pow2_scales),
        bool(rowwise),
        bool(columnwise),
        bool(pad_scales),
    )
    _quant_check(x, *args[1:3], rowwise, columnwise, fn)
    data, scale, data_t, scale_t = _call(torch.ops.fastglu.quantize_fp8, _quant_impl, *args)
    return FP8Quantized(
        data if rowwise else None,
        scale if rowwise else None,
        data_t if columnwise else None,
        scale_t if columnwise else None,
    )
