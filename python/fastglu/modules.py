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

- ``GLUMLP(hidden_size, ffn_hidden_size, ...)``: the gated MLP block with its parameters
  (``fastglu.mlp``; with ``fp8="blockwise"``, ``fastglu.mlp_fp8``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import fp8_mlp
from .functional import glu
from .mlp_block import _path_code, mlp
from .ops import _fail, _fp8_mode, glu_params

__all__ = [
    "GLU",
    "SwiGLU",
    "GeGLU",
    "QuickGeGLU",
    "FastGLUActivation",
    "activation_name",
    "GLUMLP",
]


def _changed_options(module, *defaults) -> list:
    """``name=value`` for each (name, default) of defaults whose value on module differs from it
    (the modules' extra_repr)."""
    return [f"{n}={getattr(module, n)!r}" for n, d in defaults if getattr(module, n) != d]


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
        opts += _changed_options(
            self,
            ("clamp_value", None),
            ("glu_linear_offset", 0.0),
            ("gate_multiplier", 1.0),
            ("down_multiplier", 1.0),
            ("interleaved", False),
            ("fp8_input_store", False),
            ("in_place", False),
        )
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


# ---- the module ---------------------------------------------------------------------------------------


def _interleave(gate, up):
    """[gate rows | up rows] as interleaved rows (gate 2j, up 2j+1), for weights [F, ...] or biases [F]."""
    return torch.stack((gate, up), dim=1).reshape((2 * gate.shape[0],) + tuple(gate.shape[1:]))


class GLUMLP(torch.nn.Module):
    """The gated MLP block as an ``nn.Module``: ``fastglu.mlp(x, w1, w2, ...)`` with its parameters.

    Parameters: ``w1 [2F, hidden]`` (fc1: gate rows then up rows, or interleaved), ``w2 [hidden, F]``
    (fc2) and, with ``bias=True``, ``bias1 [2F]`` and ``bias2 [hidden]``; initialised as
    ``nn.Linear`` initialises its weight and bias.

    Loading (``load_state_dict``) also takes the two usual checkpoint layouts under the module's
    prefix, converted on the fly:

    - Hugging Face (Llama, Mistral, Qwen, ...): ``gate_proj.weight [F, hidden]``,
      ``up_proj.weight [F, hidden]``, ``down_proj.weight [hidden, F]`` (and their ``.bias``);
      gate and up are concatenated into ``w1`` (interleaved when ``interleaved=True``).
    - Megatron-Core: ``linear_fc1.weight [2F, hidden]`` (gate rows then up rows, as Megatron
      concatenates them) and ``linear_fc2.weight [hidden, F]`` (and ``.bias``); ``fc1`` / ``fc2``
      are taken too. TE's ``_extra_state`` entries are dropped.

    Args:
        hidden_size, ffn_hidden_size: hidden and F.
        activation, clamp_value, glu_linear_offset, gate_multiplier, down_multiplier, interleaved,
        recompute, fused: as ``fastglu.mlp``.
        bias: whether fc1 and fc2 have biases.
        fp8: None, or ``"blockwise"``: the block runs ``fastglu.mlp_fp8`` (its six GEMMs in FP8,
            DeepSeek-V3's recipe; recompute and fused do not apply).
        fp8_input_store: with fp8, False or ``"blockwise"`` (``fastglu.mlp_fp8``'s: h kept in
            e4m3 between the forward and the backward).
        device, dtype: of the parameters.

    With fp8, ``forward(x, weights, is_first_microbatch=...)`` caches the quantised weights as
    TransformerEngine's modules do: True quantises them (``fastglu.fp8_mlp.quantize_mlp_weights``)
    and keeps them for the calls after it, False uses the kept ones (the micro-batches before the
    next optimizer step; ``mlp_fp8`` raises ValueError if the weights have changed since), None
    (the default) quantises them in the call and keeps nothing.
    """

    def __init__(
        self,
        hidden_size,
        ffn_hidden_size,
        *,
        activation="silu",
        bias=False,
        clamp_value=None,
        glu_linear_offset=0.0,
        gate_multiplier=1.0,
        down_multiplier=1.0,
        interleaved=False,
        recompute=False,
        fused=None,
        fp8=None,
        fp8_input_store=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        for name, v in (("hidden_size", hidden_size), ("ffn_hidden_size", ffn_hidden_size)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"fastglu.GLUMLP: {name} must be a positive int, got {v!r}")
        glu_params(
            activation,
            clamp_value=clamp_value,
            glu_linear_offset=glu_linear_offset,
            gate_multiplier=gate_multiplier,
            down_multiplier=down_multiplier,
            interleaved=interleaved,
            fn="GLUMLP",
        )  # validate now, not at the first forward
        _path_code(fused)
        for name, v in (("bias", bias), ("recompute", recompute)):
            if not isinstance(v, bool):
                _fail(TypeError, "GLUMLP", f"{name} must be True or False, got {v!r}")
        if not (fp8 is None or fp8 == "blockwise"):
            _fail(ValueError, "GLUMLP", f"fp8 must be None or 'blockwise', got {fp8!r}")
        if not (fp8_input_store is False or fp8_input_store == "blockwise"):
            _fail(
                ValueError,
                "GLUMLP",
                f"fp8_input_store must be False or 'blockwise', got {fp8_input_store!r}",
            )
        if fp8 is None and fp8_input_store:
            _fail(ValueError, "GLUMLP", "fp8_input_store='blockwise' needs fp8='blockwise'")
        if fp8 is not None and (recompute or fused is not None):
            _fail(
                ValueError,
                "GLUMLP",
                "recompute and fused are fastglu.mlp's options; with fp8 the block runs "
                "fastglu.mlp_fp8",
            )
        # (float64 is held, as a float64 Hugging Face module's copy is, but runs only cast to
        # one of the block's dtypes)
        if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            _fail(TypeError, "GLUMLP", f"dtype must be None or a floating dtype, got {dtype!r}")
        self.hidden_size, self.ffn_hidden_size = hidden_size, ffn_hidden_size
        self.activation, self.clamp_value, self.glu_linear_offset = (
            activation,
            clamp_value,
            glu_linear_offset,
        )
        self.gate_multiplier, self.down_multiplier = gate_multiplier, down_multiplier
        self.interleaved, self.recompute, self.fused = bool(interleaved), bool(recompute), fused
        self.fp8, self.fp8_input_store = fp8, fp8_input_store
        self._fp8_weights = None  # quantize_mlp_weights' result (is_first_microbatch=True)
        kw = {"device": device, "dtype": dtype}
        self.w1 = torch.nn.Parameter(torch.empty(2 * ffn_hidden_size, hidden_size, **kw))
        self.w2 = torch.nn.Parameter(torch.empty(hidden_size, ffn_hidden_size, **kw))
        if bias:
            self.bias1 = torch.nn.Parameter(torch.empty(2 * ffn_hidden_size, **kw))
            self.bias2 = torch.nn.Parameter(torch.empty(hidden_size, **kw))
        else:
            self.register_parameter("bias1", None)
            self.register_parameter("bias2", None)
        self.reset_parameters()
        self.register_load_state_dict_pre_hook(GLUMLP._convert_checkpoint)

    def reset_parameters(self):
        """``nn.Linear``'s initialisation for fc1 and fc2 (weights and biases)."""
        for w, b in ((self.w1, self.bias1), (self.w2, self.bias2)):
            torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
            if b is not None:
                bound = 1 / math.sqrt(w.shape[1]) if w.shape[1] > 0 else 0
                torch.nn.init.uniform_(b, -bound, bound)

    def forward(self, x, weights=None, *, is_first_microbatch=None):
        """``x [..., hidden]`` (2D or 3D), optional per-token ``weights`` -> ``[..., hidden]``.
        is_first_microbatch: with fp8, True / False / None (the class docstring); without it,
        None (it caches nothing)."""
        if self.fp8 is not None:
            return self._forward_fp8(x, weights, is_first_microbatch)
        if is_first_microbatch is not None:
            _fail(
                ValueError,
                "GLUMLP",
                "is_first_microbatch caches the FP8 weights: it needs fp8='blockwise'",
            )
        return mlp(
            x,
            self.w1,
            self.w2,
            **self._block_options(weights),
            recompute=self.recompute,
            fused=self.fused,
        )

    def _block_options(self, weights):
        """The keyword arguments fastglu.mlp and fastglu.mlp_fp8 share."""
        return dict(
            activation=self.activation,
            bias1=self.bias1,
            bias2=self.bias2,
            weights=weights,
            clamp_value=self.clamp_value,
            glu_linear_offset=self.glu_linear_offset,
            gate_multiplier=self.gate_multiplier,
            down_multiplier=self.down_multiplier,
            interleaved=self.interleaved,
        )

    def _apply(self, fn, *args, **kwargs):
        # .to() / .cuda() / .half() replace the parameters' data without a version change: the kept
        # FP8 weights would be stale, so they go (the next is_first_microbatch=True makes them)
        self._fp8_weights = None
        return super()._apply(fn, *args, **kwargs)

    def _forward_fp8(self, x, weights, is_first_microbatch):
        if not (is_first_microbatch is None or isinstance(is_first_microbatch, bool)):
            _fail(
                TypeError,
                "GLUMLP",
                f"is_first_microbatch must be None, True or False, got {is_first_microbatch!r}",
            )
        q = None
        if is_first_microbatch:
            self._fp8_weights = q = fp8_mlp.quantize_mlp_weights(self.w1, self.w2)
        elif is_first_microbatch is False:
            q = self._fp8_weights
            if q is None:
                _fail(
                    RuntimeError,
                    "GLUMLP",
                    "is_first_microbatch=False with no weights kept: the first micro-batch of "
                    "the step passes True",
                )
        else:
            self._fp8_weights = None
        return fp8_mlp.mlp_fp8(
            x,
            self.w1,
            self.w2,
            **self._block_options(weights),
            recipe=self.fp8,
            quantized=q,
            fp8_input_store=self.fp8_input_store,
        )

    def _fc1(self, gate, up):
        return _interleave(gate, up) if self.interleaved else torch.cat((gate, up), dim=0)

    def _convert_checkpoint(self, state_dict, prefix, *_):
        """load_state_dict pre-hook: Hugging Face's and Megatron's keys into w1 / w2 / bias1 / bias2.
        A checkpoint that holds one of them in two forms (e.g. ``w1`` and ``gate_proj.weight``, or
        ``linear_fc1.weight`` and ``fc1.weight``) is refused (ValueError naming both keys), not
        resolved by an order of precedence."""
        source = {t: prefix + t for t in ("w1", "w2", "bias1", "bias2") if prefix + t in state_dict}

        def pop(name):
            return state_dict.pop(prefix + name, None)

        def put(target, value, key):
            if target in source:
                raise ValueError(
                    f"fastglu.GLUMLP: the checkpoint holds {source[target]} and {prefix + key}, "
                    f"two forms of {prefix + target}; keep one"
                )
            source[target] = prefix + key
            state_dict[prefix + target] = value

        for kind, target in (("weight", ("w1", "w2")), ("bias", ("bias1", "bias2"))):
            gate, up, down = (
                pop(f"gate_proj.{kind}"),
                pop(f"up_proj.{kind}"),
                pop(f"down_proj.{kind}"),
            )
            if (gate is None) != (up is None):
                raise ValueError(
                    f"fastglu.GLUMLP: the checkpoint has {prefix}gate_proj.{kind} or "
                    f"{prefix}up_proj.{kind} without the other"
                )
            if gate is not None:
                put(target[0], self._fc1(gate, up), f"gate_proj.{kind}")
            if down is not None:
                put(target[1], down, f"down_proj.{kind}")
            for fc1, fc2 in (("linear_fc1", "linear_fc2"), ("fc1", "fc2")):
                w = pop(f"{fc1}.{kind}")
                if w is not None:
                    F = w.shape[0] // 2
                    put(
                        target[0],
                        self._fc1(w[:F], w[F:]) if self.interleaved else w,
                        f"{fc1}.{kind}",
                    )
                w = pop(f"{fc2}.{kind}")
                if w is not None:
                    put(target[1], w, f"{fc2}.{kind}")
        for fc in ("linear_fc1", "linear_fc2", "fc1", "fc2"):
            pop(f"{fc}._extra_state")

    @classmethod
    def from_hf(cls, module, *, activation="silu", **options):
        """A GLUMLP holding a copy of a Hugging Face MLP's ``gate_proj`` / ``up_proj`` /
        ``down_proj`` (``nn.Linear`` each; a bias if they have one), on their device and dtype."""
        gate = module.gate_proj
        m = cls(
            gate.in_features,
            gate.out_features,
            activation=activation,
            bias=gate.bias is not None,
            device=gate.weight.device,
            dtype=gate.weight.dtype,
            **options,
        )
        m.load_state_dict(
            {
                k: v.detach()
                for k, v in module.state_dict().items()
                if k.split(".")[0] in ("gate_proj", "up_proj", "down_proj")
            }
        )
        return m

    def extra_repr(self) -> str:
        opts = [
            f"hidden_size={self.hidden_size}",
            f"ffn_hidden_size={self.ffn_hidden_size}",
            f"activation={self.activation!r}",
            f"bias={self.bias1 is not None}",
        ]
        opts += _changed_options(
            self,
            ("clamp_value", None),
            ("glu_linear_offset", 0.0),
            ("gate_multiplier", 1.0),
            ("down_multiplier", 1.0),
            ("interleaved", False),
            ("recompute", False),
            ("fused", None),
            ("fp8", None),
            ("fp8_input_store", False),
        )
        return ", ".join(opts)
