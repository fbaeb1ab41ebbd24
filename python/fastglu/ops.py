"""SwiGLU on torch tensors through libfastglu (no autograd here; see ``functional.py``).

Layout (Megatron-Core): ``input[..., 2F]`` holds gate = ``input[..., :F]`` and up = ``input[..., F:]``;
``y = silu(gate) * up`` has shape ``[..., F]``. Math and its source: ``include/fastglu.h``.

CUDA tensors run on the current CUDA stream of their device, CPU tensors on the C CPU backend.
Outputs come from PyTorch's allocator. Inputs are read in place whenever their rows are evenly
strided with unit column stride (any column slice of a wider tensor qualifies); only a tensor whose
leading dimensions cannot be merged into one evenly strided row index, or whose last dimension is
not contiguous, is copied first. ``dy`` is read in place with any strides, zero included.
"""

from __future__ import annotations

import torch

from . import _C

_DTYPE_CODES = {
    torch.float32: _C.DTYPE_FP32,
    torch.float16: _C.DTYPE_FP16,
    torch.bfloat16: _C.DTYPE_BF16,
}

try:  # the raw cudaStream_t of a device's current stream, without building a Stream object
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover - older/newer torch

    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream


def _fail(exc, fn, msg):
    raise exc(f"fastglu.{fn}: {msg}")


def check_input(x, fn: str, name: str = "input"):
    """Validate a gate|up tensor; returns (dtype code, F). Raises TypeError / ValueError."""
    if not isinstance(x, torch.Tensor):
        _fail(TypeError, fn, f"{name} must be a torch.Tensor, got {type(x).__name__}")
    code = _DTYPE_CODES.get(x.dtype)
    if code is None:
        _fail(TypeError, fn, f"{name} has dtype {x.dtype}; expected torch.bfloat16, torch.float16 or torch.float32")
    if x.device.type not in ("cpu", "cuda"):
        _fail(ValueError, fn, f"{name} is on device {x.device}; fastglu runs on 'cpu' and 'cuda' tensors")
    if x.dim() not in (2, 3):
        _fail(ValueError, fn, f"{name} must be 2D [tokens, 2F] or 3D [S, B, 2F], got shape {tuple(x.shape)}")
    width = x.shape[-1]
    if width % 2:
        _fail(ValueError, fn, f"{name}'s last dimension (gate | up) must be even, got shape {tuple(x.shape)}")
    return code, width // 2


def _tokens(t: torch.Tensor) -> int:
    """Rows of a 2D [T, w] or 3D [S, B, w] tensor (explicit, so that empty tensors view cleanly)."""
    s = t.shape
    return s[0] if len(s) == 2 else s[0] * s[1]


def _rows(t: torch.Tensor, width: int, need_unit_cols: bool) -> torch.Tensor:
    """``t`` as a 2D [rows, width] tensor, a view whenever the strides allow it."""
    t2 = t if t.dim() == 2 else t.reshape(_tokens(t), width)  # reshape copies only when it must
    if need_unit_cols and t2.stride(1) != 1 and width > 1:
        t2 = t2.contiguous()
    return t2


def _launch(x: torch.Tensor):
    """(on_cuda, stream) for a launch on x's device; the device must be the current one."""
    if x.is_cuda:
        return 1, _raw_stream(x.device.index)
    return 0, 0


def _out_rows(out, shape, x, width, fn):
    """Validate a caller-given output and view it as evenly strided [rows, width] rows."""
    if not isinstance(out, torch.Tensor) or out.shape != shape or out.dtype != x.dtype or out.device != x.device:
        got = (tuple(out.shape), out.dtype, out.device) if isinstance(out, torch.Tensor) else type(out).__name__
        _fail(ValueError, fn, f"out must have shape {tuple(shape)}, dtype {x.dtype} and device {x.device}; got {got}")
    try:
        out2 = out.view(_tokens(out), width)
    except RuntimeError:
        out2 = None
    if out2 is None or (width > 1 and out2.stride(1) != 1):
        _fail(ValueError, fn, f"out (strides {out.stride()}) must have evenly strided rows with unit column stride")
    return out2


def swiglu_fwd(x: torch.Tensor, fn: str = "swiglu_fwd", out: torch.Tensor | None = None) -> torch.Tensor:
    """y = silu(x[..., :F]) * x[..., F:] for x of shape [..., 2F] (2D or 3D); returns [..., F].

    ``out`` (optional) receives the result: x's leading shape + (F,), x's dtype and device, rows
    evenly strided with unit column stride; it must not overlap x.
    """
    code, F = check_input(x, fn)
    x2 = _rows(x, 2 * F, True)
    shape = x.shape[:-1] + (F,)
    if out is None:
        y = torch.empty(shape, dtype=x.dtype, device=x.device)
        y2 = y.view(_tokens(y), F)
    else:
        y, y2 = out, _out_rows(out, shape, x, F, fn)
    if y.numel():
        if x.is_cuda and x.device.index != torch.cuda.current_device():
            with torch.cuda.device(x.device):
                return swiglu_fwd(x, fn, out)
        on_cuda, stream = _launch(x)
        _C.swiglu_fwd(on_cuda, code, x2.data_ptr(), x2.stride(0), y2.data_ptr(), y2.stride(0), x2.shape[0], F, stream)
    return y


def swiglu_bwd(dy: torch.Tensor, x: torch.Tensor, fn: str = "swiglu_bwd", out: torch.Tensor | None = None) -> torch.Tensor:
    """The input gradient [..., 2F] of ``swiglu_fwd`` for upstream gradient ``dy`` [..., F].

    ``out`` (optional) receives the result: a tensor of x's shape and dtype on x's device whose
    rows are evenly strided with unit column stride; it may be ``x`` itself (in-place backward).
    """
    code, F = check_input(x, fn)
    if not isinstance(dy, torch.Tensor):
        _fail(TypeError, fn, f"dy must be a torch.Tensor, got {type(dy).__name__}")
    if dy.device != x.device:
        _fail(ValueError, fn, f"dy is on {dy.device} but input is on {x.device}")
    if dy.dtype != x.dtype:
        _fail(TypeError, fn, f"dy has dtype {dy.dtype} but input has dtype {x.dtype}")
    if dy.shape != x.shape[:-1] + (F,):
        _fail(ValueError, fn, f"dy has shape {tuple(dy.shape)}; expected {tuple(x.shape[:-1]) + (F,)} for input {tuple(x.shape)}")
    x2 = _rows(x, 2 * F, True)
    if out is None:
        dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        dx2 = dx.view(_tokens(dx), 2 * F)
    else:
        dx, dx2 = out, _out_rows(out, x.shape, x, 2 * F, fn)
    if dx.numel():
        if x.is_cuda and x.device.index != torch.cuda.current_device():
            with torch.cuda.device(x.device):
                return swiglu_bwd(dy, x, fn, out)
        dy2 = dy if dy.dim() == 2 else dy.reshape(_tokens(dy), F)
        on_cuda, stream = _launch(x)
        _C.swiglu_bwd(on_cuda, code, dy2.data_ptr(), dy2.stride(0), dy2.stride(1), x2.data_ptr(), x2.stride(0),
                      dx2.data_ptr(), dx2.stride(0), x2.shape[0], F, stream)
    return dx
