"""Plan k_inner + nc_tiles (emulated AMX tiles here) and the fenced cycles counters combined with
other plan fields (ksplit, Stream-K, shares, own_a, epilogues, bf16 C, pool sizes 1..17), and the
counters before / after a failed call. Each result against NumPy in float64 (int8 exact) and the
plan without k_inner; anything but a refusal naming the values is a finding."""
import itertools
import ml_dtypes
import numpy as np
import coopjit
from coopjit import _core

BF16 = ml_dtypes.bfloat16
rng = np.random.default_rng(29)
ran = refused = failed = 0
extras = [{}, {"ksplit": 2}, {"split": "sk"}, {"split": "sk+dp"}, {"shares": 3}, {"own_a": 1}, {"cycles": 1},
          {"cycles": 1, "shares": 2}, {"order": "m_inner"}, {"prepacked_b": 1}, {"inline_b": 1}, {"c_prefetch": 1}]
for dt, (m, n, k), threads, extra, epi in itertools.product(
        ["bf16", "int8"], [(200, 230, 300), (33, 65, 129), (512, 256, 512), (1, 300, 700)], [1, 3, 17], extras,
        [None, "bias", "out_bf16"]):
    if epi == "out_bf16" and dt != "bf16":
        continue
    coopjit.set_num_threads(threads)
    if dt == "bf16":
        a, b = rng.uniform(-2, 2, (m, k)).astype(BF16), rng.uniform(-2, 2, (k, n)).astype(BF16)
    else:
        a, b = rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
    a0, b0 = a.copy(), b.copy()
    plan = {"amx": "emulated", "k_inner": 1, "nc_tiles": 2, "mc_tiles": 2, "kt": 128, **extra}
    kw = {}
    bias = None
    if epi == "bias":
        bias = rng.standard_normal(n).astype(np.float32)
        kw["bias"] = bias
    if epi == "out_bf16":
        kw["out"] = np.empty((m, n), BF16)
    try:
        _core._gemm_cycles(True)
        c = coopjit.matmul(a, b, plan=plan, **kw)
        ref = a.astype(np.float64) @ b.astype(np.float64) + (bias if bias is not None else 0)
        got = np.asarray(c).astype(np.float64)
        if dt == "int8" and bias is None:
            ok = np.array_equal(got, ref)
        else:
            bound = (k + 2) * 2.0**-23 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + \
                (np.abs(ref) * 2.0**-8 if epi == "out_bf16" or np.asarray(c).dtype == BF16 else 0) + 1e-6
            ok = np.all(np.abs(got - ref) <= bound)
        ok = ok and np.array_equal(a, a0) and np.array_equal(b, b0)
        d = _core._gemm_cycles(True)
        if "cycles" in extra:
            ok = ok and d["calls"] == 1
        # a failed call after (inner dimensions): the counters untouched
        try:
            coopjit.matmul(a, b[:-1], plan=plan)
        except ValueError:
            pass
        ok = ok and _core._gemm_cycles(True)["calls"] == 0
        ran += 1
        if not ok:
            failed += 1
            print("FAIL", dt, (m, n, k), threads, plan, epi)
    except (ValueError, TypeError) as e:
        refused += 1
    except Exception as e:  # noqa: BLE001
        failed += 1
        print("EXC", type(e).__name__, str(e)[:200], dt, (m, n, k), threads, plan, epi)
print(f"ran {ran}, refused {refused}, failed {failed}")
