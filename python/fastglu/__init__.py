"""fastglu: gated-linear-unit activations (SwiGLU) for LLM training.

A C library (CUDA kernels and a C CPU backend behind one C API, ``include/fastglu.h``) bound to
PyTorch. Public API:

- ``fastglu.swiglu(x)``: autograd-aware SwiGLU on the Megatron layout ``[..., 2F]`` -> ``[..., F]``.
- ``fastglu.bias_swiglu_impl(...)``: Megatron-Core's signature, as a drop-in.
- ``fastglu.ops.swiglu_fwd / swiglu_bwd``: the kernels without autograd.
- ``fastglu.cuda_available()``: whether the CUDA backend was built and a GPU is usable;
  ``fastglu.cuda_built()``: whether it was built.
"""

from . import _C, ops
from .functional import SwiGLUFunction, bias_swiglu_impl, swiglu

_v = _C.version()
__version__ = f"{_v // 10000}.{_v // 100 % 100}.{_v % 100}"


def cuda_available() -> bool:
    """True if libfastglu was built with its CUDA backend and a CUDA device is usable."""
    return _C.cuda_available()


def cuda_built() -> bool:
    """True if libfastglu was built with its CUDA backend (whether or not a GPU is present)."""
    return _C.cuda_built()


__all__ = ["swiglu", "bias_swiglu_impl", "SwiGLUFunction", "ops", "cuda_available", "cuda_built", "__version__"]
