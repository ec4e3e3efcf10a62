"""Per-block timeline of coopjit's Stream-K kernel (plan field sk_trace, issue 16 session 20): each
consumer warp's %clock / %globaltimer_lo at its units' boundaries (unit start, K loop end, flag
wait start / end, C or the partial's stores issued, the flag released), read back from the flags'
allocation (_core.gpu_stream_k_flags), summarized by unit kind (whole tile, a tile's head with a
successor, a tail / middle part); plus CUDA-graph timings (medians of alternating rounds, a pause
before each block) of the automatic plan, the traced plan, any --plans and cuBLAS in one process,
every result checked against float64 first. Writes OUT_DIR/timings.json and trace-SHAPE.json.

    python benchmarks/cuda_sk_trace.py OUT_DIR [--rounds 3] [--only SHAPE,...] [--plans JSON] [--trace-extra JSON]
--plans: {label: plan fields added to the traced shape's plan}; --trace-extra: fields added to the
traced plan (e.g. '{"sk_stage": 0, "sk_one_release": 0}' for session 19's kernel).
"""
import json
import os
import statistics
import sys
import time

import ml_dtypes
import numpy as np
import torch

import coopjit
from coopjit import _core

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cuda_gemm import graph_timed  # noqa: E402

SKDP = {"layout": "col", "sg_m": 8, "nr": 256, "split": "sk+dp", "sk_flags": 1}
# (shape, the plan to trace: None = the automatic plan)
SHAPES = [("1024x4864x8192", None), ("2816x1920x8192", None), ("896x4864x8192", SKDP), ("4352x1024x4096", SKDP),
          ("4224x4224x8192", SKDP), ("1024x4224x8192", dict(SKDP, split="sk")), ("4352x1024x8192", SKDP)]
U, S = 8, 16


def parse(fl, cfg, m, n, k):
    iv = lambda x: int(str(x).split()[0].rstrip(":"))  # noqa: E731
    SGS = iv(cfg["sg_m"]) * iv(cfg["sg_n"])
    mt, nt = (int(x) for x in str(cfg["macro_tile"]).split()[0].split("x"))
    tiles = -(-m // mt) * -(-n // nt)
    kt = iv(cfg["kt"])
    tiles_k = max(1, -(-k // kt))
    workers = iv(cfg["workers"])
    sk_iters = _core.stream_k_tiles(str(cfg["split"]), tiles, tiles_k, workers)
    w_eff = min(workers, sk_iters) if sk_iters > 0 else 0
    dp_tiles = tiles - sk_iters // tiles_k
    groups = max(1, max(w_eff, min(workers, dp_tiles)))
    base = (w_eff + 1) * SGS
    tr = np.asarray(fl[base: base + groups * U * S * SGS], dtype=np.int64).reshape(groups, U, S, SGS) & 0xFFFFFFFF
    g0 = tr[:, :, 1, :][tr[:, :, 1, :] != 0]
    # globaltimer lo: relative to the earliest unit start (mod 2^32)
    ref = int(g0.min()) if g0.size else 0
    blocks = []
    for g in range(groups):
        units = []
        for u in range(U):
            e = tr[g, u]
            if e[1, 0] == 0:
                continue
            kind = int(e[12, 0])
            w = {}
            for sg in range(SGS):
                c0 = int(e[0, sg])
                rel = lambda s: int((int(e[s, sg]) - c0) & 0xFFFFFFFF) if e[s + 1, sg] != 0 else None  # noqa: E731
                w[sg] = {"c0": c0, "k_end": rel(2), "wait0": rel(4), "wait1": rel(6), "epi_end": rel(8), "rel_end": rel(10),
                         "t0_ns": int((int(e[1, sg]) - ref) & 0xFFFFFFFF),
                         "tend_ns": int((int(e[9, sg]) - ref) & 0xFFFFFFFF) if e[9, sg] else None}
            units.append({"u": u, "tile": kind // 4, "head": (kind >> 1) & 1, "has_next": kind & 1, "ktiles": int(e[13, 0]), "warps": w})
        blocks.append(units)
    return {"groups": groups, "workers": w_eff, "sk_iters": sk_iters, "tiles": tiles, "tiles_k": tiles_k, "blocks": blocks}


def summary(tr):
    """Cycles (warp 0 .. SGS-1 averaged) by unit kind: K loop a K tile, wait, epilogue/store, release, gaps."""
    rows = {}
    spans = []
    for units in tr["blocks"]:
        if not units:
            continue
        t_first = min(min(w["t0_ns"] for w in x["warps"].values()) for x in units)
        t_last = max(max((w["tend_ns"] or 0) for w in x["warps"].values()) for x in units)
        spans.append(t_last - t_first)
        for x in units:
            kind = ("head" if x["head"] else "tail/mid") + ("+next" if x["has_next"] else "")
            if x["head"] and not x["has_next"] and x["ktiles"] == tr["tiles_k"]:
                kind = "whole"
            ws = list(x["warps"].values())
            def avg(f):
                v = [f(w) for w in ws]
                v = [a for a in v if a is not None]
                return sum(v) / len(v) if v else None
            r = rows.setdefault(kind, {"n": 0, "ktiles": 0, "k": 0, "wait": 0, "epi": 0, "rel": 0, "nw": 0, "nr": 0, "gap": 0, "ng": 0})
            r["n"] += 1
            r["ktiles"] += x["ktiles"]
            r["k"] += avg(lambda w: w["k_end"])
            if x["has_next"]:
                r["wait"] += avg(lambda w: w["wait1"] - w["wait0"])
                r["nw"] += 1
            r["epi"] += avg(lambda w: w["epi_end"] - (w["wait1"] if w["wait1"] is not None else w["k_end"]))
            if not x["head"]:
                r["rel"] += avg(lambda w: w["rel_end"] - w["epi_end"])
                r["nr"] += 1
            # the gap from this unit's last mark (its release, or C's stores issued) to the next unit's start, same warp
            nxt = [y for y in units if y["u"] == x["u"] + 1]
            if nxt:
                last = "rel_end" if not x["head"] else "epi_end"
                v = [((nxt[0]["warps"][sg]["c0"] - w["c0"] - w[last]) & 0xFFFFFFFF) for sg, w in x["warps"].items() if w[last] is not None]
                if v:
                    r["gap"] += sum(v) / len(v)
                    r["ng"] += 1
    out = {}
    for kind, r in rows.items():
        out[kind] = {"units": r["n"], "k_cycles_per_ktile": r["k"] / max(1, r["ktiles"]), "k_cycles_per_unit": r["k"] / r["n"],
                     "ktiles_per_unit": r["ktiles"] / r["n"],
                     "wait_cycles": r["wait"] / r["nw"] if r["nw"] else None, "epi_or_store_cycles": r["epi"] / r["n"],
                     "release_cycles": r["rel"] / r["nr"] if r["nr"] else None,
                     "gap_to_next_unit_cycles": r["gap"] / r["ng"] if r["ng"] else None}
    out["block_span_ns"] = {"min": min(spans), "avg": sum(spans) / len(spans), "max": max(spans)} if spans else None
    return out


def main():
    out_dir = sys.argv[1]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    extra = json.loads(sys.argv[sys.argv.index("--plans") + 1]) if "--plans" in sys.argv else {}
    os.makedirs(out_dir, exist_ok=True)
    res = []
    for s, pl in SHAPES:
        if only and s not in only:
            continue
        m, n, k = (int(x) for x in s.split("x"))
        g = torch.Generator(device="cuda").manual_seed(1)
        a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
        b = torch.randn(k, n, device="cuda", generator=g).bfloat16()
        ref = a.double() @ b.double()
        kerns = {"auto": coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=None)}
        if pl:
            kerns["skdp"] = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=pl)
        base = dict(pl) if pl else dict(SKDP)
        tx = json.loads(sys.argv[sys.argv.index("--trace-extra") + 1]) if "--trace-extra" in sys.argv else {}
        traced = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=dict(base, sk_trace=1, **tx))
        kerns["traced"] = traced
        for lab, p2 in extra.items():
            kerns[lab] = coopjit.compile_gemm(m, n, k, ml_dtypes.bfloat16, device="cuda:0", plan=dict(base, **p2))
        row = {"shape": s, "keys": {lab: kk._core.plan_key for lab, kk in kerns.items()}}
        print(s, row["keys"], flush=True)
        outs = {lab: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for lab in list(kerns) + ["cublas"]}
        fns = {lab: (lambda kk=kk, o=outs[lab]: kk(a, b, o)) for lab, kk in kerns.items()}
        fns["cublas"] = lambda o=outs["cublas"]: torch.matmul(a, b, out=o)
        for lab, fn in fns.items():
            fn()
            torch.cuda.synchronize()
            e = ((outs[lab].double() - ref).norm() / ref.norm()).item()
            row.setdefault("err", {})[lab] = e
            assert e < 1e-2, (s, lab, e)
        # the trace: one launch at a time, the allocation cleared before
        stream = torch.cuda.current_stream().cuda_stream
        traces = []
        for rep in range(2):
            torch.cuda.synchronize()
            _core.gpu_stream_k_flags(traced.device, stream, True)
            traced(a, b, outs["traced"])
            torch.cuda.synchronize()
            fl = _core.gpu_stream_k_flags(traced.device, stream, True)
            if not fl:
                print("no flags allocation read", flush=True)
                break
            traces.append(parse(fl, traced.config, m, n, k))
        row["trace_summary"] = [summary(t) for t in traces]
        json.dump(traces, open(os.path.join(out_dir, f"trace-{s}.json"), "w"))
        for t in row["trace_summary"][:3]:
            print(json.dumps(t), flush=True)
        times = {lab: [] for lab in fns}
        for _ in range(rounds):
            for lab, fn in fns.items():
                time.sleep(0.3)
                times[lab].append(graph_timed(fn, 10)[0] * 1e6)
        f = 2 * m * n * k
        row["us"] = {lab: statistics.median(v) for lab, v in times.items()}
        row["all_us"] = times
        print(s, " ".join(f"{lab}={v:.2f}us/{f / v / 1e6:.0f}T" for lab, v in row["us"].items()), flush=True)
        res.append(row)
        json.dump(res, open(os.path.join(out_dir, "timings.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
