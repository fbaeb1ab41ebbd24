#!/usr/bin/env python3
"""Benchmark fastglu's gated-activation variants beside Megatron-Core's (and Liger's / torch's).

Each variant is timed with the seed's protocol (triton.testing.do_bench, rep=100, quantiles
0.5/0.2/0.8) in one process, on x of shape [S, B, 2F] (default S=2048 B=4 F=8192 bf16), in two
passes: ``forward`` (y = f(x) with x requiring grad) and ``bwd_only`` (y.backward(dy,
retain_graph=True) after one untimed forward; bias and weights require grad, as a bias parameter and
router probs do, so the backward computes dbias and dweights). Every provider's forward and input gradient are first
checked against fastglu's float64 reference of the same variant (relative norm error). Each median is
printed beside its own floor: the fewest bytes the variant must move in that pass over the device
copy bandwidth measured in the same run (see ``variant_bytes``).

Outputs in --out: variants.json (every row, raw), variants.txt (the table). Runs only on a CUDA GPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
from pathlib import Path

import torch

from .host import identity_function_us
from .swiglu import copy_bandwidth, make_bench, pkg_version, positive_int

MODES = ("forward", "bwd_only")


def variant_bytes(name, mode, T, F, es):
    """Fewest bytes a pass must move (inputs read once, outputs written once).

    T tokens, F columns, es bytes per element of x. forward: read x (2TF) [+ bias 2F] [+ weights T],
    write y (TF) [+ the fp8 copy of x (2TF bytes) for fp8 stores]. bwd_only: read dy (TF) and the
    saved input (2TF; 1 byte per element when stored as fp8) [+ bias] [+ weights], write dx (2TF)
    [+ dbias 2F] [+ dweights T]."""
    w = 4 * T if "weighted" in name else 0
    b = 2 * F * es if "bias" in name else 0
    if mode == "forward":
        fp8 = 2 * T * F if "fp8" in name else 0
        return 2 * T * F * es + T * F * es + b + w + fp8
    x_saved = 2 * T * F * (1 if "fp8" in name else es)
    return T * F * es + x_saved + 2 * T * F * es + 2 * b + 2 * w


def build_variants(x, T, F, dtype, device):
    """({name: ({provider: fn(x) -> y}, reference fn on float64)}, [bias, weights]): the leaves
    besides x whose gradients the backward computes."""
    import fastglu

    fg = fastglu  # the Megatron-signature functions are exported at the top level

    g = torch.Generator(device=device).manual_seed(1)
    # trained, as in Megatron's MLP (a bias parameter, router probs): the backward computes dbias
    # and dweights, which variant_bytes counts
    bias = torch.randn(2 * F, device=device, dtype=dtype, generator=g).requires_grad_()
    weights = torch.rand(T, 1, device=device, dtype=torch.float32, generator=g).requires_grad_()
    xt = x.shape[:-1]

    def ref(act, *, bias=None, weights=None, clamp=None, offset=0.0, interleaved=False):
        def f(xd):
            if interleaved:
                a, u = xd[..., 0::2], xd[..., 1::2]
            else:
                a, u = xd.chunk(2, -1)
            if clamp:
                a, u = a.clamp(max=clamp), u.clamp(-clamp, clamp)
            if bias is not None:
                bb = bias.detach().double()
                if interleaved:
                    a, u = a + bb[0::2], u + bb[1::2]
                else:
                    a, u = a + bb[:F], u + bb[F:]
            if act == "silu":
                h = torch.nn.functional.silu(a)
            elif act == "gelu_tanh":
                h = a * 0.5 * (1.0 + torch.tanh(0.79788456 * a * (1 + 0.044715 * a * a)))
            else:
                h = a * torch.sigmoid(1.702 * a)
            y = h * (u + offset)
            if weights is not None:
                y = y * weights.detach().double().view(*xt, 1)
            return y

        return f

    mc = {}
    try:
        from megatron.core.fusions import fused_bias_geglu as mg
        from megatron.core.fusions import fused_bias_swiglu as ms

        mc = {"ms": ms, "mg": mg}
    except Exception as e:  # noqa: BLE001 - reported in the table
        print(f"megatron-core not importable: {e!r}")
    lg = None
    try:
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction as lg
    except Exception as e:  # noqa: BLE001
        print(f"liger-kernel not importable: {e!r}")

    def eager_glu(act, **kw):  # torch eager, as Megatron's unfused MLP path computes it
        r = ref(act, **kw)
        return lambda xx: r(xx).to(xx.dtype) if xx.dtype != torch.float64 else r(xx)

    V = {}
    wv = weights.view(-1, 1)
    V["bias_swiglu"] = (
        {
            "fastglu": lambda xx: fastglu.bias_swiglu_impl(xx, bias),
            **({"megatron": lambda xx: mc["ms"].bias_swiglu_impl(xx, bias)} if mc else {}),
        },
        ref("silu", bias=bias),
    )
    V["weighted_swiglu"] = (
        {
            "fastglu": lambda xx: fg.weighted_bias_swiglu_impl(xx, None, wv),
            **(
                {"megatron": lambda xx: mc["ms"].weighted_bias_swiglu_impl(xx, None, wv)}
                if mc
                else {}
            ),
        },
        ref("silu", weights=weights),
    )
    V["bias_geglu"] = (
        {
            "fastglu": lambda xx: fg.bias_geglu_impl(xx, bias),
            **({"megatron": lambda xx: mc["mg"].bias_geglu_impl(xx, bias)} if mc else {}),
        },
        ref("gelu_tanh", bias=bias),
    )
    V["weighted_bias_quick_geglu_clamp"] = (
        {
            "fastglu": lambda xx: fg.weighted_bias_quick_geglu_impl(xx, bias, wv, False, 1.0, 7.0),
            **(
                {
                    "megatron": lambda xx: mc["mg"].weighted_bias_quick_geglu_impl(
                        xx, bias, wv, False, 1.0, 7.0
                    )
                }
                if mc
                else {}
            ),
        },
        ref("quick_gelu", bias=bias, weights=weights, clamp=7.0, offset=1.0),
    )
    V["swiglu_fp8_store"] = (
        {
            "fastglu": lambda xx: fastglu.bias_swiglu_impl(xx, None, True),
            **({"megatron": lambda xx: mc["ms"].bias_swiglu_impl(xx, None, True)} if mc else {}),
        },
        ref("silu"),
    )
    V["swiglu_clamp"] = (
        {
            "fastglu": lambda xx: fastglu.bias_swiglu_impl(xx, None, clamp_value=7.0),
            "torch": eager_glu("silu", clamp=7.0),
        },
        ref("silu", clamp=7.0),
    )
    V["swiglu_interleaved"] = (
        {
            "fastglu": lambda xx: fastglu.glu(xx, interleaved=True),
            "torch": eager_glu("silu", interleaved=True),
        },
        ref("silu", interleaved=True),
    )

    # two-tensor providers take gate and up as two leaves (HF's gate_proj / up_proj outputs): the
    # variant's name says so; main() hands them x's halves as separate tensors
    V["silu_mul_two_tensor"] = (
        {
            "fastglu": lambda a, b: fastglu.silu_mul(a, b),
            **({"liger": lambda a, b: lg.apply(a, b)} if lg else {}),
            "torch": lambda a, b: torch.nn.functional.silu(a) * b,
        },
        ref("silu"),
    )
    return V, [bias, weights]


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m fastglu.bench.variants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--seq", type=positive_int, default=2048, help="sequence length S (default 2048)"
    )
    p.add_argument("--batch", type=positive_int, default=4, help="micro-batch size B (default 4)")
    p.add_argument(
        "--ffn", type=positive_int, default=8192, help="FFN hidden size F (default 8192)"
    )
    p.add_argument(
        "--dtype", choices=("bf16", "fp16", "fp32"), default="bf16", help="x's dtype (default bf16)"
    )
    p.add_argument(
        "--variants", nargs="+", metavar="NAME", help="subset of variants (default: all)"
    )
    p.add_argument(
        "--rep", type=int, default=100, help="do_bench repetition time in ms (default 100)"
    )
    p.add_argument("--out", type=Path, help="output directory (required unless --readme-from)")
    p.add_argument(
        "--readme-from",
        type=Path,
        metavar="VARIANTS_JSON",
        help="do not time anything: write the table of a committed variants.json into --readme",
    )
    p.add_argument(
        "--readme",
        type=Path,
        default=Path("README.md"),
        help="file whose <!-- variants-table:begin/end --> block --readme-from replaces (default README.md)",
    )
    args = p.parse_args(argv)
    if args.readme_from:
        write_readme_table(args.readme_from, args.readme)
        return
    if args.out is None:
        p.error("--out is required")
    if not torch.cuda.is_available():
        raise SystemExit("python -m fastglu.bench.variants needs a CUDA GPU")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    S, B, F, dev = args.seq, args.batch, args.ffn, "cuda"
    T, es = S * B, torch.finfo(dtype).bits // 8
    bench = make_bench(True, args.rep)
    bw = copy_bandwidth(bench)
    x = torch.randn(S, B, 2 * F, device=dev, dtype=dtype)
    dy = torch.randn(S, B, F, device=dev, dtype=dtype)
    V, leaves = build_variants(x, T, F, dtype, dev)
    names = args.variants or list(V)
    rows = []
    for name in names:
        providers, reference = V[name]
        xd = x.detach().double().requires_grad_()
        yr = reference(xd)
        yr.backward(dy.double())
        two = name.endswith("two_tensor")

        def leaves_of_x():  # fresh leaves holding x's values: x itself, or its two halves
            if two:
                return [h.detach().clone().requires_grad_() for h in (x[..., :F], x[..., F:])]
            return [x.detach().clone().requires_grad_()]

        for prov, fn in providers.items():
            row = {"variant": name, "provider": prov, "S": S, "B": B, "F": F, "dtype": args.dtype}
            try:
                xs = leaves_of_x()
                y = fn(*xs)
                y.backward(dy)
                dx = torch.cat([t.grad for t in xs], -1)
                row["err_fwd"] = ((y.double() - yr).norm() / yr.norm()).item()
                row["err_dx"] = ((dx.double() - xd.grad).norm() / xd.grad.norm()).item()
                xs = leaves_of_x()
                for mode in MODES:
                    if mode == "forward":
                        ms = bench(lambda: fn(*xs), [*xs, *leaves])
                    else:
                        yy = fn(*xs)
                        ms = bench(lambda: yy.backward(dy, retain_graph=True), [*xs, *leaves])
                    nbytes = variant_bytes(name, mode, T, F, es)
                    floor = nbytes / bw * 1e3
                    row[mode] = {
                        "ms": ms[0],
                        "ms_20": ms[1],
                        "ms_80": ms[2],
                        "bytes": nbytes,
                        "floor_ms": floor,
                        "ratio_to_floor": ms[0] / floor,
                    }
            except Exception as e:  # noqa: BLE001 - a provider that fails is reported, not fatal
                row["error"] = repr(e)[:300]
            rows.append(row)
            print(json.dumps(row))
    lines = [
        f"{'variant':34s} {'provider':9s} {'err_fwd':>9s} {'err_dx':>9s} "
        + " ".join(f"{m + ' ms':>12s} {'x floor':>8s}" for m in MODES)
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['variant']:34s} {r['provider']:9s} ERROR {r['error'][:80]}")
            continue
        lines.append(
            f"{r['variant']:34s} {r['provider']:9s} {r['err_fwd']:9.2e} {r['err_dx']:9.2e} "
            + " ".join(f"{r[m]['ms']:12.4f} {r[m]['ratio_to_floor']:8.3f}" for m in MODES)
        )
    table = "\n".join(lines)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "copy_bandwidth_bytes_per_s": bw,
        "host_identity_fn_us": identity_function_us("cuda"),
        "torch": torch.__version__,
        "megatron_core": pkg_version("megatron-core"),
        "liger_kernel": pkg_version("liger-kernel"),
        "python": platform.python_version(),
        "observed": dt.datetime.now(dt.timezone.utc).isoformat(),
        "rep_ms": args.rep,
        "protocol": "triton.testing.do_bench, quantiles 0.5/0.2/0.8, grad_to_none=[input leaves, bias, weights]; bias and weights require grad; "
        "two-tensor variants get gate and up as two leaves",
    }
    (args.out / "variants.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (args.out / "variants.txt").write_text(f"copy bandwidth {bw / 1e12:.3f} TB/s\n" + table + "\n")


def readme_table(data, source):
    """Markdown: per variant and provider, median ms and ratio to the variant's floor, per pass."""
    m = data["meta"]
    rows = data["rows"]
    r0 = next(r for r in rows if "error" not in r)
    out = [
        f"S={r0['S']} B={r0['B']} F={r0['F']} {r0['dtype']} on {m['gpu']}, median ms (x its own floor), "
        f"from `{source}` (copy bandwidth {m['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s):",
        "",
        "| variant | provider | forward | bwd_only | error vs float64 (y, dx) |",
        "|---|---|---:|---:|---|",
    ]
    for r in rows:  # a provider that failed part way keeps what it measured before the error
        best = {
            k: min(
                (q[k]["ms"] for q in rows if q["variant"] == r["variant"] and k in q), default=None
            )
            for k in MODES
        }
        cells = []
        for k in MODES:
            if k not in r:
                cells.append("failed")
                continue
            c = f"{r[k]['ms']:.4f} ({r[k]['ratio_to_floor']:.2f}x)"
            cells.append(f"**{c}**" if r[k]["ms"] == best[k] else c)
        err = f"{r['err_fwd']:.1e}, {r['err_dx']:.1e}" if "err_dx" in r else ""
        if "error" in r:
            err = f"{err}; " if err else ""
            err += f"`{r['error'][:60]}`"
        out.append(f"| {r['variant']} | {r['provider']} | {cells[0]} | {cells[1]} | {err} |")
    return "\n".join(out)


def write_readme_table(json_path, readme):
    data = json.loads(Path(json_path).read_text())
    text = Path(readme).read_text()
    begin, end = "<!-- variants-table:begin -->", "<!-- variants-table:end -->"
    i, j = text.index(begin) + len(begin), text.index(end)
    Path(readme).write_text(text[:i] + "\n" + readme_table(data, json_path) + "\n" + text[j:])


if __name__ == "__main__":
    main()
