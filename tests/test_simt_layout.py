"""The SIMT lowering spreads coopmatrices over the lanes of a subgroup exactly as the coopmatrix
layout of seeds/001 says: kernels running on opencl:0 write, for every element of a loaded matrix,
the lane and the component that hold it (HLSL 0035 Length / Set per invocation, the lane from
id.lane), and the result is compared with coopjit.layout.coopmatrix(...).table(), which the
layout tests check against the document's tables. Every module passes spirv-val."""
import numpy as np
import pytest

import coopjit
from coopjit.ir import KernelBuilder
from coopjit.layout import coopmatrix

from device_support import (every_module_passes_spirv_val, lanes, lanes_cases, needs_device,  # noqa: F401 - the fixture
                            subgroup_sizes, validated)

NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "u8": np.uint8, "i16": np.int16,
      "i32": np.int32, "bf16": np.uint16}


def ownership(rows, cols, use, dtype, S, what):
    """out[r, c] = the lane ("lane") or the component ("comp") holding element (r, c) on the device."""
    device = needs_device()
    t = f"coopmatrix<{dtype}, {rows}, {cols}, {use}, subgroup>"
    b = KernelBuilder(f"owner_{what}", S)
    X = b.param("X", f"ptr<{dtype}>")
    O = b.param("O", f"ptr<{dtype}>")
    m = b.load(t, X, strides=(cols, 1))
    lane = b.work_id("lane")

    def body(bb, i, m):
        v = lane if what == "lane" else i
        return bb.set(m, i, bb.convert(v, dtype))

    m = b.for_range(0, b.length(m), 1, [m], body)[0]
    # A checked store into a bigger buffer: nothing lands outside rows x cols.
    b.store(m, O, strides=(cols + 3, 1), bounds=(rows, cols), checked=True)
    k = b.compile(device=device)
    validated(k.spirv)
    assert k.subgroup_size == S
    out = np.full((rows + 2, cols + 3), 99, NP[dtype])
    k(np.zeros((rows, cols), NP[dtype]), out)
    assert (out[rows:] == 99).all() and (out[:, cols:] == 99).all()
    if dtype == "bf16":  # bf16 bits of small integers
        out = (out.astype(np.uint32) << 16).view(np.float32)
    return out[:rows, :cols].astype(np.int64)


def expected(rows, cols, use, dtype, S):
    """(lane, component) of every element from the layout's table; component = v * channels + c."""
    cm = coopmatrix(rows, cols, use, dtype, S)
    table = cm.table()
    if not cm.vnni:
        table = table[:, :, None, :]
    lane = np.full((rows, cols), -1)
    comp = np.full((rows, cols), -1)
    V, _, ch, _ = table.shape
    for v in range(V):
        for p in range(S):
            for c in range(ch):
                r, col = table[v, p, c]
                if r >= 0:
                    lane[r, col] = p
                    comp[r, col] = v * ch + c
    assert (lane >= 0).all()
    return lane, comp


CASES = [
    # the document's two tables (4 x 15 and 1 x 17, S = 16) for each use
    (4, 15, "b", "f32", 16), (1, 17, "b", "f32", 16), (4, 15, "acc", "f32", 16), (1, 17, "a", "f32", 16),
    # I = S: rows over the lanes, K = M / S components per column
    (32, 8, "acc", "f32", 16), (32, 8, "a", "f64", 16), (16, 3, "b", "f32", 16),
    # subgroup sizes 8 and 32
    (8, 5, "acc", "f32", 8), (4, 9, "acc", "f32", 32), (64, 2, "b", "f32", 32),
    # VNNI: matrix_a of f16 / bf16 (omega 2) and i8 (omega 4); odd N: no VNNI
    (8, 32, "a", "f16", 16), (32, 4, "a", "bf16", 16), (4, 8, "a", "i8", 16), (2, 12, "a", "u8", 16),
    (8, 7, "a", "f16", 16),
    # matrix_b's K1 = omega_b = 2 for 1-byte types when M / S > 1
    (32, 4, "b", "i8", 16), (64, 2, "b", "u8", 16),
    # 16-bit and 32-bit integers
    (16, 6, "acc", "i16", 16), (2, 24, "acc", "i32", 16),
]


@pytest.mark.parametrize("rows, cols, use, dtype, S", lanes_cases(CASES))  # S: a size the device runs
def test_lanes_hold_the_layout_tables_elements(rows, cols, use, dtype, S):
    want_lane, want_comp = expected(rows, cols, use, dtype, S)
    np.testing.assert_array_equal(ownership(rows, cols, use, dtype, S, "lane"), want_lane)
    np.testing.assert_array_equal(ownership(rows, cols, use, dtype, S, "comp"), want_comp)


def test_document_table_4x15_by_hand():
    # The first line of the document's table for the 4 x 15 matrix_b, S = 16: lane p holds
    # (p % 4, p // 4) in component 0; lanes 12..15 of component 3 are padding.
    if lanes(16) != 16:
        pytest.skip(f"the document's table is for subgroups of 16; the device runs {subgroup_sizes()}")
    lane = ownership(4, 15, "b", "f32", 16, "lane")
    comp = ownership(4, 15, "b", "f32", 16, "comp")
    for p in range(16):
        assert lane[p % 4, p // 4] == p and comp[p % 4, p // 4] == 0
    assert comp[0, 12] == 3 and lane[0, 12] == 0 and lane[3, 14] == 11


def test_coordinates_and_values_round_trip():
    # get_coordinate(m, i) of each component, written through set(): element (r, c) holds r * 100 + c;
    # and a plain load / store keeps every value.
    device = needs_device()
    rows, cols = 8, 20
    t = f"coopmatrix<f32, {rows}, {cols}, b, subgroup>"
    b = KernelBuilder("coords", lanes(16))
    X = b.param("X", "ptr<f32>")
    O = b.param("O", "ptr<f32>")
    P = b.param("P", "ptr<f32>")
    m = b.load(t, X, strides=(cols, 1))
    b.store(m, P, strides=(cols, 1))

    def body(bb, i, m):
        r, c = bb.get_coordinate(m, i)
        return bb.set(m, i, bb.convert(bb.add(bb.mul(r, 100), c), "f32"))

    m = b.for_range(0, b.length(m), 1, [m], body)[0]
    b.store(m, O, strides=(cols, 1))
    k = b.compile(device=device)
    validated(k.spirv)
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    o, p = np.zeros_like(x), np.zeros_like(x)
    k(x, o, p)
    np.testing.assert_array_equal(p, x)
    np.testing.assert_array_equal(o, np.add.outer(np.arange(rows) * 100, np.arange(cols)).astype(np.float32))


def test_ids_of_work_groups_and_subgroups():
    # 5 work-groups of one subgroup: each writes group * 1000 + subgroup * 10 + subgroups into
    # row group * subgroups + subgroup.
    device = needs_device()
    S = lanes(16)
    b = KernelBuilder("ids", S)
    O = b.param("O", "ptr<f32>")
    g, s, n = b.work_id("group"), b.work_id("subgroup"), b.work_id("subgroups")
    v = b.add(b.add(b.mul(g, 1000), b.mul(s, 10)), n)
    m = b.splat(f"coopmatrix<f32, 1, {S}, acc, subgroup>", b.convert(v, "f32"))
    b.store(m, O, row=b.add(b.mul(g, n), s), strides=(S, 1))
    k = b.compile(device=device)
    out = np.zeros((5, S), np.float32)
    k(out, groups=5)  # user kernels: one subgroup per work-group
    np.testing.assert_array_equal(out, np.repeat(np.arange(5)[:, None] * 1000 + 1, S, axis=1).astype(np.float32))
