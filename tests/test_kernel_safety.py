"""KernelBuilder misuse, each scenario in its own process so that a crash (abort, segfault, a hang)
is a test failure and not a dead test run (issue 12, items 1 to 3).

Every scenario prints "OK" after its assertions; the test checks the exit code, that line and
the error message. References are NumPy in float64 and the seeds' pseudo-code for checked
accesses (000 / 001: an element is read or written when 0 <= row < rows and 0 <= col < cols).
"""
import os
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import sys, numpy as np, coopjit
from coopjit.ir import KernelBuilder

def expect(exc, fn, *needles):
    try:
        fn()
    except exc as e:
        msg = str(e)
        for n in needles:
            assert n in msg, (n, msg)
        print("MESSAGE:", msg)
        return msg
    raise AssertionError(f"no {exc.__name__} raised")

S = 16  # the subgroup size of device kernels (device_code sets the device's)

def softmax_kernel(device=None):
    b = KernelBuilder("softmax", S if device else 16)
    X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
    t = "coopmatrix<f32, 8, 24, acc, subgroup>"
    x = b.load(t, X, strides=(24, 1))
    e = b.per_element(x, lambda b, r, c, v, m: b.exp(b.sub(v, m)), extras=[b.reduce(x, "row", t, "max")])
    b.store(b.per_element(e, lambda b, r, c, v, s: b.div(v, s), extras=[b.reduce(e, "row", t, "add")]), Y,
            strides=(24, 1))
    return b.compile(device)

def softmax_ref(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
"""


def run(code: str, timeout: float = 180, **env) -> str:
    """Runs PRELUDE + code in a fresh interpreter (with `env` added to the environment); returns
    its stdout after checking that it exited normally and printed OK (a crash, a signal or a
    time-out fails the test)."""
    try:
        r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        pytest.fail(f"the scenario did not finish in {timeout} s (a hang)")
    assert r.returncode == 0, f"exit code {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
    assert r.stdout.rstrip().endswith("OK"), r.stdout + r.stderr[-4000:]
    return r.stdout


def device_or_skip():
    from device_support import needs_device

    return needs_device()


def device_code(code: str) -> str:
    """A device scenario: DEVICE ($COOPJIT_TEST_DEVICE, opencl:0 by default), S (its subgroup size
    for kernels written for 16: device_support.lanes) and device_empty (shared memory the kernel
    uses in place where the host reaches the device's memory, else host memory copied in and out,
    CUDA) set before the code."""
    from device_support import DEVICE, host_visible, lanes

    return (f"DEVICE = {DEVICE!r}\nS = {lanes(16)}\nHOST_VISIBLE = {host_visible()}\n"
            "def device_empty(shape, dtype):\n"
            "    return coopjit.empty(shape, dtype, device=DEVICE) if HOST_VISIBLE else np.empty(shape, dtype)\n"
            + textwrap.dedent(code))


# ---- item 1: array sizes, writeability, contiguity (CPU) -------------------------------------------
@pytest.mark.parametrize("shape", [(8, 8), (2, 2), (1,), (0,), (8, 23), (191,)])
def test_output_too_small_is_a_value_error(shape):
    out = run(f"""
        k = softmax_kernel()
        x = np.random.default_rng(0).standard_normal((8, 24)).astype(np.float32)
        y = np.zeros({shape!r}, np.float32)
        expect(ValueError, lambda: k(x, y), "softmax: argument 1 (Y)", "too small", "192 elements", "shape (8, 24)",
               "got shape {str(tuple(shape))}")
        assert not y.any()      # nothing written
        y = np.zeros((8, 24), np.float32)
        k(x, y)                 # the right size still runs, and right
        assert np.allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-6)
        print("OK")
    """)
    assert "writes elements 0 to 191" in out


@pytest.mark.parametrize("shape", [(8, 8), (2, 2), (1,), (0,)])
def test_input_too_small_is_a_value_error(shape):
    run(f"""
        k = softmax_kernel()
        x = np.ones({shape!r}, np.float32)
        y = np.zeros((8, 24), np.float32)
        expect(ValueError, lambda: k(x, y), "argument 0 (X)", "reads elements 0 to 191", "got shape {str(tuple(shape))}")
        assert not y.any()
        print("OK")
    """)


def test_read_only_memmap_output_is_a_value_error(tmp_path):
    path = str(tmp_path / "y.bin")
    run(f"""
        np.zeros((8, 24), np.float32).tofile({path!r})
        y = np.memmap({path!r}, np.float32, mode="r", shape=(8, 24))
        x = np.random.default_rng(1).standard_normal((8, 24)).astype(np.float32)
        k = softmax_kernel()
        expect(ValueError, lambda: k(x, y), "argument 1 (Y)", "written by the kernel", "read-only", "(8, 24)")
        # a read-only input is fine: it is only read
        x.flags.writeable = False
        out = np.zeros((8, 24), np.float32)
        k(x, out)
        assert np.allclose(out, softmax_ref(x), rtol=1e-5, atol=1e-6)
        print("OK")
    """)


def test_non_contiguous_arrays_are_read_and_written_in_c_order():
    run("""
        rng = np.random.default_rng(2)
        k = softmax_kernel()
        big = rng.standard_normal((8, 48)).astype(np.float32)
        x = big[:, ::2]                         # 8 x 24, not contiguous
        ybig = np.full((16, 24), 5.0, np.float32)
        y = ybig[::2]                           # 8 x 24, every other row
        k(x, y)
        assert np.allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-6)
        assert (ybig[1::2] == 5.0).all()        # the rows between are untouched
        assert np.array_equal(big, big.copy())  # the input is unchanged
        xt = np.ascontiguousarray(rng.standard_normal((24, 8)).astype(np.float32)).T   # Fortran order
        y2 = np.zeros((8, 24), np.float32)
        k(xt, y2)
        assert np.allclose(y2, softmax_ref(xt), rtol=1e-5, atol=1e-6)
        xn = rng.standard_normal(8 * 24).astype(np.float32)[::-1]   # negative stride
        k(xn, y2)
        assert np.allclose(y2, softmax_ref(xn.reshape(8, 24)), rtol=1e-5, atol=1e-6)
        # the same non-contiguous array as input and output: one copy, written back
        z = ybig.copy()[::2]
        z[...] = x
        k(z, z)
        assert np.allclose(z, softmax_ref(x), rtol=1e-5, atol=1e-6)
        print("OK")
    """)


def test_overlapping_non_contiguous_output_is_refused():
    run("""
        k = softmax_kernel()
        base = np.zeros((16, 48), np.float32)
        x = base[:8, :24]                  # non-contiguous (row stride 48)
        y = base[:8, ::2]                  # overlaps x, written
        expect(ValueError, lambda: k(x, y), "overlaps")
        print("OK")
    """)


def test_element_size_and_byte_order_are_checked():
    run("""
        k = softmax_kernel()
        y = np.zeros((8, 24), np.float32)
        expect(TypeError, lambda: k(np.zeros((8, 24), np.float64), y), "argument 0 (X)", "8-byte")
        expect(TypeError, lambda: k(np.zeros((8, 24), ">f4"), y), "argument 0 (X)", "byte order")
        b = KernelBuilder("copy64")
        X, Y = b.param("X", "ptr<f64>"), b.param("Y", "ptr<f64>")
        b.store(b.load("coopmatrix<f64, 1, 8, acc, subgroup>", X, strides=(8, 1)), Y, strides=(8, 1))
        k64 = b.compile()
        objs = np.array([object()] * 8)
        expect(TypeError, lambda: k64(np.ones(8), objs), "argument 1 (Y)", "Python objects")
        ok = np.zeros(8)
        k64(np.arange(8.0), ok)
        assert np.array_equal(ok, np.arange(8.0))
        print("OK")
    """)


def test_extents_that_depend_on_scalar_arguments():
    # rows n (an index parameter) of 16 columns, 4 rows per step: the rows touched follow n
    run("""
        b = KernelBuilder("scale_rows")
        X, Y, n = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>"), b.param("n", "index")
        t = "coopmatrix<f32, 4, 16, acc, subgroup>"
        def body(b, i):
            m = b.load(t, X, row=i, strides=(16, 1))
            b.store(b.scale(m, 2.0), Y, row=i, strides=(16, 1))
        b.for_range(0, n, 4, body=body)
        k = b.compile()
        x = np.arange(12 * 16, dtype=np.float32).reshape(12, 16)
        y = np.zeros((12, 16), np.float32)
        k(x, y, 12)
        assert np.array_equal(y, 2 * x)
        y[:] = 0
        k(x, y, 8)            # rows 0..7 only
        assert np.array_equal(y[:8], 2 * x[:8]) and not y[8:].any()
        expect(ValueError, lambda: k(x, y, 16), "argument 0 (X)", "elements 0 to 255", "got shape (12, 16)")
        expect(ValueError, lambda: k(x[:8], y, 12), "argument 0 (X)", "got shape (8, 16)")
        expect(ValueError, lambda: k(x, y, 13), "elements 0 to 255")    # i = 12 reads rows 12..15
        k(x, y, 0)            # no iteration: nothing touched
        expect(TypeError, lambda: k(x, y, "12"), "argument 2 (n)", "must be an int")
        expect(TypeError, lambda: k(x, y, 2.5), "argument 2 (n)", "must be an int")
        expect(TypeError, lambda: k(x, 3, 12), "argument 1 (Y)", "must be a NumPy array")
        print("OK")
    """)


def test_unchecked_negative_position_is_refused():
    run("""
        b = KernelBuilder("neg")
        X, O = b.param("X", "ptr<f32>"), b.param("O", "ptr<f32>")
        m = b.load("coopmatrix<f32, 4, 16, acc, subgroup>", X, row=-1, col=-1, strides=(16, 1))
        b.store(m, O, strides=(16, 1))
        k = b.compile()
        big = np.full(128, 777, np.float32)
        expect(ValueError, lambda: k(big[64:], np.zeros((4, 16), np.float32)), "argument 0 (X)", "-17",
               "before its first element")
        print("OK")
    """)


def test_data_dependent_position_needs_a_checked_access():
    run("""
        t = "coopmatrix<f32, 4, 16, acc, subgroup>"
        ti = "coopmatrix<i32, 1, 16, acc, subgroup>"
        def build(checked):
            b = KernelBuilder("gather_rows")
            X, P, O = b.param("X", "ptr<f32>"), b.param("P", "ptr<i32>"), b.param("O", "ptr<f32>")
            p = b.load(ti, P, strides=(16, 1))
            row = b.convert(b.get(p, 0), "index")       # a position read from memory
            m = b.load(t, X, row=row, strides=(16, 1), bounds=(8, 16), checked=checked)
            b.store(m, O, strides=(16, 1))
            return b.compile()
        expect(ValueError, lambda: build(False), "depends on data", "checked=True")
        k = build(True)
        x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) + 1
        for start in (0, 2, 6, 7, -2, 100):
            p = np.full(16, start, np.int32)
            o = np.full((4, 16), -1, np.float32)
            k(x, p, o)
            ref = np.zeros((4, 16))
            for i in range(4):
                if 0 <= start + i < 8:
                    ref[i] = x[start + i]
            assert np.array_equal(o, ref), (start, o)
        expect(ValueError, lambda: k(x[:7], np.zeros(16, np.int32), o), "argument 0 (X)", "0 to 127")
        print("OK")
    """)


# ---- item 2: checked accesses at negative positions (CPU) ----------------------------------------------
CHECKED_NEGATIVE = """
def checked_ref(x, row, col, rows, cols, R, C, sr):
    # 000 / 001: element (i, j) is x[(row + i) * sr + col + j] when 0 <= row + i < rows and
    # 0 <= col + j < cols, else 0
    out = np.zeros((R, C))
    for i in range(R):
        for j in range(C):
            r, c = row + i, col + j
            if 0 <= r < rows and 0 <= c < cols:
                out[i, j] = x[r * sr + c]
    return out

def load_kernel(row, col, device=None):
    b = KernelBuilder("n", S if device else 16)
    X, O = b.param("X", "ptr<f32>"), b.param("O", "ptr<f32>")
    m = b.load("coopmatrix<f32, 4, 16, acc, subgroup>", X, row=row, col=col, strides=(16, 1), bounds=(4, 16), checked=True)
    b.store(m, O, strides=(16, 1))
    return b.compile(device)

def store_kernel(row, col, device=None):
    b = KernelBuilder("s", S if device else 16)
    X, O = b.param("X", "ptr<f32>"), b.param("O", "ptr<f32>")
    m = b.load("coopmatrix<f32, 4, 16, acc, subgroup>", X, strides=(16, 1))
    b.store(m, O, row=row, col=col, strides=(16, 1), bounds=(4, 16), checked=True)
    return b.compile(device)

def check_all(device=None):
    for row, col in [(-1, -1), (-3, 0), (0, -5), (-4, -16), (-1, 3), (2, -1)]:
        big = np.full(128, 777, np.float32)
        x = big[64:]
        x[:] = np.arange(1, 65)
        o = np.zeros((4, 16), np.float32)
        load_kernel(row, col, device)(x, o)
        assert np.array_equal(o, checked_ref(x, row, col, 4, 16, 4, 16, 16)), (row, col, o)
        # the store: element (i, j) of the matrix goes to (row + i, col + j) when inside the bounds
        src = np.arange(1, 65, dtype=np.float32).reshape(4, 16)
        big = np.full(128, 777, np.float32)
        out = big[64:]
        out[:] = 0
        store_kernel(row, col, device)(src, out)
        ref = np.zeros((4, 16))
        for i in range(4):
            for j in range(16):
                r, c = row + i, col + j
                if 0 <= r < 4 and 0 <= c < 16:
                    ref[r, c] = src[i, j]
        assert (big[:64] == 777).all(), ("written before the tensor", row, col)
        assert np.array_equal(out.reshape(4, 16), ref), (row, col, out.reshape(4, 16))
"""


@pytest.mark.parametrize("level", [None, "avx2", "sse"])
def test_checked_access_at_negative_positions_cpu(level):
    env = {"COOPJIT_CPU_LEVEL": level} if level else {}
    run(CHECKED_NEGATIVE + """
check_all()
# the issue's reproducer: o[0, :] and o[:, 0] are 0
x = np.full(128, 777, np.float32)[64:]; x[:] = np.arange(1, 65)
o = np.zeros((4, 16), np.float32)
load_kernel(-1, -1)(x, o)
assert not o[0].any() and not o[:, 0].any() and np.array_equal(o[1:, 1:], x.reshape(4, 16)[:3, :15])
print("OK")
""", **env)


@pytest.mark.parametrize("level", [None, "avx2"])
def test_checked_access_at_negative_positions_strided_cpu(level):
    # column stride 2 (gathers / scatters), a matrix_a held as scalars, and a matrix held in
    # memory (more than 64 vectors): the other code paths of the lowering
    env = {"COOPJIT_CPU_LEVEL": level} if level else {}
    run("""
for row, col in [(-1, -1), (0, -3), (-2, 1)]:
    b = KernelBuilder("g", 16)
    X, O = b.param("X", "ptr<f32>"), b.param("O", "ptr<f32>")
    m = b.load("coopmatrix<f32, 4, 16, acc, subgroup>", X, row=row, col=col, strides=(32, 2), bounds=(4, 16), checked=True)
    b.store(m, O, strides=(16, 1))
    k = b.compile()
    big = np.full(256, 777, np.float32)
    x = big[128:]
    x[:] = np.arange(1, 129)
    o = np.zeros((4, 16), np.float32)
    k(x, o)
    ref = np.zeros((4, 16))
    for i in range(4):
        for j in range(16):
            r, c = row + i, col + j
            if 0 <= r < 4 and 0 <= c < 16:
                ref[i, j] = x[r * 32 + c * 2]
    assert np.array_equal(o, ref), (row, col, o)
for row, col in [(-1, -1), (1, -2)]:   # a matrix_a (held as scalars in the SIMD lowering)
    b = KernelBuilder("a", 16)
    X, O = b.param("X", "ptr<f32>"), b.param("O", "ptr<f32>")
    m = b.load("coopmatrix<f32, 4, 8, a, subgroup>", X, row=row, col=col, strides=(8, 1), bounds=(4, 8), checked=True)
    b.store(m, O, row=row, col=col, strides=(8, 1), bounds=(4, 8), checked=True)
    k = b.compile()
    big = np.full(64, 777, np.float32)
    x = big[32:]
    x[:] = np.arange(1, 33)
    obig = np.full(64, 777, np.float32)
    o = obig[32:]
    o[:] = 0
    k(x, o)
    ref = np.zeros(32)
    for i in range(4):
        for j in range(8):
            r, c = row + i, col + j
            if 0 <= r < 4 and 0 <= c < 8:
                ref[r * 8 + c] = x[r * 8 + c]
    assert np.array_equal(o, ref), (row, col, o)
    assert (obig[:32] == 777).all()
for row, col in [(-1, -1), (-3, 5)]:   # 80 x 64: held in memory, walked by a row loop
    b = KernelBuilder("m", 16)
    X, O = b.param("X", "ptr<f32>"), b.param("O", "ptr<f32>")
    m = b.load("coopmatrix<f32, 80, 64, acc, subgroup>", X, row=row, col=col, strides=(64, 1), bounds=(80, 64), checked=True)
    b.store(m, O, row=row, col=col, strides=(64, 1), bounds=(80, 64), checked=True)
    k = b.compile()
    big = np.full(2 * 80 * 64, 777, np.float32)
    x = big[80 * 64:]
    x[:] = np.arange(1, 80 * 64 + 1)
    obig = np.full(2 * 80 * 64, 777, np.float32)
    o = obig[80 * 64:]
    o[:] = 0
    k(x, o)
    ref = np.zeros((80, 64))
    xr = x.reshape(80, 64)
    rs, cs = slice(max(row, 0), row + 80), slice(max(col, 0), col + 64)   # the elements the matrix covers
    ref[rs, cs] = xr[rs, cs]
    assert np.array_equal(o.reshape(80, 64), ref), (row, col)
    assert (obig[:80 * 64] == 777).all()
print("OK")
""", **env)


# ---- item 3: sizes that would not finish ---------------------------------------------------------------------
def test_huge_register_matrix_mul_add_is_refused_quickly():
    out = run("""
        import time
        def build(M, N, K, device=None):
            b = KernelBuilder("big")
            A, B, C = b.param("A", "ptr<f32>"), b.param("B", "ptr<f32>"), b.param("C", "ptr<f32>")
            a = b.load(f"coopmatrix<f32, {M}, {K}, a, subgroup>", A, strides=(K, 1))
            bb = b.load(f"coopmatrix<f32, {K}, {N}, b, subgroup>", B, strides=(N, 1))
            c = b.load(f"coopmatrix<f32, {M}, {N}, acc, subgroup>", C, strides=(N, 1))
            b.store(b.mul_add(a, bb, c), C, strides=(N, 1))
            return b.compile(device)
        t0 = time.time()
        expect(ValueError, lambda: build(1024, 1024, 1024), "1024 x 1024 = 1048576 elements", "size limit", "16384")
        expect(ValueError, lambda: build(1024, 1024, 128), "1024 x 128 = 131072 elements", "size limit")
        expect(ValueError, lambda: build(64, 128, 128), "64 x 128 x 128", "1048576 multiply-adds", "262144")
        assert time.time() - t0 < 30, time.time() - t0
        # within the limits: compiles and computes (NumPy in float64)
        k = build(16, 64, 32)
        rng = np.random.default_rng(5)
        a, bm, c = (rng.standard_normal(s).astype(np.float32) for s in [(16, 32), (32, 64), (16, 64)])
        ref = a.astype(np.float64) @ bm + c
        k(a, bm, c)
        assert np.allclose(c, ref, rtol=1e-4, atol=1e-4)
        print("OK")
    """, timeout=120)
    assert "MESSAGE" in out


def test_huge_register_matrix_functions_are_refused_quickly():
    run("""
        import time
        t = "coopmatrix<f32, 128, 128, acc, subgroup>"
        def build(what):
            b = KernelBuilder("pe")
            A = b.param("A", "ptr<f32>")
            m = b.load(t, A, strides=(128, 1))
            if what == "per_element":
                m = b.per_element(m, lambda b, r, c, v: b.exp(v))
            elif what == "reduce":
                m = b.reduce(m, "row", t, "max")
            else:
                m = b.scale(b.load("coopmatrix<f32, 256, 256, acc, subgroup>", A, strides=(256, 1)), 2.0)
                m = None
            if m is not None:
                b.store(m, A, strides=(128, 1))
            return b.compile()
        t0 = time.time()
        expect(ValueError, lambda: build("per_element"), "128 x 128 = 16384 elements", "size limit", "4096")
        expect(ValueError, lambda: build("reduce"), "128 x 128 = 16384 elements", "4096")
        expect(ValueError, lambda: build("scale"), "256 x 256 = 65536 elements", "16384")
        assert time.time() - t0 < 30
        # big matrices are fine for loads and stores (walked with loops)
        b = KernelBuilder("copy")
        A, B = b.param("A", "ptr<f32>"), b.param("B", "ptr<f32>")
        b.store(b.load("coopmatrix<f32, 1024, 1024, acc, subgroup>", A, strides=(1024, 1)), B, strides=(1024, 1))
        k = b.compile()
        x = np.random.default_rng(6).standard_normal((1024, 1024)).astype(np.float32)
        y = np.zeros_like(x)
        k(x, y)
        assert np.array_equal(x, y)
        print("OK")
    """, timeout=120)


# ---- devices (opencl:0, or $COOPJIT_TEST_DEVICE) ---------------------------------------------------------------------
def test_device_output_too_small_and_read_only():
    device_or_skip()
    run(device_code("""
        k = softmax_kernel(DEVICE)
        x = np.random.default_rng(3).standard_normal((8, 24)).astype(np.float32)
        for shape in [(8, 8), (1,), (0,)]:
            y = np.zeros(shape, np.float32)
            expect(ValueError, lambda: k(x, y), "argument 1 (Y)", "too small", "192 elements", f"got shape {shape}")
        y = device_empty((4, 24), np.float32)   # device memory, too small
        expect(ValueError, lambda: k(x, y), "argument 1 (Y)", "got shape (4, 24)")
        ro = np.zeros((8, 24), np.float32)
        ro.flags.writeable = False
        expect(ValueError, lambda: k(x, ro), "argument 1 (Y)", "read-only")
        y = np.zeros((8, 24), np.float32)
        k(x, y)
        assert np.allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-6)
        # device memory, not contiguous: read and written through a C-order copy
        yd = device_empty((8, 48), np.float32)
        yd[...] = 3.0
        k(x, yd[:, ::2])
        assert np.allclose(yd[:, ::2], softmax_ref(x), rtol=1e-5, atol=1e-6) and (yd[:, 1::2] == 3.0).all()
        print("OK")
    """), timeout=300)


def test_device_extents_follow_groups():
    device_or_skip()
    run(device_code("""
        # each work-group copies its own 16-row slab: the rows touched follow groups
        b = KernelBuilder("slabs", S)
        X, Y = b.param("X", "ptr<f32>"), b.param("Y", "ptr<f32>")
        g = b.mul(b.work_id("group"), 16)
        t = "coopmatrix<f32, 16, 16, acc, subgroup>"
        b.store(b.scale(b.load(t, X, row=g, strides=(16, 1)), 3.0), Y, row=g, strides=(16, 1))
        k = b.compile(DEVICE)
        x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
        y = np.zeros((64, 16), np.float32)
        k(x, y, groups=4)
        assert np.array_equal(y, 3 * x)
        expect(ValueError, lambda: k(x, y, groups=5), "argument 0 (X)", "0 to 1279", "got shape (64, 16)")
        expect(ValueError, lambda: k(x, y[:32], groups=4), "argument 1 (Y)", "got shape (32, 16)")
        expect(ValueError, lambda: k(x, y, groups=-1), "groups=-1")
        print("OK")
    """), timeout=300)


def test_device_huge_launch_is_refused_quickly():
    device_or_skip()
    run(device_code("""
        import time
        b = KernelBuilder("tiny", S)
        X = b.param("X", "ptr<f32>")
        t = "coopmatrix<f32, 1, 16, acc, subgroup>"
        b.store(b.splat(t, 1.0), X, strides=(16, 1))
        k = b.compile(DEVICE)
        x = np.zeros(16, np.float32)
        t0 = time.time()
        expect(ValueError, lambda: k(x, groups=2**40), "groups=1099511627776", "launch limit", "4294967295")
        assert time.time() - t0 < 10
        k(x, groups=3)
        assert (x == 1).all()
        print("OK")
    """), timeout=300)


def test_checked_access_at_negative_positions_device():
    device_or_skip()
    run(device_code(CHECKED_NEGATIVE + """
check_all(DEVICE)
print("OK")
"""), timeout=400)


def test_extents_of_accumulate_vectors_and_branches():
    run("""
        # accumulate adds only the elements inside its bounds: the bounds give its extent
        b = KernelBuilder("acc")
        X, O = b.param("X", "ptr<f32>"), b.param("O", "ptr<f32>")
        m = b.load("coopmatrix<f32, 4, 16, acc, subgroup>", X, strides=(16, 1))
        b.accumulate(m, O, row=-2, col=0, strides=(16, 1), bounds=(3, 16))
        k = b.compile()
        assert [(e["lo"], e["hi"], e["written"]) for e in k._fn.extents()] == [(0, 63, False), (0, 31, True)]
        x = np.arange(64, dtype=np.float32).reshape(4, 16)
        o = np.ones((2, 16), np.float32)
        k(x, o)                 # rows 2 and 3 of the matrix land on rows 0 and 1
        assert np.array_equal(o, 1 + x[2:])
        expect(ValueError, lambda: k(x, np.ones((1, 16), np.float32)), "argument 1 (O)", "0 to 31", "got shape (1, 16)")
        # vectors: offset + k * stride, k < n
        b = KernelBuilder("vec")
        X, O, off = b.param("X", "ptr<f32>"), b.param("O", "ptr<f32>"), b.param("off", "index")
        v = b.vector_load("vector<f32, 8>", X, offset=off, stride=3)
        b.vector_store(v, O, offset=0, stride=1)
        k = b.compile()
        x = np.arange(40, dtype=np.float32)
        o = np.zeros(8, np.float32)
        k(x, o, 2)              # reads 2, 5, ..., 23
        assert np.array_equal(o, x[2:26:3])
        expect(ValueError, lambda: k(x, o, 20), "argument 0 (X)", "elements 20 to 41", "got shape (40,)")
        expect(ValueError, lambda: k(x, o, -1), "argument 0 (X)", "before its first element")
        expect(ValueError, lambda: k(x, o[:7], 0), "argument 1 (O)", "0 to 7")
        # both arms of a branch count; a loop bound by a parameter nested in another
        b = KernelBuilder("nest")
        X, n, flag = b.param("X", "ptr<f32>"), b.param("n", "index"), b.param("flag", "index")
        t = "coopmatrix<f32, 1, 16, acc, subgroup>"
        def outer(b, i):
            def inner(b, j):
                r = b.add(b.mul(i, 2), j)
                b.if_(b.eq(flag, 1), lambda b: b.store(b.splat(t, 1.0), X, row=r, strides=(16, 1)),
                      lambda b: b.store(b.splat(t, 2.0), X, row=b.add(r, 1), strides=(16, 1)))
            b.for_range(0, 2, 1, body=inner)
        b.for_range(0, n, 1, body=outer)
        k = b.compile()
        x = np.zeros((8, 16), np.float32)
        k(x, 3, 1)              # rows up to 2 * 2 + 1 (+ 1 in the other arm): 7 rows
        assert (x[:6] == 1).all() and not x[6:].any()
        expect(ValueError, lambda: k(x, 4, 1), "argument 0 (X)", "0 to 143", "got shape (8, 16)")
        print("OK")
    """)


def test_constant_extents_are_computed_once():
    # the softmax's extents depend on nothing at the call: they are derived at compile time
    run("""
        k = softmax_kernel()
        assert [(e["bounded"], e["lo"], e["hi"], e["read"], e["written"]) for e in k._fn.extents()] == \\
            [(True, 0, 191, True, False), (True, 0, 191, False, True)]
        print("OK")
    """)


def test_device_non_contiguous_and_aliased_arrays():
    device_or_skip()
    run(device_code("""
        k = softmax_kernel(DEVICE)
        rng = np.random.default_rng(7)
        big = rng.standard_normal((8, 48)).astype(np.float32)
        x = big[:, ::2]
        y = np.zeros((16, 24), np.float32)[::2]
        k(x, y)
        assert np.allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-6)
        z = device_empty((8, 24), np.float32)
        z[...] = x
        k(z, z)                  # in place, one array for both
        assert np.allclose(z, softmax_ref(x), rtol=1e-5, atol=1e-6)
        w = np.zeros((16, 24), np.float32)[::2]
        w[...] = x
        k(w, w)                  # one copy for both, written back
        assert np.allclose(w, softmax_ref(x), rtol=1e-5, atol=1e-6)
        print("OK")
    """), timeout=300)


def test_loop_step_below_one_is_refused():
    # loops run while the counter is below the upper bound: step 0 (or negative) never ends
    run("""
        def build(step_param):
            b = KernelBuilder("steps")
            X, s = b.param("X", "ptr<f32>"), b.param("s", "index")
            t = "coopmatrix<f32, 1, 16, acc, subgroup>"
            b.for_range(0, 4, s if step_param else 0,
                        body=lambda b, i: b.store(b.splat(t, 1.0), X, strides=(16, 1)))
            return b.compile()
        expect(ValueError, lambda: build(False), "step 0", "never end")
        k = build(True)
        x = np.zeros(16, np.float32)
        expect(ValueError, lambda: k(x, 0), "step 0", "never end")
        expect(ValueError, lambda: k(x, -2), "step -2")
        k(x, 2)
        assert (x == 1).all()
        print("OK")
    """, timeout=60)
