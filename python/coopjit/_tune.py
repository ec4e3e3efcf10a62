"""coopjit.tune: times candidate plans of one GEMM problem on real data, checks each result against a float64 NumPy reference, stores the fastest in the tuning database.

The candidates come from KNOBS, one row per knob of the plan: the search starts at the default
plan and sweeps one knob at a time (coordinate descent), keeping the best value of each, and
repeats while that helps, within a time and a candidate budget. To add a knob (the K1 and VNNI
packing choices of low-precision types, a GPU's workgroup shape), add a row whose values the
planner accepts as overrides (PlanOverrides in cpp/plan/gemm_plan.h, _overrides in _kernel_args.py).
"""
from __future__ import annotations

import math
import numbers
import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.typing import DTypeLike

from . import _core, _tunedb
from ._arrays import as_array, as_dtype, gemm_types, kernel_readable
from .devices import check_device
from ._tune_report import TuneReport

#: The fields of a complete plan as the tuner stores it (every knob the planner takes but
#: prepacked_b, which needs an operand packed by coopjit.prepack).
PLAN_KEYS = ("layout", "mr", "nr", "kb", "kt", "threads", "split", "pack", "mc_tiles", "amx")
_AMX = {"none": "no", "tiles": "yes", "emulated": "emulated"}  # kernel.config's words -> the plan's


@dataclass
class Problem:
    m: int
    n: int
    k: int
    dtype: np.dtype
    trans_a: bool
    trans_b: bool
    accumulate: bool
    device: str
    simd: int  # vector lanes of the default plan
    regs: int  # vector registers of the CPU
    pool: int  # workers of the pool


@dataclass
class Knob:
    """One row of the search: `values(problem, plan)` lists the settings to try from `plan`,
    each a dict of plan fields (a knob may set several fields, as the register tile does)."""
    name: str
    values: Callable[[Problem, dict], list]


def _tiles(p: Problem, plan: dict) -> list:
    # Register tiles mr x nr (nr in vectors): accumulators, B vectors and a broadcast fit the
    # register file; no taller or wider than the problem (in the plan's orientation).
    rows, cols = (p.n, p.m) if plan["layout"] == "col" else (p.m, p.n)
    out = []
    for nvec, heights in ((1, (4, 8, 16, 24)), (2, (4, 6, 8, 10, 12, 14)), (3, (4, 6, 8)), (4, (3, 4, 5, 6))):
        if (nvec - 1) * p.simd >= max(cols, 1):
            continue
        for mr in heights:
            if mr * nvec + nvec + 1 <= p.regs and mr <= max(rows, 1):
                out.append({"mr": mr, "nr": nvec * p.simd})
    return out


def _kts(p: Problem, plan: dict) -> list:
    whole = -(-max(p.k, 1) // 128) * 128  # all of K in one K tile
    return [{"kt": kt} for kt in sorted({128, 256, 512, 1024, 2048, 4096, whole}) if kt <= whole and kt % plan["kb"] == 0]


#: The search, per device: one row per knob, swept in this order.
KNOBS: dict[str, list[Knob]] = {
    "cpu": [
        Knob("layout", lambda p, plan: [{"layout": v} for v in ("row", "col")]),
        Knob("pack", lambda p, plan: [{"pack": v} for v in (False, True)]),
        # AMX tiles or the AVX-512 dot instructions (only where the CPU has tiles for the product)
        Knob("amx", lambda p, plan: [{"amx": v} for v in ("no", "yes")] if plan["amx"] == "yes" else []),
        Knob("tile", _tiles),
        # (a K step of at most 16 x the registers' FMAs: the plan check refuses longer ones)
        Knob("kb", lambda p, plan: [{"kb": v} for v in (4, 8, 16, 32)
                                    if v <= max(4, p.k) and plan["mr"] * max(1, plan["nr"] // p.simd) * v <= 16 * p.regs]),
        Knob("kt", _kts),
        # row panels per block of the packed nest (the A block that stays in L2)
        Knob("mc_tiles", lambda p, plan: [{"mc_tiles": v} for v in (4, 8, 16, 32)] if plan["pack"] else []),
        Knob("threads", lambda p, plan: [{"threads": v} for v in sorted({1, p.pool})]),
        Knob("split", lambda p, plan: [{"split": v} for v in ("dp", "sk", "sk+dp")] if plan["threads"] > 1 else []),
    ],
}


def _plan_of(fields: dict) -> dict:
    """A complete plan (PLAN_KEYS) from a plan's fields as kernel.config shows them."""
    def value(k):
        v = fields[k] if k != "amx" else fields.get(k, "none")
        if isinstance(v, str):  # the core's words (a plan from before plans were typed values)
            if k in ("layout", "split"):
                return v
            if k == "amx":
                return _AMX.get(v, v)
            return v == "true" if k == "pack" else int(v.split(":")[0].split()[0])
        return bool(v) if k == "pack" else v
    return {k: value(k) for k in PLAN_KEYS}


def _eps(dtype) -> float:
    if dtype.kind in "iu":
        return 0.0
    try:
        return float(np.finfo(dtype).eps)
    except ValueError:  # bfloat16 and float8 (ml_dtypes)
        import ml_dtypes

        return float(ml_dtypes.finfo(dtype).eps)


def _random(rng, shape, dtype):
    if dtype.kind in "iu":
        return rng.integers(0 if dtype.kind == "u" else -8, 8, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _parse_shape(shape) -> tuple:
    if isinstance(shape, str):
        shape = shape.lower().replace("*", "x").split("x")
    try:
        m, n, k = (int(v) for v in shape)
    except (TypeError, ValueError):
        raise ValueError(f"tune: shape must be (M, N, K) or 'MxNxK', got {shape!r}") from None
    if min(m, n, k) < 1:
        raise ValueError(f"tune: shape {m}x{n}x{k} has an empty dimension")
    return m, n, k


def _available_memory() -> int | None:
    """Bytes the machine can still give new allocations (MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _check_memory(m: int, n: int, k: int, dtype: np.dtype, drawn: bool) -> None:
    """MemoryError before anything is allocated when the problem's arrays would not fit in the
    memory available: the operands (when drawn, with the float64 draw of the larger one), their
    float64 copies, C and its start, and the reference, magnitude and bound of the check. NumPy
    refuses one allocation beyond the machine, but a problem whose arrays each fit and together
    do not had them filled one by one until the kernel's out-of-memory killer ended the process."""
    _, out = gemm_types(dtype, dtype)
    ab = m * k + k * n
    need = ab * 8 + m * n * (2 * out.itemsize + 4 * 8)
    if drawn:
        need += ab * dtype.itemsize + max(m * k, k * n) * 8
    avail = _available_memory()
    if avail is not None and need > avail:
        raise MemoryError(f"tune: the problem {m}x{n}x{k} {dtype} needs about {need / 2**30:.1f} GiB (its operands, C, "
                          f"and the float64 reference every candidate is checked against); this machine has "
                          f"{avail / 2**30:.1f} GiB available")


class _Bench:
    """The operands of one problem, its float64 reference and error bound, and timing."""

    def __init__(self, a, b, trans_a, trans_b, accumulate, rng):
        self.types, out = gemm_types(a.dtype, b.dtype)
        self.opa = kernel_readable(a.T if trans_a else a)
        self.opb = kernel_readable(b.T if trans_b else b)
        m, n = self.opa.shape[0], self.opb.shape[1]
        self.c0 = _random(rng, (m, n), out) if accumulate else np.zeros((m, n), out)
        self.c = np.empty_like(self.c0)
        self.beta = (1.0 if out.kind in "iu" else 0.5) if accumulate else 0.0
        a64, b64, c64 = self.opa.astype(np.float64), self.opb.astype(np.float64), self.c0.astype(np.float64)
        self.ref = a64 @ b64 + self.beta * c64
        # Accumulation in f32 (f64 for f64, exact for integers), then rounding to the output type.
        acc = 0.0 if out.kind in "iu" else _eps(np.dtype(np.float64 if out == np.float64 else np.float32))
        mag = np.abs(a64) @ np.abs(b64) + abs(self.beta) * np.abs(c64)
        self.bound = (self.opa.shape[1] + 2) * acc * mag + _eps(out) * np.abs(self.ref)
        if out.kind == "f":
            self.bound += np.finfo(np.float32).tiny

    def run(self, ov):
        _core.gemm(self.opa, self.opb, self.c, 1.0, self.beta, ov, self.types)

    def check(self, ov) -> bool:
        """One call from c0; True when every element is within the bound of the reference."""
        self.c[...] = self.c0
        self.run(ov)
        return bool(np.all(np.abs(self.c.astype(np.float64) - self.ref) <= self.bound))

    def time(self, ov, min_time: float) -> tuple[float, float]:
        """(median, min) seconds of one call, over at least 3 calls and `min_time` seconds."""
        times = []
        t_start = time.perf_counter()
        while len(times) < 3 or (time.perf_counter() - t_start < min_time and len(times) < 1000):
            t0 = time.perf_counter()
            self.run(ov)
            times.append(time.perf_counter() - t0)
        return float(np.median(times)), float(np.min(times))


def check_limits(budget, max_candidates) -> None:
    """tune's budget (a finite number of seconds above 0) and max_candidates (None or an int of at
    least 1), each named when it is not. budget=nan was taken: the deadline never came, and the
    search timed every candidate it had."""
    if isinstance(budget, (bool, np.bool_)) or not isinstance(budget, numbers.Real) or not (
            math.isfinite(budget) and budget > 0):
        raise ValueError(f"tune: budget must be a positive, finite number of seconds, got {budget!r}")
    if max_candidates is not None and (isinstance(max_candidates, (bool, np.bool_))
                                       or not isinstance(max_candidates, (int, np.integer)) or max_candidates < 1):
        raise ValueError(f"tune: max_candidates must be None or an int of at least 1, got {max_candidates!r}")


def tune(a: np.ndarray | None = None, b: np.ndarray | None = None, *, shape: tuple[int, int, int] | None = None,
         dtype: DTypeLike | None = None, trans_a: bool = False, trans_b: bool = False, accumulate: bool = False,
         device: str | None = None, budget: float = 60.0, max_candidates: int | None = None,
         progress: bool = True, save: bool = True, min_time: float = 0.05, seed: int = 0,
         client: object | None = None) -> TuneReport | list[TuneReport]:
    """Finds the fastest plan for one GEMM problem and stores it for later calls.

    The problem is given by arrays (`a`, `b` as gemm takes them, with `trans_a` / `trans_b`;
    their dtype and strides count) or described (`shape=(M, N, K)` or "MxNxK", `dtype`,
    `trans_a`, `trans_b`: random contiguous operands are made). `accumulate` tunes the beta != 0
    kernel. Candidates are timed on the data (median of calls lasting at least `min_time` s),
    each result checked against a float64 NumPy reference before it may win; the search stops
    after `budget` seconds or `max_candidates` candidates. With `save`, the winner goes to the
    tuning database and later matmul / gemm / compile_gemm calls of this problem (no explicit
    plan) use it, in this process and later ones. Returns a TuneReport (print it, .plot()).

    With `client` (a dask.distributed Client or a scheduler address), `a` is a list of problems
    (shapes or dicts of these arguments) tuned on the cluster's workers: coopjit.dask.tune,
    which returns a list of TuneReports.
    """
    if client is not None:
        from .dask import tune as tune_on_cluster

        if b is not None or shape is not None:
            raise ValueError("tune: with client=, pass the problems as a list (shapes or dicts), not arrays or shape=")
        return tune_on_cluster(a, client, dtype=dtype, trans_a=trans_a, trans_b=trans_b, accumulate=accumulate,
                               device=device, budget=budget, max_candidates=max_candidates, progress=progress,
                               save=save, min_time=min_time, seed=seed)
    device = check_device(device)
    check_limits(budget, max_candidates)
    rng = np.random.default_rng(seed)
    if a is not None:
        if b is None or shape is not None:
            raise ValueError("tune: pass either the arrays a and b, or shape= (and dtype=)")
        a, b = as_array(a, "a"), as_array(b, "b")
        for name, x in (("a", a), ("b", b)):
            if x.ndim != 2:
                raise ValueError(f"tune: {name} must be 2-D, got shape {x.shape}")
        gemm_types(a.dtype, b.dtype)  # TypeError for what GEMM does not take
        m, k = a.shape[::-1] if trans_a else a.shape
        _check_memory(m, b.shape[0] if trans_b else b.shape[1], k, a.dtype, drawn=False)
    else:
        if shape is None:
            raise ValueError("tune: pass the arrays a and b, or shape=(M, N, K)")
        m, n, k = _parse_shape(shape)
        dt = np.dtype(np.float32) if dtype is None else as_dtype(dtype, "tune: dtype")
        gemm_types(dt, dt)
        _check_memory(m, n, k, dt, drawn=True)
        a = _random(rng, (k, m) if trans_a else (m, k), dt)
        b = _random(rng, (n, k) if trans_b else (k, n), dt)
    bench = _Bench(a, b, trans_a, trans_b, accumulate, rng)
    m, k = bench.opa.shape
    n = bench.opb.shape[1]
    default_fields = _core.gemm_plan(bench.opa, bench.opb, bench.c, accumulate, bench.types, {})
    default = _plan_of(default_fields)
    cpu = _core.cpu_info()
    prob = Problem(m, n, k, a.dtype, bool(trans_a), bool(trans_b), bool(accumulate), device,
                   int(default_fields["simd_width"]), cpu["vector_registers"], _core.get_num_threads())
    signature = _core.gemm_signature(bench.opa, bench.opb, bench.c, accumulate, bench.types)
    report = TuneReport(problem={"m": m, "n": n, "k": k, "dtype": a.dtype.name, "trans_a": prob.trans_a,
                                 "trans_b": prob.trans_b, "accumulate": prob.accumulate, "device": device,
                                 "signature": signature},
                        budget_s=float(budget), max_candidates=max_candidates)
    search = _Search(bench, report, budget, max_candidates, min_time, progress)
    search.run(prob, default, KNOBS[device])
    if save and report.winner is not None:
        report.stored_in = _tunedb.store(signature, device, report.winner["plan"], report.record())
        report.stored = True
    return report


class _Search:
    def __init__(self, bench, report, budget, max_candidates, min_time, progress):
        self.bench, self.report = bench, report
        self.t0 = time.perf_counter()
        self.budget = budget
        self.deadline = self.t0 + 0.85 * budget  # the rest is for the final comparison
        self.max_candidates = max_candidates
        self.min_time = min_time
        self.seen: dict = {}  # plan (as a tuple) -> candidate record
        self.costs: list = []  # seconds each new candidate took (compile, check and timing)
        self.bar = _progress_bar(progress, report, max_candidates, budget)

    def out_of_budget(self) -> str | None:
        """Why the search stops before its next candidate, or None. A candidate is not started
        when the median of what the earlier ones took (mostly the JIT compile: seconds on a busy
        machine) would carry it past the deadline: the budget is kept, not overrun by one
        candidate's compile."""
        if self.max_candidates is not None and len(self.seen) >= self.max_candidates:
            return "candidates"
        expected = statistics.median(self.costs) if self.costs else 0.0
        if time.perf_counter() + expected > self.deadline:
            return "time"
        return None

    def evaluate(self, plan: dict) -> dict:
        tag = tuple(sorted(plan.items()))
        if tag in self.seen:
            return self.seen[tag]
        from ._kernel_args import _overrides

        ov = _overrides(plan)
        rec = {"plan": dict(plan), "median_s": None, "min_s": None, "status": "ok", "error": None}
        t0 = time.perf_counter()
        try:
            ok = self.bench.check(ov)  # the first call also compiles (or loads from the disk cache)
            rec["first_call_s"] = time.perf_counter() - t0
            if not ok:
                rec["status"] = "wrong"
            else:
                rec["median_s"], rec["min_s"] = self.bench.time(ov, self.min_time)
        except (ValueError, TypeError) as e:  # a plan the planner refuses
            rec["status"], rec["error"] = "invalid", str(e)
        except RuntimeError as e:  # an internal error of coopjit: reported, the search goes on
            rec["status"], rec["error"] = "error", str(e)
        self.seen[tag] = rec
        self.costs.append(time.perf_counter() - t0)
        self.report.candidates.append(rec)
        if self.bar is not None:
            self.bar.update(1)
            best = self.report.best()
            if best is not None:
                self.bar.set_postfix_str(f"best {best['median_s'] * 1e3:.3f} ms")
        return rec

    def run(self, prob: Problem, default: dict, knobs: list) -> None:
        report = self.report
        try:
            base = self.evaluate(default)
            report.default = base
            best = base
            stop = None
            improved = True
            while improved and not stop:
                improved = False
                for knob in knobs:
                    for setting in knob.values(prob, best["plan"]):
                        stop = self.out_of_budget()
                        if stop:
                            break
                        rec = self.evaluate({**best["plan"], **setting})
                        if rec["status"] == "ok" and rec["median_s"] < best["median_s"]:
                            best, improved = rec, True
                    if stop:
                        break
            report.stopped_by = stop or "converged"
            self.confirm(default)
        finally:
            if self.bar is not None:
                self.bar.close()
            report.elapsed_s = time.perf_counter() - self.t0

    def confirm(self, default: dict) -> None:
        """Times the default and the best four again, interleaved, and picks the winner on the
        best median each reached (noise on a shared machine only ever adds time): a plan must
        beat the default on a second look to replace it."""
        from ._kernel_args import _overrides

        report = self.report
        ok = sorted((c for c in report.candidates if c["status"] == "ok"), key=lambda c: c["median_s"])
        finalists = [report.default] + [c for c in ok[:4] if c is not report.default]
        if report.default["status"] != "ok":
            finalists = ok[:4]
        if not finalists:
            return
        samples = {id(c): [c["median_s"]] for c in finalists}
        # 3 rounds; more (up to 10) while they take under 5% of the budget: each lowers the noise.
        start = time.perf_counter()
        for r in range(10):
            for c in finalists:
                samples[id(c)].append(self.bench.time(_overrides(c["plan"]), self.min_time / 2)[0])
            spent = time.perf_counter() - start
            if r >= 2 and spent * (r + 2) / (r + 1) > 0.05 * self.budget:
                break
        for c in finalists:
            c["confirmed_s"] = float(min(samples[id(c)]))
        winner = min(finalists, key=lambda c: c["confirmed_s"])
        report.winner = winner
        if report.default.get("confirmed_s"):
            report.speedup = report.default["confirmed_s"] / winner["confirmed_s"]
        from ._log import logger

        p = report.problem
        logger.info("tune %dx%dx%d %s: %d candidates, winner %s at %.3f ms (%.2fx the default)", p["m"], p["n"], p["k"],
                    p["dtype"], len(report.candidates), winner["plan"], winner["confirmed_s"] * 1e3, report.speedup or 1.0)


class _BudgetBar:
    """The tuning progress bar: the share of the time budget used and the time left, with the
    plans tried and the best time so far beside it. Takes the candidate events of _Search
    (update / set_postfix_str / close) and moves a tqdm bar whose total is the budget in seconds."""

    def __init__(self, bar, budget: float, max_candidates: int | None):
        self.bar, self.budget, self.max = bar, float(budget), max_candidates
        self.t0 = time.perf_counter()
        self.count, self.best = 0, ""

    def _show(self) -> None:
        used = min(time.perf_counter() - self.t0, self.budget)
        self.bar.n = round(used, 1)
        plans = f"{self.count}/{self.max} plans" if self.max else f"{self.count} plans"
        self.bar.set_postfix_str(f"{max(self.budget - used, 0.0):.0f} s left, {plans}" + (f", {self.best}" if self.best else ""),
                                 refresh=False)
        self.bar.refresh()

    def update(self, k: int = 1) -> None:
        self.count += k
        self._show()

    def set_postfix_str(self, text: str) -> None:
        self.best = text
        self._show()

    def close(self) -> None:
        self._show()
        self.bar.close()


def _progress_bar(progress, report, max_candidates, budget: float = 60.0):
    if not progress:
        return None
    if callable(progress):  # a bar of the caller's making (coopjit.dask's sweeps: events to the client)
        return progress(report, max_candidates)
    p = report.problem
    args = dict(total=round(float(budget), 1), desc=f"tune {p['m']}x{p['n']}x{p['k']} {p['dtype']}", unit="s",
                bar_format="{desc}: {percentage:3.0f}% of the budget |{bar}| {postfix}")
    import warnings

    try:
        # A notebook widget where Jupyter has ipywidgets, else the text bar; tqdm's own warnings
        # (IProgress not found, the experimental-notebook note) are not for coopjit's users.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from tqdm.auto import tqdm

            return _BudgetBar(tqdm(**args), budget, max_candidates)
    except ImportError:  # no tqdm, or a notebook widget that cannot be drawn: the text bar, or none
        try:
            from tqdm.std import tqdm

            return _BudgetBar(tqdm(**args), budget, max_candidates)
        except ImportError:
            return None
