"""fastglu: gated-linear-unit activations (SwiGLU, GeGLU, quick-GeGLU) for LLM training.

A C library (CUDA kernels and a C CPU backend behind one C API, ``include/fastglu.h``) bound to
PyTorch. Public API:

- ``fastglu.swiglu(x)``: autograd-aware SwiGLU on the Megatron layout ``[..., 2F]`` -> ``[..., F]``.
- ``fastglu.bias_swiglu_impl(...)``: Megatron-Core's signature, as a drop-in.
- ``fastglu.ops``: the op layer without autograd (``swiglu_fwd`` / ``swiglu_bwd``, ``glu_fwd`` /
  ``glu_bwd``, ``glu_params``).
- The gated-linear-unit family (``functional.py``): ``fastglu.glu(x, activation="silu"|"gelu_tanh"|
  "quick_gelu", bias=, weights=, clamp_value=, glu_linear_offset=, gate_multiplier=,
  down_multiplier=, interleaved=, fp8_input_store=, in_place=)``; ``fastglu.silu_mul(gate, up)``
  and ``fastglu.glu_mul(gate, up, activation)`` for two tensors (Liger-Kernel / Hugging Face);
  Megatron-Core's ``weighted_bias_swiglu_impl``, ``bias_geglu_impl``,
  ``weighted_bias_quick_geglu_impl`` (and ``bias_swiglu_impl`` with bias and clamp_value).
- ``fastglu.modules``: ``SwiGLU``, ``GeGLU``, ``QuickGeGLU``, ``FastGLUActivation`` (nn.Module forms).
- ``fastglu.megatron.apply()`` / ``undo()``: route Megatron-Core's fused activations to fastglu.
- ``fastglu.linear(x, w, bias=None)`` and ``fastglu.linear_glu(x, w1, bias=None, activation=...,
  return_preact=True)``: fc1 with the GLU in the GEMM's epilogue (``gemm.py``).
- ``fastglu.mlp(x, w1, w2, activation=..., bias1=, bias2=, weights=, recompute=, fused=)``: the gated
  MLP block fc1 -> GLU -> fc2 as one autograd op (``mlp_block.py``); ``fastglu.modules.GLUMLP`` its module
  (``fp8="blockwise"``: on ``fastglu.mlp_fp8``).
- ``fastglu.mlp_fp8(x, w1, w2, activation=..., bias1=, bias2=, weights=, gemm=None)``: the same
  block with FP8 GEMMs (DeepSeek-V3's blockwise recipe, ``torch._scaled_mm``; ``fp8_mlp.py``).
- ``fastglu.cuda_available()``: whether the CUDA backend was built and a GPU is usable;
  ``fastglu.cuda_built()``: whether it was built.

Modules, each importing only those below it (``tests/python/test_layering.py`` checks it):

- ``megatron.py`` (Megatron-Core routing): on ``functional`` and ``megatron_mlp``;
- ``modules.py`` (nn.Modules, ``GLUMLP`` among them): on ``functional``, ``mlp_block`` and
  ``fp8_mlp``;
- ``fp8_mlp.py``: ``fastglu.mlp_fp8``, on ``fp8``, ``gemm``, ``mlp_block`` (its checks) and ``ops``;
- ``mlp_block.py``: ``fastglu.mlp``, on ``gemm``, ``library`` and ``ops``;
- ``gemm.py``: ``fastglu.linear`` / ``linear_glu`` / ``linear_dglu_bwd`` and their torch.library ops,
  on ``library`` and ``ops``;
- ``functional.py``: ``GLUFunction`` (the one autograd Function of the family) and the public
  functions, on ``library`` and ``ops``;
- ``library.py``: the torch.library ops (``fastglu::swiglu_fwd`` ..., ``fastglu::glu_fwd`` ...), their
  fakes, autograd and DTensor rules, on ``ops``;
- ``ops.py``: argument checks, output allocation and the ``_C`` launch of every kernel (SwiGLU is
  the family's SiLU member: ``ops.SILU``), on ``_C``.
"""

import warnings as _warnings

with _warnings.catch_warnings():
    # torch warns "Failed to initialize NumPy" on import when numpy is absent; fastglu uses no numpy,
    # so importing fastglu (and torch through it) stays silent. torch still raises where a numpy
    # conversion is asked for.
    _warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
    import torch as _torch

try:
    from . import _C
except ImportError as _e:
    if "libcudart" not in str(_e):
        raise
    # The portable wheel's libfastglu loads libcudart.so.13 from the nvidia-cuda-runtime wheel.
    raise ImportError(
        f"fastglu: {_e}; install the CUDA runtime it needs: "
        "pip install 'nvidia-cuda-runtime>=13.0,<14'"
    ) from _e
from . import fp8, megatron, modules, ops
from .fp8_mlp import mlp_fp8
from .functional import (
    GLUFunction,
    SwiGLUFunction,
    bias_geglu_impl,
    bias_swiglu_impl,
    glu,
    glu_mul,
    silu_mul,
    swiglu,
    weighted_bias_quick_geglu_impl,
    weighted_bias_swiglu_impl,
)
from .gemm import linear, linear_dglu_bwd, linear_glu
from .mlp_block import mlp

# The fp8 copy of fp8_input_store overflows as the installed torch's float8_e4m3fn cast does
# (saturating at +-448 from torch 2.12 on, NaN before), so that it equals Megatron's .to(float8).
_C.set_fp8_saturate(_torch.tensor([1e4]).to(_torch.float8_e4m3fn).view(_torch.uint8).item() == 0x7E)

_v = _C.version()
__version__ = f"{_v // 10000}.{_v // 100 % 100}.{_v % 100}"


def cuda_available() -> bool:
    """True if libfastglu was built with its CUDA backend and a CUDA device is usable."""
    return _C.cuda_available()


def cuda_built() -> bool:
    """True if libfastglu was built with its CUDA backend (whether or not a GPU is present)."""
    return _C.cuda_built()


__all__ = [
    "swiglu",
    "bias_swiglu_impl",
    "SwiGLUFunction",
    "ops",
    "cuda_available",
    "cuda_built",
    "__version__",
    "glu",
    "glu_mul",
    "silu_mul",
    "GLUFunction",
    "weighted_bias_swiglu_impl",
    "bias_geglu_impl",
    "weighted_bias_quick_geglu_impl",
    "megatron",
    "modules",
    "linear",
    "linear_glu",
    "linear_dglu_bwd",
    "mlp",
    "fp8",
    "mlp_fp8",
]
