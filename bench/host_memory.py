#!/usr/bin/env python3
"""Host time per call and peak memory of SwiGLU providers (issue: floor, host overhead, memory).

Host time: a CPU timer (time.perf_counter) over many calls on a tiny problem, so that the GPU is
never the limit (it idles between launches); one synchronize at the end. Every path is timed once
per round, in turn, over several rounds, and the median round is reported: no path gains or loses
by its place in the order (a call timed once and first can read a third more than the same call
timed later in the same process). Reported per call, for
``forward`` (y = f(x), x requiring grad) and ``forward+backward`` (y = f(x); y.backward(dy)).
For fastglu it also shows where the time goes: the bare C call with ready integers, the torch
calls the binding makes around it, the op without autograd, and the autograd Function. Two fastglu
paths are timed as providers: ``fastglu`` (``fastglu.swiglu``: the lean autograd.Function eager mode
uses) and ``fastglu_library_op`` (``torch.ops.fastglu.swiglu_fwd``: the torch.library op that
torch.compile traces, here called eagerly, with its registered autograd; ``fastglu/library.py``).

Memory (Liger's method): peak ``torch.cuda.max_memory_allocated()`` during one forward+backward on
the seed shape minus what was allocated before (the input and dy), in MiB. The input reaches each
provider through ``FC1Output``, an autograd node that stands for fc1: it passes the input through
(a non-leaf output, which ``in_place=True`` may overwrite) and drops the gradient it receives (as
fc1's backward consumes it), so the number is the activation's own memory (its output, its gradient
buffer and its temporaries) for every provider alike.

On the CPU (``--device cpu``) the numbers are a proxy: the same Python layers, autograd engine and
allocator calls, but the C CPU kernels in place of CUDA launches (a launch costs the host a few
microseconds more) and no CUDA stream lookup or device guard; the ratios to the identity Function
show where a change moves the host time, the GPU host's own ratios are the targets' measure.

    python bench/host_memory.py [--out results.json]
    python bench/host_memory.py --device cpu     # host time only, on CPU tensors (no GPU needed)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import fastglu
from fastglu import _C, functional, ops
from fastglu.bench.host import IdentityFunction, identity_paths, median_of_rounds
from fastglu.bench.swiglu import load_provider
from fastglu.functional import _c_apply


class FC1Stub(torch.autograd.Function):
    """Stands for fc1's output: a view of the input; its backward consumes the gradient."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return None


def host_times(providers, T=8, F=1024, device="cuda", rounds=5, n=1000):
    """On the CPU (device="cpu") the problem is one row of F=1 so that the C loop's own time is
    negligible: what is left is the host overhead of each path."""
    if device == "cpu":
        T, F = 1, 1
    x = torch.randn(T, 2 * F, device=device, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(T, F, device=device, dtype=torch.bfloat16)
    paths = {}
    for name, fn in providers.items():

        def fwd(fn=fn):
            fn(x)

        def fwd_bwd(fn=fn):
            fn(x).backward(dy)
            x.grad = None

        paths[(name, "forward_us")], paths[(name, "forward_backward_us")] = fwd, fwd_bwd
    us = median_of_rounds(paths, rounds, n)
    rows = [
        {
            "provider": name,
            "forward_us": us[(name, "forward_us")],
            "forward_backward_us": us[(name, "forward_backward_us")],
        }
        for name in providers
    ]

    # Where fastglu's forward goes.
    xd = x.detach()
    on_cuda = device == "cuda"
    y = torch.empty(T, F, device=device, dtype=torch.bfloat16)
    stream = torch.cuda.current_stream().cuda_stream if on_cuda else 0
    code = ops._COMPUTE_CODES[xd.dtype]
    fc1_c_apply = _c_apply.__get__(None, FC1Stub)  # bound as functional.py binds GLUFunction
    xp, yp = xd.data_ptr(), y.data_ptr()
    parts = {
        "an identity autograd.Function (the floor of any Python Function)": lambda: FC1Stub.apply(
            x
        ),
        "the same, applied as fastglu applies its Function (no Python apply layer)": lambda: (
            fc1_c_apply(x)
        ),
        "C call with ready integers (_C.glu_fwd, SiLU)": lambda: _C.glu_fwd(
            int(on_cuda),
            *ops.SILU,
            xp,
            2 * F,
            xp + 2 * F,
            2 * F,
            0,
            0,
            0,
            1,
            yp,
            F,
            0,
            0,
            T,
            F,
            code,
            stream,
        ),
        "torch.empty of the output": lambda: torch.empty(
            (T, F), device=device, dtype=torch.bfloat16
        ),
        "ops.swiglu_fwd (checks + empty + launch)": lambda: ops.swiglu_fwd(xd),
        "fastglu.swiglu (autograd Function)": lambda: fastglu.swiglu(x),
        "fastglu.swiglu's Function through Function.apply (not the lean apply)": lambda: (
            fastglu.GLUFunction.apply(
                x, None, None, None, ops.SILU, (False, False, False, "swiglu")
            )
        ),
        "fastglu.swiglu, input not requiring grad (the kernel call alone)": lambda: fastglu.swiglu(
            xd
        ),
        "torch.ops.fastglu.swiglu_fwd (torch.library op + its autograd)": lambda: (
            torch.ops.fastglu.swiglu_fwd(x)
        ),
        "torch.ops.fastglu.swiglu_fwd, no grad (torch.library op)": lambda: (
            torch.ops.fastglu.swiglu_fwd(xd)
        ),
        "torch eager silu(gate) * up": lambda: torch.nn.functional.silu(xd[:, :F]) * xd[:, F:],
    }
    dx_shaped = torch.randn_like(xd)

    def identity_fwd_bwd():
        IdentityFunction.apply(x).backward(dx_shaped)
        x.grad = None

    def fastglu_fwd_bwd():
        fastglu.swiglu(x).backward(dy)
        x.grad = None

    parts["an identity autograd.Function, forward + backward (the engine's floor)"] = (
        identity_fwd_bwd
    )
    parts["fastglu.swiglu, forward + backward"] = fastglu_fwd_bwd
    if on_cuda:
        parts["raw stream lookup"] = lambda: ops._raw_stream(0)
    breakdown = median_of_rounds(parts, rounds, n)
    return rows, breakdown


def variant_host_times(device="cuda", rounds=5, n=1000):
    """Host time of Megatron-Core's entry points on fastglu (``fastglu.functional``): forward, and
    forward + backward (bias and weights requiring grad), beside the same calls without the common
    case's short path (``ops._fwd_common`` / ``_bwd_common`` declining, the options checked on every
    call: every argument through the op layer's checks, the path before the short path; its time
    includes switching the short path off and on around each call, six attribute stores)."""
    T, F = (1, 1) if device == "cpu" else (8, 1024)
    x = torch.randn(T, 2 * F, device=device, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(2 * F, device=device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.rand(T, 1, device=device, requires_grad=True)
    dy = torch.randn(T, F, device=device, dtype=torch.bfloat16)
    impls = {
        "bias_swiglu_impl(x, bias)": lambda: fastglu.bias_swiglu_impl(x, b),
        "weighted_bias_swiglu_impl(x, None, weights)": lambda: fastglu.weighted_bias_swiglu_impl(
            x, None, w
        ),
        "weighted_bias_quick_geglu_impl(x, bias, weights, False, 1.0, 7.0)": lambda: (
            fastglu.weighted_bias_quick_geglu_impl(x, b, w, False, 1.0, 7.0)
        ),
    }
    short = (ops._fwd_common, ops._bwd_common, functional._megatron_params)
    checked = (
        lambda *a: None,
        lambda *a: None,
        lambda act, c, o, fn: ops.glu_params(act, clamp_value=c, glu_linear_offset=o, fn=fn),
    )

    def without_short_path(f):
        def run():
            ops._fwd_common, ops._bwd_common, functional._megatron_params = checked
            try:
                return f()
            finally:
                ops._fwd_common, ops._bwd_common, functional._megatron_params = short

        return run

    def fwd_bwd(f):
        def run():
            f().backward(dy)
            x.grad = b.grad = w.grad = None

        return run

    paths = {}
    for name, f in impls.items():
        paths[f"{name}: forward"] = f
        paths[f"{name}: forward, checked path"] = without_short_path(f)
        paths[f"{name}: forward + backward"] = fwd_bwd(f)
        paths[f"{name}: forward + backward, checked path"] = without_short_path(fwd_bwd(f))
    return median_of_rounds(paths, rounds, n)


def host_targets(device="cuda", rounds=7, n=1000):
    """Issue 23's host targets, timed in one process and one set of rounds: the identity Function's
    forward and forward + backward, and each fastglu entry's, as ratios to them (targets: forward
    <= 1.6 x, forward + backward <= 1.25 x). The input is the host-time problem of ``host_times``."""
    T, F = (1, 1) if device == "cpu" else (8, 1024)
    x = torch.randn(T, 2 * F, device=device, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(2 * F, device=device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.rand(T, 1, device=device, requires_grad=True)
    dy = torch.randn(T, F, device=device, dtype=torch.bfloat16)
    entries = {
        "fastglu.swiglu(x)": lambda: fastglu.swiglu(x),
        "fastglu.glu(x)": lambda: fastglu.glu(x),
        "bias_swiglu_impl(x, None)": lambda: fastglu.bias_swiglu_impl(x, None),
        "bias_swiglu_impl(x, bias)": lambda: fastglu.bias_swiglu_impl(x, b),
        "weighted_bias_swiglu_impl(x, None, weights)": lambda: fastglu.weighted_bias_swiglu_impl(
            x, None, w
        ),
        "weighted_bias_quick_geglu_impl(x, bias, weights, False, 1.0, 7.0)": lambda: (
            fastglu.weighted_bias_quick_geglu_impl(x, b, w, False, 1.0, 7.0)
        ),
    }
    paths = {("identity Function", k): f for k, f in identity_paths(x).items()}
    for name, f in entries.items():

        def fwd_bwd(f=f):
            f().backward(dy)
            x.grad = b.grad = w.grad = None

        paths[(name, "forward")], paths[(name, "fwd_bwd")] = f, fwd_bwd
    us = median_of_rounds(paths, rounds, n)
    ident = {k: us[("identity Function", k)] for k in ("forward", "fwd_bwd")}
    rows = {
        name: {
            "forward_us": us[(name, "forward")],
            "fwd_bwd_us": us[(name, "fwd_bwd")],
            "forward_ratio": us[(name, "forward")] / ident["forward"],
            "fwd_bwd_ratio": us[(name, "fwd_bwd")] / ident["fwd_bwd"],
        }
        for name in entries
    }
    return {
        "identity_fn_us": ident,
        "entries": rows,
        "targets": {"forward_ratio": 1.6, "fwd_bwd_ratio": 1.25},
    }


def print_host_targets(t):
    ident = t["identity_fn_us"]
    print(
        f"\nhost targets (one process): identity autograd.Function forward {ident['forward']:.2f} us, "
        f"forward + backward {ident['fwd_bwd']:.2f} us"
    )
    print(f"  {'entry':<66}{'fwd us':>8}{'x ident':>8}{'f+b us':>9}{'x ident':>8}")
    for name, r in t["entries"].items():
        ok = (
            r["forward_ratio"] <= t["targets"]["forward_ratio"]
            and r["fwd_bwd_ratio"] <= t["targets"]["fwd_bwd_ratio"]
        )
        print(
            f"  {name:<66}{r['forward_us']:>8.2f}{r['forward_ratio']:>8.2f}{r['fwd_bwd_us']:>9.2f}"
            f"{r['fwd_bwd_ratio']:>8.2f}  {'ok' if ok else 'over target'}"
        )
    print(
        f"  (targets: forward <= {t['targets']['forward_ratio']} x, forward + backward <= "
        f"{t['targets']['fwd_bwd_ratio']} x the identity Function)"
    )


class FC1Output(torch.autograd.Function):
    """fc1's output for ``peak_memory``: a view of the input x (which takes no gradient), made
    differentiable through ``anchor`` (one element standing for fc1's weight), so that the output is
    neither a leaf nor a view of one that requires grad: an in-place provider may overwrite it, as
    it overwrites a real fc1's output. Its backward consumes the gradient."""

    @staticmethod
    def forward(ctx, x, anchor):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return None, None


def peak_memory(providers, S=2048, B=4, F=8192, device="cuda"):
    out = {}
    anchor = torch.zeros(1, device=device, requires_grad=True)
    for name, provider in providers.items():

        def fn(x, provider=provider):
            return provider(FC1Output.apply(x, anchor))

        x = torch.randn(S, B, 2 * F, device=device, dtype=torch.bfloat16)
        dy = torch.randn(S, B, F, device=device, dtype=torch.bfloat16)
        if device != "cuda":  # (no allocator statistics: the providers' passes alone, e.g. tests)
            fn(x).backward(dy)
            out[name] = None
            continue
        for _ in range(2):  # the second pass is measured (compilation and caches out of the way)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            fn(x).backward(dy)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
        out[name] = peak / 2**20
        del x, dy
    return out


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, help="write the numbers as JSON here")
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cpu: host time only, on CPU tensors (no peak memory, no GPU-only peers)",
    )
    args = p.parse_args()
    on_gpu = args.device == "cuda"
    providers = {}
    for name in ("fastglu", "fastglu_library_op", "torch", "compile", "megatron", "liger"):
        if not on_gpu and name not in ("fastglu", "fastglu_library_op", "torch"):
            continue
        try:
            if name == "fastglu_library_op":
                providers[name] = torch.ops.fastglu.swiglu_fwd
            else:
                providers[name] = load_provider(name, on_gpu)[0]
        except Exception as e:  # a peer that is not installed is reported, not fatal
            print(f"note: {name}: {e}")
    if not on_gpu:
        print(
            "note: CPU tensors: a proxy of the GPU host's time (C CPU kernels in place of CUDA "
            "launches); the targets are measured on the GPU host"
        )
    targets = host_targets(args.device)
    print_host_targets(targets)
    host, breakdown = host_times(providers, device=args.device)
    print(f"{'provider':<20}{'forward us':>12}{'fwd+bwd us':>12}")
    for r in host:
        print(f"{r['provider']:<20}{r['forward_us']:>12.1f}{r['forward_backward_us']:>12.1f}")
    print("\nfastglu forward, where the host time goes (us per call):")
    for k, v in breakdown.items():
        print(f"  {v:8.2f}  {k}")
    variants = variant_host_times(args.device)
    print("\nMegatron-Core's entry points on fastglu (us per call):")
    for k, v in variants.items():
        print(f"  {v:8.2f}  {k}")
    if not on_gpu:
        if args.out:
            args.out.write_text(
                json.dumps(
                    {
                        "device": "cpu",
                        "torch": torch.__version__,
                        "host_us": host,
                        "fastglu_forward_breakdown_us": breakdown,
                        "variants_us": variants,
                        "host_targets": targets,
                    },
                    indent=1,
                )
            )
        return
    mem = peak_memory(dict(providers, fastglu_in_place=lambda x: fastglu.swiglu(x, in_place=True)))
    print("\npeak memory over forward+backward, S=2048 B=4 F=8192 bf16 (MiB above input and dy):")
    for k, v in mem.items():
        print(
            f"  {k:<18}{v:10.1f}  ({v / mem['megatron']:.2f} x megatron)"
            if "megatron" in mem
            else f"  {k:<18}{v:10.1f}"
        )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "gpu": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "host_us": host,
                    "fastglu_forward_breakdown_us": breakdown,
                    "variants_us": variants,
                    "peak_memory_mib": mem,
                    "host_targets": targets,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
