"""Arrays from the Python ecosystem: PyTorch CPU tensors (bfloat16 and requires_grad included), DLPack
and buffer-protocol objects, as inputs and as out=; masked arrays refused; PackedMatrix with @.
References: NumPy in float64 on the same values."""
import array

import ml_dtypes
import numpy as np
import pytest

import coopjit

torch = pytest.importorskip("torch", reason="PyTorch is installed by scripts/setup.sh")
BF16 = ml_dtypes.bfloat16


class DLPackOnly:
    """An object that offers its data only through the DLPack protocol (NumPy is the producer): the
    exchange is real, this class just hides every other route."""

    def __init__(self, x):
        self._x = x

    def __dlpack__(self, **kw):
        return self._x.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._x.__dlpack_device__()


def ref(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


def test_torch_tensors_in_without_copies(rng):
    a = torch.from_numpy(rng.standard_normal((33, 20)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((20, 17)).astype(np.float32)).requires_grad_(True)
    got = coopjit.matmul(a, b)
    np.testing.assert_allclose(got, ref(a.numpy(), b.detach().numpy()), rtol=1e-5, atol=1e-5)
    assert b.grad is None and b.requires_grad  # read, not changed


def test_torch_bfloat16_reads_the_same_bits(rng):
    a32 = rng.uniform(-1, 1, (40, 24)).astype(np.float32)
    b32 = rng.uniform(-1, 1, (24, 8)).astype(np.float32)
    a, b = torch.from_numpy(a32).bfloat16(), torch.from_numpy(b32).bfloat16()
    a_np = a.float().numpy().astype(BF16)  # torch's own bfloat16 rounding, read back through float32
    b_np = b.float().numpy().astype(BF16)
    got = coopjit.gemm(a, b, np.empty((40, 8), np.float32))
    np.testing.assert_allclose(got, ref(a_np, b_np), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(coopjit.reduce(a, axis=0), np.float64), a_np.astype(np.float64).sum(0),
                               rtol=2 ** -7, atol=1e-2)


def test_torch_out_is_written_in_place_and_returned(rng):
    a = rng.standard_normal((16, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    out = torch.zeros((16, 5))
    assert coopjit.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out.numpy(), ref(a, b), rtol=1e-5, atol=1e-5)
    c = torch.ones((16, 5), dtype=torch.float64)
    assert coopjit.gemm(a.astype(np.float64), b.astype(np.float64), c, beta=2.0) is c
    np.testing.assert_allclose(c.numpy(), ref(a, b) + 2.0, rtol=1e-12)
    s = torch.zeros(5, dtype=torch.float64)
    assert coopjit.reduce(b.astype(np.float64), axis=0, out=s) is s
    np.testing.assert_allclose(s.numpy(), b.astype(np.float64).sum(0), rtol=1e-12)


def test_a_tensor_that_requires_grad_is_not_a_writable_out():
    out = torch.zeros((2, 2), requires_grad=True)
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        coopjit.matmul(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32), out=out)


def test_dlpack_and_buffer_objects_in_and_out(rng):
    a = rng.standard_normal((12, 7))
    b = rng.standard_normal((7, 3))
    np.testing.assert_allclose(coopjit.matmul(DLPackOnly(a), DLPackOnly(b)), ref(a, b), rtol=1e-12)
    flat = array.array("d", rng.standard_normal(10))
    np.testing.assert_allclose(coopjit.reduce(flat), np.sum(np.frombuffer(flat)), rtol=1e-12)
    np.testing.assert_allclose(coopjit.matmul(memoryview(a), b), ref(a, b), rtol=1e-12)
    buf = bytearray(12 * 3 * 8)
    out = memoryview(buf).cast("d", (12, 3))
    assert coopjit.matmul(a, b, out=out) is out
    np.testing.assert_allclose(np.frombuffer(buf).reshape(12, 3), ref(a, b), rtol=1e-12)


def test_read_only_buffers_are_not_outputs():
    with pytest.raises(ValueError, match="read-only"):
        coopjit.matmul(np.eye(2), np.eye(2), out=memoryview(bytes(32)).cast("d", (2, 2)))
    with pytest.raises(TypeError, match="out must be a writable array"):
        coopjit.matmul(np.eye(2), np.eye(2), out=[[0.0, 0.0], [0.0, 0.0]])


def test_masked_arrays_are_refused_not_silently_unmasked():
    m = np.ma.masked_array(np.ones((3, 3), np.float32), mask=np.eye(3, dtype=bool))
    for call in (lambda: coopjit.matmul(m, np.ones((3, 3), np.float32)),
                 lambda: coopjit.matmul(np.ones((3, 3), np.float32), m),
                 lambda: coopjit.reduce(m),
                 lambda: coopjit.gemm(m, m)):
        with pytest.raises(TypeError, match="masked array"):
            call()


def test_packed_matrix_takes_the_matmul_operator(rng):
    a = rng.standard_normal((30, 64)).astype(np.float32)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    packed = coopjit.prepack(w)
    got = a @ packed
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, ref(a, w), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(torch.from_numpy(a).numpy() @ packed, ref(a, w), rtol=1e-5, atol=1e-4)


def test_jax_arrays_in(rng):
    # JAX arrays reach coopjit through DLPack (no copy on the CPU), bfloat16 included; the result is
    # a NumPy array, checked against NumPy in float64 on the same values.
    import jax  # installed by scripts/setup.sh
    import jax.numpy as jnp

    cpu = jax.devices("cpu")[0]  # (JAX arrays on a GPU are device arrays: tests/test_cuda_arrays.py)
    a32, b32 = rng.standard_normal((33, 20)).astype(np.float32), rng.standard_normal((20, 17)).astype(np.float32)
    a, b = jax.device_put(jnp.asarray(a32), cpu), jax.device_put(jnp.asarray(b32), cpu)
    c = coopjit.matmul(a, b)
    assert type(c) is np.ndarray
    np.testing.assert_allclose(c, a32.astype(np.float64) @ b32, rtol=1e-5, atol=1e-5)
    ab, bb = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    c = coopjit.matmul(ab, bb)
    assert c.dtype == ml_dtypes.bfloat16
    want = np.asarray(ab).astype(np.float64) @ np.asarray(bb).astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2 ** -7, atol=1e-2)
    np.testing.assert_allclose(coopjit.reduce(a, axis=0), a32.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    assert np.array_equal(np.asarray(a), a32)  # read, not modified
