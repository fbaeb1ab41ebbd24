"""Autograd-aware SwiGLU: ``fastglu.swiglu`` and Megatron-Core's ``bias_swiglu_impl`` signature.

Semantics follow Megatron-Core ``megatron/core/fusions/fused_bias_swiglu.py`` (``swiglu``,
``swiglu_back``, ``SwiGLUFunction``, ``bias_swiglu_impl``).
"""

from __future__ import annotations

import torch

from .glu import bias_swiglu_impl as _glu_bias_swiglu_impl
from . import library, ops

_increment_version = getattr(torch.autograd.graph, "increment_version", None)  # torch >= 2.2
_Tensor = torch.Tensor
_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)
_grad_enabled = torch.is_grad_enabled
_forward_ad = torch.autograd.forward_ad
_tracing_state = getattr(torch._C, "_get_tracing_state", lambda: None)  # torch.jit.trace
# What torch.autograd.Function.apply does for a plain tensor, without its Python layer (signature
# binding for setup_context, a generator over the arguments): with no functorch transform active it
# unwraps a dead functorch wrapper and calls the C++ apply (bench/host_memory.py times both);
# _lean_apply falls back to Function.apply on a torch without these helpers (glu.py holds them).
from .glu import _c_apply, _functorch_active, _unwrap_if_dead  # noqa: E402


def _no_double_backward():
    # The engine runs a backward with grad mode on only under create_graph=True (double backward,
    # gradient penalties): the kernels have no derivative of their own, so refuse rather than hand
    # back a gradient that silently drops its dependence on the input.
    if torch.is_grad_enabled():
        raise RuntimeError("fastglu.swiglu: double backward (create_graph=True) is not supported; "
                           "the SwiGLU backward kernel is not differentiable")


class _SwiGLU(torch.autograd.Function):
    """Plain SwiGLU: the lean Function behind ``swiglu(x)`` (host time matters at small sizes)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ops.swiglu_fwd(x, fn="swiglu")

    @staticmethod
    def backward(ctx, dy):
        _no_double_backward()
        return ops.swiglu_bwd(dy, ctx.saved_tensors[0], fn="swiglu.backward")


if _functorch_active is not None and _unwrap_if_dead is not None and _c_apply is not None:
    _swiglu_c_apply = _c_apply.__get__(None, _SwiGLU)

    def _lean_apply(x):
        if _functorch_active():  # vmap / grad / jvp: Function.apply's own path (and its errors)
            return _SwiGLU.apply(x)
        x = _unwrap_if_dead(x)
        if ((not x.requires_grad or not _grad_enabled()) and _forward_ad._current_level < 0
                and _tracing_state() is None):  # (the JIT tracer records the Function, not a raw call)
            return ops.swiglu_fwd(x, fn="swiglu")  # no gradient to record: the kernel call alone
        return _swiglu_c_apply(x)
else:  # pragma: no cover - a torch without these private helpers
    _lean_apply = _SwiGLU.apply


class SwiGLUFunction(torch.autograd.Function):
    """y = silu(gate) * up on a [.., 2F] input, with Megatron's and Liger's options.

    Saves the input for backward (optionally as float8_e4m3fn, Megatron's ``fp8_input_store``).
    With ``in_place`` the backward writes the input gradient into the saved input's storage
    (no new [.., 2F] tensor), so it can run only once per forward. The forward refuses (ValueError)
    an input whose memory cannot take it: rows not evenly strided, and a leaf tensor that requires
    grad (an nn.Parameter) or a view of one, which torch refuses in-place operations on. An upstream
    gradient that shares memory with the input (e.g. ``grad_outputs`` given as a view of it) is
    answered out of place.
    """

    @staticmethod
    def forward(ctx, input, fp8_input_store=False, cpu_offload_input=False, in_place=False):
        if in_place and not fp8_input_store:
            ops.check_in_place(input, "swiglu")
            ops.refuse_leaf_in_place(input, "swiglu", "input")
        y = ops.swiglu_fwd(input, fn="swiglu")
        saved = input.to(torch.float8_e4m3fn) if fp8_input_store else input
        if cpu_offload_input:
            saved.activation_offloading = True
        ctx.save_for_backward(saved)
        ctx.input_dtype = input.dtype if fp8_input_store else None
        ctx.in_place = in_place and not fp8_input_store  # an fp8 copy has no storage to reuse
        ctx.backward_done = False
        return y

    @staticmethod
    def backward(ctx, dy):
        _no_double_backward()
        if ctx.in_place and ctx.backward_done:
            raise RuntimeError(
                "fastglu.swiglu(in_place=True): backward can run only once per forward: the saved input "
                "was overwritten by its gradient. Use in_place=False for retain_graph=True or a second backward."
            )
        (x,) = ctx.saved_tensors
        if ctx.input_dtype is not None:
            x = x.to(ctx.input_dtype)
        # dy sharing x's memory cannot be read while its gradient is written over x: out of place
        if not ctx.in_place or ops._may_overlap(dy, x):
            return ops.swiglu_bwd(dy, x, fn="swiglu.backward"), None, None, None
        dx = ops.swiglu_bwd(dy, x, out=x, fn="swiglu.backward")
        ctx.backward_done = True  # (after the call: a refused call has written nothing)
        if _increment_version is not None:
            _increment_version(x)  # other users of x now fail loudly, not silently
        return dx, None, None, None


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
    mode takes the lean autograd.Function (``_SwiGLU``, applied without Function.apply's Python
    layer), or, where no gradient can be recorded (grad mode off or an input that does not require
    grad, no forward-mode AD level open, not under ``torch.jit.trace``), the kernel call alone.
    A DTensor input must be sharded ``Shard(-1)`` in Megatron's tensor-parallel layout (each
    rank's local [..., 2F/tp] holds its own gate and up slices); the result is a DTensor
    ``Shard(-1)`` of global shape [..., F]; other placements raise ValueError (``library.py``).
    """
    if type(x) is _Tensor and not _is_compiling():
        if in_place and _grad_enabled():  # (without grad mode there is no backward to run in place)
            return SwiGLUFunction.apply(x, False, False, True)
        return _lean_apply(x)
    return library.swiglu(x, in_place and _grad_enabled())


def _off(option):
    """An option left off: None, False or a zero number (anything else goes to glu.py, which checks it)."""
    return option is None or option is False or (type(option) in (int, float) and option == 0)


def bias_swiglu_impl(input, bias, fp8_input_store=False, cpu_offload_input=False, clamp_value=None):
    """Drop-in for ``megatron.core.fusions.fused_bias_swiglu.bias_swiglu_impl``.

    Without bias, clamp, fp8 store or offload flag it is ``swiglu(input)`` (the SwiGLU kernels);
    otherwise it is ``fastglu.glu.bias_swiglu_impl`` (the gated-linear-unit kernels, ``glu.py``).

    Args:
        input: ``[tokens, 2F]`` or ``[S, B, 2F]``, bfloat16 / float16 / float32.
        bias: None, or ``[2F]`` of input's dtype (``[b_gate | b_up]``, added after the clamp); its
            gradient is returned already summed over tokens, ``[2F]``.
        fp8_input_store: False; True: save the input for backward as ``torch.float8_e4m3fn``
            (Megatron's cast), read by the backward kernel as fp8; ``"per_row"`` / ``"per_tensor"``:
            the scaled fp8 store (``glu.py`` documents its measured error).
        cpu_offload_input: mark the saved input and bias with ``activation_offloading = True`` as
            Megatron does.
        clamp_value: None, 0 or negative: no clamp; c > 0: gate clamped to ``<= c`` and up to
            ``[-c, c]`` before the bias (gradient 0 where the clamp cut, passed at the boundary).

    Returns:
        ``[tokens, F]`` for 2D input, ``[S, B, F]`` for 3D input, in input's dtype.

    Raises:
        TypeError: input is not a tensor; a dtype other than bf16/fp16/fp32, or a bias of another dtype.
        ValueError: input is not 2D or 3D (Megatron asserts), its last dimension is odd, a bias that
            is not ``[2F]`` or on another device.
    """
    if (bias is None and (fp8_input_store is False or _off(fp8_input_store))
            and (cpu_offload_input is False or _off(cpu_offload_input))
            and (clamp_value is None or type(clamp_value) in (int, float) and not clamp_value > 0)):
        try:
            return swiglu(input)
        except (TypeError, ValueError) as e:  # name the function called (no cost when nothing is raised)
            r = ops.renamed(e, "bias_swiglu_impl", "swiglu", "swiglu_fwd")
            if r is None:
                raise
            raise r from None
    return _glu_bias_swiglu_impl(input, bias, fp8_input_store, cpu_offload_input, clamp_value)
