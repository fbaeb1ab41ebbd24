"""Autograd-aware SwiGLU: ``fastglu.swiglu`` and Megatron-Core's ``bias_swiglu_impl`` signature.

Semantics follow Megatron-Core ``megatron/core/fusions/fused_bias_swiglu.py`` (``swiglu``,
``swiglu_back``, ``SwiGLUFunction``, ``bias_swiglu_impl``).
"""

from __future__ import annotations

import torch

from . import ops


class SwiGLUFunction(torch.autograd.Function):
    """y = silu(gate) * up on a [.., 2F] input; saves the input (optionally as float8_e4m3fn)."""

    @staticmethod
    def forward(ctx, input, fp8_input_store=False, cpu_offload_input=False):
        y = ops.swiglu_fwd(input, "swiglu")
        saved = input.to(torch.float8_e4m3fn) if fp8_input_store else input
        if cpu_offload_input:
            saved.activation_offloading = True
        ctx.save_for_backward(saved)
        ctx.input_dtype = input.dtype if fp8_input_store else None
        return y

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        if ctx.input_dtype is not None:
            x = x.to(ctx.input_dtype)
        return ops.swiglu_bwd(dy, x, "swiglu.backward"), None, None


def swiglu(x: torch.Tensor) -> torch.Tensor:
    """SwiGLU on the Megatron layout.

    Args:
        x: ``[tokens, 2F]`` or ``[S, B, 2F]`` tensor, bfloat16 / float16 / float32, on CPU or CUDA;
            gate = ``x[..., :F]``, up = ``x[..., F:]``. May be a strided view (e.g. a column slice).

    Returns:
        ``silu(gate) * up`` of shape ``[..., F]``, x's dtype and device. Differentiable in x:
        ``d_gate = dy * up * s * (1 + gate * (1 - s))``, ``d_up = dy * silu(gate)``, s = sigmoid(gate).

    Raises:
        TypeError: x is not a tensor, or its dtype is not bfloat16/float16/float32.
        ValueError: x is not 2D/3D, its last dimension is odd, or it is on another device type.
    """
    return SwiGLUFunction.apply(x, False, False)


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
    return SwiGLUFunction.apply(input, fp8_input_store, cpu_offload_input)
