"""Tests of fastglu.bench.records against the project's seed record (no GPU needed)."""

import copy
import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"  # beside the checkout in CI; the GPU machine gets the repo alone
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason=f"{SHARED} (the seed and peers records) is absent"
)
from fastglu.bench import records  # noqa: E402

# Free-form maps whose keys legitimately differ from the seed's.
OPEN_MAPS = {("run", "metadata", "labels"), ("environment", "spec", "software")}
OBSERVED = dt.datetime(2026, 7, 26, 0, 9, 55, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def seed():
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} (the seed record) is absent")
    text = (SHARED / "seed" / "000_ce942733f966174c.txt").read_text()
    header, body = text.split("\n", 1)
    assert header.strip() == "PyTorch"
    return json.loads(body)


def make_record(seed_ms=(1.2886880040168762, 1.287782382965088, 1.289689588546753), **overrides):
    args = dict(
        provider="megatron",
        mode="backward",
        seq=2048,
        batch=4,
        ffn=8192,
        dtype="bf16",
        ms=seed_ms,
        device_slug="nvidia-h100-80gb-hbm3",
        observed=OBSERVED,
        versions={
            "torch_version": "2.11.0+cu130",
            "liger_version": "0.8.1",
            "fastglu_version": None,
        },
        protocol_obj=records.protocol("backward"),
        environment_obj=records.environment(
            records.gpu_hardware("NVIDIA H100 80GB HBM3", 85_045_870_592, (9, 0)),
            {"torch": "2.11.0+cu130", "cuda": "13.0", "driver": None},
            "nvidia-h100-80gb-hbm3",
            "NVIDIA H100 80GB HBM3",
        ),
    )
    args.update(overrides)
    return records.run_record(**args)


def key_diffs(ours, theirs, path=()):
    """Paths where the two JSON trees differ in keys (or in being dict/list)."""
    if isinstance(theirs, dict):
        if not isinstance(ours, dict):
            return [path]
        if path in OPEN_MAPS:
            return []
        diffs = [path + (k,) for k in set(ours) ^ set(theirs)]
        return diffs + [
            d for k in set(ours) & set(theirs) for d in key_diffs(ours[k], theirs[k], path + (k,))
        ]
    if isinstance(theirs, list):
        if not isinstance(ours, list) or len(ours) != len(theirs):
            return [path]
        return [
            d for i, (o, t) in enumerate(zip(ours, theirs)) for d in key_diffs(o, t, path + (i,))
        ]
    return [path] if isinstance(ours, (dict, list)) else []


def test_record_has_the_seed_keys(seed):
    assert key_diffs(make_record(), seed) == []


def test_record_reproduces_the_seed_run_fields(seed):
    ours, theirs = make_record()["run"], seed["run"]
    assert ours["apiVersion"] == theirs["apiVersion"] == "kernelindex.dev/v1alpha1"
    assert ours["kind"] == theirs["kind"]
    for key in ("status", "timing", "observedAt", "measurements"):
        assert ours["spec"][key] == theirs["spec"][key], key
    native, seed_native = ours["spec"]["sourceNative"], theirs["spec"]["sourceNative"]
    assert native["source"] == "fastglu-bench"
    assert {k: native[k] for k in ("metrics", "benchmark", "externalId")} == {
        k: seed_native[k] for k in ("metrics", "benchmark", "externalId")
    }
    assert ours["metadata"]["title"] == theirs["metadata"]["title"]
    assert ours["metadata"]["name"] == "fastglu-" + theirs["metadata"]["name"].removeprefix(
        "liger-"
    )
    assert ours["metadata"]["labels"] == {"torch_version": "2.11.0+cu130", "liger_version": "0.8.1"}


def test_observed_at_has_milliseconds_in_utc():
    local = dt.datetime(2026, 7, 26, 2, 9, 55, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert make_record(observed=local)["run"]["spec"]["observedAt"] == "2026-07-26T00:09:55.123Z"


def test_protocol_and_environment_follow_the_seed(seed):
    record = make_record()
    for part, kind in (("protocol", "BenchmarkProtocol"), ("environment", "ExecutionEnvironment")):
        assert record[part]["kind"] == seed[part]["kind"] == kind
        assert record[part]["apiVersion"] == seed[part]["apiVersion"]
    assert record["protocol"]["spec"]["harness"]["name"] == "fastglu python -m fastglu.bench"
    assert record["environment"]["spec"]["hardware"] == seed["environment"]["spec"]["hardware"]
    assert record["environment"]["spec"]["software"] == {"torch": "2.11.0+cu130", "cuda": "13.0"}
    notes = {m: records.protocol(m)["spec"]["comparability"]["notes"] for m in records.MODES}
    assert len(set(notes.values())) == len(records.MODES)


def test_gpu_hardware_without_memory_in_the_name():
    assert records.gpu_hardware("NVIDIA H200", int(139.8 * 2**30), (9, 0)) == {
        "vendor": "nvidia",
        "product": "NVIDIA H200",
        "formFactor": "140GB",
        "architecture": "sm_90",
    }


def test_gpu_slug():
    assert records.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert records.slug("NVIDIA H200") == "nvidia-h200"
    assert records.slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100-sxm4-80gb"


def test_digest_is_sha256_of_canonical_json():
    obj = {"b": [1, 2], "a": {"y": "·", "x": 1.5}}
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    assert records.canonical_json(obj) == canonical == '{"a":{"x":1.5,"y":"\\u00b7"},"b":[1,2]}'
    assert records.digest(obj) == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    assert records.digest(dict(reversed(list(obj.items())))) == records.digest(obj)
    changed = copy.deepcopy(obj)
    changed["a"]["x"] = 2.5
    assert records.digest(changed) != records.digest(obj)


def test_record_digests_cover_their_objects():
    record = make_record()
    spec = record["run"]["spec"]
    assert spec["protocolDigest"] == records.digest(record["protocol"])
    assert spec["environmentDigest"] == records.digest(record["environment"])
    assert spec["workloadDigest"] == records.digest(
        {
            "op": "swiglu",
            "layout": "megatron",
            "S": 2048,
            "B": 4,
            "F": 8192,
            "dtype": "bf16",
            "mode": "backward",
        }
    )
    assert spec["implementationDigest"] == records.digest(
        {
            "provider": "megatron",
            "versions": {"torch_version": "2.11.0+cu130", "liger_version": "0.8.1"},
        }
    )
    for digest in ("protocolDigest", "workloadDigest", "environmentDigest", "implementationDigest"):
        assert spec[digest].startswith("sha256:") and len(spec[digest]) == 7 + 64


@pytest.mark.parametrize(
    "overrides, changed",
    [
        ({"ffn": 4096}, "workloadDigest"),
        ({"dtype": "fp16"}, "workloadDigest"),
        ({"protocol_obj": records.protocol("backward", rep=20)}, "protocolDigest"),
        (
            {
                "environment_obj": records.environment(
                    records.gpu_hardware("NVIDIA H200", 150 * 10**9, (9, 0)),
                    {},
                    "nvidia-h200",
                    "NVIDIA H200",
                )
            },
            "environmentDigest",
        ),
        ({"provider": "liger"}, "implementationDigest"),
        ({"versions": {"torch_version": "2.12.0"}}, "implementationDigest"),
    ],
)
def test_digests_change_with_content(overrides, changed):
    base, other = make_record()["run"]["spec"], make_record(**overrides)["run"]["spec"]
    digests = ("protocolDigest", "workloadDigest", "environmentDigest", "implementationDigest")
    assert {d for d in digests if base[d] != other[d]} == {changed}


@needs_shared
def test_floor_matches_the_peers_file():
    peers = json.loads((SHARED / "peers" / "h200-2026-11-30.json").read_text())
    rows = [r for r in peers["rows"] if "floor_ms" in r]
    assert rows
    for r in rows:
        ours = records.floor_ms(r["mode"], 2048, 4, r["ffn"], 2, peers["copy_TBps"] * 1e12)
        assert ours == pytest.approx(r["floor_ms"], rel=1e-9), r
    assert records.FLOOR_ELEMS == {"forward": 3, "backward": 8, "full": 8, "bwd_only": 5}


def test_record_filename():
    assert (
        records.record_filename("fastglu", "bwd_only", 2048, 4, 8192, "bf16")
        == "bwd_only_fastglu_batch4-ffn8192-seq2048-bf16.json"
    )


def test_liger_csv_has_ligers_columns_and_one_row_per_record(tmp_path):
    import csv

    from fastglu.bench.swiglu import LIGER_COLUMNS, write_liger_csv

    rows = [
        {
            "provider": p,
            "mode": "backward",
            "ffn": 8192,
            "dtype": "bf16",
            "ms": [1.0, 0.9, 1.1],
            "versions": {"liger_version": "0.8.5"} if p == "liger" else {},
        }
        for p in ("fastglu", "liger")
    ]
    path = tmp_path / "all_benchmark_data.csv"
    write_liger_csv(path, rows, "NVIDIA H200", 2048, 4)
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        assert (
            reader.fieldnames
            == LIGER_COLUMNS
            == [
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
        )
        got = list(reader)
    assert [r["kernel_provider"] for r in got] == ["fastglu", "liger"]
    assert (
        got[1]["liger_version"] == "0.8.5"
        and got[0]["x_value"] == "8192"
        and got[0]["y_value_50"] == "1.0"
    )
    assert json.loads(got[0]["extra_benchmark_config_str"]) == {"S": 2048, "B": 4, "dtype": "bf16"}


def test_variants_readme_table_keeps_what_a_failing_provider_measured():
    """A provider that failed in bwd_only keeps its forward cell (and takes part in the bold), the
    failed pass reads "failed", and its error is quoted; a provider that failed before measuring
    anything reads "failed" in both passes."""
    from fastglu.bench.variants import readme_table

    def mode(ms, floor=0.1):
        return {
            "ms": ms,
            "ms_20": ms,
            "ms_80": ms,
            "bytes": 1,
            "floor_ms": floor,
            "ratio_to_floor": ms / floor,
        }

    base = {"variant": "v", "S": 2, "B": 1, "F": 4, "dtype": "bf16"}
    rows = [
        dict(base, provider="a", err_fwd=1e-3, err_dx=2e-3, forward=mode(0.12), bwd_only=mode(0.2)),
        dict(
            base,
            provider="b",
            err_fwd=3e-3,
            err_dx=4e-3,
            forward=mode(0.11),
            error="RuntimeError('x')",
        ),
        dict(base, provider="c", error="ImportError('y')"),
    ]
    data = {"meta": {"gpu": "G", "copy_bandwidth_bytes_per_s": 4e12}, "rows": rows}
    lines = readme_table(data, "src.json").splitlines()
    assert lines[-3] == "| v | a | 0.1200 (1.20x) | **0.2000 (2.00x)** | 1.0e-03, 2.0e-03 |"
    assert (
        lines[-2]
        == "| v | b | **0.1100 (1.10x)** | failed | 3.0e-03, 4.0e-03; `RuntimeError('x')` |"
    )
    assert lines[-1] == "| v | c | failed | failed | `ImportError('y')` |"


def test_environment_carries_the_host_identity_function_time():
    """Records from different hosts read side by side: the environment names the host's floor for
    a Python autograd.Function (forward and forward + backward per call) and the device it ran on."""
    from fastglu.bench.swiglu import describe_device

    _, slug, env = describe_device(False)
    ident = env["spec"]["software"]["host_identity_fn_us"]
    assert slug == "cpu" and ident["device"] == "cpu"
    assert set(ident) == {"forward", "fwd_bwd", "device"}
    assert ident["forward"] > 0 and ident["fwd_bwd"] > 0
    assert records.digest(env)  # part of the digested environment


def test_rotated_rounds_times_each_fn_once_a_round_in_rotated_order():
    from fastglu.bench.swiglu import rotated_rounds

    calls = []

    def bench(fn, grads):
        calls.append((fn(), grads))
        return (float(len(calls)), 0.0, 0.0)

    fns = {"a": lambda: "a", "b": lambda: "b", "c": lambda: "c"}
    got = list(rotated_rounds(bench, fns, 4, grads={"b": "gb"}))
    assert [c for c, _ in calls] == list("abcbcacababc")
    assert all(g == ("gb" if c == "b" else None) for c, g in calls)
    assert [(r, n) for r, n, _ in got] == [(i // 3, c) for i, c in enumerate("abcbcacababc")]
    assert [ms[0] for _, _, ms in got] == [float(i) for i in range(1, 13)]
    assert list(rotated_rounds(bench, {}, 3)) == []


def bench_record(round_):
    return records.bench_run_record(
        benchmark="glu_fp8/forward",
        provider="fastglu",
        workload={"op": "glu_fp8", "T": 8192, "F": 8192},
        shape_slug="t8192-ffn8192-bf16-block",
        title="SwiGLU quantised to FP8",
        ms=(0.25, 0.24, 0.26),
        device_slug="nvidia-h200",
        protocol_obj=records.protocol("forward"),
        env=records.environment(
            records.gpu_hardware("NVIDIA H200", 150_000_000_000, (9, 0)),
            {"torch": "2.13.0"},
            "nvidia-h200",
            "NVIDIA H200",
        ),
        versions={"torch_version": "2.13.0", "triton_version": None},
        observed=OBSERVED,
        status="passed",
        round_=round_,
    )


def test_bench_run_record_has_the_seed_keys(seed):
    """The record of the MLP, GEMM and FP8 kernel benchmarks has the seed's keys; the round, where
    given, is in its labels, id and name."""
    for round_ in (None, 2):
        rec = bench_record(round_)
        assert key_diffs(rec, seed) == []
        run = rec["run"]
        assert run["spec"]["sourceNative"]["benchmark"] == "glu_fp8/forward"
        assert run["spec"]["timing"]["latencyNs"]["median"] == 250_000
        assert run["metadata"]["title"] == "SwiGLU quantised to FP8 · fastglu"
        assert "triton_version" not in run["metadata"]["labels"]
        tail = "" if round_ is None else "-r2"
        assert run["spec"]["sourceNative"]["externalId"].endswith("2026-07-26-00-09-55" + tail)
        assert run["metadata"]["name"].endswith("2026-07-26" + tail)
        assert run["metadata"]["labels"].get("round") == (None if round_ is None else "2")


@pytest.mark.parametrize(
    "module, argv, n_cases",
    [
        ("fp8", ["--tokens", "9", "--ffn", "3", "136", "--sums"], 2 * 10),
        ("quant_fp8", ["--shape", "9,16,24"], 5),
        ("fp8_store", ["--tokens", "5", "--ffn", "1", "130"], 8),
    ],
)
def test_kernel_benchmark_smoke(module, argv, n_cases, tmp_path, capsys):
    """python -m fastglu.bench.{fp8,quant_fp8,fp8_store} --smoke (the CPU backend): every case
    checked (ok: the kernels give the recipe's codes and scales), a seed-format record per
    provider, case and round, summary.json and table.txt."""
    import importlib

    bench = importlib.import_module(f"fastglu.bench.{module}")
    derived = bench.main(["--smoke", *argv, "--out", str(tmp_path)])
    assert len(derived) == n_cases
    assert all(d["check"] == "ok" and d["status"] == "passed" for d in derived)
    assert all(d["floor_ms"] is None and d["floor_bytes"] > 0 for d in derived)
    assert all(len(p["rounds_ms"]) == 2 for d in derived for p in d["providers"].values())
    files = sorted(tmp_path.glob("*_r[01].json"))
    assert len(files) == n_cases * 2 * 2  # cases x providers x rounds
    rec = json.loads(files[0].read_text())
    assert rec["run"]["apiVersion"] == records.API_VERSION
    assert rec["run"]["spec"]["sourceNative"]["benchmark"] in {d["benchmark"] for d in derived}
    assert rec["protocol"]["spec"]["harness"]["name"].endswith(f"fastglu.bench.{module}")
    assert rec["run"]["spec"]["protocolDigest"] == records.digest(rec["protocol"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["results"] == json.loads(json.dumps(derived))
    table = (tmp_path / "table.txt").read_text().splitlines()
    assert table[0].split()[:3] == ["benchmark", "workload", "case"] and len(table) == 1 + n_cases
    assert "the harness only" in capsys.readouterr().out


def test_kernel_benchmark_records_a_failed_check(tmp_path):
    """A case whose check did not pass gives fastglu's records the status "failed" (the
    baseline's stay "passed"), in the summary too."""
    import argparse

    from fastglu.bench import kernels

    case = kernels.Case(
        benchmark="demo/forward",
        slug="t4",
        label="demo",
        title="demo",
        workload={"op": "demo"},
        providers={"fastglu": lambda: None, "torch": lambda: None},
        floor_bytes=16,
        check="MISMATCH: 1 codes",
    )
    args = argparse.Namespace(on_gpu=False, smoke=True, rep=1, rounds=2, out=tmp_path)
    (d,) = kernels.run(
        args, harness="demo", out_suffix="demo", what={"demo/forward": "x"}, cases=lambda _: [case]
    )
    assert d["status"] == "failed" and d["check"] == "MISMATCH: 1 codes"
    status = {
        p.name: json.loads(p.read_text())["run"]["spec"]["status"]
        for p in tmp_path.glob("demo_forward_*.json")
    }
    assert status == {
        "demo_forward_fastglu_t4_r0.json": "failed",
        "demo_forward_fastglu_t4_r1.json": "failed",
        "demo_forward_torch_t4_r0.json": "passed",
        "demo_forward_torch_t4_r1.json": "passed",
    }


def test_kernel_benchmark_arguments_refused(capsys):
    """--rounds, --rep, --tokens and --ffn must be positive integers and --shape three of them:
    argparse's error (exit status 2), never a crash later or a default in a zero's place."""
    from fastglu.bench import fp8, fp8_store, quant_fp8

    for main, argv in (
        (fp8.main, ["--rounds", "0"]),
        (fp8.main, ["--tokens", "0"]),
        (fp8.main, ["--ffn", "64", "-3"]),
        (fp8_store.main, ["--ffn", "0"]),
        (fp8_store.main, ["--rep", "x"]),
        (quant_fp8.main, ["--shape", "8,16"]),
        (quant_fp8.main, ["--shape", "8,x,16"]),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and argv[0] in capsys.readouterr().err
