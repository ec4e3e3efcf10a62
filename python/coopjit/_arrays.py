"""Argument checking shared by the public functions: dtypes, shapes, strides (devices: coopjit.devices)."""
from __future__ import annotations

import functools
import numbers

import numpy as np

#: GEMM element types by NumPy dtype name (bfloat16 and float8 are ml_dtypes' types)
_GEMM_TYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
               "float8_e4m3fn": "f8_e4m3", "float8_e5m2": "f8_e5m2", "int8": "i8", "uint8": "u8", "int32": "i32"}
_INT8 = ("int8", "uint8")
_LOW = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
GEMM_SUPPORTED = ("float32 x float32, float64 x float64, float16 / bfloat16 / float8_e4m3fn / float8_e5m2 pairs "
                  "(float32 accumulation), int8 / uint8 pairs (int32 accumulation and output)")


def short_name(dtype: np.dtype) -> str:
    """The kernel IR's name of a NumPy dtype (float32 -> f32)."""
    return _GEMM_TYPES[np.dtype(dtype).name]


def gemm_types(a: np.dtype, b: np.dtype, c: np.dtype | None = None):
    """((a, b, c) IR type names, the output dtype); see _gemm_types. Memoized per dtype triple
    (dtype.name is slow enough to show in per-call times); errors are raised anew each time."""
    return _gemm_types_cached(np.dtype(a), np.dtype(b), None if c is None else np.dtype(c))


@functools.lru_cache(maxsize=256)
def _gemm_types_cached(a: np.dtype, b: np.dtype, c: np.dtype | None):
    return _gemm_types(a, b, c)


def _gemm_types(a: np.dtype, b: np.dtype, c: np.dtype | None = None):
    """((a, b, c) IR type names, the output dtype) for operands a, b and an output c (None: the
    default: the input type for float32/float64/float16/bfloat16, float32 for float8, int32 for
    int8). TypeError names the dtypes and lists what is supported."""
    # Byte order is the data's business, not the product's: non-native operands are converted
    # (native_order), as NumPy does, and a non-native output is written through a native one.
    a, b = native_dtype(a), native_dtype(b)
    c = None if c is None else native_dtype(c)
    an, bn = a.name, b.name
    for name, d in (("a", a), ("b", b)):
        if d.name not in _GEMM_TYPES or d.name == "int32":
            raise TypeError(f"{name} has dtype {d}; coopjit GEMM supports {GEMM_SUPPORTED}")
    if an in _INT8 and bn in _INT8:
        default = np.dtype(np.int32)
    elif an != bn:
        raise TypeError(f"mixed dtypes: a is {a}, b is {b}; cast the operands to one dtype "
                        f"(supported: {GEMM_SUPPORTED})")
    else:
        default = np.dtype(np.float32) if an.startswith("float8") else a
    out = default if c is None else np.dtype(c)
    allowed = {default.name} | ({an, "float32"} if an in _LOW else set())
    if out.name not in allowed:
        raise TypeError(f"the output has dtype {out}; for {a} x {b} it must be one of {', '.join(sorted(allowed))}")
    return (_GEMM_TYPES[an], _GEMM_TYPES[bn], _GEMM_TYPES[out.name]), out


#: dtype names NumPy does not know until ml_dtypes is imported (and "bf16", which it never knows).
_ML_NAMES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float8_e4m3fn": "float8_e4m3fn",
             "float8_e5m2": "float8_e5m2"}
DTYPE_NAMES = ("a NumPy dtype, type or name (np.float32, 'float32', 'f4', 'float16', 'int8', ...), an ml_dtypes type "
               "or its name ('bfloat16' or 'bf16', 'float8_e4m3fn', 'float8_e5m2'), or a torch dtype (torch.bfloat16)")


def as_dtype(value, what: str) -> np.dtype:
    """A dtype argument (`what`: "compile_gemm: out_dtype", ...) as a NumPy dtype: whatever
    numpy.dtype takes, the names of ml_dtypes' types ('bfloat16' was refused as a string: NumPy
    knows it only once ml_dtypes is imported) and 'bf16', and torch dtypes (torch.bfloat16,
    torch.float32). TypeError naming the value and the accepted forms otherwise. Whether the
    operation supports the dtype is its own check."""
    if isinstance(value, np.dtype):
        return value
    if isinstance(value, str) and value.strip() in _ML_NAMES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, _ML_NAMES[value.strip()]))
    if type(value).__module__.partition(".")[0] == "torch" and type(value).__name__ == "dtype":
        name = str(value).removeprefix("torch.")
        if name in _ML_NAMES:
            return as_dtype(name, what)
        try:
            return np.dtype(name)
        except TypeError:
            raise TypeError(f"{what}={value!r}: NumPy has no dtype for it; pass {DTYPE_NAMES}") from None
    if value is None or isinstance(value, bool):  # (numpy.dtype(None) is float64)
        raise TypeError(f"{what}={value!r} is not a dtype; pass {DTYPE_NAMES}")
    try:
        return np.dtype(value)
    except (TypeError, ValueError, SyntaxError):
        raise TypeError(f"{what}={value!r} is not a dtype coopjit knows; pass {DTYPE_NAMES}") from None


def native_dtype(d: np.dtype) -> np.dtype:
    """`d` in the machine's byte order (itself when it already is)."""
    d = np.dtype(d)
    return d if d.isnative else d.newbyteorder("=")


def native_order(x: np.ndarray) -> np.ndarray:
    """`x` itself when its bytes are in the machine's order, else a byte-swapped copy (what
    NumPy computes with for a '>f4' operand)."""
    return x if x.dtype.isnative else x.astype(native_dtype(x.dtype))


#: torch dtypes NumPy has no DLPack / __array__ route for -> the ml_dtypes type of the same bits.
_TORCH_VIEWS = {"bfloat16": ("int16", "bfloat16"), "float8_e4m3fn": ("uint8", "float8_e4m3fn"),
                "float8_e5m2": ("uint8", "float8_e5m2")}


def _from_torch(x, name: str, writable: bool):
    """A PyTorch CPU tensor as an ndarray sharing its memory: tensors that require grad are read
    through .detach() (no copy, no graph), bfloat16 / float8 through a view of their bits."""
    if x.device.type != "cpu":
        raise TypeError(f"a PyTorch tensor on {x.device} cannot be read on the CPU; pass x.cpu() or a device= that "
                        f"holds it")
    if writable and x.requires_grad:
        raise ValueError(f"{name} is a PyTorch tensor that requires grad; writing into it would bypass autograd "
                         f"(torch refuses in-place writes to it too): pass a tensor without grad, or {name}.detach()")
    x = x.detach()
    # A view with torch's lazy negation or conjugation (torch._neg_view, x.conj() of a complex
    # tensor) holds the values before it: torch's .numpy() refuses it ("Can't call numpy() on
    # Tensor that has negative bit set", a RuntimeError naming no argument). Read: resolved (a
    # copy with the values it stands for, as torch's own ops read it); written: refused, since the
    # result would land in memory that stands for other values.
    if x.is_neg() or x.is_conj():
        bit = "negative" if x.is_neg() else "conjugate"
        if writable:
            raise ValueError(f"{name} is a PyTorch tensor with the {bit} bit set (a lazy view of other values): "
                             f"coopjit cannot write it in place; pass a tensor without it ({name}.resolve_neg() / "
                             f".resolve_conj() give a copy)")
        x = x.resolve_neg().resolve_conj()
    name = str(x.dtype).removeprefix("torch.")
    if name in _TORCH_VIEWS:
        import ml_dtypes
        import torch

        bits, target = _TORCH_VIEWS[name]
        return x.view(getattr(torch, bits)).numpy().view(getattr(ml_dtypes, target))
    return x.numpy()


def as_array(x, name: str, writable: bool = False, reduction: str | None = None, where: str = "reduce") -> np.ndarray:
    """`x` as an ndarray sharing its memory where it can: ndarrays as they are; PyTorch CPU
    tensors (bfloat16, float8 and tensors that require grad included), objects with __dlpack__
    (JAX, CuPy-on-host, ...) and the buffer protocol (memoryview, array.array, bytearray) without
    a copy; other array-likes (lists, objects with __array__) converted. Masked arrays are
    refused: a product or sum cannot honour a mask (`reduction`: the op of the reduction `where`
    that reads x, which the message names). `writable`: for out= (the result must land in x's memory,
    so nothing may be copied)."""
    if isinstance(x, np.ndarray):
        if isinstance(x, np.ma.MaskedArray):
            raise TypeError(masked_message(x, name, reduction, where))
        if type(x) is not np.ndarray:  # np.matrix and other subclasses: the plain array of the same memory
            x = x.view(np.ndarray)
        return x
    mod = type(x).__module__.partition(".")[0]
    if mod == "torch":
        arr = _from_torch(x, name, writable)
    elif hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        dlpack_error = None
        try:
            arr = np.from_dlpack(x)
        except (TypeError, ValueError, BufferError, RuntimeError) as e:
            if writable:
                raise TypeError(f"{name} ({type(x).__name__}) cannot be written in place through DLPack: {e}") from None
            arr, dlpack_error = None, e
        if arr is None:
            try:
                arr = np.asarray(x)
            except Exception as e:  # noqa: BLE001 - report what could not be converted
                raise TypeError(f"{name} ({type(x).__name__}) cannot be read as an array: {e}") from None
            if arr.dtype == object:  # (the object itself, 0-d: "a has dtype object" hid DLPack's error)
                raise TypeError(f"{name} ({type(x).__name__}) cannot be read through DLPack: {dlpack_error}")
    else:
        try:
            arr = np.asarray(memoryview(x)) if writable else np.asarray(x)
        except TypeError as e:
            if writable:
                raise TypeError(f"{name} must be a writable array (NumPy, PyTorch CPU tensor, DLPack or buffer "
                                f"object), got {type(x).__name__}") from None
            raise TypeError(f"{name} cannot be converted to a NumPy array: {e}") from None
        except Exception as e:  # noqa: BLE001 - report what could not be converted
            raise TypeError(f"{name} cannot be converted to a NumPy array: {e}") from None
    if writable and not arr.flags.writeable:
        raise ValueError(f"{name} ({type(x).__name__}) is read-only; pass a writable array")
    if writable:
        check_own_elements(arr, name)
    return arr


def masked_message(x: np.ndarray, name: str, reduction: str | None = None, where: str = "reduce") -> str:
    """Why masked array `x` (argument `name`) is refused: by a product (reduction None), whose
    masked elements would count as their data, or by reduce / reduce2x2 (`where`) with op=`reduction`, whose numpy.ma
    counterpart skips them (the message named numpy.matmul there too: session 24's audit)."""
    if reduction is None:
        return (f"{name} is a masked array; coopjit does not apply masks (numpy.matmul refuses them too): pass "
                f"{name}.filled(0) or {name}.data to compute on every element")
    kind = x.dtype.kind
    if reduction in ("sum", "prod"):
        fill = "0" if reduction == "sum" else "1"
    elif kind == "f":
        fill = "numpy.inf" if reduction == "min" else "-numpy.inf"
    elif kind == "b":
        fill = "True" if reduction == "min" else "False"
    elif kind in "iu":
        info = np.iinfo(x.dtype)
        fill = str(info.max if reduction == "min" else info.min)
    else:
        fill = "a value that does not change the result"
    return (f"{where}: {name} is a masked array; coopjit.{where} does not apply masks (numpy.ma's {reduction} skips "
            f"the masked elements; op={reduction!r} here would take their data): pass {name}.filled({fill}) to "
            f"{reduction} the unmasked elements, or {name}.data to {reduction} every element")


def check_own_elements(x: np.ndarray, name: str, where: str = "") -> None:
    """ValueError when an output's elements share memory: a byte stride of 0 along a dim of more
    than one element (np.lib.stride_tricks.as_strided / a torch .expand() view, writable where
    np.broadcast_to's is not), or strides whose elements meet (rows closer than a row's length).
    Results landed on one another: which one stayed depended on the workers' timing (a torch
    expand out of 512 rows held row 257), and gemm's beta * c read elements other rows had
    written (session 24's audit; other strides: session 26's). torch refuses such an out too."""
    if x.size == 0:  # (NumPy gives the dims of an empty array any strides, 0 among them)
        return
    flags = x.flags
    if flags.c_contiguous or flags.f_contiguous:  # (no element meets another: the common case costs a flag)
        return
    prefix = f"{where + ': ' if where else ''}{name} ({x.dtype} {x.shape}) has byte strides {x.strides}: "
    for d, (n, st) in enumerate(zip(x.shape, x.strides)):
        if n > 1 and st == 0:
            raise ValueError(f"{prefix}its {n} elements along dim {d} are one element in memory (a broadcast view), so "
                             f"the results would overwrite one another; pass an array with an element for each result")
    pair = _meeting_elements(x)
    if pair is not None:
        i, j, same = pair
        raise ValueError(f"{prefix}its elements {i} and {j} {'are one element' if same else 'overlap'} in memory, so "
                         f"the results would overwrite one another; pass an array with an element for each result")


def _meeting_elements(x: np.ndarray):
    """The first two elements of x (index tuples, C order) whose bytes meet, and whether they
    start at one address; None when every element has its own bytes."""
    # Dims by step: when each step is at least the span of the dims with smaller steps, no two
    # elements meet (every view of a C- or Fortran-ordered array by slicing and transposition).
    span = x.itemsize
    for st, n in sorted((abs(st), n) for n, st in zip(x.shape, x.strides) if n > 1):
        if st < span:
            break
        span += (n - 1) * st
    else:
        return None
    # Otherwise (as_strided views) exactly: every element's byte offset, sorted.
    offsets = np.zeros((), np.int64)
    for n, st in zip(x.shape, x.strides):
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * st)
    offsets = offsets.ravel()
    order = np.argsort(offsets, kind="stable")
    gaps = np.flatnonzero(np.diff(offsets[order]) < x.itemsize)
    if gaps.size == 0:
        return None
    i, j = sorted((int(order[gaps[0]]), int(order[gaps[0] + 1])))

    def index(k: int) -> tuple:
        return tuple(int(v) for v in np.unravel_index(k, x.shape))

    return index(i), index(j), bool(offsets[i] == offsets[j])


def check_scalar(x, name: str) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {x!r} ({type(x).__name__})")
    try:
        return float(x)
    except OverflowError:  # an int past a double's range (float() says only "int too large")
        raise ValueError(f"{name}={x!r} is too large for a double (at most about 1.8e308)") from None


def row_major(x) -> bool:
    """Exactly a C-contiguous 2-D layout, the strides of dims of length 1 included (NumPy's flags
    ignore those; a kernel's plan does not): the layout compiled kernels (CPU and devices) are
    planned for. Takes ndarrays and CUDA device views (byte strides) alike."""
    return tuple(x.strides) == (x.shape[1] * x.itemsize, x.itemsize)


def beta_without_c(where: str, beta) -> None:
    """beta of a product called without c (coopjit.gemm, coopjit.dask.gemm, compiled kernels): 0, or
    a ValueError naming it. beta * c is added to the product, and without c there is nothing to
    add: a beta there was dropped, so gemm(a, b, beta=1) gave a @ b as though beta were 0."""
    if check_scalar(beta, "beta") != 0.0:  # (NaN too)
        raise ValueError(f"{where}beta={beta!r} was given without c: beta * c is added to the product, so pass c (or "
                         "leave beta at 0 for a new array)")


def int_scalar(x, name: str) -> float:
    """alpha / beta of an integer product (int8 / uint8 inputs, int32 accumulators) as the core
    takes them (a double): check_scalar's, but an integer past a double's 53 bits is taken exactly,
    as its residue mod 2^32 in int32's range, where it was rounded to a double (alpha = 2^53 + 1
    gave alpha = 2^53). The kernels compute alpha * (A B) + beta * C in int32, which wraps, so the
    result is NumPy's in int64 cast to int32. Integers outside int64's range: ValueError naming
    them (as the core's for integral floats; NumPy's int64 refuses them too)."""
    v = check_scalar(x, name)
    if isinstance(x, numbers.Integral):
        i = int(x)
        if not -2**63 <= i < 2**63:
            raise ValueError(f"{name}={i} is outside the int64 range that an integer product takes")
        if i != v:
            return float((i + 2**31) % 2**32 - 2**31)
    return v


def kernel_readable(x: np.ndarray) -> np.ndarray:
    """`x` itself when a kernel can read it through its strides; otherwise a copy.

    Kernels read any element strides (negative, zero, non-contiguous). They cannot read byte
    strides that are not whole elements, misaligned data or non-native byte order.
    """
    item = x.itemsize
    ok = (
        x.dtype.isnative
        and x.ctypes.data % item == 0
        and all(s % item == 0 for s in x.strides)
    )
    return x if ok else np.array(x, dtype=x.dtype.newbyteorder("=") if not x.dtype.isnative else x.dtype)


def contiguous(x: np.ndarray) -> np.ndarray:
    """x as a C-contiguous array with the strides of its shape. np.ascontiguousarray returns a
    zero-size array as it is (NumPy counts every zero-size array contiguous), strides and all: a
    stack of products with K = 0 whose batch strides did not merge reached the kernels with 5-D
    operands ("a must have 2 to 4 dims")."""
    return np.ascontiguousarray(x) if x.size else np.zeros(x.shape, x.dtype)


def overlaps(out: np.ndarray, *inputs: np.ndarray) -> bool:
    return any(np.may_share_memory(out, x) for x in inputs)


def _collapse_batch(arrays, batch_shape):
    """Merges batch dims that every array steps through evenly; returns [(size, [strides])]."""
    merged = []
    for i, n in enumerate(batch_shape):
        if n == 1:
            continue
        st = [x.strides[i] for x in arrays]
        if merged and all(ps == s * n for ps, s in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * n, st)
        else:
            merged.append((n, st))
    return merged


_FLOAT_RESULTS = ("float32", "float64")
_LOW_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")  # ml_dtypes' types (their kind is 'V')


def promote(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """numpy.matmul's type rules for operands of different dtypes: both converted to
    numpy.promote_types of the pair when that is float32 or float64 (float32 x float64,
    bfloat16 x float32, int8 x float32, int32 x float32 -> float64, ...); pairs coopjit computes in
    their own types (one dtype, int8 / uint8 pairs) are left as they are. A pair whose promoted
    type coopjit has no kernel for (int8 x int16 -> int16) raises TypeError naming it."""
    da, db = a.dtype, b.dtype
    if da == db or (da.name in ("int8", "uint8") and db.name in ("int8", "uint8")):
        return a, b
    if da.kind not in "biuf" and da.name not in _LOW_NAMES or db.kind not in "biuf" and db.name not in _LOW_NAMES:
        return a, b  # strings, objects, dates: gemm_types names the operand and what is supported
    try:
        t = np.promote_types(da, db)
    except TypeError:
        raise TypeError(f"mixed dtypes: a is {da}, b is {db}, and NumPy has no common type for them; cast the "
                        f"operands to one dtype (supported: {GEMM_SUPPORTED})") from None
    if t.name not in _FLOAT_RESULTS:
        raise TypeError(f"mixed dtypes: a is {da}, b is {db}; numpy.matmul would compute in {t}, which coopjit has no "
                        f"kernel for; cast the operands to one dtype (supported: {GEMM_SUPPORTED})")
    return (a if da == t else a.astype(t)), (b if db == t else b.astype(t))
