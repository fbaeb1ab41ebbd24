"""fastglu.fp8.quantize_fp8 (the C library's quantiser of a plain operand: x and dO in 1 x 128
blocks with their transposed copies, weights in 128 x 128 blocks): against the float64 recipe
(scales bit for bit, codes within one e4m3 step), bit for bit against the torch-ops implementation
of fastglu.fp8_mlp (quantize_1x128_torch / quantize_128x128_torch) on the CPU and, where a GPU is
present, on CUDA; odd shapes, strided views, every dtype; the op's fake implementation and
torch.compile; bad input. Fresh random inputs each run."""

import math

import pytest
import torch

import fastglu
from fastglu import fp8
from fastglu.fp8_mlp import (
    quantize_1x128,
    quantize_1x128_torch,
    quantize_128x128,
    quantize_128x128_torch,
)

DEVICES = ["cpu"] + (["cuda"] if fastglu.cuda_available() else [])
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
SHAPES = [(1, 1), (1, 3), (3, 1408), (257, 2880), (130, 3420), (129, 5632), (8193, 3)]


def rand(shape, dtype, device, specials=False):
    scale = 2.0 ** torch.randint(-8, 8, ()).item()
    x = torch.randn(shape) * scale
    if specials and x.numel() > 4:
        flat = x.view(-1)
        idx = torch.randperm(flat.numel())[:4]
        flat[idx] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0])
        if x.shape[0] > 128 and x.shape[1] > 128:
            x[128:256, 128:256] = 0.0  # an all-zero block
    return x.to(dtype).to(device)


def codes(t):
    """e4m3 codes as bytes on the CPU, every NaN (S.1111.111) as +NaN: the recipe leaves a NaN's
    sign unspecified (the CPU keeps the quotient's, the GPU's conversion gives +NaN)."""
    u = t.contiguous().view(torch.uint8).cpu()
    return torch.where((u & 0x7F) == 0x7F, torch.full_like(u, 0x7F), u)


def same_bits(a, b):
    return a.shape == b.shape and torch.equal(codes(a), codes(b))


def scale_bits(t):
    """fp32 scales as their bits on the CPU, every NaN as one NaN (a NaN block's scale is NaN; its
    sign and payload are not part of the recipe)."""
    u = t.cpu().view(torch.int32)
    return torch.where(torch.isnan(t.cpu()), torch.full_like(u, 0x7FC00000), u)


def same_scales(a, b):
    return (
        a.shape == b.shape
        and a.stride() == b.stride()
        and torch.equal(scale_bits(a), scale_bits(b))
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_bitwise_equal_to_torch_ops(device, dtype, shape):
    x = rand(shape, dtype, device, specials=True)
    q = fp8.quantize_fp8(x, columnwise=True)
    # the reference in torch ops on the CPU, whose division is correctly rounded (fastglu.fp8_mlp's
    # torch path on CUDA is checked against it by test_torch_path_on_cuda)
    xc = x.cpu()
    d, s = quantize_1x128_torch(xc)
    dt, st = quantize_1x128_torch(xc.t())
    assert same_bits(q.data, d) and same_scales(q.scale, s)
    assert same_bits(q.data_t, dt) and same_scales(q.scale_t, st)
    w = fp8.quantize_fp8(x, block="128x128", columnwise=True)
    d, s = quantize_128x128_torch(xc)
    dt, st = quantize_128x128_torch(xc.t())
    assert same_bits(w.data, d) and same_scales(w.scale, s)
    assert same_bits(w.data_t, dt) and same_scales(w.scale_t, st)
    # the wrappers of fastglu.fp8_mlp: a transposed view read as it lies
    a, b = quantize_1x128(x.t())
    assert same_bits(a, q.data_t) and same_scales(b, q.scale_t)
    a, b = quantize_128x128(x.t())
    assert same_bits(a, w.data_t) and same_scales(b, w.scale_t)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (1, 3), (1, 130), (2, 3), (3, 12), (130, 140)])
def test_no_element_past_a_row_reaches_a_scale(device, dtype, shape):
    """x a view of a buffer whose other elements are the dtype's largest value, its rows on 32
    bytes: a row's last, partial 8-element chunk must be read element by element, by every kernel
    (both copies, the row-wise copy alone, the transposed copy alone; 1 x 128 and 128 x 128). The
    16-byte path is open for one row, and for any rows on 16 bytes when no row-wise copy is asked;
    ptxas of CUDA 13.0 reverses a whole-chunk test written on the clamped element count, which
    src/quant_fp8_cuda.cu's whole_chunk avoids."""
    R, C = shape
    width = (C + 7) // 8 * 8 + 8
    big = torch.full((R, width), torch.finfo(dtype).max, dtype=dtype, device=device)
    x = rand(shape, dtype, device)
    big[:, :C] = x
    v = big[:, :C]
    xc = x.cpu()
    refs = {
        "1x128": (quantize_1x128_torch(xc), quantize_1x128_torch(xc.t())),
        "128x128": (quantize_128x128_torch(xc), quantize_128x128_torch(xc.t())),
    }
    for block, ((d, s), (dt, st)) in refs.items():
        for rowwise, columnwise in ((True, True), (True, False), (False, True)):
            q = fp8.quantize_fp8(v, block=block, rowwise=rowwise, columnwise=columnwise)
            what = (block, rowwise, columnwise)
            if rowwise:
                assert same_bits(q.data, d) and same_scales(q.scale, s), what
            if columnwise:
                assert same_bits(q.data_t, dt) and same_scales(q.scale_t, st), what


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs a CUDA GPU")
def test_torch_path_on_cuda():
    """fastglu.fp8_mlp's torch-ops recipe (the reference, and the path of other dtypes) on CUDA
    equals the CPU's: its amax / 448 divides by a tensor (a Python scalar divisor becomes a product
    by the reciprocal on CUDA, one ulp off for about half the blocks)."""
    x = rand((257, 1408), torch.bfloat16, "cuda")
    for fn in (quantize_1x128_torch, quantize_128x128_torch):
        a, b = fn(x), fn(x.cpu())
        assert same_bits(a[0], b[0])
        assert torch.equal(scale_bits(a[1]), scale_bits(b[1]))


def e4m3_step(v):
    a = v.abs().clamp(min=2.0**-6)
    return torch.exp2(torch.floor(torch.log2(a)) - 3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block", ["1x128", "128x128"])
@pytest.mark.parametrize("pow2", [False, True])
def test_against_float64_recipe(device, dtype, block, pow2):
    """scale = amax / 448 (fp32, correctly rounded: the float64 quotient rounded once, exact for a
    divisor of 7 2^6), a power of two above it with pow2; codes within one e4m3 step of x / scale
    in float64; both copies."""
    R, C = 257, 1408
    x = rand((R, C), dtype, device)
    q = fp8.quantize_fp8(x, block=block, columnwise=True, pow2_scales=pow2)
    x64 = x.double().cpu()
    for data, scale, xx in ((q.data, q.scale, x64), (q.data_t, q.scale_t, x64.t())):
        rows, cols = xx.shape
        if block == "1x128":
            nb = math.ceil(cols / 128)
            pad = torch.zeros(rows, nb * 128 - cols, dtype=torch.float64)
            amax = torch.cat([xx.abs(), pad], 1).view(rows, nb, 128).amax(-1)
            spread = amax.repeat_interleave(128, 1)[:, :cols]
        else:
            nr, nc = math.ceil(rows / 128), math.ceil(cols / 128)
            p = torch.zeros(nr * 128, nc * 128, dtype=torch.float64)
            p[:rows, :cols] = xx.abs()
            amax = p.view(nr, 128, nc, 128).amax((1, 3))
            spread = amax.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
        want = (amax / 448).float()
        want = torch.where(amax == 0, torch.ones_like(want), want)
        if pow2:
            want = torch.exp2(torch.ceil(torch.log2(want.double()))).float()
        assert torch.equal(scale.cpu(), want)
        s = (spread / 448).float().double()
        s = torch.where(spread == 0, torch.ones_like(s), s)
        if pow2:
            s = torch.exp2(torch.ceil(torch.log2(s)))
        t = (xx / s).clamp(-448, 448)
        got = data.cpu().double()
        assert ((got - t).abs() <= e4m3_step(t)).all()


@pytest.mark.parametrize("device", DEVICES)
def test_strided_views(device):
    base = rand((300, 4200), torch.bfloat16, device)
    for x in (base[:, :2880], base[1:258, 8:1416], base[::2, :1408]):
        q = fp8.quantize_fp8(x, columnwise=True)
        d, s = quantize_1x128_torch(x.cpu())
        dt, st = quantize_1x128_torch(x.cpu().t())
        assert same_bits(q.data, d) and same_scales(q.scale, s)
        assert same_bits(q.data_t, dt) and same_scales(q.scale_t, st)
    # a column stride other than 1 is copied first
    x = base[:, :256].t()
    q = fp8.quantize_fp8(x)
    d, s = quantize_1x128_torch(x.cpu())
    assert same_bits(q.data, d) and same_scales(q.scale, s)


@pytest.mark.parametrize("device", DEVICES)
def test_copies_and_layouts(device):
    x = rand((260, 300), torch.float16, device)
    row = fp8.quantize_fp8(x, block="128x128")
    assert row.data_t is None and row.scale_t is None
    assert row.scale.shape == (3, 3) and row.scale.stride() == (4, 1)  # padded to 4
    col = fp8.quantize_fp8(x, block="128x128", rowwise=False, columnwise=True, pad_scales=False)
    assert col.data is None and col.scale is None
    assert same_bits(col.data_t, row.data.t()) and col.scale_t.stride() == (3, 1)
    assert torch.equal(col.scale_t, row.scale.t())
    rm = fp8.quantize_fp8(x, scale_layout="row_major", pad_scales=False)
    mn = fp8.quantize_fp8(x)
    assert mn.scale.stride() == (1, 260) and rm.scale.is_contiguous()
    assert torch.equal(rm.scale, mn.scale) and same_bits(rm.data, mn.data)


def test_empty():
    x = torch.empty((0, 5), dtype=torch.bfloat16)
    q = fp8.quantize_fp8(x, columnwise=True)
    assert q.data.shape == (0, 5) and q.data_t.shape == (5, 0) and q.scale.shape == (0, 1)


def test_bad_input():
    x = torch.randn(4, 8)
    with pytest.raises(TypeError, match="x.dtype = torch.float64"):
        fp8.quantize_fp8(x.double())
    with pytest.raises(ValueError, match="2-D"):
        fp8.quantize_fp8(x.view(2, 2, 8))
    with pytest.raises(ValueError, match="nothing to compute"):
        fp8.quantize_fp8(x, rowwise=False)
    with pytest.raises(ValueError, match="block = '1x64'"):
        fp8.quantize_fp8(x, block="1x64")
    with pytest.raises(ValueError, match="scale_layout"):
        fp8.quantize_fp8(x, scale_layout="col_major")
    with pytest.raises(TypeError, match="x must be a tensor"):
        fp8.quantize_fp8([1.0, 2.0])
    with pytest.raises(ValueError, match="code"):
        torch.ops.fastglu.quantize_fp8(x, 1, 0, False, True, False, True)  # per-tensor: not here


def test_opcheck_and_compile():
    x = torch.randn(130, 260, dtype=torch.bfloat16)
    for args in ((x, 0, 0, False, True, True, True), (x, 2, 1, True, True, True, True)):
        torch.library.opcheck(torch.ops.fastglu.quantize_fp8.default, args)

    def f(t):
        q = fp8.quantize_fp8(t, columnwise=True)
        return q.data.float() * q.scale.repeat_interleave(128, 1)[:, : t.shape[1]], q.data_t

    eager = f(x)
    compiled = torch.compile(f, fullgraph=True, backend="eager")(x)
    assert torch.equal(eager[0], compiled[0]) and same_bits(eager[1], compiled[1])


def test_compiles_with_an_input_that_requires_grad():
    """AOT autograd traces the op's backward when its input requires grad, even where the loss does
    not use its outputs: the compiled function runs as the eager one does."""
    x = torch.randn(4, 256, requires_grad=True)

    def f(t):
        return t * 2, fp8.quantize_fp8(t).scale

    y, s = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    y.sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 2.0))
    assert torch.equal(s, fp8.quantize_fp8(x.detach()).scale)
    with pytest.raises(RuntimeError, match="no gradient"):
        fp8.quantize_fp8(x).scale.sum().backward()


def test_negative_view_is_read_as_its_values():
    x = torch.tensor([[1.0, -2.0] * 64])
    neg = torch._neg_view(x)
    assert neg.is_neg()
    assert same_bits(fp8.quantize_fp8(neg).data, fp8.quantize_fp8(-x).data)


def test_wrappers_refuse_bad_input():
    with pytest.raises(TypeError, match="quantize_1x128: t must be a torch.Tensor"):
        quantize_1x128(None)
    with pytest.raises(ValueError, match="quantize_1x128: t must be 2-D"):
        quantize_1x128(torch.randn(3))
    with pytest.raises(TypeError, match="quantize_128x128: w.dtype = torch.bool"):
        quantize_128x128(torch.zeros(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="quantize_128x128: w must be 2-D"):
        quantize_128x128(torch.randn(2, 3, 4))
