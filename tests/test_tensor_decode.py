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
    then the blocked decode: index * prod(block) + row-major(coordInBlock), 0 outside the buffer
    (ref_user_decode with that decode function)."""
    lay = ref.normalize_layout(layout)
    size = math.prod(lay.block)

    def blocked(flat, index, block_coord, coord_in_block):
        inner = 0
        for d in range(lay.rank):
            inner = inner * lay.block[d] + coord_in_block[d]
        at = index * size + inner
        return flat[at] if 0 <= at < flat.size else 0

    return ref_user_decode(buffer, rows, cols, layout, blocked, view, clamp_value, dtype=buffer.dtype)


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


# ---- A decode function written by the user (002's DecodeFunc from Python) --------------------

def ref_user_decode(buffer, rows, cols, layout, decode, view=None, clamp_value=0, dtype=np.float32, init=None):
    """002's pseudo-code with a DecodeFunc: each element (not clipped, not out of range under
    Constant, its index inside the buffer: coopjit's rule, 0 otherwise) is
    decode(flat buffer, index, blockCoord, coordInBlock), `decode` a NumPy transcription."""
    lay = ref.normalize_layout(layout)
    v = ref.normalize_view(view, lay)
    flat = buffer.reshape(-1)
    out = np.zeros((rows, cols), dtype) if init is None else init.astype(dtype).copy()
    for r in range(rows):
        for c in range(cols):
            index = ref.matrix_index(v, r, c, cols)
            if index is None:
                continue
            if v is not None:
                index = ref.view_coord_to_linear(v, ref.linear_to_view_coord(v, index))
            kind, bc, cib = ref.span_coord_to_tensor_coord(lay, ref.linear_to_span_coord(lay, index), "load")
            if kind == ref.CONST:
                out[r, c] = clamp_value
                continue
            at = ref.tensor_coord_to_linear(lay, bc)
            out[r, c] = decode(flat, at, bc, cib) if 0 <= at < flat.size else 0
    return out


def q4_decode(b, block, bc, cib):
    """4-bit values packed two to a byte (low nibble first) in blocks of 8 per 4 bytes, minus 8,
    times a scale that depends on the block's row: (block row % 3 + 1) / 4."""
    byte = b.convert(block.load(b.div(cib[1], 2)), "i32")
    nib = b.select(b.eq(b.rem(cib[1], 2), 0), b.rem(byte, 16), b.div(byte, 16))
    scale = b.mul(b.convert(b.add(b.rem(bc[0], 3), 1), "f32"), 0.25)
    return b.mul(b.convert(b.sub(nib, 8), "f32"), scale)


def q4_ref(flat, at, bc, cib):
    i = at + cib[1] // 2
    byte = int(flat[i]) if 0 <= i < flat.size else 0
    nib = byte % 16 if cib[1] % 2 == 0 else byte // 16
    return np.float32((nib - 8) * ((bc[0] % 3 + 1) / 4))


def q4_pack(q):
    """(R, C) nibbles 0..15 as blocks of (1, 8): 4 bytes a block, row-major blocks."""
    R, C = q.shape
    return (q[:, 0::2] + 16 * q[:, 1::2]).astype(np.uint8).reshape(-1)


def test_user_decode_dequantizes_4bit_blocks(rng, device):
    """A decode function reading another type (uint8) than the matrix's (float32): 4-bit values
    packed in blocks, scaled by the block's coordinates. Against the pseudo-code with a NumPy
    transcription of the function, and against NumPy dequantizing the array directly."""
    q = rng.integers(0, 16, (12, 32))
    buf = q4_pack(q)
    lay = coopjit.TensorLayout((12, 32), block=(1, 8), strides=(16, 4))
    got = coopjit.load_matrix(buf, 12, 32, lay, decode=q4_decode, dtype=np.float32, device=device)
    want = ((q - 8) * ((np.arange(12)[:, None] % 3 + 1) / 4)).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, ref_user_decode(buf, 12, 32, lay, q4_ref))
    # a window of it, hanging out of the tensor, every clamp mode
    for clamp in ["constant", "clamp_to_edge", "repeat", "mirror_repeat"]:
        lay = coopjit.TensorLayout((12, 32), block=(1, 8), strides=(16, 4), offsets=(-3, 20), spans=(8, 16),
                                   clamp=clamp, clamp_value=-5)
        got = coopjit.load_matrix(buf, 8, 16, lay, decode=q4_decode, dtype=np.float32, device=device)
        np.testing.assert_array_equal(got, ref_user_decode(buf, 8, 16, lay, q4_ref, clamp_value=-5), err_msg=clamp)


def coords_decode(b, block, bc, cib):
    """The element doubled plus a number made of the coordinates (checks each is the pseudo-code's)."""
    code = b.add(b.add(b.mul(bc[0], 1000), b.mul(bc[1], 100)), b.add(b.mul(cib[0], 10), cib[1]))
    return b.add(b.mul(block.value, 2.0), b.convert(code, "f64"))


def coords_ref(flat, at, bc, cib):
    return flat[at] * 2 + bc[0] * 1000 + bc[1] * 100 + cib[0] * 10 + cib[1]


@pytest.mark.parametrize("clamp", ["constant", "clamp_to_edge", "repeat", "mirror_repeat"])
def test_user_decode_gets_the_documents_coordinates(rng, clamp, device):
    buf = rng.integers(-100, 100, 200).astype(np.float64)  # whole numbers: exact whether or not x * 2 + c fuses
    for offsets, view in [((0, 0), None), ((-2, 3), None),
                          ((1, -1), coopjit.TensorView(dims=(7, 9), permutation=(1, 0), clip=(1, 5, 2, 6)))]:
        lay = coopjit.TensorLayout((10, 9), block=(3, 2), strides=(11, 2), offsets=offsets, spans=(7, 9),
                                   clamp=clamp, clamp_value=0.5)
        got = coopjit.load_matrix(buf, 7, 9, lay, view, decode=coords_decode, device=device)
        want = ref_user_decode(buf, 7, 9, lay, coords_ref, view, clamp_value=0.5, dtype=np.float64)
        np.testing.assert_array_equal(got, want, err_msg=f"offsets {offsets}, view {view}")


def test_user_decode_3d_and_a_matrix_larger_than_the_span(rng, device):
    """rank 3; the matrix has more elements than the span (linearToSpanCoord wraps); int32 result."""
    buf = rng.integers(-50, 50, 64).astype(np.int16)

    def dec(b, block, bc, cib):
        return b.sub(b.mul(b.convert(block.load(cib[2]), "i32"), b.convert(b.add(bc[0], 1), "i32")),
                     b.convert(b.mul(cib[1], 7), "i32"))

    def dec_ref(flat, at, bc, cib):
        i = at + cib[2]
        return (int(flat[i]) if i < flat.size else 0) * (bc[0] + 1) - cib[1] * 7

    lay = coopjit.TensorLayout((3, 4, 6), block=(1, 2, 3), strides=(13, 5, 3), spans=(2, 3, 6))
    got = coopjit.load_matrix(buf, 8, 6, lay, decode=dec, dtype=np.int32, device=device)
    np.testing.assert_array_equal(got, ref_user_decode(buf, 8, 6, lay, dec_ref, dtype=np.int32))


def test_user_decode_at_workgroup_scope(rng):
    device = needs_device()
    q = rng.integers(0, 16, (12, 32))
    buf = q4_pack(q)
    lay = coopjit.TensorLayout((12, 32), block=(1, 8), strides=(16, 4))
    got = coopjit.load_matrix(buf, 12, 32, lay, decode=q4_decode, dtype=np.float32, device=device, subgroups=2)
    np.testing.assert_array_equal(got, ref_user_decode(buf, 12, 32, lay, q4_ref))


def test_user_decode_never_reads_outside_the_buffer(device):
    big = np.full(100, 99, np.uint8)
    buf = big[10:30]
    buf[:] = np.arange(20)

    def dec(b, block, bc, cib):  # reads far past its block
        return b.convert(block.load(b.add(b.mul(cib[1], 9), 5)), "f32")

    lay = coopjit.TensorLayout((16, 16), block=(1, 4), strides=(4, 1))
    got = coopjit.load_matrix(buf, 16, 16, lay, decode=dec, dtype=np.float32, device=device)

    def dec_ref(flat, at, bc, cib):
        i = at + cib[1] * 9 + 5
        return float(flat[i]) if 0 <= i < flat.size else 0.0

    np.testing.assert_array_equal(got, ref_user_decode(buf, 16, 16, lay, dec_ref))
    assert not (got == 99).any(), "read outside the buffer"


def test_user_decode_kernels_are_keyed_by_their_ir(device):
    """Two functions building different IR give their own results (a cache keyed by anything
    less than the IR would hand the second the first's kernel); the same IR, the same result."""
    buf = np.arange(16, dtype=np.float32)
    lay = coopjit.TensorLayout((4, 4))
    for k in (2.0, 3.0, 2.0):
        got = coopjit.load_matrix(buf, 4, 4, lay, decode=lambda b, blk, bc, cib: b.mul(blk.value, k), device=device)
        np.testing.assert_array_equal(got, buf.reshape(4, 4) * k)
    ir = coopjit._core.tensor_access_ir(False, "f32", 4, 4, "undefined", 2, 0, [],
                                        lambda b, blk, bc, cib: b.add(blk.value, 7.0))
    assert "decode(%index" in ir and "add" in ir and "7" in ir


def test_user_decode_errors():
    buf = np.zeros(16, np.float32)
    lay = coopjit.TensorLayout((4, 4))
    with pytest.raises(TypeError, match="must return a f32 value.*got f64|f32.*f64"):
        coopjit.load_matrix(buf, 4, 4, lay, decode=lambda b, blk, bc, cib: b.convert(blk.value, "f64"))
    with pytest.raises(TypeError, match="IR value"):
        coopjit.load_matrix(buf, 4, 4, lay, decode=lambda b, blk, bc, cib: "x")
    with pytest.raises(ValueError, match="decode function raised.*boom"):
        coopjit.load_matrix(buf, 4, 4, lay, decode=lambda b, blk, bc, cib: (_ for _ in ()).throw(RuntimeError("boom")))
    with pytest.raises(TypeError, match="dtype=int32 but the buffer holds float32"):
        coopjit.load_matrix(buf, 4, 4, lay, dtype=np.int32)
    with pytest.raises(ValueError, match="decode function holds scalar operations only"):
        coopjit.load_matrix(buf, 4, 4, lay, decode=lambda b, blk, bc, cib: b.for_range(0, 2, 1, [blk.value],
                                                                                         lambda b, i, x: x)[0])


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_user_decode_ptx_assembles(target):
    """The SIMT lowering's NVIDIA target: the 4-bit decode kernel as PTX, assembled by ptxas (no
    NVIDIA GPU here: generated, not run)."""
    from coopjit import ptx

    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    for subgroups in (1, 2):
        fn = coopjit._core.tensor_access_function(False, "f32", 16, 32, "constant", 2, 0, [], q4_decode, 32,
                                                  subgroups, "u8")
        text = fn.compile_device("target:" + target).source("ptx")
        assert f".target {target}" in text and ".entry" in text
        report = ptx.ptxas(text, target)
        assert "Used" in report and "registers" in report, report
