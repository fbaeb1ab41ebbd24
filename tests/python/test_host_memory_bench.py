"""bench/host_memory.py's own paths on CPU tensors (the GPU host runs the same code)."""

import importlib.util
from pathlib import Path

import fastglu

_PATH = Path(__file__).resolve().parents[2] / "bench" / "host_memory.py"


def _bench():
    spec = importlib.util.spec_from_file_location("host_memory_bench", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_peak_memory_passes_an_in_place_provider_a_non_leaf_input():
    # fc1's stand-in must hand the providers a tensor that in_place=True may overwrite (not a view
    # of a leaf that requires grad, which fastglu refuses with ValueError), as a real fc1 does.
    bench = _bench()
    seen = []

    def in_place(h):
        seen.append((h.requires_grad, h.is_leaf))
        return fastglu.swiglu(h, in_place=True)

    out = bench.peak_memory(
        {"fastglu": fastglu.swiglu, "fastglu_in_place": in_place}, S=3, B=2, F=8, device="cpu"
    )
    assert set(out) == {"fastglu", "fastglu_in_place"}
    assert seen == [(True, False)]


def test_host_targets_report_ratios_to_the_identity_function():
    bench = _bench()
    t = bench.host_targets("cpu", rounds=1, n=5)
    assert t["targets"] == {"forward_ratio": 1.6, "fwd_bwd_ratio": 1.25}
    ident = t["identity_fn_us"]
    assert ident["forward"] > 0 and ident["fwd_bwd"] > 0
    assert "fastglu.swiglu(x)" in t["entries"] and "bias_swiglu_impl(x, bias)" in t["entries"]
    for r in t["entries"].values():
        assert abs(r["forward_ratio"] - r["forward_us"] / ident["forward"]) < 1e-9
        assert abs(r["fwd_bwd_ratio"] - r["fwd_bwd_us"] / ident["fwd_bwd"]) < 1e-9
