"""Megatron-Core's ``MLP`` on fastglu's fused block: ``fastglu.megatron.apply(mlp=True)``.

``route()`` replaces ``megatron.core.transformer.mlp.MLP.forward`` (and so that of the subclasses
that do not override it) with a forward that runs the whole block as ``fastglu.mlp`` on each rank's
local weights, through Megatron's own tensor-parallel mappings:

- fc1 column-parallel: the input goes through ``copy_to_tensor_model_parallel_region`` (identity
  forward, all-reduce of dx in the backward), or with sequence parallelism
  ``gather_from_sequence_parallel_region`` (all-gather of the sequence, reduce-scatter of dx);
  rank r's fc1 rows are Megatron's [gate_r ; up_r], the split layout fastglu.mlp takes, and its
  fc1 bias the local [2F/tp] slice;
- fc2 row-parallel: the local product goes through ``reduce_from_tensor_model_parallel_region``
  (all-reduce), or ``reduce_scatter_to_sequence_parallel_region`` with sequence parallelism; fc2's
  bias is returned (``skip_bias_add``) or added after the reduction, as ``RowParallelLinear`` does.

The activation follows the branch Megatron's forward would take (``bias_activation_fusion``:
SwiGLU / the tanh GeGLU / quick-GeGLU with its offset and clamp for probs; unfused: SiLU or
quick-GELU with ``glu_linear_offset`` and ``activation_func_clamp_value`` after the bias);
``per_token_scale`` becomes fastglu.mlp's per-token ``weights`` (and scales fc2's bias, as Megatron
does). Anything else runs Megatron's own forward, and the reason is warned once per reason
(``why_not`` gives it): fp8 / fp4, ``gradient_accumulation_fusion``, fc1 / fc2 that are not
Megatron's ``ColumnParallelLinear`` / ``RowParallelLinear`` (a Transformer Engine spec),
``use_te_activation_func``, the erf GELU of the unfused path, ``activation_func_fp8_input_store``,
expert layers with explicit communication, tp-comm overlap, deferred or delayed weight gradients,
CPU offloading, autocast, mixed input and weight dtypes.
"""

from __future__ import annotations

import sys
import warnings

import torch
import torch.nn.functional as F_

from .mlp_block import mlp as _fastglu_mlp

TARGET = "megatron.core.transformer.mlp.MLP.forward"
_original = None
_warned: set = set()
counts = {"fastglu": 0, "megatron": 0}  # forwards taken by each path since route()


def _mod(name):
    import importlib

    return importlib.import_module(name)


def _activation(mlp, per_token_scale):
    """(activation, glu_linear_offset, clamp_value) for the branch Megatron's forward takes, or a
    string saying why fastglu does not cover it."""
    cfg = mlp.config
    act = cfg.activation_func
    quick_gelu = getattr(sys.modules.get("megatron.core.transformer.mlp"), "quick_gelu", None)
    offset = getattr(cfg, "glu_linear_offset", 0.0) or 0.0
    clamp = getattr(cfg, "activation_func_clamp_value", None)
    if cfg.bias_activation_fusion:
        if per_token_scale is not None:
            if act is F_.silu:
                return "silu", 0.0, None
            if quick_gelu is not None and act is quick_gelu:
                if clamp and mlp.linear_fc1.bias is not None:
                    return (
                        "weighted_bias_quick_geglu_impl clamps before adding fc1's bias; fastglu.mlp adds the "
                        "bias in fc1's GEMM, before the clamp"
                    )
                return "quick_gelu", float(offset), clamp
            return f"the fused activation {act!r} with per_token_scale (Megatron refuses it too)"
        if act is F_.gelu:
            return "gelu_tanh", 0.0, None
        if act is F_.silu:
            return "silu", 0.0, None
        return f"the fused activation {act!r}"
    if act is F_.silu:
        return "silu", float(offset), clamp
    if quick_gelu is not None and act is quick_gelu:
        return "quick_gelu", float(offset), clamp
    if act is F_.gelu:
        return "F.gelu without bias_activation_fusion is the erf GELU; fastglu has the tanh approximation"
    return f"activation_func {act!r}"


def why_not(mlp, hidden_states, per_token_scale=None, kwargs=None):
    """None if fastglu.mlp runs this Megatron MLP's forward, else the reason it does not."""
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear

    cfg = mlp.config
    fc1, fc2 = mlp.linear_fc1, mlp.linear_fc2
    if not cfg.gated_linear_unit:
        return "config.gated_linear_unit is False (fastglu.mlp is the gated MLP)"
    if getattr(cfg, "fp8", None) or getattr(cfg, "fp4", None):
        return "fp8 / fp4 training (config.fp8 / config.fp4)"
    if type(fc1) is not ColumnParallelLinear or type(fc2) is not RowParallelLinear:
        return (
            f"linear_fc1 / linear_fc2 are {type(fc1).__name__} / {type(fc2).__name__}, not Megatron's "
            "ColumnParallelLinear / RowParallelLinear (a Transformer Engine or other spec)"
        )
    for flag in (
        "gradient_accumulation_fusion",
        "use_te_activation_func",
        "activation_func_fp8_input_store",
        "defer_embedding_wgrad_compute",
        "delay_wgrad_compute",
        "tp_comm_overlap",
        "cpu_offloading",
        "use_kitchen",
    ):
        if getattr(cfg, flag, False):
            return f"config.{flag} is set"
    if getattr(cfg, "_cpu_offloading_context", None) is not None:
        return "a CPU offloading context is active"
    if getattr(fc1, "explicit_expert_comm", False) or getattr(fc2, "explicit_expert_comm", False):
        return "expert layers with explicit expert communication"
    if getattr(fc1, "disable_grad_reduce", False):
        return "linear_fc1.disable_grad_reduce is set"
    if getattr(fc1, "gtp_remat_size", 1) != 1 or getattr(fc2, "gtp_remat_size", 1) != 1:
        return "gtp_remat_size > 1"
    if fc1.weight is None or fc2.weight is None:
        return "linear_fc1 / linear_fc2 without a weight parameter (skip_weight_param_allocation)"
    if not fc1.skip_bias_add:
        return "linear_fc1 adds its own bias (skip_bias_add=False)"
    if getattr(fc1, "gather_output", False):
        return "linear_fc1.gather_output is set"
    if not getattr(fc2, "input_is_parallel", True):
        return "linear_fc2.input_is_parallel is False"
    if kwargs:
        return f"forward arguments {sorted(kwargs)}"
    if not isinstance(hidden_states, torch.Tensor) or hidden_states.device.type not in (
        "cpu",
        "cuda",
    ):
        return "hidden_states is not a CPU or CUDA tensor"
    if (
        torch.is_autocast_enabled()
        if hidden_states.device.type == "cuda"
        else torch.is_autocast_enabled("cpu")
    ):
        return "autocast is enabled"
    if hidden_states.dtype != fc1.weight.dtype or fc2.weight.dtype != fc1.weight.dtype:
        return (
            f"hidden_states ({hidden_states.dtype}) and the weights ({fc1.weight.dtype}, {fc2.weight.dtype}) "
            "differ in dtype"
        )
    if hidden_states.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        return f"dtype {hidden_states.dtype}"
    a = _activation(mlp, per_token_scale)
    return a if isinstance(a, str) else None


def fused_forward(mlp, hidden_states, per_token_scale=None):
    """Megatron's ``MLP.forward`` on fastglu.mlp (the module docstring); returns (output, output_bias)."""
    maps = _mod("megatron.core.tensor_parallel.mappings")
    fc1, fc2 = mlp.linear_fc1, mlp.linear_fc2
    activation, offset, clamp = _activation(mlp, per_token_scale)
    x = hidden_states
    if fc1.sequence_parallel:
        x = maps.gather_from_sequence_parallel_region(
            x, tensor_parallel_output_grad=True, group=fc1.tp_group
        )
    else:
        x = maps.copy_to_tensor_model_parallel_region(x, group=fc1.tp_group)
    out = _fastglu_mlp(
        x,
        fc1.weight,
        fc2.weight,
        activation=activation,
        bias1=fc1.bias,
        weights=per_token_scale,
        clamp_value=clamp,
        glu_linear_offset=offset,
    )
    if fc2.sequence_parallel:
        out = maps.reduce_scatter_to_sequence_parallel_region(out, group=fc2.tp_group)
    else:
        out = maps.reduce_from_tensor_model_parallel_region(out, group=fc2.tp_group)
    bias = fc2.bias
    if bias is not None and not fc2.skip_bias_add:
        out, bias = out + bias, None
    if per_token_scale is not None and bias is not None:
        out = out + bias.unsqueeze(0) * per_token_scale.unsqueeze(-1)
        bias = None
    return out, bias


def _forward(self, hidden_states, per_token_scale=None, **kwargs):
    reason = why_not(self, hidden_states, per_token_scale, kwargs)
    if reason is None:
        counts["fastglu"] += 1
        return fused_forward(self, hidden_states, per_token_scale)
    counts["megatron"] += 1
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(
            f"fastglu.megatron: Megatron's MLP keeps its own forward: {reason}",
            UserWarning,
            stacklevel=2,
        )
    return (
        _original(self, hidden_states, per_token_scale, **kwargs)
        if per_token_scale is not None
        else _original(self, hidden_states, **kwargs)
    )


def route() -> str:
    """Replace ``MLP.forward`` (idempotent); returns ``TARGET``. ImportError without megatron-core."""
    global _original
    cls = _mod("megatron.core.transformer.mlp").MLP
    if cls.forward is not _forward:
        _original = cls.forward
        cls.forward = _forward
    return TARGET


def unroute() -> list:
    """Put Megatron's ``MLP.forward`` back; returns ``[TARGET]`` if it was routed, else []."""
    global _original
    mod = sys.modules.get("megatron.core.transformer.mlp")
    if mod is None or _original is None or mod.MLP.forward is not _forward:
        return []
    mod.MLP.forward, _original = _original, None
    return [TARGET]


def is_routed() -> bool:
    mod = sys.modules.get("megatron.core.transformer.mlp")
    return mod is not None and mod.MLP.forward is _forward
