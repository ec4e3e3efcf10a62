"""Valid kernels the CPU lowering did not compile (issue 12, items 7 to 10): bf16 -> f16, f64 ->
f16 (and every f16 conversion LLVM makes a library call of: one rounding, to nearest even,
never through f32), fp8 arithmetic in per-element functions, and i1 in memory (refused on both
targets with a TypeError). References: NumPy's and ml_dtypes' conversions."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit.ir import KernelBuilder

from device_support import DEVICE, lanes, needs_device

BF16, E4M3, E5M2 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
NP = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": BF16, "f8_e4m3": E4M3, "f8_e5m2": E5M2,
      "i32": np.int32, "i64": np.int64}


def mat(t, r, c):
    return f"coopmatrix<{t}, {r}, {c}, acc, subgroup>"


def _convert_kernel(src, dst, cols):
    b = KernelBuilder(f"convert_{src}_{dst}")
    X, Y = b.param("X", f"ptr<{src}>"), b.param("Y", f"ptr<{dst}>")
    m = b.load(mat(src, 1, cols), X, strides=(cols, 1))
    b.store(b.convert_matrix(m, mat(dst, 1, cols)), Y, strides=(cols, 1))
    return b.compile()


def _run_convert(src, dst, values):
    x = np.asarray(values, NP[src]).reshape(1, -1)
    y = np.zeros(x.shape, NP[dst])
    _convert_kernel(src, dst, x.shape[1])(x, y)
    return x, y


def _same_bits(got, want):
    """Equal values, NaN where NaN, and the sign of zeros."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    same &= np.signbit(g) == np.signbit(w)
    assert same.all(), (got[~same], want[~same])


@pytest.fixture(autouse=True)
def _quiet_overflow():
    with np.errstate(over="ignore", invalid="ignore"):
        yield


def _double_rounding_traps():
    """f64 values just off the midpoint between two f16 values, by less than half an f32 ulp:
    rounding to f32 first lands on the midpoint, and ties-to-even then picks the wrong f16."""
    out = []
    for h in (1.0, 1.0009765625, 3.140625, 1000.0, 6.103515625e-05, 2.0 ** -20, 65504.0, 0.5, 1.5 * 2.0 ** -24):
        h16 = np.float16(h)
        nxt = np.nextafter(h16, np.float16(np.inf))
        mid = (float(h16) + float(nxt)) / 2
        for eps in (2.0 ** -40, 2.0 ** -33):
            d = mid * eps
            out += [mid + d, mid - d, -(mid + d), -(mid - d), mid]
    out += [65519.99999999, 65520.0, 65520.000001, 2.0 ** -25, 2.0 ** -25 * (1 + 2.0 ** -40), 2.0 ** -26,
            1e-30, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300]
    return np.array(out, np.float64)


def test_f64_to_f16_rounds_once_like_numpy(rng):
    traps = _double_rounding_traps()
    # The traps are traps: through f32 they would round differently from the direct conversion.
    assert (traps.astype(np.float32).astype(np.float16) != traps.astype(np.float16)).sum() >= 10
    rnd = rng.standard_normal(200) * np.exp2(rng.integers(-30, 18, 200))
    values = np.concatenate([traps, rnd])
    values = np.concatenate([values, np.zeros(-len(values) % 16)])
    x, y = _run_convert("f64", "f16", values)
    _same_bits(y, x.astype(np.float16))
    _same_bits(y, x.astype(ml_dtypes.float16) if hasattr(ml_dtypes, "float16") else x.astype(np.float16))


@pytest.mark.parametrize("src", ["f32", "bf16", "f16"])
def test_f32_bf16_to_f16(rng, src):
    values = np.concatenate([rng.standard_normal(48) * np.exp2(rng.integers(-26, 17, 48)),
                             [65504.0, 65520.0, 70000.0, -1e5, 2.0 ** -24, 2.0 ** -25, 0.0, -0.0, np.inf, np.nan,
                              1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 3e-8, -3e-8, 1e-3, 100.5]])
    x, y = _run_convert(src, "f16", values)
    _same_bits(y, x.astype(np.float32).astype(np.float16))  # f32 / bf16 / f16 are exact in f32


def _round_exactly(x: np.ndarray, dtype) -> np.ndarray:
    """x (float64, inside the format's finite range) rounded to nearest, ties to even, in one
    step: every finite value of the format is exact in float64 and so is each midpoint of two
    neighbours. (ml_dtypes converts float64 through float32 and rounds twice.)"""
    bits = np.arange(2 ** (8 * np.dtype(dtype).itemsize), dtype=np.uint64).astype(
        np.uint16 if np.dtype(dtype).itemsize == 2 else np.uint8)
    vals = bits.view(dtype).astype(np.float64)
    keep = np.isfinite(vals) & ~((vals == 0) & np.signbit(vals))
    order = np.argsort(vals[keep], kind="stable")
    v, b = vals[keep][order], bits[keep][order]
    out = np.empty(x.shape, np.float64)
    for i, xi in enumerate(x):
        if xi == 0 or np.isnan(xi):
            out[i] = xi
            continue
        j = np.searchsorted(v, xi)
        if j < len(v) and v[j] == xi:
            out[i] = xi
            continue
        lo, hi = v[j - 1], v[j]
        mid = (lo + hi) / 2
        pick_hi = xi > mid or (xi == mid and int(b[j]) % 2 == 0)
        out[i] = hi if pick_hi else lo
        if out[i] == 0:
            out[i] = np.copysign(0.0, xi)
    return out.astype(dtype)


@pytest.mark.parametrize("dst", ["bf16", "f8_e4m3", "f8_e5m2"])
def test_f64_to_narrow_formats_rounds_once(rng, dst):
    """f64 -> bf16 / fp8 likewise: one rounding from the f64 value."""
    unit = {"bf16": 2.0 ** -8, "f8_e4m3": 2.0 ** -4, "f8_e5m2": 2.0 ** -3}[dst]  # half an ulp at 1.0
    traps = []
    for base in (1.0, 1.5, 3.0, 0.375):
        mid = base + base * unit
        traps += [mid * (1 + 2.0 ** -40), mid * (1 - 2.0 ** -40), -mid * (1 + 2.0 ** -40), mid]
    values = np.concatenate([traps, rng.standard_normal(48) * 4, [0.0, -0.0, np.nan, 2.0 ** -12]])
    x, y = _run_convert("f64", dst, values)
    want = _round_exactly(x.reshape(-1), NP[dst]).reshape(x.shape)
    assert (x.astype(np.float32).astype(NP[dst]) != want).sum() >= 3  # rounding through f32 would differ
    _same_bits(y, want)
    _same_bits(x.astype(np.float32).astype(NP[dst]), _round_exactly(x.reshape(-1).astype(np.float32), NP[dst])
               .reshape(x.shape))  # the reference agrees with ml_dtypes where one rounding is all there is


def test_scalar_f16_parameter_and_per_element_extras(rng):
    b = KernelBuilder("f16_scalar")
    X, Y, s = b.param("X", "ptr<f16>"), b.param("Y", "ptr<f16>"), b.param("s", "f16")
    m = b.load(mat("f16", 2, 16), X, strides=(16, 1))
    m = b.per_element(m, lambda b, r, c, v, t: b.add(v, t), extras=[s])
    b.store(m, Y, strides=(16, 1))
    k = b.compile()
    x = rng.standard_normal((2, 16)).astype(np.float16)
    for scale in (1.0 + 2.0 ** -11 + 2.0 ** -40, 0.3, -1234.5678):
        y = np.zeros_like(x)
        k(x, y, scale)
        want = (x.astype(np.float32) + np.float32(np.float16(scale))).astype(np.float16)  # f16 adds round in f32
        _same_bits(y, want)


@pytest.mark.parametrize("t", ["f8_e4m3", "f8_e5m2"])
def test_fp8_arithmetic_in_per_element_functions(rng, t):
    dt = NP[t]
    x = (rng.standard_normal((2, 16)) * 3).astype(dt)
    b = KernelBuilder(f"fp8_{t}")
    X, Y = b.param("X", f"ptr<{t}>"), b.param("Y", f"ptr<{t}>")
    m = b.load(mat(t, 2, 16), X, strides=(16, 1))
    m = b.per_element(m, lambda b, r, c, v: b.max(b.sub(b.mul(b.add(v, v), 0.75), 1.0), b.neg(b.abs(v))))
    b.store(m, Y, strides=(16, 1))
    y = np.zeros_like(x)
    b.compile()(x, y)
    f = lambda v: v.astype(np.float32)  # noqa: E731 - each operation in f32, rounded back to the format
    r = lambda v: v.astype(dt)  # noqa: E731
    want = np.maximum(f(r(f(r(f(r(f(x) + f(x))) * np.float32(0.75))) - np.float32(1.0))), f(r(-np.abs(f(x)))))
    _same_bits(y, r(want))


def test_fp8_matrix_elementwise_and_reduce(rng):
    x = (rng.standard_normal((4, 16)) * 2).astype(E4M3)
    b = KernelBuilder("fp8_rows")
    X, Y = b.param("X", "ptr<f8_e4m3>"), b.param("Y", "ptr<f8_e4m3>")
    m = b.load(mat("f8_e4m3", 4, 16), X, strides=(16, 1))
    s = b.reduce(m, "row", mat("f8_e4m3", 4, 1), "max")
    b.store(s, Y, strides=(1, 1))
    y = np.zeros((4, 1), E4M3)
    b.compile()(x, y)
    _same_bits(y, x.astype(np.float32).max(axis=1, keepdims=True).astype(E4M3))


def _i1_kernel(device=None):
    b = KernelBuilder("bools", lanes(16) if device else 16)
    X, Y = b.param("X", "ptr<i1>"), b.param("Y", "ptr<i1>")
    m = b.load(mat("i1", 1, 16), X, strides=(16, 1))
    b.store(m, Y, strides=(16, 1))
    return b.compile(device=device)


def test_i1_in_memory_is_refused_on_the_cpu():
    with pytest.raises(TypeError, match=r"i1>.*not supported.*u8"):
        _i1_kernel()


def test_i1_in_memory_is_refused_on_the_device():
    needs_device()
    with pytest.raises(TypeError, match=r"i1.*not supported.*u8"):
        _i1_kernel(DEVICE)


def test_booleans_through_u8_and_compare_work():
    """What the error suggests: bytes in memory, i1 in registers."""
    b = KernelBuilder("bools_u8")
    X, Y = b.param("X", "ptr<u8>"), b.param("Y", "ptr<u8>")
    m = b.load(mat("u8", 1, 16), X, strides=(16, 1))
    m = b.per_element(m, lambda b, r, c, v: b.select(b.ne(v, 0), b.const(0, "u8"), b.const(1, "u8")))
    b.store(m, Y, strides=(16, 1))
    x = np.frombuffer(bytes([0, 1, 2, 0, 255, 0, 1, 0, 0, 0, 7, 0, 1, 1, 0, 3]), bool).reshape(1, 16)
    y = np.zeros((1, 16), bool)
    b.compile()(x.view(np.uint8), y.view(np.uint8))
    assert np.array_equal(y, ~x)


@pytest.mark.parametrize("t", ["f8_e4m3", "f8_e5m2"])
def test_fp8_matrix_binary_and_scale(rng, t):
    dt = NP[t]
    x = (rng.standard_normal((3, 16)) * 2).astype(dt)
    y = (rng.standard_normal((3, 16)) * 2).astype(dt)
    b = KernelBuilder(f"fp8_binary_{t}")
    X, Y, Z = b.param("X", f"ptr<{t}>"), b.param("Y", f"ptr<{t}>"), b.param("Z", f"ptr<{t}>")
    mx = b.load(mat(t, 3, 16), X, strides=(16, 1))
    my = b.load(mat(t, 3, 16), Y, strides=(16, 1))
    b.store(b.scale(b.matrix_binary("mul", mx, my), 0.375), Z, strides=(16, 1))
    z = np.zeros_like(x)
    b.compile()(x, y, z)
    f32 = np.float32
    _same_bits(z, ((x.astype(f32) * y.astype(f32)).astype(dt).astype(f32) * f32(0.375)).astype(dt))
