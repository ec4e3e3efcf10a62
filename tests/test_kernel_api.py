"""compile_gemm, Kernel objects, the code cache, the generated code, devices and the CLI."""
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close


def test_kernel_called_repeatedly(rng):
    k = coopjit.compile_gemm(33, 47, 21, np.float64, trans_b=True, accumulate=True)
    for _ in range(3):
        a, b, c0 = rng.standard_normal((33, 21)), rng.standard_normal((47, 21)), rng.standard_normal((33, 47))
        c = c0.copy()
        assert k(a, b, c, alpha=2.0, beta=-1.0) is c
        assert_gemm_close(c, a, b.T, c0, 2.0, -1.0)


def test_config_is_the_plan():
    k = coopjit.compile_gemm(64, 64, 64, np.float32)
    cfg = k.config
    for field in ("dtype", "layout", "mr", "nr", "kb", "simd_width", "unit_stride_b", "split"):
        assert field in cfg
    assert cfg["dtype"] == "f32" and cfg["layout"] in ("row", "col")
    assert int(cfg["nr"]) % int(cfg["simd_width"]) == 0
    assert "tile=" in repr(k)


def test_ir_contains_coopmatrix_operations():
    ir = coopjit.compile_gemm(20, 30, 40, np.float32).source("ir")
    for op in ("coopmatrix.load", "coopmatrix.mul_add", "coopmatrix.store", "for ", "coopmatrix<f32"):
        assert op in ir, op
    assert ir.startswith("func @")


def test_llvm_ir_and_vectorized_assembly():
    k = coopjit.compile_gemm(256, 256, 256, np.float32)
    assert "define void @" in k.source("llvm")
    asm = k.source("asm")
    feats = coopjit.cpu_info()["features"]
    if feats.get("avx512f"):
        reg = "zmm"
    elif feats.get("avx2"):
        reg = "ymm"
    else:
        pytest.skip("this CPU has neither AVX-512 nor AVX2")
    fmas = [line for line in asm.splitlines() if "vfmadd" in line and reg in line]
    assert len(fmas) >= 8, f"expected {reg} FMAs in the microkernel, found {len(fmas)}"


def test_cache_compiles_each_kernel_once():
    before = coopjit._core.cache_stats()
    k1 = coopjit.compile_gemm(301, 302, 303, np.float64, plan={"mr": 7})
    mid = coopjit._core.cache_stats()
    k2 = coopjit.compile_gemm(301, 302, 303, np.float64, plan={"mr": 7})
    after = coopjit._core.cache_stats()
    assert k1.source("ir") == k2.source("ir")
    assert after["misses"] == mid["misses"] and after["hits"] == mid["hits"] + 1
    assert mid["misses"] + mid["hits"] == before["misses"] + before["hits"] + 1
    # A different size with the same plan reuses the code: sizes are runtime arguments.
    coopjit.compile_gemm(401, 402, 403, np.float64, plan={"mr": 7})
    assert coopjit._core.cache_stats()["misses"] == after["misses"]


def test_gil_is_released_while_a_kernel_runs(rng):
    # One worker thread, so that on a 2-core machine (under the sanitizers too) a core is left for
    # the loop below: it then stalls only if the call holds the GIL, not when workers take every core.
    n = 1536
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    k = coopjit.compile_gemm(n, n, n, np.float32, plan={"threads": 1})
    c = k(a, b)
    t0 = time.perf_counter()
    k(a, b, c)
    duration = time.perf_counter() - t0
    stamps = []
    worker = threading.Thread(target=lambda: k(a, b, c))
    worker.start()
    while worker.is_alive():
        stamps.append(time.perf_counter())
    worker.join()
    gaps = np.diff(stamps) if len(stamps) > 1 else np.array([duration])
    # Holding the GIL would stall this loop for the whole kernel.
    assert len(stamps) > 10 and gaps.max() < 0.5 * duration, (len(stamps), gaps.max(), duration)


def test_devices_and_info():
    assert "cpu" in coopjit.devices()
    out = subprocess.run([sys.executable, "-m", "coopjit", "info"], capture_output=True, text=True, check=True).stdout
    assert coopjit.__version__ in out and coopjit.llvm_version in out
    for label in ("AVX-512 F", "AVX-512 BF16", "AVX-512 FP16", "AVX-512 VNNI", "AMX"):
        assert label in out
    assert "devices: cpu" in out


def test_debug_env_prints_the_pipeline():
    code = "import numpy as np, coopjit; coopjit.matmul(np.ones((3,5),np.float32), np.ones((5,9),np.float32), plan={'mr': 3, 'kb': 8})"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "COOPJIT_DEBUG": "plan,ir,llvm"})
    assert "[coopjit] plan gemm.f32" in res.stderr
    assert "coopmatrix.mul_add" in res.stderr
    assert "define void @" in res.stderr


def test_small_kernels_have_their_shape_built_in_and_take_other_strides(rng):
    # Up to 64 in every dimension the code has the sizes and strides as constants
    # (config fixed_shape); operands with other strides of the same kind get their own variant.
    k = coopjit.compile_gemm(12, 20, 16, np.float32)
    assert k.config["fixed_shape"] is True
    assert coopjit.compile_gemm(300, 300, 300, np.float32).config["fixed_shape"] is False
    assert coopjit.compile_gemm(12, 20, 16, np.float32, plan={"fixed": 0}).config["fixed_shape"] is False
    big_a = rng.standard_normal((12, 40)).astype(np.float32)
    a = big_a[:, 3:19]  # row stride 40, not 16
    b = rng.standard_normal((16, 20)).astype(np.float32)
    c = np.empty((12, 20), np.float32)
    k(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    k(np.ascontiguousarray(a), b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
