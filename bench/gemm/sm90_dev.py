"""Development check and benchmark of the sm_90a GEMM (src/gemm_sm90.cu) through ctypes.

  python3 bench/gemm/sm90_dev.py --lib build-dev/libgemm_sm90.so [--glu-lib build-dev/libglu.so]
      (the library built with -DFASTGLU_GEMM_DEV_HOOKS, as scripts/device_gemm.sh does; --glu-lib:
      src/glu_cuda.cu + glu_common.c + common.c for sm_90, the standalone activation)
      [--out DIR] [--skip-correct] [--skip-time] [--group-m 8,16] [--tiles 0x0,192x192] [--cluster 0,2]
      [--shapes 16384x2880x2880] [--rounds 4] [--fused-only] [--alt-lib NAME=PATH ...]
      [--dglu]

The fused fc1 + GLU is timed with h stored (sm90_fused) and without (sm90_fused_y: y only, as
fastglu.linear_glu(..., return_preact=False) and quack's fused fc1 run); --alt-lib times another
build's fused kernel beside (NAME_fused, NAME_fused_y), e.g. one compiled with -DGEMM_GLU_DEFER=0.
Each row keeps every round's time (rounds_ms); the summary prints each provider's spread.

--cluster 0,2: also check and time the plain GEMM and the TMA-store fc1 + SPLIT GLU with clusters of
two blocks sharing B by multicast (fastglu_gemm_sm90_set_cluster; providers *_cl2).

--dglu: the fc2 dgrad + dGLU (EPI_DGLU) only. Checks: dh elementwise against float64 (dY = d_out @
w2 exactly, dh = dY * D with D the family's derivative), y against the float64 family math, both
bitwise equal to the earlier epilogue (fastglu_gemm_sm90_set_dglu_variant(1)), NaN-filled outputs,
padding untouched, the TMA-store and register paths, the MN-major dgrad alone against float64,
determinism. A/B in rounds: cuBLAS d_out @ w2, unfused (cuBLAS + the installed fastglu's glu_fwd and
glu_bwd, else torch's SwiGLU), the fused kernel, the earlier epilogue, the MN-major dgrad with the
plain epilogue; the budget is cuBLAS + 0.2 (unfused - cuBLAS).

Correctness: fresh random inputs each run, outputs pre-filled with NaN. The GEMM against
x.double() @ w.double().T (+ bias): every element within 2^-8 (bf16) / 2^-11 (fp16) of |ref| plus
K * 2^-22 * (|x| @ |w|^T) (fp32 accumulation), and the relative norm under the house tolerance
(bf16 1e-2, fp16 1e-3). The GLU's h the same way; its y against the family's math in float64 applied
to the kernel's rounded h (elementwise within one rounding of the dtype plus 1e-5 |ref| for the
fp32 math), and, where the standalone library is given, bitwise against fastglu_glu_fwd_cuda on h.
Determinism: two runs bitwise equal. Timing: triton.testing.do_bench medians (rep=100) over 4
rounds, median of the rounds; each round rotates the providers' order and every other round reverses
it, so that no provider always follows the same one (a kernel timed right after a lighter one, or
first, ran up to 3% faster than the same kernel timed after a heavy GEMM).
"""

import argparse
import ctypes
import json
import os
import sys

import torch
import torch.nn.functional as F

BF16, FP16, FP32, FP8_E4M3 = 2, 1, 0, 3
SILU, GELU_TANH, QUICK_GELU = 0, 1, 2
SPLIT, INTERLEAVED = 0, 1


class GluParams(ctypes.Structure):
    _fields_ = [
        ("activation", ctypes.c_int),
        ("layout", ctypes.c_int),
        ("clamp_value", ctypes.c_float),
        ("glu_linear_offset", ctypes.c_float),
        ("gate_multiplier", ctypes.c_float),
        ("down_multiplier", ctypes.c_float),
    ]


class Problem(ctypes.Structure):
    _fields_ = [
        ("glu", ctypes.POINTER(GluParams)),
        ("x", ctypes.c_void_p),
        ("x_row_stride", ctypes.c_int64),
        ("w", ctypes.c_void_p),
        ("w_row_stride", ctypes.c_int64),
        ("bias", ctypes.c_void_p),
        ("weights", ctypes.c_void_p),
        ("weights_dtype", ctypes.c_int),
        ("weights_stride", ctypes.c_int64),
        ("h", ctypes.c_void_p),
        ("h_row_stride", ctypes.c_int64),
        ("y", ctypes.c_void_p),
        ("y_row_stride", ctypes.c_int64),
        ("dglu", ctypes.c_int),
        ("dh", ctypes.c_void_p),
        ("dh_row_stride", ctypes.c_int64),
        ("dweights", ctypes.c_void_p),
        ("dweights_stride", ctypes.c_int64),
        ("M", ctypes.c_int64),
        ("N", ctypes.c_int64),
        ("K", ctypes.c_int64),
        ("dtype", ctypes.c_int),
    ]


class Tensor(ctypes.Structure):
    """fastglu_tensor: data (NULL: absent), dtype, row stride."""

    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("row_stride", ctypes.c_int64)]


class GluOperands(ctypes.Structure):
    """fastglu_glu_operands (include/fastglu.h)."""

    _fields_ = [
        ("gate", Tensor),
        ("up", Tensor),
        ("bias", Tensor),
        ("weights", Tensor),
        ("scale_inv", Tensor),
        ("scale_1x128", ctypes.c_int),
    ]


def dt_code(dt):
    return {torch.bfloat16: BF16, torch.float16: FP16, torch.float32: FP32}[dt]


def ptr(t):
    return None if t is None else t.data_ptr()


class Lib:
    def __init__(self, path, glu_path=None):
        self.lib = ctypes.CDLL(path)
        self.lib.fastglu_gemm_sm90_supported.argtypes = [ctypes.POINTER(Problem), ctypes.c_int]
        self.lib.fastglu_gemm_sm90_launch.argtypes = [ctypes.POINTER(Problem), ctypes.c_void_p]
        self.lib.fastglu_last_error_message.restype = ctypes.c_char_p
        self.glu = None
        if glu_path:
            self.glu = ctypes.CDLL(glu_path)
            self.glu.fastglu_glu_fwd_cuda.argtypes = [
                ctypes.POINTER(GluParams),
                ctypes.POINTER(GluOperands),
                Tensor,
                Tensor,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_void_p,
            ]

    def problem(self, x, w, h, y=None, bias=None, params=None, weights=None, F_=None):
        p = Problem()
        self._keep = params
        p.glu = ctypes.pointer(params) if params is not None else None
        p.x, p.x_row_stride = ptr(x), x.stride(0)
        p.w, p.w_row_stride = ptr(w), w.stride(0)
        p.bias = ptr(bias)
        p.weights = ptr(weights)
        p.weights_dtype = dt_code(weights.dtype) if weights is not None else FP32
        p.weights_stride = weights.stride(0) if weights is not None else 0
        p.h, p.h_row_stride = ptr(h), (h.stride(0) if h is not None else 0)
        p.y, p.y_row_stride = ptr(y), (y.stride(0) if y is not None else 0)
        p.M, p.K = x.shape[0], x.shape[1]
        p.N = F_ if params is not None else w.shape[0]
        p.dtype = dt_code(x.dtype)
        return p

    def run(self, p, check=True):
        if check:
            assert (
                self.lib.fastglu_gemm_sm90_supported(ctypes.byref(p), torch.cuda.current_device())
                == 1
            ), "not supported"
        st = self.lib.fastglu_gemm_sm90_launch(
            ctypes.byref(p), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        )
        if st != 0:
            raise RuntimeError(self.lib.fastglu_last_error_message().decode())

    def glu_fwd(self, params, h, F_, y, weights=None):
        """fastglu_glu_fwd_cuda (include/fastglu.h's descriptors) on h's gate and up."""
        dt = dt_code(h.dtype)
        o = GluOperands()
        o.gate = Tensor(h.data_ptr(), dt, h.stride(0))
        if params.layout == SPLIT:
            o.up = Tensor(h.data_ptr() + F_ * h.element_size(), dt, h.stride(0))
        if weights is not None:
            o.weights = Tensor(weights.data_ptr(), dt_code(weights.dtype), weights.stride(0))
        st = self.glu.fastglu_glu_fwd_cuda(
            ctypes.byref(params),
            ctypes.byref(o),
            Tensor(y.data_ptr(), dt, y.stride(0)),
            Tensor(None, FP8_E4M3, 0),
            h.shape[0],
            F_,
            torch.cuda.current_stream().cuda_stream,
        )
        assert st == 0, "glu_fwd failed"


def gemm_ref_check(name, out, ref, bound_scale, dtype, K):
    tol_rel = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    o = out.double()
    err = (o - ref).abs()
    bound = tol_rel * ref.abs() + K * 2.0**-22 * bound_scale + 1e-30
    ok_el = bool(torch.isfinite(o).all()) and bool((err <= bound).all())
    rel = (torch.linalg.norm(o - ref) / torch.linalg.norm(ref)).item()
    ok = ok_el and rel <= (1e-2 if dtype == torch.bfloat16 else 1e-3)
    worst = (err / bound).max().item() if torch.isfinite(o).all() else float("nan")
    return ok, f"{name}: rel {rel:.2e} worst err/bound {worst:.3f} {'ok' if ok else 'FAIL'}"


def act_ref(z, act):
    if act == SILU:
        return z * torch.sigmoid(z)
    if act == QUICK_GELU:
        return z * torch.sigmoid(1.702 * z)
    return 0.5 * z * (1.0 + torch.tanh(0.79788456 * z * (1.0 + 0.044715 * z * z)))


def glu_ref(hd, F_, params, wts):
    """The family's forward in float64 from h (bias already inside), split or interleaved."""
    if params.layout == SPLIT:
        g, u = hd[:, :F_], hd[:, F_ : 2 * F_]
    else:
        g, u = hd[:, 0::2], hd[:, 1::2]
    c = params.clamp_value
    if c > 0:
        g = torch.clamp(g, max=c)
        u = torch.clamp(u, min=-c, max=c)
    a = act_ref(params.gate_multiplier * g, params.activation)
    y = params.down_multiplier * a * (u + params.glu_linear_offset)
    if wts is not None:
        y = y * wts.double()[:, None]
    return y


def check_all(lib, log):
    fails, res = 0, []
    # (tma_store, bm, bn, cluster); bm 192: the plain GEMM's three-consumer 192 x 192 tile
    passes = [(1, 0, 0, 0), (0, 0, 0, 0), (1, 128, 192, 0), (0, 0, 192, 0), (1, 0, 256, 0)]
    passes += [(1, 192, 0, 0)]
    if 2 in CLUSTERS:  # the cluster-of-2 kernels: plain (both epilogues) and TMA-store SPLIT
        passes += [(1, 0, 0, 2), (0, 0, 0, 2), (1, 128, 192, 2)]
    for ts, bm, bn, cl in passes:
        lib.lib.fastglu_gemm_sm90_set_tma_store(ts)
        lib.lib.fastglu_gemm_sm90_set_bm(bm)
        lib.lib.fastglu_gemm_sm90_set_bn(bn)
        lib.lib.fastglu_gemm_sm90_set_cluster(cl)
        tag = (
            f"[tma_store={ts} tile={bm or 'auto'}x{bn or 'auto'}{f' cluster={cl}' if cl else ''}] "
        )
        f, r = check_all_once(lib, lambda s: log(tag + s), plain_only=bool(bm or bn))
        fails += f
        res += [tag + x for x in r]
    lib.lib.fastglu_gemm_sm90_set_tma_store(1)
    lib.lib.fastglu_gemm_sm90_set_bm(0)
    lib.lib.fastglu_gemm_sm90_set_bn(0)
    lib.lib.fastglu_gemm_sm90_set_cluster(0)
    return fails, res


def check_all_once(lib, log, plain_only=False):
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    dev = "cuda"
    fails = 0
    results = []

    def rec(ok, msg):
        nonlocal fails
        fails += not ok
        results.append(msg)
        log(msg)

    # plain GEMM
    for dtype in (torch.bfloat16, torch.float16):
        for M, K, N, with_bias in [
            (1, 4096, 1408, False),
            (3, 2880, 5632, True),
            (8193, 2880, 2880, False),
            (129, 1408, 264, True),
            (300, 72, 4104, False),
            (8192, 4096, 8192, False),
        ]:
            x = torch.randn(M, K, device=dev, dtype=dtype)
            w = torch.randn(N, K, device=dev, dtype=dtype) * K**-0.5
            b = torch.randn(N, device=dev, dtype=dtype) if with_bias else None
            out = torch.full((M, N), float("nan"), device=dev, dtype=dtype)
            lib.run(lib.problem(x, w, out, bias=b))
            torch.cuda.synchronize()
            ref = x.double() @ w.double().T
            if b is not None:
                ref += b.double()
            scale = x.double().abs() @ w.double().abs().T
            ok, msg = gemm_ref_check(
                f"gemm {str(dtype)[6:]} M={M} K={K} N={N} bias={with_bias}",
                out,
                ref,
                scale,
                dtype,
                K,
            )
            rec(ok, msg)
            del ref, scale
    # determinism
    M, K, N = 8192, 4096, 8192
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(N, K, device=dev, dtype=torch.bfloat16)
    o1 = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
    o2 = torch.full((M, N), float("nan"), device=dev, dtype=torch.bfloat16)
    lib.run(lib.problem(x, w, o1))
    lib.run(lib.problem(x, w, o2))
    torch.cuda.synchronize()
    rec(
        torch.equal(o1, o2),
        f"determinism gemm 8192x4096x8192: {'ok' if torch.equal(o1, o2) else 'FAIL'}",
    )
    del x, w, o1, o2
    if plain_only:
        return fails, results

    # GLU
    cases = []
    for dtype in (torch.bfloat16, torch.float16):
        for layout in (SPLIT, INTERLEAVED):
            cases += [
                (dtype, layout, SILU, 0.0, 0.0, 1.0, 1.0, False, None, True, (1, 2880, 1408)),
                (
                    dtype,
                    layout,
                    GELU_TANH,
                    0.0,
                    0.0,
                    1.0,
                    1.0,
                    True,
                    None,
                    True,
                    (8193, 2880, 2880),
                ),
                (
                    dtype,
                    layout,
                    QUICK_GELU,
                    7.0,
                    1.0,
                    1.0,
                    1.0,
                    True,
                    torch.float32,
                    True,
                    (3, 4096, 5632),
                ),
                (
                    dtype,
                    layout,
                    SILU,
                    7.0,
                    0.5,
                    0.5,
                    2.0,
                    True,
                    torch.bfloat16,
                    False,
                    (1000, 1408, 1408),
                ),
                (
                    dtype,
                    layout,
                    SILU,
                    0.0,
                    0.0,
                    1.0,
                    1.0,
                    False,
                    torch.float32,
                    True,
                    (4096, 4096, 1416),
                ),
                # K of one and three k-blocks over more tiles than blocks: the deferred
                # epilogue's steps left to after a short main loop and to the block's last tile
                (
                    dtype,
                    layout,
                    SILU,
                    0.0,
                    0.0,
                    1.0,
                    1.0,
                    True,
                    torch.float32,
                    True,
                    (4096, 64, 1024),
                ),
                (
                    dtype,
                    layout,
                    GELU_TANH,
                    0.0,
                    0.0,
                    1.0,
                    1.0,
                    False,
                    None,
                    False,
                    (4100, 192, 1408),
                ),
            ]
    for dtype, layout, act, clamp, off, gm, dm, with_bias, wdt, with_h, (M, K, F_) in cases:
        params = GluParams(act, layout, clamp, off, gm, dm)
        x = torch.randn(M, K, device=dev, dtype=dtype)
        w = torch.randn(2 * F_, K, device=dev, dtype=dtype) * K**-0.5
        b = torch.randn(2 * F_, device=dev, dtype=dtype) if with_bias else None
        wts = torch.rand(M, device=dev, dtype=wdt) if wdt is not None else None
        h = torch.full((M, 2 * F_), float("nan"), device=dev, dtype=dtype)
        y = torch.full((M, F_), float("nan"), device=dev, dtype=dtype)
        p = lib.problem(x, w, h if with_h else None, y=y, bias=b, params=params, weights=wts, F_=F_)
        lib.run(p)
        torch.cuda.synchronize()
        name = (
            f"glu {str(dtype)[6:]} {'split' if layout == SPLIT else 'inter'} act={act} c={clamp} o={off} "
            f"gm={gm} dm={dm} bias={with_bias} w={wdt and str(wdt)[6:]} h={with_h} M={M} K={K} F={F_}"
        )
        if with_h:
            ref = x.double() @ w.double().T
            if b is not None:
                ref += b.double()
            scale = x.double().abs() @ w.double().abs().T
            ok, msg = gemm_ref_check(name + " [h]", h, ref, scale, dtype, K)
            rec(ok, msg)
            hk = h
        else:
            # h not stored: recompute it with the kernel (deterministic) to check y
            hk = torch.full((M, 2 * F_), float("nan"), device=dev, dtype=dtype)
            y2 = torch.empty_like(y)
            lib.run(lib.problem(x, w, hk, y=y2, bias=b, params=params, weights=wts, F_=F_))
            torch.cuda.synchronize()
            rec(
                torch.equal(y, y2),
                name + f" [y without h == y with h]: {'ok' if torch.equal(y, y2) else 'FAIL'}",
            )
        yr = glu_ref(hk.double(), F_, params, wts)
        eps = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
        err = (y.double() - yr).abs()
        # the family's sigmoid flushes to 0 deep in the tail and fp16 y has subnormals: an absolute
        # floor of 2^-24 + 1e-6 max|y| (the bitwise comparison with the standalone kernel is exact)
        bound = (eps + 1e-5) * yr.abs() + 2.0**-24 + 1e-6 * yr.abs().max()
        fin = bool(torch.isfinite(y).all())
        ok = fin and bool((err <= bound).all())
        rec(
            ok,
            name
            + f" [y vs float64 family math]: worst {(err / bound).max().item() if fin else float('nan'):.3f} {'ok' if ok else 'FAIL'}",
        )
        if lib.glu is not None:
            ys = torch.full_like(y, float("nan"))
            lib.glu_fwd(params, hk, F_, ys, wts)
            torch.cuda.synchronize()
            same = torch.equal(y.view(torch.int16), ys.view(torch.int16))
            nd = (y.view(torch.int16) != ys.view(torch.int16)).sum().item()
            rec(
                same,
                name
                + f" [y bitwise == standalone fastglu_glu_fwd_cuda(h)]: {'ok' if same else f'FAIL ({nd} differ)'}",
            )
    # GLU determinism
    M, K, F_ = 8192, 4096, 8192
    params = GluParams(SILU, SPLIT, 0.0, 0.0, 1.0, 1.0)
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(2 * F_, K, device=dev, dtype=torch.bfloat16) * K**-0.5
    outs = []
    for _ in range(2):
        h = torch.full((M, 2 * F_), float("nan"), device=dev, dtype=torch.bfloat16)
        y = torch.full((M, F_), float("nan"), device=dev, dtype=torch.bfloat16)
        lib.run(lib.problem(x, w, h, y=y, params=params, F_=F_))
        outs.append((h, y))
    torch.cuda.synchronize()
    same = torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    rec(same, f"determinism glu 8192x4096 F=8192: {'ok' if same else 'FAIL'}")
    return fails, results


TILES = ((0, 0),)
CLUSTERS = (0,)
FUSED_ONLY = False
SHAPES = [
    (8192, 4096, 8192),
    (8192, 4096, 14336),
    (16384, 2880, 2880),
    (4096, 8192, 3584),
    (1024, 4096, 14336),
]


ROUNDS = 4
LAST_ROUNDS = {}


def time_rounds(provs, rounds=None):
    """Median over the rounds of each provider's do_bench median (ms). Round r starts at provider
    r and runs backwards when r is odd: each provider follows different ones. Each round's values
    stay in LAST_ROUNDS (the spread of a provider is read from them)."""
    import statistics

    import triton.testing as tt

    names = list(provs)
    meas = {n: [] for n in names}
    for r in range(rounds or ROUNDS):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in order[::-1] if r % 2 else order:
            meas[n].append(tt.do_bench(provs[n], rep=100, quantiles=[0.5, 0.2, 0.8])[0])
    LAST_ROUNDS.clear()
    LAST_ROUNDS.update(meas)
    return {n: statistics.median(v) for n, v in meas.items()}


def time_all(lib, log, group_ms, alts=()):
    dev = "cuda"
    dtype = torch.bfloat16
    rows = []
    for T, H, F_ in SHAPES if not FUSED_ONLY else ():
        for kind, (M, K, N) in (("fc1", (T, H, 2 * F_)), ("fc2", (T, F_, H))):
            x = torch.randn(M, K, device=dev, dtype=dtype)
            w = torch.randn(N, K, device=dev, dtype=dtype) * K**-0.5
            out = torch.empty(M, N, device=dev, dtype=dtype)
            p = lib.problem(x, w, out)
            provs = {"cublas": lambda: F.linear(x, w)}
            for vname, vlib in [("sm90", lib)] + list(alts):
                for g in group_ms:
                    for bm, bn in TILES if vlib is lib else ((0, 0),):
                        for cl in CLUSTERS if vlib is lib else (0,):

                            def mine(g=g, vlib=vlib, bm=bm, bn=bn, cl=cl):
                                vlib.lib.fastglu_gemm_sm90_set_group_m(g)
                                vlib.lib.fastglu_gemm_sm90_set_bm(bm)
                                vlib.lib.fastglu_gemm_sm90_set_bn(bn)
                                if vlib is lib:
                                    lib.lib.fastglu_gemm_sm90_set_cluster(cl)
                                vlib.run(p, check=False)

                            tile = f"_{bm or 'auto'}x{bn or 'auto'}" if bm or bn else ""
                            provs[f"{vname}_g{g}{tile}" + (f"_cl{cl}" if cl else "")] = mine
            res = time_rounds(provs)
            flop = 2.0 * M * N * K
            row = {
                "shape": f"{kind} T={T} H={H} F={F_}",
                "M": M,
                "K": K,
                "N": N,
                "ms": res,
                "tflops": {n: flop / (v * 1e-3) / 1e12 for n, v in res.items()},
            }
            row["ratio"] = {n: res["cublas"] / v for n, v in res.items() if n != "cublas"}
            rows.append(row)
            log(json.dumps(row))
            del x, w, out
    lib.lib.fastglu_gemm_sm90_set_group_m(0)
    lib.lib.fastglu_gemm_sm90_set_bn(0)
    lib.lib.fastglu_gemm_sm90_set_bm(0)
    lib.lib.fastglu_gemm_sm90_set_cluster(0)
    # fused fc1 + GLU vs cuBLAS fc1 + standalone activation
    fused = []
    for T, H, F_ in SHAPES:
        M, K = T, H
        x = torch.randn(M, K, device=dev, dtype=dtype)
        w = torch.randn(2 * F_, K, device=dev, dtype=dtype) * K**-0.5
        h = torch.empty(M, 2 * F_, device=dev, dtype=dtype)
        y = torch.empty(M, F_, device=dev, dtype=dtype)
        params = GluParams(SILU, SPLIT, 0.0, 0.0, 1.0, 1.0)
        p = lib.problem(x, w, h, y=y, params=params, F_=F_)
        pp = lib.problem(x, w, h)
        hc = F.linear(x, w)

        def fused_run(ts):
            lib.lib.fastglu_gemm_sm90_set_tma_store(ts)
            lib.run(p, check=False)

        provs = {
            "cublas_fc1": lambda: F.linear(x, w),
            "sm90_fused": lambda: fused_run(1),
            "sm90_plain_fc1": lambda: lib.run(pp, check=False),
            "sm90_fused_mmany": lambda: (
                lib.lib.fastglu_gemm_sm90_set_math_mode(0),
                lib.run(p, check=False),
                lib.lib.fastglu_gemm_sm90_set_math_mode(-1),
            ),
            "torch_act": lambda: F.silu(hc[:, :F_]) * hc[:, F_:],
        }
        # y only (fastglu.linear_glu(..., return_preact=False), quack's fused fc1 without h)
        p_y = lib.problem(x, w, None, y=y, params=params, F_=F_)
        provs["sm90_fused_y"] = lambda: lib.run(p_y, check=False)
        for vname, vlib in alts:
            provs[f"{vname}_fused"] = lambda vlib=vlib: vlib.run(p, check=False)
            provs[f"{vname}_fused_y"] = lambda vlib=vlib: vlib.run(p_y, check=False)
        for cl in CLUSTERS:
            if cl:
                provs[f"sm90_fused_cl{cl}"] = lambda cl=cl: (
                    lib.lib.fastglu_gemm_sm90_set_cluster(cl),
                    lib.run(p, check=False),
                    lib.lib.fastglu_gemm_sm90_set_cluster(0),
                )
        if lib.glu is not None:
            provs["fastglu_act"] = lambda: lib.glu_fwd(params, hc, F_, y)
        res = time_rounds(provs)
        act = res["fastglu_act"] if "fastglu_act" in res else res["torch_act"]
        row = {
            "shape": f"fc1+glu T={T} H={H} F={F_}",
            "ms": res,
            "rounds_ms": dict(LAST_ROUNDS),
            "budget_ms": res["cublas_fc1"] + 0.2 * act,
            "act_used": "fastglu" if "fastglu_act" in res else "torch",
        }
        row["fused_over_budget"] = res["sm90_fused"] / row["budget_ms"]
        fused.append(row)
        log(json.dumps(row))
        del x, w, h, y, hc
    return rows, fused


# ---- fc2 dgrad + dGLU (EPI_DGLU) -----------------------------------------------------------
# fastglu_gemm_sm90_set_dglu_variant: 0 the library's dGLU epilogue, 1 the earlier one (h loaded
# pair by pair, stored from registers), 2 the dgrad's MN-major main loop with the plain epilogue
# (dY rounded into dh's first F columns, no dGLU)
DGLU_NEW, DGLU_OLD, DGRAD_PLAIN = 0, 1, 2


def dglu_problem(lib, d_out, w2, h, dh, y, params, weights=None, dweights=None):
    p = Problem()
    lib._keep = params
    p.glu = ctypes.pointer(params)
    p.x, p.x_row_stride = ptr(d_out), d_out.stride(0)
    p.w, p.w_row_stride = ptr(w2), w2.stride(0)
    p.weights = ptr(weights)
    p.weights_dtype = dt_code(weights.dtype) if weights is not None else FP32
    p.weights_stride = weights.stride(0) if weights is not None else 0
    p.h, p.h_row_stride = ptr(h), h.stride(0)
    p.y, p.y_row_stride = ptr(y), (y.stride(0) if y is not None else 0)
    p.dglu = 1
    p.dh, p.dh_row_stride = ptr(dh), dh.stride(0)
    p.dweights = ptr(dweights)
    p.dweights_stride = dweights.stride(0) if dweights is not None else 0
    p.M, p.K, p.N = d_out.shape[0], d_out.shape[1], w2.shape[1]
    p.dtype = dt_code(d_out.dtype)
    return p


def dglu_run(lib, p, variant, check=True):
    lib.lib.fastglu_gemm_sm90_set_dglu_variant(variant)
    try:
        lib.run(p, check=check)
    finally:
        lib.lib.fastglu_gemm_sm90_set_dglu_variant(DGLU_NEW)


def padded(M, cols, pad, dtype, fill=float("nan")):
    """[M, cols] view of a [M, cols + pad] buffer filled with the sentinel"""
    return torch.full((M, cols + pad), fill, device="cuda", dtype=dtype)[:, :cols]


def dglu_ref(d_out, w2, h, F_, params, wts):
    """float64 (dh, y, D, S, dY): dh = dY * D with D the family's elementwise derivative of y(h) (y_j
    depends on gate j and up j only), dY = d_out @ w2 exactly; S = |d_out| @ |w2| for the fp32
    accumulation's bound."""
    dy = d_out.double() @ w2.double()
    h64 = h.double().clone().requires_grad_(True)
    y = glu_ref(h64, F_, params, wts)
    (D,) = torch.autograd.grad(y.sum(), h64)
    D = D.detach()
    dh = D * torch.cat([dy, dy], dim=1)
    S = d_out.double().abs() @ w2.double().abs()
    return dh, y.detach(), D, S, dy


def check_dglu(lib, log):
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    fails, results = 0, []

    def rec(ok, msg):
        nonlocal fails
        fails += not ok
        results.append(msg)
        log(msg)

    cases = []
    for dtype in (torch.bfloat16, torch.float16):
        cases += [
            # act, clamp, offset, m_g, m_d, weights dtype, y, (T, H, F), output padding
            (dtype, SILU, 7.0, 1.0, 1.0, 1.0, torch.float32, True, (130, 136, 136), 0),
            (dtype, SILU, 0.0, 0.0, 1.0, 1.0, None, True, (130, 136, 136), 2),
            (dtype, SILU, 0.0, 0.0, 1.0, 1.0, torch.bfloat16, False, (1000, 1408, 1416), 0),
            (dtype, GELU_TANH, 0.0, 0.0, 1.0, 1.0, None, True, (8193, 2880, 2880), 0),
            (dtype, QUICK_GELU, 7.0, 0.5, 0.5, 2.0, torch.float32, True, (3, 4096, 5632), 8),
            (dtype, SILU, 0.0, 0.0, 1.0, 1.0, None, True, (4096, 8192, 3584), 2),
        ]
    for dtype, act, clamp, off, gm, dm, wdt, with_y, (T, H, F_), pad in cases:
        params = GluParams(act, SPLIT, clamp, off, gm, dm)
        d_out = torch.randn(T, H, device="cuda", dtype=dtype)
        w2 = (torch.randn(H, F_, device="cuda") * H**-0.5).to(dtype)
        h = (torch.randn(T, 2 * F_, device="cuda") * 2).to(dtype)
        wts = (torch.rand(T, device="cuda") + 0.1).to(wdt) if wdt is not None else None
        outs = {}
        for variant in (DGLU_NEW, DGLU_OLD):
            dh = padded(T, 2 * F_, pad, dtype)
            y = padded(T, F_, pad, dtype) if with_y else None
            dglu_run(lib, dglu_problem(lib, d_out, w2, h, dh, y, params, wts), variant)
            outs[variant] = (dh, y)
        torch.cuda.synchronize()
        dh, y = outs[DGLU_NEW]
        name = (
            f"dglu {str(dtype)[6:]} act={act} c={clamp} o={off} gm={gm} dm={dm} "
            f"w={wdt and str(wdt)[6:]} y={with_y} T={T} H={H} F={F_} pad={pad}"
        )
        dh_ref, y_ref, D, S, dY = dglu_ref(d_out, w2, h, F_, params, wts)
        eps = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
        tol = 1e-2 if dtype == torch.bfloat16 else 1e-3
        # dY as the contract defines it: the sum rounded to the dtype (through fp32, as the
        # kernel's fp32 sum is); the kernel's fp32 sum lies within K 2^-22 S of the exact one, so
        # its rounded value within dYe, the rounding's spread over that interval (0 where both
        # ends round alike)
        acc = H * 2.0**-22 * S
        dYr = dY.float().to(dtype).double()
        dYe = (dY + acc).float().to(dtype).double() - (dY - acc).float().to(dtype).double()
        dh_ref = D * torch.cat([dYr, dYr], dim=1)
        # dh = dY * D: dY's error (dYe), D's the fp32 math's (1e-5 |ref|, and 1e-5 max|D| |dY|
        # where D's terms cancel: the gate's derivative crosses zero), the store one rounding
        # (eps |ref|); 2^-24: fp16 subnormals
        dYY = torch.cat([dYr, dYr], dim=1).abs()
        bound = (
            (eps + 1e-5) * dh_ref.abs()
            + D.abs() * torch.cat([dYe, dYe], dim=1)
            + 1e-5 * D.abs().max() * dYY
            + 2.0**-24
        )
        err = (dh.double() - dh_ref).abs()
        fin = bool(torch.isfinite(dh).all())
        relv = (torch.linalg.norm(dh.double() - dh_ref) / torch.linalg.norm(dh_ref)).item()
        ok = fin and bool((err <= bound).all()) and relv <= tol
        worst = (err / bound).max().item() if fin else float("nan")
        rec(
            ok,
            name + f" [dh vs float64]: rel {relv:.2e} worst {worst:.3f} {'ok' if ok else 'FAIL'}",
        )
        if with_y:
            err = (y.double() - y_ref).abs()
            bound = (eps + 1e-5) * y_ref.abs() + 2.0**-24 + 1e-6 * y_ref.abs().max()
            fin = bool(torch.isfinite(y).all())
            ok = fin and bool((err <= bound).all())
            worst = (err / bound).max().item() if fin else float("nan")
            rec(ok, name + f" [y vs float64]: worst {worst:.3f} {'ok' if ok else 'FAIL'}")
        odh, oy = outs[DGLU_OLD]
        same = torch.equal(dh.view(torch.int16), odh.view(torch.int16))
        if with_y:
            same = same and torch.equal(y.view(torch.int16), oy.view(torch.int16))
        rec(same, name + f" [dh, y bitwise == the earlier epilogue]: {'ok' if same else 'FAIL'}")
        if wts is not None:  # dweights (the row-owner kernel): float64, dh the same bits
            dw = torch.full((T,), float("nan"), device="cuda", dtype=wts.dtype)
            dh2 = padded(T, 2 * F_, pad, dtype)
            y2 = padded(T, F_, pad, dtype) if with_y else None
            dglu_run(lib, dglu_problem(lib, d_out, w2, h, dh2, y2, params, wts, dw), DGLU_NEW)
            dw2 = torch.full_like(dw, float("nan"))
            dglu_run(lib, dglu_problem(lib, d_out, w2, h, dh2, y2, params, wts, dw2), DGLU_NEW)
            torch.cuda.synchronize()
            yw = glu_ref(h.double(), F_, params, None)
            dw_ref = (yw * dYr).sum(1)
            fin = bool(torch.isfinite(dw).all())
            relw = (torch.linalg.norm(dw.double() - dw_ref) / torch.linalg.norm(dw_ref)).item()
            # and dY's error (dYe) where the sum cancels
            tolw = (
                max(tol, 1e-2 if wts.dtype == torch.bfloat16 else 1e-5)
                + (torch.linalg.norm((yw.abs() * dYe).sum(1)) / torch.linalg.norm(dw_ref)).item()
            )
            ok = fin and relw <= tolw
            rec(ok, name + f" [dweights vs float64]: rel {relw:.2e} {'ok' if ok else 'FAIL'}")
            same = torch.equal(dh2.view(torch.int16), dh.view(torch.int16)) and torch.equal(
                dw.view(torch.uint8), dw2.view(torch.uint8)
            )
            if with_y:
                same = same and torch.equal(y2.view(torch.int16), y.view(torch.int16))
            rec(
                same,
                name + f" [with dweights: dh, y bitwise, dweights deterministic]: "
                f"{'ok' if same else 'FAIL'}",
            )
        if pad:  # the padding columns keep the sentinel
            kept = bool(torch.isnan(dh.as_strided((T, pad), (dh.stride(0), 1), 2 * F_)).all())
            rec(kept, name + f" [dh's padding untouched]: {'ok' if kept else 'FAIL'}")
        del dh_ref, y_ref, D, S, dY, dYr, dYe, dYY, acc, outs
    # the MN-major main loop alone (dY rounded into dh's first F columns)
    for dtype in (torch.bfloat16, torch.float16):
        T, H, F_ = 1000, 1408, 1416
        params = GluParams(SILU, SPLIT, 0.0, 0.0, 1.0, 1.0)
        d_out = torch.randn(T, H, device="cuda", dtype=dtype)
        w2 = (torch.randn(H, F_, device="cuda") * H**-0.5).to(dtype)
        h = torch.randn(T, 2 * F_, device="cuda", dtype=dtype)
        dh = padded(T, 2 * F_, 0, dtype)
        dglu_run(lib, dglu_problem(lib, d_out, w2, h, dh, None, params), DGRAD_PLAIN)
        torch.cuda.synchronize()
        ref = d_out.double() @ w2.double()
        scale = d_out.double().abs() @ w2.double().abs()
        ok, msg = gemm_ref_check(
            f"dgrad plain {str(dtype)[6:]} T={T} H={H} F={F_}", dh[:, :F_], ref, scale, dtype, H
        )
        rec(ok, msg)
    # determinism
    T, H, F_ = 8192, 4096, 8192
    params = GluParams(SILU, SPLIT, 0.0, 0.0, 1.0, 1.0)
    d_out = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
    w2 = (torch.randn(H, F_, device="cuda") * H**-0.5).to(torch.bfloat16)
    h = torch.randn(T, 2 * F_, device="cuda", dtype=torch.bfloat16)
    o = []
    for _ in range(2):
        dh, y = padded(T, 2 * F_, 0, torch.bfloat16), padded(T, F_, 0, torch.bfloat16)
        dglu_run(lib, dglu_problem(lib, d_out, w2, h, dh, y, params), DGLU_NEW)
        o.append((dh, y))
    torch.cuda.synchronize()
    same = torch.equal(o[0][0], o[1][0]) and torch.equal(o[0][1], o[1][1])
    rec(same, f"determinism dglu {T}x{H} F={F_}: {'ok' if same else 'FAIL'}")
    return fails, results


def unfused_provider(d_out, w2, h):
    """cuBLAS dgrad, then the standalone GLU forward (y) and backward (dh): the installed fastglu
    when it imports, else torch's SwiGLU (labelled so)."""
    try:
        import fastglu.ops as fo

        def run():
            dy = d_out @ w2
            fo.glu_fwd(h)
            fo.glu_bwd(dy, h)

        return "unfused", run
    except ImportError:
        F_ = w2.shape[1]

        def run():
            dy = (d_out @ w2).float()
            g, u = h[:, :F_].float(), h[:, F_:].float()
            s = torch.sigmoid(g)
            a = g * s
            (a * u).to(h.dtype)
            torch.cat([dy * u * s * (1 + g * (1 - s)), dy * a], 1).to(h.dtype)

        return "unfused_torch", run


def time_dglu(lib, log, alts=()):
    rows = []
    for T, H, F_ in SHAPES:
        dtype = torch.bfloat16
        params = GluParams(SILU, SPLIT, 0.0, 0.0, 1.0, 1.0)
        d_out = torch.randn(T, H, device="cuda", dtype=dtype)
        w2 = (torch.randn(H, F_, device="cuda") * H**-0.5).to(dtype)
        h = torch.randn(T, 2 * F_, device="cuda", dtype=dtype)
        dh = torch.empty(T, 2 * F_, device="cuda", dtype=dtype)
        y = torch.empty(T, F_, device="cuda", dtype=dtype)
        p = dglu_problem(lib, d_out, w2, h, dh, y, params)
        wts = torch.rand(T, device="cuda") + 0.1
        dw = torch.empty(T, device="cuda")
        pw = dglu_problem(lib, d_out, w2, h, dh, y, params, wts, dw)
        un_name, un = unfused_provider(d_out, w2, h)
        provs = {
            "cublas": lambda: d_out @ w2,
            un_name: un,
            "fused": lambda: dglu_run(lib, p, DGLU_NEW, check=False),
            "fused_old": lambda: dglu_run(lib, p, DGLU_OLD, check=False),
            "dgrad_plain": lambda: dglu_run(lib, p, DGRAD_PLAIN, check=False),
            "fused_dweights": lambda: dglu_run(lib, pw, DGLU_NEW, check=False),
        }
        for vname, vlib in alts:
            provs[f"{vname}_fused"] = lambda vlib=vlib: dglu_run(vlib, p, DGLU_NEW, check=False)
        res = time_rounds(provs)
        bwd = res[un_name] - res["cublas"]
        row = {
            "shape": f"fc2 dgrad+dglu T={T} H={H} F={F_}",
            "ms": res,
            "budget_ms": res["cublas"] + 0.2 * bwd,
            "unfused": un_name,
            "rounds_ms": dict(LAST_ROUNDS),
        }
        row["fused_over_budget"] = res["fused"] / row["budget_ms"]
        row["fused_over_unfused"] = res["fused"] / res[un_name]
        row["old_over_fused"] = res["fused_old"] / res["fused"]
        rows.append(row)
        log(json.dumps(row))
        del d_out, w2, h, dh, y, wts, dw
    return rows


def small(lib):
    """A plain and a GLU problem with edges in every direction, and a fused fc1 and an fc2 dgrad +
    dGLU of several tiles a block, for compute-sanitizer."""
    dt = torch.bfloat16
    x = torch.randn(130, 136, device="cuda", dtype=dt)
    w = torch.randn(264, 136, device="cuda", dtype=dt)
    out = torch.empty(130, 264, device="cuda", dtype=dt)
    for cl in sorted(set(CLUSTERS) | {0}):  # the build's cluster size, and any other asked for
        lib.lib.fastglu_gemm_sm90_set_cluster(cl)
        for bm in (128, 192):  # the two- and three-consumer tiles
            lib.lib.fastglu_gemm_sm90_set_bm(bm)
            lib.run(lib.problem(x, w, out, bias=torch.randn(264, device="cuda", dtype=dt)))
        lib.lib.fastglu_gemm_sm90_set_bm(0)
        for layout in (SPLIT, INTERLEAVED):
            params = GluParams(SILU, layout, 7.0, 1.0, 1.0, 1.0)
            w2 = torch.randn(272, 136, device="cuda", dtype=dt)
            h = torch.empty(130, 272, device="cuda", dtype=dt)
            y = torch.empty(130, 136, device="cuda", dtype=dt)
            lib.run(
                lib.problem(
                    x, w2, h, y=y, params=params, weights=torch.rand(130, device="cuda"), F_=136
                )
            )
    lib.lib.fastglu_gemm_sm90_set_cluster(0)
    # the TMA-store SPLIT fc1 + GLU over more tiles than blocks (9 x 16 row x column tiles): the
    # deferred epilogue's steps inside the next tile's main loop (K = 576, 9 k-blocks: one a
    # k-block; K = 1216, 19: one every two) and after a short one (K = 136, 3 k-blocks)
    for K in (576, 1216, 136):
        params = GluParams(SILU, SPLIT, 0.0, 0.0, 1.0, 1.0)
        xs = torch.randn(1100, K, device="cuda", dtype=dt)
        w1 = torch.randn(4096, K, device="cuda", dtype=dt) * K**-0.5
        h = torch.empty(1100, 4096, device="cuda", dtype=dt)
        y = torch.empty(1100, 2048, device="cuda", dtype=dt)
        lib.run(lib.problem(xs, w1, h, y=y, params=params, F_=2048))
        lib.run(lib.problem(xs, w1, None, y=y, params=params, F_=2048))
    # the dgrad + dGLU: TMA-store (aligned) and register (padded by 2) epilogues, with dweights
    # (row-owner order), the earlier epilogue, the MN-major dgrad alone
    params = GluParams(SILU, SPLIT, 7.0, 1.0, 1.0, 1.0)
    w2 = torch.randn(136, 136, device="cuda", dtype=dt)
    h = torch.randn(130, 272, device="cuda", dtype=dt)
    for pad, variant, with_dw in (
        (0, DGLU_NEW, False),
        (2, DGLU_NEW, False),
        (0, DGLU_NEW, True),
        (2, DGLU_NEW, True),
        (0, DGLU_OLD, False),
        (0, DGRAD_PLAIN, False),
    ):
        dh, y = padded(130, 272, pad, dt), padded(130, 136, pad, dt)
        wts = torch.rand(130, device="cuda")
        dw = torch.empty(130, device="cuda") if with_dw else None
        dglu_run(lib, dglu_problem(lib, x, w2, h, dh, y, params, wts, dw), variant)
    # the TMA-store dgrad + dGLU over more tiles than blocks (9 x 16 row x column tiles): the
    # deferred epilogue's steps inside the next tile's main loop (K = 576: one a k-block; K = 1216:
    # one every two) and after a short one (K = 136)
    for K in (576, 1216, 136):
        d_out = torch.randn(1100, K, device="cuda", dtype=dt)
        w2 = torch.randn(K, 4096, device="cuda", dtype=dt) * K**-0.5
        h = torch.randn(1100, 8192, device="cuda", dtype=dt)
        dh, y = torch.empty_like(h), torch.empty(1100, 4096, device="cuda", dtype=dt)
        dglu_run(lib, dglu_problem(lib, d_out, w2, h, dh, y, params, None), DGLU_NEW)
    torch.cuda.synchronize()
    print("small: done")
    return 0


def alt_libs(args):
    """--alt-lib NAME=PATH: the other builds to time beside the library, as (name, Lib) pairs."""
    return [(name, Lib(path)) for name, _, path in (a.partition("=") for a in args.alt_lib)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--glu-lib")
    ap.add_argument("--out", default=".")
    ap.add_argument("--skip-correct", action="store_true")
    ap.add_argument("--skip-time", action="store_true")
    ap.add_argument(
        "--group-m",
        default="0",
        help="tile-order groups to time: 0 (the library's choice), 8, 16, ...",
    )
    ap.add_argument(
        "--alt-lib", action="append", default=[], help="NAME=PATH: another build, timed beside"
    )
    ap.add_argument(
        "--tiles",
        default="0x0",
        help="tiles to time, BMxBN: 0x0 (the library's choice), 128x256, 128x192, 192x192",
    )
    ap.add_argument("--fused-only", action="store_true", help="time the fused fc1 + GLU only")
    ap.add_argument("--rounds", type=int, default=4, help="timing rounds (median of their medians)")
    ap.add_argument(
        "--shapes",
        help="the (T, H, F) to time, TxHxF comma-separated, e.g. 16384x2880x2880 (default: all five)",
    )
    ap.add_argument(
        "--cluster",
        default="0",
        help="blocks per cluster to check and time: 0 (the build's), 1, 2 (B multicast), e.g. 0,2",
    )
    ap.add_argument(
        "--small", action="store_true", help="a few small problems only (for compute-sanitizer)"
    )
    ap.add_argument(
        "--dglu",
        action="store_true",
        help="the fc2 dgrad + dGLU only: its checks and the A/B (cuBLAS, unfused, the fused "
        "kernel, the earlier epilogue, the MN-major dgrad without epilogue)",
    )
    args = ap.parse_args()
    lib = Lib(args.lib, args.glu_lib)
    logf = open(os.path.join(args.out, "sm90_dev.log"), "a")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    summary = {}
    fails = 0
    global CLUSTERS
    CLUSTERS = tuple(int(c) for c in args.cluster.split(","))
    if args.small:
        return small(lib)
    if args.shapes:
        global SHAPES
        SHAPES = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    global ROUNDS
    ROUNDS = args.rounds
    if args.dglu:
        return main_dglu(lib, args, log)
    if not args.skip_correct:
        fails, res = check_all(lib, log)
        summary["correct_fails"] = fails
        summary["correct"] = res
    if not args.skip_time:
        alts = alt_libs(args)
        global TILES, FUSED_ONLY
        TILES = tuple(tuple(int(v) for v in t.split("x")) for t in args.tiles.split(","))
        FUSED_ONLY = args.fused_only
        rows, fused = time_all(lib, log, [int(g) for g in args.group_m.split(",")], alts)
        summary["gemm"] = rows
        summary["fused"] = fused
    json.dump(summary, open(os.path.join(args.out, "sm90_dev.json"), "w"), indent=1)
    print("\n=== summary ===")
    if not args.skip_correct:
        print(f"correctness: {fails} failures of {len(summary['correct'])}")
        for r in summary["correct"]:
            if "FAIL" in r:
                print("  " + r)
    if not args.skip_time:
        for r in summary["gemm"]:
            print(
                f"{r['shape']:32s} cublas {r['tflops']['cublas']:6.1f} | "
                + " ".join(f"{n} {r['tflops'][n]:6.1f} ({r['ratio'][n]:.3f})" for n in r["ratio"])
            )
        for r in summary["fused"]:
            print(
                f"{r['shape']:32s} "
                + " ".join(f"{n} {v:.3f}" for n, v in r["ms"].items())
                + f" budget {r['budget_ms']:.3f} fused/budget {r['fused_over_budget']:.3f} ({r['act_used']})"
            )
            print_rounds(r)
    return 1 if fails else 0


def print_rounds(r):
    """A timed row's spread over the rounds, per provider, and each other build's fused kernel
    (an --alt-lib, "<name>_fused") over this build's, round by round."""
    rm = r["rounds_ms"]
    print(
        "  spread (max - min) / median over the rounds: "
        + " ".join(f"{n} {(max(v) - min(v)) / r['ms'][n]:.3f}" for n, v in rm.items())
    )
    for n in rm:
        if n.endswith("_fused") and "fused" in rm:
            q = sorted(a / b for a, b in zip(rm[n], rm["fused"]))
            print(f"  {n} / fused per round: median {q[len(q) // 2]:.3f} [{q[0]:.3f}, {q[-1]:.3f}]")


def main_dglu(lib, args, log):
    summary, fails = {}, 0
    if not args.skip_correct:
        fails, res = check_dglu(lib, log)
        summary["dglu_correct_fails"], summary["dglu_correct"] = fails, res
    if not args.skip_time:
        alts = alt_libs(args)
        summary["dglu"] = time_dglu(lib, log, alts)
    json.dump(summary, open(os.path.join(args.out, "sm90_dev_dglu.json"), "w"), indent=1)
    print("\n=== summary ===")
    if not args.skip_correct:
        print(f"dglu correctness: {fails} failures of {len(summary['dglu_correct'])}")
        for r in summary["dglu_correct"]:
            if "FAIL" in r:
                print("  " + r)
    if not args.skip_time:
        print(f"ms (median of {ROUNDS} rounds); budget = cublas + 0.2 (unfused - cublas)")
        for r in summary["dglu"]:
            print(
                f"{r['shape']:40s} "
                + " ".join(f"{n} {v:.3f}" for n, v in r["ms"].items())
                + f" | budget {r['budget_ms']:.3f} fused/budget {r['fused_over_budget']:.3f}"
                + f" fused/{r['unfused']} {r['fused_over_unfused']:.3f}"
                + f" old/fused {r['old_over_fused']:.2f}"
            )
            print_rounds(r)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
