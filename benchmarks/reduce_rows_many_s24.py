"""Issue 14, session 24: reductions along contiguous rows on many workers (the 16-core Emerald
Rapids host: sum axis=1 of 8192 x 8192 f32 at 0.61x torch in bench --quick), plan by plan, and the
long-K product 64x64x8192 f32 (0.69x torch), on the machine at hand.

    python benchmarks/reduce_rows_many_s24.py explore [ROUNDS]      # plan variants on this build
    python benchmarks/reduce_rows_many_s24.py ab SITE_A SITE_B [ROUNDS]  # two builds' planners

explore: each case's result under every variant (coopjit._core.reduce_plan_overrides for
reductions, plan= for the product) checked against NumPy in float64 first; then alternating
rounds, each variant, torch and NumPy a block of calls after a pause; GB/s of the input read (us a
call for the product), median and range over the rounds, and the copy rate (coopjit.peak()'s
memcpy over all threads, once a case). The variants' names say what they override. Then single
calls after the bench's 0.3 s pause (gapped: the pool's workers asleep), the planner's launches
traced; then the product's plan= variants.

ab: the two builds' planners (no overrides), torch and NumPy in alternating rounds, one subprocess
a build and round (each its own kernel cache; the operands made once, in /dev/shm, and read into
each process; each build's results checked against float64 in its first round), each case a block
of calls after a pause; medians over the rounds and whether every round of one build beat every round of the other ("apart").
Recorded: benchmarks/recorded/issue14-emr16-many-session24.txt."""
import json
import os
import subprocess
import sys
import time

import numpy as np

R1x128 = {"row.tile_rows": 1, "row.tile_cols": 128}
SH64 = {"row.shares": 64}
# (run 1 of session 24 timed main against a rule of one-row tiles, 1x128, for rows of 16 KiB+ on
# 8+ workers: no better; these are run 2's variants, on a build whose planner is main's)
ROW_VARIANTS = [("planner", {}), ("1x128", R1x128), ("4x64 pf8K", {"row.prefetch": 8192}), ("4x64 sh32", {"row.shares": 32}),
                ("4x64 sh64", SH64), ("1x128 sh64", dict(R1x128, **SH64))]
SHORT = [("planner", {}), ("1x128", R1x128), ("4x64 sh64", SH64)]
PAIR = [("planner", {}), ("1x128", R1x128)]
# (op, axis, shape, dtype, variants, threads)
EXPLORE = [("sum", 1, (8192, 8192), "float32", ROW_VARIANTS, 16),
           ("sum", 1, (4096, 4096), "float32", SHORT, 16)]
# gapped: one call at a time after the bench's pause (python -m coopjit bench --quick: 0.3 s
# before a case, single calls of >= 2 ms), the pool's workers asleep: the planner's launches traced
GAPPED = [("sum", 1, (8192, 8192), "float32", [("planner", {}), ("1x128", R1x128), ("4x64 sh64", SH64),
                                               ("1x128 sh64", dict(R1x128, **SH64))]),
          ("sum", 1, (4096, 4096), "float32", [("planner", {}), ("4x64 sh64", SH64)]),
          ("sum", 0, (8192, 8192), "float32", [("planner", {})])]
GEMM_VARIANTS = [("planner", {}), ("dp", {"split": "dp"}), ("sk", {"split": "sk"}), ("mr8", {"mr": 8}),
                 ("mr16 nr16 sk+dp", {"mr": 16, "nr": 16}), ("kt512", {"kt": 512}), ("thr8", {"threads": 8}),
                 ("thr12", {"threads": 12})]
AB_CASES = [("sum", 1, (8192, 8192), "float32"), ("sum", 1, (4096, 4096), "float32"), ("sum", 1, (16384, 4096), "float32"),
            ("sum", 1, (2048, 32768), "float32"), ("sum", 1, (8192, 4096), "float64"),
            # controls: plans the rule leaves as they are (the A/B's own noise)
            ("sum", 1, (65536, 1024), "float32"), ("max", 1, (8192, 8192), "float32"), ("sum", 0, (8192, 8192), "float32"),
            ("sum", None, (8192, 8192), "float32")]
# S24_SCALE=8: every array 8 x 8 times smaller along its long dims (a quick check of the script)
_S = int(os.environ.get("S24_SCALE", "1"))
if _S > 1:
    def _small(shape):
        return tuple(max(1, d // _S) if d > 8 else d for d in shape)
    EXPLORE = [(o, a, _small(s), d, v, t) for o, a, s, d, v, t in EXPLORE]
    AB_CASES = [(o, a, _small(s), d) for o, a, s, d in AB_CASES]


def name_of(op, axis, shape, dtype):
    return f"{op} axis={axis} {dtype} {'x'.join(map(str, shape))}"


def block(f, seconds=0.12):
    """Seconds a call: the mean of a block of back-to-back calls (about `seconds`), one call first."""
    f()
    t = time.perf_counter()
    f()
    one = max(time.perf_counter() - t, 1e-7)
    inner = max(2, int(seconds / one))
    t = time.perf_counter()
    for _ in range(inner):
        f()
    return (time.perf_counter() - t) / inner


def array(rng, shape, dtype):
    a = rng.random(shape, dtype=np.dtype(dtype))
    a -= 0.5
    return a


def np_of(op, a, axis):
    return (np.sum if op == "sum" else np.max)(a, axis=axis)


def torch_of(op, t, axis):
    import torch
    if axis is None:
        return lambda: t.sum() if op == "sum" else t.max()
    return (lambda: t.sum(dim=axis)) if op == "sum" else (lambda: torch.amax(t, dim=axis))


def check(op, a, axis, got):
    ref = np.sum(a, axis=axis, dtype=np.float64) if op == "sum" else np.max(a, axis=axis).astype(np.float64)
    err = float(np.max(np.abs(np.asarray(got, np.float64) - ref))) / max(1.0, float(np.max(np.abs(ref))))
    bound = 1e-4 if a.dtype == np.float32 else 1e-12
    if op == "max":
        bound = 0.0
    if not err <= bound:
        raise SystemExit(f"WRONG {op} axis={axis} {a.dtype} {a.shape}: relative error {err:.3g} > {bound}")
    return err


def spread(xs):
    return f"{np.median(xs):7.1f} [{min(xs):6.1f}-{max(xs):6.1f}]"


def explore(rounds):
    import torch
    import coopjit
    from coopjit import _core
    rng = np.random.default_rng(5)
    print(f"explore: coopjit {coopjit.__version__} from {os.path.dirname(coopjit.__file__)}; {coopjit.cpu_info()['name']}; "
          f"torch {torch.__version__}; {rounds} rounds; GB/s of the input read, median [min-max] over the rounds", flush=True)
    for op, axis, shape, dtype, variants, threads in EXPLORE:
        coopjit.set_num_threads(threads)
        torch.set_num_threads(threads)
        a = array(rng, shape, dtype)
        t = torch.from_numpy(a)
        fns = []
        for label, ov in variants:
            _core.reduce_plan_overrides(ov)
            check(op, a, axis, coopjit.reduce(a, axis, op))
            fns.append((label, ov, lambda: coopjit.reduce(a, axis, op)))
        _core.reduce_plan_overrides({})
        tf = torch_of(op, t, axis)
        check(op, a, axis, tf().numpy())
        fns.append(("torch", None, tf))
        if threads == 16 and a.nbytes <= (256 << 20) and op == "sum" and axis == 1 and shape in ((8192, 8192), (4096, 4096)):
            fns.append(("numpy", None, lambda: np_of(op, a, axis)))
        rates = {label: [] for label, _, _ in fns}
        copies = [_core.measure_peak("copy", 0.05)["all"]]  # (once a case: a call takes about a second)
        for r in range(rounds):
            order = fns if r % 2 == 0 else fns[::-1]
            for label, ov, f in order:
                if ov is not None:
                    _core.reduce_plan_overrides(ov)
                time.sleep(0.08)
                rates[label].append(a.nbytes / block(f, 0.04 if label == "numpy" else 0.12) / 1e9)
            _core.reduce_plan_overrides({})
        cp = float(np.median(copies))
        print(f"== {name_of(op, axis, shape, dtype)}, {threads} threads; copy {cp:.1f} GB/s (memcpy, all threads)", flush=True)
        base = np.median(rates["planner"])
        for label, xs in rates.items():
            print(f"  {label:<14} {spread(xs)} GB/s  {100 * np.median(xs) / cp:5.0f}% of copy  "
                  f"{np.median(xs) / base:5.2f}x planner", flush=True)
        del a, t, fns
    coopjit.set_num_threads(16)
    torch.set_num_threads(16)
    gapped(7, rng)
    explore_gemm(rounds, rng)


def gapped(rounds, rng, pause=0.3):
    """Single calls after `pause` seconds idle, variants alternating, `rounds` each; the planner's
    launches traced: the launch's join, its workers' latest start and the spread of their shares."""
    import torch
    import coopjit
    from coopjit import _core
    for op, axis, shape, dtype, variants in GAPPED:
        a = array(rng, shape, dtype)
        t = torch.from_numpy(a)
        fns = [(label, ov, lambda: coopjit.reduce(a, axis, op)) for label, ov in variants]
        fns.append(("torch", None, torch_of(op, t, axis)))
        for label, ov, f in fns:  # (compiled and checked before the rounds)
            _core.reduce_plan_overrides(ov or {})
            got = f()
            check(op, a, axis, got.numpy() if hasattr(got, "numpy") else got)
        rates = {label: [] for label, _, _ in fns}
        traces = []
        for r in range(rounds):
            for label, ov, f in (fns if r % 2 == 0 else fns[::-1]):
                _core.reduce_plan_overrides(ov or {})
                traced = label == "planner"
                if traced:
                    _core._set_launch_trace(True)
                    _core._launch_traces()
                time.sleep(pause)
                t0 = time.perf_counter()
                f()
                rates[label].append(a.nbytes / (time.perf_counter() - t0) / 1e9)
                if traced:
                    traces += _core._launch_traces()
                    _core._set_launch_trace(False)
        _core.reduce_plan_overrides({})
        print(f"== gapped: {name_of(op, axis, shape, dtype)}, 16 threads, one call after {pause} s idle, {rounds} "
              f"rounds; GB/s median [min-max]", flush=True)
        for label, xs in rates.items():
            print(f"  {label:<14} {spread(xs)} GB/s  {np.median(xs) / np.median(rates['planner']):5.2f}x planner", flush=True)
        rows = []
        for tr in traces:
            st, en = np.array(tr["start_ns"], np.float64) / 1e3, np.array(tr["end_ns"], np.float64) / 1e3
            dur = en - st
            rows.append((tr["workers"], tr["join_ns"] / 1e3, st.max(), dur.min(), np.median(dur), dur.max(),
                         len(set(tr["thread"])), sum(tr["slept"]) if tr["slept"] else 0))
        for w, join, smax, dmin, dmed, dmax, thr, slept in rows:
            print(f"    trace: {w} workers, join {join:8.1f} us, latest start {smax:7.1f} us, shares {dmin:7.1f} / "
                  f"{dmed:7.1f} / {dmax:7.1f} us (min / med / max), {thr} threads ran them, {slept} slept", flush=True)
        del a, t, fns


def explore_gemm(rounds, rng):
    import torch
    import coopjit
    m, n, k = 64, 64, 8192
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    fns = []
    for label, plan in GEMM_VARIANTS:
        try:
            kern = coopjit.compile_gemm(m, n, k, np.float32, plan=plan or None)
        except Exception as e:  # (a plan the planner refuses: said, not timed)
            print(f"  gemm {label}: refused: {e}", flush=True)
            continue
        kern(a, b, c)
        err = float(np.max(np.abs(c - ref))) / float(np.max(np.abs(ref)))
        if not err < 1e-5:
            raise SystemExit(f"WRONG gemm {label}: {err}")
        cfg = kern.config
        fns.append((f"{label} ({cfg['split']} mr{cfg['mr']} nr{cfg['nr']} kt{cfg['kt']} t{cfg['threads']})",
                    lambda kern=kern: kern(a, b, c)))
    fns.append(("coopjit.matmul", lambda: coopjit.matmul(a, b, out=c)))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    fns.append(("torch", lambda: torch.matmul(ta, tb)))
    fns.append(("numpy", lambda: np.matmul(a, b)))
    us = {label: [] for label, _ in fns}
    for r in range(rounds):
        for label, f in (fns if r % 2 == 0 else fns[::-1]):
            time.sleep(0.08)
            us[label].append(block(f, 0.06) * 1e6)
    print(f"== f32 {m}x{n}x{k}, 16 threads: us a call, median [min-max] over the rounds", flush=True)
    for label, xs in us.items():
        print(f"  {label:<40} {spread(xs)} us  {np.median(us['torch']) / np.median(xs):5.2f}x torch", flush=True)


CHILD = r"""
import json, sys, time
import numpy as np, torch, coopjit
sys.path.insert(0, sys.argv[2])
from reduce_rows_many_s24 import AB_CASES, block, check, np_of, torch_of, name_of, shm
torch.set_num_threads(coopjit.get_num_threads())
out = {}
for op, axis, shape, dtype in AB_CASES:
    a = np.load(shm(shape, dtype)); t = torch.from_numpy(a)  # (read into the process's own memory)
    got = coopjit.reduce(a, axis, op)
    if sys.argv[1] == "check":
        check(op, a, axis, got)
    key = name_of(op, axis, shape, dtype)
    time.sleep(0.1); cj = block(lambda: coopjit.reduce(a, axis, op))
    time.sleep(0.1); pt = block(torch_of(op, t, axis))
    npy = None
    if op == "sum" and axis == 1 and tuple(shape) in ((8192, 8192), (4096, 4096)):
        time.sleep(0.1); npy = block(lambda: np_of(op, a, axis), 0.04)
    out[key] = {"coopjit": a.nbytes / cj / 1e9, "torch": a.nbytes / pt / 1e9, "numpy": npy and a.nbytes / npy / 1e9}
    del a, t
print("RESULT " + json.dumps(out))
"""


def shm(shape, dtype):
    return f"/dev/shm/s24-{dtype}-{'x'.join(map(str, shape))}.npy"


def ab(site_a, site_b, rounds):
    here = os.path.dirname(os.path.abspath(__file__))
    res = {site: [] for site in (site_a, site_b)}
    rng = np.random.default_rng(0)
    made = []
    for _, _, shape, dtype in AB_CASES:  # the operands once, each process reads them in
        if not os.path.exists(shm(shape, dtype)):
            np.save(shm(shape, dtype), array(rng, shape, dtype))
            made.append(shm(shape, dtype))
    t0 = time.time()
    for r in range(rounds):
        for site in (site_a, site_b) if r % 2 == 0 else (site_b, site_a):
            env = dict(os.environ, PYTHONPATH=site, COOPJIT_CACHE_DIR=f"/tmp/coopjit-ab-cache-{os.path.basename(site)}")
            p = subprocess.run([sys.executable, "-c", CHILD, "check" if r == 0 else "", here], env=env,
                               capture_output=True, text=True, timeout=150)
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if p.returncode or not line:
                raise SystemExit(f"{site}: {p.stdout[-1000:]} {p.stderr[-2000:]}")
            res[site].append(json.loads(line[0][7:]))
            print(f"round {r + 1} {os.path.basename(site)} done at {time.time() - t0:.0f} s", flush=True)
            time.sleep(0.3)
    for path in made:
        os.remove(path)
    na, nb = os.path.basename(site_a), os.path.basename(site_b)
    print(f"ab: {rounds} rounds alternating (round 1 {na} first), one process a build and round; GB/s of the input "
          f"read, median [min-max] over the rounds; torch and NumPy timed in both builds' processes", flush=True)
    for op, axis, shape, dtype in AB_CASES:
        key = name_of(op, axis, shape, dtype)
        ra = [x[key]["coopjit"] for x in res[site_a]]
        rb = [x[key]["coopjit"] for x in res[site_b]]
        tt = [x[key]["torch"] for x in res[site_a] + res[site_b]]
        nn = [x[key]["numpy"] for x in res[site_a] + res[site_b] if x[key]["numpy"]]
        sep = "apart" if max(ra) < min(rb) or max(rb) < min(ra) else "overlap"
        print(f"{key:<30} {na} {spread(ra)}  {nb} {spread(rb)}  torch {spread(tt)}" +
              (f"  numpy {spread(nn)}" if nn else "") +
              f"  {nb}/{na} {np.median(rb) / np.median(ra):5.2f}x ({sep}); vs torch {na} "
              f"{np.median(ra) / np.median(tt):4.2f}x {nb} {np.median(rb) / np.median(tt):4.2f}x", flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "explore":
        explore(int(sys.argv[2]) if len(sys.argv) > 2 else 7)
    elif len(sys.argv) > 3 and sys.argv[1] == "ab":
        ab(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 5)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
