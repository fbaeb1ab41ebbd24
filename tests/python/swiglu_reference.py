"""The float64 SwiGLU reference and the error measures the pytest files share (imported by name:
pytest puts tests/python on sys.path)."""

import torch
import torch.nn.functional as F_


def ref_fwd(x):
    g, u = x.double().chunk(2, -1)
    return F_.silu(g) * u


def ref_bwd(dy, x):
    g, u = x.double().chunk(2, -1)
    d = dy.double()
    s = torch.sigmoid(g)
    return torch.cat((d * s * (1 + g * (1 - s)) * u, d * g * s), -1)


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    return float("inf") if err != err else err  # NaN (an unwritten sentinel) never passes


def close(got, ref, tol, extra=0.0):
    """||got - ref|| <= tol ||ref|| + sqrt(n) * the dtype's subnormal spacing: the house's relative
    bound, plus the absolute rounding of values stored below the dtype's normal range (a y of
    -9.4e-6 in fp16 is a subnormal, rounded to a multiple of 2^-24: alone in a one-element output
    its relative rounding reaches 2.4e-3, over fp16's 1e-3)."""
    step = torch.finfo(got.dtype).smallest_normal * torch.finfo(got.dtype).eps
    a, b = got.double().cpu().reshape(-1), ref.double().cpu().reshape(-1)
    return ((a - b).norm() <= tol * b.norm() + b.numel() ** 0.5 * step + extra).item()
