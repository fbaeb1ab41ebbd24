"""The harness the FP8 kernels' benchmarks share (fastglu.bench.fp8, .quant_fp8, .fp8_store).

Each benchmark builds cases: one kernel call at one workload, timed as fastglu's provider (the
first) against a baseline (the second: the same result in separate passes) and against the floor
of the bytes the kernel must move at the device's copy bandwidth. Every case is checked before it
is timed (its ``check``: "ok", or what broke the bound), then timed in rounds with the provider
order rotated each round, as the seed's protocol times providers (triton.testing.do_bench, rep
100 ms, quantiles 0.5 / 0.2 / 0.8, one process). Written under --out: one record per provider,
case and round in the seed's format (kernelindex.dev/v1alpha1, ``records.bench_run_record``;
fastglu's status "failed" where the check did not pass), summary.json (per case: each provider's
median over the rounds and the rounds' times, the floor, fastglu's ratio to it, the speedup over
the baseline, the spread of fastglu's rounds) and table.txt. Without a GPU (or with --smoke) the
CPU backend runs on tiny shapes with a host timer and no floor: that exercises the harness, not
the kernels.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import statistics
from pathlib import Path
from typing import Callable, Iterable

import torch

import fastglu

from . import records
from .swiglu import (
    copy_bandwidth,
    describe_device,
    git_remote,
    make_bench,
    pkg_version,
    rotated_rounds,
)

NOTES = (
    "Timed: {what}, via {how}. Inputs from torch.randn; every provider timed in the same process, "
    "{rounds} rounds with the provider order rotated each round. The floor is the bytes the kernel "
    "must read and write at the device-to-device copy bandwidth of the same run. Comparable only "
    "within one benchmark, workload and device."
)


@dataclasses.dataclass
class Case:
    """One timed workload. providers: name -> fn() (fastglu's first, the baseline second)."""

    benchmark: str  # "<name>/<pass>", e.g. "glu_fp8/forward"
    slug: str  # the workload's slug in record names, e.g. "t8192-ffn8192-bf16-block-colwise"
    label: str  # the case as the table names it
    title: str  # the records' title (the provider is appended)
    workload: dict  # what the records' workload digest covers
    providers: dict[str, Callable[[], object]]
    floor_bytes: int
    check: str  # "ok", or what broke the check's bound


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} is not >= 1")
    return v


def parser(prog: str, doc: str, out_suffix: str) -> argparse.ArgumentParser:
    """--rounds, --rep, --smoke and --out; the benchmark adds its workload arguments."""
    p = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--rounds",
        type=positive_int,
        default=3,
        help="rounds per case, provider order rotated (default 3)",
    )
    p.add_argument(
        "--rep", type=positive_int, default=100, help="do_bench repetition time in ms (default 100)"
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="the CPU backend on tiny shapes, 2 rounds of 5 ms (what runs without a GPU)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help=f"output directory (default bench/results/<device>/<UTC time>-{out_suffix})",
    )
    return p


def add_tokens_ffn(p: argparse.ArgumentParser) -> None:
    """--tokens T and --ffn F ... (positive; defaults by tokens_ffn)."""
    p.add_argument("--tokens", type=positive_int, help="T (default 8192; 64 on the CPU)")
    p.add_argument(
        "--ffn",
        type=positive_int,
        nargs="+",
        help="F values (default 2880 8192 14336; 200 256 on the CPU)",
    )


def tokens_ffn(args: argparse.Namespace) -> tuple[int, list[int]]:
    """(T, [F, ...]): add_tokens_ffn's values, or issue 26's on a GPU and tiny ones on the CPU."""
    T = args.tokens if args.tokens is not None else 8192 if args.on_gpu else 64
    ffns = args.ffn if args.ffn is not None else [2880, 8192, 14336] if args.on_gpu else [200, 256]
    return T, ffns


def parse(p: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """p.parse_args(argv), with on_gpu set (a CUDA device and no --smoke) and --smoke's schedule
    wherever the CPU runs."""
    args = p.parse_args(argv)
    args.on_gpu = torch.cuda.is_available() and not args.smoke
    if not args.on_gpu:
        args.rep, args.rounds = min(args.rep, 5), min(args.rounds, 2)
    return args


def protocol(benchmark: str, harness: str, what: str, timer: str, rep: int, rounds: int) -> dict:
    _, how = records.timer_how(timer, rep)
    notes = NOTES.format(what=what, how=how, rounds=rounds)
    return records.bench_protocol(benchmark, harness, notes, timer, git_remote())


def run(
    args: argparse.Namespace,
    *,
    harness: str,
    out_suffix: str,
    what: dict[str, str],
    cases: Callable[[str], Iterable[Case]],
) -> list[dict]:
    """Times every case of cases(device) and writes the records, summary.json and table.txt under
    args.out; returns the summary's rows. what: benchmark -> what it times (the protocol's notes)."""
    on_gpu = args.on_gpu
    if not on_gpu:
        print(
            f"{harness}: "
            + ("--smoke" if args.smoke else "no CUDA GPU")
            + ": the CPU backend on tiny shapes with a host timer and no floor (the harness only)"
        )
    bench = make_bench(on_gpu, args.rep)
    gpu, device_slug, env = describe_device(on_gpu)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S")
    out = args.out or Path("bench", "results", device_slug, f"{stamp}-{out_suffix}")
    out.mkdir(parents=True, exist_ok=True)
    bw = copy_bandwidth(bench) if on_gpu else None
    timer = "cuda_events" if on_gpu else "perf_counter"
    versions = {
        "fastglu_version": fastglu.__version__,
        "torch_version": torch.__version__,
        "triton_version": pkg_version("triton") if on_gpu else None,
        "cuda_version": torch.version.cuda,
    }
    print(
        f"{gpu}: torch {torch.__version__}"
        + (f", copy bandwidth {bw / 1e9:.0f} GB/s" if bw else "")
    )
    protos, derived, n_records = {}, [], 0
    for case in cases("cuda" if on_gpu else "cpu"):
        if case.benchmark not in protos:
            protos[case.benchmark] = protocol(
                case.benchmark, harness, what[case.benchmark], timer, args.rep, args.rounds
            )
        names = list(case.providers)
        status = {n: "passed" for n in names}
        status[names[0]] = "passed" if case.check == "ok" else "failed"
        rounds = {n: [] for n in names}
        for r, name, ms in rotated_rounds(bench, case.providers, args.rounds):
            rounds[name].append(ms[0])
            rec = records.bench_run_record(
                benchmark=case.benchmark,
                provider=name,
                workload=case.workload,
                shape_slug=case.slug,
                title=case.title,
                ms=ms,
                device_slug=device_slug,
                protocol_obj=protos[case.benchmark],
                env=env,
                versions=versions,
                observed=dt.datetime.now(dt.timezone.utc),
                status=status[name],
                round_=r,
            )
            fname = f"{case.benchmark.replace('/', '_')}_{name}_{case.slug}_r{r}.json"
            (out / fname).write_text(json.dumps(rec, indent=2, ensure_ascii=False) + "\n")
            n_records += 1
        med = {n: statistics.median(v) for n, v in rounds.items()}
        ours, base = names[0], names[1]
        floor_ms = case.floor_bytes / bw * 1e3 if bw else None
        d = {
            "benchmark": case.benchmark,
            "workload": case.slug,
            "case": case.label,
            "providers": {n: {"median_ms": med[n], "rounds_ms": rounds[n]} for n in names},
            "floor_bytes": case.floor_bytes,
            "floor_ms": floor_ms,
            "ratio_to_floor": med[ours] / floor_ms if floor_ms else None,
            "baseline": base,
            "speedup_vs_baseline": med[base] / med[ours],
            "spread": (max(rounds[ours]) - min(rounds[ours])) / med[ours],
            "check": case.check,
            "status": status[ours],
        }
        derived.append(d)
        print(
            f"{case.benchmark} {case.slug}: {ours} {med[ours]:.4f} ms"
            + (f" ({d['ratio_to_floor']:.3f}x floor)" if floor_ms else "")
            + f", {base} {med[base]:.4f} ms ({d['speedup_vs_baseline']:.2f}x), spread "
            f"{d['spread']:.3f}, check {case.check}",
            flush=True,
        )
    text = table(derived)
    (out / "table.txt").write_text(text)
    (out / "summary.json").write_text(
        json.dumps(
            {
                "gpu": gpu,
                "device_slug": device_slug,
                "harness": harness,
                "copy_bandwidth_bytes_per_s": bw,
                "rep_ms": args.rep,
                "rounds": args.rounds,
                "versions": {k: v for k, v in versions.items() if v},
                "environment": env,
                "results": derived,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {n_records} records, summary.json and table.txt to {out}")
    return derived


def table(derived: list[dict]) -> str:
    """Per case: fastglu's median ms, the floor, the ratio, the baseline's median, the speedup,
    fastglu's spread over the rounds (max - min over the median) and the check."""
    head = [
        "benchmark",
        "workload",
        "case",
        "fastglu ms",
        "floor ms",
        "x floor",
        "baseline ms",
        "speedup",
        "spread",
        "check",
    ]

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    lines = []
    for d in derived:
        ours, base = list(d["providers"])[:2]
        lines.append(
            [
                d["benchmark"],
                d["workload"],
                d["case"],
                fmt(d["providers"][ours]["median_ms"], ".4f"),
                fmt(d["floor_ms"], ".4f"),
                fmt(d["ratio_to_floor"], ".3f"),
                fmt(d["providers"][base]["median_ms"], ".4f"),
                fmt(d["speedup_vs_baseline"], ".2f"),
                fmt(d["spread"], ".3f"),
                d["check"],
            ]
        )
    return records.text_table(head, lines)
