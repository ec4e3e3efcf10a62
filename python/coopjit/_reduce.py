"""Reductions: sum, prod, min, max over any axes, and the 2x2 reduction, as JIT kernels built
from coopmatrix tiles (element-wise combines, then coopmatrix.reduce)."""
from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike

from ._arrays import as_array, check_own_elements, masked_message, native_dtype, native_order
from ._cuda_arrays import device_view, result_like
from .devices import check_device, get

OPS = ("sum", "prod", "min", "max")
_IR = {"int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16", "int32": "i32", "uint32": "u32",
       "int64": "i64", "uint64": "u64", "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
       "bool": "u8"}
_TWO_STAGE_WIDTH = 1024  # columns of the first pass of a reduction of few long rows
_LONG_ROW_BYTES = 1 << 20  # rows at least this long are split over the workers when there are few


@functools.lru_cache(maxsize=256)  # (dtype.name and its lookups cost microseconds a call)
def _types(dtype: np.dtype, op: str):
    """(input, accumulator, output) IR types and the output dtype, following NumPy's rules: sums
    and products of integers and bools are int64 (uint64 for unsigned); float16 and bfloat16
    accumulate in float32 and return their own type; float32 accumulates in float32, float64 in
    float64; min and max keep the dtype."""
    name = dtype.name
    if name not in _IR:
        raise TypeError(f"reduce: dtype {dtype} is not supported; supported: {', '.join(k for k in _IR)}")
    src = _IR[name]
    if op in ("min", "max"):
        acc = "f32" if src in ("f16", "bf16") else src
        return src, acc, src, dtype
    if dtype.kind in "bi":
        return src, "i64", "i64", np.dtype(np.int64)
    if dtype.kind == "u":
        return src, "u64", "u64", np.dtype(np.uint64)
    acc = "f64" if src == "f64" else "f32"
    return src, acc, src, dtype


def _collapse(x: np.ndarray, dims: list[int]):
    """(size, stride) of dims merged into one, or None when their strides do not line up."""
    size, stride = 1, None
    for d in reversed(dims):
        n, s = x.shape[d], x.strides[d]
        if n == 1:
            continue
        if stride is None:
            size, stride = n, s
        elif s == stride * size:
            size *= n
        else:
            return None
    return size, (stride if stride is not None else x.itemsize)


_ALIGN = 64  # bytes: the cache line, and an AVX-512 vector


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _view(a: np.ndarray, shape: tuple, strides: tuple) -> np.ndarray:
    """as_strided(a, shape, strides), or a itself when it is that view already (a 2-D array along
    an axis): as_strided costs 3 us a call."""
    if a.shape == shape and a.strides == strides:
        return a
    return np.lib.stride_tricks.as_strided(a, shape, strides)


def _run(op, form, x2d, y, types, device="cpu"):
    get(device).reduce2d(op, form, x2d, y, types)


_ONE_VALUE_MIN_ROW = 4096  # elements per row of the one-value split (else the column view below)
_SHORT_ROW_BYTES = 128  # rows up to this many bytes (32 f32) are "short": reduced down an n x rows view


def reduce(a: ArrayLike, axis: int | tuple[int, ...] | None = None, op: str = "sum", *, out: np.ndarray | None = None,
           device: str | None = None) -> np.ndarray | np.generic:
    """The reduction `op` (sum, prod, min, max) of `a` over `axis` (None: all; an int; a tuple).

    NumPy's semantics: the result dtype follows numpy.sum / numpy.min (sums of integers are
    int64); NaN propagates; an empty sum is 0, an empty product 1, and min/max of an empty array
    raise ValueError. Float sums accumulate in float32 for float16, bfloat16 and float32 inputs
    (in lanes of partial sums, so the error grows like a blocked sum's), in float64 for float64.

    `a` may be a NumPy array, a PyTorch CPU tensor, a DLPack or buffer object, or a CUDA device
    array (a torch CUDA tensor, a CuPy array, an object with `__cuda_array_interface__`): a 2-D
    device array is reduced along axis 0 or 1 on its GPU, and the result is a device array of its
    framework. `device=` runs a NumPy array's reduction on a device (copied in and out).
    """
    if op not in OPS:
        raise ValueError(f"reduce: unknown op {op!r}; known: {', '.join(OPS)}")
    if type(a) is not np.ndarray:
        dv = device_view(a)
        if dv is not None:  # a CUDA device array: reduced where it is, the result a device array
            return _reduce_device_array(dv, axis, op, out, device)
    device = check_device(device)
    if out is not None and type(out) is not np.ndarray:  # a tensor / DLPack / buffer out: filled in its memory
        reduce(a, axis, op, out=as_array(out, "out", writable=True, reduction=op), device=device)
        return out
    a = as_array(a, "a", reduction=op)
    a = native_order(a)  # a big-endian array is reduced from a native copy, as NumPy does
    src, acc, dst, out_dtype = _types(a.dtype, op)
    if axis is not None and not (isinstance(axis, (int, np.integer)) and not isinstance(axis, bool)) and not (
            isinstance(axis, tuple) and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in axis)):
        raise TypeError(f"reduce: axis must be None, an int or a tuple of ints, got {axis!r}")
    axes = tuple(range(a.ndim)) if axis is None else np.lib.array_utils.normalize_axis_tuple(axis, a.ndim)
    kept = [d for d in range(a.ndim) if d not in axes]
    out_shape = tuple(a.shape[d] for d in kept)
    n_red = math.prod(a.shape[d] for d in axes)
    if out is not None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a NumPy array, got {type(out).__name__}")
        if out.shape != out_shape or native_dtype(out.dtype) != out_dtype:
            raise ValueError(f"reduce: out must be {out_dtype} of shape {out_shape}, got {out.dtype} {out.shape}")
        if not out.flags.writeable:
            raise ValueError(f"reduce: out ({out.dtype} {out.shape}) is read-only; pass a writeable array")
        check_own_elements(out, "out", "reduce")
        if not out.dtype.isnative or np.may_share_memory(out, a):
            # Computed into a new native array, then copied (byte-swapped) into out: out may be
            # big-endian, or overlap the input, which the kernels read while they write.
            out[...] = reduce(a, axis, op, device=device)
            return out
    result = np.empty(out_shape, out_dtype) if out is None else out
    if n_red == 0:
        if op in ("min", "max"):
            raise ValueError(f"zero-size array to reduction operation {'minimum' if op == 'min' else 'maximum'} "
                             f"which has no identity (shape {a.shape}, axis {axis})")
        result[...] = 0 if op == "sum" else 1
        return result if out is not None or out_shape else result[()]
    if result.size == 0:
        return result
    if a.dtype == np.bool_:
        a = _bool_bytes(a)
    # (flags.aligned: the address and strides are multiples of the dtype's alignment, read in
    # nanoseconds where a.ctypes.data takes a microsecond)
    if not (a.flags.aligned and a.dtype.alignment == a.itemsize) and (
            any(s % a.itemsize for s in a.strides) or a.ctypes.data % a.itemsize):
        a = a.copy()
    keep, red = _collapse(a, kept), _collapse(a, list(axes))
    if keep is None or red is None:  # strides that do not merge: make the data contiguous once
        a = np.ascontiguousarray(a.transpose(kept + list(axes)))
        kept, axes = list(range(len(kept))), tuple(range(len(kept), a.ndim))
        keep, red = _collapse(a, kept), _collapse(a, list(axes))
    (K, sk), (n, sr) = keep, red
    types = (src, acc, dst)
    y = result.reshape(-1) if result.flags.c_contiguous else np.empty(K, out_dtype)
    item = a.itemsize
    w = _TWO_STAGE_WIDTH
    # Few long rows (one value from many, or a handful of rows): the row form gives each worker
    # whole 4-row tiles, so 3 rows of 4e6 ran on one worker at 1.4 GB/s. Instead each row's body
    # is reduced as the columns of a (n // W) x W view (every worker, vector loads), then the W
    # partials of every row and the rows' tails in one row reduction.
    workers = get(device).pool_workers()  # the CPU pool's (0: a device schedules its own work)
    few_rows = K == 1 or (workers > 0 and sr == item and K < 4 * workers and n * item >= _LONG_ROW_BYTES)
    split = 4 * workers  # one 4-row tile per worker
    if few_rows and workers > 0 and n >= split * _ONE_VALUE_MIN_ROW:
        # One value from many (a 1-D array, axis None) or a few long rows: each row's body as
        # `split` contiguous pieces, one 4-piece tile per worker, each piece read front to back
        # (the row form's long runs), then the pieces' partials and the rows' tails. The
        # (n // W) x W column view below read 256 bytes per row and worker on 16 cores (12e6 f32:
        # 63 GB/s of a 142 GB/s copy).
        # (Views by reshape where the memory allows: as_strided costs 3 us a call, a tenth of the
        # call's time at 1 MB.)
        rows = a.reshape(1, n) if K == 1 and a.flags.c_contiguous else _view(a, (K, n), (sk, sr))
        # Contiguous rows on the CPU: each piece starts on a 64-byte boundary (the row's first
        # elements up to it go with the tail), so that no vector load straddles two cache lines
        # (NumPy's large arrays start 16 bytes into a line; one Zen 5 thread, 12e6 f32: 62 GB/s
        # at that offset, 74 aligned, CPU time).
        unit = _ALIGN // item if sr == item and device == "cpu" else 1
        length = (n - unit + 1) // split // unit * unit if unit > 1 else n // split
        partial = np.empty((K, split + n - split * length), _np_of(acc))
        base = _address(a) if unit > 1 else 0
        for k in range(K):
            h = (-(base + k * sk) % _ALIGN) // item if unit > 1 else 0
            body = rows[k, h:h + split * length].reshape(split, length) if sr == item else \
                np.lib.stride_tricks.as_strided(rows[k], (split, length), (length * sr, sr))
            _run(op, "row", body, partial[k, :split], (src, acc, acc), device)
            partial[k, split:split + h] = rows[k, :h]
            partial[k, split + h:] = rows[k, h + split * length:]
        _run(op, "row", partial, y[:K], (acc, acc, dst), device)
    elif few_rows and n >= 4 * w:
        nb = n // w
        body = _view(a, (K, nb, w), (sk, w * sr, sr))
        rows = _view(a, (K, n), (sk, sr))
        partial = np.empty((K, w + n - nb * w), np.dtype(_np_of(acc)))
        for k in range(K):
            _run(op, "column", body[k], partial[k, :w], (src, acc, acc), device)
        partial[:, w:] = rows[:, nb * w:]
        _run(op, "row", partial, y[:K], (acc, acc, dst), device)
    elif (sr == item and n * item <= _SHORT_ROW_BYTES and (n * item) % _ALIGN and sk == n * item and K >= 4096
          and (device != "cpu" or n <= _short_view_max(acc))):
        # Many short contiguous rows (4e6 x 3): a row tile of 4 x 64 lanes would load mostly
        # masked-off lanes and reduce each row across a vector. Instead the rows' n elements are
        # the rows of an n x K view, reduced down its columns: strided loads of whole vectors of
        # rows, one vector add per element of a row (measured on 16 cores, 4e6 x 3 f32: 2 GB/s
        # in row tiles; on 2 Zen 4 cores 4e6 x 3 / 1e6 x 16 f32 0.2 / 1.6 GB/s in row tiles, 6.5 / 4.5 here).
        # Rows of whole 64-byte lines (16 or 32 f32) keep the row form, whose tile is then as wide
        # as the row (plan_reduce): Zen 5, 2 threads, 48 MB of f32, rows of 16: 28 -> 41 GB/s, of
        # 32: 18 -> 37.
        # On the CPU only rows the kernel reads as whole vectors and picks from (plan_reduce:
        # strides up to 16, segment tiles up to 4 vectors of accumulator lanes): longer ones were
        # gathered one element a lane, and the row form reads them faster. Zen 4, one thread, CPU
        # time, 48 MB, sums of int8 rows of 33 / 48 / 100 / 127 elements (int64 sums, 8 lanes)
        # 2.7 / 2.6 / 2.2 / 2.1 -> 9.2 / 14 / 16 / 19 GB/s; int16 rows of 33 / 48 / 63 4.0 / 3.6 /
        # 3.2 -> 18 / 28 / 28.
        x2d = _view(a, (n, K), (sr, sk))
        _run(op, "column", x2d, y, types, device)
    elif (device == "cpu" and sk == item and sr == K * item and K * item < _ALIGN and n * K * item >= _LONG_ROW_BYTES
          and workers > 0):
        # Many contiguous short rows reduced down their columns, to K values (axis 0 of (4e6, 3)):
        # the column form over the n x K view walked every row with one masked vector of K
        # lanes (2 Zen 5 threads, f32: 6 GB/s of an ~90 GB/s copy; torch 17). Instead the same
        # memory as rows of W elements (W a multiple of K and of the column_rows tile's 8
        # vectors of accumulator lanes, so that no tile is masked; W * item >= 4 KiB: the rows
        # split over the workers, whole-line runs), reduced down their columns into W partials,
        # then the W / K partials of each of the K columns and the rows left over.
        base = math.lcm(K, 8 * _ALIGN // _np_of(acc).itemsize)
        width = base * -(-4096 // (base * item))
        m = n * K // width
        whole = m * width // K  # the rows of `a` the m x W view covers
        partial = np.empty((width // K + n - whole, K), _np_of(acc))
        _run(op, "column", _view(a, (m, width), (width * item, item)), partial[:width // K].reshape(-1),
             (src, acc, acc), device)
        if whole < n:
            partial[width // K:] = _view(a, (n, K), (sr, sk))[whole:]
        _run(op, "column", partial, y, (acc, acc, dst), device)
    elif sr == item or sk != item:
        x2d = _view(a, (K, n), (sk, sr))
        _run(op, "row", x2d, y, types, device)
    else:  # the kept dim is contiguous: walk down columns with vector loads
        x2d = _view(a, (n, K), (sr, sk))
        _run(op, "column", x2d, y, types, device)
    if not np.shares_memory(y, result):  # computed into a temporary: out was not contiguous
        result[...] = y.reshape(out_shape)
    return result if out is not None or out_shape else result[()]


@functools.lru_cache(maxsize=None)
def _short_view_max(acc: str) -> int:
    """The longest short row the CPU's column form reads as whole vectors (a stride it builds into
    the kernel: up to 16, or segment tiles of up to 4 vectors of S `acc` lanes and n x S <= 4096
    elements; plan_reduce)."""
    from . import _core
    lanes = _core.cpu_info()["vector_bytes"] // _np_of(acc).itemsize
    return max(16, min(4 * lanes, 4096 // lanes))


def _reduce_device_array(x, axis, op, out, device):
    """reduce of a 2-D CUDA device array along axis 0 or 1 (a CudaView), in place on the device;
    the result is a device array of the input's framework (or `out`, a device array)."""
    if device is not None and check_device(device) != x.device:
        raise ValueError(f"reduce: device={device!r}, but the array is on {x.device}")
    check_device(x.device)
    if x.ndim != 2 or isinstance(axis, bool) or axis not in (0, 1, -1, -2):
        raise NotImplementedError(f"reduce: a device array is reduced along axis 0 or 1 of a 2-D array in this "
                                  f"version; got shape {x.shape}, axis {axis!r}")
    axis = axis % 2
    src, acc, dst, out_dtype = _types(x.dtype, op)
    rows, cols = x.shape
    n_out = rows if axis == 1 else cols
    if (cols if axis == 1 else rows) == 0:
        raise ValueError(f"reduce: an empty reduction of a device array (shape {x.shape}, axis {axis})")
    if out is None:
        out = result_like(x, (n_out,), np.dtype(out_dtype), x.device)
    y = device_view(out)
    if y is None or tuple(y.shape) != (n_out,) or np.dtype(y.dtype) != np.dtype(out_dtype):
        raise ValueError(f"reduce: out must be a device array of {out_dtype} and shape {(n_out,)}")
    # axis 1: each row reduced (the row form); axis 0: each column (the column form over rows x cols)
    _run(op, "row" if axis == 1 else "column", x, y, (src, acc, dst), x.device)
    return out


def _bool_bytes(a: np.ndarray) -> np.ndarray:
    """A bool array as the bytes 0 / 1 the kernels read as u8. NumPy's bool is one byte and any
    non-zero byte is True (np.frombuffer(b'\\x02', bool) is True): such bytes become 1 (a copy
    only when there is one)."""
    u = a.view(np.uint8)
    return np.not_equal(u, 0).view(np.uint8) if u.size and u.max() > 1 else u


@functools.lru_cache(maxsize=None)
def _np_of(ir_name: str) -> np.dtype:
    for k, v in _IR.items():
        if v == ir_name and k != "bool":
            if k == "bfloat16":
                import ml_dtypes
                return np.dtype(ml_dtypes.bfloat16)
            return np.dtype(k)
    raise KeyError(ir_name)


def reduce2x2(a: ArrayLike, op: str = "sum", *, out: np.ndarray | None = None, device: str | None = None) -> np.ndarray:
    """The 2x2 reduction of SPV_NV_cooperative_matrix2: element (i, j) of the (rows/2, cols/2)
    result combines a[2i, 2j], a[2i+1, 2j], a[2i, 2j+1] and a[2i+1, 2j+1]. `a` is 2-D with even
    dimensions; dtypes and accumulation as in reduce()."""
    device = check_device(device)
    if op not in OPS:
        raise ValueError(f"reduce2x2: unknown op {op!r}; known: {', '.join(OPS)}")
    # (a masked array reached the kernels as its data: as_array refuses it, naming the op)
    a = as_array(a, "a", reduction=op, where="reduce2x2")
    if isinstance(out, np.ma.MaskedArray):
        raise TypeError(masked_message(out, "out", op, "reduce2x2"))
    if a.ndim != 2 or a.shape[0] % 2 or a.shape[1] % 2:
        raise ValueError(f"reduce2x2: a must be 2-D with even dimensions, got shape {a.shape}")
    a = native_order(a)
    src, acc, dst, out_dtype = _types(a.dtype, op)
    shape = (a.shape[0] // 2, a.shape[1] // 2)
    if out is None:
        out = np.empty(shape, out_dtype)
    elif not isinstance(out, np.ndarray) or out.shape != shape or native_dtype(out.dtype) != out_dtype:
        raise ValueError(f"reduce2x2: out must be {out_dtype} of shape {shape}, got "
                         f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}")
    elif not out.flags.writeable:
        raise ValueError(f"reduce2x2: out ({out.dtype} {out.shape}) is read-only; pass a writeable array")
    else:
        check_own_elements(out, "out", "reduce2x2")
    if out.size == 0:
        return out
    if not out.dtype.isnative or np.may_share_memory(out, a):
        out[...] = reduce2x2(a, op, device=device)
        return out
    if a.dtype == np.bool_:
        a = _bool_bytes(a)
    if any(s % a.itemsize for s in a.strides) or a.ctypes.data % a.itemsize:
        a = a.copy()
    target = out if all(s % out.itemsize == 0 for s in out.strides) else np.empty(shape, out_dtype)
    _run(op, "2x2", a, target, (src, acc, dst), device)
    if target is not out:
        out[...] = target
    return out
