"""Tests of coopjit.layout against the coopmatrix layout document (seeds/001): its two tables,
the shape rules, VNNI, the matrix_b K1 rule, a bijection sweep, an independent re-implementation
of the document's formulas, dtype names and bad input."""

import itertools
import re

import numpy as np
import pytest

from coopjit.layout import DTYPES, CoopMatrixLayout, LayoutError, coopmatrix, dtype_name

# Component sizes in bytes, written out independently of the module.
SIZES = {"i8": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4, "i64": 8, "u64": 8,
         "f16": 2, "bf16": 2, "f32": 4, "f64": 8, "f8_e4m3": 1, "f8_e5m2": 1}
ONE_PER_SIZE = ("f8_e5m2", "f16", "i32", "u64")  # the layout depends on the size only
USES = ("a", "b", "acc")
POW2_ROWS = (1, 2, 4, 8, 16, 32, 64, 128)


# ---- The document's two tables, transcribed by hand: one line per component v. ----

TABLE_4x15 = """
0,0  1,0  2,0  3,0  0,1  1,1  2,1  3,1  0,2  1,2  2,2  3,2  0,3  1,3  2,3  3,3
0,4  1,4  2,4  3,4  0,5  1,5  2,5  3,5  0,6  1,6  2,6  3,6  0,7  1,7  2,7  3,7
0,8  1,8  2,8  3,8  0,9  1,9  2,9  3,9  0,10 1,10 2,10 3,10 0,11 1,11 2,11 3,11
0,12 1,12 2,12 3,12 0,13 1,13 2,13 3,13 0,14 1,14 2,14 3,14 -,-  -,-  -,-  -,-
"""

TABLE_1x17 = """
0,0  0,1  0,2  0,3  0,4  0,5  0,6  0,7  0,8  0,9  0,10 0,11 0,12 0,13 0,14 0,15
0,16 -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-
"""


def parse_table(text):
    """The transcribed table as an array of shape (V, 16, 2), (-1, -1) for '-,-'."""
    rows = []
    for line in text.strip().splitlines():
        rows.append([(-1, -1) if tok == "-,-" else tuple(map(int, tok.split(",")))
                     for tok in line.split()])
    return np.array(rows)


@pytest.mark.parametrize("use", USES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_document_tables(use, dtype):
    # 15 and 17 are odd (never VNNI) and M < S (K1 = 1): the tables hold for every use and type.
    for rows, cols, text in ((4, 15, TABLE_4x15), (1, 17, TABLE_1x17)):
        expected = parse_table(text)
        assert expected.shape == (4 if rows == 4 else 2, 16, 2)
        cm = coopmatrix(rows, cols, use, dtype, 16)
        table = cm.table()
        assert table.shape == expected.shape
        for v, p in itertools.product(range(expected.shape[0]), range(16)):
            assert tuple(table[v, p]) == tuple(expected[v, p]), (rows, cols, v, p)
            want = None if expected[v, p, 0] < 0 else tuple(expected[v, p])
            assert cm.element(p, v) == want
            if want is not None:
                assert cm.owner(*want) == (p, v)


def test_document_shapes_and_repr():
    cm = coopmatrix(4, 15, "acc", "f32", 16)
    shape = (cm.I, cm.J, cm.K, cm.K1, cm.K2, cm.V, cm.omega, cm.vnni)
    assert shape == (4, 16, 1, 1, 1, 4, 1, False)
    assert repr(cm) == ("coopmatrix(rows=4, cols=15, use='acc', dtype='f32', S=16: "
                        "I=4 J=16 K=1 K1=1 K2=1 V=4 omega=1 vnni=False)")
    cm = coopmatrix(1, 17, "acc", np.float32, 16)
    assert (cm.I, cm.J, cm.K, cm.V) == (1, 32, 1, 2)
    args = (cm.rows, cm.cols, cm.use, cm.dtype, cm.subgroup_size, cm.S)
    assert args == (1, 17, "acc", "f32", 16, 16)
    assert cm.table().dtype.kind == "i"


# ---- An independent re-implementation of the document. ----

def ref_shape(M, N, use, size, S):
    """(I, J, K1, K2, omega, vnni) from the document's definitions."""
    I = min(M, S)
    J = next(n for n in itertools.count(N) if (I * n) % S == 0)  # least n >= N, I*n % S == 0
    K = M // I
    K1 = max(1, 2 // size) if use == "b" and M // S > 1 else 1  # matrix_b: omega_b if M/S > 1
    omega = max(1, 4 // size) if use == "a" else 1
    vnni = use == "a" and omega > 1 and N % omega == 0  # low-precision matrix_a, N % omega == 0
    return I, J, K1, K // K1, omega, vnni


def ref_table(M, N, use, size, S):
    """The table built forward from the document: A*[i,k1,j,k2] = A[i + k1*I + k2*I*K1, j] (zero
    unless that is in range), stored at L = i + k1*I + j*I*K1 + k2*I*K1*J, and lane p holds
    component v = entry L = p + v*S. VNNI: the entries of A**[c,i,k1,j,k2] = A*[i,k1,c+j*omega,k2]
    with j < ceil(J/omega) are distributed the same way, omega channels each."""
    I, J, K1, K2, omega, vnni = ref_shape(M, N, use, size, S)
    Jd = -(-J // omega) if vnni else J
    ch = omega if vnni else 1
    V = -(-(I * K1 * Jd * K2) // S)
    out = np.full((V * S, ch, 2), -1, dtype=np.int64)
    i, k1, j, k2 = np.meshgrid(np.arange(I), np.arange(K1), np.arange(Jd), np.arange(K2),
                               indexing="ij")
    L = i + k1 * I + j * I * K1 + k2 * I * K1 * Jd
    row = i + k1 * I + k2 * I * K1
    for c in range(ch):
        col = c + j * omega if vnni else j
        ok = (row < M) & (col < N)
        out[L[ok], c, 0] = row[ok]
        out[L[ok], c, 1] = col[ok]
    out = out.reshape(V, S, ch, 2)
    return out if vnni else out[:, :, 0, :]


def check_bijection(cm):
    """Every in-range element is in exactly one slot; all other slots are (-1, -1)."""
    M, N = cm.rows, cm.cols
    flat = cm.table().reshape(-1, 2)
    valid = flat[:, 0] >= 0
    assert (flat[~valid] == -1).all()
    rows, cols = flat[valid, 0], flat[valid, 1]
    assert ((rows < M) & (cols >= 0) & (cols < N)).all()
    counts = np.bincount(rows * N + cols, minlength=M * N)
    assert counts.shape == (M * N,) and (counts == 1).all(), repr(cm)


@pytest.mark.parametrize("S", (8, 16, 32))
def test_sweep_against_reference(S):
    """Every power-of-two M <= 128, N = 1..70, every use and component size: the shape, the
    whole table against the re-implementation, the bijection, and owner/element on a sample."""
    rng = np.random.default_rng(S)
    for M, N, use, dtype in itertools.product(POW2_ROWS, range(1, 71), USES, ONE_PER_SIZE):
        cm = coopmatrix(M, N, use, dtype, S)
        size = SIZES[dtype]
        I, J, K1, K2, omega, vnni = ref_shape(M, N, use, size, S)
        assert (cm.I, cm.J, cm.K, cm.K1, cm.K2, cm.omega, cm.vnni) == \
            (I, J, K1 * K2, K1, K2, omega, vnni), repr(cm)
        table = cm.table()
        ref = ref_table(M, N, use, size, S)
        assert cm.V == ref.shape[0]
        assert table.shape == ref.shape and (table == ref).all(), repr(cm)
        check_bijection(cm)
        # owner/element round trip on a few elements and slots.
        for row, col in zip(rng.integers(0, M, 3), rng.integers(0, N, 3)):
            slot = cm.owner(row, col)
            assert cm.element(*slot) == (row, col)
            p, v, *c = slot
            assert tuple(table[(v, p, *c)]) == (row, col)


@pytest.mark.parametrize("M,N,use,dtype,S", [
    (4, 15, "acc", "f32", 16), (1, 17, "b", "f32", 16), (128, 5, "b", "i8", 8),
    (64, 33, "b", "f8_e4m3", 16), (32, 24, "a", "i8", 16), (2, 6, "a", "f16", 16),
    (1, 2, "a", "bf16", 32), (8, 70, "a", "u8", 32), (16, 9, "acc", "f64", 16),
])
def test_owner_element_exhaustive(M, N, use, dtype, S):
    cm = coopmatrix(M, N, use, dtype, S)
    held = set()
    for row, col in itertools.product(range(M), range(N)):
        slot = cm.owner(row, col)
        assert len(slot) == (3 if cm.vnni else 2)
        assert cm.element(*slot) == (row, col)
        held.add(slot)
    assert len(held) == M * N
    channels = range(cm.omega) if cm.vnni else [None]
    for p, v, c in itertools.product(range(S), range(cm.V), channels):
        slot = (p, v) if c is None else (p, v, c)
        e = cm.element(*slot)
        assert (e is None) == (slot not in held)


# ---- VNNI and the K1 rule. ----

@pytest.mark.parametrize("M,N,dtype,omega,vnni", [
    (16, 16, "f16", 2, True), (16, 15, "f16", 2, False), (16, 2, "bf16", 2, True),
    (16, 7, "bf16", 2, False), (16, 12, "i8", 4, True), (16, 14, "i8", 4, False),
    (16, 6, "u8", 4, False), (16, 32, "f8_e4m3", 4, True), (16, 34, "f8_e5m2", 4, False),
    (1, 4, "i8", 4, True), (16, 16, "f32", 1, False), (16, 16, "f64", 1, False),
])
def test_vnni_matrix_a(M, N, dtype, omega, vnni):
    # 14 and 6 are even but not multiples of omega = 4: the condition uses the real omega.
    cm = coopmatrix(M, N, "a", dtype, 16)
    assert (cm.omega, cm.vnni, cm.K1) == (omega, vnni, 1)
    shape = cm.table().shape
    if vnni:
        assert shape == (cm.V, 16, omega, 2)
        assert cm.V == -(-M * (-(-cm.J // omega)) // 16)
        assert len(cm.owner(M - 1, N - 1)) == 3
    else:
        assert shape == (cm.V, 16, 2)
        assert cm.V * 16 == M * cm.J
        assert len(cm.owner(M - 1, N - 1)) == 2


@pytest.mark.parametrize("use", ("acc", "b"))
@pytest.mark.parametrize("dtype", DTYPES)
def test_no_vnni_for_acc_and_b(use, dtype):
    cm = coopmatrix(16, 16, use, dtype, 16)
    assert not cm.vnni and cm.omega == 1 and cm.table().shape == (cm.V, 16, 2)


def test_vnni_slots():
    # 16x4 f16: entry v of lane p packs row p, columns 2v (channel 0) and 2v + 1 (channel 1).
    cm = coopmatrix(16, 4, "a", "f16", 16)
    assert (cm.V, cm.J) == (2, 4)
    table = cm.table()
    for p, v, c in itertools.product(range(16), range(2), range(2)):
        assert tuple(table[v, p, c]) == (p, 2 * v + c)
        assert cm.owner(p, 2 * v + c) == (p, v, c)
    # 32x8 i8: K2 = 2; entry v = j' + 2*k2 of lane p packs row p + 16*k2, columns 4j'..4j'+3.
    cm = coopmatrix(32, 8, "a", "i8", 16)
    assert (cm.V, cm.K2) == (4, 2)
    assert cm.element(3, 3, 2) == (19, 6)
    # 1x2 f16 (I < S): J = 16, 8 entries for 16 lanes; lane 0 packs (0,0) and (0,1), rest padding.
    cm = coopmatrix(1, 2, "a", "f16", 16)
    assert cm.V == 1
    assert cm.element(0, 0, 0) == (0, 0) and cm.element(0, 0, 1) == (0, 1)
    assert all(cm.element(p, 0, c) is None for p in range(1, 16) for c in range(2))


@pytest.mark.parametrize("M,S,dtype,K1,K2", [
    (64, 16, "i8", 2, 2), (32, 16, "u8", 2, 1), (16, 16, "i8", 1, 1), (8, 16, "i8", 1, 1),
    (128, 8, "f8_e4m3", 2, 8), (64, 32, "f8_e5m2", 2, 1), (32, 32, "u8", 1, 1),
    (64, 16, "f16", 1, 4), (64, 16, "bf16", 1, 4), (64, 16, "f32", 1, 4), (64, 16, "f64", 1, 4),
])
def test_matrix_b_k1(M, S, dtype, K1, K2):
    cm = coopmatrix(M, 5, "b", dtype, S)
    assert (cm.K1, cm.K2) == (K1, K2)
    assert coopmatrix(M, 5, "a", dtype, S).K1 == 1
    assert coopmatrix(M, 5, "acc", dtype, S).K1 == 1


def test_matrix_b_k1_interleaves_row_blocks():
    # 64x3 i8 matrix_b, S = 16: I = 16, K1 = K2 = 2, J = 3: component v = w1 + 2u + 6*w2 of lane p
    # holds row p + 16*(w1 + 2*w2), column u.
    cm = coopmatrix(64, 3, "b", "i8", 16)
    assert cm.V == 12
    for p, w1, u, w2 in itertools.product(range(16), range(2), range(3), range(2)):
        assert cm.element(p, w1 + 2 * u + 6 * w2) == (p + 16 * (w1 + 2 * w2), u)


# ---- Component types. ----

def test_component_sizes():
    assert set(DTYPES) == set(SIZES)
    for name, size in SIZES.items():
        assert coopmatrix(1, 1, "acc", name, 1).component_size == size


@pytest.mark.parametrize("given,name", [
    ("f16", "f16"), ("float16", "f16"), (np.float16, "f16"), (np.dtype("float16"), "f16"),
    ("i8", "i8"), ("int8", "i8"), (np.dtype("int8"), "i8"), (np.int8, "i8"), ("u8", "u8"),
    (np.uint16, "u16"), ("int32", "i32"), (np.uint32, "u32"), (np.int64, "i64"),
    (np.uint64, "u64"), ("f4", "f32"), (np.float32, "f32"), ("float64", "f64"),
    ("bfloat16", "bf16"), ("float8_e4m3fn", "f8_e4m3"), ("float8_e5m2", "f8_e5m2"),
])
def test_dtype_names(given, name):
    assert dtype_name(given) == name
    assert coopmatrix(4, 4, "acc", given, 16).dtype == name


def test_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert dtype_name(ml_dtypes.bfloat16) == "bf16"
    assert dtype_name(np.dtype(ml_dtypes.float8_e4m3fn)) == "f8_e4m3"
    assert coopmatrix(16, 16, "a", ml_dtypes.float8_e5m2, 16).omega == 4


def test_use_names():
    assert coopmatrix(4, 4, "matrix_a", "f16", 16).use == "a"
    assert coopmatrix(4, 4, "matrix_b", "f16", 16).use == "b"
    assert coopmatrix(4, 4, "matrix_acc", "f16", 16).use == "acc"


def test_equality():
    a = coopmatrix(4, 15, "acc", "f32", 16)
    assert a == coopmatrix(4, 15, "matrix_acc", np.float32, 16)
    assert a != coopmatrix(4, 15, "a", "f32", 16)
    assert len({a, coopmatrix(4, 15, "acc", "float32", 16)}) == 1
    assert isinstance(a, CoopMatrixLayout)


# ---- Bad input: ValueError (TypeError for a wrong type) naming the value. ----

@pytest.mark.parametrize("args,message", [
    ((3, 4, "acc", "f32", 16), "rows 3 is not a power of two"),
    ((12, 4, "acc", "f32", 16), "rows 12 is not a power of two"),
    ((0, 4, "acc", "f32", 16), "rows 0"),
    ((-4, 4, "acc", "f32", 16), "rows -4"),
    ((2**40, 4, "acc", "f32", 16), "rows 1099511627776"),
    ((2**70, 4, "acc", "f32", 16), "rows 1180591620717411303424"),
    ((4, 0, "acc", "f32", 16), "cols 0"),
    ((4, -7, "acc", "f32", 16), "cols -7"),
    ((4, 4, "acc", "f32", 12), "coopmatrix: subgroup_size 12 is not a power of two"),
    ((4, 4, "acc", "f32", 0), "subgroup_size 0"),
    ((4, 4, "acc", "f32", -16), "subgroup_size -16"),
    ((4, 4, "c", "f32", 16), "use 'c'"),
    ((4, 4, "A", "f32", 16), "use 'A'"),
    ((4, 4, "", "f32", 16), "use ''"),
    ((4, 4, "acc", "f128", 16), "'f128'"),
    ((4, 4, "acc", "F32", 16), "'F32'"),
    ((4, 4, "acc", "complex64", 16), "'complex64'"),
    ((4, 4, "acc", np.complex64, 16), "complex64"),
    ((4, 4, "acc", np.bool_, 16), "bool"),
])
def test_bad_values(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        coopmatrix(*args)


def test_layout_error_is_value_error():
    assert issubclass(LayoutError, ValueError)
    with pytest.raises(LayoutError):
        coopmatrix(4, 4, "acc", "f32", 12)


@pytest.mark.parametrize("args,message", [
    ((4, 4, "acc", 3, 16), "int (3)"),
    ((4, 4, "acc", None, 16), "NoneType"),
    ((4, 4, "acc", 3.5, 16), "float (3.5)"),
    ((4, 4, 1, "f32", 16), "int (1)"),
    ((4.0, 4, "acc", "f32", 16), "rows must be an int, not float (4.0)"),
    ((4, "4", "acc", "f32", 16), "cols must be an int, not str ('4')"),
    ((4, 4, "acc", "f32", True), "subgroup_size must be an int, not bool"),
])
def test_bad_types(args, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        coopmatrix(*args)


def test_numpy_ints_accepted():
    cm = coopmatrix(np.int64(4), np.int32(15), "acc", "f32", np.uint8(16))
    assert cm.owner(np.int64(2), np.int16(5)) == (6, 1)


def test_bad_indices():
    cm = coopmatrix(4, 15, "acc", "f32", 16)
    cases = [
        (lambda: cm.owner(4, 0), "row 4"), (lambda: cm.owner(-1, 0), "row -1"),
        (lambda: cm.owner(0, 15), "col 15"), (lambda: cm.owner(0, -2), "col -2"),
        (lambda: cm.element(16, 0), "p 16"), (lambda: cm.element(-1, 0), "p -1"),
        (lambda: cm.element(0, 4), "v 4"), (lambda: cm.element(0, -1), "v -1"),
        (lambda: cm.element(0, 0, 1), "c 1"),
    ]
    vnni = coopmatrix(16, 16, "a", "i8", 16)
    cases += [
        (lambda: vnni.element(0, 0, 4), "c 4"), (lambda: vnni.element(0, 0, -1), "c -1"),
        (lambda: vnni.element(0, 0), "element(p=0, v=0)"),
        (lambda: vnni.owner(16, 0), "row 16"),
    ]
    for fn, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            fn()
    with pytest.raises(TypeError, match="row must be an int"):
        cm.owner(1.5, 0)
