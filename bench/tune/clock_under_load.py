"""The GPU's SM clock, power and throttle reasons while one bf16 GEMM runs back to back.

    python bench/tune/clock_under_load.py [--seconds 15] [--n 8192]

Idles 2 s, then runs an n x n x n bf16 matmul back to back for `seconds`, timing each with CUDA
events, while a thread samples NVML every 100 ms; prints one line per half second: the SM clock,
the power draw, the temperature, the active clock-throttle reasons and the median GEMM time in that
half second. Why: to see whether the power cap's clock changes move a kernel's time (for this
matmul on the H200 they did not: docs/mlp.md, "Where it stands").
A development tool: it checks nothing and asserts nothing.
"""

import argparse
import statistics
import threading
import time

import pynvml
import torch

REASONS = {
    "GpuIdle": 0x1,
    "AppClocks": 0x2,
    "SwPowerCap": 0x4,
    "HwSlowdown": 0x8,
    "SyncBoost": 0x10,
    "SwThermal": 0x20,
    "HwThermal": 0x40,
    "HwPowerBrake": 0x80,
}


def sampler(handle, out, stop):
    reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
        pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    while not stop.is_set():
        r = reasons(handle)
        out.append(
            (
                time.perf_counter(),
                pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
                "+".join(k for k, v in REASONS.items() if r & v) or "-",
            )
        )
        time.sleep(0.1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--n", type=int, default=8192)
    a = p.parse_args()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    x = torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    samples, gemms, stop = [], [], threading.Event()
    th = threading.Thread(target=sampler, args=(handle, samples, stop))
    t0 = time.perf_counter()
    th.start()
    time.sleep(2.0)
    while time.perf_counter() - t0 < 2.0 + a.seconds:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        x @ y
        e.record()
        e.synchronize()
        gemms.append((time.perf_counter(), s.elapsed_time(e)))
    time.sleep(2.0)
    stop.set()
    th.join()
    print(f"{pynvml.nvmlDeviceGetName(handle)}; {a.n}^3 bf16 matmul back to back from t = 2 s")
    print(" t (s)  SM MHz  power W  temp C  GEMM ms (median)  TFLOP/s  throttle reasons")
    for k in range(int((4.0 + a.seconds) / 0.5)):
        lo, hi = t0 + 0.5 * k, t0 + 0.5 * (k + 1)
        win = [s for s in samples if lo <= s[0] < hi]
        ms = [g[1] for g in gemms if lo <= g[0] < hi]
        if not win:
            continue
        clk = statistics.median(w[1] for w in win)
        pw = statistics.median(w[2] for w in win)
        tc = max(w[3] for w in win)
        why = win[-1][4]
        gm = (
            f"{statistics.median(ms):8.3f}  {2 * a.n**3 / statistics.median(ms) / 1e9:7.0f}"
            if ms
            else " " * 17
        )
        print(f"{0.5 * k:6.1f}  {clk:6.0f}  {pw:7.0f}  {tc:6d}  {gm:>16}  {why}")


if __name__ == "__main__":
    main()
