"""A bounded, derandomized slice of scripts/fuzz_cpu_plans.py (session 20's audit of the CPU plans
of sessions 17-19): what tests/test_property_sweep.py does not reach. Products of 1-80 rows and
N / K around vector widths, register tiles and K tiles of 256 (the sweep stops at 17), on pools of
1, 2, 3 and 16 workers (the many-core splits, inline_b on 8+ cores), with plan= steering them to the
audited paths (the k_outer walk's 8 x 3-vector tiles, half-width vectors, emulated AMX tiles stored
straight to C, B packed by its reader, Stream-K, ksplit), fused epilogues, prepacked B and compiled
kernels; every output a view inside a larger buffer whose other bytes must stay as they were, every
input compared byte for byte after the call, the result against NumPy in float64."""
import numpy as np
import pytest

import coopjit
from conftest import load_script

fuzz = load_script("fuzz_cpu_plans")

CASES_PER_SEED = 6


@pytest.mark.parametrize("seed", [101, 202, 303, 404])
def test_fuzzed_products_match_numpy_and_stay_in_their_buffers(pool, seed):
    pool(coopjit.get_num_threads())  # (the fixture restores the pool's size after the cases change it)
    rng = np.random.default_rng(seed)
    stats = {"ran": 0, "refused": 0, "skipped": 0, "refusals": {}}
    failures = []
    for i in range(CASES_PER_SEED):
        c = fuzz.draw(rng, [1, 2, 3, 16])
        err = fuzz.run_case(c, stats)
        if err:
            failures.append(f"{fuzz.describe(c)}: {err}")
    assert not failures, "\n".join(failures)
    assert stats["ran"] >= CASES_PER_SEED // 2, stats  # most cases ran (refusals are plans that do not apply)


def test_bad_inputs_raise_errors_naming_their_values():
    failures = []
    assert fuzz.bad_input_cases(failures) >= 50
    assert not failures, "\n".join(failures)
