"""nn.Module forms of fastglu's gated activations.

- ``GLU(activation, ...)`` and its three named forms ``SwiGLU``, ``GeGLU``, ``QuickGeGLU``: hold the
  options of ``fastglu.glu`` (clamp_value, glu_linear_offset, multipliers, interleaved,
  fp8_input_store, in_place) and apply them to ``input [..., 2F]`` -> ``[..., F]``; ``forward`` also
  takes an optional ``bias [2F]`` and per-token ``weights [tokens, 1]``.
- ``FastGLUActivation(config=...)``: a Megatron-Core activation module, built the way Megatron's MLP
  builds ``submodules.activation_func(config=self.config)`` (``use_te_activation_func``), reading the
  activation and its options from a ``TransformerConfig``. Megatron then calls it on the fc1 output
  (bias already added) and multiplies by the per-token probs itself.

None of these has parameters or buffers: they are stateless like ``torch.nn.SiLU``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .functional import glu
from .ops import _fp8_mode, glu_params

__all__ = ["GLU", "SwiGLU", "GeGLU", "QuickGeGLU", "FastGLUActivation", "activation_name"]


class GLU(torch.nn.Module):
    """``y = m_d * w * act(m_g * (g' + b_gate)) * (u' + b_up + o)`` on ``input [..., 2F]``.

    Args:
        activation: ``"silu"``, ``"gelu_tanh"`` or ``"quick_gelu"``.
        clamp_value: None / <= 0 no clamp; c > 0 clamps gate to ``<= c``, up to ``[-c, c]``.
        glu_linear_offset: added to up.
        gate_multiplier, down_multiplier: Liger's multipliers.
        interleaved: gate at even columns, up at odd ones (GPT-OSS).
        fp8_input_store: False, True, ``"per_row"``, ``"per_tensor"``, ``"blockwise"`` (see ``fastglu.glu``).
        in_place: the backward writes the input gradient over the input (one backward only).

    Raises:
        ValueError / TypeError at construction for bad options (the same checks as ``fastglu.glu``).
    """

    activation = "silu"

    def __init__(
        self,
        activation=None,
        *,
        clamp_value=None,
        glu_linear_offset=0.0,
        gate_multiplier=1.0,
        down_multiplier=1.0,
        interleaved=False,
        fp8_input_store=False,
        in_place=False,
    ):
        super().__init__()
        if activation is not None:
            self.activation = activation
        glu_params(
            self.activation,
            clamp_value=clamp_value,
            glu_linear_offset=glu_linear_offset,
            gate_multiplier=gate_multiplier,
            down_multiplier=down_multiplier,
            interleaved=interleaved,
            fn=type(self).__name__,
        )  # validate now, not at the first forward
        _fp8_mode(fp8_input_store, type(self).__name__)
        self.clamp_value = clamp_value
        self.glu_linear_offset = glu_linear_offset
        self.gate_multiplier = gate_multiplier
        self.down_multiplier = down_multiplier
        self.interleaved = interleaved
        self.fp8_input_store = fp8_input_store
        self.in_place = in_place

    def forward(
        self,
        input: torch.Tensor,
        bias: torch.Tensor | None = None,
        weights: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``input [..., 2F]`` (optional ``bias [2F]``, ``weights [tokens, 1]``) -> ``[..., F]``."""
        return glu(
            input,
            self.activation,
            bias=bias,
            weights=weights,
            clamp_value=self.clamp_value,
            glu_linear_offset=self.glu_linear_offset,
            gate_multiplier=self.gate_multiplier,
            down_multiplier=self.down_multiplier,
            interleaved=self.interleaved,
            fp8_input_store=self.fp8_input_store,
            in_place=self.in_place,
        )

    def extra_repr(self) -> str:
        opts = [f"activation={self.activation!r}"]
        for name, default in (
            ("clamp_value", None),
            ("glu_linear_offset", 0.0),
            ("gate_multiplier", 1.0),
            ("down_multiplier", 1.0),
            ("interleaved", False),
            ("fp8_input_store", False),
            ("in_place", False),
        ):
            v = getattr(self, name)
            if v != default:
                opts.append(f"{name}={v!r}")
        return ", ".join(opts)


class SwiGLU(GLU):
    """SwiGLU: ``silu(gate) * up`` (Megatron's ``bias_swiglu_impl``), with GLU's options."""

    activation = "silu"

    def __init__(self, **options):
        super().__init__(None, **options)


class GeGLU(GLU):
    """GeGLU with Megatron's tanh approximation of GELU (``bias_geglu_impl``), with GLU's options."""

    activation = "gelu_tanh"

    def __init__(self, **options):
        super().__init__(None, **options)


class QuickGeGLU(GLU):
    """quick-GeGLU ``quick_gelu(gate) * (up + glu_linear_offset)`` with optional clamp (GPT-OSS:
    ``QuickGeGLU(glu_linear_offset=1.0, clamp_value=7.0)``; Megatron's
    ``weighted_bias_quick_geglu_impl``), with GLU's options."""

    activation = "quick_gelu"

    def __init__(self, *, glu_linear_offset=0.0, clamp_value=None, **options):
        super().__init__(
            None, glu_linear_offset=glu_linear_offset, clamp_value=clamp_value, **options
        )


def activation_name(activation_func) -> str:
    """fastglu's activation name for a Megatron ``config.activation_func``: ``F.silu`` -> "silu",
    ``F.gelu`` -> "gelu_tanh" (Megatron's fused GeGLU uses the tanh approximation), Megatron's
    ``quick_gelu`` (``megatron.core.fusions.fused_bias_geglu``) -> "quick_gelu"; a name of
    ``fastglu.ops.ACTIVATIONS`` passes through.

    Raises:
        ValueError: any other function.
    """
    if isinstance(activation_func, str):
        glu_params(activation_func, fn="FastGLUActivation")
        return activation_func
    if activation_func is F.silu:
        return "silu"
    if activation_func is F.gelu:
        return "gelu_tanh"
    mod = getattr(activation_func, "__module__", "") or ""
    name = getattr(activation_func, "__name__", "") or ""
    if name == "quick_gelu" and mod.startswith("megatron."):
        return "quick_gelu"
    try:  # a torch.compile / jit wrapper of Megatron's quick_gelu
        import sys

        geglu = sys.modules.get("megatron.core.fusions.fused_bias_geglu")
        if geglu is not None and activation_func is getattr(geglu, "quick_gelu", None):
            return "quick_gelu"
    except Exception:  # pragma: no cover
        pass
    raise ValueError(
        f"fastglu.FastGLUActivation: activation_func {activation_func!r} is not F.silu, F.gelu or "
        "Megatron's quick_gelu"
    )


class FastGLUActivation(GLU):
    """A Megatron-Core MLP activation module (``MLPSubmodules(activation_func=FastGLUActivation)``
    with ``config.use_te_activation_func = True``): ``input [..., 2F]`` -> ``[..., F]``.

    Built as Megatron builds it, ``FastGLUActivation(config=config)``, it reads
    ``config.activation_func`` (``activation_name``), ``config.gated_linear_unit`` (must be True),
    ``config.glu_linear_offset``, ``config.activation_func_clamp_value`` and
    ``config.activation_func_fp8_input_store``. Without a config it takes ``activation`` and GLU's
    keyword options. Keyword options override the config's.

    Raises:
        ValueError: a config without ``gated_linear_unit``, or an activation fastglu does not have.
    """

    def __init__(self, config=None, *, activation=None, **options):
        if config is not None:
            if not getattr(config, "gated_linear_unit", False):
                raise ValueError(
                    "fastglu.FastGLUActivation: config.gated_linear_unit is False; fastglu computes "
                    "gated activations only"
                )
            if activation is None:
                activation = activation_name(getattr(config, "activation_func", F.silu))
            from_config = {
                "glu_linear_offset": getattr(config, "glu_linear_offset", 0.0) or 0.0,
                "clamp_value": getattr(config, "activation_func_clamp_value", None),
                "fp8_input_store": bool(getattr(config, "activation_func_fp8_input_store", False)),
            }
            from_config.update(options)
            options = from_config
        super().__init__(activation_name(activation or "silu"), **options)


from .mlp_block import GLUMLP  # noqa: E402, F401  (the gated MLP block's module, beside its op)

__all__.append("GLUMLP")
