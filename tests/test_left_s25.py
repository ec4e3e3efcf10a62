"""Session 24's closing note left these as they were (`issues stops`, "Left as is" and "Review of
the change"); each test failed before its fix (session 25, helper hleft2): out= dtypes of fused
products, the arrays a compiled kernel keeps, dtype names, reductions' masked-array message."""
import numpy as np
import pytest

import coopjit


def _f64(x):
    return np.asarray(x).astype(np.float64)


# ---- reduce's masked-array message named numpy.matmul ---------------------------------------------
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8])
def test_masked_array_refusal_of_a_reduction_names_the_reduction(op, dtype):
    # reduce(masked) said "coopjit does not apply masks (numpy.matmul refuses them too): pass
    # a.filled(0)": the wrong function, and a fill that changes a min / max / prod.
    data = (np.arange(24).reshape(4, 6) % 7 + 1).astype(dtype)
    m = np.ma.masked_array(data, mask=(np.arange(24).reshape(4, 6) % 5 == 0))
    for call, where in ((lambda: coopjit.reduce(m, 1, op), "reduce"), (lambda: coopjit.reduce2x2(m, op), "reduce2x2")):
        with pytest.raises(TypeError, match="masked array") as e:
            call()
        msg = str(e.value)
        assert "matmul" not in msg and msg.startswith(f"{where}: a ") and repr(op) in msg, msg
        # the fill the message names leaves numpy.ma's result (which skips masked elements)
        fill = msg.split("a.filled(", 1)[1].split(")", 1)[0]
        filled = m.filled(eval(fill, {"numpy": np}))  # noqa: S307 - the message's own expression
        want = getattr(np.ma, {"sum": "sum", "prod": "prod", "min": "min", "max": "max"}[op])(m, axis=1)
        with np.errstate(over="ignore"):
            got = coopjit.reduce(filled, 1, op)
        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype))
    out = np.ma.masked_array(np.zeros(4, coopjit.reduce(data, 1, op).dtype))
    with pytest.raises(TypeError, match=f"reduce: out is a masked array.*op='{op}'"):
        coopjit.reduce(data, 1, op, out=out)


# ---- dtype names: 'bfloat16' / 'bf16', ml_dtypes types, torch dtypes, at every entry point ----------
def _dtype_forms():
    import ml_dtypes

    forms = ["bfloat16", "bf16", ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16)]
    try:
        import torch

        forms.append(torch.bfloat16)
    except ImportError:
        pass
    return forms


@pytest.mark.parametrize("form", _dtype_forms(), ids=repr)
def test_bfloat16_dtype_is_taken_in_every_form_users_write(rng, form):
    import ml_dtypes

    bf16 = np.dtype(ml_dtypes.bfloat16)
    a = rng.standard_normal((6, 8)).astype(np.float32)
    b = rng.standard_normal((8, 5)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    want = coopjit.matmul(a, b, bias=bias, out_dtype=bf16)
    for got in (coopjit.matmul(a, b, bias=bias, out_dtype=form), coopjit.gemm(a, b, bias=bias, out_dtype=form),
                coopjit.compile_gemm(6, 5, 8, bias=bias, out_dtype=form)(a, b)):
        assert got.dtype == bf16
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    kern = coopjit.compile_gemm(6, 5, 8, form)
    assert kern.dtype == bf16 and kern.out_dtype == bf16
    ab, bb = a.astype(bf16), b.astype(bf16)
    np.testing.assert_allclose(kern(ab, bb).astype(np.float64), _f64(ab) @ _f64(bb), rtol=2e-2, atol=2e-2)
    assert coopjit.compile_gemm(6, 5, 8, form, out_dtype="float32").out_dtype == np.float32
    assert coopjit.empty((2, 3), form).dtype == bf16
    assert coopjit.ptx.compile_gemm(64, 64, 64, form, target="sm_90").config["layout"] in ("row", "col")


def test_dtype_names_without_ml_dtypes_imported():
    # NumPy knows 'bfloat16' only once ml_dtypes is imported: in a process that had not imported
    # it, out_dtype="bfloat16" was "not a dtype".
    import subprocess
    import sys

    code = ("import sys, numpy as np, coopjit\n"
            "assert 'ml_dtypes' not in sys.modules, 'imported already: the check would not test the name'\n"
            "a = np.ones((3, 4), np.float32)\n"
            "y = coopjit.matmul(a, a.T, bias=np.zeros(3, np.float32), out_dtype='bfloat16')\n"
            "print(y.dtype, float(y[0, 0]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["bfloat16", "4.0"]


@pytest.mark.parametrize("bad", ["bfloat17", "bf_16", 3, True])
def test_a_dtype_that_is_none_of_them_is_named_with_the_accepted_forms(bad):
    a = np.ones((3, 4), np.float32)
    calls = {"matmul": lambda: coopjit.matmul(a, a.T, bias=np.zeros(3, np.float32), out_dtype=bad),
             "gemm": lambda: coopjit.gemm(a, a.T, activation="relu", out_dtype=bad),
             "compile_gemm": lambda: coopjit.compile_gemm(3, 3, 4, bad),
             "empty": lambda: coopjit.empty(3, bad)}
    for where, call in calls.items():
        with pytest.raises(TypeError) as e:
            call()
        msg = str(e.value)
        assert msg.startswith(where) and repr(bad) in msg and "'bf16'" in msg and "torch.bfloat16" in msg, msg
