"""The rows of `make demo` and of the bench's shape sweep (f32 / f64 / bf16 / int8: squares, skinny, GEMV,
batched, odd shapes) against NumPy and torch, in a form that survives a loaded 2-core machine.

  python benchmarks/zen5_rows_s28.py one [ROUNDS] [SITE ...]   one thread's CPU time (time.thread_time) per call:
      coopjit with 1 thread, NumPy with OPENBLAS_NUM_THREADS=1, torch with 1 thread; medians of 5 blocks a
      case, each library (and each SITE, a coopjit build's --target folder) in its own process, the
      processes alternating over ROUNDS rounds; printed: median over rounds [min-max] us.
  python benchmarks/zen5_rows_s28.py caller2 [ROUNDS] [SITE ...]   2 threads, the calling thread's CPU time (the
      small calls that run on the caller alone, and the caller's part of the others).
  python benchmarks/zen5_rows_s28.py two [ROUNDS] [SITE ...]   2 threads, wall time (perf_counter), same
      processes and rounds; printed: min and median over rounds of each round's median of 5 blocks, and
      the 1-minute load average around each library's rounds.

EXTRA=i8:48x48x48,f32:8x100x37x250 adds cases (kind:[batch x]MxNxK). CASES=name,name,... limits the cases (labels as printed, e.g. CASES='f32 100x37x250,i8 512^3').
KINDS=f32,f64,bf16,i8 limits the dtypes. LIBS=coopjit,numpy,torch limits the libraries.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

from _rounds import timed  # blocks of back-to-back calls, the median a call

SQUARES = (32, 64, 128, 256, 512, 1024, 2048)


def case_list():
    out = []
    for kind in ("f32", "f64"):
        for n in SQUARES:
            out.append((kind, n, n, n, 0))
        out += [(kind, 1, 4096, 4096, 0), (kind, 4096, 1, 4096, 0), (kind, 16, 4096, 4096, 0),
                (kind, 64, 4096, 4096, 0), (kind, 4096, 64, 4096, 0), (kind, 64, 64, 8192, 0),
                (kind, 100, 37, 250, 0), (kind, 513, 129, 700, 0), (kind, 3000, 500, 200, 0),
                (kind, 128, 128, 128, 32), (kind, 32, 32, 32, 256), (kind, 512, 512, 512, 8), (kind, 16, 16, 16, 4096)]
    for kind in ("bf16", "i8"):
        for n in SQUARES:
            out.append((kind, n, n, n, 0))
        out += [(kind, 1, 4096, 4096, 0), (kind, 64, 4096, 4096, 0), (kind, 100, 37, 250, 0) if kind == "bf16" else
                (kind, 104, 40, 256, 0), (kind, 513, 129, 700, 0) if kind == "bf16" else (kind, 520, 128, 704, 0)]
    for e in filter(None, os.environ.get("EXTRA", "").split(",")):  # EXTRA=i8:48x48x48,f32:8x100x37x250 (batch 8)
        kind, dims = e.split(":")
        v = [int(x) for x in dims.split("x")]
        out.append((kind, *v[-3:], v[0] if len(v) == 4 else 0))
    return out


def label(c):
    kind, m, n, k, batch = c
    shape = f"{n}^3" if m == n == k else f"{m}x{n}x{k}"
    return f"{kind} " + (f"{batch}x " if batch else "") + shape


def operands(c):
    kind, m, n, k, batch = c
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    sa, sb = ((batch, m, k), (batch, k, n)) if batch else ((m, k), (k, n))
    if kind == "i8":
        return rng.integers(-128, 128, sa, dtype=np.int8), rng.integers(-128, 128, sb, dtype=np.int8)
    a, b = rng.standard_normal(sa, dtype=np.float32), rng.standard_normal(sb, dtype=np.float32)
    if kind == "f64":
        return a.astype(np.float64), b.astype(np.float64)
    if kind == "bf16":
        import ml_dtypes
        return a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    return a, b


def fn_for(lib, c, a, b):
    kind = c[0]
    if lib == "coopjit":
        import coopjit
        return lambda: coopjit.matmul(a, b)
    if lib == "numpy":
        if kind in ("bf16", "i8"):
            return None
        return lambda: np.matmul(a, b)
    import torch
    if kind == "i8":
        if c[4] or c[1] < 17 or c[2] % 8 or c[3] % 8:
            return None
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        return lambda: torch._int_mm(ta, tb)
    if kind == "bf16":
        ta, tb = (torch.from_numpy(np.asarray(v, np.float32)).to(torch.bfloat16) for v in (a, b))
    else:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return lambda: torch.matmul(ta, tb)


def worker(mode, lib, names):
    threads = 1 if mode == "one" else 2  # caller2: 2 threads, the calling thread's CPU time
    if lib == "coopjit":
        import coopjit
        coopjit.set_num_threads(threads)
    elif lib == "torch":
        import torch
        torch.set_num_threads(threads)
    clock = time.thread_time if mode in ("one", "caller2") else time.perf_counter
    res = {}
    for c in case_list():
        if label(c) not in names:
            continue
        a, b = operands(c)
        f = fn_for(lib, c, a, b)
        if f is None:
            continue
        time.sleep(0.3 if mode == "two" else 0.05)
        res[label(c)] = timed(f, clock=clock, seconds=0.25)
    print(json.dumps(res))


def main():
    if sys.argv[1] == "worker":
        return worker(sys.argv[2], sys.argv[3], set(json.loads(sys.argv[4])))
    mode = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    sites = sys.argv[3:]
    names = [label(c) for c in case_list()]
    if os.environ.get("CASES"):
        want = [s.strip() for s in os.environ["CASES"].split(",")]
        names = [n for n in names if n in want]
    if os.environ.get("KINDS"):
        kinds = os.environ["KINDS"].split(",")
        names = [n for n in names if n.split()[0] in kinds]
    libs = os.environ.get("LIBS", "coopjit,numpy,torch").split(",")
    runs = []  # (column name, lib, env)
    for lib in libs:
        env = dict(os.environ)
        env["OPENBLAS_NUM_THREADS"] = "1" if mode == "one" else "2"
        env["OMP_NUM_THREADS"] = "1" if mode == "one" else "2"
        if lib == "coopjit":
            for s in sites or [""]:
                e = dict(env)
                if s:
                    e["PYTHONPATH"] = s
                runs.append((os.path.basename(s.rstrip("/")) if s else "coopjit", lib, e))
        else:
            runs.append((lib, lib, env))
    got = {r[0]: {} for r in runs}
    loads = {r[0]: [] for r in runs}
    for rnd in range(rounds):
        for col, lib, env in runs:
            l0 = os.getloadavg()[0]
            p = subprocess.run([sys.executable, __file__, "worker", mode, lib, json.dumps(names)], env=env,
                               capture_output=True, text=True)
            if p.returncode:
                print(p.stderr, file=sys.stderr)
                raise SystemExit(f"worker {col} failed")
            loads[col].append((l0 + os.getloadavg()[0]) / 2)
            for k, v in json.loads(p.stdout.strip().splitlines()[-1]).items():
                got[col].setdefault(k, []).append(v)
        print(f"# round {rnd + 1}/{rounds} done {time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.1f}",
              file=sys.stderr, flush=True)
    cols = [r[0] for r in runs]
    print(f"# mode {mode} ({dict(one='one thread, CPU time', caller2='2 threads, the caller thread CPU time').get(mode, '2 threads, wall time; ratios of the minima')}), {rounds} rounds, "
          f"us a call: median over rounds [min-max]; ratio = peer / first coopjit column (>1: coopjit faster)")
    print("# 1-min load during each column's rounds: " + ", ".join(
        f"{c} {min(loads[c]):.1f}-{max(loads[c]):.1f}" for c in cols))
    head = f"{'case':<22}" + "".join(f"{c:>26}" for c in cols) + "   ratios"
    print(head)
    for n in names:
        line = f"{n:<22}"
        meds = {}
        for c in cols:
            v = got[c].get(n)
            if not v:
                line += f"{'-':>26}"
                continue
            v = np.array(v) * 1e6
            meds[c] = float(np.min(v)) if mode == "two" else float(np.median(v))
            line += f"{np.median(v):>11.2f} [{v.min():.1f}-{v.max():.1f}]".rjust(26)
        base = meds.get(cols[0])
        rs = [f"{c}/{cols[0]} {meds[c] / base:.2f}" for c in cols[1:] if c in meds and base]
        low = any(c in ("numpy", "torch") and meds[c] / base < 1.0 for c in cols[1:] if c in meds and base)
        print(line + "   " + " ".join(rs) + ("   <-- BEHIND" if low else ""))


if __name__ == "__main__":
    main()
