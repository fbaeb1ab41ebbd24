"""SwiGLU on torch tensors through libfastglu (no autograd here; see ``functional.py``).

Layout (Megatron-Core): ``input[..., 2F]`` holds gate = ``input[..., :F]`` and up = ``input[..., F:]``;
``y = silu(gate) * up`` has shape ``[..., F]``. Math and its source: ``include/fastglu.h``.

CUDA tensors run on the current CUDA stream of their device, CPU tensors on the C CPU backend.
Outputs come from PyTorch's allocator. Inputs are read in place whenever their rows are evenly
strided with unit column stride (any column slice of a wider tensor qualifies); only a tensor whose
leading dimensions cannot be merged into one evenly strided row index, or whose last dimension is
not contiguous, is copied first. ``dy`` is read in place with any strides, zero included.

This module is on the hot path of every call: the common case is checked with a few attribute
reads, and the slower, message-building checks run only when that fast test fails.
"""

from __future__ import annotations

import torch

from . import _C

_STRIDED = torch.strided
_Tensor = torch.Tensor
_DTYPE_CODES = {
    torch.float32: _C.DTYPE_FP32,
    torch.float16: _C.DTYPE_FP16,
    torch.bfloat16: _C.DTYPE_BF16,
}

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
            return type(e)(f"fastglu.{fn}:{msg[len(prefix):]}")
    return None


def check_dense(t, fn: str, name: str):
    """TypeError unless the tensor t is dense (torch.strided and not nested)."""
    if t.is_nested:
        _fail(TypeError, fn, f"{name} is a nested tensor (layout {t.layout}); fastglu needs a dense "
                             f"(torch.strided) tensor")
    if t.layout != torch.strided:
        _fail(TypeError, fn, f"{name} has layout {t.layout}; fastglu needs a dense (torch.strided) tensor")


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
                _fail(TypeError, fn, f"{name} is a {type(t).__name__} with no storage of its own; pass a plain "
                                     f"tensor (e.g. a DTensor's to_local())")
            _fail(ValueError, fn, f"{name} has {t.numel()} elements but no memory (data_ptr() is 0: a storage "
                                  f"resized to 0, e.g. a sharded FSDP parameter, or an efficient zero tensor)")


def check_input(x, fn: str, name: str = "input"):
    """Validate a gate|up tensor; returns (dtype code, F). Raises TypeError / ValueError."""
    if not isinstance(x, torch.Tensor):
        _fail(TypeError, fn, f"{name} must be a torch.Tensor, got {type(x).__name__}")
    check_dense(x, fn, name)
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


def _row_strides(shape, stride):
    """(tokens, row stride, column stride) of a 2D/3D tensor seen as [tokens, width] rows, or
    (tokens, None, None) when its leading dimensions cannot be merged into one row index."""
    if len(shape) == 2:
        return shape[0], stride[0], stride[1]
    s0, s1 = shape[0], shape[1]
    if s0 == 0 or s1 == 0:  # no rows: any stride describes them
        return 0, shape[2], 1
    if s1 == 1:
        return s0, stride[0], stride[2]
    if s0 == 1 or stride[0] == s1 * stride[1]:
        return s0 * s1, stride[1], stride[2]
    return s0 * s1, None, None


def refuse_out_requiring_grad(out, fn: str, name: str):
    """ValueError for an output tensor (out=) that requires grad while grad mode is on: the kernels
    write it with no autograd record (its values would silently change under an nn.Parameter or in
    the middle of a graph). torch refuses such out= arguments too ("functions with out=...
    arguments don't support automatic differentiation, but one of the arguments requires grad")."""
    if out.requires_grad and torch.is_grad_enabled():
        _fail(ValueError, fn, f"{name} requires grad ({'a leaf' if out.is_leaf else 'a non-leaf'} tensor of shape "
                              f"{tuple(out.shape)}); an out= argument is written with no autograd record, as "
                              "torch refuses for its own out= functions. Pass a tensor that does not require "
                              "grad, or call it under torch.no_grad()")


def _out_rows(out, shape, x, width, fn):
    """Validate a caller-given output; returns its row stride."""
    if not isinstance(out, torch.Tensor):
        _fail(TypeError, fn, f"out must be a torch.Tensor, got {type(out).__name__}")
    check_dense(out, fn, "out")
    refuse_out_requiring_grad(out, fn, "out")
    if out.dtype != x.dtype:
        _fail(TypeError, fn, f"out has dtype {out.dtype} but input has dtype {x.dtype}")
    if out.shape != shape or out.device != x.device or out.layout != torch.strided:
        _fail(ValueError, fn, f"out must be a dense tensor of shape {tuple(shape)} on device {x.device}; "
                              f"got shape {tuple(out.shape)} on device {out.device} (layout {out.layout})")
    _, rs, cs = _row_strides(out.shape, out.stride())
    if rs is None or (width > 1 and cs != 1) or out.is_neg():
        _fail(ValueError, fn, f"out (strides {out.stride()}) must have evenly strided rows with unit column stride "
                              "and no negation flag")
    return rs


def check_in_place(x: torch.Tensor, fn: str):
    """Raise ValueError unless x can take its own gradient in place: evenly strided rows that do
    not overlap, unit column stride, no negation flag."""
    check_input(x, fn)
    tokens, rs, cs = _row_strides(x.shape, x.stride())
    width = x.shape[-1]
    if tokens and width and (rs is None or (width > 1 and cs != 1) or (tokens > 1 and rs < width) or x.is_neg()):
        _fail(ValueError, fn, f"in_place=True needs an input with evenly strided, non-overlapping rows and unit "
                              f"column stride; got shape {tuple(x.shape)}, strides {x.stride()}")


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
    _fail(ValueError, fn, f"in_place=True: {name} ({type(t).__name__} of shape {tuple(t.shape)}) is {what} "
                          "(e.g. an nn.Parameter), which the backward would overwrite with its gradient; torch "
                          "refuses this too (a leaf Variable that requires grad is being used in an in-place "
                          "operation). Pass in_place=False, or a non-leaf tensor (a layer's output).")


def _never_zero(t) -> bool:  # pragma: no cover - a torch without efficient zero tensors
    return False


# is_zero_tensor(t): whether t is an efficient zero tensor (``torch._efficientzerotensor``, which
# autograd may pass as an upstream gradient): all zeros, with no memory (data_ptr() 0). The method
# itself, called as a function (it is on the backward's hot path).
is_zero_tensor = getattr(torch.Tensor, "_is_zerotensor", _never_zero)


def _may_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
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


def _input_rows(x, fn: str):
    """Validate a gate|up input and see it as rows: (x or a copy, dtype code, shape, F, tokens, row
    stride). The common case costs a few attribute reads; anything unusual goes to check_input."""
    code = _DTYPE_CODES.get(getattr(x, "dtype", None))
    try:
        shape = x.shape
    except (AttributeError, RuntimeError):  # not a tensor, or one without sizes (a nested tensor)
        check_input(x, fn)  # raises the precise error
        raise
    nd = len(shape)
    if (code is None or x.layout is not _STRIDED or (nd != 2 and nd != 3) or shape[-1] & 1
            or not (x.is_cuda or x.is_cpu) or (type(x) is not _Tensor and not isinstance(x, _Tensor))):
        check_input(x, fn)  # raises the precise error (or passes a legal oddity, e.g. a non-interned layout)
    width = shape[-1]
    stride = x.stride()
    if nd == 2:
        tokens, rs, cs = shape[0], stride[0], stride[1]
    else:
        tokens, rs, cs = _row_strides(shape, stride)
    if rs is None or (cs != 1 and width > 1) or x.is_neg():
        x = x.resolve_neg().contiguous()  # a negated view's memory holds -x: materialize it
        rs = width
    return x, code, shape, width >> 1, tokens, rs


def _launch(kernel, x: torch.Tensor, *args):
    """kernel(on_cuda, *args, stream) on x's device: its current stream, under a device guard only
    when x is not on the current device."""
    if not x.is_cuda:
        return kernel(0, *args, 0)
    dev = x.get_device()
    if dev == _current_device():
        return kernel(1, *args, _raw_stream(dev))
    with torch.cuda.device(dev):
        return kernel(1, *args, _raw_stream(dev))


def swiglu_fwd(x: torch.Tensor, *, out: torch.Tensor | None = None, fn: str = "swiglu_fwd") -> torch.Tensor:
    """y = silu(x[..., :F]) * x[..., F:] for x of shape [..., 2F] (2D or 3D); returns [..., F].

    ``out`` (optional) receives the result: x's leading shape + (F,), x's dtype and device, rows
    evenly strided with unit column stride; it must not overlap x (ValueError).
    """
    x_given = x
    x, code, shape, F, tokens, in_rs = _input_rows(x, fn)
    out_shape = (shape[0], F) if len(shape) == 2 else (shape[0], shape[1], F)
    if out is None:
        y, out_rs = x.new_empty(out_shape), F
    else:
        y, out_rs = out, _out_rows(out, out_shape, x, F, fn)
        if x is not x_given and _may_overlap(out, x_given):  # the C check will only see the copy
            _fail(ValueError, fn, "out overlaps input")
    if tokens and F:
        _launch(_C.swiglu_fwd, x, code, x.data_ptr(), in_rs, y.data_ptr(), out_rs, tokens, F)
    return y


def swiglu_bwd(dy: torch.Tensor, x: torch.Tensor, *, out: torch.Tensor | None = None,
               fn: str = "swiglu_bwd") -> torch.Tensor:
    """The input gradient [..., 2F] of ``swiglu_fwd`` for upstream gradient ``dy`` [..., F].

    ``out`` (optional) receives the result: a tensor of x's shape and dtype on x's device whose
    rows are evenly strided with unit column stride; it may be ``x`` itself (in-place backward).
    ``dy`` may be an efficient zero tensor (``torch._efficientzerotensor``, no memory): the result
    is then zero, written without a kernel launch.
    """
    x_given = x
    x, code, shape, F, tokens, in_rs = _input_rows(x, fn)
    if not isinstance(dy, torch.Tensor):
        _fail(TypeError, fn, f"dy must be a torch.Tensor, got {type(dy).__name__}")
    if dy.layout is not _STRIDED or dy.is_nested:
        check_dense(dy, fn, "dy")
    if dy.device != x.device:
        _fail(ValueError, fn, f"dy is on {dy.device} but input is on {x.device}")
    if dy.dtype != x.dtype:
        _fail(TypeError, fn, f"dy has dtype {dy.dtype} but input has dtype {x.dtype}")
    dy_shape = (shape[0], F) if len(shape) == 2 else (shape[0], shape[1], F)
    if dy.shape != dy_shape:
        _fail(ValueError, fn, f"dy has shape {tuple(dy.shape)}; expected {dy_shape} for input {tuple(shape)}")
    if out is None:
        dx, dx_rs = x.new_empty(shape), 2 * F
    else:
        # (an input that _input_rows had to copy fails these checks too, so out=x is never the copy)
        dx, dx_rs = out, _out_rows(out, shape, x, 2 * F, fn)
    if tokens and F:
        if is_zero_tensor(dy):  # an efficient zero tensor (no memory): the gradient is zero
            return dx.zero_()
        _, dy_rs, dy_cs = _row_strides(dy.shape, dy.stride())
        if dy_rs is None or dy.is_neg():  # no single row stride describes it, or a negated view
            if out is not None and _may_overlap(out, dy):  # the C check will only see the copy
                _fail(ValueError, fn, "out (dinput) overlaps dy")
            dy = dy.resolve_neg().contiguous()
            dy_rs, dy_cs = F, 1
        if out is not None and x is not x_given and out is not x_given and _may_overlap(out, x_given):
            _fail(ValueError, fn, "out (dinput) overlaps input")
        _launch(_C.swiglu_bwd, x, code, dy.data_ptr(), dy_rs, dy_cs, x.data_ptr(), in_rs,
                dx.data_ptr(), dx_rs, tokens, F)
    return dx
