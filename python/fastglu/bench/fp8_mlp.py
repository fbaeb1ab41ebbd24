"""python -m fastglu.bench.fp8_mlp: the MLP block with FP8 GEMMs (fastglu.mlp_fp8, DeepSeek-V3's
blockwise recipe through torch._scaled_mm) against the bf16 block (cuBLAS + fastglu's GLU), and the
FP8 block's time outside its GEMMs against the floor of the bytes that part moves.

Workloads: x [T, H], w1 [2F, H], w2 [H, F], SwiGLU, bf16 activations and weights, no bias; the five
(T, H, F) of issue 26 on a GPU, two tiny ones on the CPU (--smoke: the harness only; the FP8 block
then runs its reference path, no FP8 GEMM).

Providers, per pass:
  bf16_block   fastglu.mlp(x, w1, w2, fused=False): F.linear (cuBLAS) -> fastglu's GLU -> F.linear
  fp8_block    fastglu.mlp_fp8(x, w1, w2): x and the weights quantised in torch ops, the GEMMs in
               torch._scaled_mm, y and dh quantised by fastglu's GLU kernels
  fp8_block_qw fastglu.mlp_fp8(x, w1, w2, quantized=q) with q = quantize_mlp_weights(w1, w2)
               made before the timing: the block of every micro-batch but the first between two
               optimizer steps (the weights quantised once a step)
  fp8_block_h8 fastglu.mlp_fp8(x, w1, w2, fp8_input_store="blockwise"): h kept as e4m3 with
               1 x 128 scales between the forward and the backward (half its bytes)
  fp8_block_h8c the same with fastglu.fp8_mlp.COPY_IN_FP8_FORWARD on: h's copy written by the FP8
               GLU forward's call (fastglu_glu_fwd_fp8_copy_blockwise) instead of a call of its own
  fp8_gemms    the FP8 block's _scaled_mm calls alone on ready operands (2 in the forward, 6 in
               the forward + backward): the block's GEMM time
Passes:
  forward      the block under torch.no_grad() (nothing saved for a backward)
  fwd_bwd      the block then out.backward(dO) with a fixed random dO (x, w1, w2 require grad;
               gradients reset to None before each iteration)

Derived per workload and pass: the FP8 block's speedup over the bf16 block (bf16 ms / fp8 ms), and
non-GEMM = fp8_block - fp8_gemms against its floor: the bytes that part would move if each step
read its inputs and wrote its outputs once (floor_bytes) at the device's copy bandwidth.

Checks before timing: the FP8 block's out (and in fwd_bwd dx, dw1, dw2) against its reference path
(the same quantised operands dequantised, fp32 matmuls): relative norm <= 1e-2, status "failed"
otherwise; against the bf16 block (the recipe's quantisation error, reported: about 0.06); and
fp8_block_qw's against fp8_block's, bit for bit, and fp8_block_h8's out bit for bit, its gradients
within 0.1 (the copy's rounding), fp8_block_h8c's against fp8_block_h8's bit for bit (their
records "failed" otherwise).

Protocol (the seed's): triton.testing.do_bench(rep) with quantiles 0.5/0.2/0.8, every provider in
one process, --rounds rounds per workload with the provider order rotated each round, one record
per provider, workload, pass and round (kernelindex.dev/v1alpha1, fastglu.bench.records), plus
fp8_mlp.jsonl, summary.json and table.txt under --out.

    python -m fastglu.bench.fp8_mlp [--shape T,H,F ...] [--rounds 3] [--rep 100] [--out DIR]
    python -m fastglu.bench.fp8_mlp --profile [--shape T,H,F ...] [--out DIR]
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from pathlib import Path

import torch

import fastglu
from fastglu import fp8_mlp
from fastglu.fp8 import glu_bwd_fp8, glu_fp8

from .mlp import SHAPES, block_parser, parse_block_args, protocol
from .records import bench_run_record, text_table
from .swiglu import (
    copy_bandwidth,
    describe_device,
    git_remote,
    make_bench,
    pkg_version,
    rotated_rounds,
)

SMOKE_SHAPES = [(32, 64, 48), (16, 128, 128)]
PROVIDERS = (
    "bf16_block",
    "fp8_block",
    "fp8_block_qw",
    "fp8_block_h8",
    "fp8_block_h8c",
    "fp8_gemms",
)
PASSES = ("forward", "fwd_bwd")
TOLERANCE = 1e-2  # fp8_block against its own reference path (the same quantised operands)
HARNESS = "fastglu python -m fastglu.bench.fp8_mlp"


def parse_args(argv=None):
    p = block_parser(
        "python -m fastglu.bench.fp8_mlp",
        __doc__,
        "fp8-mlp",
        "the CPU on two tiny shapes, 2 rounds",
    )
    p.add_argument("--pass", dest="passes", nargs="+", choices=PASSES, default=list(PASSES))
    p.add_argument(
        "--profile",
        action="store_true",
        help="instead of timing: the FP8 block's forward + backward under torch.profiler per "
        "shape, the kernels and host ops by time (profile_<shape>.txt under --out)",
    )
    return parse_block_args(p, argv)


# fastglu's kernels and the memsets its launches ask for: the FP8 block's non-GEMM work on the device;
# the GEMMs' kernels (cuBLAS through torch._scaled_mm) by their names; any other kernel is counted
# apart ("other kernels")
_NON_GEMM_KERNELS = ("quant_fp8_kernel", "glu_fp8_", "fp8_reduce_kernel", "Memset")
_GEMM_KERNELS = ("nvjet", "gemm", "cutlass", "xmma", "sm90_")


def profile_block(shapes, device, out, iters=10, bw=None):
    """Where the FP8 block's forward + backward spends its time: torch.profiler over ``iters``
    iterations after a warm-up, per shape; the table of ops by device time and by host time, the
    wall time per iteration against the device's busy time (a host-bound block shows a wall time
    above its kernels' sum), and the busy time split into the GEMMs' kernels (_GEMM_KERNELS), the
    rest (fastglu's quantisation and GLU kernels, _NON_GEMM_KERNELS) and any other, the rest against
    the floor of its bytes (floor_bytes, at the copy bandwidth bw). Unlike fp8_block - fp8_gemms in
    the timed runs, that split needs no second measurement of the GEMMs and no idle host."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    for T, H, F in shapes:
        torch.manual_seed(0)
        x = torch.randn(T, H, device=device, dtype=torch.bfloat16, requires_grad=True)
        w1 = (torch.randn(2 * F, H, device=device) / H**0.5).to(torch.bfloat16).requires_grad_()
        w2 = (torch.randn(H, F, device=device) / F**0.5).to(torch.bfloat16).requires_grad_()
        dout = torch.randn(T, H, device=device, dtype=torch.bfloat16)

        def step():
            for t in (x, w1, w2):
                t.grad = None
            fastglu.mlp_fp8(x, w1, w2).backward(dout)

        for _ in range(3):
            step()
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        with profile(activities=acts) as prof:
            t0 = dt.datetime.now()
            for _ in range(iters):
                step()
            sync()
            wall = (dt.datetime.now() - t0).total_seconds() * 1e3 / iters
        ka = prof.key_averages()
        dev_key = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
        # (the profiler's own "Activity Buffer Request" is no kernel of the block)
        kernels = [
            e for e in ka if e.device_type.name == "CUDA" and not e.key.startswith("Activity")
        ]
        busy = sum(getattr(e, dev_key, 0) for e in kernels) / 1e3

        def device_ms(names):
            return sum(getattr(e, dev_key, 0) for e in kernels if any(k in e.key for k in names))

        rest = device_ms(_NON_GEMM_KERNELS) / 1e3
        gemms = device_ms(_GEMM_KERNELS) / 1e3
        head = (
            f"T={T} H={H} F={F}: wall {wall:.3f} ms per forward + backward, "
            f"kernels {busy / iters:.3f} ms per iteration ({iters} iterations, "
            f"gemm {'scaled_mm' if fp8_mlp.scaled_mm_available(x, w1) else 'reference'})\n"
            f"  GEMM kernels {gemms / iters:.3f} ms, other kernels "
            f"{(busy - gemms - rest) / iters:.3f} ms, non-GEMM kernels {rest / iters:.3f} ms"
        )
        if bw:
            floor = sum(floor_bytes(T, H, F, "fwd_bwd").values()) / bw * 1e3
            head += f" = {rest / iters / floor:.2f} x the floor of their bytes ({floor:.3f} ms)"
        head += "\n"
        text = (
            head
            + "\nby device time\n"
            + ka.table(sort_by=dev_key, row_limit=30)
            + "\nby host time\n"
            + ka.table(sort_by="self_cpu_time_total", row_limit=30)
        )
        (out / f"profile_t{T}-h{H}-ffn{F}.txt").write_text(text)
        print(head, end="")
        del prof


def floor_bytes(T, H, F, pass_, x_bytes=2, w_bytes=2):
    """The bytes the FP8 block's non-GEMM work moves at the least: each quantisation reads its input
    once and writes its fp8 data (1 byte) and fp32 scales once; the GLU kernels read h (and dy) and
    write the quantised y (dh). Returns {step: bytes}."""
    nb = lambda n: -(-n // 128)  # noqa: E731

    def rows(R, C, b):  # quantise [R, C] of b bytes per element in 1 x 128 blocks
        return R * C * b + R * C + 4 * R * nb(C)

    def weight(R, C):
        return R * C * w_bytes + R * C + 4 * nb(R) * nb(C)

    steps = {
        "quantise x": rows(T, H, x_bytes),
        "quantise w1": weight(2 * F, H),
        "glu_fp8 (h -> y fp8)": T * 2 * F * x_bytes + rows(T, F, 0),
        "quantise w2": weight(H, F),
    }
    if pass_ == "fwd_bwd":
        steps["quantise x^T (saved)"] = rows(H, T, x_bytes)
        steps["glu_fp8 column-wise y^T"] = rows(F, T, 0)
        steps["quantise dO"] = rows(T, H, x_bytes)
        steps["quantise dO^T"] = rows(H, T, x_bytes)
        steps["quantise w2^T"] = weight(F, H)
        steps["glu_bwd_fp8 (h, dy -> dh, dh^T)"] = (
            T * 3 * F * x_bytes + rows(T, 2 * F, 0) + rows(2 * F, T, 0)
        )
        steps["quantise w1^T"] = weight(H, 2 * F)
    return steps


def gemm_only(x, w1, w2, dout, pass_, scaled):
    """The FP8 block's GEMMs on ready operands (quantised once, outside the timed function)."""
    T, H = x.shape
    mm = fp8_mlp._mm
    xq, xs = fp8_mlp.quantize_1x128(x)
    w1q, w1s = fp8_mlp.quantize_128x128(w1)
    w2q, w2s = fp8_mlp.quantize_128x128(w2)
    h = mm(xq, xs, w1q, w1s, x.dtype, scaled)
    o = glu_fp8(h, columnwise=True)
    if pass_ == "forward":

        def fn():
            mm(xq, xs, w1q, w1s, x.dtype, scaled)
            return mm(o.data, o.scale, w2q, w2s, x.dtype, scaled)

        return fn
    xtq, xts = fp8_mlp.quantize_1x128(x.t())
    doq, dos = fp8_mlp.quantize_1x128(dout)
    dotq, dots = fp8_mlp.quantize_1x128(dout.t())
    w2tq, w2ts = fp8_mlp.quantize_128x128(w2.t())
    w1tq, w1ts = fp8_mlp.quantize_128x128(w1.t())
    dy = mm(doq, dos, w2tq, w2ts, x.dtype, scaled)
    g = glu_bwd_fp8(dy, h, columnwise=True)

    def fn():
        mm(xq, xs, w1q, w1s, x.dtype, scaled)
        mm(o.data, o.scale, w2q, w2s, x.dtype, scaled)
        mm(doq, dos, w2tq, w2ts, x.dtype, scaled)
        mm(dotq, dots, o.data_t, o.scale_t, w2.dtype, scaled)
        mm(g.data, g.scale, w1tq, w1ts, x.dtype, scaled)
        return mm(g.data_t, g.scale_t, xtq, xts, w1.dtype, scaled)

    return fn


def rel_err(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def block_cells(x, w1, w2, dout, pass_, scaled):
    """name -> (timed fn, grads to reset); and the checks {name: relerr}."""
    leaves = [t.detach().clone().requires_grad_(pass_ == "fwd_bwd") for t in (x, w1, w2)]

    def fp8(gemm=None, quantized=None, store=False):
        return lambda x, w1, w2: fastglu.mlp_fp8(
            x, w1, w2, gemm=gemm, quantized=quantized, fp8_input_store=store
        )

    def bf16(x, w1, w2):
        return fastglu.mlp(x, w1, w2, fused=False)

    def h8c(x, w1, w2):  # h's copy written by the FP8 GLU forward's call
        old = fp8_mlp.COPY_IN_FP8_FORWARD
        fp8_mlp.COPY_IN_FP8_FORWARD = True
        try:
            return fastglu.mlp_fp8(x, w1, w2, fp8_input_store="blockwise")
        finally:
            fp8_mlp.COPY_IN_FP8_FORWARD = old

    def run(block):
        if pass_ == "forward":
            with torch.no_grad():
                return (block(*leaves),)
        for t in leaves:
            t.grad = None
        out = block(*leaves)
        out.backward(dout)
        return (out.detach(),) + tuple(t.grad for t in leaves)

    q = fp8_mlp.quantize_mlp_weights(*leaves[1:])  # (the backward changes no weight: fresh)
    got = run(fp8())
    want = run(fp8("reference"))
    base = run(bf16)
    got_qw = run(fp8(quantized=q))
    got_h8 = run(fp8(store="blockwise"))
    got_h8c = run(h8c)
    names = ("out", "dx", "dw1", "dw2")
    checks = {f"{n} vs reference path": rel_err(a, b) for n, a, b in zip(names, got, want)}
    checks.update({f"{n} vs bf16 block": rel_err(a, b) for n, a, b in zip(names, got, base)})
    # the weights quantised before: the same bits (0 when equal, else 1)
    checks.update(
        {
            f"{n} qw vs fp8 block": float(not torch.equal(a, b))
            for n, a, b in zip(names, got_qw, got)
        }
    )
    # h kept in e4m3: the same out, gradients within the copy's rounding of the fp8 block's
    checks.update({f"{n} h8 vs fp8 block": rel_err(a, b) for n, a, b in zip(names, got_h8, got)})
    # the copy in the FP8 forward's call: the same bits as in a call of its own
    checks.update(
        {f"{n} h8c vs h8": float(not torch.equal(a, b)) for n, a, b in zip(names, got_h8c, got_h8)}
    )
    del got, want, base, got_qw, got_h8, got_h8c
    grads = leaves if pass_ == "fwd_bwd" else None
    cells = {
        "bf16_block": (lambda: run(bf16), grads),
        "fp8_block": (lambda: run(fp8()), grads),
        "fp8_block_qw": (lambda: run(fp8(quantized=q)), grads),
        "fp8_block_h8": (lambda: run(fp8(store="blockwise")), grads),
        "fp8_block_h8c": (lambda: run(h8c), grads),
        "fp8_gemms": (gemm_only(x, w1, w2, dout, pass_, scaled), None),
    }
    return cells, checks


def main(argv=None):
    args = parse_args(argv)
    on_gpu = torch.cuda.is_available() and not args.smoke
    if args.smoke:
        args.rep, args.rounds = 5, 2
    shapes = args.shape or (SHAPES if on_gpu else SMOKE_SHAPES)
    device = "cuda" if on_gpu else "cpu"
    bench = make_bench(on_gpu, args.rep)
    gpu, device_slug, env = describe_device(on_gpu)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S")
    out = args.out or Path("bench", "results", device_slug, f"{stamp}-fp8-mlp")
    out.mkdir(parents=True, exist_ok=True)
    bw = copy_bandwidth(bench) if on_gpu else None
    if args.profile:
        profile_block(shapes, device, out, bw=bw)
        return []
    base = {
        "fastglu_version": fastglu.__version__,
        "torch_version": torch.__version__,
        "triton_version": pkg_version("triton") if on_gpu else None,
        "cuda_version": torch.version.cuda,
    }
    timer = "cuda_events" if on_gpu else "perf_counter"
    repository = git_remote()
    protos = {}
    for pass_, what in (
        ("forward", "the MLP block forward fc1 -> SwiGLU -> fc2 under torch.no_grad()"),
        ("fwd_bwd", "the MLP block forward and its backward with a fixed random dO"),
    ):
        proto = protocol(f"mlp_fp8/{pass_}", what, timer, args.rep, args.rounds, repository)
        proto["spec"]["harness"]["name"] = HARNESS
        protos[pass_] = proto
    print(
        f"{gpu}: torch {torch.__version__}"
        + (f", copy bandwidth {bw / 1e9:.0f} GB/s" if bw else " (CPU smoke: reference path)")
    )
    rows, derived = [], []
    torch.manual_seed(0)
    for T, H, F in shapes:
        x = torch.randn(T, H, device=device, dtype=torch.bfloat16)
        w1 = (torch.randn(2 * F, H, device=device) / H**0.5).to(torch.bfloat16)
        w2 = (torch.randn(H, F, device=device) / F**0.5).to(torch.bfloat16)
        dout = torch.randn(T, H, device=device, dtype=torch.bfloat16)
        scaled = fp8_mlp.scaled_mm_available(x, w1)
        if on_gpu and not scaled:
            print(f"note: T={T} H={H} F={F}: no blockwise torch._scaled_mm here; reference path")
        shape_slug = f"t{T}-h{H}-ffn{F}-bf16"
        for pass_ in args.passes:
            cells, checks = block_cells(x, w1, w2, dout, pass_, scaled)
            status = (
                "passed"
                if all(v <= TOLERANCE for k, v in checks.items() if "reference" in k)
                else "failed"
            )
            qw_same = not any(v for k, v in checks.items() if "qw vs" in k)
            h8_ok = checks["out h8 vs fp8 block"] == 0.0 and all(
                v < 0.1 for k, v in checks.items() if "h8 vs" in k
            )
            h8c_same = not any(v for k, v in checks.items() if "h8c vs" in k)
            statuses = {
                "bf16_block": "passed",
                "fp8_block_qw": status if qw_same else "failed",
                "fp8_block_h8": status if h8_ok else "failed",
                "fp8_block_h8c": status if h8_ok and h8c_same else "failed",
            }
            workload = {"op": "mlp_fp8", "pass": pass_, "T": T, "H": H, "F": F, "dtype": "bf16"}
            names = list(cells)
            ms = {n: [] for n in names}
            fns = {n: cell[0] for n, cell in cells.items()}
            grads = {n: cell[1] for n, cell in cells.items()}
            for r, name, t in rotated_rounds(bench, fns, args.rounds, grads):
                ms[name].append(t[0])
                rec = bench_run_record(
                    benchmark=f"mlp_fp8/{pass_}",
                    provider=name,
                    workload=workload,
                    shape_slug=shape_slug,
                    title=f"MLP block, FP8 blockwise against bf16 ({pass_}, T={T}, H={H}, F={F})",
                    ms=t,
                    device_slug=device_slug,
                    protocol_obj=protos[pass_],
                    env=env,
                    versions={**base, "gemm": "scaled_mm" if scaled else "reference"},
                    observed=dt.datetime.now(dt.timezone.utc),
                    status=statuses.get(name, status),
                    round_=r,
                )
                fname = f"mlp_fp8_{pass_}_{name}_{shape_slug}_r{r}.json"
                (out / fname).write_text(json.dumps(rec, indent=2) + "\n")
                rows.append(
                    {"pass": pass_, "T": T, "H": H, "F": F, "provider": name, "round": r}
                    | {"ms": t[0], "ms_20": t[1], "ms_80": t[2]}
                )
            med = {n: statistics.median(v) for n, v in ms.items()}
            steps = floor_bytes(T, H, F, pass_)
            floor_ms = sum(steps.values()) / bw * 1e3 if bw else None
            non_gemm = med["fp8_block"] - med["fp8_gemms"]
            d = {
                "pass": pass_,
                "T": T,
                "H": H,
                "F": F,
                "gemm": "scaled_mm" if scaled else "reference",
                "bf16_block_ms": med["bf16_block"],
                "fp8_block_ms": med["fp8_block"],
                "fp8_block_qw_ms": med["fp8_block_qw"],
                "fp8_block_h8_ms": med["fp8_block_h8"],
                "fp8_block_h8c_ms": med["fp8_block_h8c"],
                "fp8_gemms_ms": med["fp8_gemms"],
                "speedup": med["bf16_block"] / med["fp8_block"],
                "speedup_qw": med["bf16_block"] / med["fp8_block_qw"],
                "non_gemm_ms": non_gemm,
                "non_gemm_floor_ms": floor_ms,
                "non_gemm_x_floor": non_gemm / floor_ms if floor_ms else None,
                "floor_bytes": steps,
                "checks": checks,
                "status": status if qw_same and h8_ok and h8c_same else "failed",
            }
            derived.append(d)
            print(
                f"{pass_:8s} T={T:6d} H={H:5d} F={F:6d}  bf16 {d['bf16_block_ms']:8.3f} ms  "
                f"fp8 {d['fp8_block_ms']:8.3f} ms  speedup {d['speedup']:5.2f}x  "
                f"weights quantised before {d['fp8_block_qw_ms']:8.3f} ms "
                f"({d['speedup_qw']:5.2f}x)  "
                f"gemms {d['fp8_gemms_ms']:8.3f} ms  non-GEMM {non_gemm:7.3f} ms"
                + (f" ({d['non_gemm_x_floor']:.1f}x floor {floor_ms:.3f})" if floor_ms else "")
                + f"  {status}; "
                + ", ".join(f"{k} {v:.2g}" for k, v in checks.items())
            )
            del cells
        del x, w1, w2, dout
        if on_gpu:
            torch.cuda.empty_cache()
    with open(out / "fp8_mlp.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    table = summary_table(derived)
    (out / "table.txt").write_text(table)
    (out / "summary.json").write_text(
        json.dumps(
            {
                "gpu": gpu,
                "device_slug": device_slug,
                "copy_bandwidth_bytes_per_s": bw,
                "rep_ms": args.rep,
                "rounds": args.rounds,
                "versions": {k: v for k, v in base.items() if v},
                "environment": env,
                "results": derived,
            },
            indent=1,
        )
        + "\n"
    )
    print(table)
    print(f"wrote {len(rows)} records, fp8_mlp.jsonl, summary.json and table.txt to {out}")
    return derived


def summary_table(derived):
    head = [
        "pass",
        "T,H,F",
        "gemm",
        "bf16 ms",
        "fp8 ms",
        "speedup",
        "fp8 qw ms",
        "speedup qw",
        "fp8 h8 ms",
        "fp8 h8c ms",
        "fp8 GEMMs ms",
        "non-GEMM ms",
        "floor ms",
        "x floor",
        "out vs bf16",
        "status",
    ]
    lines = [
        [
            d["pass"],
            f"{d['T']},{d['H']},{d['F']}",
            d["gemm"],
            f"{d['bf16_block_ms']:.3f}",
            f"{d['fp8_block_ms']:.3f}",
            f"{d['speedup']:.2f}",
            f"{d['fp8_block_qw_ms']:.3f}",
            f"{d['speedup_qw']:.2f}",
            f"{d['fp8_block_h8_ms']:.3f}",
            f"{d['fp8_block_h8c_ms']:.3f}",
            f"{d['fp8_gemms_ms']:.3f}",
            f"{d['non_gemm_ms']:.3f}",
            f"{d['non_gemm_floor_ms']:.3f}" if d["non_gemm_floor_ms"] else "n/a",
            f"{d['non_gemm_x_floor']:.1f}" if d["non_gemm_x_floor"] else "n/a",
            f"{d['checks']['out vs bf16 block']:.3f}",
            d["status"],
        ]
        for d in derived
    ]
    return text_table(head, lines)


if __name__ == "__main__":
    main()
