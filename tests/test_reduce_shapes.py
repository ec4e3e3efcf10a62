"""Reductions of few long rows (the two-stage path: each row's body as the columns of a
(n // W) x W view over every worker, then the partials and the tails), against NumPy in
float64 / exact integers: every op, tails of every length, strided and sliced rows."""
import ctypes
import mmap

import numpy as np
import pytest

import coopjit


@pytest.mark.parametrize("shape,axis", [((3, 1_048_577), 1), ((1, 600_000), 1), ((5, 300_000 + 1023), -1),
                                        ((2, 3, 290_017), 2), ((2_000_003,), None), ((4, 262_144 + 1), (1,))])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_few_long_rows(rng, shape, axis, op):
    # Values whose float32 results are exact, so that a lost or doubled element (a body block,
    # a tail element) shows: small integers for sums (every partial below 2^24), ones with a
    # few 2s and 0.5s for products (a power of two), any values for min / max.
    if op == "prod":
        x = np.ones(shape, np.float32)
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, 40, replace=False)] = 2.0
        flat[rng.choice(flat.size, 15, replace=False)] = 0.5
        flat[-1] = 2.0  # the last tail element
    else:
        x = rng.integers(-2, 3, shape).astype(np.float32)
    got = coopjit.reduce(x, axis, op)
    ref = getattr(np, op)(x.astype(np.float64), axis=axis)
    assert np.shape(got) == np.shape(ref)
    np.testing.assert_array_equal(np.asarray(got, np.float64), ref)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_, np.float64])
def test_few_long_rows_integers_and_doubles_exact(rng, dtype):
    x = rng.integers(0, 3, (3, 700_001)).astype(dtype)
    got = coopjit.reduce(x, 1)
    assert np.array_equal(got, x.astype(np.int64 if dtype != np.float64 else np.float64).sum(axis=1))
    assert np.array_equal(coopjit.reduce(x, 1, "max"), x.max(axis=1))


def test_few_long_rows_of_a_strided_view(rng):
    big = rng.uniform(-1, 1, (6, 2_100_000)).astype(np.float32)
    x = big[::2, 7:]  # rows 0, 2, 4, each starting 7 elements in
    got = coopjit.reduce(x, 1)
    ref = x.astype(np.float64).sum(axis=1)
    assert np.allclose(got, ref, rtol=1e-5, atol=1e-2)
    # NaN anywhere in a row's body or tail propagates to that row only
    x = x.copy()
    x[1, 12345] = np.nan
    x[2, -1] = np.nan
    got = coopjit.reduce(x, 1, "max")
    assert np.isnan(got[1]) and np.isnan(got[2]) and got[0] == x[0].max()


@pytest.mark.parametrize("shape,axis", [((5000, 3), 1), ((4097, 8), 1), ((10_001, 32), -1), ((3, 4096, 5), 2),
                                        ((4096, 2, 3), (1, 2)), ((70_000, 1), 1)])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_many_short_rows(rng, shape, axis, op):
    # The short-row path (rows of up to 128 bytes reduced down an n x rows view, strided loads):
    # exact values, as above; every row's result checked.
    if op == "prod":
        x = np.where(rng.random(shape) < 0.1, 2.0, 1.0).astype(np.float32)
        x[rng.random(shape) < 0.05] = 0.5
    else:
        x = rng.integers(-2, 3, shape).astype(np.float32)
    got = coopjit.reduce(x, axis, op)
    ref = getattr(np, op)(x.astype(np.float64), axis=axis)
    assert got.shape == ref.shape
    np.testing.assert_array_equal(np.asarray(got, np.float64), ref)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.bool_, np.float64, np.float16])
def test_many_short_rows_every_dtype(rng, dtype):
    x = rng.integers(0, 3, (9000, 7)).astype(dtype)
    exact = np.float64 if dtype in (np.float64, np.float16) else np.int64
    np.testing.assert_array_equal(coopjit.reduce(x, 1).astype(exact), x.astype(exact).sum(axis=1))
    np.testing.assert_array_equal(coopjit.reduce(x, 1, "max"), x.max(axis=1))
    # rows that are not packed back to back (a column slice): the row path
    y = rng.integers(0, 3, (9000, 12)).astype(dtype)[:, 2:9]
    np.testing.assert_array_equal(coopjit.reduce(y, 1).astype(exact), y.astype(exact).sum(axis=1))


def _ending_at_a_guard_page(nbytes):
    """(keep, buf): a writable uint8 buffer of nbytes whose end is the start of a page that cannot
    be read, so that a load past the buffer's last byte faults; keep holds the mapping."""
    page = mmap.PAGESIZE
    total = -(-nbytes // page) * page + page
    m = mmap.mmap(-1, total, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    anchor = ctypes.c_char.from_buffer(m)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    if libc.mprotect(ctypes.addressof(anchor) + total - page, page, 0) != 0:  # PROT_NONE
        pytest.skip(f"mprotect failed (errno {ctypes.get_errno()}): no guard page on this system")
    buf = np.frombuffer(m, np.uint8, count=nbytes, offset=total - page - nbytes)
    return (m, anchor), buf


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16])
@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 24, 31])
@pytest.mark.parametrize("K", [4096, 4096 + 37])
def test_short_rows_of_every_small_length_end_at_the_buffer(rng, K, n, dtype):
    # Rows of 2..17 elements ending at an unreadable page. Strides up to 16 (and up to a
    # vector's lanes) are built into the kernel, which loads whole vectors and picks every n-th
    # element: the last vector is masked to the last row's end, so nothing past the buffer is
    # read (a read there faults). 4096 rows end in a whole tile (its unchecked loads reach the
    # buffer's end); 4096 + 37 in a tail.
    item = np.dtype(dtype).itemsize
    keep, raw = _ending_at_a_guard_page(K * n * item)
    x = raw.view(dtype).reshape(K, n)
    x[...] = rng.integers(0, 50, (K, n)).astype(dtype)
    exact = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    np.testing.assert_array_equal(coopjit.reduce(x, 1).astype(exact), x.astype(exact).sum(axis=1))
    np.testing.assert_array_equal(coopjit.reduce(x, 1, "max"), x.max(axis=1))
    np.testing.assert_array_equal(coopjit.reduce(x, 1, "min"), x.min(axis=1))
    assert keep  # the mapping stays alive until the reductions are done


@pytest.mark.parametrize("dtype,n", [(np.float32, 16), (np.float32, 32), (np.float32, 48), (np.float64, 8),
                                     (np.float64, 24), (np.int32, 48), (np.int8, 64), (np.int8, 128)])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_rows_of_whole_vectors_end_at_the_buffer(rng, dtype, n, op):
    # Rows of 1-3 whole vectors reduced in row tiles exactly as wide as the row (8 or 4 rows a
    # tile), the last tile partly past the last row (4096 + 37 rows), ending at an unreadable page.
    K = 4096 + 37
    item = np.dtype(dtype).itemsize
    keep, raw = _ending_at_a_guard_page(K * n * item)
    x = raw.view(dtype).reshape(K, n)
    x[...] = rng.integers(-50 if np.dtype(dtype).kind != "u" else 0, 50, (K, n)).astype(dtype)
    exact = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    got = coopjit.reduce(x, 1, op)
    np.testing.assert_array_equal(np.asarray(got).astype(exact), getattr(np, op)(x.astype(exact), axis=1))
    assert keep


def test_many_short_rows_into_a_strided_out(rng):
    x = rng.uniform(-1, 1, (6000, 5)).astype(np.float32)
    out = np.zeros((6000, 2), np.float32)
    got = coopjit.reduce(x, 1, out=out[:, 1])  # a non-contiguous out: computed into a temporary, then copied
    assert got is not None
    np.testing.assert_allclose(out[:, 1], x.astype(np.float64).sum(axis=1), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out[:, 0], 0.0)


@pytest.mark.parametrize("threads", [1, 3, 16])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_one_value_from_many_split_into_rows(rng, threads, op):
    # The one-value path: the body as 4 rows per worker (whatever the worker count), then the
    # rows' partials and the tail; a strided 1-D view and a 2-D array reduced to one value too.
    old = coopjit.get_num_threads()
    coopjit.set_num_threads(threads)
    try:
        n = 4 * threads * 4096 * 3 + 4 * threads - 1  # a tail of every row but one
        if op == "prod":
            x = np.ones(n, np.float32)  # powers of two well inside float32's range: exact
            x[rng.choice(n, 40, replace=False)] = 2.0
            x[rng.choice(n, 15, replace=False)] = 0.5
            x[-1] = 2.0  # the last tail element
        else:
            x = rng.integers(-2, 3, n).astype(np.float32)
        for arr, axis in ((x, None), (x[::3], 0), (x[: n // 8 * 8].reshape(8, -1), None)):
            got = coopjit.reduce(arr, axis, op)
            np.testing.assert_array_equal(np.float64(got), getattr(np, op)(arr.astype(np.float64), axis=axis))
    finally:
        coopjit.set_num_threads(old)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(37, 600), (16, 4096 + 129), (203, 8193), (1000, 517)])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_down_long_rows_split_among_workers(rng, threads, shape, op):
    """Down the columns of long rows (the rows split among the workers, each reducing its share
    into a row of partials, 4 rows at a time and then one by one, in blocks of columns; then the
    partials reduced): every op, rows and columns that leave tails, against NumPy in float64."""
    before = coopjit.get_num_threads()
    coopjit.set_num_threads(threads)
    try:
        if op == "prod":
            x = np.ones(shape, np.float32)
            x[rng.random(shape) < 0.01] = 2.0
            x[rng.random(shape) < 0.005] = 0.5
        else:
            x = rng.integers(-2, 3, shape).astype(np.float32)
        got = coopjit.reduce(x, 0, op)
    finally:
        coopjit.set_num_threads(before)
    np.testing.assert_array_equal(np.asarray(got, np.float64), getattr(np, op)(x.astype(np.float64), axis=0))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float16, np.float64, np.bool_])
def test_down_long_rows_other_types_and_views(rng, dtype):
    base = rng.integers(0, 3, (300, 3000)).astype(dtype)
    for x in (base, base[7:290:3, 5:2900]):  # rows of another stride, an unaligned start
        acc = np.float64 if np.issubdtype(dtype, np.floating) else np.int64
        got = coopjit.reduce(x, 0)
        np.testing.assert_array_equal(np.asarray(got, np.float64), x.astype(acc).sum(axis=0).astype(np.float64))
        np.testing.assert_array_equal(np.asarray(coopjit.reduce(x, 0, "max"), np.float64), x.max(axis=0).astype(np.float64))
        x0 = x.copy()
        coopjit.reduce(x, 0, "min")
        np.testing.assert_array_equal(x, x0)  # the input is not modified


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.uint16, np.int32, np.int64])
@pytest.mark.parametrize("cols", [1, 15, 64, 65, 256, 1000, 4096 + 3])
def test_row_min_max_across_lanes_every_position(rng, dtype, cols):
    # The row tile's lanes are combined as a tree of vector ops for min / max (and integer sums):
    # the extreme value planted at every lane position of a row tile (one row each), NaN in one
    # lane of a float row, -0 / +0 ties; rows ending at an unreadable page.
    rows = 70
    item = np.dtype(dtype).itemsize
    keep, raw = _ending_at_a_guard_page(rows * cols * item)
    x = raw.view(dtype).reshape(rows, cols)
    x[...] = rng.integers(-50, 50, (rows, cols)).astype(dtype) if np.dtype(dtype).kind != "u" else \
        rng.integers(0, 100, (rows, cols)).astype(dtype)
    pos = np.arange(rows) * 7 % cols
    big = np.iinfo(dtype).max if np.dtype(dtype).kind in "iu" else 1000
    small = np.iinfo(dtype).min if np.dtype(dtype).kind in "iu" else -1000
    x[np.arange(rows), pos] = np.where(np.arange(rows) % 2, big, small).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[3, (3 * 5) % cols] = np.nan
        x[4, :] = 0.0
        x[4, (11 % cols)] = -0.0  # max is +0, min -0 (as numpy.maximum / minimum order them)
    for op in ("max", "min"):
        got = coopjit.reduce(x, 1, op)
        ref = getattr(np, op)(x, axis=1)
        np.testing.assert_array_equal(got, ref)
        if np.dtype(dtype).kind == "f" and cols > 1:
            assert np.signbit(got[4]) == (op == "min")
    if np.dtype(dtype).kind in "iu":  # integer sums in int64: exact
        np.testing.assert_array_equal(coopjit.reduce(x, 1), x.astype(np.int64).sum(axis=1))
        np.testing.assert_array_equal(coopjit.reduce(x[:, ::-1], 1, "max"), x.max(axis=1))  # a strided row
    assert keep


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8, np.float16, np.int32])
def test_one_value_pieces_start_on_a_line_at_every_offset(rng, dtype):
    # The one-value split starts its pieces on 64-byte boundaries: the elements before the first
    # boundary join the tail. Every start offset within a line, the array ending at an unreadable
    # page; exact values (small integers), sum and max, one row and three.
    item = np.dtype(dtype).itemsize
    n = 4 * 4 * 4096 * 2 + 37  # above the split's minimum for up to 4 workers
    keep, raw = _ending_at_a_guard_page((n + 64) * item)
    whole = raw.view(dtype)
    # (float16: eighths, whose float32 partial sums are exact; the result rounded once to float16)
    whole[...] = rng.integers(0, 3, whole.size).astype(dtype) / (8 if dtype == np.float16 else 1)
    for off in range(0, 64 // item + 1, max(1, 16 // item)):
        x = whole[whole.size - n + off - (64 // item):whole.size - (64 // item) + off] if off else whole[-n:]
        exact = np.float64 if np.dtype(dtype).kind == "f" else np.int64
        assert coopjit.reduce(x) == np.asarray(x.astype(exact).sum()).astype(coopjit.reduce(x).dtype), off
        assert coopjit.reduce(x, op="max") == x.max()
        rows = x[: (n // 3) * 3].reshape(3, -1)
        if rows.shape[1] * item >= 1 << 20:
            ref = rows.astype(exact).sum(axis=1)
            np.testing.assert_array_equal(coopjit.reduce(rows, 1), ref.astype(coopjit.reduce(rows, 1).dtype))
    assert keep


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.uint8])
@pytest.mark.parametrize("cols", [1024, 1500, 4096 - 3])
def test_rows_read_from_a_line_boundary_at_every_offset(rng, dtype, cols):
    # Rows whose stride is whole cache lines, starting at every offset into a line: the row
    # form's full tiles start at the first 64-byte boundary, the elements before it from one
    # tile at column 0 (masked for sums, whole and overlapping for min / max), the tail likewise.
    # Exact values; a NaN in a head and in a tail; the buffer ends at an unreadable page.
    item = np.dtype(dtype).itemsize
    stride = -(-(cols + 64 // item) * item // 64) * 64 // item  # elements, a multiple of 64 bytes
    rows = 9
    keep, raw = _ending_at_a_guard_page(rows * stride * item)
    buf = raw.view(dtype).reshape(rows, stride)
    buf[...] = rng.integers(0, 100, (rows, stride)).astype(dtype)
    exact = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    for off in range(0, min(64 // item, stride - cols) + 1, max(1, 8 // item)):
        x = buf[:, stride - cols - off:stride - off] if off else buf[:, stride - cols:]
        y = x.copy()
        if np.dtype(dtype).kind == "f":
            y[2, 3] = np.nan
            y[5, -2] = np.nan
            x[...] = y
        np.testing.assert_array_equal(coopjit.reduce(x, 1).astype(exact), x.astype(exact).sum(axis=1))
        np.testing.assert_array_equal(coopjit.reduce(x, 1, "max"), x.max(axis=1))
        np.testing.assert_array_equal(coopjit.reduce(x, 1, "min"), x.min(axis=1))
        buf[...] = rng.integers(0, 100, (rows, stride)).astype(dtype)
    assert keep


@pytest.mark.parametrize("dtype,n", [(np.float32, 40), (np.float32, 100), (np.float32, 255), (np.float64, 100),
                                     (np.int32, 100), (np.int8, 1000), (np.float16, 200)])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_prefetched_short_rows_end_at_the_buffer(rng, dtype, n, op):
    # Rows shorter than 1 KiB: the row form prefetches the lines 8 KiB past each main tile, far
    # past the buffer's end for the last tiles (a prefetch never faults; a load there would: the
    # buffer ends at an unreadable page). Exact values: small integers, products of +-1 and 2.
    K = 2000 + 3
    item = np.dtype(dtype).itemsize
    keep, raw = _ending_at_a_guard_page(K * n * item)
    x = raw.view(dtype).reshape(K, n)
    if op == "prod":
        x[...] = rng.choice(np.array([1, -1, 1, 1], dtype), (K, n))
        x[rng.integers(0, K, 50), rng.integers(0, n, 50)] = 2
    else:
        x[...] = rng.integers(-50 if np.dtype(dtype).kind != "u" else 0, 50, (K, n)).astype(dtype)
    exact = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    got = coopjit.reduce(x, 1, op)
    np.testing.assert_array_equal(np.asarray(got).astype(exact), getattr(np, op)(x.astype(exact), axis=1))
    assert keep


@pytest.mark.parametrize("n,prefetched", [(40, True), (100, True), (255, True), (256, False), (4096, False)])
def test_rows_shorter_than_1_kib_are_prefetched(n, prefetched):
    # The plan: row tiles of rows shorter than 1 KiB load with prefetch(8192) (the kernel IR's
    # load attribute); rows of 1 KiB and more do not (the hardware prefetchers follow them).
    x = np.ones((64, n), np.float32)
    ir = coopjit._core.reduce_ir("sum", "row", x, np.empty(64, np.float32), "f32", "f32", "f32")
    assert ("prefetch(8192)" in ir) == prefetched


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("n", [3, 7, 12])
def test_column_form_into_contiguous_and_strided_outputs(rng, n, op):
    # The column form (the n x K view of K short rows) stores whole vectors into a contiguous Y
    # (its stride fixed at 1 in the kernel) and element by element into a strided one; both
    # against NumPy, and nothing written between a strided Y's elements.
    K = 5000 + 11
    x = rng.integers(-100, 100, (K, n)).astype(np.float32)
    view = x.T  # n x K, the view coopjit.reduce reduces down its columns
    want = getattr(np, op)(x.astype(np.float64), axis=1)
    y = np.full(K, 7.0, np.float32)
    coopjit._core.reduce2d(op, "column", view, y, "f32", "f32", "f32")
    np.testing.assert_array_equal(y.astype(np.float64), want)
    ys = np.full(2 * K, 7.0, np.float32)
    coopjit._core.reduce2d(op, "column", view, ys[::2], "f32", "f32", "f32")
    np.testing.assert_array_equal(ys[::2].astype(np.float64), want)
    assert np.all(ys[1::2] == 7.0)
    ir = coopjit._core.reduce_ir(op, "column", view, y, "f32", "f32", "f32")
    irs = coopjit._core.reduce_ir(op, "column", view, ys[::2], "f32", "f32", "f32")
    assert "%Y[%c0, %c0_1] strides(%c1, %c1)" in ir and "strides(%c1, %sy_c)" in irs


def _rows_each_before_a_guard_page(rows, row_bytes):
    """(keep, buf): a uint8 buffer of `rows` rows 2 pages apart, each row ending where an
    unreadable page starts, so that a load past any row's end faults."""
    page = mmap.PAGESIZE
    total = 2 * page * rows
    m = mmap.mmap(-1, total, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    anchor = ctypes.c_char.from_buffer(m)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    for r in range(rows):
        if libc.mprotect(ctypes.addressof(anchor) + (2 * r + 1) * page, page, 0) != 0:
            pytest.skip(f"mprotect failed (errno {ctypes.get_errno()}): no guard page on this system")
    buf = np.frombuffer(m, np.uint8, count=total - page - 0, offset=0)
    view = np.lib.stride_tricks.as_strided(buf[page - row_bytes:], (rows, row_bytes), (2 * page, 1))
    return (m, anchor), view


@pytest.mark.parametrize("dtype,n", [(np.float32, 100), (np.float32, 300), (np.float64, 100), (np.int16, 700)])
@pytest.mark.parametrize("op", ["sum", "prod", "max"])
def test_rows_read_past_their_end_only_into_the_next_row(rng, dtype, n, op):
    # Contiguous rows (and rows a small gap apart): each row's tail tile is read whole, past the
    # row's end into the next row, in every row tile but the last (whose tail is masked: the
    # buffer ends at an unreadable page). Rows a page or more apart never read past their end:
    # here each row is followed by an unreadable page.
    item = np.dtype(dtype).itemsize
    K = 1000 + 5
    vals = (rng.choice(np.array([1, -1, 1, 1], dtype), (K, n)) if op == "prod"
            else rng.integers(-50, 50, (K, n)).astype(dtype))
    exact = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    want = getattr(np, op)(vals.astype(exact), axis=1)
    keep, raw = _ending_at_a_guard_page(K * (n + 3) * item)
    wide = raw.view(dtype).reshape(K, n + 3)
    for x in (raw[:K * n * item].view(dtype).reshape(K, n), wide[:, :n], wide[:, 3:]):
        x[...] = vals
        np.testing.assert_array_equal(np.asarray(coopjit.reduce(x, 1, op)).astype(exact), want)
    keep2, rows = _rows_each_before_a_guard_page(64, n * item)
    x = rows.view(dtype)
    x[...] = vals[:64]
    np.testing.assert_array_equal(np.asarray(coopjit.reduce(x, 1, op)).astype(exact), want[:64])
    assert keep and keep2


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, "bfloat16"])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_short_rows_as_segment_tiles_every_length(rng, dtype, op):
    # Contiguous rows of 2-64 elements (up to 4 vectors' lanes S): each tile of S or 2S rows is
    # one n x CW load of whole vectors (plan segments), reduced down its columns: rows of up to 7
    # through picks of each row of the view, longer ones row by row of X with constant masks, then
    # the S rows' vectors across their lanes together. Against NumPy in float64 / exact integers;
    # K leaves a partial last tile; reversed and strided views fall back to the row form.
    if dtype == "bfloat16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    dt = np.dtype(dtype)
    exact = np.int64 if dt.kind in "iu" else np.float64
    for n in [*range(2, 18), 24, 31, 33, 63]:
        K = 3000 + n
        if op == "prod":
            x = rng.choice(np.array([1, 1, 2, -1] if dt.kind != "u" else [1, 1, 2, 1]), (K, n)).astype(dtype)
        else:
            x = rng.integers(0 if dt.kind == "u" else -20, 20, (K, n)).astype(dtype)
        for v in (x, x[::-1]) if n % 4 else (x, x[::-1], x[:, ::-1]):
            want = getattr(np, op)(v.astype(exact), axis=1)
            got = np.asarray(coopjit.reduce(v, 1, op)).astype(exact)
            if exact is np.float64 and dt.itemsize <= 2:  # accumulated exactly in f32, rounded once to the dtype
                want = want.astype(dtype).astype(exact)
            np.testing.assert_array_equal(got, want, err_msg=f"n={n} {v.strides}")


@pytest.mark.parametrize("n,op,segments", [(3, "sum", True), (8, "max", True), (12, "max", True), (31, "sum", True),
                                           (64, "sum", True), (65, "sum", False)])
def test_short_rows_segment_plan(n, op, segments):
    # The plan: segment tiles (one n x CW load of the n x K view) for rows of up to 4S elements
    # (64 f32 with AVX-512, 32 with AVX2); the kernel IR shows the n-row load.
    K = 4096
    lanes = coopjit.cpu_info()["vector_bytes"] // 4  # S for f32
    view = np.ones((K, n), np.float32).T
    ir = coopjit._core.reduce_ir(op, "column", view, np.empty(K, np.float32), "f32", "f32", "f32")
    assert (f"coopmatrix<f32, {n}, " in ir) == (segments and n <= 4 * lanes)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(20, 70_001), (17, 131_072 + 64)])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_down_rows_wider_than_a_block_of_partials(rng, threads, shape, op):
    """Down the columns of rows whose partials outgrow one block (256 KiB of f32: 65536 columns):
    the blocks after the first and the last, partial one, against NumPy in float64."""
    before = coopjit.get_num_threads()
    coopjit.set_num_threads(threads)
    try:
        x = rng.integers(-2, 3, shape).astype(np.float32)
        got = coopjit.reduce(x, 0, op)
    finally:
        coopjit.set_num_threads(before)
    np.testing.assert_array_equal(np.asarray(got, np.float64), getattr(np, op)(x.astype(np.float64), axis=0))


@pytest.mark.parametrize("plan", [{"column_rows.tile_rows": 4, "column_rows.block_cols": 256},
                                  {"column_rows.tile_rows": 3, "column_rows.tile_cols": 32, "column_rows.block_cols": 96},
                                  {"column.split": 0, "column.tile_cols": 64},
                                  {"row.tile_rows": 1, "row.tile_cols": 128, "row.prefetch": 2048, "threads": 1},
                                  {"row.read_past": 0, "row.tile_rows": 2}])
def test_reduce_plan_overrides_give_numpy_results(rng, plan):
    # Plan overrides (for benchmarks' A/B of a plan choice) build other kernels; every one
    # reduces as NumPy does, along both axes and over rows that leave tails; {} restores the
    # planner's choices.
    x = rng.integers(-2, 3, (203, 8193)).astype(np.float32)
    try:
        coopjit._core.reduce_plan_overrides(plan)
        for axis in (0, 1):
            for op in ("sum", "max"):
                got = coopjit.reduce(x, axis, op)
                np.testing.assert_array_equal(np.asarray(got, np.float64), getattr(np, op)(x.astype(np.float64), axis=axis),
                                              err_msg=f"{plan} axis={axis} {op}")
    finally:
        coopjit._core.reduce_plan_overrides({})


def test_reduce_plan_overrides_checked_and_shown_in_the_kernel():
    x = np.ones((64, 4096), np.float32)
    y = np.empty(64, np.float32)
    planner = coopjit._core.reduce_ir("sum", "row", x, y, "f32", "f32", "f32")
    assert "prefetch(" not in planner
    try:
        coopjit._core.reduce_plan_overrides({"row.prefetch": 4096})
        assert "prefetch(4096)" in coopjit._core.reduce_ir("sum", "row", x, y, "f32", "f32", "f32")
        with pytest.raises(ValueError, match="unknown reduce plan override 'row.tile'"):
            coopjit._core.reduce_plan_overrides({"row.tile": 4})
        with pytest.raises(ValueError, match="unknown reduce plan override 'row.split'"):
            coopjit._core.reduce_plan_overrides({"row.split": 0})
        with pytest.raises(ValueError, match=r"tile_rows=0 is out of range \[1, 256\]"):
            coopjit._core.reduce_plan_overrides({"tile_rows": 0})
        assert "prefetch(4096)" in coopjit._core.reduce_ir("sum", "row", x, y, "f32", "f32", "f32")  # (kept)
        coopjit._core.reduce_plan_overrides({"row.tile_cols": 20})  # not a multiple of 8 or 16 lanes: checked at use
        with pytest.raises(ValueError, match="multiple of the vector's"):
            coopjit.reduce(x, 1)
    finally:
        coopjit._core.reduce_plan_overrides({})
    assert coopjit._core.reduce_ir("sum", "row", x, y, "f32", "f32", "f32") == planner


@pytest.mark.parametrize("dtype,n", [(np.int8, 33), (np.int8, 48), (np.uint8, 100), (np.int8, 127), (np.uint8, 65),
                                     (np.int16, 33), (np.int16, 63), (np.int8, 32), (np.int16, 24), (np.float32, 31)])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_short_rows_beyond_segment_tiles_take_the_row_form(rng, monkeypatch, dtype, n, op):
    # Short rows (up to 128 bytes) longer than the column form reads as whole vectors (strides
    # up to 16, segment tiles of up to 4 vectors of accumulator lanes: 32 int64 with AVX-512)
    # take the row form, where the column form gathered them (or, max of int8 rows of 65-127,
    # built a segment tile over coopmatrix.reduce's 4096 elements); the others keep the column form.
    from coopjit import _reduce
    forms = []
    run = _reduce._run
    monkeypatch.setattr(_reduce, "_run", lambda o, form, *a, **k: (forms.append(form), run(o, form, *a, **k))[1])
    K = 5000
    x = rng.integers(0, 100, (K, n)).astype(dtype)
    got = coopjit.reduce(x, 1, op)
    exact = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    np.testing.assert_array_equal(np.asarray(got).astype(exact), getattr(np, op)(x.astype(exact), axis=1))
    # The accumulator: int64 for integer sums, float32 for float32, the dtype itself for max.
    acc = (8 if np.dtype(dtype).kind in "iu" else 4) if op == "sum" else np.dtype(dtype).itemsize
    lanes = coopjit.cpu_info()["vector_bytes"] // acc
    limit = max(16, min(4 * lanes, 4096 // lanes))  # (a segment tile: n x lanes <= 4096 elements)
    assert forms == ["column" if n <= limit else "row"], (forms, limit)
