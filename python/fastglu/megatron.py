"""Route Megatron-Core's fused gated activations to fastglu: ``apply()`` and ``undo()``.

Megatron-Core's MLP (``megatron/core/transformer/mlp.py``) calls, with ``bias_activation_fusion``:

- ``bias_swiglu_impl(input, bias, fp8_input_store, cpu_offload_input)`` (SwiGLU),
- ``weighted_bias_swiglu_impl(input, bias, weights, fp8_input_store)`` (SwiGLU with per-token probs),
- ``bias_geglu_impl(input, bias)`` (GeGLU, tanh approximation),
- ``weighted_bias_quick_geglu_impl(input, bias, weights, fp8_input_store, glu_linear_offset,
  clamp_value)`` (GPT-OSS's quick-GeGLU),

names it imported from ``megatron.core.fusions.fused_bias_swiglu`` / ``fused_bias_geglu`` when it
was imported, so replacing them in the fusions modules alone would not reach it. ``apply()``
replaces each name in every module that holds one (the two fusions modules, ``transformer.mlp``,
``transformer.moe.experts``, ``transformer.moe.shared_experts``) with fastglu's function of the same
signature (``fastglu.functional``'s). It is idempotent; ``undo()``
puts the originals back. Modules that cannot be imported (an older or trimmed megatron-core) are
skipped; names a module lacks are skipped.

Usage, before building the model::

    import fastglu.megatron
    fastglu.megatron.apply()     # -> the list of "module.name" it replaced
    ...
    fastglu.megatron.undo()

Supported Megatron-Core: ``SUPPORTED`` (0.16 to 0.19, the ``megatron`` extra's range); CI runs the
adapter's tests against the oldest and the newest release of that range. ``apply()`` warns when the
installed release is outside it (the routing itself is tried all the same).

Differences from Megatron-Core 0.19 (all in fastglu's favour or documented in ``ops.py``):
the bias gradient comes back as ``[2F]`` from the kernel; ``clamp_value`` <= 0 means no clamp;
``fp8_input_store`` also takes ``"per_row"`` / ``"per_tensor"`` / ``"blockwise"``; the glu_linear_offset stays fp32.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings

from .functional import (
    bias_geglu_impl,
    bias_swiglu_impl,
    weighted_bias_quick_geglu_impl,
    weighted_bias_swiglu_impl,
)

# The replacement for each Megatron function name.
REPLACEMENTS = {
    "bias_swiglu_impl": bias_swiglu_impl,
    "weighted_bias_swiglu_impl": weighted_bias_swiglu_impl,
    "bias_geglu_impl": bias_geglu_impl,
    "weighted_bias_quick_geglu_impl": weighted_bias_quick_geglu_impl,
}

# The modules of megatron-core that define or import those names.
TARGETS = {
    "megatron.core.fusions.fused_bias_swiglu": ("bias_swiglu_impl", "weighted_bias_swiglu_impl"),
    "megatron.core.fusions.fused_bias_geglu": ("bias_geglu_impl", "weighted_bias_quick_geglu_impl"),
    "megatron.core.transformer.mlp": (
        "bias_swiglu_impl",
        "weighted_bias_swiglu_impl",
        "bias_geglu_impl",
        "weighted_bias_quick_geglu_impl",
    ),
    "megatron.core.transformer.moe.experts": (
        "weighted_bias_swiglu_impl",
        "weighted_bias_quick_geglu_impl",
    ),
    "megatron.core.transformer.moe.shared_experts": ("bias_swiglu_impl", "bias_geglu_impl"),
}

# The Megatron-Core releases the adapter is tested against: (major, minor) from SUPPORTED[0] up to,
# not including, SUPPORTED[1]. pyproject.toml's megatron extra says the same.
SUPPORTED = ((0, 16), (0, 20))

_originals: dict = {}  # (module name, attribute) -> the function apply() replaced


def _module(name):
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    try:
        return importlib.import_module(name)
    except Exception:  # not installed, or a module of megatron-core whose own imports fail here
        return None


def apply(mlp: bool = False) -> list:
    """Replace Megatron-Core's fused gated activations with fastglu's, in every module of
    ``TARGETS`` that can be imported. Idempotent: a second call changes nothing.

    With ``mlp=True`` also route Megatron's ``MLP.forward`` to ``fastglu.mlp`` (the whole block
    fc1 -> GLU -> fc2, TP = 1 and TP > 1 through Megatron's mappings, with or without sequence
    parallelism); what it does not cover keeps Megatron's forward, warned once per reason
    (``fastglu.megatron_mlp``).

    Returns:
        The ``"module.name"`` entries now routed to fastglu (also those a previous call routed).

    Raises:
        ImportError: none of the target modules can be imported (megatron-core is not installed).
    """
    routed = []
    found = False
    for modname, names in TARGETS.items():
        mod = _module(modname)
        if mod is None:
            continue
        found = True
        for name in names:
            if not hasattr(mod, name):
                continue
            new = REPLACEMENTS[name]
            current = getattr(mod, name)
            if current is not new:
                _originals[(modname, name)] = current
                setattr(mod, name, new)
            routed.append(f"{modname}.{name}")
    if not found:
        raise ImportError(
            "fastglu.megatron.apply: megatron-core is not importable (none of "
            f"{', '.join(TARGETS)} could be imported)"
        )
    _check_version()
    if mlp:
        from . import megatron_mlp

        routed.append(megatron_mlp.route())
    return routed


def megatron_version():
    """The imported megatron-core's version string (``megatron.core.package_info.__version__``), or
    None where it has none."""
    info = _module("megatron.core.package_info")
    version = getattr(info, "__version__", None)
    return version if isinstance(version, str) else None


def _check_version():
    version = megatron_version()
    m = re.match(r"(\d+)\.(\d+)", version or "")
    if m is None:
        return
    lo, hi = SUPPORTED
    if not lo <= (int(m[1]), int(m[2])) < hi:
        warnings.warn(
            f"fastglu.megatron.apply: megatron-core {version} is outside the tested range "
            f'>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]} (pip install "fastglu[megatron]"); the '
            "functions were routed, but check the model's outputs",
            UserWarning,
            stacklevel=3,
        )


def undo() -> list:
    """Put back every function ``apply()`` replaced (where it is still fastglu's). Idempotent.

    Returns:
        The ``"module.name"`` entries restored.
    """
    restored = []
    for (modname, name), original in list(_originals.items()):
        mod = sys.modules.get(modname)
        if mod is not None and getattr(mod, name, None) is REPLACEMENTS[name]:
            setattr(mod, name, original)
            restored.append(f"{modname}.{name}")
        del _originals[(modname, name)]
    mlp_module = sys.modules.get(__package__ + ".megatron_mlp")
    if mlp_module is not None:
        restored += mlp_module.unroute()
    return restored


def is_applied() -> bool:
    """True while some Megatron function is routed to fastglu by ``apply()``."""
    return any(getattr(sys.modules.get(m), n, None) is REPLACEMENTS[n] for (m, n) in _originals)


__all__ = [
    "apply",
    "undo",
    "is_applied",
    "megatron_version",
    "REPLACEMENTS",
    "TARGETS",
    "SUPPORTED",
]
