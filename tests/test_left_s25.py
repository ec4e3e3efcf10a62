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


# ---- out= dtypes of fused products: cast as the unfused path casts ------------------------------------
@pytest.mark.parametrize("out_dtype", [np.float64, ">f8", np.complex128])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_fused_product_into_a_wider_out_is_cast_like_the_unfused_one(rng, out_dtype, batch):
    # matmul(f32, f32, out=f64) casts (numpy.matmul's 'same_kind' rule); with bias= or activation=
    # it was refused: "a fused float32 x float32 product writes float32, bfloat16 or float16, not
    # out_dtype=float64".
    a = rng.standard_normal(batch + (7, 5)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    ref = np.maximum(_f64(a) @ _f64(b) + _f64(bias), 0)
    out = np.full(batch + (7, 6), np.nan, out_dtype)
    assert coopjit.matmul(a, b, bias=bias, activation="relu", out=out) is out
    np.testing.assert_allclose(out.real.astype(np.float64), ref, rtol=1e-5, atol=1e-5)
    # the value is the float32 result, cast: exactly what the unfused product into float32 gives, widened
    want = coopjit.matmul(a, b, bias=bias, activation="relu")
    np.testing.assert_array_equal(out.real, want.astype(np.float64))
    plain = np.full(batch + (7, 6), np.nan, out_dtype)
    coopjit.matmul(a, b, out=plain)  # the unfused path's rule, for comparison: it casts too
    np.testing.assert_allclose(plain.real.astype(np.float64), _f64(a) @ _f64(b), rtol=1e-5, atol=1e-5)


def test_fused_product_into_an_out_it_cannot_cast_to_is_refused_as_the_unfused_one(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 2)).astype(np.float32)
    for out in (np.zeros((4, 2), np.int32), np.zeros((4, 2), np.int64)):
        with pytest.raises(TypeError, match=r"same_kind") as plain:
            coopjit.matmul(a, b, out=out)
        with pytest.raises(TypeError, match=r"matmul: out has dtype .* fused float32 x float32 product is float32 and "
                                            r"cannot be cast to it \(numpy.matmul's 'same_kind' rule\)"):
            coopjit.matmul(a, b, bias=np.zeros(2, np.float32), out=out)
        assert "cannot be cast" in str(plain.value)
    # an int8 product with an epilogue writes floats: an int32 out is not a same_kind cast of them
    i8 = np.ones((4, 3), np.int8)
    with pytest.raises(TypeError, match=r"fused int8 x int8 product is float32 and cannot be cast"):
        coopjit.matmul(i8, np.ones((3, 2), np.int8), scale=np.ones(2, np.float32), out=np.zeros((4, 2), np.int32))
    ro = np.zeros((4, 2))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        coopjit.matmul(a, b, bias=np.zeros(2, np.float32), out=ro)
    with pytest.raises(ValueError, match=r"out has shape \(4, 3\) but a @ b has shape \(4, 2\)"):
        coopjit.matmul(a, b, bias=np.zeros(2, np.float32), out=np.zeros((4, 3)))


def test_fused_int8_product_into_a_float64_out(rng):
    a = rng.integers(-128, 128, (6, 40)).astype(np.int8)
    b = rng.integers(-128, 128, (40, 5)).astype(np.int8)
    sc = (rng.random(5) * 1e-3).astype(np.float32)
    out = np.empty((6, 5))
    coopjit.matmul(a, b, scale=sc, out=out)
    np.testing.assert_allclose(out, (_f64(a) @ _f64(b)) * _f64(sc), rtol=1e-6, atol=1e-9)


# ---- the arrays a compiled kernel keeps: copies made at compile time -------------------------------
@pytest.mark.parametrize("vec_dtype", [np.float32, np.float64])
def test_compiled_kernel_keeps_copies_of_its_arrays(rng, vec_dtype):
    # compile_gemm(bias=float32 array) kept the caller's array (a view: writes to it changed the
    # kernel's results) where a float64 bias was converted (a copy); a bound residual was read
    # from the caller's array at every call. Each is now a copy made at compile time.
    m, n, k = 9, 7, 5
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    arrays = {"bias": rng.standard_normal(n), "scale": rng.random(n) + 0.5, "row_scale": rng.random(m) + 0.5,
              "residual": rng.standard_normal((m, n))}
    arrays = {name: v.astype(vec_dtype) for name, v in arrays.items()}
    want = (_f64(a) @ _f64(b)) * _f64(arrays["scale"]) * _f64(arrays["row_scale"])[:, None] + _f64(arrays["bias"])
    want = want + _f64(arrays["residual"])
    kern = coopjit.compile_gemm(m, n, k, np.float32, **arrays)
    np.testing.assert_allclose(kern(a, b), want, rtol=1e-5, atol=1e-5)
    bias0 = _f64(arrays["bias"])
    for v in arrays.values():
        v[...] = 100  # the caller changes its arrays after compiling
    np.testing.assert_allclose(kern(a, b), want, rtol=1e-5, atol=1e-5)
    # a call's own operand still replaces the kept one for that call
    np.testing.assert_allclose(kern(a, b, bias=np.zeros(n, np.float32)), want - bias0, rtol=1e-5, atol=1e-5)


def test_compiled_kernel_bias_of_a_torch_cpu_tensor_is_copied(rng):
    torch = pytest.importorskip("torch")
    m, n, k = 4, 6, 3
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = torch.arange(n, dtype=torch.float32)
    kern = coopjit.compile_gemm(m, n, k, bias=bias)
    bias.fill_(-7)
    np.testing.assert_allclose(kern(a, b), _f64(a) @ _f64(b) + np.arange(n), rtol=1e-5, atol=1e-5)


def test_compiled_int8_kernel_keeps_a_copy_of_its_scale(rng):
    m, n, k = 5, 8, 16
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    sc = (rng.random(n) * 1e-2).astype(np.float32)
    want = (_f64(a) @ _f64(b)) * _f64(sc)
    kern = coopjit.compile_gemm(m, n, k, np.int8, scale=sc)
    sc[...] = 0
    np.testing.assert_allclose(kern(a, b), want, rtol=1e-6, atol=1e-9)


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


# ---- the planner's tile with a prepacked B's forced panel width ---------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(64, 257, 130), (301, 257, 130), (256, 512, 96), (7, 64, 200)])
def test_prepacked_products_plan_a_tile_within_the_registers(rng, dtype, m, k, n):
    # The planner chose mr for its own column width and the prepacked panels then forced a wider
    # nr: f32 N = 130 ran 16 x 48 (48 accumulators of 32 registers, 0.55-0.65x of 8 x 48 on Zen 5),
    # which the plan check (at most the registers since session 25) refused.
    from coopjit import _core
    from coopjit._gemm import _overrides

    regs = coopjit.cpu_info()["vector_registers"]
    w = rng.standard_normal((k, n)).astype(dtype)
    x = rng.standard_normal((m, k)).astype(dtype)
    pw = coopjit.prepack(w)
    out = np.empty((m, n), dtype)
    ir = ["f32"] * 3 if dtype == np.float32 else ["f64"] * 3
    cfg = _core.gemm_plan(x, np.broadcast_to(pw._dummy, pw.shape), out, False, ir, _overrides(pw._plan(None)))
    acc = int(cfg["mr"]) * int(cfg["nr"]) // int(cfg["simd_width"])
    assert int(cfg["nr"]) == pw.nr and acc <= regs * 3 // 4, cfg
    got = coopjit.matmul(x, pw)
    np.testing.assert_allclose(got, _f64(x) @ _f64(w), rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-3 if dtype == np.float32 else 1e-10)
