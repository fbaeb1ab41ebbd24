"""fastglu.megatron.apply(mlp=True): Megatron-Core's MLP on fastglu.mlp, against Megatron's own
forward on the same weights and inputs (outputs, output bias, dx and every parameter's gradient),
at TP = 1 (one gloo process) and TP = 2 (two gloo processes on the CPU; with two GPUs also two NCCL
processes, with and without sequence parallelism, whose Megatron mappings are CUDA-only); the
fallback for what it does not cover warns its reason once. Skipped without an importable
megatron-core (scripts/test_megatron.sh installs 0.16.0 and 0.19.2).

Tolerance: both sides round h, y and the result to the dtype: fp32 1e-5, bf16 2e-2 relative norm
(the adapter test's bound for Megatron's own bf16 path against fastglu's).
"""

import os
import socket
import warnings

import pytest
import torch
import torch.nn.functional as F_

import fastglu
import fastglu.megatron as fm

try:
    import megatron.core.transformer.mlp as MEGATRON_MLP  # noqa: N812
    from megatron.core import parallel_state
except Exception:  # not installed, or its own imports fail here
    MEGATRON_MLP = None
needs_megatron = pytest.mark.skipif(MEGATRON_MLP is None, reason="megatron-core is not importable")


@pytest.mark.skipif(
    not os.environ.get("FASTGLU_EXPECT_MEGATRON"), reason="FASTGLU_EXPECT_MEGATRON not set"
)
def test_expected_megatron_is_imported():
    """scripts/test_megatron.sh names the release it installed: a failed import fails here."""
    assert MEGATRON_MLP is not None, "megatron-core is not importable"


def rel_err(a, b):
    a, b = a.double(), b.double()
    n = b.norm()
    return ((a - b).norm() / n).item() if n > 0 else (a - b).norm().item()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_mlp(dtype, tp=1, **config):
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    cfg = TransformerConfig(
        num_layers=1,
        hidden_size=64,
        ffn_hidden_size=96,
        num_attention_heads=4,
        gated_linear_unit=True,
        use_cpu_initialization=True,
        params_dtype=dtype,
        tensor_model_parallel_size=tp,
        **config,
    )
    torch.manual_seed(1234)
    return MLP(
        cfg,
        MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear),
        ffn_hidden_size=96,
    )


def step(mlp, x, scale, dy):
    mlp.zero_grad(set_to_none=True)
    xi = x.clone().requires_grad_()
    y, y_bias = mlp(xi) if scale is None else mlp(xi, per_token_scale=scale)
    y.backward(dy)
    out = [y.detach(), None if y_bias is None else y_bias.detach(), xi.grad]
    return out + [p.grad for _, p in sorted(mlp.named_parameters())]


def compare(mlp, x, scale, dy, dtype):
    """(fastglu forwards taken, max relative error) of the routed forward against Megatron's own."""
    fm.undo()
    want = step(mlp, x, scale, dy)
    fm.apply(mlp=True)
    from fastglu import megatron_mlp

    before = megatron_mlp.counts["fastglu"]
    got = step(mlp, x, scale, dy)
    taken = megatron_mlp.counts["fastglu"] - before
    fm.undo()
    assert not megatron_mlp.is_routed()
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            assert g.shape == w.shape and g.dtype == w.dtype
            worst = max(worst, rel_err(g, w))
    return taken, worst


TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2}
CASES = {
    "swiglu-fused-bias": dict(
        activation_func=F_.silu, bias_activation_fusion=True, add_bias_linear=True
    ),
    "geglu-fused-bias": dict(
        activation_func=F_.gelu, bias_activation_fusion=True, add_bias_linear=True
    ),
    "swiglu-unfused-offset-clamp": dict(
        activation_func=F_.silu,
        bias_activation_fusion=False,
        add_bias_linear=True,
        glu_linear_offset=0.5,
        activation_func_clamp_value=2.0,
    ),
    "swiglu-probs": dict(
        activation_func=F_.silu, bias_activation_fusion=True, add_bias_linear=False
    ),
}


@pytest.fixture(scope="module")
def tp1():
    if MEGATRON_MLP is None:
        pytest.skip("megatron-core is not importable")
    import torch.distributed as dist

    created = not dist.is_initialized()
    if created:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", world_size=1, rank=0
        )
    made = not parallel_state.model_parallel_is_initialized()
    if made:
        parallel_state.initialize_model_parallel()
    yield
    if made:
        parallel_state.destroy_model_parallel()
    if created:
        dist.destroy_process_group()


@needs_megatron
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", list(CASES))
def test_tp1_matches_megatron(case, dtype, tp1):
    mlp = build_mlp(dtype, **CASES[case])
    with torch.no_grad():  # Megatron zero-initialises biases: make them count
        for name, p in mlp.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    probs = case == "swiglu-probs"
    x = (torch.randn(48, 64) if probs else torch.randn(8, 6, 64)).to(dtype)
    scale = torch.rand(48) + 0.25 if probs else None
    dy = torch.randn(x.shape).to(dtype)
    taken, err = compare(mlp, x, scale, dy, dtype)
    assert taken == 1
    assert err <= TOL[dtype]


@needs_megatron
def test_fallback_says_why_once(tp1):
    from fastglu import megatron_mlp

    mlp = build_mlp(
        torch.float32, activation_func=F_.gelu, bias_activation_fusion=False, add_bias_linear=False
    )
    x, dy = torch.randn(4, 2, 64), torch.randn(4, 2, 64)
    megatron_mlp._warned.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        taken, err = compare(mlp, x, None, dy, torch.float32)
        compare(mlp, x, None, dy, torch.float32)
    assert taken == 0 and err == 0.0  # Megatron's own forward, bitwise
    msgs = [str(w.message) for w in caught if "keeps its own forward" in str(w.message)]
    assert len(msgs) == 1 and "erf GELU" in msgs[0]


def _tp2_worker(rank, port, sequence_parallel, device, errors):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", world_size=2, rank=rank)
    try:
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)
        dtype = torch.float32
        mlp = build_mlp(
            dtype,
            tp=2,
            activation_func=F_.silu,
            bias_activation_fusion=True,
            add_bias_linear=True,
            sequence_parallel=sequence_parallel,
        ).to(device)
        with torch.no_grad():
            for name, p in mlp.named_parameters():
                if name.endswith("bias"):
                    p.copy_(
                        torch.randn(p.shape, generator=torch.Generator().manual_seed(5)).to(dtype)
                    )
        g = torch.Generator().manual_seed(9)
        x = torch.randn(8, 3, 64, generator=g).to(dtype).to(device)
        dy = torch.randn(8, 3, 64, generator=g).to(dtype).to(device)
        if sequence_parallel:  # each rank holds its half of the sequence
            x, dy = x[rank * 4 : (rank + 1) * 4], dy[rank * 4 : (rank + 1) * 4]
        errors[rank] = compare(mlp, x, None, dy, dtype)
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()


TWO_GPUS = torch.cuda.is_available() and torch.cuda.device_count() >= 2 and fastglu.cuda_available()


@needs_megatron
@pytest.mark.parametrize(
    "sequence_parallel, device",
    [
        (False, "cpu"),
        # Megatron's sequence-parallel mappings allocate on torch.cuda.current_device(): CUDA only
        pytest.param(
            False, "cuda", marks=pytest.mark.skipif(not TWO_GPUS, reason="needs 2 CUDA GPUs")
        ),
        pytest.param(
            True, "cuda", marks=pytest.mark.skipif(not TWO_GPUS, reason="needs 2 CUDA GPUs")
        ),
    ],
    ids=["tp2-cpu", "tp2-cuda", "tp2-sp-cuda"],
)
def test_tp2_matches_megatron(sequence_parallel, device):
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        errors = manager.dict()
        mp.spawn(_tp2_worker, args=(free_port(), sequence_parallel, device, errors), nprocs=2)
        results = dict(errors)
    assert set(results) == {0, 1}
    for rank, (taken, err) in results.items():
        assert taken == 1, rank
        assert err <= TOL[torch.float32], (rank, err)
