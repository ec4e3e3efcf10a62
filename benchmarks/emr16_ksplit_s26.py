"""K split of a small M x N block among the workers (issue 14, session 26) on the 16-core host:
main's build against the branch's, torch and NumPy, each in its own warm process (its own
PYTHONPATH for the two coopjit builds), driven block by block: for each shape, each library's
block of calls after a pause (PAUSE, 0.3 s), the libraries' order reversed every other round;
ROUNDS rounds; medians [min-max] over the rounds. Plan variants of the branch (through the
tuned-plan table: plan=None calls) in the branch's process. Every result is checked against
NumPy in float64 first.

  python benchmarks/emr16_ksplit_s26.py drive MAIN_SITE BRANCH_SITE   (the driver)
  python benchmarks/emr16_ksplit_s26.py child LIB                     (a worker: main | branch | torch | numpy)
  ROUNDS=5 PAUSE=0.3 BLOCK_S=0.15 SHRINK=1  (SHRINK=8: a dry run on smaller shapes)
Recorded: benchmarks/recorded/issue14-emr16-ksplit-session26.txt."""
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rounds import timed  # noqa: E402 (the blocks of calls the CPU scripts share)

ROUNDS = int(os.environ.get("ROUNDS", "5"))
PAUSE = float(os.environ.get("PAUSE", "0.3"))
SECONDS = float(os.environ.get("BLOCK_S", "0.15"))
SHRINK = int(os.environ.get("SHRINK", "1"))

# name: (dtype, M, N, K)
SHAPES = {
    "f32_64x64x8192": ("float32", 64, 64, 8192),
    "f32_32x32x16384": ("float32", 32, 32, 16384),
    "f32_64x128x8192": ("float32", 64, 128, 8192),
    "f32_128x128x4096": ("float32", 128, 128, 4096),
    "f32_16x16x65536": ("float32", 16, 16, 65536),
    "f64_64x64x8192": ("float64", 64, 64, 8192),
    "f32_3000x500x200": ("float32", 3000, 500, 200),
    "f32_64x4096x4096": ("float32", 64, 4096, 4096),
}
KS16 = {"order": "k_outer", "pack": 0, "ksplit": 16, "threads": 16}
# plan variants run in the branch's process: (shape, label, plan)
VARIANTS = [
    ("f32_64x64x8192", "main's plan", {"order": "m_inner", "split": "sk+dp", "ksplit": 0, "kt": 256}),
    ("f32_64x64x8192", "ksplit8", dict(KS16, ksplit=8, threads=8)),
    ("f32_64x64x8192", "ksplit32 shares", dict(KS16, ksplit=32)),
    ("f32_128x128x4096", "ksplit16", KS16),
    ("f32_128x128x4096", "ksplit8", dict(KS16, ksplit=8)),
    ("f32_3000x500x200", "pack", {"pack": 1}),
    ("f32_3000x500x200", "mr8 nr48", {"mr": 8, "nr": 48}),
    ("f32_3000x500x200", "shares2", {"pack": 1, "shares": 2}),
    ("f32_64x4096x4096", "k_outer", {"pack": 0, "order": "k_outer"}),
    ("f32_64x4096x4096", "mr8 nr48", {"mr": 8, "nr": 48}),
    ("f32_64x4096x4096", "kt256", {"kt": 256}),
]
KEYS = ("layout", "order", "mr", "nr", "kt", "threads", "split", "pack", "ksplit", "grid_m", "shares", "mc_tiles")


def s(v):
    return max(1, v // SHRINK)


def block(f, seconds=SECONDS, blocks=3):
    """Median seconds a call over `blocks` blocks of back-to-back calls (about `seconds` in all, at
    least one call a block), after one warm-up call (_rounds.timed)."""
    return timed(f, blocks=blocks, seconds=seconds)


def operands(name):
    dt, m, n, k = SHAPES[name]
    rng = np.random.default_rng(26)
    a = rng.uniform(-1, 1, (m, s(k))).astype(dt)
    b = rng.uniform(-1, 1, (s(k), n)).astype(dt)
    return a, b


def child(lib):
    """Sets up every case, then answers 'run KEY' lines with one block's seconds a call."""
    calls, info = {}, {}
    if lib == "torch":
        import torch
        torch.set_num_threads(os.cpu_count())
    if lib in ("main", "branch"):
        import coopjit
        from coopjit import _core
        from coopjit._arrays import gemm_types
        from coopjit._kernel_args import _overrides
    for name in SHAPES:
        a, b = operands(name)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        cases = [(name, None)]
        if lib == "branch":
            cases += [(f"{name} | {label}", plan) for (sh, label, plan) in VARIANTS if sh == name]
        for key, plan in cases:
            if lib == "torch":
                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
                tc = torch.empty((a.shape[0], b.shape[1]), dtype=ta.dtype)
                f = (lambda ta=ta, tb=tb, tc=tc: torch.matmul(ta, tb, out=tc))
                f()
                got = tc.numpy()
                cfg = f"torch {torch.__version__} threads {torch.get_num_threads()}"
            elif lib == "numpy":
                c = np.empty((a.shape[0], b.shape[1]), a.dtype)
                f = (lambda a=a, b=b, c=c: np.matmul(a, b, out=c))
                f()
                got = c
                cfg = f"numpy {np.__version__}"
            else:
                types, dt = gemm_types(a.dtype, b.dtype)
                c = np.empty((a.shape[0], b.shape[1]), dt)
                sig = _core.gemm_signature(a, b, c, False, list(types))
                ov = _overrides(plan) if plan else {}
                try:
                    _core.set_tuned_plan(sig, ov)
                    conf = _core.gemm_plan(a, b, c, False, list(types), ov)
                    f = (lambda a=a, b=b, c=c, sig=sig, ov=ov: coopjit.matmul(a, b, out=c))
                    f()
                except Exception as e:  # a variant the planner refuses
                    print(json.dumps({"info": key, "text": f"refused: {e}"}), flush=True)
                    continue
                got = c
                cfg = " ".join(f"{k}={conf[k]}" for k in KEYS if k in conf)
                calls[key] = (f, sig, ov)
            err = float(np.max(np.abs(np.asarray(got, np.float64) - ref)) / max(float(np.max(np.abs(ref))), 1e-300))
            ok = err < (1e-4 if a.dtype == np.float32 else 1e-10)
            print(json.dumps({"info": key, "text": f"err {err:.1e} {'ok' if ok else 'WRONG'} [{cfg}]"}), flush=True)
            if lib not in ("main", "branch"):
                calls[key] = (f, None, None)
    print(json.dumps({"ready": sorted(calls)}), flush=True)
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        f, sig, ov = calls[key]
        if sig is not None:
            _core.set_tuned_plan(sig, ov)
        print(json.dumps({"t": block(f)}), flush=True)


def drive(main_site, branch_site):
    env = dict(os.environ)
    procs, keys = {}, {}
    for lib in ("main", "branch", "torch", "numpy"):
        e = dict(env)
        e["PYTHONPATH"] = {"main": main_site, "branch": branch_site}.get(lib, env.get("PYTHONPATH", ""))
        procs[lib] = subprocess.Popen([sys.executable, __file__, "child", lib], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, env=e, bufsize=1)
    for lib, p in procs.items():
        for line in p.stdout:
            msg = json.loads(line)
            if "ready" in msg:
                keys[lib] = msg["ready"]
                break
            print(f"  {lib:6s} {msg['info']}: {msg['text']}", flush=True)
    times = {}
    order = []
    for name in SHAPES:
        for lib in ("main", "branch", "torch", "numpy"):
            order.append((lib, name))
        for key in keys["branch"]:
            if key.startswith(name + " | "):
                order.append(("branch", key))
    for r in range(ROUNDS):
        for name in SHAPES:
            items = [it for it in order if it[1] == name or it[1].startswith(name + " | ")]
            if r % 2:
                items = items[::-1]
            for lib, key in items:
                if key not in keys[lib]:
                    continue
                time.sleep(PAUSE)
                p = procs[lib]
                p.stdin.write(key + "\n")
                p.stdin.flush()
                times.setdefault((lib, key), []).append(json.loads(p.stdout.readline())["t"])
        print(f"round {r + 1} done", flush=True)
    for p in procs.values():
        p.stdin.close()
        p.wait(timeout=30)
    print(f"\n{ROUNDS} rounds, pause {PAUSE} s, blocks of ~{SECONDS} s; us a call, median [min-max] over the rounds")
    for name in SHAPES:
        med = {k: float(np.median(v)) for k, v in times.items()}
        base = med.get(("main", name))
        peer = {lib: med.get((lib, name)) for lib in ("torch", "numpy")}
        for (lib, key), v in times.items():
            if key != name and not key.startswith(name + " | "):
                continue
            m = med[(lib, key)]
            label = lib if key == name else f"branch {key[len(name) + 3:]}"
            rel = " ".join(f"{base / m:5.2f}x main" if base else "" for _ in [0])
            rel += "".join(f" {peer[q] / m:5.2f}x {q}" for q in peer if peer[q])
            print(f"{name:18s} {label:26s} {m * 1e6:9.1f} [{min(v) * 1e6:9.1f}-{max(v) * 1e6:9.1f}] us  {rel}")


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        drive(sys.argv[2], sys.argv[3])
