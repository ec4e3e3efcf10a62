"""The PTX of ~470 sm_90 GEMM plans (bf16 / f16 / int8, f32 C, fused epilogues, Stream-K options,
edge shapes) as one line each: plan key and the PTX's SHA-1, or the refusal. For a refactor of the
Hopper lowering: dump with the build before and after, then cmp.

    PYTHONPATH=<build> python3 scripts/ptx_dump_hopper.py OUT.txt
    PYTHONPATH=<build> python3 scripts/ptx_dump_hopper.py OUT.txt --more   # and ~930 more (below)
    python3 scripts/ptx_dump_hopper.py --help

--more adds what the first set leaves out: kernels with beta C (accumulate: C's old values loaded by
the lanes), C column-major and strided, the mma.sync pipeline (sm_90 with wgmma off, and sm_80),
the cp.async wgmma feed (tma off), epi_smem off (the lanes' direct stores).
"""
import argparse
import hashlib
import sys

import ml_dtypes
import numpy as np

from coopjit import _core
from coopjit._epilogue import Epilogue


def steps(dt, m, n, **kw):
    return Epilogue("t", np.dtype(dt), np.dtype(dt), m, n, bind_arrays=False, **kw).steps()


def dump(out, more: bool) -> None:
    """One line a case into the open file `out` (the first set, and --more's when `more`)."""
    cases=[]
    for (m,n,k) in [(4096,4096,4096),(1024,4864,8192),(520,264,2056),(4224,4224,8192),(2816,1920,8192),(133,77,300)]:
        for types in (["bf16","bf16","bf16"],["bf16","bf16","f32"],["f16","f16","f16"],["i8","i8","i32"]):
            for ov in ({}, {"sk_stage_store":1}, {"sk_stage_store":2}, {"split":1,"sk_trace":1}, {"tma_store":0}):
                for epi in (None, dict(bias=True, activation="gelu"), dict(bias=True, activation="silu", residual=True), dict(bias=True)):
                    if epi is not None and types[0]=="i8": continue
                    cases.append(((m,n,k),types,ov,epi))
    # (sk_pair, session 25: after the others, so that their kernels' names, numbered in the order
    # made, stay those of a build without it)
    for (m,n,k) in [(4096,4096,4096),(1024,4864,8192),(520,264,2056),(4224,4224,8192),(2816,1920,8192),(133,77,300)]:
        for types in (["bf16","bf16","bf16"],["bf16","bf16","f32"],["f16","f16","f16"],["i8","i8","i32"]):
            for epi in (None, dict(bias=True, activation="gelu"), dict(bias=True, activation="silu", residual=True), dict(bias=True)):
                if epi is None or types[0] != "i8":
                    cases.append(((m,n,k),types,{"sk_pair":1},epi))
    cases=[(c,t,o,e,"target:sm_90",False,"row") for c,t,o,e in cases]
    if more:
        for target in ("target:sm_90", "target:sm_80"):
            for (m,n,k) in [(4096,4096,4096),(520,264,2056),(133,77,300),(64,48,40)]:
                for types in (["bf16","bf16","bf16"],["bf16","bf16","f32"],["f16","f16","f16"],["i8","i8","i32"]):
                    ovs = ({}, {"wgmma":0}, {"tma":0}, {"epi_smem":0}, {"ws":0}) if target == "target:sm_90" else ({}, {"stages":0})
                    for ov in ovs:
                        for acc in (False, True):
                            for cl in ("row", "col", "strided"):
                                for epi in (None, dict(bias=True, activation="gelu"), dict(bias=True, residual=True)):
                                    if epi is not None and (types[0]=="i8" or cl != "row"): continue
                                    cases.append(((m,n,k),types,ov,epi,target,acc,cl))
    for (m,n,k),types,ov,epi,target,acc,cl in cases:
        cs={"row":[n,1],"col":[1,m],"strided":[2*n+3,1]}[cl]
        strides=[k,1,n,1,*cs,0,0,0,0,0,0]
        st=None
        if epi is not None:
            st=steps(ml_dtypes.bfloat16 if types[0]=="bf16" else np.float16, m, n, **epi)
        try:
            kk=_core.gpu_gemm_kernel(target, types, [m,n,k,1,1], strides, acc, ov, st)
            r=kk.plan_key+" "+hashlib.sha1(kk.ptx.encode()).hexdigest()
        except Exception as e:
            r="refused: " + str(e)[:200]
        more = "" if (target, acc, cl) == ("target:sm_90", False, "row") else f" {target} acc={acc} C={cl}"
        out.write(f"{m}x{n}x{k} {types} {ov} {epi}{more}: {r}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="ptx_dump_hopper.py",
        description="Write one line per sm_90 GEMM plan (~470 cases; --more adds ~930): the plan key and the "
                    "SHA-1 of its PTX, or the refusal. Dump with the build before and after a change, then cmp.")
    ap.add_argument("out", metavar="OUT", help="the file to write (one line a case)")
    ap.add_argument("--more", action="store_true",
                    help="also beta C (accumulate), C column-major and strided, sm_80 and sm_90's mma.sync pipeline, "
                         "the cp.async wgmma feed, epi_smem off and ws off")
    args = ap.parse_args(argv)
    try:
        out = open(args.out, "w")
    except OSError as e:
        ap.error(f"cannot write {args.out!r}: {e.strerror}")
    with out:
        dump(out, args.more)
    return 0


if __name__ == "__main__":
    sys.exit(main())
