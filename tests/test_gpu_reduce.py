"""coopjit.reduce and reduce2x2 on opencl:0 (the SIMT lowering's SPIR-V) against NumPy: every op and
axis in float32 / float64 (references in float64), integer and half-precision types, views of
device memory read through their strides, NaN, and the kernels' SPIR-V (spirv-val)."""
import re

import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit import _core

from device_support import (device_empty, every_module_passes_spirv_val, host_visible, is_spirv, lanes,  # noqa: F401 - the fixture
                            needs_device, validated)
from test_reduce import NP, OPS, check, data

# Half of the 4 x 4 type / op pairs (each pair compiles its own kernels in the CPU OpenCL
# runtime, the slowest part of these tests): every type with sum (the accumulating reduction,
# widened for float16) and with one of prod / min / max, every op on at least one type.
HALF_OF_TYPES_X_OPS = [(np.float32, "sum"), (np.float32, "prod"), (np.float64, "sum"), (np.float64, "max"),
                       (np.int32, "sum"), (np.int32, "min"), (np.float16, "sum"), (np.float16, "max")]
assert {op for _, op in HALF_OF_TYPES_X_OPS} == set(OPS)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", OPS)
def test_all_axes_match_numpy(rng, dtype, op):
    dev = needs_device()
    x = data(rng, (7, 45, 19), dtype, op)
    for axis in (None, 0, 1, 2, (0, 1), (1, 2)):
        check(coopjit.reduce(x, axis=axis, op=op, device=dev), x, axis, op)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.float16, ml_dtypes.bfloat16])
def test_other_types(rng, dtype):
    dev = needs_device()
    for op in ("sum", "max"):
        x = data(rng, (9, 70), dtype, op)
        for axis in (None, 0, 1):
            check(coopjit.reduce(x, axis=axis, op=op, device=dev), x, axis, op)


@pytest.mark.parametrize("op", OPS)
def test_long_rows_and_one_value(rng, op):
    dev = needs_device()
    x = data(rng, (20_011,), np.float32, op)
    if op == "prod":
        x = (1 + (x - 1) * 1e-4).astype(np.float32)
    check(coopjit.reduce(x, op=op, device=dev), x, None, op)
    y = data(rng, (3, 5_003), np.float64, op)
    check(coopjit.reduce(y, axis=1, op=op, device=dev), y, 1, op)
    check(coopjit.reduce(y, axis=0, op=op, device=dev), y, 0, op)


@pytest.mark.parametrize("dtype,op", HALF_OF_TYPES_X_OPS)
def test_few_tiles_split_the_reduced_dimension(rng, dtype, op):
    """Few long rows, or columns of a long array: each tile's rows / columns are split among
    workers (plan parts > 1: the kernel key ends in .split) whose partials a second pass reduces;
    every op, tails of the parts, strided views and out=, against NumPy in float64."""
    dev = needs_device()
    for shape, axis in (((4, 60_001), 1), ((30_011, 40), 0), ((3, 9_000), 1), ((12_345, 70), 0)):
        x = data(rng, shape, dtype, op)
        if op == "prod":
            x = (1 + (x.astype(np.float64) - 1) * 1e-4).astype(dtype) if dtype != np.int32 else np.ones(shape, dtype)
        check(coopjit.reduce(x, axis=axis, op=op, device=dev), x, axis, op)
        v = x[::-1, 1:] if axis == 1 else x[1::2, ::-1]
        check(coopjit.reduce(v, axis=axis, op=op, device=dev), v, axis, op)
    keys = [p.key for p in _core.device_programs() if p.key.startswith(dev + "|gpureduce")]
    assert any(".row." in k and k.endswith(".split|" + k.split("|")[-1]) for k in keys), keys
    assert any(".column." in k and ".split|" in k for k in keys), keys
    out = np.full(40, 7.0)[::-1]
    x = data(rng, (30_011, 40), np.float64, "sum")
    assert coopjit.reduce(x, axis=0, out=out, device=dev) is out
    check(out, x, 0, "sum")


def _narrow_keys(dev, form, cols):
    """The kernel keys of the narrow plans (a tile of k*S rows x all `cols` columns) run so far."""
    S = lanes(16)
    return [p.key for p in _core.device_programs() if p.key.startswith(dev + "|gpureduce")
            and f".{form}." in p.key and any(f".t{k * S}x{cols}." in p.key for k in (1, 2, 4, 8, 16))]


@pytest.mark.parametrize("dtype,op", HALF_OF_TYPES_X_OPS)
def test_narrow_arrays(rng, dtype, op):
    """Arrays of a few columns (plans of k*S whole rows a tile: each lane reads its rows' columns,
    vector loads where aligned): along the rows and down the columns, every op, tails of the rows
    and odd column counts, views (rows skipped, columns reversed, column-major, rows not
    16-byte aligned), out=; the input unchanged; against NumPy in float64 / exact integers."""
    dev = needs_device()

    def arr(shape):
        x = data(rng, shape, dtype, op)
        if op == "prod":
            x = (1 + (x.astype(np.float64) - 1) * 1e-4).astype(dtype) if dtype != np.int32 else np.ones(shape, dtype)
        return x

    x = arr((3001, 4))  # the column form splits the rows
    keep = x.copy()
    for v in (x, x[::3], x[::-1]):
        for axis in (1, 0):
            check(coopjit.reduce(v, axis=axis, op=op, device=dev), v, axis, op)
    np.testing.assert_array_equal(x, keep)
    assert _narrow_keys(dev, "row", 4) and _narrow_keys(dev, "column", 4)
    x = arr((1000, 3))
    for v in (np.asfortranarray(x), x[:, ::-1]):  # lanes down unit-stride rows; reversed columns
        for axis in (1, 0):
            check(coopjit.reduce(v, axis=axis, op=op, device=dev), v, axis, op)
    x = arr((2000, 5))
    for v in (x[:, :4], x[:, 1:5]):  # row strides of 20 bytes (f32): the loads one by one
        for axis in (1, 0):
            check(coopjit.reduce(v, axis=axis, op=op, device=dev), v, axis, op)
    x = arr((1500, 4))
    want_dt = np.asarray(coopjit.reduce(x[:2], axis=0, op=op, device=dev)).dtype
    out = np.full(8, 7, want_dt)[::-2]
    assert coopjit.reduce(x, axis=0, op=op, out=out, device=dev) is out
    check(out, x, 0, op)
    out = np.full(3000, 7, want_dt)[::2]
    assert coopjit.reduce(x, axis=1, op=op, out=out, device=dev) is out
    check(out, x, 1, op)


@pytest.mark.parametrize("cols", [2, 6, 16, 33, 64])
def test_narrow_widths(rng, cols):
    """The narrow plans across widths up to 64 columns (float32 sums and maxima of float64), both
    axes, the column form long enough to split its rows among workers; views (rows reversed, 5 of the columns)."""
    dev = needs_device()
    for dtype, op in ((np.float32, "sum"), (np.float64, "max")):
        x = data(rng, (40_003, cols), dtype, op)
        for axis in (1, 0):
            check(coopjit.reduce(x, axis=axis, op=op, device=dev), x, axis, op)
        v = x[::-2, 1:6] if cols >= 6 else x[::-2]
        for axis in (1, 0):
            check(coopjit.reduce(v, axis=axis, op=op, device=dev), v, axis, op)
    keys = _narrow_keys(dev, "column", cols)
    assert any(".split|" in k for k in keys), keys


@pytest.mark.parametrize("dtype, op", [(np.int8, "sum"), (np.uint8, "max"), (ml_dtypes.bfloat16, "sum")])
def test_narrow_small_types(rng, dtype, op):
    """The narrow plans on 1- and 2-byte inputs (accumulated in 32 bits): 4-byte and 8-byte vector
    loads along both axes, a view of 3 columns from odd rows."""
    dev = needs_device()
    x = data(rng, (3001, 4), dtype, op)
    for v in (x, x[1::2, 1:]):
        for axis in (1, 0):
            check(coopjit.reduce(v, axis=axis, op=op, device=dev), v, axis, op)


def test_narrow_loads_are_vectors(rng):
    """A 4-column float32 row sum reads each lane's row with one 16-byte load (PTX ld.global.v4,
    SPIR-V a load of a 4-vector); also the PTX for sm_90, generated here."""
    dev = needs_device()
    shape = (4096, 4)
    prog = _core.gpu_reduce_program(dev, "sum", "row", ["f32", "f32", "f32"], list(shape), [4, 1, 0, 1])
    text = prog.source("spirv" if is_spirv() else "ptx")
    ptx = _core.gpu_reduce_program("target:sm_90", "sum", "row", ["f32", "f32", "f32"], list(shape), [4, 1, 0, 1])
    assert re.search(r"ld\.global(\.nc)?\.v4\.[bf]32", ptx.source("ptx"))
    if is_spirv():
        assert re.search(r"OpTypeVector %float 4", text) and "OpLoad %v4float" in text, text[:2000]
    else:
        assert re.search(r"ld\.global(\.nc)?\.v4\.[bf]32", text), text[:2000]


def test_device_views_and_out(rng):
    dev = needs_device()
    base = device_empty((40, 60), np.float64)  # (host memory, copied, where the host cannot reach the device's)
    base[...] = rng.standard_normal((40, 60))
    for x in (base[::-2, 3:50:3], base.T[5:, ::-1], base[:, 7], np.broadcast_to(base[0], (9, 60))):
        for axis in (None, 0, -1):
            if axis not in (None, 0) and x.ndim == 1:
                continue
            check(coopjit.reduce(x, axis=axis, device=dev), x, axis, "sum")
    out = np.zeros(60)[::-1]
    assert coopjit.reduce(base, axis=0, out=out, device=dev) is out
    np.testing.assert_allclose(out, np.asarray(base).sum(0))


def test_nan_propagates_like_numpy():
    dev = needs_device()
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    x[1, 2] = np.nan
    for op in OPS:
        for axis in (None, 0, 1):
            got, want = coopjit.reduce(x, axis=axis, op=op, device=dev), NP[op](x, axis=axis)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_reduce2x2(rng, op, dtype):
    dev = needs_device()
    for x in (data(rng, (34, 70), dtype, op), data(rng, (70, 34), dtype, op).T):  # unit and other strides
        got = coopjit.reduce2x2(x, op, device=dev)
        blocks = np.asarray(x).reshape(x.shape[0] // 2, 2, x.shape[1] // 2, 2)
        want = NP[op](blocks.astype(np.float64) if x.dtype.kind == "f" else blocks, axis=(1, 3))
        if x.dtype.kind == "f":
            mag = np.abs(blocks.astype(np.float64)).sum(axis=(1, 3)) if op == "sum" else np.abs(want)
            assert np.all(np.abs(got.astype(np.float64) - want) <= 4 * np.finfo(x.dtype).eps * mag)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("form, shape", [("row", (37, 100)), ("column", (100, 37)), ("2x2", (18, 40))])
def test_kernels_validate_and_use_subgroups(rng, form, shape):
    dev = needs_device()
    host = rng.standard_normal(shape).astype(np.float32)
    yshape = (shape[0] // 2, shape[1] // 2) if form == "2x2" else (shape[0] if form == "row" else shape[1],)
    if host_visible():
        x = coopjit.empty(shape, np.float32, device=dev)
        x[...] = host
        y = coopjit.empty(yshape, np.float32, device=dev)
        xp, yp = x.ctypes.data, y.ctypes.data
    else:  # device memory the host cannot reach (CUDA): coopjit.DeviceArray, read back by copies
        x, y = coopjit.DeviceArray.from_host(host, dev), coopjit.DeviceArray(yshape, np.float32, dev)
        xp, yp = (d.__cuda_array_interface__["data"][0] for d in (x, y))
    sy = [yshape[1], 1] if form == "2x2" else [0, 1]  # y in C order
    prog = _core.gpu_reduce(dev, "sum", form, ["f32", "f32", "f32"], list(shape), [shape[1], 1, *sy], xp, yp)
    y = np.asarray(y)
    validated(prog.spirv)
    S = lanes(16)
    assert prog.subgroup_size == S and prog.work_group_size == 4 * S
    assert "coopmatrix.reduce" in prog.source("ir")
    text = prog.source("spirv" if is_spirv() else "ptx")
    if is_spirv():
        assert "SubgroupSize 16" in text
    if form == "row":  # the lanes of a row combine by xor butterflies
        assert ("OpSubgroupShuffleXorINTEL" if is_spirv() else "shfl.sync.bfly") in text
        np.testing.assert_allclose(y, np.asarray(x, np.float64).sum(1), rtol=1e-5)
    elif form == "column":
        np.testing.assert_allclose(y, np.asarray(x, np.float64).sum(0), rtol=1e-5)
    else:
        np.testing.assert_allclose(y, np.asarray(x, np.float64).reshape(9, 2, 20, 2).sum((1, 3)), rtol=1e-5)
