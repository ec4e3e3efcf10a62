"""a @ w.T (a B with a run-time column stride) past two row tiles is packed (session 35): the unpacked
tile walk transposed B's K steps again for every row tile. The planner's rule on several CPUs and
worker counts (and where it does not apply), and the packed products against NumPy in float64:
column-major B, a B of strided columns, f32 and f64, 1 and 2 workers, edge tiles."""
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close


def _config(m, n, k, dtype=np.float32, cpu="emeraldrapids", threads=2, layout="col"):
    a = np.zeros((m, k), dtype)
    b = np.zeros((n, k), dtype).T if layout == "col" else np.zeros((k, n), dtype)
    return coopjit.cross_compile(a, b, cpu=cpu, threads=threads, code=False)["config"]


@pytest.mark.parametrize("cpu", ["emeraldrapids", "znver4", "znver5"])
@pytest.mark.parametrize("m,n,k,threads", [(72, 56, 48, 2), (64, 64, 64, 2), (128, 128, 128, 2), (200, 200, 200, 2),
                                           (256, 256, 256, 2), (300, 200, 100, 2), (513, 129, 700, 2),
                                           (2048, 64, 256, 2), (200, 200, 200, 16), (256, 256, 256, 16),
                                           (513, 129, 700, 16), (64, 64, 64, 16)])
def test_column_major_b_past_two_row_tiles_is_packed(cpu, m, n, k, threads):
    cfg = _config(m, n, k, cpu=cpu, threads=threads)
    assert cfg["unit_stride_b"] is False and cfg["pack"] is True, (cpu, m, n, k, threads, cfg)
    # the same shapes with a row-major B keep their plans (unpacked up to 256 in every dimension)
    if max(m, n, k) < 256 and threads == 2:
        assert _config(m, n, k, cpu=cpu, threads=threads, layout="row")["pack"] is False


@pytest.mark.parametrize("m,n,k,threads,why", [
    (100, 37, 250, 2, "under 48 columns"),
    (128, 128, 128, 16, "under 0.35 MFLOP a worker"),
    (12, 200, 300, 1, "two row tiles or fewer"),
    (32, 32, 32, 1, "under 0.35 MFLOP"),
])
def test_where_the_rule_does_not_apply(m, n, k, threads, why):
    cfg = _config(m, n, k, threads=threads)
    assert cfg["unit_stride_b"] is False and cfg["pack"] is False, (why, cfg)


def test_a_named_walk_or_pack_is_kept():
    a = np.zeros((200, 200), np.float32)
    b = np.zeros((200, 200), np.float32).T
    for plan in ({"pack": 0}, {"order": "m_inner"}, {"fixed": 1}):
        cfg = coopjit.cross_compile(a, b, cpu="znver4", threads=2, plan=plan, code=False)["config"]
        assert cfg["pack"] is False, plan


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(72, 56, 48), (64, 64, 64), (200, 200, 200), (133, 129, 301), (300, 200, 100)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("form", ["col", "strided"])
def test_packed_products_match_numpy(dtype, m, n, k, threads, form, rng):
    a = rng.standard_normal((m, k)).astype(dtype)
    if form == "col":
        b = rng.standard_normal((n, k)).astype(dtype).T
    else:  # every other column of a wider row-major array
        b = rng.standard_normal((k, 2 * n)).astype(dtype)[:, ::2]
    b0 = b.copy()
    c = np.full((m, n), np.nan, dtype)
    coopjit.matmul(a, b, out=c, plan={"threads": threads})
    assert_gemm_close(c, a, b)
    np.testing.assert_array_equal(b, b0)  # the input unmodified
