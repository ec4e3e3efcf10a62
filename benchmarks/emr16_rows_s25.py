"""The 16-core host's rows behind the peer in session 24's `bench --quick` (issue 14, session 25):
f32 1x4096x4096, 16x4096x4096, 64x64x8192, 100x37x250, int8 256^3 (torch._int_mm), f64 4096^3;
the reduce plan field `shares` against the planner for sums of 8192^2 / 4096^2 f32 along every
axis; a column-major A times a vector ("col" layout against the "row" it had before session 24).

Every coopjit variant goes in through the tuned-plan table (coopjit._core.set_tuned_plan on the
product's signature), so each call is a plan=None call (plan= adds tens of microseconds a call);
reductions through coopjit._core.reduce_plan_overrides. Each library and variant is timed in its
own block of calls after a pause (PAUSE, 0.3 s: the bench's), the variants' order reversed every
other round; medians [min-max] over the rounds. Every result is checked against NumPy in float64
first (int8: exactly).

  python benchmarks/emr16_rows_s25.py rows [NAME ...]   plan variants of the rows (main's planner)
  python benchmarks/emr16_rows_s25.py reduce            shares=4 x threads vs the planner, blocks and single calls
  python benchmarks/emr16_rows_s25.py colmv             column-major A times a vector, layout col / row
  python benchmarks/emr16_rows_s25.py ab1               main's plans (their fields as tuned plans) against this
                                                        build's planner, alternating in rounds (run 2)
  ROUNDS=5 PAUSE=0.3 BLOCK_S=0.15 SHRINK=1             (SHRINK=8: a dry run on smaller shapes)
Recorded: benchmarks/recorded/issue14-emr16-rows-session25.txt."""
import os
import sys
import time

import numpy as np

import coopjit
from coopjit import _core
from coopjit._arrays import gemm_types
from coopjit._kernel_args import _overrides

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rounds import timed  # noqa: E402 (the blocks of calls the CPU scripts share)

ROUNDS = int(os.environ.get("ROUNDS", "5"))
PAUSE = float(os.environ.get("PAUSE", "0.3"))
SECONDS = float(os.environ.get("BLOCK_S", "0.15"))
SHRINK = int(os.environ.get("SHRINK", "1"))
THREADS = coopjit.get_num_threads()
KEYS = ("layout", "order", "mr", "nr", "kt", "threads", "split", "pack", "inline_b", "ksplit", "grid_m", "shares",
        "mc_tiles", "nc_tiles", "amx", "direct_a", "b_prefetch")


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS)
    return torch


def s(v):
    return max(1, v // SHRINK)


def block(f, seconds=SECONDS, blocks=3):
    """Median seconds a call over `blocks` blocks of back-to-back calls (about `seconds` in all, at
    least one call a block), after one warm-up call (_rounds.timed)."""
    return timed(f, blocks=blocks, seconds=seconds)


def cfgs(c):
    return " ".join(f"{k}={c[k]}" for k in KEYS if k in c)


def use(a, b, plan):
    """Sets (plan dict) or clears (None) the tuned plan of a @ b; returns the config calls take."""
    types, dt = gemm_types(a.dtype, b.dtype)
    c = np.empty((a.shape[0], b.shape[1]), dt)
    sig = _core.gemm_signature(a, b, c, False, list(types))
    ov = _overrides(plan) if plan else {}
    _core.set_tuned_plan(sig, ov)
    return _core.gemm_plan(a, b, c, False, list(types), ov)  # (the plan the tuned entry gives)


def rel_err(c, ref):
    if hasattr(c, "numpy") and not isinstance(c, np.ndarray):  # a torch tensor (bf16 has no NumPy type)
        c = c.float().numpy()
    c = np.asarray(c.astype(np.float32) if c.dtype.name == "bfloat16" else c, np.float64)
    return float(np.max(np.abs(c - ref)) / max(float(np.max(np.abs(ref))), 1e-300))


# ---- the rows: (name, dtype, M, N, K, order): A is M x K, B K x N (order "F": A column-major)

ROWS = {
    "f32_1x4096x4096": ("float32", 1, 4096, 4096, "C"),
    "f32_16x4096x4096": ("float32", 16, 4096, 4096, "C"),
    "f32_64x64x8192": ("float32", 64, 64, 8192, "C"),
    "f32_100x37x250": ("float32", 100, 37, 250, "C"),
    "int8_256x256x256": ("int8", 256, 256, 256, "C"),
    "f64_4096x4096x4096": ("float64", 4096, 4096, 4096, "C"),
    "f32_colA_4096x1x4096": ("float32", 4096, 1, 4096, "F"),
    "f32_4096x1x4096": ("float32", 4096, 1, 4096, "C"),
    "bf16_256x256x256": ("bfloat16", 256, 256, 256, "C"),
    "bf16_1x4096x4096": ("bfloat16", 1, 4096, 4096, "C"),
}

# plan= variants of each row (through the tuned-plan table); None is the planner's choice
VARIANTS = {
    "f32_1x4096x4096": [
        ("planner", None),
        ("t16", {"threads": 16}),
        ("t16 ksplit16", {"order": "k_outer", "threads": 16, "ksplit": 16}),
        ("t16 ksplit32", {"order": "k_outer", "threads": 16, "ksplit": 32}),
        ("t16 ksplit64", {"order": "k_outer", "threads": 16, "ksplit": 64}),
        ("t12 ksplit48", {"order": "k_outer", "threads": 12, "ksplit": 48}),
        ("t16 ksplit64 kt16", {"order": "k_outer", "threads": 16, "ksplit": 64, "kt": 16}),
    ],
    "f32_16x4096x4096": [
        ("planner", None),
        ("mr8 nr48", {"mr": 8, "nr": 48}),
        ("mr16 nr32", {"mr": 16, "nr": 32}),
        ("kt256", {"kt": 256}),
        ("t12", {"threads": 12}),
        ("unpacked k_outer mr16 nr32", {"pack": 0, "order": "k_outer", "mr": 16, "nr": 32}),
        ("unpacked k_outer", {"pack": 0, "order": "k_outer"}),
    ],
    "f32_64x64x8192": [
        ("planner", None),
        ("dp", {"split": "dp"}),
        ("mr8", {"mr": 8}),
        ("mr16 nr16", {"mr": 16, "nr": 16}),
        ("mr16 nr16 dp", {"mr": 16, "nr": 16, "split": "dp"}),
        ("mr8 kt512", {"mr": 8, "kt": 512}),
        ("t8", {"threads": 8}),
    ],
    "f32_100x37x250": [
        ("planner", None),
        ("mr7", {"mr": 7}),
        ("mr8", {"mr": 8}),
        ("mr4", {"mr": 4}),
        ("t8", {"threads": 8}),
        ("sk+dp", {"split": "sk+dp"}),
        ("mr13 nr32", {"mr": 13, "nr": 32}),
    ],
    "int8_256x256x256": [
        ("planner", None),
        ("t8", {"threads": 8}),
        ("t4", {"threads": 4}),
        ("mr16 nr16", {"mr": 16, "nr": 16}),
        ("grid_m0", {"grid_m": 0}),
        ("direct_a0", {"direct_a": 0}),
        ("kt128", {"kt": 128}),
    ],
    "f64_4096x4096x4096": [
        ("planner", None),
        ("shares8", {"shares": 8}),
        ("kt512", {"kt": 512}),
        ("mr8 nr24", {"mr": 8, "nr": 24}),
    ],
    "f32_colA_4096x1x4096": [
        ("planner", None),
        ("row (old)", {"layout": "row"}),
        ("col ksplit16", {"layout": "col", "order": "k_outer", "threads": 16, "ksplit": 16}),
        ("col ksplit64", {"layout": "col", "order": "k_outer", "threads": 16, "ksplit": 64}),
    ],
    "f32_4096x1x4096": [
        ("planner", None),
    ],
}


def operands(name):
    dtype, m, n, k, order = ROWS[name]
    if dtype == "float64" or m * n * k > 1 << 30:
        m, n, k = (v if v == 1 else s(v) for v in (m, n, k))
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    if dtype == "int8":
        a, b = rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
    elif dtype == "bfloat16":
        import ml_dtypes
        a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
        b = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    else:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
    if order == "F":
        a = np.asfortranarray(a)
    return a, b


def peers(name, a, b):
    """{'torch': f, 'numpy': f} as the bench calls them (torch._int_mm for int8; no NumPy there)."""
    torch = _torch()
    out = {}
    if torch is not None:
        if a.dtype.name == "bfloat16":
            ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
            tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
        else:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        out["torch"] = (lambda: torch._int_mm(ta, tb)) if a.dtype == np.int8 else (lambda: torch.matmul(ta, tb))
    if a.dtype in (np.float32, np.float64):
        out["numpy"] = lambda: np.matmul(a, b)
    return out


def rounds_of(entries, rounds=ROUNDS, pause=PAUSE, timer=block):
    """{label: [seconds, one a round]}: entries [(label, setup or None, f)] in turn, reversed every
    other round, each after `pause` s idle; setup() (the tuned plan) runs before the pause."""
    out = {lab: [] for lab, _, _ in entries}
    for r in range(rounds):
        for lab, setup, f in (entries if r % 2 == 0 else entries[::-1]):
            if setup:
                setup()
            time.sleep(pause)
            out[lab].append(timer(f))
    return out


def summary(vals, ref=None, unit=1e6):
    v = np.array(vals) * unit
    line = f"{np.median(v):10.1f} [{v.min():9.1f}-{v.max():9.1f}]"
    return line


def rows(names):
    torch = _torch()
    print(f"rows: coopjit {coopjit.__version__} ({coopjit.cpu_info()['name']}, {THREADS} threads), numpy {np.__version__}, "
          f"torch {torch.__version__ if torch else '-'}; {ROUNDS} rounds, pause {PAUSE} s, blocks of ~{SECONDS} s; "
          f"us a call, median [min-max] over the rounds", flush=True)
    for name in names:
        t0 = time.time()
        a, b = operands(name)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        entries = []
        for lab, plan in VARIANTS[name]:
            try:
                cfg = use(a, b, plan)
                c = coopjit.matmul(a, b)
            except Exception as e:  # a refused variant: say so, go on
                print(f"  {name} {lab}: refused: {e}", flush=True)
                continue
            err = rel_err(c, ref)
            ok = err == 0.0 if a.dtype == np.int8 else err < 1e-12 if a.dtype == np.float64 else \
                err < 1e-2 if a.dtype.name == "bfloat16" else err < 1e-4
            print(f"  {name} {lab}: err {err:.1e} {'ok' if ok else 'WRONG'} [{cfgs(cfg)}]", flush=True)
            if not ok:
                continue
            entries.append((lab, (lambda p=plan: use(a, b, p)), lambda: coopjit.matmul(a, b)))
        for lab, f in peers(name, a, b).items():
            err = rel_err(f(), ref)
            print(f"  {name} {lab}: err {err:.1e}", flush=True)
            entries.append((lab, None, f))
        res = rounds_of(entries)
        use(a, b, None)
        base = np.median(res["planner"]) if "planner" in res else None
        peer = min((np.median(res[p]) for p in ("torch", "numpy") if p in res), default=None)
        for lab, v in res.items():
            extra = f"  {base / np.median(v):5.2f}x planner" if base else ""
            extra += f"  {np.median(res['torch']) / np.median(v):5.2f}x torch" if "torch" in res else ""
            extra += f"  {np.median(res['numpy']) / np.median(v):5.2f}x numpy" if "numpy" in res else ""
            print(f"{name:22s} {lab:28s} {summary(v)} us{extra}", flush=True)
        print(f"  ({name}: {time.time() - t0:.0f} s)", flush=True)


# ---- reductions


REDUCE_SHAPES = ((8192, 8192), (4096, 4096))


def reduce(pause=PAUSE):
    torch = _torch()
    shares = 4 * THREADS
    print(f"reduce: {THREADS} threads; default shares (reduce_plan) vs row/column shares {shares}; GB/s of the input read, "
          f"median [min-max] over {ROUNDS} rounds", flush=True)
    rng = np.random.default_rng(7)
    for shape in REDUCE_SHAPES:
        shape = (s(shape[0]), s(shape[1]))
        x = rng.random(shape, dtype=np.float32)
        gb = x.nbytes / 1e9
        tx = torch.from_numpy(x) if torch else None
        for axis in (None, 0, 1):
            ref = np.sum(x, axis=axis, dtype=np.float64)
            tol = (x.size if axis is None else x.shape[axis]) * np.finfo(np.float32).eps

            def planner():
                _core.reduce_plan_overrides({})

            def shared():
                _core.reduce_plan_overrides({"row.shares": shares, "column.shares": shares})

            entries = []
            for lab, setup in (("planner", planner), (f"shares{shares}", shared)):
                setup()
                err = rel_err(coopjit.reduce(x, axis=axis, op="sum"), ref)
                print(f"  sum axis={axis} {shape} {lab}: err {err:.1e} {'ok' if err <= tol else 'WRONG'}", flush=True)
                entries.append((lab, setup, lambda: coopjit.reduce(x, axis=axis, op="sum")))
            if tx is not None:
                dims = () if axis is None else axis
                entries.append(("torch", None, lambda: torch.sum(tx, dim=dims)))
            blocks = rounds_of(entries)
            singles = rounds_of(entries, rounds=ROUNDS, timer=lambda f: _single(f))
            _core.reduce_plan_overrides({})
            for kind, res in (("blocks", blocks), ("single", singles)):
                base = np.median(res["planner"])
                for lab, v in res.items():
                    rate = gb / np.array(v)
                    print(f"sum axis={str(axis):4s} {shape[0]}x{shape[1]} {kind:6s} {lab:9s} {np.median(rate):7.1f} "
                          f"[{rate.min():6.1f}-{rate.max():6.1f}] GB/s  {base / np.median(v):5.2f}x planner", flush=True)


def _single(f):
    """One call (the bench's way for a call of 2 ms or more: it comes after the pause)."""
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


# ---- main's choice against the branch's, in one build


# (the branch changes only the planner: main's plans are its fields through the tuned-plan table,
# the same kernels main's build makes; checked against run 1's config lines of main's build)
AB_GEMM = [
    ("f32_1x4096x4096", {"threads": 12}, True),
    ("f32_colA_4096x1x4096", {"threads": 12}, False),
    ("f32_100x37x250", {"mr": 6}, True),
    ("int8_256x256x256", {"grid_m": 1}, True),
    ("bf16_256x256x256", {"grid_m": 1}, True),
    ("bf16_1x4096x4096", {"threads": 12}, False),
]
AB_SUMS = [((8192, 8192), True), ((4096, 4096), False)]


def ab1():
    """Rounds alternating main's plan (forced) and the planner's (the branch's) for each case, with
    torch where named; sums in blocks and as single calls after the pause."""
    torch = _torch()
    print(f"ab1: coopjit {coopjit.__version__} ({coopjit.cpu_info()['name']}, {THREADS} threads); {ROUNDS} rounds, "
          f"pause {PAUSE} s, blocks of ~{SECONDS} s; 'main': main's plan through the tuned-plan table / reduce "
          f"overrides, 'branch': this build's planner; medians [min-max] over the rounds", flush=True)
    entries, singles, notes = [], [], []
    for name, main_plan, with_torch in AB_GEMM:
        a, b = operands(name)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        for lab, plan in (("main", main_plan), ("branch", None)):
            cfg = use(a, b, plan)
            err = rel_err(coopjit.matmul(a, b), ref)
            print(f"  {name} {lab}: err {err:.1e} [{cfgs(cfg)}]", flush=True)
            entries.append((f"{name} {lab}", (lambda a=a, b=b, p=plan: use(a, b, p)),
                            (lambda a=a, b=b: coopjit.matmul(a, b))))
        if with_torch and torch is not None:
            f = peers(name, a, b)["torch"]
            print(f"  {name} torch: err {rel_err(f(), ref):.1e}", flush=True)
            entries.append((f"{name} torch", None, f))
    rng = np.random.default_rng(7)
    for shape, with_torch in AB_SUMS:
        x = rng.random((s(shape[0]), s(shape[1])), dtype=np.float32)
        ref = np.sum(x, axis=1, dtype=np.float64)
        name = f"sum1_{x.shape[0]}x{x.shape[1]}"
        for lab, ov in (("main", {"row.shares": 0}), ("branch", {})):
            _core.reduce_plan_overrides(ov)
            err = rel_err(coopjit.reduce(x, axis=1, op="sum"), ref)
            shares = _core.reduce_plan("sum", "row", x.shape[0], x.shape[1])["shares"]
            print(f"  {name} {lab}: err {err:.1e} (planner's shares {shares}, override {ov})", flush=True)
            setup = (lambda ov=ov: _core.reduce_plan_overrides(ov))
            f = (lambda x=x: coopjit.reduce(x, axis=1, op="sum"))
            entries.append((f"{name} {lab}", setup, f))
            singles.append((f"{name} {lab} single", setup, f))
            notes.append((name, x.nbytes))
        if with_torch and torch is not None:
            tx = torch.from_numpy(x)
            entries.append((f"{name} torch", None, (lambda tx=tx: torch.sum(tx, dim=1))))
    res = rounds_of(entries)
    res.update(rounds_of(singles, timer=_single))
    _core.reduce_plan_overrides({})
    nbytes = dict(notes)
    for lab, v in res.items():
        name = lab.split()[0]
        if name in nbytes:
            rate = nbytes[name] / 1e9 / np.array(v)
            txt = f"{np.median(rate):8.1f} [{rate.min():7.1f}-{rate.max():7.1f}] GB/s"
        else:
            txt = summary(v) + " us"
        print(f"{lab:40s} {txt}", flush=True)
    for name in [n for n, _, _ in AB_GEMM] + sorted(nbytes):
        for kind in ("", " single"):
            m, b = res.get(f"{name} main{kind}"), res.get(f"{name} branch{kind}")
            if m and b:
                print(f"{name}{kind}: branch / main {np.median(m) / np.median(b):.2f}x (speed); spreads "
                      f"{'overlap' if min(m) <= max(b) and min(b) <= max(m) else 'apart'}", flush=True)


def main():
    part = sys.argv[1] if len(sys.argv) > 1 else "rows"
    if part == "rows":
        rows(sys.argv[2:] or [n for n in ROWS if n != "f32_colA_4096x1x4096" and n != "f32_4096x1x4096"])
    elif part == "colmv":
        rows(["f32_colA_4096x1x4096"])
    elif part == "reduce":
        reduce()
    elif part == "ab1":
        ab1()
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
