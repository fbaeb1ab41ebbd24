#!/usr/bin/env python3
"""A tensor-parallel MLP block with fastglu's SwiGLU: correctness against one GPU, and step time.

The block is Megatron-Core's MLP with a gated linear unit and no bias: ``out = fc2(swiglu(fc1(x)))``
with fc1 ``[hidden -> 2F]`` (weight rows ``[gate ; up]``) and fc2 ``[F -> hidden]``. Tensor parallel
over ``tp`` ranks (Megatron's layout, no sequence parallelism): fc1 is column-parallel and rank r
holds the rows ``[gate rows r-th slice ; up rows r-th slice]``, so its local fc1 output
``[S, B, 2F/tp]`` is ``[gate_r | up_r]`` and the activation runs on it locally; fc2 is row-parallel
(rank r holds columns r-th slice) and its partial outputs are all-reduced. Two implementations:

- ``megatron``: Megatron-Core's ``ColumnParallelLinear`` / ``RowParallelLinear`` (when
  ``megatron.core`` imports), the activation on each rank's local tensor;
- ``dtensor``: PyTorch DTensor tensor parallelism, ``ColwiseParallel(use_local_output=False)`` on fc1
  whose full weight is first reordered so that the even row split gives every rank its own gate/up
  pair, ``RowwiseParallel`` on fc2; fastglu takes the ``Shard(-1)`` DTensor directly, the torch
  activation runs on the local tensor (its global ``[..., :F]`` split would pair the wrong halves).

For each implementation and activation (``fastglu``: ``fastglu.swiglu``; ``torch``:
``silu(gate) * up`` in eager torch) it runs one step -- ``loss = (out.float() * probe).sum()``,
backward -- on the same global weights and data as a single-device run of the plain block, and
prints the differences of the loss, the output and every gradient (fc1.weight, fc2.weight, the
input) gathered to rank 0: max |a - b|, that over max |b| ("max rel"), and the relative norm. It
then times the step (zeroing the gradients, forward, loss, backward) on every rank: CUDA events
around each step, median (p20-p80) of ``--steps`` steps after ``--warmup``; the single-device
block is timed too, on rank 0 alone.

    torchrun --nproc_per_node=2 bench/tp/tp_mlp.py [--out DIR]                 # on 2 GPUs (NCCL)
    torchrun --standalone --nproc_per_node=2 bench/tp/tp_mlp.py --dry-run    # CPU, gloo, tiny shapes

Writes ``tp_mlp.json`` to ``--out`` (default ``$OUT`` or ``./tp-out``); the log is rank 0's stdout.
Exits 1 if a relative-norm difference exceeds the tolerance (bf16 1e-2, fp16 1e-3, fp32 1e-5).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

for _k, _v in (
    ("NCCL_NVLS_ENABLE", "0"),
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
    ("NVSHMEM_DISABLE_NVLS", "1"),
):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F_  # noqa: E402

import fastglu  # noqa: E402
from fastglu import library  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-5}


def torch_swiglu(h):
    """The eager torch SwiGLU on the Megatron layout (Megatron-Core's unfused ``swiglu``)."""
    gate, up = torch.chunk(h, 2, dim=-1)
    return F_.silu(gate) * up


class MLP(torch.nn.Module):
    def __init__(self, hidden, ffn_hidden_size, activation, device=None, dtype=None):
        super().__init__()
        self.fc1 = torch.nn.Linear(
            hidden, 2 * ffn_hidden_size, bias=False, device=device, dtype=dtype
        )
        self.fc2 = torch.nn.Linear(ffn_hidden_size, hidden, bias=False, device=device, dtype=dtype)
        self.activation = activation

    def forward(self, x):
        return self.fc2(self.activation(self.fc1(x)))


def megatron_row_order(F, tp):
    """Row indices that reorder fc1's weight [gate ; up] (2F rows) into [gate_0 ; up_0 ; gate_1 ; up_1 ...]:
    an even split of the result in tp parts gives rank r its gate and up slices."""
    f = F // tp
    return torch.cat(
        [
            torch.cat((torch.arange(r * f, (r + 1) * f), F + torch.arange(r * f, (r + 1) * f)))
            for r in range(tp)
        ]
    )


# ---- the two tensor-parallel implementations -------------------------------------------------------


class MegatronTP:
    """Megatron-Core's ColumnParallelLinear (fc1) and RowParallelLinear (fc2)."""

    name = "megatron"

    def __init__(self, W1, W2, activation, device):
        from megatron.core import parallel_state
        from megatron.core.model_parallel_config import ModelParallelConfig
        from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear

        tp, rank = dist.get_world_size(), dist.get_rank()
        if not parallel_state.model_parallel_is_initialized():
            parallel_state.initialize_model_parallel(
                tensor_model_parallel_size=tp, create_gloo_process_groups=False
            )
        config = ModelParallelConfig(
            tensor_model_parallel_size=tp,
            params_dtype=W1.dtype,
            use_cpu_initialization=device.type == "cpu",
            perform_initialization=False,
            gradient_accumulation_fusion=False,
            sequence_parallel=False,
        )
        F, H = W2.shape[1], W2.shape[0]
        f = F // tp

        def no_init(w):
            return None

        self.fc1 = ColumnParallelLinear(
            H,
            2 * F,
            config=config,
            init_method=no_init,
            bias=False,
            gather_output=False,
            skip_bias_add=True,
        )
        self.fc2 = RowParallelLinear(
            F,
            H,
            config=config,
            init_method=no_init,
            bias=False,
            input_is_parallel=True,
            skip_bias_add=True,
        )
        with torch.no_grad():
            self.fc1.weight.copy_(
                torch.cat((W1[rank * f : (rank + 1) * f], W1[F + rank * f : F + (rank + 1) * f]))
            )
            self.fc2.weight.copy_(W2[:, rank * f : (rank + 1) * f])
        self.activation, self.F, self.tp = activation, F, tp

    def parameters(self):
        return [self.fc1.weight, self.fc2.weight]

    def __call__(self, x):
        h, _ = self.fc1(x)
        out, _ = self.fc2(self.activation(h))
        return out

    def full_grads(self):
        """Collective: (fc1.weight grad [2F, H] in [gate ; up] order, fc2.weight grad [H, F])."""
        g1 = [torch.empty_like(self.fc1.weight.grad) for _ in range(self.tp)]
        g2 = [torch.empty_like(self.fc2.weight.grad) for _ in range(self.tp)]
        dist.all_gather(g1, self.fc1.weight.grad.contiguous())
        dist.all_gather(g2, self.fc2.weight.grad.contiguous())
        f = self.F // self.tp
        return torch.cat([g[:f] for g in g1] + [g[f:] for g in g1]), torch.cat(g2, dim=1)


class DTensorTP:
    """PyTorch DTensor: ColwiseParallel on fc1 (weight rows reordered first) and RowwiseParallel on fc2."""

    name = "dtensor"

    def __init__(self, W1, W2, activation, device):
        from torch.distributed.tensor import init_device_mesh
        from torch.distributed.tensor.parallel import (
            ColwiseParallel,
            RowwiseParallel,
            parallelize_module,
        )

        tp = dist.get_world_size()
        F, H = W2.shape[1], W2.shape[0]
        self.order = megatron_row_order(F, tp).to(W1.device)
        self.model = MLP(H, F, activation, device=device, dtype=W1.dtype)
        with torch.no_grad():
            self.model.fc1.weight.copy_(W1[self.order])
            self.model.fc2.weight.copy_(W2)
        mesh = init_device_mesh(device.type, (tp,), mesh_dim_names=("tp",))
        parallelize_module(
            self.model,
            mesh,
            {"fc1": ColwiseParallel(use_local_output=False), "fc2": RowwiseParallel()},
        )

    def parameters(self):
        return list(self.model.parameters())

    def __call__(self, x):
        return self.model(x)

    def full_grads(self):
        g1 = self.model.fc1.weight.grad.full_tensor()
        g1 = torch.empty_like(g1).index_copy_(0, self.order, g1)  # back to [gate ; up]
        return g1, self.model.fc2.weight.grad.full_tensor()


def tp_activation(impl, provider):
    if provider == "fastglu":
        return fastglu.swiglu  # a plain local tensor (megatron) or the Shard(-1) DTensor (dtensor)
    if impl == "megatron":
        return torch_swiglu
    return lambda h: library.dtensor_local_call(h, torch_swiglu, "torch_swiglu", lambda w: w // 2)


# ---- steps, timing, comparison ----------------------------------------------------------------------


def step(model, x, probe):
    for p in model.parameters():
        p.grad = None
    x.grad = None
    out = model(x)
    loss = (out.float() * probe).sum()
    loss.backward()
    return out, loss


def time_steps(fn, steps, warmup, device):
    """Per-step ms: CUDA events around each step on a GPU, a host timer on the CPU. (p50, p20, p80)."""
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        ev = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(steps)
        ]
        for a, b in ev:
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize(device)
        ms = [a.elapsed_time(b) for a, b in ev]
    else:
        ms = []
        for _ in range(steps):
            t0 = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t0) * 1e3)
    q = statistics.quantiles(ms, n=10, method="inclusive") if len(ms) > 1 else ms * 9
    return {"median_ms": statistics.median(ms), "p20_ms": q[1], "p80_ms": q[7], "steps": steps}


def diff(got, want):
    d = got.double() - want.double()
    ref_max = want.double().abs().max().item()
    max_abs = d.abs().max().item()
    return {
        "max_abs": max_abs,
        "max_rel": max_abs / max(ref_max, 1e-30),
        "rel_norm": d.norm().item() / max(want.double().norm().item(), 1e-30),
    }


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336, help="F, ffn_hidden_size (fc1 has 2F outputs)")
    p.add_argument(
        "--dtype", choices=DTYPES, default=None, help="default bf16 (fp32 with --dry-run)"
    )
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument(
        "--impl",
        nargs="+",
        choices=("megatron", "dtensor"),
        default=["megatron", "dtensor"],
        help="megatron is skipped, with a note, when megatron.core does not import",
    )
    p.add_argument(
        "--providers", nargs="+", choices=("fastglu", "torch"), default=["fastglu", "torch"]
    )
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "tp-out")))
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="CPU + gloo, S=8 B=2 hidden=64 F=96 fp32, 3 timed steps: checks the logic without a GPU",
    )
    args = p.parse_args()
    if args.dry_run:
        args.seq, args.batch, args.hidden, args.ffn, args.steps, args.warmup = 8, 2, 64, 96, 3, 1
    args.dtype = args.dtype or ("fp32" if args.dry_run else "bf16")
    if "RANK" not in os.environ:
        p.error(
            "run under torchrun, e.g. torchrun --standalone --nproc_per_node=2 bench/tp/tp_mlp.py --dry-run"
        )

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.dry_run:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    rank, tp = dist.get_rank(), dist.get_world_size()
    dtype, tol = DTYPES[args.dtype], TOL[DTYPES[args.dtype]]
    S, B, H, F = args.seq, args.batch, args.hidden, args.ffn
    if F % tp:
        p.error(f"--ffn {F} must be a multiple of the tensor-parallel size {tp}")

    def log(*a):
        if rank == 0:
            print(*a, flush=True)

    log(
        f"tensor-parallel MLP: tp={tp} S={S} B={B} hidden={H} F={F} {args.dtype} on "
        f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}; torch {torch.__version__}, "
        f"fastglu {fastglu.__version__}"
    )

    # The same global weights and data on every rank (a CPU generator, then moved).
    g = torch.Generator().manual_seed(1234)
    W1 = (torch.randn(2 * F, H, generator=g) / H**0.5).to(device, dtype)
    W2 = (torch.randn(H, F, generator=g) / F**0.5).to(device, dtype)
    x = torch.randn(S, B, H, generator=g).to(device, dtype).requires_grad_()
    probe = torch.randn(S, B, H, generator=g).to(device)

    record = {
        "config": {
            "tp": tp,
            "seq": S,
            "batch": B,
            "hidden": H,
            "ffn_hidden_size": F,
            "dtype": args.dtype,
            "steps": args.steps,
            "warmup": args.warmup,
            "dry_run": args.dry_run,
            "loss": "(out.float() * probe).sum()",
            "tolerance_rel_norm": tol,
        },
        "env": {
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "fastglu": fastglu.__version__,
            **{
                k: os.environ.get(k)
                for k in (
                    "NCCL_NVLS_ENABLE",
                    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                    "NVSHMEM_DISABLE_NVLS",
                    "CUDA_DEVICE_MAX_CONNECTIONS",
                )
            },
        },
        "single_device": {},
        "tp": [],
        "notes": [],
    }

    # Single-device references (rank 0): values kept for the comparisons, then timed.
    ref = {}
    if rank == 0:
        for provider in args.providers:
            act = fastglu.swiglu if provider == "fastglu" else torch_swiglu
            model = MLP(H, F, act, device=device, dtype=dtype)
            with torch.no_grad():
                model.fc1.weight.copy_(W1)
                model.fc2.weight.copy_(W2)
            out, loss = step(model, x, probe)
            ref[provider] = {
                "out": out.detach(),
                "loss": loss.detach(),
                "fc1.weight": model.fc1.weight.grad,
                "fc2.weight": model.fc2.weight.grad,
                "input": x.grad,
            }
            timing = time_steps(lambda: step(model, x, probe), args.steps, args.warmup, device)
            record["single_device"][provider] = timing
            log(
                f"single device, {provider:8s} step {timing['median_ms']:9.3f} ms "
                f"(p20-p80 {timing['p20_ms']:.3f}-{timing['p80_ms']:.3f})"
            )
            del model
        if len(args.providers) > 1:
            a, b = args.providers[:2]
            record["single_device"][f"{a}_vs_{b}"] = {k: diff(ref[a][k], ref[b][k]) for k in ref[a]}
    dist.barrier()

    failed = False
    impls = []
    for impl in args.impl:
        if impl == "megatron":
            try:
                import megatron.core.tensor_parallel  # noqa: F401
            except (
                Exception
            ) as e:  # any import-time failure of the wheel: report it, run the others
                note = f"megatron: megatron.core.tensor_parallel does not import here ({type(e).__name__}: {e})"
                log("note: " + note)
                record["notes"].append(note)
                continue
            record["env"]["megatron_core"] = getattr(
                sys.modules.get("megatron.core"), "__version__", "?"
            )
        impls.append(impl)
    for impl in impls:
        cls = MegatronTP if impl == "megatron" else DTensorTP
        for provider in args.providers:
            model = cls(W1, W2, tp_activation(impl, provider), device)
            out, loss = step(model, x, probe)
            g1, g2 = model.full_grads()
            entry = {"impl": impl, "provider": provider}
            if rank == 0:
                want = ref[provider]
                got = {
                    "out": out.detach(),
                    "loss": loss.detach(),
                    "fc1.weight": g1,
                    "fc2.weight": g2,
                    "input": x.grad,
                }
                entry["vs_single_device"] = {k: diff(got[k], want[k]) for k in want}
                entry["pass"] = all(
                    d["rel_norm"] <= tol for d in entry["vs_single_device"].values()
                )
                failed |= not entry["pass"]
                log(
                    f"\n{impl} tp={tp}, {provider}: tensor parallel vs single device "
                    f"({'PASS' if entry['pass'] else 'FAIL'}, rel_norm <= {tol:g})"
                )
                for k, d in entry["vs_single_device"].items():
                    log(
                        f"  {k:12s} max_abs {d['max_abs']:.3e}  max_rel {d['max_rel']:.3e}  rel_norm {d['rel_norm']:.3e}"
                    )
            del out, loss, g1, g2
            timing = time_steps(lambda: step(model, x, probe), args.steps, args.warmup, device)
            per_rank = [None] * tp
            dist.all_gather_object(per_rank, timing)
            entry["per_rank"] = per_rank
            log(
                "  step per rank: "
                + ", ".join(
                    f"rank {r} {t['median_ms']:.3f} ms (p20-p80 {t['p20_ms']:.3f}-"
                    f"{t['p80_ms']:.3f})"
                    for r, t in enumerate(per_rank)
                )
            )
            record["tp"].append(entry)
            del model

    if rank == 0:
        log("\nsummary: median step ms (slowest rank)")
        for impl in impls:
            row = {
                e["provider"]: max(t["median_ms"] for t in e["per_rank"])
                for e in record["tp"]
                if e["impl"] == impl
            }
            if row:
                log(
                    f"  {impl:9s} "
                    + "  ".join(f"{k} {v:.3f}" for k, v in row.items())
                    + (
                        f"  torch/fastglu {row['torch'] / row['fastglu']:.3f}x"
                        if {"torch", "fastglu"} <= row.keys()
                        else ""
                    )
                )
        log(
            "  single    "
            + "  ".join(
                f"{k} {v['median_ms']:.3f}"
                for k, v in record["single_device"].items()
                if "median_ms" in v
            )
        )
        record["pass"] = not failed
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "tp_mlp.json").write_text(json.dumps(record, indent=1))
        log(f"\n{'PASS' if not failed else 'FAIL'}; wrote {args.out / 'tp_mlp.json'}")
    failed_any = [failed]
    dist.broadcast_object_list(failed_any, src=0)
    dist.destroy_process_group()
    return 1 if failed_any[0] else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(2)
