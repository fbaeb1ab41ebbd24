#!/usr/bin/env python3
"""Benchmark SwiGLU in the Megatron layout (x: [S, B, 2F] -> silu(x[..., :F]) * x[..., F:]).

Times fastglu and its peers (torch eager, torch.compile, Megatron-Core, Liger) in one process with the
seed record's protocol (triton.testing.do_bench, rep=100, quantiles 0.5/0.2/0.8), checks each provider
against a float64 reference, compares every median with a memory-traffic floor from the measured
device-to-device copy bandwidth, and writes one kernelindex.dev/v1alpha1 record per
(provider, mode, shape) plus summary.json, table.txt, all_benchmark_data.csv (Liger-Kernel's
benchmark-data columns) and, when matplotlib is installed (pip install "fastglu[bench]"), median_ms.png
and cells.md. Without a CUDA GPU it runs the CPU backend on a small shape with a perf_counter timer.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import torch

from . import records
from .host import identity_function_us

PROVIDERS = ("fastglu", "torch", "compile", "megatron", "liger")
CPU_PROVIDERS = ("fastglu", "torch")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TOLERANCE = {
    "bf16": 2e-2,
    "fp16": 4e-3,
    "fp32": 1e-5,
}  # relative norm error vs the float64 reference
GPU_SHAPE, CPU_SHAPE = (2048, 4, [8192]), (64, 2, [256])  # (S, B, [F])


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m fastglu.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--seq", type=positive_int, help="sequence length S (default 2048; 64 on the CPU backend)"
    )
    p.add_argument(
        "--batch", type=positive_int, help="micro-batch size B (default 4; 2 on the CPU backend)"
    )
    p.add_argument(
        "--ffn",
        type=positive_int,
        nargs="+",
        help="FFN hidden size F, one or more for a sweep; x is [S, B, 2F] (default 8192; 256 on CPU)",
    )
    p.add_argument("--dtype", choices=DTYPES, default="bf16", help="input dtype (default bf16)")
    p.add_argument(
        "--modes",
        nargs="+",
        choices=records.MODES,
        default=list(records.MODES),
        metavar="MODE",
        help="timed passes (forward, backward, full, bwd_only): forward = y = f(x) with x requiring grad; backward = f(x).sum().backward() "
        "(the seed's pass); full = f(x).backward(dy); bwd_only = y.backward(dy, retain_graph=True) "
        "after one untimed forward (default: all)",
    )
    p.add_argument(
        "--providers",
        nargs="+",
        choices=PROVIDERS,
        metavar="NAME",
        help="implementations to time: fastglu, torch (eager), compile (torch.compile), megatron "
        "(Megatron-Core bias_swiglu_impl), liger (LigerFusedGateUpSiLUMulFunction) (default: all that import; fastglu and torch on CPU)",
    )
    p.add_argument(
        "--rep", type=int, default=100, help="do_bench repetition time in ms (default 100)"
    )
    p.add_argument("--quick", action="store_true", help="short smoke run: --rep 20")
    p.add_argument(
        "--out",
        type=Path,
        help="output directory (default ./bench/results/<gpu-slug>/<UTC time>/, "
        "./bench/results/cpu/<UTC time>/ on the CPU backend)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.rep = 20
    args.modes = list(dict.fromkeys(args.modes))  # a mode named twice runs once
    return args


def torch_swiglu(x):
    a, b = x.chunk(2, -1)
    return torch.nn.functional.silu(a) * b


def pkg_version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def load_provider(name, on_gpu):
    """(fn, extra version labels); raises if the provider cannot run here."""
    if name == "fastglu":
        import fastglu

        if on_gpu and not fastglu.cuda_available():
            raise RuntimeError("fastglu was built without CUDA")
        return fastglu.swiglu, {}
    if name == "torch":
        return torch_swiglu, {}
    if name == "compile":
        return torch.compile(torch_swiglu), {}
    if name == "megatron":
        from megatron.core.fusions.fused_bias_swiglu import bias_swiglu_impl

        return (lambda x: bias_swiglu_impl(x, None)), {
            "megatron_core_version": pkg_version("megatron-core")
        }
    if name == "liger":
        from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction

        def liger(
            x,
        ):  # 0.8.5's backward returns a [T, 2F] gradient, so feed it [T, 2F] views (no copies)
            return LigerFusedGateUpSiLUMulFunction.apply(x.view(-1, x.shape[-1])).view(
                *x.shape[:-1], -1
            )

        return liger, {"liger_version": pkg_version("liger-kernel")}
    raise ValueError(name)


def make_bench(on_gpu, rep):
    """bench(fn, grad_to_none) -> (p50, p20, p80) in ms."""
    if on_gpu:
        from triton.testing import do_bench

        return lambda fn, grads: tuple(
            do_bench(fn, rep=rep, grad_to_none=grads, quantiles=[0.5, 0.2, 0.8])
        )

    def cpu_bench(fn, grads, warmup=25):  # do_bench's schedule with a host timer
        def once():
            for g in grads or ():
                g.grad = None
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3

        fn()
        est = max(statistics.median([once() for _ in range(5)]), 1e-6)
        for _ in range(max(1, int(warmup / est))):
            fn()
        times = [once() for _ in range(max(10, int(rep / est)))]
        deciles = statistics.quantiles(times, n=10, method="inclusive")  # numpy's default quantiles
        return deciles[4], deciles[1], deciles[7]

    return cpu_bench


def timed_fn(mode, fn, x, dy):
    if mode == "forward":
        return lambda: fn(x)
    if mode == "backward":
        return lambda: fn(x).sum().backward()
    if mode == "full":
        return lambda: fn(x).backward(dy)
    y = fn(x)  # bwd_only: one untimed forward
    return lambda: y.backward(dy, retain_graph=True)


def check(fn, x, dy):
    """Relative norm errors (forward, backward) against a float64 torch reference on the same input."""
    xc = x.detach().clone().requires_grad_()
    y = fn(xc)
    y.backward(dy)
    xr = x.detach().double().requires_grad_()
    yr = torch_swiglu(xr)
    yr.backward(dy.double())
    if y.shape != yr.shape:
        raise RuntimeError(f"output shape {tuple(y.shape)} != {tuple(yr.shape)}")

    def rel(a, r):
        return ((a.double() - r).norm() / r.norm()).item()

    return rel(y.detach(), yr.detach()), rel(xc.grad, xr.grad)


def rotated_rounds(bench, fns, rounds, grads=None):
    """Yields (round, name, (p50, p20, p80)): every fn of fns (name -> fn) timed by bench once a
    round, the order rotated by one each round (no fn always first, or always after the same
    neighbour); grads: name -> the tensors whose .grad bench resets before each call (or None)."""
    items = list(fns.items())
    for r in range(rounds):
        s = r % len(items) if items else 0
        for name, fn in items[s:] + items[:s]:
            yield r, name, bench(fn, (grads or {}).get(name))


def copy_bandwidth(bench, nbytes=1 << 30):
    """Device-to-device copy bandwidth in bytes/s (bytes read + written over the median time)."""
    src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src), None)[0]
    return 2 * nbytes / (ms * 1e-3)


def driver_version():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
        return out[0] if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def git_remote():
    try:
        out = subprocess.run(
            ["git", "remote", "get-url", "origin"], capture_output=True, text=True, timeout=10
        )
        url = out.stdout.strip()
        return url if "://" in url or "@" in url else None  # a local path names nothing to others
    except (OSError, subprocess.SubprocessError):
        return None


def describe_device(on_gpu):
    """(device name, slug, environment object). The environment's software map carries the host's
    identity-Function time (``host_identity_fn_us``: forward and forward + backward per call, on the
    device the run uses), so that host times from different hosts read side by side."""
    software = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host_identity_fn_us": identity_function_us("cuda" if on_gpu else "cpu"),
    }
    if on_gpu:
        props = torch.cuda.get_device_properties(0)
        name = props.name
        hardware = records.gpu_hardware(name, props.total_memory, (props.major, props.minor))
        software.update(cuda=torch.version.cuda, driver=driver_version())
        slug = records.slug(name)
    else:
        mem = (
            os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            if hasattr(os, "sysconf")
            else None
        )
        hardware = records.cpu_hardware(
            platform.processor(), platform.machine(), os.cpu_count(), mem
        )
        name, slug = hardware["product"], "cpu"
    return name, slug, records.environment(hardware, software, slug, name)


def render_table(rows):
    head = [
        "provider",
        "mode",
        "F",
        "p50 ms",
        "p20 ms",
        "p80 ms",
        "floor ms",
        "/ floor",
        "/ fastglu",
    ]
    right = head[2:]

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    body = [
        [
            r["provider"],
            r["mode"],
            str(r["ffn"]),
            *(fmt(m, ".4f") for m in r["ms"]),
            fmt(r["floor_ms"], ".4f"),
            fmt(r["ratio_to_floor"], ".2f"),
            fmt(r["ratio_to_fastglu"], ".2f"),
        ]
        for r in rows
    ]
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="SwiGLU (Megatron layout)")
        for col in head:
            table.add_column(col, justify="right" if col in right else "left")
        for line in body:
            table.add_row(*line)
        console = Console(record=True, width=120)
        console.print(table)
        return console.export_text()
    except ImportError:
        pass
    try:
        from tabulate import tabulate

        text = tabulate(
            body, headers=head, colalign=["left" if c not in right else "right" for c in head]
        )
    except ImportError:
        widths = [max(len(c) for c in col) for col in zip(head, *body)]
        text = "\n".join(
            "  ".join(
                c.rjust(w) if h in right else c.ljust(w) for c, w, h in zip(line, widths, head)
            )
            for line in [head, *body]
        )
    print(text)
    return text + "\n"


def main(argv=None):
    args = parse_args(argv)
    on_gpu = torch.cuda.is_available()
    seq, batch, ffns = GPU_SHAPE if on_gpu else CPU_SHAPE
    if not on_gpu:
        default = all(v is None for v in (args.seq, args.batch, args.ffn))
        print(
            "No CUDA GPU found: running the CPU backend"
            + (" on a small default shape (S=64, B=2, F=256)" if default else "")
        )
    seq = seq if args.seq is None else args.seq
    batch = batch if args.batch is None else args.batch
    ffns = ffns if args.ffn is None else list(dict.fromkeys(args.ffn))  # duplicates once
    print(
        f"shape: S={seq}, B={batch}, F={ffns}, {args.dtype}; modes {args.modes}; rep {args.rep} ms"
    )
    device, dtype = ("cuda" if on_gpu else "cpu"), DTYPES[args.dtype]
    elem_bytes = torch.empty((), dtype=dtype).element_size()
    bench = make_bench(on_gpu, args.rep)
    gpu, device_slug, env = describe_device(on_gpu)
    out = args.out or Path(
        "bench",
        "results",
        device_slug,
        dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S"),
    )
    out.mkdir(parents=True, exist_ok=True)

    try:
        import fastglu

        fastglu_version = fastglu.__version__
    except Exception:  # noqa: BLE001 - reported below when fastglu is one of the providers
        fastglu_version = None
    base_versions = {
        "fastglu_version": fastglu_version,
        "torch_version": torch.__version__,
        "triton_version": pkg_version("triton") if on_gpu else None,
        "cuda_version": torch.version.cuda,
    }

    notes, providers = [], {}
    for name in args.providers or PROVIDERS:
        if not on_gpu and name not in CPU_PROVIDERS:
            notes.append(f"{name}: skipped (GPU only)")
            continue
        try:
            fn, extra = load_provider(name, on_gpu)
            providers[name] = (fn, {**base_versions, **extra})
        except Exception as e:  # noqa: BLE001 - import errors of optional peers vary
            notes.append(f"{name}: skipped ({type(e).__name__}: {e})")
    for note in notes:
        print("note:", note)

    bandwidth = copy_bandwidth(bench) if on_gpu else None
    if bandwidth:
        print(f"device-to-device copy bandwidth: {bandwidth / 1e12:.3f} TB/s")
    repository = git_remote()
    protocols = {
        m: records.protocol(m, "cuda_events" if on_gpu else "perf_counter", args.rep, repository)
        for m in args.modes
    }

    torch.manual_seed(0)
    rows = []
    try:  # a progress bar over the sweep when tqdm is installed
        from tqdm.auto import tqdm
    except ImportError:

        def tqdm(it, **_):
            return it

    for ffn in tqdm(ffns, desc="F", unit="shape", disable=len(ffns) < 2):
        # Training runs one shape: drop torch.compile's caches (compile and megatron providers) so every shape of
        # a sweep compiles as in a fresh process, static, instead of as a dynamic-shape kernel from the 2nd on.
        torch._dynamo.reset()
        x = torch.randn(seq, batch, 2 * ffn, device=device, dtype=dtype, requires_grad=True)
        dy = torch.randn(seq, batch, ffn, device=device, dtype=dtype)
        checks = {}
        for name, (fn, _) in providers.items():
            try:
                checks[name] = check(fn, x, dy)
            except Exception as e:  # noqa: BLE001 - a broken provider is reported, not fatal
                notes.append(f"{name}: check failed at F={ffn} ({type(e).__name__}: {e})")
                print("note:", notes[-1])
            x.grad = None
        for mode in args.modes:
            for name in checks:
                fn, versions = providers[name]
                ms = bench(timed_fn(mode, fn, x, dy), [x])
                observed = dt.datetime.now(dt.timezone.utc)
                fwd_err, bwd_err = checks[name]
                status = "passed" if max(fwd_err, bwd_err) <= TOLERANCE[args.dtype] else "failed"
                record = records.run_record(
                    provider=name,
                    mode=mode,
                    seq=seq,
                    batch=batch,
                    ffn=ffn,
                    dtype=args.dtype,
                    ms=ms,
                    device_slug=device_slug,
                    protocol_obj=protocols[mode],
                    environment_obj=env,
                    versions=versions,
                    observed=observed,
                    status=status,
                )
                path = out / records.record_filename(name, mode, seq, batch, ffn, args.dtype)
                path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
                floor = (
                    records.floor_ms(mode, seq, batch, ffn, elem_bytes, bandwidth)
                    if bandwidth
                    else None
                )
                rows.append(
                    {
                        "provider": name,
                        "mode": mode,
                        "ffn": ffn,
                        "seq": seq,
                        "batch": batch,
                        "dtype": args.dtype,
                        "ms": list(ms),
                        "floor_ms": floor,
                        "ratio_to_floor": ms[0] / floor if floor else None,
                        "ratio_to_fastglu": None,
                        "check_fwd_relerr": fwd_err,
                        "check_bwd_relerr": bwd_err,
                        "status": status,
                        "versions": record["run"]["metadata"]["labels"],
                        "record": path.name,
                    }
                )
                x.grad = None
        del x, dy

    medians = {(r["mode"], r["ffn"]): r["ms"][0] for r in rows if r["provider"] == "fastglu"}
    for r in rows:
        if (r["mode"], r["ffn"]) in medians:
            r["ratio_to_fastglu"] = r["ms"][0] / medians[r["mode"], r["ffn"]]
    rows.sort(
        key=lambda r: (records.MODES.index(r["mode"]), r["ffn"], PROVIDERS.index(r["provider"]))
    )

    table = render_table(rows)
    (out / "table.txt").write_text(table)
    summary = {
        "gpu": gpu,
        "device_slug": device_slug,
        "versions": {k: v for k, v in base_versions.items() if v},
        "copy_TBps": bandwidth / 1e12 if bandwidth else None,
        "rep_ms": args.rep,
        "notes": notes,
        "environment": env,
        "rows": rows,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    write_liger_csv(out / "all_benchmark_data.csv", rows, gpu, seq, batch)
    print(f"wrote {len(rows)} records, summary.json, table.txt and all_benchmark_data.csv to {out}")
    if not rows:
        print("note: no provider ran, so no plots")
        return
    try:
        from .report import write_report

        write_report(out / "summary.json")
        print(f"wrote median_ms.png and cells.md to {out}")
    except ImportError as e:  # matplotlib is optional
        print(f"note: no plots ({e}; pip install matplotlib, or fastglu[bench])")


LIGER_COLUMNS = [
    "kernel_name",
    "kernel_provider",
    "kernel_operation_mode",
    "metric_name",
    "metric_unit",
    "x_name",
    "x_label",
    "x_value",
    "y_value_50",
    "y_value_20",
    "y_value_80",
    "extra_benchmark_config_str",
    "gpu_name",
    "timestamp",
    "liger_version",
]


def write_liger_csv(path, rows, gpu, seq, batch):
    """The rows in the column layout of Liger-Kernel's benchmark/data/all_benchmark_data.csv, so
    that Liger's benchmarks_visualizer.py can plot them (kernel megatron_swiglu, x = F)."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=LIGER_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow(
                {
                    "kernel_name": "megatron_swiglu",
                    "kernel_provider": r["provider"],
                    "kernel_operation_mode": r["mode"],
                    "metric_name": "speed",
                    "metric_unit": "ms",
                    "x_name": "F",
                    "x_label": "ffn_hidden_size",
                    "x_value": r["ffn"],
                    "y_value_50": r["ms"][0],
                    "y_value_20": r["ms"][1],
                    "y_value_80": r["ms"][2],
                    "extra_benchmark_config_str": json.dumps(
                        {"S": seq, "B": batch, "dtype": r["dtype"]}
                    ),
                    "gpu_name": gpu,
                    "timestamp": stamp,
                    "liger_version": r["versions"].get("liger_version")
                    or pkg_version("liger-kernel")
                    or "",
                }
            )


if __name__ == "__main__":
    main()
