"""Reductions of 1 GiB float32 on cuda:0 against a device-to-device copy and torch, in one run
(issue 15's target: >= 85% of the measured copy bandwidth along each axis, bytes read). Device
arrays (torch CUDA tensors) in and out; each library timed in its own block after a pause,
torch.cuda.synchronize around each block, medians of 5 blocks. Square arrays, few long rows,
and arrays of 1 to 1024 columns along both axes. Run: python benchmarks/bench_cuda_reduce.py"""
import time

import numpy as np
import torch

import coopjit


def block(f, n):
    f()
    torch.cuda.synchronize()
    out = []
    for _ in range(5):
        time.sleep(0.05)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            f()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) / n)
    return float(np.median(out))


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    print(f"coopjit {coopjit.__version__} vs torch {torch.__version__} on {torch.cuda.get_device_name()}")
    gib = 1 << 30
    x = torch.rand(gib // 4, device="cuda", generator=g)
    y = torch.empty_like(x)
    t_copy = block(lambda: y.copy_(x), 10)
    copy = gib / t_copy / 1e9  # bytes read per second (a copy also writes as many)
    print(f"device-to-device copy of 1 GiB: {t_copy * 1e3:.3f} ms, {copy:.0f} GB/s read ({2 * copy:.0f} GB/s read + write)")
    del y
    print(f"{'case':40s} {'coopjit GB/s':>13s} {'% copy':>7s} {'torch GB/s':>11s} {'coopjit/torch':>14s} {'rel. err':>9s}")
    # (device arrays are reduced along axis 0 or 1 of a 2-D array in this version)
    # then arrays of few columns (issue 15: the narrow plans), a sweep of widths between
    cases = [((16384, 16384), 0), ((16384, 16384), 1), ((4, 1 << 26), 1), ((4, 1 << 26), 0)]
    for cols in (1, 2, 4, 16, 64, 256, 1024):
        cases += [((gib // 4 // cols, cols), 1), ((gib // 4 // cols, cols), 0)]
    for shape, axis in cases:
        a = x.view(*shape)
        ref = a.double().sum(dim=axis) if axis is not None else a.double().sum()
        got = coopjit.reduce(a, axis=axis)
        err = float(((torch.as_tensor(got, device="cuda").double() - ref).abs().max() / ref.abs().max()).item())
        t_c = block(lambda: coopjit.reduce(a, axis=axis), 10)
        t_t = block(lambda: a.sum(dim=axis) if axis is not None else a.sum(), 10)
        name = f"sum axis={axis} f32 {'x'.join(map(str, shape))}"
        print(f"{name:40s} {gib / t_c / 1e9:13.0f} {100 * t_copy / t_c:6.0f}% {gib / t_t / 1e9:11.0f} {t_t / t_c:14.2f} {err:9.1e}")


if __name__ == "__main__":
    main()
