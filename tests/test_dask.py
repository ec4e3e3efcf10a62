"""coopjit.dask on a real dask.distributed LocalCluster (2 worker processes, 1 thread each): matmul, gemm and reduce on ragged chunks against NumPy in float64; kernels compiled once per machine through the shared disk cache; a worker killed mid-computation and the result still right; a tuning sweep over both workers whose database a new process then uses; the command line's --scheduler."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="dask is not installed (scripts/setup.sh installs dask and distributed)")
distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (scripts/setup.sh installs it)")
import cloudpickle  # noqa: E402  (a dependency of dask)
import dask.array as da  # noqa: E402
import ml_dtypes  # noqa: E402

import coopjit  # noqa: E402
import coopjit.dask as cjd  # noqa: E402
from cache_helpers import private_cache, run_snippet  # noqa: E402,F401
from coopjit import _tune  # noqa: E402

# The helpers below run on the workers, which cannot import this file: pickled by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _start(n_workers=2):
    cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=40)
    return cluster, distributed.Client(cluster)


@pytest.fixture(scope="module")
def client():
    cluster, c = _start()  # the default client: compute() runs on it
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module", autouse=True)
def _environment_restored():
    """A nanny puts its workers' environment (OMP_NUM_THREADS=1, MALLOC_TRIM_THRESHOLD_) into
    this process's os.environ before spawning them and leaves it there: restored after this
    file, or every later test's child process would run a coopjit pool of one thread (and miss
    the plans tuned for this process's pool)."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def _bound(a, b, out_dtype, acc=np.float32):
    """|ref - got| allowed for a product of K terms accumulated in `acc`, rounded to out_dtype."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = np.matmul(a64, b64)
    k = a.shape[-1]
    eps_acc = float(np.finfo(acc).eps)
    out_dtype = np.dtype(out_dtype)
    eps_out = float(ml_dtypes.finfo(out_dtype).eps if out_dtype.name == "bfloat16" else np.finfo(out_dtype).eps)
    return ref, (k + 2) * eps_acc * np.matmul(np.abs(a64), np.abs(b64)) + eps_out * np.abs(ref) + 1e-30


def _assert_close(got, ref, bound):
    got = np.asarray(got).astype(np.float64)
    assert got.shape == ref.shape
    bad = ~(np.abs(got - ref) <= bound)
    assert not bad.any(), f"{bad.sum()} of {bad.size} elements outside the bound; worst {np.max(np.abs(got - ref))}"


def _key_names(arr):
    return {k[0] if isinstance(k, tuple) else k for k in dict(arr.__dask_graph__())}


# ---------------------------------------------------------------------------------------------
# matmul / gemm / reduce results


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_ragged_chunks_that_do_not_line_up(client, rng, dtype):
    a = rng.standard_normal((237, 150)).astype(dtype)
    b = rng.standard_normal((150, 105)).astype(dtype)
    # x's K chunks (70, 80) against y's (90, 60): rechunked to common ones, as dask.array.matmul does
    x = da.from_array(a, chunks=((100, 100, 37), (70, 80)))
    y = da.from_array(b, chunks=((90, 60), (75, 30)))
    z = cjd.matmul(x, y)
    assert isinstance(z, da.Array) and z.dtype == dtype and z.shape == (237, 105)
    assert z.chunks == ((100, 100, 37), (75, 30))  # x's row chunks, y's column chunks
    assert any(n.startswith("coopjit-matmul") for n in _key_names(z))
    ref, bound = _bound(a, b, dtype, acc=dtype)
    _assert_close(z.compute(), ref, bound)


@pytest.mark.parametrize("pair", [("float16", "float16"), ("bfloat16", "bfloat16"), ("float8_e4m3fn", "float8_e4m3fn"),
                                  ("int8", "int8"), ("uint8", "int8")])
def test_matmul_every_gemm_dtype(client, rng, pair):
    dts = [np.dtype(getattr(ml_dtypes, n, None) or n) for n in pair]
    if dts[0].kind in "iu":
        a = rng.integers(0 if dts[0].kind == "u" else -128, 128 if dts[0].kind == "i" else 256, (37, 150)).astype(dts[0])
        b = rng.integers(-128, 128, (150, 19)).astype(dts[1])
    else:
        a = rng.uniform(-1, 1, (37, 150)).astype(dts[0])
        b = rng.uniform(-1, 1, (150, 19)).astype(dts[1])
    x = da.from_array(a, chunks=((20, 17), (70, 80)))
    y = da.from_array(b, chunks=((70, 80), (19,)))
    _, want_dtype = coopjit._arrays.gemm_types(dts[0], dts[1])
    z = cjd.matmul(x, y)
    assert z.dtype == want_dtype
    got = z.compute()
    assert got.dtype == want_dtype
    if want_dtype.kind == "i":  # exact: int32 accumulation of small integers
        np.testing.assert_array_equal(got.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64))
    else:  # float32 accumulation over every chunk, one rounding to the output type
        ref, bound = _bound(a, b, want_dtype)
        _assert_close(got, ref, bound)


def test_matmul_batched_broadcast_and_vectors(client, rng):
    a = rng.standard_normal((4, 20, 130)).astype(np.float32)
    b = rng.standard_normal((130, 18)).astype(np.float32)
    b3 = rng.standard_normal((1, 130, 18)).astype(np.float32)
    x = da.from_array(a, chunks=((3, 1), (12, 8), (65, 65)))
    for other, chunks in ((b, ((65, 65), (9, 9))), (b3, ((1,), (65, 65), (18,)))):
        y = da.from_array(other, chunks=chunks)
        z = cjd.matmul(x, y)
        assert z.shape == (4, 20, 18) and z.chunks[0] == (3, 1)
        ref, bound = _bound(np.broadcast_to(a, (4, 20, 130)), np.broadcast_to(other, (4, 130, 18)), np.float32)
        _assert_close(z.compute(), ref, bound)
    v = rng.standard_normal(130).astype(np.float32)
    dv = da.from_array(v, chunks=(65, 65))
    m = a[0].copy()
    dm = da.from_array(m, chunks=((12, 8), (65, 65)))
    for got, want_a, want_b in ((cjd.matmul(dm, dv), m, v), (cjd.matmul(dv, da.from_array(b, chunks=(65, 9))), v, b),
                                (cjd.matmul(dv, dv), v, v), (cjd.matmul(x, dv), a, v)):
        ref = np.matmul(want_a.astype(np.float64), want_b.astype(np.float64))
        assert got.shape == ref.shape
        np.testing.assert_allclose(np.asarray(got.compute(), np.float64), ref, rtol=1e-5, atol=1e-4)


def test_gemm_alpha_scales_the_sum_over_every_k_chunk_once(client):
    """Over several K chunks alpha scales the whole sum once, as one kernel does (coopjit.gemm on
    the whole arrays is the reference, with NumPy in float64): alpha = inf where the chunks'
    partial sums have opposite signs gives inf (alpha on each partial sum gave inf - inf = NaN),
    and alpha = 1e38 in float32 where a partial sum times alpha overflows but the total does not
    stays finite. Both with the chunks summed in one task and in a tree; beta * c joins after."""
    a = np.array([[1, 1, 1, -1, -1, 0],      # partial sums over K chunks of 2: 2, 0 and -1, total 1
                  [5, 5, 0, -3, -3, -3],      # 10, -3 and -6, total 1
                  [2, 2, 2, -2, -2, -2]],     # 4, 0 and -4, total 0: inf * 0 is NaN in any order
                 np.float32)
    b = np.ones((6, 2), np.float32)
    c = np.full((3, 2), 4.0, np.float32)
    A, B, C = da.from_array(a, chunks=(3, 2)), da.from_array(b, chunks=(2, 2)), da.from_array(c, chunks=(3, 2))
    total = a.astype(np.float64) @ b.astype(np.float64)
    for alpha, beta in ((np.inf, 0.0), (1e38, 0.0), (1e38, 0.5), (-np.inf, 2.0)):
        one = np.empty((3, 2), np.float32) if beta == 0.0 else c.copy()
        coopjit.gemm(a, b, one, alpha=alpha, beta=beta)
        with np.errstate(invalid="ignore", over="ignore"):
            ref = (np.float32(alpha) * total.astype(np.float32) + np.float32(beta) * c).astype(np.float32)
        np.testing.assert_array_equal(one, ref)  # the kernel: alpha once on the sum (NaN where it is 0)
        assert np.isfinite(ref[1]).all() == np.isfinite(np.float32(alpha))
        for split in (2, 8):  # 3 K chunks: 2 groups added in a tree, or one task
            z = cjd.gemm(A, B, C if beta else None, alpha=alpha, beta=beta, split_every=split)
            assert any(n.startswith("coopjit-scale") for n in _key_names(z))
            np.testing.assert_array_equal(z.compute(), ref, err_msg=f"alpha={alpha} beta={beta} split_every={split}")
    # alpha = 1 (and one K chunk) keeps alpha in the kernels: no extra pass
    assert not any(n.startswith("coopjit-scale") for n in _key_names(cjd.gemm(A, B)))
    assert not any(n.startswith("coopjit-scale") for n in _key_names(cjd.gemm(A.rechunk((3, 6)), B.rechunk((6, 2)), alpha=2.0)))


def test_gemm_alpha_beta_transposes_and_a_tree_over_k(client, rng):
    m, n, k = 40, 30, 210
    a_t = rng.standard_normal((k, m))  # used transposed
    b = rng.standard_normal((k, n))
    c = rng.standard_normal((m, n))
    A = da.from_array(a_t, chunks=((70, 70, 70), (25, 15)))
    B = da.from_array(b, chunks=((70, 70, 70), (30,)))
    C = da.from_array(c, chunks=((25, 15), (17, 13)))
    # split_every=2: 3 K chunks in 2 groups, each accumulated in one task, the groups added in a tree
    z = cjd.gemm(A, B, C, alpha=-1.5, beta=0.25, trans_a=True, split_every=2)
    names = _key_names(z)
    assert any(n.startswith("coopjit-sum") for n in names) and any(n.startswith("coopjit-gemm") for n in names)
    ref = -1.5 * (a_t.T @ b) + 0.25 * c
    mag = 1.5 * (np.abs(a_t.T) @ np.abs(b)) + 0.25 * np.abs(c)
    _assert_close(z.compute(), ref, (k + 4) * np.finfo(np.float64).eps * mag)
    # the fused accumulate (all of K in one task per block) gives the same within the bound
    z1 = cjd.gemm(A, B, C, alpha=-1.5, beta=0.25, trans_a=True, split_every=8)
    assert not any(n.startswith("coopjit-sum") for n in _key_names(z1))
    _assert_close(z1.compute(), ref, (k + 4) * np.finfo(np.float64).eps * mag)
    # beta == 0: c is not read (its NaNs do not propagate), as in coopjit.gemm and BLAS
    nan_c = da.full((m, n), np.nan, chunks=20)
    bt = da.from_array(b.T.copy(), chunks=(15, 70))
    z0 = cjd.gemm(A, bt, nan_c, trans_a=True, trans_b=True)
    _assert_close(z0.compute(), a_t.T @ b, (k + 2) * np.finfo(np.float64).eps * (np.abs(a_t.T) @ np.abs(b)))
    # bfloat16 operands with a float32 c: the output is float32
    zb = cjd.gemm(A.astype(ml_dtypes.bfloat16), B.astype(ml_dtypes.bfloat16), C.astype(np.float32), beta=1.0,
                  trans_a=True)
    assert zb.dtype == np.float32
    ab, bb = a_t.astype(ml_dtypes.bfloat16).T, b.astype(ml_dtypes.bfloat16)
    ref_b, bound_b = _bound(ab, bb, np.float32)
    c32 = c.astype(np.float32).astype(np.float64)
    _assert_close(zb.compute(), ref_b + c32, bound_b + np.finfo(np.float32).eps * np.abs(c32))


@pytest.mark.parametrize("dtype,op", [(np.float32, "sum"), (np.float64, "sum"), (np.float32, "max"), (np.float16, "sum"),
                                      (np.int8, "sum"), (np.uint16, "prod"), (np.int32, "min"), (np.bool_, "sum"),
                                      ("bfloat16", "max"), (np.float64, "prod")])
def test_reduce_ragged_chunks(client, rng, dtype, op):
    dt = np.dtype(getattr(ml_dtypes, dtype) if isinstance(dtype, str) else dtype)
    shape = (23, 17, 9)
    if dt.kind == "b":
        a = rng.integers(0, 2, shape).astype(bool)
    elif dt.kind in "iu":
        a = rng.integers(0 if dt.kind == "u" else -100, 100, shape).astype(dt)
        if op == "prod":
            a = rng.integers(1, 3, shape).astype(dt)
    elif op == "prod":
        a = rng.uniform(0.9, 1.1, shape).astype(dt)
    else:
        a = rng.standard_normal(shape).astype(dt)
    x = da.from_array(a, chunks=((10, 10, 3), (5, 12), (4, 5)))
    ref_fn = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}[op]
    for axis in (None, 1, (0, 2)):
        z = cjd.reduce(x, axis=axis, op=op, split_every=2)
        want = ref_fn(a.astype(np.float64) if dt.kind == "f" or dt.name == "bfloat16" else a, axis=axis)
        got = z.compute()
        assert np.asarray(got).dtype == np.asarray(coopjit.reduce(a, axis=axis, op=op)).dtype == z.dtype
        if dt.kind in "iub" or op in ("min", "max"):
            np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
        else:
            n = a.size // np.size(want)
            out_eps = float(np.finfo(np.float32 if dt.name in ("float16", "bfloat16") else dt).eps)
            eps = float(ml_dtypes.finfo(dt).eps if dt.name == "bfloat16" else np.finfo(dt).eps)
            mag = np.abs(a.astype(np.float64)).sum(axis=axis) if op == "sum" else np.abs(want)
            bound = (n + 2) * out_eps * mag + eps * np.abs(want)
            assert np.all(np.abs(np.asarray(got, np.float64) - want) <= bound), (axis, got, want)


def test_reduce_nan_and_empty(client, rng):
    a = rng.standard_normal((12, 10)).astype(np.float32)
    a[7, 3] = np.nan
    x = da.from_array(a, chunks=(5, 4))
    got = cjd.reduce(x, axis=0, op="min").compute()
    np.testing.assert_array_equal(got, np.min(a, axis=0))  # NaN propagates into column 3 only
    assert np.isnan(got[3]) and not np.isnan(np.delete(got, 3)).any()
    empty = da.from_array(np.zeros((0, 6), np.float32), chunks=(1, 3))
    np.testing.assert_array_equal(cjd.reduce(empty, axis=0).compute(), np.zeros(6, np.float32))
    with pytest.raises(ValueError, match="zero-size array to reduction operation minimum"):
        cjd.reduce(empty, axis=0, op="min")
    # a chunk with no elements among chunks with some: its partial is the identity
    part = da.concatenate([da.from_array(a[:, :0], chunks=(5, 1)), da.from_array(np.abs(a[:, :4]) + 1, chunks=(5, 2))],
                          axis=1)
    np.testing.assert_array_equal(cjd.reduce(part, axis=1, op="max").compute(), np.max(np.abs(a[:, :4]) + 1, axis=1))


def test_bad_input_is_refused_with_the_values(client):
    x = da.ones((4, 5), chunks=2, dtype=np.float32)
    with pytest.raises(ValueError, match=r"inner dimensions differ \(5 != 4\)"):
        cjd.matmul(x, x)
    with pytest.raises(TypeError, match="mixed dtypes"):
        cjd.matmul(x, da.ones((5, 2), dtype=np.float64))
    with pytest.raises(TypeError, match="complex128"):
        cjd.matmul(da.ones((2, 2), dtype=complex), da.ones((2, 2), dtype=complex))
    with pytest.raises(ValueError, match="0-d"):
        cjd.matmul(da.ones((), dtype=np.float32), x)
    with pytest.raises(ValueError, match="do not broadcast"):
        cjd.matmul(da.ones((3, 4, 5), dtype=np.float32), da.ones((2, 5, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"c has shape \(3, 3\)"):
        cjd.gemm(x, x.T, da.ones((3, 3), dtype=np.float32), beta=1.0)
    with pytest.raises(ValueError, match="split_every must be at least 2, got 1"):
        cjd.matmul(x, x.T, split_every=1)
    with pytest.raises(ValueError, match="unknown op 'mean'"):
        cjd.reduce(x, op="mean")
    with pytest.raises(TypeError, match="axis must be None"):
        cjd.reduce(x, axis=1.5)
    with pytest.raises(ValueError, match="unknown problem field"):
        cjd.tune([{"shape": "8x8x8", "color": 1}], client)
    with pytest.raises(ValueError, match="shape must be"):
        coopjit.tune(["8x8"], client=client)
    with pytest.raises(TypeError, match="client must be"):
        cjd.tune(["8x8x8"], 42)
    with pytest.raises(ValueError, match="not a tuning database entry"):
        coopjit._tunedb.merge({"cpu | gemm | m": {"plan": {}}})
    with pytest.raises(ValueError, match="does not name its record"):
        coopjit._tunedb.merge({"cpu | a | m": {"signature": "b", "device": "cpu", "machine": "m", "plan": {}}})


# ---------------------------------------------------------------------------------------------
# workers: threads, the disk cache across processes, a worker killed


def _counters():
    return {"threads": coopjit.get_num_threads(), **coopjit._core.cache_stats(),
            "entries": coopjit.cache.info()["kernels"]["entries"]}


def test_kernels_compiled_once_per_machine_and_one_thread_per_task(client, rng, tmp_path):
    old = client.run(coopjit.cache.directory)
    cache = tmp_path / "shared-cache"
    client.run(coopjit.cache.set_directory, str(cache))
    client.run(coopjit._core.cache_clear)  # each worker's memory cache: every kernel a miss again
    try:
        before = client.run(_counters)
        a = rng.standard_normal((192, 160)).astype(np.float32)
        b = rng.standard_normal((160, 128)).astype(np.float32)
        # 6 x 4 output blocks of one shape, 5 K chunks each: both workers need the same 2 kernels
        # (beta = 0 for the first K chunk, beta = 1 for the others)
        z = cjd.matmul(da.from_array(a, chunks=32), da.from_array(b, chunks=32))
        ref, bound = _bound(a, b, np.float32)
        _assert_close(z.compute(), ref, bound)
        after = client.run(_counters)
    finally:
        for addr, d in old.items():
            client.run(coopjit.cache.set_directory, d, workers=[addr])
    compiles = sum(after[w]["compiles"] - before[w]["compiles"] for w in after)
    loads = sum(after[w]["disk_loads"] - before[w]["disk_loads"] for w in after)
    stored = max(v["entries"] for v in after.values())
    assert stored >= 1 and compiles == stored, (compiles, stored, after)  # each kernel compiled by one worker
    assert loads >= 1, after  # and loaded from the disk cache by the other
    assert all(v["threads"] == 1 for v in after.values())  # one core per worker thread (the module docstring)
    # Under the local threaded scheduler the tasks run in this process, whose pool is left alone.
    pool = coopjit.get_num_threads()
    local = cjd.matmul(da.from_array(a, chunks=64), da.from_array(b, chunks=64)).compute(scheduler="threads")
    _assert_close(local, ref, bound)
    assert coopjit.get_num_threads() == pool


def _slow_copy(block):
    time.sleep(0.03)
    return block.copy()


def _matmul_keys_on(dask_scheduler, addr):
    ws = dask_scheduler.workers.get(addr)
    return 0 if ws is None else sum("coopjit-matmul" in str(ts.key) for ts in ws.has_what)


def test_a_worker_killed_mid_computation(rng):
    cluster, c = _start()
    try:
        a = rng.standard_normal((256, 192)).astype(np.float32)
        b = rng.standard_normal((192, 224)).astype(np.float32)
        x = da.from_array(a, chunks=32).map_blocks(_slow_copy)  # 0.03 s per input chunk: about 2 s in all
        y = da.from_array(b, chunks=32).map_blocks(_slow_copy)
        fut = c.compute(cjd.matmul(x, y))
        pids = c.run(os.getpid)
        victim = sorted(pids)[0]
        deadline = time.time() + 60
        while c.run_on_scheduler(_matmul_keys_on, addr=victim) < 1 and time.time() < deadline:
            time.sleep(0.02)
        assert not fut.done(), "the computation ended before a worker could be killed: make it longer"
        os.kill(pids[victim], signal.SIGKILL)  # its results in memory are lost; the scheduler recomputes them
        got = fut.result(timeout=120)
        assert victim not in c.nthreads()  # the worker did go (its nanny started a new one)
        ref, bound = _bound(a, b, np.float32)
        _assert_close(got, ref, bound)
    finally:
        c.close()
        cluster.close()


# ---------------------------------------------------------------------------------------------
# tuning sweeps


PROBLEMS = ["64x48x40", "40x56x32", (48, 32, 64), {"shape": "24x40x72", "dtype": "float64"}]


def test_tune_sweep_over_two_workers_then_a_new_process_uses_it(client, private_cache, capsys):
    old = client.run(coopjit.cache.directory)
    client.run(coopjit.cache.set_directory, str(private_cache))  # the workers' machine: this one
    try:
        reports = coopjit.tune(PROBLEMS, client=client, budget=10, max_candidates=3)
        worker_plans = client.run(lambda: sorted(coopjit._core.tuned_plans()))
    finally:
        for addr, d in old.items():
            client.run(coopjit.cache.set_directory, d, workers=[addr])
    err = capsys.readouterr().err
    assert "tune sweep (2 workers)" in err and "4/4" in err and "plans, best" in err  # the progress bar
    assert len(reports) == len(PROBLEMS)
    assert [(r.problem["m"], r.problem["n"], r.problem["k"]) for r in reports] == \
        [(64, 48, 40), (40, 56, 32), (48, 32, 64), (24, 40, 72)]
    assert reports[3].problem["dtype"] == "float64"
    assert {r.worker for r in reports} == set(client.nthreads())  # both workers tuned
    intervals = sorted(r.interval for r in reports)  # one machine: its timings one after another
    assert all(e0 <= s1 for (_, e0), (s1, _) in zip(intervals, intervals[1:])), intervals
    db = json.loads((private_cache / "tuning.json").read_text())["entries"]
    sigs = [r.problem["signature"] for r in reports]
    for r in reports:
        assert r.winner["status"] == "ok" and r.stored and r.threads == len(os.sched_getaffinity(0))
        rec = db[f"cpu | {r.problem['signature']} | {r.machine}"]  # keyed by the worker's CPU
        assert rec["plan"] == r.winner["plan"] and rec["machine"] == coopjit._tunedb.machine()
    for plans in worker_plans.values():  # every worker has every winner, not only its own
        assert set(sigs) <= set(plans)
    assert set(sigs) <= set(coopjit._core.tuned_plans())  # and this process
    # the new process plans with the pool the sweep tuned for (its own default could differ:
    # OMP_NUM_THREADS in the environment sizes it)
    code = ("import json, os, numpy as np, coopjit\ncoopjit.set_num_threads(len(os.sched_getaffinity(0)))\nout = []\n"
            + "".join(f"k = coopjit.compile_gemm({r.problem['m']}, {r.problem['n']}, {r.problem['k']}, "
                      f"np.{r.problem['dtype']})\nout.append([k._core.tuned, k.config])\n" for r in reports)
            + "print(json.dumps(out))")
    res, _ = run_snippet(code, private_cache)
    for (tuned, config), r in zip(res, reports):
        assert tuned and _tune._plan_of(config) == r.winner["plan"]


def test_tune_command_line_with_a_scheduler(client, tmp_path):
    cache = tmp_path / "cli-cache"
    old = client.run(coopjit.cache.directory)
    client.run(coopjit.cache.set_directory, str(cache))
    try:
        env = {**os.environ, "COOPJIT_CACHE_DIR": str(cache)}
        res = subprocess.run([sys.executable, "-m", "coopjit", "tune", "--scheduler", client.scheduler.address,
                              "--shape", "32x40x48", "--shape", "56x24x40", "--budget", "10", "--max-candidates", "2",
                              "--no-progress"], env=env, capture_output=True, text=True, timeout=180)
    finally:
        for addr, d in old.items():
            client.run(coopjit.cache.set_directory, d, workers=[addr])
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("tuned on tcp://") == 2 and "speed-up" in res.stdout
    entries = json.loads((cache / "tuning.json").read_text())["entries"]
    assert {e["signature"].split(" batch")[0] for e in entries.values()} == {"gemm f32 32x40x48", "gemm f32 56x24x40"}
