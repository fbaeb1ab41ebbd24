"""The op layer: argument checks, output allocation and the ``_C`` launch of every kernel of the
gated-linear-unit family, on torch tensors (no autograd here: ``functional.py``; the torch.library
ops: ``library.py``).

Math (``include/fastglu.h``, "The gated-linear-unit family"; sources: Megatron-Core
``megatron/core/fusions/fused_bias_swiglu.py`` and ``fused_bias_geglu.py``, Liger-Kernel's SwiGLU).
For token t and column j < F, gate g, up u, bias b = [b_gate | b_up] ([2F]), per-token weight w[t],
clamp value c, offset o (``glu_linear_offset``), multipliers m_g (``gate_multiplier``) and m_d
(``down_multiplier``)::

    clamp (c > 0 only):  g' = min(g, c),   u' = min(max(u, -c), c)   (c: clamp_value in the input's dtype)
    bias:                a = g' + b_gate[j],   v = u' + b_up[j]
    forward:             y = m_d * w[t] * act(m_g * a) * (v + o)
    act:  "silu"        z * sigmoid(z)
          "gelu_tanh"   0.5 z (1 + tanh(0.79788456 z (1 + 0.044715 z^2)))   (Megatron's geglu)
          "quick_gelu"  z * sigmoid(1.702 z)

The clamp is ``torch.clamp`` on a tensor of the input's dtype (Megatron clamps its input so): c is
clamp_value rounded through float32 to that dtype (1.1 clamps bf16 at 1.1015625), forward and
backward, on every path. The backward gives d_input (zero where the clamp cut the operand: g > c, or
|u| > c; the boundary values g == c, u == +-c pass their gradient, as torch.clamp's), the bias gradient already summed
over tokens ([2F], never an input-sized tensor), and the weights gradient
``dweights[t] = sum_j m_d * act(z) * (v + o) * dy[t, j]`` in the weights' dtype and shape.

Layouts of the input:

- one tensor ``x[..., 2F]``, gate = ``x[..., :F]``, up = ``x[..., F:]`` (Megatron's fc1 output);
- ``interleaved=True``: gate = ``x[..., 0::2]``, up = ``x[..., 1::2]`` (GPT-OSS checkpoints); the bias
  is interleaved the same way;
- two tensors ``gate[..., F]``, ``up[..., F]`` (Hugging Face's gate_proj / up_proj outputs); the bias
  is still one [2F] tensor, ``[b_gate | b_up]``.

Tensors: gate/up/bias/dy share one dtype (bfloat16, float16 or float32); weights may have another
(Megatron passes fp32 probs with bf16 activations) and the output keeps the input's dtype. Inputs
are read in place whenever their leading dimensions merge into one evenly strided row index with a
unit-stride last dimension (any column slice of a wider tensor qualifies); anything else is copied
first. ``dy`` is read in place with any strides. Outputs come from PyTorch's allocator; CUDA tensors
run on the current stream of their device, CPU tensors on the C CPU backend; nothing synchronizes
with the host. Bad arguments raise TypeError (types, dtypes, layouts) or ValueError (shapes,
devices, strides, options) naming the tensor before anything is written.

Saved input in fp8 (``fp8_input_store``), to halve the activation memory kept for the backward:

- ``True``: Megatron's plain cast ``x.to(torch.float8_e4m3fn)``, written by the forward kernel itself
  in the pass that computes the output (``saved_fp8``: bit for bit what the cast gives, round to
  nearest even, saturating at +-448, NaN kept), so the store costs no second pass over the input;
  the backward reads the fp8 values directly. e4m3 has 3 mantissa bits and its smallest subnormal
  is 2^-9 = 0.00195, so small inputs lose most of their value: a value of 1e-3 is stored as 0.00195
  (+95%), 2e-3 as 0.00195, 1e-4 as 0.
- ``"per_row"``: each token's row (gate and up together) is stored as ``fp8(x * s)`` with
  ``s = 448 / amax(|row|)`` (448: e4m3's largest finite value; s = 1 for an all-zero or non-finite
  row), and the backward decodes ``fp8 * (amax / 448)``. Every value then keeps e4m3's relative
  precision (half an ulp: <= 2^-4 = 6.25%) down to about amax * 2^-15; one fp32 scale per token.
- ``"per_tensor"``: the same with one amax over the whole input.
- ``"blockwise"``: one scale per 1 x 128 block of each operand's row (DeepSeek-V3's cache of the
  SwiGLU input): the split layout's gate blocks, then up's (for F a multiple of 128, the 1 x 128
  blocks of the [tokens, 2F] row); the interleaved operand's own blocks. scale_inv ``[tokens,
  scale_blocks(layout, F)]``; the C backward reads it (``fastglu_glu_operands.scale_1x128``). An
  outlier channel then costs the precision of its own block only, where a per-row scale spends
  e4m3's range on it for the whole row. Written by one C call
  (``fastglu_glu_fp8_store_blockwise_*``: one kernel on CUDA) with the FP8 recipe's numbers: where
  a block's amax is a normal fp32 number, scale_inv = amax / 448 and the codes the cast of
  x / scale_inv, both correctly rounded (``fastglu.fp8.quantize_fp8``'s bits on that block); a
  block of zeros, a subnormal amax, a NaN or an infinity gets scale_inv 1 and the plain cast.

  Measured (bf16 input [257, 2 * 768], SwiGLU, input-gradient relative error against float64;
  tests/python/test_variants.py::test_scaled_fp8_store_keeps_small_values checks the bounds; the
  last column: [65, 2 * 640] ~ 1e-3 N(0, 1) with one channel of 100 per row, the error outside the
  outlier's blocks, test_blockwise_fp8_store_keeps_channels_beside_an_outlier):

  ======================  ===================  ======================  ==================
  fp8_input_store         inputs ~ N(0, 1)     inputs ~ 1e-3 N(0, 1)   with an outlier
  ======================  ===================  ======================  ==================
  False (bf16 saved)      0.17%                0.17%                   0.16%
  True (plain cast)       3.0%                 56%                     56%
  "per_row"               3.0%                 2.6%                    12.5%
  "per_tensor"            3.0%                 2.6%                    12.5%
  "blockwise"             2.9%                 2.6%                    2.6%
  ======================  ===================  ======================  ==================

  With ``clamp_value`` the saved precision never changes which elements the clamp cut: the backward
  clamps and masks the decoded fp8 operand, and e4m3 would round a gate of 7.2 onto a bound of 7.0
  (and 6.9 beyond a bound of 6.9), so each operand is first moved to its side of the bound (in all
  modes; include/fastglu.h, saved_fp8): with lo / hi the e4m3 values next to c (in the scaled
  modes, those whose decoding ``fp8 * scale_inv`` lies either side of c, per row, tensor or
  block), a cut operand is stored as +-hi (which the backward clamps back to c, as Megatron's
  clamped input gives it), an uncut one as its own cast unless that lands beyond the bound (then
  lo). In the
  scaled modes scale_inv is rounded up by one ulp where ``448 * scale_inv`` would fall below amax,
  so that a cut element always has a value beyond the bound. A finite c >= 448 with an fp8 store
  raises ValueError (e4m3 has nothing beyond it); c = inf cuts nothing (the plain cast).

This module is on the hot path of every call: the common case is recognised with a few attribute
reads (``_fast_case``) and goes straight to the C call; anything else takes the checked path, which
raises the precise error or copies what it must. ``swiglu_fwd`` / ``swiglu_bwd`` are the SiLU
member of the family (the same C calls as ``glu_fwd`` / ``glu_bwd`` with ``SILU``).
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch

from . import _C

_STRIDED = torch.strided
_Tensor = torch.Tensor
_FP8 = torch.float8_e4m3fn
FP8_E4M3_MAX = 448.0  # the largest finite float8_e4m3fn value

_COMPUTE_CODES = {
    torch.float32: _C.DTYPE_FP32,
    torch.float16: _C.DTYPE_FP16,
    torch.bfloat16: _C.DTYPE_BF16,
}
_COMPUTE_WHAT = "torch.bfloat16, torch.float16 or torch.float32"
_INPUT_CODES = dict(_COMPUTE_CODES)
_INPUT_CODES[_FP8] = _C.DTYPE_FP8_E4M3

ACTIVATIONS = {"silu": _C.ACT_SILU, "gelu_tanh": _C.ACT_GELU_TANH, "quick_gelu": _C.ACT_QUICK_GELU}
FP8_MODES = (False, True, "per_row", "per_tensor", "blockwise")

_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)
_tracing_state = getattr(torch._C, "_get_tracing_state", lambda: None)  # torch.jit.trace
# the Python dispatch modes in effect (FakeTensorMode, FlopCounterMode, ...): each must see the op
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
_forward_ad = torch.autograd.forward_ad


def ops_only() -> bool:
    """Whether a call must go through its torch.library op rather than a lean path: while
    torch.compile / torch.export trace, or under a Python dispatch mode (FakeTensorMode, whose
    tensors have no memory for a kernel; any mode must see the op, not the kernel's internals)."""
    return _is_compiling() or _dispatch_modes() != 0


def untraced_eager() -> bool:
    """Whether a call may run its kernel directly instead of through its torch.library op: not
    under torch.compile / torch.export, no functorch transform (vmap, grad, jvp), no forward-mode
    AD level open, not under torch.jit.trace, no Python dispatch mode (FakeTensorMode: its tensors
    have no memory). Each of those records or transforms the op, which a raw call would bypass (a
    trace without the kernel, vmap on a batched tensor's missing storage).
    The caller checks its tensors (plain ``torch.Tensor``, nothing autograd would track)."""
    return (
        not _is_compiling()
        and not _functorch_active()
        and _forward_ad._current_level < 0
        and _tracing_state() is None
        and _dispatch_modes() == 0
    )


try:  # the raw cudaStream_t of a device's current stream, without building a Stream object
    _raw_stream = torch._C._cuda_getCurrentRawStream
    _current_device = torch._C._cuda_getDevice
except AttributeError:  # pragma: no cover - a torch without these private helpers

    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream

    def _current_device():
        return torch.cuda.current_device()


def _fail(exc, fn, msg):
    raise exc(f"fastglu.{fn}: {msg}")


def renamed(e, fn: str, *callees: str):
    """The error e that fastglu.<callee> raised (one of callees), reworded as raised by
    fastglu.<fn>, for a public function whose checks run in another one; None if e is not one."""
    msg = str(e)
    for callee in callees:
        prefix = f"fastglu.{callee}:"
        if msg.startswith(prefix):
            return type(e)(f"fastglu.{fn}:{msg[len(prefix) :]}")
    return None


def _no_context(ctx, inputs, output):
    pass


def register_no_gradient(qualname: str, lib, message: str) -> None:
    """The autograd formula of a torch.library op whose outputs have no gradient (a backward kernel,
    a quantisation): a backward through them raises RuntimeError(message) in eager mode instead of
    leaving the inputs' gradients silently None. While torch.compile traces the joint graph (AOT
    autograd traces every op's backward whose inputs require grad, whether or not the loss uses its
    outputs) it gives no gradient (None for each input), so that a compiled function quantising a
    tensor that requires grad compiles as it runs eagerly."""
    ns, name = qualname.split("::")
    n_inputs = len(getattr(torch.ops, ns).__getattr__(name).default._schema.arguments)

    def backward(ctx, *grads):
        # tracing: torch.compiler.is_compiling() (newer PyTorch), or the gradients are the tracer's
        # tensors (FunctionalTensor / FakeTensor: what AOT autograd hands a backward it traces)
        if _is_compiling() or any(g is not None and type(g) is not torch.Tensor for g in grads):
            return (None,) * n_inputs
        raise RuntimeError(message)

    torch.library.register_autograd(qualname, backward, setup_context=_no_context, lib=lib)


def refuse_create_graph(fn: str):
    """RuntimeError if a backward runs under create_graph=True (double backward, gradient
    penalties) in eager mode: the engine runs a backward with grad mode on only then, and the
    kernels have no derivative of their own, so refuse rather than hand back a gradient that silently
    drops its dependence on the input. While torch.compile traces the joint graph (which uses
    create_graph) it passes."""
    if torch.is_grad_enabled() and not _is_compiling():
        _fail(
            RuntimeError,
            fn,
            "double backward (create_graph=True) is not supported; the backward kernel "
            "is not differentiable",
        )


# ---- parameters -------------------------------------------------------------------------------


class GLUParams(NamedTuple):
    """fastglu_glu_params, in the order the binding takes them."""

    activation: int
    layout: int
    clamp_value: float
    glu_linear_offset: float
    gate_multiplier: float
    down_multiplier: float


def _number(v, fn, name):
    """float(v) for a real number (or a one-element tensor, e.g. Megatron's linear_offset)."""
    if not isinstance(v, (bool, str, bytes)):
        try:
            return float(v)
        except OverflowError:  # an int beyond the float range
            _fail(
                ValueError,
                fn,
                f"{name} must be within the float range, got {type(v).__name__} of "
                f"{v.bit_length() if isinstance(v, int) else '?'} bits",
            )
        except (TypeError, ValueError, RuntimeError):
            pass
    _fail(TypeError, fn, f"{name} must be a real number, got {type(v).__name__}")


def _round_to(v, mant_bits, min_exp, max_exp):
    """v rounded to nearest (ties to even) in a binary format of mant_bits significand bits whose
    normals are [2^(min_exp - 1), 2^max_exp) (math.frexp's exponents); +-inf beyond its largest
    finite value. Plain arithmetic on Python floats, so that torch.compile folds it."""
    if v == 0.0 or v - v != 0.0:  # zero, inf, NaN
        return v
    m, e = math.frexp(v)
    q = math.ldexp(1.0, max(e, min_exp) - mant_bits)  # the spacing of the format around v
    r = round(v / q) * q  # v / q is exact (a power-of-two scaling); round(): ties to even
    return (
        r
        if abs(r) <= math.ldexp(1.0 - math.ldexp(1.0, -mant_bits), max_exp)
        else math.copysign(math.inf, v)
    )


def _f32(v):
    """v rounded to float32 (nearest even); inf where it overflows."""
    return _round_to(v, 24, -125, 128)


_DTYPE_FORMATS = {torch.float16: (11, -13, 16), torch.bfloat16: (8, -125, 128)}


def _clamp_in(clamp_value, dtype):
    """The clamp bound the kernels use for operands of dtype: clamp_value rounded to float32 and then
    to dtype (as torch.clamp rounds a Python bound, and the C library its float clamp_value:
    fastglu_glu_clamp); 0.0 for no clamp."""
    if not clamp_value > 0.0:
        return 0.0
    c = _f32(clamp_value)
    fmt = _DTYPE_FORMATS.get(dtype)
    return c if fmt is None else _round_to(c, *fmt)


# float8_e4m3fn's non-negative finite values, ascending (codes 0x00 .. 0x7e): m 2^-9 (subnormals),
# (1 + m / 8) 2^(e - 7)
_E4M3_VALUES = tuple(
    [m * 2.0**-9 for m in range(8)]
    + [(1.0 + m / 8.0) * 2.0 ** (e - 7) for e in range(1, 16) for m in range(8)][:-1]
)


def _e4m3_bounds(c):
    """(lo, hi): the largest float8_e4m3fn value <= c and the smallest > c, for 0 < c < 448."""
    n = sum(1 for v in _E4M3_VALUES if v <= c)
    return _E4M3_VALUES[n - 1], _E4M3_VALUES[n]


_FLT32_MAX = math.ldexp(2.0 - math.ldexp(1.0, -23), 127)


def _check_clamp(clamp, fn):
    """clamp (a float) unless, positive, it rounds to 0 or overflows in float32, the C float the
    kernels take (each dtype's own rounding: the C library's check, fastglu_glu_clamp)."""
    if clamp > 0.0:
        c32 = _f32(clamp)
        if c32 == 0.0:
            _fail(
                ValueError,
                fn,
                f"clamp_value = {clamp!r} is positive but rounds to 0 in float32 (a clamp must "
                "stay positive; None, 0 or a negative value mean no clamp)",
            )
        if clamp != math.inf and clamp > _FLT32_MAX:  # (also where it would round down to it)
            _fail(
                ValueError,
                fn,
                f"clamp_value = {clamp!r} is beyond the float32 range (torch.clamp refuses "
                "such a bound)",
            )
    return clamp


_FLT_MAX = 3.4028234663852886e38  # float32's largest finite value


def _check_float32(v, fn, name):
    """ValueError unless the option v is finite in float32, where the kernels compute (inf, NaN or
    beyond its range refused): a comparison, as math.isfinite would refuse the SymFloat
    torch.compile(dynamic=True) passes. glu_params and op_params share it."""
    if not -_FLT_MAX <= v <= _FLT_MAX:
        _fail(ValueError, fn, f"{name} must be finite in float32, got {v}")


def _is_flag(v) -> bool:
    """Whether v is a bool (or equal to one: 0, 1, numpy's bools), not a string or None that would
    pass as truthy or falsy."""
    try:
        return not isinstance(v, str) and v is not None and (v == True or v == False)  # noqa: E712
    except Exception:
        return False


def glu_params(
    activation="silu",
    *,
    clamp_value=None,
    glu_linear_offset=0.0,
    gate_multiplier=1.0,
    down_multiplier=1.0,
    interleaved=False,
    fn="glu",
) -> GLUParams:
    """Validate the options and pack them as the binding takes them.

    Args:
        activation: ``"silu"`` (SwiGLU), ``"gelu_tanh"`` (GeGLU, Megatron's tanh approximation) or
            ``"quick_gelu"`` (quick-GeGLU, ``z * sigmoid(1.702 z)``).
        clamp_value: None, 0, a negative value or NaN: no clamp; c > 0 clamps gate to ``<= c`` and
            up to ``[-c, c]`` before the bias (Megatron's ``weighted_bias_quick_geglu_impl``), with
            c rounded to the input's dtype as ``torch.clamp`` rounds its bound (through float32,
            to nearest even): 1.1 clamps a bf16 input at 1.1015625, and an operand equal to that
            passes its gradient. A positive value that rounds to 0, or a finite one beyond the
            dtype's range (torch.clamp refuses it), raises ValueError (float32 here, the input's
            dtype when the kernel runs).
        glu_linear_offset: o, added to up after clamp and bias.
        gate_multiplier, down_multiplier: Liger's m_g (inside the activation) and m_d (on the output).
        interleaved: gate at even, up at odd columns of the [..., 2F] input.

    Raises:
        ValueError: an unknown activation, an offset or multiplier that is not finite in float32,
            a clamp_value beyond float32's range, a positive clamp_value that rounds to 0 in float32.
        TypeError: an option that is not a number, interleaved that is not a bool.
    """
    code = ACTIVATIONS.get(activation) if isinstance(activation, str) else None
    if code is None:
        _fail(
            ValueError, fn, f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}"
        )
    clamp = (
        0.0 if clamp_value is None else _check_clamp(_number(clamp_value, fn, "clamp_value"), fn)
    )
    vals = []
    for name, v in (
        ("glu_linear_offset", glu_linear_offset),
        ("gate_multiplier", gate_multiplier),
        ("down_multiplier", down_multiplier),
    ):
        f = _number(v, fn, name)
        _check_float32(f, fn, name)
        vals.append(f)
    if not _is_flag(interleaved):
        _fail(TypeError, fn, f"interleaved must be a bool, got {interleaved!r}")
    layout = _C.LAYOUT_INTERLEAVED if interleaved else _C.LAYOUT_SPLIT
    return GLUParams(code, layout, clamp, vals[0], vals[1], vals[2])


SILU = GLUParams(
    _C.ACT_SILU, _C.LAYOUT_SPLIT, 0.0, 0.0, 1.0, 1.0
)  # plain SwiGLU: fastglu.swiglu's params


# ---- the integer codes of the torch.library ops ------------------------------------------------

ACTIVATION_CODES = {code: name for name, code in ACTIVATIONS.items()}
LAYOUT_CODES = {_C.LAYOUT_SPLIT: "split", _C.LAYOUT_INTERLEAVED: "interleaved"}


def check_code(value, codes, fn, name):
    """ValueError unless value, an integer code argument of a torch.library op (an activation, a
    layout, a scaling, a path ...), is one of codes ({code: meaning}). The ops' eager kernels and
    fake implementations call it before they allocate or write anything."""
    if type(value) is bool or value not in codes:
        _fail(ValueError, fn, f"{name} code {value!r} is not one of {codes}")


def op_params(
    fn, activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier
):
    """A torch.library op's GLU scalars (codes and floats, in GLUParams order) as a GLUParams;
    ValueError for an unknown activation or layout code, an offset or multiplier not finite in
    float32, or a positive clamp_value that float32 turns into 0 or inf (what glu_params refuses).
    Shared by the ops' kernels and fakes."""
    check_code(activation, ACTIVATION_CODES, fn, "activation")
    check_code(layout, LAYOUT_CODES, fn, "layout")
    for name, v in (
        ("glu_linear_offset", glu_linear_offset),
        ("gate_multiplier", gate_multiplier),
        ("down_multiplier", down_multiplier),
    ):
        _check_float32(v, fn, name)
    _check_clamp(clamp_value, fn)  # a positive clamp that float32 turns into 0 (no clamp) or inf
    return GLUParams(
        activation, layout, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier
    )


def _fp8_mode(fp8_input_store, fn):
    if fp8_input_store is None or fp8_input_store is False:
        return False
    if fp8_input_store is True or fp8_input_store in ("per_row", "per_tensor", "blockwise"):
        return fp8_input_store
    _fail(
        ValueError,
        fn,
        f"fp8_input_store must be False, True (plain cast), 'per_row', 'per_tensor' or "
        f"'blockwise'; "
        f"got {fp8_input_store!r}",
    )


# GLUFunction applied as functional.py applies fastglu.swiglu's Function: what Function.apply does


# ---- tensor checks ---------------------------------------------------------------------------


def check_dense(t, fn: str, name: str):
    """TypeError unless the tensor t is dense (torch.strided and not nested)."""
    if t.is_nested:
        _fail(
            TypeError,
            fn,
            f"{name} is a nested tensor (layout {t.layout}); fastglu needs a dense "
            f"(torch.strided) tensor",
        )
    if t.layout != torch.strided:
        _fail(
            TypeError,
            fn,
            f"{name} has layout {t.layout}; fastglu needs a dense (torch.strided) tensor",
        )


def check_storage(t, fn: str, name: str):
    """Refuse a tensor with elements but no memory (data_ptr() 0), whose pointer the C library would
    read as an absent argument: TypeError for a subclass that holds no storage of its own (a wrapper
    such as DTensor), ValueError for a plain tensor whose storage was freed (resized to 0, as FSDP
    does to sharded parameters) or that has none (an efficient zero tensor)."""
    if t.numel():
        try:
            ptr = t.data_ptr()
        except RuntimeError:
            ptr = 0
        if ptr == 0:
            if type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter:
                _fail(
                    TypeError,
                    fn,
                    f"{name} is a {type(t).__name__} with no storage of its own; pass a plain "
                    f"tensor (e.g. a DTensor's to_local())",
                )
            _fail(
                ValueError,
                fn,
                f"{name} has {t.numel()} elements but no memory (data_ptr() is 0: a storage "
                f"resized to 0, e.g. a sharded FSDP parameter, or an efficient zero tensor)",
            )


def check_storages(fn: str, named) -> None:
    """check_storage on each (name, tensor) of named; None (an absent operand) is skipped."""
    for name, t in named:
        if t is not None:
            check_storage(t, fn, name)


def check_input(x, fn: str, name: str = "input"):
    """Validate a SwiGLU [gate | up] input (2D or 3D, as Megatron's); returns F. Raises TypeError /
    ValueError naming the call."""
    if not isinstance(x, torch.Tensor):
        _fail(TypeError, fn, f"{name} must be a torch.Tensor, got {type(x).__name__}")
    check_dense(x, fn, name)
    if x.dtype not in _COMPUTE_CODES:
        _fail(
            TypeError,
            fn,
            f"{name} has dtype {x.dtype}; expected torch.bfloat16, torch.float16 or torch.float32",
        )
    if x.device.type not in ("cpu", "cuda"):
        _fail(
            ValueError,
            fn,
            f"{name} is on device {x.device}; fastglu runs on 'cpu' and 'cuda' tensors",
        )
    if x.dim() not in (2, 3):
        _fail(
            ValueError,
            fn,
            f"{name} must be 2D [tokens, 2F] or 3D [S, B, 2F], got shape {tuple(x.shape)}",
        )
    width = x.shape[-1]
    if width % 2:
        _fail(
            ValueError,
            fn,
            f"{name}'s last dimension (gate | up) must be even, got shape {tuple(x.shape)}",
        )
    return width // 2


def refuse_out_requiring_grad(out, fn: str, name: str):
    """ValueError for an output tensor (out=) that requires grad while grad mode is on: the kernels
    write it with no autograd record (its values would silently change under an nn.Parameter or in
    the middle of a graph). torch refuses such out= arguments too ("functions with out=...
    arguments don't support automatic differentiation, but one of the arguments requires grad")."""
    if out.requires_grad and torch.is_grad_enabled():
        _fail(
            ValueError,
            fn,
            f"{name} requires grad ({'a leaf' if out.is_leaf else 'a non-leaf'} tensor of shape "
            f"{tuple(out.shape)}); an out= argument is written with no autograd record, as "
            "torch refuses for its own out= functions. Pass a tensor that does not require "
            "grad, or call it under torch.no_grad()",
        )


def refuse_leaf_in_place(t: torch.Tensor, fn: str, name: str):
    """ValueError if an in-place backward would write its gradient over t: a leaf tensor that
    requires grad (an nn.Parameter, a tensor made with requires_grad=True) or a view of one. torch
    refuses in-place operations on them ("a leaf Variable that requires grad is being used in an
    in-place operation."); the gradient would silently replace the parameter's values."""
    if not t.requires_grad:
        return
    if t.is_leaf:
        what = "a leaf tensor that requires grad"
    else:
        base = t._base
        if base is None or not (base.is_leaf and base.requires_grad):
            return
        what = "a view of a leaf tensor that requires grad"
    _fail(
        ValueError,
        fn,
        f"in_place=True: {name} ({type(t).__name__} of shape {tuple(t.shape)}) is {what} "
        "(e.g. an nn.Parameter), which the backward would overwrite with its gradient; torch "
        "refuses this too (a leaf Variable that requires grad is being used in an in-place "
        "operation). Pass in_place=False, or a non-leaf tensor (a layer's output).",
    )


def _never_zero(t) -> bool:  # pragma: no cover - a torch without efficient zero tensors
    return False


# is_zero_tensor(t): whether t is an efficient zero tensor (``torch._efficientzerotensor``, which
# autograd may pass as an upstream gradient): all zeros, with no memory (data_ptr() 0). The method
# itself, called as a function (it is on the backward's hot path).
is_zero_tensor = getattr(torch.Tensor, "_is_zerotensor", _never_zero)


# ---- tensors as rows --------------------------------------------------------------------------


def _row_stride(shape, stride):
    """(tokens, row stride) of a tensor seen as rows of its last dimension, with row t the
    row-major flat index of its leading dimensions; row stride None when the leading dimensions do
    not merge into one evenly strided index. A single row gets row stride 0. (The 2D and 3D cases,
    on every call's path, without the loop.)"""
    nd = len(shape)
    if nd == 2:
        n = shape[0]
        return n, (stride[0] if n > 1 else 0)
    if nd == 3:
        s0, s1 = shape[0], shape[1]
        if s0 == 0 or s1 == 0:
            return 0, 0
        if s1 == 1:
            return s0, (stride[0] if s0 > 1 else 0)
        if s0 == 1 or stride[0] == s1 * stride[1]:
            return s0 * s1, stride[1]
        return s0 * s1, None
    tokens = 1
    for n in shape[:-1]:
        tokens *= n
    if tokens == 0:
        return 0, 0
    rs = span = None
    for n, s in zip(reversed(shape[:-1]), reversed(stride[:-1])):
        if n == 1:
            continue
        if rs is None:
            rs = s
        elif s != span:
            return tokens, None
        span = s * n
    return tokens, 0 if rs is None else rs


def _flat_stride(t):
    """The stride of a tensor's elements seen as one flat row-major vector, or None."""
    shape, stride = tuple(t.shape) + (1,), tuple(t.stride()) + (1,)
    return _row_stride(shape, stride)[1]


def _check_tensor(t, fn, name, codes, what, zero_ok=False):
    """zero_ok: an efficient zero tensor (no memory) is accepted (an upstream gradient)."""
    if not isinstance(t, torch.Tensor):
        _fail(TypeError, fn, f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout is not _STRIDED or t.is_nested:
        check_dense(t, fn, name)
    if t.dtype not in codes:
        _fail(TypeError, fn, f"{name} has dtype {t.dtype}; expected {what}")
    if t.device.type not in ("cpu", "cuda"):
        _fail(
            ValueError,
            fn,
            f"{name} is on device {t.device}; fastglu runs on 'cpu' and 'cuda' tensors",
        )
    if not zero_ok:
        check_storage(t, fn, name)


def _rows(t):
    """t (or a contiguous copy) as rows: (tensor, tokens, row stride, copied)."""
    shape = t.shape
    tokens, rs = _row_stride(shape, t.stride())
    if rs is None or (shape[-1] > 1 and t.stride()[-1] != 1) or t.is_neg():
        return t.resolve_neg().contiguous(), tokens, shape[-1], True
    return t, tokens, rs, False


class _Operands:
    """The validated gate/up operands of one call."""

    __slots__ = (
        "x",
        "up",
        "x_given",
        "up_given",
        "code",
        "dtype",
        "lead",
        "F",
        "tokens",
        "x_rs",
        "up_rs",
        "layout",
        "device",
        "two",
    )

    def pointers(self):
        """(gate pointer, gate row stride, up pointer, up row stride) for the C call."""
        if self.two:
            return self.x.data_ptr(), self.x_rs, self.up.data_ptr(), self.up_rs
        if self.layout == _C.LAYOUT_INTERLEAVED:
            return self.x.data_ptr(), self.x_rs, 0, 0
        return (
            self.x.data_ptr(),
            self.x_rs,
            self.x.data_ptr() + self.F * self.x.element_size(),
            self.x_rs,
        )

    def copies(self):
        """The given inputs that had to be copied (the C overlap check sees only the copies)."""
        out = []
        if self.x is not self.x_given:
            out.append(self.x_given)
        if self.two and self.up is not self.up_given:
            out.append(self.up_given)
        return out


def _operands(x, up, layout, fn, allow_fp8=False):
    codes, what = (
        (_INPUT_CODES, _COMPUTE_WHAT + " (or torch.float8_e4m3fn, a saved input)")
        if allow_fp8
        else (_COMPUTE_CODES, _COMPUTE_WHAT)
    )
    op = _Operands()
    op.layout = layout
    op.two = up is not None
    if not op.two:
        _check_tensor(x, fn, "input", codes, what)
        if x.dim() < 1:
            _fail(
                ValueError,
                fn,
                "input must have at least one dimension [..., 2F], got a 0-dim tensor",
            )
        if x.shape[-1] % 2:
            _fail(
                ValueError,
                fn,
                f"input's last dimension (gate | up) must be even, got shape {tuple(x.shape)}",
            )
        op.F = x.shape[-1] // 2
    else:
        if layout == _C.LAYOUT_INTERLEAVED:
            _fail(
                ValueError,
                fn,
                "interleaved=True takes one [..., 2F] input, not separate gate and up tensors",
            )
        _check_tensor(x, fn, "gate", codes, what)
        _check_tensor(up, fn, "up", codes, what)
        if x.dim() < 1:
            _fail(
                ValueError, fn, "gate must have at least one dimension [..., F], got a 0-dim tensor"
            )
        if up.shape != x.shape:
            _fail(
                ValueError,
                fn,
                f"up has shape {tuple(up.shape)} but gate has shape {tuple(x.shape)}",
            )
        if up.dtype != x.dtype:
            _fail(TypeError, fn, f"up has dtype {up.dtype} but gate has dtype {x.dtype}")
        if up.device != x.device:
            _fail(ValueError, fn, f"up is on {up.device} but gate is on {x.device}")
        op.F = x.shape[-1]
    op.x_given, op.up_given = x, up
    op.code = codes[x.dtype]
    op.dtype = x.dtype
    op.device = x.device
    op.lead = tuple(x.shape[:-1])
    op.x, op.tokens, op.x_rs, _ = _rows(x)
    if op.two:
        op.up, _, op.up_rs, _ = _rows(up)
    else:
        op.up, op.up_rs = None, 0
    return op


def _check_bias(bias, op, dtype, fn):
    """bias: None or [2F] of dtype on op's device; returns (tensor or None, copied original or None)."""
    if bias is None:
        return None, None
    _check_tensor(bias, fn, "bias", _COMPUTE_CODES, _COMPUTE_WHAT)
    if bias.dtype != dtype:
        _fail(TypeError, fn, f"bias has dtype {bias.dtype} but the input has dtype {dtype}")
    if bias.device != op.device:
        _fail(ValueError, fn, f"bias is on {bias.device} but the input is on {op.device}")
    if tuple(bias.shape) != (2 * op.F,):
        _fail(
            ValueError,
            fn,
            f"bias has shape {tuple(bias.shape)}; expected [2F] = ({2 * op.F},) "
            f"([b_gate | b_up]) for F = {op.F}",
        )
    if (op.F and bias.stride()[0] != 1) or bias.is_neg():
        return bias.resolve_neg().contiguous(), bias
    return bias, None


def _weights_shapes(op):
    T = op.tokens
    return {(T,), (T, 1), op.lead, op.lead + (1,)}


def shape_is_one_of(shape, *candidates) -> bool:
    """tuple(shape) equal to one of the candidate shapes, each compared on its own: symbolic sizes
    (torch.compile) do not hash, and a tuple's membership in a list of tuples holding them is not
    traced as these comparisons are (a recompile with dynamic leading sizes refused [3, 11, 1]
    weights for a [3, 11, 2F] input)."""
    shape = tuple(shape)
    for c in candidates:
        if shape == c:
            return True
    return False


def check_weights_meta(weights, lead, device, fn):
    """The checks of per-token weights that need no data (the eager op layer, the ops' fakes,
    fastglu.glu_fp8): a dense tensor of a compute dtype on the input's device, of shape [tokens, 1]
    / [tokens] or the input's leading shape ``lead``, with or without a trailing 1."""
    if not isinstance(weights, torch.Tensor):
        _fail(TypeError, fn, f"weights must be a torch.Tensor, got {type(weights).__name__}")
    check_dense(weights, fn, "weights")
    if weights.dtype not in _COMPUTE_CODES:
        _fail(TypeError, fn, f"weights has dtype {weights.dtype}; expected {_COMPUTE_WHAT}")
    if weights.device != device:
        _fail(ValueError, fn, f"weights is on {weights.device} but the input is on {device}")
    tokens = math.prod(lead)
    if not shape_is_one_of(weights.shape, (tokens,), (tokens, 1), lead, lead + (1,)):
        _fail(
            ValueError,
            fn,
            f"weights has shape {tuple(weights.shape)}; expected per-token weights [tokens, 1] "
            f"or [tokens] with tokens = {tokens} (input leading shape {lead})",
        )


def _check_weights(weights, op, fn):
    """weights: None or per-token [T, 1] / [T] (or the input's leading shape, with or without a
    trailing 1); returns (tensor, dtype code, element stride, copied original or None)."""
    if weights is None:
        return None, 0, 0, None
    _check_tensor(weights, fn, "weights", _COMPUTE_CODES, _COMPUTE_WHAT)  # (device type, storage)
    check_weights_meta(weights, op.lead, op.device, fn)
    s = _flat_stride(weights)
    if s is None or weights.is_neg():
        w = weights.resolve_neg().contiguous()
        return w, _COMPUTE_CODES[w.dtype], 1, weights
    return weights, _COMPUTE_CODES[weights.dtype], s, None


def _check_out(out, shape, dtype, device, fn, name):
    """A caller-given output: the shape, dtype and device wanted, evenly strided rows with unit
    column stride and no negation flag. Returns its row stride."""
    if not isinstance(out, torch.Tensor):
        _fail(TypeError, fn, f"{name} must be a torch.Tensor, got {type(out).__name__}")
    check_dense(out, fn, name)
    refuse_out_requiring_grad(out, fn, name)
    if out.dtype != dtype:
        _fail(TypeError, fn, f"{name} has dtype {out.dtype}; expected {dtype}")
    if tuple(out.shape) != tuple(shape) or out.device != device or out.layout != _STRIDED:
        _fail(
            ValueError,
            fn,
            f"{name} must be a dense tensor of shape {tuple(shape)} on device {device}; got "
            f"shape {tuple(out.shape)} on device {out.device} (layout {out.layout})",
        )
    _, rs = _row_stride(out.shape, out.stride())
    if rs is None or (shape[-1] > 1 and out.stride()[-1] != 1) or out.is_neg():
        _fail(
            ValueError,
            fn,
            f"{name} (strides {out.stride()}) must have evenly strided rows with unit column "
            "stride and no negation flag",
        )
    return rs


def _may_overlap(a, b):
    """Whether the memory spans of a and b intersect (bounding ranges: may say yes for an
    interleaving that shares no byte). Used where the C library's exact check only saw a copy."""
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False

    def span(t):
        start = t.data_ptr()
        last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        return start, start + (last + 1) * t.element_size()

    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


def _refuse_overlaps(outs, originals, fn):
    for o in outs:
        for name, t in originals:
            if t is not None and _may_overlap(o, t):
                _fail(ValueError, fn, f"an output overlaps {name}")


def _launch(kernel, dev, args):
    """kernel(on_cuda, *args, stream) on device index dev (``t.get_device()`` of a cpu / cuda tensor
    t: -1 on the CPU): a CUDA device's current stream, under a device guard only when dev is not
    the current device. Every kernel of the package is launched through it (or the same three
    cases inline on ops.py's hot path)."""
    if dev < 0:
        return kernel(0, *args, 0)
    if dev == _current_device():
        return kernel(1, *args, _raw_stream(dev))
    with torch.cuda.device(dev):
        return kernel(1, *args, _raw_stream(dev))


# ---- the common case, checked with a few attribute reads ------------------------------------
# Host time matters at small sizes (MoE experts see few tokens). The op layer below validates every
# argument with messages; the common case of Megatron's entry points (one plain 2D/3D input with
# evenly strided rows and unit column stride, a contiguous [2F] bias, contiguous per-token
# weights, all on one cpu/cuda device, no caller-given output) is recognised here first and goes
# straight to the C call; anything else returns None and takes the checked path, which raises the
# precise error or copies what it must. Both paths make the same C call for the common case.

_DENSE = (torch.Tensor, torch.nn.Parameter)
_SPLIT = _C.LAYOUT_SPLIT
_ELEMENT_SIZES = {
    _C.DTYPE_FP32: 4,
    _C.DTYPE_FP16: 2,
    _C.DTYPE_BF16: 2,
}  # (a dict lookup, cheaper than element_size())


def _fast_case(x, bias, weights):
    """(dtype, dtype code, output shape, tokens, row stride, F, device index (-1: the CPU), weights'
    dtype code) of the common case, or None. Every read is inline (no helper calls): this runs in
    every forward and backward."""
    if type(x) not in _DENSE or x.layout is not _STRIDED or x.is_nested or x.is_neg():
        return None  # (checked first: a nested tensor has no .shape)
    dtype = x.dtype
    code = _COMPUTE_CODES.get(dtype)
    if code is None:
        return None
    shape = x.shape
    stride = x.stride()
    nd = len(shape)
    if nd == 2:  # _row_stride's 2D and 3D cases
        tokens = shape[0]
        rs = stride[0] if tokens > 1 else 0
    elif nd == 3:
        s0, s1 = shape[0], shape[1]
        tokens = s0 * s1
        if s1 == 1:
            rs = stride[0] if s0 > 1 else 0
        elif s0 == 1 or stride[0] == s1 * stride[1]:
            rs = stride[1]
        else:
            return None
    else:
        return None
    width = shape[-1]
    if stride[-1] != 1 or width & 1 or not width or not tokens:
        return None
    if x.is_cuda:
        dev = x.get_device()
    elif x.is_cpu:
        dev = -1
    else:
        return None
    F = width >> 1
    if bias is not None and not (
        type(bias) in _DENSE
        and bias.layout is _STRIDED
        and not bias.is_nested
        and bias.dtype is dtype
        and bias.shape == (width,)
        and bias.stride(0) == 1
        and not bias.is_neg()
        and (bias.is_cuda and bias.get_device() == dev if dev >= 0 else bias.is_cpu)
        and bias.data_ptr()
    ):
        return None
    w_code = 0
    if weights is not None:
        if not (
            type(weights) in _DENSE
            and weights.layout is _STRIDED
            and not weights.is_nested
            and not weights.is_neg()
            and (weights.is_cuda and weights.get_device() == dev if dev >= 0 else weights.is_cpu)
        ):
            return None
        w_code = _COMPUTE_CODES.get(weights.dtype)
        if (
            w_code is None
            or weights.shape not in ((tokens, 1), (tokens,))
            or not weights.is_contiguous()
            or not weights.data_ptr()
        ):
            return None
    out_shape = (shape[0], F) if nd == 2 else (shape[0], shape[1], F)  # a tuple: parsed faster
    return dtype, code, out_shape, tokens, rs, F, dev, w_code


def _fwd_common(p, x, bias, weights):
    """The forward of the common case (a fresh output), or None."""
    c = _fast_case(x, bias, weights)
    if c is None:
        return None
    _, code, out_shape, tokens, rs, F, dev, w_code = c
    y = x.new_empty(out_shape)
    g_ptr = x.data_ptr()
    act, layout, clamp, offset, m_g, m_d = p
    # (int(F): under torch.jit.trace the sizes are tensors; a pointer must be an int)
    u_ptr, u_rs = (g_ptr + int(F) * _ELEMENT_SIZES[code], rs) if layout == _SPLIT else (0, 0)
    b_ptr = 0 if bias is None else bias.data_ptr()
    w_ptr = 0 if weights is None else weights.data_ptr()
    y_ptr = y.data_ptr()
    if dev < 0:
        cuda = stream = 0
    elif dev == _current_device():
        cuda, stream = 1, _raw_stream(dev)
    else:  # another device than the current one: under a device guard
        _launch(
            _C.glu_fwd,
            dev,
            (act, layout, clamp, offset, m_g, m_d, g_ptr, rs, u_ptr, u_rs, b_ptr, w_ptr, w_code)
            + (1, y_ptr, F, 0, 0, tokens, F, code),
        )
        return y
    _C.glu_fwd(
        cuda,
        act,
        layout,
        clamp,
        offset,
        m_g,
        m_d,
        g_ptr,
        rs,
        u_ptr,
        u_rs,
        b_ptr,
        w_ptr,
        w_code,
        1,
        y_ptr,
        F,
        0,
        0,
        tokens,
        F,
        code,
        stream,
    )
    return y


def _bwd_common(p, dy, x, bias, weights, want_db, want_dw):
    """(dx, dbias, dweights) of the common case (x of dy's dtype, fresh outputs; dy of any strides
    that merge into one row index), or None. want_db / want_dw need the bias / weights."""
    c = _fast_case(x, bias, weights)
    if c is None:
        return None
    dtype, code, out_shape, tokens, rs, F, dev, w_code = c
    if not (
        type(dy) is _Tensor
        and dy.layout is _STRIDED
        and not dy.is_nested
        and dy.dtype is dtype
        and dy.shape == out_shape
        and not dy.is_neg()
        and (dy.is_cuda and dy.get_device() == dev if dev >= 0 else dy.is_cpu)
    ):
        return None
    dy_ptr = dy.data_ptr()
    if not dy_ptr:  # an efficient zero tensor (no memory): the checked path answers it
        return None
    dy_stride = dy.stride()
    if len(out_shape) == 2:  # _row_stride's 2D and 3D cases
        dy_rs = dy_stride[0] if tokens > 1 else 0
    else:
        s0, s1 = out_shape[0], out_shape[1]
        if s1 == 1:
            dy_rs = dy_stride[0] if s0 > 1 else 0
        elif s0 == 1 or dy_stride[0] == s1 * dy_stride[1]:
            dy_rs = dy_stride[1]
        else:
            return None
    dx = x.new_empty(x.shape)
    dbias = x.new_empty((2 * F,)) if want_db else None
    dw = weights.new_empty(weights.shape) if want_dw else None  # (contiguous, as weights are)
    ws_bytes = _C.glu_bwd_workspace_bytes(tokens, F, want_db, want_dw) if want_db or want_dw else 0
    ws = x.new_empty((ws_bytes,), dtype=torch.uint8) if ws_bytes else None
    g_ptr, dg_ptr = x.data_ptr(), dx.data_ptr()
    act, layout, clamp, offset, m_g, m_d = p
    if layout == _SPLIT:
        es = int(F) * _ELEMENT_SIZES[code]
        u_ptr, u_rs, du_ptr, du_rs = g_ptr + es, rs, dg_ptr + es, 2 * F
    else:
        u_ptr = u_rs = du_ptr = du_rs = 0
    args = (
        act,
        layout,
        clamp,
        offset,
        m_g,
        m_d,
        dy_ptr,
        dy_rs,
        dy_stride[-1],
        g_ptr,
        rs,
        u_ptr,
        u_rs,
        code,
        0,
        0,
        0,
        0 if bias is None else bias.data_ptr(),
        0 if weights is None else weights.data_ptr(),
        w_code,
        1,
        dg_ptr,
        2 * F,
        du_ptr,
        du_rs,
        0 if dbias is None else dbias.data_ptr(),
        0 if dw is None else dw.data_ptr(),
        0 if ws is None else ws.data_ptr(),
        ws_bytes,
        tokens,
        F,
        code,
    )
    if dev < 0:
        _C.glu_bwd(0, *args, 0)
    elif dev == _current_device():
        _C.glu_bwd(1, *args, _raw_stream(dev))
    else:
        _launch(_C.glu_bwd, dev, args)
    return dx, dbias, dw


# ---- the op layer -----------------------------------------------------------------------------


def _fwd_checked(p: GLUParams, x, up, bias, weights, out, saved_fp8, fn):
    """The forward: (y, the fp8 copy or None). saved_fp8: None, a caller's tensor, or True (allocate
    it: contiguous ``[..., 2F]`` float8_e4m3fn with the input's leading shape)."""
    op = _operands(x, up, p.layout, fn)
    b, b_orig = _check_bias(bias, op, op.dtype, fn)
    w, w_code, w_stride, w_orig = _check_weights(weights, op, fn)
    out_shape = op.lead + (op.F,)
    copies = [("input", t) for t in op.copies()] + [("bias", b_orig), ("weights", w_orig)]
    if out is None:
        y, y_rs = torch.empty(out_shape, dtype=op.dtype, device=op.device), op.F
    else:
        y_rs = _check_out(out, out_shape, op.dtype, op.device, fn, "out")
        y = out
        _refuse_overlaps((out,), copies, fn)
    s8_shape = op.lead + (2 * op.F,)
    if saved_fp8 is None:
        s8, s8_rs = None, 0
    elif saved_fp8 is True:
        s8, s8_rs = torch.empty(s8_shape, dtype=_FP8, device=op.device), 2 * op.F
    else:
        s8_rs = _check_out(saved_fp8, s8_shape, _FP8, op.device, fn, "saved_fp8")
        s8 = saved_fp8
        _refuse_overlaps((s8,), copies, fn)
    if op.tokens and op.F:
        g_ptr, g_rs, u_ptr, u_rs = op.pointers()
        _launch(
            _C.glu_fwd,
            op.x.get_device(),
            (
                *p,
                g_ptr,
                g_rs,
                u_ptr,
                u_rs,
                0 if b is None else b.data_ptr(),
                0 if w is None else w.data_ptr(),
                w_code,
                w_stride,
                y.data_ptr(),
                y_rs,
                0 if s8 is None else s8.data_ptr(),
                s8_rs,
                op.tokens,
                op.F,
                op.code,
            ),
        )
    return y, s8


def forward(
    p: GLUParams, x, up=None, bias=None, weights=None, *, out=None, saved_fp8=None, fn="glu_fwd"
):
    """``glu_fwd`` with prepared parameters (``glu_params``): the common case's short path, else the
    checked one."""
    if out is None and saved_fp8 is None and up is None:
        y = _fwd_common(p, x, bias, weights)
        if y is not None:
            return y
    if saved_fp8 is not None and not isinstance(saved_fp8, torch.Tensor):
        _fail(
            TypeError,
            fn,
            f"saved_fp8 must be None or a torch.Tensor, got {type(saved_fp8).__name__}",
        )
    return _fwd_checked(p, x, up, bias, weights, out, saved_fp8, fn)[0]


def glu_fwd(
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
    out=None,
    saved_fp8=None,
    fn="glu_fwd",
):
    """The gated activation's forward, without autograd.

    Args:
        x: ``[..., 2F]`` (gate | up, or interleaved), or the gate ``[..., F]`` when ``up`` is given;
            bfloat16 / float16 / float32 on CPU or CUDA.
        up: None, or the up projection ``[..., F]`` (same shape, dtype and device as x).
        activation, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier, interleaved:
            see ``glu_params``.
        bias: None or ``[2F]`` of x's dtype: ``[b_gate | b_up]`` (interleaved like x when
            ``interleaved``).
        weights: None or per-token weights ``[tokens, 1]`` / ``[tokens]`` (or x's leading shape,
            with or without a trailing 1), float32 / bfloat16 / float16.
        out: optional output ``[..., F]`` of x's dtype and device (rows evenly strided, unit column
            stride, not overlapping any input).
        saved_fp8: optional ``[..., 2F]`` torch.float8_e4m3fn tensor on x's device (the input's
            leading shape; rows evenly strided, unit column stride, not overlapping any input or
            ``out``) that receives, in the same pass, the operands (before the bias) cast exactly
            as ``t.to(torch.float8_e4m3fn)`` (round to nearest even, saturating at +-448, NaN
            kept) -- with a clamp, each first moved to its side of the bound (module docstring;
            include/fastglu.h) --, in the operands' layout: ``[gate | up]`` (also for two tensors), or
            interleaved pairs like x. ``glu_bwd(dy, saved_fp8, ...)`` (or, for two tensors,
            ``glu_bwd(dy, saved_fp8[..., :F], saved_fp8[..., F:], ...)``) then reads it.

    Returns:
        ``y`` of shape ``[..., F]`` in x's dtype (also with weights of another dtype).

    Raises:
        TypeError: a non-tensor, a non-dense tensor, a dtype other than bf16/fp16/fp32, mixed dtypes,
            a ``saved_fp8`` that is not float8_e4m3fn.
        ValueError: odd last dimension, bias not [2F], weights not per-token, mixed devices, an
            ``out`` or ``saved_fp8`` of the wrong shape/device/strides or overlapping an input, bad
            options.
    """
    p = glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        interleaved=interleaved,
        fn=fn,
    )
    return forward(p, x, up, bias, weights, out=out, saved_fp8=saved_fp8, fn=fn)


class GLUGrads(NamedTuple):
    """Gradients from ``glu_bwd``: ``dx`` has x's shape (the [..., 2F] input, or the gate tensor in
    the two-tensor form) in the compute dtype; ``d_up`` the up tensor's (two-tensor form only);
    ``dbias`` ``[2F]`` (summed over tokens); ``dweights`` the weights' shape and dtype."""

    dx: torch.Tensor
    d_up: Optional[torch.Tensor]
    dbias: Optional[torch.Tensor]
    dweights: Optional[torch.Tensor]


def scale_blocks(layout, F):
    """The 1 x 128 blocks of a row of block scales (``fp8_input_store="blockwise"``): 2 ceil(F / 128)
    for the split layout (gate's blocks, then up's), ceil(2F / 128) for the interleaved one."""
    if layout == _C.LAYOUT_INTERLEAVED:
        return (2 * F + 127) // 128
    return 2 * ((F + 127) // 128)


def _check_scale_inv(scale_inv, op, layout, fn):
    """fp32 scale_inv: one value (stride 0), one per token, or one per 1 x 128 block of each row
    (``[..., scale_blocks]``, the input's leading shape or ``[tokens, scale_blocks]``). Returns
    (tensor, row stride, blockwise, copied orig)."""
    if scale_inv is None:
        return None, 0, 0, None
    if op.dtype != _FP8:
        _fail(
            ValueError,
            fn,
            f"input_scale_inv is given but the saved input has dtype {op.dtype}, not "
            "torch.float8_e4m3fn (a scale only applies to an fp8 input)",
        )
    _check_tensor(scale_inv, fn, "input_scale_inv", {torch.float32: 0}, "torch.float32")
    if scale_inv.device != op.device:
        _fail(
            ValueError,
            fn,
            f"input_scale_inv is on {scale_inv.device} but the input is on {op.device}",
        )
    if scale_inv.numel() == 1 and op.tokens != 1:
        return scale_inv, 0, 0, None
    nb = scale_blocks(layout, op.F)
    shape = tuple(scale_inv.shape)
    if nb != 1 and shape in ((op.tokens, nb), op.lead + (nb,)):  # (nb = 1: per token, the same)
        rs = _row_stride(shape, scale_inv.stride())[1]
        if rs is None or scale_inv.stride()[-1] != 1 or scale_inv.is_neg():
            return scale_inv.resolve_neg().contiguous(), nb, 1, scale_inv
        return scale_inv, rs, 1, None
    if shape not in _weights_shapes(op) and scale_inv.numel() != 1:
        _fail(
            ValueError,
            fn,
            f"input_scale_inv has shape {shape}; expected one value, one per token ({op.tokens}) "
            f"or one per 1 x 128 block of each row ({op.tokens}, {nb})",
        )
    s = _flat_stride(scale_inv)
    if s is None or scale_inv.is_neg():
        return scale_inv.resolve_neg().contiguous(), 1, 0, scale_inv
    return scale_inv, s, 0, None


def backward(
    p: GLUParams,
    dy,
    x,
    up=None,
    bias=None,
    weights=None,
    *,
    input_scale_inv=None,
    want_dbias=None,
    want_dweights=None,
    out=None,
    fn="glu_bwd",
    out_name="out (dinput)",
) -> GLUGrads:
    """``glu_bwd`` with prepared parameters (``glu_params``)."""
    op = _operands(x, up, p.layout, fn, allow_fp8=True)
    if not isinstance(dy, torch.Tensor):
        _fail(TypeError, fn, f"dy must be a torch.Tensor, got {type(dy).__name__}")
    dy_zero = is_zero_tensor(
        dy
    )  # an efficient zero tensor: every gradient is zero, nothing is launched
    _check_tensor(dy, fn, "dy", _COMPUTE_CODES, _COMPUTE_WHAT, zero_ok=dy_zero)
    if dy.device != op.device:
        _fail(ValueError, fn, f"dy is on {dy.device} but the input is on {op.device}")
    if op.dtype != _FP8 and dy.dtype != op.dtype:
        _fail(TypeError, fn, f"dy has dtype {dy.dtype} but the input has dtype {op.dtype}")
    dtype = dy.dtype
    code = _COMPUTE_CODES[dtype]
    dy_shape = op.lead + (op.F,)
    if tuple(dy.shape) != dy_shape:
        _fail(
            ValueError,
            fn,
            f"dy has shape {tuple(dy.shape)}; expected {dy_shape} for the input's shape",
        )
    b, b_orig = _check_bias(bias, op, dtype, fn)
    w, w_code, w_stride, w_orig = _check_weights(weights, op, fn)
    s, s_stride, s_blocks, s_orig = _check_scale_inv(input_scale_inv, op, p.layout, fn)
    want_db = b is not None if want_dbias is None else bool(want_dbias)
    want_dw = w is not None if want_dweights is None else bool(want_dweights)
    if want_db and b is None:
        _fail(ValueError, fn, "want_dbias=True needs a bias")
    if want_dw and w is None:
        _fail(ValueError, fn, "want_dweights=True needs weights")
    x_shape = tuple(op.x_given.shape)
    if out is None:
        dx = torch.empty(x_shape, dtype=dtype, device=op.device)
        dx_rs = x_shape[-1]
        d_up, d_up_rs = (
            (torch.empty(x_shape, dtype=dtype, device=op.device), x_shape[-1])
            if op.two
            else (None, 0)
        )
        outs = ()
    else:
        if op.two:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                _fail(
                    TypeError,
                    fn,
                    "out must be a pair (d_gate, d_up) when gate and up are separate tensors",
                )
            dx, d_up = out
            dx_rs = _check_out(dx, x_shape, dtype, op.device, fn, "out[0] (d_gate)")
            d_up_rs = _check_out(d_up, x_shape, dtype, op.device, fn, "out[1] (d_up)")
            outs = (dx, d_up)
        else:
            dx, d_up, d_up_rs = out, None, 0
            dx_rs = _check_out(dx, x_shape, dtype, op.device, fn, out_name)
            outs = (dx,)
    dbias = torch.empty(2 * op.F, dtype=dtype, device=op.device) if want_db else None
    dw = torch.empty(op.tokens, dtype=w.dtype, device=op.device) if want_dw else None
    if op.tokens and op.F and not dy_zero:
        dy_given = dy
        dy_tokens, dy_rs = _row_stride(dy.shape, dy.stride())
        dy_cs = dy.stride()[-1]
        if dy_rs is None or dy.is_neg():
            dy = dy.resolve_neg().contiguous()
            dy_rs, dy_cs = op.F, 1
        if outs:
            _refuse_overlaps(
                outs,
                [("input", t) for t in op.copies()]
                + [
                    ("dy", dy_given if dy is not dy_given else None),
                    ("bias", b_orig),
                    ("weights", w_orig),
                    ("input_scale_inv", s_orig),
                ],
                fn,
            )
        ws_bytes = _C.glu_bwd_workspace_bytes(op.tokens, op.F, want_db, want_dw)
        ws = torch.empty(ws_bytes, dtype=torch.uint8, device=op.device) if ws_bytes else None
        g_ptr, g_rs, u_ptr, u_rs = op.pointers()
        if op.two:
            dg_ptr, du_ptr = dx.data_ptr(), d_up.data_ptr()
        elif p.layout == _C.LAYOUT_INTERLEAVED:
            dg_ptr, du_ptr = dx.data_ptr(), 0
        else:  # d_gate | d_up in one [..., 2F] gradient
            dg_ptr, du_ptr, d_up_rs = dx.data_ptr(), dx.data_ptr() + op.F * dx.element_size(), dx_rs
        _launch(
            _C.glu_bwd,
            op.x.get_device(),
            (
                *p,
                dy.data_ptr(),
                dy_rs,
                dy_cs,
                g_ptr,
                g_rs,
                u_ptr,
                u_rs,
                op.code,
                0 if s is None else s.data_ptr(),
                s_stride,
                s_blocks,
                0 if b is None else b.data_ptr(),
                0 if w is None else w.data_ptr(),
                w_code,
                w_stride,
                dg_ptr,
                dx_rs,
                du_ptr,
                d_up_rs,
                0 if dbias is None else dbias.data_ptr(),
                0 if dw is None else dw.data_ptr(),
                0 if ws is None else ws.data_ptr(),
                ws_bytes,
                op.tokens,
                op.F,
                code,
            ),
        )
    else:
        if dy_zero:
            dx.zero_()
            if d_up is not None:
                d_up.zero_()
        if dbias is not None:
            dbias.zero_()
        if dw is not None:
            dw.zero_()
    if dw is not None:
        dw = dw.view(weights.shape)
    return GLUGrads(dx, d_up, dbias, dw)


def glu_bwd(
    dy,
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
    input_scale_inv=None,
    want_dbias=None,
    want_dweights=None,
    out=None,
    fn="glu_bwd",
) -> GLUGrads:
    """The gated activation's backward, without autograd.

    Args:
        dy: upstream gradient ``[..., F]`` (the forward output's shape), any strides, read in place;
            an efficient zero tensor (``torch._efficientzerotensor``, no memory) gives zero
            gradients (dx, d_up, dbias, dweights) without a kernel launch.
        x, up, bias, weights and the options: as the forward. x (and up) may be the forward's
            input saved as ``torch.float8_e4m3fn``; the compute dtype is then dy's.
        input_scale_inv: fp8 x only: None (scale 1), one float32 value, one per token, or one
            per 1 x 128 block of each row (``[..., scale_blocks(layout, F)]`` or ``[tokens,
            scale_blocks]``: the split layout's gate blocks, then up's; ``fp8_input_store=
            "blockwise"``); the operand is ``fp8 * input_scale_inv``.
        want_dbias, want_dweights: compute the bias / weights gradients (default: when given).
        out: the input gradient's destination: a tensor of x's shape (may be x itself: the
            in-place backward), or a pair (d_gate, d_up) in the two-tensor form.

    Returns:
        ``GLUGrads(dx, d_up, dbias, dweights)``; see GLUGrads.

    Raises:
        TypeError / ValueError: as the forward, and for dy of the wrong shape/dtype/device.
    """
    p = glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        interleaved=interleaved,
        fn=fn,
    )
    return backward(
        p,
        dy,
        x,
        up,
        bias,
        weights,
        input_scale_inv=input_scale_inv,
        want_dbias=want_dbias,
        want_dweights=want_dweights,
        out=out,
        fn=fn,
    )


def glu_bwd_workspace_bytes(
    tokens: int, ffn_hidden_size: int, want_dbias: bool, want_dweights: bool
) -> int:
    """Bytes of workspace the backward needs (fastglu_glu_bwd_workspace_bytes); glu_bwd allocates it
    itself as a uint8 tensor on the input's device."""
    return _C.glu_bwd_workspace_bytes(
        tokens, ffn_hidden_size, bool(want_dbias), bool(want_dweights)
    )


# ---- fp8 saved input ---------------------------------------------------------------------------


def _fp8_clamp(p, dtype, fp8, fn):
    """The clamp bound in dtype that an fp8 store must mark (0.0 without a clamp, or for +inf, which
    cuts nothing); ValueError where the copy could not mark the elements the clamp cuts (a finite
    bound >= 448, e4m3fn's largest value)."""
    c = _clamp_in(p.clamp_value, dtype) if fp8 else 0.0
    if c == math.inf:
        return 0.0
    if c >= FP8_E4M3_MAX:
        _fail(
            ValueError,
            fn,
            f"clamp_value = {p.clamp_value!r} ({c!r} in {dtype}) with fp8_input_store={fp8!r}: "
            f"the fp8 copy needs a clamp below {FP8_E4M3_MAX:g}, float8_e4m3fn's largest "
            "value, to mark the elements the clamp cuts",
        )
    return c


def _fp8_gate_value(c, lo, hi, raw, v):
    """The value the fp8 copy casts for a gate operand under the clamp c: raw the operand, v it as
    cast (fp32, times the scale in the scaled modes), lo / hi the e4m3 values next to the bound in
    v's domain (floats, or tensors that broadcast against v). A cut operand becomes hi, an uncut one
    is kept <= lo; NaN stays NaN (torch.where chains, as the kernels' selects: -0 stays -0)."""
    lo_t = torch.as_tensor(lo, dtype=v.dtype, device=v.device)
    return torch.where(raw.float() > c, hi, torch.where(v > lo_t, lo_t, v))


def _fp8_up_value(c, lo, hi, raw, v):
    """As _fp8_gate_value for an up operand, which the clamp cuts on both sides: +-hi, or within
    [-lo, lo]."""
    r = raw.float()
    lo_t = torch.as_tensor(lo, dtype=v.dtype, device=v.device)
    hi_t = torch.as_tensor(hi, dtype=v.dtype, device=v.device)
    return torch.where(
        r > c,
        hi_t,
        torch.where(r < -c, -hi_t, torch.where(v > lo_t, lo_t, torch.where(v < -lo_t, -lo_t, v))),
    )


def _fp8_operands(p, c, lo, hi, x, up, xs, ups):
    """The values the fp8 copy casts under the clamp c (include/fastglu.h, saved_fp8): xs / ups are
    the operands as cast (fp32, times the scale in the scaled modes), x / up the raw ones; lo / hi
    the e4m3 values next to the bound in that domain (floats, or per-row tensors [..., 1])."""
    if up is not None:
        return _fp8_gate_value(c, lo, hi, x, xs), _fp8_up_value(c, lo, hi, up, ups)
    out = xs.clone()
    if p.layout == _C.LAYOUT_INTERLEAVED:
        out[..., 0::2], out[..., 1::2] = (
            _fp8_gate_value(c, lo, hi, x[..., 0::2], xs[..., 0::2]),
            _fp8_up_value(c, lo, hi, x[..., 1::2], xs[..., 1::2]),
        )
    else:
        F = x.shape[-1] // 2
        out[..., :F], out[..., F:] = (
            _fp8_gate_value(c, lo, hi, x[..., :F], xs[..., :F]),
            _fp8_up_value(c, lo, hi, x[..., F:], xs[..., F:]),
        )
    return out, None


def _fp8_cast(p, x, up, fn):
    """(x8, up8) for fp8_input_store=True with torch ops: the bytes the forward kernel writes as
    ``saved_fp8`` (the plain cast; with a clamp, of _fp8_operands's values). torch.compile's path."""
    c = _fp8_clamp(p, x.dtype, True, fn)
    if not c:
        return x.to(_FP8), None if up is None else up.to(_FP8)
    lo, hi = _e4m3_bounds(c)
    xv, upv = _fp8_operands(p, c, lo, hi, x, up, x.float(), None if up is None else up.float())
    return xv.to(_FP8), None if upv is None else upv.to(_FP8)


def _fp8_store(mode, x, up, p=None, fn="glu"):
    """(x8, up8, scale_inv) of the operands for the backward in a scaled mode: "per_row": scale_inv
    [tokens] (row-major over the leading dims); "per_tensor": one value; "blockwise": [tokens,
    scale_blocks] (_fp8_store_blockwise). (The plain cast, mode True,
    is written by the forward kernel: ``saved_fp8``.) With a clamp (params p), the values are those
    of _fp8_operands, with lo / hi found per row from the decoding the backward does (fp8 *
    scale_inv in fp32), and scale_inv rounded up where 448 * scale_inv would fall below amax, so that
    a cut element always has a value beyond the bound to take."""
    if mode == "blockwise":
        return _fp8_store_blockwise(x, up, p, fn)
    per_row = mode == "per_row"
    c = _fp8_clamp(p, x.dtype, mode, fn) if p is not None else 0.0

    def amax_of(t):  # an empty tensor (no tokens, or F = 0) has amax 0: scale 1
        if t.numel() == 0:
            return torch.zeros(
                t.shape[:-1] if per_row else (), dtype=torch.float32, device=t.device
            )
        return (t.abs().amax(dim=-1) if per_row else t.abs().amax()).float()

    amax = amax_of(x)
    if up is not None:
        amax = torch.maximum(amax, amax_of(up))
    if not per_row:
        amax = amax.reshape(1)
    raw = FP8_E4M3_MAX / amax
    # amax 0, non-finite, or so small that 448 / amax overflows (below ~1.3e-36): scale 1
    ok = torch.isfinite(amax) & (amax > 0) & torch.isfinite(raw)
    one = torch.ones((), dtype=torch.float32, device=amax.device)
    scale = torch.where(ok, raw, one)
    scale_inv = torch.where(ok, amax / FP8_E4M3_MAX, one)
    sc = scale.unsqueeze(-1) if mode == "per_row" else scale

    def enc(t):
        return (t.float() * sc).to(_FP8)

    if not c:
        return enc(x), (None if up is None else enc(up)), scale_inv.reshape(-1).contiguous()
    scale_inv = torch.where(
        ok & (scale_inv * FP8_E4M3_MAX < amax),
        torch.nextafter(scale_inv, torch.full_like(scale_inv, math.inf)),
        scale_inv,
    )
    vals = torch.arange(127, dtype=torch.uint8, device=amax.device).view(_FP8).float()  # ascending
    n_le = ((vals * scale_inv.unsqueeze(-1)) <= c).sum(-1, keepdim=True)  # codes decoding to <= c
    lo, hi = vals[n_le - 1], vals[n_le.clamp(max=126)]  # [..., 1] (per_row) or [1, 1]
    if not per_row:
        lo, hi = lo.reshape(1), hi.reshape(1)
    xv, upv = _fp8_operands(
        p, c, lo, hi, x, up, x.float() * sc, None if up is None else up.float() * sc
    )
    return xv.to(_FP8), None if upv is None else upv.to(_FP8), scale_inv.reshape(-1).contiguous()


def _check_fp8_store(x, up, p, fn):
    """The blockwise copy's operands (_fp8_store_blockwise; its op's fake runs this too): a compute
    dtype, up (when given) with x's dtype, shape and device, an even last dimension without up, a
    clamp e4m3 can mark."""
    if x.dim() == 0:
        _fail(ValueError, fn, "x must have at least one dimension, got a 0-dim tensor")
    if x.dtype not in _COMPUTE_CODES:
        _fail(TypeError, fn, f"x has dtype {x.dtype}; expected {_COMPUTE_WHAT}")
    if up is not None:
        if p is not None and p.layout == _C.LAYOUT_INTERLEAVED:
            _fail(ValueError, fn, "up must be None with the interleaved layout")
        if up.dtype != x.dtype:
            _fail(TypeError, fn, f"up has dtype {up.dtype}; expected x's, {x.dtype}")
        if up.device != x.device or up.shape != x.shape:
            _fail(
                ValueError,
                fn,
                f"up (shape {tuple(up.shape)} on {up.device}) must have x's shape "
                f"{tuple(x.shape)} and device {x.device}",
            )
    elif x.shape[-1] % 2:
        _fail(ValueError, fn, f"x's last dimension {x.shape[-1]} must be even: [..., 2F]")
    if p is not None:  # a clamp e4m3 can mark (ValueError naming the call otherwise)
        _fp8_clamp(p, x.dtype, "blockwise", fn)


def _store_outputs(shape, two, layout, F, tokens, device):
    """The blockwise copy's outputs for operands of x's shape (two: up given, of that shape too):
    (x8, up8 or None, scale_inv [tokens, scale_blocks(layout, F)], gate's codes pointer, up's codes
    pointer (0 for interleaved), the codes' row stride). Without up, in the split layout, gate's
    and up's codes are the two halves of each row of x8."""
    x8 = torch.empty(shape, dtype=_FP8, device=device)
    scale_inv = torch.empty(tokens, scale_blocks(layout, F), dtype=torch.float32, device=device)
    if two:
        up8 = torch.empty(shape, dtype=_FP8, device=device)
        return x8, up8, scale_inv, x8.data_ptr(), up8.data_ptr(), F
    if layout == _C.LAYOUT_INTERLEAVED:
        return x8, None, scale_inv, x8.data_ptr(), 0, 2 * F
    return x8, None, scale_inv, x8.data_ptr(), x8.data_ptr() + F, 2 * F


def _fp8_store_blockwise(x, up, p, fn):
    """``fp8_input_store="blockwise"``: each operand stored as e4m3 codes with one scale per 1 x 128
    block of its row, DeepSeek-V3's cache of the SwiGLU input, by one C call
    (``fastglu_glu_fp8_store_blockwise_*``: one kernel on CUDA, every operand read once). Returns
    (x8, up8, scale_inv [tokens, nb]) with nb = scale_blocks(layout, F): the split layout's gate
    blocks then up blocks (for F a multiple of 128 exactly the 1 x 128 blocks of the [tokens, 2F]
    row), the interleaved layout's blocks of its [tokens, 2F] operand; up8 None unless up is given.
    The recipe (include/fastglu.h): a block whose amax is a normal fp32 number gets scale_inv =
    amax / 448 and codes = the cast of x / scale_inv (both correctly rounded in fp32: the bits of
    the FP8 quantiser, ``fastglu.fp8.quantize_fp8``, on that block); a block of zeros, a subnormal
    amax, a NaN or an infinity scale_inv 1 and the plain cast, which keeps a NaN or inf to its own
    element. With a clamp, lo / hi are the block's e4m3 values either side of the bound in the
    backward's decoding (code * scale_inv) and scale_inv is raised by one ulp where 448 * scale_inv
    falls below amax, so that a cut element always has a code beyond the bound. Under
    torch.compile it runs as the opaque op ``fastglu::fp8_store_blockwise`` (library.py)."""
    layout = p.layout if p is not None else _C.LAYOUT_SPLIT
    clamp = p.clamp_value if p is not None else 0.0
    _check_fp8_store(x, up, p, fn)
    x, tokens, x_rs, _ = _rows(x)
    W = x.shape[-1]
    F = W if up is not None else W // 2
    x8, up8, scale_inv, g8_ptr, u8_ptr, g8_rs = _store_outputs(
        tuple(x.shape), up is not None, layout, F, tokens, x.device
    )
    if up is not None:
        up, _, u_rs, _ = _rows(up)
        g_ptr, u_ptr = x.data_ptr(), up.data_ptr()
    elif layout == _C.LAYOUT_INTERLEAVED:
        g_ptr, u_ptr, u_rs = x.data_ptr(), 0, 0
    else:  # gate and up: the two halves of each row
        g_ptr, u_ptr, u_rs = x.data_ptr(), x.data_ptr() + F * x.element_size(), x_rs
    # an empty problem too: the C call validates it (and writes nothing)
    _launch(
        _C.glu_fp8_store_blockwise,
        x.get_device(),
        (
            _C.ACT_SILU,
            layout,
            float(clamp),
            0.0,
            1.0,
            1.0,
            _COMPUTE_CODES[x.dtype],
            g_ptr,
            x_rs,
            u_ptr,
            u_rs,
            g8_ptr,
            g8_rs,
            u8_ptr,
            g8_rs,
            scale_inv.data_ptr(),
            scale_inv.shape[1],
            tokens,
            F,
        ),
    )
    return x8, up8, scale_inv


# The forward and the blockwise copy in one C call (fastglu_glu_fwd_fp8_store_blockwise_*: one
# kernel on CUDA with the split layout, each operand read once) instead of the forward's kernel and
# the copy's: the same bits. On the H200 the one call takes the two calls' time at F = 2880 and
# 0.87-0.88x of it at F = 8192 and 14336 (python -m fastglu.bench.fp8_store, benchmark
# fp8_store/fwd_blockwise; docs/fp8.md). False: the two calls.
FUSED_BLOCKWISE_STORE = True


def _fwd_fp8_store_blockwise(p, x, up, bias, weights, fn):
    """``fp8_input_store="blockwise"``'s forward in one C call: (y, x8, up8, scale_inv), the bits of
    ``forward`` and then ``_fp8_store_blockwise`` (their layouts: x8 x's shape, up8 up's or None,
    scale_inv [tokens, scale_blocks(layout, F)]). The operands' checks first (TypeError for what is
    not a tensor, as the two calls give), then the copy's."""
    op = _operands(x, up, p.layout, fn)
    _check_fp8_store(x, up, p, fn)
    b, _ = _check_bias(bias, op, op.dtype, fn)
    w, w_code, w_stride, _ = _check_weights(weights, op, fn)
    F = op.F
    y = torch.empty(op.lead + (F,), dtype=op.dtype, device=op.device)
    x8, up8, scale_inv, g8_ptr, u8_ptr, g8_rs = _store_outputs(
        op.lead + ((F,) if up is not None else (2 * F,)),
        up is not None,
        p.layout,
        F,
        op.tokens,
        op.device,
    )
    g_ptr, g_rs, u_ptr, u_rs = op.pointers()
    # an empty problem too: the C call validates it (and writes nothing)
    _launch(
        _C.glu_fwd_fp8_store_blockwise,
        op.x.get_device(),
        (
            *p,
            g_ptr,
            g_rs,
            u_ptr,
            u_rs,
            0 if b is None else b.data_ptr(),
            0 if w is None else w.data_ptr(),
            w_code,
            w_stride,
            y.data_ptr(),
            F,
            g8_ptr,
            g8_rs,
            u8_ptr,
            g8_rs,
            scale_inv.data_ptr(),
            scale_inv.shape[1],
            op.tokens,
            F,
            op.code,
        ),
    )
    return y, x8, up8, scale_inv


# ---- in-place checks -----------------------------------------------------------------------------

_increment_version = getattr(torch.autograd.graph, "increment_version", None)  # torch >= 2.2


def mark_overwritten(*tensors):
    """Bump the version counters of tensors (None skipped) whose memory a kernel has written over
    outside autograd's view (dx over x, dh over h): an autograd node that saved one of them then
    fails loudly instead of reading the gradient. Nothing on torch < 2.2, which has no such call."""
    if _increment_version is not None:
        for t in tensors:
            if t is not None:
                _increment_version(t)


def check_in_place(t, fn, name="input"):
    """ValueError unless t can take its own gradient in place: evenly strided rows that do not
    overlap, unit column stride, no negation flag."""
    tokens, rs = _row_stride(t.shape, t.stride())
    width = t.shape[-1]
    if (
        tokens
        and width
        and (
            rs is None
            or (width > 1 and t.stride()[-1] != 1)
            or (tokens > 1 and rs < width)
            or t.is_neg()
        )
    ):
        _fail(
            ValueError,
            fn,
            f"in_place=True needs {name} with evenly strided, non-overlapping rows and unit "
            f"column stride; got shape {tuple(t.shape)}, strides {t.stride()}",
        )


def _region(t):
    """(start address, rows, row stride in bytes (0 for one row), row width in bytes) of a tensor of
    evenly strided rows with unit column stride (src/common.c's region), or None."""
    tokens, rs = _row_stride(t.shape, t.stride())
    width, es = t.shape[-1], t.element_size()
    if rs is None or (width > 1 and t.stride()[-1] != 1):
        return None
    return t.data_ptr(), tokens, (rs * es if tokens > 1 else 0), width * es


def _overlaps(a, b):
    """Whether a and b share a byte: exact for two tensors of evenly strided rows with unit column
    stride and one row stride in bytes (as the C library's check: e.g. the gate and up column
    slices of one [..., 2F] tensor do not overlap), else by their bounding ranges."""
    if not _may_overlap(a, b):
        return False
    ra, rb = _region(a), _region(b)
    if ra is None or rb is None or ra[2] != rb[2] or ra[2] <= 0:
        return True
    (a0, a_rows, r, aw), (b0, b_rows, _, bw) = ra, rb
    d = b0 - a0
    # rows i of a and j of b meet iff -bw < d + k r < aw for k = j - i, -(a_rows - 1) <= k <= b_rows - 1
    kmin = max((-bw - d) // r + 1, -(a_rows - 1))
    kmax = min(-((d - aw) // r) - 1, b_rows - 1)
    return kmin <= kmax


def refuse_leaves_in_place(x, up, fn):
    """The leaf check of an in-place call where the backward would write over x (and up): a leaf
    that requires grad (an nn.Parameter) or a view of one raises ValueError (``ops``). For the
    traced path, which ignores in_place but refuses what eager mode refuses."""
    if (
        isinstance(x, torch.Tensor)
        and x.requires_grad
        and torch.is_grad_enabled()
        and (up is None or isinstance(up, torch.Tensor) and up.requires_grad)
    ):
        refuse_leaf_in_place(x, fn, "input" if up is None else "gate")
        if up is not None:
            refuse_leaf_in_place(up, fn, "up")


def _refuse_in_place_overlaps(x, up, bias, weights, fn):
    """ValueError where an in-place backward cannot write d_gate over gate and d_up over up: gate
    and up sharing memory (silu_mul(t, t)), or bias / weights sharing memory with them (the
    backward reads those while it writes)."""
    operands = [("input" if up is None else "gate", x)] + ([] if up is None else [("up", up)])
    if up is not None and _overlaps(x, up):
        _fail(
            ValueError,
            fn,
            f"in_place=True: gate and up share memory (gate shape {tuple(x.shape)}, strides "
            f"{x.stride()}; up shape {tuple(up.shape)}, strides {up.stride()}), so d_gate and "
            "d_up cannot both be written over them; pass in_place=False (out of place the "
            "gradients are summed as usual)",
        )
    for name, t in (("bias", bias), ("weights", weights)):
        if isinstance(t, torch.Tensor):
            for oname, o in operands:
                if _overlaps(o, t):
                    _fail(
                        ValueError,
                        fn,
                        f"in_place=True: {name} shares memory with {oname}, which the backward "
                        f"would overwrite while it reads {name}; pass in_place=False",
                    )


# ---- SwiGLU: the family's plain SiLU member ------------------------------------------------------


def swiglu_fwd(
    x: torch.Tensor, *, out: torch.Tensor | None = None, fn: str = "swiglu_fwd"
) -> torch.Tensor:
    """y = silu(x[..., :F]) * x[..., F:] for x of shape [..., 2F] (2D or 3D); returns [..., F]:
    ``forward(SILU, x)``, with Megatron's 2D / 3D input check.

    ``out`` (optional) receives the result: x's leading shape + (F,), x's dtype and device, rows
    evenly strided with unit column stride; it must not overlap x (ValueError).
    """
    if out is None:
        y = _fwd_common(SILU, x, None, None)
        if y is not None:
            return y
    check_input(x, fn)
    return _fwd_checked(SILU, x, None, None, None, out, None, fn)[0]


def swiglu_bwd(
    dy: torch.Tensor, x: torch.Tensor, *, out: torch.Tensor | None = None, fn: str = "swiglu_bwd"
) -> torch.Tensor:
    """The input gradient [..., 2F] of ``swiglu_fwd`` for upstream gradient ``dy`` [..., F]:
    ``backward(SILU, dy, x).dx``, with Megatron's 2D / 3D input check.

    ``out`` (optional) receives the result: a tensor of x's shape and dtype on x's device whose
    rows are evenly strided with unit column stride; it may be ``x`` itself (in-place backward).
    ``dy`` may be an efficient zero tensor (``torch._efficientzerotensor``, no memory): the result
    is then zero, written without a kernel launch.
    """
    if out is None:
        g = _bwd_common(SILU, dy, x, None, None, False, False)
        if g is not None:
            return g[0]
    check_input(x, fn)
    if isinstance(dy, torch.Tensor) and dy.device != x.device:
        _fail(ValueError, fn, f"dy is on {dy.device} but input is on {x.device}")
    return backward(SILU, dy, x, out=out, fn=fn, out_name="out").dx
