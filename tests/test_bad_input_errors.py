"""Errors of issue 12, item 11: every plan field validated with a ValueError / TypeError naming
the field and the value; messages that name the offending values (operands, prepack, reduce);
level_zero:N without a driver is a DeviceError naming the missing driver; a valid unaligned
input to a compiled Kernel is copied, not refused; u8 x prepack(u8) runs."""
import ml_dtypes
import numpy as np
import pytest

import coopjit
from coopjit.devices import status
from conftest import assert_gemm_close

A = np.arange(20, dtype=np.float32).reshape(4, 5) / 7
B = np.arange(15, dtype=np.float32).reshape(5, 3) / 5


@pytest.mark.parametrize("plan, exc, pattern", [
    ({"mr": -1}, ValueError, r"mr=-1"),
    ({"mr": 2**40}, ValueError, r"mr=1099511627776"),
    ({"mr": 2**70}, ValueError, r"mr=1180591620717411303424"),
    ({"nr": np.int64(-16)}, ValueError, r"nr=-16"),
    ({"kb": 0}, ValueError, r"kb=0"),
    ({"kt": -5}, ValueError, r"kt=-5"),
    ({"kt": 10**15}, ValueError, r"kt=1000000000000000"),
    ({"threads": 0}, ValueError, r"threads=0"),
    ({"threads": -3}, ValueError, r"threads=-3"),
    ({"threads": 10**6}, ValueError, r"threads=1000000"),
    ({"mc_tiles": -1}, ValueError, r"mc_tiles=-1"),
    ({"vnni": 3}, ValueError, r"vnni=3"),
    ({"mr": 2.0}, TypeError, r"mr.*2\.0"),
    ({"mr": "4"}, TypeError, r"mr.*'4'"),
    ({"mr": True}, TypeError, r"mr.*True"),
    ({"pack": "no"}, TypeError, r"pack.*'no'"),
    ({"pack": 2}, ValueError, r"pack.*2"),
    ({"fixed": "x"}, TypeError, r"fixed.*'x'"),
    ({"prepacked_b": 5}, ValueError, r"prepacked_b.*5"),
    ({"layout": 1}, TypeError, r"layout.*1"),
    ({"layout": "diagonal"}, ValueError, r"layout.*'diagonal'"),
    ({"split": ["dp"]}, TypeError, r"split.*\['dp'\]"),
    ({"split": "ks"}, ValueError, r"split.*'ks'"),
    ({"amx": "maybe"}, ValueError, r"amx.*'maybe'"),
    ({"amx": 7}, ValueError, r"amx=7"),
    ({"tile": 3}, ValueError, r"'tile'"),
    ({1: 2}, TypeError, r"1"),
    ([("mr", 2)], TypeError, r"plan must be a dict.*list"),
    ("mr=2", TypeError, r"plan must be a dict.*'mr=2'"),
])
def test_bad_plan_fields_name_field_and_value(plan, exc, pattern):
    for call in (lambda: coopjit.matmul(A, B, plan=plan), lambda: coopjit.gemm(A, B, plan=plan),
                 lambda: coopjit.compile_gemm(4, 3, 5, plan=plan)):
        with pytest.raises(exc, match=pattern):
            call()


@pytest.mark.parametrize("plan, exc, pattern", [
    ({"subgroup_size": -16}, ValueError, r"subgroup_size=-16"),
    ({"sg_m": 0}, ValueError, r"sg_m=0"),
    ({"workers": -4}, ValueError, r"workers=-4"),
    ({"kt": 10**12}, ValueError, r"kt=1000000000000"),
    ({"mr": 3.0}, TypeError, r"mr.*3\.0"),
    ({"dpas": 7}, ValueError, r"dpas=7"),
    ({"threads": 2}, ValueError, r"'threads'.*GPU device"),
])
def test_bad_device_plan_fields(plan, exc, pattern):
    from device_support import DEVICE, needs_device

    needs_device()
    with pytest.raises(exc, match=pattern):
        coopjit.matmul(A, B, plan=plan, device=DEVICE)


def test_good_plan_fields_still_work():
    for plan in ({"pack": True}, {"pack": np.bool_(False)}, {"fixed": 0}, {"mr": np.int32(3)}, {"split": "sk", "threads": 2}):
        assert_gemm_close(coopjit.matmul(A, B, plan=plan), A, B)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: coopjit.matmul(np.array("x"), B), TypeError, r"a has dtype <U1"),
    (lambda: coopjit.matmul(np.float32(2), B), ValueError, r"a is 0-d \(a scalar: np\.float32\(2\.0\)\)"),
    (lambda: coopjit.compile_gemm(2, 2, 2, np.int32), TypeError, r"compile_gemm: dtype=dtype\('int32'\)"),
    (lambda: coopjit.compile_gemm(2.5, 2, 2), TypeError, r"m must be a non-negative int, got 2\.5"),
    (lambda: coopjit.compile_gemm(2, "3", 2), TypeError, r"n must be a non-negative int, got '3'"),
    (lambda: coopjit.compile_gemm(2, 3, 2**70), ValueError, r"k must be a non-negative int.*got 1180591620717411303424"),
    (lambda: coopjit.cross_compile(A, B, cpu="znver4", threads=1.5), TypeError, r"threads.*1\.5"),
    (lambda: coopjit.cross_compile(A, B, cpu="znver4", threads=0), ValueError, r"threads.*got 0"),
    (lambda: coopjit.prepack(np.ones((5, 3), np.int32)), TypeError, r"prepack: b has dtype int32"),
    (lambda: coopjit.prepack(np.ones(5, np.float32)), ValueError, r"prepack: b must be 2-D, got shape \(5,\)"),
    (lambda: coopjit.matmul(np.ones((4, 6), np.float32), coopjit.prepack(B)), ValueError,
     r"a has shape \(4, 6\) but the packed b is \(5, 3\)"),
    (lambda: coopjit.matmul(np.ones((2, 4, 5), np.float32), coopjit.prepack(B)), ValueError,
     r"a has shape \(2, 4, 5\).*2-D"),
    (lambda: coopjit.matmul(A, coopjit.prepack(B), out=np.zeros((4, 4), np.float32)), ValueError,
     r"out has shape \(4, 4\).*\(4, 3\)"),
    (lambda: coopjit.gemm(A, coopjit.prepack(B), np.zeros((3, 3), np.float32)), ValueError, r"c has shape \(3, 3\)"),
    (lambda: coopjit.gemm(A, coopjit.prepack(B), [[0.0]]), TypeError, r"c must be a writable array .*got list"),
    (lambda: coopjit.reduce(A, axis=0.5), TypeError, r"axis must be None, an int or a tuple of ints, got 0\.5"),
    (lambda: coopjit.reduce(A, axis=(0, "1")), TypeError, r"got \(0, '1'\)"),
    (lambda: coopjit.reduce(A, op="mean"), ValueError, r"unknown op 'mean'"),
    (lambda: coopjit.reduce(A.astype(complex)), TypeError, r"dtype complex128"),
    (lambda: coopjit.reduce(A, axis=0, out=np.zeros(4, np.float32)), ValueError, r"got float32 \(4,\)"),
    (lambda: coopjit.reduce2x2(np.ones((4, 4)), out=np.zeros(3)), ValueError, r"shape \(2, 2\), got float64 \(3,\)"),
    (lambda: coopjit.reduce2x2(np.ones((4, 4)), out=[0.0]), ValueError, r"got list"),
])
def test_messages_name_the_offending_values(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_read_only_gemm_outputs_are_named():
    c = np.zeros((4, 3), np.float32)
    c.setflags(write=False)
    for call, pattern in ((lambda: coopjit.gemm(A, B, c), r"c \(float32 \(4, 3\)\) is read-only"),
                          (lambda: coopjit.gemm(A, coopjit.prepack(B), c), r"c \(float32 \(4, 3\)\) is read-only"),
                          (lambda: coopjit.matmul(A, B, out=c), r"out \(float32 \(4, 3\)\) is read-only"),
                          (lambda: coopjit.compile_gemm(4, 3, 5)(A, B, c), r"c \(float32 \(4, 3\)\) is read-only")):
        with pytest.raises(ValueError, match=pattern):
            call()


def test_read_only_reduce_outputs_are_named():
    out = np.zeros(5, np.float32)
    out.setflags(write=False)
    with pytest.raises(ValueError, match=r"out \(float32 \(5,\)\) is read-only"):
        coopjit.reduce(A, axis=0, out=out)
    out2 = np.zeros((2, 2))
    out2.setflags(write=False)
    with pytest.raises(ValueError, match=r"out \(float64 \(2, 2\)\) is read-only"):
        coopjit.reduce2x2(np.ones((4, 4)), out=out2)


def test_core_reduce_refuses_misaligned_or_partial_strides():
    """The binding re-checks what memory safety needs, naming the values."""
    buf = np.zeros(4 * 12 + 1, np.uint8)
    x = buf[1:].view(np.float32).reshape(3, 4)
    y = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match=r"X at address .* is not aligned to its itemsize 4"):
        coopjit._core.reduce2d("sum", "row", x, y, "f32", "f32", "f32")
    ys = np.lib.stride_tricks.as_strided(np.zeros(8, np.uint8), (3,), (2,)).view(np.uint8)
    with pytest.raises((ValueError, TypeError), match=r"element sizes|byte stride"):
        coopjit._core.reduce2d("sum", "row", np.zeros((3, 4), np.float32), ys, "f32", "f32", "f32")
    with pytest.raises(ValueError, match=r"1-D of length 3, got 1-D of length 2"):
        coopjit._core.reduce2d("sum", "row", np.zeros((3, 4), np.float32), np.zeros(2, np.float32), "f32", "f32", "f32")


level_zero = next(s for s in status() if s["backend"] == "level_zero")


@pytest.mark.skipif(level_zero["usable"] > 0, reason="a Level Zero GPU driver is present")
def test_level_zero_without_driver_is_a_device_error():
    assert issubclass(coopjit.DeviceError, RuntimeError)
    for call in (lambda: coopjit.matmul(A, B, device="level_zero:0"),
                 lambda: coopjit.gemm(A, B, device="level_zero:0"),
                 lambda: coopjit.reduce(A, device="level_zero:0"),
                 lambda: coopjit.compile_gemm(4, 3, 5, device="level_zero:0")):
        with pytest.raises(coopjit.DeviceError, match=r"'level_zero:0' is not available.*Level Zero loader.*"
                                                      r"(no GPU driver|libze_intel_gpu|libze_loader)"):
            call()
    with pytest.raises(ValueError, match="unknown device 'tpu:0'"):  # names of nothing coopjit knows stay ValueError
        coopjit.matmul(A, B, device="tpu:0")


@pytest.mark.parametrize("which", ["a", "b", "c", "all"])
def test_compiled_kernel_copies_unaligned_operands(rng, which):
    a = rng.standard_normal((6, 9)).astype(np.float32)
    b = rng.standard_normal((9, 7)).astype(np.float32)
    k = coopjit.compile_gemm(6, 7, 9, np.float32)

    def unaligned(x):
        buf = np.zeros(x.nbytes + 1, np.uint8)
        u = buf[1:].view(x.dtype).reshape(x.shape)
        u[...] = x
        assert not u.flags.aligned
        return u

    ua = unaligned(a) if which in ("a", "all") else a
    ub = unaligned(b) if which in ("b", "all") else b
    c = unaligned(np.zeros((6, 7), np.float32)) if which in ("c", "all") else None
    got = k(ua, ub, c)
    assert c is None or got is c
    assert_gemm_close(np.array(got), a, b)
    assert np.array_equal(ua, a) and np.array_equal(ub, b)


@pytest.mark.parametrize("a_dtype, b_dtype", [(np.uint8, np.uint8), (np.int8, np.uint8), (np.uint8, np.int8),
                                              (np.int8, np.int8)])
def test_prepacked_int8_weights_with_either_activation_type(rng, a_dtype, b_dtype):
    a = rng.integers(0 if a_dtype == np.uint8 else -128, 128, (13, 40)).astype(a_dtype)
    b = rng.integers(0 if b_dtype == np.uint8 else -128, 128, (40, 24)).astype(b_dtype)
    pb = coopjit.prepack(b)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    for _ in range(2):  # the second product reuses the packing made for this A type
        got = coopjit.matmul(a, pb)
        assert got.dtype == np.int32 and np.array_equal(got, ref)
    assert np.array_equal(coopjit.gemm(a, pb), ref)
    assert np.array_equal(pb.unpacked(), b)


def test_prepacked_bf16_unpacks_to_itself(rng):
    b = rng.standard_normal((33, 20)).astype(ml_dtypes.bfloat16)
    pb = coopjit.prepack(b)
    assert np.array_equal(pb.unpacked().view(np.uint16), b.view(np.uint16))


def test_matmul_into_a_misaligned_out(rng):
    a = rng.standard_normal((30, 40)).astype(np.float32)
    b = rng.standard_normal((40, 50)).astype(np.float32)
    buf = np.zeros(30 * 50 * 4 + 1, np.uint8)
    out = buf[1:].view(np.float32).reshape(30, 50)
    assert not out.flags.aligned
    assert coopjit.matmul(a, b, out=out) is out
    assert_gemm_close(out.copy(), a, b)
    c = buf[1:].view(np.float32).reshape(30, 50)
    c[...] = 1.0
    coopjit.gemm(a, b, c, beta=2.0)
    assert_gemm_close(c.copy(), a, b, np.ones((30, 50), np.float32), beta=2.0)
