"""The host's floor for a Python autograd.Function: an identity Function's forward and forward +
backward, per call. Benchmark records carry it in their environment (``host_identity_fn_us``) so
that host times from different hosts can be read side by side, and ``bench/host_memory.py``
reports fastglu's entry points as ratios to it."""

from __future__ import annotations

import statistics
import time

import torch


class IdentityFunction(torch.autograd.Function):
    """A view forward, a fresh uninitialised gradient backward (no kernel in either): a Python
    Function's forward + backward through the autograd engine, the floor every Python-level provider
    (fastglu's Function, Liger's, Megatron's) pays before any work of its own."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return torch.empty_like(grad)


def _sync():
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def per_call_us(fn, n=1000):
    """Microseconds per call of fn over n calls (after 50 warm-up calls), with one synchronize."""
    for _ in range(50):
        fn()
    _sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    _sync()
    return (time.perf_counter() - t0) / n * 1e6


def median_of_rounds(fns, rounds=5, n=1000):
    """{name: median over `rounds` of the µs per call of fns[name]}, every fn timed once per round;
    each round starts one item later than the one before (no fn always runs first, or always after
    the same neighbour)."""
    samples = {k: [] for k in fns}
    items = list(fns.items())
    for r in range(rounds):
        s = r % len(items) if items else 0
        for k, fn in items[s:] + items[:s]:
            samples[k].append(per_call_us(fn, n))
    return {k: statistics.median(v) for k, v in samples.items()}


def identity_paths(x):
    """{"forward": f, "fwd_bwd": g}: the identity Function on x (which requires grad)."""
    dx = torch.randn_like(x.detach())

    def fwd():
        IdentityFunction.apply(x)

    def fwd_bwd():
        IdentityFunction.apply(x).backward(dx)
        x.grad = None

    return {"forward": fwd, "fwd_bwd": fwd_bwd}


def identity_function_us(device: str = "cuda", rounds: int = 5, n: int = 1000) -> dict:
    """The identity Function's host time per call on a small bf16 tensor of `device`:
    ``{"forward": us, "fwd_bwd": us, "device": device}`` (CPU tensors where no GPU is used)."""
    x = torch.randn(8, 2048, device=device, dtype=torch.bfloat16, requires_grad=True)
    us = median_of_rounds(identity_paths(x), rounds, n)
    return {
        "forward": round(us["forward"], 2),
        "fwd_bwd": round(us["fwd_bwd"], 2),
        "device": device,
    }
