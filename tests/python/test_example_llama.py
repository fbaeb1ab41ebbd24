"""Smoke test of examples/llama/train.py on the CPU: a tiny Llama-style model trained a few steps with
PyTorch's SwiGLU and with fastglu's; the loss curves agree to rounding, the loss falls, fastglu's
kernels really ran in every layer of every step, and a wrong activation is caught by the same check."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch

import fastglu

ROOT = Path(__file__).resolve().parents[2]
# --threads 1: the tiny model gains nothing from more (main() restores torch's setting)
TINY = [
    "--dim",
    "32",
    "--layers",
    "2",
    "--heads",
    "2",
    "--ffn",
    "48",
    "--seq",
    "32",
    "--batch",
    "8",
    "--steps",
    "30",
    "--log-every",
    "100",
    "--val-chars",
    "4096",
    "--threads",
    "1",
]
STEPS, LAYERS = 30, 2
TOL = 1e-4  # fp32: the tiny model's curves agree to ~5e-7; a wrong activation moves them by ~1e-3


@pytest.fixture(scope="module")
def train_mod():
    spec = importlib.util.spec_from_file_location(
        "llama_example_train", ROOT / "examples" / "llama" / "train.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counting(act, calls):
    """``act`` wrapped: checks that its output comes from a fastglu autograd Function (so the backward
    runs fastglu's kernel too) and counts forward calls and gradients arriving at the output."""

    def wrapped(*tensors):
        y = act(*tensors)
        if torch.is_grad_enabled():
            assert type(y.grad_fn)._forward_cls.__module__.startswith("fastglu."), y.grad_fn
            y.register_hook(lambda grad: calls.__setitem__("bwd", calls["bwd"] + 1))
        calls["fwd"] += 1
        return y

    return wrapped


@pytest.mark.parametrize("mlp", ["fused", "separate"])
def test_fp32_runs_agree_and_loss_falls(train_mod, tmp_path, monkeypatch, mlp):
    if train_mod.ACTIVATIONS[mlp]["fastglu"] is None:
        pytest.skip(f"this fastglu has no activation for --mlp {mlp}")
    calls = {"fwd": 0, "bwd": 0}
    monkeypatch.setitem(
        train_mod.ACTIVATIONS[mlp],
        "fastglu",
        counting(train_mod.ACTIVATIONS[mlp]["fastglu"], calls),
    )
    assert train_mod.main(TINY + ["--mlp", mlp, "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    runs = result["runs"]
    assert set(runs) == {"torch", "fastglu", "control", "rounding"}
    # fastglu ran forward and backward in every layer of every training step (the forward also in the
    # held-out evaluation)
    assert calls["bwd"] == STEPS * LAYERS
    assert calls["fwd"] > STEPS * LAYERS
    ref, fg = runs["torch"]["loss"], runs["fastglu"]["loss"]
    assert len(ref) == len(fg) == STEPS
    assert all(v == v for v in ref + fg)  # no NaN
    assert result["max_abs_dloss"] == max(abs(a - b) for a, b in zip(ref, fg)) <= TOL
    assert result["early_max_abs_dloss"] == max(
        abs(a - b) for a, b in zip(ref[:3], fg[:3])
    )  # --early: steps // 10
    assert (
        runs["control"]["loss"] == ref
    )  # torch on the CPU is deterministic: nothing else differs between runs
    assert result["vs_torch"]["rounding"]["max_abs_dloss"] <= TOL
    assert abs(runs["torch"]["val_loss"] - runs["fastglu"]["val_loss"]) <= TOL
    assert sum(ref[-3:]) / 3 < ref[0] - 0.5 and sum(fg[-3:]) / 3 < fg[0] - 0.5
    assert result["ok"] and all(result["checks"].values()) and len(result["checks"]) == 4
    assert "fastglu  vs torch: max |delta loss|" in (tmp_path / "train.log").read_text()
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("wrong", ["swapped", "geglu"])
def test_wrong_activation_is_caught(train_mod, tmp_path, wrong):
    """The comparison has teeth: gate and up swapped (silu(up) * gate), or GELU for SiLU, moves the
    curve ten times the tolerance away from fastglu's."""
    args = train_mod.parse_args(TINY + ["--out", str(tmp_path)])
    chars = train_mod.vocabulary()
    tokens = train_mod.encode(train_mod.make_corpus(8192, args.seed), chars)
    offsets = train_mod.batch_offsets(len(tokens), args.seq, args.batch, args.steps, args.seed)
    torch.manual_seed(args.seed)
    model0 = train_mod.Llama(len(chars), args.dim, args.layers, args.heads, args.ffn, args.seq)

    def bad_act(x):
        gate, up = x.chunk(2, dim=-1)
        if wrong == "swapped":
            return torch.nn.functional.silu(up) * gate
        return torch.nn.functional.gelu(gate) * up

    ref = train_mod.train(model0, train_mod.ACTIVATIONS["fused"]["fastglu"], tokens, offsets, args)[
        "loss"
    ]
    same = train_mod.train(model0, train_mod.torch_swiglu, tokens, offsets, args)["loss"]
    bad = train_mod.train(model0, bad_act, tokens, offsets, args)["loss"]
    assert train_mod.compare(ref, same)[0] <= TOL < 10 * TOL < train_mod.compare(ref, bad)[0]


def test_bf16_autocast_runs_agree(train_mod, tmp_path):
    """bf16 autocast on the CPU (the GPU run's mode): fastglu's bf16 kernels."""
    assert (
        train_mod.main(
            TINY + ["--steps", "15", "--dtype", "bfloat16", "--no-control", "--out", str(tmp_path)]
        )
        == 0
    )
    result = json.loads((tmp_path / "results.json").read_text())
    runs = result["runs"]
    assert set(runs) == {"torch", "fastglu", "rounding"}
    assert result["max_abs_dloss"] <= 2e-2
    # "rounding" is fastglu's own formula in torch (fp32 math, rounded once to bf16)
    assert train_mod.compare(runs["fastglu"]["loss"], runs["rounding"]["loss"])[0] <= 2e-2


def test_fp8_run_trains_within_the_band(train_mod, tmp_path, monkeypatch):
    """--fp8 (tiny, CPU: fastglu.mlp_fp8's reference path, the same quantised operands): the whole
    MLP ran as the FP8 block in every layer of every step, its curve is not the bf16 one (the
    quantisation moves it) but within the band, and the results carry its comparison."""
    calls = {"fwd": 0}
    block = train_mod.ACTIVATIONS["fused"]["fp8"]

    def counting(x, w1, w2):
        calls["fwd"] += 1
        return block(x, w1, w2)

    counting.whole_block = True
    monkeypatch.setitem(train_mod.ACTIVATIONS["fused"], "fp8", counting)
    argv = TINY + ["--fp8", "--no-control", "--no-rounding", "--out", str(tmp_path)]
    assert train_mod.main(argv) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    assert set(result["runs"]) == {"torch", "fastglu", "fp8"}
    assert calls["fwd"] > STEPS * LAYERS
    f8 = result["vs_torch"]["fp8"]
    # FP8 GEMMs, not the fp32 block again (the fastglu run: ~5e-7; fp8: ~3e-4 over these 30 steps)
    assert f8["max_abs_dloss"] > TOL
    assert (
        result["checks"]["fp8_band"] and f8["tail_mean_abs_dloss"] <= result["config"]["fp8_band"]
    )
    assert "fp8      vs torch: mean |delta loss|" in (tmp_path / "train.log").read_text()
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


BAD_ARGS = [
    ["--dim", "30", "--heads", "4"],
    ["--dim", "36", "--heads", "4"],
    ["--steps", "0"],
    ["--early", "0"],
    ["--dtype", "float16"],
    ["--device", "tpu"],
    ["--mlp", "interleaved"],
    ["--mlp", "separate", "--fp8"],
]


@pytest.mark.parametrize("bad", BAD_ARGS)
def test_bad_arguments_exit_2(train_mod, tmp_path, bad):
    with pytest.raises(SystemExit) as e:
        train_mod.parse_args(bad + ["--out", str(tmp_path)])
    assert e.value.code == 2


def test_main_restores_torch_settings(train_mod, tmp_path):
    threads = torch.get_num_threads()
    train_mod.main(
        TINY
        + [
            "--steps",
            "2",
            "--threads",
            str(threads + 1),
            "--no-control",
            "--no-rounding",
            "--out",
            str(tmp_path),
        ]
    )
    assert torch.get_num_threads() == threads


HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
def test_cuda_bf16_runs_agree(train_mod, tmp_path):
    """The GPU run's mode (scripts/device_llama.sh), tiny: fastglu's CUDA kernels in bf16 autocast."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    assert (
        train_mod.main(TINY + ["--device", "cuda", "--dtype", "bfloat16", "--out", str(tmp_path)])
        == 0
    )
    assert torch.are_deterministic_algorithms_enabled() == deterministic
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["max_abs_dloss"] <= 2e-2 and result["checks"]["loss_fell"]


@pytest.mark.skipif(HAS_CUDA, reason="a usable GPU is present")
def test_cuda_without_gpu_is_refused(train_mod, tmp_path):
    with pytest.raises(SystemExit) as e:
        train_mod.parse_args(["--device", "cuda", "--out", str(tmp_path)])
    assert e.value.code == 2
