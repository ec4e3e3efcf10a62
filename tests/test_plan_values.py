"""Kernel.config is a plan value (coopjit.Plan): typed fields, and plan= takes it back."""
import ml_dtypes
import numpy as np
import pytest

import coopjit

BF16 = ml_dtypes.bfloat16
PROBLEMS = [
    (64, 64, 64, np.float32, {}),
    (300, 200, 100, np.float32, {}),
    (513, 129, 700, np.float64, {}),
    (1, 4096, 512, np.float32, {}),
    (256, 256, 256, np.float32, {"split": "sk", "threads": 2}),
    (256, 256, 256, BF16, {"out_dtype": np.float32}),
    (128, 128, 256, np.int8, {}),
    (40, 2048, 2048, np.float32, {}),
]


def _random(rng, shape, dtype):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-100, 100, shape).astype(dtype)
    return rng.uniform(-1, 1, shape).astype(dtype)


@pytest.mark.parametrize("m,n,k,dtype,kw", PROBLEMS)
def test_config_round_trips_through_plan(rng, m, n, k, dtype, kw):
    kw = dict(kw)
    plan = {key: kw.pop(key) for key in ("split", "threads") if key in kw}
    kern = coopjit.compile_gemm(m, n, k, dtype, plan=plan or None, **kw)
    cfg = kern.config
    assert isinstance(cfg, coopjit.Plan) and isinstance(cfg, dict)
    for key in ("mr", "nr", "kb", "kt", "threads", "mc_tiles", "vnni", "grid_m", "simd_width"):
        assert type(cfg[key]) is int, (key, cfg[key])
    for key in ("pack", "prepacked_b", "fixed_shape", "accumulate"):
        assert type(cfg[key]) is bool, (key, cfg[key])
    assert cfg["layout"] in ("row", "col") and cfg["split"] in ("dp", "sk", "sk+dp")
    assert cfg["amx"] in ("no", "yes", "emulated")
    again = coopjit.compile_gemm(m, n, k, dtype, plan=cfg, **kw)
    assert again.config == cfg
    # The same plan for a product through matmul, checked against float64.
    a, b = _random(rng, (m, k), dtype), _random(rng, (k, n), dtype)
    got = np.asarray(coopjit.matmul(a, b, plan=cfg), np.float64)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype != BF16 else 2 ** -7,  # bfloat16 out: rounded
                                   atol=(1e-12 if dtype == np.float64 else 1e-5) * k)


def test_a_changed_plan_value_changes_the_kernel():
    cfg = coopjit.compile_gemm(256, 256, 256, np.float32).config
    other = dict(cfg.overrides(), split="sk" if cfg["split"] != "sk" else "dp", threads=2)
    assert coopjit.compile_gemm(256, 256, 256, np.float32, plan=other).config["split"] == other["split"]


def test_explanations_are_notes_shown_by_the_printed_kernel():
    kern = coopjit.compile_gemm(64, 64, 64, np.float32)
    assert kern.config["vnni"] == 1 and "low-precision" in kern.config.notes["vnni"]
    assert "not a low-precision product" in str(kern) and "not a low-precision product" in kern._repr_html_()


def test_plan_of_the_wrong_kind_or_type_is_refused():
    with pytest.raises(TypeError, match="plan must be a dict of plan fields .*known fields: layout"):
        coopjit.matmul(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), plan="sk")
    gpu_like = coopjit.Plan({"mr": 8}, target="gpu")
    with pytest.raises(ValueError, match="config of a GPU kernel"):
        coopjit.compile_gemm(8, 8, 8, np.float32, plan=gpu_like)


def test_cache_clear_memory_makes_the_next_call_fetch_its_kernel_again(rng, tmp_path, monkeypatch):
    a = rng.standard_normal((72, 40)).astype(np.float32)
    b = rng.standard_normal((40, 24)).astype(np.float32)
    coopjit.matmul(a, b)
    before = coopjit._core.cache_stats()
    assert before["entries"] >= 1
    out = coopjit.cache.clear(kernels=False, tuning=False, memory=True)
    assert out["memory"] == before["entries"] and coopjit._core.cache_stats()["entries"] == 0
    np.testing.assert_allclose(coopjit.matmul(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    after = coopjit._core.cache_stats()
    assert after["entries"] >= 1 and after["misses"] >= 1  # planned and fetched again, not from the memo


def test_omp_num_threads_is_the_pool_size_when_coopjit_num_threads_is_unset():
    import os
    import subprocess
    import sys

    code = "import coopjit; print(coopjit.get_num_threads())"
    env = {k: v for k, v in os.environ.items() if k not in ("COOPJIT_NUM_THREADS", "OMP_NUM_THREADS")}
    def pool(**extra):
        return int(subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                                  check=True).stdout)
    assert pool(OMP_NUM_THREADS="3") == 3
    assert pool(OMP_NUM_THREADS="5,2") == 5
    assert pool(OMP_NUM_THREADS="3", COOPJIT_NUM_THREADS="7") == 7
    assert pool(OMP_NUM_THREADS="junk") == pool()


def test_docstrings_list_every_plan_field():
    from coopjit._gemm import _GPU_FIELDS, PLAN_FIELDS

    for fn in (coopjit.matmul, coopjit.gemm, coopjit.compile_gemm):
        for field in PLAN_FIELDS + _GPU_FIELDS:
            assert field in fn.__doc__, (fn.__name__, field)


@pytest.mark.parametrize("dtype,name,lanes", [(np.float32, "f32", 16), (np.float64, "f64", 8)])
def test_tile_width_when_a_outgrows_l2(dtype, name, lanes):
    # N = 129 pads least with 1-vector tiles (16 x 16 f32, 16 x 8 f64). Where A is far beyond any
    # core's L2 (513 x 25000 here: 51 / 103 MB, never touched), every column tile reads A again,
    # so the planner takes 2-3 vectors; where A fits (513 x 50), the least padding still decides.
    if coopjit.cpu_info()["vector_bytes"] < 64:
        pytest.skip("the widths below are AVX-512's (16 f32 lanes); this CPU has no AVX-512")
    for k, widths in ((25000, (2 * lanes, 3 * lanes)), (50, (lanes,))):
        a, b, c = np.empty((513, k), dtype), np.empty((k, 129), dtype), np.empty((513, 129), dtype)
        plan = coopjit._core.gemm_plan(a, b, c, False, [name] * 3)
        assert plan["layout"] == "row" and int(plan["nr"]) in widths, (k, plan["mr"], plan["nr"])


# (20x33x50: 33 columns in 5 half-width vectors on Zen 4 (test_gemm_half_vectors.py), at most 4 rows;
# 5 rows of 3 full vectors with simd_width 16)
@pytest.mark.parametrize("m,n,k,dtype,want", [(32, 32, 32, np.float32, 8), (20, 33, 50, np.float32, 4),
                                              (64, 64, 64, np.float32, 4), (32, 32, 32, np.float64, 4),
                                              (48, 48, 48, np.float32, 8)])
def test_small_fixed_products_take_whole_tiles(rng, m, n, k, dtype, want):
    # Up to 64 in every dimension (code for the exact shape), the tile height comes from down to
    # half the tallest: a whole number of tiles where one divides M (32 rows: 4 x 8, not 11 + 11 +
    # 10), checked here on the znver4 plan and computed on this CPU against NumPy in float64.
    a, b = _random(rng, (m, k), dtype), _random(rng, (k, n), dtype)
    for threads in (1, 2):
        cfg = coopjit.cross_compile(a, b, cpu="znver4", threads=threads, code=False)["config"]
        assert int(cfg["mr"]) == want and cfg["fixed_shape"] in (True, "true"), cfg
    c = coopjit.matmul(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert np.all(np.abs(c - ref) <= (k + 2) * np.finfo(dtype).eps * mag), np.abs(c - ref).max()
    # 44 rows of 64-wide tiles (at most 6 rows): 11 x 4 when the product is small, 9 x 5 (the
    # height in [3/4 max, max] that pads least) once K passes 64
    for kk, rows in ((64, 4), (65, 5)):
        a, b = _random(rng, (44, kk), np.float32), _random(rng, (kk, 64), np.float32)
        assert int(coopjit.cross_compile(a, b, cpu="znver4", threads=1, code=False)["config"]["mr"]) == rows, kk
