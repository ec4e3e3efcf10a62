"""coopjit.prepack: a weight packed once and used by many products, against NumPy."""
import os
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prepacked_weight_many_products(rng, dtype):
    w = rng.standard_normal((257, 130)).astype(dtype)
    pw = coopjit.prepack(w)
    w_before = w.copy()
    for m in (1, 5, 64, 301):
        x = rng.standard_normal((m, 257)).astype(dtype)
        assert_gemm_close(coopjit.matmul(x, pw), x, w)
    c0 = rng.standard_normal((9, 130)).astype(dtype)
    x = rng.standard_normal((257, 9)).astype(dtype)
    c = c0.copy()
    coopjit.gemm(x, pw, c, alpha=-1.5, beta=0.5, trans_a=True)
    assert_gemm_close(c, x.T, w, c0, -1.5, 0.5)
    np.testing.assert_array_equal(w, w_before)


def test_prepacked_low_precision_and_int8(rng):
    w = rng.uniform(-1, 1, (96, 40)).astype(ml_dtypes.bfloat16)
    x = rng.uniform(-1, 1, (7, 96)).astype(ml_dtypes.bfloat16)
    out = np.zeros((7, 40), np.float32)
    coopjit.matmul(x, coopjit.prepack(w), out=out)
    assert np.abs(out - x.astype(np.float64) @ w.astype(np.float64)).max() < 1e-4
    wi = rng.integers(-128, 128, (64, 33)).astype(np.int8)
    xi = rng.integers(0, 256, (5, 64)).astype(np.uint8)
    np.testing.assert_array_equal(coopjit.matmul(xi, coopjit.prepack(wi)), xi.astype(np.int64) @ wi.astype(np.int64))


def test_prepacked_errors():
    pw = coopjit.prepack(np.ones((8, 4), np.float32))
    with pytest.raises(ValueError, match=r"inner dimensions differ"):
        coopjit.matmul(np.ones((3, 5), np.float32), pw)
    with pytest.raises(TypeError, match="mixed dtypes"):
        coopjit.matmul(np.ones((3, 8)), pw)
    with pytest.raises(ValueError, match="trans_b must be False"):
        coopjit.gemm(np.ones((3, 8), np.float32), pw, trans_b=True)
    with pytest.raises(ValueError, match=r"plan layout='col' does not fit a prepacked operand"):
        coopjit.matmul(np.ones((3, 8), np.float32), pw, plan={"layout": "col"})
    with pytest.raises(ValueError, match=r"prepack: b must be 2-D"):
        coopjit.prepack(np.ones(3, np.float32))


def test_the_plan_records_the_prepacked_operand():
    code = ("import numpy as np, coopjit; w = coopjit.prepack(np.ones((40, 20), np.float32)); "
            "coopjit.matmul(np.ones((4, 40), np.float32), w)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "COOPJIT_DEBUG": "plan"})
    assert re.search(r"\.pack\d+\.prepackedb", res.stderr), res.stderr
