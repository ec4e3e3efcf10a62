"""coopjit.tune: a small budget gives a report whose winner was checked against NumPy, is stored, and is then used by later calls in this and a new process; a wrong candidate never wins; the tuning database survives damage and concurrent writers; the command line."""
import json
import statistics
import time

import numpy as np
import pytest

import coopjit
from cache_helpers import private_cache, result_of, run_snippet  # noqa: F401
from coopjit import _tune, _tunedb
from conftest import assert_gemm_close

SHAPE = (72, 56, 48)
_config_plan = _tune._plan_of  # a kernel.config as a tuned plan


def test_tune_stores_a_checked_winner_that_later_calls_use(private_cache, rng):
    report = coopjit.tune(shape=SHAPE, budget=30, max_candidates=6, progress=False)
    assert 1 <= len(report.candidates) <= 6 and report.stopped_by in ("candidates", "converged", "time")
    assert report.default is report.candidates[0]
    assert report.winner["status"] == "ok" and report.winner["confirmed_s"] > 0 and report.speedup > 0
    assert report.stored and report.stored_in == str(private_cache / "tuning.json")
    winner = report.winner["plan"]
    k = coopjit.compile_gemm(*SHAPE, np.float32)
    assert k._core.tuned and _config_plan(k.config) == winner
    assert "tuned plan" in str(k)
    a = rng.standard_normal((SHAPE[0], SHAPE[2])).astype(np.float32)
    b = rng.standard_normal((SHAPE[2], SHAPE[1])).astype(np.float32)
    assert_gemm_close(coopjit.matmul(a, b), a, b)
    # A new process: matmul plans the problem with the stored plan (its debug line shows it).
    code = ("import json, numpy as np, coopjit\n"
            f"a = np.ones(({SHAPE[0]}, {SHAPE[2]}), np.float32); b = np.ones(({SHAPE[2]}, {SHAPE[1]}), np.float32)\n"
            "ok = bool((coopjit.matmul(a, b) == a.shape[1]).all())\n"
            f"k = coopjit.compile_gemm({SHAPE[0]}, {SHAPE[1]}, {SHAPE[2]})\n"
            "print(json.dumps({'ok': ok, 'tuned': k._core.tuned, 'config': k.config}))")
    # Plans are keyed by the pool's size: the new process gets this one's.
    res, err = run_snippet(code, private_cache,
                           env={"COOPJIT_DEBUG": "plan", "COOPJIT_NUM_THREADS": str(coopjit.get_num_threads())})
    assert res["ok"] and res["tuned"] and _config_plan(res["config"]) == winner, (res, err)
    tile = f"m{winner['mr']}n{winner['nr']}k{winner['kb']}"
    assert f".{winner['layout']}." in err and tile in err, err


def test_a_candidate_with_a_wrong_result_never_wins(private_cache, monkeypatch):
    real_run = _tune._Bench.run

    def run(self, ov):  # the mr=4 candidates "compute" instantly and wrongly
        if ov.get("mr") == 4:
            self.c[...] = 0
            return
        real_run(self, ov)

    monkeypatch.setattr(_tune._Bench, "run", run)
    report = coopjit.tune(shape=SHAPE, budget=30, max_candidates=12, progress=False, save=False)
    wrong = [c for c in report.candidates if c["plan"]["mr"] == 4]
    assert wrong and all(c["status"] == "wrong" for c in wrong)
    assert report.winner["plan"]["mr"] != 4 and not report.stored
    assert coopjit._core.tuned_plans() == {}


def test_tune_takes_arrays_and_their_transposes(private_cache, rng):
    m, n, k = 48, 40, 64
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((n, k))  # used transposed
    report = coopjit.tune(a, b, trans_b=True, budget=20, max_candidates=3, progress=False)
    assert report.problem["dtype"] == "float64" and report.problem["trans_b"]
    assert report.problem["signature"] in coopjit._core.tuned_plans()
    assert_gemm_close(coopjit.gemm(a, b, trans_b=True), a, b.T)
    k2 = coopjit.compile_gemm(m, n, k, np.float64, trans_b=True)
    assert k2._core.tuned and _config_plan(k2.config) == report.winner["plan"]
    assert not coopjit.compile_gemm(m, n, k, np.float64)._core.tuned  # another stride class


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "int8"])
def test_tune_low_precision_types_checks_every_candidate(private_cache, dtype):
    import ml_dtypes

    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    report = coopjit.tune(shape=(40, 48, 96), dtype=dt, budget=20, max_candidates=4, progress=False)
    assert report.problem["dtype"] == dt.name
    assert all(c["status"] == "ok" for c in report.candidates), [c for c in report.candidates if c["status"] != "ok"]
    k = coopjit.compile_gemm(40, 48, 96, dt)
    assert k.tuned and _config_plan(k.config) == report.winner["plan"]


def test_tune_stops_within_its_time_budget(private_cache):
    report = coopjit.tune(shape=(256, 256, 256), budget=3, progress=True, save=False)
    assert report.elapsed_s < 3 + 2.0 and report.stopped_by in ("time", "converged")


def test_tune_does_not_start_a_candidate_that_would_overrun_the_budget(private_cache, monkeypatch):
    # Every candidate's first call made 0.5 s slower (a slow compile on a busy machine): a
    # candidate is started only while the median of the earlier ones' cost still fits before the
    # deadline (85% of the budget), and the search stops when it no longer fits, instead of one
    # compile late.
    spans = []  # (start, end) of every new candidate's evaluation
    check, evaluate = _tune._Bench.check, _tune._Search.evaluate

    def slow_check(self, ov):
        time.sleep(0.5)
        return check(self, ov)

    def timed_evaluate(self, plan):
        n, t = len(self.report.candidates), time.perf_counter()
        rec = evaluate(self, plan)
        if len(self.report.candidates) > n:
            spans.append((t, time.perf_counter()))
        return rec

    monkeypatch.setattr(_tune._Bench, "check", slow_check)
    monkeypatch.setattr(_tune._Search, "evaluate", timed_evaluate)
    t0 = time.perf_counter()
    budget = 6
    report = coopjit.tune(shape=SHAPE, budget=budget, progress=False, save=False)
    deadline = t0 + 0.85 * budget
    costs = [e - s for s, e in spans]
    assert report.stopped_by == "time" and len(costs) == len(report.candidates)
    for i in range(1, len(spans)):  # the i-th started only where the earlier costs said it fits
        assert spans[i][0] + statistics.median(costs[:i]) <= deadline, (i, spans[i][0] - t0, costs[:i])
    # ... and the next one was not started because it would not have fit.
    assert spans[-1][1] + statistics.median(costs) > deadline - 0.05, (spans[-1][1] - t0, costs)
    assert report.candidates[0] is report.default and report.winner["status"] == "ok"


def test_report_prints_a_table_converts_and_plots(private_cache, tmp_path):
    report = coopjit.tune(shape=SHAPE, budget=20, max_candidates=3, progress=False, save=False)
    text = str(report)
    assert "ms/call" in text and "GFLOP/s" in text and "winner:" in text and "default" in text
    assert "<table>" in report._repr_html_()
    d = json.loads(json.dumps(report.to_dict()))
    assert len(d["candidates"]) == len(report.candidates) and d["winner"]["plan"] == report.winner["plan"]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.warns(RuntimeWarning, match="matplotlib"):
            assert report.plot(tmp_path / "t.png") is None
    else:
        assert report.plot(tmp_path / "t.png") is not None and (tmp_path / "t.png").stat().st_size > 0


GOOD_PLAN = {"layout": "row", "mr": 3, "nr": 16, "kb": 8, "kt": 128, "threads": 1, "split": "dp", "pack": False}


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"format": 1, "checksum": "00", "entries": {}',
                                    "checksum", "format", b"[1, 2, 3]"])
def test_the_database_survives_damage(private_cache, damage, rng):
    db = private_cache / "tuning.json"
    sig = "gemm f32 8x8x8 batch 1 unit b_c,c_c pool 1"
    _tunedb.store(sig, "cpu", GOOD_PLAN, {"time_s": 1.0})
    doc = json.loads(db.read_text())
    if damage == "checksum":  # valid JSON, an edited entry
        next(iter(doc["entries"].values()))["plan"]["mr"] = 7
        db.write_text(json.dumps(doc))
    elif damage == "format":
        doc["format"] = 99
        db.write_text(json.dumps(doc))
    else:
        db.write_bytes(damage)
    with pytest.warns(RuntimeWarning, match="damaged tuning database"):
        _tunedb.reload()
    assert _tunedb.entries() == {} and coopjit._core.tuned_plans() == {}
    a = rng.standard_normal((8, 8)).astype(np.float32)
    assert_gemm_close(coopjit.matmul(a, a), a, a)
    with pytest.warns(RuntimeWarning):  # the store reads the damaged file once more, then rewrites it
        _tunedb.store(sig, "cpu", GOOD_PLAN, {"time_s": 1.0})
    _tunedb.reload()
    assert len(_tunedb.entries()) == 1 and sig in coopjit._core.tuned_plans()


def test_a_stored_plan_this_build_refuses_falls_back_to_the_default(private_cache, rng):
    m, n, k = 33, 35, 37
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    sig = coopjit._core.gemm_signature(a, b, np.empty((m, n)), False, ("f64", "f64", "f64"))
    _tunedb.store(sig, "cpu", {**GOOD_PLAN, "nr": 13}, {"time_s": 1.0})  # nr not a multiple of any vector width
    assert sig in coopjit._core.tuned_plans()
    assert_gemm_close(coopjit.matmul(a, b), a, b)
    assert not coopjit.compile_gemm(m, n, k, np.float64)._core.tuned


def test_concurrent_tuners_keep_both_entries(private_cache):
    code = ("import json, coopjit\n"
            "r = coopjit.tune(shape='{}', budget=20, max_candidates=2, progress=False)\n"
            "print(json.dumps({{'sig': r.problem['signature']}}))")
    procs = [run_snippet(code.format(s), private_cache, wait=False) for s in ("40x24x16", "24x40x16")]
    sigs = {result_of(p)["sig"] for p in procs}
    _tunedb.reload()
    assert {r["signature"] for r in _tunedb.entries().values()} == sigs and len(sigs) == 2


def test_command_line_tunes_a_list_of_problems(private_cache):
    import subprocess
    import sys
    import os

    out = subprocess.run([sys.executable, "-m", "coopjit", "tune", "--shape", "32x32x32", "--shape", "48x16x24",
                          "--budget", "10", "--max-candidates", "2", "--no-progress"],
                         env={**os.environ, "COOPJIT_CACHE_DIR": str(private_cache)},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("winner:") == 2 and "speed-up" in out.stdout
    _tunedb.reload()
    assert len(_tunedb.entries()) == 2
