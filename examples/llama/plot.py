"""Plot the loss curves train.py wrote: the torch and fastglu training losses (top), and each run's
|loss - loss(torch)| per step on a log scale (bottom).

    python examples/llama/plot.py RESULTS_JSON [--out PNG]     (default: loss.png next to the JSON)

train.py calls ``plot()`` itself; this entry point redraws a plot from a results.json written where
matplotlib was missing (e.g. on the GPU machine).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def plot(result: dict, path: Path):
    """Draw ``result`` (train.py's results.json, as a dict) into ``path``; returns the path, or None
    when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    runs, cfg = result["runs"], result["config"]
    steps = range(1, len(runs["torch"]["loss"]) + 1)
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 8), sharex=True, gridspec_kw={"height_ratios": (3, 2)}
    )
    fused = cfg.get("mlp", "fused") == "fused"
    top.plot(steps, runs["torch"]["loss"], label="torch: silu(gate) * up", lw=2.5, alpha=0.6)
    fastglu_label = "fastglu.swiglu([gate | up])" if fused else "fastglu.silu_mul(gate, up)"
    top.plot(steps, runs["fastglu"]["loss"], label=fastglu_label, lw=1, ls="--")
    if "fp8" in runs:
        top.plot(steps, runs["fp8"]["loss"], label="fastglu.mlp_fp8 (FP8 GEMMs, blockwise)", lw=1)
    top.set_ylabel("training loss (nats / character)")
    top.set_title(
        f"Llama-style decoder, {cfg['device']} {cfg['dtype']}: dim {cfg['dim']}, {cfg['layers']} layers, "
        f"ffn {cfg['ffn']} ({cfg.get('mlp', 'fused')}), {cfg['batch']}x{cfg['seq']} characters / step",
        fontsize=10,
    )
    top.legend()
    top.grid(alpha=0.3)
    ref = runs["torch"]["loss"]
    labels = {
        "fastglu": "fastglu - torch",
        "rounding": "rounding control (gate * sigmoid(gate) * up) - torch",
        "control": "control (torch again) - torch",
        "fp8": "fastglu.mlp_fp8 (FP8 block) - torch",
    }
    for name, label in labels.items():
        if name not in runs:
            continue
        d = [abs(a - b) for a, b in zip(runs[name]["loss"], ref)]
        if max(d) == 0.0:  # nothing to draw on a log scale
            bottom.plot([], [], " ", label=f"{label}: 0 at every step")
            continue
        zeros = d.count(0.0)
        bottom.plot(
            steps,
            [v if v > 0 else float("nan") for v in d],
            marker=".",
            ms=3 if name == "fastglu" else 2,
            lw=0.5,
            alpha=1.0 if name == "fastglu" else 0.6,
            label=label + (f" (0 at {zeros} steps, not drawn)" if zeros else ""),
        )
    bottom.hlines(
        cfg["tol_early"],
        1,
        cfg["early"],
        color="r",
        lw=1,
        ls="--",
        label=f"tolerance over the first {cfg['early']} steps",
    )
    if "fp8" in runs and cfg.get("fp8_band"):
        n = len(ref)
        bottom.hlines(
            cfg["fp8_band"],
            n - max(1, n // 10) + 1,
            n,
            color="purple",
            lw=1,
            ls=":",
            label="fp8 band (mean |delta loss| over the last tenth, and held-out)",
        )
    bottom.set_yscale("log")
    bottom.set_xlabel("step")
    bottom.set_ylabel("|delta loss|")
    title = (
        f"fastglu vs torch: max |delta loss| {result['max_abs_dloss']:.2g} (step "
        f"{result['max_abs_dloss_step']}), {result['early_max_abs_dloss']:.2g} over the first "
        f"{cfg['early']} steps"
    )
    f8 = result.get("vs_torch", {}).get("fp8")
    if f8 and "tail_mean_abs_dloss" in f8:
        title += (
            f"\nfp8 vs torch: mean |delta loss| {f8['tail_mean_abs_dloss']:.2g} over the last "
            f"tenth, held-out {f8['abs_dval_loss']:.2g} (band {cfg.get('fp8_band', 0):.2g})"
        )
    bottom.set_title(title, fontsize=10)
    bottom.legend(fontsize=8)
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="results.json written by train.py")
    p.add_argument("--out", type=Path, help="PNG to write (default: loss.png next to the JSON)")
    args = p.parse_args(argv)
    out = args.out or args.results.with_name("loss.png")
    if plot(json.loads(args.results.read_text()), out) is None:
        p.error("matplotlib is not installed (pip install matplotlib)")
    print(out)


if __name__ == "__main__":
    main()
