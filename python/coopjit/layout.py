"""The coopmatrix layout: how a cooperative matrix is spread over the lanes of a subgroup.

Implements the general layout of the specification (seeds/001) through ``coopjit._core``::

    >>> cm = coopmatrix(4, 15, "acc", "f32", 16)
    >>> cm.I, cm.J, cm.V
    (4, 16, 4)
    >>> cm.owner(2, 5), cm.element(6, 1)
    ((6, 1), (2, 5))

``table()`` gives the (row, col) held by every slot: shape (V, S, 2), or (V, S, omega, 2) when the
matrix is VNNI packed, with (-1, -1) for padding (zero) slots.
"""

from __future__ import annotations

import operator

import numpy as np

from . import _core

__all__ = ["DTYPES", "CoopMatrixLayout", "LayoutError", "coopmatrix", "dtype_name", "OPTIMAL_LAYOUTS",
           "optimal_strides", "to_optimal", "from_optimal", "accumulator_layout"]

#: Bad input to the layout (shape, use, dtype, index); a subclass of ValueError.
LayoutError = _core.LayoutError

#: The component type names, as the C++ layout (and the IR) spell them.
DTYPES = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64",
          "f16", "bf16", "f32", "f64", "f8_e4m3", "f8_e5m2")

# numpy dtype names (ml_dtypes' for bfloat16 and the float8 types) -> component type names.
_NUMPY_NAMES = {
    "int8": "i8", "uint8": "u8", "int16": "i16", "uint16": "u16",
    "int32": "i32", "uint32": "u32", "int64": "i64", "uint64": "u64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "float8_e4m3fn": "f8_e4m3", "float8_e5m2": "f8_e5m2",
}


def dtype_name(dtype) -> str:
    """The component type name of ``dtype``.

    Accepts a name from DTYPES ('f16'; these win over numpy's codes, so 'i8' is int8), a numpy
    name or code ('float16', 'f2'), a numpy dtype, or a scalar type (np.float16,
    ml_dtypes.bfloat16). Raises ValueError for an unknown or unsupported type and TypeError for
    an object that is not a dtype at all.
    """
    if isinstance(dtype, str):
        if dtype in DTYPES:
            return dtype
        if dtype in _NUMPY_NAMES:  # also the ml_dtypes names, without ml_dtypes installed
            return _NUMPY_NAMES[dtype]
        try:
            np_name = np.dtype(dtype).name
        except TypeError:
            raise ValueError(f"coopmatrix: unknown dtype {dtype!r}") from None
    elif isinstance(dtype, (np.dtype, type)):
        np_name = np.dtype(dtype).name
    else:
        raise TypeError(f"coopmatrix: dtype must be a str, a numpy dtype or a scalar type, "
                        f"not {type(dtype).__name__} ({dtype!r})")
    if np_name not in _NUMPY_NAMES:
        raise ValueError(f"coopmatrix: unsupported dtype {dtype!r} (numpy {np_name})")
    return _NUMPY_NAMES[np_name]


def _as_int(name: str, value) -> int:
    """``value`` as a Python int (numpy integers too), TypeError for anything else."""
    if isinstance(value, bool):
        raise TypeError(f"coopmatrix: {name} must be an int, not bool ({value!r})")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"coopmatrix: {name} must be an int, "
                        f"not {type(value).__name__} ({value!r})") from None
    if not -2**63 <= value < 2**63:
        raise ValueError(f"coopmatrix: {name} {value} is out of range")
    return value


def _forward(name: str, doc: str) -> property:
    return property(lambda self: getattr(self._impl, name), doc=doc)


class CoopMatrixLayout:
    """Layout of an M x N cooperative matrix with a use and component type on S lanes.

    Build it with :func:`coopmatrix`. Attributes follow the specification: A is stored as the
    I x K1 x J x K2 tensor A* and every lane holds V slots; a VNNI-packed matrix_a holds omega
    channels (consecutive columns) in each 32-bit slot.
    """

    __slots__ = ("_impl",)

    def __init__(self, rows, cols, use, dtype, subgroup_size):
        if not isinstance(use, str):
            raise TypeError(f"coopmatrix: use must be 'a', 'b' or 'acc', "
                            f"not {type(use).__name__} ({use!r})")
        self._impl = _core.CoopMatrixLayout(
            _as_int("rows", rows), _as_int("cols", cols), use, dtype_name(dtype),
            _as_int("subgroup_size", subgroup_size))

    rows = _forward("rows", "M, the number of rows.")
    cols = _forward("cols", "N, the number of columns.")
    use = _forward("use", "'a', 'b' or 'acc'.")
    dtype = _forward("dtype", "The component type name, e.g. 'f16'.")
    component_size = _forward("component_size", "Bytes per component.")
    subgroup_size = _forward("subgroup_size", "S, the number of lanes.")
    S = subgroup_size
    I = _forward("I", "min(M, S): rows of A* held across the lanes.")  # noqa: E741
    J = _forward("J", "Columns of A*: the least n >= N with I*n a multiple of S.")
    K = _forward("K", "M / I = K1 * K2.")
    K1 = _forward("K1", "Row blocks interleaved into a lane's slots (omega_b for matrix_b, M > S).")
    K2 = _forward("K2", "K / K1.")
    V = _forward("V", "Slots per lane: components, or 32-bit entries when vnni.")
    omega = _forward("omega", "max(1, 4/size) for matrix_a (channels per 32-bit VNNI entry), "
                              "1 for acc and matrix_b.")
    vnni = _forward("vnni", "True when matrix_a is VNNI packed (omega > 1 and N % omega == 0).")
    channels = _forward("channels", "Channels per slot: omega when vnni, else 1.")

    def owner(self, row, col) -> tuple:
        """The slot holding element (row, col): (p, v), or (p, v, c) when vnni."""
        p, v, c = self._impl.owner(_as_int("row", row), _as_int("col", col))
        return (p, v, c) if self.vnni else (p, v)

    def element(self, p, v, c=None):
        """(row, col) held by lane p in slot v (channel c, required when vnni); None if padding."""
        if c is None:
            if self.vnni:
                raise ValueError(f"coopmatrix: element(p={p!r}, v={v!r}) needs a channel c in "
                                 f"[0, {self.omega}) for this VNNI layout")
            c = 0
        return self._impl.element(_as_int("p", p), _as_int("v", v), _as_int("c", c))

    def table(self) -> np.ndarray:
        """int64 array of (row, col) per slot, shape (V, S, 2) or (V, S, omega, 2) when vnni;
        (-1, -1) marks padding."""
        return self._impl.table()

    def _key(self):
        return (self.rows, self.cols, self.use, self.dtype, self.subgroup_size)

    def __eq__(self, other):
        if not isinstance(other, CoopMatrixLayout):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"coopmatrix(rows={self.rows}, cols={self.cols}, use={self.use!r}, "
                f"dtype={self.dtype!r}, S={self.S}: I={self.I} J={self.J} K={self.K} "
                f"K1={self.K1} K2={self.K2} V={self.V} omega={self.omega} vnni={self.vnni})")


def coopmatrix(rows, cols, use, dtype, subgroup_size) -> CoopMatrixLayout:
    """The layout of a rows x cols cooperative matrix with the given use ('a', 'b' or 'acc'),
    component type (see :func:`dtype_name`) and subgroup size.

    rows and subgroup_size must be powers of two, cols >= 1; bad input raises ValueError
    (LayoutError) naming the value, a wrongly typed argument TypeError.
    """
    return CoopMatrixLayout(rows, cols, use, dtype, subgroup_size)


# ---- HLSL 0035's implementation-chosen layouts -------------------------------------------------

#: MatrixLayout::MulOptimal and MatrixLayout::OuterProductOptimal (0035): memory layouts the
#: implementation chooses, for thread-scope matrices (0035's Load / Accumulate layout tables).
OPTIMAL_LAYOUTS = ("mul_optimal", "outer_product_optimal")


def optimal_strides(layout: str, rows: int, cols: int, use: str) -> tuple[int, int]:
    """The element strides (row, column) coopjit chooses for a rows x cols matrix of `use`
    ('a', 'b' or 'acc') packed in `layout` (one of OPTIMAL_LAYOUTS): element (i, j) at
    ``i * row_stride + j * col_stride`` from the matrix's start, rows * cols elements, no gaps.

    - "mul_optimal": the order the multiplies read the operand along K: a B matrix (K x N, the
      matrix of vector x matrix Multiply / MultiplyAdd) column by column (each output element is
      the dot product of the vector with one column: K consecutive elements), A and accumulators
      row by row.
    - "outer_product_optimal": row by row (row i of u (x) v is u[i] times v).
    Users need not know: a buffer is written in these layouts by Accumulate (thread scope) or by
    :func:`to_optimal` (as D3D12's ConvertLinearAlgebraMatrix), and read back by a Load in the
    same layout; the same layouts on every target."""
    if layout not in OPTIMAL_LAYOUTS:
        raise ValueError(f"unknown optimal layout {layout!r} (known: {', '.join(OPTIMAL_LAYOUTS)})")
    if use not in ("a", "b", "acc"):
        raise ValueError(f"use must be 'a', 'b' or 'acc', got {use!r}")
    rows, cols = _as_int("rows", rows), _as_int("cols", cols)
    if rows < 1 or cols < 1:
        raise ValueError(f"a {rows} x {cols} matrix has no elements")
    if layout == "mul_optimal" and use == "b":
        return (1, rows)
    return (cols, 1)


def to_optimal(matrix: np.ndarray, layout: str, use: str) -> np.ndarray:
    """The 2-D array `matrix` packed in `layout` for a matrix of `use`: a new 1-D array of
    matrix.size elements of its dtype, what a thread-scope Load in that layout reads."""
    m = np.asarray(matrix)
    if m.ndim != 2:
        raise ValueError(f"to_optimal: the matrix must be 2-D, got shape {m.shape}")
    sr, sc = optimal_strides(layout, m.shape[0], m.shape[1], use)
    out = np.empty(m.size, m.dtype)
    i, j = np.indices(m.shape)
    out[i * sr + j * sc] = m
    return out


def from_optimal(buffer: np.ndarray, rows: int, cols: int, layout: str, use: str) -> np.ndarray:
    """The rows x cols matrix held in `buffer` (its first rows * cols elements, in C order) in
    `layout` for a matrix of `use`: the inverse of :func:`to_optimal`."""
    flat = np.asarray(buffer).reshape(-1)
    sr, sc = optimal_strides(layout, rows, cols, use)
    if flat.size < rows * cols:
        raise ValueError(f"from_optimal: a {rows} x {cols} matrix needs {rows * cols} elements, the buffer has "
                         f"{flat.size}")
    i, j = np.indices((rows, cols))
    return flat[i * sr + j * sc].copy()


def accumulator_layout() -> str:
    """HLSL 0035's linalg::AccumulatorLayout(): the use whose layout accumulator matrices share,
    'b' on every coopjit target. The SIMT lowering spreads an accumulator over the lanes as
    seeds/001 spreads a B matrix (K1 = 1 for both; only 8-bit B matrices of more than S rows differ,
    by their VNNI K1, and 8-bit types are not accumulators of any multiply), and the CPU lowering
    holds B and accumulator matrices alike in vectors of S lanes along the columns (A: one scalar
    an element). KernelBuilder.accumulator_layout() is the same answer as an IR constant."""
    return "b"
