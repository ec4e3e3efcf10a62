"""Fuzz of the kernel-building API (session 25's audit): coopjit.ir.KernelBuilder with drawn, often
malformed, kernels, compiled for the CPU (or, with --device, a device through the SIMT lowering)
and called on guarded arrays.

Each case draws parameters and a short program of operations: matrix types of valid and invalid
components, sizes (0, negative, huge), uses and scopes; loads and stores at drawn positions and
strides (negative, huge), checked or not; splat, scale, binary, convert, transpose, mul_add,
reduce, per_element, get / set, vector loads; loops and branches whose values may be used
outside them; constants of drawn values and types (out of range, NaN, huge ints). For every case:
  - building, compiling and calling either works or raises ValueError / TypeError (VerifyError
    is a ValueError) / OverflowError / IndexError; a RuntimeError (an internal error, such as
    LLVM's verifier) or anything else is a failure;
  - a call's arrays sit inside guard elements, which must be unchanged;
  - the process must not die: the cases run in a child process, and a case that ends it (a
    signal, LLVM's abort) is reported with its number and started again after it.

    python scripts/fuzz_ir_builder.py --seed 1 --cases 300

Exit status 1 when anything failed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import traceback

import numpy as np

ALLOWED = (ValueError, TypeError, OverflowError, IndexError)
COMPONENTS = ["f32", "f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64", "u64", "f8_e4m3", "index", "i1", "f33"]
USES = ["a", "b", "acc", "acc", "zz"]
SCOPES = ["subgroup", "subgroup", "workgroup", "thread", "zz"]
SIZES = [1, 2, 4, 4, 8, 16, 16, 3, 0, -4, 1 << 20, 1 << 40]
NUMBERS = [0, 1, -1, 2.5, 127, 128, 255, 256, -129, 2**31, 2**53 + 1, 2**63, 2**64, -(2**63), 1e30, float("nan"),
           float("inf"), 7.0, 3]
PAD = 32
SENTINEL = 91


def draw_matrix_type(rng):
    comp = str(rng.choice(COMPONENTS))
    r = int(rng.choice(SIZES)) if rng.random() < 0.2 else int(rng.choice([1, 2, 4, 8, 16]))
    c = int(rng.choice(SIZES)) if rng.random() < 0.2 else int(rng.choice([1, 4, 8, 16]))
    return f"coopmatrix<{comp}, {r}, {c}, {rng.choice(USES)}, {rng.choice(SCOPES)}>"


def run_case(rng, i, device=None):
    """Builds, compiles and calls one drawn kernel; returns "ran", "refused", or the failure's text."""
    import coopjit
    from coopjit.ir import KernelBuilder

    b = KernelBuilder(f"fuzz{i}")
    ptype = str(rng.choice(["f32", "f32", "f32", "f64", "i32", "i8"]))
    X = b.param("X", f"ptr<{ptype}>")
    n = b.param("n", "index") if rng.random() < 0.3 else None
    mats, scalars, escaped = [], [b.index(1)], []
    steps = []
    try:
        for _ in range(int(rng.integers(1, 6))):
            what = str(rng.choice(["load", "store", "splat", "const", "binary", "convert", "transpose", "mul_add",
                                   "reduce", "per_element", "get", "set", "loop", "if", "escape", "vector",
                                   "scale", "store_element"]))
            steps.append(what)
            if what == "load":
                t = draw_matrix_type(rng) if rng.random() < 0.5 else f"coopmatrix<{ptype}, 4, 8, acc, subgroup>"
                row = int(rng.choice([0, 1, -1, 2**40])) if rng.random() < 0.3 else (n if n is not None else 0)
                strides = (int(rng.choice([8, 1, 0, -8, 2**40])), int(rng.choice([1, 1, 0, 2, -1])))
                mats.append(b.load(t, X, row=row, col=0, strides=strides, checked=bool(rng.random() < 0.3)))
            elif what == "store" and mats:
                m = mats[int(rng.integers(len(mats)))]
                b.store(m, X, strides=(int(rng.choice([8, 16, 1, 0, -3])), 1), checked=bool(rng.random() < 0.3))
            elif what == "splat":
                t = draw_matrix_type(rng)
                mats.append(b.splat(t, NUMBERS[int(rng.integers(len(NUMBERS)))]))
            elif what == "const":
                scalars.append(b.const(NUMBERS[int(rng.integers(len(NUMBERS)))], str(rng.choice(COMPONENTS))))
            elif what == "binary" and scalars:
                x = scalars[int(rng.integers(len(scalars)))]
                y = (scalars[int(rng.integers(len(scalars)))] if rng.random() < 0.5
                     else NUMBERS[int(rng.integers(len(NUMBERS)))])
                scalars.append(b.binary(str(rng.choice(["add", "sub", "mul", "div", "rem", "min", "max"])), x, y))
            elif what == "convert" and mats:
                mats.append(b.convert_matrix(mats[int(rng.integers(len(mats)))], draw_matrix_type(rng)))
            elif what == "transpose" and mats:
                mats.append(b.transpose(mats[int(rng.integers(len(mats)))]))
            elif what == "mul_add" and len(mats) >= 1:
                pick = [mats[int(rng.integers(len(mats)))] for _ in range(3)]
                mats.append(b.mul_add(*pick))
            elif what == "reduce" and mats:
                m = mats[int(rng.integers(len(mats)))]
                mats.append(b.reduce(m, str(rng.choice(["row", "column", "both", "2x2", "zz"])), draw_matrix_type(rng),
                                     str(rng.choice(["add", "max", "mul"]))))
            elif what == "per_element" and mats:
                m = mats[int(rng.integers(len(mats)))]
                mats.append(b.per_element(m, lambda bb, r, c, v: (escaped.append(v), bb.add(v, v))[1]))
            elif what in ("get", "set") and mats:
                m = mats[int(rng.integers(len(mats)))]
                idx = int(rng.choice([0, 5, -1, 10**6])) if n is None or rng.random() < 0.5 else n
                if what == "get":
                    scalars.append(b.get(m, idx))
                else:
                    mats.append(b.set(m, idx, NUMBERS[int(rng.integers(len(NUMBERS)))]))
            elif what == "loop":
                ub = int(rng.choice([0, 3, 2**40])) if n is None else n
                b.for_range(0, ub, int(rng.choice([1, 1, 2])), [],
                            lambda bb, k: (escaped.append(bb.add(k, 1)), None)[1])
            elif what == "if":
                b.if_(b.lt(scalars[0] if scalars[0].type == "index" else b.index(0), 2),
                      lambda bb: (escaped.append(bb.add(bb.index(2), 1)), None)[1])
            elif what == "escape" and escaped:
                v = escaped[int(rng.integers(len(escaped)))]
                scalars.append(b.add(v, v))
            elif what == "vector":
                v = b.vector_load(f"vector<{ptype}, {int(rng.choice([1, 4, 16, 0, 1 << 20]))}>", X,
                                  offset=int(rng.choice([0, 3, -2])), stride=int(rng.choice([1, 2, 0, -1])))
                if rng.random() < 0.5:
                    b.vector_store(v, X, offset=0, stride=1)
            elif what == "scale" and mats:
                mats.append(b.scale(mats[int(rng.integers(len(mats)))], NUMBERS[int(rng.integers(len(NUMBERS)))]))
            elif what == "store_element" and scalars:
                b.store_element(X, int(rng.choice([0, 1, 63, -1])), scalars[int(rng.integers(len(scalars)))])
        k = b.compile(device)
        size = int(rng.choice([1, 8, 64, 256, 1024]))
        big = np.full(size + 2 * PAD, SENTINEL, np.dtype({"f32": np.float32, "f64": np.float64, "i32": np.int32,
                                                          "i8": np.int8}[ptype]))
        x = big[PAD:PAD + size]
        x[:] = np.arange(size) % 7
        args = [x] + ([int(rng.choice([0, 1, 5, 2**40, -3]))] if n is not None else [])
        k(*args, **({} if device is None else {"groups": int(rng.choice([1, 2]))}))
        if not ((big[:PAD] == SENTINEL).all() and (big[PAD + size:] == SENTINEL).all()):
            return f"case {i} ({steps}): a call wrote outside its array"
    except ALLOWED:
        return "refused"
    except Exception as e:  # noqa: BLE001 - anything else is what the fuzz looks for
        return f"case {i} ({steps}): {type(e).__name__}: {str(e)[:300]}\n{traceback.format_exc(limit=3)}"
    return "ran"


def child(seed, first, last, device=None):
    """Runs cases first..last-1 of the seed, printing each case's number before it runs."""
    for i in range(first, last):
        rng = np.random.default_rng([seed, i])
        print(f"CASE {i}", flush=True)
        out = run_case(rng, i, device)
        if out in ("ran", "refused"):
            print(out.upper(), flush=True)
        else:
            print("FAIL " + out.replace("\n", "\n     "), flush=True)
    print("END", flush=True)


def sweep(seed, cases, timeout=600, counts=None, device=None):
    """The cases in child processes; returns the failures (texts); counts (a dict) gets how many
    ran and how many were refused."""
    fails, first = [], 0
    counts = {} if counts is None else counts
    while first < cases:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(seed), str(first), str(cases),
                            device or "cpu"],
                           capture_output=True, text=True, timeout=timeout)
        last = first - 1
        for line in p.stdout.splitlines():
            if line.startswith("CASE "):
                last = int(line.split()[1])
            elif line.startswith("FAIL "):
                fails.append(line[5:])
            elif line in ("RAN", "REFUSED"):
                counts[line.lower()] = counts.get(line.lower(), 0) + 1
        if "END" in p.stdout.splitlines():
            break
        tail = p.stderr.strip().splitlines()[-3:]
        fails.append(f"case {last} (seed {seed}) ended the process (exit {p.returncode}): {' | '.join(tail)}")
        first = last + 1
    return fails


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), None if sys.argv[5] == "cpu" else sys.argv[5])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--device", default=None, help="a SPIR-V or CUDA device (the SIMT lowering); the CPU by default")
    args = ap.parse_args()
    counts = {}
    fails = sweep(args.seed, args.cases, counts=counts, device=args.device)
    for f in fails[:40]:
        print("FAIL", f)
    print(f"cases {args.cases}: ran {counts.get('ran', 0)}, refused {counts.get('refused', 0)}, failed {len(fails)}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
