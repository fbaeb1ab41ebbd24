"""Benchmark records in the kernelindex.dev/v1alpha1 format of the project's seed record.

Pure functions (no GPU, no torch) so they can be unit-tested anywhere: canonical JSON, digests, the
GPU slug, the hardware description, the protocol / environment objects, the run record, and the
memory-traffic floor of each timed mode.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

API_VERSION = "kernelindex.dev/v1alpha1"
SOURCE = "fastglu-bench"
HARNESS_NAME = "fastglu python -m fastglu.bench"
TITLE = "SwiGLU activation, Megatron layout"
MODES = ("forward", "backward", "full", "bwd_only")

# Minimum HBM traffic of each timed mode, in elements of T*F (T = S*B tokens, x is [T, 2F], y is [T, F]).
FLOOR_ELEMS = {
    "forward": 3,  # read x (2TF), write y (TF)
    "backward": 8,  # forward 3TF + y.sum() reads TF + backward reads x 2TF, writes dx 2TF
    "full": 8,  # forward 3TF + backward reads dy TF, x 2TF, writes dx 2TF
    "bwd_only": 5,  # reads dy TF, x 2TF, writes dx 2TF
}

_TIMED = {
    "forward": "the forward pass y = swiglu(x) with x requiring grad (the autograd graph is built)",
    "backward": "per iteration the forward y = swiglu(x) then y.sum().backward(), the input gradient reset "
    "to None before each iteration (the seed record's timed pass)",
    "full": "per iteration the forward y = swiglu(x) then y.backward(dy) with a fixed random upstream "
    "gradient dy, the input gradient reset to None before each iteration",
    "bwd_only": "y.backward(dy, retain_graph=True) with a fixed random upstream gradient dy on the graph of "
    "one untimed forward, the input gradient reset to None before each iteration",
}
_TIMERS = {
    "cuda_events": (
        "do-bench",
        "triton.testing.do_bench(rep={rep}, default warmup, L2 flushed between "
        "iterations) with quantiles 0.5/0.2/0.8 (median with p20/p80 spread)",
    ),
    "perf_counter": (
        "perf-counter",
        "time.perf_counter around each call on the CPU backend (do_bench-like "
        "25 ms warmup and {rep} ms of repetitions), median and p20/p80 via "
        "numpy.quantile",
    ),
}


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def digest(obj) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def slug(text: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def shape_tag(seq: int, batch: int, ffn: int, dtype: str) -> str:
    return f"batch{batch}-ffn{ffn}-seq{seq}-{dtype}"


def floor_ms(
    mode: str, seq: int, batch: int, ffn: int, elem_bytes: int, bytes_per_s: float
) -> float:
    """Time to move the mode's minimum traffic at the measured copy bandwidth."""
    return FLOOR_ELEMS[mode] * seq * batch * ffn * elem_bytes / bytes_per_s * 1e3


def gpu_hardware(name: str, total_mem_bytes: int, capability: tuple[int, int]) -> dict:
    """Hardware block from torch.cuda device properties; the memory suffix of the name ('80GB HBM3')
    is the form factor when present, else the rounded memory size in GiB."""
    m = re.search(r"[\s-](\d+\s*GB\b.*)$", name)
    return {
        "vendor": "nvidia",
        "product": name[: m.start()] if m else name,
        "formFactor": m.group(1) if m else f"{round(total_mem_bytes / 2**30)}GB",
        "architecture": f"sm_{capability[0]}{capability[1]}",
    }


def cpu_hardware(processor: str, machine: str, cores: int | None, mem_bytes: int | None) -> dict:
    form = [f"{cores} cores"] if cores else []
    form += [f"{round(mem_bytes / 2**30)}GB RAM"] if mem_bytes else []
    return {
        "vendor": "cpu",
        "product": processor or machine or "unknown",
        "formFactor": ", ".join(form) or "unknown",
        "architecture": machine or "unknown",
    }


def environment(hardware: dict, software: dict, device_slug: str, device_name: str) -> dict:
    return {
        "kind": "ExecutionEnvironment",
        "spec": {"hardware": hardware, "software": {k: v for k, v in software.items() if v}},
        "metadata": {
            "name": f"fastglu-bench-{device_slug}",
            "title": f"fastglu benchmark host · {re.sub(r'^NVIDIA ', '', device_name)}",
        },
        "apiVersion": API_VERSION,
    }


def timer_how(timer: str, rep: int) -> tuple[str, str]:
    """(tag, how): the timer's short name in protocol names and its description in the notes."""
    tag, how = _TIMERS[timer]
    return tag, how.format(rep=rep)


def text_table(head: list[str], lines: list[list]) -> str:
    """Rows as plain text, columns padded to their widest cell, two spaces apart."""
    widths = [max(len(str(c)) for c in col) for col in zip(head, *lines)]
    return (
        "\n".join(
            "  ".join(str(c).ljust(wd) for c, wd in zip(line, widths)).rstrip()
            for line in [head, *lines]
        )
        + "\n"
    )


def bench_protocol(
    benchmark: str, harness: str, notes: str, timer: str, repository, title: str | None = None
) -> dict:
    """The protocol object of a fastglu benchmark (the seed's, the MLP block, the GEMM, the FP8
    kernels): its harness, timer and notes (timer_how's text in them); title: the metadata title
    (default "fastglu benchmark harness · <benchmark>")."""
    tag, _ = _TIMERS[timer]
    return {
        "kind": "BenchmarkProtocol",
        "spec": {
            "harness": {"name": harness, "repository": repository},
            "measurement": {"timer": timer, "primaryStatistic": "median"},
            "comparability": {"notes": notes, "family": "fastglu_bench"},
        },
        "metadata": {
            "name": f"fastglu-bench-{tag}-{slug(benchmark)}",
            "title": title or f"fastglu benchmark harness · {benchmark}",
        },
        "apiVersion": API_VERSION,
    }


def protocol(
    mode: str, timer: str = "cuda_events", rep: int = 100, repository: str | None = None
) -> dict:
    _, how = timer_how(timer, rep)
    notes = (
        f"Timed: {_TIMED[mode]}, via {how}. Input x of shape [S, B, 2F] from torch.randn "
        "(gate = first F columns, up = last F); every provider timed in the same process. Comparable only "
        "within one kernel, workload, timed pass, and device."
    )
    return bench_protocol(
        mode, HARNESS_NAME, notes, timer, repository, f"fastglu benchmark harness · {mode} pass"
    )


def workload(seq: int, batch: int, ffn: int, dtype: str, mode: str) -> dict:
    return {
        "op": "swiglu",
        "layout": "megatron",
        "S": seq,
        "B": batch,
        "F": ffn,
        "dtype": dtype,
        "mode": mode,
    }


def _ns(ms: float) -> int:
    return int(round(ms * 1e6))


def run_record(
    *,
    provider: str,
    mode: str,
    seq: int,
    batch: int,
    ffn: int,
    dtype: str,
    ms: tuple[float, float, float],
    device_slug: str,
    protocol_obj: dict,
    environment_obj: dict,
    versions: dict,
    observed: dt.datetime,
    status: str = "passed",
) -> dict:
    """The seed benchmark's record (run, protocol, environment); ms = (p50, p20, p80) in
    milliseconds: bench_run_record with the seed's benchmark, workload, title and no round."""
    return bench_run_record(
        benchmark=f"megatron_swiglu/{mode}",
        provider=provider,
        workload=workload(seq, batch, ffn, dtype, mode),
        shape_slug=shape_tag(seq, batch, ffn, dtype),
        title=TITLE,
        full_title=f"{TITLE} · {provider} · {mode}",
        ms=ms,
        device_slug=device_slug,
        protocol_obj=protocol_obj,
        env=environment_obj,
        versions=versions,
        observed=observed,
        status=status,
    )


def bench_run_record(
    *,
    benchmark,
    provider,
    workload,
    shape_slug,
    title,
    ms,
    device_slug,
    protocol_obj,
    env,
    versions,
    observed,
    status,
    round_=None,
    full_title=None,
):
    """A record of any fastglu benchmark (the seed's, the MLP block, the GEMM, the FP8 kernels) in
    the seed's format: benchmark as "<name>/<pass>", workload the object its digest covers,
    shape_slug the workload's slug in names and ids, title without the provider (appended; or
    full_title as it is), ms = (p50, p20, p80) in milliseconds, round_ the round's index (in the
    labels, the id and the name) or None."""
    p50, p20, p80 = ms
    ns = _ns
    observed = observed.astimezone(dt.timezone.utc)
    labels = {k: str(v) for k, v in versions.items() if v}
    tail = "" if round_ is None else f"-r{round_}"
    if round_ is not None:
        labels["round"] = str(round_)
    stamp = observed.strftime("%Y-%m-%d-%H-%M-%S")
    run = {
        "kind": "BenchmarkRun",
        "spec": {
            "status": status,
            "timing": {"latencyNs": {"median": ns(p50)}, "primaryStatistic": "median"},
            "observedAt": observed.strftime("%Y-%m-%dT%H:%M:%S.")
            + f"{observed.microsecond // 1000:03d}Z",
            "measurements": [
                {"unit": "ns", "value": ns(v), "metric": "latency", "statistic": s}
                for s, v in (("p20", p20), ("p80", p80))
            ],
            "sourceNative": {
                "source": SOURCE,
                "metrics": {"ms_20": p20, "ms_50": p50, "ms_80": p80},
                "benchmark": benchmark,
                "externalId": f"{benchmark}/{provider}/{device_slug}/{shape_slug}/{stamp}{tail}",
            },
            "protocolDigest": digest(protocol_obj),
            "workloadDigest": digest(workload),
            "environmentDigest": digest(env),
            "implementationDigest": digest({"provider": provider, "versions": labels}),
        },
        "metadata": {
            "name": slug(
                f"fastglu-{benchmark}-{provider}-{device_slug}-{shape_slug}-{observed:%Y-%m-%d}{tail}"
            ),
            "title": full_title or f"{title} · {provider}",
            "labels": labels,
        },
        "apiVersion": API_VERSION,
    }
    return {"run": run, "protocol": protocol_obj, "environment": env}


def record_filename(provider: str, mode: str, seq: int, batch: int, ffn: int, dtype: str) -> str:
    return f"{mode}_{provider}_{shape_tag(seq, batch, ffn, dtype)}.json"
