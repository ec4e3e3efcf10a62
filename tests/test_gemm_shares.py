"""Plan shares: the packed blocked nest cut into threads x shares shares, handed out by the pool
(ThreadPool::run_shares) after a packing launch, each thread running its own shares first and
taking the next of another thread's once it has none left. Results against float64 NumPy (exact
for int8) with more shares than threads and odd sizes, the launch trace (every share run once),
the planner's default, and bad values."""
import os

import ml_dtypes
import numpy as np
import pytest

import coopjit
from conftest import assert_gemm_close, check_dtype_product as _check, dtype_operands as _operands, tile_program_amx


@pytest.mark.parametrize("dtype, m, n, k, plan", [
    (np.float32, 300, 257, 129, {"threads": 4, "shares": 3}),
    (np.float64, 513, 129, 700, {"threads": 3, "shares": 5, "kt": 256}),  # several K tiles: partial sums per share
    ("bf16", 513, 129, 700, {"threads": 3, "shares": 5, "kt": 256}),
    ("bf16", 64, 900, 300, {"threads": 2, "shares": 8, "grid_m": 1}),  # more shares than row panels
    ("int8", 37, 1000, 999, {"threads": 5, "shares": 2}),
    ("int8", 300, 257, 129, {"threads": 4, "shares": 3}),
])
def test_shares_give_the_reference_product(rng, dtype, m, n, k, plan):
    a, b = _operands(rng, dtype, m, n, k)
    got = coopjit.matmul(a, b, plan={"pack": 1, **plan})
    assert coopjit.compile_gemm(m, n, k, a.dtype, plan={"pack": 1, **plan}).config["shares"] == plan["shares"]
    _check(got, a, b, dtype)


@pytest.mark.parametrize("dtype", ["bf16", "int8"])
@pytest.mark.parametrize("direct_a", [0, 1])
def test_shares_with_emulated_tiles_a_prepacked_b_and_a_bf16_result(rng, dtype, direct_a):
    # The tile program (amx emulated here when the CPU has none), A read where it is or packed;
    # with a prepacked B and direct_a there is nothing to pack: no packing launch at all.
    m, n, k = 256, 320, 2 * 64 * 5  # M a multiple of 32, K of the tile step (direct_a's needs)
    a, b = _operands(rng, dtype, m, n, k)
    amx = tile_program_amx()
    plan = {"amx": amx, "threads": 3, "shares": 4, "direct_a": direct_a, "kt": 128 if dtype == "bf16" else 256}
    _check(coopjit.matmul(a, b, plan=plan), a, b, dtype)
    _check(coopjit.matmul(a, coopjit.prepack(b, plan=plan), plan=plan), a, b, dtype)
    if dtype == "bf16":  # C in bf16: the partial sums in the scratch matrix, the last K tile writes C
        got = coopjit.matmul(a, b, plan=plan, out_dtype=ml_dtypes.bfloat16)
        assert got.dtype == ml_dtypes.bfloat16
        _check(got.astype(np.float32), a, b, dtype)


def test_gemm_with_beta_and_shares(rng):
    a, b = _operands(rng, np.float64, 200, 300, 400)
    c = rng.standard_normal((200, 300))
    want = 0.5 * (a @ b) - 2.0 * c
    got = coopjit.gemm(a, b, c.copy(), alpha=0.5, beta=-2.0, plan={"pack": 1, "threads": 4, "shares": 3})
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-10)


def test_the_trace_shows_every_share_run_once(rng):
    a, b = _operands(rng, np.float32, 400, 384, 300)
    coopjit._core._set_launch_trace(True)
    try:
        got = coopjit.matmul(a, b, plan={"pack": 1, "threads": 3, "shares": 4})
        t = coopjit._core._launch_trace()
    finally:
        coopjit._core._set_launch_trace(False)
    assert_gemm_close(got, a, b)
    assert t["workers"] == 12, t  # the last launch: 3 threads x 4 shares (the packing launch before it)
    assert all(0 <= s <= e <= t["join_ns"] for s, e in zip(t["start_ns"], t["end_ns"])), t


def test_the_trace_keeps_a_calls_launches_in_order(rng):
    # _launch_traces: the packing launch (a worker each), then the shares, each with its start;
    # the list is emptied by the call that reads it, and a call with nothing to pack has one launch.
    a, b = _operands(rng, np.float32, 400, 384, 300)
    plan = {"pack": 1, "threads": 3, "shares": 4}
    coopjit.matmul(a, b, plan=plan)  # (compiled before the trace)
    coopjit._core._set_launch_trace(True)
    try:
        coopjit._core._launch_traces()
        got = coopjit.matmul(a, b, plan=plan)
        launches = coopjit._core._launch_traces()
        again = coopjit._core._launch_traces()
        coopjit.matmul(a, b, plan={**plan, "threads": 2})
        two = coopjit._core._launch_traces()
    finally:
        coopjit._core._set_launch_trace(False)
    assert_gemm_close(got, a, b)
    assert [t["workers"] for t in launches] == [3, 12], launches
    pack, shares = launches
    assert pack["origin_ns"] + pack["join_ns"] <= shares["origin_ns"], launches  # the barrier: one after the other
    for t in launches:
        assert all(0 <= s <= e <= t["join_ns"] for s, e in zip(t["start_ns"], t["end_ns"])), t
    assert again == [], again
    assert [t["workers"] for t in two] == [2, 8], two
    # Off, nothing is kept.
    coopjit.matmul(a, b, plan=plan)
    assert coopjit._core._launch_traces() == []


def test_the_trace_names_each_shares_thread_and_cpu_time(rng):
    # Session 19: each share's thread (its owner first: thread t owns [t * per, (t + 1) * per)),
    # its CPU at the start and at the end, and its thread's CPU time (at most its wall time).
    a, b = _operands(rng, np.float32, 400, 384, 300)
    plan = {"pack": 1, "threads": 3, "shares": 4}
    coopjit.matmul(a, b, plan=plan)
    coopjit._core._set_launch_trace(True)
    try:
        coopjit._core._launch_traces()
        got = coopjit.matmul(a, b, plan=plan)
        launches = coopjit._core._launch_traces()
    finally:
        coopjit._core._set_launch_trace(False)
    assert_gemm_close(got, a, b)
    shares = launches[-1]
    assert shares["workers"] == 12, launches
    assert all(0 <= t < 3 for t in shares["thread"]), shares
    assert 0 in shares["thread"], shares  # the caller runs shares too
    n_cpus = os.cpu_count()
    assert all(0 <= c < n_cpus for c in shares["cpu"] + shares["cpu_end"]), shares
    for s, e, c in zip(shares["start_ns"], shares["end_ns"], shares["cpu_time_ns"]):
        assert 0 <= c <= (e - s) + 2_000_000, shares  # (the two clocks' granularity)


@pytest.mark.parametrize("dtype", [np.float32, "int8"])
def test_pinned_pool_threads_run_on_their_cpus(rng, dtype):
    # _set_pool_pin (COOPJIT_PIN_THREADS=1): thread t on the t-th CPU of _pin_order() (modulo
    # their count); off gives the threads the whole mask back. Products are unchanged.
    order = coopjit._core._pin_order()
    assert sorted(order) == sorted(os.sched_getaffinity(0)), order
    if dtype == "int8":
        a, b = rng.integers(-128, 128, (300, 256), dtype=np.int8), rng.integers(-128, 128, (256, 320), dtype=np.int8)
    else:
        a, b = _operands(rng, dtype, 300, 320, 256)
    plan = {"pack": 1, "threads": 3, "shares": 4}
    mask = os.sched_getaffinity(0)
    try:
        coopjit._core._set_pool_pin(True)
        coopjit.matmul(a, b, plan=plan)  # (each thread pins itself at its next launch)
        coopjit._core._set_launch_trace(True)
        coopjit._core._launch_traces()
        got = coopjit.matmul(a, b, plan=plan)
        launches = coopjit._core._launch_traces()
        coopjit._core._set_launch_trace(False)
        assert os.sched_getaffinity(0) == {order[0]}  # the caller is thread 0
    finally:
        coopjit._core._set_launch_trace(False)
        coopjit._core._set_pool_pin(False)
        coopjit.matmul(a, b, plan=plan)  # (unpinned again at this launch)
    if dtype == "int8":
        ref = a.astype(np.int64) @ b.astype(np.int64)
        np.testing.assert_array_equal(got.astype(np.int64), ref)
    else:
        assert_gemm_close(got, a, b)
    for t in launches:
        for th, c, ce in zip(t["thread"], t["cpu"], t["cpu_end"]):
            assert c == ce == order[th % len(order)], (t, order)
    assert os.sched_getaffinity(0) == mask


def test_the_planner_gives_many_cores_four_shares_a_thread():
    a = np.zeros((1024, 1024), np.float32)
    bf = a.astype(ml_dtypes.bfloat16)
    many = coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=16, code=False)["config"]
    assert (many["pack"], many["inline_b"], many["shares"]) == (True, False, 4), many
    assert coopjit.cross_compile(bf, bf, cpu="sapphirerapids", threads=16, code=False)["config"]["shares"] == 4
    assert coopjit.cross_compile(a, a, cpu="sapphirerapids", threads=2, code=False)["config"]["shares"] == 1  # 2 cores: as before
    # B packed inside the nest by its reader (inline_b) keeps one share a worker.
    few_rows = coopjit.cross_compile(np.zeros((128, 512), np.float32), np.zeros((512, 4096), np.float32),
                                     cpu="sapphirerapids", threads=16, code=False)["config"]
    assert (few_rows["inline_b"], few_rows["shares"]) == (True, 1), few_rows
    small = coopjit.cross_compile(np.zeros((32, 32), np.float32), a[:32, :32], cpu="sapphirerapids", threads=16, code=False)["config"]
    assert small["shares"] == 1, small  # unpacked
    # Packed, but under 50 MFLOP a worker: one share a worker.
    odd = coopjit.cross_compile(np.zeros((1000, 1000), np.float32), np.zeros((1000, 130), np.float32),
                                cpu="sapphirerapids", threads=16, code=False)["config"]
    assert (odd["pack"], odd["shares"]) == (True, 1), odd
    assert coopjit.cross_compile(bf[:512, :512], bf[:512, :512], cpu="sapphirerapids", threads=16, code=False)["config"]["shares"] == 1
    # 2 row panels of 32 (AMX): too few to cut into shares.
    skinny = coopjit.cross_compile(np.zeros((64, 4096), ml_dtypes.bfloat16), np.zeros((4096, 4096), ml_dtypes.bfloat16),
                                   cpu="sapphirerapids", threads=16, code=False)["config"]
    assert (skinny["pack"], skinny["shares"]) == (True, 1), skinny


@pytest.mark.parametrize("plan, words", [
    ({"shares": 0}, "shares=0"),
    ({"shares": 65}, "shares=65"),
    ({"shares": 2, "pack": 0, "order": "k_outer"}, "pack=1"),  # (unpacked m_inner / dot walks take shares: session 22)
    ({"shares": 2, "pack": 0, "order": "m_inner", "split": "sk"}, "needs split='dp'"),
    ({"shares": 2, "pack": 1, "split": "sk"}, "split='dp'"),  # (inline_b takes shares since session 29)
])
def test_bad_shares_are_refused(rng, plan, words):
    a, b = _operands(rng, np.float32, 300, 300, 300)
    with pytest.raises(ValueError, match=words):
        coopjit.matmul(a, b, plan=plan)


def test_calls_with_plan_fields_get_the_kernel_of_their_own_fields(rng):
    # matmul(..., plan=) memoizes the kernel with the fields given: calls alternating between two
    # plans of one product must each run their own plan (its worker count in the launch trace).
    a, b = _operands(rng, np.float32, 400, 384, 300)
    coopjit._core._set_launch_trace(True)
    try:
        seen = []
        for _ in range(2):
            for threads in (3, 2):
                got = coopjit.matmul(a, b, plan={"pack": 1, "threads": threads, "shares": 2})
                assert_gemm_close(got, a, b)
                seen.append(coopjit._core._launch_trace()["workers"])
    finally:
        coopjit._core._set_launch_trace(False)
    assert seen == [6, 4, 6, 4], seen
    # A strided view with the same fields is a different product: right result, not the memo's strides.
    a2 = np.asfortranarray(a)
    assert_gemm_close(coopjit.matmul(a2, b, plan={"pack": 1, "threads": 3, "shares": 2}), a2, b)
