"""The fallback code paths, forced on this CPU with COOPJIT_CPU_LEVEL: AVX2+FMA (no AVX-512) and
SSE (no AVX), each in its own process, checked against NumPy and in the assembly."""
import os
import subprocess
import sys

import pytest

import coopjit

SCRIPT = r"""
import numpy as np, coopjit
rng = np.random.default_rng(0)
info = coopjit.cpu_info()
assert info["level"] == LEVEL, info["level"]
for dt in (np.float32, np.float64):
    for m, n, k in ((1, 1, 1), (37, 53, 29), (130, 70, 300), (4, 4096, 16)):
        a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
        ref = a.astype(np.float64) @ b
        got = coopjit.matmul(a, b)
        assert np.abs(got - ref).max() <= (k + 2) * np.finfo(dt).eps * (np.abs(a) @ np.abs(b)).max(), (dt, m, n, k)
import ml_dtypes
# low precision without AVX512-BF16 / AVX512-VNNI: converted while packing (vnni 1), same results
# (K within one K tile: the float32 and bfloat16 outputs sum in the same order)
a, b = rng.uniform(-1, 1, (400, 250)).astype(ml_dtypes.bfloat16), rng.uniform(-1, 1, (250, 290)).astype(ml_dtypes.bfloat16)
c32 = np.empty((400, 290), np.float32)
coopjit.matmul(a, b, out=c32)
ref = a.astype(np.float64) @ b.astype(np.float64)
assert np.abs(c32 - ref).max() <= 252 * 2 ** -23 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))).max(), "bf16"
# bf16 output: rounded once to nearest even (ml_dtypes' rounding), edge tiles included
assert np.array_equal(coopjit.matmul(a, b).view(np.uint16), c32.astype(ml_dtypes.bfloat16).view(np.uint16)), "bf16 out"
ai, bi = rng.integers(-128, 128, (320, 300)).astype(np.int8), rng.integers(-128, 128, (300, 290)).astype(np.int8)
assert np.array_equal(coopjit.matmul(ai, bi), ai.astype(np.int64) @ bi.astype(np.int64)), "int8"
# int8 quads: AVX-VNNI's 256-bit vpdpbusd at the AVX2 level where the CPU has it, widened otherwise
k8 = coopjit.compile_gemm(320, 290, 300, np.int8)
avxvnni = bool(info["features"].get("avxvnni")) and LEVEL == "avx2"
assert k8.config["vnni"] == (4 if avxvnni else 1), k8.config["vnni"]
assert ("vpdpbusd" in k8.source("asm")) == avxvnni
ai, bi = rng.integers(0, 256, (20, 32)).astype(np.uint8), rng.integers(-128, 128, (32, 24)).astype(np.int8)
assert np.array_equal(coopjit.matmul(ai, bi), ai.astype(np.int64) @ bi.astype(np.int64)), "u8 x s8 unpacked"
x = rng.standard_normal((33, 65)).astype(np.float32)
assert np.allclose(coopjit.reduce(x, axis=0), x.sum(0), rtol=1e-5, atol=1e-5)
asm = coopjit.compile_gemm(256, 256, 256, np.float32).source("asm")
fmas = [l for l in asm.splitlines() if "vfmadd" in l or "mulps" in l]
print("REGS", sorted({r for l in fmas for r in ("zmm", "ymm", "xmm") if r in l}))
"""


@pytest.mark.parametrize("level,allowed,needed", [("avx2", {"ymm", "xmm"}, "ymm"), ("sse", {"xmm"}, "xmm")])
def test_forced_feature_level(level, allowed, needed):
    feats = coopjit.cpu_info()["features"]
    if level == "avx2" and not (feats.get("avx2") and feats.get("fma")):
        pytest.skip("this CPU has no AVX2+FMA to fall back to")
    env = {**os.environ, "COOPJIT_CPU_LEVEL": level}
    res = subprocess.run([sys.executable, "-c", SCRIPT.replace("LEVEL", repr(level))], capture_output=True,
                         text=True, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    regs = eval(res.stdout.split("REGS", 1)[1])
    assert needed in regs and set(regs) <= allowed, regs


def test_unknown_level_is_a_clear_error():
    env = {**os.environ, "COOPJIT_CPU_LEVEL": "avx9000"}
    res = subprocess.run([sys.executable, "-c", "import coopjit; coopjit.cpu_info()"], capture_output=True, text=True,
                         env=env)
    assert res.returncode != 0 and "COOPJIT_CPU_LEVEL='avx9000' is not one of native, avx2, sse" in res.stderr
