"""Which kernel cuBLAS runs for F.linear at the MLP shapes (bf16): its name encodes the tile,
the k-block and stages, the cluster and the schedule (e.g. nvjet_..._128x256_64x4_2x1_..._coopA).
Usage: python bench/gemm/cublas_kernels.py"""

import torch
import torch.nn.functional as F
from sm90_dev import SHAPES  # the MLP shapes, beside this file
from torch.profiler import ProfilerActivity, profile


def main():
    for T, H, F_ in SHAPES:
        for kind, (M, K, N) in (("fc1", (T, H, 2 * F_)), ("fc2", (T, F_, H))):
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
            F.linear(x, w)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                F.linear(x, w)
                torch.cuda.synchronize()
            names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
            print(f"{kind} T={T} H={H} F={F_} (M={M} K={K} N={N}): {'; '.join(names)}")


if __name__ == "__main__":
    main()
