"""Tensor layouts and views (SPV_NV_cooperative_matrix2, seeds/002, "Tensor Layout and View"):
coopjit.TensorLayout / TensorView / load_matrix / store_matrix against the independent reference in
tensor_reference.py.

1. The reference alone, against cases worked out by hand from the document.
2. coopjit against the reference, on the CPU and on opencl:0 (the SIMT lowering): every clamp mode for loads and stores, 1 to 5 dimensions, block
   sizes, strides with gaps, spans, offsets out of range (negative too), views (permutations, with
   and without dimensions, clips), load with out=, the GEMM's 2-D strided case (also against NumPy
   slicing), HLSL 0035's bounds behaviour, inputs not modified; seeded random cases and hand-picked.
3. Bad input: ValueError / TypeError naming the offending value.
"""
import itertools
import math

import numpy as np
import pytest

import coopjit
from device_support import DEVICE, every_module_passes_spirv_val, needs_device  # noqa: F401 - the fixture
from tensor_reference import (ADDR, CLAMP_MODES, CONST, SKIP, UNDEF, default_layout_strides,
                              linear_to_view_coord, matrix_index, normalize_layout, normalize_view,
                              ref_addresses, ref_load, ref_store, ref_store_writes,
                              ref_undefined_mask, row_major_strides, view_coord_to_linear)

DTYPES = (np.float32, np.float64, np.int32, np.int64, np.int8, np.uint8, np.int16, np.float16)
DEFINED_MODES = ("constant", "clamp_to_edge", "repeat", "mirror_repeat")
SENTINEL = 123  # not among the data values (1..99), representable in every dtype above
PAD = 24


# =================================================================================================
# Helpers
# =================================================================================================

# Section 2 runs on every target: the CPU and, through the SIMT lowering, opencl:0 (Intel's CPU
# OpenCL runtime; $COOPJIT_TEST_DEVICE names another device). DEV is the device of the running
# test (None: the CPU); SUBGROUPS > 1 makes the device's matrix workgroup-scope (test_workgroup_scope).
DEV = None
SUBGROUPS = 1


@pytest.fixture(params=["cpu", DEVICE])
def target(request):
    global DEV
    DEV = None if request.param == "cpu" else needs_device()
    yield request.param
    DEV = None


def cases(n):
    """How many random cases a test runs: n on the CPU; on a device, where each new shape is a
    new program for the device's compiler, the first quarter of them (the same cases)."""
    return n if DEV is None else max(2, n // 4)


def load_matrix(*args, **kw):
    if DEV is not None:
        kw["subgroups"] = SUBGROUPS
    return coopjit.load_matrix(*args, device=DEV, **kw)


def store_matrix(*args, **kw):
    if DEV is not None:
        kw["subgroups"] = SUBGROUPS
    return coopjit.store_matrix(*args, device=DEV, **kw)


def guarded(size, dtype, rng=None, shape=None, values=None):
    """(big, buf): buf is a contiguous slice of `big`, a sentinel-filled array PAD larger on each
    side; buf is filled with 1..99 (or `values`) and reshaped to `shape` if given."""
    big = np.full(size + 2 * PAD, SENTINEL, dtype=dtype)
    buf = big[PAD:PAD + size]
    if values is not None:
        buf[:] = np.asarray(values).reshape(-1)
    elif rng is not None:
        buf[:] = rng.integers(1, 100, size)
    else:
        buf[:] = (np.arange(size) % 99) + 1
    if shape is not None:
        buf = buf.reshape(shape)
    assert buf.flags.c_contiguous and np.shares_memory(buf, big)
    return big, buf


def assert_sentinels(big, size, case):
    lo, hi = big[:PAD], big[PAD + size:]
    if not ((lo == SENTINEL).all() and (hi == SENTINEL).all()):
        bad_lo = [i - PAD for i in np.flatnonzero(lo != SENTINEL)]
        bad_hi = [size + i for i in np.flatnonzero(hi != SENTINEL)]
        pytest.fail(f"{case}: memory outside the buffer was written at buffer indices "
                    f"{bad_lo + bad_hi} (buffer size {size})")


def make_layout(spec):
    kw = {k: spec[k] for k in ("strides", "offsets", "spans", "block", "clamp", "clamp_value")
          if spec.get(k) is not None}
    return coopjit.TensorLayout(spec["dims"], **kw)


def make_view(spec):
    if spec is None:
        return None
    return coopjit.TensorView(**{k: v for k, v in spec.items() if v is not None})


def describe(lspec, vspec, rows, cols, dtype, extra=""):
    s = f"layout={lspec}"
    if vspec is not None:
        s += f", view={vspec}"
    return s + f", rows={rows}, cols={cols}, dtype={np.dtype(dtype).name}{extra}"


def assert_matrix_equal(got, want, case, mask=None, lspec=None, vspec=None):
    """got == want except where mask is True; the message names the first differing elements."""
    assert isinstance(got, np.ndarray), f"{case}: got {type(got)}"
    assert got.shape == want.shape, f"{case}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{case}: dtype {got.dtype}, expected {want.dtype}"
    ok = got == want
    if mask is not None:
        ok |= mask
    if not ok.all():
        bad = np.argwhere(~ok)[:6]
        where = ""
        if lspec is not None:
            kinds, index = ref_addresses(want.shape[0], want.shape[1], lspec, vspec, "load")
            where = " [reference kind/index: " + ", ".join(
                f"({r},{c})={kinds[r, c]}/{index[r, c]}" for r, c in bad) + "]"
        details = "; ".join(f"({r},{c}): expected {want[r, c]!r}, got {got[r, c]!r}"
                            for r, c in bad)
        pytest.fail(f"{case}: {(~ok).sum()} of {ok.size} elements differ: {details}{where}")


def assert_store_equal(got_buf, before, matrix, lspec, vspec, case):
    """The buffer after coopjit's store against the reference; where several matrix elements are
    stored to one address (no order in the document), any of their values is accepted."""
    writes, undefined = ref_store_writes(matrix, before.size, lspec, vspec)
    assert undefined == 0, "only for cases without undefined behaviour"
    want = ref_store(matrix, before, lspec, vspec).reshape(-1)
    got = got_buf.reshape(-1)
    bad = []
    for i in np.flatnonzero(got != want):
        cands = writes.get(int(i), [])
        if len(set(cands)) > 1 and got[i] in cands:
            continue
        bad.append(int(i))
    if bad:
        details = "; ".join(
            f"buffer[{i}]: expected {want[i]!r}"
            f"{' (one of ' + repr(sorted(set(writes[i]))) + ')' if i in writes and len(set(writes[i])) > 1 else ''}"
            f"{' (written by the store)' if i in writes else ' (not written by the store)'}"
            f", got {got[i]!r} (before: {before.reshape(-1)[i]!r})" for i in bad[:6])
        pytest.fail(f"{case}: {len(bad)} buffer elements differ: {details}")


def run_load(lspec, vspec, rows, cols, dtype, rng, *, size, shape=None, init=None,
             only_sentinels=False, case_extra=""):
    """load_matrix on a guarded buffer; checks sentinels, the buffer unchanged, the dtype and,
    except for undefined-behaviour elements, the values against the reference."""
    case = describe(lspec, vspec, rows, cols, dtype, case_extra)
    big, buf = guarded(size, dtype, rng, shape)
    before = buf.copy()
    kw = {} if init is None else {"out": init.copy()}
    try:
        got = load_matrix(buf, rows, cols, make_layout(lspec), make_view(vspec), **kw)
    except Exception as e:  # name the case
        pytest.fail(f"{case}: load_matrix raised {type(e).__name__}: {e}")
    assert_sentinels(big, size, case)
    assert np.array_equal(buf, before), f"{case}: load_matrix modified its buffer"
    assert isinstance(got, np.ndarray) and got.shape == (rows, cols) and got.dtype == np.dtype(dtype), \
        f"{case}: got {type(got)} {getattr(got, 'shape', None)} {getattr(got, 'dtype', None)}"
    if only_sentinels:
        return got
    if ref_undefined_mask(rows, cols, lspec, vspec, "load").any():
        return got  # Undefined out of range: only "no crash, nothing outside the buffer touched"
    want = ref_load(before, rows, cols, lspec, vspec, init=init)
    assert_matrix_equal(got, want, case, lspec=lspec, vspec=vspec)
    return got


def run_store(lspec, vspec, rows, cols, dtype, rng, *, size, shape=None, only_sentinels=False,
              case_extra=""):
    """store_matrix on a guarded buffer; checks sentinels, the matrix unchanged and, when no element
    is undefined behaviour, the whole buffer against the reference."""
    case = describe(lspec, vspec, rows, cols, dtype, case_extra)
    big, buf = guarded(size, dtype, rng, shape)
    before = buf.copy()
    matrix = rng.integers(1, 100, (rows, cols)).astype(dtype)
    mcopy = matrix.copy()
    try:
        res = store_matrix(matrix, buf, make_layout(lspec), make_view(vspec))
    except Exception as e:  # name the case
        pytest.fail(f"{case}: store_matrix raised {type(e).__name__}: {e}")
    assert res is None, f"{case}: store_matrix returned {res!r}"
    assert_sentinels(big, size, case)
    assert np.array_equal(matrix, mcopy), f"{case}: store_matrix modified the matrix"
    if only_sentinels:
        return
    _, undefined = ref_store_writes(matrix, size, lspec, vspec)
    if undefined:
        return
    assert_store_equal(buf, before, matrix, lspec, vspec, case)


# ---- Random cases ----

def random_layout_spec(rng, clamp, *, block_ok, in_range):
    """A random layout (dict) and the buffer size that holds every in-range element."""
    rank = int(rng.integers(1, 6))
    maxd = (None, 20, 7, 5, 4, 3)[rank]
    dims = [int(x) for x in rng.integers(1, maxd + 1, rank)]
    block = None
    if block_ok and rng.random() < 0.5:
        block = [int(x) for x in rng.integers(1, 4, rank)]
    blk = block or [1] * rank
    grid = [-(-d // b) for d, b in zip(dims, blk)]
    kind = int(rng.integers(0, 3))
    if kind == 0:
        strides = None
        eff = default_layout_strides(dims, blk)
    elif kind == 1:  # row-major, innermost stride 1 or 2, gaps between the rows
        s = [0] * rank
        s[-1] = int(rng.integers(1, 3))
        for d in range(rank - 2, -1, -1):
            s[d] = s[d + 1] * grid[d + 1] + int(rng.integers(0, 3))
        strides = eff = s
    else:  # the dimensions in another order, with gaps
        s = [0] * rank
        acc = int(rng.integers(1, 3))
        for d in rng.permutation(rank):
            s[d] = acc
            acc = acc * grid[d] + int(rng.integers(0, 2))
        strides = eff = s
    if in_range:
        offsets = [int(rng.integers(0, d)) for d in dims]
        spans = [int(rng.integers(1, d - o + 1)) for d, o in zip(dims, offsets)]
    else:
        offsets, spans = [], []
        for d in dims:
            if rng.random() < 0.5:  # this dimension can leave [0, d), on either side
                o = int(rng.integers(-3, d + 2))
                offsets.append(o)
                spans.append(int(rng.integers(1, d + 4)))
            else:
                o = int(rng.integers(0, d))
                offsets.append(o)
                spans.append(int(rng.integers(1, d - o + 1)))
    if rng.random() < 0.15:
        offsets, spans = None, None  # defaults: the whole tensor
    elif rng.random() < 0.1 and not in_range:
        spans = None
    spec = dict(dims=dims, strides=strides, offsets=offsets, spans=spans, block=block, clamp=clamp,
                clamp_value=int(rng.integers(0, 10)) if rng.random() < 0.7 else None)
    size = sum((g - 1) * s for g, s in zip(grid, eff)) + 1
    return spec, size


def random_rows_cols(rng, lspec, limit=12):
    p = math.prod(lspec["spans"] or lspec["dims"])
    cols = int(rng.integers(1, min(p, limit) + 1))
    rows = int(rng.integers(1, min(p // cols, limit) + 1))
    return rows, cols


def random_shape(rng, size):
    """A buffer size (maybe padded a little) and a shape to give it (1-D, 2-D or 3-D)."""
    size += int(rng.integers(0, 4))
    r = rng.random()
    if r < 0.2:
        size = -(-size // 4) * 4
        return size, (size // 4, 4)
    if r < 0.3:
        size = -(-size // 6) * 6
        return size, (size // 6, 2, 3)
    return size, None


def random_view_case(rng, clamp, op):
    """A layout, a view and a matrix shape such that the matrix index stays inside the view and the
    view index inside the span (the document's wrap-around is tested by hand, see
    test_view_index_wraps_as_document)."""
    for _ in range(10000):
        lspec, size = random_layout_spec(rng, clamp, block_ok=(op == "load"),
                                         in_range=(clamp == "undefined"))
        spans = lspec["spans"] or lspec["dims"]
        p = math.prod(spans)
        if rng.random() < 0.6:
            vrank = int(rng.integers(1, 6))
            vdims = [int(x) for x in rng.integers(1, 5, vrank)]
            if math.prod(vdims) > p:
                continue
            vstrides = None if rng.random() < 0.5 else [int(x) for x in rng.integers(0, 7, vrank)]
        else:
            vrank, vdims, vstrides = len(spans), None, None
        perm = None if rng.random() < 0.2 else [int(x) for x in rng.permutation(vrank)]
        rows, cols = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        clip = None
        if rng.random() < 0.7:
            clip = tuple(int(x) for x in (rng.integers(0, rows + 1), rng.integers(0, rows + 2),
                                          rng.integers(0, cols + 1), rng.integers(0, cols + 2)))
        vspec = dict(dims=vdims, strides=vstrides, permutation=perm, clip=clip)
        lay = normalize_layout(lspec)
        v = normalize_view(vspec, lay)
        vp = math.prod(v.dims)
        fits = True
        for r in range(rows):
            for c in range(cols):
                i = matrix_index(v, r, c, cols)
                if i is None:
                    continue
                if i >= vp or view_coord_to_linear(v, linear_to_view_coord(v, i)) >= p:
                    fits = False
        if fits:
            return lspec, vspec, rows, cols, size
    raise AssertionError("no view case found")


def pick_dtype(rng):
    return DTYPES[int(rng.integers(0, len(DTYPES)))]


# =================================================================================================
# 1. The reference alone, against cases worked out by hand from the document
# =================================================================================================

def ref_1d(mode, d, offset, span, clamp_value=0, vals=None):
    """Loads a 1 x span matrix from a 1-D tensor of d elements (values 10 + coordinate): the
    result shows the coordinate each matrix element reads."""
    buf = np.arange(d) + 10 if vals is None else vals
    got = ref_load(buf, 1, span, dict(dims=(d,), offsets=(offset,), spans=(span,), clamp=mode,
                                      clamp_value=clamp_value))
    return list(got[0] - 10)


def test_ref_plain_2d_equals_numpy_slicing():
    # A 5 x 7 row-major matrix inside a 10 x 12 tensor whose rows are 16 apart, at (3, 4).
    t = np.arange(10 * 16).reshape(10, 16) + 1
    lay = dict(dims=(10, 12), strides=(16, 1), offsets=(3, 4), spans=(5, 7))
    assert np.array_equal(ref_load(t, 5, 7, lay), t[3:8, 4:11])
    m = -np.arange(35).reshape(5, 7)
    want = t.copy()
    want[3:8, 4:11] = m
    assert np.array_equal(ref_store(m, t, lay), want)
    # The default strides of the same tensor without padding are (12, 1).
    t2 = np.arange(120).reshape(10, 12)
    assert np.array_equal(ref_load(t2, 5, 7, dict(dims=(10, 12), offsets=(3, 4), spans=(5, 7))),
                          t2[3:8, 4:11])
    # A 7 x 5 matrix of the same 35 elements: the span is read in row-major order.
    assert np.array_equal(ref_load(t2, 7, 5, dict(dims=(10, 12), offsets=(3, 4), spans=(5, 7))),
                          t2[3:8, 4:11].reshape(7, 5))


def test_ref_repeat_negative_wraps_to_non_negative():
    assert ref_1d("repeat", 5, -1, 1) == [4]  # Repeat of -1 gives D - 1 (OpSMod)
    assert ref_1d("repeat", 5, -7, 15) == [3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2]


def test_ref_mirror_repeat_sequence():
    # D = 4, c = -6..9: c smod 6, then 6 - c where c >= 4.
    assert ref_1d("mirror_repeat", 4, -6, 16) == [0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2, 3]
    assert ref_1d("mirror_repeat", 2, -3, 7) == [1, 0, 1, 0, 1, 0, 1]
    assert ref_1d("mirror_repeat", 1, -3, 7) == [0] * 7  # 2D - 2 == 0: always 0
    assert ref_1d("mirror_repeat", 3, -4, 9) == [0, 1, 2, 1, 0, 1, 2, 1, 0]


def test_ref_clamp_to_edge_and_constant():
    assert ref_1d("clamp_to_edge", 5, -3, 11) == [0, 0, 0, 0, 1, 2, 3, 4, 4, 4, 4]
    # Constant: clampValue (here 99 = 10 + 89) outside, the tensor inside.
    assert ref_1d("constant", 5, -2, 9, clamp_value=99) == [89, 89, 0, 1, 2, 3, 4, 89, 89]
    assert ref_1d("constant", 5, -2, 9) == [-10, -10, 0, 1, 2, 3, 4, -10, -10]


def test_ref_clamp_applies_per_dimension():
    # 2-D, 3 x 4 tensor, window at (-1, 2) of 3 x 4: rows clamp to edge, columns clamp to edge.
    t = np.arange(12).reshape(3, 4)
    got = ref_load(t, 3, 4, dict(dims=(3, 4), offsets=(-1, 2), spans=(3, 4), clamp="clamp_to_edge"))
    rows = [0, 0, 1]
    cols = [2, 3, 3, 3]
    assert np.array_equal(got, t[np.ix_(rows, cols)])
    got = ref_load(t, 3, 4, dict(dims=(3, 4), offsets=(-1, 2), spans=(3, 4), clamp="repeat"))
    assert np.array_equal(got, t[np.ix_([2, 0, 1], [2, 3, 0, 1])])


def test_ref_stores_discard_out_of_range_under_every_defined_mode():
    buf = np.zeros(5, np.int32)
    m = np.array([[1, 2, 3, 4, 5, 6, 7]], np.int32)
    for mode in DEFINED_MODES:
        got = ref_store(m, buf, dict(dims=(5,), offsets=(-2,), spans=(7,), clamp=mode))
        assert list(got) == [3, 4, 5, 6, 7], mode
        got = ref_store(m, buf, dict(dims=(5,), offsets=(1,), spans=(7,), clamp=mode))
        assert list(got) == [0, 1, 2, 3, 4], mode
    assert list(ref_undefined_mask(1, 7, dict(dims=(5,), offsets=(-2,), spans=(7,)), op="store")[0]) \
        == [True, True, False, False, False, False, False]


def test_ref_block_sizes_share_addresses():
    assert default_layout_strides((4, 6), (2, 3)) == (2, 1)
    assert default_layout_strides((5, 7, 3), (2, 3, 1)) == (9, 3, 1)
    assert default_layout_strides((3, 5, 7), (1, 1, 1)) == (35, 7, 1)
    # 1-D, blocks of 2: index = c / 2.
    got = ref_load(np.arange(4) + 10, 1, 8, dict(dims=(8,), block=(2,)))
    assert list(got[0]) == [10, 10, 11, 11, 12, 12, 13, 13]
    # 2-D, blocks of 2 x 3 over 4 x 6: index = (r // 2) * 2 + c // 3.
    got = ref_load(np.arange(4) + 10, 4, 6, dict(dims=(4, 6), block=(2, 3)))
    want = np.array([[10 + (r // 2) * 2 + c // 3 for c in range(6)] for r in range(4)])
    assert np.array_equal(got, want)
    with pytest.raises(ValueError, match="block"):
        ref_store(np.zeros((4, 6)), np.zeros(4), dict(dims=(4, 6), block=(2, 3)))


def test_ref_view_permutation_is_numpy_transpose():
    t = np.arange(24).reshape(2, 3, 4)
    for perm in itertools.permutations(range(3)):
        got = ref_load(t, 6, 4, dict(dims=(2, 3, 4)), dict(permutation=perm))
        assert np.array_equal(got.reshape(-1), t.transpose(perm).reshape(-1)), perm
    # 2-D: a 2 x 3 tensor read as a 3 x 2 matrix through permutation (1, 0) is its transpose.
    t2 = np.arange(6).reshape(2, 3)
    assert np.array_equal(ref_load(t2, 3, 2, dict(dims=(2, 3)), dict(permutation=(1, 0))), t2.T)


def test_ref_view_without_dims_uses_the_spans():
    t = np.arange(24).reshape(4, 6)
    lay = dict(dims=(4, 6), offsets=(1, 2), spans=(2, 3))
    assert np.array_equal(ref_load(t, 3, 2, lay, dict(permutation=(1, 0))), t[1:3, 2:5].T)
    assert np.array_equal(ref_load(t, 2, 3, lay, dict()), t[1:3, 2:5])
    # With view dims (3, 2) and strides (1, 3) the same transpose, written out.
    assert np.array_equal(ref_load(t, 3, 2, lay, dict(dims=(3, 2), strides=(1, 3))), t[1:3, 2:5].T)


def test_ref_clip_hand_examples():
    buf = np.arange(40) + 10
    got = ref_load(buf, 4, 4, dict(dims=(40,)), dict(clip=(1, 2, 1, 2)))
    want = np.zeros((4, 4), int)
    want[1, 1], want[1, 2], want[2, 1], want[2, 2] = 10, 11, 12, 13
    assert np.array_equal(got, want)
    # Partially outside the 4 x 5 matrix: width = min(N, clipColSpan) = 5, not 5 - 3.
    got = ref_load(buf, 4, 5, dict(dims=(40,)), dict(clip=(2, 10, 3, 10)), init=np.full((4, 5), -1))
    want = np.full((4, 5), -1)
    want[2, 3], want[2, 4], want[3, 3], want[3, 4] = 10, 11, 15, 16
    assert np.array_equal(got, want)
    # Empty clip: nothing loaded, nothing stored.
    assert np.array_equal(ref_load(buf, 3, 3, dict(dims=(40,)), dict(clip=(0, 0, 0, 3))),
                          np.zeros((3, 3), int))
    assert np.array_equal(ref_store(np.ones((3, 3), int), buf, dict(dims=(40,)),
                                    dict(clip=(1, 2, 1, 0))), buf)


def test_ref_out_of_buffer_and_undefined():
    # Strides (3,) over 4 elements need 10 elements; a buffer of 7 reads 0 at index 9.
    got = ref_load(np.arange(7) + 10, 1, 4, dict(dims=(4,), strides=(3,)))
    assert list(got[0]) == [10, 13, 16, 0]
    got = ref_store(np.array([[1, 2, 3, 4]]), np.zeros(7, int), dict(dims=(4,), strides=(3,)))
    assert list(got) == [1, 0, 0, 2, 0, 0, 3]
    kinds, index = ref_addresses(1, 4, dict(dims=(4,), offsets=(-1,)))
    assert list(kinds[0]) == [UNDEF, ADDR, ADDR, ADDR] and list(index[0][1:]) == [0, 1, 2]
    kinds, _ = ref_addresses(1, 4, dict(dims=(4,), offsets=(-1,), clamp="constant"))
    assert list(kinds[0]) == [CONST, ADDR, ADDR, ADDR]
    kinds, _ = ref_addresses(2, 2, dict(dims=(4,)), dict(clip=(0, 1, 0, 2)))
    assert list(kinds[1]) == [SKIP, SKIP]


def test_ref_view_strides_and_rank_change():
    # A 1-D span of 12 seen as a 3 x 4 view with strides (1, 3): column-major reading.
    buf = np.arange(12)
    got = ref_load(buf, 3, 4, dict(dims=(12,)), dict(dims=(3, 4), strides=(1, 3)))
    assert np.array_equal(got, np.arange(12).reshape(4, 3).T)
    # The default view strides are row-major over the view dims.
    assert row_major_strides((2, 3, 4)) == (12, 4, 1)
    got = ref_load(buf, 3, 4, dict(dims=(12,)), dict(dims=(2, 6)))
    assert np.array_equal(got, np.arange(12).reshape(3, 4))


# =================================================================================================
# 2. coopjit against the reference
# =================================================================================================

def test_object_attributes_and_defaults():
    lay = coopjit.TensorLayout((3, 5, 7))
    assert lay.dims == (3, 5, 7) and lay.strides == (35, 7, 1) and lay.offsets == (0, 0, 0)
    assert lay.spans == (3, 5, 7) and lay.block == (1, 1, 1)
    assert lay.clamp == "undefined" and lay.clamp_value == 0
    for name in ("dims", "strides", "offsets", "spans", "block"):
        v = getattr(lay, name)
        assert isinstance(v, tuple) and all(type(x) is int for x in v), (name, v)
    lay = coopjit.TensorLayout([5, 7, 3], block=[2, 3, 1], clamp="mirror_repeat", clamp_value=4)
    assert lay.strides == default_layout_strides((5, 7, 3), (2, 3, 1)) == (9, 3, 1)
    assert lay.block == (2, 3, 1) and lay.clamp == "mirror_repeat" and lay.clamp_value == 4
    lay = coopjit.TensorLayout((4, 6), strides=(10, 2), offsets=(-1, 3), spans=(2, 9))
    assert (lay.strides, lay.offsets, lay.spans) == ((10, 2), (-1, 3), (2, 9))
    for mode in CLAMP_MODES:
        assert coopjit.TensorLayout((2,), clamp=mode).clamp == mode
    view = coopjit.TensorView((2, 3, 4))
    assert view.dims == (2, 3, 4) and view.strides == (12, 4, 1)
    assert view.permutation == (0, 1, 2) and view.clip is None
    view = coopjit.TensorView()
    assert view.dims is None and view.clip is None
    view = coopjit.TensorView(dims=(2, 3), strides=(1, 2), permutation=(1, 0), clip=(1, 2, 0, 5))
    assert (view.dims, view.strides, view.permutation, view.clip) == ((2, 3), (1, 2), (1, 0),
                                                                      (1, 2, 0, 5))


@pytest.mark.parametrize("mode", CLAMP_MODES)
def test_random_loads(mode, target):
    rng = np.random.default_rng(1000 + CLAMP_MODES.index(mode))
    for i in range(cases(25)):
        lspec, size = random_layout_spec(rng, mode, block_ok=True, in_range=(mode == "undefined"))
        rows, cols = random_rows_cols(rng, lspec)
        size, shape = random_shape(rng, size)
        run_load(lspec, None, rows, cols, pick_dtype(rng), rng, size=size, shape=shape,
                 case_extra=f", case {i}")


@pytest.mark.parametrize("mode", CLAMP_MODES)
def test_random_stores(mode, target):
    rng = np.random.default_rng(2000 + CLAMP_MODES.index(mode))
    for i in range(cases(20)):
        lspec, size = random_layout_spec(rng, mode, block_ok=False, in_range=(mode == "undefined"))
        rows, cols = random_rows_cols(rng, lspec)
        size, shape = random_shape(rng, size)
        run_store(lspec, None, rows, cols, pick_dtype(rng), rng, size=size, shape=shape,
                  case_extra=f", case {i}")


@pytest.mark.parametrize("mode", CLAMP_MODES)
def test_random_view_loads(mode, target):
    rng = np.random.default_rng(3000 + CLAMP_MODES.index(mode))
    for i in range(cases(12)):
        lspec, vspec, rows, cols, size = random_view_case(rng, mode, "load")
        init = rng.integers(100, 120, (rows, cols)) if rng.random() < 0.5 else None
        dtype = pick_dtype(rng)
        run_load(lspec, vspec, rows, cols, dtype, rng, size=size,
                 init=None if init is None else init.astype(dtype), case_extra=f", case {i}")


@pytest.mark.parametrize("mode", CLAMP_MODES)
def test_random_view_stores(mode, target):
    rng = np.random.default_rng(4000 + CLAMP_MODES.index(mode))
    for i in range(cases(8)):
        lspec, vspec, rows, cols, size = random_view_case(rng, mode, "store")
        run_store(lspec, vspec, rows, cols, pick_dtype(rng), rng, size=size,
                  case_extra=f", case {i}")


@pytest.mark.parametrize("mode", CLAMP_MODES)
def test_workgroup_scope(mode):
    """The matrix at workgroup scope on the device (spread over the 3 subgroups of a work-group,
    simt_workgroup.cpp; any number of rows): random loads, stores, view loads and view stores as
    above, against the same reference."""
    global DEV, SUBGROUPS
    DEV, SUBGROUPS = needs_device(), 3
    try:
        rng = np.random.default_rng(9000 + CLAMP_MODES.index(mode))
        for i in range(3):
            lspec, size = random_layout_spec(rng, mode, block_ok=True, in_range=(mode == "undefined"))
            rows, cols = random_rows_cols(rng, lspec)
            run_load(lspec, None, rows, cols, pick_dtype(rng), rng, size=size, case_extra=f", workgroup, case {i}")
            lspec["block"] = None
            run_store(lspec, None, rows, cols, pick_dtype(rng), rng, size=size, case_extra=f", workgroup, case {i}")
        for i in range(2):
            lspec, vspec, rows, cols, size = random_view_case(rng, mode, "store")
            init = rng.integers(100, 120, (rows, cols)).astype(np.float32)
            run_load(lspec, vspec, rows, cols, np.float32, rng, size=size, init=init,
                     case_extra=f", workgroup, view case {i}")
            run_store(lspec, vspec, rows, cols, np.float64, rng, size=size, case_extra=f", workgroup, view case {i}")
    finally:
        DEV, SUBGROUPS = None, 1


@pytest.mark.parametrize("mode", CLAMP_MODES)
def test_nothing_outside_the_buffer_is_touched(mode, target):
    """Buffers smaller than the layout, offsets far out of range (Undefined too): no crash, the
    sentinels around the buffer intact; defined elements as the reference (out of the buffer: 0)."""
    rng = np.random.default_rng(5000 + CLAMP_MODES.index(mode))
    for i in range(cases(8)):
        lspec, size = random_layout_spec(rng, mode, block_ok=True, in_range=False)
        if rng.random() < 0.5 and lspec["offsets"] is not None:
            lspec["offsets"] = [o + int(rng.integers(-60, 60)) for o in lspec["offsets"]]
        rows, cols = random_rows_cols(rng, lspec)
        small = int(rng.integers(1, size + 1))
        run_load(lspec, None, rows, cols, pick_dtype(rng), rng, size=small,
                 case_extra=f", buffer size {small}, case {i}")
        lspec["block"] = None
        run_store(lspec, None, rows, cols, pick_dtype(rng), rng, size=small,
                  case_extra=f", buffer size {small}, case {i}")
    # Hand-picked: far outside on both sides, large strides, a one-element buffer.
    for offsets, strides, size in (((-100, 3), None, 16), ((1000, 0), None, 16),
                                   ((0, -50), (4, 1), 16), ((2, 2), (1000, 7), 5),
                                   ((0, 0), None, 1), ((-1, -1), (1, 1), 3)):
        lspec = dict(dims=(4, 4), offsets=offsets, strides=strides, clamp=mode, clamp_value=5)
        extra = f", buffer size {size}"
        run_load(lspec, None, 4, 4, np.float32, rng, size=size, case_extra=extra,
                 only_sentinels=(mode == "undefined"))
        run_store(lspec, None, 4, 4, np.int16, rng, size=size, case_extra=extra,
                  only_sentinels=(mode == "undefined"))


@pytest.mark.parametrize("with_dims", [False, True])
@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))))
def test_view_permutations_of_3_dims(perm, with_dims, target):
    rng = np.random.default_rng(6000 + 7 * sum(p * 3 ** k for k, p in enumerate(perm)) + with_dims)
    t = np.arange(24).reshape(2, 3, 4) + 1
    lspec = dict(dims=(2, 3, 4))
    vspec = dict(dims=(2, 3, 4) if with_dims else None, permutation=perm)
    case = describe(lspec, vspec, 6, 4, np.int32)
    got = load_matrix(t.astype(np.int32), 6, 4, make_layout(lspec), make_view(vspec))
    assert_matrix_equal(got, t.transpose(perm).reshape(6, 4).astype(np.int32), case + " (numpy)")
    assert_matrix_equal(got, ref_load(t.astype(np.int32), 6, 4, lspec, vspec), case)
    run_store(lspec, vspec, 6, 4, np.int32, rng, size=24)
    # Inside a larger 4 x 5 x 6 tensor at an offset, and view dims with other strides.
    lspec = dict(dims=(4, 5, 6), offsets=(1, 2, 1), spans=(2, 3, 4), clamp="constant",
                 clamp_value=3)
    vspec = dict(dims=(3, 2, 4) if with_dims else None,
                 strides=(4, 12, 1) if with_dims else None, permutation=perm)
    run_load(lspec, vspec, 4, 6, np.float64, rng, size=120)
    run_load(lspec, vspec, 3, 8, np.float64, rng, size=120, init=np.full((3, 8), 200.0))
    run_store(lspec, vspec, 4, 6, np.float64, rng, size=120)
    # The span moved partly out of the tensor: Constant reads 3 there, stores are dropped.
    lspec = dict(lspec, offsets=(3, -1, 4))
    run_load(lspec, vspec, 4, 6, np.float64, rng, size=120)
    run_store(lspec, vspec, 4, 6, np.float64, rng, size=120)


def test_view_without_dims_uses_the_spans(target):
    rng = np.random.default_rng(7)
    t = np.arange(24).reshape(4, 6).astype(np.float32) + 1
    lspec = dict(dims=(4, 6), offsets=(1, 2), spans=(2, 3))
    got = load_matrix(t, 3, 2, make_layout(lspec), coopjit.TensorView(permutation=(1, 0)))
    assert_matrix_equal(got, t[1:3, 2:5].T.copy(), "transpose of the span (numpy)")
    got = load_matrix(t, 2, 3, make_layout(lspec), coopjit.TensorView())
    assert_matrix_equal(got, t[1:3, 2:5].copy(), "span (numpy)")
    # rank 5, no view dims, every clamp mode, the span hanging out of the tensor
    for mode in CLAMP_MODES:
        offsets = (0, 1, 0, 2, 1) if mode == "undefined" else (-1, 1, 2, -2, 1)
        lspec = dict(dims=(2, 3, 3, 4, 2), offsets=offsets, spans=(2, 2, 1, 2, 1), clamp=mode,
                     clamp_value=9)
        if mode == "undefined":
            lspec["spans"] = (2, 2, 3, 2, 1)
        for perm in ((4, 3, 2, 1, 0), (1, 0, 4, 2, 3)):
            vspec = dict(permutation=perm)
            run_load(lspec, vspec, 2, 4, np.int64, rng, size=144)
            run_store(lspec, vspec, 4, 2, np.int64, rng, size=144)


def test_view_index_wraps_as_document(target):
    """A matrix larger than the view: linearToViewCoord takes the index modulo the view dims."""
    rng = np.random.default_rng(8)
    buf = np.arange(6).astype(np.int32) + 1
    lspec, vspec = dict(dims=(6,)), dict(dims=(2, 3))
    got = load_matrix(buf, 4, 3, make_layout(lspec), make_view(vspec))
    want = ref_load(buf, 4, 3, lspec, vspec)
    assert np.array_equal(want, np.vstack([buf.reshape(2, 3)] * 2))
    assert_matrix_equal(got, want, describe(lspec, vspec, 4, 3, np.int32))
    # and a view index beyond the span: linearToSpanCoord wraps it
    lspec, vspec = dict(dims=(3, 4), spans=(2, 2)), dict(dims=(2, 4), permutation=(1, 0))
    run_load(lspec, vspec, 2, 4, np.int32, rng, size=12)


def test_matrix_larger_than_the_span_repeats_the_span(target):
    """A matrix with more elements than the span, no view (coopjit raised before): the document's
    linearToSpanCoord takes the row-major index modulo the spans, the outermost too, so the
    matrix reads the span's elements over and over, in row-major order (NumPy: np.resize of the
    span's slice)."""
    t = (np.arange(48) + 1).astype(np.int32).reshape(6, 8)
    lspec = dict(dims=(6, 8), offsets=(1, 2), spans=(2, 3))
    got = load_matrix(t, 4, 5, make_layout(lspec))
    want = np.resize(t[1:3, 2:5].reshape(-1), 20).reshape(4, 5)
    assert_matrix_equal(got, want, describe(lspec, None, 4, 5, np.int32))
    assert_matrix_equal(got, ref_load(t, 4, 5, lspec), describe(lspec, None, 4, 5, np.int32))
    # 1-D, clamped: the span hangs out of the tensor on both sides, repeated 5 1/3 times
    buf = (np.arange(10) + 1).astype(np.float32)
    for mode in DEFINED_MODES:
        lspec = dict(dims=(10,), offsets=(-2,), spans=(15,), clamp=mode, clamp_value=-1)
        one = ref_load(buf, 1, 15, lspec)[0]
        got = load_matrix(buf, 8, 10, make_layout(lspec))
        assert_matrix_equal(got, np.resize(one, 80).reshape(8, 10), describe(lspec, None, 8, 10, np.float32))
    # a store writes the span over and over: each address gets one of the elements mapped to it
    rng = np.random.default_rng(77)
    run_store(dict(dims=(6, 8), offsets=(1, 2), spans=(2, 3)), None, 4, 5, np.int32, rng, size=48)
    run_store(dict(dims=(5,), offsets=(3,), spans=(4,), clamp="constant"), None, 3, 3, np.float32, rng, size=5)


@pytest.mark.parametrize("mode", CLAMP_MODES)
def test_random_matrices_larger_than_the_span(mode, target):
    """Random layouts (1 to 5 dims, blocks, strides with gaps, offsets out of range) and matrices of
    up to 3 times as many elements as the span, loads and stores, against the pseudo-code."""
    rng = np.random.default_rng(5000 + CLAMP_MODES.index(mode))
    for i in range(cases(16)):
        store = i % 2 == 1
        lspec, size = random_layout_spec(rng, mode, block_ok=not store, in_range=(mode == "undefined"))
        p = math.prod(lspec["spans"] or lspec["dims"])
        cols = int(rng.integers(1, 13))
        rows = int(rng.integers(p // cols + 1, (3 * p) // cols + 2))
        if rows > 40:  # keep the matrices small
            continue
        assert rows * cols > p
        if store:
            run_store(lspec, None, rows, cols, pick_dtype(rng), rng, size=size, case_extra=f", case {i}")
        else:
            run_load(lspec, None, rows, cols, pick_dtype(rng), rng, size=size, case_extra=f", case {i}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_clip_regions(dtype, target):
    rng = np.random.default_rng(9)
    lspec = dict(dims=(6, 8), offsets=(1, 1), spans=(5, 6), strides=(9, 1), clamp="repeat")
    out = rng.integers(100, 120, (4, 5)).astype(dtype)
    for clip in ((1, 2, 1, 3), (2, 10, 3, 10), (0, 4, 0, 5), (3, 1, 4, 1), (4, 2, 0, 5),
                 (0, 0, 0, 5), (0, 4, 2, 0), (0, 0, 0, 0), (7, 3, 9, 2)):
        vspec = dict(clip=clip)
        # load with out=: the clipped elements keep out's values
        got = run_load(lspec, vspec, 4, 5, dtype, rng, size=60, init=out)
        kinds, _ = ref_addresses(4, 5, lspec, vspec)
        skipped = kinds == SKIP
        assert np.array_equal(got[skipped], out[skipped]), f"clip {clip}: out= not kept"
        # without out=, the clipped elements are 0
        got = run_load(lspec, vspec, 4, 5, dtype, rng, size=60)
        assert (got[skipped] == 0).all(), f"clip {clip}: clipped elements not 0"
        run_store(lspec, vspec, 4, 5, dtype, rng, size=60)
    # An empty clip: the buffer is untouched by a store; a load gives out back.
    for clip in ((0, 0, 0, 5), (1, 3, 2, 0)):
        big, buf = guarded(60, dtype, rng)
        before = buf.copy()
        store_matrix(rng.integers(1, 100, (4, 5)).astype(dtype), buf, make_layout(lspec),
                             coopjit.TensorView(clip=clip))
        assert np.array_equal(buf, before), f"empty clip {clip}: store wrote"
        got = load_matrix(buf, 4, 5, make_layout(lspec), coopjit.TensorView(clip=clip),
                                  out=out.copy())
        assert_matrix_equal(got, out, f"empty clip {clip}: load with out=")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8], ids=lambda d: np.dtype(d).name)
def test_gemm_strided_2d_case(dtype, target):
    """A row-major M x N tile inside a larger row-major R x C matrix whose rows are ld apart."""
    rng = np.random.default_rng(10)
    R, C, M, N = 10, 12, 4, 5
    for ld in (12, 16):
        for r0, c0 in ((0, 0), (3, 4), (6, 7), (R - M, C - N), (5, 0)):
            big, buf = guarded(R * ld, dtype, rng, shape=(R, ld))
            before = buf.copy()
            for clamp in CLAMP_MODES:
                lspec = dict(dims=(R, C), strides=(ld, 1), offsets=(r0, c0), spans=(M, N),
                             clamp=clamp)
                lay = make_layout(lspec)
                got = load_matrix(buf, M, N, lay)
                case = describe(lspec, None, M, N, dtype)
                assert_matrix_equal(got, buf[r0:r0 + M, c0:c0 + N].copy(), case + " (numpy)")
                assert_matrix_equal(got, ref_load(buf, M, N, lspec), case)
                assert np.array_equal(buf, before)
            m = rng.integers(1, 100, (M, N)).astype(dtype)
            store_matrix(m, buf, make_layout(dict(dims=(R, C), strides=(ld, 1),
                                                          offsets=(r0, c0), spans=(M, N))))
            want = before.copy()
            want[r0:r0 + M, c0:c0 + N] = m
            assert np.array_equal(buf, want), f"store of the tile at ({r0}, {c0}), ld {ld}"
            assert_sentinels(big, R * ld, f"store at ({r0}, {c0}), ld {ld}")


@pytest.mark.parametrize("clamp_value", [0, 7])
def test_edge_tiles_constant_reads_clamp_value(clamp_value, target):
    """HLSL 0035: out-of-range elements read zero (clamp value 0) or the clamp value; the padding
    between rows (ld > C) is never read."""
    rng = np.random.default_rng(11)
    R, C, ld, M, N = 9, 11, 14, 4, 6
    big, buf = guarded(R * ld, np.float32, rng, shape=(R, ld))
    padded = np.full((R + 2 * M, C + 2 * N), float(clamp_value), np.float32)
    padded[M:M + R, N:N + C] = buf[:, :C]
    for r0, c0 in ((-2, -3), (-4, 0), (7, 8), (0, 9), (8, -5), (-4, -6), (9, 11), (20, 3)):
        lspec = dict(dims=(R, C), strides=(ld, 1), offsets=(r0, c0), spans=(M, N),
                     clamp="constant", clamp_value=clamp_value)
        got = load_matrix(buf, M, N, make_layout(lspec))
        case = describe(lspec, None, M, N, np.float32)
        want = ref_load(buf, M, N, lspec)
        assert_matrix_equal(got, want, case)
        if -M <= r0 <= R and -N <= c0 <= C:
            assert_matrix_equal(got, padded[M + r0:2 * M + r0, N + c0:2 * N + c0].copy(),
                                case + " (numpy padding)")
        assert_sentinels(big, R * ld, case)


@pytest.mark.parametrize("mode", DEFINED_MODES)
def test_out_of_range_stores_dropped(mode, target):
    rng = np.random.default_rng(12)
    R, C, ld, M, N = 9, 11, 14, 4, 6
    for r0, c0 in ((-2, -3), (7, 8), (0, 9), (8, -5), (-4, -6), (9, 11), (-1, 5)):
        big, buf = guarded(R * ld, np.int32, rng, shape=(R, ld))
        before = buf.copy()
        m = rng.integers(1, 100, (M, N)).astype(np.int32)
        lspec = dict(dims=(R, C), strides=(ld, 1), offsets=(r0, c0), spans=(M, N), clamp=mode)
        store_matrix(m, buf, make_layout(lspec))
        case = describe(lspec, None, M, N, np.int32)
        assert_sentinels(big, R * ld, case)
        want = before.copy()
        rs, re_ = max(r0, 0), min(r0 + M, R)
        cs, ce = max(c0, 0), min(c0 + N, C)
        if rs < re_ and cs < ce:
            want[rs:re_, cs:ce] = m[rs - r0:re_ - r0, cs - c0:ce - c0]
        assert np.array_equal(want, ref_store(m, before, lspec)), "reference"
        assert_store_equal(buf, before, m, lspec, None, case)


def test_block_loads_share_addresses(target):
    rng = np.random.default_rng(13)
    buf = (np.arange(8) + 10).astype(np.int16)
    got = load_matrix(buf, 1, 8, coopjit.TensorLayout((8,), block=(2,)))
    assert_matrix_equal(got, np.array([[10, 10, 11, 11, 12, 12, 13, 13]], np.int16), "1-D blocks of 2")
    got = load_matrix(buf, 4, 6, coopjit.TensorLayout((4, 6), block=(2, 3)))
    want = np.array([[10 + (r // 2) * 2 + c // 3 for c in range(6)] for r in range(4)], np.int16)
    assert_matrix_equal(got, want, "2-D blocks of 2 x 3")
    # blocks with offsets, clamping and explicit strides, 3-D
    for mode in CLAMP_MODES:
        offsets = (0, 1, 2) if mode == "undefined" else (-1, 3, -4)
        lspec = dict(dims=(3, 7, 8), block=(1, 2, 4), strides=(40, 5, 2), offsets=offsets,
                     spans=(2, 4, 6), clamp=mode, clamp_value=1)
        run_load(lspec, None, 6, 8, np.float32, rng, size=120)
        run_load(lspec, dict(permutation=(2, 0, 1)), 8, 6, np.float32, rng, size=120)


def test_strides_zero_and_gaps(target):
    rng = np.random.default_rng(14)
    # stride 0: every row reads the same elements (broadcast); a store races (any value accepted)
    lspec = dict(dims=(3, 4), strides=(0, 1))
    buf = (np.arange(4) + 1).astype(np.float64)
    got = load_matrix(buf, 3, 4, make_layout(lspec))
    assert_matrix_equal(got, np.tile(buf, (3, 1)), "stride 0")
    run_store(lspec, None, 3, 4, np.float64, rng, size=4)
    # gaps: rows 7 apart, columns 2 apart; a store leaves the gaps untouched
    lspec = dict(dims=(3, 3), strides=(7, 2))
    run_load(lspec, None, 3, 3, np.uint8, rng, size=21)
    run_store(lspec, None, 3, 3, np.uint8, rng, size=21)
    run_store(lspec, None, 1, 9, np.uint8, rng, size=21)


# Every dtype under every clamp mode on the CPU; on the device (a new program per dtype and mode)
# every dtype under two modes and every mode with float32 and int8.
EVERY_DTYPE = ([("cpu", d, m) for d in DTYPES for m in CLAMP_MODES]
               + [(DEVICE, d, m) for d in DTYPES for m in CLAMP_MODES
                  if m in ("constant", "mirror_repeat") or d in (np.float32, np.int8)])


@pytest.mark.parametrize("target,dtype,mode", EVERY_DTYPE, indirect=["target"],
                         ids=[f"{t}-{m}-{np.dtype(d).name}" for t, d, m in EVERY_DTYPE])
def test_every_dtype(dtype, mode, target):
    rng = np.random.default_rng(15)
    offsets = (1, 0, 2) if mode == "undefined" else (-1, 2, -3)
    spans = (2, 3, 3) if mode == "undefined" else (4, 3, 5)
    lspec = dict(dims=(3, 4, 5), strides=(30, 6, 1), offsets=offsets, spans=spans, clamp=mode,
                 clamp_value=6)
    rows, cols = (3, 6) if mode == "undefined" else (5, 12)
    run_load(lspec, None, rows, cols, dtype, rng, size=90)
    run_store(lspec, None, rows, cols, dtype, rng, size=90)
    run_load(lspec, dict(permutation=(1, 2, 0), clip=(1, 10, 0, 4)), rows, cols, dtype, rng,
             size=90, init=np.full((rows, cols), 50, dtype))


def test_constant_float_clamp_value(target):
    lspec = dict(dims=(2, 2), offsets=(-1, 0), clamp="constant", clamp_value=2.5)
    buf = np.array([1, 2, 3, 4], np.float32)
    got = load_matrix(buf, 2, 2, make_layout(lspec))
    assert_matrix_equal(got, np.array([[2.5, 2.5], [1, 2]], np.float32), "clamp_value 2.5")


def test_inputs_not_modified(target):
    rng = np.random.default_rng(16)
    buf = rng.integers(1, 100, 64).astype(np.float32)
    before = buf.copy()
    lay = coopjit.TensorLayout((8, 8), offsets=(2, -1), clamp="repeat")
    got = load_matrix(buf, 4, 8, lay)
    assert np.array_equal(buf, before), "load_matrix modified its buffer"
    assert not np.shares_memory(got, buf), "load_matrix returned a view of the buffer"
    m = rng.integers(1, 100, (4, 8)).astype(np.float32)
    mcopy = m.copy()
    store_matrix(m, buf, coopjit.TensorLayout((8, 8), offsets=(2, 0)))
    assert np.array_equal(m, mcopy), "store_matrix modified the matrix"
    assert np.array_equal(buf.reshape(8, 8)[2:6], m)
    # and the layout / view objects keep their state
    assert lay.offsets == (2, -1) and lay.clamp == "repeat"


def test_load_from_read_only_buffer(target):
    buf = np.arange(16, dtype=np.int32)
    buf.flags.writeable = False
    lspec = dict(dims=(4, 4), offsets=(1, 1), clamp="mirror_repeat")
    got = load_matrix(buf, 4, 4, make_layout(lspec))
    assert_matrix_equal(got, ref_load(buf, 4, 4, lspec), "read-only buffer")


def test_largest_rows_and_cols(target):
    """256 rows or 256 columns (the largest allowed), against NumPy slicing (the reference is slow
    at that size).  Tall and wide rather than 256 x 256, to keep the JIT compile time short."""
    rng = np.random.default_rng(17)
    for rows, cols, r0, c0 in ((256, 1, 3, 40), (1, 256, 250, 44)):
        big, buf = guarded(260 * 300, np.float32, rng, shape=(260, 300))
        before = buf.copy()
        lay = coopjit.TensorLayout((260, 300), offsets=(r0, c0), spans=(rows, cols))
        got = load_matrix(buf, rows, cols, lay)
        assert_matrix_equal(got, before[r0:r0 + rows, c0:c0 + cols].copy(), f"{rows} x {cols} load")
        m = rng.integers(1, 100, (rows, cols)).astype(np.float32)
        store_matrix(m, buf, lay)
        want = before.copy()
        want[r0:r0 + rows, c0:c0 + cols] = m
        assert np.array_equal(buf, want), f"{rows} x {cols} store"
        assert_sentinels(big, 260 * 300, f"{rows} x {cols} store")
        # Constant: the same window shifted 20 columns right hangs out of the tensor
        lay = coopjit.TensorLayout((260, 300), offsets=(r0, c0 + 20), spans=(rows, cols),
                                   clamp="constant")
        got = load_matrix(buf, rows, cols, lay)
        padded = np.zeros((260, 600), np.float32)
        padded[:, :300] = buf
        assert_matrix_equal(got, padded[r0:r0 + rows, c0 + 20:c0 + 20 + cols].copy(),
                            f"{rows} x {cols} load hanging out")


# =================================================================================================
# 3. Bad input
# =================================================================================================

def both(*words):
    """A regex matching a message that contains every word (in any order)."""
    return "(?s)^" + "".join(f"(?=.*{w})" for w in words)


BUF = np.zeros(64, np.float32)


@pytest.mark.parametrize("rank", [0, 6])
def test_layout_rank(rank):
    with pytest.raises(ValueError, match=f"rank {rank}"):
        coopjit.TensorLayout((2,) * rank)


@pytest.mark.parametrize("rank", [0, 6])
def test_view_rank(rank):
    with pytest.raises(ValueError, match=f"rank {rank}"):
        coopjit.TensorView(dims=(2,) * rank)


@pytest.mark.parametrize("field", ["strides", "offsets", "spans", "block"])
def test_layout_field_lengths(field):
    with pytest.raises(ValueError, match=field):
        coopjit.TensorLayout((4, 4), **{field: (1,)})
    with pytest.raises(ValueError, match=field):
        coopjit.TensorLayout((4, 4), **{field: (1, 1, 1)})


def test_view_strides_length():
    with pytest.raises(ValueError, match="strides"):
        coopjit.TensorView(dims=(2, 3), strides=(1,))


@pytest.mark.parametrize("field,value,bad", [("dims", (4, 0), "0"), ("dims", (-2, 4), "-2"),
                                             ("spans", (0, 4), "0"), ("spans", (2, -1), "-1"),
                                             ("block", (1, 0), "0"), ("block", (-3, 1), "-3")])
def test_layout_values_below_one(field, value, bad):
    kw = {} if field == "dims" else {field: value}
    dims = value if field == "dims" else (4, 4)
    with pytest.raises(ValueError, match=both(field, rf"(?<![\d.]){bad}(?![\d.])")):
        coopjit.TensorLayout(dims, **kw)


def test_view_dims_below_one():
    with pytest.raises(ValueError, match=both("dims", r"(?<![\d.])0(?![\d.])")):
        coopjit.TensorView(dims=(2, 0))


def test_unknown_clamp_mode():
    with pytest.raises(ValueError, match="clamp mode 'wrap'"):
        coopjit.TensorLayout((4,), clamp="wrap")


@pytest.mark.parametrize("perm,shown", [((0, 0, 1), r"0, 0, 1"), ((0, 1, 3), r"0, 1, 3"),
                                        ((1, 2, -1), r"1, 2, -1")])
def test_permutation_not_a_permutation(perm, shown):
    with pytest.raises(ValueError, match=both("permutation", shown)):
        coopjit.TensorView(dims=(2, 3, 4), permutation=perm)


def test_permutation_wrong_length():
    with pytest.raises(ValueError, match=both("permutation", r"0, 1, 2")):
        coopjit.TensorView(dims=(2, 3), permutation=(0, 1, 2))
    # no view dims: the permutation must have the layout's rank, checked at the load / store
    view = coopjit.TensorView(permutation=(1, 0))
    with pytest.raises(ValueError, match="permutation"):
        coopjit.load_matrix(BUF, 2, 4, coopjit.TensorLayout((2, 2, 2)), view)
    with pytest.raises(ValueError, match="permutation"):
        coopjit.store_matrix(np.zeros((2, 4), np.float32), BUF, coopjit.TensorLayout((2, 2, 2)),
                             view)


def test_view_strides_without_dims():
    with pytest.raises(ValueError, match="strides"):
        coopjit.TensorView(strides=(3, 1))


@pytest.mark.parametrize("clip", [(-1, 2, 0, 2), (0, -1, 0, 4), (0, 2, -3, 2), (0, 2, 0, -5)])
def test_negative_clip(clip):
    bad = str(min(clip))
    with pytest.raises(ValueError, match=both("clip", rf"(?<!\d){bad}(?!\d)")):
        coopjit.TensorView(clip=clip)


def test_block_on_store():
    with pytest.raises(ValueError, match="block"):
        coopjit.store_matrix(np.zeros((4, 4), np.float32), BUF,
                             coopjit.TensorLayout((4, 4), block=(2, 1)))
    with pytest.raises(ValueError, match="block"):
        coopjit.store_matrix(np.zeros((4, 4), np.float32), BUF,
                             coopjit.TensorLayout((4, 4), block=(1, 2)), coopjit.TensorView())


@pytest.mark.parametrize("rows,cols,name,bad", [(0, 4, "rows", "0"), (257, 1, "rows", "257"),
                                                (4, 0, "cols", "0"), (1, 300, "cols", "300"),
                                                (-1, 4, "rows", "-1")])
def test_rows_cols_range(rows, cols, name, bad):
    lay = coopjit.TensorLayout((300, 300))
    buf = np.zeros(300 * 300, np.float32)
    with pytest.raises(ValueError, match=both(name, rf"(?<!\d){bad}(?!\d)")):
        coopjit.load_matrix(buf, rows, cols, lay)


@pytest.mark.parametrize("shape,bad", [((0, 4), "0"), ((1, 257), "257")])
def test_store_rows_cols_range(shape, bad):
    buf = np.zeros(300 * 300, np.float32)
    with pytest.raises(ValueError, match=rf"(?<!\d){bad}(?!\d)"):
        coopjit.store_matrix(np.zeros(shape, np.float32), buf, coopjit.TensorLayout((300, 300)))


@pytest.mark.parametrize("shape,shown", [((16,), r"\(16,\)"), ((2, 2, 4), r"\(2, 2, 4\)")])
def test_store_matrix_not_2d(shape, shown):
    with pytest.raises(ValueError, match=shown):
        coopjit.store_matrix(np.zeros(shape, np.float32), BUF, coopjit.TensorLayout((4, 4)))


def test_non_contiguous_buffer():
    strided = np.zeros(128, np.float32)[::2]
    with pytest.raises(ValueError, match="contiguous"):
        coopjit.load_matrix(strided, 4, 4, coopjit.TensorLayout((4, 4)))
    with pytest.raises(ValueError, match="contiguous"):
        coopjit.store_matrix(np.zeros((4, 4), np.float32), strided, coopjit.TensorLayout((4, 4)))
    fortran = np.zeros((8, 8), np.float32, order="F")
    with pytest.raises(ValueError, match="contiguous"):
        coopjit.load_matrix(fortran, 4, 4, coopjit.TensorLayout((4, 4)))


def test_read_only_buffer_for_store():
    buf = np.zeros(16, np.float32)
    buf.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        coopjit.store_matrix(np.ones((4, 4), np.float32), buf, coopjit.TensorLayout((4, 4)))
    assert (buf == 0).all()


def test_subgroups_needs_a_device():
    with pytest.raises(ValueError, match="subgroups=4 .*device="):
        coopjit.load_matrix(BUF, 4, 4, coopjit.TensorLayout((8, 8)), subgroups=4)
    with pytest.raises(ValueError, match=r"subgroups must be an int in \[1, 16\], got 0"):
        coopjit.store_matrix(np.zeros((2, 2), np.float32), BUF, coopjit.TensorLayout((8, 8)), subgroups=0)


def test_wrong_types():
    with pytest.raises(TypeError, match="list"):
        coopjit.load_matrix([0.0] * 16, 4, 4, coopjit.TensorLayout((4, 4)))
    with pytest.raises(TypeError, match="dict"):
        coopjit.load_matrix(BUF, 4, 4, {"dims": (4, 4)})
    with pytest.raises(TypeError, match="TensorLayout"):
        coopjit.load_matrix(BUF, 4, 4, coopjit.TensorLayout((4, 4)), coopjit.TensorLayout((4, 4)))
    with pytest.raises(TypeError, match=r"4\.5"):
        coopjit.TensorLayout((4.5, 2))
    with pytest.raises(TypeError, match="clamp"):
        coopjit.TensorLayout((4,), clamp=3)
    with pytest.raises(TypeError, match="list"):
        coopjit.store_matrix([[0.0] * 4] * 4, BUF, coopjit.TensorLayout((4, 4)))
