"""The decode hook of coopmatrix.load_tensor (SPV_NV_cooperative_matrix2 DecodeFunc), exercised
through load_matrix(..., decode="blocked"): blocked (tiled) storage, where the decode function
gets blockCoord and coordInBlock and reads the element inside its block. Every test of a load runs
on the CPU and on opencl:0 (the SIMT lowering; $COOPJIT_TEST_DEVICE names another device)."""
import math

import numpy as np
import pytest

import coopjit
import tensor_reference as ref
from device_support import DEVICE, every_module_passes_spirv_val, needs_device  # noqa: F401 - the fixture


@pytest.fixture(params=["cpu", DEVICE])
def device(request):
    """None (the CPU) or the device the load runs on; skips only when that device is absent."""
    return None if request.param == "cpu" else needs_device()


def ref_blocked_load(buffer, rows, cols, layout, view=None, clamp_value=0):
    """The pseudo-code's addressing (tests/tensor_reference.py) up to blockCoord/coordInBlock,
    then the blocked decode: index * prod(block) + row-major(coordInBlock), 0 outside the buffer."""
    lay = ref.normalize_layout(layout)
    v = ref.normalize_view(view, lay)
    flat = buffer.reshape(-1)
    out = np.zeros((rows, cols), buffer.dtype)
    size = math.prod(lay.block)
    for r in range(rows):
        for c in range(cols):
            index = ref.matrix_index(v, r, c, cols)
            if index is None:
                continue  # clipped: unmodified (0)
            if v is not None:
                index = ref.view_coord_to_linear(v, ref.linear_to_view_coord(v, index))
            kind, bc, cib = ref.span_coord_to_tensor_coord(lay, ref.linear_to_span_coord(lay, index), "load")
            if kind == ref.CONST:
                out[r, c] = clamp_value
                continue
            block_index = ref.tensor_coord_to_linear(lay, bc)
            if not 0 <= block_index < flat.size:
                continue
            inner = 0
            for d in range(lay.rank):
                inner = inner * lay.block[d] + cib[d]
            at = block_index * size + inner
            if 0 <= at < flat.size:
                out[r, c] = flat[at]
    return out


def to_blocked(m, block):
    """A 2-D array stored as row-major blocks (zero-padded to whole blocks), each row-major."""
    bh, bw = block
    h, w = -(-m.shape[0] // bh) * bh, -(-m.shape[1] // bw) * bw
    p = np.zeros((h, w), m.dtype)
    p[: m.shape[0], : m.shape[1]] = m
    return p.reshape(h // bh, bh, w // bw, bw).transpose(0, 2, 1, 3).reshape(-1).copy()


@pytest.mark.parametrize("block", [(1, 1), (2, 2), (4, 2), (1, 8), (3, 5)])
def test_blocked_storage_reads_back_the_matrix(rng, block, device):
    m = rng.standard_normal((13, 19)).astype(np.float32)
    buf = to_blocked(m, block)
    lay = coopjit.TensorLayout(m.shape, block=block)
    got = coopjit.load_matrix(buf, 13, 19, lay, decode="blocked", device=device)
    np.testing.assert_array_equal(got, m)
    np.testing.assert_array_equal(got, ref_blocked_load(buf, 13, 19, lay))


@pytest.mark.parametrize("clamp", ["undefined", "constant", "clamp_to_edge", "repeat", "mirror_repeat"])
def test_blocked_with_offsets_and_clamps(rng, clamp, device):
    m = rng.integers(-100, 100, (12, 10)).astype(np.int32)
    buf = to_blocked(m, (4, 2))
    for offsets in [(0, 0), (3, 1), (-2, 5), (9, -3)]:
        lay = coopjit.TensorLayout((12, 10), block=(4, 2), offsets=offsets, spans=(6, 7), clamp=clamp,
                                   clamp_value=-7)
        got = coopjit.load_matrix(buf, 6, 7, lay, decode="blocked", device=device)
        want = ref_blocked_load(buf, 6, 7, lay, clamp_value=-7)
        if clamp == "undefined":  # out-of-range coordinates are undefined behaviour: compare the rest
            kinds, _ = ref.ref_addresses(6, 7, lay)
            keep = kinds != ref.UNDEF
            np.testing.assert_array_equal(got[keep], want[keep])
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"offsets {offsets}")


def test_blocked_3d_with_a_view(rng, device):
    t = rng.standard_normal((4, 6, 8)).astype(np.float64)
    block = (1, 2, 4)
    blocked = t.reshape(4, 3, 2, 2, 4).transpose(0, 1, 3, 2, 4).reshape(-1).copy()
    lay = coopjit.TensorLayout(t.shape, block=block)
    # rows = the 4*6 (dim0, dim1) pairs, cols = dim2
    got = coopjit.load_matrix(blocked, 24, 8, lay, decode="blocked", device=device)
    np.testing.assert_array_equal(got, t.reshape(24, 8))
    view = coopjit.TensorView(dims=(4, 6, 8), permutation=(1, 0, 2), clip=(2, 15, 1, 6))
    got = coopjit.load_matrix(blocked, 24, 8, lay, view, decode="blocked", device=device)
    np.testing.assert_array_equal(got, ref_blocked_load(blocked, 24, 8, lay, view))


def test_decode_never_reads_outside_the_buffer(rng, device):
    big = np.full(100, 12345.0, np.float32)
    buf = big[10:30]  # 20 elements; blocks of 8 reach far beyond
    buf[:] = np.arange(20)
    lay = coopjit.TensorLayout((16, 16), block=(2, 4), strides=(50, 3))
    got = coopjit.load_matrix(buf, 8, 8, lay, decode="blocked", device=device)
    want = ref_blocked_load(buf, 8, 8, lay)
    np.testing.assert_array_equal(got, want)
    assert not (got == 12345.0).any(), "read a sentinel outside the buffer"


@pytest.mark.parametrize("subgroups", [2, 4])
def test_blocked_at_workgroup_scope(rng, subgroups):
    """The decode function on a workgroup-scope matrix (spread over the subgroups of a work-group
    of the device; 24 rows, no power of two), with a view and Constant clamping."""
    device = needs_device()
    t = rng.standard_normal((4, 6, 8)).astype(np.float32)
    blocked = t.reshape(4, 3, 2, 2, 4).transpose(0, 1, 3, 2, 4).reshape(-1).copy()
    lay = coopjit.TensorLayout(t.shape, block=(1, 2, 4))
    got = coopjit.load_matrix(blocked, 24, 8, lay, decode="blocked", device=device, subgroups=subgroups)
    np.testing.assert_array_equal(got, t.reshape(24, 8))
    lay = coopjit.TensorLayout(t.shape, block=(1, 2, 4), offsets=(1, -2, 3), spans=(3, 4, 8), clamp="constant",
                               clamp_value=9)
    view = coopjit.TensorView(dims=(3, 4, 8), permutation=(1, 0, 2), clip=(2, 15, 1, 6))
    got = coopjit.load_matrix(blocked, 12, 8, lay, view, decode="blocked", device=device, subgroups=subgroups)
    np.testing.assert_array_equal(got, ref_blocked_load(blocked, 12, 8, lay, view, clamp_value=9))


def test_decode_is_in_the_ir_and_load_only():
    ir = coopjit._core.tensor_access_ir(False, "f32", 4, 4, "undefined", 2, 0, [], "blocked")
    assert "decode(%index" in ir and "load %buf[" in ir and "yield %decoded" in ir
    with pytest.raises(ValueError, match="unknown decode 'zigzag'"):
        coopjit.load_matrix(np.zeros(16, np.float32), 4, 4, coopjit.TensorLayout((4, 4)), decode="zigzag")
