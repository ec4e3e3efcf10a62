"""Tensor layouts and views (SPV_NV_cooperative_matrix2), and loads and stores of a matrix
through them, run as JIT-compiled kernels built from the IR's load_tensor / store_tensor.

A TensorLayout describes an N-D tensor (1 to 5 dims, dimension 0 outermost) in a flat buffer:
per dimension its size, stride, block size, and the slice being accessed (offset, span), plus
what an out-of-range coordinate does (the clamp mode). A TensorView re-shapes, permutes and
clips the region. ``load_matrix`` / ``store_matrix`` move a (rows, cols) matrix between a NumPy
array and the buffer, element (row, col) going where the document's
matrixCoordToTensorElement[WithView] says.

Both run on the CPU or, with ``device=`` ("opencl:0", "level_zero:0", "cuda:0"), as a kernel of
the SIMT lowering on that device: one subgroup holds the matrix, each work-item its components,
through the same address calculation.

Bounds: under "constant" an out-of-range load reads the clamp value; every clamp mode but
"undefined" drops out-of-range stores; "undefined" is undefined behaviour in the document, and
here only guarantees that nothing outside the buffer is ever read (reads 0) or written.
"""
from __future__ import annotations

import numbers

from typing import Callable, Sequence

import numpy as np

from . import _core
from ._arrays import check_own_elements

CLAMP_MODES = ("undefined", "constant", "clamp_to_edge", "repeat", "mirror_repeat")
_NO_CLIP = 1 << 40  # "no clip": a span no matrix reaches

_DTYPES = {
    "int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16", "int32": "i32", "uint32": "u32",
    "int64": "i64", "uint64": "u64", "float16": "f16", "bfloat16": "bf16", "float32": "f32",
    "float64": "f64", "float8_e4m3fn": "f8_e4m3", "float8_e5m2": "f8_e5m2",
}


def _ints(name: str, values, length: int | None = None, minimum: int | None = None) -> tuple[int, ...]:
    if isinstance(values, (numbers.Integral, np.integer)):
        values = (values,)
    try:
        out = tuple(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of ints, got {values!r}") from None
    for v in out:
        if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)):
            raise TypeError(f"{name} must hold ints, got {v!r} in {out}")
    out = tuple(int(v) for v in out)
    if length is not None and len(out) != length:
        raise ValueError(f"{name} {out} has {len(out)} entries but the layout has rank {length}")
    if minimum is not None and any(v < minimum for v in out):
        raise ValueError(f"{name} {out} has an entry below {minimum}")
    return out


class TensorLayout:
    """An N-D tensor in a flat buffer and the slice of it being accessed (see module doc)."""

    def __init__(self, dims: Sequence[int], strides: Sequence[int] | None = None,
                 offsets: Sequence[int] | None = None, spans: Sequence[int] | None = None,
                 block: Sequence[int] | None = None, clamp: str = "undefined", clamp_value: float = 0) -> None:
        dims = _ints("dims", dims)
        rank = len(dims)
        if not 1 <= rank <= 5:
            raise ValueError(f"a tensor layout has 1 to 5 dims, got rank {rank} (dims {dims})")
        self.dims = _ints("dims", dims, rank, 1)
        self.block = _ints("block", block, rank, 1) if block is not None else (1,) * rank
        if strides is None:
            grid = [-(-d // b) for d, b in zip(self.dims, self.block)]
            st = [1] * rank
            for d in range(rank - 2, -1, -1):
                st[d] = st[d + 1] * grid[d + 1]
            strides = st
        self.strides = _ints("strides", strides, rank)
        self.offsets = _ints("offsets", offsets, rank) if offsets is not None else (0,) * rank
        self.spans = _ints("spans", spans, rank, 1) if spans is not None else self.dims
        if not isinstance(clamp, str):
            raise TypeError(f"clamp must be a str (one of {', '.join(CLAMP_MODES)}), got {clamp!r}")
        if clamp not in CLAMP_MODES:
            raise ValueError(f"unknown clamp mode {clamp!r}; known: {', '.join(CLAMP_MODES)}")
        self.clamp = clamp
        if isinstance(clamp_value, bool) or not isinstance(clamp_value, numbers.Real):
            raise TypeError(f"clamp_value must be a real number, got {clamp_value!r}")
        self.clamp_value = clamp_value
        for name, vals in (("strides", self.strides), ("offsets", self.offsets)):
            if any(abs(v) >= 2**40 for v in vals):
                raise ValueError(f"{name} {vals} are too large (|value| must be below 2**40)")

    @property
    def rank(self) -> int:
        return len(self.dims)

    def _fields(self) -> list[int]:
        return [*self.block, *self.dims, *self.strides, *self.offsets, *self.spans]

    def __repr__(self):
        return (f"TensorLayout(dims={self.dims}, strides={self.strides}, offsets={self.offsets}, "
                f"spans={self.spans}, block={self.block}, clamp={self.clamp!r}, clamp_value={self.clamp_value})")


class TensorView:
    """Re-reads a layout's region: own dims and strides (or the layout's spans when dims is
    None), a permutation of the dims, and a clip (row_offset, row_span, col_offset, col_span)."""

    def __init__(self, dims: Sequence[int] | None = None, strides: Sequence[int] | None = None,
                 permutation: Sequence[int] | None = None, clip: Sequence[int] | None = None) -> None:
        if dims is None:
            if strides is not None:
                raise ValueError(f"view strides {strides} need view dims (a view without dims uses the layout's spans)")
            self.dims = None
            self.strides = None
        else:
            self.dims = _ints("view dims", dims, None, 1)
            if not 1 <= len(self.dims) <= 5:
                raise ValueError(f"a tensor view has 1 to 5 dims, got rank {len(self.dims)} (dims {self.dims})")
            if strides is None:
                st = [1] * len(self.dims)
                for d in range(len(self.dims) - 2, -1, -1):
                    st[d] = st[d + 1] * self.dims[d + 1]
                strides = st
            self.strides = _ints("view strides", strides, len(self.dims))
        if permutation is not None:
            permutation = _ints("permutation", permutation)
            if self.dims is not None and len(permutation) != len(self.dims):
                raise ValueError(f"permutation {permutation} has {len(permutation)} entries but the view has "
                                 f"{len(self.dims)} dims")
            if sorted(permutation) != list(range(len(permutation))):
                raise ValueError(f"permutation {permutation} is not a permutation of 0..{len(permutation) - 1}")
        elif self.dims is not None:
            permutation = tuple(range(len(self.dims)))
        # None only when the view has no dims: the identity of the layout's rank, known at use.
        self.permutation = permutation
        if clip is not None:
            clip = _ints("clip", clip)
            if len(clip) != 4:
                raise ValueError(f"clip {clip} must be (row_offset, row_span, col_offset, col_span)")
            if any(v < 0 for v in clip):
                raise ValueError(f"clip {clip} has a negative entry")
        self.clip = clip

    def _resolve(self, layout: TensorLayout):
        """(view_kind, permutation, runtime fields) for the kernel."""
        rank = len(self.dims) if self.dims is not None else layout.rank
        perm = self.permutation if self.permutation is not None else tuple(range(rank))
        if len(perm) != rank:
            raise ValueError(f"permutation {perm} has {len(perm)} entries; the view (layout rank "
                             f"{layout.rank} when it has no dims) has {rank}")
        clip = self.clip if self.clip is not None else (0, _NO_CLIP, 0, _NO_CLIP)
        if self.dims is None:
            return 1, list(perm), list(clip)
        return 2, list(perm), [*self.dims, *self.strides, *clip]

    def __repr__(self):
        return f"TensorView(dims={self.dims}, strides={self.strides}, permutation={self.permutation}, clip={self.clip})"


def _clamp_value(value, dtype: np.dtype, short: str) -> float:
    """The clamp value as the kernel takes it: the number, or for fp8 its raw bits."""
    if short.startswith("f8"):
        return float(np.array(value, dtype=dtype).view(np.uint8))
    return float(value)


def _dtype_name(x: np.ndarray) -> str:
    name = _DTYPES.get(x.dtype.name)
    if name is None or x.dtype.byteorder == ">":
        raise TypeError(f"dtype {x.dtype} is not supported; supported: {', '.join(_DTYPES)}")
    return name


def _check(buffer, layout, view, rows, cols, what):
    if not isinstance(buffer, np.ndarray):
        raise TypeError(f"{what}: buffer must be a NumPy array, got {type(buffer).__name__}")
    if not buffer.flags.c_contiguous:
        raise ValueError(f"{what}: buffer with strides {buffer.strides} is not C-contiguous; it is addressed as a "
                         "flat array of its elements")
    if not isinstance(layout, TensorLayout):
        raise TypeError(f"{what}: layout must be a coopjit.TensorLayout, got {type(layout).__name__}")
    if view is not None and not isinstance(view, TensorView):
        raise TypeError(f"{what}: view must be a coopjit.TensorView or None, got {type(view).__name__}")
    for name, v in (("rows", rows), ("cols", cols)):
        if not 1 <= v <= 256:
            raise ValueError(f"{what}: {name}={v} must be in [1, 256]")
    # A matrix with more elements than the span is the document's: linearToSpanCoord takes the
    # row-major index modulo the spans, so the matrix repeats the span (a store writes several
    # elements to one address, in no order the document gives).
    return view._resolve(layout) if view is not None else (0, [], [])


class DecodeBlock:
    """What a decode function gets as 002's DecodeFunc pointer: the buffer from the element index
    the layout gives on (matrixCoordToTensorElement: the block's index times the strides).

    ``index`` is that index (an IR index value); ``load(offset=0)`` reads ``buffer[index + offset]``
    (offset an int or an IR index), 0 where that is outside the buffer (coopjit never reads outside
    it); ``value`` is ``load(0)``. The reads are in the buffer's element type (``dtype``)."""

    def __init__(self, b, buf, extent, index, dtype: str) -> None:
        self._b, self._buf, self._extent = b, buf, extent
        self.index = index
        self.dtype = dtype

    def load(self, offset=0):
        b = self._b
        at = self.index if (not isinstance(offset, _core.IRValue) and offset == 0) else b.add(self.index, offset)
        inside = b.and_(b.ge(at, 0), b.lt(at, self._extent))
        v = b._b.load_scalar(self._buf, b.select(inside, at, 0))
        return b.select(inside, v, b.const(0, self.dtype))

    @property
    def value(self):
        return self.load(0)

    def __repr__(self):
        return f"<DecodeBlock of {self.dtype} at {self.index!r}>"


def _call_decode(fn, b, buf, extent, index, block_coord, coord_in_block, result: str):
    """Called by the core while it builds a load's decode region (bind_ir.cpp, python_decode_fn)."""
    block = DecodeBlock(b, buf, extent, index, buf.type[4:-1])
    out = fn(b, block, list(block_coord), list(coord_in_block))
    if isinstance(out, numbers.Real) and not isinstance(out, bool):
        out = b.const(out, result)
    return out


_device_kernels: dict = {}


def _device_access(device: str, store: bool, buffer: np.ndarray, matrix: np.ndarray, dtype: str,
                   layout: TensorLayout, kind: int, perm: list, vfields: list, decode, subgroups: int) -> None:
    """The tensor-access kernel on a device (compiled once per spec and device), on `matrix` in
    place. The SIMT lowering's subgroup matrices have a power-of-two number of rows (seeds/001's
    layout), so the kernel moves the matrix padded with rows below it: the address calculation
    of element (row, col) does not depend on the number of rows, a load's padding rows are
    dropped, and a store's are clipped away by the view (one with no dims and the identity
    permutation addresses exactly as no view; the clip's row span is cut to the matrix).
    subgroups > 1: a workgroup-scope matrix over that many subgroups (any number of rows)."""
    from . import devices
    from ._gpu import DeviceCustomKernel

    rows, cols = matrix.shape
    padded = 1 << (rows - 1).bit_length() if subgroups == 1 else rows
    if store and padded != rows:
        if kind == 0:
            kind, perm, vfields = 1, list(range(layout.rank)), [0, _NO_CLIP, 0, _NO_CLIP]
        vfields = list(vfields)
        ro, rs = vfields[-4], vfields[-3]
        vfields[-3] = min(rs, max(0, rows - ro))
    bdtype = _dtype_name(buffer)
    sg = 32 if device.startswith("cuda") else 16
    fn = None
    if callable(decode):  # a user's function: keyed by the IR it builds (the kernel's, printed)
        fn = _core.tensor_access_function(store, dtype, padded, cols, layout.clamp, layout.rank, kind, perm,
                                          decode, sg, subgroups, bdtype)
        decode = fn.text()
    key = (device, store, dtype, bdtype, padded, cols, layout.clamp, layout.rank, kind, tuple(perm), decode, subgroups)
    k = _device_kernels.get(key)
    if k is None:
        if fn is None:
            fn = _core.tensor_access_function(store, dtype, padded, cols, layout.clamp, layout.rank, kind, perm,
                                              decode, sg, subgroups, bdtype)
        program = fn.compile_device(device)
        k = DeviceCustomKernel(program, devices.get(device),
                               fn.device_check(program.subgroup_size, program.work_group_size), False)
        _device_kernels[key] = k
    staged = matrix
    if padded != rows:
        staged = np.zeros((padded, cols), matrix.dtype)
        staged[:rows] = matrix
    k(buffer.reshape(-1), staged, buffer.size, cols, 1, *layout._fields(),
      _clamp_value(layout.clamp_value, matrix.dtype, dtype), *vfields)
    if staged is not matrix and not store:
        matrix[...] = staged[:rows]


def _device(device, subgroups):
    if isinstance(subgroups, bool) or not isinstance(subgroups, numbers.Integral) or not 1 <= subgroups <= 16:
        raise ValueError(f"subgroups must be an int in [1, 16], got {subgroups!r}")
    if device is None or device == "cpu":
        if subgroups != 1:
            raise ValueError(f"subgroups={subgroups} spreads the matrix over a device's work-group: give device= too")
        return None
    from .devices import check_device

    return check_device(device)


def load_matrix(buffer: np.ndarray, rows: int, cols: int, layout: TensorLayout, view: TensorView | None = None, *,
                out: np.ndarray | None = None, decode: Callable | str | None = None,
                dtype: np.dtype | type | str | None = None, device: str | None = None,
                subgroups: int = 1) -> np.ndarray:
    """The (rows, cols) matrix loaded from `buffer` through `layout` (and `view`).

    Elements the view's clip skips keep their value in `out` (0 without `out`).
    decode="blocked" reads blocked (tiled) storage through the IR's decode hook: each block of
    ``layout.block`` elements is stored contiguously (row-major inside the block) and the
    layout's strides count blocks; the element with blockCoord b and coordInBlock c is at
    ``index(b) * prod(block) + rowmajor(c)`` (0 when that is outside the buffer).
    decode=fn, a function ``fn(b, block, block_coord, coord_in_block) -> value`` (002's
    DecodeFunc): instead of reading the element, the load calls it for the element, with a
    KernelBuilder ``b`` to build the value from, ``block`` a DecodeBlock (the buffer from the
    element index the layout gives on: ``block.load(k)`` reads ``buffer[index + k]``, 0 outside the
    buffer; ``block.value`` the element there), and the element's blockCoord and coordInBlock
    (lists of ``layout.rank`` IR index values). It returns a value of the matrix's component type
    (``dtype``, which may differ from the buffer's: a decode function may read any type) made of
    the builder's scalar operations (arithmetic, comparisons, select, math functions, convert),
    or a Python number. It is called while the kernel is built, not per element; the kernel is
    cached by the IR it builds. Out-of-range (Constant) elements still read the clamp value, and
    elements whose index falls outside the buffer read 0 without a call.
    dtype: the matrix's element type (a NumPy dtype); the buffer's unless a decode function is given.
    device: None or "cpu" (the CPU), or a device of coopjit.devices() (the SIMT lowering there);
    subgroups (devices): 1, the matrix in one subgroup, or more, a workgroup-scope matrix spread
    over that many subgroups of a work-group.
    """
    if not callable(decode) and decode not in (None, "blocked"):
        raise ValueError(f"load_matrix: unknown decode {decode!r}; known: None, 'blocked', or a function "
                         "(b, block, block_coord, coord_in_block) -> value")
    rows, cols = int(rows), int(cols)
    kind, perm, vfields = _check(buffer, layout, view, rows, cols, "load_matrix")
    bdtype = _dtype_name(buffer)
    mdtype = buffer.dtype
    if dtype is not None:
        try:
            mdtype = np.dtype(dtype)
        except TypeError:
            raise TypeError(f"load_matrix: dtype={dtype!r} is not a NumPy dtype") from None
        if mdtype.name not in _DTYPES:
            raise TypeError(f"load_matrix: dtype {mdtype} is not supported; supported: {', '.join(_DTYPES)}")
        if mdtype != buffer.dtype and not callable(decode):
            raise TypeError(f"load_matrix: dtype={mdtype} but the buffer holds {buffer.dtype}: only a decode function "
                            "may read another type")
    dtype = _DTYPES[mdtype.name]
    if out is None:
        out = np.zeros((rows, cols), mdtype)
    elif not isinstance(out, np.ndarray) or out.shape != (rows, cols) or out.dtype != mdtype:
        raise ValueError(f"load_matrix: out must be a {mdtype} array of shape {(rows, cols)}, got "
                         f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}")
    elif not out.flags.writeable:
        raise ValueError("load_matrix: out is read-only")
    else:  # (a zero stride or rows that overlap: the elements' values landed on one another)
        check_own_elements(out, "out", "load_matrix")
    dev = _device(device, subgroups)
    if dev is not None:
        target = out if out.flags.c_contiguous and not np.may_share_memory(out, buffer) else out.copy(order="C")
        _device_access(dev, False, buffer, target, dtype, layout, kind, perm, vfields, decode or "", subgroups)
        if target is not out:
            out[...] = target
        return out
    target = out if (out.strides[0] % out.itemsize == 0 and out.strides[1] % out.itemsize == 0
                     and not np.may_share_memory(out, buffer)) else out.copy()
    _core.tensor_access(False, buffer, target, dtype, layout.clamp, layout.rank, layout._fields(),
                        _clamp_value(layout.clamp_value, mdtype, dtype), kind, perm, vfields, decode or "",
                        bdtype if bdtype != dtype else "")
    if target is not out:
        out[...] = target
    return out


def store_matrix(matrix: np.ndarray, buffer: np.ndarray, layout: TensorLayout, view: TensorView | None = None, *,
                 device: str | None = None, subgroups: int = 1) -> None:
    """Stores the 2-D `matrix` into `buffer` (in place) through `layout` (and `view`); device and
    subgroups as for load_matrix."""
    if not isinstance(matrix, np.ndarray):
        raise TypeError(f"store_matrix: matrix must be a NumPy array, got {type(matrix).__name__}")
    if matrix.ndim != 2:
        raise ValueError(f"store_matrix: matrix must be 2-D, got shape {matrix.shape}")
    rows, cols = matrix.shape
    kind, perm, vfields = _check(buffer, layout, view, rows, cols, "store_matrix")
    if not buffer.flags.writeable:
        raise ValueError("store_matrix: buffer is read-only")
    if any(b > 1 for b in layout.block):
        raise ValueError(f"store_matrix: block sizes {layout.block} above 1 are not allowed for stores "
                         "(SPV_NV_cooperative_matrix2: data races)")
    dtype = _dtype_name(buffer)
    if matrix.dtype != buffer.dtype:
        raise TypeError(f"store_matrix: matrix has dtype {matrix.dtype} but buffer has dtype {buffer.dtype}")
    src = matrix
    if np.may_share_memory(matrix, buffer) or any(s % matrix.itemsize for s in matrix.strides):
        src = matrix.copy()
    dev = _device(device, subgroups)
    if dev is not None:
        _device_access(dev, True, buffer, np.ascontiguousarray(src), dtype, layout, kind, perm, vfields, "", subgroups)
        return
    _core.tensor_access(True, buffer, src, dtype, layout.clamp, layout.rank, layout._fields(),
                        _clamp_value(layout.clamp_value, buffer.dtype, dtype), kind, perm, vfields)
