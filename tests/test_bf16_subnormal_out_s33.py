"""bf16 results that are subnormal: the f32 -> bf16 conversion of a kernel's results rounds them to
nearest even as it rounds normal values. vcvtneps2bf16 (one instruction a vector, AVX512-BF16)
reads subnormal inputs as zero, so a faster conversion must not reach these results unchecked
(the AMX tiles' own sums hold no subnormals; sums scaled by alpha, Stream-K's added partial sums
and the vector tiles' results can). Operands of small integers times powers of two make every f32
sum and alpha-scaled result exact, so the expected bf16 bits are ml_dtypes' rounding of the
float64 product."""
import numpy as np
import pytest

import coopjit

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16


def _operands(rng, m, n, k):
    a = (rng.integers(-8, 9, (m, k)) * 2.0**-32).astype(BF16)
    b = (rng.integers(-8, 9, (k, n)) * 2.0**-32).astype(BF16)
    return a, b


PLANS = [None, {"amx": "no"}, {"amx": "emulated"}, {"kt": 32}, {"split": "sk", "threads": 2}]


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "planner" if p is None else "-".join(f"{k}={v}" for k, v in p.items()))
@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (37, 50, 96)])
def test_subnormal_bf16_results_round_to_nearest_even(rng, plan, m, n, k):
    a, b = _operands(rng, m, n, k)
    alpha = 2.0**-72  # the sums (multiples of 2^-64, normal) scaled into f32's subnormal range
    want = (alpha * (a.astype(np.float64) @ b.astype(np.float64))).astype(np.float32).astype(BF16)
    sub = (want != 0) & (np.abs(want.astype(np.float32)) < np.finfo(np.float32).tiny)
    assert sub.mean() > 0.5, sub.mean()  # most results are bf16 subnormals, not zero
    try:
        c = np.empty((m, n), BF16)
        coopjit.gemm(a, b, c, alpha=alpha, plan=plan)
    except ValueError as e:  # emulated tiles need AVX-512: the one plan a CPU may refuse here
        if not (plan and plan.get("amx") == "emulated"):
            raise
        pytest.skip(f"plan {plan} not runnable on this CPU: {e}")
    got, exp = c.view(np.uint16), want.view(np.uint16)
    bad = got != exp
    assert not bad.any(), (f"{bad.sum()} of {bad.size} differ; first at {np.argwhere(bad)[0]}: "
                           f"got {c[bad][0]!r} want {want[bad][0]!r}")


def test_normal_bf16_results_round_once(rng):
    """Normal results of the planner's kernel: exact sums rounded once (ties to even included)."""
    a = (rng.integers(-300, 301, (48, 96)) * 2.0**-4).astype(BF16)
    b = (rng.integers(-300, 301, (96, 80)) * 2.0**-4).astype(BF16)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(BF16)
    got = coopjit.matmul(a, b)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
