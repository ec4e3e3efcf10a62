"""Many Python threads calling coopjit at once (the same and different problems, matmul, gemm and compiled kernels, while a tuning run stores a plan) get correct results, compile each kernel once and finish."""
import threading

import numpy as np

import coopjit
from cache_helpers import private_cache  # noqa: F401
from conftest import assert_gemm_close

THREADS = 8
# (M, N, K, dtype, how): matmul and gemm take the default plan; "kernel" compiles with a plan.
PROBLEMS = [
    (24, 40, 16, np.float32, "matmul"),
    (64, 48, 80, np.float64, "matmul"),
    (30, 50, 20, np.float32, "gemm_tb"),
    (17, 33, 9, np.float64, "kernel"),
    (100, 20, 60, np.float32, "kernel"),
    (128, 128, 128, np.float32, "matmul"),
]
PLAN = {"mr": 3, "kb": 16}


def _call(problem, rng):
    m, n, k, dtype, how = problem
    a = rng.standard_normal((m, k)).astype(dtype)
    if how == "gemm_tb":
        b = rng.standard_normal((n, k)).astype(dtype)
        return coopjit.gemm(a, b, trans_b=True), a, b.T
    b = rng.standard_normal((k, n)).astype(dtype)
    if how == "kernel":
        return coopjit.compile_gemm(m, n, k, dtype, plan=PLAN)(a, b), a, b
    return coopjit.matmul(a, b), a, b


def _key(problem):
    m, n, k, dtype, how = problem
    return coopjit.compile_gemm(m, n, k, dtype, trans_b=how == "gemm_tb", plan=PLAN if how == "kernel" else None)._core.key


def _run_threads(target):
    errors = []
    start = threading.Barrier(THREADS)

    def body(i):
        try:
            start.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads), "a thread is stuck (deadlock?)"
    assert not errors, errors[0]


def test_threads_on_mixed_problems_are_correct_and_compile_each_kernel_once(private_cache):
    def work(i):
        rng = np.random.default_rng(i)
        order = [PROBLEMS[(i + j) % len(PROBLEMS)] for j in range(len(PROBLEMS))] * 3
        for p in order:
            got, a, b = _call(p, rng)
            assert_gemm_close(got, a, b)

    _run_threads(work)
    stats = coopjit._core.cache_stats()
    keys = {_key(p) for p in PROBLEMS}
    assert stats["compiles"] == len(keys) and stats["misses"] == len(keys) and stats["disk_loads"] == 0, (stats, keys)


def test_calls_go_on_while_a_tuning_run_stores_a_plan(private_cache):
    shape = (96, 64, 32)
    rng0 = np.random.default_rng(0)
    a = rng0.standard_normal((shape[0], shape[2])).astype(np.float32)
    b = rng0.standard_normal((shape[2], shape[1])).astype(np.float32)
    reports = []

    def work(i):
        if i == 0:
            reports.append(coopjit.tune(shape=shape, budget=20, max_candidates=4, progress=False))
            return
        for _ in range(30):
            assert_gemm_close(coopjit.matmul(a, b), a, b)

    _run_threads(work)
    assert reports and reports[0].stored
    assert coopjit.compile_gemm(*shape)._core.tuned
    assert_gemm_close(coopjit.matmul(a, b), a, b)


def test_independent_launches_run_every_share_once_whoever_claims_it(rng):
    # Unpacked data-parallel products and reductions are independent launches: the caller and the
    # pool's threads claim the workers' shares one by one, so a share may run on any thread, and
    # the call returns once every share has run. With 8 workers on this machine's cores (more
    # workers than cores: some start late) and pauses between calls (workers asleep), every
    # result matches NumPy, and the trace shows each of the 8 shares entered once and returned.
    old = coopjit.get_num_threads()
    coopjit.set_num_threads(8)
    coopjit._core._set_launch_trace(True)
    try:
        for i in range(40):
            m, n, k = 300 + i, 64, 120 + i  # 4.6+ MFLOP: every worker
            a = rng.standard_normal((m, k)).astype(np.float64)
            b = rng.standard_normal((k, n)).astype(np.float64)
            got = coopjit.matmul(a, b)
            cfg = coopjit.compile_gemm(m, n, k, np.float64).config
            assert (cfg["pack"], cfg["split"], cfg["threads"]) == (False, "dp", 8), cfg
            np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
            t = coopjit._core._launch_trace()
            assert t["workers"] == 8, t
            assert all(e >= s >= 0 for s, e in zip(t["start_ns"], t["end_ns"])), t
            x = rng.integers(-5, 6, (40_000 + i, 7)).astype(np.float32)  # 1.1 MB: 8 workers
            np.testing.assert_array_equal(coopjit.reduce(x, 1), x.astype(np.float64).sum(axis=1))
            if i % 4 == 0:
                threading.Event().wait(0.003)  # the workers go to sleep
    finally:
        coopjit._core._set_launch_trace(False)
        coopjit.set_num_threads(old)
