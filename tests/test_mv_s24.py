"""Matrix-vector products (issue 14, session 24): the dot walk's row sums as a tree and its
prefetches of A (b_prefetch), and a column-major A times a vector taken in the "col" orientation
(the vector-matrix product's k_outer nest), against NumPy in float64; the plans chosen for this CPU
and, through cross_compile, for others."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16


def _check(c, a, b):
    # Every product of one row of A and the vector in float64, with a bound from the magnitudes: the
    # accumulator's rounding over K terms (any order) plus the output's.
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    acc_eps = np.finfo(np.float64 if a.dtype == np.float64 else np.float32).eps
    out_eps = np.finfo(c.dtype).eps if c.dtype != BF16 else 2.0**-8
    err = np.abs(c.astype(np.float64) - ref)
    assert c.shape == ref.shape
    assert np.all(err <= (a.shape[-1] + 2) * acc_eps * mag + out_eps * np.abs(ref) + 1e-30), err.max()


def _threads(*counts):
    keep = coopjit.get_num_threads()
    for t in counts:
        coopjit.set_num_threads(t)
        yield t
    coopjit.set_num_threads(keep)


def _cfg(a, b, plan=None):
    c = np.empty((a.shape[0], b.shape[1]), np.float64 if a.dtype == np.float64 else np.float32)
    types = {np.dtype(np.float32): ["f32"] * 3, np.dtype(np.float64): ["f64"] * 3, np.dtype(BF16): ["bf16", "bf16", "f32"],
             np.dtype(np.float16): ["f16", "f16", "f32"]}[a.dtype]
    return coopjit._core.gemm_plan(a, b, c, False, types, plan or {})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16, np.float16])
@pytest.mark.parametrize("m,k", [(4096, 4096), (1001, 777), (9, 4100), (37, 65), (8, 65), (130, 2051)])
def test_dot_walk_tree_sums(rng, dtype, m, k):
    # The dot walk's row sums in any order (a tree over the lanes): rows that are not a multiple of
    # the tile (M edge), K tails of every size, each worker count; against NumPy in float64.
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    x = rng.uniform(-1, 1, (k, 1)).astype(dtype)
    assert _cfg(a, x)["order"] == "dot"
    for _ in _threads(1, 2, 3):
        _check(coopjit.matmul(a, x), a, x)
    # The 1-D form (NumPy's semantics: a vector out)
    c = coopjit.matmul(a, x[:, 0])
    assert c.shape == (m,)
    _check(c[:, None], a, x)


def test_dot_walk_tree_sums_of_large_terms(rng):
    # Rows whose lanes hold terms of very different sizes: a tree and a chain give different
    # roundings, both within the bound; the bound itself fails for a result off by one term.
    k = 4096
    a = rng.uniform(-1, 1, (64, k)).astype(np.float32)
    a[:, ::97] *= 1e6
    x = rng.uniform(-1, 1, (k, 1)).astype(np.float32)
    c = coopjit.matmul(a, x)
    _check(c, a, x)
    bad = c.copy()
    bad[5, 0] += np.float32(a[5, 0] * x[0, 0] * 1e6 + 1e6)
    with pytest.raises(AssertionError):
        _check(bad, a, x)


@pytest.mark.parametrize("ahead", [0, 64, 1024, 4096, 8192])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
@pytest.mark.parametrize("m,k", [(300, 4096), (1027, 999), (13, 16384)])
def test_dot_walk_prefetch_of_a(rng, ahead, dtype, m, k):
    # b_prefetch in the dot walk prefetches A's rows (never faults, past A's end too): the same
    # product for every distance, and the distance is part of the plan.
    a = rng.uniform(-1, 1, (m, k)).astype(dtype)
    x = rng.uniform(-1, 1, (k, 1)).astype(dtype)
    plan = {"b_prefetch": ahead}
    cfg = _cfg(a, x, plan)
    assert cfg["order"] == "dot" and int(cfg["b_prefetch"]) == ahead, cfg
    for _ in _threads(1, 2):
        _check(coopjit.matmul(a, x, plan=plan), a, x)


def test_dot_walk_prefetch_with_beta_and_strided_c(rng):
    # gemm with beta into a column of a wider C (the dot walk's C stride), prefetching.
    m, k = 515, 3000
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    x = rng.uniform(-1, 1, (k, 1)).astype(np.float32)
    big = rng.uniform(-1, 1, (m, 3)).astype(np.float32)
    keep = big.copy()
    c = big[:, 1:2]
    coopjit.gemm(a, x, c, alpha=2.0, beta=-0.5, plan={"b_prefetch": 1024})
    ref = 2.0 * (a.astype(np.float64) @ x.astype(np.float64)) - 0.5 * keep[:, 1:2].astype(np.float64)
    mag = 2.0 * (np.abs(a.astype(np.float64)) @ np.abs(x.astype(np.float64))) + 0.5 * np.abs(keep[:, 1:2])
    assert np.all(np.abs(c - ref) <= (k + 4) * np.finfo(np.float32).eps * mag)
    np.testing.assert_array_equal(big[:, [0, 2]], keep[:, [0, 2]])  # the other columns untouched


def test_dot_walk_prefetch_default():
    # The default of the dot walk: 1 KiB ahead on Zen 5 below 8 workers, none on more cores or other
    # CPUs (not measured there).
    a, x = np.ones((4096, 4096), np.float32), np.ones((4096, 1), np.float32)
    for threads in (1, 2, 4):
        cfg = coopjit.cross_compile(a, x, cpu="znver5", threads=threads, code=False)["config"]
        assert cfg["order"] == "dot" and int(cfg["b_prefetch"]) == 1024, (threads, cfg)
    assert int(coopjit.cross_compile(a, x, cpu="znver5", threads=8, code=False)["config"]["b_prefetch"]) == 0
    for other in ("znver4", "sapphirerapids", "skylake"):
        cfg = coopjit.cross_compile(a, x, cpu=other, threads=2, code=False)["config"]
        assert cfg["order"] == "dot" and int(cfg["b_prefetch"]) == 0, (other, cfg)
    # this CPU: as its name and worker count say
    want = 1024 if coopjit.cpu_info()["name"] == "znver5" and coopjit.get_num_threads() < 8 else 0
    assert int(coopjit.compile_gemm(4096, 1, 4096, np.float32).config["b_prefetch"]) == want


def test_b_prefetch_on_other_walks_names_them():
    a, x = np.ones((100, 600), np.float32), np.ones((600, 1), np.float32)
    with pytest.raises(ValueError, match="b_prefetch=64 prefetches B's rows in the unpacked blocked nest .*"
                                         "or A's in the dot walk .*the plan's walk is m_inner"):
        coopjit.matmul(a, x, plan={"order": "m_inner", "b_prefetch": 64})
    with pytest.raises(ValueError, match="b_prefetch=100 must be a multiple of 64 bytes"):
        coopjit.matmul(a, x, plan={"b_prefetch": 100})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, BF16])
@pytest.mark.parametrize("m,k", [(4096, 4096), (1000, 777), (300, 2000), (65, 70), (2049, 513)])
def test_column_major_a_times_vector(rng, dtype, m, k):
    # A column-major A times a vector: the "col" orientation (the kernel's B is A^T, row-major: the
    # k_outer nest where it is skinny enough), every worker count, against NumPy in float64.
    a = np.asfortranarray(rng.uniform(-1, 1, (m, k)).astype(dtype))
    x = rng.uniform(-1, 1, (k, 1)).astype(dtype)
    assert _cfg(a, x)["layout"] == "col"
    for _ in _threads(1, 2, 3):
        _check(coopjit.matmul(a, x), a, x)
        _check(coopjit.matmul(a.T.T, x[:, 0])[:, None], a, x)  # 1-D x
        _check(coopjit.matmul(x.T, a.T).T, a, x)  # the same product written as x^T A^T (already "col")


def test_column_major_a_plans():
    # The plans: 4096 x 4096 column-major A times x takes the vector-matrix product's nest (K split
    # among 2-7 workers); a row-major A keeps the dot walk; small products (every dimension up to
    # 64), batches and a one-element C keep "row".
    a = np.asfortranarray(np.ones((4096, 4096), np.float32))
    x = np.ones((4096, 1), np.float32)
    cfg = coopjit.cross_compile(a, x, cpu="znver5", threads=2, code=False)["config"]
    assert (cfg["layout"], cfg["order"], int(cfg["ksplit"])) == ("col", "k_outer", 2), cfg
    cfg = coopjit.cross_compile(np.ascontiguousarray(a), x, cpu="znver5", threads=2, code=False)["config"]
    assert (cfg["layout"], cfg["order"]) == ("row", "dot"), cfg
    assert _cfg(np.asfortranarray(np.ones((64, 64), np.float32)), np.ones((64, 1), np.float32))["layout"] == "row"
    assert _cfg(np.asfortranarray(np.ones((1, 4096), np.float32)), np.ones((4096, 1), np.float32))["layout"] == "row"
    # plan layout='row' still takes the row orientation
    assert _cfg(a, x, {"layout": 0})["layout"] == "row"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_major_a_with_beta_strided_c(rng, dtype):
    # beta and a column of a wider C (C^T's stride in "col"), and a strided x.
    m, k = 700, 1500
    a = np.asfortranarray(rng.uniform(-1, 1, (m, k)).astype(dtype))
    x = rng.uniform(-1, 1, (2 * k, 1)).astype(dtype)[::2]
    big = rng.uniform(-1, 1, (m, 4)).astype(dtype)
    keep = big.copy()
    c = big[:, 2:3]
    coopjit.gemm(a, x, c, alpha=1.5, beta=0.25)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    ref = 1.5 * (a64 @ x64) + 0.25 * keep[:, 2:3]
    mag = 1.5 * (np.abs(a64) @ np.abs(x64)) + 0.25 * np.abs(keep[:, 2:3])
    assert np.all(np.abs(c - ref) <= (k + 4) * np.finfo(dtype).eps * mag)
    np.testing.assert_array_equal(big[:, [0, 1, 3]], keep[:, [0, 1, 3]])


@pytest.mark.parametrize("ta,tb", [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("m,k", [(4096, 4096), (1001, 777), (300, 2000)])
def test_column_major_a_times_vector_integers(rng, ta, tb, m, k):
    # Integer inputs in "col" (the kernel's A and B types swap places): exact against NumPy in int64.
    a = np.asfortranarray(rng.integers(np.iinfo(ta).min, np.iinfo(ta).max + 1, (m, k)).astype(ta))
    x = rng.integers(np.iinfo(tb).min, np.iinfo(tb).max + 1, (k, 1)).astype(tb)
    assert coopjit._core.gemm_plan(a, x, np.empty((m, 1), np.int32), False, [np.dtype(ta).name.replace("int", "i").replace("ui", "u"),
                                   np.dtype(tb).name.replace("int", "i").replace("ui", "u"), "i32"], {})["layout"] == "col"
    for _ in _threads(1, 2):
        np.testing.assert_array_equal(coopjit.matmul(a, x), a.astype(np.int64) @ x.astype(np.int64))
