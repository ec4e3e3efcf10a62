"""CUDA device arrays in and out without copies: PyTorch CUDA tensors, CuPy arrays and any object
with `__cuda_array_interface__` are read and written where they live; results of products of
device arrays are device arrays of the inputs' framework (a torch tensor for torch inputs, a CuPy
array for CuPy inputs, else a coopjit.DeviceArray, which PyTorch and CuPy take without copies
through `__cuda_array_interface__` and DLPack).

Products whose operands are all device arrays are queued on the arrays' stream and the call
returns without waiting (as a torch or CuPy operation does): torch's current stream for torch
tensors, the stream `__cuda_array_interface__` names (version 3's "stream") for others, the
legacy default stream when none is named; so are fused epilogues whose operands (bias, scale,
row_scale, residual) are device arrays too, read where they are. Other calls (host operands mixed
in, host epilogue operands, epilogue functions, Stream-K plans outside the warp-specialized kernel,
reductions) first synchronize the stream each operand's work is on (torch's current stream for
torch tensors, the stream `__cuda_array_interface__` names for CuPy arrays and others: CuPy's
current stream), run on coopjit's stream (ordered with the legacy default stream) and are
complete when the call returns.
"""
from __future__ import annotations

import ctypes

import numpy as np
import numpy.typing  # noqa: F401 (annotations)

from . import _core
from ._arrays import as_dtype

_TORCH_NP = {"float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
             "int8": "int8", "uint8": "uint8", "int32": "int32", "float8_e4m3fn": "float8_e4m3fn",
             "float8_e5m2": "float8_e5m2"}


def byte_span(ptr: int, shape, strides, itemsize: int) -> tuple[int, int]:
    """[lo, hi): the bytes the elements of a strided view at `ptr` lie in (byte strides; a view
    with elements)."""
    lo = hi = ptr
    for n, st in zip(shape, strides):
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return lo, hi + itemsize


def _np_dtype(name: str) -> np.dtype:
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


class CudaView:
    """A device array's memory as the kernels read it: the address of element [0, ...], shape,
    byte strides, dtype and device; `owner` keeps the memory alive. Quacks like an ndarray where
    the device path looks (shape, strides, itemsize, ndim, size, T, dtype)."""

    def __init__(self, ptr: int, shape: tuple, strides: tuple, dtype: np.dtype, device: str, owner, framework: str,
                 stream: int | None = None):
        self.ptr, self.shape, self.strides, self.dtype = int(ptr), tuple(shape), tuple(strides), np.dtype(dtype)
        self.device, self.owner, self.framework = device, owner, framework
        self.stream = stream  # the stream __cuda_array_interface__ names (1: legacy default, 2: per-thread), or None

    itemsize = property(lambda self: self.dtype.itemsize)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @property
    def T(self) -> "CudaView":
        return CudaView(self.ptr, self.shape[::-1], self.strides[::-1], self.dtype, self.device, self.owner,
                        self.framework, self.stream)

    def span(self) -> tuple[int, int]:
        """[lo, hi): the device bytes the elements lie in (empty views: (ptr, ptr))."""
        if any(n == 0 for n in self.shape):
            return self.ptr, self.ptr
        return byte_span(self.ptr, self.shape, self.strides, self.itemsize)

    @property
    def c_contiguous(self) -> bool:
        want = self.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != want:
                return False
            want *= n
        return True

    def __repr__(self):
        return f"CudaView({self.framework} {self.dtype} {self.shape} on {self.device})"


_TORCH_DT: dict = {}  # torch dtype -> NumPy dtype


def _torch_view(x, sync: bool = True) -> CudaView | None:
    if not getattr(x, "is_cuda", False):
        return None
    dt = _TORCH_DT.get(x.dtype)
    if dt is None:
        name = str(x.dtype).replace("torch.", "")
        if name not in _TORCH_NP:
            raise TypeError(f"a torch CUDA tensor of dtype {x.dtype} is not supported (supported: "
                            f"{', '.join(_TORCH_NP)})")
        dt = _TORCH_DT[x.dtype] = _np_dtype(_TORCH_NP[name])
    if x.requires_grad:
        x = x.detach()
    index = x.get_device()
    if sync:
        import torch

        torch.cuda.current_stream(index).synchronize()  # what torch queued on its stream has run
    return CudaView(x.data_ptr(), tuple(x.shape), tuple(s * dt.itemsize for s in x.stride()), dt,
                    f"cuda:{index}", x, "torch")


def torch_stream(index: int) -> int:
    """The handle of torch's current stream on CUDA device `index` (0: the legacy default stream)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return int(raw(index)) if raw is not None else int(torch.cuda.current_stream(index).cuda_stream)


def launch_stream(views) -> int | None:
    """The stream a product of these device arrays is queued on: torch's current stream for torch
    tensors, the stream the interface names for others, the legacy default stream (0) when none
    is named; None when they name different streams (the caller synchronizes instead)."""
    streams = set()
    for v in views:
        if v.framework == "torch":
            streams.add(torch_stream(int(v.device.partition(":")[2] or 0)))
        elif v.stream is not None:
            streams.add(0 if v.stream == 1 else int(v.stream))
    if len(streams) > 1:
        return None
    return streams.pop() if streams else 0


def wait_for(views) -> None:
    """Before a launch on coopjit's own stream: what torch queued on its current stream has run,
    and what was queued on the stream each other array's __cuda_array_interface__ names (CuPy's
    current stream; only torch's was waited for, so a CuPy array written on a stream of its own
    just before the call was read before the write)."""
    done = set()
    for v in views:
        if v is None:
            continue
        if v.framework == "torch":
            if v.device not in done:
                import torch

                done.add(v.device)
                torch.cuda.current_stream(int(v.device.partition(":")[2] or 0)).synchronize()
        elif v.stream is not None and v.stream != 1 and (v.device, v.stream) not in done:
            done.add((v.device, v.stream))
            sync_stream(v)


_DRIVER_SYNC = None  # cuStreamSynchronize of the CUDA driver (ctypes), loaded on first use


def sync_stream(v: CudaView) -> None:
    """Waits for the stream v's __cuda_array_interface__ named (a handle; 2: the per-thread default
    stream); the legacy default stream (1) needs no wait: coopjit's stream is ordered with it.
    CuPy's arrays through CuPy's runtime, others through the CUDA driver's cuStreamSynchronize."""
    s = v.stream
    if s is None or s == 1:
        return
    if v.framework == "cupy":
        import cupy

        cupy.cuda.runtime.streamSynchronize(int(s))
        return
    global _DRIVER_SYNC
    if _DRIVER_SYNC is None:
        import os

        lib = ctypes.CDLL(os.environ.get("COOPJIT_CUDA_LIBRARY") or "libcuda.so.1")
        fn = lib.cuStreamSynchronize
        fn.argtypes, fn.restype = [ctypes.c_void_p], ctypes.c_int
        _DRIVER_SYNC = fn
    err = _DRIVER_SYNC(ctypes.c_void_p(int(s)))
    if err != 0:
        raise RuntimeError(f"cuStreamSynchronize of the stream {s:#x} that a {v.framework} array's "
                           f"__cuda_array_interface__ names failed (CUresult {err})")


def device_view(x, sync: bool = True) -> CudaView | None:
    """x as a CudaView when it is a CUDA device array (torch CUDA tensor, CuPy array, an object with
    __cuda_array_interface__, a CudaView or DeviceArray), else None. `sync`: a torch tensor's current
    stream, or the stream the interface names, is synchronized first (sync=False: the caller orders
    its launch, launch_stream / wait_for)."""
    if isinstance(x, CudaView):
        return x
    if isinstance(x, DeviceArray):
        return x._view
    if type(x).__module__.partition(".")[0] == "torch":
        return _torch_view(x, sync)
    if isinstance(x, np.ndarray):
        return None
    try:
        d = x.__cuda_array_interface__
    except AttributeError:
        return None
    dt = np.dtype(d["typestr"])
    if "descr" in d and len(d["descr"]) == 1 and d["descr"][0][0] in ("bfloat16",):
        dt = _np_dtype(d["descr"][0][0])
    shape = tuple(d["shape"])
    strides = d.get("strides")
    if strides is None:  # C order
        acc, out = dt.itemsize, []
        for n in reversed(shape):
            out.append(acc)
            acc *= n
        strides = tuple(reversed(out))
    if d.get("mask") is not None:
        raise TypeError("a masked device array: coopjit does not apply masks")
    dev = getattr(getattr(x, "device", None), "id", 0)
    fw = "cupy" if type(x).__module__.partition(".")[0] == "cupy" else "cai"
    stream = d.get("stream") if d.get("version", 0) >= 3 else None
    v = CudaView(d["data"][0], shape, tuple(strides), dt, f"cuda:{int(dev) if isinstance(dev, int) else 0}", x, fw,
                 None if stream is None else int(stream))
    if sync and v.stream is not None:
        sync_stream(v)
    return v


def is_device_array(x) -> bool:
    try:
        return device_view(x, False) is not None
    except TypeError:
        return True  # a device array coopjit cannot read: the caller reports it


class DeviceArray:
    """An array in a CUDA device's memory that coopjit made (the result of a product of device
    arrays that were neither torch tensors nor CuPy arrays). `__cuda_array_interface__` and DLPack
    (`__dlpack__`, `__dlpack_device__`) hand it to PyTorch (torch.as_tensor / torch.from_dlpack)
    and CuPy (cupy.asarray / cupy.from_dlpack) without a copy; `numpy()` copies it to the host."""

    def __init__(self, shape: tuple, dtype: "np.typing.DTypeLike", device: str = "cuda:0") -> None:
        self.dtype = as_dtype(dtype, "DeviceArray: dtype")
        self.shape = tuple(int(n) for n in shape)
        self.device = device
        nbytes = max(1, int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize)
        self._buf = _core.alloc_device(device, nbytes)
        strides, acc = [], self.dtype.itemsize
        for n in reversed(self.shape):
            strides.append(acc)
            acc *= n
        self._view = CudaView(self._buf.address, self.shape, tuple(reversed(strides)), self.dtype, device, self, "coopjit")

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @property
    def __cuda_array_interface__(self) -> dict:
        typestr = self.dtype.str if self.dtype.kind in "biuf" else f"<V{self.dtype.itemsize}"
        return {"shape": self.shape, "typestr": typestr, "data": (self._buf.address, False), "version": 3,
                "strides": None, "stream": None, "descr": [(self.dtype.name if typestr.startswith("<V") else "",
                                                            typestr)]}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, int(self.device.partition(":")[2] or 0))  # kDLCUDA

    def __dlpack__(self, stream: "int | None" = None, max_version: "tuple | None" = None, dl_device: "tuple | None" = None, copy: "bool | None" = None) -> object:
        return _dlpack_capsule(self)

    def numpy(self) -> np.ndarray:
        """A host copy (NumPy array)."""
        out = np.empty(self.shape, self.dtype)
        if out.size:
            self._buf.download(out.__array_interface__["data"][0], out.nbytes)
        return out

    def __array__(self, dtype: "np.typing.DTypeLike" = None, copy: "bool | None" = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    @classmethod
    def from_host(cls, x, device: str = "cuda:0") -> "DeviceArray":
        """A DeviceArray holding a copy of host array x (C order)."""
        from ._arrays import as_array

        x = np.ascontiguousarray(as_array(x, "x"))
        d = cls(x.shape, x.dtype, device)
        if x.size:
            d._buf.upload(x.__array_interface__["data"][0], x.nbytes)
        return d

    def __repr__(self):
        return f"DeviceArray({self.dtype} {self.shape} on {self.device})"


def c_strides(shape, itemsize: int) -> tuple:
    """The byte strides of a C-ordered array of `shape`."""
    out, acc = [], itemsize
    for n in reversed(shape):
        out.append(acc)
        acc *= int(n)
    return tuple(reversed(out))


def _strided_message(name: str, v: CudaView, why: str) -> str:
    return (f"{name} ({v.framework} {v.dtype} {v.shape} with byte strides {v.strides}) is not C-contiguous, and {why}; "
            f"the kernel was compiled for C-contiguous operands (byte strides {c_strides(v.shape, v.itemsize)}): pass "
            "a C-contiguous array (torch: .contiguous(); CuPy: cupy.ascontiguousarray), or call coopjit.matmul / "
            "coopjit.gemm, which take any strides")


def c_ordered(v: CudaView, name: str, write: bool = False):
    """A compiled kernel's operand `v` (a CudaView of array `name`) in the layout the kernel was
    planned for, C order with the exact strides (_arrays.row_major): (v itself, None) when it is;
    (v with the C strides, None) when only the strides of its dims of length 1 differ (the same
    elements); else (a view of a C-ordered copy, the copy), made by v's own framework on its
    current stream (torch: .contiguous(); CuPy: ascontiguousarray); `write` (c): a new array of
    that framework instead, which copy_back() writes into v after the launch. ValueError naming
    the array, its shape and strides where its framework cannot copy it (a plain
    __cuda_array_interface__ object)."""
    want = c_strides(v.shape, v.itemsize)
    if v.strides == want:
        return v, None
    if v.c_contiguous:
        return CudaView(v.ptr, v.shape, want, v.dtype, v.device, v.owner, v.framework, v.stream), None
    if v.framework == "torch":
        import torch

        if write:
            copy = torch.empty(v.shape, dtype=v.owner.dtype, device=v.owner.device)
        else:
            copy = v.owner.contiguous()
    elif v.framework == "cupy":
        import cupy

        with cupy.cuda.Device(int(v.device.partition(":")[2] or 0)):
            copy = cupy.empty(v.shape, v.dtype) if write else cupy.ascontiguousarray(v.owner)
    else:
        raise ValueError(_strided_message(name, v, f"coopjit has no copy for a {v.framework} array"))
    cv = device_view(copy, False)
    if cv is None or cv.strides != want:  # (never: both frameworks make C-ordered arrays)
        raise ValueError(_strided_message(name, v, "its framework's copy is not C-ordered"))
    return cv, copy


def copy_back(v: CudaView, copy) -> None:
    """After a launch into `copy` (c_ordered's of c with write=True): v's elements from it, on
    v's framework's current stream, queued after the launch when that ran on the same stream."""
    if v.framework == "torch":
        v.owner.copy_(copy)
    else:
        v.owner[...] = copy


def copy_in(copy, v: CudaView) -> None:
    """c's values into its C-ordered copy before a launch that reads them (beta != 0)."""
    if v.framework == "torch":
        copy.copy_(v.owner)
    else:
        copy[...] = v.owner


_TORCH_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32")


def result_like(like: CudaView, shape: tuple, dtype: np.dtype, device: str):
    """A new device array for a result: of the framework of `like` (a CudaView of an input): a
    torch CUDA tensor, a CuPy array, else a coopjit DeviceArray."""
    if like.framework == "torch" and dtype.name in _TORCH_DTYPES:
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype.name), device=like.owner.device)
    if like.framework == "cupy" and dtype.kind in "biuf":
        import cupy

        with cupy.cuda.Device(int(device.partition(":")[2] or 0)):
            return cupy.empty(shape, dtype)
    return DeviceArray(shape, dtype, device)


# ---- DLPack export (the unversioned DLManagedTensor of dlpack.h, v0.8) ------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_LIVE: dict[int, tuple] = {}  # manager_ctx -> (the array, the ctypes objects) until the consumer's deleter


@_DELETER
def _dl_deleter(p):
    _LIVE.pop(int(p.contents.manager_ctx or 0), None)


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CODES = {"i": 0, "u": 1, "f": 2}


def _dlpack_capsule(arr: DeviceArray):
    dt = arr.dtype
    code = 4 if dt.name == "bfloat16" else _CODES.get(dt.kind)
    if code is None:
        raise BufferError(f"DLPack has no type for {dt}")
    n = arr.ndim
    shape = (ctypes.c_int64 * max(n, 1))(*arr.shape)
    m = _DLManagedTensor()
    m.dl_tensor.data = arr._buf.address
    m.dl_tensor.device = _DLDevice(2, arr.__dlpack_device__()[1])
    m.dl_tensor.ndim = n
    m.dl_tensor.dtype = _DLDataType(code, dt.itemsize * 8, 1)
    m.dl_tensor.shape = shape
    m.dl_tensor.strides = None  # C order
    m.dl_tensor.byte_offset = 0
    key = id(m)
    m.manager_ctx = key
    m.deleter = _dl_deleter
    _LIVE[key] = (arr, m, shape)
    # No capsule destructor: a consumer calls the deleter; an unconsumed capsule keeps the array
    # (a leak of one small record, never a dangling pointer).
    return _PyCapsule_New(ctypes.addressof(m), b"dltensor", None)
