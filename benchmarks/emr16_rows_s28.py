"""The 16-core host's rows behind the peer in session 27's final quick bench (issue 14, session 28):
f32 1x4096x4096, 4096x64x4096, 64x4096x4096, 513x129x700, batched 8 x 512^3, bf16 512^3, int8
64x4096x4096 (torch._int_mm), f64 64x64x8192, and f32 4096^3 against coopjit.peak() (rows named
M x N x K as the bench names them: A is M x K, B K x N).

Method as benchmarks/emr16_rows_s25.py (whose helpers it uses): every coopjit variant goes in through
the tuned-plan table on the product's signature (plan=None calls), each library / variant timed in
its own block of calls after a pause (PAUSE), the order reversed every other round; medians
[min-max] over the rounds; every result checked against NumPy in float64 first (int8 exactly).
torch runs in this process too, in its own blocks (its threads idle in the pauses).

  python benchmarks/emr16_rows_s28.py rows [NAME ...]    plan variants of the rows (this build's planner)
  python benchmarks/emr16_rows_s28.py ab NAME=PLAN ...    main's plan (fields as a tuned plan) against
                                                          this build's planner, with torch
  ROUNDS=5 PAUSE=0.2 BLOCK_S=0.08 SHRINK=1 (SHRINK=8: a dry run on smaller shapes)
Recorded: benchmarks/recorded/issue14-emr16-rows-session28.txt."""
import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("PAUSE", "0.2")
os.environ.setdefault("BLOCK_S", "0.08")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emr16_rows_s25 as r25  # noqa: E402
from emr16_rows_s25 import block, cfgs, rel_err, rounds_of, summary  # noqa: E402

import coopjit  # noqa: E402
from coopjit import _core  # noqa: E402
from coopjit._arrays import gemm_types  # noqa: E402
from coopjit._kernel_args import _overrides  # noqa: E402

SHRINK = r25.SHRINK
KEYS = r25.KEYS + ("own_a", "c_prefetch", "k_inner")

# name: (dtype, batch, M, N, K)
ROWS = {
    "f32_1x4096x4096": ("float32", 0, 1, 4096, 4096),
    "f32_4096x64x4096": ("float32", 0, 4096, 64, 4096),
    "f32_64x4096x4096": ("float32", 0, 64, 4096, 4096),
    "f32_513x129x700": ("float32", 0, 513, 129, 700),
    "f32_8x512x512x512": ("float32", 8, 512, 512, 512),
    "bf16_512x512x512": ("bfloat16", 0, 512, 512, 512),
    "int8_64x4096x4096": ("int8", 0, 64, 4096, 4096),
    "f64_64x64x8192": ("float64", 0, 64, 64, 8192),
    "f32_4096x4096x4096": ("float32", 0, 4096, 4096, 4096),
}
KO = {"order": "k_outer", "pack": 0}
MI = {"order": "m_inner", "pack": 0}
VARIANTS = {
    "f32_1x4096x4096": [("planner", None), ("ksplit16", dict(KO, threads=16, ksplit=16)), ("kt128", {"kt": 128})],
    "f32_4096x64x4096": [("planner", None), ("mr6 nr64", {"mr": 6, "nr": 64}), ("shares8", {"shares": 8}),
                         ("packed", {"pack": 1})],
    "f32_64x4096x4096": [("planner", None), ("k_outer 8x48", dict(KO, mr=8, nr=48)),
                         ("inline_b0 shares4", {"inline_b": 0, "shares": 4}), ("mr8 nr48", {"mr": 8, "nr": 48})],
    "f32_513x129x700": [("planner", None), ("packed", {"pack": 1}), ("t8", {"threads": 8}), ("sk+dp", {"split": "sk+dp"})],
    "f32_8x512x512x512": [("planner", None), ("shares4", {"shares": 4}), ("mr12 nr32", {"mr": 12, "nr": 32})],
    "bf16_512x512x512": [("planner", None), ("grid_m0", {"grid_m": 0}), ("t8", {"threads": 8})],
    "int8_64x4096x4096": [("planner", None), ("kt4096", {"kt": 4096}), ("t8", {"threads": 8}),
                          ("inline_b0", {"inline_b": 0})],
    "f64_64x64x8192": [("planner", None), ("ks32", dict(MI, ksplit=32, mr=6, nr=32)),
                       ("mr4 nr32 ks16", dict(MI, ksplit=16, mr=4, nr=32))],
    "f32_4096x4096x4096": [("planner", None)],
}
SLOW = {"f32_4096x4096x4096": 3}  # rounds of the long cases (a block there: 2 calls)


def operands(name):
    dtype, batch, m, n, k = ROWS[name]
    if m * n * k > 1 << 30:
        m, n, k = (v if v <= 64 else max(64, v // SHRINK) for v in (m, n, k))
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    ash, bsh = ((batch, m, k), (batch, k, n)) if batch else ((m, k), (k, n))
    if dtype == "int8":
        return rng.integers(-128, 128, ash, dtype=np.int8), rng.integers(-128, 128, bsh, dtype=np.int8)
    if dtype == "bfloat16":
        import ml_dtypes
        return (rng.standard_normal(ash, dtype=np.float32).astype(ml_dtypes.bfloat16),
                rng.standard_normal(bsh, dtype=np.float32).astype(ml_dtypes.bfloat16))
    return rng.standard_normal(ash).astype(dtype), rng.standard_normal(bsh).astype(dtype)


def use(a, b, plan):
    """Sets (plan dict) or clears (None) the tuned plan of a @ b (2-D or a batch); returns the config."""
    types, dt = gemm_types(a.dtype, b.dtype)
    c = np.empty(a.shape[:-1] + (b.shape[-1],), dt)
    sig = _core.gemm_signature(a, b, c, False, list(types))
    ov = _overrides(plan) if plan else {}
    _core.set_tuned_plan(sig, ov)
    return _core.gemm_plan(a, b, c, False, list(types), ov)


def reference(a, b):
    if a.shape[-2] * a.shape[-1] * b.shape[-1] >= 1 << 34:  # the squares: 64 sampled rows
        idx = np.linspace(0, a.shape[-2] - 1, 64).astype(int)
        return idx, a[idx].astype(np.float64) @ b.astype(np.float64)
    return None, a.astype(np.float64) @ b.astype(np.float64)


def ok_of(a, err):
    if a.dtype == np.int8:
        return err == 0.0
    if a.dtype == np.float64:
        return err < 1e-12
    return err < 1e-2 if a.dtype.name == "bfloat16" else err < 1e-4


def torch_peer(a, b):
    torch = r25._torch()
    if torch is None:
        return None
    if a.dtype.name == "bfloat16":
        ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
    else:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return (lambda: torch._int_mm(ta, tb)) if a.dtype == np.int8 else (lambda: torch.matmul(ta, tb))


def long_block(f):
    """A block of two calls after the warm-up (calls of 50 ms and more): the median."""
    f()
    out = []
    for _ in range(2):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return float(np.median(out))


def measure(name, variants, results, base_label="planner"):
    t0 = time.time()
    a, b = operands(name)
    idx, ref = reference(a, b)
    entries = []
    for lab, plan in variants:
        try:
            cfg = use(a, b, plan)
            c = coopjit.matmul(a, b)
        except Exception as e:  # a refused variant: say so, go on
            print(f"  {name} {lab}: refused: {e}", flush=True)
            continue
        err = rel_err(c if idx is None else c[idx], ref)
        ok = ok_of(a, err)
        print(f"  {name} {lab}: err {err:.1e} {'ok' if ok else 'WRONG'} [{cfgs(cfg)}]", flush=True)
        if ok:
            entries.append((lab, (lambda p=plan: use(a, b, p)), lambda: coopjit.matmul(a, b)))
    f = torch_peer(a, b)
    if f is not None:
        c = f()
        print(f"  {name} torch: err {rel_err(c if idx is None else c[idx], ref):.1e}", flush=True)
        entries.append(("torch", None, f))
    slow = name in SLOW
    res = rounds_of(entries, rounds=SLOW.get(name, r25.ROUNDS), timer=long_block if slow else block)
    use(a, b, None)
    base = np.median(res[base_label]) if base_label in res else None
    flops = 2.0 * a.shape[-2] * a.shape[-1] * b.shape[-1] * (a.shape[0] if a.ndim == 3 else 1)
    for lab, v in res.items():
        extra = f"  {base / np.median(v):5.2f}x {base_label}" if base else ""
        extra += f"  {np.median(res['torch']) / np.median(v):5.2f}x torch" if "torch" in res else ""
        spread = ""
        if lab != base_label and base:
            p = res[base_label]
            spread = "  apart" if (max(v) < min(p) or min(v) > max(p)) else "  overlap"
        print(f"{name:20s} {lab:20s} {summary(v)} us {flops / np.median(v) / 1e9:8.0f} GF/s{extra}{spread}", flush=True)
        results[f"{name}|{lab}"] = [float(x) for x in v]
    print(f"  ({name}: {time.time() - t0:.0f} s)", flush=True)


def header(what):
    torch = r25._torch()
    print(f"{what}: coopjit {coopjit.__version__} ({coopjit.cpu_info()['name']}, {r25.THREADS} threads), numpy "
          f"{np.__version__}, torch {torch.__version__ if torch else '-'}; {r25.ROUNDS} rounds, pause {r25.PAUSE} s, "
          f"blocks of ~{r25.SECONDS} s; us a call, median [min-max] over the rounds", flush=True)


def rows(names):
    header("rows")
    results = {}
    for name in names:
        if name == "f32_4096x4096x4096" and SHRINK == 1:
            pk = coopjit.peak()
            fma = pk["f32_fma"]
            print(f"  peak() f32 FMA: one thread {fma['single']:.1f}, all {fma['all']:.1f} GF/s ({fma['threads']} threads)",
                  flush=True)
        measure(name, VARIANTS[name], results)
    out = os.environ.get("JSON")
    if out:
        with open(out, "w") as f:
            json.dump(results, f)


def ab(specs):
    """NAME=JSON: main's plan (the JSON fields, forced) against this build's planner, with torch."""
    header("ab (main: main's plan as a tuned plan; branch: this build's planner)")
    results = {}
    for spec in specs:
        name, plan = spec.split("=", 1)
        measure(name, [("main", json.loads(plan)), ("branch", None)], results, base_label="main")
    out = os.environ.get("JSON")
    if out:
        with open(out, "w") as f:
            json.dump(results, f)


def main():
    part = sys.argv[1] if len(sys.argv) > 1 else "rows"
    if part == "rows":
        rows(sys.argv[2:] or list(ROWS))
    elif part == "ab":
        ab(sys.argv[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
