"""Train a small Llama-style decoder with PyTorch's SwiGLU and with fastglu's, and compare the losses.

The runs share everything but the MLP activation: the same initial weights (one seeded model,
copied), the same batches in the same order, the same optimizer and schedule. The MLP is
Megatron-Core's layout: one fc1 projection ``dim -> 2 * ffn_hidden_size`` whose output holds
``[gate | up]``, then the activation, then fc2 ``ffn_hidden_size -> dim``. The runs:

- ``torch``:    ``gate, up = fc1_out.chunk(2, -1); silu(gate) * up`` (the eager formula of
  Megatron-Core's ``megatron/core/fusions/fused_bias_swiglu.py::swiglu``);
- ``fastglu``:  ``fastglu.swiglu(fc1_out)`` (the C CPU backend, or the CUDA kernels);
- ``control``:  ``torch`` again: on the CPU its curve must equal the torch curve bit for bit, which
  shows that nothing but the activation differs between runs (``--no-control`` skips it);
- ``rounding``: ``gate * sigmoid(gate) * up`` in fp32 math, rounded once: the same function with
  other roundings, to show how far any rounding-level change moves the curve (``--no-rounding``).

- ``fp8`` (``--fp8``): the whole MLP as ``fastglu.mlp_fp8(x, fc1.weight, fc2.weight)``: fc1 and
  fc2 (and their dgrad / wgrad GEMMs) in FP8 with DeepSeek-V3's blockwise scales, fastglu's GLU
  quantising y and dh for them. Not a rounding-level change: its check is a band (``--fp8-band``)
  on the last tenth of the curve and on the held-out loss against the torch run.

``--mlp separate`` uses Hugging Face LlamaMLP's layout instead (gate_proj and up_proj, two tensors)
with ``fastglu.silu_mul(gate, up)`` against ``silu(gate) * up``.

Precision: fp32 everywhere (``--dtype float32``, the CPU default), or bf16 autocast (fp32 master
weights, bf16 matmuls and activation; the GPU default). Training amplifies rounding differences:
the curves agree to rounding (~1e-7 in fp32) for the first tens of steps, then drift apart by as
much as the ``rounding`` run does (~1e-2), so the check is tight over the first ``--early`` steps
(``--tol-early``) and loose over the whole curve (``--tol``).

The model: token embedding, ``--layers`` pre-norm blocks (RMSNorm -> causal multi-head attention
with rotary position embeddings -> residual; RMSNorm -> SwiGLU MLP -> residual), a final RMSNorm and
an untied output projection (the LLaMA architecture, Touvron et al. 2023, arXiv:2302.13971;
RMSNorm: Zhang & Sennrich 2019, arXiv:1910.07467; RoPE: Su et al. 2021, arXiv:2104.09864;
SwiGLU: Shazeer 2020, arXiv:2002.05202).

The data: a character-level corpus generated here from a small fixed-seed English-like grammar
(subject-verb agreement, adjectives, relative clauses, prepositional phrases), so the model has
something to learn (spelling, word order, agreement) and the loss falls from ln(vocab) towards the
grammar's entropy. Nothing is downloaded.

Writes into ``--out``: ``results.json`` (the configuration, every run's loss curve, the differences
to the torch run, held-out losses, timings), ``loss.png`` (the curves and |delta loss| per step;
needs matplotlib, else skipped with a note -- ``plot.py results.json`` draws it later) and
``train.log`` (this run's log).

    python examples/llama/train.py --out /tmp/llama                        # CPU, fp32
    python examples/llama/train.py --device cuda --out /tmp/llama-gpu      # GPU, bf16 autocast

Exit status: 0 when the checks pass (|delta loss| within --tol-early over the first --early steps
and within --tol over all -- in bf16, or within twice what the rounding run moved, whichever is
larger --, the last tenth of every run's curve 10% below its first loss, and on the CPU the control
run is identical; with --fp8 the fp8 run within --fp8-band); 1 otherwise; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import logging
import math
import os
import platform
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import fastglu

log = logging.getLogger("llama")

# ---------------------------------------------------------------------------------------------
# Data: a deterministic character-level corpus from a small grammar.
# ---------------------------------------------------------------------------------------------

# (singular, plural) nouns; (plural/base form, third-person singular) verbs.
NOUNS = [
    ("cat", "cats"),
    ("dog", "dogs"),
    ("bird", "birds"),
    ("fox", "foxes"),
    ("horse", "horses"),
    ("mouse", "mice"),
    ("child", "children"),
    ("teacher", "teachers"),
    ("farmer", "farmers"),
    ("queen", "queens"),
    ("robot", "robots"),
    ("wolf", "wolves"),
    ("sheep", "sheep"),
    ("baker", "bakers"),
]
ADJECTIVES = ["small", "big", "red", "quiet", "old", "happy", "green", "clever", "lazy", "brave"]
TRANSITIVE = [
    ("see", "sees"),
    ("chase", "chases"),
    ("find", "finds"),
    ("like", "likes"),
    ("watch", "watches"),
    ("follow", "follows"),
    ("help", "helps"),
    ("carry", "carries"),
]
INTRANSITIVE = [
    ("sleep", "sleeps"),
    ("run", "runs"),
    ("sing", "sings"),
    ("wait", "waits"),
    ("cry", "cries"),
]
PLACES = ["the river", "the garden", "the house", "the hill", "the market", "the old bridge"]
PREPOSITIONS = ["near", "behind", "under", "beside", "across"]
ADVERBS = ["slowly", "today", "again", "quietly", "at night"]


def _zipf(rng: random.Random, items):
    """One of ``items``, the i-th (0-based) with probability proportional to 1 / (i + 1)."""
    return rng.choices(items, weights=[1.0 / (i + 1) for i in range(len(items))])[0]


def _noun_phrase(rng: random.Random, plural: bool, depth: int) -> str:
    words = [rng.choice(["the", "some"]) if plural else rng.choice(["the", "a", "every"])]
    if rng.random() < 0.4:
        words.append(_zipf(rng, ADJECTIVES))
    words.append(_zipf(rng, NOUNS)[1 if plural else 0])
    if depth == 0 and rng.random() < 0.2:  # a relative clause agrees with its head noun
        words += ["that", _verb_phrase(rng, plural, depth + 1)]
    return " ".join(words)


def _verb_phrase(rng: random.Random, plural: bool, depth: int) -> str:
    form = 0 if plural else 1
    if rng.random() < 0.6:
        return " ".join(
            [_zipf(rng, TRANSITIVE)[form], _noun_phrase(rng, rng.random() < 0.4, depth + 1)]
        )
    return _zipf(rng, INTRANSITIVE)[form]


def sentence(rng: random.Random) -> str:
    plural = rng.random() < 0.4
    words = [_noun_phrase(rng, plural, 0), _verb_phrase(rng, plural, 0)]
    if rng.random() < 0.3:
        words.append(f"{rng.choice(PREPOSITIONS)} {rng.choice(PLACES)}")
    if rng.random() < 0.2:
        words.append(rng.choice(ADVERBS))
    return " ".join(words) + "."


def make_corpus(n_chars: int, seed: int) -> str:
    """At least ``n_chars`` characters of grammar text, deterministic in ``seed`` (Python's
    ``random.Random``: the same text on every platform); a newline after every 8th sentence."""
    rng = random.Random(seed)
    parts, total, i = [], 0, 0
    while total < n_chars:
        i += 1
        s = sentence(rng) + ("\n" if i % 8 == 0 else " ")
        parts.append(s)
        total += len(s)
    return "".join(parts)


def vocabulary() -> list[str]:
    """Every character the grammar can produce, sorted (the same for every seed)."""
    words = [w for pair in NOUNS + TRANSITIVE + INTRANSITIVE for w in pair]
    words += ADJECTIVES + PLACES + PREPOSITIONS + ADVERBS + ["the", "some", "a", "every", "that"]
    return sorted(set("".join(words)) | set(" .\n"))


def encode(text: str, chars: list[str]) -> torch.Tensor:
    index = {c: i for i, c in enumerate(chars)}
    return torch.tensor([index[c] for c in text], dtype=torch.long)


def batch_offsets(n_tokens: int, seq: int, batch: int, steps: int, seed: int) -> torch.Tensor:
    """[steps, batch] start offsets of the training windows, drawn once so both runs see the same
    batches in the same order."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n_tokens - seq - 1, (steps, batch), generator=g)


def windows(tokens: torch.Tensor, offsets: torch.Tensor, seq: int):
    """(inputs, targets), each [len(offsets), seq], targets shifted by one token."""
    idx = offsets[:, None] + torch.arange(seq + 1)
    w = tokens[idx]
    return w[:, :-1], w[:, 1:]


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------


def torch_swiglu(fc1_out: torch.Tensor) -> torch.Tensor:
    """PyTorch eager SwiGLU on the Megatron layout: [..., 2F] = [gate | up] -> silu(gate) * up, [..., F]."""
    gate, up = fc1_out.chunk(2, dim=-1)
    return F.silu(gate) * up


def rounding_swiglu(fc1_out: torch.Tensor) -> torch.Tensor:
    """The same function with other roundings: ``gate * sigmoid(gate) * up`` in fp32 math, rounded once
    to the input's dtype (in bf16 this is what fastglu computes, include/fastglu.h). Its run is the
    rounding control: how far any rounding-level change to the activation moves the loss curve."""
    gate, up = fc1_out.float().chunk(2, dim=-1)
    return (gate * torch.sigmoid(gate) * up).to(fc1_out.dtype)


def torch_silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Hugging Face LlamaMLP's activation on separate gate_proj / up_proj outputs: silu(gate) * up."""
    return F.silu(gate) * up


def rounding_silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``rounding_swiglu`` for separate gate / up tensors."""
    return (gate.float() * torch.sigmoid(gate.float()) * up.float()).to(gate.dtype)


def fp8_block(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """The whole MLP as ``fastglu.mlp_fp8`` (``--fp8``): fc1, the SwiGLU and fc2 with FP8 GEMMs
    (DeepSeek-V3's blockwise recipe: x and dO in 1 x 128 blocks, the weights in 128 x 128 blocks;
    torch._scaled_mm on an sm_90 GPU, the dequantise-and-matmul reference path elsewhere). The fp32
    master weights are quantised as they are; x enters in the autocast dtype (bf16) where autocast
    is on, as the bf16 run's fc1 would cast it."""
    if torch.is_autocast_enabled(x.device.type):
        x = x.to(torch.get_autocast_dtype(x.device.type))
    return fastglu.mlp_fp8(x, w1, w2)


fp8_block.whole_block = True  # MLP.forward hands it x and the weights, not fc1's output

# --mlp layout -> run name -> MLP activation. "control" repeats the torch run: its curve must be the
# torch curve exactly (the pipeline is deterministic, so any difference elsewhere comes from the
# activation alone). fastglu.silu_mul (two tensors) is newer than fastglu.swiglu: None where missing.
ACTIVATIONS = {
    "fused": {
        "torch": torch_swiglu,
        "fastglu": fastglu.swiglu,
        "control": torch_swiglu,
        "rounding": rounding_swiglu,
        "fp8": fp8_block if hasattr(fastglu, "mlp_fp8") else None,
    },
    "separate": {
        "torch": torch_silu_mul,
        "fastglu": getattr(fastglu, "silu_mul", None),
        "control": torch_silu_mul,
        "rounding": rounding_silu_mul,
    },
}


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight, computed in fp32 (Zhang & Sennrich 2019)."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope_tables(seq: int, head_dim: int, base: float = 10000.0):
    """cos, sin tables [seq, head_dim] for rotary embeddings, angles pos * base^(-2i/head_dim)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv_freq)  # [seq, head_dim/2]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x, cos, sin):
    """Rotate pairs (x[i], x[i + head_dim/2]) by the position's angle; x: [B, heads, T, head_dim]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # Written out (not scaled_dot_product_attention, whose fused GPU backward kernels may accumulate
        # with atomics) so that the backward is deterministic on the GPU too: all runs must do the same
        # arithmetic outside the MLP.
        scores = (q @ k.transpose(-2, -1)).float() * (1.0 / math.sqrt(self.head_dim))
        probs = scores.masked_fill(mask, float("-inf")).softmax(-1).to(v.dtype)
        out = (probs @ v).transpose(1, 2).reshape(B, T, D)
        return self.proj(out)


class MLP(nn.Module):
    """The SwiGLU MLP, in one of two layouts (the same function, different weight layouts):

    - ``fused`` (Megatron-Core): fc1: dim -> 2 * ffn_hidden_size, whose output is ``[gate | up]``;
      ``act(fc1_out)``; fc2: ffn_hidden_size -> dim.
    - ``separate`` (Hugging Face LlamaMLP): gate_proj, up_proj: dim -> ffn_hidden_size;
      ``act(gate, up)``; down_proj: ffn_hidden_size -> dim.
    """

    def __init__(self, dim: int, ffn_hidden_size: int, layout: str = "fused"):
        super().__init__()
        self.layout = layout
        if layout == "fused":
            self.fc1 = nn.Linear(dim, 2 * ffn_hidden_size, bias=False)
            self.fc2 = nn.Linear(ffn_hidden_size, dim, bias=False)
        else:
            self.gate_proj = nn.Linear(dim, ffn_hidden_size, bias=False)
            self.up_proj = nn.Linear(dim, ffn_hidden_size, bias=False)
            self.down_proj = nn.Linear(ffn_hidden_size, dim, bias=False)
        self.act = ACTIVATIONS[layout]["torch"]

    def forward(self, x):
        if getattr(self.act, "whole_block", False):
            return self.act(x, self.fc1.weight, self.fc2.weight)
        if self.layout == "fused":
            return self.fc2(self.act(self.fc1(x)))
        return self.down_proj(self.act(self.gate_proj(x), self.up_proj(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, ffn_hidden_size: int, layout: str):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(dim), Attention(dim, heads)
        self.mlp_norm, self.mlp = RMSNorm(dim), MLP(dim, ffn_hidden_size, layout)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(
        self,
        vocab: int,
        dim: int,
        layers: int,
        heads: int,
        ffn_hidden_size: int,
        seq: int,
        layout: str = "fused",
    ):
        super().__init__()
        if dim % heads or (dim // heads) % 2:
            raise ValueError(f"dim ({dim}) must split into {heads} heads of an even head_dim")
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(
            Block(dim, heads, ffn_hidden_size, layout) for _ in range(layers)
        )
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        cos, sin = rope_tables(seq, dim // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer(
            "mask", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False
        )
        # GPT-2-style init: N(0, 0.02), the residual-branch outputs scaled by 1/sqrt(2 * layers).
        for name, p in self.named_parameters():
            if p.dim() == 2:
                residual_out = name.endswith(
                    ("attn.proj.weight", "mlp.fc2.weight", "mlp.down_proj.weight")
                )
                std = 0.02 / math.sqrt(2 * layers) if residual_out else 0.02
                nn.init.normal_(p, 0.0, std)

    def set_activation(self, act):
        for block in self.blocks:
            block.mlp.act = act

    def forward(self, idx):
        T = idx.shape[1]
        x = self.embed(idx)
        cos, sin, mask = self.cos[:T], self.sin[:T], self.mask[:T, :T]
        for block in self.blocks:
            x = block(x, cos, sin, mask)
        return self.head(self.norm(x))


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warmup over ``warmup`` steps, then cosine decay to lr / 10 at the last step."""
    if step < warmup:
        return lr * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - 1 - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * t)))


def _autocast(device: str, dtype: torch.dtype):
    if dtype == torch.float32:
        return torch.autocast(device_type=device, enabled=False)
    return torch.autocast(device_type=device, dtype=dtype)


def _sync(device: str):
    if device == "cuda":
        torch.cuda.synchronize()


def train(model0: Llama, act, train_tokens, offsets, args, val_tokens=None, label=""):
    """Train a copy of ``model0`` with MLP activation ``act`` on the batches ``offsets`` selects.

    Returns a dict: ``loss`` (the training loss of every step, before its update), ``val_loss``
    (held-out loss after training, or None), ``seconds`` (wall time of all steps), ``ms_per_step``
    (wall time per step after the first three), ``load_avg`` (the 1-minute load average at the end).
    """
    model = copy.deepcopy(model0)
    model.set_activation(act)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    losses = []
    skip = min(3, args.steps - 1)
    _sync(args.device)
    start = after_skip = time.perf_counter()
    for step in range(args.steps):
        x, y = windows(train_tokens, offsets[step], args.seq)
        x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr, args.warmup)
        with _autocast(args.device, args.torch_dtype):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.detach())
        if (
            step + 1 == skip
        ):  # per-step time without the first steps' one-time costs (allocations, kernel loads)
            _sync(args.device)
            after_skip = time.perf_counter()
        if (step + 1) % args.log_every == 0 or step == 0 or step + 1 == args.steps:
            log.info(
                "%-8s step %4d/%d  loss %.4f  lr %.2e  %.1f s",
                label,
                step + 1,
                args.steps,
                losses[-1].item(),
                opt.param_groups[0]["lr"],
                time.perf_counter() - start,
            )
    _sync(args.device)
    seconds = time.perf_counter() - start
    losses = torch.stack(losses).double().cpu().tolist()
    val = evaluate(model, val_tokens, args) if val_tokens is not None else None
    ms_per_step = 1e3 * (start + seconds - after_skip) / (args.steps - skip)
    # The machine's 1-minute load average at the end of the run: the times above are only meaningful
    # when it is below the core count (other jobs on the cores stretch them, not the activation).
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "loss": losses,
        "val_loss": val,
        "seconds": seconds,
        "ms_per_step": ms_per_step,
        "load_avg": load,
    }


@torch.no_grad()
def evaluate(model: Llama, tokens: torch.Tensor, args) -> float:
    """Mean next-character loss over consecutive non-overlapping windows of ``tokens``."""
    model.eval()
    n = (len(tokens) - 1) // args.seq
    offsets = torch.arange(n) * args.seq
    total, count = 0.0, 0
    for chunk in offsets.split(args.batch):
        x, y = windows(tokens, chunk, args.seq)
        with _autocast(args.device, args.torch_dtype):
            logits = model(x.to(args.device))
        total += F.cross_entropy(
            logits.float().view(-1, logits.shape[-1]),
            y.to(args.device).reshape(-1),
            reduction="sum",
        ).item()
        count += y.numel()
    model.train()
    return total / count


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

# Defaults per device: the CPU one finishes in a few minutes on 2 cores; the GPU one is larger.
PRESETS = {
    "cpu": dict(
        dtype="float32", steps=300, dim=128, layers=4, heads=4, ffn=352, seq=128, batch=16, lr=3e-3
    ),
    "cuda": dict(
        dtype="bfloat16",
        steps=600,
        dim=512,
        layers=8,
        heads=8,
        ffn=1408,
        seq=256,
        batch=32,
        lr=1e-3,
    ),
}
# Default tolerances per dtype on |loss(fastglu) - loss(torch)| (measured: see README.md): over the first
# --early steps, while rounding differences are still rounding-sized, and over the whole curve, which
# training's sensitivity amplifies to what any rounding change gives (the "rounding" run shows it).
TOL_EARLY = {"float32": 1e-4, "bfloat16": 2e-2}
TOLERANCES = {"float32": 5e-2, "bfloat16": 1e-1}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# The FP8 run's band against the torch run: its GEMM operands carry e4m3's rounding (~6 % relative
# per GEMM output), so its curve is not the same trajectory within rounding; what is asked is that
# it trains as well: the last tenth of the curve and the held-out loss within this many nats.
FP8_BAND = {"float32": 0.05, "bfloat16": 0.05}


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Defaults: " + "; ".join(f"{d}: {v}" for d, v in PRESETS.items()),
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument(
        "--dtype", choices=list(DTYPES), help="float32, or bfloat16 autocast (fp32 master weights)"
    )
    p.add_argument("--steps", type=int, help="optimizer steps per run")
    p.add_argument("--dim", type=int, help="model width d_model")
    p.add_argument("--layers", type=int, help="decoder blocks")
    p.add_argument("--heads", type=int, help="attention heads (dim / heads must be even)")
    p.add_argument("--ffn", type=int, help="ffn_hidden_size F (fc1 writes 2F: [gate | up])")
    p.add_argument(
        "--mlp",
        choices=list(ACTIVATIONS),
        default="fused",
        help="fused: Megatron's fc1 -> [gate | up], fastglu.swiglu (default); separate: Hugging Face's "
        "gate_proj / up_proj, fastglu.silu_mul",
    )
    p.add_argument("--seq", type=int, help="sequence length in characters")
    p.add_argument("--batch", type=int, help="sequences per step")
    p.add_argument(
        "--lr", type=float, help="peak learning rate (AdamW, warmup then cosine to lr/10)"
    )
    p.add_argument("--warmup", type=int, default=None, help="warmup steps (default: steps // 10)")
    p.add_argument(
        "--seed", type=int, default=1234, help="seeds the corpus, the init and the batch order"
    )
    p.add_argument(
        "--val-chars", type=int, default=32768, help="size of the held-out text (another seed)"
    )
    p.add_argument(
        "--early", type=int, help="steps checked against --tol-early (default: steps // 10)"
    )
    p.add_argument(
        "--tol-early",
        type=float,
        help="largest accepted |delta loss| in the first --early steps "
        "(default: " + ", ".join(f"{k} {v:g}" for k, v in TOL_EARLY.items()) + ")",
    )
    p.add_argument(
        "--tol",
        type=float,
        help="largest accepted |delta loss| over the whole curve (default: "
        + ", ".join(f"{k} {v:g}" for k, v in TOLERANCES.items())
        + ")",
    )
    p.add_argument(
        "--control",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also train the torch activation a second time: on the CPU its curve must be the torch "
        "curve exactly (default: on)",
    )
    p.add_argument(
        "--rounding",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also train with gate * sigmoid(gate) * up in fp32 math: how far a rounding-level change "
        "moves the curve (default: on)",
    )
    p.add_argument(
        "--fp8",
        action="store_true",
        help="also train with the whole MLP as fastglu.mlp_fp8 (FP8 GEMMs, blockwise recipe; --mlp "
        "fused only) and check its loss against the torch run within --fp8-band",
    )
    p.add_argument(
        "--fp8-band",
        type=float,
        default=None,
        help="largest accepted mean |delta loss| of the fp8 run against torch over the last tenth of "
        "the steps, and |delta held-out loss| (default: "
        + ", ".join(f"{k} {v:g}" for k, v in FP8_BAND.items())
        + ")",
    )
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument(
        "--out", type=Path, required=True, help="directory for results.json, loss.png, train.log"
    )
    args = p.parse_args(argv)
    for key, value in PRESETS[args.device].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.tol is None:
        args.tol = TOLERANCES[args.dtype]
    if args.tol_early is None:
        args.tol_early = TOL_EARLY[args.dtype]
    if args.warmup is None:
        args.warmup = max(1, args.steps // 10)
    if args.early is None:
        args.early = max(1, args.steps // 10)
    args.early = min(args.early, args.steps)
    for key in (
        "steps",
        "dim",
        "layers",
        "heads",
        "ffn",
        "seq",
        "batch",
        "warmup",
        "early",
        "log_every",
        "val_chars",
    ):
        if getattr(args, key) < 1:
            p.error(f"--{key.replace('_', '-')} must be positive, got {getattr(args, key)}")
    if args.dim % args.heads or (args.dim // args.heads) % 2:
        p.error(f"--dim {args.dim} must split into --heads {args.heads} heads of an even size")
    if args.fp8_band is None:
        args.fp8_band = FP8_BAND[args.dtype]
    if args.fp8 and ACTIVATIONS[args.mlp].get("fp8") is None:
        p.error(
            f"--fp8: needs --mlp fused and fastglu.mlp_fp8 (this fastglu: {fastglu.__version__})"
        )
    if ACTIVATIONS[args.mlp]["fastglu"] is None:
        p.error(f"--mlp {args.mlp}: this fastglu ({fastglu.__version__}) has no silu_mul")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA GPU")
    if args.device == "cuda" and not fastglu.cuda_available():
        p.error(
            "--device cuda: fastglu was built without its CUDA backend (fastglu.cuda_built() is "
            f"{fastglu.cuda_built()})"
        )
    args.torch_dtype = DTYPES[args.dtype]
    return args


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else platform's machine type."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def setup_logging(out: Path):
    log.setLevel(logging.INFO)
    log.handlers.clear()
    log.propagate = False
    fmt = logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S")
    for handler in (
        logging.StreamHandler(sys.stdout),
        logging.FileHandler(out / "train.log", mode="w"),
    ):
        handler.setFormatter(fmt)
        log.addHandler(handler)


def compare(a: list[float], b: list[float]):
    """(max |a - b|, the step where it occurs, 1-based)."""
    diffs = [abs(x - y) for x, y in zip(a, b)]
    i = max(range(len(diffs)), key=diffs.__getitem__)
    return diffs[i], i + 1


def _plot_module():
    """examples/llama/plot.py, loaded by path (it sits next to this file, not on sys.path)."""
    spec = importlib.util.spec_from_file_location(
        "llama_example_plot", Path(__file__).resolve().parent / "plot.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def torch_settings(args):
    """--threads, and on the GPU deterministic kernels without TF32, restored on exit (main() may run
    inside a test session)."""
    saved = (
        torch.get_num_threads(),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )
    try:
        if args.threads:
            torch.set_num_threads(args.threads)
        if args.device == "cuda":
            # Deterministic cuBLAS (the variable counts only before cuBLAS starts: scripts/device_llama.sh
            # sets it too) and kernels: the runs must do the same arithmetic outside the MLP, or the
            # comparison measures GPU nondeterminism instead of the activation.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        yield
    finally:
        torch.set_num_threads(saved[0])
        torch.use_deterministic_algorithms(saved[1], warn_only=saved[2])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[3], saved[4]


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    setup_logging(args.out)
    with torch_settings(args):
        return run(args)


def run(args) -> int:
    """Train every run, compare, write results.json / loss.png; returns the exit status."""
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else cpu_name()
    log.info(
        "fastglu %s, torch %s, %s (%s), %d CPU threads",
        fastglu.__version__,
        torch.__version__,
        args.device,
        device_name,
        torch.get_num_threads(),
    )

    chars = vocabulary()
    train_chars = args.steps * args.batch * args.seq // 2 + 10 * args.seq  # each character seen ~2x
    train_text = make_corpus(train_chars, args.seed)
    train_tokens = encode(train_text, chars)
    val_tokens = encode(make_corpus(max(2 * args.seq, args.val_chars), args.seed + 1), chars)
    offsets = batch_offsets(len(train_tokens), args.seq, args.batch, args.steps, args.seed)
    log.info(
        "corpus: %d train / %d held-out characters, vocabulary %d (ln V = %.3f); sample: %r",
        len(train_tokens),
        len(val_tokens),
        len(chars),
        math.log(len(chars)),
        train_text[:120],
    )

    torch.manual_seed(args.seed)
    model0 = Llama(len(chars), args.dim, args.layers, args.heads, args.ffn, args.seq, args.mlp).to(
        args.device
    )
    n_params = sum(p.numel() for p in model0.parameters())
    log.info(
        "model: dim %d, %d layers, %d heads, ffn_hidden_size %d (%s MLP), seq %d, batch %d, %.2fM parameters; "
        "%s, %d steps, lr %.1e",
        args.dim,
        args.layers,
        args.heads,
        args.ffn,
        args.mlp,
        args.seq,
        args.batch,
        n_params / 1e6,
        args.dtype,
        args.steps,
        args.lr,
    )

    order = ["torch", "fastglu"] + [
        name for name in ("control", "rounding", "fp8") if getattr(args, name)
    ]
    runs = {}
    for name in order:
        runs[name] = train(
            model0, ACTIVATIONS[args.mlp][name], train_tokens, offsets, args, val_tokens, label=name
        )
        load = runs[name]["load_avg"]
        log.info(
            "%s: %.1f s (%.1f ms/step; load average %s on %d cores), final loss %.4f, held-out loss %.4f",
            name,
            runs[name]["seconds"],
            runs[name]["ms_per_step"],
            "n/a" if load is None else f"{load:.1f}",
            os.cpu_count(),
            runs[name]["loss"][-1],
            runs[name]["val_loss"],
        )

    ref = runs["torch"]["loss"]
    tail = max(1, args.steps // 10)
    vs_torch = {}
    for name in order[1:]:
        loss = runs[name]["loss"]
        worst, worst_step = compare(loss, ref)
        vs_torch[name] = {
            "max_abs_dloss": worst,
            "max_abs_dloss_step": worst_step,
            "early_max_abs_dloss": compare(loss[: args.early], ref[: args.early])[0],
            "abs_dloss_step1": abs(loss[0] - ref[0]),
            "abs_dval_loss": abs(runs[name]["val_loss"] - runs["torch"]["val_loss"]),
            "tail_mean_abs_dloss": sum(abs(a - b) for a, b in zip(loss[-tail:], ref[-tail:]))
            / tail,
        }
    fg = vs_torch["fastglu"]
    # learning: the last tenth of the curve averages at least 10% below the first loss (the tiny bf16
    # GPU run of tests/python fell 3.35 -> 2.95 in 30 steps, short of the 0.5 nats first asked here)
    fell = all(sum(r["loss"][-tail:]) / tail < 0.9 * r["loss"][0] for r in runs.values())
    # bf16 with the rounding run: training amplifies any rounding-level change by a factor that varies
    # run to run (H200 run 12: the rounding run itself moved 0.051 in the first 60 steps, past the
    # fixed 2e-2), so the bound is also twice what the rounding run moved over the same steps
    tol_early, tol = args.tol_early, args.tol
    if args.dtype == "bfloat16" and "rounding" in vs_torch:
        tol_early = max(tol_early, 2 * vs_torch["rounding"]["early_max_abs_dloss"])
        tol = max(tol, 2 * vs_torch["rounding"]["max_abs_dloss"])
    checks = {
        "early": fg["early_max_abs_dloss"] <= tol_early,
        "whole": fg["max_abs_dloss"] <= tol,
        "loss_fell": fell,
    }
    if "fp8" in vs_torch:
        f8 = vs_torch["fp8"]
        checks["fp8_band"] = max(f8["tail_mean_abs_dloss"], f8["abs_dval_loss"]) <= args.fp8_band
    if "control" in vs_torch and args.device == "cpu":  # on the GPU reported, not required
        checks["control_identical"] = vs_torch["control"]["max_abs_dloss"] == 0.0
    result = {
        "config": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k != "torch_dtype"
        },
        "environment": {
            "fastglu": fastglu.__version__,
            "torch": torch.__version__,
            "device": device_name,
            "cpu_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "model": {
            "parameters": n_params,
            "vocab": len(chars),
            "train_chars": len(train_tokens),
            "val_chars": len(val_tokens),
        },
        "max_abs_dloss": fg["max_abs_dloss"],  # fastglu against torch, over the whole curve
        "max_abs_dloss_step": fg["max_abs_dloss_step"],
        "early_max_abs_dloss": fg["early_max_abs_dloss"],  # the same over the first --early steps
        "vs_torch": vs_torch,
        "checks": checks,
        "tolerances": {"early": tol_early, "whole": tol},
        "ok": all(checks.values()),
        "runs": runs,
    }
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")

    if "fp8" in vs_torch:
        log.info(
            "fp8      vs torch: mean |delta loss| over the last %d steps %.3g, held-out %.3g "
            "(band %.3g); final loss %.4f (fp8) vs %.4f (torch)",
            tail,
            vs_torch["fp8"]["tail_mean_abs_dloss"],
            vs_torch["fp8"]["abs_dval_loss"],
            args.fp8_band,
            runs["fp8"]["loss"][-1],
            ref[-1],
        )
    for name, v in vs_torch.items():
        log.info(
            "%-8s vs torch: max |delta loss| %.3g (step %d); first %d steps %.3g; step 1 %.3g; held-out %.3g",
            name,
            v["max_abs_dloss"],
            v["max_abs_dloss_step"],
            args.early,
            v["early_max_abs_dloss"],
            v["abs_dloss_step1"],
            v["abs_dval_loss"],
        )
    log.info(
        "tolerances: first %d steps %.3g, whole curve %.3g; loss %.3f -> %.3f (torch), %.3f -> %.3f (fastglu)",
        args.early,
        tol_early,
        tol,
        ref[0],
        ref[-1],
        runs["fastglu"]["loss"][0],
        runs["fastglu"]["loss"][-1],
    )
    png = _plot_module().plot(result, args.out / "loss.png")
    log.info(
        "wrote %s%s", args.out / "results.json", f", {png}" if png else " (no matplotlib: no plot)"
    )
    if not result["ok"]:
        log.error("FAILED: %s", ", ".join(k for k, v in checks.items() if not v))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
