"""What the CPU benchmark scripts of this folder share: a call timed in blocks, one call after an
idle gap, cases timed in alternating rounds with a pause before each block (so that one library's
spinning workers do not steal the next one's cores), their report lines, random operands, the
relative error against a float64 reference, torch's AMX-backed peer, and coopjit.peak()'s AMX rows
(or stand-ins where the tiles are emulated). Scripts import it from this folder (`python benchmarks/<script>.py`);
it imports coopjit only for amx_peak, so processes without coopjit (a driver, a peer's worker) import it too."""
import json
import os
import time

import numpy as np


def idle_share(seconds=0.2):
    """The share of the next `seconds` in which this machine's cores were idle (/proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)
    i0, t0 = sample()
    time.sleep(seconds)
    i1, t1 = sample()
    return (i1 - i0) / max(1, t1 - t0)


def quiet_gate(wait=10.0, share=0.9):
    """With QUIET=1 in the environment: wait (up to `wait` s) for 0.2 s in which the cores were at
    least `share` idle, so that other work on a shared machine overlaps fewer timed blocks; False
    when none came. Without QUIET=1: True at once."""
    if os.environ.get("QUIET") != "1":
        return True
    end = time.time() + wait
    while time.time() < end:
        if idle_share() >= share:
            return True
    return False


def timed(f, blocks=5, seconds=0.3, clock=time.perf_counter, calls=None):
    """Median seconds a call over `blocks` blocks of back-to-back calls, about `seconds` in all
    (one warm-up call first; `clock` time.thread_time gives one thread's CPU time), or of `calls`
    calls a block where that is given (then no timed calibration call)."""
    f()
    if calls is None:
        t = clock()
        f()
        one = max(clock() - t, 1e-7)
    inner = max(1, int(seconds / blocks / one)) if calls is None else calls
    out = []
    for _ in range(blocks):
        t = clock()
        for _ in range(inner):
            f()
        out.append((clock() - t) / inner)
    return float(np.median(out))


def gapped(f, n=40, gap=0.002):
    """Median seconds of one call at a time after `gap` seconds idle (the pool's workers asleep)."""
    f()
    out = []
    for _ in range(n):
        time.sleep(gap)
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return float(np.median(out))


def operands(rng, dt, m, n, k):
    """Random m x k and k x n operands: int8 (all 256 values), bf16 / bfloat16 (normal values
    rounded), else float32 (normal)."""
    if dt == "int8":
        return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    if dt in ("bf16", "bfloat16"):
        import ml_dtypes
        return a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    return a, b


def err_of(c, ref):
    """max |c - ref| / max |ref| over ref's rows (c may be a torch tensor or have more rows)."""
    c = c.float().numpy() if hasattr(c, "numpy") and not isinstance(c, np.ndarray) else c
    c = c[: ref.shape[0]]
    return float(np.max(np.abs(c.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)


def torch_case(a, b, dt):
    """torch's product of the same operands: matmul for bf16 (given as int16 bit patterns or
    ml_dtypes), _int_mm for int8."""
    import torch
    if dt == "bf16":
        ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
        return lambda: torch.matmul(ta, tb)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return lambda: torch._int_mm(ta, tb)


def amx_peak():
    """(coopjit.peak(), emulated): where the CPU has no AMX tiles, the AMX rows are 1.0 (the scripts
    then check themselves on emulated tiles; their rates mean nothing) and `emulated` is True.
    Prints the AMX rows (one core, all cores)."""
    import coopjit  # (only here: a driver or a peer's process may import this module without coopjit)

    pk = coopjit.peak()
    emu = not pk["amx_bf16"]["single"]
    if emu:
        pk = {k: {"single": 1.0, "all": 1.0} for k in ("amx_bf16", "amx_int8")}
    print("peak (one core, all cores):", json.dumps({k: (round(v["single"]), round(v["all"]))
                                                     for k, v in pk.items() if k.startswith("amx")}), flush=True)
    return pk, emu


def alternate(cases, rounds=3, pause=0.3, seconds=0.3, blocks=3):
    """{name: [seconds a call, one a round]}: every case of [(name, f)] timed in turn, `rounds`
    times, each after `pause` seconds idle."""
    out = {name: [] for name, _ in cases}
    for _ in range(rounds):
        for name, f in cases:
            time.sleep(pause)
            out[name].append(timed(f, blocks=blocks, seconds=seconds))
    return out


def measure(label, cases, refs, flops, peak, seconds, base=None, base_label=None, width=44, rounds=3, pause=0.3):
    """Checks each case against its reference (refs[name] None: no check), times them in alternating
    rounds (`alternate`) and prints a line each: median time, rate, % of `peak`, the base case's
    time / this (the first case unless `base` names one), torch's time / this where a case is
    named "torch", the rounds and the error. `refs` and `flops` are dicts by name or one value."""
    names = [n for n, _ in cases]
    refs = refs if isinstance(refs, dict) else dict.fromkeys(names, refs)
    flops = flops if isinstance(flops, dict) else dict.fromkeys(names, flops)
    errs = {name: (err_of(f(), refs[name]) if refs.get(name) is not None else float("nan")) for name, f in cases}
    times = alternate(cases, rounds=rounds, pause=pause, seconds=seconds)
    base = base or names[0]
    tb = float(np.median(times[base]))
    tref = float(np.median(times["torch"])) if "torch" in times else None
    for name in names:
        ts = times[name]
        t = float(np.median(ts))
        rate = flops[name] / t / 1e9
        vs = f"  torch time / this {tref / t:5.2f}" if tref else ""
        print(f"{label} {name:<{width}} {t * 1e3:8.3f} ms {rate:7.0f} G/s {rate / peak * 100:5.1f}% of peak  "
              f"{base_label or base} time / this {tb / t:5.2f}{vs}  rounds {' '.join(f'{x * 1e3:.2f}' for x in ts)}  err {errs[name]:.1e}",
              flush=True)
    return times


def env_list(name, default):
    """The comma-separated values of environment variable `name` (or of `default`)."""
    return [x for x in os.environ.get(name, default).split(",") if x]


def compile_squares(jobs, threads=16):
    """coopjit.compile_gemm of (dtype "bf16" | "int8", s, plan) jobs, s x s x s each, in `threads`
    parallel threads (the kernels go to the disk cache, which a later process reads instead of
    running LLVM); prints how many and how long. amx_cycles_s27 and amx_nest_s28 call it."""
    import concurrent.futures
    import coopjit

    def one(job):
        dt, s, plan = job
        return coopjit.compile_gemm(s, s, s, "int8" if dt == "int8" else "bfloat16", plan=plan).config["amx"]

    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        done = list(ex.map(one, jobs))
    print(f"compiled {len(done)} plans in {time.perf_counter() - t:.1f} s", flush=True)
