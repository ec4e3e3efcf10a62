"""The per-call fast path of products of torch CUDA tensors (matmul, gemm, compiled kernels; with
or without a fused epilogue of torch CUDA tensors): a cache keyed by what decides the plan and the
launch (dtypes, shapes, strides, devices, the 16-byte alignment of the operands, transposes,
whether C is read, the output's layout, the epilogue's steps and its operands' dtypes, shapes and
strides; never their addresses, which each call passes) that holds the
prepared launch (C++ GpuGemmLaunch) and the result's shape and dtype. A hit allocates the result
(torch.empty on the operands' device), checks that a given output does not overlap the operands
and queues the kernel on torch's current stream; a miss, or anything out of the ordinary, takes
the full path (coopjit._gemm_fused._device_product / _gpu.GpuKernel._call_device_arrays), which
checks everything, gives the errors and records the entry when the call is one this path can repeat.
"""
from __future__ import annotations

import sys

from ._kernel_args import plan_key  # plan= in a key: () without one, None when not hashable

_CACHE: dict = {}
_LIMIT = 4096
_torch = None
_raw_stream = None


def _tensor_type():
    global _torch, _raw_stream
    if _torch is None:
        _torch = sys.modules.get("torch")
        if _torch is None:
            return None
        _raw_stream = getattr(_torch._C, "_cuda_getCurrentRawStream", None)
    return _torch.Tensor


def _stream(index: int) -> int:
    if _raw_stream is not None:
        return int(_raw_stream(index))
    return int(_torch.cuda.current_stream(index).cuda_stream)


def _plain(x) -> bool:
    """A float, or an int a double holds exactly (larger ones take the full path: integer products
    take them exactly, _arrays.int_scalar)."""
    return type(x) is float or (type(x) is int and -2**53 <= x <= 2**53)


def _run(cache, key, pa, pb, out, alpha, beta, index, epilogue=None):
    """One launch of the entry `key` of `cache`; None on a miss, or when `out` overlaps an operand
    (the full path says so). `epilogue`: a fused launch's operand addresses (scale, row_scale,
    bias, residual; 0 where absent), this call's own."""
    entry = cache.get(key)
    if entry is None:
        return None
    launch, shape, dtype, device, (alo, ahi), (blo, bhi), (clo, chi) = entry
    if out is None:
        out = _torch.empty(shape, dtype=dtype, device=device)
        pc = out.data_ptr()
    else:
        pc = out.data_ptr()
        if (pc + clo < pa + ahi and pa + alo < pc + chi) or (pc + clo < pb + bhi and pb + blo < pc + chi):
            return None
    if epilogue is None or not launch.fused:  # (out_dtype alone: a conversion without operands)
        launch.launch(pa, pb, pc, alpha, beta, _stream(index))
    else:
        launch.launch(pa, pb, pc, alpha, beta, _stream(index), epilogue)
    return out


def _full(cache, key, full, *args, **kwargs):
    """The miss: full(*args, **kwargs, record=rec), the entry it records in rec stored under key."""
    rec = {}
    got = full(*args, **kwargs, record=rec)
    entry = rec.get("entry")
    if entry is not None:
        if len(cache) >= _LIMIT:
            cache.clear()
        cache[key] = entry
    return got


_KW = {"bias": None, "activation": None, "residual": None, "scale": None, "row_scale": None, "epilogue": None}


def matmul(a, b, out, full, plan=None):
    """coopjit.matmul(a, b, out=out, plan=plan) of torch CUDA tensors without epilogue or device=;
    None when this path does not apply (the caller takes its full path). `full`: the full path
    (_gemm_fused._device_product; passed in, so that this module imports none of the device layer).
    plan= is part of the key (autotuning scripts call with plan= in loops)."""
    pk = plan_key(plan)
    if pk is None:
        return None
    T = _tensor_type()
    if T is None or type(a) is not T or type(b) is not T or (out is not None and type(out) is not T):
        return _matmul_cupy(a, b, out, full, plan, pk)
    ia = a.get_device()
    if ia < 0 or b.get_device() != ia:
        return None
    pa, pb = a.data_ptr(), b.data_ptr()
    key = ("mm", a.dtype, b.dtype, a.shape, b.shape, a.stride(), b.stride(), ia,
           None if out is None else (out.dtype, out.shape, out.stride(), out.get_device()), (pa | pb) & 15 == 0, pk)
    got = _run(_CACHE, key, pa, pb, out, 1.0, 0.0, ia)
    if got is not None:
        return got
    return _full(_CACHE, key, full, "matmul", a, b, out, 1.0, 0.0, False, False, None, plan,
                 {**_KW, "out_dtype": None, "bias_axis": 1})


def _epilogue(T, index, scale, row_scale, bias, residual, activation, bias_axis, out_dtype):
    """(the key of a fused call's epilogue, its operands' addresses) when each operand is None or a
    torch CUDA tensor on device `index` and the other arguments are plain; None otherwise. The key
    holds what the full path checks of the operands (dtype, shape, strides), so a hit needs no
    checks; the addresses are this call's (an entry holds none)."""
    if (activation is not None and type(activation) is not str) or type(bias_axis) is not int:
        return None
    try:
        hash(out_dtype)
    except TypeError:
        return None
    meta, ptrs = [activation, bias_axis, out_dtype], []
    for x in (scale, row_scale, bias, residual):
        if x is None:
            meta.append(None)
            ptrs.append(0)
            continue
        if type(x) is not T or x.get_device() != index:
            return None
        meta.append((x.dtype, x.shape, x.stride()))
        ptrs.append(x.data_ptr())
    return tuple(meta), ptrs


def matmul_fused(a, b, out, bias, bias_axis, activation, residual, scale, row_scale, out_dtype, full, plan=None):
    """coopjit.matmul(a, b, out=out, bias=..., ..., plan=plan) of torch CUDA tensors with a fused
    epilogue whose operands are torch CUDA tensors on the same device (no epilogue function or
    device=); None when this path does not apply (see matmul)."""
    pk = plan_key(plan)
    if pk is None:
        return None
    T = _tensor_type()
    if T is None or type(a) is not T or type(b) is not T or (out is not None and type(out) is not T):
        return None
    ia = a.get_device()
    if ia < 0 or b.get_device() != ia:
        return None
    e = _epilogue(T, ia, scale, row_scale, bias, residual, activation, bias_axis, out_dtype)
    if e is None:
        return None
    pa, pb = a.data_ptr(), b.data_ptr()
    key = ("mmf", a.dtype, b.dtype, a.shape, b.shape, a.stride(), b.stride(), ia,
           None if out is None else (out.dtype, out.shape, out.stride(), out.get_device()), (pa | pb) & 15 == 0, e[0],
           pk)
    got = _run(_CACHE, key, pa, pb, out, 1.0, 0.0, ia, e[1])
    if got is not None:
        return got
    return _full(_CACHE, key, full, "matmul", a, b, out, 1.0, 0.0, False, False, None, plan,
                 {"bias": bias, "activation": activation, "residual": residual, "scale": scale, "row_scale": row_scale,
                  "epilogue": None, "out_dtype": out_dtype, "bias_axis": bias_axis})


_cupy = None


def _matmul_cupy(a, b, out, full, plan, pk):
    """coopjit.matmul of CuPy arrays on the current device: as matmul, the result a CuPy array,
    queued on CuPy's current stream (what their __cuda_array_interface__ names)."""
    global _cupy
    if _cupy is None:
        _cupy = sys.modules.get("cupy")
        if _cupy is None:
            return None
    T = _cupy.ndarray
    if type(a) is not T or type(b) is not T or (out is not None and type(out) is not T):
        return None
    dev = _cupy.cuda.runtime.getDevice()
    if a.device.id != dev or b.device.id != dev:
        return None
    pa, pb = a.data.ptr, b.data.ptr
    stream = _cupy.cuda.get_current_stream().ptr
    key = ("cupy", a.dtype, b.dtype, a.shape, b.shape, a.strides, b.strides, dev,
           None if out is None else (out.dtype, out.shape, out.strides, out.device.id), (pa | pb) & 15 == 0, pk)
    e = _CACHE.get(key)
    if e is not None:
        launch, shape, dtype, _, (alo, ahi), (blo, bhi), (clo, chi) = e
        c = _cupy.empty(shape, dtype) if out is None else out
        pc = c.data.ptr
        overlap = (pc + clo < pa + ahi and pa + alo < pc + chi) or (pc + clo < pb + bhi and pb + blo < pc + chi)
        if out is None or not overlap:
            launch.launch(pa, pb, pc, 1.0, 0.0, stream)
            return c
    return _full(_CACHE, key, full, "matmul", a, b, out, 1.0, 0.0, False, False, None, plan,
                 {**_KW, "out_dtype": None, "bias_axis": 1})


def _torch_call(a, b, c, alpha, beta):
    """(device, a's and b's data pointers, the key of what the operands decide) of a call whose
    operands are torch CUDA tensors on one device and whose scalars are plain; None otherwise."""
    T = _tensor_type()
    if (T is None or type(a) is not T or type(b) is not T or (c is not None and type(c) is not T) or not _plain(alpha)
            or not _plain(beta)):
        return None
    ia = a.get_device()
    if ia < 0 or b.get_device() != ia:
        return None
    pa, pb = a.data_ptr(), b.data_ptr()
    return ia, pa, pb, (a.dtype, b.dtype, a.shape, b.shape, a.stride(), b.stride(), ia,
                        None if c is None else (c.dtype, c.shape, c.stride(), c.get_device()), (pa | pb) & 15 == 0)


def gemm(a, b, c, alpha, beta, trans_a, trans_b, full, plan=None):
    """coopjit.gemm of torch CUDA tensors without epilogue or device= (see matmul)."""
    t = _torch_call(a, b, c, alpha, beta)
    pk = plan_key(plan)
    if t is None or pk is None:
        return None
    ia, pa, pb, operands = t
    if c is None:
        beta = 0.0
    key = ("gemm", bool(trans_a), bool(trans_b), beta != 0, *operands, pk)
    got = _run(_CACHE, key, pa, pb, c, float(alpha), float(beta), ia)
    if got is not None:
        return got
    return _full(_CACHE, key, full, "gemm", a, b, c, float(alpha), float(beta), trans_a, trans_b, None, plan,
                 {**_KW, "out_dtype": None, "bias_axis": 1})


def gemm_fused(a, b, c, alpha, beta, trans_a, trans_b, bias, bias_axis, activation, residual, scale, row_scale,
               out_dtype, full, plan=None):
    """coopjit.gemm of torch CUDA tensors with a fused epilogue of torch CUDA tensors (see matmul_fused)."""
    t = _torch_call(a, b, c, alpha, beta)
    pk = plan_key(plan)
    if t is None or pk is None:
        return None
    ia, pa, pb, operands = t
    if alpha != 1 and a.dtype in (_torch.int8, _torch.uint8):
        return None  # (the full path folds alpha into the scale: a cached launch would take it in int32)
    e = _epilogue(_torch.Tensor, ia, scale, row_scale, bias, residual, activation, bias_axis, out_dtype)
    if e is None:
        return None
    if c is None:
        beta = 0.0
    key = ("gemmf", bool(trans_a), bool(trans_b), beta != 0, *operands, e[0], pk)
    got = _run(_CACHE, key, pa, pb, c, float(alpha), float(beta), ia, e[1])
    if got is not None:
        return got
    return _full(_CACHE, key, full, "gemm", a, b, c, float(alpha), float(beta), trans_a, trans_b, None, plan,
                 {"bias": bias, "activation": activation, "residual": residual, "scale": scale, "row_scale": row_scale,
                  "epilogue": None, "out_dtype": out_dtype, "bias_axis": bias_axis})


def kernel_call(kern, a, b, c, alpha, beta):
    """A compiled kernel (coopjit._gpu.GpuKernel without epilogue) called with torch CUDA tensors."""
    t = _torch_call(a, b, c, alpha, beta)
    if t is None:
        return None
    ia, pa, pb, operands = t
    if c is None:
        if beta != 0:  # the full path refuses it (beta without c)
            return None
        beta = 0.0
    key = (beta != 0, *operands)
    cache = kern.__dict__.setdefault("_fast", {})
    got = _run(cache, key, pa, pb, c, float(alpha), float(beta), ia)
    if got is not None:
        return got
    return _full(cache, key, kern._call_device_arrays, a, b, c, alpha, beta,
                 {"bias": None, "residual": None, "scale": None, "row_scale": None})
