"""The gated MLP block with its GEMMs in FP8: ``fastglu.mlp_fp8(x, w1, w2, ...)``.

DeepSeek-V3's fine-grained recipe (docs/fp8.md, "The FP8 MLP block"): every GEMM operand is
float8_e4m3fn with fp32 scales, activations and gradients in 1 x 128 blocks along the GEMM's
reduction dimension, weights in 128 x 128 blocks::

    fc1     h   = x @ w1^T          x [T, H] 1x128 (along H),      w1 [2F, H] 128x128
    GLU     y   = glu(h + bias1)    fastglu.fp8.glu_fp8: y quantised 1x128 for fc2 (and y^T 1x128
                  (* weights)       along the tokens for fc2's wgrad) in the pass that computes it
    fc2     out = y @ w2^T          y [T, F] 1x128,                w2 [H, F] 128x128
                  (+ bias2)
    backward
    fc2 dgrad   dy  = dO @ w2       dO [T, H] 1x128,               w2^T [F, H] 128x128
    fc2 wgrad   dw2 = dO^T @ y      dO^T [H, T] 1x128 (tokens),    y^T [F, T] 1x128 (tokens)
    dGLU        dh  = glu'(h) dy    fastglu.fp8.glu_bwd_fp8: dh quantised 1x128 along 2F (dgrad)
                                    and dh^T 1x128 along the tokens (wgrad), dbias1 and dweights
                                    reduced, in one pass; dbias2 = dO summed over the tokens
    fc1 dgrad   dx  = dh @ w1       dh [T, 2F] 1x128,              w1^T [H, 2F] 128x128
    fc1 wgrad   dw1 = dh^T @ x      dh^T [2F, T] 1x128 (tokens),   x^T [H, T] 1x128 (tokens)

The quantisation is the recipe of ``fastglu.fp8``: scale = amax(|v| over the block) / 448 in fp32
(1 for an all-zero block), data = e4m3 cast of v / scale (fp32 division, saturating), so
``v ~ data * scale``. x, dO and the weights are quantised by the C library's kernel
(``fastglu.fp8.quantize_fp8``: x and dO with their transposed copies for the weight gradients in
one pass each; ``quantize_1x128`` / ``quantize_128x128`` here wrap it), y and dh by fastglu's fused
GLU kernels. The weights are quantised in every call (a 128 x 128 block's scale does not change
under transposition, so the backward writes ``w``'s transposed codes in one pass over ``w``),
unless the call is given ``quantized=quantize_mlp_weights(w1, w2)``, made once per optimizer step
and used by every micro-batch of the step.

GEMMs: ``torch._scaled_mm`` with blockwise scales (cuBLAS >= 12.9 on sm_90; scale layouts as
aten/src/ATen/native/cuda/ScaledBlas.cpp checks them: 1 x 128 scales ``[rows, K/128]`` with
strides ``(1, rows)``; 128 x 128 scales ``[rows/128, K/128]`` with strides ``(round_up(K/128, 4),
1)``, the padding cuBLAS reads, which PyTorch checks since pytorch/pytorch#166752; an older
PyTorch checks unpadded rows yet hands cuBLAS the pointer, so there the block passes a view with the
unpadded stride over scales laid out padded: ``_scale_b``) where it is available: a CUDA device of
compute capability 9.x whose torch._scaled_mm takes these scales (asked once per device with a
tiny GEMM), T, H and F multiples of 16. Elsewhere (the CPU, another GPU, an
older torch, other sizes) the **reference path** runs: each GEMM dequantises its two operands
(data * scale, in fp32) and multiplies them in fp32. It takes exactly the quantised operands the
scaled GEMM would take, so the CPU exercises the block's whole recipe, but it is not fast and it
is not an FP8 GEMM. ``gemm="reference"`` forces it, ``gemm="scaled_mm"`` asks for
``torch._scaled_mm`` and raises ValueError where it is not available; ``fastglu.fp8_mlp.
scaled_mm_available(x, w1)`` says which one ``gemm=None`` takes.

GEMM outputs: h and dy in x's dtype (the GLU kernels read them there), out and dx in x's dtype,
dw1 / dw2 in the weights' dtype (fp32 master weights get fp32 gradients straight from the GEMM).

Biases and per-token weights, as ``fastglu.mlp`` takes them (``bias1 [2F]``, ``bias2 [hidden]`` in
x's dtype; ``weights`` in bf16 / fp16 / fp32; all differentiable), none of them quantised:

- bias1 is added to h before the activation and the clamp. The GLU kernels add their bias after the
  clamp, so without a clamp bias1 goes into them (added to h in fp32 as they read it; in the
  backward dbias1 is reduced in fp32 in the pass that quantises dh, in x's dtype), and with a clamp
  h + bias1 is formed in x's dtype before them (one more [T, 2F] tensor in the forward and again in
  the backward; dh then comes back in x's dtype, dbias1 is its fp32 sum over the tokens and dh is
  quantised in torch ops, as on the h_grad path below).
- weights go into the GLU kernels (y = glu(.) * weights, then quantised); dweights is reduced in the
  backward's pass, in the weights' shape and dtype.
- bias2 is added to fc2's output after the GEMM has rounded it to x's dtype (the sum rounded to x's
  dtype again), on both GEMM paths: torch._scaled_mm's own bias is refused with fp32 outputs and
  would be added before the rounding. dbias2 is dO summed over the tokens in fp32, in x's dtype.

The op is ``torch.ops.fastglu.mlp_fp8_fwd`` with its backward ``torch.ops.fastglu.mlp_fp8_bwd``
(torch.library, fake implementations, autograd registered): ``torch.compile(fullgraph=True)``
traces the block without a graph break. Called directly, the forward op also returns h (fc1's
GEMM output x @ w1^T, before bias1; differentiable: its gradient adds to the GLU's dh before dh is
quantised, ``h_grad`` of the backward op, and so reaches dx and dw1 but not dbias1) and the
quantised copies the backward reads (x^T, y^T and their scales, which refuse a gradient:
RuntimeError). The backward op takes bias1, the weights and ``want_dbias2`` and returns dbias1,
dbias2 and dweights beside dx, dw1, dw2 (empty tensors for those not asked).

Not supported (TypeError): float64 (x, the weights, the biases, the per-token weights); biases of a
dtype other than x's (fp32 master weights with bf16 activations take bf16 biases, as
``fastglu.mlp``'s rule has them in x's dtype).
"""

from __future__ import annotations

import contextlib
import functools
import math
import weakref
from typing import NamedTuple

import torch

from . import _C
from . import fp8 as _fp8
from . import ops as _ops
from .gemm import check_like
from .mlp_block import check_bias_weights, check_block_shapes, check_tensor
from .ops import (
    _DENSE,
    _fail,
    _is_compiling,
    check_code,
    check_dense,
    check_storages,
    glu_params,
    is_zero_tensor,
    op_params,
    refuse_create_graph,
    untraced_eager,
)

__all__ = [
    "mlp_fp8",
    "quantize_mlp_weights",
    "QuantizedMLPWeights",
    "quantize_1x128",
    "quantize_128x128",
    "dequantize_1x128",
    "dequantize_128x128",
    "scaled_mm_available",
    "GEMM_AUTO",
    "GEMM_SCALED_MM",
    "GEMM_REFERENCE",
]

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
GEMM_AUTO, GEMM_SCALED_MM, GEMM_REFERENCE = 0, 1, 2
_GEMMS = {None: GEMM_AUTO, "scaled_mm": GEMM_SCALED_MM, "reference": GEMM_REFERENCE}
_GEMM_CODES = {GEMM_AUTO: "auto", GEMM_SCALED_MM: "scaled_mm", GEMM_REFERENCE: "reference"}
_ACT_NAMES = {_C.ACT_SILU: "silu", _C.ACT_GELU_TANH: "gelu_tanh", _C.ACT_QUICK_GELU: "quick_gelu"}
_FN = "mlp_fp8"


def _blocks(n):
    return (n + 127) // 128


# ---- the recipe in torch ops -------------------------------------------------------------------


def _scale_of(amax):
    """fp32 amax -> the recipe's scale: amax / 448 (correctly rounded fp32 division), 1 where the
    block is all zero, the smallest fp32 subnormal where the quotient underflows; NaN / inf stay.
    The divisor is a tensor: on CUDA, a division by a Python scalar is computed as a product by the
    scalar's fp32 reciprocal (aten's BinaryDivTrueKernel.cu), one ulp off for about half the amax
    values."""
    s = amax / torch.full_like(amax, FP8_MAX)
    s = torch.where(s == 0, torch.full_like(s, 2.0**-149), s)
    return torch.where(amax == 0, torch.ones_like(s), s)


def _check_operand(t, name: str, fn: str) -> None:
    """t: a 2-D tensor of a floating dtype other than float8 (TypeError / ValueError naming fn)."""
    if not isinstance(t, torch.Tensor):
        _fail(TypeError, fn, f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point() or t.dtype.itemsize == 1:
        _fail(TypeError, fn, f"{name}.dtype = {t.dtype} is not a floating dtype to quantise")
    if t.dim() != 2:
        _fail(ValueError, fn, f"{name} must be 2-D, got shape {tuple(t.shape)}")


def _c_quantizable(t: torch.Tensor) -> bool:
    """Whether the C library's quantiser (``fastglu.fp8.quantize_fp8``) takes t."""
    return t.dtype in (torch.bfloat16, torch.float16, torch.float32) and t.device.type in (
        "cpu",
        "cuda",
    )


def quantize_1x128(t: torch.Tensor):
    """Row-wise 1 x 128 quantisation of ``t [R, C]``: ``(data [R, C] float8_e4m3fn contiguous,
    scale [R, ceil(C/128)] fp32 with strides (1, R))``: the layout ``torch._scaled_mm`` takes for
    ``ScalingType.BlockWise1x128`` (and the layout of ``fastglu.fp8.glu_fp8``'s default
    ``scale_layout="mn_major"``). The last block of a row is shorter when C is not a multiple of
    128. ``t`` may have any strides (``quantize_1x128(x.t())`` quantises the columns). bf16 / fp16 /
    fp32 go through the C library's kernel (``fastglu.fp8.quantize_fp8``, one pass; a transposed
    ``t`` is read as it lies, its copy made in the kernel), other dtypes through torch ops
    (``quantize_1x128_torch``): the same recipe, the same bits."""
    _check_operand(t, "t", "quantize_1x128")
    return _q1x128(t)


_B1X128, _B128X128 = _C.FP8_SCALING_BLOCK_1X128, _C.FP8_SCALING_BLOCK_128X128
_MN_MAJOR, _ROW_MAJOR = _C.FP8_SCALES_MN_MAJOR, _C.FP8_SCALES_ROW_MAJOR


def _q1x128(t):
    """quantize_1x128 on a checked t: the C kernel (a t laid out column-major read as its
    transpose's column-wise copy), or torch ops for other dtypes and devices."""
    if not _c_quantizable(t):
        return quantize_1x128_torch(t)
    if t.stride(0) == 1 and t.stride(1) != 1 and t.shape[1] > 1:
        q = _fp8._quant_run(t.t(), _B1X128, _MN_MAJOR, False, False, True, True)
        return q[2], q[3]
    return _fp8._quant_run(t, _B1X128, _MN_MAJOR, False, True, False, True)[:2]


def _q128x128(w, pad_scales=True):
    """quantize_128x128 on a checked w (likewise)."""
    if not _c_quantizable(w):
        return quantize_128x128_torch(w, pad_scales=pad_scales)
    if w.stride(0) == 1 and w.stride(1) != 1 and w.shape[1] > 1:
        q = _fp8._quant_run(w.t(), _B128X128, _ROW_MAJOR, False, False, True, pad_scales)
        return q[2], q[3]
    return _fp8._quant_run(w, _B128X128, _ROW_MAJOR, False, True, False, pad_scales)[:2]


def quantize_1x128_torch(t: torch.Tensor):
    """``quantize_1x128`` in torch ops (any float dtype): the reference the C kernel is tested
    against."""
    R, C = t.shape
    nb = _blocks(C)
    # in t's dtype (abs and max are exact there); contiguous, so that the data comes out row-major
    # (a transposed t costs this one copy)
    tp = torch.nn.functional.pad(t, (0, nb * 128 - C)) if C % 128 else t.contiguous()
    blocks = tp.view(R, nb, 128)
    s = _scale_of(blocks.abs().amax(-1).float())
    q = torch.div(blocks, s.unsqueeze(-1))  # in fp32 (type promotion): the recipe's division
    data = q.clamp_(-FP8_MAX, FP8_MAX).to(FP8).view(R, nb * 128)
    if C % 128:
        data = data[:, :C].contiguous()
    scale = _fp8._scales(R, nb, _C.FP8_SCALES_MN_MAJOR, t.device)
    scale.copy_(s)
    return data, scale


def quantize_128x128(w: torch.Tensor, *, pad_scales: bool = True):
    """128 x 128 block quantisation of a weight ``w [R, C]``: ``(data [R, C] float8_e4m3fn
    contiguous, scale [ceil(R/128), ceil(C/128)] fp32 with strides (round_up(ceil(C/128), 4), 1))``:
    the layout ``torch._scaled_mm`` takes for ``ScalingType.BlockWise128x128`` on ``w`` as the
    transposed second operand (``_scaled_mm(a, data.t(), scale_a, scale.t())``; cuBLAS reads the
    block rows 16-byte aligned; ``pad_scales=False``: row stride ceil(C/128), what PyTorch before
    pytorch/pytorch#166752 checks). ``quantize_128x128(w.t())`` gives the transposed weight's data
    and the same scales transposed, in one pass over w (the C library's kernel for bf16 / fp16 /
    fp32, ``quantize_128x128_torch`` otherwise)."""
    _check_operand(w, "w", "quantize_128x128")
    return _q128x128(w, pad_scales)


def quantize_128x128_torch(w: torch.Tensor, *, pad_scales: bool = True):
    """``quantize_128x128`` in torch ops (any float dtype): the reference of the C kernel."""
    R, C = w.shape
    nr, nc = _blocks(R), _blocks(C)
    # in w's dtype, contiguous (w.t(): one copy), as quantize_1x128
    pad = (0, nc * 128 - C, 0, nr * 128 - R)
    wp = torch.nn.functional.pad(w, pad) if (R % 128 or C % 128) else w.contiguous()
    blocks = wp.view(nr, 128, nc, 128)
    s = _scale_of(blocks.abs().amax((1, 3)).float())
    q = torch.div(blocks, s[:, None, :, None])
    data = q.clamp_(-FP8_MAX, FP8_MAX).to(FP8).view(nr * 128, nc * 128)
    if R % 128 or C % 128:
        data = data[:R, :C].contiguous()
    scale = _fp8._scales(nr, nc, _C.FP8_SCALES_ROW_MAJOR, w.device, pad_scales)
    scale.copy_(s)
    return data, scale


def dequantize_1x128(data, scale):
    """``data.float() * scale`` with each 1 x 128 scale spread over its block: [R, C] fp32."""
    C = data.shape[1]
    return data.float() * scale.repeat_interleave(128, dim=1)[:, :C]


def dequantize_128x128(data, scale):
    """``data.float() * scale`` with each 128 x 128 scale spread over its block: [R, C] fp32."""
    R, C = data.shape
    s = scale.repeat_interleave(128, dim=0)[:R].repeat_interleave(128, dim=1)[:, :C]
    return data.float() * s


# ---- the GEMMs -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _blockwise_layout(device_index: int):
    """How this process's torch._scaled_mm takes 128 x 128 weight scales on the device: "padded"
    (row stride round_up(K/128, 4): what cuBLAS reads; PyTorch checks it since
    pytorch/pytorch#166752), "unpadded" (row stride K/128: the PyTorch before it), or None (no
    blockwise scaling: an older PyTorch or cuBLAS). Asked once per device with a tiny GEMM whose K
    has 3 blocks and whose weight 2 block rows (where the two layouts differ: PyTorch skips the
    stride check of a dimension of size 1); PyTorch checks the layouts on the host before the
    launch, so a refusal is a RuntimeError here, never a wrong result."""
    return _probe_layout(torch.device("cuda", device_index))


def _probe_layout(dev):
    a = torch.zeros(128, 384, dtype=FP8, device=dev)
    w = torch.zeros(256, 384, dtype=FP8, device=dev)
    a_scale = torch.ones((3, 128), device=dev).t()
    buf = torch.ones((2, 4), device=dev)  # what cuBLAS reads: rows 4 floats apart
    for name, w_scale in (("padded", buf[:, :3]), ("unpadded", buf.as_strided((2, 3), (3, 1)))):
        try:
            torch._scaled_mm(a, w.t(), a_scale, w_scale.t(), out_dtype=torch.bfloat16)
        except (RuntimeError, ValueError):
            continue
        return name
    return None


def scaled_mm_available(x: torch.Tensor, w1: torch.Tensor) -> bool:
    """Whether ``gemm=None`` runs the block's GEMMs through ``torch._scaled_mm`` (blockwise scales)
    for these operands: CUDA, compute capability 9.x, a torch._scaled_mm that takes 1 x 128 and
    128 x 128 scales (asked once per device), tokens, hidden and F multiples of 16 (``_scaled_mm``'s
    operand alignment). No host synchronisation."""
    T = x.numel() // x.shape[-1] if x.shape[-1] else 0
    return _scaled_ok(x.device, T, w1.shape[1], w1.shape[0])


def _scaled_ok(device, T, H, F2):
    if not hasattr(torch, "_scaled_mm") or device.type != "cuda":
        return False
    if torch.cuda.get_device_capability(device)[0] != 9:
        return False
    if not (T > 0 and T % 16 == 0 and H % 16 == 0 and F2 % 32 == 0):
        return False
    return _blockwise_layout(device.index if device.index is not None else 0) is not None


def _scale_b(b, b_scale):
    """The weight operand's scales as this process's torch._scaled_mm checks them. cuBLAS reads 128
    x 128 scales with the row stride round_up(K/128, 4) (pytorch/pytorch#166752; the block's
    weights are always quantised that way); a PyTorch before that change checks the unpadded
    stride K/128 and hands cuBLAS the pointer, which then read the rows at the padded stride
    anyway (wrong results wherever K/128 is not a multiple of 4). For that PyTorch the scales go
    in as a view with the stride it checks over the same memory, laid out as cuBLAS reads it. 1 x
    128 scales (b_scale [N, K/128]) and one block row need nothing."""
    nr, nk = b_scale.shape
    if nr == b.shape[0] or nr == 1 or b_scale.stride(0) == nk:
        return b_scale
    if _blockwise_layout(b.device.index if b.device.index is not None else 0) != "unpadded":
        return b_scale
    return b_scale.as_strided((nr, nk), (nk, 1))


def _mm(a, a_scale, b, b_scale, out_dtype, scaled):
    """``a @ b^T`` for a ``[M, K]`` with 1 x 128 scales and b ``[N, K]`` with 1 x 128 scales
    (``b_scale [N, K/128]``, strides (1, N)) or 128 x 128 scales (``[N/128, K/128]``, row stride
    round_up(K/128, 4)); both data contiguous. ``scaled``: ``torch._scaled_mm``; else the reference
    path (dequantise, fp32 matmul)."""
    if scaled:
        return torch._scaled_mm(a, b.t(), a_scale, _scale_b(b, b_scale).t(), out_dtype=out_dtype)
    bd = (
        dequantize_1x128(b, b_scale)
        if b_scale.shape[0] == b.shape[0]
        else dequantize_128x128(b, b_scale)
    )
    return (dequantize_1x128(a, a_scale) @ bd.t()).to(out_dtype)


# ---- validation on metadata ------------------------------------------------------------------------


def check_mlp_fp8(x, w1, w2, bias1=None, bias2=None, weights=None):
    """Validate the operands from their metadata (mlp_block's checks; the weights may have their own
    dtype, one for both; the biases and per-token weights as ``fastglu.mlp`` takes them); returns
    (leading shape, tokens, H, F)."""
    check_tensor(x, "x", (2, 3), _FN)
    check_tensor(w1, "w1", (2,), _FN)
    check_tensor(w2, "w2", (2,), _FN)
    check_like(w1, x, _FN, "w1", dtype=False)
    check_like(w2, x, _FN, "w2", dtype=False)
    if w1.dtype != w2.dtype:
        _fail(TypeError, _FN, f"w2 has dtype {w2.dtype} but w1 has dtype {w1.dtype}")
    lead, H, F = check_block_shapes(x, w1, w2, _FN, positive=True)
    check_bias_weights(x, lead, H, F, bias1, bias2, weights, _FN)
    return lead, math.prod(lead), H, F


# ---- the weights quantised once, reused across calls ------------------------------------------------


class QuantizedMLPWeights(NamedTuple):
    """fc1's and fc2's weights quantised for the FP8 block ahead of the calls that use them
    (``quantize_mlp_weights``): each weight's 128 x 128 codes and scales as the forward's GEMM
    reads them and transposed as the backward's dgrad reads them, and what ``mlp_fp8`` needs to
    refuse them once the weights have changed (which tensors, their versions, the optimizer steps
    that had updated them)."""

    w1: torch.Tensor  # [2F, H] float8_e4m3fn, fc1's forward
    w1_scale: torch.Tensor  # [ceil(2F/128), ceil(H/128)] fp32, row stride padded to 4
    w1_t: torch.Tensor  # [H, 2F], fc1's dgrad
    w1_t_scale: torch.Tensor  # [ceil(H/128), ceil(2F/128)]
    w2: torch.Tensor  # [H, F], fc2's forward
    w2_scale: torch.Tensor
    w2_t: torch.Tensor  # [F, H], fc2's dgrad
    w2_t_scale: torch.Tensor
    sources: tuple  # weak references to w1 and w2
    versions: tuple  # (w1._version, w2._version) when quantised; None for an inference tensor
    steps: tuple  # the optimizer steps that had updated w1, w2 when quantised (_OPT_STEPS)


# id(weight) -> how many torch.optim steps have updated it, for the weights quantize_mlp_weights
# has seen (an entry leaves with its tensor). A fused optimizer (fused=True) updates its parameters
# without advancing their version counters; its step still runs the global post-step hooks.
_OPT_STEPS: dict = {}
_opt_hook = None


def _count_optimizer_step(optimizer, args, kwargs):
    if _OPT_STEPS:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) in _OPT_STEPS:
                    _OPT_STEPS[id(p)] += 1


def _watch(w):
    """How many torch.optim steps have updated w (counted from its first call here)."""
    global _opt_hook
    if _opt_hook is None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        _opt_hook = register_optimizer_step_post_hook(_count_optimizer_step)
    key = id(w)
    if key not in _OPT_STEPS:
        _OPT_STEPS[key] = 0
        weakref.finalize(w, _OPT_STEPS.pop, key, None)
    return _OPT_STEPS[key]


def _version_of(w):
    try:
        return w._version
    except RuntimeError:  # an inference tensor has no version counter
        return None


def quantize_mlp_weights(w1: torch.Tensor, w2: torch.Tensor) -> QuantizedMLPWeights:
    """fc1's ``w1 [2F, hidden]`` and fc2's ``w2 [hidden, F]`` quantised for ``mlp_fp8(...,
    quantized=)``: 128 x 128 blocks, both the row-wise codes (the forward's GEMMs) and the
    transposed ones (the backward's dgrad GEMMs), one pass over each weight (the C library's
    quantiser for bf16 / fp16 / fp32). The bits ``mlp_fp8`` quantises on every call without it.

    Why: the weights change once per optimizer step, not per call. With gradient accumulation (or
    pipeline parallelism) the block runs several micro-batches between two steps, and quantising
    the weights again each time reads them twice and writes their codes twice a forward +
    backward (at 1024 tokens, hidden 4096, F 14336 the floor of those bytes is a sixth of the FP8
    block's time on an H200: docs/fp8.md). Quantise once after each step (TransformerEngine's
    ``is_first_microbatch``) and pass the result to every call.

    ``mlp_fp8`` (in eager mode) refuses the result for other tensors than these w1 and w2, after
    an in-place change of either (their version counters) and after a ``torch.optim`` step that
    updated either (a global post-step hook, which also sees fused optimizers: they leave the
    version counters alone). A write that neither sees (through ``w.data``, or an optimizer outside
    ``torch.optim`` that does) goes unseen: quantise again after any update. Call it eagerly
    (outside ``torch.compile``) on real weights. Not differentiable: the gradients still go to w1
    and w2."""
    fn = "quantize_mlp_weights"
    if _is_compiling():
        _fail(
            RuntimeError,
            fn,
            "call it eagerly, outside torch.compile (once per optimizer step), and pass its "
            "result to the compiled function",
        )
    for w, name in ((w1, "w1"), (w2, "w2")):
        check_tensor(w, name, (2,), fn)
        if w.is_meta or isinstance(w, torch._subclasses.FakeTensor):
            _fail(ValueError, fn, f"{name} is a meta or fake tensor; it quantises real weights")
    check_like(w2, w1, fn, "w2", dtype=True)
    F2, H = w1.shape
    if F2 % 2 or F2 == 0 or H == 0 or tuple(w2.shape) != (H, F2 // 2):
        _fail(
            ValueError,
            fn,
            f"w1 has shape {tuple(w1.shape)} and w2 has shape {tuple(w2.shape)}; expected w1 "
            "[2F, hidden] and w2 [hidden, F] (F, hidden >= 1)",
        )
    check_storages(fn, (("w1", w1), ("w2", w2)))
    with torch.no_grad():
        codes = []
        for w in (w1, w2):
            if _c_quantizable(w):
                codes += _fp8._quant_run(w.detach(), _B128X128, _ROW_MAJOR, False, True, True, True)
            else:
                codes += [*quantize_128x128_torch(w), *quantize_128x128_torch(w.t())]
    return QuantizedMLPWeights(
        *codes,
        sources=(weakref.ref(w1), weakref.ref(w2)),
        versions=(_version_of(w1), _version_of(w2)),
        steps=(_watch(w1), _watch(w2)),
    )


def _quantized_specs(F2, H):
    """(name, codes shape, scales shape) of QuantizedMLPWeights' four pairs, in its order."""
    b = _blocks
    return (
        ("w1", (F2, H), (b(F2), b(H))),
        ("w1_t", (H, F2), (b(H), b(F2))),
        ("w2", (H, F2 // 2), (b(H), b(F2 // 2))),
        ("w2_t", (F2 // 2, H), (b(F2 // 2), b(H))),
    )


def _check_quantized(q, arg, pairs, device, F2, H, fn):
    """q: the op's list ``arg`` of quantised weight tensors (codes then scales per pair, pairs of
    _quantized_specs' names in order): each code tensor float8_e4m3fn, each scale tensor fp32, of
    its shape, on device (any strides: _gemm_operand lays them out)."""
    specs = [s for s in _quantized_specs(F2, H) if s[0] in pairs]
    if not isinstance(q, (list, tuple)) or len(q) != 2 * len(specs):
        _fail(
            ValueError,
            fn,
            f"{arg} must hold {2 * len(specs)} tensors (codes and scales of "
            f"{', '.join(s[0] for s in specs)}), got {type(q).__name__} of "
            f"{len(q) if isinstance(q, (list, tuple)) else 'no'} items",
        )
    for i, (name, shape, sshape) in enumerate(specs):
        for t, what, dtype, want in (
            (q[2 * i], name, FP8, shape),
            (q[2 * i + 1], f"{name}_scale", torch.float32, sshape),
        ):
            what = f"{arg}.{what}"
            if not isinstance(t, torch.Tensor):
                _fail(TypeError, fn, f"{what} must be a torch.Tensor, got {type(t).__name__}")
            check_dense(t, fn, what)
            if t.dtype != dtype:
                _fail(TypeError, fn, f"{what} has dtype {t.dtype}; expected {dtype}")
            if t.device != device:
                _fail(ValueError, fn, f"{what} is on {t.device}; expected {device}")
            if tuple(t.shape) != want:
                _fail(ValueError, fn, f"{what} has shape {tuple(t.shape)}; expected {want}")


def _gemm_operand(codes, scale):
    """A weight's codes and 128 x 128 scales as the GEMMs read them: the codes contiguous, the
    scales' rows padded to a multiple of 4 (quantize_mlp_weights' layout: no copy; another
    layout, e.g. a clone, is copied into it)."""
    nr, nc = scale.shape
    if nr > 1 and scale.stride() != (-(-nc // 4) * 4, 1) or scale.stride(1) != 1:
        padded = _fp8._scales(nr, nc, _ROW_MAJOR, scale.device, True)
        padded.copy_(scale)
        scale = padded
    return codes.contiguous(), scale


def _check_fresh(q, w1, w2):
    """ValueError unless q (QuantizedMLPWeights) was made from these w1 and w2 and neither has
    changed since, as far as their version counters and torch.optim's steps tell."""
    for i, (w, name) in enumerate(((w1, "w1"), (w2, "w2"))):
        if isinstance(w, torch._subclasses.FakeTensor):
            continue
        if q.sources[i]() is not w:
            _fail(
                ValueError,
                _FN,
                f"quantized was made from another {name} (another tensor object); "
                "quantize_mlp_weights(w1, w2) with the weights this call takes",
            )
        if q.versions[i] is not None and q.versions[i] != _version_of(w):
            _fail(
                ValueError,
                _FN,
                f"quantized was made from {name} at version {q.versions[i]}, and {name} has been "
                f"changed in place since (version {w._version}: an optimizer step?); "
                "quantize_mlp_weights(w1, w2) again after each update",
            )
        if _OPT_STEPS.get(id(w), 0) != q.steps[i]:
            _fail(
                ValueError,
                _FN,
                f"a torch.optim step has updated {name} since quantized was made; "
                "quantize_mlp_weights(w1, w2) again after each optimizer step",
            )


def _use_scaled(gemm, device, T, H, F2):
    if gemm == GEMM_REFERENCE:
        return False
    ok = _scaled_ok(device, T, H, F2)
    if gemm == GEMM_SCALED_MM and not ok:
        _fail(
            ValueError,
            _FN,
            f"gemm='scaled_mm': torch._scaled_mm's blockwise scaling is not available for "
            f"{T} tokens, hidden {H}, F {F2 // 2} on {device} (needs CUDA sm_90, a "
            f"torch._scaled_mm taking blockwise scales (torch {torch.__version__}), tokens, "
            "hidden and F multiples of 16)",
        )
    return ok


# ---- the ops ---------------------------------------------------------------------------------------


def _no_autocast(impl):
    """impl with autocast off: the op's GEMMs and the reference path's fp32 matmuls keep the dtypes
    the recipe gives them inside an autocast region (the op has no autocast rule of its own, so
    the region's state would reach the matmuls)."""

    def run(*args, **kwargs):
        with _autocast_off(args[0].device.type):
            return impl(*args, **kwargs)

    return run


def _autocast_off(device_type):
    """A context with autocast off for the device type where it is on, else nothing (the ops and
    the eager Function)."""
    try:
        on = torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4: the CUDA state without an argument, the CPU state apart
        on = (
            torch.is_autocast_enabled()
            if device_type == "cuda"
            else torch.is_autocast_cpu_enabled()
        )
    if on:
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


def _check_codes(p, gemm):
    """The ops' GLU scalars p and gemm code (their kernels and fakes, before anything runs)."""
    op_params(_FN, *p)
    check_code(gemm, _GEMM_CODES, _FN, "gemm")


def _glu_input(h, bias1, clamp_value):
    """(the GLU kernels' input, their bias) for fc1's GEMM output h and bias1. bias1 is added to h
    before the clamp (``fastglu.mlp``'s semantics), and the kernels add their bias after it: with a
    clamp, h + bias1 is formed first (in h's dtype) and the kernels get no bias; without one they
    add bias1 as they read h (in fp32) and reduce its gradient in the backward's pass."""
    if bias1 is not None and clamp_value > 0:
        return h + bias1, None
    return h, bias1


def _token_weights(weights, T):
    """The per-token weights as the GLU kernels on h [T, 2F] take them: [T] (a view where one
    exists; fastglu.mlp's shapes include x's leading shape [S, B] and [S, B, 1])."""
    return None if weights is None else weights.reshape(T)


def _quantize_both(t, transposed):
    """t [R, C] quantised 1 x 128 along C and, with ``transposed``, t^T [C, R] 1 x 128 along R:
    (data, scale, data_t, scale_t), one pass of the C kernel (torch ops for other dtypes); the
    transposed pair None without it."""
    if _c_quantizable(t):
        return _fp8._quant_run(t, _B1X128, _MN_MAJOR, False, True, transposed, True)
    d, s = quantize_1x128_torch(t)
    if not transposed:
        return d, s, None, None
    return (d, s, *quantize_1x128_torch(t.t()))


def _glu_run(dy, h, bias, weights, p, columnwise, want_y, copy=False):
    """fastglu.fp8's GLU kernels (glu_fwd_fp8 without dy, glu_bwd_fp8 with it) on the block's
    checked operands, 1 x 128 blocks, MN-major scales: (data, scale, data_t, scale_t, y) and in the
    backward (dbias, dweights) after them (empty where not asked); copy (the forward): h's
    blockwise copy (h8, its scales) after them, written in the same call."""
    return _fp8._run(
        dy, h, None, bias, weights, *p, _B1X128, _MN_MAJOR, False, columnwise, want_y, copy=copy
    )


def _fwd_impl(
    x,
    w1,
    w2,
    activation,
    layout,
    clamp_value,
    offset,
    gate_mult,
    down_mult,
    gemm,
    save,
    bias1=None,
    bias2=None,
    weights=None,
    quantized=None,
    h_fp8=False,
):
    p = (activation, layout, clamp_value, offset, gate_mult, down_mult)
    _check_codes(p, gemm)
    lead, T, H, F = check_mlp_fp8(x, w1, w2, bias1, bias2, weights)
    if quantized is not None:
        _check_quantized(
            quantized, "quantized", ("w1", "w1_t", "w2", "w2_t"), x.device, 2 * F, H, _FN
        )
    if h_fp8:
        _check_h_fp8(p, x.dtype)
    check_storages(_FN, zip(_NAMES, (x, w1, w2, bias1, bias2, weights)))
    out, h, xtq, xts, ytq, yts, h8, h8s = _fwd_body(
        x, w1, w2, p, gemm, save, bias1, bias2, weights, quantized, h_fp8
    )
    e = x.new_empty((0,))
    if h8 is None:
        h8, h8s = e.to(FP8), e.float()
    if not save:
        return out, e, e.to(FP8), e.float(), e.to(FP8), e.float(), h8, h8s
    return out, h, xtq, xts, ytq, yts, h8, h8s


# fp8_input_store="blockwise": True, the FP8 GLU forward's call also writes h's blockwise copy
# (fastglu_glu_fwd_fp8_copy_blockwise: on CUDA from its kernel's own read of h where the split
# layout, F % 8 == 0, no clamp and aligned rows allow); False, the copy's own call after it (h read
# twice). The same bits either way; the default is the path that GPU measurements support
# (docs/fp8.md, "The FP8 forward with the copy").
COPY_IN_FP8_FORWARD = False


def _fwd_body(x, w1, w2, p, gemm, save, bias1, bias2, weights, quantized=None, h_fp8=False):
    """The forward on checked operands (the op's implementation and the eager Function): out, and
    with ``save`` h, x^T's and y^T's quantised copies (None without it), and with ``save`` and
    ``h_fp8`` the GLU's input saved as e4m3 with 1 x 128 scales (h8, its scales; else None, None).
    quantized: None, or the weights' codes and scales made before (QuantizedMLPWeights' eight
    tensors), used as they are."""
    H = x.shape[-1]
    T = x.numel() // H
    scaled = _use_scaled(gemm, x.device, T, H, w1.shape[0])
    x2 = x.reshape(T, H)
    # x 1 x 128 along H (fc1) and, to save, x^T 1 x 128 along the tokens (fc1's wgrad): one pass
    xq, xs, xtq, xts = _quantize_both(x2, save)
    w1q, w1s = _q128x128(w1) if quantized is None else _gemm_operand(*quantized[0:2])
    h = _mm(xq, xs, w1q, w1s, x.dtype, scaled)
    del xq, xs
    g, b = _glu_input(h, bias1, p[2])
    h8 = h8s = None
    if save and h_fp8 and COPY_IN_FP8_FORWARD:  # the GLU's input (h + bias1 where the clamp
        # needs it formed) in e4m3, written by the GLU's call (fastglu_glu_fwd_fp8_copy_blockwise)
        yq, ys, ytq, yts, _, h8, h8s = _glu_run(
            None, g, b, _token_weights(weights, T), p, save, False, copy=True
        )
    else:
        yq, ys, ytq, yts, _ = _glu_run(None, g, b, _token_weights(weights, T), p, save, False)
        if save and h_fp8:  # the copy's own call
            h8, _, h8s = _ops._fp8_store_blockwise(g, None, _ops.GLUParams(*p), _FN)
    del g
    w2q, w2s = _q128x128(w2) if quantized is None else _gemm_operand(*quantized[4:6])
    out = _mm(yq, ys, w2q, w2s, x.dtype, scaled)
    if bias2 is not None:
        # after the GEMM's rounding to x's dtype, on both paths: torch._scaled_mm's own bias is
        # refused with fp32 outputs and would enter before the rounding, where the reference path
        # could not follow it on every device
        out.add_(bias2)
    if x.dim() != 2:
        # (_unsafe_view: out is not a view for autograd, so `out += residual` works as after
        # F.linear; the [T, H] GEMM output has no other user)
        out = torch.ops.aten._unsafe_view(out, x.shape[:-1] + (H,))
    if not save:
        return out, None, None, None, None, None, None, None
    return out, h, xtq, xts, ytq, yts, h8, h8s


def _check_h_fp8(p, dtype):
    """h_fp8 (fp8_input_store="blockwise"): a clamp the copy can mark (below 448 in the dtype)."""
    _ops._fp8_clamp(_ops.GLUParams(*p), dtype, "blockwise", _FN)


def _fwd_fake(
    x,
    w1,
    w2,
    activation,
    layout,
    clamp_value,
    offset,
    gate_mult,
    down_mult,
    gemm,
    save,
    bias1=None,
    bias2=None,
    weights=None,
    quantized=None,
    h_fp8=False,
):
    p = (activation, layout, clamp_value, offset, gate_mult, down_mult)
    _check_codes(p, gemm)
    lead, T, H, F = check_mlp_fp8(x, w1, w2, bias1, bias2, weights)
    if quantized is not None:
        _check_quantized(
            quantized, "quantized", ("w1", "w1_t", "w2", "w2_t"), x.device, 2 * F, H, _FN
        )
    if h_fp8:
        _check_h_fp8(p, x.dtype)
    out = x.new_empty(lead + (H,))
    e = x.new_empty((0,))
    h8, h8s = e.to(FP8), e.float()
    if save and h_fp8:
        h8 = x.new_empty((T, 2 * F), dtype=FP8)
        h8s = x.new_empty((T, _ops.scale_blocks(layout, F)), dtype=torch.float32)
    if not save:
        return out, e, e.to(FP8), e.float(), e.to(FP8), e.float(), h8, h8s

    def mn_major(rows, cols):
        return x.new_empty((_blocks(cols), rows), dtype=torch.float32).t()

    return (
        out,
        x.new_empty((T, 2 * F)),
        x.new_empty((H, T), dtype=FP8),
        mn_major(H, T),
        x.new_empty((F, T), dtype=FP8),
        mn_major(F, T),
        h8,
        h8s,
    )


# The backward from h's blockwise copy quantises dh in the pass that decodes the copy
# (fastglu_glu_bwd_fp8_saved_blockwise) rather than decoding it with the GLU backward and then
# quantising dh in a second pass: the same bits, but for the order of the fp32 sums of dbias1 over
# the tokens and of dweights over F. The one pass is ahead where F is a multiple of 128 (benchmark
# fp8_store/bwd_blockwise) and, since it has its own shifted-pair tiles, where F % 128 == 64 too
# (bench/PERF_NOTES.md, "Open"). False: the two passes.
ONE_PASS_FROM_COPY = True


def _bwd_impl(
    dout,
    h,
    xtq,
    xts,
    ytq,
    yts,
    w1,
    w2,
    activation,
    layout,
    clamp_value,
    offset,
    gate_mult,
    down_mult,
    gemm,
    h_grad=None,
    bias1=None,
    weights=None,
    want_dbias2=False,
    quantized_t=None,
    h_scale=None,
):
    p = (activation, layout, clamp_value, offset, gate_mult, down_mult)
    _check_bwd(
        p, gemm, dout, h, xtq, xts, ytq, yts, w1, w2, h_grad, bias1, weights, quantized_t, h_scale
    )
    check_storages(
        _FN,
        (
            ("dout", dout),
            ("h", h),
            ("x_t", xtq),
            ("x_t_scale", xts),
            ("y_t", ytq),
            ("y_t_scale", yts),
            ("w1", w1),
            ("w2", w2),
            ("h_grad", h_grad),
            ("bias1", bias1),
            ("weights", weights),
            ("h_scale", h_scale),
        ),
    )
    dx, dw1, dw2, db1, db2, dwt = _bwd_body(
        dout,
        h,
        xtq,
        xts,
        ytq,
        yts,
        w1,
        w2,
        p,
        gemm,
        h_grad,
        bias1,
        weights,
        want_dbias2,
        quantized_t,
        h_scale,
    )
    e = dout.new_empty((0,))  # the gradients of operands not given
    return (
        dx,
        dw1,
        dw2,
        e if db1 is None else db1,
        e if db2 is None else db2,
        e if dwt is None else dwt,
    )


def _bwd_body(
    dout,
    h,
    xtq,
    xts,
    ytq,
    yts,
    w1,
    w2,
    p,
    gemm,
    h_grad,
    bias1,
    weights,
    want_dbias2,
    quantized_t=None,
    h_scale=None,
):
    """The backward on checked operands (the op's implementation and the eager Function): dx
    ([T, H]), dw1, dw2, and dbias1 / dbias2 / dweights (None where not given or not asked).
    quantized_t: None, or the transposed weights' codes and scales made before (w1^T's pair, then
    w2^T's: QuantizedMLPWeights' w1_t, w1_t_scale, w2_t, w2_t_scale). h in e4m3 (the forward's
    h_fp8 copy of the GLU's input) with h_scale its 1 x 128 scales: fastglu's GLU backward decodes
    it (dh in dout's dtype, dbias1 and dweights in its pass), then dh is quantised."""
    T, F2 = h.shape
    H = w1.shape[1]
    dt = dout.dtype if h.dtype == FP8 else h.dtype  # the compute dtype: x's
    scaled = _use_scaled(gemm, h.device, T, H, F2)
    do = dout.reshape(T, H).to(dt)
    # dO [T, H] 1 x 128 along H (fc2's dgrad) and dO^T [H, T] along the tokens (fc2's wgrad)
    doq, dos, dotq, dots = _quantize_both(do, True)
    # w2^T [F, H]
    w2tq, w2ts = _q128x128(w2.t()) if quantized_t is None else _gemm_operand(*quantized_t[2:4])
    dy = _mm(doq, dos, w2tq, w2ts, dt, scaled)  # [T, F]
    del doq, dos, w2tq, w2ts
    dw2 = _mm(dotq, dots, ytq, yts, w2.dtype, scaled)  # [H, F]
    del dotq, dots
    db2 = do.sum(0, dtype=torch.float32).to(dt) if want_dbias2 else None
    w = _token_weights(weights, T)
    if h.dtype == FP8:
        # the forward's copy of the GLU's input (h + bias1 where the clamp needed it formed)
        b = None if bias1 is not None and p[2] > 0 else bias1
        if h_grad is None and ONE_PASS_FROM_COPY:
            # decoded in the pass that quantises dh and reduces dbias1 / dweights; dh itself only
            # where bias1 was formed into the copy (its gradient is then dh's sum over the tokens)
            formed = bias1 is not None and b is None
            hs = _fp8._as_rows(h_scale, h_scale.shape[-1], "h_scale")  # (rows of unit stride)
            dhq, dhs, dhtq, dhts, dh, db1, dwt = _fp8._run(
                dy, h, None, b, w, *p, _B1X128, _MN_MAJOR, False, True, formed, scale_inv=hs
            )
            if formed:
                db1 = dh.sum(0, dtype=torch.float32).to(dt)
            dh = None
        else:
            # with h_grad (h is an output of the op, its gradient added to the GLU's), or where
            # the two passes are faster: fastglu's GLU backward decodes the copy with its block
            # scales, dh is quantised after it
            gr = _ops.backward(
                _ops.GLUParams(*p),
                dy,
                h,
                None,
                b,
                w,
                input_scale_inv=h_scale,
                want_dbias=b is not None,
                want_dweights=w is not None,
                fn=_FN,
            )
            dh, db1, dwt = gr.dx, gr.dbias, gr.dweights
    else:
        g_in, b = _glu_input(h, bias1, p[2])  # h + bias1 as the forward formed it, with a clamp
        if h_grad is None and b is bias1:
            # dh quantised and dbias1 / dweights reduced in the pass that computes dh
            dhq, dhs, dhtq, dhts, _, db1, dwt = _glu_run(dy, g_in, b, w, p, True, False)
            dh = None
        else:
            # dh itself: h is an output of the op, and its gradient adds to the GLU's (h_grad; h
            # is fc1's GEMM output before bias1, so dbias1 is the GLU's alone), or bias1 was added
            # before the kernel (its gradient is dh's sum over the tokens, in fp32)
            _, _, _, _, dh, db1, dwt = _glu_run(dy, g_in, b, w, p, False, True)
        del g_in
    del dy
    if dh is not None:  # quantised as glu_bwd_fp8 quantises dh (1 x 128 along 2F and the tokens)
        if bias1 is not None and b is None:
            db1 = dh.sum(0, dtype=torch.float32).to(dt)
        if h_grad is not None:
            dh = dh + h_grad.to(dt)
        dhq, dhs, dhtq, dhts = _quantize_both(dh, True)
        del dh
    # w1^T [H, 2F]
    w1tq, w1ts = _q128x128(w1.t()) if quantized_t is None else _gemm_operand(*quantized_t[0:2])
    dx = _mm(dhq, dhs, w1tq, w1ts, dt, scaled)  # [T, H]
    del dhq, dhs, w1tq, w1ts
    dw1 = _mm(dhtq, dhts, xtq, xts, w1.dtype, scaled)  # [2F, H]
    return (
        dx,
        dw1,
        dw2,
        db1 if bias1 is not None else None,
        db2,
        dwt.view(weights.shape) if weights is not None else None,
    )


def _check_bwd(
    p, gemm, dout, h, xtq, xts, ytq, yts, w1, w2, h_grad, bias1, weights, quantized_t, h_scale=None
):
    """The backward op's checks (kernel and fake; the op may be called directly, so every operand
    is checked against h, which has x's dtype and device, or is the forward's e4m3 copy with its
    scales h_scale, dout then having x's dtype): the codes; dout of x's leading shape and hidden,
    h_grad of h's shape, both in x's dtype; the forward's quantised copies (x^T [hidden, T], y^T
    [F, T] in e4m3, their fp32 scales one row per row); w1 [2F, hidden] and w2 [hidden, F];
    everything on h's device (a meta tensor among real ones would send the call to the fake
    implementation); bias1 and the per-token weights as the forward takes them."""
    _check_codes(p, gemm)
    fp8_h = isinstance(h, torch.Tensor) and h.dtype == FP8
    if fp8_h != (h_scale is not None):
        _fail(
            ValueError,
            _FN,
            "h_scale goes with h in float8_e4m3fn (the forward's h_fp8 copy) and only with it: "
            f"h has dtype {getattr(h, 'dtype', None)}, h_scale is "
            f"{'given' if h_scale is not None else 'None'}",
        )
    check_tensor(
        h,
        "h",
        (2,),
        _FN,
        dtypes=(FP8,) if fp8_h else (torch.bfloat16, torch.float16, torch.float32),
    )
    check_tensor(w1, "w1", (2,), _FN)
    check_tensor(w2, "w2", (2,), _FN)
    T, F2 = h.shape
    H = w1.shape[1]

    def same_place(t, name, dtype=None):
        if t.device != h.device:
            _fail(ValueError, _FN, f"{name} is on {t.device} but h is on {h.device}")
        if dtype is not None and t.dtype != dtype:
            _fail(TypeError, _FN, f"{name} has dtype {t.dtype}; expected {dtype}")

    def shaped(t, name, shape):
        if tuple(t.shape) != tuple(shape):
            _fail(ValueError, _FN, f"{name} has shape {tuple(t.shape)}; expected {tuple(shape)}")

    same_place(w1, "w1")
    same_place(w2, "w2", w1.dtype)
    if tuple(w1.shape) != (F2, H) or tuple(w2.shape) != (H, F2 // 2):
        _fail(
            ValueError,
            _FN,
            f"w1 has shape {tuple(w1.shape)} and w2 has shape {tuple(w2.shape)}; expected w1 "
            f"[2F, hidden] and w2 [hidden, F] with 2F = {F2} (h's width)",
        )
    check_tensor(dout, "dout", (2, 3), _FN)
    same_place(dout, "dout", None if fp8_h else h.dtype)
    ref = dout if fp8_h else h  # x's dtype and device
    if dout.shape[-1] != H or math.prod(dout.shape[:-1]) != T:
        _fail(
            ValueError,
            _FN,
            f"dout has shape {tuple(dout.shape)}; expected {T} tokens of hidden size {H} "
            f"(h {tuple(h.shape)}, w1 {tuple(w1.shape)})",
        )
    for t, name, dtype, shape in (
        (xtq, "x_t", FP8, (H, T)),
        (xts, "x_t_scale", torch.float32, (H, _blocks(T))),
        (ytq, "y_t", FP8, (F2 // 2, T)),
        (yts, "y_t_scale", torch.float32, (F2 // 2, _blocks(T))),
    ):
        if not isinstance(t, torch.Tensor):
            _fail(TypeError, _FN, f"{name} must be a torch.Tensor, got {type(t).__name__}")
        check_dense(t, _FN, name)
        same_place(t, name, dtype)
        shaped(t, name, shape)
    if h_grad is not None:
        check_tensor(h_grad, "h_grad", (2,), _FN)
        same_place(h_grad, "h_grad", ref.dtype)
        shaped(h_grad, "h_grad", h.shape)
    if fp8_h:
        _check_h_fp8(p, ref.dtype)  # (a clamp the copy could not have marked)
        check_tensor(h_scale, "h_scale", (2,), _FN, dtypes=(torch.float32,))
        same_place(h_scale, "h_scale")
        shaped(h_scale, "h_scale", (T, _ops.scale_blocks(p[1], F2 // 2)))
    lead = tuple(dout.shape[:-1])
    check_bias_weights(ref, lead, H, F2 // 2, bias1, None, weights, _FN)
    if quantized_t is not None:
        _check_quantized(quantized_t, "quantized_t", ("w1_t", "w2_t"), h.device, F2, H, _FN)


def _bwd_fake(
    dout,
    h,
    xtq,
    xts,
    ytq,
    yts,
    w1,
    w2,
    activation,
    layout,
    clamp_value,
    offset,
    gate_mult,
    down_mult,
    gemm,
    h_grad=None,
    bias1=None,
    weights=None,
    want_dbias2=False,
    quantized_t=None,
    h_scale=None,
):
    p = (activation, layout, clamp_value, offset, gate_mult, down_mult)
    _check_bwd(
        p, gemm, dout, h, xtq, xts, ytq, yts, w1, w2, h_grad, bias1, weights, quantized_t, h_scale
    )
    T, F2 = h.shape
    H = w1.shape[1]
    e = dout.new_empty((0,))
    return (
        dout.new_empty((T, H)),
        w1.new_empty(w1.shape),
        w2.new_empty(w2.shape),
        dout.new_empty((F2,)) if bias1 is not None else e,
        dout.new_empty((H,)) if want_dbias2 else e,
        weights.new_empty(weights.shape) if weights is not None else e,
    )


_SCALARS = (
    "int activation, int layout, float clamp_value, float glu_linear_offset, "
    "float gate_multiplier, float down_multiplier, int gemm"
)
FWD_SCHEMA = (
    f"(Tensor x, Tensor w1, Tensor w2, {_SCALARS}, bool save, Tensor? bias1=None, "
    "Tensor? bias2=None, Tensor? weights=None, Tensor[]? quantized=None, bool h_fp8=False) -> "
    "(Tensor out, Tensor h, Tensor x_t, Tensor x_t_scale, Tensor y_t, Tensor y_t_scale, "
    "Tensor h8, Tensor h8_scale)"
)
# dbias1, dbias2 and dweights come back empty ((0,)) where bias1 is None, want_dbias2 is False,
# weights is None
BWD_SCHEMA = (
    "(Tensor dout, Tensor h, Tensor x_t, Tensor x_t_scale, Tensor y_t, Tensor y_t_scale, "
    f"Tensor w1, Tensor w2, {_SCALARS}, Tensor? h_grad=None, Tensor? bias1=None, "
    "Tensor? weights=None, bool want_dbias2=False, Tensor[]? quantized_t=None, "
    "Tensor? h_scale=None) -> "
    "(Tensor dx, Tensor dw1, Tensor dw2, Tensor dbias1, Tensor dbias2, Tensor dweights)"
)


def _for_backward(saved, h_fp8, quantized, w1, w2, bias1, weights):
    """What the backward reads, in its order, from the forward's saved outputs (h, x^T's and y^T's
    codes and scales, h8, h8_scale): the GLU's input as saved (h, or its e4m3 copy and scales with
    h_fp8; h_scale None without), the copies, the weights, bias1, the per-token weights, and the
    transposed weights' codes and scales given in quantized (the backward's dgrad GEMMs)."""
    h, xtq, xts, ytq, yts, h8, h8s = saved
    h, h_scale = (h8, h8s) if h_fp8 else (h, None)
    qt = () if quantized is None else (*quantized[2:4], *quantized[6:8])
    return (h, h_scale, xtq, xts, ytq, yts, w1, w2, bias1, weights, *qt)


def _setup(ctx, inputs, output):
    # the gradient of an output nobody used stays None (not a zero tensor): h's adds to dh only
    # when h was used, and a gradient reaching the quantised copies is refused (_backward)
    ctx.set_materialize_grads(False)
    x, w1, w2 = inputs[:3]
    ctx.scalars = tuple(inputs[3:10])
    ctx.saved = inputs[10]
    bias1, bias2, weights = inputs[11:14]
    quantized = inputs[14] if len(inputs) > 14 else None
    h_fp8 = len(inputs) > 15 and inputs[15]
    ctx.has_bias2 = bias2 is not None
    ctx.x_shape = tuple(x.shape)
    ctx.x_dtype = x.dtype
    ctx.n_quantized = None if quantized is None else len(quantized)
    ctx.save_for_backward(*_for_backward(output[1:], h_fp8, quantized, w1, w2, bias1, weights))


def _backward(ctx, dout, h_grad, *quantised):
    refuse_create_graph(
        "mlp_fp8"
    )  # the quantised GEMMs and kernels have no derivative of their own
    if any(g is not None for g in quantised):
        _fail(
            RuntimeError,
            _FN,
            "x_t, x_t_scale, y_t, y_t_scale, h8 and h8_scale (the quantised copies the backward "
            "reads) have no "
            "gradient: quantisation is not differentiable",
        )
    if not ctx.saved:
        _fail(
            RuntimeError,
            _FN,
            "the backward needs h and the quantised copies; call the op with save=True "
            "(fastglu.mlp_fp8 saves them whenever a gradient is required)",
        )
    h, h_scale, xtq, xts, ytq, yts, w1, w2, bias1, weights, *qt = ctx.saved_tensors
    if dout is None:  # only h was used: out's gradient (out has x's shape and dtype) is zero
        dout = h.new_zeros(ctx.x_shape, dtype=ctx.x_dtype)
    # needs_input_grad has no entry for trailing arguments the dispatcher dropped as their
    # defaults (None biases and weights)
    n_args = len(ctx.needs_input_grad)
    need = tuple(ctx.needs_input_grad) + (False,) * 3
    dx, dw1, dw2, db1, db2, dwt = torch.ops.fastglu.mlp_fp8_bwd(
        dout,
        h,
        xtq,
        xts,
        ytq,
        yts,
        w1,
        w2,
        *ctx.scalars,
        h_grad=h_grad,
        bias1=bias1,
        weights=weights,
        want_dbias2=ctx.has_bias2 and need[12],
        quantized_t=qt or None,
        h_scale=h_scale,
    )
    return (
        dx.view(ctx.x_shape) if need[0] else None,
        dw1 if need[1] else None,
        dw2 if need[2] else None,
        *(None,) * 8,
        db1 if bias1 is not None and need[11] else None,
        db2 if ctx.has_bias2 and need[12] else None,
        dwt if weights is not None and need[13] else None,
        None if ctx.n_quantized is None else [None] * ctx.n_quantized,
        None,
    )[:n_args]  # (the arguments as the call passed them: trailing defaults are dropped)


_LIB = torch.library.Library("fastglu", "FRAGMENT")  # kept alive: it owns the registrations below
_TAGS = (torch.Tag.pt2_compliant_tag,) if hasattr(torch.Tag, "pt2_compliant_tag") else ()
torch.library.define("fastglu::mlp_fp8_fwd", FWD_SCHEMA, lib=_LIB, tags=_TAGS)
torch.library.impl("fastglu::mlp_fp8_fwd", ("cpu", "cuda"), _no_autocast(_fwd_impl), lib=_LIB)
torch.library.register_fake("fastglu::mlp_fp8_fwd", _fwd_fake, lib=_LIB)
torch.library.define("fastglu::mlp_fp8_bwd", BWD_SCHEMA, lib=_LIB, tags=_TAGS)
torch.library.impl("fastglu::mlp_fp8_bwd", ("cpu", "cuda"), _no_autocast(_bwd_impl), lib=_LIB)
torch.library.register_fake("fastglu::mlp_fp8_bwd", _bwd_fake, lib=_LIB)
torch.library.register_autograd("fastglu::mlp_fp8_fwd", _backward, setup_context=_setup, lib=_LIB)


# ---- the public function ---------------------------------------------------------------------------


def mlp_fp8(
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
    recipe="blockwise",
    gemm=None,
    quantized=None,
    fp8_input_store=False,
):
    """The gated MLP block ``fc2(glu(fc1(x)))`` with FP8 GEMMs (DeepSeek-V3's blockwise recipe),
    differentiable in x, w1, w2, bias1, bias2 and weights. See the module docstring for the recipe,
    the two GEMM paths and where the biases and weights enter.

    Args:
        x: ``[tokens, hidden]`` or ``[S, B, hidden]``; bfloat16 / float16 / float32; CPU or CUDA.
        w1: fc1's weight ``[2F, hidden]`` (gate rows then up rows; ``interleaved=True``: gate row 2j,
            up row 2j+1); bfloat16 / float16 / float32 (fp32 master weights are fine: they are
            quantised from fp32 and their gradients come back in fp32).
        w2: fc2's weight ``[hidden, F]``, w1's dtype.
        activation: ``"silu"`` (SwiGLU), ``"gelu_tanh"`` (GeGLU) or ``"quick_gelu"``.
        bias1: None or ``[2F]`` (x's dtype, h's layout), added to h before the activation (so
            before the clamp), as ``fastglu.mlp``; not quantised.
        bias2: None or ``[hidden]`` (x's dtype), added to out after fc2's GEMM has rounded it to
            x's dtype (on both GEMM paths).
        weights: None or per-token weights (router probs) ``[tokens]`` / ``[tokens, 1]`` (or x's
            leading shape ``[S, B]`` / ``[S, B, 1]``), multiplied into y before y is quantised for
            fc2; bf16 / fp16 / fp32; their gradient comes back in their shape and dtype.
        clamp_value, glu_linear_offset, gate_multiplier, down_multiplier, interleaved: as
            ``fastglu.glu`` (the clamp acts on h, bias1 included).
        recipe: ``"blockwise"`` (1 x 128 activations, 128 x 128 weights; the only one).
        gemm: None (``torch._scaled_mm`` where available, else the reference path), ``"scaled_mm"``
            or ``"reference"`` (dequantise and multiply in fp32).
        quantized: None (w1 and w2 quantised in this call), or ``quantize_mlp_weights(w1, w2)``
            made since the weights last changed: the GEMMs take its codes and scales (the same
            bits), so micro-batches between two optimizer steps quantise the weights once.
        fp8_input_store: False (the backward reads h in x's dtype), or ``"blockwise"``: the
            forward keeps the GLU's input h as e4m3 with one fp32 scale per 1 x 128 block
            (``fastglu.glu``'s ``fp8_input_store="blockwise"``, DeepSeek-V3's cache of the SwiGLU
            input) instead of h, half its bytes between the forward and the backward; the
            backward's FP8 GLU kernel decodes it in the pass that quantises dh
            (fastglu_glu_bwd_fp8_saved_blockwise). The forward writes the copy in a call of its
            own after the FP8 GLU's (``COPY_IN_FP8_FORWARD``: in that call); the gradients carry
            the copy's rounding (docs/fp8.md).

    Returns:
        ``out`` ``[..., hidden]`` in x's dtype.

    Raises:
        TypeError: a non-tensor or a wrong dtype (named), w1 and w2 of different dtypes, a bias
            whose dtype is not x's.
        ValueError: shapes that do not fit together (named, with the shapes; a bias or weights of
            the wrong shape too), mixed devices (named), an unknown activation, recipe or gemm,
            ``gemm="scaled_mm"`` where it is not available, ``quantized`` made from other
            weights or from w1 / w2 before an in-place change (eager mode).
    """
    p = glu_params(
        activation,
        clamp_value=clamp_value,
        glu_linear_offset=glu_linear_offset,
        gate_multiplier=gate_multiplier,
        down_multiplier=down_multiplier,
        interleaved=interleaved,
        fn=_FN,
    )
    if recipe != "blockwise":
        _fail(ValueError, _FN, f"recipe must be 'blockwise', got {recipe!r}")
    if not isinstance(gemm, (str, type(None))) or gemm not in _GEMMS:
        _fail(ValueError, _FN, f"gemm must be None, 'scaled_mm' or 'reference', got {gemm!r}")
    if not (fp8_input_store is False or fp8_input_store == "blockwise"):
        _fail(
            ValueError,
            _FN,
            f"fp8_input_store must be False or 'blockwise', got {fp8_input_store!r}",
        )
    h_fp8 = fp8_input_store == "blockwise"
    _, _, H, F = check_mlp_fp8(x, w1, w2, bias1, bias2, weights)
    if h_fp8:
        _check_h_fp8(p, x.dtype)
    code = _GEMMS[gemm]
    q = None
    if quantized is not None:
        if not isinstance(quantized, QuantizedMLPWeights):
            _fail(
                TypeError,
                _FN,
                "quantized must be None or fastglu.fp8_mlp.quantize_mlp_weights(w1, w2)'s "
                f"result, got {type(quantized).__name__}",
            )
        q = list(quantized[:8])
        _check_quantized(q, "quantized", ("w1", "w1_t", "w2", "w2_t"), x.device, 2 * F, H, _FN)
        if not _is_compiling():  # (a compiled graph holds no tensor objects to compare)
            _check_fresh(quantized, w1, w2)
    tensors = (x, w1, w2, bias1, bias2, weights)
    grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
    if (
        untraced_eager()
        and x.device.type in ("cpu", "cuda")
        and all(t is None or (type(t) in _DENSE and not is_zero_tensor(t)) for t in tensors)
    ):
        # eager mode on plain tensors with memory: the autograd Function on the ops' bodies,
        # checked once above (the dispatcher, torch.library's autograd wrapper around the two ops
        # and the inner calls' repeated checks are much of the block's host time, which bounds it
        # at small token counts);
        # efficient zero tensors, meta tensors and subclasses take the ops
        check_storages(_FN, zip(_NAMES, tensors))
        return _MLPFP8.apply(x, w1, w2, bias1, bias2, weights, p, code, grad, q, h_fp8)
    out = torch.ops.fastglu.mlp_fp8_fwd(
        x,
        w1,
        w2,
        *p,
        code,
        grad,
        bias1=bias1,
        bias2=bias2,
        weights=weights,
        quantized=q,
        h_fp8=h_fp8,
    )[0]
    return out


_NAMES = ("x", "w1", "w2", "bias1", "bias2", "weights")


class _MLPFP8(torch.autograd.Function):
    """mlp_fp8 in eager mode: the ops' bodies (_fwd_body, _bwd_body) without the dispatcher;
    torch.compile and tensor subclasses take the ops (their fakes and autograd formula)."""

    @staticmethod
    def forward(ctx, x, w1, w2, bias1, bias2, weights, p, code, save, quantized, h_fp8):
        with _autocast_off(x.device.type):
            out, h, xtq, xts, ytq, yts, h8, h8s = _fwd_body(
                x, w1, w2, p, code, save, bias1, bias2, weights, quantized, h_fp8
            )
        ctx.p, ctx.code, ctx.has_bias2, ctx.x_shape = p, code, bias2 is not None, x.shape
        if save:
            saved = (h, xtq, xts, ytq, yts, h8, h8s)
            ctx.save_for_backward(*_for_backward(saved, h_fp8, quantized, w1, w2, bias1, weights))
        return out

    @staticmethod
    def backward(ctx, dout):
        refuse_create_graph("mlp_fp8")  # the quantised GEMMs and kernels have no derivative
        h, h_scale, xtq, xts, ytq, yts, w1, w2, bias1, weights, *qt = ctx.saved_tensors
        need = ctx.needs_input_grad
        if is_zero_tensor(dout):  # (an efficient zero tensor has no memory to read)
            dout = torch.zeros(dout.shape, dtype=dout.dtype, device=dout.device)
        with _autocast_off(h.device.type):
            dx, dw1, dw2, db1, db2, dwt = _bwd_body(
                dout,
                h,
                xtq,
                xts,
                ytq,
                yts,
                w1,
                w2,
                ctx.p,
                ctx.code,
                None,
                bias1,
                weights,
                ctx.has_bias2 and need[4],
                qt or None,
                h_scale,
            )
        return (
            dx.view(ctx.x_shape) if need[0] else None,
            dw1 if need[1] else None,
            dw2 if need[2] else None,
            db1 if need[3] else None,
            db2 if need[4] else None,
            dwt if need[5] else None,
            None,
            None,
            None,
            None,
            None,
        )
