"""fastglu inside CUDA graphs (GPU only; skips without one).

A Megatron-style MLP block (fc1 Linear -> fastglu.swiglu -> fc2 Linear), forward and backward,
captured whole with ``torch.cuda.graph`` the way PyTorch's CUDA-graphs documentation shows (warmup
iterations on a side stream, then capture into static tensors), replayed with new input data, and
compared with eager mode on the same weights. During capture and replay
``torch.cuda.set_sync_debug_mode("error")`` turns any host synchronization into an error, and a
kernel launched on any stream other than the capturing (current) one would break the capture or be
missing from the replays (whose results are checked).
"""

import pytest
import torch
from swiglu_reference import rel_err

import fastglu

HAS_CUDA = torch.cuda.is_available() and fastglu.cuda_available()
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")


class MLP(torch.nn.Module):
    def __init__(self, hidden, ffn_hidden_size, in_place=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(hidden, 2 * ffn_hidden_size, bias=False)
        self.fc2 = torch.nn.Linear(ffn_hidden_size, hidden, bias=False)
        self.in_place = in_place

    def forward(self, x):
        return self.fc2(fastglu.swiglu(self.fc1(x), in_place=self.in_place))


def step(model, x, probe):
    out = model(x)
    loss = (out.float() * probe).sum()
    loss.backward()
    return out, loss


class SyncDebug:
    """torch.cuda.set_sync_debug_mode("error") for the duration of a block."""

    def __enter__(self):
        self.old = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")

    def __exit__(self, *exc):
        torch.cuda.set_sync_debug_mode(self.old)


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("shape", [(64, 512, 1408), (16, 4, 256, 768)], ids=["2d", "3d"])
def test_capture_forward_backward_and_replay_with_new_data(shape, in_place):
    *lead, hidden, F = shape
    torch.manual_seed(0)
    model = MLP(hidden, F, in_place).cuda().bfloat16()
    static_x = torch.randn(*lead, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    static_probe = torch.randn(*lead, hidden, device="cuda")

    # Warmup on a side stream (PyTorch docs, "Whole-network capture").
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model.zero_grad(set_to_none=True)
            static_x.grad = None
            step(model, static_x, static_probe)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    model.zero_grad(set_to_none=True)
    static_x.grad = None
    with torch.cuda.graph(
        graph
    ):  # (its own entry and exit synchronize: the debug mode is set inside)
        with SyncDebug():
            assert torch.cuda.is_current_stream_capturing()
            static_out, static_loss = step(model, static_x, static_probe)
    static_grads = [p.grad for p in model.parameters()] + [static_x.grad]

    previous = None
    for replay in range(3):
        x = torch.randn_like(static_x) * (1 + replay)
        probe = torch.randn_like(static_probe)
        with torch.no_grad():
            static_x.copy_(x)
            static_probe.copy_(probe)
        with SyncDebug():
            graph.replay()
        torch.cuda.synchronize()
        got = (static_out.clone(), static_loss.clone(), [g.clone() for g in static_grads])

        # eager on the same weights and data
        params = [p.detach().clone().requires_grad_() for p in model.parameters()]
        ref = MLP(hidden, F, in_place).cuda().bfloat16()
        with torch.no_grad():
            for p, q in zip(ref.parameters(), params):
                p.copy_(q)
        xe = x.detach().clone().requires_grad_()
        out, loss = step(ref, xe, probe)
        want_grads = [p.grad for p in ref.parameters()] + [xe.grad]
        assert rel_err(got[0], out) <= 1e-2, replay
        assert rel_err(got[1], loss) <= 1e-2, replay
        for g, w in zip(got[2], want_grads):
            assert rel_err(g, w) <= 1e-2, replay
        # new data really changed the captured results (the kernels are in the graph)
        if replay:
            assert not torch.equal(got[0], previous)
        previous = got[0]


def test_ops_capture_on_a_non_default_stream():
    """ops.swiglu_fwd / swiglu_bwd and the torch.library ops captured alone on the capture stream,
    each replayed with new data."""
    T, F = 257, 3420
    x = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
    for fwd, bwd in (
        (fastglu.ops.swiglu_fwd, fastglu.ops.swiglu_bwd),
        (torch.ops.fastglu.swiglu_fwd, torch.ops.fastglu.swiglu_bwd),
    ):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fwd(x), bwd(dy, x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), SyncDebug():
            y, dx = fwd(x), bwd(dy, x)
        for _ in range(2):
            x.copy_(torch.randn_like(x))
            dy.copy_(torch.randn_like(dy))
            with SyncDebug():
                graph.replay()
            assert rel_err(y, fastglu.ops.swiglu_fwd(x)) == 0.0
            assert rel_err(dx, fastglu.ops.swiglu_bwd(dy, x)) == 0.0


@pytest.mark.parametrize("case", ["bias_swiglu", "weighted_quick_geglu", "weighted_swiglu"])
def test_reductions_capture_and_replay(case):
    """The backwards that reduce (dbias, dweights: the tile kernel, or the flat kernel for weights
    alone with F a multiple of 256, then the reduction launched as its programmatic dependent)
    captured with their forward, replayed with new data: every result equal to the bit to the same
    call made eagerly (the reductions' order is fixed)."""
    T, F = 257, (1536 if case == "weighted_swiglu" else 1408)
    x = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    bias = torch.randn(2 * F, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weights = torch.rand(T, 1, device="cuda", dtype=torch.float32, requires_grad=True)
    probe = torch.randn(T, F, device="cuda")
    leaves = {"bias_swiglu": [x, bias], "weighted_swiglu": [x, weights]}.get(
        case, [x, bias, weights]
    )

    def run(xx, bb, ww, pp):
        if case == "bias_swiglu":
            y = fastglu.bias_swiglu_impl(xx, bb)
        elif case == "weighted_swiglu":
            y = fastglu.weighted_bias_swiglu_impl(xx, None, ww)
        else:
            y = fastglu.weighted_bias_quick_geglu_impl(
                xx, bb, ww, linear_offset=1.0, clamp_value=7.0
            )
        (y.float() * pp).sum().backward()
        return y

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            for leaf in leaves:
                leaf.grad = None
            run(x, bias, weights, probe)
    torch.cuda.current_stream().wait_stream(side)
    for leaf in leaves:
        leaf.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        with SyncDebug():
            static_y = run(x, bias, weights, probe)
    static_grads = [leaf.grad for leaf in leaves]
    for replay in range(2):
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
            bias.copy_(torch.randn_like(bias))
            weights.copy_(torch.rand_like(weights))
            probe.copy_(torch.randn_like(probe))
        with SyncDebug():
            graph.replay()
        torch.cuda.synchronize()
        eager = {id(t): t.detach().clone().requires_grad_() for t in (x, bias, weights)}
        want_y = run(eager[id(x)], eager[id(bias)], eager[id(weights)], probe)
        assert torch.equal(static_y, want_y), replay
        for got, leaf in zip(static_grads, leaves):
            assert torch.equal(got, eager[id(leaf)].grad), replay
