"""64-bit offsets in the variant kernels (issue 6): inputs of more than 2^31 elements and near 2^32,
forward and backward with bias and per-token weights (the tile kernel with its reductions) and the
interleaved layout (the flat kernels), rows at the start, middle and end checked against the CPU
backend, dbias against a float64 sum of the input gradient, dweights row by row. GPU only."""

import pytest
import torch

from fastglu.ops import glu_bwd, glu_fwd

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


@cuda_only
@pytest.mark.parametrize(
    "input_elements", [2**31 + 2**21, 2**32 - 2**15], ids=["just-above-2^31", "near-2^32"]
)
@pytest.mark.parametrize("variant", ["bias_weights_clamp", "interleaved"])
def test_glu_more_than_2_31_elements(input_elements, variant):
    F = 16384
    T = -(-input_elements // (2 * F))
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16, generator=g)
    assert x.numel() > 2**31
    dy = torch.randn(T, F, device="cuda", dtype=torch.bfloat16, generator=g)
    if variant == "interleaved":
        kw = dict(activation="silu", interleaved=True)
    else:
        kw = dict(
            activation="quick_gelu",
            clamp_value=3.0,
            glu_linear_offset=1.0,
            bias=torch.randn(2 * F, device="cuda", dtype=torch.bfloat16, generator=g),
            weights=torch.rand(T, 1, device="cuda", dtype=torch.float32, generator=g),
        )
    y = glu_fwd(x, **kw)
    grads = glu_bwd(dy, x, **kw)
    for rows in (slice(0, 2), slice(T // 2, T // 2 + 1), slice(T - 3, T)):
        ckw = {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        if "weights" in ckw:
            ckw["weights"] = ckw["weights"][rows]
        xc, dyc = x[rows].cpu(), dy[rows].cpu()
        assert rel_err(y[rows].cpu(), glu_fwd(xc, **ckw)) <= 1e-2
        want = glu_bwd(dyc, xc, **ckw)
        assert rel_err(grads.dx[rows].cpu(), want.dx) <= 1e-2
        if variant != "interleaved":
            assert rel_err(grads.dweights[rows].cpu(), want.dweights) <= 1e-2
    if variant != "interleaved":
        # dbias = sum over tokens of the unmasked input gradient; the clamp masks dx where the gate
        # is above c or |up| above c, so compare on the columns' sums where nothing was masked
        # instead: recompute dbias with the clamp off (the bias gradient does not depend on the mask).
        assert grads.dbias.shape == (2 * F,)
        kw_noclamp = dict(kw, clamp_value=None)
        x_clamped = torch.cat((x[:, :F].clamp(max=3.0), x[:, F:].clamp(-3.0, 3.0)), 1)
        g2 = glu_bwd(dy, x_clamped, **kw_noclamp)
        want_dbias = g2.dx.sum(0, dtype=torch.float64)
        assert rel_err(grads.dbias, want_dbias) <= 1e-2
