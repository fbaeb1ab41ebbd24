"""Autograd-aware SwiGLU: ``fastglu.swiglu`` and Megatron-Core's ``bias_swiglu_impl`` signature.

Semantics follow Megatron-Core ``megatron/core/fusions/fused_bias_swiglu.py`` (``swiglu``,
``swiglu_back``, ``SwiGLUFunction``, ``bias_swiglu_impl``).
"""

from __future__ import annotations

import torch

from . import ops

_increment_version = getattr(torch.autograd.graph, "increment_version", None)  # torch >= 2.2


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


class SwiGLUFunction(torch.autograd.Function):
    """y = silu(gate) * up on a [.., 2F] input, with Megatron's and Liger's options.

    Saves the input for backward (optionally as float8_e4m3fn, Megatron's ``fp8_input_store``).
    With ``in_place`` the backward writes the input gradient into the saved input's storage
    (no new [.., 2F] tensor), so it can run only once per forward.
    """

    @staticmethod
    def forward(ctx, input, fp8_input_store=False, cpu_offload_input=False, in_place=False):
        if in_place and not fp8_input_store:
            ops.check_in_place(input, "swiglu")
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
        if ctx.in_place:
            if ctx.backward_done:
                raise RuntimeError(
                    "fastglu.swiglu(in_place=True): backward can run only once per forward: the saved input "
                    "was overwritten by its gradient. Use in_place=False for retain_graph=True or a second backward."
                )
            ctx.backward_done = True
        (x,) = ctx.saved_tensors
        if ctx.input_dtype is not None:
            x = x.to(ctx.input_dtype)
        if not ctx.in_place:
            return ops.swiglu_bwd(dy, x, fn="swiglu.backward"), None, None, None
        dx = ops.swiglu_bwd(dy, x, out=x, fn="swiglu.backward")
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
            stride, not overlapping (ValueError at the forward otherwise).

    Returns:
        ``silu(gate) * up`` of shape ``[..., F]``, x's dtype and device. Differentiable in x:
        ``d_gate = dy * up * s * (1 + gate * (1 - s))``, ``d_up = dy * silu(gate)``, s = sigmoid(gate).

    Raises:
        TypeError: x is not a dense tensor, or its dtype is not bfloat16/float16/float32.
        ValueError: x is not 2D/3D, its last dimension is odd, or it is on another device type.
        RuntimeError: a backward with create_graph=True (the backward is not differentiable).
    """
    if in_place:
        return SwiGLUFunction.apply(x, False, False, True)
    return _SwiGLU.apply(x)


def bias_swiglu_impl(input, bias, fp8_input_store=False, cpu_offload_input=False, clamp_value=None):
    """Drop-in for ``megatron.core.fusions.fused_bias_swiglu.bias_swiglu_impl``.

    Args:
        input: ``[tokens, 2F]`` or ``[S, B, 2F]``.
        bias: must be None for now (the bias variant is not implemented yet).
        fp8_input_store: save the input for backward as ``torch.float8_e4m3fn`` (Megatron's cast).
        cpu_offload_input: mark the saved input with ``activation_offloading = True`` as Megatron does.
        clamp_value: None, 0 or negative (no clamp); a positive clamp is not implemented yet.

    Returns:
        ``[tokens, F]`` for 2D input, ``[S, B, F]`` for 3D input.

    Raises:
        ValueError: input is not 2D or 3D (Megatron asserts), or its last dimension is odd.
        NotImplementedError: a bias or a positive clamp_value.
    """
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"fastglu.bias_swiglu_impl: input must be a torch.Tensor, got {type(input).__name__}")
    ori_shape = input.shape
    if len(ori_shape) not in (2, 3):
        raise ValueError(f"fastglu.bias_swiglu_impl: input must be 2D or 3D, got shape {tuple(ori_shape)}")
    if bias is not None:
        raise NotImplementedError("fastglu.bias_swiglu_impl: bias is not supported yet (bias=None only)")
    if clamp_value is not None and clamp_value > 0:
        raise NotImplementedError("fastglu.bias_swiglu_impl: clamp_value is not supported yet")
    if not (fp8_input_store or cpu_offload_input):
        return _SwiGLU.apply(input)
    return SwiGLUFunction.apply(input, fp8_input_store, cpu_offload_input, False)
