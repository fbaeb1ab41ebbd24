"""python -m fastglu.bench.mlp: the GLU MLP block (forward, forward + backward) and the plain GEMM,
fastglu against its peers.

Benchmarks (records in the seed's kernelindex.dev/v1alpha1 format, one per provider, workload and
round, under bench/results/<device>/<UTC time>-mlp/):

  mlp_glu/forward   x [T, H], w1 [2F, H] (gate rows | up rows), w2 [H, F], SwiGLU, no bias.
                    Pass "mlp": fc1 -> activation -> fc2 (the issue's table); pass "fc1": fc1 and the
                    activation only (the workload slug ends in -fc1; the record's title says which).
      fastglu            fastglu.mlp(x, w1, w2): the default path (fused=None: the fused fc1 + GLU
                         where the measurements put it ahead, else cuBLAS + the standalone kernels);
                         fc1 pass: the same choice between fastglu.linear_glu and F.linear + swiglu
      fastglu_fused      fastglu.mlp(x, w1, w2, fused=True) (fc1 + SwiGLU in one GEMM, then fc2);
                         fc1 pass: fastglu.linear_glu(x, w1, return_preact=False)
      fastglu_recompute  fwd_bwd only: fastglu.mlp(x, w1, w2, fused=True, recompute=True) (the
                         forward keeps x only; the backward recomputes h with one more fc1 GEMM)
      cublas_fastglu     F.linear(x, w1), fastglu.swiglu (standalone SwiGLU), F.linear(y, w2)
      cublas_compile     torch.compile of the eager MLP F.linear -> F.silu(gate) * up -> F.linear
                         (inductor on a GPU; aot_eager on the CPU, where it only exercises the harness)
      cublas_gemm_only   F.linear(x, w1), F.linear(buf, w2) with buf a ready contiguous [T, F] buffer
                         (h[:, :F] copied once): the two GEMMs alone, the activation removed (the limit)
      liger              Liger-Kernel's fused MLP forward (liger_kernel.ops.mlp.LigerMLPFunction)
      quack              quack.mlp.mlp_func(x, w1, w2, activation="swiglu", concat_layout=True,
                         tuned=--quack-tuned); fc1 pass: its fc1, quack.linear.linear_gated_func
                         (gemm_gated with concat_layout, h stored only when autograd needs it)
      megatron           Megatron-Core's MLP (TP = 1, local spec: ColumnParallelLinear fc1, its fused
                         bias_swiglu_impl, RowParallelLinear fc2; no bias), weights copied from w1, w2
      megatron_fastglu   the same module through fastglu.megatron's fused route (what
                         fastglu.megatron.apply(mlp=True) runs: fastglu.mlp on its weights)
                    (liger and the Megatron MLP have no fc1-only form: the "fc1" pass lists them
                    as skipped)
  mlp_glu/fwd_bwd   the same block, forward then backward with a fixed random dO (x, w1, w2 require
                    grad; their gradients reset to None before each iteration); providers as above
                    (cublas_gemm_only: the six GEMMs, fc1 and fc2 forward, dgrad and wgrad, fed
                    ready buffers). Checked: the output and dx against an fp32 torch autograd reference.
                    On a GPU each provider's peak memory over one step is recorded too (`peak MiB`:
                    torch.cuda.max_memory_allocated during the step less the memory allocated before
                    it, which holds x, the weights, dO and the previous step's gradients).
  gemm/forward      out = x @ w^T at the fc1 shape (M = T, N = 2F, K = H) and the fc2 shape
                    (M = T, N = H, K = F); providers fastglu (fastglu.linear) and cublas (F.linear).

Protocol (the seed's): triton.testing.do_bench(rep=100 ms) with quantiles 0.5/0.2/0.8, every
provider in one process, 3 rounds per workload with the provider order rotated each round; each
provider's output checked first against an fp32 torch reference (relative norm <= 1e-2 for bf16:
status "failed" otherwise). Without a GPU (or with --smoke) the CPU backend runs on tiny shapes with
a host timer, so that the harness itself is exercised in CI.

Beside the records: mlp.jsonl (one line per record), table.txt (per provider the median over the
rounds and its ratio to the baseline), ratios.txt (each fastglu provider's time over every other
provider's in the same round: median, min and max over the rounds) and summary.json.
``--ratios DIR`` rewrites DIR/ratios.txt from a finished run's mlp.jsonl.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F_

from . import records
from .swiglu import describe_device, git_remote, make_bench, pkg_version, rotated_rounds

SHAPES = [
    (8192, 4096, 8192),
    (8192, 4096, 14336),
    (16384, 2880, 2880),
    (4096, 8192, 3584),
    (1024, 4096, 14336),
]
SMOKE_SHAPES = [(16, 32, 24), (5, 24, 40)]
MLP_PROVIDERS = (
    "fastglu",
    "fastglu_fused",
    "fastglu_recompute",
    "cublas_fastglu",
    "cublas_compile",
    "cublas_gemm_only",
    "liger",
    "quack",
    "megatron",
    "megatron_fastglu",
)
MODES = ("forward", "fwd_bwd")
GEMM_PROVIDERS = ("fastglu", "cublas")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
TOLERANCE = {"bf16": 1e-2, "fp16": 1e-3}
NOTES = (
    "Timed: {what}, via {how}. Inputs from torch.randn (x) and torch.randn / sqrt(fan-in) (weights), no "
    "bias; every provider timed in the same process, {rounds} rounds with the provider order rotated each "
    "round. Comparable only within one benchmark, workload, pass, and device."
)


def block_parser(prog, doc, out_suffix, smoke_help):
    """The arguments the MLP-block benchmarks share (this one and ``fastglu.bench.fp8_mlp``):
    --shape (repeatable T,H,F), --rounds, --rep, --smoke, --out; parse with parse_block_args."""
    p = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--shape",
        action="append",
        metavar="T,H,F",
        help="a workload (tokens, hidden, ffn_hidden_size); repeat for several (default: the five "
        "of the issue on a GPU, two tiny ones on the CPU)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds per workload, provider order rotated (default 3)",
    )
    p.add_argument(
        "--rep", type=int, default=100, help="do_bench repetition time in ms (default 100)"
    )
    p.add_argument("--smoke", action="store_true", help=smoke_help)
    p.add_argument(
        "--out",
        type=Path,
        help=f"output directory (default bench/results/<device>/<UTC time>-{out_suffix})",
    )
    return p


def parse_block_args(p, argv):
    """p.parse_args(argv) with --shape as (T, H, F) tuples of positive integers and positive
    --rounds / --rep (argparse's error and exit status 2 otherwise)."""
    args = p.parse_args(argv)
    if args.shape:
        try:
            args.shape = [tuple(int(v) for v in s.split(",")) for s in args.shape]
        except ValueError:
            p.error(f"--shape takes T,H,F (three integers), got {args.shape}")
        if any(len(s) != 3 or min(s) < 1 for s in args.shape):
            p.error(f"--shape takes T,H,F (three positive integers), got {args.shape}")
    if args.rounds < 1 or args.rep < 1:
        p.error("--rounds and --rep must be positive")
    return args


def parse_args(argv=None):
    p = block_parser(
        "python -m fastglu.bench.mlp",
        __doc__,
        "mlp",
        "the CPU backend on two tiny shapes, rep 5 ms, 2 rounds",
    )
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--providers", nargs="+", choices=MLP_PROVIDERS, default=list(MLP_PROVIDERS))
    p.add_argument(
        "--mode",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="the MLP benchmarks to run: mlp_glu/forward, mlp_glu/fwd_bwd (default both)",
    )
    p.add_argument("--no-gemm", action="store_true", help="skip the gemm/forward benchmark")
    p.add_argument(
        "--ratios",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="times nothing: writes DIR/ratios.txt from a finished run's DIR/mlp.jsonl, each DIR",
    )
    p.add_argument(
        "--quack-tuned",
        action="store_true",
        help="quack's mlp_func with tuned=True (autotunes on each shape's first call: about 8 "
        "minutes for the five shapes on 16 cores; QUACK_CACHE_AUTOTUNING=1 keeps the choices on "
        "disk for a later process); default tuned=False",
    )
    args = parse_block_args(p, argv)
    for d in args.ratios or ():
        if not d.is_dir():
            p.error(f"--ratios {d}: not a directory")
        if not (d / "mlp.jsonl").is_file():
            p.error(f"--ratios {d}: no mlp.jsonl there (a finished run's output directory)")
    return args


def slug_of(T, H, F, dtype, suffix=""):
    return f"t{T}-h{H}-ffn{F}-{dtype}" + (f"-{suffix}" if suffix else "")


def protocol(benchmark, what, timer, rep, rounds, repository):
    _, how = records.timer_how(timer, rep)
    notes = NOTES.format(what=what, how=how, rounds=rounds)
    return records.bench_protocol(
        benchmark, "fastglu python -m fastglu.bench.mlp", notes, timer, repository
    )


# ---- providers ----------------------------------------------------------------------------------


def mlp_providers(names, on_gpu, notes, quack_tuned=False):
    """name -> (make(x, w1, w2, fc1_only) -> fn() -> output, train(x, w1, w2) -> fn() -> output (the
    forward with autograd; None: no fwd_bwd form), version labels)."""
    import fastglu

    out = {}
    compile_backend = "inductor" if on_gpu else "aot_eager"

    from fastglu.mlp_block import mlp_fused_default

    def default(x, w1, w2, fc1_only):
        if fc1_only:
            if mlp_fused_default(x, w1):
                return lambda: fastglu.linear_glu(x, w1, return_preact=False)
            return lambda: fastglu.swiglu(F_.linear(x, w1))
        return lambda: fastglu.mlp(x, w1, w2)

    def default_train(x, w1, w2):
        return lambda: fastglu.mlp(x, w1, w2)

    def fused(x, w1, w2, fc1_only):
        if fc1_only:
            return lambda: fastglu.linear_glu(x, w1, return_preact=False)
        return lambda: fastglu.mlp(x, w1, w2, fused=True)

    def fused_train(x, w1, w2):
        return lambda: fastglu.mlp(x, w1, w2, fused=True)

    def recompute(x, w1, w2, fc1_only):
        raise RuntimeError("fwd_bwd only: the forward alone is fastglu_fused's")

    def recompute_train(x, w1, w2):
        return lambda: fastglu.mlp(x, w1, w2, fused=True, recompute=True)

    def cublas_fastglu(x, w1, w2, fc1_only):
        if fc1_only:
            return lambda: fastglu.swiglu(F_.linear(x, w1))
        return lambda: F_.linear(fastglu.swiglu(F_.linear(x, w1)), w2)

    def cublas_fastglu_train(x, w1, w2):
        return lambda: F_.linear(fastglu.swiglu(F_.linear(x, w1)), w2)

    def eager_mlp(x, w1, w2):
        h = F_.linear(x, w1)
        g, u = h.chunk(2, dim=-1)
        return F_.linear(F_.silu(g) * u, w2)

    def eager_fc1(x, w1):
        g, u = F_.linear(x, w1).chunk(2, dim=-1)
        return F_.silu(g) * u

    compiled = {}

    def cublas_compile(x, w1, w2, fc1_only):
        key = "fc1" if fc1_only else "mlp"
        if key not in compiled:
            compiled[key] = torch.compile(
                eager_fc1 if fc1_only else eager_mlp, backend=compile_backend
            )
        f = compiled[key]
        return (lambda: f(x, w1)) if fc1_only else (lambda: f(x, w1, w2))

    def cublas_compile_train(x, w1, w2):
        if "train" not in compiled:
            compiled["train"] = torch.compile(eager_mlp, backend=compile_backend)
        f = compiled["train"]
        return lambda: f(x, w1, w2)

    def gemm_only(x, w1, w2, fc1_only):
        F = w1.shape[0] // 2
        if fc1_only:
            return lambda: F_.linear(x, w1)
        buf = F_.linear(x, w1)[:, :F].contiguous()
        return lambda: (F_.linear(x, w1), F_.linear(buf, w2))[1]

    for name in names:
        try:
            if name == "fastglu":
                out[name] = (default, default_train, {})
            elif name == "fastglu_fused":
                out[name] = (fused, fused_train, {})
            elif name == "fastglu_recompute":
                out[name] = (recompute, recompute_train, {})
            elif name == "cublas_fastglu":
                out[name] = (cublas_fastglu, cublas_fastglu_train, {})
            elif name == "cublas_compile":
                out[name] = (
                    cublas_compile,
                    cublas_compile_train,
                    {"compile_backend": compile_backend},
                )
            elif name == "cublas_gemm_only":
                out[name] = (gemm_only, GEMM_ONLY_TRAIN, {})
            elif name == "liger":
                if not on_gpu:
                    raise RuntimeError("GPU only")
                from liger_kernel.ops.mlp import LigerMLPFunction

                def liger(
                    x, w1, w2, fc1_only
                ):  # the fused gate/up GEMM + SwiGLU, then fc2; input [B, S, H]
                    if fc1_only:
                        raise RuntimeError("LigerMLPFunction has no fc1-only form")
                    F = w1.shape[0] // 2
                    wg, wu, x3 = w1[:F], w1[F:], x.unsqueeze(0)
                    return lambda: LigerMLPFunction.apply(x3, wg, wu, w2).squeeze(0)

                def liger_train(x, w1, w2):  # gate and up weights as views of w1: w1.grad gets both
                    F = w1.shape[0] // 2
                    return lambda: LigerMLPFunction.apply(
                        x.unsqueeze(0), w1[:F], w1[F:], w2
                    ).squeeze(0)

                out[name] = (liger, liger_train, {"liger_version": pkg_version("liger-kernel")})
            elif name == "quack":
                if not on_gpu:
                    raise RuntimeError("GPU only")
                from quack.linear import linear_gated_func
                from quack.mlp import mlp_func

                def quack(x, w1, w2, fc1_only):
                    if fc1_only:  # mlp_func's own fc1 (gemm_gated; h stored only for autograd)
                        return lambda: linear_gated_func(
                            x,
                            w1,
                            "swiglu",
                            store_preact=torch.is_grad_enabled(),
                            tuned=quack_tuned,
                            concat_layout=True,
                        )[1]
                    return lambda: mlp_func(
                        x, w1, w2, activation="swiglu", concat_layout=True, tuned=quack_tuned
                    )

                def quack_train(x, w1, w2):
                    return lambda: mlp_func(
                        x, w1, w2, activation="swiglu", concat_layout=True, tuned=quack_tuned
                    )

                out[name] = (
                    quack,
                    quack_train,
                    {
                        "quack_version": pkg_version("quack-kernels"),
                        "quack_tuned": str(quack_tuned),
                    },
                )
            elif name in ("megatron", "megatron_fastglu"):
                if not on_gpu:
                    raise RuntimeError("GPU only")
                make_m, train_m = megatron_provider(name == "megatron_fastglu")
                out[name] = (
                    make_m,
                    train_m,
                    {"megatron_core_version": pkg_version("megatron-core")},
                )
        except Exception as e:  # noqa: BLE001 - optional peers fail to import in many ways
            notes.append(f"{name}: skipped ({type(e).__name__}: {e})")
    return out


_MEGATRON = {}  # "stock_forward": Megatron's own MLP.forward, captured before any routing
_MEGATRON_MODULES = {}  # (H, F, dtype) -> the module (one alive at a time)


def megatron_provider(routed):
    """(make, train) of Megatron-Core's MLP at TP = 1 on one process (world size 1, gloo), one module
    per (H, F, dtype), its weights copied from w1 and w2. routed: the forward of
    fastglu.megatron_mlp (the route apply(mlp=True) installs), else Megatron's own MLP.forward."""
    import socket

    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    from fastglu import megatron_mlp

    if "stock_forward" not in _MEGATRON:
        if megatron_mlp.is_routed():
            raise RuntimeError("Megatron's MLP.forward is routed already: no stock forward to time")
        _MEGATRON["stock_forward"] = MLP.forward
    if not dist.is_initialized():
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=1, rank=0)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel()

    def module(w1, w2):
        F, H = w1.shape[0] // 2, w1.shape[1]
        key = (H, F, w1.dtype)
        if key not in _MEGATRON_MODULES:
            cfg = TransformerConfig(
                num_layers=1,
                hidden_size=H,
                ffn_hidden_size=F,
                num_attention_heads=max(1, H // 128),
                gated_linear_unit=True,
                activation_func=F_.silu,
                bias_activation_fusion=True,
                add_bias_linear=False,
                params_dtype=w1.dtype,
                perform_initialization=False,
                use_cpu_initialization=w1.device.type == "cpu",
            )
            mlp = MLP(
                cfg,
                MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear),
                ffn_hidden_size=F,
            ).to(w1.device)
            _MEGATRON_MODULES.clear()
            _MEGATRON_MODULES[key] = mlp
        mlp = _MEGATRON_MODULES[key]
        with torch.no_grad():
            mlp.linear_fc1.weight.copy_(w1)
            mlp.linear_fc2.weight.copy_(w2)
        return mlp

    stock = _MEGATRON["stock_forward"]

    def call(mlp, x):
        x3 = x.view(x.shape[0], 1, x.shape[1])  # [S, B, H]
        if routed:
            reason = megatron_mlp.why_not(mlp, x3)
            if reason is not None:
                raise RuntimeError(f"fastglu's route does not take it: {reason}")
            out, _ = megatron_mlp.fused_forward(mlp, x3)
        else:
            out, _ = stock(mlp, x3)
        return out.view(x.shape[0], -1)

    def make(x, w1, w2, fc1_only):
        if fc1_only:
            raise RuntimeError("Megatron's MLP has no fc1-only form")
        mlp = module(w1, w2)
        return lambda: call(mlp, x)

    def train(x, w1, w2):
        mlp = module(w1, w2)

        def fwd():
            mlp.zero_grad(set_to_none=True)  # as the step does for the other providers' leaves
            return call(mlp, x)

        return fwd

    return make, train


GEMM_ONLY_TRAIN = (
    "gemm_only"  # fwd_bwd of the limit: built by train_step (six GEMMs on ready buffers)
)


def train_step(name, train, x, w1, w2, dout):
    """(step() -> output, leaves) of one fwd_bwd iteration: gradients reset, forward, backward(dout)."""
    leaves = [t.detach().requires_grad_() for t in (x, w1, w2)]
    if train is GEMM_ONLY_TRAIN:
        F = w1.shape[0] // 2
        xl, w1l, w2l = leaves
        buf = F_.linear(x, w1)[:, :F].contiguous().requires_grad_()
        dh = torch.randn(x.shape[0], 2 * F, device=x.device, dtype=x.dtype)
        leaves.append(buf)

        def step():
            for t in leaves:
                t.grad = None
            h, o = F_.linear(xl, w1l), F_.linear(buf, w2l)
            torch.autograd.backward((h, o), (dh, dout))
            return o

        return step, leaves, (buf, dh)
    fwd = train(*leaves)

    def step():
        for t in leaves:
            t.grad = None
        o = fwd()
        o.backward(dout)
        return o

    return step, leaves, None


def peak_mib(step):
    """Peak memory of one step() in MiB above what was allocated before it (CUDA)."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def reference(x, w1, w2, fc1_only, interleaved=False):
    h = x.float() @ w1.float().T
    F = w1.shape[0] // 2
    g, u = (h[:, 0::2], h[:, 1::2]) if interleaved else (h[:, :F], h[:, F:])
    y = F_.silu(g) * u
    return y if fc1_only else y @ w2.float().T


def reference_gemm_only(x, w1, w2, fc1_only):
    h = x.float() @ w1.float().T
    return h if fc1_only else h[:, : w1.shape[0] // 2] @ w2.float().T


def reference_fwd_bwd(x, w1, w2, dout, buffers=None):
    """fp32 (out, dx): autograd of the reference MLP, or of the limit's GEMMs (buffers = (buf, dh))."""
    xr, w1r, w2r = (t.detach().float().requires_grad_() for t in (x, w1, w2))
    if buffers is not None:
        buf, dh = buffers
        return buf.detach().float() @ w2r.detach().T, dh.float() @ w1r.detach()
    out = reference(xr, w1r, w2r, False)
    out.backward(dout.float())
    return out.detach(), xr.grad


def rel_err(got, ref):
    return ((got.float() - ref).norm() / ref.norm()).item()


# ---- the run ------------------------------------------------------------------------------------


def main(argv=None):
    args = parse_args(argv)
    if args.ratios:
        for d in args.ratios:
            with open(d / "mlp.jsonl") as f:
                done = [json.loads(line) for line in f if line.strip()]
            (d / "ratios.txt").write_text(ratio_table(done))
            print(f"wrote {d / 'ratios.txt'}")
        return []
    on_gpu = torch.cuda.is_available() and not args.smoke
    if args.smoke:
        args.rep, args.rounds = 5, 2
    shapes = args.shape or (SHAPES if on_gpu else SMOKE_SHAPES)
    device, dtype = ("cuda" if on_gpu else "cpu"), DTYPES[args.dtype]
    bench = make_bench(on_gpu, args.rep)
    gpu, device_slug, env = describe_device(on_gpu)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S")
    out = args.out or Path("bench", "results", device_slug, f"{stamp}-mlp")
    out.mkdir(parents=True, exist_ok=True)
    import fastglu

    base = {
        "fastglu_version": fastglu.__version__,
        "torch_version": torch.__version__,
        "triton_version": pkg_version("triton") if on_gpu else None,
        "cuda_version": torch.version.cuda,
    }
    notes = []
    if not on_gpu:
        notes.append(
            "the CPU backend on tiny shapes with a host timer, to exercise the harness: these times "
            "and ratios say nothing of speed (the cublas_* providers run torch's CPU matmul)"
        )
    providers = mlp_providers(args.providers, on_gpu, notes, args.quack_tuned)
    timer = "cuda_events" if on_gpu else "perf_counter"
    repository = git_remote()
    protos = {
        ("mlp_glu/forward", "mlp"): protocol(
            "mlp_glu/forward",
            "the MLP forward fc1 -> SwiGLU -> fc2",
            timer,
            args.rep,
            args.rounds,
            repository,
        ),
        ("mlp_glu/forward", "fc1"): protocol(
            "mlp_glu/forward",
            "fc1 and the SwiGLU only (no fc2)",
            timer,
            args.rep,
            args.rounds,
            repository,
        ),
        ("mlp_glu/fwd_bwd", "mlp"): protocol(
            "mlp_glu/fwd_bwd",
            "the MLP forward fc1 -> SwiGLU -> fc2 and its "
            "backward with a fixed random dO, gradients reset to None before "
            "each iteration",
            timer,
            args.rep,
            args.rounds,
            repository,
        ),
        ("gemm/forward", "fc1"): protocol(
            "gemm/forward",
            "out = x @ w^T (F.linear) without bias",
            timer,
            args.rep,
            args.rounds,
            repository,
        ),
    }
    protos["gemm/forward", "fc2"] = protos["gemm/forward", "fc1"]
    rows = []
    torch.manual_seed(0)

    def time_cells(benchmark, pass_, T, H, F, cells, flops, workload, title, peaks=None):
        """cells: name -> (fn, versions, relerr); times them in rotating order, one record per round.
        peaks: name -> peak MiB of one call (fwd_bwd on a GPU), kept in the rows and the table."""
        shape_slug = slug_of(T, H, F, args.dtype, "" if pass_ == "mlp" else pass_)
        fns = {n: cell[0] for n, cell in cells.items()}
        for r, name, ms in rotated_rounds(bench, fns, args.rounds):
            _, versions, err = cells[name]
            status = "passed" if err <= TOLERANCE[args.dtype] else "failed"
            observed = dt.datetime.now(dt.timezone.utc)
            rec = records.bench_run_record(
                benchmark=benchmark,
                provider=name,
                workload=workload,
                shape_slug=shape_slug,
                title=title,
                ms=ms,
                device_slug=device_slug,
                protocol_obj=protos[benchmark, pass_],
                env=env,
                versions={**base, **versions},
                observed=observed,
                status=status,
                round_=r,
            )
            fname = f"{benchmark.replace('/', '_')}_{name}_{shape_slug}_r{r}.json"
            (out / fname).write_text(json.dumps(rec, indent=2, ensure_ascii=False) + "\n")
            rows.append(
                {
                    "benchmark": benchmark,
                    "pass": pass_,
                    "provider": name,
                    "T": T,
                    "H": H,
                    "F": F,
                    "workload": shape_slug,
                    "round": r,
                    "ms": ms[0],
                    "p20": ms[1],
                    "p80": ms[2],
                    "tflops": flops / (ms[0] * 1e-3) / 1e12,
                    "relerr": err,
                    "status": status,
                    "record": fname,
                    "peak_mib": (peaks or {}).get(name),
                }
            )

    for T, H, F in shapes:
        torch._dynamo.reset()
        x = torch.randn(T, H, device=device, dtype=dtype)
        w1 = (torch.randn(2 * F, H, device=device) / H**0.5).to(dtype)
        w2 = (torch.randn(H, F, device=device) / F**0.5).to(dtype)
        for pass_ in ("mlp", "fc1") if "forward" in args.mode else ():
            ref = reference(x, w1, w2, pass_ == "fc1")
            cells = {}
            for name, (make, _, versions) in providers.items():
                if name == "fastglu_recompute":  # fwd_bwd only
                    continue
                try:
                    fn = make(x, w1, w2, pass_ == "fc1")
                    # the limit has no activation: checked against its own GEMMs
                    own = (
                        reference_gemm_only(x, w1, w2, pass_ == "fc1")
                        if name == "cublas_gemm_only"
                        else ref
                    )
                    cells[name] = (fn, versions, rel_err(fn(), own))
                except Exception as e:  # noqa: BLE001 - a broken provider is reported, not fatal
                    notes.append(
                        f"{name}: {pass_} at T={T} H={H} F={F} failed ({type(e).__name__}: {e})"
                    )
            del ref
            flops = (6 if pass_ == "mlp" else 4) * T * H * F
            workload = {
                "op": "mlp_glu",
                "activation": "silu",
                "pass": pass_,
                "T": T,
                "H": H,
                "F": F,
                "dtype": args.dtype,
                "bias": False,
            }
            title = (
                "GLU MLP forward (fc1 -> SwiGLU -> fc2)"
                if pass_ == "mlp"
                else "GLU MLP forward, fc1 + SwiGLU only"
            )
            time_cells("mlp_glu/forward", pass_, T, H, F, cells, flops, workload, title)
        if "fwd_bwd" in args.mode:
            dout = torch.randn(T, H, device=device, dtype=dtype)
            ref_out, ref_dx = reference_fwd_bwd(x, w1, w2, dout)
            cells, peaks = {}, {}
            for name, (_, train, versions) in providers.items():
                try:
                    step, leaves, buffers = train_step(name, train, x, w1, w2, dout)
                    got = step()
                    if on_gpu:
                        peaks[name] = peak_mib(step)
                    own = (
                        (ref_out, ref_dx)
                        if buffers is None
                        else reference_fwd_bwd(x, w1, w2, dout, buffers)
                    )
                    cells[name] = (
                        step,
                        versions,
                        max(rel_err(got, own[0]), rel_err(leaves[0].grad, own[1])),
                    )
                except Exception as e:  # noqa: BLE001 - a broken provider is reported, not fatal
                    notes.append(
                        f"{name}: fwd_bwd at T={T} H={H} F={F} failed ({type(e).__name__}: {e})"
                    )
            del ref_out, ref_dx
            workload = {
                "op": "mlp_glu",
                "activation": "silu",
                "pass": "fwd_bwd",
                "T": T,
                "H": H,
                "F": F,
                "dtype": args.dtype,
                "bias": False,
            }
            time_cells(
                "mlp_glu/fwd_bwd",
                "mlp",
                T,
                H,
                F,
                cells,
                18 * T * H * F,
                workload,
                "GLU MLP forward + backward (fc1 -> SwiGLU -> fc2)",
                peaks,
            )
            del cells, dout
        if not args.no_gemm:
            y = torch.randn(T, F, device=device, dtype=dtype)
            for pass_, a, w in (("fc1", x, w1), ("fc2", y, w2)):
                ref = a.float() @ w.float().T
                cells = {
                    "fastglu": (lambda a=a, w=w: fastglu.linear(a, w), {}, 0.0),
                    "cublas": (lambda a=a, w=w: F_.linear(a, w), {}, 0.0),
                }
                cells = {k: (fn, v, rel_err(fn(), ref)) for k, (fn, v, _) in cells.items()}
                del ref
                M, N, K = a.shape[0], w.shape[0], w.shape[1]
                workload = {
                    "op": "gemm",
                    "pass": pass_,
                    "M": M,
                    "N": N,
                    "K": K,
                    "T": T,
                    "H": H,
                    "F": F,
                    "dtype": args.dtype,
                    "bias": False,
                }
                time_cells(
                    "gemm/forward",
                    pass_,
                    T,
                    H,
                    F,
                    cells,
                    2 * M * N * K,
                    workload,
                    f"GEMM forward ({pass_} shape: M={M}, N={N}, K={K})",
                )
            del y
        del x, w1, w2

    with open(out / "mlp.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    table = summary_table(rows)
    (out / "table.txt").write_text(table)
    (out / "ratios.txt").write_text(ratio_table(rows))
    (out / "summary.json").write_text(
        json.dumps(
            {
                "gpu": gpu,
                "device_slug": device_slug,
                "notes": notes,
                "rep_ms": args.rep,
                "rounds": args.rounds,
                "environment": env,
                "versions": {k: v for k, v in base.items() if v},
            },
            indent=1,
        )
        + "\n"
    )
    for note in notes:
        print("note:", note)
    print(table)
    print(f"wrote {len(rows)} records, mlp.jsonl, summary.json, table.txt and ratios.txt to {out}")
    return rows


BASELINE = {
    "mlp_glu/forward": "cublas_fastglu",
    "mlp_glu/fwd_bwd": "cublas_fastglu",
    "gemm/forward": "cublas",
}


def summary_table(rows):
    """Per benchmark, pass, workload and provider: the median over rounds of each round's median,
    the spread of the rounds' medians, TFLOP/s, and the ratio to the baseline (cublas_fastglu for
    the MLP, cublas for the GEMM; < 1 is faster)."""
    cells = {}
    for r in rows:
        cells.setdefault((r["benchmark"], r["pass"], r["workload"], r["provider"]), []).append(r)
    med = {k: statistics.median(x["ms"] for x in v) for k, v in cells.items()}
    head = [
        "benchmark",
        "pass",
        "workload",
        "provider",
        "median ms",
        "rounds min-max",
        "TFLOP/s",
        "/ baseline",
        "relerr",
        "status",
        "peak MiB",
    ]
    lines = []
    for (b, p, w, prov), v in cells.items():
        m = med[b, p, w, prov]
        base = med.get((b, p, w, BASELINE[b]))
        tf = statistics.median(x["tflops"] for x in v)
        lines.append(
            [
                b,
                p,
                w,
                prov,
                f"{m:.4f}",
                f"{min(x['ms'] for x in v):.4f}-{max(x['ms'] for x in v):.4f}",
                f"{tf:.1f}",
                f"{m / base:.3f}" if base else "n/a",
                f"{v[0]['relerr']:.2e}",
                "/".join(sorted({x["status"] for x in v})),
                "n/a" if v[0].get("peak_mib") is None else f"{v[0]['peak_mib']:.0f}",
            ]
        )
    return records.text_table(head, lines)


def round_ratios(rows):
    """{(benchmark, pass, workload, provider, peer): [ratio per round]}: a fastglu provider's median
    ms over a peer's median ms in the same round, for every fastglu provider (its name starts with
    "fastglu") and every other provider of the workload that passed in that round; < 1 is faster.

    Why per round: the providers of a round run back to back in a rotated order, so a pair shares
    the machine's state (clocks under the power cap, L2, the allocator), which drifts between rounds
    by more than the differences measured here; a ratio of two medians over all rounds mixes them."""
    ms = {}  # (benchmark, pass, workload) -> provider -> round -> ms
    for r in rows:
        if r.get("status") == "passed" and r.get("ms") is not None:
            key = (r["benchmark"], r["pass"], r["workload"])
            ms.setdefault(key, {}).setdefault(r["provider"], {})[r["round"]] = r["ms"]
    out = {}
    for key, provs in ms.items():
        for prov, mine in provs.items():
            if not prov.startswith("fastglu"):
                continue
            for peer, theirs in provs.items():
                both = sorted(set(mine) & set(theirs))
                if peer != prov and both:
                    out[key + (prov, peer)] = [mine[i] / theirs[i] for i in both]
    return out


def ratio_table(rows):
    """round_ratios as text: the median over the rounds, the smallest and largest, the rounds."""
    head = ["benchmark", "pass", "workload", "provider", "over", "median", "min", "max", "rounds"]
    lines = [
        [*key, f"{statistics.median(v):.3f}", f"{min(v):.3f}", f"{max(v):.3f}", len(v)]
        for key, v in round_ratios(rows).items()
    ]
    return records.text_table(head, lines)


if __name__ == "__main__":
    main()
