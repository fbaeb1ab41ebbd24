#!/usr/bin/env python3
"""Plots and tables from a sweep (the summary.json that ``python -m fastglu.bench`` wrote).

    python -m fastglu.bench.report bench/results/nvidia-h200/<run>/records/summary.json [--out DIR] [--readme README.md]

Writes into --out (default: beside the summary): ``median_ms.png`` (median ms vs F, every provider, one panel per mode),
``fastglu_vs_floor.png`` (fastglu's median over the bandwidth floor, per mode), and
``cells.md`` (per (mode, F): fastglu's median, its ratio to the floor and to the fastest peer).
With ``--readme`` it replaces the README's text between ``<!-- perf-table:begin -->`` and
``<!-- perf-table:end -->`` with the seed-shape table of that run, so that the README's numbers
come from the records, not from a keyboard.

With ``--rounds S2 [S3 ...]`` (summaries of the same shapes from other processes, e.g. with the providers
in another order) it also writes ``rounds.md``: per (mode, F) measured in every round, fastglu's
median and the fastest peer's in each round, how many rounds fastglu was the fastest, and the
median over the rounds of each provider's medians (a cell that one round puts on either side of a
peer is read here, not from one run).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

MODES = ("forward", "backward", "full", "bwd_only")
PEERS = ("torch", "compile", "megatron", "liger")


def load(summary: Path):
    data = json.loads(summary.read_text())
    cells = defaultdict(dict)  # (mode, F) -> provider -> row
    for r in data["rows"]:
        cells[(r["mode"], r["ffn"])][r["provider"]] = r
    return data, cells


def run_label(data) -> str:  # data has rows (write_report and main return early otherwise)
    """'S=.. B=.. dtype, device: median of <timer> (rep .. ms)' from a summary's own fields."""
    r = data["rows"][0]
    timer = "triton do_bench" if data.get("copy_TBps") else "a perf_counter loop"
    return f"S={r['seq']} B={r['batch']} {r['dtype']}, {data['gpu']}: median of {timer} (rep {data['rep_ms']} ms)"


def _pyplot():
    """matplotlib's pyplot on the file backend, imported when a plot is made (the tables need none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_medians(cells, out: Path, label: str):
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(12, 9), sharex=True)
    for ax, mode in zip(axes.flat, MODES):
        ffns = sorted(F for (m, F) in cells if m == mode)
        for prov in ("fastglu",) + PEERS:
            pts = [(F, cells[(mode, F)][prov]["ms"][0]) for F in ffns if prov in cells[(mode, F)]]
            if pts:
                ax.plot(
                    *zip(*pts), marker="o", ms=3, label=prov, lw=2.2 if prov == "fastglu" else 1.2
                )
        floor = [
            (F, cells[(mode, F)]["fastglu"]["floor_ms"])
            for F in ffns
            if "fastglu" in cells[(mode, F)]
        ]
        if floor and floor[0][1]:
            ax.plot(*zip(*floor), "k--", lw=1, label="bandwidth floor")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(mode)
        ax.set_xlabel("F (ffn_hidden_size)")
        ax.set_ylabel("median ms")
        ax.grid(True, which="both", alpha=0.3)
    if axes[0, 0].get_legend_handles_labels()[0]:
        axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"SwiGLU, Megatron layout, {label}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_floor_ratio(cells, out: Path, gpu: str):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for mode in MODES:
        ffns = sorted(F for (m, F) in cells if m == mode and "fastglu" in cells[(m, F)])
        ax.plot(
            ffns,
            [cells[(mode, F)]["fastglu"]["ratio_to_floor"] for F in ffns],
            marker="o",
            label=mode,
        )
    ax.axhline(1.0, color="k", lw=1)
    ax.axhline(1.03, color="gray", ls=":", lw=1, label="1.03 x floor")
    ax.axhline(1.12, color="gray", ls="--", lw=1, label="1.12 x floor")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("F (ffn_hidden_size)")
    ax.set_ylabel("fastglu median / floor")
    ax.set_ylim(0.9, 2.0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title(f"fastglu vs the bandwidth floor (bytes / measured copy bandwidth), {gpu}")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def cells_table(cells) -> str:
    lines = [
        "| mode | F | fastglu ms | x floor | fastest peer | peer ms | fastglu / peer |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for mode in MODES:
        for F in sorted(F for (m, F) in cells if m == mode):
            c = cells[(mode, F)]
            if "fastglu" not in c:
                continue
            peers = {p: c[p]["ms"][0] for p in PEERS if p in c}
            fg = c["fastglu"]
            if not peers:
                continue
            best = min(peers, key=peers.get)
            floor_ratio = "n/a" if fg["ratio_to_floor"] is None else f"{fg['ratio_to_floor']:.3f}"
            lines.append(
                f"| {mode} | {F} | {fg['ms'][0]:.4f} | {floor_ratio} | {best} | "
                f"{peers[best]:.4f} | {fg['ms'][0] / peers[best]:.3f} |"
            )
    return "\n".join(lines) + "\n"


def seed_table(cells, data, summary: Path) -> str:
    """The seed shape's table (F = 8192), or the largest F's when the run has no 8192."""
    ffns = {F for (_, F) in cells}
    F = 8192 if 8192 in ffns else max(ffns)
    r = data["rows"][0]
    lines = [
        f"S={r['seq']} B={r['batch']} F={F} {r['dtype']}, median ms (p20-p80) from `{summary.as_posix()}`:",
        "",
        "| mode | " + " | ".join(("fastglu",) + PEERS) + " | floor |",
        "|---|" + "---:|" * (len(PEERS) + 2),
    ]
    for mode in MODES:
        c = cells.get((mode, F), {})
        if not c:
            continue
        vals = [
            f"{c[p]['ms'][0]:.4f} ({c[p]['ms'][1]:.4f}-{c[p]['ms'][2]:.4f})" if p in c else "n/a"
            for p in ("fastglu",) + PEERS
        ]
        floor = next(iter(c.values()))["floor_ms"]
        lines.append(
            f"| {mode} | "
            + " | ".join(vals)
            + (" | n/a |" if floor is None else f" | {floor:.4f} |")
        )
    return "\n".join(lines) + "\n"


def rounds_table(summaries) -> str:
    """rounds.md's text: the cells measured in every one of the summaries, round by round."""
    rounds = [load(p)[1] for p in summaries]
    keys = [
        k
        for k in sorted(rounds[0], key=lambda k: (MODES.index(k[0]), k[1]))
        if all(k in r and "fastglu" in r[k] for r in rounds)
    ]
    n = len(rounds)
    lines = [
        f"{n} rounds: {', '.join(Path(p).as_posix() for p in summaries)}",
        "",
        "| mode | F | fastglu ms, round by round | fastest peer, round by round | fastglu fastest |"
        " fastglu, median of rounds | fastest peer, median of rounds | fastglu / that peer |",
        "|---|---:|---|---|---:|---:|---|---:|",
    ]
    for key in keys:
        fg = [r[key]["fastglu"]["ms"][0] for r in rounds]
        best = []
        for r in rounds:
            peers = {p: r[key][p]["ms"][0] for p in PEERS if p in r[key]}
            best.append(min(peers.items(), key=lambda kv: kv[1]) if peers else None)
        if None in best:
            continue
        wins = sum(f < b[1] for f, b in zip(fg, best))
        peer_medians = {
            p: statistics.median(r[key][p]["ms"][0] for r in rounds)
            for p in PEERS
            if all(p in r[key] for r in rounds)
        }
        if not peer_medians:  # no peer measured in every round
            continue
        top = min(peer_medians, key=peer_medians.get)
        fg_med = statistics.median(fg)
        lines.append(
            f"| {key[0]} | {key[1]} | {' '.join(f'{v:.4f}' for v in fg)} | "
            f"{' '.join(f'{b[1]:.4f} {b[0]}' for b in best)} | {wins} of {n} | {fg_med:.4f} | "
            f"{peer_medians[top]:.4f} {top} | {fg_med / peer_medians[top]:.4f} |"
        )
    return "\n".join(lines) + "\n"


def write_report(summary: Path, out: Path | None = None) -> Path:
    """Plots and cells.md for one run; returns the directory written."""
    data, cells = load(summary)
    if not data["rows"]:
        raise SystemExit(f"{summary} has no rows: nothing to plot")
    out = out or summary.parent
    out.mkdir(parents=True, exist_ok=True)
    plot_medians(cells, out / "median_ms.png", run_label(data))
    if any(r.get("ratio_to_floor") for r in data["rows"]):
        plot_floor_ratio(cells, out / "fastglu_vs_floor.png", data["gpu"])
    (out / "cells.md").write_text(cells_table(cells))
    return out


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("summary", type=Path, help="summary.json written by python -m fastglu.bench")
    p.add_argument(
        "--out", type=Path, help="directory for the plots and cells.md (default: the summary's)"
    )
    p.add_argument("--readme", type=Path, help="README whose perf-table section to regenerate")
    p.add_argument(
        "--rounds",
        type=Path,
        nargs="+",
        metavar="SUMMARY",
        help="summary.json files of further rounds of the same shapes: also write rounds.md",
    )
    args = p.parse_args()
    out = write_report(args.summary, args.out)
    print(f"wrote the plots and cells.md to {out}")
    if args.rounds:
        (out / "rounds.md").write_text(rounds_table([args.summary, *args.rounds]))
        print(f"wrote rounds.md ({1 + len(args.rounds)} rounds) to {out}")
    if args.readme:
        data, cells = load(args.summary)
        text = args.readme.read_text()
        begin, end = "<!-- perf-table:begin -->", "<!-- perf-table:end -->"
        if begin not in text or end not in text:
            raise SystemExit(f"{args.readme} has no {begin} ... {end} section")
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        rel = args.summary.resolve().relative_to(args.readme.resolve().parent)
        args.readme.write_text(head + begin + "\n" + seed_table(cells, data, rel) + end + tail)
        print(f"updated the perf table in {args.readme}")


if __name__ == "__main__":
    main()
